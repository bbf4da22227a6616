"""What is specific to ``PostgresStore`` (the conformance suite in tests/conformance/test_stores.py
covers the rest): schema steps and their advisory lock, refusing foreign or newer databases, the
database enforcing unique ids, prepared statements off for PgBouncer, unix-socket URLs,
connection loss and server restarts, two writers on one session, verify and reindex.

Every test gets a fresh database on the run's throwaway cluster (conftest ``pg_url``);
expected values are worked out by hand.
"""

from __future__ import annotations

import json
import multiprocessing
import re
import threading
import time
import zlib

import pytest

psycopg = pytest.importorskip("psycopg", reason="psycopg 3 is not installed (the postgres extra)")

pytestmark = pytest.mark.postgres

from builders import custom, header  # noqa: E402
from sessiontree import SessionManager  # noqa: E402
from sessiontree.errors import (  # noqa: E402
    CorruptEntryError,
    InvalidSessionError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
    StoreOpenError,
)
from sessiontree.stores import open_store  # noqa: E402
from sessiontree.stores.postgres import connection as pg_connection  # noqa: E402
from sessiontree.stores.postgres.store import MIGRATIONS, PostgresStore  # noqa: E402


def _raw(url: str):
    return psycopg.connect(url, autocommit=True)


def _tables(url: str) -> list[str]:
    with _raw(url) as conn:
        return [r[0] for r in conn.execute(
            "SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public' AND relkind IN ('r', 'S', 'i') ORDER BY relname")]


def _steps(url: str) -> list[str]:
    with _raw(url) as conn:
        return [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY name")]


# ---------------------------------------------------------------------------------- schema


def _open_and_close(url: str, barrier) -> str:
    barrier.wait()
    try:
        PostgresStore(url).close()
        return "ok"
    except Exception as exc:  # reported to the parent, which asserts on it
        return repr(exc)


def test_processes_opening_a_new_database_at_once_all_succeed(pg_url):
    """The failure of other projects (parallel setup raising unique violations) does
    not happen: the steps run once, under the advisory lock, and every opener succeeds."""
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        barrier = manager.Barrier(6)
        with context.Pool(6) as pool:
            results = pool.starmap(_open_and_close, [(pg_url, barrier)] * 6)
    assert results == ["ok"] * 6
    assert _steps(pg_url) == [name for name, _ in MIGRATIONS]


def test_threads_opening_a_new_database_at_once_all_succeed(pg_url):
    results: list[str] = []
    start = threading.Barrier(5)

    def work() -> None:
        start.wait()
        try:
            PostgresStore(pg_url).close()
            results.append("ok")
        except Exception as exc:
            results.append(repr(exc))

    threads = [threading.Thread(target=work) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == ["ok"] * 5
    assert _steps(pg_url) == [name for name, _ in MIGRATIONS]


def test_another_applications_database_is_refused_and_left_alone(pg_url):
    with _raw(pg_url) as conn:
        conn.execute("CREATE TABLE customers (id int PRIMARY KEY, name text)")
        conn.execute("INSERT INTO customers VALUES (1, 'a')")
    before = _tables(pg_url)
    for kwargs in ({}, {"readonly": True}, {"create": False}):
        with pytest.raises(StoreOpenError, match=r"another application's objects \(table public\.customers\)"):
            PostgresStore(pg_url, **kwargs)
    assert _tables(pg_url) == before == ["customers", "customers_pkey"]


@pytest.mark.parametrize(("sql", "shown"), [
    ("CREATE SCHEMA billing; CREATE TABLE billing.invoices (id int)", "table billing.invoices"),
    ("CREATE SEQUENCE public.order_numbers", "sequence public.order_numbers"),
    ("CREATE FUNCTION public.answer() RETURNS int LANGUAGE sql AS 'SELECT 42'", "function public.answer()"),
    ("CREATE TYPE public.mood AS ENUM ('ok', 'sad')", "type public.mood"),
    ("CREATE SCHEMA app; CREATE VIEW app.v AS SELECT 1 AS one", "view app.v"),
])
def test_a_database_with_any_object_we_did_not_create_is_refused(pg_url, sql, shown):
    """Not only tables in our schema: another schema's tables, a sequence, a function or a
    type in ``public`` are someone else's too; nothing of ours is created beside them."""
    with _raw(pg_url) as conn:
        conn.execute(sql)
    for kwargs in ({}, {"readonly": True}, {"create": False}):
        with pytest.raises(StoreOpenError, match=f"another application's objects \\({re.escape(shown)}\\)"):
            PostgresStore(pg_url, **kwargs)
    with _raw(pg_url) as conn:
        assert conn.execute("SELECT to_regclass('public.schema_migrations')").fetchone() == (None,)


def test_an_extension_installed_beforehand_is_not_another_applications(pg_url):
    """Extension members (here ``pg_trgm``'s functions in ``public``) do not make a
    database foreign: a fresh database may inherit them from its template."""
    with _raw(pg_url) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    with PostgresStore(pg_url) as store:
        store.create(header("0190f000-0000-7000-8000-000000000001"))
    with PostgresStore(pg_url) as store:
        assert store.session_ids() == ["0190f000-0000-7000-8000-000000000001"]


def test_a_rails_style_schema_migrations_table_is_not_taken_for_ours(pg_url):
    with _raw(pg_url) as conn:
        conn.execute("CREATE TABLE schema_migrations (version varchar PRIMARY KEY)")
    with pytest.raises(StoreOpenError, match="another application's objects"):
        PostgresStore(pg_url)
    with _raw(pg_url) as conn:
        assert [r[0] for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'schema_migrations'")] == [
            "version"]


def test_a_step_this_version_does_not_know_is_refused(pg_url):
    PostgresStore(pg_url).close()
    with _raw(pg_url) as conn:
        conn.execute("INSERT INTO schema_migrations (name) VALUES ('m999_from_the_future')")
    before = _tables(pg_url)
    for kwargs in ({}, {"readonly": True}):
        with pytest.raises(StoreOpenError, match="m999_from_the_future"):
            PostgresStore(pg_url, **kwargs)
    assert _tables(pg_url) == before


def test_a_missing_step_is_applied_at_the_next_writable_open(pg_url, monkeypatch):
    """A database written by an older version: the new step runs once, recorded."""
    calls: list[str] = []

    def m900_test_step(conn) -> None:
        calls.append("ran")
        conn.execute("CREATE TABLE test_step (x int)")

    PostgresStore(pg_url).close()
    monkeypatch.setattr(pg_connection, "MIGRATIONS", [*MIGRATIONS, ("m900_test_step", m900_test_step)])
    reader = PostgresStore(pg_url, readonly=True)  # a reader of the older schema changes nothing
    reader.close()
    assert calls == [] and "test_step" not in _tables(pg_url)
    PostgresStore(pg_url).close()
    PostgresStore(pg_url).close()
    assert calls == ["ran"]
    assert _steps(pg_url)[-1] == "m900_test_step" and "test_step" in _tables(pg_url)


def test_empty_database_readonly_and_create_false_change_nothing(pg_url):
    for kwargs in ({"readonly": True}, {"create": False}):
        store = PostgresStore(pg_url, **kwargs)
        assert store.list_sessions() == [] and store.session_ids() == [] and not store.exists("x")
        with pytest.raises(StorageError, match=r"read-only|not initialised"):
            store.create(header("s1"))
        store.close()
    assert _tables(pg_url) == []
    store = open_store(pg_url)  # the default: create
    store.create(header("s1"), [custom("e1")])
    store.close()
    reader = open_store(pg_url, readonly=True)
    assert [e["id"] for e in reader.load("s1").entries] == ["e1"]
    with pytest.raises(StorageError, match="read-only"):
        reader.append("s1", [custom("e2", "e1")])
    reader.close()


def test_unreachable_server_is_a_store_open_error_without_the_password(pg_cluster):
    url = f"postgresql://postgres:hunter2@127.0.0.1:{pg_cluster.port}/no_such_database"
    with pytest.raises(StoreOpenError) as info:
        open_store(url)
    assert "hunter2" not in str(info.value) and "no_such_database" in str(info.value)


# ------------------------------------------------------------------------------ writes


def test_the_database_enforces_unique_entry_ids(pg_url):
    store = PostgresStore(pg_url)
    store.create(header("s1"), [custom("e1")])
    store.create(header("s2"), [custom("e1")])  # per session: another session may use it
    with pytest.raises(InvalidSessionError, match='already used in session s1'):
        store.append("s1", [custom("e2"), custom("e1")])
    assert [e["id"] for e in store.load("s1").entries] == ["e1"]
    with _raw(pg_url) as conn, pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute("INSERT INTO entries (session_id, seq, id, type, timestamp, json, crc)"
                     " VALUES ('s1', 7, 'e1', 'custom', 't', '\\x7b7d', 0)")
    with pytest.raises(SessionExistsError):
        store.create(header("s1"))
    store.close()


def test_ids_postgres_text_cannot_hold_are_refused_and_copies_are_replaced(pg_url):
    store = PostgresStore(pg_url)
    with pytest.raises(InvalidSessionError, match="cannot be stored in PostgreSQL"):
        store.create(header("bad\x00id"))
    with pytest.raises(InvalidSessionError, match="cannot be stored in PostgreSQL"):
        store.create(header("s1"), [custom("e\ud83d")])
    assert store.session_ids() == []
    odd = header("s1", cwd="/w/\ud83d")
    store.create(odd, [custom("e1")])
    [row] = store.list_sessions(cwd="/w/\ud83d")
    assert row.cwd == "/w/\ud83d"  # exact, from the header
    assert store.find_most_recent(cwd="/w/\ud83d") == "s1"
    assert store.list_sessions(cwd="/w/\ufffd") == []  # the lossy copy never matches by itself
    with _raw(pg_url) as conn:
        assert conn.execute("SELECT cwd FROM sessions").fetchone()[0] == "/w/\ufffd"
    # No drift (the copy is lossy by design); the file rules flag the surrogate, as on every store.
    assert [(p.code, p.line) for p in store.verify()] == [("lone-surrogate", 1)]
    store.close()


def test_prepared_statements_can_be_switched_off_for_pgbouncer(pg_url):
    for url, kwargs, expected in ((pg_url, {}, 5), (pg_url + "?prepare_threshold=none", {}, None),
                                  (pg_url + "?prepare_threshold=2", {}, 2), (pg_url, {"prepare_threshold": None}, None)):
        # One pooled connection: the statements counted below are the ones the appends ran
        # (with several, the connection checked out may not have run them).
        store = PostgresStore(url, pool_size=1, **kwargs)
        assert store.prepare_threshold == expected
        assert "prepare_threshold" not in store.url
        store.create(header("p"), [custom("e0")])
        for i in range(1, 8):
            store.append("p", [custom(f"e{i}", f"e{i - 1}")])
        with store.db.pool().connection() as conn:
            assert conn.prepare_threshold == expected
            prepared = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0]
        assert (prepared == 0) == (expected is None)
        store.delete("p")
        store.close()


def test_unix_socket_url(pg_cluster, pg_url):
    name = pg_url.rsplit("/", 1)[1]
    url = pg_cluster.url(name, socket_host=True)
    assert url.startswith("postgresql:///") and "host=/" in url
    store = open_store(url)
    store.create(header("s1"), [custom("e1")])
    assert store.url == url and [r.id for r in store.list_sessions()] == ["s1"]
    store.close()


def test_two_writers_on_two_hosts_extend_one_session(pg_url):
    """Each writer appends after its own leaf: no entry lost, no id repeated, both
    continuations in the tree, each writer's leaf its own (docs/postgres.md)."""
    first = SessionManager.create("/w", store=PostgresStore(pg_url))
    root = first.append_message({"role": "user", "content": "start", "timestamp": 1})
    sid = first.get_session_id()
    second = SessionManager.open(PostgresStore(pg_url), sid)  # "another host"
    a, b = [], []
    for i in range(5):
        a.append(first.append_message({"role": "user", "content": f"a{i}", "timestamp": 1}))
        b.append(second.append_message({"role": "user", "content": f"b{i}", "timestamp": 1}))
    assert first.get_leaf_id() == a[-1] and second.get_leaf_id() == b[-1]
    reader = SessionManager.open(PostgresStore(pg_url), sid)
    entries = reader.get_entries()
    assert [e["id"] for e in entries] == [root] + [x for pair in zip(a, b, strict=False) for x in pair]  # commit order
    assert len({e["id"] for e in entries}) == 11
    assert [c["id"] for c in reader.get_children(root)] == [a[0], b[0]]  # two continuations
    assert [e["id"] for e in reader.get_branch(a[-1])] == [root, *a]
    assert [e["id"] for e in reader.get_branch(b[-1])] == [root, *b]
    assert reader.get_leaf_id() == b[-1]  # a fresh open: the last entry written
    for manager in (first, second, reader):
        manager.get_session_store().close()


def test_concurrent_appends_to_one_session_from_two_stores_lose_nothing(pg_url):
    setup = PostgresStore(pg_url)
    setup.create(header("s"), [custom("root")])
    stores = [PostgresStore(pg_url) for _ in range(3)]

    def work(w: int) -> None:
        for i in range(40):
            stores[w].append("s", [custom(f"w{w}-{i:02d}", "root"), custom(f"w{w}-{i:02d}b", f"w{w}-{i:02d}")])

    threads = [threading.Thread(target=work, args=(w,)) for w in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = [e["id"] for e in setup.load("s").entries]
    assert len(ids) == 1 + 3 * 80 == len(set(ids))
    for w in range(3):  # each call's two entries stay together, each writer's calls in order
        mine = [i for i in ids if i.startswith(f"w{w}-")]
        assert mine == [f"w{w}-{i:02d}{s}" for i in range(40) for s in ("", "b")]
        assert all(ids[ids.index(f"w{w}-{i:02d}") + 1] == f"w{w}-{i:02d}b" for i in range(40))
    for store in (setup, *stores):
        store.close()


# ------------------------------------------------------------------------- faults


def _backends(url: str, name: str = "sessiontree") -> list[int]:
    with _raw(url) as conn:
        return [r[0] for r in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s AND datname = current_database()",
            (name,))]


def test_lost_connections_surface_as_storage_error_and_the_pool_recovers(pg_url):
    store = PostgresStore(pg_url, timeout=5)
    manager = SessionManager.create("/w", store=store)
    manager.append_message({"role": "user", "content": "one", "timestamp": 1})
    sid = manager.get_session_id()
    # Between calls: the pool notices the dead connection and hands out a new one.
    with _raw(pg_url) as conn:
        for pid in _backends(pg_url):
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    deadline = time.monotonic() + 5
    while _backends(pg_url) and time.monotonic() < deadline:  # termination is asynchronous
        time.sleep(0.02)
    time.sleep(0.05)  # and the closed socket reaches us
    manager.append_message({"role": "user", "content": "two", "timestamp": 1})
    # During a call: the append waits on the session's row lock, then its backend dies.
    blocker = _raw(pg_url)
    blocker.autocommit = False
    blocker.execute("SELECT 1 FROM sessions WHERE id = %s FOR UPDATE", (sid,))
    errors: list[BaseException] = []
    before = [e["id"] for e in manager.get_entries()]
    leaf = manager.get_leaf_id()

    def append() -> None:
        try:
            manager.append_message({"role": "user", "content": "three", "timestamp": 1})
        except StorageError as exc:
            errors.append(exc)

    worker = threading.Thread(target=append)
    worker.start()
    deadline = time.monotonic() + 5
    with _raw(pg_url) as conn:
        while time.monotonic() < deadline:
            waiting = conn.execute("SELECT pid FROM pg_stat_activity WHERE application_name = 'sessiontree'"
                                   " AND wait_event_type = 'Lock'").fetchall()
            if waiting:
                conn.execute("SELECT pg_terminate_backend(%s)", (waiting[0][0],))
                break
            time.sleep(0.02)
    worker.join(10)
    blocker.close()
    assert len(errors) == 1 and "append failed" in str(errors[0])
    assert [e["id"] for e in manager.get_entries()] == before and manager.get_leaf_id() == leaf
    retried = manager.append_message({"role": "user", "content": "three", "timestamp": 1})
    assert [e["id"] for e in store.load(sid).entries] == [*before, retried]
    store.close()


@pytest.mark.slow
def test_server_stopped_during_a_write_then_restarted(pg_cluster, pg_url):
    """The server stops while an append waits inside its transaction: StorageError, the
    manager unchanged; after the restart the retry succeeds. Then a restart between two
    appends: the next append simply works."""
    store = PostgresStore(pg_url, timeout=3)
    manager = SessionManager.create("/w", store=store)
    manager.append_message({"role": "user", "content": "one", "timestamp": 1})
    sid = manager.get_session_id()
    blocker = _raw(pg_url)
    blocker.autocommit = False
    blocker.execute("SELECT 1 FROM sessions WHERE id = %s FOR UPDATE", (sid,))
    before, leaf = [e["id"] for e in manager.get_entries()], manager.get_leaf_id()
    errors: list[BaseException] = []

    def append() -> None:
        try:
            manager.append_message({"role": "user", "content": "two", "timestamp": 1})
        except StorageError as exc:
            errors.append(exc)

    worker = threading.Thread(target=append)
    worker.start()
    time.sleep(0.5)  # the append is waiting for the row lock, inside its transaction
    pg_cluster.stop("fast")
    worker.join(15)
    try:
        blocker.close()
    except psycopg.Error:
        pass
    assert len(errors) == 1, errors
    assert [e["id"] for e in manager.get_entries()] == before and manager.get_leaf_id() == leaf
    with pytest.raises(StorageError):  # still down: a clear error, not a hang
        manager.append_message({"role": "user", "content": "two", "timestamp": 1})
    assert [e["id"] for e in manager.get_entries()] == before
    pg_cluster.start()
    second = manager.append_message({"role": "user", "content": "two", "timestamp": 1})
    pg_cluster.restart("fast")  # between two appends
    third = manager.append_message({"role": "user", "content": "three", "timestamp": 1})
    assert [e["id"] for e in store.load(sid).entries] == [*before, second, third]
    store.close()


# ------------------------------------------------------------------- verify, reindex


def test_load_and_read_skeleton_refuse_a_tampered_header(pg_url):
    """The header is read and CRC-checked in one place for both reads: bytes changed
    behind the store's back (CRC unchanged) are refused by load and read_skeleton alike."""
    store = PostgresStore(pg_url)
    store.create(header("s1"), [custom("e1")])
    with _raw(pg_url) as conn:
        conn.execute("UPDATE sessions SET header_json = '\\x7b7d' WHERE id = 's1'")  # '{}', CRC unchanged
    for read in (store.load, store.read_skeleton):
        with pytest.raises(CorruptEntryError) as info:
            read("s1")
        assert (info.value.line, info.value.entry_id) == (1, None)
    with pytest.raises(SessionNotFoundError):
        store.read_skeleton("nope")
    store.close()


def test_read_entries_checks_each_record_like_load(pg_url):
    store = PostgresStore(pg_url)
    store.create(header("s1"), [custom("e1"), custom("e2", "e1"), custom("e3", "e2")])
    # e2 (line 3) parses but is no valid entry: a message without its message
    bad = b'{"type":"message","id":"e2","parentId":"e1","timestamp":"2026-01-01T00:00:00.000Z"}'
    with _raw(pg_url) as conn:
        conn.execute("UPDATE entries SET json = %s, crc = %s WHERE session_id = 's1' AND id = 'e2'",
                     (bad, zlib.crc32(bad)))
    with pytest.raises(InvalidSessionError) as by_id:
        store.read_entries("s1", ["e3", "e2"])
    with pytest.raises(InvalidSessionError) as whole:
        store.load("s1")
    assert by_id.value.line == whole.value.line == 3 and str(by_id.value) == str(whole.value)
    assert store.read_entries("s1", ["e3", "e1"]) == [custom("e3", "e2"), custom("e1")]
    with _raw(pg_url) as conn:  # e3 (line 4): '{}', CRC unchanged
        conn.execute("UPDATE entries SET json = '\\x7b7d' WHERE session_id = 's1' AND id = 'e3'")
    with pytest.raises(CorruptEntryError) as crc:  # a checksum failure anywhere wins, as in load
        store.read_entries("s1", ["e2", "e3"])
    assert (crc.value.entry_id, crc.value.line) == ("e3", 4)
    store.close()


def test_verify_finds_damage_and_reindex_repairs_drift(pg_url):
    store = PostgresStore(pg_url)
    store.create(header("s1"), [{"type": "message", "id": "e1", "parentId": None, "timestamp": "t",
                                 "message": {"role": "user", "content": "hello there", "timestamp": 5}}])
    store.create(header("s2"), [custom("e1")])
    with _raw(pg_url) as conn:
        conn.execute("UPDATE sessions SET message_count = 9, listing = '\\x7b7d' WHERE id = 's1'")
        conn.execute("DELETE FROM message_texts WHERE session_id = 's1'")
        conn.execute("UPDATE entries SET json = '\\x7b7d' WHERE session_id = 's2'")  # '{}', CRC unchanged
    problems = store.verify()
    assert [(p.code, p.session_id, p.line) for p in problems] == [("metadata-drift", "s1", None),
                                                                   ("hash-mismatch", "s2", 2)]
    assert "message_count 9 (rebuilt: 1)" in problems[0].message
    with pytest.raises(CorruptEntryError) as info:
        store.load("s2")
    assert (info.value.entry_id, info.value.line) == ("e1", 2)
    assert store.reindex("s1") == 1
    assert store.verify()[0].code == "hash-mismatch"  # only the damage reindex cannot repair
    [row] = [r for r in store.list_sessions() if r.id == "s1"]
    assert (row.message_count, row.first_message, row.all_messages_text) == (1, "hello there", "hello there")
    assert store.reindex("nope") == 0
    store.close()


@pytest.mark.parametrize("text", [b"{}", b'{"type":"session","version":4,"id":"s2","cwd":"/w"}'])
def test_a_tampered_header_row_with_a_matching_checksum_is_refused_by_every_read(pg_url, text):
    """``{}`` or another session's header, its CRC-32 updated: every read of the session
    raises InvalidSessionError at line 1 instead of handing out a header without ``id``."""
    with PostgresStore(pg_url) as store:
        store.create(header("s1"), [custom("e1", None)])
    with _raw(pg_url) as conn:
        conn.execute("UPDATE sessions SET header_json = %s, header_crc = %s", (text, zlib.crc32(text)))
    with PostgresStore(pg_url) as store:
        for read in (store.load, store.read_skeleton, store.read_outline):
            with pytest.raises(InvalidSessionError, match="stored header") as caught:
                read("s1")
            assert caught.value.line == 1


@pytest.mark.parametrize(("sql", "expected", "words"), [
    ("UPDATE sessions SET header_json = (SELECT header_json FROM sessions WHERE id = 's2'),"
     " header_crc = (SELECT header_crc FROM sessions WHERE id = 's2') WHERE id = 's1'",
     [("invalid-record", "s1")], "is not the key it is stored under"),
    ("DELETE FROM usage_ledger", [("metadata-drift", "s1"), ("metadata-drift", "s2")],
     "usage_ledger (0 rows; rebuilt: 1)"),
    ("DELETE FROM search_entries", [("metadata-drift", "s1"), ("metadata-drift", "s2")],
     "search_entries (0 rows; rebuilt: 1)"),
    ("UPDATE usage_ledger SET cost_nanos = cost_nanos + 1 WHERE session_id = 's2'", [("metadata-drift", "s2")],
     "usage_ledger (1 of 1 rows differ from a rebuild)"),
    ("SET session_replication_role = replica; INSERT INTO entries (session_id, seq, id, parent_id, type,"
     " timestamp, json, crc) SELECT 'gone', seq, id, parent_id, type, timestamp, json, crc FROM entries"
     " WHERE session_id = 's2'", [("orphan-rows", None)],
     "entries: 2 rows belong to no stored session (such as 'gone')"),
])
def test_verify_finds_drift_in_copied_and_derived_data(pg_url, sql, expected, words):
    """Damage the checksums cannot see: a header row of another session, the usage
    ledger or search index emptied or changed, entry rows of no session. Reindex repairs
    all but the last."""
    from builders import billed_assistant_cost

    with PostgresStore(pg_url) as store:
        store.create(header("s1"), [msg_entry("e1", "first"),
                                    billed_assistant_cost("e2", "e1", "2026-02-01T09:00:01.000Z", 10, 0.5)])
        store.create(header("s2"), [msg_entry("f1", "other"),
                                    billed_assistant_cost("f2", "f1", "2026-02-01T09:00:02.000Z", 20, 0.25)])
        assert store.verify() == []
    with _raw(pg_url) as conn:
        conn.execute(sql)
    with PostgresStore(pg_url, readonly=True) as store:
        problems = store.verify()
    assert [(p.code, p.session_id) for p in problems] == expected
    assert any(words in p.message for p in problems), problems
    if expected[0][0] == "metadata-drift":
        with PostgresStore(pg_url) as store:
            store.reindex()
            assert store.verify() == []


def msg_entry(entry_id: str, text: str) -> dict:
    """A user message with no parent."""
    return {"type": "message", "id": entry_id, "parentId": None, "timestamp": "2026-02-01T09:00:00.000Z",
            "message": {"role": "user", "content": text, "timestamp": 5}}


def test_a_listing_state_holding_a_whole_long_first_message_is_cut_and_no_drift(pg_url):
    # A row written before 0.2.0 keeps the whole first message in ``sessions.listing``
    # (synthetic: no corpus file has one over 1,000 characters). The listing shows the
    # same prefix as a row written now, check sees no drift, reindex stores the prefix
    # (docs/listing.md, "First message").
    store = PostgresStore(pg_url)
    whole = "x" * 3_000
    store.create(header("s1"), [{"type": "message", "id": "e1", "parentId": None, "timestamp": "t",
                                 "message": {"role": "user", "content": whole, "timestamp": 5}}])
    with _raw(pg_url) as conn:
        state = conn.execute("SELECT convert_from(listing, 'UTF8')::jsonb FROM sessions WHERE id = 's1'").fetchone()[0]
        assert state["firstMessage"] == "x" * 999 + "…"
        state["firstMessage"] = whole
        conn.execute("UPDATE sessions SET listing = convert_to(%s::jsonb::text, 'UTF8') WHERE id = 's1'",
                     (json.dumps(state),))
    [row] = store.list_sessions()
    assert row.first_message == "x" * 999 + "…"
    assert [p.code for p in store.verify() if p.code == "metadata-drift"] == []
    assert store.reindex("s1") == 1
    with _raw(pg_url) as conn:
        state = conn.execute("SELECT convert_from(listing, 'UTF8')::jsonb FROM sessions WHERE id = 's1'").fetchone()[0]
    assert len(state["firstMessage"]) == 1_000
    store.close()
