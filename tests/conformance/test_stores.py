"""The SessionStore conformance suite, run unchanged against every store (the store
specifics are in tests/stores/test_sqlite_store.py, test_jsonl_store.py, test_memory_store.py
and test_postgres_store.py).

Expected values are worked out by hand from the rules (``seed:stores``; docs/rules/format.md
D, E; docs/rules/listing.md L, K, M, O; docs/rules/stores.md §3.1; docs/rules/versions.md
§3.3; docs/rules/format.md §3.4; docs/rules/manager.md §3.5), never taken from running the code.
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import threading
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from builders import CREATED, session_info
from builders import custom_with_data as custom
from builders import jsonl_line as line
from builders import role_message as message
from builders import work_header as header
from listing_corpus import WORKFLOW, build_listing_fixture
from sessiontree.errors import (
    InvalidSessionError,
    ListingCancelledError,
    SessionExistsError,
    SessionNotFoundError,
)
from sessiontree.format import jsonio
from sessiontree.stores import JsonlStore, SessionStore, SqliteStore

pytestmark = pytest.mark.usefixtures("fake_trash")


def row_path(store: Any, session_id: str) -> str:
    """SessionInfo.path: the JSONL file where there is one, otherwise the id (docs/rules/stores.md §3.1, ``seed:listing``)."""
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
        store.append("s1", [custom("e2", "e1"), bad])  # message.role missing (docs/rules/format.md D.19)
    with pytest.raises(InvalidSessionError):
        store.append("s1", [custom("e2", "e1"), custom("e2", "e1")])  # duplicate id in one batch
    assert store.load("s1").to_bytes() == before


def test_raw_entry_bytes_are_kept_verbatim(store):
    # Unusual key order, a lone surrogate escape and an escaped e-acute: the stored
    # text comes back byte for byte (``spec:data-model``), not re-serialized.
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


def test_listing_keeps_only_a_prefix_of_a_long_first_message(store):
    # docs/listing.md, "First message": a listing holds at most 1,000 characters of it, cut at
    # a space in the second half and marked with "…"; the search text keeps the whole.
    # Synthetic: no first message in ../shared/corpus is over 1,000 characters (668 at most).
    words = "word " * 6_000  # 30,000 characters, a space every fifth
    solid = "x" * 5_000  # no space to cut at
    wide = "\ud83d" + "\u00e9" * 3_000  # a lone surrogate (SQLite keeps a BLOB) and two-byte characters
    for session_id, text in (("w", words), ("x", solid), ("s", wide)):
        store.create(header(session_id), [message("m1", None, "user", text), message("m2", "m1", "assistant", "ok")])
    rows = {row.id: row for row in store.list_sessions()}
    # 199 words: the last space of the first 999 characters is the 199th (offset 994).
    assert rows["w"].first_message == " ".join(["word"] * 199) + "…"
    assert rows["x"].first_message == "x" * 999 + "…"
    assert rows["s"].first_message == "\ud83d" + "\u00e9" * 998 + "…"
    assert all(len(row.first_message) <= 1_000 for row in rows.values())
    assert rows["w"].to_dict()["firstMessage"] == rows["w"].first_message
    # Nothing is lost: the session and its listing text keep every character.
    assert rows["w"].all_messages_text == words + " ok"
    assert store.load("x").entries[0]["message"]["content"] == solid
    assert not [p for p in store.verify() if p.code == "metadata-drift"]


def test_listing_first_message_is_the_first_user_text_in_file_order(store):
    # docs/rules/listing.md L.15 and docs/listing.md "First message" (the seed's "SessionInfoEntry":
    # the selector shows the first message when no name is set): the first user message with a
    # non-empty text in file order, over every branch; images, tool results and custom messages
    # give none. Each store computes it its own way (listing state, parse), so each is checked.
    image = {"type": "image", "data": "QQ==", "mimeType": "image/png"}
    store.create(header("f"), [
        message("a0", None, "assistant", [{"type": "text", "text": "assistant first"}]),
        message("u0", "a0", "user", ""),  # empty: skipped
        message("u1", "u0", "user", [image]),  # an image alone has no text
        message("t1", "u1", "toolResult", [{"type": "text", "text": "tool out"}], toolCallId="c", toolName="x"),
        message("c1", "t1", "custom", "custom text", customType="x", display=True),
        message("u2", "u1", "user", [image, {"type": "text", "text": "on a side branch"}]),  # a sibling of t1
        message("u3", "c1", "user", "on the active branch"),
    ])
    # Exactly 1,000 characters are kept whole; 1,001 are cut to 999 and marked.
    store.create(header("k"), [message("m1", None, "user", "y" * 1_000)])
    store.create(header("c"), [message("m1", None, "user", "z" * 1_001)])
    store.create(header("n"), [message("m1", None, "assistant", "only the assistant")])
    rows = {row.id: row.first_message for row in store.list_sessions()}
    assert rows == {"f": "on a side branch", "k": "y" * 1_000, "c": "z" * 999 + "…", "n": "(no messages)"}


def test_replace_header(store):
    store.create(header("s1"), [custom("e1")])
    entries_before = store.load("s1").raw
    new = header("s1", cwd="/work/b", internal=True, workflow=WORKFLOW)
    store.replace_header("s1", new)
    loaded = store.load("s1")
    assert loaded.header == new
    assert loaded.header_raw == jsonio.dumps(new)
    assert loaded.raw == entries_before
    assert store.list_sessions() == []  # now classified internal (docs/rules/listing.md O.5)
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

        with psycopg.connect(store.db.conninfo, autocommit=True) as raw:
            raw.execute("UPDATE sessions SET header_json = '\\x7b6e6f74'::bytea WHERE id = %s", (session_id,))


def test_listing_counts_the_sessions_it_could_not_load(store):
    """A listing reports how many sessions it left out because they cannot be loaded."""
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
    """``verify()`` (``check --store``) reports no problem on a store we wrote ourselves."""
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


@pytest.mark.slow
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


def test_read_equals_load_and_never_writes(store):
    h = header("s1")
    store.create(h, [message("e1", None, "user", "Hello", 1)])
    assert store.read("s1").to_bytes() == store.load("s1").to_bytes()
    with pytest.raises(SessionNotFoundError):
        store.read("missing")


def test_load_without_the_stored_texts_gives_the_same_session(store):
    # SessionStore.load(keep_raw=False): what SessionManager.open asks of every store.
    store.create(header("k1"), [custom("e1"), custom("e2", "e1")])
    full, lean = store.load("k1"), store.load("k1", keep_raw=False)
    assert (lean.header, lean.entries) == (full.header, full.entries)
    assert lean.raw == [None, None] and all(isinstance(text, bytes) for text in full.raw)
    assert [lean.entry_bytes(i) for i in range(2)] == [jsonio.dumps(e) for e in full.entries]


#: First messages at the edges of the listing's prefix (docs/listing.md, "First message"),
#: each with the prefix worked out by hand: ``(content, expected)``.
_EDGES: dict[str, tuple[Any, str]] = {
    "exact": ("a" * 1_000, "a" * 1_000),
    "one-over": ("a" * 1_001, "a" * 999 + "…"),
    "space-at-end": ("a" * 998 + " b", "a" * 998 + " b"),
    "space-before-cut": ("a" * 998 + " bc", "a" * 998 + "…"),
    "astral": ("\U0001f600" * 1_001, "\U0001f600" * 999 + "…"),
    "combining": ("e\u0301" * 501, "e\u0301" * 499 + "e…"),  # code points, not graphemes
    "wide": ("\u4e2d" * 1_001, "\u4e2d" * 999 + "…"),
    "bidi": ("\u202e" + "x" * 1_000, "\u202e" + "x" * 998 + "…"),
    "control": ("\x1b[31m\x00\x07" + "y" * 1_000, "\x1b[31m\x00\x07" + "y" * 992 + "…"),
    "tabs": ("\t" * 1_001, "\t" * 998 + "…"),
    "surrogate-at-cut": ("a" * 998 + "\udc00bb", "a" * 998 + "\udc00…"),
    "blocks": ([{"type": "text", "text": "a" * 600}, {"type": "image", "data": "", "mimeType": "image/png"},
                {"type": "text", "text": "b" * 600}], "a" * 600 + "…"),
}


@pytest.mark.parametrize("name", sorted(_EDGES))
def test_listing_prefix_at_its_edges_is_the_same_on_every_store(store, name):
    content, expected = _EDGES[name]
    store.create(header("p"), [message("m1", None, "user", content), message("m2", "m1", "assistant", "ok")])
    # A first user message of images only gives no title: the next user message with text does.
    store.create(header("i"), [message("m1", None, "user", [{"type": "image", "data": "", "mimeType": "image/png"}]),
                               message("m2", "m1", "assistant", "ok"), message("m3", "m2", "user", content)])
    rows = {row.id: row for row in store.list_sessions()}
    assert rows["p"].first_message == expected
    assert rows["i"].first_message == expected
    assert not [p for p in store.verify() if p.code == "metadata-drift"]
