"""The sync ledger of a SQLite store: what ``sessiontree sync`` took from each file.

:class:`SqliteLedger` reads the ``sync_state`` table (``sync_states``) and applies a
session change together with the file's new state in one transaction
(``sync_commit``), through the write bodies of :mod:`.writes`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sessiontree.errors import SyncConflictError
from sessiontree.stores.base import ArchivedFile, Provenance, SyncChange, SyncState
from sessiontree.stores.sqlite.connection import SqliteDatabase
from sessiontree.stores.sqlite.derived import from_db, to_db
from sessiontree.stores.sqlite.writes import SqliteWrites
from sessiontree.stores.storable import check_header, encode_entries
from sessiontree.stores.syncing import apply_sync_change_in, header_of, sync_expected

__all__ = ["SqliteLedger"]


class SqliteLedger:
    """The ``SyncLedger`` of :class:`~sessiontree.stores.sqlite.store.SqliteStore`
    (:class:`sessiontree.stores.base.SyncLedger`), over the store's
    :class:`~.connection.SqliteDatabase`; a sync commit is a write, so it holds the
    store's :class:`~sessiontree.stores.sqlite.writes.SqliteWrites` part and runs its
    in-transaction bodies."""

    def __init__(self, db: SqliteDatabase, writes: SqliteWrites) -> None:
        self.db = db
        self.writes = writes

    def sync_states(self) -> dict[str, SyncState]:
        """Every recorded sync state, by source path (one query; ``{}`` before the first sync)."""
        with self.db.read_transaction() as conn:
            if not self.db.has_schema(conn) or not conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sync_state'").fetchone():
                return {}
            rows = conn.execute(f"SELECT {_SYNC_SQL} FROM sync_state").fetchall()
        return {state.path: state for state in map(_sync_state, rows)}

    def sync_commit(self, expect: SyncState | None, state: SyncState, change: SyncChange) -> None:
        """Apply ``change`` and record ``state`` in one ``BEGIN IMMEDIATE`` transaction, if the
        recorded state of the path is still ``expect`` (read again under the write lock).
        See :meth:`SessionStore.sync_commit`.

        Raises:
            SyncConflictError, SessionExistsError, SessionNotFoundError, InvalidSessionError,
            StorageError: as the protocol says; nothing is written.
        """
        texts = encode_entries(change.entries, change.raw)
        header = header_of(change) if change.kind in ("create", "replace") else None
        if header is not None:
            check_header(header)
        with self.db.write_transaction("sync create" if change.kind == "create" else "sync") as conn:
            row = conn.execute(f"SELECT {_SYNC_SQL} FROM sync_state WHERE path = ?", (to_db(state.path),)).fetchone()
            if not sync_expected(expect, _sync_state(row) if row is not None else None):
                raise SyncConflictError(state.path)
            apply_sync_change_in(self.writes, conn, change, header, texts, _insert_provenance)
            if change.kind == "create" and change.entries:
                # A new session is whole in hand: its search text and usage rows are written
                # from it, as a bulk import's are, not read back and parsed again by the
                # settle; in a batch (bulk_writes) with the batch's other new sessions.
                created = (to_db(change.session_id), change.entries)
                if self.db.bulk is not None:
                    self.db.bulk[4].append(created)
                else:
                    self.writes.settle_created_in(conn, [created])
            values = [to_db(state.path), to_db(state.session_id), state.size, state.mtime_ns, state.inode, state.dev,
                      state.consumed, state.lines, state.entries, state.version, state.header_hash,
                      state.tail_hash, state.shape]
            conn.execute(f"INSERT OR REPLACE INTO sync_state ({_SYNC_SQL}, shape)"
                         f" VALUES ({', '.join('?' * len(values))})", values)

    def sync_shape(self, path: str) -> bytes | None:
        """The recorded file shape of ``path`` (one query). See :meth:`SessionStore.sync_shape`."""
        with self.db.read_transaction() as conn:
            if not self.db.has_schema(conn) or not _has_agent_files(conn):
                return None
            row = conn.execute("SELECT shape FROM sync_state WHERE path = ?", (to_db(path),)).fetchone()
        return None if row is None or row[0] is None else bytes(row[0])

    def archived_files(self) -> list[ArchivedFile]:
        """Every archive record, oldest first. See :meth:`SessionStore.archived_files`."""
        with self.db.read_transaction() as conn:
            if not self.db.has_schema(conn) or not _has_agent_files(conn):
                return []
            rows = conn.execute(f"SELECT {_ARCHIVE_SQL} FROM archived_files ORDER BY rowid").fetchall()
        return [ArchivedFile(from_db(row[0]), from_db(row[2]), bytes(row[1]), row[3], row[4], row[5], row[6], row[7])
                for row in rows]

    def record_archived(self, record: ArchivedFile) -> None:
        """Write an archive record (an upsert that keeps the record's place in the order).
        See :meth:`SessionStore.record_archived`.

        Raises:
            StorageError: the write failed or the store is read-only; nothing written.
        """
        values = [to_db(record.path), record.sha256, to_db(record.session_id), record.size, record.agent,
                  record.archived_at, record.destination, record.state]
        with self.db.write_transaction("archive record") as conn:
            conn.execute(f"INSERT INTO archived_files ({_ARCHIVE_SQL}) VALUES ({', '.join('?' * len(values))})"
                         " ON CONFLICT (path, sha256) DO UPDATE SET session_id = excluded.session_id,"
                         " size = excluded.size, agent = excluded.agent, archived_at = excluded.archived_at,"
                         " destination = excluded.destination, state = excluded.state", values)

    def provenances(self) -> dict[str, Provenance]:
        """Every recorded origin by session id (one query). See :meth:`SessionStore.provenances`."""
        with self.db.read_transaction() as conn:
            if not self.db.has_schema(conn) or not conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'provenance'").fetchone():
                return {}
            rows = conn.execute(f"SELECT {_PROVENANCE_SQL} FROM provenance").fetchall()
        return {from_db(row[0]): Provenance(from_db(row[0]), *row[1:]) for row in rows}

    def record_provenance(self, records: Sequence[Provenance]) -> None:
        """Record the origins whose ids have none yet, in one transaction.
        See :meth:`SessionStore.record_provenance`.

        Raises:
            StorageError: the write failed or the store is read-only; nothing written.
        """
        if not records:
            return
        with self.db.write_transaction("provenance record") as conn:
            _insert_provenance(conn, records)


_PROVENANCE_SQL = "session_id, host, machine_id, user_name, agent, source, recorded_at"


def _insert_provenance(conn: Any, records: Sequence[Provenance]) -> None:
    """Insert each record unless its session id has one (first wins)."""
    conn.executemany(f"INSERT INTO provenance ({_PROVENANCE_SQL}) VALUES (?, ?, ?, ?, ?, ?, ?)"
                     " ON CONFLICT (session_id) DO NOTHING",
                     [(to_db(r.session_id), r.host, r.machine_id, r.user, r.agent, r.source, r.recorded_at)
                      for r in records])


_SYNC_SQL = ("path, session_id, size, mtime_ns, inode, dev, consumed, lines, entries, version, header_hash,"
             " tail_hash")


_ARCHIVE_SQL = "path, sha256, session_id, size, agent, archived_at, destination, state"


def _has_agent_files(conn: Any) -> bool:
    """Whether the database has the step that keeps shapes and archive records (a read-only
    store may be older)."""
    return conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'archived_files'").fetchone() is not None


def _sync_state(row: Sequence[Any]) -> SyncState:
    """A ``sync_state`` row (columns of ``_SYNC_SQL``) as a :class:`SyncState`."""
    return SyncState(path=from_db(row[0]), session_id=from_db(row[1]), size=row[2], mtime_ns=row[3], inode=row[4],
                     dev=row[5], consumed=row[6], lines=row[7], entries=row[8], version=row[9],
                     header_hash=bytes(row[10]), tail_hash=bytes(row[11]))
