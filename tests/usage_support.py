"""Shared by the usage suites: the corpus totals summed by hand, a catalog whose prices
are easy to check by hand, and the per-model view of a report."""

from __future__ import annotations

import corpus as corpus_files
from sessiontree.usage.report import nanos_to_decimal

BEFORE = corpus_files.shared(corpus_files.BEFORE_COMPACTION)
LARGE = corpus_files.shared(corpus_files.LARGE_SESSION)
#: On tests that read both corpus files: they sum the corpus totals.
corpus = corpus_files.needs_shared

OPUS = "anthropic/claude-opus-4-5"
SONNET = "anthropic/claude-sonnet-4-5"
CODEX = "openai/gpt-5.1-codex"
#: Summed by hand from the files: calls, input, output, cache read, cache write, cost.
CORPUS_TOTALS = {
    OPUS: (484, 3_689, 187_895, 54_693_675, 1_685_320, "42.5959075"),
    SONNET: (452, 1_049, 83_156, 43_229_469, 4_296_232, "30.3301977"),
    CODEX: (1, 0, 0, 0, 0, "0"),
}


class FakeCatalog:
    """$1 per million tokens of every kind for known models: easy to check by hand."""

    name = "fake-catalog"

    def __init__(self, known=("m-known",)):
        self.known = set(known)
        self.asked = []

    def price(self, provider, model, input, output, cache_read, cache_write, at_ms):
        self.asked.append((provider, model, input, output, cache_read, cache_write))
        if model not in self.known:
            return None
        return (input + output + cache_read + cache_write) * 1000  # 1e-6 USD = 1000 nanos per token


def _by_model(report):
    """``{model: (calls, input, output, cache read, cache write, cost in USD as text)}`` of a report."""
    return {g.key: (g.totals.calls, g.totals.input, g.totals.output, g.totals.cache_read, g.totals.cache_write,
                    str(nanos_to_decimal(g.totals.cost_nanos))) for g in report.groups}
