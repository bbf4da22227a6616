"""The Markdown export and ``diff --json`` pinned byte for byte on real and hostile sessions.

The golden files under ``tests/data/golden/`` were written by the code before the speed work
of issue 42 (round five, target 4) and reviewed then: rendering may get faster, never
different. The sources are the vendored corpus file (a real pi session, 974 KB), the three
``examples/`` sessions and ``golden/hostile.jsonl``, the hostile session of
``tests/core/test_terminal_safety.py`` (escape sequences, bidi and invisible characters in every
field), so the escaping of every fragment is pinned too.

To rewrite them after a deliberate change of the output (review the diff!):
``SESSIONTREE_WRITE_GOLDEN=1 pytest tests/core/test_export_golden.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import corpus
from cli_support import run_cli

GOLDEN = corpus.TESTS / "data" / "golden"
EXAMPLES = corpus.TESTS.parent / "examples"
WRITE = os.environ.get("SESSIONTREE_WRITE_GOLDEN") == "1"

#: name -> (source file, session id)
SOURCES = {
    "pi-mono-large-session": (corpus.VENDORED / corpus.LARGE_SESSION, None),
    "branching": (EXAMPLES / "branching.jsonl", None),
    "compaction": (EXAMPLES / "compaction.jsonl", None),
    "interrupted": (EXAMPLES / "interrupted.jsonl", None),
    "hostile": (GOLDEN / "hostile.jsonl", None),
}


def _session_id(path: Path) -> str:
    import json

    with path.open("rb") as handle:
        return str(json.loads(handle.readline())["id"])


def _check(name: str, produced: bytes) -> None:
    golden = GOLDEN / name
    if WRITE:
        golden.write_bytes(produced)
    assert golden.is_file(), f"{golden} is missing (SESSIONTREE_WRITE_GOLDEN=1 writes it)"
    expected = golden.read_bytes()
    if produced != expected:
        at = next((i for i, (a, b) in enumerate(zip(produced, expected, strict=False)) if a != b),
                  min(len(produced), len(expected)))
        pytest.fail(f"{name} differs from its golden file at byte {at}: "
                    f"{produced[max(0, at - 80):at + 80]!r} vs {expected[max(0, at - 80):at + 80]!r}")


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_markdown_export_is_byte_identical_to_its_golden_file(name, tmp_path):
    source, _ = SOURCES[name]
    store = str(tmp_path / "s.db")
    run_cli(store, "import", str(source))
    sid = _session_id(source)
    out = tmp_path / "out.md"
    run_cli(store, "export", sid, "--format", "markdown", "--no-redact", "-o", str(out))
    _check(f"{name}.md", out.read_bytes())


@pytest.mark.parametrize("name", ["branching", "hostile"])
def test_diff_json_is_byte_identical_to_its_golden_file(name, tmp_path):
    source, _ = SOURCES[name]
    store = str(tmp_path / "s.db")
    run_cli(store, "import", str(source))
    result = run_cli(store, "diff", _session_id(source), "--json")
    _check(f"{name}.diff.json", result.stdout_bytes)
