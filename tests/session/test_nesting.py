"""Deeply nested JSON values.

One limit, :data:`sessiontree.jsonio.MAX_DEPTH` (512 levels, a record's own
object counting as level 1), holds for reading, checking and appending:
deeper records are rejected with a clear library error, never with a bare
``RecursionError``, and a failed ``migrate`` leaves no backup behind.
"""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from sessiontree.check.checker import check_bytes, repair_bytes
from sessiontree.cli import cli
from sessiontree.errors import InvalidSessionError
from sessiontree.format import jsonio
from sessiontree.format.codec import parse_session, read_session_file
from sessiontree.format.migrate import migrate_file
from sessiontree.session.manager import SessionManager
from sessiontree.stores.jsonl.store import JsonlStore
from sessiontree.stores.memory import MemoryStore
from sessiontree.stores.sqlite.store import SqliteStore


def nested(levels: int) -> bytes:
    """JSON text of ``levels`` arrays nested in one another around a 0 (``[[0]]`` is 2)."""
    return b"[" * levels + b"0" + b"]" * levels


def record(levels: int) -> bytes:
    """A format-4 user message whose record is ``levels`` deep in total.

    The record object is level 1 and ``message`` level 2; the arrays of
    ``content`` are levels 3 to ``levels``, so there are ``levels - 2`` of them.
    """
    return (b'{"type":"message","id":"m1","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z",'
            b'"message":{"role":"user","content":' + nested(levels - 2) + b'}}')


V4_HEADER = b'{"type":"session","version":4,"id":"deep","createdAt":"2026-01-01T00:00:00.000Z","cwd":"/w"}'
V1_HEADER = b'{"type":"session","id":"deep","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}'
# Format 1: no ids; the upgrade assigns them, so the entry is re-serialized.
V1_DEEP = (V1_HEADER + b'\n{"type":"message","timestamp":"2026-01-01T00:00:01.000Z",'
           b'"message":{"role":"user","content":' + nested(600) + b'}}\n')


def test_depth_of_sample_records():
    assert jsonio.MAX_DEPTH == 512
    assert jsonio.depth(jsonio.loads(record(512))) == 512
    assert jsonio.depth(jsonio.loads(b"{}")) == 1
    assert jsonio.depth(0) == 0


@pytest.mark.parametrize("levels", [513, 600, 1100, 5000])
def test_reading_too_deep_names_file_and_line(levels):
    data = V4_HEADER + b"\n" + record(levels) + b"\n"
    with pytest.raises(InvalidSessionError) as info:
        parse_session(data, "deep.jsonl")
    assert (info.value.path, info.value.line) == ("deep.jsonl", 2)
    assert "nested more than 512 levels" in info.value.reason


def test_reading_at_the_limit_is_accepted():
    data = V4_HEADER + b"\n" + record(512) + b"\n"
    parsed = parse_session(data, "deep.jsonl")
    assert parsed.entries[0]["id"] == "m1"


def test_format1_too_deep_is_rejected_before_upgrade(tmp_path):
    path = tmp_path / "old.jsonl"
    path.write_bytes(V1_DEEP)
    with pytest.raises(InvalidSessionError) as info:
        read_session_file(path)
    assert info.value.line == 2


def test_migrate_too_deep_leaves_file_and_no_backup(tmp_path):
    path = tmp_path / "old.jsonl"
    path.write_bytes(V1_DEEP)
    with pytest.raises(InvalidSessionError):
        migrate_file(path)
    assert path.read_bytes() == V1_DEEP
    assert sorted(os.listdir(tmp_path)) == ["old.jsonl"]


def test_cli_migrate_too_deep_leaves_no_backup(tmp_path):
    path = tmp_path / "old.jsonl"
    path.write_bytes(V1_DEEP)
    result = CliRunner().invoke(cli, ["migrate", str(path)])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert sorted(os.listdir(tmp_path)) == ["old.jsonl"]


@pytest.mark.parametrize("kind", ["memory", "sqlite", "jsonl"])
def test_import_too_deep_is_rejected(tmp_path, kind):
    path = tmp_path / "old.jsonl"
    path.write_bytes(V1_DEEP)
    store = {"memory": lambda: MemoryStore(), "sqlite": lambda: SqliteStore(tmp_path / "s.db"),
             "jsonl": lambda: JsonlStore(tmp_path / "store")}[kind]()
    with pytest.raises(InvalidSessionError):
        SessionManager.import_from_jsonl(path, None, store)


@pytest.mark.parametrize("levels", [513, 1100])
def test_check_reports_nesting_code(levels):
    data = V4_HEADER + b"\n" + record(levels) + b"\n"
    problems = check_bytes(data, "deep.jsonl")
    assert [(p.code, p.line, p.severity) for p in problems] == [("nesting-too-deep", 2, "error")]
    repaired = repair_bytes(data, "deep.jsonl")
    assert repaired.data == data  # kept as written: not repairable
    assert [p.code for p in repaired.remaining] == ["nesting-too-deep"]


def test_check_format1_too_deep_does_not_raise():
    problems = check_bytes(V1_DEEP, "old.jsonl")
    assert ("nesting-too-deep", 2) in [(p.code, p.line) for p in problems]
    repair_bytes(V1_DEEP, "old.jsonl")  # must not raise


def _deep_value(levels: int) -> list:
    value: list = [0]
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.mark.parametrize("kind", ["memory", "sqlite", "jsonl"])
def test_append_too_deep_raises_value_error(tmp_path, kind):
    store = {"memory": lambda: MemoryStore(), "sqlite": lambda: SqliteStore(tmp_path / "s.db"),
             "jsonl": lambda: JsonlStore(tmp_path / "store")}[kind]()
    manager = SessionManager.create(str(tmp_path), store=store)
    manager.append_message({"role": "user", "content": "first"})
    # The entry is level 1 and its message level 2: content may hold 510 levels.
    with pytest.raises(ValueError, match="nested more than 512 levels"):
        manager.append_message({"role": "user", "content": _deep_value(511)})
    manager.append_message({"role": "user", "content": _deep_value(510)})
    reread = SessionManager.open(store, manager.get_session_id())
    assert len(reread.get_entries()) == 2


def test_dumps_between_orjson_limit_and_ours_round_trips():
    # orjson refuses to write more than 255 levels; the fallback must not recurse.
    value = _deep_value(400)
    assert jsonio.loads(jsonio.dumps(value)) == value
    with pytest.raises(ValueError, match="nested more than 512 levels"):
        jsonio.dumps(_deep_value(513))


def test_header_too_deep_names_line(tmp_path):
    from sessiontree.format.codec import read_header_file

    header = V4_HEADER[:-1] + b',"x":' + nested(600) + b"}"
    path = tmp_path / "h.jsonl"
    path.write_bytes(b"\n" + header + b"\n")
    for read in (read_header_file, read_session_file):
        with pytest.raises(InvalidSessionError) as info:
            read(path)
        assert (info.value.path, info.value.line) == (str(path), 2)
