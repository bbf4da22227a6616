"""Stores recovering from crashes, races and odd files (``spec:stores``; docs/rules/decisions.md
D-1, D-9; docs/rules/format.md D, E).

Six of these found contract violations in the JSONL store (a rewrite through
a symlink split the session; a duplicate id from another writer made the file
unreadable; a crashed rewrite left its temp file; a rewrite changed the
owner; an unwritable file raised a bare OSError); they now guard the fixes.
The others guard scenarios that were tried and held. Slow ones (real
processes killed or racing) are marked ``slow``.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import sessiontree.format.files as files_module
import sessiontree.session.builders as builders_module
import sessiontree.stores.jsonl.writes as jsonl_module
import sessiontree.stores.sqlite.writes as sqlite_module
from builders import user as _user
from sessiontree import InvalidSessionError, SessionManager, StorageError
from sessiontree.check.checker import repair_file
from sessiontree.stores.jsonl.store import JsonlStore, read_file
from sessiontree.stores.sqlite.store import SqliteStore

WORKFLOW = {"runId": "r", "stageId": "s", "stageName": "n"}


def _v3_bytes(session_id: str = "sess-v3", n: int = 20) -> bytes:
    """A format-3 file: header with ``timestamp`` (upgraded to ``createdAt`` on open)."""
    records: list[dict] = [{"type": "session", "version": 3, "id": session_id,
                            "timestamp": "2024-03-01T00:00:00.000Z", "cwd": "/w"}]
    parent = None
    for i in range(n):
        entry_id = f"e{i:07d}"
        records.append({"type": "message", "id": entry_id, "parentId": parent,
                        "timestamp": "2024-03-01T00:00:01.000Z", "message": _user(f"m{i}")})
        parent = entry_id
    return b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in records)


def _run(code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args],
                          capture_output=True, text=True, timeout=timeout, check=False)


def _ids(manager: SessionManager) -> list[str]:
    return [e["id"] for e in manager.get_entries()]


def _temp_files(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if ".tmp" in name)


# ============================================================================ violations


def test_upgrade_through_a_symlink_keeps_the_link_and_upgrades_its_target(tmp_path: Path) -> None:
    real = tmp_path / "real" / "s.jsonl"
    real.parent.mkdir()
    real.write_bytes(_v3_bytes())
    link = tmp_path / "store" / "s.jsonl"
    link.parent.mkdir()
    link.symlink_to(real)

    manager = SessionManager.open_file(link)
    manager.append_message(_user("new"))

    assert link.is_symlink()  # the user's link is theirs, not ours to replace
    assert read_file(real).source_version == 4
    assert _ids(SessionManager.open_file(real)) == _ids(manager)


def test_header_rewrite_through_a_symlink_does_not_split_the_session(tmp_path: Path) -> None:
    real = tmp_path / "real" / "t.jsonl"
    real.parent.mkdir()
    direct = SessionManager.open_file(real)
    direct.append_message(_user("first"))
    link = tmp_path / "store" / "t.jsonl"
    link.parent.mkdir()
    link.symlink_to(real)
    via_link = SessionManager.open_file(link)

    via_link.mark_session_internal(WORKFLOW)  # replace_header: an atomic rewrite
    a = direct.append_message(_user("through the real path"))
    b = via_link.append_message(_user("through the link"))

    for path in (real, link):
        reopened = SessionManager.open_file(path)
        assert {a, b} <= set(_ids(reopened)), path
        assert reopened.get_header().get("internal") is True, path


def test_jsonl_append_refuses_an_id_another_writer_already_used(tmp_path: Path, monkeypatch) -> None:
    store_dir = tmp_path / "j"
    creator = SessionManager.create(str(tmp_path), store=JsonlStore(store_dir))
    creator.append_message(_user("0"))
    sid = creator.get_session_id()
    a = SessionManager.open(JsonlStore(store_dir), sid)
    b = SessionManager.open(JsonlStore(store_dir), sid)
    # Two writers (threads, processes) whose random 8-hex ids collide: forced here.
    monkeypatch.setattr(builders_module, "new_entry_id", lambda used: "deadbeef")
    a.append_message(_user("a"))
    with pytest.raises((InvalidSessionError, StorageError)):
        b.append_message(_user("b"))
    monkeypatch.undo()
    assert len(SessionManager.open(JsonlStore(store_dir), sid).get_entries()) == 2


def test_no_temp_file_survives_a_crash_during_the_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    path.write_bytes(_v3_bytes())
    crashed = _run("""
        import os, signal, sys
        import sessiontree.stores.jsonl.writes as J
        from sessiontree import SessionManager
        J.os.replace = lambda a, b: os.kill(os.getpid(), signal.SIGKILL)  # crash just before the rename
        SessionManager.open_file(sys.argv[1])
    """, str(path))
    assert crashed.returncode == -signal.SIGKILL
    assert path.read_bytes() == _v3_bytes()  # the rename never happened: the file is intact

    manager = SessionManager.open_file(path)  # the next open (which upgrades under the lock)
    manager.append_message(_user("after"))
    assert _temp_files(tmp_path) == []


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to chown")
def test_rewrite_keeps_the_files_owner(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    path.write_bytes(_v3_bytes())
    os.chown(path, 1000, 1000)
    SessionManager.open_file(path)  # persists the format-4 upgrade
    st = os.stat(path)
    assert (st.st_uid, st.st_gid) == (1000, 1000)


def test_store_append_open_failure_is_a_storage_error(tmp_path: Path, monkeypatch) -> None:
    store = JsonlStore(tmp_path)
    manager = SessionManager.create(str(tmp_path), store=store)
    manager.append_message(_user("hi"))
    path = manager.get_session_file()
    before = Path(path).read_bytes()
    real_open = os.open

    def refuse_writes(file, flags, *args, **kwargs):
        if flags & os.O_RDWR and os.fspath(file) == path:
            raise PermissionError(errno.EROFS, "Read-only file system", file)
        return real_open(file, flags, *args, **kwargs)

    monkeypatch.setattr(jsonl_module.os, "open", refuse_writes)
    entry = {"type": "custom", "id": "abcd1234", "parentId": None,
             "timestamp": "2024-01-01T00:00:00.000Z", "customType": "c"}
    with pytest.raises(StorageError):
        store.append(manager.get_session_id(), [entry])
    monkeypatch.undo()
    assert Path(path).read_bytes() == before


# ============================================================================ scenarios that hold


def test_torn_record_from_a_killed_writer_is_rejected_and_repairable(tmp_path: Path) -> None:
    store_dir = tmp_path / "j"
    manager = SessionManager.create(str(tmp_path), store=JsonlStore(store_dir))
    committed = [manager.append_message(_user(f"m{i}")) for i in range(5)]
    sid, path = manager.get_session_id(), manager.get_session_file()
    # Another process dies (SIGKILL) half-way through writing its record.
    killed = _run("""
        import os, signal, sys
        import sessiontree.stores.jsonl.writes as J
        from sessiontree import SessionManager
        from sessiontree.stores.jsonl.store import JsonlStore
        def half(fd, data):
            os.write(fd, bytes(data)[: len(data) // 2])
            os.kill(os.getpid(), signal.SIGKILL)
        J._write_all = half
        SessionManager.open(JsonlStore(sys.argv[1]), sys.argv[2]).append_message(
            {"role": "user", "content": "x" * 5000, "timestamp": 1})
    """, str(store_dir), sid)
    assert killed.returncode == -signal.SIGKILL
    torn = Path(path).read_bytes()
    assert not torn.endswith(b"\n")

    for opener in (lambda: SessionManager.open_file(path),
                   lambda: SessionManager.open(JsonlStore(store_dir), sid)):
        with pytest.raises(InvalidSessionError) as info:
            opener()
        assert info.value.path == path and info.value.line == 7  # header + 5 + the torn one
        assert "torn" in str(info.value) and path in str(info.value)

    # A writer that was already open refuses to bury the damage, and changes nothing.
    leaf, count = manager.get_leaf_id(), len(manager.get_entries())
    with pytest.raises(InvalidSessionError):
        manager.append_message(_user("after"))
    assert (manager.get_leaf_id(), len(manager.get_entries())) == (leaf, count)
    assert Path(path).read_bytes() == torn

    fixed = tmp_path / "fixed.jsonl"
    repair_file(path, fixed)
    assert [e["id"] for e in read_file(fixed).entries] == committed
    assert Path(path).read_bytes() == torn  # check --repair writes a copy only


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
@pytest.mark.parametrize("shared_store", [False, True])
def test_two_managers_in_one_process_appending_alternately(tmp_path: Path, kind: str,
                                                           shared_store: bool) -> None:
    def make():
        return JsonlStore(tmp_path / "j") if kind == "jsonl" else SqliteStore(tmp_path / "s.db")

    store = make()
    creator = SessionManager.create(str(tmp_path), store=store)
    ids = [creator.append_message(_user("root"))]
    sid = creator.get_session_id()
    a = SessionManager.open(store if shared_store else make(), sid)
    b = SessionManager.open(store if shared_store else make(), sid)
    for i in range(20):
        ids.append(a.append_message(_user(f"a{i}")))
        ids.append(b.append_message(_user(f"b{i}")))
    ids.append(a.append_label_change(ids[-2], "mine"))
    reopened = SessionManager.open(make(), sid)
    assert _ids(reopened) == ids
    assert reopened.get_label(ids[-3]) == "mine"


def test_sqlite_failure_mid_transaction_changes_nothing(tmp_path: Path, monkeypatch) -> None:
    store = SqliteStore(tmp_path / "s.db")
    manager = SessionManager.create(str(tmp_path), store=store)
    ids = [manager.append_message(_user("one"))]
    before = (manager.get_leaf_id(), _ids(manager), store.list_sessions()[0].message_count)

    def disk_full(conn, rows):  # after the entry rows were inserted in this transaction
        raise sqlite_module.sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(sqlite_module, "_insert_text_rows", disk_full)
    with pytest.raises(StorageError) as info:
        manager.append_message(_user("two"))
    assert isinstance(info.value.__cause__, sqlite_module.sqlite3.Error)
    monkeypatch.undo()
    assert (manager.get_leaf_id(), _ids(manager), store.list_sessions()[0].message_count) == before
    ids.append(manager.append_message(_user("three")))
    assert _ids(SessionManager.open(SqliteStore(tmp_path / "s.db"), manager.get_session_id())) == ids


def test_failed_upgrade_at_open_leaves_the_file_and_no_temp(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "old.jsonl"
    path.write_bytes(_v3_bytes())

    def disk_full(fd, data):
        os.write(fd, bytes(data)[:100])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files_module, "write_all", disk_full)  # the upgrade's atomic rewrite
    with pytest.raises(StorageError):
        SessionManager.open_file(path)
    assert path.read_bytes() == _v3_bytes()
    assert _temp_files(tmp_path) == []


# ---------------------------------------------------------------------------- slow: real processes


_APPEND_LOOP = """
    import os, sys
    from sessiontree import SessionManager
    from sessiontree.stores.jsonl.store import JsonlStore
    from sessiontree.stores.sqlite.store import SqliteStore
    from sessiontree.stores import open_store
    kind, where, sid, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    m = SessionManager.open({"jsonl": JsonlStore, "sqlite": SqliteStore, "postgres": open_store}[kind](where), sid)
    i = 0
    while True:
        entry_id = m.append_message({"role": "user", "content": "x" * size + str(i), "timestamp": 1})
        os.write(1, (entry_id + "\\n").encode())  # printed only once committed
        i += 1
"""


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["jsonl", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_kill_9_during_an_append_loop_loses_no_committed_entry(tmp_path: Path, kind: str, request) -> None:
    for round_ in range(3):
        if kind == "postgres":  # the server rolls back the killed client's open transaction
            from sessiontree.stores.postgres.store import PostgresStore

            where = request.getfixturevalue("pg_cluster").url(request.getfixturevalue("pg_cluster").new_database())
        else:
            where = tmp_path / (f"j{round_}" if kind == "jsonl" else f"s{round_}.db")

        def make(where: Path | str = where):
            if kind == "postgres":
                return PostgresStore(str(where))
            return JsonlStore(where) if kind == "jsonl" else SqliteStore(where)

        creator = SessionManager.create(str(tmp_path), store=make())
        first = creator.append_message(_user("start"))
        sid = creator.get_session_id()
        child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(_APPEND_LOOP), kind, str(where),
                                  sid, "1000000"], stdout=subprocess.PIPE, text=True)
        first_report = child.stdout.readline()  # the loop is running
        time.sleep(0.1 + 0.2 * round_)
        child.kill()
        committed = (first_report + child.stdout.read()).split()
        child.wait()
        assert committed, child.returncode
        creator.get_session_store().close()
        try:
            reopened_store = make()
            reopened = _ids(SessionManager.open(reopened_store, sid))
            reopened_store.close()
        except InvalidSessionError as exc:  # JSONL only: a torn record, rejected, then repaired
            assert kind == "jsonl" and exc.line is not None
            fixed = tmp_path / f"fixed{round_}.jsonl"
            repair_file(exc.path, fixed)
            reopened = [e["id"] for e in read_file(fixed).entries]
        assert reopened[0] == first
        # Everything that returned is there; at most the one in flight committed without a report.
        assert reopened[1:1 + len(committed)] == committed
        assert len(reopened) - 1 - len(committed) in (0, 1)
        if kind == "jsonl":
            assert _temp_files(where) == []


_OPEN_AND_APPEND = """
    import os, sys
    from sessiontree import SessionManager
    m = SessionManager.open_file(sys.argv[1])
    for i in range(int(sys.argv[2])):
        print(m.append_message({"role": "user", "content": f"{os.getpid()}-{i}", "timestamp": 1}), flush=True)
"""


@pytest.mark.slow
def test_processes_upgrading_and_appending_the_same_old_file_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    path.write_bytes(_v3_bytes(n=500))
    children = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(_OPEN_AND_APPEND), str(path), "15"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(6)]
    outputs = [child.communicate(timeout=120) for child in children]
    assert all(child.returncode == 0 for child in children), [err for _, err in outputs]
    parsed = read_file(path)
    assert parsed.source_version == 4 and not parsed.upgraded
    appended = [line for out, _ in outputs for line in out.split()]
    assert len(appended) == 90
    ids = [e["id"] for e in parsed.entries]
    assert len(ids) == len(set(ids)) == 500 + 90 and set(appended) <= set(ids)
    assert _temp_files(tmp_path) == []


_RAW_APPENDS = """
    import secrets, sys
    from sessiontree.stores.jsonl.store import JsonlStore
    store = JsonlStore(sys.argv[1])
    for i in range(150):
        entry_id = secrets.token_hex(4)
        store.append(sys.argv[2], [{"type": "custom", "id": entry_id, "parentId": None,
                                    "timestamp": "2024-01-01T00:00:00.000Z", "customType": "c", "data": i}])
        print(entry_id, flush=True)
"""


@pytest.mark.slow
def test_migrate_while_other_processes_append(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    path.write_bytes(_v3_bytes(n=3000))
    writers = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(_RAW_APPENDS), str(tmp_path), "sess-v3"],
                                stdout=subprocess.PIPE, text=True) for _ in range(3)]
    migrate = _run("""
        import sys
        from sessiontree.format.migrate import migrate_file
        migrate_file(sys.argv[1], backup=False)
    """, str(path))
    appended = [line for w in writers for line in w.communicate(timeout=120)[0].split()]
    assert migrate.returncode == 0, migrate.stderr
    assert all(w.returncode == 0 for w in writers)
    parsed = read_file(path)
    assert not parsed.upgraded and parsed.source_version == 4
    assert len(parsed.entries) == 3000 + 450 and set(appended) <= {e["id"] for e in parsed.entries}
    assert _temp_files(tmp_path) == []


_APPEND_UNTIL_GONE = """
    import sys
    from sessiontree import SessionManager, SessionNotFoundError
    from sessiontree.stores.jsonl.store import JsonlStore
    m = SessionManager.open(JsonlStore(sys.argv[1]), sys.argv[2])
    try:
        while True:
            print(m.append_message({"role": "user", "content": "x" * 1000, "timestamp": 1}), flush=True)
    except SessionNotFoundError:
        print("GONE", flush=True)
"""


@pytest.mark.slow
def test_appends_while_another_process_deletes_the_session(tmp_path: Path, monkeypatch) -> None:
    trash = tmp_path / "trash"
    trash.mkdir()

    def to_trash(path: str) -> None:  # no real trash in tests
        os.rename(path, trash / os.path.basename(path))

    monkeypatch.setattr(jsonl_module, "_send_to_trash", to_trash)
    store_dir = tmp_path / "j"
    victim = SessionManager.create(str(tmp_path), store=JsonlStore(store_dir))
    victim.append_message(_user("0"))
    other = SessionManager.create(str(tmp_path), store=JsonlStore(store_dir))
    other.append_message(_user("other"))
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(_APPEND_UNTIL_GONE), str(store_dir),
                              victim.get_session_id()], stdout=subprocess.PIPE, text=True)
    first_report = child.stdout.readline()  # the loop is running
    time.sleep(0.2)
    other.delete_session(victim.get_session_id())
    lines = (first_report + child.communicate(timeout=60)[0]).split()
    assert len(lines) > 1
    assert lines[-1] == "GONE"
    trashed = b"".join(p.read_bytes() for p in trash.iterdir())
    assert all(entry_id.encode() in trashed for entry_id in lines[:-1])  # every reported append is kept
    assert [p.name for p in store_dir.iterdir()] == [Path(other.get_session_file()).name]  # nothing recreated


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_50_mb_entry_round_trips(tmp_path: Path, kind: str) -> None:
    def make():
        return JsonlStore(tmp_path / "j") if kind == "jsonl" else SqliteStore(tmp_path / "s.db")

    manager = SessionManager.create(str(tmp_path), store=make())
    text = "é" * (25 * 1024 * 1024)  # 50 MB of UTF-8 on one line
    big = manager.append_message(_user(text))
    small = manager.append_message(_user("small"))
    reopened = SessionManager.open(make(), manager.get_session_id())
    assert _ids(reopened) == [big, small]
    assert reopened.get_entry(big)["message"]["content"] == text
    assert make().list_sessions()[0].message_count == 2
