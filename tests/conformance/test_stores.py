"""The SessionStore conformance suite, run unchanged against every store, plus
store-specific tests (SQLite schema/WAL/transactions, JSONL files/locks).

Expected values are worked out by hand from the seed and REFERENCE groups
D, E, L, K, M, O and §3.1/§3.3-§3.5, never taken from running the code.
"""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import re
import sqlite3
import threading
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from builders import custom_with_data as custom
from builders import jsonl_line as line
from builders import role_message as message
from builders import session_info, session_summary
from builders import work_header as header
from sessiontree.core.listing import InfoAccumulator
from sessiontree.errors import (
    InvalidSessionError,
    ListingCancelledError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
    StoreOpenError,
)
from sessiontree.format import jsonio
from sessiontree.format.ids import session_id_hash
from sessiontree.stores import JsonlStore, MemoryStore, SessionStore, SqliteStore
from sessiontree.stores.jsonl import store as jsonl_module
from sessiontree.stores.sqlite import store as sqlite_module

UTC = UTC
CREATED = "2026-02-01T09:00:00.000Z"


def ms(*parts: int) -> int:
    """Unix milliseconds of a UTC wall-clock time."""
    return int(datetime(*parts, tzinfo=UTC).timestamp() * 1000)


WORKFLOW = {"runId": "run-1", "stageId": "stage-build", "stageName": "build"}


# -- fixtures -----------------------------------------------------------------------------------

@pytest.fixture(autouse=True)
def fake_trash(monkeypatch: pytest.MonkeyPatch, tmp_path):
    """Never move test files into the user's real trash."""
    trash = tmp_path / "trash"

    def send(path: str) -> None:
        trash.mkdir(exist_ok=True)
        os.rename(path, trash / os.path.basename(path))

    monkeypatch.setattr(jsonl_module, "_send_to_trash", send)
    return trash


def make_store(kind: str, tmp_path) -> Any:
    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":
        return SqliteStore(tmp_path / "db" / "sessions.db")
    return JsonlStore(tmp_path / "sessions")


@pytest.fixture(params=["memory", "sqlite", "jsonl", "postgres"])
def store(request, tmp_path):
    if request.param == "postgres":
        from sessiontree.stores.postgres.store import PostgresStore

        created = PostgresStore(request.getfixturevalue("pg_url"))
    else:
        created = make_store(request.param, tmp_path)
    yield created
    created.close()


def row_path(store: Any, session_id: str) -> str:
    """SessionInfo.path: the JSONL file where there is one, otherwise the id (seed §3.1)."""
    return store.location(session_id) if store.kind == "jsonl" else session_id


# =============================================================================================
# Conformance suite: every store
# =============================================================================================

def test_is_a_session_store_with_url_and_kind(store, tmp_path):
    assert isinstance(store, SessionStore)
    expected = {
        "memory": "memory:",
        "sqlite": "sqlite:///" + str(tmp_path / "db" / "sessions.db"),
        "jsonl": "jsonl:///" + str(tmp_path / "sessions"),
        "postgres": store.url if store.kind == "postgres" else None,  # the test database's URL
    }[store.kind]
    assert store.url == expected
    if store.kind in ("sqlite", "jsonl"):
        assert store.url.startswith(store.kind + ":////")  # absolute path: four slashes


def test_create_then_load_round_trips_bytes(store):
    h = header("s1")
    entries = [message("e1", None, "user", "Hello", 1), custom("e2", "e1", n=1)]
    store.create(h, entries)
    loaded = store.load("s1")
    assert loaded.header == h
    assert loaded.entries == entries
    assert loaded.source_version == 4
    assert loaded.upgraded is False
    expected = (b'{"type":"session","version":4,"id":"s1","createdAt":"2026-02-01T09:00:00.000Z","cwd":"/work/a"}\n'
                b'{"type":"message","id":"e1","parentId":null,"timestamp":"2026-02-01T09:00:00.000Z",'
                b'"message":{"role":"user","content":"Hello","timestamp":1}}\n'
                b'{"type":"custom","id":"e2","parentId":"e1","timestamp":"2026-02-01T09:00:00.000Z",'
                b'"customType":"test","data":{"n":1}}\n')
    assert loaded.to_bytes() == expected


def test_create_without_entries_and_loaded_objects_are_independent(store):
    store.create(header("s1"))
    first = store.load("s1")
    assert first.entries == [] and first.to_bytes() == line(header("s1"))
    first.header["cwd"] = "/mutated"
    assert store.load("s1").header["cwd"] == "/work/a"


def test_create_existing_id_raises_and_changes_nothing(store):
    store.create(header("s1"), [custom("e1")])
    with pytest.raises(SessionExistsError) as info:
        store.create(header("s1", cwd="/elsewhere"), [custom("x1"), custom("x2")])
    assert info.value.session_id == "s1"
    loaded = store.load("s1")
    assert loaded.header["cwd"] == "/work/a"
    assert [e["id"] for e in loaded.entries] == ["e1"]


def test_create_refuses_invalid_header_and_entries(store):
    with pytest.raises(InvalidSessionError):
        store.create({"type": "session", "version": 4, "cwd": "/x"})  # no id
    with pytest.raises(InvalidSessionError):
        store.create({"type": "session", "version": 3, "id": "old", "timestamp": CREATED})  # not format 4
    with pytest.raises(InvalidSessionError):
        store.create(header("s2"), [{"type": "custom", "id": "e1", "timestamp": CREATED}])  # no parentId
    assert store.session_ids() == []


def test_missing_ids(store):
    with pytest.raises(SessionNotFoundError) as info:
        store.load("nope")
    assert isinstance(info.value, LookupError) and info.value.session_id == "nope"
    with pytest.raises(SessionNotFoundError):
        store.append("nope", [custom("e1")])
    with pytest.raises(SessionNotFoundError):
        store.append("nope", [])
    with pytest.raises(SessionNotFoundError):
        store.replace_header("nope", header("nope"))
    assert store.exists("nope") is False
    assert store.location("nope") is None
    store.delete("nope")  # a missing id does nothing
    assert store.session_ids() == []


def test_append_keeps_insertion_order(store):
    store.create(header("s1"), [custom("e1")])
    store.append("s1", [custom("e2", "e1"), custom("e3", "e2")])
    store.append("s1", [])
    store.append("s1", [custom("e0", "e3")])  # order is insertion order, not id order
    loaded = store.load("s1")
    assert [e["id"] for e in loaded.entries] == ["e1", "e2", "e3", "e0"]
    assert loaded.to_bytes() == b"".join([line(header("s1")), line(custom("e1")), line(custom("e2", "e1")),
                                          line(custom("e3", "e2")), line(custom("e0", "e3"))])


def test_append_is_all_or_nothing_for_invalid_batches(store):
    store.create(header("s1"), [custom("e1")])
    before = store.load("s1").to_bytes()
    bad = {"type": "message", "id": "e3", "parentId": "e2", "timestamp": CREATED, "message": {"content": "x"}}
    with pytest.raises(InvalidSessionError):
        store.append("s1", [custom("e2", "e1"), bad])  # message.role missing (REFERENCE D.19)
    with pytest.raises(InvalidSessionError):
        store.append("s1", [custom("e2", "e1"), custom("e2", "e1")])  # duplicate id in one batch
    assert store.load("s1").to_bytes() == before


def test_raw_entry_bytes_are_kept_verbatim(store):
    # Unusual key order, a lone surrogate escape and an escaped e-acute: the stored
    # text comes back byte for byte (SPEC §2), not re-serialized.
    raw = (rb'{"timestamp":"2026-02-01T09:00:00.000Z","type":"message","parentId":null,"id":"r1",'
           rb'"message":{"content":"half \ud83d caf\u00e9","role":"user","timestamp":5}}')
    entry = jsonio.loads(raw)
    assert entry["message"]["content"] == "half \ud83d caf\u00e9"
    store.create(header("s1"), [entry], raw=[raw])
    # An appended entry is serialized compactly, in its key order, lone surrogate escaped.
    appended = {"parentId": "r1", "type": "custom", "id": "r2", "timestamp": "2026-02-01T09:00:01.000Z",
                "customType": "x", "data": {"s": "\ud83d", "é": 1}}
    store.append("s1", [appended])
    appended_text = '{"parentId":"r1","type":"custom","id":"r2","timestamp":"2026-02-01T09:00:01.000Z",' \
                    '"customType":"x","data":{"s":"\\ud83d","é":1}}'.encode()
    loaded = store.load("s1")
    assert loaded.entry_bytes(0) == raw
    assert loaded.entry_bytes(1) == appended_text
    assert loaded.entries == [entry, appended]
    assert loaded.to_bytes() == line(header("s1")) + raw + b"\n" + appended_text + b"\n"
    [row] = store.list_sessions()
    assert row.first_message == "half \ud83d caf\u00e9"
    assert row.all_messages_text == "half \ud83d caf\u00e9"


def test_replace_header(store):
    store.create(header("s1"), [custom("e1")])
    entries_before = store.load("s1").raw
    new = header("s1", cwd="/work/b", internal=True, workflow=WORKFLOW)
    store.replace_header("s1", new)
    loaded = store.load("s1")
    assert loaded.header == new
    assert loaded.header_raw == jsonio.dumps(new)
    assert loaded.raw == entries_before
    assert store.list_sessions() == []  # now classified internal (REFERENCE O.5)
    [row] = store.list_sessions(include_internal=True)
    assert row.internal is True and row.workflow == WORKFLOW and row.cwd == "/work/b"
    with pytest.raises(InvalidSessionError):
        store.replace_header("s1", header("other"))
    assert store.load("s1").header == new


def test_delete_removes_only_that_session_and_is_idempotent(store):
    store.create(header("s1"), [custom("e1")])
    store.create(header("s2"), [custom("e1")])
    store.delete("s1")
    assert store.exists("s1") is False
    with pytest.raises(SessionNotFoundError):
        store.load("s1")
    store.delete("s1")
    assert store.session_ids() == ["s2"]
    assert [e["id"] for e in store.load("s2").entries] == ["e1"]
    assert [row.id for row in store.list_sessions()] == ["s2"]


def test_exists_session_ids_location(store):
    store.create(header("s1"))
    store.create(header("s2", internal=True, workflow=WORKFLOW))
    assert store.exists("s1") and store.exists("s2")
    assert sorted(store.session_ids()) == ["s1", "s2"]  # internal ones included
    if store.kind == "jsonl":
        path = store.location("s1")
        assert os.path.isfile(path) and os.path.dirname(path) == store.directory
    else:
        assert store.location("s1") is None


def build_listing_fixture(store: Any) -> None:
    """Seven sessions covering REFERENCE L.8-L.19, K and O (values worked out in the tests)."""
    # A: named (trimmed), first user message with text wins, tool results count but do not date.
    store.create(header("A", cwd="/work/a"), [
        message("a0", None, "user", [{"type": "image", "data": "QQ==", "mimeType": "image/png"}],
                ms(2026, 2, 1, 9, 0, 0)),
        message("a1", "a0", "user", "Fix the build", ms(2026, 2, 1, 9, 0, 1)),
        message("a2", "a1", "assistant",
                [{"type": "text", "text": "Done."}, {"type": "thinking", "thinking": "hmm"},
                 {"type": "text", "text": "Bye."}], ms(2026, 2, 1, 9, 0, 5)),
        message("a3", "a2", "toolResult", [{"type": "text", "text": "ok"}], ms(2026, 2, 1, 9, 30, 0),
                toolCallId="c1", toolName="bash", isError=False),
    ])
    store.append("A", [session_info("a4", "a3", "  Build fix  ")])
    # B: named then cleared; a null-content user message still dates the session (L.16, L.19).
    store.create(header("B", cwd="/work/b"), [message("b1", None, "user", "hello", ms(2026, 2, 1, 9, 0, 10))])
    store.append("B", [session_info("b2", "b1", "Old")])
    store.append("B", [session_info("b3", "b2", ""), message("b4", "b3", "user", None, ms(2026, 2, 1, 9, 0, 20))])
    # C: never named, no messages: modified falls back to createdAt.
    store.create(header("C", cwd="/work/a", created="2026-02-01T08:00:00.000Z"), [
        {"type": "model_change", "id": "c1", "parentId": None, "timestamp": CREATED,
         "provider": "openai", "modelId": "gpt-4o"}])
    # D: fresh summary; a later tool result does not make it stale (K.3).
    store.create(header("D", cwd="/work/a"), [
        message("d1", None, "user", "Add retries", ms(2026, 2, 1, 9, 1, 0)),
        message("d2", "d1", "assistant", [{"type": "text", "text": "Added."}], ms(2026, 2, 1, 9, 2, 0)),
    ])
    store.append("D", [session_summary("d3", "d2", "Retries added", "d2")])
    store.append("D", [message("d4", "d3", "toolResult", [{"type": "text", "text": "x"}], ms(2026, 2, 1, 9, 2, 30),
                               toolCallId="c", toolName="t", isError=False)])
    # E: the same, then a newer user message makes the summary stale.
    store.create(header("E", cwd="/work/a"), [
        message("e1", None, "user", "Add retries", ms(2026, 2, 1, 9, 1, 0)),
        message("e2", "e1", "assistant", [{"type": "text", "text": "Added."}], ms(2026, 2, 1, 9, 2, 0)),
        session_summary("e3", "e2", "Retries added", "e2"),
    ])
    store.append("E", [message("e4", "e3", "user", "One more thing", ms(2026, 2, 1, 9, 4, 0))])
    # F: a classified workflow session (O.1): hidden unless include_internal.
    store.create(header("F", cwd="/work/a", internal=True, workflow=WORKFLOW),
                 [message("f1", None, "user", "stage work", ms(2026, 2, 1, 9, 5, 0))])
    # G: a malformed marker (internal without workflow) stays visible (O.6).
    store.create(header("G", cwd="/work/a", internal=True),
                 [message("g1", None, "user", "visible", ms(2026, 2, 1, 9, 6, 0))])


def test_listing_rows(store):
    build_listing_fixture(store)
    rows = {row.id: row for row in store.list_sessions()}
    assert set(rows) == {"A", "B", "C", "D", "E", "G"}

    a = rows["A"]
    assert (a.name, a.has_name) == ("Build fix", True)
    assert a.message_count == 4
    assert a.first_message == "Fix the build"
    assert a.modified == datetime(2026, 2, 1, 9, 0, 5, tzinfo=UTC)
    assert a.created == datetime(2026, 2, 1, 9, 0, 0, tzinfo=UTC)
    assert a.all_messages_text == "Fix the build Done. Bye."
    assert a.summary is None
    assert a.cwd == "/work/a" and a.path == row_path(store, "A")
    assert (a.internal, a.workflow, a.parent_session_id) == (False, None, None)

    b = rows["B"]
    assert (b.name, b.has_name) == (None, True)  # cleared
    assert b.message_count == 2
    assert b.first_message == "hello"
    assert b.modified == datetime(2026, 2, 1, 9, 0, 20, tzinfo=UTC)

    c = rows["C"]
    assert (c.name, c.has_name) == (None, False)  # never named
    assert (c.message_count, c.first_message, c.all_messages_text) == (0, "(no messages)", "")
    assert c.modified == datetime(2026, 2, 1, 8, 0, 0, tzinfo=UTC)

    assert rows["D"].summary == "Retries added"
    assert rows["D"].message_count == 3
    assert rows["D"].modified == datetime(2026, 2, 1, 9, 2, 0, tzinfo=UTC)
    assert rows["E"].summary is None
    assert rows["E"].modified == datetime(2026, 2, 1, 9, 4, 0, tzinfo=UTC)
    assert rows["E"].all_messages_text == "Add retries Added. One more thing"

    assert (rows["G"].internal, rows["G"].workflow) == (False, None)


def test_listing_order_internal_and_cwd_filters(store):
    build_listing_fixture(store)
    # Newest modified first: G 09:06, E 09:04, D 09:02, B 09:00:20, A 09:00:05, C 08:00.
    assert [row.id for row in store.list_sessions()] == ["G", "E", "D", "B", "A", "C"]
    rows = store.list_sessions(include_internal=True)
    assert [row.id for row in rows] == ["G", "F", "E", "D", "B", "A", "C"]
    f = rows[1]
    assert (f.internal, f.workflow) == (True, WORKFLOW)
    # The cwd filter resolves both sides to absolute paths (L.18).
    assert [row.id for row in store.list_sessions(cwd="/work/a/../a/")] == ["G", "E", "D", "A", "C"]
    assert [row.id for row in store.list_sessions(cwd="/work/b")] == ["B"]
    assert store.list_sessions(cwd="/work") == []


def test_listing_progress_and_cancellation(store):
    build_listing_fixture(store)
    calls: list[tuple[int, int]] = []
    store.list_sessions(on_progress=lambda loaded, total: calls.append((loaded, total)))
    # Once per session examined, internal ones included (L.21).
    assert calls == [(i, 7) for i in range(1, 8)]

    cancel = threading.Event()
    cancel.set()
    seen: list[int] = []
    with pytest.raises(ListingCancelledError):
        store.list_sessions(cancel=cancel, on_progress=lambda loaded, total: seen.append(loaded))
    assert seen == []

    cancel = threading.Event()

    def stop_at_two(loaded: int, total: int) -> None:
        if loaded == 2:
            cancel.set()

    with pytest.raises(ListingCancelledError):
        store.list_sessions(cancel=cancel, on_progress=stop_at_two)


def test_listing_empty_store(store):
    calls: list[tuple[int, int]] = []
    assert store.list_sessions(on_progress=lambda *a: calls.append(a)) == []
    assert calls == []


def _damage(store: Any, session_id: str) -> None:
    """Make one stored session unloadable behind the store's back (persistent stores only)."""
    if store.kind == "sqlite":
        raw = sqlite3.connect(store.path)
        raw.execute("UPDATE sessions SET header_json = X'7b6e6f74' WHERE id = ?", (session_id,))  # '{not'
        raw.commit()
        raw.close()
    elif store.kind == "jsonl":
        with open(store.location(session_id), "ab") as handle:
            handle.write(b"not json at all\n")
    elif store.kind == "postgres":
        import psycopg

        with psycopg.connect(store._conninfo, autocommit=True) as raw:
            raw.execute("UPDATE sessions SET header_json = '\\x7b6e6f74'::bytea WHERE id = %s", (session_id,))


def test_listing_counts_the_sessions_it_could_not_load(store):
    """Issue 10: a listing reports how many sessions it left out because they cannot be loaded."""
    empty = store.list_sessions()
    assert empty == [] and empty.skipped == 0
    store.create(header("s1"), [custom("e1")])
    store.create(header("s2"), [custom("e1")])
    store.create(header("s3", cwd="/work/b"), [custom("e1")])
    rows = store.list_sessions()
    assert sorted(r.id for r in rows) == ["s1", "s2", "s3"] and rows.skipped == 0
    if store.kind == "memory":
        return  # nothing can damage a memory store behind its back
    _damage(store, "s2")
    rows = store.list_sessions()
    assert sorted(r.id for r in rows) == ["s1", "s3"] and rows.skipped == 1
    rows = store.list_sessions(include_internal=True, cwd="/work/a")
    assert [r.id for r in rows] == ["s1"] and rows.skipped == 1


def test_verify_a_healthy_store_finds_nothing(store):
    """Issue 10: ``verify()`` (``check --store``) reports no problem on a store we wrote ourselves."""
    assert store.verify() == []
    store.create(header("s1"), [message("e1", None, "user", "hi", 1), custom("e2", "e1")])
    store.append("s1", [session_info("e3", "e2", "named")])
    assert store.verify() == []


def test_verify_applies_the_file_rules_on_every_store(store):
    """``check --store`` gives a session the same verdict whichever store holds it: the
    file checker's rules run on every store (a dangling parent is accepted by import,
    docs/check.md, but reported)."""
    store.create(header("s1"), [message("e1", None, "user", "hi", 1), custom("e2", "zzzzzzzz")])
    found = [(p.code, p.severity, p.session_id, p.line, p.entry_id) for p in store.verify()]
    assert found == [("dangling-parent", "error", "s1", 3, "e2")]  # header line 1, e1 line 2, e2 line 3


def test_settle_derived_finishes_deferred_work_without_changing_answers(store):
    """Every store answers ``settle_derived()``; only SQLite defers work (appended
    entries' search text), and settling changes no search answer."""
    store.create(header("s1"), [message("e1", None, "user", "alpha one", 1)])
    store.append("s1", [message("e2", "e1", "assistant", "alpha two", 2),
                        message("e3", "e2", "user", "beta", 3)])
    before = sorted(hit.entry_id for hit in store.search("alpha"))
    # SQLite: the created entry and the two appended ones were pending (no write
    # merges search text); the other stores defer nothing.
    assert store.settle_derived() == (3 if store.kind == "sqlite" else 0)
    assert store.settle_derived() == 0  # nothing left
    assert sorted(hit.entry_id for hit in store.search("alpha")) == before == ["e1", "e2"]


def test_find_most_recent(store):
    assert store.find_most_recent() is None
    store.create(header("s1", cwd="/work/a"), [custom("e1")])
    time.sleep(0.05)  # file mtimes may be coarse (JSONL recency is the file mtime, M.1)
    store.create(header("s2", cwd="/work/b"), [custom("e1")])
    time.sleep(0.05)
    store.create(header("w1", cwd="/work/a", internal=True, workflow=WORKFLOW), [custom("e1")])
    assert store.find_most_recent() == "s2"
    assert store.find_most_recent(include_internal=True) == "w1"
    assert store.find_most_recent(cwd="/work/a") == "s1"
    assert store.find_most_recent(cwd="/work/a/./", include_internal=True) == "w1"
    assert store.find_most_recent(cwd="/nowhere") is None
    time.sleep(0.05)
    store.append("s1", [custom("e2", "e1")])  # a write makes it the most recent
    assert store.find_most_recent() == "s1"
    assert store.find_most_recent(include_internal=True) == "s1"


def test_concurrent_threads_append_without_loss(store):
    store.create(header("s1"))

    def work(worker: int) -> None:
        for i in range(25):
            store.append("s1", [custom(f"t{worker}-{i:03d}")])

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = [e["id"] for e in store.load("s1").entries]
    assert sorted(ids) == sorted(f"t{w}-{i:03d}" for w in range(4) for i in range(25))
    for w in range(4):
        mine = [i for i in ids if i.startswith(f"t{w}-")]
        assert mine == sorted(mine)


# =============================================================================================
# Memory and SQLite: cross-call duplicate ids are refused (JSONL does not re-read files on append)
# =============================================================================================

@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_duplicate_entry_id_across_appends_is_refused(kind, tmp_path):
    store = make_store(kind, tmp_path)
    store.create(header("s1"), [custom("e1")])
    with pytest.raises(InvalidSessionError):
        store.append("s1", [custom("e2"), custom("e1")])
    assert [e["id"] for e in store.load("s1").entries] == ["e1"]
    store.close()


def test_memory_store_does_no_io(tmp_path, monkeypatch):
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("MemoryStore touched the filesystem")

    store = MemoryStore()
    monkeypatch.setattr(os, "open", refuse)
    monkeypatch.setattr("builtins.open", refuse)
    store.create(header("s1"), [custom("e1")])
    store.append("s1", [custom("e2", "e1")])
    assert len(store.load("s1").entries) == 2
    assert [row.id for row in store.list_sessions()] == ["s1"]
    store.delete("s1")


# =============================================================================================
# SQLite
# =============================================================================================

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
            "m005_search_pending", "m006_usage_ledger", "m007_usage_rollup", "m008_search_branch"]
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"sessions", "entries", "message_texts", "schema_migrations"} <= tables
        sql = raw.execute("SELECT sql FROM sqlite_master WHERE name = 'entries'").fetchone()[0]
        assert "--" in sql  # the schema says why each column exists
    finally:
        raw.close()
    assert sqlite_store.applied_migrations() == ["m001_initial", "m002_record_crc", "m003_sync_state", "m004_search_index",
            "m005_search_pending", "m006_usage_ledger", "m007_usage_rollup", "m008_search_branch"]
    SqliteStore(path).close()  # reopening applies nothing twice
    assert sqlite_store.applied_migrations() == ["m001_initial", "m002_record_crc", "m003_sync_state", "m004_search_index",
            "m005_search_pending", "m006_usage_ledger", "m007_usage_rollup", "m008_search_branch"]
    assert [name for name, _ in sqlite_module.MIGRATIONS] == ["m001_initial", "m002_record_crc", "m003_sync_state", "m004_search_index",
            "m005_search_pending", "m006_usage_ledger", "m007_usage_rollup", "m008_search_branch"]


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
    monkeypatch.setattr(sqlite_module, "_insert_text_rows", fail)
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

    store._conn.set_authorizer(authorizer)  # type: ignore[union-attr]
    try:
        action()
    finally:
        store._conn.set_authorizer(None)  # type: ignore[union-attr]
    return reads


def test_sqlite_listing_reads_only_sessions_and_append_never_reads_entries(sqlite_store):
    build_listing_fixture(sqlite_store)
    rows: list = []
    reads = _reads(sqlite_store, lambda: rows.extend(sqlite_store.list_sessions()))
    assert {table for table, _ in reads} == {"sessions"}
    text_reads = _reads(sqlite_store, lambda: rows[0].all_messages_text)
    assert {table for table, _ in text_reads} == {"message_texts"}
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


# =============================================================================================
# JSONL
# =============================================================================================

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
    # layout, issue 12) is read, deeper ones are not.
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
    # An existing empty file gets the session (open_file on a 0-byte path, REFERENCE D.10).
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

    monkeypatch.setattr(jsonl_module, "_write_all", fail)
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
    assert {r.id: r.parent_session_id for r in rows}["early"] == "parent"  # upgraded in memory (§3.3)
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


# =============================================================================================
# Several processes appending to one session
# =============================================================================================

WORKERS = 4
APPENDS = 200


def _append_worker(kind: str, location: str, worker: int) -> None:
    store = SqliteStore(location) if kind == "sqlite" else JsonlStore(location)
    try:
        for i in range(APPENDS):
            store.append("shared", [custom(f"w{worker}-{i:04d}", None, worker=worker, i=i, pad="x" * (i % 50))])
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_processes_appending_lose_nothing(kind, tmp_path):
    location = str(tmp_path / ("sessions.db" if kind == "sqlite" else "sessions"))
    store = SqliteStore(location) if kind == "sqlite" else JsonlStore(location)
    store.create(header("shared"), [custom("root")])
    store.close()
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_append_worker, args=(kind, location, w)) for w in range(WORKERS)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(180)
    assert [p.exitcode for p in processes] == [0] * WORKERS

    store = SqliteStore(location) if kind == "sqlite" else JsonlStore(location)
    try:
        loaded = store.load("shared")
        ids = [e["id"] for e in loaded.entries]
        assert len(ids) == 1 + WORKERS * APPENDS
        assert set(ids) == {"root"} | {f"w{w}-{i:04d}" for w in range(WORKERS) for i in range(APPENDS)}
        for w in range(WORKERS):
            mine = [i for i in ids if i.startswith(f"w{w}-")]
            assert mine == sorted(mine)  # each process's appends in its own order
        if kind == "jsonl":
            with open(store.location("shared"), "rb") as handle:
                data = handle.read()
            assert data.endswith(b"\n")
            lines = data.split(b"\n")[:-1]
            assert len(lines) == 2 + WORKERS * APPENDS
            for text in lines:
                assert isinstance(jsonio.loads(text), dict)
        else:
            [row] = store.list_sessions()
            assert row.message_count == 0
    finally:
        store.close()


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
    from sessiontree.stores.jsonl.store import migrate_file

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
    from sessiontree.stores.jsonl.store import migrate_file

    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"type":"session","id":"x"}\n{torn')
    with pytest.raises(InvalidSessionError):
        migrate_file(path)
    assert path.read_bytes() == b'{"type":"session","id":"x"}\n{torn'
    assert [p.name for p in tmp_path.iterdir()] == ["bad.jsonl"]


def test_read_equals_load_and_never_writes(store):
    h = header("s1")
    store.create(h, [message("e1", None, "user", "Hello", 1)])
    assert store.read("s1").to_bytes() == store.load("s1").to_bytes()
    with pytest.raises(SessionNotFoundError):
        store.read("missing")


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


def test_sqlite_synchronous_setting(tmp_path):
    full = SqliteStore(tmp_path / "a.db")
    normal = SqliteStore(tmp_path / "b.db", synchronous="normal")
    try:
        # PRAGMA synchronous: 1 = NORMAL, 2 = FULL
        assert full._connection().execute("PRAGMA synchronous").fetchone()[0] == 2
        assert normal._connection().execute("PRAGMA synchronous").fetchone()[0] == 1
    finally:
        full.close()
        normal.close()
    with pytest.raises(ValueError):
        SqliteStore(tmp_path / "c.db", synchronous="off")


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
    from sessiontree.stores.jsonl.store import migrate_file

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
    return store._require(session_id)


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
    assert len(kept) == jsonl_module._HELD_FILES
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


def test_schema_steps_run_in_number_order_whoever_registers_first():
    from sessiontree.stores.shared import register_step

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


def test_load_without_the_stored_texts_gives_the_same_session(store):
    # SessionStore.load(keep_raw=False): what SessionManager.open asks of every store.
    store.create(header("k1"), [custom("e1"), custom("e2", "e1")])
    full, lean = store.load("k1"), store.load("k1", keep_raw=False)
    assert (lean.header, lean.entries) == (full.header, full.entries)
    assert lean.raw == [None, None] and all(isinstance(text, bytes) for text in full.raw)
    assert [lean.entry_bytes(i) for i in range(2)] == [jsonio.dumps(e) for e in full.entries]
