"""JsonlStore specifics: file names and lookup, explicit paths, torn and unterminated
records, format upgrades on disk, failed writes restoring the file, trash, locks,
``migrate_file`` and the held-descriptor append path.

Expected values are worked out by hand, never taken from running the code."""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from builders import custom_with_data as custom
from builders import jsonl_line as line
from builders import role_message as message
from builders import work_header as header
from sessiontree.errors import (
    InvalidSessionError,
    SessionNotFoundError,
    StorageError,
    StoreOpenError,
)
from sessiontree.format import files as files_module
from sessiontree.format import jsonio
from sessiontree.format.ids import session_id_hash
from sessiontree.stores import JsonlStore
from sessiontree.stores.jsonl import files as jsonl_files
from sessiontree.stores.jsonl import writes as jsonl_module

WORKFLOW = {"runId": "run-1", "stageId": "stage-build", "stageName": "build"}

pytestmark = pytest.mark.usefixtures("fake_trash")


NAME_PATTERN = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z_[0-9a-f]{16}\.jsonl$")


@pytest.fixture
def jsonl_store(tmp_path):
    store = JsonlStore(tmp_path / "sessions")
    yield store
    store.close()


def snapshot(directory) -> dict[str, tuple[bytes, int]]:
    return {name: (open(os.path.join(directory, name), "rb").read(),
                   os.stat(os.path.join(directory, name)).st_mtime_ns)
            for name in sorted(os.listdir(directory))}


def test_jsonl_file_names(jsonl_store):
    jsonl_store.create(header("s1", created="2024-12-03T14:00:00.000Z"))
    name = os.path.basename(jsonl_store.location("s1"))
    assert name == "2024-12-03T14-00-00-000Z_" + session_id_hash("s1") + ".jsonl"
    assert NAME_PATTERN.match(name)
    # A parsable but non-canonical time is rendered in UTC; an odd one becomes "now".
    jsonl_store.create(header("s2", created="2024-12-03T15:00:00.000+01:00"))
    assert os.path.basename(jsonl_store.location("s2")).startswith("2024-12-03T14-00-00-000Z_")
    jsonl_store.create(header("s3", created="yesterday"))
    jsonl_store.create({"type": "session", "version": 4, "id": "s4", "cwd": "/x"})
    for sid in ("s3", "s4"):
        assert NAME_PATTERN.match(os.path.basename(jsonl_store.location(sid)))
    assert sorted(os.listdir(jsonl_store.directory)) == sorted(
        os.path.basename(jsonl_store.location(s)) for s in ("s1", "s2", "s3", "s4"))


def test_jsonl_directory_is_created_or_refused(tmp_path):
    store = JsonlStore(tmp_path / "new" / "dir")
    assert os.path.isdir(tmp_path / "new" / "dir")
    store.close()
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(StoreOpenError):
        JsonlStore(blocker)
    with pytest.raises(StoreOpenError):
        JsonlStore(blocker / "sub")


def test_jsonl_lookup_reads_headers_not_names(tmp_path, jsonl_store):
    jsonl_store.create(header("s1"), [custom("e1")])
    old = jsonl_store.location("s1")
    renamed = os.path.join(jsonl_store.directory, "anything.jsonl")
    os.rename(old, renamed)  # the cached path is now stale: a re-scan finds the header
    assert jsonl_store.location("s1") == renamed
    assert [e["id"] for e in jsonl_store.load("s1").entries] == ["e1"]
    # A file written by another store object is found on a cache miss.
    other = JsonlStore(jsonl_store.directory)
    other.create(header("s2"))
    assert jsonl_store.exists("s2")
    other.close()
    # Non-session files are ignored; one level of subfolders (the agents' per-project
    # layout) is read, deeper ones are not.
    (tmp_path / "sessions" / "notes.jsonl").write_text("not json\n")
    os.makedirs(tmp_path / "sessions" / "sub" / "deeper")
    (tmp_path / "sessions" / "sub" / "x.jsonl").write_bytes(line(header("project")))
    (tmp_path / "sessions" / "sub" / "deeper" / "y.jsonl").write_bytes(line(header("deep")))
    assert sorted(jsonl_store.session_ids()) == ["project", "s1", "s2"]


def test_jsonl_create_at_explicit_path(tmp_path, jsonl_store):
    target = tmp_path / "elsewhere" / "mine.jsonl"
    jsonl_store.create(header("s1"), [custom("e1")], path=str(target))
    assert target.read_bytes() == line(header("s1")) + line(custom("e1"))
    assert jsonl_store.location("s1") == str(target)
    jsonl_store.append("s1", [custom("e2", "e1")])
    assert target.read_bytes().endswith(line(custom("e2", "e1")))
    # An existing empty file gets the session (open_file on a 0-byte path, docs/rules/format.md D.10).
    empty = tmp_path / "sessions" / "empty.jsonl"
    empty.write_bytes(b"")
    jsonl_store.create(header("s2"), path=str(empty))
    assert empty.read_bytes() == line(header("s2"))
    # A non-empty file is never overwritten.
    taken = tmp_path / "taken.jsonl"
    taken.write_bytes(b"keep me\n")
    with pytest.raises(StorageError):
        jsonl_store.create(header("s3"), path=str(taken))
    assert taken.read_bytes() == b"keep me\n"
    assert not [n for n in os.listdir(tmp_path) if ".tmp-" in n]


def test_jsonl_newline_added_before_appending_to_unterminated_file(jsonl_store):
    path = os.path.join(jsonl_store.directory, "2026-02-01T09-00-00-000Z_x.jsonl")
    content = line(header("s1")) + jsonio.dumps(custom("e1"))  # complete last record, no newline
    with open(path, "wb") as handle:
        handle.write(content)
    jsonl_store.append("s1", [custom("e2", "e1")])
    with open(path, "rb") as handle:
        assert handle.read() == content + b"\n" + line(custom("e2", "e1"))
    assert [e["id"] for e in jsonl_store.load("s1").entries] == ["e1", "e2"]


def test_jsonl_append_refuses_a_torn_final_record(jsonl_store):
    path = os.path.join(jsonl_store.directory, "torn.jsonl")
    content = line(header("s1")) + line(custom("e1")) + b'{"type":"custom","id":"e2","par'
    with open(path, "wb") as handle:
        handle.write(content)
    with pytest.raises(InvalidSessionError):
        jsonl_store.append("s1", [custom("e3")])
    with open(path, "rb") as handle:
        assert handle.read() == content


V1_FILE = (b'{"type":"session","id":"old-1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/work/old"}\n'
           b'{"type":"message","timestamp":"2025-01-01T00:00:01.000Z",'
           b'"message":{"role":"user","content":"hi","timestamp":1735689601000}}\n'
           b'{"type":"message","timestamp":"2025-01-01T00:00:02.000Z",'
           b'"message":{"role":"assistant","content":[{"type":"text","text":"yo"}],"timestamp":1735689602000}}\n')


def test_jsonl_load_persists_format_upgrade_atomically(jsonl_store):
    path = os.path.join(jsonl_store.directory, "2025-01-01T00-00-00-000Z_old-1.jsonl")
    with open(path, "wb") as handle:
        handle.write(V1_FILE)
    inode = os.stat(path).st_ino
    loaded = jsonl_store.load("old-1")
    assert loaded.source_version == 1 and loaded.upgraded is False
    # Header v4 (C.9): version after type, timestamp renamed createdAt, in the A.3 key order.
    assert loaded.header_raw == (b'{"type":"session","version":4,"id":"old-1",'
                                 b'"createdAt":"2025-01-01T00:00:00.000Z","cwd":"/work/old"}')
    first, second = loaded.entries
    assert first["parentId"] is None and second["parentId"] == first["id"]  # one chain (C.3)
    assert all(re.fullmatch(r"[0-9a-f]{8}", e["id"]) for e in loaded.entries)
    with open(path, "rb") as handle:
        on_disk = handle.read()
    assert on_disk == loaded.to_bytes()
    assert on_disk.splitlines()[0] == loaded.header_raw
    assert os.stat(path).st_ino != inode  # replaced by rename, not overwritten in place
    assert sorted(os.listdir(jsonl_store.directory)) == [os.path.basename(path)]  # no temp file
    # Now format 4: a second load changes nothing and gives the same ids.
    mtime = os.stat(path).st_mtime_ns
    again = jsonl_store.load("old-1")
    assert again.upgraded is False and again.source_version == 4
    assert again.entries == loaded.entries
    assert os.stat(path).st_mtime_ns == mtime


def test_jsonl_append_to_an_old_file_upgrades_it_first(jsonl_store):
    path = os.path.join(jsonl_store.directory, "old.jsonl")
    with open(path, "wb") as handle:
        handle.write(V1_FILE)
    jsonl_store.append("old-1", [custom("n1")])
    loaded = jsonl_store.load("old-1")
    assert loaded.source_version == 4
    assert loaded.header["version"] == 4
    assert [e["id"] for e in loaded.entries][2] == "n1"
    assert len(loaded.entries) == 3


def test_jsonl_failed_upgrade_leaves_the_file_and_no_temp(jsonl_store, monkeypatch):
    path = os.path.join(jsonl_store.directory, "old.jsonl")
    with open(path, "wb") as handle:
        handle.write(V1_FILE)

    def fail(fd: int, data: bytes) -> None:
        os.write(fd, data[:10])
        raise OSError(28, "No space left on device (injected)")

    monkeypatch.setattr(files_module, "write_all", fail)  # the upgrade's atomic rewrite
    with pytest.raises(StorageError) as info:
        jsonl_store.load("old-1")
    assert isinstance(info.value.__cause__, OSError)
    with open(path, "rb") as handle:
        assert handle.read() == V1_FILE
    assert os.listdir(jsonl_store.directory) == ["old.jsonl"]


def test_jsonl_listing_and_lookups_never_modify_files(jsonl_store):
    directory = jsonl_store.directory
    files = {
        "v1.jsonl": V1_FILE,
        "early4.jsonl": b'{"type":"session","version":4,"id":"early","timestamp":"2025-01-01T00:00:00.000Z",'
                        b'"cwd":"/work/a","parentSession":"/x/2024_parent.jsonl"}\n',
        "unterminated.jsonl": line(header("unterm")) + jsonio.dumps(message("u1", None, "user", "hey", 3)),
        "crlf.jsonl": jsonio.dumps(header("crlf")) + b"\r\n",
        "garbage.jsonl": b"this is not json\n",
        "future.jsonl": b'{"type":"session","version":9,"id":"future"}\n',
        "internal.jsonl": line(header("int", internal=True, workflow=WORKFLOW)) + b"corrupt body\n",
        "notes.txt": b"ignored",
    }
    for name, data in files.items():
        with open(os.path.join(directory, name), "wb") as handle:
            handle.write(data)
    before = snapshot(directory)
    calls: list = []
    rows = jsonl_store.list_sessions(on_progress=lambda *a: calls.append(a))
    # Seven *.jsonl files examined; the garbage, future-version and internal ones are left out.
    assert calls == [(i, 7) for i in range(1, 8)]
    assert sorted(r.id for r in rows) == ["crlf", "early", "old-1", "unterm"]
    assert {r.id: r.parent_session_id for r in rows}["early"] == "parent"  # upgraded in memory (docs/rules/versions.md §3.3)
    assert {r.id: r.first_message for r in rows}["unterm"] == "hey"
    # The internal file's body is corrupt, so even include_internal cannot list it.
    assert "int" not in {r.id for r in jsonl_store.list_sessions(include_internal=True)}
    jsonl_store.find_most_recent()
    jsonl_store.session_ids()
    jsonl_store.exists("old-1")
    jsonl_store.location("early")
    assert snapshot(directory) == before


def test_jsonl_failed_append_restores_the_file(jsonl_store, monkeypatch):
    jsonl_store.create(header("s1"), [custom("e1")])
    path = jsonl_store.location("s1")
    with open(path, "rb") as handle:
        before = handle.read()

    def fail(fd: int, data: bytes) -> None:
        os.write(fd, data[: len(data) // 2])  # a partial record reaches the file
        raise OSError(28, "No space left on device (injected)")

    monkeypatch.setattr(jsonl_module, "_write_all", fail)
    with pytest.raises(StorageError) as info:
        jsonl_store.append("s1", [custom("e2", "e1"), custom("e3", "e2")])
    assert isinstance(info.value.__cause__, OSError)
    with open(path, "rb") as handle:
        assert handle.read() == before

    def fail_truncate(fd: int, size: int) -> None:
        raise OSError(5, "Input/output error (injected)")

    monkeypatch.setattr(jsonl_module, "_truncate", fail_truncate)
    with pytest.raises(StorageError, match="rollback failed") as info:
        jsonl_store.append("s1", [custom("e2", "e1")])
    assert isinstance(info.value.__cause__, OSError)
    assert isinstance(info.value.rollback_error, OSError)


def test_jsonl_failed_fsync_restores_the_file(jsonl_store, monkeypatch):
    jsonl_store.create(header("s1"), [custom("e1")])
    path = jsonl_store.location("s1")
    with open(path, "rb") as handle:
        before = handle.read()
    real_fsync = os.fsync
    calls = {"n": 0}

    def fail_first(fd: int) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError(5, "Input/output error (injected)")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fail_first)
    with pytest.raises(StorageError):
        jsonl_store.append("s1", [custom("e2", "e1")])
    monkeypatch.undo()
    with open(path, "rb") as handle:
        assert handle.read() == before


def test_jsonl_failed_create_leaves_no_file(jsonl_store, monkeypatch):
    def fail(fd: int, data: bytes) -> None:
        raise OSError(28, "No space left on device (injected)")

    monkeypatch.setattr(jsonl_module, "_write_all", fail)
    with pytest.raises(StorageError):
        jsonl_store.create(header("s1"), [custom("e1")])
    assert os.listdir(jsonl_store.directory) == []
    assert jsonl_store.exists("s1") is False


def test_jsonl_replace_header_is_an_atomic_rewrite(jsonl_store):
    raw = rb'{"id":"e1","type":"custom","parentId":null,"timestamp":"x","customType":"t","data":"\u00e9"}'
    jsonl_store.create(header("s1"), [jsonio.loads(raw)], raw=[raw])
    path = jsonl_store.location("s1")
    inode = os.stat(path).st_ino
    jsonl_store.replace_header("s1", header("s1", cwd="/work/z"))
    with open(path, "rb") as handle:
        assert handle.read() == line(header("s1", cwd="/work/z")) + raw + b"\n"
    assert os.stat(path).st_ino != inode
    assert os.listdir(jsonl_store.directory) == [os.path.basename(path)]


def test_jsonl_delete_uses_trash_and_removes_every_copy(jsonl_store, fake_trash, monkeypatch):
    jsonl_store.create(header("s1"), [custom("e1")])
    first = jsonl_store.location("s1")
    copy = os.path.join(jsonl_store.directory, "copy.jsonl")
    with open(first, "rb") as src, open(copy, "wb") as dst:
        dst.write(src.read())
    jsonl_store.create(header("s2"))
    jsonl_store.delete("s1")
    assert sorted(os.listdir(fake_trash)) == sorted([os.path.basename(first), "copy.jsonl"])
    assert os.listdir(jsonl_store.directory) == [os.path.basename(jsonl_store.location("s2"))]

    def no_trash(path: str) -> None:
        raise OSError("no trash on this system")

    monkeypatch.setattr(jsonl_module, "_send_to_trash", no_trash)
    jsonl_store.delete("s2")  # falls back to unlinking
    assert os.listdir(jsonl_store.directory) == []
    jsonl_store.delete("s2")


def test_jsonl_writers_wait_for_the_file_lock(jsonl_store):
    jsonl_store.create(header("s1"))
    path = jsonl_store.location("s1")
    holder = os.open(path, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)
    done = threading.Event()

    def append() -> None:
        jsonl_store.append("s1", [custom("e1")])
        done.set()

    thread = threading.Thread(target=append)
    thread.start()
    try:
        assert not done.wait(0.3)  # blocked while another holder has the lock
        with open(path, "rb") as handle:
            assert handle.read() == line(header("s1"))
    finally:
        fcntl.flock(holder, fcntl.LOCK_UN)
        os.close(holder)
    thread.join(10)
    assert done.is_set()
    assert [e["id"] for e in jsonl_store.load("s1").entries] == ["e1"]


def test_jsonl_stale_cache_after_another_process_deletes(jsonl_store):
    jsonl_store.create(header("s1"))
    other = JsonlStore(jsonl_store.directory)
    other.delete("s1")
    with pytest.raises(SessionNotFoundError):
        jsonl_store.append("s1", [custom("e1")])
    with pytest.raises(SessionNotFoundError):
        jsonl_store.load("s1")
    assert os.listdir(jsonl_store.directory) == []


def test_jsonl_open_path_for_open_file(tmp_path, jsonl_store):
    missing = tmp_path / "outside" / "new.jsonl"
    assert jsonl_store.open_path(missing) is None
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert jsonl_store.open_path(empty) is None
    assert empty.read_bytes() == b""
    invalid = tmp_path / "invalid.jsonl"
    invalid.write_bytes(b"\xef\xbb\xbfnot a session\n")
    with pytest.raises(InvalidSessionError):
        jsonl_store.open_path(invalid)
    assert invalid.read_bytes() == b"\xef\xbb\xbfnot a session\n"
    # An old file outside the directory: upgraded on disk, then bound to its id.
    old = tmp_path / "old.jsonl"
    old.write_bytes(V1_FILE)
    parsed = jsonl_store.open_path(old)
    assert parsed is not None and parsed.header["version"] == 4 and parsed.upgraded is False
    assert old.read_bytes() == parsed.to_bytes()
    assert jsonl_store.location("old-1") == str(old)
    jsonl_store.append("old-1", [custom("n1")])
    assert old.read_bytes() == parsed.to_bytes() + line(custom("n1"))
    assert sorted(os.listdir(tmp_path)) == sorted(["empty.jsonl", "invalid.jsonl", "old.jsonl", "sessions"])


def test_jsonl_path_for_is_where_create_writes(jsonl_store):
    h = header("s1", created="2024-12-03T14:00:00.000Z")
    future = jsonl_store.path_for(h)
    assert not os.path.exists(future)
    jsonl_store.create(h)
    assert jsonl_store.location("s1") == future


def test_migrate_file_upgrades_atomically_with_backup(tmp_path):
    from sessiontree.format.migrate import migrate_file

    path = tmp_path / "old.jsonl"
    original = (b'{"type":"session","version":3,"id":"m-1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}\r\n'
                b'{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",'
                b'"message":{"role":"user","content":"hi","timestamp":1}}')
    path.write_bytes(original)
    result = migrate_file(path)
    assert result.upgraded and result.from_version == 3 and result.backup == str(path) + ".bak"
    assert (tmp_path / "old.jsonl.bak").read_bytes() == original
    assert path.read_bytes() == (
        b'{"type":"session","version":4,"id":"m-1","createdAt":"2026-01-01T00:00:00.000Z","cwd":"/w"}\n'
        b'{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",'
        b'"message":{"role":"user","content":"hi","timestamp":1}}\n')
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.jsonl", "old.jsonl.bak"]
    again = migrate_file(path, backup=False)
    assert not again.upgraded and again.backup is None


def test_migrate_file_refuses_invalid_and_leaves_it(tmp_path):
    from sessiontree.errors import InvalidSessionError
    from sessiontree.format.migrate import migrate_file

    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"type":"session","id":"x"}\n{torn')
    with pytest.raises(InvalidSessionError):
        migrate_file(path)
    assert path.read_bytes() == b'{"type":"session","id":"x"}\n{torn'
    assert [p.name for p in tmp_path.iterdir()] == ["bad.jsonl"]


def test_jsonl_read_of_an_older_file_leaves_it_untouched(tmp_path):
    directory = tmp_path / "j"
    directory.mkdir()
    path = directory / "old.jsonl"
    original = (b'{"type":"session","version":3,"id":"old","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}\n'
                b'{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",'
                b'"message":{"role":"user","content":"hi","timestamp":1}}\n')
    path.write_bytes(original)
    store = JsonlStore(str(directory))
    parsed = store.read("old")
    assert parsed.header["version"] == 4 and parsed.upgraded
    assert path.read_bytes() == original
    store.load("old")  # opening for writing persists the upgrade (D-9)
    assert path.read_bytes() != original and b'"version":4' in path.read_bytes()


def test_jsonl_fsync_false_skips_only_the_append_fsync(tmp_path, monkeypatch):
    calls = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd))[1])
    store = JsonlStore(tmp_path / "j", fsync=False)
    store.create(header("s1"), [message("e1", None, "user", "a", 1)])
    created = len(calls)
    assert created >= 1  # creating a file is always made durable
    store.append("s1", [message("e2", "e1", "user", "b", 2)])
    assert len(calls) == created
    assert [e["id"] for e in store.load("s1").entries] == ["e1", "e2"]
    durable = JsonlStore(tmp_path / "k")
    durable.create(header("s2"), [])
    before = len(calls)
    durable.append("s2", [message("e1", None, "user", "a", 1)])
    assert len(calls) == before + 1


def test_migrate_file_never_overwrites_an_earlier_backup(tmp_path):
    from sessiontree.format.migrate import migrate_file

    path = tmp_path / "s.jsonl"
    (tmp_path / "s.jsonl.bak").write_bytes(b"older backup")
    original = b'{"type":"session","version":3,"id":"b-1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}\n'
    path.write_bytes(original)
    result = migrate_file(path)
    assert result.backup == str(path) + ".bak.1"
    assert (tmp_path / "s.jsonl.bak").read_bytes() == b"older backup"
    assert (tmp_path / "s.jsonl.bak.1").read_bytes() == original


# ---------------------------------------------------------------- JSONL append fast path
# After an append, JsonlStore keeps the file's descriptor open and appends through it
# while nothing changed (same inode, size where it left it). Each test changes
# something between two appends of one store and checks the second one noticed.


def _open_fds() -> set[str]:
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    return out


def _session_file(store: JsonlStore, session_id: str) -> str:
    return store.folder.require(session_id)


def test_jsonl_held_append_sees_another_writers_entries(jsonl_store):
    jsonl_store.create(header("s1"), [custom("a")])
    jsonl_store.append("s1", [custom("b", "a")])  # keeps the descriptor
    other = JsonlStore(jsonl_store.directory)
    other.append("s1", [custom("c", "b")])
    with pytest.raises(InvalidSessionError, match='"c" is already used'):
        jsonl_store.append("s1", [custom("c", "b")])  # the other writer's id
    jsonl_store.append("s1", [custom("d", "c")])
    assert [e["id"] for e in JsonlStore(jsonl_store.directory).load("s1").entries] == ["a", "b", "c", "d"]


def test_jsonl_held_append_rejects_a_reused_id(jsonl_store):
    jsonl_store.create(header("s1"), [custom("a")])
    jsonl_store.append("s1", [custom("b", "a")])
    before = open(_session_file(jsonl_store, "s1"), "rb").read()
    with pytest.raises(InvalidSessionError, match='"b" is already used'):
        jsonl_store.append("s1", [custom("b", "a")])
    assert open(_session_file(jsonl_store, "s1"), "rb").read() == before


def test_jsonl_held_append_follows_an_atomic_rewrite(jsonl_store):
    jsonl_store.create(header("s1"), [custom("a")])
    jsonl_store.append("s1", [custom("b", "a")])
    path = _session_file(jsonl_store, "s1")
    data = open(path, "rb").read()
    with open(path + ".new", "wb") as handle:
        handle.write(data)
    os.replace(path + ".new", path)  # what a rewrite by another process does
    jsonl_store.append("s1", [custom("c", "b")])
    assert [e["id"] for e in JsonlStore(jsonl_store.directory).load("s1").entries] == ["a", "b", "c"]


def test_jsonl_held_append_after_delete_by_another_store_raises(jsonl_store):
    jsonl_store.create(header("s1"), [custom("a")])
    jsonl_store.append("s1", [custom("b", "a")])
    JsonlStore(jsonl_store.directory).delete("s1")
    with pytest.raises(SessionNotFoundError):
        jsonl_store.append("s1", [custom("c", "b")])
    assert os.listdir(jsonl_store.directory) == []


def test_jsonl_held_append_failure_rolls_back(jsonl_store, monkeypatch):
    jsonl_store.create(header("s1"), [custom("a")])
    jsonl_store.append("s1", [custom("b", "a")])
    path = _session_file(jsonl_store, "s1")
    before = open(path, "rb").read()

    def fail(fd: int, data: bytes) -> None:
        os.write(fd, data[:7])
        raise OSError(28, "No space left on device (injected)")

    monkeypatch.setattr(jsonl_module, "_write_all", fail)
    with pytest.raises(StorageError):
        jsonl_store.append("s1", [custom("c", "b")])
    monkeypatch.undo()
    assert open(path, "rb").read() == before
    jsonl_store.append("s1", [custom("c", "b")])
    assert [e["id"] for e in jsonl_store.load("s1").entries] == ["a", "b", "c"]


def test_jsonl_keeps_few_descriptors_and_close_releases_them(jsonl_store):
    before = _open_fds()
    for n in range(20):
        jsonl_store.create(header(f"s{n}"), [custom("a")])
        jsonl_store.append(f"s{n}", [custom("b", "a")])
    kept = {p for p in _open_fds() - before if p.startswith(jsonl_store.directory)}
    assert len(kept) == jsonl_files._HELD_FILES
    jsonl_store.close()
    assert not {p for p in _open_fds() - before if p.startswith(jsonl_store.directory)}
    jsonl_store.append("s0", [custom("c", "b")])  # still usable after close
    assert [e["id"] for e in jsonl_store.load("s0").entries] == ["a", "b", "c"]


def test_jsonl_held_descriptor_is_not_used_across_fork(jsonl_store):
    jsonl_store.create(header("s1"), [custom("p0")])
    jsonl_store.append("s1", [custom("p1", "p0")])  # the parent keeps the descriptor
    pid = os.fork()
    if pid == 0:  # child: same store object, inherited descriptor
        code = 0
        try:
            for i in range(50):
                jsonl_store.append("s1", [custom(f"c{i}")])
        except BaseException:
            code = 1
        os._exit(code)
    for i in range(50):
        jsonl_store.append("s1", [custom(f"q{i}")])
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    ids = [e["id"] for e in JsonlStore(jsonl_store.directory).load("s1").entries]
    assert sorted(ids) == sorted(["p0", "p1"] + [f"c{i}" for i in range(50)] + [f"q{i}" for i in range(50)])


_RACE_SCRIPT = """
import json, sys, time
from sessiontree.errors import SessionExistsError, StorageError
from sessiontree.stores import JsonlStore
store = JsonlStore(sys.argv[1])
start = float(sys.argv[2])
while time.time() < start:
    pass
counts = {"created": 0, "exists": 0, "storage": []}
for n in range(300):
    head = {"type": "session", "version": 4, "id": "0190f000-0000-7000-8000-%012d" % n,
            "createdAt": "2026-02-01T09:00:00.000Z", "cwd": "/w"}
    try:
        store.create(head, [])
        counts["created"] += 1
    except SessionExistsError:
        counts["exists"] += 1
    except StorageError as exc:
        counts["storage"].append(str(exc))
print(json.dumps(counts))
"""


def test_two_processes_creating_the_same_sessions(tmp_path):
    """Two real processes create the same 300 sessions at the same moment: each session is
    created by exactly one; the other gets SessionExistsError, never a storage error."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    start = str(time.time() + 1.5)  # both processes are running by then
    env = {**os.environ, "PYTHONPATH": src}
    procs = [subprocess.Popen([sys.executable, "-c", _RACE_SCRIPT, str(tmp_path), start], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    counts = [json.loads(out) for out, _ in outs]
    assert [c["storage"] for c in counts] == [[], []]
    assert counts[0]["created"] + counts[1]["created"] == 300
    assert counts[0]["exists"] + counts[1]["exists"] == 300
    assert len(JsonlStore(tmp_path).session_ids()) == 300
