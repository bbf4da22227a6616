"""Every real file comes in (issue 39, item 1): ``sync`` and ``check`` decide with one code
path, so they agree on every file of ``../shared/corpus`` (pi, Claude Code, Codex); a record a
mapping does not understand, or whose mapped entry the stores' validator refuses, becomes an
inert entry reported with its line; a damaged line never refuses a whole file
(docs/agents/README.md, "Every file comes in"; docs/sync.md, "Malformed lines").

Damaged variants of real files are made here by inserting one line into a corpus file (no
real file has one), and say so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from corpus import foreign_files, needs_shared, shared_files
from sessiontree.check.checker import CODES, check_bytes
from sessiontree.format.foreign import ForeignSession, map_foreign, source_bytes
from sessiontree.format.foreign.common import Record
from sessiontree.stores import open_store
from sessiontree.sync.engine import Syncer

_CORPUS = [*shared_files(), *foreign_files("claude-code"), *foreign_files("codex")]


def _refused_by_check(data: bytes, path: str) -> list[tuple[str, int | None]]:
    """The problems ``check`` reports that mean the file is refused: errors whose code the
    table marks as refused by import (docs/check.md, column "import")."""
    return [(p.code, p.line) for p in check_bytes(data, path)
            if p.severity == "error" and not CODES[p.code].import_accepts]


def _agree(path: Path, tmp_path: Path) -> tuple[str, list[tuple[str, int | None]]]:
    store = open_store("memory:")
    result = Syncer(store).sync_file(str(path))
    refused = _refused_by_check(path.read_bytes(), str(path))
    assert (result.status == "rejected") == bool(refused), (result.status, result.reason, refused)
    return result.status, refused


@needs_shared
@pytest.mark.parametrize("path", _CORPUS, ids=lambda p: f"{p.parts[-3]}/{p.name[-24:]}")
def test_check_and_sync_agree_on_every_corpus_file(path, tmp_path):
    """Before: ``check`` said "ok" for 11 Claude Code files that ``sync`` rejected. Now every
    corpus file syncs and ``check`` finds nothing that refuses it."""
    status, refused = _agree(path, tmp_path)
    assert status != "rejected" and refused == []


@needs_shared
@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_a_damaged_line_in_a_real_foreign_file_is_an_inert_entry(agent, tmp_path):
    """A real file with one torn line inserted after its second record (synthetic damage):
    synced, the line an inert entry reported by ``check`` with its line, and the source given
    back byte for byte."""
    source = min(foreign_files(agent), key=lambda p: p.stat().st_size if p.stat().st_size > 2000 else 1 << 60)
    lines = source.read_bytes().split(b"\n")
    data = b"\n".join([*lines[:2], b'{"type":"response_item","payload":{"ty', *lines[2:]])
    path = tmp_path / source.name
    path.write_bytes(data)
    status, _ = _agree(path, tmp_path)
    assert status == "new"
    problems = [(p.code, p.line) for p in check_bytes(data, str(path))]
    assert ("foreign-record-unmapped", 3) in problems
    mapped = map_foreign(data, str(path))
    assert mapped is not None
    inert = [e for e in mapped.entries if e["foreign"]["line"] == 3]
    assert [e["type"] for e in inert] == ["custom"] and inert[0]["foreign"]["unmapped"]
    complete = data[:data.rfind(b"\n") + 1]  # an unfinished last line is not yet part of it
    assert source_bytes(mapped.entries) == complete


@needs_shared
def test_a_foreign_file_whose_first_line_is_damaged_is_still_that_agents(tmp_path):
    """Synthetic damage on line 1 of a real Codex rollout: the first readable record tells
    the agent, so the file is mapped (not refused as a pi file without a header)."""
    source = foreign_files("codex")[-1]
    path = tmp_path / source.name
    path.write_bytes(b"\x00\x00\x00\n" + source.read_bytes())
    store = open_store("memory:")
    result = Syncer(store).sync_file(str(path))
    assert (result.status, result.reason) == ("new", None)
    assert store.read(result.session_id).header["foreign"] == {"agent": "codex"}
    assert [p.code for p in check_bytes(path.read_bytes(), str(path))] == ["foreign-record-unmapped"]


def test_an_entry_the_validator_refuses_becomes_inert_in_place():
    """:func:`settle` (what sync and check both read through): a mapped entry the format-4
    validator refuses (here a custom_message whose timestamp is epoch ms, the mapping bug the
    issue found) keeps its place, id, parent and bytes as an inert ``custom`` entry, with
    its line and the validator's reason reported; a repeated id is made distinct."""
    from sessiontree.format.foreign import settle  # new in issue 39

    header = {"type": "session", "version": 4, "id": "0199aaaa-0000-7000-8000-000000000001",
              "createdAt": "2026-01-01T00:00:00.000Z", "cwd": "/w", "foreign": {"agent": "codex"}}
    result = ForeignSession("codex", header)
    first = Record(1, b'{"a":1}\n', {"timestamp": "2026-01-01T00:00:01.000Z"})
    second = Record(2, b'{"b":2}\n', {"timestamp": "2026-01-01T00:00:02.000Z"})
    result.add_entry(first, {"type": "custom", "customType": "codex", "data": {}}, "L1", None)
    result.add_entry(second, {"type": "custom_message", "customType": "codex.developer", "content": [],
                              "display": False}, "L1", "L1")
    result.entries[1]["timestamp"] = 1767225602000
    settle(result)
    bad = result.entries[1]
    assert bad["type"] == "custom" and bad["id"] == "L1~2" and bad["parentId"] == "L1"
    assert bad["timestamp"] == "2026-01-01T00:00:00.000Z"  # the header's time: the entry's was not a string
    assert bad["foreign"]["raw"] == '{"b":2}\n'
    assert result.unmapped == [(2, "mapped 'custom_message' entry refused by the format-4 validator: "
                                   'custom_message entry field "timestamp" must be a string')]
    assert source_bytes(result.entries) == b'{"a":1}\n{"b":2}\n'


def test_a_pi_file_with_a_malformed_line_syncs_and_check_agrees(tmp_path):
    """Synthetic: a pi file with one line pi's loader skips. Before, sync rejected the file
    at that line and ``check`` called it an error nothing could repair; now both accept it,
    ``check`` warns with the line and ``--repair`` writes a copy without it."""
    header = b'{"type":"session","version":3,"id":"0199aaaa-0000-7000-8000-0000000000a1",' \
             b'"timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}'
    user = (b'{"type":"message","id":"aaaa0001","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",'
            b'"message":{"role":"user","content":"hi","timestamp":1767225601000}}')
    path = tmp_path / "s.jsonl"
    path.write_bytes(header + b"\n" + b"{oops\n" + user + b"\n")
    status, refused = _agree(path, tmp_path)
    assert status == "new" and refused == []
    problems = check_bytes(path.read_bytes(), str(path))
    assert [(p.code, p.severity, p.line) for p in problems] == [
        ("legacy-version", "warning", 1), ("malformed-line", "warning", 2)]


def test_export_source_gives_a_pi_file_with_a_malformed_line_back_byte_for_byte(_fake_home, tmp_path):
    """The skipped line is kept (the file's shape): ``export --format source`` writes the pi
    file as it is, damaged line included (synthetic file); with ``--redact`` it says why not."""
    from cli_support import run_cli
    from sync_support import agent_file

    path = agent_file(_fake_home, n=2)
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join([*lines[:2], b"{not json", *lines[2:]]))
    db = f"sqlite:///{tmp_path / 's.db'}"
    run_cli(db, "sync", str(path))
    out = tmp_path / "back.jsonl"
    run_cli(db, "export", "019cadb4", "--format", "source", "-o", str(out))
    assert out.read_bytes() == path.read_bytes()
    err = run_cli(db, "export", "019cadb4", "--format", "source", "--redact", code=1).stderr
    assert "--format jsonl --redact" in err
