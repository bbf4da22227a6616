"""``SqliteStore``: every session in one local SQLite database (docs/rules/stores.md spec:stores, §3.1).

Invariants:

* **Entries are the truth; metadata is a projection.** ``entries.json`` holds
  each record's JSON text byte for byte (a ``BLOB``, so even invalid UTF-8
  read from an old file survives), ``sessions.header_json`` the header's.
  Everything else (listing columns, ``message_texts``) is derived from them
  and can be dropped and recomputed by :meth:`SqliteStore.reindex`.
* **One mutation, one transaction.** Each write runs inside ``BEGIN
  IMMEDIATE`` ... ``COMMIT``; on any error it is rolled back and a
  :class:`~sessiontree.errors.StorageError` is raised with the SQLite error
  as ``__cause__``, so nothing of a failed call is ever visible.
* **Appends never re-read the transcript.** The listing state of a session is
  an :class:`~sessiontree.core.listing.InfoAccumulator` stored in ``sessions``
  columns; an append loads that row, feeds it the new entries only and writes
  it back in the same transaction.
* **Listing reads only ``sessions``.** Its cost grows with the number of
  sessions, not with their length (``benchmarks/bench_listing.py``).
  ``message_texts`` is read only when a row's ``all_messages_text`` is accessed.
* **Concurrency.** WAL journal, a busy timeout, one connection per store
  object (and per process: a store used after ``fork`` opens its own). The
  write lock taken by ``BEGIN IMMEDIATE`` serializes writers across
  processes, and ``seq`` is computed inside it, so concurrent appends are
  neither lost nor interleaved within a call.
* **Schema changes are named steps** (``m001_initial``, ...), applied in
  order at open and recorded in ``schema_migrations``. A database carrying a
  step this code does not know was written by a newer version and is refused.

Strings from sessions may hold lone UTF-16 surrogates (JSON ``"\\ud83d"``
escapes); SQLite text must be UTF-8, so such values are stored as BLOBs of
their ``surrogatepass`` encoding and decoded back on read.

The store is composed, not chained (docs/architecture.md, "The store seam"): it opens one
:class:`~.connection.SqliteDatabase` (the file, the schema check or migration, the
transactions, ``close``) and hands it to its parts, each in its own module and each using
only the database's public members: :mod:`.reads` (``StoreCore`` reads and ``PartialReads``,
with the :mod:`.blobreads` part for records whose large images are stored apart by
:mod:`.blobs`), :mod:`.writes` (``StoreCore`` writes and the append memo), :mod:`.ledger`
(``SyncLedger``), :mod:`.maintenance` (``DerivedData`` and ``verify``) and :mod:`.retention`
(where holds and the deletion log live; the prune is :mod:`sessiontree.stores.retention`'s).
Each public method of :class:`SqliteStore` is one line handing the call to its part.
"""


from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from sessiontree.core.usage import UsageQuery, UsageRow, UsageRows
from sessiontree.format.codec import ParsedSession
from sessiontree.stores import retention
from sessiontree.stores.base import (
    ArchivedFile,
    CancelEvent,
    ProgressCallback,
    Provenance,
    PruneRecord,
    SessionListing,
    SessionOutline,
    SessionTexts,
    StoreProblem,
    SyncChange,
    SyncState,
    TimeBound,
)
from sessiontree.stores.fallbacks import StoreBase
from sessiontree.stores.records import SessionSummaries
from sessiontree.stores.sqlite.connection import SqliteDatabase, file_header
from sessiontree.stores.sqlite.derived import STATE_COLUMNS, DerivedIndex
from sessiontree.stores.sqlite.ledger import SqliteLedger
from sessiontree.stores.sqlite.maintenance import SETTLE_BUDGET, SqliteMaintenance
from sessiontree.stores.sqlite.reads import HeldSession, SqliteReads
from sessiontree.stores.sqlite.retention import SqliteHolds
from sessiontree.stores.sqlite.schema import DERIVED_INDEXES, MIGRATIONS
from sessiontree.stores.sqlite.writes import SqliteWrites
from sessiontree.stores.traits import StoreTraits

__all__ = [
    "DEFAULT_TIMEOUT",
    "DERIVED_INDEXES",
    "MIGRATIONS",
    "SETTLE_BUDGET",
    "STATE_COLUMNS",
    "DerivedIndex",
    "SqliteStore",
    "file_header",
]

_T = TypeVar("_T")

#: Seconds a connection waits for another writer's lock before failing.
DEFAULT_TIMEOUT = 30.0


class SqliteStore(StoreBase):
    """A :class:`~sessiontree.stores.base.SessionStore` in one SQLite database file.

    Opening never writes to a database that is not ours: an
    existing file is first identified without writing anything (its first
    bytes, then its schema through a read-only connection). A file with
    tables but no sessiontree schema raises ``StoreOpenError`` and is left
    byte for byte as it was. Only a writable open with ``create=True`` may
    create a missing file or initialise an empty one (0 bytes, or a database
    without tables).

    Args:
        path: the database file, or ``":memory:"`` for a private in-memory
            database (no WAL).
        timeout: seconds to wait for another connection's write lock.
        create: ``True`` (default, writers): a missing file is created with its
            directory, and an empty database is initialised. ``False``: a
            missing file raises ``StoreOpenError``; an empty one is opened
            uninitialised (it lists no sessions, and writes raise
            ``StorageError``), never changed.
        readonly: open for reading only (``PRAGMA query_only``; ``mode=ro`` when
            the file is not writable; ``immutable=1`` when the directory is not
            writable, since SQLite then cannot create the ``-wal``/``-shm``
            files a WAL reader needs). Nothing is created,
            initialised or migrated; a database with an older schema is read
            as it is; every write raises ``StorageError``. Implies ``create=False``.
        synchronous: ``"full"`` (default): every committed mutation survives a
            power loss; ``"normal"``: it survives a crash of the process but
            not of the machine, and appends skip the fsync (WAL mode).
        quick_check: run SQLite's ``PRAGMA quick_check`` before the first write
            and refuse a damaged database with ``StoreOpenError`` (bulk writers
            such as ``import`` ask for it; it reads the whole file, so the
            default is off). Ignored with ``readonly``.
        blob_refs: ``False`` (default): every read gives each record whole, image
            data included. ``True``: reads that parse entries (``load``,
            ``read_entries``, ``read_entries_at``, hence ``SessionManager.open``)
            give each image ``data`` string stored out of line as a
            :class:`~sessiontree.stores.blobref.BlobRef`, loaded on demand, so a
            session of large images opens without reading them (docs/blobs.md).
            Byte reads (``read_texts``, ``load``'s ``raw``, export) stay exact either way.

    Attributes:
        url: ``sqlite:///`` + the absolute path (four slashes for ``/...``).
        kind: ``"sqlite"``.
        path: the absolute database path.
        readonly: whether the store was opened read-only.
        open_mode: ``"readwrite"``; for a read-only store ``"query_only"`` (an
            ordinary connection with ``PRAGMA query_only``), ``"readonly"``
            (``mode=ro``) or ``"immutable"`` (``mode=ro&immutable=1``).
        journal_mode: what SQLite reports after asking for WAL (``"wal"``
            except on filesystems that cannot share memory maps); for a
            read-only or uninitialised store, what the file already uses.

    Raises:
        StoreOpenError: the directory cannot be created, the file is missing
            (``create=False`` or ``readonly``), is not a SQLite database, is a
            database of another program, is corrupt (or fails ``quick_check``),
            is read-only while a writable open was asked for, is locked past
            ``timeout`` while migrating, or its schema is newer than this code.
    """

    kind = "sqlite"
    #: read_skeleton and read_entries answer from columns and the (session_id, id) index.
    partial_reads = True

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = DEFAULT_TIMEOUT,
                 create: bool = True, readonly: bool = False, synchronous: str = "full",
                 quick_check: bool = False, blob_refs: bool = False) -> None:
        #: The open database file and its transactions (shared by the parts; tools and
        #: tests reach the raw connection through it).
        self.db = SqliteDatabase(os.fspath(path), timeout=timeout, create=create, readonly=readonly,
                                 synchronous=synchronous, quick_check=quick_check, blob_refs=blob_refs)
        # Fixed at open: copied so the store answers them as plain attributes.
        self.url, self.path, self.timeout = self.db.url, self.db.path, self.db.timeout
        self.synchronous, self.readonly, self.blob_refs = self.db.synchronous, self.db.readonly, self.db.blob_refs
        self._reads = SqliteReads(self.db)
        self._writes = SqliteWrites(self.db)
        self._ledger = SqliteLedger(self.db, self._writes)
        # The twin is looked up on the store at call time, so a test may replace it.
        self._maintenance = SqliteMaintenance(self.db, self._reads, self, lambda seconds: self._writable_twin(seconds))
        self._holds = SqliteHolds(self.db)

    def _writable_twin(self, timeout: float) -> SqliteStore:
        """A second, writable store on the same file, busy ``timeout`` seconds (what
        :class:`~.maintenance.SqliteMaintenance` settles a read-only store's tail through).

        Raises:
            StoreOpenError: the file cannot be opened for writing.
        """
        return SqliteStore(self.db.path, create=False, timeout=timeout)

    def traits(self) -> StoreTraits:
        """SQLite's traits (docs/decisions/store-traits.md): a load only reads (reader threads
        may run it beside the writer), the lazy open reads the outline and chosen records,
        ``create_many`` settles the derived data of its group; only a file database outlives
        the process (``":memory:"`` does not), and it has its
        run lock beside it and changes show in the database's and its WAL's size and time."""
        on_disk = self.path != ":memory:"
        return StoreTraits(loads_may_write=False, opens_lazily=True, settles_on_create=True, partial_reads=True,
                           persisted=on_disk,
                           run_lock_path=f"{self.path}.sync-lock" if on_disk else None,
                           change_files=(self.path, f"{self.path}-wal") if on_disk else ())

    # -- the database's attributes (documented on the class) -----------------------------

    @property
    def open_mode(self) -> str:
        """``"readwrite"``, ``"query_only"``, ``"readonly"`` or ``"immutable"``."""
        return self.db.open_mode

    @property
    def journal_mode(self) -> str:
        """What SQLite reports as the journal mode (``"wal"`` normally)."""
        return self.db.journal_mode

    @journal_mode.setter
    def journal_mode(self, value: str) -> None:
        self.db.journal_mode = value

    @property
    def settled_in_hand(self) -> int:
        """Entries whose derived data a write settled from the entries in hand, over this
        handle's life (a sync reports them as indexed)."""
        return self.db.settled_in_hand

    def close(self) -> None:
        """Close the connection. Idempotent; later calls raise StorageError."""
        self.db.close()

    # -- Retention (sessiontree.stores.retention over this store and its holds part) --------

    def prune(self, older_than_ms: float, *, agent: str | None = None, dry_run: bool = False,
              everyone: bool = False) -> list[PruneRecord]:
        """See :func:`sessiontree.stores.retention.prune` (``everyone`` changes nothing here:
        every session of a SQLite store is its user's)."""
        return retention.prune(self, self._holds, older_than_ms, agent=agent, dry_run=dry_run)

    def set_hold(self, session_id: str, held: bool) -> bool:
        """See :func:`sessiontree.stores.retention.set_hold`."""
        return retention.set_hold(self, self._holds, session_id, held)

    def holds(self) -> list[str]:
        """See :func:`sessiontree.stores.retention.holds`."""
        return retention.holds(self, self._holds)

    # -- SqliteReads (reads) -----------------------------------------

    def read(self, session_id: str) -> ParsedSession:
        """See :meth:`SqliteReads.read`."""
        return self._reads.read(session_id)

    def read_texts(self, session_id: str) -> SessionTexts:
        """See :meth:`SqliteReads.read_texts`."""
        return self._reads.read_texts(session_id)

    def read_skeleton(self, session_id: str) -> ParsedSession:
        """See :meth:`SqliteReads.read_skeleton`."""
        return self._reads.read_skeleton(session_id)

    def read_entries(self, session_id: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        """See :meth:`SqliteReads.read_entries`."""
        return self._reads.read_entries(session_id, ids)

    def load(self, session_id: str, *, keep_raw: bool = True) -> ParsedSession:
        """See :meth:`SqliteReads.load`."""
        return self._reads.load(session_id, keep_raw=keep_raw)

    def load_held(self, session_id: str) -> HeldSession | None:
        """See :meth:`SqliteReads.load_held`."""
        return self._reads.load_held(session_id)

    def recent_entry_types(self, session_id: str, count: int) -> set[str]:
        """See :meth:`SqliteReads.recent_entry_types`."""
        return self._reads.recent_entry_types(session_id, count)

    def read_outline(self, session_id: str) -> SessionOutline:
        """See :meth:`SqliteReads.read_outline`."""
        return self._reads.read_outline(session_id)

    def read_summaries(self, session_id: str) -> SessionSummaries | None:
        """See :meth:`SqliteReads.read_summaries` (``EntrySummaries``)."""
        return self._reads.read_summaries(session_id)

    def sum_usage(self, summaries: SessionSummaries, positions: Sequence[int], query: UsageQuery) -> list[UsageRow]:
        """See :meth:`SqliteReads.sum_usage` (``EntrySummaries``)."""
        return self._reads.sum_usage(summaries, positions, query)

    def read_entries_at(self, outline: SessionOutline, positions: Sequence[int]) -> list[dict[str, Any]]:
        """See :meth:`SqliteReads.read_entries_at`."""
        return self._reads.read_entries_at(outline, positions)

    def exists(self, session_id: str) -> bool:
        """See :meth:`SqliteReads.exists`."""
        return self._reads.exists(session_id)

    def session_ids(self) -> list[str]:
        """See :meth:`SqliteReads.session_ids`."""
        return self._reads.session_ids()

    def location(self, session_id: str) -> str | None:
        """See :meth:`SqliteReads.location`."""
        return self._reads.location(session_id)

    def list_sessions(self, *, cwd: str | None = None, include_internal: bool = False,
                      on_progress: ProgressCallback | None = None,
                      cancel: CancelEvent | None = None) -> SessionListing:
        """See :meth:`SqliteReads.list_sessions`."""
        return self._reads.list_sessions(cwd=cwd, include_internal=include_internal, on_progress=on_progress, cancel=cancel)

    def session_agents(self) -> dict[str, str]:
        """See :meth:`SqliteReads.session_agents`."""
        return self._reads.session_agents()

    def find_most_recent(self, cwd: str | None = None, include_internal: bool = False) -> str | None:
        """See :meth:`SqliteReads.find_most_recent`."""
        return self._reads.find_most_recent(cwd, include_internal)

    # -- SqliteBlobReads (blobreads) ---------------------------------

    def read_blob(self, sha256: str) -> bytes | None:
        """See :meth:`SqliteBlobReads.read_blob`."""
        return self._reads.blobs.read_blob(sha256)

    # -- SqliteWrites (writes) ---------------------------------------

    def create(self, header: dict[str, Any], entries: Sequence[dict[str, Any]] = (),
               raw: Sequence[bytes | None] | None = None, *, path: str | None = None) -> None:
        """See :meth:`SqliteWrites.create`."""
        return self._writes.create(header, entries, raw, path=path)

    def create_many(self, sessions: Iterable[tuple[dict[str, Any], Sequence[dict[str, Any]],
                                                   Sequence[bytes | None] | None]], *, settle: bool = False) -> int:
        """See :meth:`SqliteWrites.create_many`."""
        return self._writes.create_many(sessions, settle=settle)

    def append(self, session_id: str, entries: Sequence[dict[str, Any]],
               raw: Sequence[bytes | None] | None = None) -> None:
        """See :meth:`SqliteWrites.append`."""
        return self._writes.append(session_id, entries, raw)

    def replace_header(self, session_id: str, header: dict[str, Any]) -> None:
        """See :meth:`SqliteWrites.replace_header`."""
        return self._writes.replace_header(session_id, header)

    def replace_session(self, header: dict[str, Any], entries: Sequence[dict[str, Any]],
                        raw: Sequence[bytes | None] | None = None) -> None:
        """See :meth:`SqliteWrites.replace_session`."""
        return self._writes.replace_session(header, entries, raw)

    def delete(self, session_id: str) -> None:
        """See :meth:`SqliteWrites.delete`."""
        return self._writes.delete(session_id)

    # -- SqliteLedger (ledger) ---------------------------------------

    def sync_states(self) -> dict[str, SyncState]:
        """See :meth:`SqliteLedger.sync_states`."""
        return self._ledger.sync_states()

    def sync_commit(self, expect: SyncState | None, state: SyncState, change: SyncChange) -> None:
        """See :meth:`SqliteLedger.sync_commit`."""
        return self._ledger.sync_commit(expect, state, change)

    def sync_shape(self, path: str) -> bytes | None:
        """See :meth:`SqliteLedger.sync_shape`."""
        return self._ledger.sync_shape(path)

    def archived_files(self) -> list[ArchivedFile]:
        """See :meth:`SqliteLedger.archived_files`."""
        return self._ledger.archived_files()

    def record_archived(self, record: ArchivedFile) -> None:
        """See :meth:`SqliteLedger.record_archived`."""
        return self._ledger.record_archived(record)

    def provenances(self) -> dict[str, Provenance]:
        """See :meth:`SqliteLedger.provenances`."""
        return self._ledger.provenances()

    def record_provenance(self, records: Sequence[Provenance]) -> None:
        """See :meth:`SqliteLedger.record_provenance`."""
        return self._ledger.record_provenance(records)

    # -- SqliteMaintenance (maintenance) -----------------------------

    def settle_derived(self, *, lock_timeout: float | None = None, pending: int | None = None,
                       on_progress: Callable[[int, int], None] | None = None) -> int:
        """See :meth:`SqliteMaintenance.settle_derived`."""
        return self._maintenance.settle_derived(lock_timeout=lock_timeout, pending=pending, on_progress=on_progress)

    def reindex(self, session_id: str | None = None) -> int:
        """See :meth:`SqliteMaintenance.reindex`."""
        return self._maintenance.reindex(session_id)

    def usage(self, query: UsageQuery | None = None) -> UsageRows:
        """See :meth:`SqliteMaintenance.usage`."""
        return self._maintenance.usage(query)

    def search(self, query: str, *, cwd: str | None = None, roles: Iterable[str] | None = None,
               since: TimeBound | None = None, until: TimeBound | None = None, session: str | None = None,
               limit: int | None = 50) -> list[Any]:
        """See :meth:`SqliteMaintenance.search`."""
        return self._maintenance.search(query, cwd=cwd, roles=roles, since=since, until=until, session=session, limit=limit)

    def settle_search_tail(self, on_merge: Callable[[int], None] | None = None) -> int:
        """See :meth:`SqliteMaintenance.settle_search_tail`."""
        return self._maintenance.settle_search_tail(on_merge)

    def verify(self, on_progress: ProgressCallback | None = None) -> list[StoreProblem]:
        """See :meth:`SqliteMaintenance.verify`."""
        return self._maintenance.verify(on_progress)

    # -- SqliteHolds (retention) -------------------------------------

    def deletion_log(self) -> list[dict[str, Any]]:
        """See :meth:`SqliteHolds.deletion_log`."""
        return self._holds.deletion_log()

    # -- SqliteDatabase (connection) ---------------------------------

    def applied_migrations(self) -> list[str]:
        """See :meth:`SqliteDatabase.applied_migrations`."""
        return self.db.applied_migrations()

    def write_transaction(self, what: str) -> AbstractContextManager[sqlite3.Connection]:
        """See :meth:`SqliteDatabase.write_transaction`."""
        return self.db.write_transaction(what)

    def run_write(self, what: str, body: Callable[..., _T], *args: Any) -> _T:
        """See :meth:`SqliteDatabase.run_write`."""
        return self.db.run_write(what, body, *args)

    def bulk_writes(self, *, seconds: float = 1.0, writes: int = 1000) -> AbstractContextManager[None]:
        """See :meth:`SqliteDatabase.bulk_writes`."""
        return self.db.bulk_writes(seconds=seconds, writes=writes)

    def read_transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """See :meth:`SqliteDatabase.read_transaction`."""
        return self.db.read_transaction()

    def has_schema(self, conn: sqlite3.Connection) -> bool:
        """See :meth:`SqliteDatabase.has_schema`."""
        return self.db.has_schema(conn)
