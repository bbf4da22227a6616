"""Retention of a SQLite store (docs/team.md, "Retention"): where holds and the deletion
log live (the tables of the schema step :func:`m017_retention`); the prune itself is
:mod:`sessiontree.stores.retention`'s."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from sessiontree.stores.sqlite.derived import from_db, to_db
from sessiontree.stores.transactions import Transactions

__all__ = ["SqliteHolds", "m017_retention"]


def m017_retention(conn: sqlite3.Connection) -> None:
    """The held sessions and the deletion log (ids, counts and sizes, never content).
    Not derived data: ``reindex`` never touches them."""
    conn.execute("""
        CREATE TABLE IF NOT EXISTS holds (
            session_id TEXT PRIMARY KEY,
            -- Milliseconds since the epoch (UTC).
            held_at INTEGER NOT NULL
        )""")
    conn.execute("""
        CREATE TABLE IF NOT EXISTS deletion_log (
            seq INTEGER PRIMARY KEY,
            deleted_at INTEGER NOT NULL,
            deleted_by TEXT NOT NULL,
            session_id TEXT NOT NULL,
            entries INTEGER NOT NULL,
            bytes INTEGER NOT NULL,
            reason TEXT NOT NULL
        )""")


class SqliteHolds:
    """Holds and the deletion log in the store's ``holds`` and ``deletion_log`` tables: the
    :class:`~sessiontree.stores.retention.HoldRecords` of a SQLite store, over its
    :class:`~sessiontree.stores.transactions.Transactions` (a database of an older schema, opened read-only,
    has neither table: no holds, an empty log)."""

    def __init__(self, db: Transactions[sqlite3.Connection]) -> None:
        self.db = db

    def write_hold(self, session_id: str, held: bool) -> None:
        """Record or drop a hold, in one write transaction.

        Raises:
            StorageError: the write failed."""
        with self.db.write_transaction("hold") as conn:
            if held:
                conn.execute("INSERT INTO holds (session_id, held_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
                             (to_db(session_id), int(time.time() * 1000)))
            else:
                conn.execute("DELETE FROM holds WHERE session_id = ?", (to_db(session_id),))

    def stored_holds(self) -> set[str]:
        """The held session ids as recorded."""
        with self.db.read_transaction() as conn:
            if not _has_tables(conn):
                return set()
            return {from_db(row[0]) for row in conn.execute("SELECT session_id FROM holds")}

    def append_deletions(self, rows: list[dict[str, Any]]) -> None:
        """Append lines to the deletion log, in one write transaction.

        Raises:
            StorageError: the write failed."""
        with self.db.write_transaction("deletion log") as conn:
            conn.executemany("INSERT INTO deletion_log (deleted_at, deleted_by, session_id, entries, bytes, reason)"
                             " VALUES (?, ?, ?, ?, ?, ?)",
                             [(r["deleted_at"], r["deleted_by"], to_db(r["session_id"]), r["entries"], r["bytes"],
                               r["reason"]) for r in rows])

    def deletion_log(self) -> list[dict[str, Any]]:
        """The deletion log, oldest first. See :meth:`Retention.deletion_log`."""
        with self.db.read_transaction() as conn:
            if not _has_tables(conn):
                return []
            rows = conn.execute("SELECT deleted_at, deleted_by, session_id, entries, bytes, reason"
                                " FROM deletion_log ORDER BY seq").fetchall()
        return [{"deleted_at": r[0], "deleted_by": r[1], "owner": "", "session_id": from_db(r[2]),
                 "entries": r[3], "bytes": r[4], "reason": r[5]} for r in rows]


def _has_tables(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'holds'").fetchone() \
        is not None
