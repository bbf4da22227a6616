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

The class is assembled from one mixin per capability of the store protocol
(:mod:`sessiontree.stores.base`), each in its own module: :mod:`.connection`
(opening the file, the schema check or migration, the transactions, ``close``),
:mod:`.reads` (``StoreCore`` reads and ``PartialReads``, on :mod:`.blobreads` for records
whose large images are stored apart by :mod:`.blobs`), :mod:`.writes`
(``StoreCore`` writes), :mod:`.ledger` (``SyncLedger``) and :mod:`.maintenance`
(``DerivedData`` and ``verify``). This module opens the store (``__init__``) and
re-exports the public names.
"""


from __future__ import annotations

import os
import sqlite3
import threading
from typing import Any

from sessiontree.core.listing import InfoAccumulator
from sessiontree.errors import StoreOpenError
from sessiontree.stores.shared import StoreBase
from sessiontree.stores.sqlite.connection import OPEN_FILES, OPEN_FILES_LOCK, file_header, file_key
from sessiontree.stores.sqlite.derived import STATE_COLUMNS, DerivedIndex
from sessiontree.stores.sqlite.ledger import SqliteLedger
from sessiontree.stores.sqlite.maintenance import SETTLE_BUDGET, SqliteMaintenance
from sessiontree.stores.sqlite.reads import SqliteReads
from sessiontree.stores.sqlite.retention import SqliteRetention
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

#: Seconds a connection waits for another writer's lock before failing.
DEFAULT_TIMEOUT = 30.0


class SqliteStore(SqliteRetention, SqliteLedger, SqliteWrites, SqliteMaintenance, SqliteReads, StoreBase):
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

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = DEFAULT_TIMEOUT,
                 create: bool = True, readonly: bool = False, synchronous: str = "full",
                 quick_check: bool = False, blob_refs: bool = False) -> None:
        raw_path = os.fspath(path)
        if synchronous.lower() not in ("full", "normal"):
            raise ValueError('synchronous must be "full" or "normal"')
        self.synchronous = synchronous.lower()
        self.path = raw_path if raw_path == ":memory:" else os.path.abspath(raw_path)
        self.url = "sqlite:///" + self.path
        self.timeout = timeout
        self.readonly = bool(readonly) and self.path != ":memory:"
        self.open_mode = "readonly" if self.readonly else "readwrite"
        self.journal_mode = "memory"
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self._closed = False
        #: (st_dev, st_ino) of the database file while this store counts in OPEN_FILES.
        self._file_key: tuple[int, int] | None = None
        #: Per session this store appended to: (entry_count, next seq, listing state,
        #: texts_from, the pending message_texts rows) as its last write left them, trusted only while _memo_mark still holds
        #: (see _memo_fresh); saves an append re-reading them.
        self._memo: dict[Any, tuple[int, int, InfoAccumulator, int | None, list[tuple[Any, int, Any]]]] = {}
        self._memo_mark: tuple[Any, int, int] | None = None
        #: The store's max(sessions.updated_at) as our last append left it (same validity).
        self._memo_updated_at: int | None = None
        #: The database holds our schema (False: an empty database left uninitialised).
        self._initialised = True
        #: Records carry a CRC-32 (schema step m002); False only for an older
        #: schema opened read-only.
        self._has_crc = True
        #: Large image data may be stored out of line (schema step m013); False only for
        #: an older schema opened read-only.
        self._has_blobs = True
        self.blob_refs = bool(blob_refs)
        #: sessions.texts_from exists (schema step m015); False only for an older
        #: schema opened read-only.
        self._has_texts_tail = True
        #: (connection, the derived indexes whose add() writes rows on it): see _index_adders.
        self._adders = None
        state = "missing"
        if self.path != ":memory:":
            if os.path.isdir(self.path):
                raise StoreOpenError(f"cannot open {self.url}: it is a directory")
            if os.path.exists(self.path):
                # "empty" or "ours"; another program's database raises, and so does a
                # damaged one when a quick_check was asked for before writing.
                state = self._identify(quick_check=quick_check and not self.readonly)
            elif self.readonly or not create:
                # Read-only callers: a mistyped path must not look like an empty store.
                raise StoreOpenError(f"no session store at {self.path}")
            if not self.readonly:
                self._check_writable(state)
            if state == "missing":
                directory = os.path.dirname(self.path)
                try:
                    os.makedirs(directory, exist_ok=True)
                except OSError as exc:
                    raise StoreOpenError(f"cannot create directory {directory} for {self.url}: {exc}") from exc
        initialise = state != "empty" or (create and not self.readonly)
        conn = self._connect(wal=initialise and not self.readonly)
        try:
            if self.readonly:
                self._inspect(conn)
            elif not initialise:
                self._initialised = False  # create=False on an empty database: leave it as it is
            else:
                self._migrate(conn)
        except sqlite3.Error as exc:
            conn.close()
            raise StoreOpenError(f"cannot open {self.url}: {exc}") from exc
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._file_key = None if self.path == ":memory:" else file_key(self.path)
        if self._file_key is not None:
            with OPEN_FILES_LOCK:
                OPEN_FILES[self._file_key] = OPEN_FILES.get(self._file_key, 0) + 1

    def _writable_twin(self, timeout: float) -> SqliteStore:
        """A second, writable store on the same file, busy ``timeout`` seconds (see
        :meth:`SqliteMaintenance._writable_twin`).

        Raises:
            StoreOpenError: the file cannot be opened for writing.
        """
        return SqliteStore(self.path, create=False, timeout=timeout)
