"""The ``tool_calls`` table: each entry's tool calls (name, file path) as derived data
(docs/stores.md, "Derived data"; docs/decisions/diff-summaries.md).

One row per ``toolCall`` block of an assistant message, ``(session_id, seq, n, name,
path)``: the pairs of :func:`sessiontree.core.diff.tool_calls`, so ``diff`` counts the
tool calls and files of a long shared history without parsing it (the rest of its
columns come from the ``entries`` columns and the usage ledger). Kept like
``message_texts``: written by every write with the entry (``create``, ``append``,
``replace``, so ``import`` and ``sync``), deleted with its session, rebuilt by
``reindex``, compared with a rebuild by ``check --store`` (:class:`ToolCallsCheck`);
filled for the entries already stored by the schema step :func:`m018_tool_calls`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from sessiontree.core.toolcalls import tool_calls
from sessiontree.format import jsonio
from sessiontree.stores.sqlite.derived import from_db, to_db
from sessiontree.stores.verify import row_drift

__all__ = ["ToolCallsCheck", "insert_rows", "m018_tool_calls", "read_rows", "rows_of"]

_INSERT = "INSERT INTO tool_calls (session_id, seq, n, name, path) VALUES (?, ?, ?, ?, ?)"


def rows_of(key: Any, seq: int, message: Any) -> list[tuple[Any, ...]]:
    """The ``tool_calls`` rows of the message entry at ``seq`` of session ``key`` (its
    ``message`` value; empty unless it is an assistant message with tool calls)."""
    return [(key, seq, n, to_db(name), to_db(path)) for n, (name, path) in enumerate(tool_calls(message))]


def insert_rows(conn: sqlite3.Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert rows made by :func:`rows_of` (inside the writing transaction)."""
    if len(rows) == 1:
        conn.execute(_INSERT, rows[0])
    elif rows:
        conn.executemany(_INSERT, rows)


def read_rows(conn: sqlite3.Connection, key: Any) -> list[tuple[int, str, str | None]]:
    """``(seq, name, path)`` of session ``key``'s tool calls, in ``seq`` and call order."""
    rows = conn.execute("SELECT seq, name, path FROM tool_calls WHERE session_id = ? ORDER BY seq, n",
                        (key,)).fetchall()
    if any(isinstance(name, bytes) or isinstance(path, bytes) for _, name, path in rows):
        rows = [(seq, from_db(name), from_db(path)) for seq, name, path in rows]
    return rows


class ToolCallsCheck:
    """The ``DerivedCheck`` (``stores/verify.py``) of one session's ``tool_calls`` rows for
    ``check --store``: fed the session's sound entries, it compares the stored rows with
    the rows a rebuild writes (drift is repaired by ``reindex``)."""

    def __init__(self, conn: sqlite3.Connection, key: Any) -> None:
        self.conn, self.key = conn, key
        self.rebuilt: list[tuple[int, str, str | None]] = []

    def add(self, seq: int, entry: dict[str, Any]) -> None:
        """Take one parsed, valid entry (its ``seq``)."""
        if entry.get("type") == "message":
            self.rebuilt.extend((seq, name, path) for name, path in tool_calls(entry.get("message")))

    def drift(self) -> list[str]:
        """``["tool_calls (...)"]`` when the stored rows differ from the rebuild, else ``[]``."""
        return row_drift("tool_calls", read_rows(self.conn, self.key), self.rebuilt)


def m018_tool_calls(conn: sqlite3.Connection) -> None:
    """The ``tool_calls`` table (module docstring), filled from the message records already
    stored. Derived data: a leftover table is dropped and rebuilt. A record that does not
    parse adds nothing (``check --store`` reports it; ``reindex`` refuses it), as the
    usage ledger's rebuild does."""
    conn.execute("DROP TABLE IF EXISTS tool_calls")
    conn.execute("""
        CREATE TABLE tool_calls (
            -- sessions.id and entries.seq of the assistant message holding the call.
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            -- The call's index among the message's toolCall blocks.
            n INTEGER NOT NULL,
            -- The tool's name as recorded ('?' when it is not a string).
            name TEXT NOT NULL,
            -- The file a read/edit/write call names (core.diff.tool_calls' rule), else NULL.
            path TEXT,
            PRIMARY KEY (session_id, seq, n)
        ) WITHOUT ROWID""")
    for (key,) in conn.execute("SELECT id FROM sessions").fetchall():
        rows: list[tuple[Any, ...]] = []
        for seq, text in conn.execute("SELECT seq, json FROM entries WHERE session_id = ? AND type = 'message'"
                                      " ORDER BY seq", (key,)):
            try:
                entry = jsonio.loads(text)
            except ValueError:
                continue
            if isinstance(entry, dict):
                rows.extend(rows_of(key, seq, entry.get("message")))
        insert_rows(conn, rows)
