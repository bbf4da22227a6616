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
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
import time
import urllib.parse
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import orjson

from sessiontree.core.listing import InfoAccumulator
from sessiontree.core.usagerecords import UsageQuery, UsageRows, aggregate
from sessiontree.errors import (
    CorruptEntryError,
    InvalidSessionError,
    SessionChangedError,
    SessionError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
    StoreOpenError,
    SyncConflictError,
)
from sessiontree.format import jsonio
from sessiontree.format.codec import CURRENT_VERSION, ParsedSession
from sessiontree.format.gcpause import gc_paused
from sessiontree.stores.base import (
    CancelEvent,
    ProgressCallback,
    SessionListing,
    SessionOutline,
    StoreProblem,
    SyncChange,
    SyncState,
)
from sessiontree.stores.shared import (
    ROLE_HEAD_BYTES,
    Progress,
    StoreBase,
    check_header,
    check_replacement_header,
    cwd_matches,
    encode_entries,
    header_of,
    id_in_use_error,
    resolve_cwd,
    skeletons_from_rows,
    sort_listing,
    sync_expected,
    validated,
)
from sessiontree.stores.sqlite import search as search_index
from sessiontree.stores.sqlite.derived import (
    STATE_ASSIGN,
    STATE_COLUMNS,
    STATE_SELECT,
    DerivedIndex,
    from_db,
    header_columns,
    record_bytes,
    record_crc,
    state_from_row,
    state_values,
    to_db,
)
from sessiontree.stores.sqlite.schema import DERIVED_INDEXES, MIGRATIONS
from sessiontree.stores.sqlite.usage import query_usage
from sessiontree.stores.verify import StoredRecord, StoredSession, verify_stored_session

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

#: WAL pages between automatic checkpoints of a writable connection (16 MiB of 4 KiB
#: pages; SQLite's default is 1,000): fewer checkpoints, each costing fsyncs, make
#: per-call appends cheaper (benchmarks/README.md, "Appends and import"). Durability
#: does not depend on it: a commit is in the WAL (and, with synchronous=full, on
#: disk) before it returns, whenever checkpoints run.
WAL_AUTOCHECKPOINT = 4096

#: The first 16 bytes of every SQLite database file.
_MAGIC = b"SQLite format 3\x00"


def _dir_writable(directory: str) -> bool:
    """Whether we may create files in ``directory`` (SQLite's ``-wal``/``-shm``).

    Module-level so tests can simulate an unwritable directory as root, for
    whom permission bits do not apply."""
    return os.access(directory or ".", os.W_OK | os.X_OK)


#: How many open stores of this process hold each database file, by ``(st_dev, st_ino)``.
#: POSIX advisory locks belong to the process and the file: closing *any* descriptor of
#: the file releases every lock this process holds on it, including those of SQLite's
#: own connections, which then read and write unprotected (SQLite, "How To Corrupt An
#: SQLite Database File", 2.2). So while a store of ours has a file open, nothing of
#: ours opens that file by other means (see :func:`file_header`).
_OPEN_FILES: dict[tuple[int, int], int] = {}
_OPEN_FILES_LOCK = threading.Lock()


def _file_key(path: str) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


def file_header(path: str, size: int = 100) -> bytes | None:
    """The first ``size`` bytes of the file at ``path``, read directly, or ``None``
    when an open :class:`SqliteStore` of this process holds that file: closing the
    descriptor a read needs would release that store's locks (see ``_OPEN_FILES``).
    A file another store of ours holds open is a SQLite database.

    Raises:
        OSError: the file cannot be opened or read.
    """
    key = _file_key(path)
    with _OPEN_FILES_LOCK:
        if key is not None and _OPEN_FILES.get(key):
            return None
        # Read under the lock, so no store of this process opens the file meanwhile.
        with open(path, "rb") as handle:
            return handle.read(size)


#: Entries an index settles per write transaction in :meth:`SqliteStore.settle_derived`
#: (for the search index a fraction of a second of FTS5 work: the longest a settle
#: holds the store's write lock, which other writers wait for within their busy timeout).
SETTLE_BUDGET = 2048


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
                 quick_check: bool = False) -> None:
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
        #: (st_dev, st_ino) of the database file while this store counts in _OPEN_FILES.
        self._file_key: tuple[int, int] | None = None
        #: Per session this store appended to: (entry_count, next seq, listing state)
        #: as its last write left them, trusted only while _memo_mark still holds
        #: (see _memo_fresh); saves an append re-reading them.
        self._memo: dict[Any, tuple[int, int, InfoAccumulator]] = {}
        self._memo_mark: tuple[Any, int, int] | None = None
        #: The store's max(sessions.updated_at) as our last append left it (same validity).
        self._memo_updated_at: int | None = None
        #: The database holds our schema (False: an empty database left uninitialised).
        self._initialised = True
        #: Records carry a CRC-32 (schema step m002); False only for an older
        #: schema opened read-only.
        self._has_crc = True
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
        self._file_key = None if self.path == ":memory:" else _file_key(self.path)
        if self._file_key is not None:
            with _OPEN_FILES_LOCK:
                _OPEN_FILES[self._file_key] = _OPEN_FILES.get(self._file_key, 0) + 1

    # -- connection and schema --------------------------------------------------------------

    def _uri(self, immutable: bool) -> str:
        return "file:" + urllib.parse.quote(self.path) + ("?mode=ro&immutable=1" if immutable else "?mode=ro")

    def _identify(self, quick_check: bool = False) -> str:
        """Whether an existing file is ``"empty"`` or ``"ours"``, without writing to it.

        The first bytes are read directly; the schema through a ``mode=ro``
        connection, or an ``immutable=1`` one when the file is a WAL database
        with no ``-wal`` file (a plain read-only connection would leave an
        empty ``-wal`` and ``-shm`` behind) or the directory is not writable.
        With ``quick_check``, a database of ours is also run through
        ``PRAGMA quick_check`` on that same read-only connection, so a damaged
        database is refused before anything (even a ``-wal`` file) is written.

        Raises:
            StoreOpenError: not a database, unreadable, another program's
                database, or (``quick_check``) a damaged one.
        """
        try:
            head = file_header(self.path)
            if head is None:
                # Another store of this process has the file open: it is a database of
                # ours or an empty one, and a WAL one has its -wal file while open.
                if os.path.getsize(self.path) == 0:
                    return "empty"
                head = _MAGIC + bytes([0, 0, 2, 2])
        except OSError as exc:
            raise StoreOpenError(f"cannot open {self.url}: {exc.strerror or exc}") from exc
        if not head:
            return "empty"
        wal = head.startswith(_MAGIC) and len(head) >= 20 and head[18] == 2 and head[19] == 2
        immutable = not _dir_writable(os.path.dirname(self.path)) or (wal and not os.path.exists(self.path + "-wal"))
        try:
            probe = sqlite3.connect(self._uri(immutable), uri=True, timeout=self.timeout)
        except sqlite3.Error as exc:
            raise StoreOpenError(f"cannot open {self.url}: {exc}") from exc
        try:
            names = [row[0] for row in probe.execute(
                "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY rowid")]
            if not names:
                return "empty"
            if "schema_migrations" in names:
                try:
                    steps = {row[0] for row in probe.execute("SELECT name FROM schema_migrations")}
                except sqlite3.Error:
                    steps = set()
                if MIGRATIONS[0][0] in steps:
                    if quick_check:
                        self._quick_check(probe)
                    return "ours"
        except sqlite3.Error as exc:
            raise StoreOpenError(f"cannot open {self.url}: {exc}") from exc
        finally:
            probe.close()
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise StoreOpenError(f"cannot open {self.url}: it is a SQLite database but not a sessiontree store "
                             f"(it holds {shown}); nothing was changed")

    def _check_writable(self, state: str) -> None:
        """Refuse a writable open of a file or directory we may not write, in one clear line."""
        directory = os.path.dirname(self.path)
        if state != "missing" and not os.access(self.path, os.W_OK):
            raise StoreOpenError(f"cannot write to {self.url}: the database file is read-only "
                                 "(reading commands still work)")
        if state != "missing" and not _dir_writable(directory):
            sidecars = [self.path + "-wal", self.path + "-shm"]
            if not all(os.access(name, os.W_OK) for name in sidecars):
                raise StoreOpenError(f"cannot write to {self.url}: its directory {directory} is read-only "
                                     "(reading commands still work)")

    def _connect(self, wal: bool = True) -> sqlite3.Connection:
        """A connection with our settings. ``wal``: switch the file to WAL (writable,
        initialised stores only: it changes the file's header)."""
        try:
            if self.readonly:
                conn = self._connect_readonly()
            else:
                # isolation_level=None: we issue BEGIN/COMMIT ourselves, one per mutation.
                conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None,
                                       check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreOpenError(f"cannot open {self.url}: {exc}") from exc
        try:
            if self.readonly:
                conn.execute("PRAGMA query_only = ON")
                self.journal_mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
            elif self.path == ":memory:":
                self.journal_mode = "memory"
            elif wal:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                self.journal_mode = str(mode).lower()
            else:
                self.journal_mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
            # FULL (default): a returned mutation survives power loss. NORMAL (opt-in):
            # it survives a crash of the process, not of the machine, and an
            # append costs no fsync: the durability of the original agent's
            # JSONL appends, which never fsync (benchmarks/README.md).
            conn.execute(f"PRAGMA synchronous = {self.synchronous.upper()}")
            if not self.readonly:
                # Checkpoint every WAL_AUTOCHECKPOINT pages instead of SQLite's 1,000: each
                # checkpoint costs three fsyncs (also with synchronous=normal), and an
                # append writes ~9 WAL pages, so the default paid them every ~110 appends.
                conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT}")
            conn.execute("PRAGMA foreign_keys = ON")
            # Reading the schema detects files that are not databases or are corrupt.
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            conn.close()
            raise StoreOpenError(f"cannot open {self.url}: {exc}") from exc
        return conn

    def _connect_readonly(self) -> sqlite3.Connection:
        """A connection that cannot change the database, the least restricted that works.

        * File and directory writable: an ordinary connection with ``PRAGMA
          query_only`` (set by the caller). It reads like any other reader, and
          when it is the last connection to close, SQLite removes the ``-wal``
          and ``-shm`` files as usual, so a reading command leaves nothing behind.
        * File not writable, directory writable: ``mode=ro``. SQLite may create
          the ``-wal``/``-shm`` files a WAL reader needs and cannot remove them.
        * Directory not writable (or ``mode=ro`` cannot open the shared-memory
          files): ``mode=ro&immutable=1``. SQLite then takes no locks and reads
          the file as it is, ignoring any ``-wal``: a write by someone else
          during the read could be missed or seen half-done.
        """
        directory = os.path.dirname(self.path)
        immutable = self.open_mode == "immutable" or not _dir_writable(directory)
        if not immutable and os.access(self.path, os.W_OK):
            self.open_mode = "query_only"
            return sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
        if not immutable:
            conn = sqlite3.connect(self._uri(False), uri=True, timeout=self.timeout, isolation_level=None,
                                   check_same_thread=False)
            try:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
                self.open_mode = "readonly"
                return conn
            except sqlite3.OperationalError as exc:
                conn.close()
                if "unable to open" not in str(exc) and "readonly" not in str(exc):
                    raise
        conn = sqlite3.connect(self._uri(True), uri=True, timeout=self.timeout, isolation_level=None,
                               check_same_thread=False)
        self.open_mode = "immutable"
        return conn

    def _inspect(self, conn: sqlite3.Connection) -> None:
        """Read-only open: note which schema steps the file has; refuse a newer schema."""
        applied = self._applied(conn)
        self._initialised = applied is not None
        known = [name for name, _ in MIGRATIONS]
        unknown = [name for name in applied or [] if name not in known]
        if unknown:
            raise StoreOpenError(
                f"cannot open {self.url}: its schema has steps this version does not know "
                f"({', '.join(unknown)}); it was written by a newer sessiontree")
        self._has_crc = applied is not None and "m002_record_crc" in applied

    def _quick_check(self, conn: sqlite3.Connection) -> None:
        """Refuse to write into a database that fails ``PRAGMA quick_check``."""
        try:
            rows = [row[0] for row in conn.execute("PRAGMA quick_check")]
        except sqlite3.DatabaseError as exc:
            rows = [str(exc)]
        if rows != ["ok"]:
            raise StoreOpenError(
                f"cannot write to {self.url}: the database fails SQLite's integrity check ({rows[0]}"
                f"{f'; {len(rows) - 1} more problems' if len(rows) > 1 else ''}); nothing was written. "
                "Run sessiontree check --store for details")

    def _migrate(self, conn: sqlite3.Connection) -> None:
        known = [name for name, _ in MIGRATIONS]
        applied = self._applied(conn)
        if applied is not None and applied == known:
            return  # the common case needs no write lock
        conn.execute("BEGIN IMMEDIATE")
        try:
            applied = self._applied(conn)
            if applied is None:
                # Under the write lock: nobody made it another program's database meanwhile.
                other = conn.execute("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchone()
                if other is not None:
                    raise StoreOpenError(f"cannot open {self.url}: it is a SQLite database but not a "
                                         f"sessiontree store (it holds {other[0]}); nothing was changed")
            conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations ("
                         " name TEXT PRIMARY KEY,"  # the step's function name, e.g. m001_initial
                         " applied_at TEXT NOT NULL)")  # when it ran (ISO-8601 UTC), for diagnosis
            applied = applied or []
            unknown = [name for name in applied if name not in known]
            if unknown:
                raise StoreOpenError(
                    f"cannot open {self.url}: its schema has steps this version does not know "
                    f"({', '.join(unknown)}); it was written by a newer sessiontree")
            for name, step in MIGRATIONS:
                if name not in applied:
                    step(conn)
                    conn.execute("INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)",
                                 (name, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    @staticmethod
    def _applied(conn: sqlite3.Connection) -> list[str] | None:
        exists = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").fetchone()
        if not exists:
            return None
        return [row[0] for row in conn.execute("SELECT name FROM schema_migrations ORDER BY rowid")]

    def applied_migrations(self) -> list[str]:
        """Names of the schema steps recorded in this database, in order."""
        with self._lock:
            return self._applied(self._connection()) or []

    def _connection(self) -> sqlite3.Connection:
        if self._closed or self._conn is None:
            raise StorageError(f"{self.url} is closed")
        if os.getpid() != self._pid:
            # A connection must not cross fork(): leave the parent's alone and open our own.
            self._conn = self._connect(wal=self._initialised and not self.readonly)
            self._pid = os.getpid()
        return self._conn

    @contextmanager
    def write_transaction(self, what: str) -> Iterator[sqlite3.Connection]:
        """One write transaction; sqlite errors become StorageError, everything rolls back."""
        if self.readonly:
            raise StorageError(f"{what}: {self.url} is opened read-only")
        with self._lock:
            conn = self._connection()
            if not self._initialised:
                raise StorageError(f"{what}: {self.url} is an empty database not initialised as a sessiontree "
                                   "store; open it with create=True (as sessiontree import does) to initialise it")
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StorageError(f"{what}: cannot start a write transaction on {self.url}: {exc}") from exc
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                self._forget()  # the memo may describe what was just rolled back
                rollback_error: sqlite3.Error | None = None
                if conn.in_transaction:
                    try:
                        conn.execute("ROLLBACK")
                    except sqlite3.Error as err:
                        rollback_error = err
                if isinstance(exc, (sqlite3.Error, UnicodeError)):
                    message = f"{what} failed on {self.url}: {exc}"
                    if rollback_error is not None:
                        message += f"; the rollback failed too: {rollback_error}"
                    error = StorageError(message)
                    error.rollback_error = rollback_error
                    raise error from exc
                raise

    @contextmanager
    def read_transaction(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: one consistent snapshot across several SELECTs."""
        with self._lock:
            conn = self._connection()
            try:
                conn.execute("BEGIN")
                try:
                    yield conn
                finally:
                    if conn.in_transaction:
                        conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StorageError(f"reading {self.url} failed: {exc}") from exc

    def has_schema(self, conn: sqlite3.Connection) -> bool:
        """Whether the database holds our schema (an empty one opened without
        initialising it holds none, unless another process initialised it since)."""
        if self._initialised:
            return True
        applied = self._applied(conn)
        if applied is None:
            return False
        self._initialised = True
        self._has_crc = "m002_record_crc" in applied
        return True

    def _forget(self) -> None:
        """Drop the append memo (a write failed, or the database changed under it)."""
        self._memo.clear()
        self._memo_mark = None
        self._memo_updated_at = None

    def _memo_fresh(self, conn: sqlite3.Connection) -> int:
        """Inside a write transaction: forget the memo unless nothing changed the database
        since this connection's last append, and return ``PRAGMA data_version`` for the
        mark :meth:`_append_in` leaves.

        The memo holds while the mark ``(connection, data_version, total_changes)`` is the
        one the last append left: ``data_version`` moves when any other connection (any
        process) commits, and ``total_changes`` when this connection changes any row
        (another kind of write, or a statement issued by hand); a failed write forgets it
        in :meth:`_write`. So a trusted value is what re-reading it would give.
        """
        version: int = conn.execute("PRAGMA data_version").fetchone()[0]
        if self._memo_mark != (conn, version, conn.total_changes):
            self._forget()
        return version

    @staticmethod
    def _next_updated_at(conn: sqlite3.Connection, last: int | None = None) -> int:
        """The ``updated_at`` of a write now: microseconds since the epoch, above every
        stored one (``last``: that maximum when already known, else it is read)."""
        # Strictly increasing even within one microsecond or after a clock step
        # back, so "most recent" is never a tie.
        if last is None:
            last = conn.execute("SELECT max(updated_at) FROM sessions").fetchone()[0]
        now = time.time_ns() // 1000
        return now if last is None or now > last else last + 1

    # -- writes ---------------------------------------------------------------------------

    def create(self, header: dict[str, Any], entries: Sequence[dict[str, Any]] = (),
               raw: Sequence[bytes | None] | None = None, *, path: str | None = None) -> None:
        """Store a new session in one transaction (``path`` is ignored).

        Raises:
            SessionExistsError: the id is already stored.
            InvalidSessionError: the header or an entry is not valid format 4.
            StorageError: the write failed; nothing was stored.
        """
        self.create_many([(header, entries, raw)])

    def create_many(self, sessions: Iterable[tuple[dict[str, Any], Sequence[dict[str, Any]],
                                                   Sequence[bytes | None] | None]]) -> int:
        """Store several new sessions in a single transaction (bulk import).

        Args:
            sessions: ``(header, entries, raw)`` triples as for :meth:`create`.

        Returns:
            The number of sessions stored.

        Raises:
            SessionExistsError: one of the ids is already stored (nothing is stored).
            InvalidSessionError: a header or entry is invalid (nothing is stored).
            StorageError: the write failed; nothing was stored.
        """
        prepared = []
        for header, entries, raw in sessions:
            session_id = check_header(header)
            prepared.append((session_id, header, jsonio.dumps(header), entries, encode_entries(entries, raw)))
        with self.write_transaction("create") as conn:
            seen: set[str] = set()
            for session_id, header, header_raw, entries, texts in prepared:
                if session_id in seen:
                    raise SessionExistsError(session_id)
                seen.add(session_id)
                self._create_in(conn, session_id, header, header_raw, entries, texts)
        return len(prepared)

    def _create_in(self, conn: sqlite3.Connection, session_id: str, header: dict[str, Any], header_raw: bytes,
                   entries: Sequence[dict[str, Any]], texts: list[bytes]) -> None:
        """Store one new session inside the caller's transaction.

        Raises:
            SessionExistsError: the id is already stored.
        """
        key = to_db(session_id)
        if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (key,)).fetchone():
            raise SessionExistsError(session_id)
        info = InfoAccumulator()
        conn.execute(
            "INSERT INTO sessions (id, header_json, header_crc, created_at, cwd, parent_session_id,"
            " classified, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (key, header_raw, record_crc(header_raw), *header_columns(header), self._next_updated_at(conn)))
        self._insert_entries(conn, session_id, 0, entries, texts, info)
        conn.execute(f"UPDATE sessions SET entry_count = ?, {STATE_ASSIGN} WHERE id = ?",
                     (len(texts), *state_values(info), key))

    def append(self, session_id: str, entries: Sequence[dict[str, Any]],
               raw: Sequence[bytes | None] | None = None) -> None:
        """Append entries in one transaction, updating the listing state from them only.

        Raises:
            SessionNotFoundError: no such id.
            InvalidSessionError: an entry is invalid or reuses an id of the session.
            StorageError: the write failed; nothing was appended.
        """
        texts = encode_entries(entries, raw)
        with self.write_transaction("append") as conn:
            self._append_in(conn, session_id, entries, texts)

    def _append_in(self, conn: sqlite3.Connection, session_id: str, entries: Sequence[dict[str, Any]],
                   texts: list[bytes]) -> None:
        """The body of :meth:`append`, inside the caller's transaction.

        The session's count, next ``seq`` and listing state, and the store's latest
        ``updated_at``, come from the memo when nothing changed since this
        connection's last append (:meth:`_memo_fresh`), else from the database.
        """
        key = to_db(session_id)
        version = self._memo_fresh(conn)
        memo = self._memo.get(key)
        if memo is None:
            row = conn.execute(f"SELECT entry_count, {STATE_SELECT} FROM sessions WHERE id = ?", (key,)).fetchone()
            if row is None:
                raise SessionNotFoundError(session_id, self.url)
            if not texts:
                return
            count, info = row[0], state_from_row(row[1:])
            # max(seq) + 1 rather than entry_count: robust even if rows were removed by hand.
            start = conn.execute("SELECT coalesce(max(seq) + 1, 0) FROM entries WHERE session_id = ?",
                                 (key,)).fetchone()[0]
        else:
            count, start, info = memo
            if not texts:
                return
        self._insert_entries(conn, session_id, start, entries, texts, info)
        updated_at = self._next_updated_at(conn, self._memo_updated_at)
        conn.execute(
            f"UPDATE sessions SET entry_count = ?, updated_at = ?, {STATE_ASSIGN} WHERE id = ?",
            (count + len(texts), updated_at, *state_values(info), key))
        if len(self._memo) >= 256:
            self._memo.clear()  # bounded: one store may append to many sessions (sync)
        self._memo[key] = (count + len(texts), start + len(texts), info)
        self._memo_updated_at = updated_at
        self._memo_mark = (conn, version, conn.total_changes)

    def _insert_entries(self, conn: sqlite3.Connection, session_id: str, start: int,
                        entries: Sequence[dict[str, Any]], texts: list[bytes], info: InfoAccumulator) -> None:
        key = to_db(session_id)
        rows = []
        text_rows = []
        for offset, (entry, text) in enumerate(zip(entries, texts, strict=False)):
            seq = start + offset
            listed = info.add(entry)
            if listed is not None:
                text_rows.append((key, seq, to_db(listed)))
            rows.append((key, seq, to_db(entry["id"]), to_db(entry["parentId"]), to_db(entry["type"]),
                         to_db(entry["timestamp"]), text, zlib.crc32(text)))
        info.texts.clear()  # they are in message_texts rows; the accumulator need not hold them
        try:
            _insert_entry_rows(conn, rows)
        except sqlite3.IntegrityError as exc:
            if "entries.session_id, entries.id" in str(exc):
                raise id_in_use_error(session_id) from exc
            raise
        _insert_text_rows(conn, text_rows)
        if DERIVED_INDEXES:
            indexed = [(start + offset, entry, text)
                       for offset, (entry, text) in enumerate(zip(entries, texts, strict=True))]
            for index in DERIVED_INDEXES:
                index.add(conn, key, indexed)

    def replace_header(self, session_id: str, header: dict[str, Any]) -> None:
        """Replace the header (same id) and its derived columns in one transaction.

        Raises:
            SessionNotFoundError: no such id.
            InvalidSessionError: the header is invalid or has another id.
            StorageError: the write failed; nothing changed.
        """
        check_replacement_header(session_id, header)
        header_raw = jsonio.dumps(header)
        with self.write_transaction("replace header") as conn:
            updated_at = self._next_updated_at(conn)
            cursor = conn.execute(
                "UPDATE sessions SET header_json = ?, header_crc = ?, created_at = ?, cwd = ?,"
                " parent_session_id = ?, classified = ?, updated_at = ? WHERE id = ?",
                (header_raw, record_crc(header_raw), *header_columns(header), updated_at, to_db(session_id)))
            if cursor.rowcount == 0:
                raise SessionNotFoundError(session_id, self.url)

    def replace_session(self, header: dict[str, Any], entries: Sequence[dict[str, Any]],
                        raw: Sequence[bytes | None] | None = None) -> None:
        """Replace a session's header and entries in one transaction (``sync --replace``).

        Its ``updated_at`` moves on (it was written); derived data is rebuilt from
        the new entries in the same transaction.

        Raises:
            SessionNotFoundError: no session has the header's id.
            InvalidSessionError: the header or an entry is invalid.
            StorageError: the write failed; the session is as it was.
        """
        session_id = check_header(header)
        texts = encode_entries(entries, raw)
        with self.write_transaction("replace session") as conn:
            self._replace_in(conn, session_id, header, texts, entries)

    def _replace_in(self, conn: sqlite3.Connection, session_id: str, header: dict[str, Any],
                    texts: list[bytes], entries: Sequence[dict[str, Any]]) -> None:
        key = to_db(session_id)
        if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (key,)).fetchone() is None:
            raise SessionNotFoundError(session_id, self.url)
        for index in DERIVED_INDEXES:
            index.remove(conn, key)
        conn.execute("DELETE FROM message_texts WHERE session_id = ?", (key,))
        conn.execute("DELETE FROM entries WHERE session_id = ?", (key,))
        conn.execute("DELETE FROM sessions WHERE id = ?", (key,))
        self._create_in(conn, session_id, header, jsonio.dumps(header), entries, texts)

    def sync_states(self) -> dict[str, SyncState]:
        """Every recorded sync state, by source path (one query; ``{}`` before the first sync)."""
        with self.read_transaction() as conn:
            if not self.has_schema(conn) or not conn.execute(
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
        with self.write_transaction("sync") as conn:
            row = conn.execute(f"SELECT {_SYNC_SQL} FROM sync_state WHERE path = ?", (to_db(state.path),)).fetchone()
            if not sync_expected(expect, _sync_state(row) if row is not None else None):
                raise SyncConflictError(state.path)
            if change.kind == "create" and header is not None:
                self._create_in(conn, change.session_id, header, jsonio.dumps(header), change.entries, texts)
            elif change.kind == "append":
                self._append_in(conn, change.session_id, change.entries, texts)
            elif change.kind == "replace" and header is not None:
                self._replace_in(conn, change.session_id, header, texts, change.entries)
            values = [to_db(state.path), to_db(state.session_id), state.size, state.mtime_ns, state.inode, state.dev,
                      state.consumed, state.lines, state.entries, state.version, state.header_hash,
                      state.tail_hash]
            conn.execute(f"INSERT OR REPLACE INTO sync_state ({_SYNC_SQL})"
                         f" VALUES ({', '.join('?' * len(values))})", values)

    def delete(self, session_id: str) -> None:
        """Delete the session's rows in one transaction; a missing id does nothing.

        Raises:
            StorageError: the delete failed; nothing changed.
        """
        key = to_db(session_id)
        with self.write_transaction("delete") as conn:
            # Explicit rather than relying on ON DELETE CASCADE, which only works
            # on connections that enabled foreign keys.
            for index in DERIVED_INDEXES:
                index.remove(conn, key)
            conn.execute("DELETE FROM message_texts WHERE session_id = ?", (key,))
            conn.execute("DELETE FROM entries WHERE session_id = ?", (key,))
            conn.execute("DELETE FROM sessions WHERE id = ?", (key,))

    def settle_derived(self, *, lock_timeout: float | None = None, pending: int | None = None) -> int:
        """Finish the derived work writes deferred (the search text left pending, see
        :mod:`.search`), in write transactions of about :data:`SETTLE_BUDGET`
        entries each, so that no transaction holds the write lock for long and an
        interruption keeps what was done. Bounded by the work pending when it
        starts: entries other writers add meanwhile may stay pending (a settle
        must not chase a concurrent import). See :meth:`SessionStore.settle_derived`.

        Args:
            lock_timeout: seconds each transaction waits for another writer's
                lock; ``None``: the store's busy timeout.
            pending: the entries the indexes have left to do, when the caller has
                just counted them (``DerivedIndex.pending``); ``None``: counted here.

        Returns:
            The number of entries processed.

        Raises:
            StorageError: the store is read-only, a write failed or the lock
                stayed held (the transactions before it are kept; what is left
                stays pending).
        """
        if pending is None:
            with self.read_transaction() as conn:
                pending = sum(index.pending(conn) for index in DERIVED_INDEXES) if self.has_schema(conn) else 0
        total = 0
        for _ in range(pending // SETTLE_BUDGET + 1):
            with self._busy_timeout(lock_timeout), self.write_transaction("settle derived data") as conn:
                done = [index.settle(conn, SETTLE_BUDGET) for index in DERIVED_INDEXES]
            total += sum(done)
            if all(count < SETTLE_BUDGET for count in done):
                break
        return total

    @contextmanager
    def _busy_timeout(self, seconds: float | None) -> Iterator[None]:
        """Within the block, this connection waits at most ``seconds`` for another
        writer's lock (``None``: unchanged); the store's own timeout afterwards."""
        if seconds is None:
            yield
            return
        with self._lock:
            self._connection().execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")
            try:
                yield
            finally:
                self._connection().execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")

    def reindex(self, session_id: str | None = None) -> int:
        """Recompute all derived data from the entries: the listing columns,
        ``message_texts`` and every :data:`DERIVED_INDEXES` table.

        The one rebuild path (docs/stores.md, "Derived data"): proves that entries
        and headers are the only truth, and repairs drift. ``updated_at`` is kept:
        a repair is not activity. One transaction: a failure changes nothing.

        Args:
            session_id: one session, or ``None`` for all.

        Returns:
            The number of sessions rebuilt.

        Raises:
            InvalidSessionError: a stored record is not valid JSON.
            StorageError: the write failed; nothing changed.
        """
        with self.write_transaction("reindex") as conn:
            if session_id is None:
                keys = [row[0] for row in conn.execute("SELECT id FROM sessions")]
            else:
                keys = [row[0] for row in conn.execute("SELECT id FROM sessions WHERE id = ?", (to_db(session_id),))]
            for key in keys:
                header_raw = conn.execute("SELECT header_json FROM sessions WHERE id = ?", (key,)).fetchone()[0]
                header = self._parse_record(header_raw, key, 1)
                info = InfoAccumulator()
                text_rows = []
                rows: list[tuple[int, dict[str, Any], bytes]] = []
                for seq, text in conn.execute("SELECT seq, json FROM entries WHERE session_id = ? ORDER BY seq",
                                              (key,)).fetchall():
                    entry = self._parse_record(text, key, seq + 2)
                    listed = info.add(entry)
                    if listed is not None:
                        text_rows.append((key, seq, to_db(listed)))
                    rows.append((seq, entry, record_bytes(text)))
                conn.execute("DELETE FROM message_texts WHERE session_id = ?", (key,))
                _insert_text_rows(conn, text_rows)
                conn.execute(
                    "UPDATE sessions SET created_at = ?, cwd = ?, parent_session_id = ?, classified = ?,"
                    f" entry_count = ?, {STATE_ASSIGN} WHERE id = ?",
                    (*header_columns(header), len(rows), *state_values(info), key))
                for index in DERIVED_INDEXES:
                    index.remove(conn, key)
                    index.add(conn, key, rows)
            for index in DERIVED_INDEXES:
                # Optional hook: an index with store-wide sums rebuilds them after a full reindex.
                reindexed = getattr(index, "reindexed", None)
                if reindexed is not None:
                    reindexed(conn, session_id is None)
            return len(keys)

    # -- reads ----------------------------------------------------------------------------

    def _parse_record(self, text: Any, key: Any, line: int) -> dict[str, Any]:
        if isinstance(text, str):
            text = text.encode("utf-8", "surrogatepass")
        try:
            record = jsonio.loads(text)
        except ValueError as exc:
            raise InvalidSessionError(f"stored record is not valid JSON ({exc})", f"{self.url}#{from_db(key)}",
                                      line) from exc
        if not isinstance(record, dict):
            raise InvalidSessionError("stored record is not a JSON object", f"{self.url}#{from_db(key)}", line)
        return record

    def read(self, session_id: str) -> ParsedSession:
        """Same as :meth:`load`: stored sessions are always format 4, loading writes nothing."""
        return self.load(session_id)

    def _scan(self, conn: sqlite3.Connection, session_id: str, entry_columns: str,
              params: Sequence[Any] = ()) -> tuple[dict[str, Any], bytes, list[Any]]:
        """The session's header (parsed, and its stored bytes), checked against its CRC-32 (where the schema records
        it) and parsed, and one row of ``entry_columns`` per entry in file order, by
        one ordered scan of the primary key: the reading path of the reads that take
        a few columns of every entry (:meth:`read_skeleton`, :meth:`read_outline`).
        ``params`` fill the ``?`` of ``entry_columns``.

        Raises:
            SessionNotFoundError: no such id.
            CorruptEntryError: the header's bytes fail their checksum.
            InvalidSessionError: the header is not a JSON object.
        """
        if not self.has_schema(conn):
            raise SessionNotFoundError(session_id, self.url)
        key = to_db(session_id)
        crc = self._has_crc
        row = conn.execute(f"SELECT header_json, {'header_crc' if crc else 'NULL'} FROM sessions WHERE id = ?",
                           (key,)).fetchone()
        if row is None:
            raise SessionNotFoundError(session_id, self.url)
        header_raw = row[0] if isinstance(row[0], bytes) else row[0].encode("utf-8", "surrogatepass")
        if crc and (row[1] is None or record_crc(header_raw) != row[1]):
            raise CorruptEntryError(session_id, None, 1, f"{self.url}#{session_id}")
        header = self._parse_record(header_raw, key, 1)
        return header, header_raw, conn.execute(
            f"SELECT {entry_columns} FROM entries WHERE session_id = ? ORDER BY seq", (*params, key)).fetchall()

    def read_skeleton(self, session_id: str) -> ParsedSession:
        """The session's header and skeleton entries (see ``SessionStore.read_skeleton``),
        from the ``entries`` columns plus the first bytes of each message (its role,
        ``shared.ROLE_HEAD``); only the rare label, leaf, session-info and compaction
        records, and messages whose first bytes do not show the role plainly, are
        parsed whole. The header's CRC is checked (``_scan``); the entries' are not
        (``read_entries`` and ``load`` check the records they return). The same skeletons as the generic fallback. One ordered scan
        (``_scan``), the one :meth:`read_outline` makes for its own columns.
        """
        from sessiontree.core.tree import SKELETON_FIELDS

        key = to_db(session_id)
        kinds = ("compaction", *SKELETON_FIELDS)
        with self.read_transaction() as conn:
            header, header_raw, rows = self._scan(
                conn, session_id,
                "id, parent_id, type, timestamp, CASE WHEN type = 'message'"
                f" THEN CAST(substr(json, 1, {ROLE_HEAD_BYTES}) AS BLOB) END,"
                f" CASE WHEN type IN ({', '.join('?' * len(kinds))}) THEN json END, seq", kinds)

            def fetch_whole(seqs: list[Any]) -> dict[Any, Any]:
                return {seq: text for batch in _rows_in(conn, "seq, json", key, "seq", seqs) for seq, text in batch}

            with gc_paused():  # see sessiontree.format.gcpause
                entries = skeletons_from_rows(
                    rows, lambda text, line: self._parse_record(text, key, line), fetch_whole, from_db)
        return ParsedSession(header, entries, [None] * len(entries), header_raw, 4,
                             lines=list(range(2, len(entries) + 2)))

    def read_entries(self, session_id: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        """The stored entries of ``ids`` (see ``SessionStore.read_entries``), looked up by
        the ``(session_id, id)`` index (``_rows_in``, as :meth:`read_entries_at` looks
        up by ``seq``), each given the checks :meth:`load` gives it by the same code
        as :meth:`read_entries_at` (``_RecordCheck``); the line reported is ``seq + 2``.

        Raises:
            SessionNotFoundError: no such session.
            CorruptEntryError: a returned record's bytes fail their checksum (this
                wins over a parse error; the first record in file order).
            InvalidSessionError: a returned record is not a valid entry.
        """
        key = to_db(session_id)
        with self.read_transaction() as conn:
            if not self.has_schema(conn) or conn.execute(
                    "SELECT 1 FROM sessions WHERE id = ?", (key,)).fetchone() is None:
                raise SessionNotFoundError(session_id, self.url)
            wanted = [to_db(i) for i in dict.fromkeys(ids)]
            rows = [row for batch in _rows_in(conn, f"seq, id, json, {'crc' if self._has_crc else 'NULL'}", key,
                                              "id", wanted) for row in batch]
        rows.sort(key=lambda row: row[0])  # the checks take the records in file order
        check = _RecordCheck(self, session_id, key, self._has_crc)
        found: dict[str, dict[str, Any]] = {}
        with gc_paused():  # see sessiontree.format.gcpause
            for seq, entry_id, text, crc in rows:
                entry = check(entry_id, seq + 2, text, crc)
                if entry is not None:
                    found[from_db(entry_id)] = entry
        check.finish()
        return [found[i] for i in ids if i in found]

    def load(self, session_id: str, *, keep_raw: bool = True) -> ParsedSession:
        """The session's header and entries, read in one snapshot.

        Args:
            session_id: the exact session id.
            keep_raw: keep each entry's stored JSON text in
                :attr:`ParsedSession.raw` (default). ``False`` gives ``None``
                for every entry instead (:meth:`ParsedSession.entry_bytes` then
                serializes the entry), so that the texts are freed as the
                entries are parsed: a caller that only wants the entries
                (``SessionManager.open``) then holds less memory after
                loading. Header, entries, errors and
                their order are the same either way.

        Returns:
            A :class:`ParsedSession` (format 4, ``upgraded`` false, ``path``
            ``None``, ``lines`` 2, 3, ...).

        Raises:
            SessionNotFoundError: no such id.
            CorruptEntryError: a stored record's bytes differ from the CRC-32
                recorded when it was written (the first such record; this wins
                over any other error).
            InvalidSessionError: a stored record is not a valid entry (the
                header's error first, then the first entry's in order).
            StorageError: the database could not be read.

        In WAL mode the rows are read and parsed a chunk at a time inside the
        read transaction (WAL readers never block writers), so the stored
        texts of a chunk are freed before the next is fetched; in any other
        journal mode they are fetched first and parsed after the transaction,
        as a reader there holds a lock that writers wait for.
        """
        key = to_db(session_id)
        with self.read_transaction() as conn:
            if not self.has_schema(conn):
                raise SessionNotFoundError(session_id, self.url)
            texts: Sequence[Any]
            if self._has_crc:
                row = conn.execute("SELECT header_json, header_crc FROM sessions WHERE id = ?", (key,)).fetchone()
                if row is None:
                    raise SessionNotFoundError(session_id, self.url)
                cursor = conn.execute("SELECT json, crc FROM entries WHERE session_id = ? ORDER BY seq", (key,))
                if self.journal_mode == "wal":
                    return self._stream(conn, session_id, key, row, cursor, keep_raw)
                rows = cursor.fetchall()
                texts, crcs = zip(*rows, strict=False) if rows else ((), ())  # two tuples, split in C
                del rows
                self._check_crcs(conn, session_id, row, texts, crcs)
            else:  # an older schema opened read-only: nothing to check against
                row = conn.execute("SELECT header_json FROM sessions WHERE id = ?", (key,)).fetchone()
                if row is None:
                    raise SessionNotFoundError(session_id, self.url)
                texts = [text for (text,) in conn.execute(
                    "SELECT json FROM entries WHERE session_id = ? ORDER BY seq", (key,))]
        with gc_paused():  # see sessiontree.format.gcpause: the collector would rescan every parsed entry
            parser = _Parser(self, session_id, key, row[0], keep_raw)
            parser.feed(texts, 0)
            del texts
            return parser.result()

    #: Rows fetched and parsed at a time by a streaming :meth:`load`.
    _CHUNK = 512

    def _stream(self, conn: sqlite3.Connection, session_id: str, key: Any, header_row: Sequence[Any],
                cursor: sqlite3.Cursor, keep_raw: bool) -> ParsedSession:
        """:meth:`load`'s WAL path: fetch, CRC-check and parse the rows a chunk at a time.

        The result and the errors are exactly those of checking every CRC
        first and parsing afterwards: a parse error is held back while the
        remaining rows' CRCs are checked, and a mismatch anywhere wins.
        """
        where = f"{self.url}#{session_id}"
        if header_row[1] is None or record_crc(header_row[0]) != header_row[1]:
            raise CorruptEntryError(session_id, None, 1, where)
        crc32, fetch, size = zlib.crc32, cursor.fetchmany, self._CHUNK
        pending: InvalidSessionError | None = None
        start = 0
        with gc_paused():  # see sessiontree.format.gcpause
            try:
                parser = _Parser(self, session_id, key, header_row[0], keep_raw)
            except InvalidSessionError as exc:
                pending, parser = exc, None
            while True:
                rows = fetch(size)
                if not rows:
                    break
                texts, crcs = zip(*rows, strict=False)
                del rows
                try:
                    computed = tuple(map(crc32, texts))
                except TypeError:  # a str stored by hand
                    computed = tuple(record_crc(text) for text in texts)
                if computed != crcs:
                    self._check_crcs(conn, session_id, header_row, texts, crcs, offset=start)
                if parser is not None and pending is None:
                    try:
                        parser.feed(texts, start)
                    except InvalidSessionError as exc:
                        pending = exc  # raised once every CRC is known to match
                start += len(texts)
                del texts
            if pending is not None:
                raise pending
            assert parser is not None
            return parser.result()

    def _check_crcs(self, conn: sqlite3.Connection, session_id: str, header_row: Sequence[Any],
                    texts: Sequence[Any], crcs: Sequence[Any], offset: int = 0) -> None:
        """Raise :class:`CorruptEntryError` for the first record whose bytes differ from
        the CRC-32 recorded when it was written (a missing CRC counts as different).
        ``texts`` and ``crcs`` are the rows from position ``offset`` of the session on."""
        where = f"{self.url}#{session_id}"
        if header_row[1] is None or record_crc(header_row[0]) != header_row[1]:
            raise CorruptEntryError(session_id, None, 1, where)
        try:
            computed = tuple(map(zlib.crc32, texts))  # the hot path: one C call per record
        except TypeError:  # a str stored by hand
            computed = tuple(record_crc(text) for text in texts)
        if computed == crcs:
            return
        index = offset + next(i for i, (a, b) in enumerate(zip(computed, crcs, strict=False)) if a != b)
        found = conn.execute("SELECT id FROM entries WHERE session_id = ? ORDER BY seq LIMIT 1 OFFSET ?",
                             (to_db(session_id), index)).fetchone()
        raise CorruptEntryError(session_id, from_db(found[0]) if found else None, index + 2, where)

    def recent_entry_types(self, session_id: str, count: int) -> set[str]:
        """The entry types among the session's last ``count`` records (file order), read
        from the ``type`` column through the primary key: ``count`` row look-ups, no
        record parsed. Empty for a missing session or one without entries. The lazy
        open asks it whether a compaction is near the end before reading an outline
        (docs/stores.md, "Lazy open").

        Raises:
            StorageError: the database could not be read.
        """
        with self.read_transaction() as conn:
            if not self.has_schema(conn):
                return set()
            rows = conn.execute("SELECT DISTINCT type FROM (SELECT type FROM entries WHERE session_id = ?"
                                " ORDER BY seq DESC LIMIT ?)", (to_db(session_id), count)).fetchall()
        return {from_db(kind) for (kind,) in rows}

    def read_outline(self, session_id: str) -> SessionOutline:
        """The session's header and its entries' ids, parent ids and types (see
        ``SessionStore.read_outline``), from the ``entries`` columns in one read
        snapshot: no record is parsed or checksummed (only the header's), so it
        costs a fraction of a :meth:`load` of the same session (benchmarks/README.md,
        "Resume and cold projection").
        ``stamps`` are the CRC-32s recorded at write time (``None`` on an
        older schema without them).

        Raises:
            SessionNotFoundError: no such id.
            CorruptEntryError: the header's bytes fail their checksum.
            InvalidSessionError: the header is not a JSON object.
            StorageError: the database could not be read.
        """
        crc = self._has_crc
        with self.read_transaction() as conn:
            header, _, rows = self._scan(conn, session_id, f"seq, id, parent_id, type{', crc' if crc else ''}")
        columns: list[Sequence[Any]] = list(zip(*rows, strict=False)) if rows else [()] * (5 if crc else 4)
        del rows
        for index in (1, 2, 3):
            # Values holding lone surrogates are stored as BLOBs (see derived.to_db); rare, so
            # the column is converted only when its set of value types says so.
            if bytes in set(map(type, columns[index])):
                columns[index] = tuple(map(from_db, columns[index]))
        return SessionOutline(session_id, header, columns[1], columns[2], columns[3], columns[0],
                              columns[4] if crc else None)

    def read_entries_at(self, outline: SessionOutline, positions: Sequence[int]) -> list[dict[str, Any]]:
        """The full entries at ``positions`` of ``outline`` (see
        ``SessionStore.read_entries_at``), in one read snapshot.

        Few positions are looked up by ``seq``; many (a quarter of the session
        or more) are read in one ordered range scan, a chunk of rows at a time,
        so the stored texts of a chunk are freed before the next. Each row must
        still have the outline's id, parent id, type and CRC
        (``SessionChangedError`` otherwise); then its bytes are checked against
        the CRC, parsed and validated as :meth:`load` does (``_RecordCheck``, shared
        with :meth:`read_entries`).

        Raises:
            SessionChangedError, CorruptEntryError, InvalidSessionError,
            IndexError, StorageError: see ``SessionStore.read_entries_at``.
        """
        size = len(outline.ids)
        for position in positions:
            if not 0 <= position < size:
                raise IndexError(f"position {position} outside a session of {size} entries")
        if not positions:
            return []
        session_id, keys, stamps = outline.session_id, outline.keys, outline.stamps
        key = to_db(session_id)
        wanted = sorted(set(positions))
        # seq -> position: the keys are ascending; contiguous ones (the usual case) need no map.
        first: int = keys[0]
        position_of: Callable[[int], int]
        if keys[-1] - first == size - 1:
            def contiguous(seq: int) -> int:
                return seq - first
            position_of = contiguous
        else:
            position_of = dict(zip(keys, range(size), strict=False)).__getitem__
        columns = f"seq, id, parent_id, type, json, {'crc' if stamps is not None else 'NULL'}"
        found: dict[int, dict[str, Any]] = {}
        matched = 0
        check = _RecordCheck(self, session_id, key, stamps is not None)
        with self.read_transaction() as conn, gc_paused():
            if not self.has_schema(conn) or conn.execute(
                    "SELECT 1 FROM sessions WHERE id = ?", (key,)).fetchone() is None:
                raise SessionChangedError(session_id, "it was deleted")
            if len(wanted) * 4 >= size:
                cursor = conn.execute(f"SELECT {columns} FROM entries WHERE session_id = ? AND seq BETWEEN ? AND ?"
                                      " ORDER BY seq", (key, keys[wanted[0]], keys[wanted[-1]]))
                take = set(wanted) if len(wanted) != wanted[-1] - wanted[0] + 1 else None
                batches: Iterable[list[Any]] = iter(functools.partial(cursor.fetchmany, self._CHUNK), [])
            else:
                take = None
                batches = _rows_in(conn, columns, key, "seq", [keys[p] for p in wanted])
            for batch in batches:
                for seq, entry_id, parent_id, kind, text, crc in batch:
                    try:
                        position = position_of(seq)
                    except KeyError:  # a row the outline did not see: another replaced the session
                        raise SessionChangedError(session_id, f"a record at seq {seq} is new") from None
                    if take is not None and position not in take:
                        continue
                    if (from_db(entry_id), from_db(parent_id), from_db(kind)) != (
                            outline.ids[position], outline.parent_ids[position], outline.types[position]) or (
                            stamps is not None and crc != stamps[position]):
                        raise SessionChangedError(session_id, f"entry {position + 1} differs")
                    matched += 1
                    entry = check(entry_id, position + 2, text, crc)
                    if entry is not None:
                        found[position] = entry
                del batch
            if matched != len(wanted):
                raise SessionChangedError(session_id, f"{len(wanted) - matched} of its entries are gone")
        check.finish()
        return [found[p] for p in positions]

    def exists(self, session_id: str) -> bool:
        """Whether the id is stored."""
        with self.read_transaction() as conn:
            if not self.has_schema(conn):
                return False
            return conn.execute("SELECT 1 FROM sessions WHERE id = ?", (to_db(session_id),)).fetchone() is not None

    def session_ids(self) -> list[str]:
        """Every stored id, oldest row first."""
        with self.read_transaction() as conn:
            if not self.has_schema(conn):
                return []
            return [from_db(row[0]) for row in conn.execute("SELECT id FROM sessions ORDER BY rowid")]

    def location(self, session_id: str) -> str | None:
        """Always ``None``: sessions live in the database, not in files."""
        return None

    def list_sessions(self, *, cwd: str | None = None, include_internal: bool = False,
                      on_progress: ProgressCallback | None = None,
                      cancel: CancelEvent | None = None) -> SessionListing:
        """Listing rows from the ``sessions`` table alone, newest ``modified`` first.

        ``all_messages_text`` of a row is read from ``message_texts`` on first access.
        A row whose header does not parse is left out and counted in ``skipped``
        (damage to entries is found by :meth:`load` and :meth:`verify`, not here:
        listing never reads entries).

        Raises:
            ListingCancelledError: ``cancel`` was set before or during the listing.
            StorageError: the database could not be read.
        """
        wanted = resolve_cwd(cwd) if cwd is not None else None
        if cancel is not None:
            Progress(0, None, cancel)  # cancelled before starting: do not even query
        with self.read_transaction() as conn:
            if not self.has_schema(conn):
                return SessionListing()
            rows = conn.execute(
                f"SELECT id, header_json, classified, cwd, updated_at, entry_count, {STATE_SELECT} FROM sessions"
                " ORDER BY rowid").fetchall()
        progress = Progress(len(rows), on_progress, cancel)
        infos = []
        skipped = 0
        loads = jsonio.loads
        for row in rows:
            if (include_internal or not row[2]) and cwd_matches(from_db(row[3]), wanted):
                session_id = from_db(row[0])
                try:
                    header = loads(row[1])
                except ValueError:
                    header = None  # damaged by hand: the session cannot be loaded, so it is not listed
                if isinstance(header, dict) and isinstance(header.get("id"), str):
                    infos.append(state_from_row(row[6:]).to_info(
                        header, session_id, fallback_mtime=row[4] / 1e6,
                        text_loader=functools.partial(self._load_text, session_id), entry_count=row[5]))
                else:
                    skipped += 1
            progress.step()
        return sort_listing(infos, skipped)

    def _load_text(self, session_id: str) -> str:
        with self.read_transaction() as conn:
            if not self.has_schema(conn):
                return ""
            return " ".join(from_db(text) for (text,) in conn.execute(
                "SELECT text FROM message_texts WHERE session_id = ? ORDER BY seq", (to_db(session_id),)))

    def usage(self, query: UsageQuery | None = None) -> UsageRows:
        """Billed usage from the usage ledger alone (:mod:`.usage`): no
        entry is read. A database without the ledger (an older schema opened
        read-only) is answered from its entries instead. See :meth:`SessionStore.usage`.

        Raises:
            StorageError: the database could not be read.
        """
        query = query or UsageQuery()
        wanted = resolve_cwd(query.cwd) if query.cwd is not None else None
        with self.read_transaction() as conn:
            if not self.has_schema(conn):
                return UsageRows()
            has_ledger = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'usage_calls'").fetchone()
            if has_ledger:
                return UsageRows(query_usage(conn, query, lambda cwd: cwd_matches(cwd, wanted)))
        sessions = ((parsed.header, parsed.entries) for parsed in map(self.read, self.session_ids()))
        return UsageRows(aggregate(sessions, query, lambda cwd: cwd_matches(cwd, wanted)))

    def find_most_recent(self, cwd: str | None = None, include_internal: bool = False) -> str | None:
        """Id of the session written last (``updated_at``), optionally only for ``cwd``."""
        wanted = resolve_cwd(cwd) if cwd is not None else None
        with self.read_transaction() as conn:
            if not self.has_schema(conn):
                return None
            cursor = conn.execute("SELECT id, classified, cwd FROM sessions ORDER BY updated_at DESC")
            try:
                for session_id, classified, session_cwd in cursor:
                    if classified and not include_internal:
                        continue
                    if cwd_matches(from_db(session_cwd), wanted):
                        found: str = from_db(session_id)
                        return found
            finally:
                cursor.close()
        return None

    def search(self, query: str, *, cwd: str | None = None, roles: Iterable[str] | None = None,
               since: Any = None, until: Any = None, session: str | None = None,
               limit: int | None = 50) -> list[Any]:
        """Full-text search through the FTS5 index (:mod:`.search`). See
        :meth:`SessionStore.search` for arguments, results and errors."""
        return search_index.search_store(self, query, cwd=cwd, roles=roles, since=since, until=until,
                                         session=session, limit=limit)

    def settle_search_tail(self, on_merge: Callable[[int], None] | None = None) -> int:
        """Before a search by a front end: merge the search index's pending tail when it
        holds more than :data:`~sessiontree.stores.sqlite.search.MAX_PENDING` records
        (see :meth:`SessionStore.settle_search_tail`), so this search and the next
        ones read the index instead of scanning the tail.

        A store opened read-only (as reading commands open it) is merged through a
        second, writable handle on the same file; only when the file's schema is
        current, so a reading command never migrates a store. Derived data only:
        when the file cannot be written (permissions, another writer holding the
        lock) nothing happens and the search scans the tail, with the same hits.
        The merge waits at most :data:`~sessiontree.stores.sqlite.search.SETTLE_TIMEOUT`
        seconds for another writer's lock. A ``:memory:`` database has no other
        handle and merges nothing here.

        Args:
            on_merge: called with the number of pending records just before a merge.

        Returns:
            The number of records merged.
        """
        if self.path == ":memory:":
            return 0
        try:
            if self.applied_migrations() != [name for name, _ in MIGRATIONS]:
                return 0  # an older schema: a writable open would migrate it
            with self.read_transaction() as conn:
                pending = search_index.pending_records(conn) if self.has_schema(conn) else 0
            if pending <= search_index.MAX_PENDING:
                return 0
            if on_merge is not None:
                on_merge(pending)
            if not self.readonly:
                return search_index.settle_if_due(self, pending)
            # A short busy timeout for opening it too: the search must not wait out another
            # writer's long transaction (settle_if_due gives up as quickly).
            writer = SqliteStore(self.path, create=False, timeout=min(self.timeout, search_index.SETTLE_TIMEOUT))
            try:
                return search_index.settle_if_due(writer, pending)
            finally:
                writer.close()
        except (SessionError, OSError):
            return 0  # the search scans the tail instead: same hits

    # -- verification ---------------------------------------------------------------------

    def verify(self, on_progress: ProgressCallback | None = None) -> list[StoreProblem]:
        """Check the whole database without changing it (``sessiontree check --store``).

        In one read snapshot: SQLite's ``PRAGMA integrity_check``; then for every
        session, each record's CRC-32 against the one recorded at write time,
        that each record parses and is a valid header or entry, that an entry's
        copied columns (id, parentId, type, timestamp) match its JSON, and that
        the listing columns, ``entry_count``, header columns and
        ``message_texts`` equal a rebuild from the records
        (:meth:`reindex` repairs drift; a hash mismatch can only be
        repaired by re-importing the session from its original file).

        Args:
            on_progress: called ``(checked, total)`` once per session.

        Returns:
            The problems, integrity first, then by session in store order.

        Raises:
            StorageError: the database cannot be read at all (e.g. closed).
        """
        problems: list[StoreProblem] = []
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN")
            try:
                try:
                    messages = [row[0] for row in conn.execute("PRAGMA integrity_check")]
                except sqlite3.DatabaseError as exc:
                    messages = [str(exc)]
                if messages != ["ok"]:
                    problems.extend(StoreProblem("integrity", f"SQLite integrity check: {message}")
                                    for message in messages)
                if not self.has_schema(conn):
                    return problems
                try:
                    keys = [row[0] for row in conn.execute("SELECT id FROM sessions ORDER BY rowid")]
                except sqlite3.DatabaseError as exc:
                    problems.append(StoreProblem("integrity", f"the sessions table cannot be read: {exc}"))
                    return problems
                for done, key in enumerate(keys, 1):
                    try:
                        problems.extend(self._verify_session(conn, key))
                    except sqlite3.DatabaseError as exc:
                        problems.append(StoreProblem("integrity", f"reading the session failed: {exc}",
                                                     session_id=from_db(key), path=f"{self.url}#{from_db(key)}"))
                    if on_progress is not None:
                        on_progress(done, len(keys))
            finally:
                if conn.in_transaction:
                    try:
                        conn.execute("COMMIT")  # a read transaction: nothing to keep
                    except sqlite3.Error:
                        if conn.in_transaction:
                            conn.execute("ROLLBACK")
        return problems

    def _verify_session(self, conn: sqlite3.Connection, key: Any) -> list[StoreProblem]:
        """The problems of the session stored under ``key`` (:func:`~sessiontree.stores.verify.verify_stored_session`
        on its rows, read in the caller's snapshot)."""
        session_id = from_db(key)
        has_crc = self._has_crc
        row = conn.execute(
            f"SELECT header_json, {'header_crc' if has_crc else 'NULL'}, created_at, cwd, parent_session_id,"
            f" classified, entry_count, {STATE_SELECT} FROM sessions WHERE id = ?", (key,)).fetchone()

        def state_drift(info: InfoAccumulator) -> list[str]:
            return [f"{column} {from_db(value)!r} (rebuilt: {from_db(rebuilt)!r})"
                    for (_, column), value, rebuilt in zip(STATE_COLUMNS, row[7:], state_values(info), strict=True)
                    if from_db(value) != from_db(rebuilt)]

        def stored_texts() -> list[tuple[int, str]]:
            return [(seq, from_db(text)) for seq, text in conn.execute(
                "SELECT seq, text FROM message_texts WHERE session_id = ? ORDER BY seq", (key,))]

        stored = StoredSession(
            header_text=record_bytes(row[0]),
            header_intact=not has_crc or (row[1] is not None and record_crc(row[0]) == row[1]),
            entry_count=row[6],
            header_columns=[from_db(value) for value in row[2:6]],
            parse=lambda text, line: self._parse_record(text, key, line),
            copied_columns=lambda entry: (entry.get("id"), entry.get("parentId"), entry.get("type"),
                                          entry.get("timestamp")),
            rebuilt_header_columns=lambda header: [from_db(value) for value in header_columns(header)],
            state_drift=state_drift,
            stored_texts=stored_texts)
        records = (
            StoredRecord(seq, from_db(entry_key), (from_db(entry_key), from_db(parent), from_db(kind), from_db(stamp)),
                         record_bytes(text), not has_crc or (crc is not None and record_crc(text) == crc))
            for seq, entry_key, parent, kind, stamp, text, crc in conn.execute(
                f"SELECT seq, id, parent_id, type, timestamp, json, {'crc' if has_crc else 'NULL'} FROM entries"
                " WHERE session_id = ? ORDER BY seq", (key,)))
        return verify_stored_session(session_id, f"{self.url}#{session_id}", stored, records)

    def close(self) -> None:
        """Close the connection. Idempotent; later calls raise StorageError."""
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
            if conn is not None and os.getpid() == self._pid:
                conn.close()
            key, self._file_key = self._file_key, None
            if key is not None:
                with _OPEN_FILES_LOCK:
                    left = _OPEN_FILES.get(key, 0) - 1
                    if left > 0:
                        _OPEN_FILES[key] = left
                    else:
                        _OPEN_FILES.pop(key, None)


_SYNC_SQL = ("path, session_id, size, mtime_ns, inode, dev, consumed, lines, entries, version, header_hash,"
             " tail_hash")


def _sync_state(row: Sequence[Any]) -> SyncState:
    """A ``sync_state`` row (columns of ``_SYNC_SQL``) as a :class:`SyncState`."""
    return SyncState(from_db(row[0]), from_db(row[1]), row[2], row[3], row[4], row[5], row[6], row[7], row[8],
                     row[9], bytes(row[10]), bytes(row[11]))


# Module-level so tests can inject a failure in the middle of a write.
class _Parser:
    """Parses a session's stored records into a :class:`ParsedSession`, a chunk at a time.

    The header is parsed on construction; :meth:`feed` parses and validates
    entries in order (raising :class:`InvalidSessionError` with the record's
    line for the first bad one); :meth:`result` gives the session.
    """

    __slots__ = ("entries", "header", "header_raw", "keep_raw", "key", "raw", "store", "where")

    def __init__(self, store: SqliteStore, session_id: str, key: Any, header_text: bytes | str,
                 keep_raw: bool) -> None:
        self.store, self.key, self.keep_raw = store, key, keep_raw
        self.where = f"{store.url}#{session_id}"
        self.header_raw = (header_text if isinstance(header_text, bytes)
                           else header_text.encode("utf-8", "surrogatepass"))
        self.header = store._parse_record(self.header_raw, key, 1)
        self.entries: list[dict[str, Any]] = []
        self.raw: list[bytes | None] = []

    def feed(self, texts: Sequence[bytes | str], start: int) -> None:
        """Parse ``texts``, the records from entry position ``start`` on."""
        entries, raw, keep_raw = self.entries, self.raw, self.keep_raw
        parse, key, where = self.store._parse_record, self.key, self.where
        loads, decode_error, limit, deepest = orjson.loads, orjson.JSONDecodeError, 2 * jsonio.MAX_DEPTH, jsonio.MAX_DEPTH
        push = entries.append
        for index, text in enumerate(texts, start + 2):
            # Fast path, the same result as jsonio.loads: bytes that orjson
            # reads into an object and that have too few brackets to nest
            # beyond MAX_DEPTH; anything else takes the full rules.
            entry = None
            if text.__class__ is bytes:
                try:
                    entry = loads(text)
                except decode_error:
                    entry = None
                if entry.__class__ is not dict or (
                        len(text) > limit and text.count(b"[") + text.count(b"{") > deepest):
                    entry = None
            if entry is None:
                entry = parse(text, key, index)
            push(validated(entry, where, index))
            if keep_raw:
                raw.append(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))

    def result(self) -> ParsedSession:
        """The parsed session (format 4, as stored)."""
        count = len(self.entries)
        return ParsedSession(header=self.header, entries=self.entries,
                             raw=self.raw if self.keep_raw else [None] * count, header_raw=self.header_raw,
                             source_version=CURRENT_VERSION, upgraded=False,
                             lines=list(range(2, count + 2)), path=None)


def _parse_entry(store: SqliteStore, text: bytes | str, key: Any, where: str, line: int) -> dict[str, Any]:
    """One stored record parsed and validated as :meth:`_Parser.feed` does it (the
    same fast path and the same errors), for reads of single records."""
    entry = None
    if text.__class__ is bytes:
        try:
            entry = orjson.loads(text)
        except orjson.JSONDecodeError:
            entry = None
        if entry.__class__ is not dict or (
                len(text) > 2 * jsonio.MAX_DEPTH and text.count(b"[") + text.count(b"{") > jsonio.MAX_DEPTH):
            entry = None
    if entry is None:
        entry = store._parse_record(text, key, line)
    return validated(entry, where, line)


#: Values bound per ``IN (...)`` look-up, well under SQLite's bound-parameter limit.
_IN_CHUNK = 500


def _rows_in(conn: sqlite3.Connection, columns: str, key: Any, column: str,
             values: Sequence[Any]) -> Iterator[list[Any]]:
    """The rows (``columns``) of the session ``key``'s entries whose ``column``
    (``id`` or ``seq``, both indexed) is one of ``values``: one statement and one
    batch per :data:`_IN_CHUNK` values. The look-up path of every read of some
    records (:meth:`SqliteStore.read_entries`, :meth:`SqliteStore.read_entries_at`,
    the records a skeleton parses whole). A ``seq`` batch comes in file order (the
    primary key's); an ``id`` batch in the index's order, for the caller to sort:
    ``ORDER BY seq`` there makes SQLite scan the whole session by its primary key
    instead, far slower for a few ids of a long session."""
    order = " ORDER BY seq" if column == "seq" else ""
    for at in range(0, len(values), _IN_CHUNK):
        chunk = values[at:at + _IN_CHUNK]
        yield conn.execute(f"SELECT {columns} FROM entries WHERE session_id = ?"
                           f" AND {column} IN ({', '.join('?' * len(chunk))}){order}", (key, *chunk)).fetchall()


class _RecordCheck:
    """The checks :meth:`SqliteStore.load` gives each record, for the reads of some
    records (:meth:`SqliteStore.read_entries`, :meth:`SqliteStore.read_entries_at`):
    its bytes against the CRC-32 recorded at write time (``CorruptEntryError`` at
    once; a missing CRC counts as different), then parsing and entry validation
    (:func:`_parse_entry`). Fed the records in file order, it reports what ``load``
    would of them: a checksum failure anywhere wins over a parse error, which is
    held back until :meth:`finish`, and the first failure in file order is the
    one raised (docs/stores.md, "Lazy open")."""

    __slots__ = ("crcs", "key", "pending", "session_id", "store", "where")

    def __init__(self, store: SqliteStore, session_id: str, key: Any, crcs: bool) -> None:
        """Check records of ``session_id`` (stored under ``key``); ``crcs``: whether
        the rows carry CRCs (``False`` on an older schema: nothing to check against)."""
        self.store, self.session_id, self.key, self.crcs = store, session_id, key, crcs
        self.where = f"{store.url}#{session_id}"
        self.pending: InvalidSessionError | None = None

    def __call__(self, entry_id: Any, line: int, text: bytes | str, crc: Any) -> dict[str, Any] | None:
        """The record (stored ``text``, its ``crc``) at JSONL ``line``, parsed and
        validated; ``None`` once a parse error is pending (later records only get
        their checksum checked).

        Raises:
            CorruptEntryError: the bytes differ from ``crc``.
        """
        if self.crcs and record_crc(text) != crc:
            raise CorruptEntryError(self.session_id, from_db(entry_id), line, self.where)
        if self.pending is None:
            try:
                return _parse_entry(self.store, text, self.key, self.where, line)
            except InvalidSessionError as exc:
                self.pending = exc  # raised once every CRC is known to match
        return None

    def finish(self) -> None:
        """Raise the first parse or validation error met, if any (``InvalidSessionError``)."""
        if self.pending is not None:
            raise self.pending


def _insert_entry_rows(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    conn.executemany(
        "INSERT INTO entries (session_id, seq, id, parent_id, type, timestamp, json, crc)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        rows)


def _insert_text_rows(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    if rows:
        conn.executemany("INSERT INTO message_texts (session_id, seq, text) VALUES (?, ?, ?)", rows)
