"""Never write what is not ours: store opening modes, foreign and damaged
databases, read-only stores, stale temporary files, and verification (``check --store``).

Expected values are worked out by hand: a foreign or read-only store must be left
byte for byte as it was (sha256 of the file and of any ``-wal``/``-shm`` beside it),
and corruption planted in a stored record must be reported with its session, entry
id and line, never exported as if it were the original.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import pytest

from builders import user_entry as msg
from builders import work_header as header
from cli_support import cli_runner, run_cli
from sessiontree.cli import cli
from sessiontree.errors import (
    CorruptEntryError,
    InvalidSessionError,
    StorageError,
    StoreOpenError,
)
from sessiontree.format import jsonio
from sessiontree.stores import JsonlStore, SqliteStore, open_store
from sessiontree.stores.jsonl import writes as jsonl_module
from sessiontree.stores.sqlite import connection as sqlite_connection
from sessiontree.stores.sqlite import store as sqlite_module

CREATED = "2026-02-01T09:00:00.000Z"


def digest(path: Path) -> dict[str, str | None]:
    """sha256 of the file and of its -wal/-shm (None when absent)."""
    out: dict[str, str | None] = {}
    for suffix in ("", "-wal", "-shm", "-journal"):
        name = Path(str(path) + suffix)
        out[suffix or "db"] = hashlib.sha256(name.read_bytes()).hexdigest() if name.exists() else None
    return out


_runner = cli_runner


def run(store: str | None, *args: str, code: int = 0):
    return run_cli(store, *args, code=code, one_error_line=True)


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("SESSIONTREE_STORE", f"sqlite:///{tmp_path / 'env-default.db'}")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(jsonl_module, "_send_to_trash", lambda path: os.unlink(path))


def session_file(tmp_path: Path, session_id: str, text: str = "hello") -> Path:
    path = tmp_path / f"{session_id}.jsonl"
    path.write_bytes(jsonio.dumps(header(session_id)) + b"\n" + jsonio.dumps(msg("e1", None, text)) + b"\n"
                     + jsonio.dumps(msg("e2", "e1", "second")) + b"\n")
    return path


def foreign_db(path: Path, wal: bool = False) -> None:
    raw = sqlite3.connect(path)
    if wal:
        raw.execute("PRAGMA journal_mode = WAL")
    raw.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    raw.execute("INSERT INTO customers (name) VALUES ('Ada'), ('Grace')")
    raw.commit()
    raw.close()


# =============================================================================================
# 1. A foreign database is refused and left byte-identical; only writers initialise
# =============================================================================================

@pytest.mark.parametrize("wal", [False, True], ids=["rollback-journal", "wal"])
def test_foreign_database_is_refused_by_every_command_and_left_identical(tmp_path, wal):
    db = tmp_path / "app.db"
    foreign_db(db, wal)
    before = digest(db)
    source = session_file(tmp_path, "s1")
    for args in (["list"], ["show", "s1"], ["export", "s1"], ["import", str(source)], ["delete", "-y", "s1"]):
        result = run(str(db), *args, code=1)
        assert "not a sessiontree store" in result.stderr, result.stderr
        assert digest(db) == before, args
    for kwargs in ({}, {"create": False}, {"readonly": True}):
        with pytest.raises(StoreOpenError, match=r"not a sessiontree store.*customers"):
            open_store(str(db), **kwargs)
        assert digest(db) == before, kwargs
    raw = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    assert raw.execute("SELECT name FROM customers ORDER BY id").fetchall() == [("Ada",), ("Grace",)]
    raw.close()


@pytest.mark.parametrize(("pragma", "shown"), [("application_id = 1095779154", "application_id 1095779154"),
                                             ("user_version = 3", "user_version 3")])
def test_a_table_less_database_another_program_claimed_is_refused(tmp_path, pragma, shown):
    """No tables yet, but ``application_id`` or ``user_version`` set (header bytes 68 and 60):
    another program's file, not an empty one to fill; left byte-identical."""
    db = tmp_path / "claimed.db"
    raw = sqlite3.connect(db)
    raw.execute(f"PRAGMA {pragma}")
    raw.close()
    before = digest(db)
    for kwargs in ({}, {"create": False}, {"readonly": True}):
        with pytest.raises(StoreOpenError, match=f"another program has claimed \\({shown}\\)"):
            open_store(str(db), **kwargs)
        assert digest(db) == before, kwargs
    result = run(str(db), "import", str(session_file(tmp_path, "s1")), code=1)
    assert f"another program has claimed ({shown})" in result.stderr and "Traceback" not in result.stderr
    assert digest(db) == before


def test_our_own_new_database_sets_neither_mark_and_is_reopened(tmp_path):
    """The schema leaves application_id and user_version at 0, so a store we created
    (even one left with no sessions) opens again for writing and reading."""
    db = tmp_path / "ours.db"
    open_store(str(db)).close()
    raw = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    assert raw.execute("PRAGMA application_id").fetchone() == (0,)
    assert raw.execute("PRAGMA user_version").fetchone() == (0,)
    raw.close()
    for kwargs in ({}, {"create": False}, {"readonly": True}):
        open_store(str(db), **kwargs).close()


def test_zero_byte_file_is_not_initialised_by_reading_commands(tmp_path):
    db = tmp_path / "empty.db"
    db.write_bytes(b"")
    assert run(str(db), "list").stdout.strip() == "No sessions."
    run(str(db), "show", "x", code=1)
    assert db.read_bytes() == b""
    assert not os.path.exists(str(db) + "-wal") and not os.path.exists(str(db) + "-shm")
    store = open_store(str(db), readonly=True)
    assert store.list_sessions() == [] and store.session_ids() == []
    with pytest.raises(StorageError, match="read-only"):
        store.create(header("s1"))
    store.close()
    assert db.read_bytes() == b""
    # A writing command (import) may initialise it.
    run(str(db), "import", str(session_file(tmp_path, "s1")))
    assert os.path.getsize(db) > 0
    assert [r.id for r in open_store(str(db), readonly=True).list_sessions()] == ["s1"]


def test_library_writable_open_initialises_an_empty_file_but_not_with_create_false(tmp_path):
    empty = tmp_path / "a.db"
    empty.write_bytes(b"")
    store = SqliteStore(empty, create=False)  # an existing but empty file: no tables made
    assert store.session_ids() == []
    with pytest.raises(StorageError, match="not initialised"):
        store.create(header("s1"))
    store.close()
    assert empty.read_bytes() == b""
    store = SqliteStore(empty)  # create=True: the writer's default may initialise it
    store.create(header("s1"))
    store.close()
    assert [r.id for r in SqliteStore(empty, readonly=True).list_sessions()] == ["s1"]


def test_reading_commands_do_not_create_or_change_a_sessiontree_database(tmp_path):
    db = tmp_path / "s.db"
    run(str(db), "import", str(session_file(tmp_path, "s1")))
    before = digest(db)["db"]
    for args in (["list"], ["show", "s1"], ["export", "s1"], ["context", "s1"], ["check", "--store"]):
        run(str(db), *args)
        assert digest(db) == {"db": before, "-wal": None, "-shm": None, "-journal": None}, args
    missing = tmp_path / "missing.db"
    run(str(missing), "list", code=1)
    assert not missing.exists()


# =============================================================================================
# 2. Entry hashes, verification and damaged databases
# =============================================================================================

MARKER = "the-quick-brown-fox-jumps"


def _stored_db(tmp_path: Path) -> Path:
    db = tmp_path / "s.db"
    store = SqliteStore(db)
    store.create(header("s1"), [msg("e1", None, "first"), msg("e2", "e1", MARKER), msg("e3", "e2", "third")])
    store.create(header("s2"), [msg("f1", None, "other")])
    store.close()
    assert not os.path.exists(str(db) + "-wal")  # checkpointed on close: the file holds every row
    return db


def _flip(path: Path, needle: bytes, replacement: bytes) -> None:
    data = path.read_bytes()
    assert data.count(needle) == 1, data.count(needle)
    path.write_bytes(data.replace(needle, replacement))


def test_silently_corrupted_entry_text_is_detected_on_load_export_and_check(tmp_path):
    db = _stored_db(tmp_path)
    # The entry's JSON text only (message_texts holds a copy of the text for search); still valid JSON.
    _flip(db, b'"content":"' + MARKER.encode(), b'"content":"' + MARKER.replace("fox", "fix").encode())
    store = SqliteStore(db)
    with pytest.raises(CorruptEntryError) as info:
        store.load("s1")
    error = info.value
    assert isinstance(error, InvalidSessionError)
    assert (error.session_id, error.entry_id, error.line) == ("s1", "e2", 3)
    assert "e2" in str(error) and "s1" in str(error)
    assert len(store.load("s2").entries) == 1  # other sessions are unaffected
    store.close()
    result = run(str(db), "export", "s1", code=1)
    assert result.stdout == ""
    assert "e2" in result.stderr
    report = run(str(db), "check", "--store", code=1)
    assert "s1" in report.stdout and "e2" in report.stdout and "hash" in report.stdout
    problems = json.loads(run(str(db), "check", "--store", "--json", code=1).stdout)["problems"]
    assert [(p["sessionId"], p["line"], p["entryId"], p["code"]) for p in problems] == [
        ("s1", 3, "e2", "hash-mismatch")]


def test_check_store_on_a_healthy_store_and_on_drifted_metadata(tmp_path):
    db = _stored_db(tmp_path)
    out = run(str(db), "check", "--store").stdout
    assert "ok" in out and "2 sessions" in out
    raw = sqlite3.connect(db)
    raw.execute("UPDATE sessions SET message_count = 99 WHERE id = 's2'")
    raw.execute("DELETE FROM message_texts WHERE session_id = 's1' AND seq = 0")
    raw.commit()
    raw.close()
    report = json.loads(run(str(db), "check", "--store", "--json", code=1).stdout)
    codes = sorted((p["sessionId"], p["code"]) for p in report["problems"])
    assert codes == [("s1", "metadata-drift"), ("s2", "metadata-drift")]
    assert any("message_count" in p["message"] for p in report["problems"])
    # check --store without a value checks the selected store ($SESSIONTREE_STORE here).
    os.environ["SESSIONTREE_STORE"] = f"sqlite:///{db}"
    assert run(None, "check", "--store", code=1).stdout.count("metadata-drift") == 2


def _usage_db(tmp_path: Path) -> Path:
    """Two sessions with text and billed calls, the search index merged (nothing pending)."""
    from builders import billed_assistant_cost

    db = tmp_path / "u.db"
    with SqliteStore(db) as store:
        store.create(header("s1"), [msg("e1", None, "first"),
                                    billed_assistant_cost("e2", "e1", "2026-02-01T09:00:01.000Z", 10, 0.5)])
        store.create(header("s2"), [msg("f1", None, "other"),
                                    billed_assistant_cost("f2", "f1", "2026-02-01T09:00:02.000Z", 20, 0.25)])
        store.settle_derived()
    return db


@pytest.mark.parametrize(("sql", "expected", "words"), [
    # The header of s1 replaced by s2's, its checksum recomputed.
    ("UPDATE sessions SET header_json = (SELECT header_json FROM sessions WHERE id = 's2'),"
     " header_crc = (SELECT header_crc FROM sessions WHERE id = 's2') WHERE id = 's1'",
     [("s1", "invalid-record")], "is not the key it is stored under"),
    # The usage tables emptied: s1's and s2's ledger rows, and usage_calls against the (empty) ledger.
    ("DELETE FROM usage_ledger", [("s1", "metadata-drift"), ("s2", "metadata-drift"), (None, "metadata-drift")],
     "usage_ledger (0 rows; rebuilt: 1)"),
    ("DELETE FROM usage_calls; DELETE FROM usage_rollup", [(None, "metadata-drift")], "usage_calls (2 rows differ"),
    # The search index emptied: both sessions' merged rows are missing.
    ("DELETE FROM search_entries", [("s1", "metadata-drift"), ("s2", "metadata-drift")],
     "search_entries (0 rows; rebuilt: 1)"),
    # A rollup cost changed: one rollup row differs (2 rows: the stored and the summed one).
    ("UPDATE usage_rollup SET cost_nanos = cost_nanos + 1 WHERE cost_nanos = 500000000",
     [(None, "metadata-drift")], "usage_rollup (2 rows differ from the sums of usage_calls)"),
    # Entry rows of a session that is not stored.
    ("INSERT INTO entries (session_id, seq, id, parent_id, type, timestamp, json, crc)"
     " SELECT 'gone', seq, id, parent_id, type, timestamp, json, crc FROM entries WHERE session_id = 's2'",
     [(None, "orphan-rows")], "entries: 2 rows belong to no stored session (such as 'gone')"),
])
def test_check_store_finds_drift_in_copied_and_derived_data(tmp_path, sql, expected, words):
    """Each damage is invisible to the record checksums; check --store compares with a
    rebuild and names it, and (but for rows of no session) reindex repairs it."""
    db = _usage_db(tmp_path)
    assert "ok (2 sessions)" in run(str(db), "check", "--store").stdout
    raw = sqlite3.connect(db)
    raw.executescript(sql)
    raw.close()
    report = json.loads(run(str(db), "check", "--store", "--json", code=1).stdout)
    assert sorted(((p["sessionId"], p["code"]) for p in report["problems"]), key=str) == sorted(expected, key=str)
    assert any(words in p["message"] for p in report["problems"]), report["problems"]
    if expected[0][1] == "metadata-drift":
        with SqliteStore(db) as store:
            store.reindex()
        assert "ok (2 sessions)" in run(str(db), "check", "--store").stdout


def _damage_a_page(db: Path) -> None:
    data = bytearray(db.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    pages = len(data) // page_size
    for page in range(pages - 1, 1, -1):  # the last b-tree page that is not the schema
        start = page * page_size
        if data[start] in (0x0D, 0x05, 0x0A, 0x02):
            data[start:start + page_size] = b"\x07" * page_size
            break
    db.write_bytes(bytes(data))
    raw = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        assert raw.execute("PRAGMA quick_check").fetchone()[0] != "ok"  # the damage is real
    except sqlite3.DatabaseError:
        pass  # so real that SQLite refuses to run the check at all
    finally:
        raw.close()


def test_import_refuses_a_database_that_fails_quick_check(tmp_path):
    db = tmp_path / "s.db"
    store = SqliteStore(db)
    for n in range(40):
        store.create(header(f"s{n}"), [msg("e1", None, "x" * 300), msg("e2", "e1", "y" * 300)])
    store.close()
    _damage_a_page(db)
    before = digest(db)
    result = run(str(db), "import", str(session_file(tmp_path, "new")), code=1)
    assert "integrity" in result.stderr
    assert digest(db) == before
    report = run(str(db), "check", "--store", code=1)
    assert "integrity" in report.stdout


def test_schema_upgrade_hashes_existing_rows(tmp_path):
    db = _stored_db(tmp_path)
    # Make it a database written before the hashes existed (schema step m001 only).
    raw = sqlite3.connect(db)
    raw.execute("DROP INDEX entries_outline")  # m012's index names the crc column
    raw.execute("ALTER TABLE entries DROP COLUMN crc")
    raw.execute("ALTER TABLE sessions DROP COLUMN header_crc")
    raw.execute("ALTER TABLE sessions DROP COLUMN texts_from")
    raw.execute("DROP TABLE sync_state")
    raw.execute("DROP TABLE provenance")
    raw.execute("DROP TABLE archived_files")
    raw.execute("DELETE FROM schema_migrations WHERE name != 'm001_initial'")
    raw.commit()
    raw.close()
    old = digest(db)["db"]
    with SqliteStore(db, readonly=True) as reader:  # readable as it is, not upgraded
        assert len(reader.load("s1").entries) == 3
    assert digest(db)["db"] == old
    store = SqliteStore(db)  # a writable open applies m002 and hashes the rows it finds
    # Every known step applied (the list itself is pinned in test_stores.py).
    assert store.applied_migrations() == [name for name, _ in sqlite_module.MIGRATIONS]
    assert store.applied_migrations()[:2] == ["m001_initial", "m002_record_crc"]
    store.close()
    _flip(db, b'"content":"' + MARKER.encode(), b'"content":"' + MARKER.replace("fox", "fix").encode())
    with pytest.raises(CorruptEntryError):
        SqliteStore(db).load("s1")


def test_check_store_runs_the_file_checker_over_a_jsonl_store(tmp_path):
    directory = tmp_path / "js"
    store = JsonlStore(directory)
    store.create(header("s1"), [msg("e1", None, "a")])
    store.create(header("s2"), [msg("e1", None, "b")])
    bad = store.location("s2")
    store.close()
    with open(bad, "ab") as handle:
        handle.write(b'{"type":"message","id":"e9"')  # a torn final record
    report = run(f"jsonl:///{directory}", "check", "--store", code=1)
    assert bad in report.stdout
    assert run(f"jsonl:///{directory}", "check", "--store", "--json", code=1).stdout


# =============================================================================================
# 3. Read-only stores
# =============================================================================================

def test_readonly_open_of_an_unwritable_directory_is_immutable_and_changes_nothing(tmp_path, monkeypatch):
    db = _stored_db(tmp_path)
    before = digest(db)
    monkeypatch.setattr(sqlite_connection, "_dir_writable", lambda path: False)
    store = SqliteStore(db, readonly=True)
    assert store.open_mode == "immutable"
    assert sorted(r.id for r in store.list_sessions()) == ["s1", "s2"]
    assert [e["id"] for e in store.load("s1").entries] == ["e1", "e2", "e3"]
    with pytest.raises(StorageError, match="read-only"):
        store.append("s1", [msg("e4", "e3", "more")])
    store.close()
    assert digest(db) == before  # no -wal or -shm was created
    assert run(str(db), "list").stdout.count("/work/a") == 2
    assert digest(db) == before


def _as_unprivileged_child(work) -> tuple[int, str]:
    """Run ``work()`` (returns ``(code, text)``) in a forked child that cannot override
    file permissions: as root it first drops to uid/gid 65534."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            os.close(read_fd)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            code, text = work()
            os.write(write_fd, json.dumps([code, text]).encode())
        except BaseException as exc:
            os.write(write_fd, json.dumps([99, repr(exc)]).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 65536):
        chunks.append(chunk)
    os.close(read_fd)
    os.waitpid(pid, 0)
    code, text = json.loads(b"".join(chunks))
    return code, text


def test_commands_on_a_store_the_user_can_only_read(tmp_path):
    base = Path(tempfile.mkdtemp(prefix="st-ro-"))  # world-traversable, unlike tmp_path under root
    try:
        os.chmod(base, 0o755)
        db = base / "ro.db"
        store = SqliteStore(db)
        store.create(header("s1"), [msg("e1", None, "hello")])
        store.close()
        os.chmod(db, 0o444)
        os.chmod(base, 0o555)
        before = digest(db)

        scratch = tmp_path / "warm.db"
        shutil.copyfile(db, scratch)

        def cli_run(*args):
            # Commands import what they use when they run (docs/architecture.md, "Start-up"), and
            # uid 65534 may not be able to read this interpreter's own library (under /root on a
            # test machine): run the command once here first, on a copy, so its modules are loaded.
            _runner().invoke(cli, ["--store", str(scratch), *args])

            def work():
                result = _runner().invoke(cli, ["--store", str(db), *args])
                return result.exit_code, result.stdout + "\n--stderr--\n" + result.stderr
            return _as_unprivileged_child(work)

        code, text = cli_run("list")
        assert code == 0 and "s1" in text, text
        code, text = cli_run("show", "s1")
        assert code == 0 and "s1" in text, text
        code, text = cli_run("export", "s1")
        assert code == 0 and "hello" in text, text
        code, text = cli_run("name", "s1", "new name")
        assert code == 1, text
        errors = [line for line in text.split("--stderr--")[1].splitlines() if line.strip()]
        assert len(errors) == 1 and "read-only" in errors[0], errors
        assert digest(db) == before
    finally:
        os.chmod(base, 0o755)
        for child in base.iterdir():
            os.chmod(child, 0o644)
            child.unlink()
        base.rmdir()


# =============================================================================================
# 4. Stale temporary files of a JSONL store
# =============================================================================================

def test_first_write_killed_midway_leaves_a_temp_that_the_next_writer_removes(tmp_path):
    directory = tmp_path / "js"
    JsonlStore(directory).close()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            store = JsonlStore(directory)
            real = jsonl_module._write_all

            def half_then_hang(fd, data):
                real(fd, data[: len(data) // 2])
                os.write(ready_w, b"x")
                time.sleep(60)

            jsonl_module._write_all = half_then_hang
            store.create(header("s1"), [msg("e1", None, "z" * 100_000)])
        finally:
            os._exit(1)
    assert os.read(ready_r, 1) == b"x"
    temps = [name for name in os.listdir(directory) if ".tmp-" in name]
    assert len(temps) == 1 and os.path.getsize(directory / temps[0]) > 50_000
    # While the writer lives, its temp file is not stale.
    other = JsonlStore(directory)
    assert [name for name in os.listdir(directory) if ".tmp-" in name] == temps
    assert other.list_sessions() == [] and other.session_ids() == []
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    os.close(ready_r)
    os.close(ready_w)
    assert [name for name in os.listdir(directory) if ".tmp-" in name] == temps  # nothing removed it yet
    reader = JsonlStore(directory, readonly=True)  # a reader never removes anything
    assert reader.list_sessions() == []
    assert [name for name in os.listdir(directory) if ".tmp-" in name] == temps
    JsonlStore(directory).close()  # a writable open cleans up
    assert os.listdir(directory) == []


def test_planted_temp_files_stale_and_live(tmp_path):
    directory = tmp_path / "js"
    directory.mkdir()
    # A dead writer (pid 2**22 + 1 is above pid_max's default and never alive), an old-style
    # name from an earlier version, and a temp file held (flock) by a live writer.
    dead = directory / f"a.jsonl.tmp-{2**22 + 1}-0123456789ab"
    legacy = directory / "b.jsonl.tmp-0123456789ab"
    live = directory / f"c.jsonl.tmp-{os.getpid()}-ba9876543210"
    for path in (dead, legacy, live):
        path.write_bytes(b'{"type":"session"')
    old = time.time() - 3600
    os.utime(legacy, (old, old))
    fd = os.open(live, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        os.utime(live, (old, old))
        JsonlStore(directory).close()
        assert sorted(os.listdir(directory)) == [live.name]
    finally:
        os.close(fd)


# =============================================================================================
# 5. list says how many sessions it could not load
# =============================================================================================

def test_list_reports_sessions_it_could_not_load(tmp_path):
    db = _stored_db(tmp_path)
    store = SqliteStore(db)
    store.create(header("s3"))
    store.close()
    raw = sqlite3.connect(db)
    raw.execute("UPDATE sessions SET header_json = X'7b6e6f74' WHERE id IN ('s2', 's3')")
    raw.commit()
    raw.close()
    result = run(str(db), "list")
    assert "s1" in result.stdout
    assert result.stderr.strip() == "2 sessions could not be loaded; run sessiontree check --store"
    directory = tmp_path / "js"
    js = JsonlStore(directory)
    js.create(header("j1"), [msg("e1", None, "a")])
    js.close()
    (directory / "broken.jsonl").write_bytes(b"not json\n")
    result = run(f"jsonl:///{directory}", "list")
    assert result.stderr.strip() == "1 session could not be loaded; run sessiontree check --store"
    assert run(f"jsonl:///{directory}", "list", "--json").stderr.strip().startswith("1 session")


_LOCK_PROBE = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    # SQLite's SHARED byte range on the database file, which every open WAL connection holds.
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 510, 0x40000002)
    print("free")
except OSError:
    print("held")
"""


def test_a_second_store_on_the_same_file_keeps_the_first_ones_locks(tmp_path):
    """POSIX locks belong to the process: closing any descriptor of the database file
    drops every lock this process holds on it, and SQLite then reads and writes
    unprotected (a concurrent writer's checkpoint overwrote pages under a reader:
    "database disk image is malformed", snapshots that moved). Opening another
    store on the same file (a read-only one, the search's writable handle, the
    viewer) must not read the file through a descriptor of its own."""
    path = str(tmp_path / "s.db")
    SqliteStore(path).close()
    first = SqliteStore(path)

    def probe() -> str:
        return subprocess.run([sys.executable, "-c", _LOCK_PROBE, path], capture_output=True, text=True,
                              check=True).stdout.strip()

    assert probe() == "held"
    second = SqliteStore(path, readonly=True)
    third = SqliteStore(path)
    assert probe() == "held"
    third.close()
    second.close()
    assert probe() == "held"  # the first store is still open
    first.close()
    assert probe() == "free"
    # Once no store of ours holds it, the file is read directly again (and identified).
    again = SqliteStore(path, readonly=True)
    assert again.session_ids() == []
    again.close()


# =============================================================================================
# A header row rewritten by hand with a matching checksum
# =============================================================================================

@pytest.mark.parametrize(("text", "reason"), [
    (b"{}", 'stored header: missing header: first record must have "type": "session"'),
    (b'{"type":"session","version":4,"id":"s2","createdAt":"2026-02-01T09:00:00.000Z","cwd":"/w"}',
     "stored header: its id 's2' is not the session's 's1'"),
])
def test_a_tampered_header_row_is_one_line_for_every_command(tmp_path, text, reason):
    """The bytes match their CRC-32, so only the header check catches them: show, fork,
    name and export say what is wrong and where (line 1), exit 1, and write nothing."""
    db = tmp_path / "s.db"
    run(str(db), "import", str(session_file(tmp_path, "s1")))
    raw = sqlite3.connect(db)
    raw.execute("UPDATE sessions SET header_json = ?, header_crc = ?", (text, zlib.crc32(text)))
    raw.commit()
    raw.close()
    for args in (["show", "s1"], ["fork", "s1"], ["name", "s1", "x"], ["export", "s1"]):
        result = run(str(db), *args, code=1)
        assert result.stderr == f"sessiontree: error: sqlite:///{db}#s1:1: {reason}\n", args
    with SqliteStore(db, readonly=True) as store:
        assert store.session_ids() == ["s1"]
