"""The SQLite append path: what an append may take from memory
instead of re-reading, and the usage ledger's fast path, give exactly what re-reading
and the full recount give.

* ``SqliteStore`` keeps, per session it appended to, the entry count, next ``seq`` and
  listing state its last append left, trusted only while ``PRAGMA data_version`` (another
  connection committed) and ``total_changes`` (this connection changed a row) are as that
  append left them, and forgotten when a write fails.
* The ledger's bulk settle inserts the ``usage_calls`` row of a key no session held
  before, and only one session of the batch holds, directly; any other key is recounted
  by the full rule (``_refresh_calls``).
"""

from __future__ import annotations

import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import billed_assistant_tokens as _assistant
from builders import usage_header as _header
from builders import user_block_entry as _user
from sessiontree.core.listing import InfoAccumulator
from sessiontree.errors import InvalidSessionError, StorageError
from sessiontree.stores import SqliteStore
from sessiontree.stores.sqlite.derived import STATE_COLUMNS, state_values
from sessiontree.stores.sqlite.usage import _refresh_calls


def _rows(store: SqliteStore, sid: str) -> list[tuple]:
    return store.db.connection().execute(
        "SELECT seq, id FROM entries WHERE session_id = ? ORDER BY seq", (sid,)).fetchall()


def _listed(store: SqliteStore, sid: str) -> tuple:
    return store.db.connection().execute(
        "SELECT entry_count, message_count, first_message FROM sessions WHERE id = ?", (sid,)).fetchone()


def test_state_values_are_to_state_in_column_order():
    info = InfoAccumulator(message_count=3, first_message="hi \ud83d", modified_ms=5.5, has_name=True, name="n",
                           anchor_id="a1", summary_through="a0", summary_text="sum")
    # to_state() keyed by STATE_COLUMNS; a lone surrogate stored as its surrogatepass bytes, hasName as 0/1.
    assert [key for key, _ in STATE_COLUMNS] == ["messageCount", "firstMessage", "modifiedMs", "hasName", "name",
                                                 "anchorId", "summaryThrough", "summaryText"]
    assert state_values(info) == [3, b"hi \xed\xa0\xbd", 5.5, 1, "n", "a1", "a0", "sum"]
    assert state_values(InfoAccumulator()) == [0, None, 0.0, 0, None, None, None, None]


def test_appends_of_another_connection_are_seen(tmp_path):
    path = str(tmp_path / "s.db")
    a = SqliteStore(path)
    a.create(_header("s"), [_user("e0", None, "first")])
    a.append("s", [_user("e1", "e0", "two")])  # a now remembers the session
    b = SqliteStore(path)
    b.append("s", [_user("e2", "e1", "three")])
    b.append("s", [_user("e3", "e2", "four")])
    a.append("s", [_user("e4", "e3", "five")])  # must see b's two appends
    assert _rows(a, "s") == [(0, "e0"), (1, "e1"), (2, "e2"), (3, "e3"), (4, "e4")]
    assert _listed(a, "s") == (5, 5, "first")
    assert [e["id"] for e in a.load("s").entries] == ["e0", "e1", "e2", "e3", "e4"]
    assert a.verify() == []
    a.close()
    b.close()


def test_a_row_changed_by_hand_on_the_same_connection_is_seen(tmp_path):
    store = SqliteStore(str(tmp_path / "s.db"))
    store.create(_header("s"), [_user("e0", None, "a")])
    store.append("s", [_user("e1", "e0", "b")])
    store.append("s", [_user("e2", "e1", "c")])
    conn = store.db.connection()
    conn.execute("DELETE FROM message_texts WHERE session_id = 's' AND seq = 2")
    conn.execute("DELETE FROM entries WHERE session_id = 's' AND seq = 2")
    store.append("s", [_user("e3", "e1", "d")])
    # Re-read, not remembered: max(seq) + 1 is 2 again (a remembered next seq would be 3),
    # and the stored count (3, stale since the hand edit) grows by one, as before.
    assert _rows(store, "s") == [(0, "e0"), (1, "e1"), (2, "e3")]
    assert _listed(store, "s")[0] == 4
    store.close()


def test_a_failed_append_leaves_nothing_remembered(tmp_path):
    store = SqliteStore(str(tmp_path / "s.db"))
    store.create(_header("s"), [_user("e0", None, "a")])
    store.append("s", [_user("e1", "e0", "b")])
    with pytest.raises(InvalidSessionError):
        # The first entry is fine and counted by the listing state in memory; the second
        # reuses an id, so the whole call is rolled back.
        store.append("s", [_user("e2", "e1", "c"), _user("e0", "e2", "dup")])
    store.append("s", [_user("e3", "e1", "d")])
    assert _rows(store, "s") == [(0, "e0"), (1, "e1"), (2, "e3")]
    assert _listed(store, "s") == (3, 3, "a")
    assert store.verify() == []
    store.close()


def test_an_append_to_a_deleted_session_is_refused(tmp_path):
    path = str(tmp_path / "s.db")
    a = SqliteStore(path)
    a.create(_header("s"), [_user("e0", None, "a")])
    a.append("s", [_user("e1", "e0", "b")])
    b = SqliteStore(path)
    b.delete("s")
    with pytest.raises(Exception) as raised:
        a.append("s", [_user("e2", "e1", "c")])
    assert type(raised.value).__name__ == "SessionNotFoundError"
    a.delete("s")  # this connection deletes: remembered state must go too
    a.create(_header("s"), [_user("x0", None, "new")])
    a.append("s", [_user("x1", "x0", "again")])
    assert _rows(a, "s") == [(0, "x0"), (1, "x1")]
    assert _listed(a, "s") == (2, 2, "new")
    a.close()
    b.close()


def test_readonly_store_refuses_appends(tmp_path):
    path = str(tmp_path / "s.db")
    SqliteStore(path).close()
    store = SqliteStore(path, readonly=True)
    with pytest.raises(StorageError):
        store.append("s", [_user("e0", None, "a")])
    store.close()


# --------------------------------------------------------------------------- usage fast path

_CALLS = ("SELECT dedup_key, m, owner, provider, model, ts_ms, input, output, cache_read, cache_write, cost_nanos"
          " FROM usage_calls ORDER BY dedup_key")

#: Few distinct contents, so keys repeat within a session (m > 1) and across sessions (owner).
_CONTENT = st.tuples(st.sampled_from(["2026-01-01T10:00:00.000Z", "2026-01-02T10:00:00.000Z"]),
                     st.sampled_from([5, 7]))
_OPS = st.lists(st.tuples(st.sampled_from(["create", "append", "delete"]), st.integers(0, 3),
                          st.lists(_CONTENT, min_size=0, max_size=4)), min_size=1, max_size=12)


def _recounted(store: SqliteStore) -> list[tuple]:
    """usage_calls as the full rule computes it from the ledger (rolled back afterwards)."""
    conn = store.db.connection()
    conn.execute("BEGIN IMMEDIATE")
    try:
        keys = {row[0] for row in conn.execute("SELECT dedup_key FROM usage_ledger")}
        conn.execute("DELETE FROM usage_calls")
        if keys:
            _refresh_calls(conn, keys)
        return conn.execute(_CALLS).fetchall()
    finally:
        conn.execute("ROLLBACK")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_OPS)
def test_usage_calls_equal_the_full_recount(ops):
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(f"{tmp}/s.db")
        last: dict[str, str | None] = {}
        counter = 0
        for kind, which, contents in ops:
            sid = f"s{which}"
            entries = []
            for ts, tokens in contents:
                counter += 1
                eid = f"e{counter}"
                entries.append(_assistant(eid, last.get(sid), ts, tokens))
                last[sid] = eid
            if kind == "create" and sid not in store.session_ids():
                # createdAt ties on purpose (s0/s2, s1/s3): the owner falls back to the id.
                store.create(_header(sid, f"2026-01-0{which % 2 + 1}T00:00:00.000Z"), entries)
            elif kind == "append" and sid in store.session_ids():
                store.append(sid, entries)
            elif kind == "delete":
                store.delete(sid)
                last.pop(sid, None)
            if which % 2 == 0:
                # The ledger is settled in bulk (docs/decisions/bulk-settle.md): now and then,
                # so one settle batch often holds several sessions' writes and shared keys.
                store.settle_derived()
            assert store.db.connection().execute(_CALLS).fetchall() == _recounted(store)
        store.settle_derived()
        assert store.db.connection().execute(_CALLS).fetchall() == _recounted(store)
        store.close()
