"""Smoke test of the benchmark session generator (``benchmarks/generate.py``).

Not a benchmark: nothing here is timed. It checks, on small sizes, that the
generated files are valid format-3 sessions that sessiontree reads, that
they hold what the benchmarks rely on (branches, tool calls and results,
images, verbatim compactions, the search needle), and that the output is
deterministic.
"""

from __future__ import annotations

import collections
import importlib.util
import sys
from pathlib import Path

import orjson
import pytest

from sessiontree import SessionManager
from sessiontree.core.projection.build import build_session_projection
from sessiontree.format.codec import read_session_file
from sessiontree.stores.sqlite.store import SqliteStore

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "generate.py"


@pytest.fixture(scope="module")
def generate():
    spec = importlib.util.spec_from_file_location("bench_generate", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_generate"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("entries", [0, 1, 7, 100, 1_500])
def test_generated_session_is_valid_format_3(generate, tmp_path, entries):
    path = tmp_path / "s.jsonl"
    generate.write_session(path, generate.SessionSpec(entries=entries, seed=entries + 1))
    lines = path.read_bytes().splitlines()
    assert len(lines) == entries + 1
    header = orjson.loads(lines[0])
    assert header["type"] == "session" and header["version"] == 3 and "timestamp" in header
    parsed = read_session_file(path)
    assert parsed.source_version == 3
    assert parsed.header["version"] == 4
    assert len(parsed.entries) == entries
    ids = [entry["id"] for entry in parsed.entries]
    assert len(set(ids)) == entries
    known: set[str] = set()
    for entry in parsed.entries:  # every parent is written before its child
        assert entry["parentId"] is None or entry["parentId"] in known
        known.add(entry["id"])
    # Unchanged entries keep their stored text (only the header was upgraded).
    assert all(raw is not None for raw in parsed.raw)


def test_generated_session_has_the_realistic_features(generate):
    records = generate.generate_records(generate.SessionSpec(entries=3_000, seed=7, branch_every=300,
                                                             compaction_every=1_000))
    entries = records[1:]
    kinds = collections.Counter(entry["type"] for entry in entries)
    roles = collections.Counter(entry["message"]["role"] for entry in entries if entry["type"] == "message")
    assert kinds["branch_summary"] >= 5 and kinds["compaction"] >= 2
    assert roles["user"] and roles["assistant"] and roles["toolResult"]
    assert any(block.get("type") == "image"
               for entry in entries if entry["type"] == "message" and isinstance(entry["message"]["content"], list)
               for block in entry["message"]["content"])
    assert all(entry["details"]["strategy"] == "verbatim-lines" for entry in entries if entry["type"] == "compaction")
    # Branches leave abandoned entries: the active path is shorter than the session.
    projection = build_session_projection(entries)
    assert 0 < len(projection.entries) < len(entries)
    assert projection.entries[0].source_entry["type"] == "compaction"


def test_generator_is_deterministic(generate):
    spec = generate.SessionSpec(entries=300, seed=3)
    assert generate.generate_records(spec) == generate.generate_records(spec)
    assert generate.generate_records(spec) != generate.generate_records(generate.SessionSpec(entries=300, seed=4))


def test_corpus_imports_lists_and_searches(generate, tmp_path):
    paths = generate.write_corpus(tmp_path / "corpus", 15)
    assert len({Path(p).name for p in paths}) == 15
    store = SqliteStore(str(tmp_path / "s.db"))
    try:
        for path in paths:
            SessionManager.import_from_jsonl(path, None, store)
        infos = SessionManager.list_all(store)
        assert len(infos) == 15
        hits = [info for info in infos if generate.NEEDLE in info.all_messages_text]
        assert {info.id for info in hits} <= {read_session_file(p).header["id"] for p in paths[::7]}
        assert hits
    finally:
        store.close()
