"""Every real Claude Code file of ``../shared/corpus/claude-code`` synced into every store
and checked against the figures of ``../shared/corpus/FOREIGN.md`` (docs/agents/claude-code.md,
docs/usage.md "Claude Code").

The expected numbers are copied from FOREIGN.md (its "Expected figures / Claude Code" table,
and its "Subagent calls carried only by the parent" totals for ``61cb3ba8``), never from our
output. Two columns are our own hand count of the raw files, said where they are used:
tool calls with a result in the main conversation of the two 1.0.x files that hold a
subagent's records inline (FOREIGN.md counts every top-level record, sidechains included;
those records annotate the main line and are not its messages), and the leaves of the tree
Claude Code rebuilds (FOREIGN.md gives raw parentUuid leaves, for reference only).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from corpus import NEEDS_SHARED, foreign_files
from sessiontree.check.checker import check_bytes
from sessiontree.core.projection import build_session_projection
from sessiontree.core.projection.model import INTERRUPTED_TEXT
from sessiontree.core.usage import UsageQuery, records_from_entries
from sessiontree.format.foreign import map_foreign
from sessiontree.stores import open_store
from sessiontree.sync.engine import Syncer

pytestmark = NEEDS_SHARED

# file stem prefix: (calls, input, output, cache read, cache write 5m, cache write 1h, tool_use with result, leaves)
# From FOREIGN.md. 61cb3ba8: the totals with the 16 subagent calls its agent_progress records carry
# (30 calls, input 9,469, output 2,105, cache read 1,073,943, cache write 62,315, all 1h).
EXPECTED: dict[str, tuple[int, int, int, int, int, int, int, int]] = {
    "53ea1606": (51, 58, 2_413, 4_251_079, 0, 342_346, 85, 1),
    "0cf3db51": (40, 458, 78, 3_234_287, 243_586, 0, 39, 1),
    "8b418ea5": (22, 620, 89, 909_116, 103_404, 0, 31, 1),
    "61cb3ba8": (30, 9_469, 2_105, 1_073_943, 0, 62_315, 15, 1),
    "9d440bfc": (5, 7, 805, 136_049, 0, 13_211, 5, 1),
    # dc577197: line 29 ("No response requested.", after a resume) names 06217ff3 (line 4), whose
    # other child is the /exit command (line 5): a fork Claude Code made, so two leaves.
    "dc577197": (15, 116, 4_065, 1_898_292, 152_421, 0, 12, 2),
    "7f2abd2d": (6, 74, 844, 93_553, 5_158, 0, 4, 1),
    "agent-0c4c3cf8": (1, 487, 130, 0, 0, 0, 0, 1),
    "agent-af1ff21": (1, 728, 152, 0, 0, 0, 0, 1),
    "c45af7b1": (12, 132, 1_480, 223_265, 8_467, 0, 10, 1),
    "1af7fc5e": (7, 93, 953, 103_219, 12_698, 0, 12, 1),
    # 5c0375b4 and fe5e1c67 (1.0.x): tool calls with a result counted by hand in the records
    # without isSidechain (13 and 11; FOREIGN.md's 21 and 167 include the inline subagent's).
    "5c0375b4": (20, 129, 3_629, 324_259, 47_747, 0, 13, 1),
    "fe5e1c67": (170, 818, 51_933, 3_647_854, 137_976, 0, 11, 1),
}


def _key(path: Path) -> str:
    stem = path.stem
    return stem if stem.startswith("agent-") else stem[:8]


def _files() -> list[Path]:
    return [p for p in foreign_files("claude-code") if p.suffix == ".jsonl"]


def _session_id(path: Path) -> str:
    mapped = map_foreign(path.read_bytes(), str(path))
    assert mapped is not None
    return str(mapped.header["id"])


def _leaves(entries: list[dict[str, Any]]) -> int:
    children = Counter(entry["parentId"] for entry in entries)
    return sum(1 for entry in entries if children[entry["id"]] == 0)


def _answered_calls(entries: list[dict[str, Any]]) -> int:
    calls: set[str] = set()
    results: set[str] = set()
    for entry in entries:
        message = entry.get("message") if entry.get("type") == "message" else None
        if not isinstance(message, dict):
            continue
        if message.get("role") == "assistant":
            calls.update(b["id"] for b in message["content"] if b.get("type") == "toolCall")
        elif message.get("role") == "toolResult":
            results.add(message["toolCallId"])
    return len(calls & results)


def _hour_writes(entries: list[dict[str, Any]]) -> int:
    total = 0
    for entry in entries:
        if (entry.get("foreign") or {}).get("billed") is False:
            continue
        usage = entry["message"].get("usage") if entry.get("type") == "message" else entry.get("usage")
        if isinstance(usage, dict) and entry.get("type") in ("message", "usage"):
            total += usage.get("cacheWrite1h", 0)
    return total


def _target(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if kind == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return {"memory": "memory:", "sqlite": f"sqlite:///{tmp_path / 's.db'}",
            "jsonl": f"jsonl:///{tmp_path / 'store'}"}[kind]


def test_the_corpus_holds_the_files_foreign_md_lists():
    assert sorted(_key(p) for p in _files()) == sorted(EXPECTED)


def _completed_copies(folder: Path) -> list[Path]:
    """The corpus files copied byte for byte into ``folder`` (fresh copies, as a user's new
    home: the six files the Entire CLI copied end without a newline, and their last record
    must come in all the same)."""
    copies = []
    for path in _files():
        target = folder / path.parent.name / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
        copies.append(target)
    return copies


@pytest.mark.parametrize("kind", ["memory", "sqlite", "jsonl", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_every_claude_code_file_syncs_with_the_figures_of_foreign_md(kind, request, tmp_path):
    """0 rejected; per file the calls and every token kind of FOREIGN.md, tool calls with
    their result, and one leaf per conversation (two where the agent forked)."""
    files = _completed_copies(tmp_path / "projects")
    with open_store(_target(kind, request, tmp_path)) as store:
        report = Syncer(store).sync_files([str(p) for p in files])
        assert {r.path: r.status for r in report.files} == {str(p): "new" for p in files}
        for path in files:
            calls, inp, out, read, write5m, write1h, answered, leaves = EXPECTED[_key(path)]
            sid = _session_id(path)
            rows = store.usage(UsageQuery(session_id=sid))
            got = (sum(r.calls for r in rows), sum(r.input for r in rows), sum(r.output for r in rows),
                   sum(r.cache_read for r in rows), sum(r.cache_write for r in rows))
            assert got == (calls, inp, out, read, write5m + write1h), path.name
            entries = store.read(sid).entries
            assert _hour_writes(entries) == write1h, path.name
            assert _answered_calls(entries) == answered, path.name
            assert _leaves(entries) == leaves, path.name


def test_the_corpus_totals_count_every_call_once():
    """FOREIGN.md: 380 calls, input 13,189, output 68,676, cache read 15,894,916, cache write
    1,129,329 (5m 711,457, 1h 417,872) with the subagent calls carried only by the parent."""
    records = []
    hour = 0
    for path in _files():
        mapped = map_foreign(path.read_bytes(), str(path))
        assert mapped is not None
        records.extend(records_from_entries(mapped.entries))
        hour += _hour_writes(mapped.entries)
    assert (len(records), sum(r.input for r in records), sum(r.output for r in records),
            sum(r.cache_read for r in records), sum(r.cache_write for r in records), hour) == (
        380, 13_189, 68_676, 15_894_916, 1_129_329, 417_872)


def test_check_and_sync_agree_on_every_file(tmp_path):
    with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        for path in _files():
            errors = [p for p in check_bytes(path.read_bytes(), str(path)) if p.severity == "error"]
            result = Syncer(store).sync_file(str(path))
            # An Entire copy's last line has no newline; it is a whole record all the same.
            assert (errors, result.status, result.reason) == ([], "new", None), path.name


def _context_results(path: Path) -> tuple[int, int]:
    """``(real, synthetic)`` tool results in the context of the session's last entry."""
    mapped = map_foreign(path.read_bytes(), str(path))
    assert mapped is not None
    results = [m for m in build_session_projection(mapped.entries).messages if m.get("role") == "toolResult"]
    synthetic = sum(1 for m in results if m.get("isError")
                    and m.get("content") == [{"type": "text", "text": INTERRUPTED_TEXT}])
    return len(results) - synthetic, synthetic


def test_context_pairs_every_call_with_its_real_result():
    """What the model saw: every tool call with its real result, and a synthetic result only
    for the one call the corpus leaves open (61cb3ba8 ends while its last call, a Bash in
    line 117, has no result). Parallel calls of one response are one turn (responseId)."""
    got = {_key(p): _context_results(p) for p in _files()}
    # dc577197: the context is the resumed branch, whose 12 calls all have results.
    expected = {key: (figures[6], 1 if key == "61cb3ba8" else 0) for key, figures in EXPECTED.items()}
    assert got == expected


# file: (line of compact_boundary, line of the isCompactSummary user record), read in the raw files.
COMPACTIONS = {"0cf3db51": (71, 72), "c45af7b1": (59, 60), "53ea1606": (269, 270)}


@pytest.mark.parametrize("key", sorted(COMPACTIONS))
def test_after_a_compaction_the_context_is_the_summary_then_what_follows(key):
    """Claude Code continues after compact_boundary with its isCompactSummary user message and
    what follows (its loader's chain stops at the boundary, whose parentUuid is null)."""
    import json

    from sessiontree.core.projection import build_historical_projection

    path = next(p for p in _files() if _key(p) == key)
    _boundary, summary_line = COMPACTIONS[key]
    lines = path.read_bytes().split(b"\n")
    summary = json.loads(lines[summary_line - 1])["message"]["content"]
    mapped = map_foreign(path.read_bytes(), str(path))
    assert mapped is not None
    past = build_historical_projection(mapped.entries)
    messages = past.projection.messages
    assert messages[0] == {"role": "user", "content": [{"type": "text", "text": summary}],
                           "timestamp": messages[0]["timestamp"]}
    assert past.compaction is not None and past.compaction["foreign"]["line"] == summary_line
    # Every other message comes from a record after the summary.
    assert all(source["foreign"]["line"] > summary_line for source in past.projection.sources[1:])
    assert len(messages) > 1


def _unflagged(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**e, "foreign": {k: v for k, v in e["foreign"].items() if k != "billed"}} for e in entries]


@pytest.mark.parametrize("key", ["9d440bfc", "61cb3ba8", "dc577197", "5c0375b4", "c45af7b1"])
def test_a_growing_real_file_maps_to_the_same_entries_plus_new_ones(key):
    """Prefix stability on real files (docs/agents/README.md): the mapping of the first k
    lines equals the whole file's in its settled entries, and after them differs only in the
    billed flag of a call still being written."""
    path = next(p for p in _files() if _key(p) == key)
    data = path.read_bytes()
    whole = map_foreign(data, str(path))
    assert whole is not None
    cuts = [i + 1 for i, byte in enumerate(data) if byte == 0x0A]
    for cut in cuts:
        part = map_foreign(data[:cut], str(path))
        assert part is not None
        if not part.header_known:
            continue
        settled = len(part.entries) if part.settled is None else part.settled
        assert part.entries[:settled] == whole.entries[:settled], (key, cut)
        assert _unflagged(part.entries) == _unflagged(whole.entries[:len(part.entries)]), (key, cut)


@pytest.mark.parametrize("kind", ["memory", "sqlite", "jsonl", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_one_hour_cache_writes_are_priced_at_their_own_rate(kind, request, tmp_path):
    """9d440bfc writes all its cache (13,211 tokens, FOREIGN.md) to the 1-hour cache. The
    estimate prices those tokens at the 1-hour rate (Anthropic: 2x base input, where the
    5-minute rate is 1.25x): the catalogue's price of each call of the raw file with its
    ``ephemeral_1h_input_tokens`` given, above the price with every write as 5-minute."""
    import json
    from datetime import UTC, datetime
    from decimal import Decimal

    import genai_prices

    from sessiontree.usage.report import session_usage

    path = next(p for p in _completed_copies(tmp_path / "projects") if _key(p) == "9d440bfc")
    with open_store(_target(kind, request, tmp_path)) as store:
        assert Syncer(store).sync_file(str(path)).status == "new"
        billed = session_usage(store, _session_id(path), cost="catalog").billed
    assert (billed.calls, billed.cache_write) == (5, 13_211)
    calls: dict[tuple[str, str], dict] = {}
    for line in path.read_bytes().splitlines():
        record = json.loads(line)
        if record.get("type") == "assistant":
            calls[(record["message"]["id"], record["requestId"])] = record  # the last record of each call
    with_hour = as_five = Decimal(0)
    for record in calls.values():
        usage, model = record["message"]["usage"], record["message"]["model"]
        day = datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00")).astimezone(UTC).replace(
            hour=0, minute=0, second=0, microsecond=0)
        tokens = usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
        for hour, total in ((usage["cache_creation"]["ephemeral_1h_input_tokens"] or None, "with_hour"),
                            (None, "as_five")):
            price = genai_prices.calc_price(
                genai_prices.Usage(input_tokens=tokens, output_tokens=usage["output_tokens"],
                                   cache_read_tokens=usage["cache_read_input_tokens"],
                                   cache_write_tokens=usage["cache_creation_input_tokens"],
                                   cache_write_1h_tokens=hour),
                model, provider_id="anthropic", genai_request_timestamp=day).total_price
            if total == "with_hour":
                with_hour += price
            else:
                as_five += price
    assert with_hour > as_five
    assert Decimal(billed.cost_nanos) / 1_000_000_000 == with_hour
