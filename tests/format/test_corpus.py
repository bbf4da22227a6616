"""Real session files written by the original agent (corpus/README.md): both
are format 1 (no version, no ids) and must load and upgrade to format 4.

Counts were derived with jq, independently of this library:

* ``jq -c 'select(.type!="session") | .type' F | sort | uniq -c`` gives
  before-compaction: 990 message, 5 model_change, 5 thinking_level_change,
  2 compaction (1002 records); large-session: 914 message, 1 model_change,
  103 thinking_level_change (1018 records). No line is blank and no record
  is repeated (``sort F | uniq -d`` is empty), so nothing is dropped.
* ``tail -n1 F | jq '{type, timestamp}'`` gives the last record.
* The two compactions (lines 360 and 629) have ``firstKeptEntryIndex`` 293
  and 551: with the header as index 0 those are the records on lines 294
  and 552, i.e. entries 292 and 550 (0-based, header excluded).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

import corpus
from sessiontree.core.tree import SessionTree
from sessiontree.format.codec import read_header_file, read_session_file

BEFORE = "pi-mono-before-compaction.jsonl"
LARGE = "pi-mono-large-session.jsonl"
#: Where each file is read: the large session from the repository, the other from the whole corpus.
PATHS = {BEFORE: corpus.shared(corpus.BEFORE_COMPACTION), LARGE: corpus.vendored(corpus.LARGE_SESSION)}

EXPECTED = {
    BEFORE: {
        "session_id": "ffae836b-9420-4060-ac13-7745215f90ff",
        "created": "2025-12-09T00:53:29.825Z",
        "entries": 1002,
        "messages": 990,
        "leaf_type": "thinking_level_change",
        "leaf_timestamp": "2025-12-09T01:26:35.570Z",
        "leaf_id": "12c73fe9",
        "projected": 991,  # 990 stored + 1 synthetic interrupted result (seed:interrupted-tool-calls)
    },
    LARGE: {
        "session_id": "d703a1a9-1b7b-4fb1-b512-c9738b1fe617",
        "created": "2025-11-20T23:33:50.805Z",
        "entries": 1018,
        "messages": 914,
        "leaf_type": "message",
        "leaf_timestamp": "2025-11-21T02:14:02.980Z",
        "leaf_id": "31ff5080",
        "projected": 914,  # unanswered calls only in aborted/error turns (seed:interrupted-tool-calls)
    },
}


@pytest.fixture(scope="module", params=[pytest.param(BEFORE, marks=corpus.NEEDS_SHARED), LARGE])
def corpus_file(request: pytest.FixtureRequest) -> tuple[str, Path]:
    return request.param, PATHS[request.param]


def test_loads_and_upgrades_to_format4(corpus_file: tuple[str, Path]) -> None:
    name, path = corpus_file
    expected = EXPECTED[name]
    parsed = read_session_file(path)
    assert parsed.source_version == 1
    assert parsed.steps == ["v1_to_v2", "v2_to_v3", "v3_to_v4"]
    assert parsed.header["version"] == 4
    assert parsed.header["id"] == expected["session_id"]
    assert parsed.header["createdAt"] == expected["created"]
    assert "timestamp" not in parsed.header
    assert list(parsed.header)[:5] == ["type", "version", "id", "createdAt", "cwd"]
    assert len(parsed.entries) == expected["entries"]
    assert sum(e["type"] == "message" for e in parsed.entries) == expected["messages"]
    assert read_header_file(path) == parsed.header


def test_upgraded_entries_form_one_chain(corpus_file: tuple[str, Path]) -> None:
    _, path = corpus_file
    entries = read_session_file(path).entries
    ids = [e["id"] for e in entries]
    assert len(set(ids)) == len(ids)
    assert [e["parentId"] for e in entries] == [None, *ids[:-1]]
    tree = SessionTree(entries)
    assert len(tree.get_branch()) == len(entries)
    roots = tree.get_tree()
    assert len(roots) == 1 and roots[0].entry is entries[0]


def test_leaf_is_last_record_and_ids_are_deterministic(corpus_file: tuple[str, Path]) -> None:
    name, path = corpus_file
    expected = EXPECTED[name]
    first = read_session_file(path)
    second = read_session_file(path)
    assert [e["id"] for e in first.entries] == [e["id"] for e in second.entries]
    leaf = SessionTree(first.entries).leaf_id
    last = first.entries[-1]
    assert leaf == last["id"]
    assert last["type"] == expected["leaf_type"]
    assert last["timestamp"] == expected["leaf_timestamp"]
    assert leaf == expected["leaf_id"]  # pinned after checking determinism above


@corpus.needs_shared
def test_compaction_first_kept_entry_index_is_resolved() -> None:
    entries = read_session_file(PATHS[BEFORE]).entries
    compactions = [i for i, e in enumerate(entries) if e["type"] == "compaction"]
    assert compactions == [358, 627]  # file lines 360 and 629
    assert entries[358]["firstKeptEntryId"] == entries[292]["id"]
    assert entries[627]["firstKeptEntryId"] == entries[550]["id"]
    assert all("firstKeptEntryIndex" not in entries[i] for i in compactions)
    assert entries[292]["message"]["content"][0]["text"] == "i reviwed what we have, it's good. continue"
    assert entries[550]["message"]["content"][0]["text"] == "can leave it"


def test_reading_never_modifies_the_corpus(corpus_file: tuple[str, Path]) -> None:
    _, path = corpus_file
    before = path.read_bytes()
    mtime = path.stat().st_mtime_ns
    read_session_file(path)
    read_header_file(path)
    assert path.read_bytes() == before
    assert path.stat().st_mtime_ns == mtime


def test_upgraded_file_rereads_to_the_same_session(corpus_file: tuple[str, Path], tmp_path: Path) -> None:
    _, path = corpus_file
    parsed = read_session_file(path)
    copy = tmp_path / "upgraded.jsonl"
    copy.write_bytes(parsed.to_bytes())
    again = read_session_file(copy)
    assert again.source_version == 4 and again.steps == []
    assert again.header == parsed.header
    assert again.entries == parsed.entries
    assert again.to_bytes() == parsed.to_bytes()


def test_projection_message_counts(corpus_file: tuple[str, Path]) -> None:
    from sessiontree.core.projection import build as projection

    name, path = corpus_file
    entries = read_session_file(path).entries
    result = projection.build_session_projection(entries, entries[-1]["id"])
    messages = result["messages"] if isinstance(result, Mapping) else result.messages
    assert len(messages) == EXPECTED[name]["projected"]
