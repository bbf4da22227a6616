"""The sync ledger of a PostgreSQL store: what ``sessiontree sync`` took from each file, per host.

:class:`PostgresLedger` reads the ``sync_state`` rows of the store's host
(``sync_states``) and applies a session change together with the file's new state in
one transaction under a per-path advisory lock (:data:`SYNC_LOCK`, ``sync_commit``),
through the write bodies of :mod:`.writes`. ``run_lock`` is the host's sync and archive
run lock (:data:`RUN_LOCK`), the equivalent of the ``flock`` a SQLite or JSONL store's
runs take (docs/postgres.md, "Sync and archive runs").
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sessiontree.errors import StorageError, SyncConflictError
from sessiontree.stores.base import ArchivedFile, Provenance, SyncChange, SyncState
from sessiontree.stores.postgres.connection import PostgresDatabase, error_first_line
from sessiontree.stores.postgres.derived import text_copy
from sessiontree.stores.postgres.writes import PostgresWrites, exact_id
from sessiontree.stores.storable import check_header, encode_entries, id_in_use_error
from sessiontree.stores.syncing import apply_sync_change_in, header_of, sync_expected

__all__ = ["RUN_LOCK", "SYNC_LOCK", "PostgresLedger"]


class PostgresLedger:
    """The ``SyncLedger`` of :class:`~sessiontree.stores.postgres.store.PostgresStore`
    (:class:`sessiontree.stores.base.SyncLedger`) over ``db``; a sync commit is a write,
    so it writes entries through the ``writes`` part's in-transaction bodies
    (``create_in``, ``append_in``, ``replace_in``)."""

    def __init__(self, db: PostgresDatabase, writes: PostgresWrites) -> None:
        self.db = db
        self.writes = writes

    @contextmanager
    def run_lock(self, on_busy: Callable[[], None] | None = None) -> Iterator[None]:
        """Hold this host's run lock for the block: one ``sync`` or ``archive`` run of a
        host (:attr:`sync_host`) at a time on this database, the others wait, as the
        ``flock`` of a SQLite or JSONL store does (:func:`sessiontree.sync.engine.run_lock`).

        The lock is ``pg_advisory_xact_lock(RUN_LOCK, crc32(host))`` in a transaction
        held open on a connection of its own (not the pool's) for the whole run, so it
        works behind PgBouncer in transaction mode and is released by the server when
        the process dies (its connection closes). The transaction ends with the run; the
        connection stays open, idle, for the process's next run (a watch's next batch)
        until the store is closed, and is replaced when the server has closed it. Runs of different hosts do not wait
        for each other: each works on its own files and its own sync and archive
        records. ``on_busy`` is called once, before waiting, when another run holds it.

        Raises:
            StorageError: the database could not be reached or the lock not taken.
        """
        import psycopg  # an optional extra: present once a store of this class is open

        if self.db.readonly:
            raise StorageError(f"sync run: {self.db.url} is opened read-only")
        key = (RUN_LOCK, _lock_key(self.db.sync_host.encode("utf-8", "surrogatepass")))
        try:
            conn = self.db.own_connection()
        except psycopg.Error as exc:
            raise StorageError(f"sync run lock on {self.db.url}: {error_first_line(exc)}") from exc
        keep = False
        try:
            try:
                # The run's transaction stays idle between the run's own (pooled) transactions:
                # a server-wide idle timeout must not end it, and the lock with it, mid-run.
                # (set_config(..., true) is SET LOCAL: one round trip with the lock's try.)
                got = conn.execute("SELECT pg_try_advisory_xact_lock(%s, %s),"
                                   " set_config('idle_in_transaction_session_timeout', '0', true)",
                                   key).fetchone()[0]
                if not got:
                    if on_busy is not None:
                        on_busy()
                    conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", key)
            except psycopg.Error as exc:
                raise StorageError(f"sync run lock on {self.db.url}: {error_first_line(exc)}") from exc
            yield
            keep = True
        finally:
            try:
                conn.rollback()  # ends the transaction: the lock goes with it
            except psycopg.Error:
                keep = False  # a dead connection: the server released the lock with it
            if keep:
                # Kept idle for the next run of this process: a watch takes the lock once a
                # batch, and a new connection each time (a server process started, its
                # authentication) cost the server about 4 ms of CPU a batch
                # (docs/postgres.md, "The watcher under CPU contention").
                self.db.keep_connection(conn)
            else:
                conn.close()

    def sync_states(self) -> dict[str, SyncState]:
        """Every :class:`~sessiontree.stores.base.SyncState` recorded by this host
        (:attr:`sync_host`), by source path (one query; ``{}`` before the first sync, on an empty database, or on an older schema
        opened read-only).

        Raises:
            StorageError: the database could not be read.
        """
        with self.db.transaction("reading sync states", write=False) as conn:
            if not self.db.has_schema(conn) or "m002_sync_state" not in self.db.applied_steps:
                return {}
            with conn.cursor(binary=True) as cur:
                rows = cur.execute(f"SELECT {_SYNC_SQL} FROM sync_state WHERE host = %s",
                                   (self.db.sync_host,)).fetchall()
        return {state.path: state for state in map(_sync_state, rows)}

    def sync_commit(self, expect: SyncState | None, state: SyncState, change: SyncChange) -> None:
        """Apply ``change`` and record ``state`` for ``state.path`` in one transaction, only
        if the recorded state of that path is still ``expect`` (see
        :meth:`SessionStore.sync_commit <sessiontree.stores.base.SessionStore.sync_commit>`).

        States are per host (:attr:`sync_host`): two laptops syncing into one
        database each keep their own, since a path names a file on one host.

        The compare-and-set: a transaction-scoped advisory lock on the path
        (:data:`SYNC_LOCK` and the CRC-32 of host and path) serializes commits for one
        file across processes and hosts, including the first one, when there
        is no row yet to lock; the state is then read, compared with
        :meth:`SyncState.same_file`, and written with the change before COMMIT.
        Entries are written as :meth:`create`, :meth:`append` and
        :meth:`replace_session` write them (row lock on the session).

        Raises:
            SyncConflictError: the recorded state is not ``expect``; nothing written.
            SessionExistsError: ``create`` of an id already stored.
            SessionNotFoundError: ``append``/``replace`` of a missing session.
            InvalidSessionError: an invalid entry, or an entry id already in the session.
            StorageError: the write failed; nothing was written.
        """
        texts = encode_entries(change.entries, change.raw)
        header = header_of(change) if change.kind in ("create", "replace") else None
        if header is not None:
            check_header(header)
        if change.kind not in ("none", "create", "append", "replace"):
            raise ValueError(f"unknown sync change kind {change.kind!r}")
        exact_id(change.session_id, "session id")
        for entry in change.entries:
            exact_id(entry["id"], "entry id")
        path = state.path.encode("utf-8", "surrogatepass")
        with self.db.transaction("sync", write=True, session_id=change.session_id) as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)",
                         (SYNC_LOCK, _lock_key(self.db.sync_host.encode("utf-8", "surrogatepass") + b"\0" + path)))
            with conn.cursor(binary=True) as cur:
                row = cur.execute(f"SELECT {_SYNC_SQL} FROM sync_state WHERE host = %s AND path = %s",
                                  (self.db.sync_host, path)).fetchone()
            if not sync_expected(expect, _sync_state(row) if row is not None else None):
                raise SyncConflictError(state.path)
            if change.kind == "append" and change.entries:
                _refuse_stored_ids(conn, change.session_id, [entry["id"] for entry in change.entries])
            apply_sync_change_in(self.writes, conn, change, header, texts, _insert_provenance)
            values = (self.db.sync_host, path, exact_id(state.session_id, "session id"), state.size, state.mtime_ns, state.inode,
                      state.dev, state.consumed, state.lines, state.entries, state.version,
                      bytes(state.header_hash), bytes(state.tail_hash), state.shape)
            conn.execute(
                f"INSERT INTO sync_state (host, {_SYNC_SQL}, shape) VALUES ({', '.join(['%s'] * len(values))})"
                " ON CONFLICT (host, path) DO UPDATE SET "
                + ", ".join(f"{name} = excluded.{name}" for name in (*_SYNC_COLUMNS[1:], "shape")), values)

    def sync_shape(self, path: str) -> bytes | None:
        """The file shape this host recorded for ``path`` (one query).
        See :meth:`SessionStore.sync_shape <sessiontree.stores.base.SessionStore.sync_shape>`.

        Raises:
            StorageError: the database could not be read.
        """
        with self.db.transaction("reading a file shape", write=False) as conn:
            if not self.db.has_schema(conn) or "m005_agent_files" not in self.db.applied_steps:
                return None
            with conn.cursor(binary=True) as cur:
                row = cur.execute("SELECT shape FROM sync_state WHERE host = %s AND path = %s",
                                  (self.db.sync_host, path.encode("utf-8", "surrogatepass"))).fetchone()
        return None if row is None or row[0] is None else bytes(row[0])

    def archived_files(self) -> list[ArchivedFile]:
        """This host's archive records, oldest first.
        See :meth:`SessionStore.archived_files <sessiontree.stores.base.SessionStore.archived_files>`.

        Raises:
            StorageError: the database could not be read.
        """
        with self.db.transaction("reading archive records", write=False) as conn:
            if not self.db.has_schema(conn) or "m005_agent_files" not in self.db.applied_steps:
                return []
            with conn.cursor(binary=True) as cur:
                rows = cur.execute("SELECT path, sha256, session_id, size, agent, archived_at, destination, state"
                                   " FROM archived_files WHERE host = %s ORDER BY seq", (self.db.sync_host,)).fetchall()
        return [ArchivedFile(bytes(row[0]).decode("utf-8", "surrogatepass"), row[2], bytes(row[1]), int(row[3]),
                             row[4], int(row[5]), row[6], row[7]) for row in rows]

    def record_archived(self, record: ArchivedFile) -> None:
        """Write this host's archive record (an upsert keeping its place in the order).
        See :meth:`SessionStore.record_archived <sessiontree.stores.base.SessionStore.record_archived>`.

        Raises:
            StorageError: the write failed or the store is read-only; nothing written.
        """
        values = (self.db.sync_host, record.path.encode("utf-8", "surrogatepass"), bytes(record.sha256),
                  exact_id(record.session_id, "session id"), record.size, record.agent, record.archived_at,
                  record.destination, record.state)
        with self.db.transaction("archive record", write=True) as conn:
            conn.execute("INSERT INTO archived_files (host, path, sha256, session_id, size, agent, archived_at,"
                         " destination, state) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
                         " ON CONFLICT (host, path, sha256) DO UPDATE SET session_id = excluded.session_id,"
                         " size = excluded.size, agent = excluded.agent, archived_at = excluded.archived_at,"
                         " destination = excluded.destination, state = excluded.state", values)

    def provenances(self) -> dict[str, Provenance]:
        """Every recorded origin by session id, whichever host recorded it (one query).
        See :meth:`SessionStore.provenances <sessiontree.stores.base.SessionStore.provenances>`.

        Raises:
            StorageError: the database could not be read.
        """
        with self.db.transaction("reading provenance", write=False) as conn:
            if not self.db.has_schema(conn) or "m006_provenance" not in self.db.applied_steps:
                return {}
            rows = conn.execute(f"SELECT {_PROVENANCE_SQL} FROM provenance").fetchall()
        return {row[0]: Provenance(row[0], row[1], row[2], row[3], row[4], row[5], int(row[6])) for row in rows}

    def record_provenance(self, records: Sequence[Provenance]) -> None:
        """Record the origins whose ids have none yet, in one transaction (``ON CONFLICT DO
        NOTHING``: the first host wins). See :meth:`SessionStore.record_provenance
        <sessiontree.stores.base.SessionStore.record_provenance>`.

        Raises:
            StorageError: the write failed or the store is read-only; nothing written.
        """
        if not records:
            return
        for record in records:
            exact_id(record.session_id, "session id")
        with self.db.transaction("provenance record", write=True) as conn:
            _insert_provenance(conn, records)


_PROVENANCE_SQL = "session_id, host, machine_id, user_name, agent, source, recorded_at"


def _insert_provenance(conn: Any, records: Sequence[Provenance]) -> None:
    """Insert each record unless its session id has one (first wins)."""
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO provenance ({_PROVENANCE_SQL}) VALUES (%s, %s, %s, %s, %s, %s, %s)"
                        " ON CONFLICT (session_id) DO NOTHING",
                        [(r.session_id, text_copy(r.host), text_copy(r.machine_id), text_copy(r.user),
                          text_copy(r.agent), text_copy(r.source), r.recorded_at) for r in records])

#: Key space (first key) of the transaction-scoped advisory locks :meth:`PostgresStore.sync_commit`
#: takes per source path (second key: the CRC-32 of the path, as a signed 32-bit integer).
SYNC_LOCK = int.from_bytes(b"sync", "big")

#: Key space (first key) of the run lock :meth:`PostgresLedger.run_lock` takes per host
#: (second key: the CRC-32 of the host name, as a signed 32-bit integer).
RUN_LOCK = int.from_bytes(b"srun", "big")

_SYNC_COLUMNS = ("path", "session_id", "size", "mtime_ns", "inode", "dev", "consumed", "lines", "entries",
                 "version", "header_hash", "tail_hash")
_SYNC_SQL = ", ".join(_SYNC_COLUMNS)


def _lock_key(path: bytes) -> int:
    """The second key of a path's advisory lock: its CRC-32 as a signed 32-bit int
    (two paths sharing it only take turns)."""
    value = zlib.crc32(path)
    return value - (1 << 32) if value >= 1 << 31 else value


def _refuse_stored_ids(conn: Any, session_id: str, ids: list[str]) -> None:
    """Raise :func:`id_in_use_error` when the session already holds one of ``ids``, asked
    under the session's row lock before anything is inserted.

    Another host growing the same session (an identical copy) often appended these
    entries a moment ago: the engine then compares the whole file and records its state
    only. Asking first keeps that a question, not a failed ``INSERT`` on the unique key,
    whose error, met while the pipeline unwinds, psycopg logged to stderr (issue 38).
    """
    conn.execute("SELECT 1 FROM sessions WHERE id = %s FOR UPDATE", (session_id,))
    clash = conn.execute("SELECT id FROM entries WHERE session_id = %s AND id = ANY(%s) LIMIT 1",
                         (session_id, ids)).fetchone()
    if clash is not None:
        raise id_in_use_error(session_id, clash[0])


def _sync_state(row: Sequence[Any]) -> SyncState:
    """A ``sync_state`` row (columns of ``_SYNC_SQL``) as a :class:`SyncState`."""
    size, mtime_ns, inode, dev, consumed, lines, entries, version = (int(value) for value in row[2:10])
    return SyncState(path=bytes(row[0]).decode("utf-8", "surrogatepass"), session_id=row[1], size=size,
                     mtime_ns=mtime_ns, inode=inode, dev=dev, consumed=consumed, lines=lines, entries=entries,
                     version=version, header_hash=bytes(row[10]), tail_hash=bytes(row[11]))
