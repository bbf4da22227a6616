"""Opening a SQLite store's database file, and the transactions every part runs in.

:class:`SqliteDatabase` is the one object the store's parts share (:mod:`.reads`,
:mod:`.writes`, :mod:`.ledger`, :mod:`.maintenance`, :mod:`.retention`): it opens the
file (identifying an existing one without writing to it), connects with the store's
pragmas, checks or migrates the schema (the steps of :mod:`.schema`), and owns the read
and write transactions and :meth:`SqliteDatabase.close`. The process-wide registry of
open database files and :func:`file_header`, the one safe way to look at the first
bytes of a file a store of this process may hold, live here too.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sessiontree.errors import StorageError, StoreOpenError
from sessiontree.stores.sqlite.schema import MIGRATIONS
from sessiontree.stores.steps import check_known_steps

__all__ = [
    "OPEN_FILES",
    "OPEN_FILES_LOCK",
    "WAL_AUTOCHECKPOINT",
    "SqliteDatabase",
    "file_header",
    "file_key",
    "step_names",
]

_T = TypeVar("_T")

#: WAL pages between automatic checkpoints of a writable connection (16 MiB of 4 KiB
#: pages; SQLite's default is 1,000): fewer checkpoints, each costing fsyncs, make
#: per-call appends cheaper (benchmarks/README.md, "Appends and import"). Durability
#: does not depend on it: a commit is in the WAL (and, with synchronous=full, on
#: disk) before it returns, whenever checkpoints run.
WAL_AUTOCHECKPOINT = 4096

#: The first 16 bytes of every SQLite database file.
_MAGIC = b"SQLite format 3\x00"


def _nothing() -> None:
    """The default :attr:`SqliteDatabase.on_rollback`: nothing to drop."""


def step_names() -> list[str]:
    """The names of this version's schema steps (``m001_initial``, ...), in the order
    they run, read at call time from this module's ``MIGRATIONS``
    (:data:`sessiontree.stores.sqlite.schema.MIGRATIONS`): every comparison of a database's
    steps with this version's goes through it, so they all agree with what the open runs."""
    return [name for name, _ in MIGRATIONS]


def _refuse_marked(conn: sqlite3.Connection, url: str) -> None:
    """Refuse a table-less database another program has claimed (docs/stores.md).

    Our schema sets neither ``PRAGMA application_id`` nor ``PRAGMA user_version``,
    so a file without tables where either is not 0 was made by another program
    (which has not created its tables yet, or dropped them): it is not ours to fill.

    Raises:
        StoreOpenError: either value is set, naming it.
    """
    values = {name: conn.execute(f"PRAGMA {name}").fetchone()[0] for name in ("application_id", "user_version")}
    set_marks = [f"{name} {value}" for name, value in values.items() if value]
    if set_marks:
        raise StoreOpenError(f"cannot open {url}: it is an empty SQLite database that another program has "
                             f"claimed ({', '.join(set_marks)}), not a sessiontree store; nothing was changed")


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
OPEN_FILES: dict[tuple[int, int], int] = {}
#: Guards :data:`OPEN_FILES`.
OPEN_FILES_LOCK = threading.Lock()


def file_key(path: str) -> tuple[int, int] | None:
    """The ``(st_dev, st_ino)`` of the file at ``path`` (the key of :data:`OPEN_FILES`),
    or ``None`` when it cannot be stat'ed (missing, no permission)."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


def file_header(path: str, size: int = 100) -> bytes | None:
    """The first ``size`` bytes of the file at ``path``, read directly, or ``None``
    when an open :class:`SqliteStore` of this process holds that file: closing the
    descriptor a read needs would release that store's locks (see ``OPEN_FILES``).
    A file another store of ours holds open is a SQLite database.

    Raises:
        OSError: the file cannot be opened or read.
    """
    key = file_key(path)
    with OPEN_FILES_LOCK:
        if key is not None and OPEN_FILES.get(key):
            return None
        # Read under the lock, so no store of this process opens the file meanwhile.
        with open(path, "rb") as handle:
            return handle.read(size)


class SqliteDatabase:
    """The open database file of a SQLite store: its connection, schema state and the
    transactions every part of the store runs in (the store's transactions protocol,
    :class:`~sessiontree.stores.transactions.Transactions`, docs/architecture.md "The store seam").

    The store (:class:`~sessiontree.stores.sqlite.store.SqliteStore`) opens one and hands
    it to its parts (:mod:`.reads`, :mod:`.writes`, :mod:`.ledger`, :mod:`.maintenance`,
    :mod:`.retention`); they use only its public members. Opening never writes to a
    database that is not ours (the rules and arguments are :class:`SqliteStore`'s).

    Attributes:
        url, path, timeout, synchronous, readonly, open_mode, journal_mode, blob_refs:
            as documented on :class:`SqliteStore`.
        lock: the re-entrant lock every transaction holds (one connection per store).
        initialised: the database holds our schema (``False``: an empty database left
            uninitialised by ``create=False``).
        has_crc, has_blobs, has_texts_tail, has_tool_calls: the schema has steps
            ``m002_record_crc``, ``m013_blobs``, ``m015_texts_tail``, ``m018_tool_calls``
            (``False`` only for an older schema opened read-only).
        bulk: the open batch of :meth:`bulk_writes`: ``[opened at (monotonic s), writes in it,
            seconds, writes, created]`` (``seconds`` and ``writes``: when to commit it;
            ``created``: the ``(key, entries)`` of the sessions a sync created in it, whose
            derived data is written together before any other write and before the commit),
            ``None`` outside one.
        settled_in_hand: entries whose derived data a write settled from the entries in hand
            (a sync's new sessions), counted over this handle's life.
        on_rollback: called when a write is rolled back (the writes part drops its append
            memo, which may describe what was undone).
        settle_created: writes the derived data of the sessions a batch created (set by the
            writes part, which knows the indexes); ``None``: nothing to settle.

    Raises:
        StoreOpenError: as :class:`SqliteStore`.
    """

    def __init__(self, path: str, *, timeout: float, create: bool, readonly: bool, synchronous: str,
                 quick_check: bool, blob_refs: bool) -> None:
        if synchronous.lower() not in ("full", "normal"):
            raise ValueError('synchronous must be "full" or "normal"')
        self.synchronous = synchronous.lower()
        self.path = path if path == ":memory:" else os.path.abspath(path)
        self.url = "sqlite:///" + self.path
        self.timeout = timeout
        self.readonly = bool(readonly) and self.path != ":memory:"
        self.open_mode = "readonly" if self.readonly else "readwrite"
        self.journal_mode = "memory"
        self.lock = threading.RLock()
        self.conn: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self.closed = False
        #: (st_dev, st_ino) of the database file while this handle counts in OPEN_FILES.
        self._file_key: tuple[int, int] | None = None
        self.initialised = True
        self.has_crc = True
        self.has_blobs = True
        self.blob_refs = bool(blob_refs)
        self.has_texts_tail = True
        self.has_tool_calls = True
        self.bulk: list[Any] | None = None
        self.settled_in_hand = 0
        self.on_rollback: Callable[[], None] = _nothing
        self.settle_created: Callable[[sqlite3.Connection, list[tuple[Any, Any]]], None] | None = None
        self._open(create, quick_check)

    def _open(self, create: bool, quick_check: bool) -> None:
        """Identify, connect, and check or migrate (see :class:`SqliteStore`)."""
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
                self.initialised = False  # create=False on an empty database: leave it as it is
            else:
                self._migrate(conn)
        except sqlite3.Error as exc:
            conn.close()
            raise StoreOpenError(f"cannot open {self.url}: {exc}") from exc
        except BaseException:
            conn.close()
            raise
        self.conn = conn
        self._file_key = None if self.path == ":memory:" else file_key(self.path)
        if self._file_key is not None:
            with OPEN_FILES_LOCK:
                OPEN_FILES[self._file_key] = OPEN_FILES.get(self._file_key, 0) + 1

    def _uri(self, immutable: bool) -> str:
        return "file:" + _quote(self.path) + ("?mode=ro&immutable=1" if immutable else "?mode=ro")

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
                _refuse_marked(probe, self.url)
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
        self.initialised = applied is not None
        check_known_steps(self.url, applied or [], step_names())
        self.has_crc = applied is not None and "m002_record_crc" in applied
        self.has_blobs = applied is not None and "m013_blobs" in applied
        self.has_texts_tail = applied is not None and "m015_texts_tail" in applied
        self.has_tool_calls = applied is not None and "m018_tool_calls" in applied

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
        known = step_names()
        self.has_blobs = "m013_blobs" in known
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
                _refuse_marked(conn, self.url)
            conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations ("
                         " name TEXT PRIMARY KEY,"  # the step's function name, e.g. m001_initial
                         " applied_at TEXT NOT NULL)")  # when it ran (ISO-8601 UTC), for diagnosis
            applied = applied or []
            check_known_steps(self.url, applied, known)
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
        with self.lock:
            return self._applied(self.connection()) or []

    def connection(self) -> sqlite3.Connection:
        """The open connection (a new one after ``fork``).

        Raises:
            StorageError: the store is closed."""
        if self.closed or self.conn is None:
            raise StorageError(f"{self.url} is closed")
        if os.getpid() != self._pid:
            # A connection must not cross fork(): leave the parent's alone and open our own.
            self.conn = self._connect(wal=self.initialised and not self.readonly)
            self._pid = os.getpid()
        return self.conn

    @contextmanager
    def write_transaction(self, what: str) -> Iterator[sqlite3.Connection]:
        """One write transaction; sqlite errors become StorageError, everything rolls back."""
        with self.lock:
            conn = self._begin_write(what)
            try:
                yield conn
                self._end_write(conn)
            except BaseException as exc:
                self._abort_write(conn, what, exc)
                raise

    def run_write(self, what: str, body: Callable[..., _T], *args: Any) -> _T:
        """``body(conn, *args)`` in one write transaction, as :meth:`write_transaction`
        runs its block (same errors, same rollback), and its result: the same
        transaction without a generator's cost, for the per-call append."""
        with self.lock:
            conn = self._begin_write(what)
            try:
                result = body(conn, *args)
                self._end_write(conn)
            except BaseException as exc:
                self._abort_write(conn, what, exc)
                raise
            return result

    def _begin_write(self, what: str) -> sqlite3.Connection:
        """``BEGIN IMMEDIATE`` on the store's connection (the caller holds ``_lock``).

        Raises:
            StorageError: read-only, not initialised, or the lock could not be taken."""
        if self.readonly:
            raise StorageError(f"{what}: {self.url} is opened read-only")
        conn = self.connection()
        if not self.initialised:
            raise StorageError(f"{what}: {self.url} is an empty database not initialised as a sessiontree "
                               "store; open it with create=True (as sessiontree import does) to initialise it")
        try:
            if self.bulk is None:
                conn.execute("BEGIN IMMEDIATE")
                return conn
            if not conn.in_transaction:
                conn.execute("BEGIN IMMEDIATE")
                self.bulk[0:2] = [time.monotonic(), 0]
            # One write of a batch: its own savepoint, so a failed write rolls back alone.
            conn.execute("SAVEPOINT bulk_write")
            if what != "sync create":
                self._settle_created(conn)  # any other write sees the batch's sessions settled
        except sqlite3.Error as exc:
            raise StorageError(f"{what}: cannot start a write transaction on {self.url}: {exc}") from exc
        return conn

    def _end_write(self, conn: sqlite3.Connection) -> None:
        """Commit a write; in a batch of :meth:`bulk_writes`, release its savepoint and
        commit the batch when it is old or large enough (the caller holds ``_lock``)."""
        bulk = self.bulk
        if bulk is None:
            conn.execute("COMMIT")
            return
        conn.execute("RELEASE bulk_write")
        bulk[1] += 1
        if bulk[1] >= bulk[3] or time.monotonic() - bulk[0] >= bulk[2]:
            self._settle_created(conn)
            conn.execute("COMMIT")

    def _settle_created(self, conn: sqlite3.Connection) -> None:
        """Write the derived data of the sessions the open batch created (one statement
        per index for all of them: FTS5's cost is mostly per statement); the mixin that
        knows the indexes (:mod:`.writes`) does it."""
        if self.bulk is not None and self.bulk[4]:
            created, self.bulk[4] = self.bulk[4], []
            if self.settle_created is not None:
                self.settle_created(conn, created)

    @contextmanager
    def bulk_writes(self, *, seconds: float = 1.0, writes: int = 1000) -> Iterator[None]:
        """Within the block, writes are batched: each runs in a savepoint of one
        transaction committed every ``seconds`` or ``writes`` writes, and when the block
        ends (also by an exception: every write that returned is complete in it).

        For a sync (docs/sync.md, "Durability"): the agent's files remain the source, so a
        crash loses at most the last batch of the store's copy, and the next sync reads
        those files again (their states were in the same batch). Each write stays atomic:
        one that fails rolls back alone, the batch goes on. Reads of this store inside
        the block see the batch. Nested calls join the outer batch.
        """
        with self.lock:
            nested = self.bulk is not None
            if not nested:
                self.bulk = [time.monotonic(), 0, seconds, writes, []]
        if nested:
            yield
            return
        try:
            yield
        finally:
            with self.lock:
                conn = self.conn
                if conn is not None and not self.closed and conn.in_transaction:
                    try:
                        self._settle_created(conn)
                        self.bulk = None
                        conn.execute("COMMIT")
                    except sqlite3.Error as exc:
                        self.on_rollback()
                        if conn.in_transaction:
                            conn.execute("ROLLBACK")
                        raise StorageError(f"committing a batch of writes to {self.url} failed: {exc}") from exc
                    finally:
                        self.bulk = None
                self.bulk = None

    def _abort_write(self, conn: sqlite3.Connection, what: str, exc: BaseException) -> None:
        """Roll back after ``exc`` ended a write; raise it as StorageError when it is a
        database or encoding error (the caller re-raises anything else)."""
        self.on_rollback()  # the memo may describe what was just rolled back
        rollback_error: sqlite3.Error | None = None
        undone = False
        if conn.in_transaction and self.bulk is not None:
            try:  # this write only: the batch's earlier writes stay
                conn.execute("ROLLBACK TO bulk_write")
                conn.execute("RELEASE bulk_write")
                undone = True
            except sqlite3.Error:
                pass  # the savepoint went with the transaction (SQLite rolled it back): whole below
        if conn.in_transaction and not undone:
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

    @contextmanager
    def read_transaction(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: one consistent snapshot across several SELECTs."""
        with self.lock:
            conn = self.connection()
            if self.bulk is not None and conn.in_transaction:
                yield conn  # inside a batch of bulk_writes: it sees the batch
                return
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
        if self.initialised:
            return True
        applied = self._applied(conn)
        if applied is None:
            return False
        self.initialised = True
        self.has_crc = "m002_record_crc" in applied
        self.has_blobs = "m013_blobs" in applied
        self.has_texts_tail = "m015_texts_tail" in applied
        self.has_tool_calls = "m018_tool_calls" in applied
        return True

    @contextmanager
    def busy_timeout(self, seconds: float | None) -> Iterator[None]:
        """Within the block, this connection waits at most ``seconds`` for another
        writer's lock (``None``: unchanged); the store's own timeout afterwards."""
        if seconds is None:
            yield
            return
        with self.lock:
            self.connection().execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")
            try:
                yield
            finally:
                self.connection().execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")

    def close(self) -> None:
        """Close the connection. Idempotent; later calls raise StorageError."""
        with self.lock:
            self.closed = True
            conn, self.conn = self.conn, None
            if conn is not None and os.getpid() == self._pid:
                conn.close()
            key, self._file_key = self._file_key, None
            if key is not None:
                with OPEN_FILES_LOCK:
                    left = OPEN_FILES.get(key, 0) - 1
                    if left > 0:
                        OPEN_FILES[key] = left
                    else:
                        OPEN_FILES.pop(key, None)


#: What :func:`urllib.parse.quote` leaves as it is (its default ``safe="/"``).
_URI_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/")


def _quote(path: str) -> str:
    """``urllib.parse.quote(path)``: each UTF-8 byte outside letters, digits, ``_.-~/`` as
    ``%XX`` (a path with lone surrogates raises UnicodeEncodeError, as quote does); written
    out so that a read-only open does not import :mod:`urllib.parse` (start-up)."""
    return "".join(chr(b) if b in _URI_SAFE else f"%{b:02X}" for b in path.encode("utf-8"))
