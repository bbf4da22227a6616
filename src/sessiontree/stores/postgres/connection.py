"""Connecting a PostgreSQL store to its database, and the transactions every part runs in.

:class:`PostgresDatabase` is the one handle a
:class:`~sessiontree.stores.postgres.store.PostgresStore` opens and hands to its parts
(:mod:`.reads`, :mod:`.writes`, :mod:`.ledger`, :mod:`.maintenance`, :mod:`.team`), which
use only its public members (docs/decisions/store-composition.md): it connects (a probe
connection, then the pool, which a forked process replaces), checks or migrates the
schema (the steps of :mod:`.schema`) under the advisory lock :data:`MIGRATION_LOCK`, and
owns the transactions (with their error mapping), the read snapshots and
:meth:`PostgresDatabase.close`. The store URL's parsing and :func:`redact_url` live here too.
"""

from __future__ import annotations

import logging
import os
import select
import threading
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

from sessiontree.errors import StorageError, StoreOpenError
from sessiontree.stores.origin import host_name
from sessiontree.stores.postgres.schema import MIGRATIONS
from sessiontree.stores.steps import check_known_steps
from sessiontree.stores.storable import id_in_use_error
from sessiontree.stores.transactions import Transactions

try:  # an optional extra: sessiontree[postgres]
    import psycopg
    import psycopg.errors
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg = None  # type: ignore[assignment]

# psycopg_pool tells its logger about each connection it drops or fails to open again
# ("discarding closed connection: <psycopg.Connection [BAD] ...>", "error connecting in
# 'sessiontree': ..."), while the store turns the same failure into one StorageError for
# the caller. With no logging configured, Python's last-resort handler would print those
# warnings on stderr before the user's one-line error; an application that configures
# logging still receives them (docs/postgres.md, "Connections, PgBouncer, faults").
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())

__all__ = [
    "DEFAULT_TIMEOUT",
    "MIGRATION_LOCK",
    "URL_OPTIONS",
    "PostgresDatabase",
    "error_first_line",
    "parse_threshold",
    "redact_url",
    "split_url",
    "step_names",
]

#: Key of the transaction-scoped advisory lock held while the schema is checked and
#: migrated (``pg_advisory_xact_lock``). A constant, so every sessiontree process
#: on any host takes the same lock: the bytes of "sessiontree" as a number.
MIGRATION_LOCK = int.from_bytes(b"sesstree", "big") & 0x7FFF_FFFF_FFFF_FFFF

#: Seconds to wait for a pooled connection (and for connecting) before ``StorageError``.
DEFAULT_TIMEOUT = 30.0

#: Query parameters of a store URL that are ours, not libpq's; removed before connecting.
URL_OPTIONS = ("prepare_threshold", "pool_size", "pool_timeout")


def redact_url(url: str) -> str:
    """``url`` without its password (in the authority or a ``password=`` parameter) and
    without our own options: what messages and ``store.url`` show."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}@{hostport}" if user else hostport
    query = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
             if k != "password" and k not in URL_OPTIONS]
    return _join(parts.scheme, netloc, parts.path, query)


def _join(scheme: str, netloc: str, path: str, query: list[tuple[str, str]]) -> str:
    # Not urlunsplit: it drops the empty authority of "postgresql:///db?host=/dir".
    encoded = urllib.parse.urlencode(query, safe="/")
    return f"{scheme}://{netloc}{path}" + (f"?{encoded}" if encoded else "")


def split_url(url: str) -> tuple[str, dict[str, str]]:
    """Split a store URL into ``(libpq_url, options)``: the URL libpq is given
    (``postgres://`` normalised to ``postgresql://``, the :data:`URL_OPTIONS` removed,
    the rest of the query kept in order) and ours as ``{name: text}``."""
    parts = urllib.parse.urlsplit(url)
    scheme = "postgresql"
    pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    ours = {k: v for k, v in pairs if k in URL_OPTIONS}
    theirs = [(k, v) for k, v in pairs if k not in URL_OPTIONS]
    return _join(scheme, parts.netloc, parts.path, theirs), ours


def parse_threshold(value: str) -> int | None:
    """The ``prepare_threshold`` URL option as psycopg takes it: ``None`` (never prepare)
    for ``""``, ``none``, ``null`` or ``off`` (any case), else the integer.

    Raises:
        ValueError: anything else that is not an integer.
    """
    if value.lower() in ("", "none", "null", "off"):
        return None
    return int(value)


#: What :meth:`_foreign_tables` lists: objects outside the system schemas that no
#: extension owns (``deptype 'e'`` in ``pg_depend``), in a stable order.
_FOREIGN_OBJECTS = """
WITH ns AS (
    SELECT oid, nspname FROM pg_namespace
    WHERE nspname NOT IN ('pg_catalog', 'information_schema')
      AND nspname NOT LIKE 'pg\\_toast%' AND nspname NOT LIKE 'pg\\_temp\\_%'
), objects AS (
    SELECT CASE c.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'table' WHEN 'v' THEN 'view'
                WHEN 'm' THEN 'materialized view' WHEN 'f' THEN 'foreign table'
                WHEN 'S' THEN 'sequence' ELSE 'type' END AS kind,
           ns.nspname AS schema, c.relname::text AS name, 'pg_class'::regclass AS classid, c.oid AS objid
    FROM pg_class c JOIN ns ON ns.oid = c.relnamespace
    WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S', 'c')
    UNION ALL
    SELECT 'function', ns.nspname, p.proname::text || '()', 'pg_proc'::regclass, p.oid
    FROM pg_proc p JOIN ns ON ns.oid = p.pronamespace
    UNION ALL
    SELECT 'type', ns.nspname, t.typname::text, 'pg_type'::regclass, t.oid
    FROM pg_type t JOIN ns ON ns.oid = t.typnamespace
    WHERE t.typtype IN ('d', 'e', 'r', 'm')
)
SELECT o.kind, o.schema, o.name FROM objects o
WHERE NOT EXISTS (SELECT 1 FROM pg_depend d
                  WHERE d.classid = o.classid AND d.objid = o.objid AND d.deptype = 'e')
ORDER BY o.schema, o.kind, o.name
"""


def step_names() -> list[str]:
    """The names of this version's schema steps (``m001_initial``, ...), in the order
    they run, read at call time from this module's ``MIGRATIONS``
    (:data:`sessiontree.stores.postgres.schema.MIGRATIONS`): every comparison of a database's
    steps with this version's goes through it, so they all agree with what the open runs."""
    return [name for name, _ in MIGRATIONS]


def _is_unique_violation(exc: BaseException, constraint: str) -> bool:
    diag = getattr(exc, "diag", None)
    return isinstance(exc, psycopg.errors.UniqueViolation) and getattr(diag, "constraint_name", None) == constraint


class PostgresDatabase:
    """The connection pool of a PostgreSQL store, its schema and its transactions: what
    the store's parts share (arguments and errors: :class:`~.store.PostgresStore`). It is
    a :class:`~sessiontree.stores.transactions.Transactions` (docs/architecture.md, "The
    store seam"); the parts use :meth:`transaction`, which also takes a snapshot flag and
    the session id whose duplicate entry ids a unique violation names.

    Attributes:
        url: the URL without password and without our parameters.
        conninfo: the URL libpq is given (with the password; never shown).
        readonly: whether the store was opened read-only.
        prepare_threshold, pool_size, timeout: as opened (see the store).
        sync_host: the host whose files the ledger's sync states and archive records are
            (``$SESSIONTREE_SYNC_HOST``, else the host name); settable.
        applied_steps: schema steps present in the database.

    Raises:
        StoreOpenError: the server cannot be reached or refuses us, the database holds
            objects we did not create, or its schema has a step this version does not know.
    """

    def __init__(self, url: str, *, create: bool, readonly: bool, prepare_threshold: int | str | None,
                 pool_size: int | None, timeout: float | None) -> None:
        self.conninfo, options = split_url(url)
        self.url = redact_url(url)
        self.readonly = bool(readonly)
        if prepare_threshold == "url":
            prepare_threshold = parse_threshold(options["prepare_threshold"]) if "prepare_threshold" in options else 5
        self.prepare_threshold = prepare_threshold
        self.pool_size = int(pool_size if pool_size is not None else options.get("pool_size", 4))
        self.timeout = float(timeout if timeout is not None else options.get("pool_timeout", DEFAULT_TIMEOUT))
        self._lock = threading.Lock()
        self._pool: Any = None
        self._pid = os.getpid()
        self._closed = False
        #: A connection of our own left idle by a run lock for the next (:meth:`own_connection`).
        self._spare: Any = None
        self._initialised = True
        self.sync_host: str = host_name()
        self.applied_steps: frozenset[str] = frozenset(step_names())
        try:
            probe = self.connect()
        except psycopg.Error as exc:
            raise StoreOpenError(f"cannot open {self.url}: {error_first_line(exc)}") from exc
        try:
            with probe:
                if self.readonly:
                    self._inspect(probe)
                else:
                    self._migrate(probe, create)
        except psycopg.Error as exc:
            raise StoreOpenError(f"cannot open {self.url}: {error_first_line(exc)}") from exc
        self._pool = self._new_pool()

    # -- connections -------------------------------------------------------------------------

    def _connect_kwargs(self) -> dict[str, Any]:
        return {"prepare_threshold": self.prepare_threshold, "autocommit": False}

    def connect(self) -> Any:
        """A new connection of its own, outside the pool (the open's probe, a run lock's
        long transaction); the caller closes it.

        Raises:
            psycopg.Error: the server cannot be reached or refuses us.
        """
        params: dict[str, Any] = psycopg.conninfo.conninfo_to_dict(self.conninfo)
        params.setdefault("connect_timeout", str(max(1, int(self.timeout))))
        params.setdefault("application_name", "sessiontree")
        return psycopg.connect(**params, **self._connect_kwargs())

    def _new_pool(self) -> Any:
        params: dict[str, Any] = psycopg.conninfo.conninfo_to_dict(self.conninfo)
        params.setdefault("connect_timeout", str(max(1, int(self.timeout))))
        params.setdefault("application_name", "sessiontree")
        # check: a pooled connection is tested before it is handed out, so a server
        # restart between two calls costs one reconnect instead of a failed call.
        return ConnectionPool(psycopg.conninfo.make_conninfo(**params), min_size=1, max_size=self.pool_size,
                              kwargs=self._connect_kwargs(), timeout=self.timeout, open=True,
                              check=_check_connection, reconnect_timeout=max(self.timeout, 1.0),
                              name="sessiontree")

    def pool(self) -> Any:
        """This process's connection pool (a forked process starts its own).

        Raises:
            StorageError: the store is closed.
        """
        with self._lock:
            if self._closed:
                raise StorageError(f"{self.url} is closed")
            if os.getpid() != self._pid:
                # A pool (its sockets and threads) must not cross fork(): leave the
                # parent's alone and start our own.
                self._pool = self._new_pool()
                self._pid = os.getpid()
            return self._pool

    @contextmanager
    def transaction(self, what: str, *, write: bool, snapshot: bool = False,
                     session_id: str | None = None) -> Iterator[Any]:
        """One transaction on a pooled connection; database and connection errors become
        ``StorageError`` and everything rolls back.

        Writes run in pipeline mode: statements whose results are not read are
        sent without waiting, and the server's answers (errors included) arrive
        at the next read or at ``COMMIT``, so an append costs three round trips
        whatever its size. A unique violation of an entry id, wherever it
        surfaces, is :func:`id_in_use_error` for ``session_id``.

        ``snapshot``: ``REPEATABLE READ``, so several statements see one snapshot
        (reads only; writers stay ``READ COMMITTED`` and serialize with row locks)."""
        if write and self.readonly:
            raise StorageError(f"{what}: {self.url} is opened read-only")
        pool = self.pool()
        characteristics = ", ".join(filter(None, ["ISOLATION LEVEL REPEATABLE READ" if snapshot else "",
                                                  "READ ONLY" if self.readonly or snapshot else ""]))
        try:
            with pool.connection() as conn, (conn.pipeline() if write else nullcontext()), conn.transaction():
                if characteristics:
                    conn.execute("SET TRANSACTION " + characteristics)
                if write and not self._initialised and not self.has_schema(conn):
                    raise StorageError(
                        f"{what}: {self.url} is an empty database not initialised as a sessiontree store; "
                        "open it with create=True (as sessiontree import does) to initialise it")
                yield conn
        except psycopg.errors.UniqueViolation as exc:
            if session_id is not None and _is_unique_violation(exc, "entries_session_id_id_key"):
                raise id_in_use_error(session_id) from exc
            raise StorageError(f"{what} failed on {self.url}: {error_first_line(exc)}") from exc
        except PoolTimeout as exc:
            raise StorageError(f"{what} failed on {self.url}: no connection within {self.timeout:g} s "
                               f"({error_first_line(exc)})") from exc
        except psycopg.Error as exc:
            raise StorageError(f"{what} failed on {self.url}: {error_first_line(exc)}") from exc

    # -- schema -------------------------------------------------------------------------------

    @staticmethod
    def _applied(conn: Any) -> list[str] | None:
        """Our recorded steps in order, or ``None`` when the schema has no
        ``schema_migrations`` table of ours (none, or another program's)."""
        columns = {row[0] for row in conn.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = 'schema_migrations'")}
        if not {"name", "applied_at"} <= columns:
            return None
        names = [row[0] for row in conn.execute("SELECT name FROM schema_migrations ORDER BY name")]
        return names if MIGRATIONS[0][0] in names else None

    @staticmethod
    def _foreign_tables(conn: Any) -> list[str]:
        """Every object of the database sessiontree did not create, as ``kind schema.name``
        (docs/postgres.md): tables, views, sequences, composite types, functions and
        procedures, domains, enums and ranges in any schema but the system ones.
        Objects an extension owns are not counted (``pg_trgm``, which our schema
        creates itself, or one installed in the template database)."""
        return [f"{row[0]} {row[1]}.{row[2]}" for row in conn.execute(_FOREIGN_OBJECTS)]

    def _refuse_unknown(self, applied: Sequence[str]) -> None:
        check_known_steps(self.url, applied, step_names())

    def _refuse_foreign(self, tables: Sequence[str]) -> None:
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        raise StoreOpenError(f"cannot open {self.url}: the database holds another application's objects "
                             f"({shown}) and no sessiontree schema; nothing was changed")

    def _inspect(self, conn: Any) -> None:
        """Read-only open: note whether our schema is there; refuse another's or a newer one."""
        with conn.transaction():
            applied = self._applied(conn)
            if applied is None:
                tables = self._foreign_tables(conn)
                if tables:
                    self._refuse_foreign(tables)
                self._initialised = False
                return
            self._refuse_unknown(applied)
            # An older schema is read as it is (a read-only open cannot migrate):
            # what later steps add (derived indexes) is then computed without them.
            self.applied_steps = frozenset(applied)

    def _migrate(self, conn: Any, create: bool) -> None:
        """Bring the schema up to date in one transaction, under the advisory lock."""
        known = step_names()
        with conn.transaction():
            applied = self._applied(conn)
            if applied == known:
                return  # the common case: no lock, nothing written
        with conn.transaction():
            # Transaction-scoped: released by COMMIT/ROLLBACK, works through PgBouncer,
            # and a crashed process cannot leave it held.
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            applied = self._applied(conn)  # again: another process may have done it meanwhile
            if applied is None:
                tables = self._foreign_tables(conn)
                if tables:
                    self._refuse_foreign(tables)
                if not create:
                    self._initialised = False  # create=False on an empty database: leave it as it is
                    return
                conn.execute("CREATE TABLE schema_migrations ("
                             " name text PRIMARY KEY,"  # the step's function name, e.g. m001_initial
                             " applied_at timestamptz NOT NULL DEFAULT now())")  # for diagnosis
                applied = []
            self._refuse_unknown(applied)
            for name, step in MIGRATIONS:
                if name not in applied:
                    step(conn)
                    conn.execute("INSERT INTO schema_migrations (name) VALUES (%s)", (name,))

    def has_schema(self, conn: Any) -> bool:
        """Whether the database holds our schema (an empty one opened with
        ``create=False`` holds none, unless another process initialised it since)."""
        if self._initialised:
            return True
        applied = self._applied(conn)
        if applied is None:
            return False
        self._refuse_unknown(applied)
        if not self.readonly and [name for name in step_names() if name not in applied]:
            return False  # initialised meanwhile by an older version: reopen to migrate
        self.applied_steps = frozenset(applied)
        self._initialised = True
        return True

    def applied_migrations(self) -> list[str]:
        """Names of the schema steps recorded in this database, in order."""
        with self.transaction("reading the schema", write=False) as conn:
            return self._applied(conn) or []

    def read_transaction(self) -> AbstractContextManager[Any]:
        """A read snapshot (:meth:`read_snapshot`): the
        :class:`~sessiontree.stores.transactions.Transactions` protocol's read."""
        return self.read_snapshot("read")

    def write_transaction(self, what: str) -> AbstractContextManager[Any]:
        """One write transaction (:meth:`transaction` with ``write=True``): the
        :class:`~sessiontree.stores.transactions.Transactions` protocol's write.

        Raises:
            StorageError: read-only, or the write failed (``what`` names it).
        """
        return self.transaction(what, write=True)

    def read_snapshot(self, what: str) -> AbstractContextManager[Any]:
        """A ``REPEATABLE READ``, read-only transaction on a pooled connection: several
        statements see one snapshot (what the index modules read in).

        Raises:
            StorageError: the database could not be read (``what`` names the read).
        """
        return self.transaction(what, write=False, snapshot=True)

    def own_connection(self) -> Any:
        """A connection of its own (as :meth:`connect`), the one :meth:`keep_connection`
        kept when it is still sound (the pool's test), else a new one.

        Raises:
            psycopg.Error: the server cannot be reached or refuses us.
        """
        with self._lock:
            spare, self._spare = self._spare, None
            mine = os.getpid() == self._pid
        if spare is not None and mine:
            try:
                _check_connection(spare)
                return spare
            except Exception:  # any failure: a new connection instead
                spare.close()
        return self.connect()

    def keep_connection(self, conn: Any) -> None:
        """Keep ``conn`` (idle, outside a transaction) for the next :meth:`own_connection`
        of this process, closing the one kept before; closed at once if the store is."""
        with self._lock:
            if self._closed or os.getpid() != self._pid:
                spare = conn
            else:
                spare, self._spare = self._spare, conn
        if spare is not None:
            spare.close()

    def close(self) -> None:
        """Close the pool (its connections and threads) and the connection kept by
        :meth:`keep_connection`. Idempotent; later calls raise StorageError."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
            spare, self._spare = self._spare, None
        if spare is not None and os.getpid() == self._pid:
            spare.close()
        if pool is not None and os.getpid() == self._pid:
            pool.close()


def _check_connection(conn: Any) -> None:
    """The pool's test of a connection before handing it out, without a round trip in
    the common case.

    An idle connection has nothing to read. When its socket is readable the server has
    closed it (restart, ``pg_terminate_backend``, idle timeout) or sent a notice; only
    then does a round trip decide, and a dead connection raises, so the pool replaces
    it. A server restart between two calls thus costs a reconnect, not a failed call.
    """
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("connection closed")
    readable, _, _ = select.select([conn.fileno()], [], [], 0)
    if readable:
        ConnectionPool.check_connection(conn)


def error_first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (its class name when empty): what the
    ``StorageError`` and ``StoreOpenError`` messages quote of a psycopg error."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


if TYPE_CHECKING:  # mypy checks that the handle is the parts' transactions protocol
    _HANDLE: type[Transactions[Any]] = PostgresDatabase
