"""The ``tool_calls`` table of a SQLite store (schema step ``m018_tool_calls``): written with
the entries, rebuilt by ``reindex``, filled by the step on a store that predates it.
Expected rows are the calls of the session below, counted by hand."""

from __future__ import annotations

import sqlite3

from builders import header, text_block, tool_call
from diff_trees import assistant_at, at, result_at, user_at
from sessiontree.stores.sqlite import SqliteStore

SID = "019cadb7-0000-7000-8000-000000000004"

#: (seq, n, name, path): a1 reads src/x.py; a2 edits it (file_path) and runs bash; a3's
#: call names no tool (``?``); the user message and results hold none.
EXPECTED = [(1, 0, "read", "src/x.py"), (3, 0, "edit", "src/x.py"), (3, 1, "bash", None), (5, 0, "?", None)]


def _entries() -> list[dict]:
    return [
        user_at("u1", None, "start", at(0, 0)),
        assistant_at("a1", "u1", at(0, 1), [text_block("look"), tool_call("c1", "read", {"path": "src/x.py"})]),
        result_at("r1", "a1", "c1", "read", "contents", at(0, 2)),
        assistant_at("a2", "r1", at(0, 3), [tool_call("c2", "edit", {"file_path": "src/x.py"}),
                                            tool_call("c3", "bash", {"command": "cat src/x.py"})]),
        result_at("r2", "a2", "c2", "edit", "ok", at(0, 4)),
        assistant_at("a3", "r2", at(0, 5), [dict(tool_call("c4", "bash", {}), name=7)]),
    ]


def _rows(path) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT seq, n, name, path FROM tool_calls WHERE session_id = ? ORDER BY seq, n",
                            (SID,)).fetchall()
    finally:
        conn.close()


def test_written_with_the_entries_and_by_appends(tmp_path) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        entries = _entries()
        store.create(header(SID), entries[:3])
        store.append(SID, entries[3:])
    assert _rows(path) == EXPECTED


def test_deleted_with_the_session_checked_and_rebuilt_by_reindex(tmp_path) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        store.create(header(SID), _entries())
        conn = sqlite3.connect(path)
        conn.execute("DELETE FROM tool_calls WHERE seq = 3")
        conn.execute("INSERT INTO tool_calls VALUES (?, 0, 0, 'stale', NULL)", (SID,))
        conn.commit()
        conn.close()
        assert _rows(path) != EXPECTED
        # Two rows deleted, one stale row added: 3 stored, 4 rebuilt (check --store).
        drift = [p.message for p in store.verify() if p.code == "metadata-drift"]
        assert len(drift) == 1 and "tool_calls (3 rows; rebuilt: 4)" in drift[0]
        store.reindex()
        assert _rows(path) == EXPECTED
        assert [p for p in store.verify() if p.code == "metadata-drift"] == []
        store.delete(SID)
    assert _rows(path) == []


def test_the_schema_step_fills_a_store_that_predates_it(tmp_path) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        store.create(header(SID), _entries())
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE tool_calls")
    conn.execute("DELETE FROM schema_migrations WHERE name = 'm018_tool_calls'")
    conn.commit()
    conn.close()
    with SqliteStore(path, readonly=True) as old:  # an older schema read-only: no summaries, no error
        assert old.read_summaries(SID) is None
    SqliteStore(path).close()
    assert _rows(path) == EXPECTED
