"""SqliteStore specifics: schema and WAL, migrations and their order, open errors,
transactions and failures, what listing and appending read, reindex, synchronous setting.

Expected values are worked out by hand, never taken from running the code."""

from __future__ import annotations

import os
import sqlite3
from typing import Any

import pytest

from builders import custom_with_data as custom
from builders import role_message as message
from builders import work_header as header
from listing_corpus import build_listing_fixture
from sessiontree.core.listing import InfoAccumulator
from sessiontree.errors import (
    InvalidSessionError,
    SessionExistsError,
    StorageError,
    StoreOpenError,
)
from sessiontree.stores import SqliteStore
from sessiontree.stores.sqlite import store as sqlite_module
from sessiontree.stores.sqlite import writes as sqlite_writes


@pytest.fixture
def sqlite_store(tmp_path):
    store = SqliteStore(tmp_path / "sessions.db")
    yield store
    store.close()


def test_sqlite_wal_and_migrations(tmp_path, sqlite_store):
    path = str(tmp_path / "sessions.db")
    raw = sqlite3.connect(path)
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert [r[0] for r in raw.execute("SELECT name FROM schema_migrations ORDER BY rowid")] == [
            "m001_initial", "m002_record_crc", "m003_sync_state", "m004_search_index",
            "m005_search_pending", "m006_usage_ledger", "m007_usage_rollup", "m008_search_branch", "m009_agent_files",
            "m010_provenance", "m011_bulk_settle", "m012_outline_index", "m013_blobs", "m014_contentless_search",
            "m015_texts_tail", "m016_cache_write_1h", "m017_retention", "m018_tool_calls"]
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"sessions", "entries", "message_texts", "schema_migrations"} <= tables
        sql = raw.execute("SELECT sql FROM sqlite_master WHERE name = 'entries'").fetchone()[0]
        assert "--" in sql  # the schema says why each column exists
    finally:
        raw.close()
    assert sqlite_store.applied_migrations() == ["m001_initial", "m002_record_crc", "m003_sync_state", "m004_search_index",
            "m005_search_pending", "m006_usage_ledger", "m007_usage_rollup", "m008_search_branch", "m009_agent_files",
            "m010_provenance", "m011_bulk_settle", "m012_outline_index", "m013_blobs", "m014_contentless_search",
            "m015_texts_tail", "m016_cache_write_1h", "m017_retention", "m018_tool_calls"]
    SqliteStore(path).close()  # reopening applies nothing twice
    assert sqlite_store.applied_migrations() == ["m001_initial", "m002_record_crc", "m003_sync_state", "m004_search_index",
            "m005_search_pending", "m006_usage_ledger", "m007_usage_rollup", "m008_search_branch", "m009_agent_files",
            "m010_provenance", "m011_bulk_settle", "m012_outline_index", "m013_blobs", "m014_contentless_search",
            "m015_texts_tail", "m016_cache_write_1h", "m017_retention", "m018_tool_calls"]
    assert [name for name, _ in sqlite_module.MIGRATIONS] == ["m001_initial", "m002_record_crc", "m003_sync_state", "m004_search_index",
            "m005_search_pending", "m006_usage_ledger", "m007_usage_rollup", "m008_search_branch", "m009_agent_files",
            "m010_provenance", "m011_bulk_settle", "m012_outline_index", "m013_blobs", "m014_contentless_search",
            "m015_texts_tail", "m016_cache_write_1h", "m017_retention", "m018_tool_calls"]


def test_sqlite_state_columns_cover_the_accumulator():
    assert {key for key, _ in sqlite_module.STATE_COLUMNS} == set(InfoAccumulator().to_state())


def test_sqlite_newer_schema_is_refused(tmp_path):
    path = tmp_path / "sessions.db"
    SqliteStore(path).close()
    raw = sqlite3.connect(path)
    raw.execute("INSERT INTO schema_migrations (name, applied_at) VALUES ('m999_future', 'x')")
    raw.commit()
    raw.close()
    with pytest.raises(StoreOpenError, match="newer"):
        SqliteStore(path)


def test_sqlite_open_errors(tmp_path):
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database, just some text\n" * 200)
    with pytest.raises(StoreOpenError) as info:
        SqliteStore(garbage)
    assert isinstance(info.value.__cause__, sqlite3.DatabaseError)
    assert garbage.read_bytes() == b"this is not a database, just some text\n" * 200

    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(StoreOpenError):
        SqliteStore(blocker / "sub" / "sessions.db")  # directory cannot be created

    with pytest.raises(StoreOpenError):
        SqliteStore(tmp_path)  # a directory is not a database file


def test_sqlite_corrupt_database_is_refused(tmp_path):
    path = tmp_path / "sessions.db"
    store = SqliteStore(path)
    store.create(header("s1"), [custom("e1")])
    store.close()
    data = bytearray(path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    data[100:page_size] = b"\xff" * (page_size - 100)  # the schema page after the file header
    path.write_bytes(bytes(data))
    for suffix in ("-wal", "-shm"):
        if os.path.exists(str(path) + suffix):
            os.unlink(str(path) + suffix)
    with pytest.raises(StoreOpenError):
        SqliteStore(path)


def _table_counts(path) -> tuple[int, int, int]:
    raw = sqlite3.connect(path)
    try:
        return tuple(raw.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore[return-value]
                     for t in ("sessions", "entries", "message_texts"))
    finally:
        raw.close()


def test_sqlite_failed_append_leaves_nothing(tmp_path, sqlite_store, monkeypatch):
    path = tmp_path / "sessions.db"
    sqlite_store.create(header("s1"), [message("e1", None, "user", "first", 1)])
    before = sqlite_store.load("s1").to_bytes()
    [row_before] = sqlite_store.list_sessions()
    counts = _table_counts(path)

    def fail(conn: sqlite3.Connection, rows: list) -> None:
        raise sqlite3.OperationalError("disk I/O error (injected)")

    # Fails after the entries were inserted, inside the transaction.
    monkeypatch.setattr(sqlite_writes, "_insert_text_rows", fail)
    with pytest.raises(StorageError) as info:
        sqlite_store.append("s1", [message("e2", "e1", "user", "second", 2)])
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    monkeypatch.undo()
    assert sqlite_store.load("s1").to_bytes() == before
    assert _table_counts(path) == counts
    [row_after] = sqlite_store.list_sessions()
    assert (row_after.message_count, row_after.first_message) == (row_before.message_count, "first")
    # The store is still usable afterwards.
    sqlite_store.append("s1", [message("e2", "e1", "user", "second", 2)])
    assert sqlite_store.list_sessions()[0].message_count == 2


def test_sqlite_failure_in_the_middle_of_a_batch(tmp_path, sqlite_store):
    path = tmp_path / "sessions.db"
    sqlite_store.create(header("s1"), [custom("e1")])
    raw = sqlite3.connect(path)
    raw.execute("CREATE TRIGGER boom BEFORE INSERT ON entries WHEN NEW.id = 'boom' "
                "BEGIN SELECT RAISE(ABORT, 'injected failure'); END")
    raw.commit()
    raw.close()
    counts = _table_counts(path)
    with pytest.raises(StorageError) as info:
        sqlite_store.append("s1", [custom("ok1", "e1"), custom("boom", "ok1")])
    assert isinstance(info.value.__cause__, sqlite3.Error)
    with pytest.raises(StorageError):
        sqlite_store.create(header("s2"), [custom("ok"), custom("boom")])
    assert _table_counts(path) == counts
    assert sqlite_store.exists("s2") is False
    assert [e["id"] for e in sqlite_store.load("s1").entries] == ["e1"]


def _reads(store: SqliteStore, action) -> set[tuple[str, str]]:
    """(table, column) pairs SQLite reads while ``action`` runs on the store's connection."""
    reads: set[tuple[str, str]] = set()

    def authorizer(code: int, arg1: Any, arg2: Any, db: Any, source: Any) -> int:
        if code == sqlite3.SQLITE_READ:
            reads.add((arg1, arg2))
        return sqlite3.SQLITE_OK

    store.db.conn.set_authorizer(authorizer)  # type: ignore[union-attr]
    try:
        action()
    finally:
        store.db.conn.set_authorizer(None)  # type: ignore[union-attr]
    return reads


def test_sqlite_listing_reads_only_sessions_and_append_never_reads_entries(sqlite_store):
    build_listing_fixture(sqlite_store)
    rows: list = []
    reads = _reads(sqlite_store, lambda: rows.extend(sqlite_store.list_sessions()))
    assert {table for table, _ in reads} == {"sessions"}
    text_reads = _reads(sqlite_store, lambda: rows[0].all_messages_text)
    # message_texts, and the session's texts_from: no pending tail here, so no entry is read.
    assert {table for table, _ in text_reads} == {"message_texts", "sessions"}
    assert {column for table, column in text_reads if table == "sessions"} <= {"id", "texts_from"}
    append_reads = _reads(sqlite_store, lambda: sqlite_store.append("A", [custom("zz", "a4")]))
    assert ("entries", "json") not in append_reads
    assert ("message_texts", "text") not in append_reads


def test_sqlite_reindex_restores_derived_columns(tmp_path, sqlite_store):
    build_listing_fixture(sqlite_store)
    expected = [(r.id, r.to_dict(), r.all_messages_text) for r in sqlite_store.list_sessions(include_internal=True)]
    raw = sqlite3.connect(tmp_path / "sessions.db")
    raw.execute("UPDATE sessions SET message_count = 999, first_message = 'wrong', name = NULL, has_name = 0,"
                " modified_ms = 0, summary_text = NULL, classified = 0, entry_count = 0")
    raw.execute("DELETE FROM message_texts")
    raw.commit()
    raw.close()
    assert sqlite_store.reindex() == 7
    actual = [(r.id, r.to_dict(), r.all_messages_text) for r in sqlite_store.list_sessions(include_internal=True)]
    assert actual == expected
    assert sqlite_store.reindex("A") == 1
    assert sqlite_store.reindex("missing") == 0


def test_sqlite_listing_skips_a_damaged_header(tmp_path, sqlite_store):
    sqlite_store.create(header("ok"))
    sqlite_store.create(header("bad"))
    raw = sqlite3.connect(tmp_path / "sessions.db")
    raw.execute("UPDATE sessions SET header_json = X'7b6e6f74' WHERE id = 'bad'")  # '{not'
    raw.commit()
    raw.close()
    calls: list = []
    assert [r.id for r in sqlite_store.list_sessions(on_progress=lambda *a: calls.append(a))] == ["ok"]
    assert calls == [(1, 2), (2, 2)]
    with pytest.raises(InvalidSessionError):
        sqlite_store.load("bad")


def test_sqlite_closed_store_raises_storage_error(sqlite_store):
    sqlite_store.close()
    sqlite_store.close()  # idempotent
    with pytest.raises(StorageError):
        sqlite_store.create(header("s1"))


def test_sqlite_create_many_is_one_transaction(sqlite_store):
    sqlite_store.create(header("s2"))
    with pytest.raises(SessionExistsError):
        sqlite_store.create_many([(header("s1"), [custom("e1")], None), (header("s2"), [], None)])
    assert sqlite_store.exists("s1") is False
    assert sqlite_store.create_many([(header("s1"), [custom("e1")], None), (header("s3"), [], None)]) == 2
    assert sorted(sqlite_store.session_ids()) == ["s1", "s2", "s3"]


def test_sqlite_synchronous_setting(tmp_path):
    full = SqliteStore(tmp_path / "a.db")
    normal = SqliteStore(tmp_path / "b.db", synchronous="normal")
    try:
        # PRAGMA synchronous: 1 = NORMAL, 2 = FULL
        assert full.db.connection().execute("PRAGMA synchronous").fetchone()[0] == 2
        assert normal.db.connection().execute("PRAGMA synchronous").fetchone()[0] == 1
    finally:
        full.close()
        normal.close()
    with pytest.raises(ValueError):
        SqliteStore(tmp_path / "c.db", synchronous="off")


def test_schema_steps_run_in_number_order_whoever_registers_first():
    from sessiontree.stores.steps import register_step

    def m002_second(conn):
        pass

    def m001_first(conn):
        pass

    def m002_other(conn):
        pass

    def step_without_number(conn):
        pass

    steps: list = []
    register_step(steps, m002_second)
    register_step(steps, m001_first)
    assert [name for name, _ in steps] == ["m001_first", "m002_second"]
    register_step(steps, m002_second)  # a reloaded module registers again: replaced, not doubled
    assert [name for name, _ in steps] == ["m001_first", "m002_second"]
    with pytest.raises(ValueError, match="share the number 002"):
        register_step(steps, m002_other)
    with pytest.raises(ValueError, match="m001_initial"):
        register_step(steps, step_without_number)
    assert [name for name, _ in steps] == ["m001_first", "m002_second"]


def test_sqlite_listing_reads_a_prefix_of_a_first_message_stored_whole(tmp_path, sqlite_store):
    # A row written before 0.2.0 keeps the whole first message (synthetic: no corpus file has
    # one over 1,000 characters). The listing asks SQLite for its first 1,001 characters and
    # shows 1,000 at most (docs/listing.md, "First message"); check --store sees no drift.
    whole = "word " * 600_000  # 3,000,000 characters
    sqlite_store.create(header("A"), [message("m1", None, "user", "short")])
    raw = sqlite3.connect(tmp_path / "sessions.db")
    raw.execute("UPDATE sessions SET first_message = ? WHERE id = 'A'", (whole,))
    raw.commit()
    statements: list[str] = []
    sqlite_store.db.conn.set_trace_callback(statements.append)  # type: ignore[union-attr]
    try:
        [row] = sqlite_store.list_sessions()
    finally:
        sqlite_store.db.conn.set_trace_callback(None)  # type: ignore[union-attr]
    assert row.first_message == " ".join(["word"] * 199) + "…"
    assert any("substr(first_message, 1, 1001)" in sql for sql in statements)
    # The entries say "short": that is drift of another kind, not of the cut.
    drift = [p.message for p in sqlite_store.verify() if p.code == "metadata-drift"]
    assert len(drift) == 1 and "first_message 'word word" in drift[0]
    raw.close()
    # Whole text whose prefix equals the rebuilt one: no drift.
    sqlite_store.create(header("B"), [message("m1", None, "user", "x" * 3_000)])
    raw = sqlite3.connect(tmp_path / "sessions.db")
    raw.execute("UPDATE sessions SET first_message = ? WHERE id = 'B'", ("x" * 3_000,))
    raw.commit()
    assert raw.execute("SELECT length(first_message) FROM sessions WHERE id = 'B'").fetchone() == (3_000,)
    problems = [p for p in sqlite_store.verify() if p.code == "metadata-drift"]
    assert [p.session_id for p in problems] == ["A"]
    assert sqlite_store.reindex("B") == 1
    # reindex writes the listing's prefix: 999 characters and the mark.
    assert raw.execute("SELECT length(first_message) FROM sessions WHERE id = 'B'").fetchone() == (1_000,)
    # A first message with a lone surrogate is a BLOB (derived.to_db): its first 4,004 bytes are
    # read, the surrogate (3 bytes) and 2,000 two-byte characters, the last one cut in two dropped.
    wide = "\ud83d" + "\u00e9" * 3_000
    sqlite_store.create(header("C"), [message("m1", None, "user", wide)])
    raw.execute("UPDATE sessions SET first_message = ? WHERE id = 'C'", (wide.encode("utf-8", "surrogatepass"),))
    raw.commit()
    assert raw.execute("SELECT typeof(first_message), length(CAST(first_message AS BLOB)) FROM sessions"
                       " WHERE id = 'C'").fetchone() == ("blob", 6_003)
    raw.close()
    [row] = [r for r in sqlite_store.list_sessions() if r.id == "C"]
    assert row.first_message == "\ud83d" + "\u00e9" * 998 + "…"
    assert [p.session_id for p in sqlite_store.verify() if p.code == "metadata-drift"] == ["A"]


def test_the_read_only_uri_quotes_a_path_as_urllib_does(tmp_path):
    # connection._quote stands in for urllib.parse.quote (start-up): the same text for any path.
    import random
    import urllib.parse

    from sessiontree.stores.sqlite.connection import _quote

    rng = random.Random(3)
    alphabet = [chr(i) for i in range(1, 300)] + ["é", "\U0001f600", "/", "%", "?", "#", " "]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        assert _quote(text) == urllib.parse.quote(text), text
    # And a real read-only open of a path that needs quoting.
    path = tmp_path / "a ?#%é" / "s.db"
    path.parent.mkdir()
    SqliteStore(str(path)).close()
    store = SqliteStore(str(path), readonly=True)
    assert store.session_ids() == []
    store.close()
