"""The listing texts' pending tail of a SQLite store (docs/decisions/append-texts-tail.md).

Per-call appends through one store write the entry and the session's row; their
``message_texts`` rows wait in the store's memo until the tail
(``sessions.texts_from`` on) is ``TEXTS_TAIL`` entries long, then are written
together. A listing's ``all_messages_text`` derives the tail's texts from the
entries, so every answer is the one a store writing each text at once gives; an
append without the memo (another connection, a failed write) writes the tail first;
``check --store`` sees no drift and ``reindex`` writes every text.
"""

from __future__ import annotations

import sqlite3

import pytest

from builders import custom, user_entry
from builders import role_message as message
from builders import work_header as header
from sessiontree.errors import InvalidSessionError
from sessiontree.stores import MemoryStore, SqliteStore
from sessiontree.stores.sqlite.derived import TEXTS_TAIL


def _user(i: int, parent: str | None) -> dict:
    return user_entry(f"u{i}", parent, f"ask {i}")


def _texts_state(store: SqliteStore, sid: str) -> tuple[int | None, list[int]]:
    """(sessions.texts_from, the seqs of the stored message_texts rows)."""
    conn = store.db.connection()
    start = conn.execute("SELECT texts_from FROM sessions WHERE id = ?", (sid,)).fetchone()[0]
    seqs = [row[0] for row in conn.execute("SELECT seq FROM message_texts WHERE session_id = ? ORDER BY seq",
                                           (sid,))]
    return start, seqs


def _all_text(store, sid: str) -> str:
    return next(r for r in store.list_sessions() if r.id == sid).all_messages_text


def _append_users(store, sid: str, first: int, last: int) -> None:
    """Append user messages ``u<first>`` .. ``u<last>``, one call each (u0 is the root)."""
    for i in range(first, last + 1):
        store.append(sid, [_user(i, f"u{i - 1}")])


def test_per_call_appends_leave_texts_pending_and_the_listing_exact(tmp_path):
    store = SqliteStore(tmp_path / "s.db")
    store.create(header("s"), [_user(0, None)])
    _append_users(store, "s", 1, 5)
    # u1 came without the memo (the first append after create): written at once;
    # u2..u5 (seq 2..5) wait.
    assert _texts_state(store, "s") == (2, [0, 1])
    assert _all_text(store, "s") == "ask 0 ask 1 ask 2 ask 3 ask 4 ask 5"
    # A listing through another connection (read-only) gives the same text.
    with SqliteStore(tmp_path / "s.db", readonly=True) as reader:
        assert _all_text(reader, "s") == "ask 0 ask 1 ask 2 ask 3 ask 4 ask 5"
    assert store.verify() == []
    store.close()


def test_the_tail_is_written_once_it_is_texts_tail_entries_long(tmp_path):
    store = SqliteStore(tmp_path / "s.db")
    store.create(header("s"), [_user(0, None)])
    _append_users(store, "s", 1, 1)
    # seq 2 .. TEXTS_TAIL wait (TEXTS_TAIL - 1 entries); the next one reaches TEXTS_TAIL.
    _append_users(store, "s", 2, TEXTS_TAIL)
    assert _texts_state(store, "s") == (2, [0, 1])
    _append_users(store, "s", TEXTS_TAIL + 1, TEXTS_TAIL + 1)
    assert _texts_state(store, "s") == (None, list(range(TEXTS_TAIL + 2)))
    assert _all_text(store, "s") == " ".join(f"ask {i}" for i in range(TEXTS_TAIL + 2))
    store.close()


def test_entries_without_listing_text_count_in_the_tail_and_add_no_row(tmp_path):
    store = SqliteStore(tmp_path / "s.db")
    store.create(header("s"), [_user(0, None)])
    store.append("s", [custom("c1", "u0")])  # written at once: no text, no row
    store.append("s", [custom("c2", "c1")])
    store.append("s", [message("a3", "c2", "assistant", [{"type": "text", "text": "done"}])])
    store.append("s", [custom("c4", "a3")])
    # Only user and assistant messages are listed (docs/rules/listing.md L.15): seq 3.
    assert _texts_state(store, "s") == (2, [0])
    assert _all_text(store, "s") == "ask 0 done"
    assert store.verify() == []
    store.close()


def test_another_connection_writes_the_tail_before_its_append(tmp_path):
    path = tmp_path / "s.db"
    a = SqliteStore(path)
    a.create(header("s"), [_user(0, None)])
    _append_users(a, "s", 1, 4)
    assert _texts_state(a, "s") == (2, [0, 1])
    b = SqliteStore(path)
    b.append("s", [_user(5, "u4")])  # b has no memo: it derives seq 2..4 from the entries
    assert _texts_state(b, "s") == (None, [0, 1, 2, 3, 4, 5])
    _append_users(a, "s", 6, 6)  # a's memo is stale (b committed): re-read, nothing pending
    assert _texts_state(a, "s") == (None, [0, 1, 2, 3, 4, 5, 6])
    assert _all_text(a, "s") == " ".join(f"ask {i}" for i in range(7))
    assert a.verify() == []
    a.close()
    b.close()


def test_a_failed_append_loses_no_pending_text(tmp_path):
    store = SqliteStore(tmp_path / "s.db")
    store.create(header("s"), [_user(0, None)])
    _append_users(store, "s", 1, 3)
    with pytest.raises(InvalidSessionError):
        store.append("s", [_user(4, "u3"), _user(0, "u4")])  # reuses u0: all rolled back
    assert _texts_state(store, "s") == (2, [0, 1])
    store.append("s", [_user(4, "u3")])  # no memo after the failure: writes the tail
    assert _texts_state(store, "s") == (None, [0, 1, 2, 3, 4])
    assert _all_text(store, "s") == "ask 0 ask 1 ask 2 ask 3 ask 4"
    store.close()


def test_the_listing_equals_a_store_that_writes_every_text(tmp_path):
    sqlite_store, memory = SqliteStore(tmp_path / "s.db"), MemoryStore()
    for store in (sqlite_store, memory):
        store.create(header("s"), [_user(0, None)])
        _append_users(store, "s", 1, 9)
        store.append("s", [message("a10", "u9", "assistant", [{"type": "text", "text": "fine"}])])
    ours, theirs = sqlite_store.list_sessions()[0], memory.list_sessions()[0]
    assert ours.all_messages_text == theirs.all_messages_text
    assert ours.to_dict() == theirs.to_dict()
    sqlite_store.close()


def test_check_finds_a_stray_row_in_the_tail_and_reindex_writes_every_text(tmp_path):
    store = SqliteStore(tmp_path / "s.db")
    store.create(header("s"), [_user(0, None)])
    _append_users(store, "s", 1, 3)
    raw = sqlite3.connect(tmp_path / "s.db")
    raw.execute("INSERT INTO message_texts (session_id, seq, text) VALUES ('s', 3, 'ask 3')")
    raw.commit()
    raw.close()
    problems = store.verify()
    assert [p.code for p in problems] == ["metadata-drift"]
    assert "message_texts" in problems[0].message
    assert store.reindex("s") == 1
    assert _texts_state(store, "s") == (None, [0, 1, 2, 3])
    assert store.verify() == []
    assert _all_text(store, "s") == "ask 0 ask 1 ask 2 ask 3"
    store.close()


def test_a_pending_entry_stored_with_its_image_out_of_line_gives_its_text(tmp_path):
    image = "iVBORw0KGgo" + "A" * (70 * 1024)  # above the blob threshold (64 KiB): cut out of line
    store = SqliteStore(tmp_path / "s.db")
    store.create(header("s"), [_user(0, None)])
    _append_users(store, "s", 1, 1)
    store.append("s", [message("m2", "u1", "user", [{"type": "text", "text": "see this"},
                                                     {"type": "image", "data": image, "mimeType": "image/png"}])])
    stored = store.db.connection().execute("SELECT length(json) FROM entries WHERE seq = 2").fetchone()[0]
    assert stored < len(image)  # the record holds a reference, not the image
    assert _texts_state(store, "s") == (2, [0, 1])
    assert _all_text(store, "s") == "ask 0 ask 1 see this"
    assert store.verify() == []
    store.close()
