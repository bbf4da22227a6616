"""``PostgresStore``: sessions of a team or a fleet of agents in one PostgreSQL database.

The same schema ideas as :mod:`sessiontree.stores.sqlite` (docs/postgres.md):

* **Entries are the truth; everything else is derived.** ``entries.json`` holds
  each record's JSON text byte for byte (``bytea``, so lone-surrogate escapes
  and invalid UTF-8 survive), ``sessions.header_json`` the header's, each with
  the CRC-32 recorded when it was written. The listing state (one
  :class:`~sessiontree.core.listing.InfoAccumulator` state per session), the listing
  text, and the derived indexes (:data:`DERIVED_INDEXES`) are recomputed
  from them by :meth:`PostgresStore.reindex`.
* **One mutation, one transaction.** Every write runs in one transaction on a
  pooled connection; any error rolls it back and is raised as a typed error
  (``StorageError`` for the database or the connection), so nothing of a
  failed call is visible.
* **Appends serialize per session, not per store.** An append locks its
  session's row (``SELECT ... FOR UPDATE``), so two hosts appending to one
  session take turns while appends to other sessions run in parallel. The
  position of an entry (``seq``) is computed under that lock; entry ids are
  unique per session by a ``UNIQUE (session_id, id)`` constraint, enforced by
  the server whatever the client does.
* **Schema steps are numbered and recorded** in ``schema_migrations``, applied
  by the store at open in one transaction under a transaction-scoped advisory
  lock (:data:`MIGRATION_LOCK`): processes opening a new database at once wait
  for each other and the later ones find nothing left to do. A database with
  other tables and no ``schema_migrations`` of ours, or one with a step this
  code does not know, raises ``StoreOpenError`` and is not changed.
* **Works behind PgBouncer in transaction mode.** Nothing depends on session
  state: no ``SET`` outside a transaction, advisory locks are transaction-scoped,
  and prepared statements can be switched off (``prepare_threshold=None``).

Strings PostgreSQL ``text`` cannot hold (NUL, lone surrogates) occur only in
copied columns (cwd, name, entry type, ...) and are replaced there by U+FFFD;
the exact values live in the stored records and in the listing state, which
are ``bytea``. Session and entry ids must be representable exactly, because
the database enforces their uniqueness: an id holding NUL or a lone
surrogate is refused with ``InvalidSessionError``.
"""

from __future__ import annotations

import functools
import os
import select
import socket
import threading
import time
import urllib.parse
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from sessiontree.core.listing import InfoAccumulator
from sessiontree.core.usagerecords import UsageQuery, UsageRows, aggregate
from sessiontree.errors import (
    CorruptEntryError,
    InvalidSessionError,
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
    StoreProblem,
    SyncChange,
    SyncState,
)
from sessiontree.stores.postgres import search as search_index
from sessiontree.stores.postgres.derived import (
    DerivedIndex,
    header_columns,
    info_from_listing,
    is_exact_text,
    listing_values,
    record_crc,
    text_copy,
)
from sessiontree.stores.postgres.schema import DERIVED_INDEXES, MIGRATIONS
from sessiontree.stores.postgres.usage import query_usage
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
from sessiontree.stores.verify import StoredRecord, StoredSession, verify_stored_session

try:  # an optional extra: sessiontree[postgres]
    import psycopg
    import psycopg.errors
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg = None  # type: ignore[assignment]

__all__ = [
    "DEFAULT_TIMEOUT",
    "DERIVED_INDEXES",
    "MIGRATIONS",
    "MIGRATION_LOCK",
    "SYNC_LOCK",
    "URL_OPTIONS",
    "DerivedIndex",
    "PostgresStore",
    "redact_url",
]

#: Seconds to wait for a pooled connection (and for connecting) before ``StorageError``.
DEFAULT_TIMEOUT = 30.0

#: Key of the transaction-scoped advisory lock held while the schema is checked and
#: migrated (``pg_advisory_xact_lock``). A constant, so every sessiontree process
#: on any host takes the same lock: the bytes of "sessiontree" as a number.
MIGRATION_LOCK = int.from_bytes(b"sesstree", "big") & 0x7FFF_FFFF_FFFF_FFFF

#: Query parameters of a store URL that are ours, not libpq's; removed before connecting.
URL_OPTIONS = ("prepare_threshold", "pool_size", "pool_timeout")

# -- values -----------------------------------------------------------------------------------


def _key(value: str, what: str) -> str:
    """An id as stored; ids must be exact since the database compares them.

    Raises:
        InvalidSessionError: the id holds NUL or a lone surrogate."""
    if not is_exact_text(value):
        raise InvalidSessionError(f"{what} {value!r} cannot be stored in PostgreSQL "
                                  "(it holds NUL or a lone surrogate)")
    return value


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


def _split_url(url: str) -> tuple[str, dict[str, str]]:
    """The libpq URL (``postgres://`` normalised, our options removed) and our options."""
    parts = urllib.parse.urlsplit(url)
    scheme = "postgresql"
    pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    ours = {k: v for k, v in pairs if k in URL_OPTIONS}
    theirs = [(k, v) for k, v in pairs if k not in URL_OPTIONS]
    return _join(scheme, parts.netloc, parts.path, theirs), ours


def _parse_threshold(value: str) -> int | None:
    if value.lower() in ("", "none", "null", "off"):
        return None
    return int(value)


def _is_unique_violation(exc: BaseException, constraint: str) -> bool:
    diag = getattr(exc, "diag", None)
    return isinstance(exc, psycopg.errors.UniqueViolation) and getattr(diag, "constraint_name", None) == constraint


class PostgresStore(StoreBase):
    """A :class:`~sessiontree.stores.base.SessionStore` in a PostgreSQL database (docs/postgres.md).

    Args:
        url: ``postgresql://[user[:password]@][host][:port][/dbname][?param=value&...]`` as
            libpq takes it (``postgres://`` too), including unix-socket hosts
            (``postgresql:///db?host=/run/postgresql``). Our own parameters,
            removed before connecting: ``prepare_threshold`` (an integer, or
            ``none``), ``pool_size``, ``pool_timeout`` (seconds).
        create: ``True`` (default): an empty database is given our schema.
            ``False``: it is left as it is (lists nothing; writes raise
            ``StorageError``). Either way an older schema of ours is migrated
            unless ``readonly``.
        readonly: never create, migrate or write (each read runs in a
            ``READ ONLY`` transaction; writes raise ``StorageError``); an older
            schema is read as it is.
        prepare_threshold: psycopg's: after how many runs a statement is
            prepared on the server (default 5); ``None`` never prepares, as
            PgBouncer in transaction mode (before 1.21) requires. Overrides the URL's.
        pool_size: most connections this store object holds (default 4).
        timeout: seconds to wait for a connection (connecting, or a free pooled
            one) before ``StorageError`` (``StoreOpenError`` while opening).

    Attributes:
        url: the URL without password and without our parameters.
        kind: ``"postgres"``.
        readonly: whether the store was opened read-only.
        sync_host: the host whose files :meth:`sync_states` and :meth:`sync_commit`
            record (``$SESSIONTREE_SYNC_HOST``, else :func:`socket.gethostname`).

    Raises:
        StoreOpenError: psycopg is missing, the server cannot be reached or
            refuses us, the database holds another application's tables, or its
            schema has a step this version does not know.
    """

    kind = "postgres"
    #: read_skeleton and read_entries answer from columns and the (session_id, id) index.
    partial_reads = True

    def __init__(self, url: str, *, create: bool = True, readonly: bool = False,
                 prepare_threshold: int | str | None = "url", pool_size: int | None = None,
                 timeout: float | None = None) -> None:
        if psycopg is None:
            raise StoreOpenError("PostgreSQL stores need psycopg 3 and psycopg_pool: "
                                 "pip install 'sessiontree[postgres]'")
        self._conninfo, options = _split_url(url)
        self.url = redact_url(url)
        self.readonly = bool(readonly)
        if prepare_threshold == "url":
            prepare_threshold = _parse_threshold(options["prepare_threshold"]) if "prepare_threshold" in options else 5
        self.prepare_threshold = prepare_threshold
        self.pool_size = int(pool_size if pool_size is not None else options.get("pool_size", 4))
        self.timeout = float(timeout if timeout is not None else options.get("pool_timeout", DEFAULT_TIMEOUT))
        self._lock = threading.Lock()
        self._pool: Any = None
        self._pid = os.getpid()
        self._closed = False
        self._initialised = True
        #: Which host's files the sync states are (``SESSIONTREE_SYNC_HOST``, else the host name).
        self.sync_host: str = text_copy(os.environ.get("SESSIONTREE_SYNC_HOST") or socket.gethostname()) or "localhost"
        #: Schema steps present in the database when it was opened.
        self.applied_steps: frozenset[str] = frozenset(name for name, _ in MIGRATIONS)
        try:
            probe = self._connect()
        except psycopg.Error as exc:
            raise StoreOpenError(f"cannot open {self.url}: {_first_line(exc)}") from exc
        try:
            with probe:
                if self.readonly:
                    self._inspect(probe)
                else:
                    self._migrate(probe, create)
        except psycopg.Error as exc:
            raise StoreOpenError(f"cannot open {self.url}: {_first_line(exc)}") from exc
        self._pool = self._new_pool()

    # -- connections -------------------------------------------------------------------------

    def _connect_kwargs(self) -> dict[str, Any]:
        return {"prepare_threshold": self.prepare_threshold, "autocommit": False}

    def _connect(self) -> Any:
        params: dict[str, Any] = psycopg.conninfo.conninfo_to_dict(self._conninfo)
        params.setdefault("connect_timeout", str(max(1, int(self.timeout))))
        params.setdefault("application_name", "sessiontree")
        return psycopg.connect(**params, **self._connect_kwargs())

    def _new_pool(self) -> Any:
        params: dict[str, Any] = psycopg.conninfo.conninfo_to_dict(self._conninfo)
        params.setdefault("connect_timeout", str(max(1, int(self.timeout))))
        params.setdefault("application_name", "sessiontree")
        # check: a pooled connection is tested before it is handed out, so a server
        # restart between two calls costs one reconnect instead of a failed call.
        return ConnectionPool(psycopg.conninfo.make_conninfo(**params), min_size=1, max_size=self.pool_size,
                              kwargs=self._connect_kwargs(), timeout=self.timeout, open=True,
                              check=_check_connection, reconnect_timeout=max(self.timeout, 1.0),
                              name="sessiontree")

    def _get_pool(self) -> Any:
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
    def _transaction(self, what: str, *, write: bool, snapshot: bool = False,
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
        pool = self._get_pool()
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
            raise StorageError(f"{what} failed on {self.url}: {_first_line(exc)}") from exc
        except PoolTimeout as exc:
            raise StorageError(f"{what} failed on {self.url}: no connection within {self.timeout:g} s "
                               f"({_first_line(exc)})") from exc
        except psycopg.Error as exc:
            raise StorageError(f"{what} failed on {self.url}: {_first_line(exc)}") from exc

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
        return [row[0] for row in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'v', 'm', 'p', 'f')"
            " ORDER BY c.relname")]

    def _refuse_unknown(self, applied: Sequence[str]) -> None:
        known = [name for name, _ in MIGRATIONS]
        unknown = [name for name in applied if name not in known]
        if unknown:
            raise StoreOpenError(
                f"cannot open {self.url}: its schema has steps this version does not know "
                f"({', '.join(unknown)}); it was written by a newer sessiontree")

    def _refuse_foreign(self, tables: Sequence[str]) -> None:
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        raise StoreOpenError(f"cannot open {self.url}: the database holds another application's tables "
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
        known = [name for name, _ in MIGRATIONS]
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
        if not self.readonly and [name for name, _ in MIGRATIONS if name not in applied]:
            return False  # initialised meanwhile by an older version: reopen to migrate
        self.applied_steps = frozenset(applied)
        self._initialised = True
        return True

    def applied_migrations(self) -> list[str]:
        """Names of the schema steps recorded in this database, in order."""
        with self._transaction("reading the schema", write=False) as conn:
            return self._applied(conn) or []

    def read_snapshot(self, what: str) -> AbstractContextManager[Any]:
        """A ``REPEATABLE READ``, read-only transaction on a pooled connection: several
        statements see one snapshot (what the index modules read in).

        Raises:
            StorageError: the database could not be read (``what`` names the read).
        """
        return self._transaction(what, write=False, snapshot=True)

    # -- writes -------------------------------------------------------------------------------

    def create(self, header: dict[str, Any], entries: Sequence[dict[str, Any]] = (),
               raw: Sequence[bytes | None] | None = None, *, path: str | None = None) -> None:
        """Store a new session in one transaction (``path`` is ignored).

        Raises:
            SessionExistsError: the id is already stored.
            InvalidSessionError: the header or an entry is not valid format 4,
                or an id PostgreSQL text cannot hold exactly.
            StorageError: the write failed; nothing was stored.
        """
        self.create_many([(header, entries, raw)])

    def create_many(self, sessions: Iterable[tuple[dict[str, Any], Sequence[dict[str, Any]],
                                                   Sequence[bytes | None] | None]]) -> int:
        """Store several new sessions in a single transaction (bulk import, sync).

        Args:
            sessions: ``(header, entries, raw)`` triples as for :meth:`create`.

        Returns:
            The number of sessions stored.

        Raises:
            SessionExistsError, InvalidSessionError, StorageError: as :meth:`create`;
                nothing is stored.
        """
        prepared = []
        seen: set[str] = set()
        for header, entries, raw in sessions:
            session_id = _key(check_header(header), "session id")
            if session_id in seen:
                raise SessionExistsError(session_id)
            seen.add(session_id)
            texts = encode_entries(entries, raw)
            for entry in entries:
                _key(entry["id"], "entry id")
            prepared.append((session_id, header, jsonio.dumps(header), entries, texts))
        with self._transaction("create", write=True, session_id=prepared[0][0] if prepared else None) as conn:
            for session_id, header, header_raw, entries, texts in prepared:
                self._create_in(conn, session_id, header, header_raw, entries, texts)
        return len(prepared)

    def _create_in(self, conn: Any, session_id: str, header: dict[str, Any], header_raw: bytes,
                   entries: Sequence[dict[str, Any]], texts: list[bytes]) -> None:
        """The body of :meth:`create`, inside the caller's transaction.

        Raises:
            SessionExistsError: the id is already stored (also when another host
                created it a moment ago)."""
        info = InfoAccumulator()
        inserted = conn.execute(
            "INSERT INTO sessions (id, header_json, header_crc, created_at, cwd, parent_session_id,"
            " classified, updated_at, write_seq, listing)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, nextval('sessions_write_seq_counter'), %s)"
            " ON CONFLICT (id) DO NOTHING RETURNING 1",
            (session_id, header_raw, record_crc(header_raw), *header_columns(header),
             time.time_ns() // 1000, listing_values(info)[0])).fetchone()
        if inserted is None:
            raise SessionExistsError(session_id)
        self._insert_entries(conn, session_id, 0, entries, texts, info)
        conn.execute("UPDATE sessions SET entry_count = %s, listing = %s, message_count = %s,"
                     " modified_ms = %s, name = %s WHERE id = %s",
                     (len(texts), *listing_values(info), session_id))

    def append(self, session_id: str, entries: Sequence[dict[str, Any]],
               raw: Sequence[bytes | None] | None = None) -> None:
        """Append entries in one transaction, holding the session's row lock.

        Args:
            session_id: the session.
            entries: entries in order.
            raw: optional stored JSON text per entry (``None`` items are serialized),
                so entries read from a file keep their exact bytes (``sync``).

        Raises:
            SessionNotFoundError: no such id.
            InvalidSessionError: an entry is invalid, reuses an id of the session, or
                has an id PostgreSQL text cannot hold exactly.
            StorageError: the write failed (or the connection was lost); nothing was appended.
        """
        texts = encode_entries(entries, raw)
        if not is_exact_text(session_id):
            raise SessionNotFoundError(session_id, self.url)
        for entry in entries:
            _key(entry["id"], "entry id")
        with self._transaction("append", write=True, session_id=session_id) as conn:
            self._append_in(conn, session_id, entries, texts)

    def _append_in(self, conn: Any, session_id: str, entries: Sequence[dict[str, Any]], texts: list[bytes]) -> None:
        """The body of :meth:`append`, inside the caller's transaction."""
        # FOR UPDATE: appends to one session take turns (across hosts), so seq is
        # computed from a count nobody else is changing; other sessions are not blocked.
        row = conn.execute("SELECT entry_count, listing FROM sessions WHERE id = %s FOR UPDATE",
                           (session_id,)).fetchone()
        if row is None:
            raise SessionNotFoundError(session_id, self.url)
        if not texts:
            return
        info = info_from_listing(row[1])
        self._insert_entries(conn, session_id, row[0], entries, texts, info)
        conn.execute(
            "UPDATE sessions SET entry_count = %s, updated_at = %s,"
            " write_seq = nextval('sessions_write_seq_counter'), listing = %s, message_count = %s,"
            " modified_ms = %s, name = %s WHERE id = %s",
            (row[0] + len(texts), time.time_ns() // 1000, *listing_values(info), session_id))

    def replace_session(self, header: dict[str, Any], entries: Sequence[dict[str, Any]],
                        raw: Sequence[bytes | None] | None = None) -> None:
        """Replace a session's header and all its entries in one transaction (``sync --replace``):
        a reader sees the old session or the new one, never a mix.

        The session keeps its place in insertion order (its ``sessions`` row is
        updated, not recreated); ``updated_at`` and ``write_seq`` move on, and its
        derived data is rebuilt from the new entries in the same transaction.

        Raises:
            SessionNotFoundError: no session has ``header["id"]``.
            InvalidSessionError: the header or an entry is invalid, two entries share an
                id, or an id PostgreSQL text cannot hold exactly.
            StorageError: the write failed; the session is as it was.
        """
        session_id = check_header(header)
        texts = encode_entries(entries, raw)
        for entry in entries:
            _key(entry["id"], "entry id")
        if not is_exact_text(session_id):
            raise SessionNotFoundError(session_id, self.url)
        with self._transaction("replace session", write=True, session_id=session_id) as conn:
            self._replace_in(conn, session_id, header, entries, texts)

    def _replace_in(self, conn: Any, session_id: str, header: dict[str, Any], entries: Sequence[dict[str, Any]],
                    texts: list[bytes]) -> None:
        """The body of :meth:`replace_session`, inside the caller's transaction (row-locked)."""
        if conn.execute("SELECT 1 FROM sessions WHERE id = %s FOR UPDATE", (session_id,)).fetchone() is None:
            raise SessionNotFoundError(session_id, self.url)
        for index in DERIVED_INDEXES:
            index.remove(conn, session_id)
        conn.execute("DELETE FROM message_texts WHERE session_id = %s", (session_id,))
        conn.execute("DELETE FROM entries WHERE session_id = %s", (session_id,))
        info = InfoAccumulator()
        self._insert_entries(conn, session_id, 0, entries, texts, info)
        header_raw = jsonio.dumps(header)
        conn.execute(
            "UPDATE sessions SET header_json = %s, header_crc = %s, created_at = %s, cwd = %s,"
            " parent_session_id = %s, classified = %s, updated_at = %s,"
            " write_seq = nextval('sessions_write_seq_counter'), entry_count = %s, listing = %s,"
            " message_count = %s, modified_ms = %s, name = %s WHERE id = %s",
            (header_raw, record_crc(header_raw), *header_columns(header), time.time_ns() // 1000, len(texts),
             *listing_values(info), session_id))

    # -- sync state ---------------------------------------------------------------------------

    def sync_states(self) -> dict[str, SyncState]:
        """Every :class:`~sessiontree.stores.base.SyncState` recorded by this host
        (:attr:`sync_host`), by source path (one query; ``{}`` before the first sync, on an empty database, or on an older schema
        opened read-only).

        Raises:
            StorageError: the database could not be read.
        """
        with self._transaction("reading sync states", write=False) as conn:
            if not self.has_schema(conn) or "m002_sync_state" not in self.applied_steps:
                return {}
            with conn.cursor(binary=True) as cur:
                rows = cur.execute(f"SELECT {_SYNC_SQL} FROM sync_state WHERE host = %s",
                                   (self.sync_host,)).fetchall()
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
        _key(change.session_id, "session id")
        for entry in change.entries:
            _key(entry["id"], "entry id")
        path = state.path.encode("utf-8", "surrogatepass")
        with self._transaction("sync", write=True, session_id=change.session_id) as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)",
                         (SYNC_LOCK, _lock_key(self.sync_host.encode("utf-8", "surrogatepass") + b"\0" + path)))
            with conn.cursor(binary=True) as cur:
                row = cur.execute(f"SELECT {_SYNC_SQL} FROM sync_state WHERE host = %s AND path = %s",
                                  (self.sync_host, path)).fetchone()
            if not sync_expected(expect, _sync_state(row) if row is not None else None):
                raise SyncConflictError(state.path)
            if change.kind == "create" and header is not None:
                self._create_in(conn, change.session_id, header, jsonio.dumps(header), change.entries, texts)
            elif change.kind == "append":
                self._append_in(conn, change.session_id, change.entries, texts)
            elif change.kind == "replace" and header is not None:
                self._replace_in(conn, change.session_id, header, change.entries, texts)
            values = (self.sync_host, path, _key(state.session_id, "session id"), state.size, state.mtime_ns, state.inode,
                      state.dev, state.consumed, state.lines, state.entries, state.version,
                      bytes(state.header_hash), bytes(state.tail_hash))
            conn.execute(
                f"INSERT INTO sync_state (host, {_SYNC_SQL}) VALUES ({', '.join(['%s'] * len(values))})"
                " ON CONFLICT (host, path) DO UPDATE SET "
                + ", ".join(f"{name} = excluded.{name}" for name in _SYNC_COLUMNS[1:]), values)

    def _insert_entries(self, conn: Any, session_id: str, start: int, entries: Sequence[dict[str, Any]],
                        texts: list[bytes], info: InfoAccumulator) -> None:
        rows = []
        text_rows = []
        for offset, (entry, text) in enumerate(zip(entries, texts, strict=False)):
            seq = start + offset
            listed = info.add(entry)
            if listed is not None:
                text_rows.append((session_id, seq, listed.encode("utf-8", "surrogatepass")))
            rows.append((session_id, seq, entry["id"], text_copy(entry["parentId"]), text_copy(entry["type"]),
                         text_copy(entry["timestamp"]), text, zlib.crc32(text)))
        info.texts.clear()  # they are in message_texts rows
        # A duplicate id violates UNIQUE (session_id, id); the error arrives at the next
        # sync and _transaction names it. No savepoint: the whole write rolls back anyway.
        _insert_entry_rows(conn, rows)
        if text_rows:
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO message_texts (session_id, seq, text) VALUES (%s, %s, %s)", text_rows)
        if DERIVED_INDEXES:
            indexed = [(start + offset, entry, text)
                       for offset, (entry, text) in enumerate(zip(entries, texts, strict=True))]
            for index in DERIVED_INDEXES:
                index.add(conn, session_id, indexed)

    def replace_header(self, session_id: str, header: dict[str, Any]) -> None:
        """Replace the header (same id) and its copied columns in one transaction.

        Raises:
            SessionNotFoundError: no such id.
            InvalidSessionError: the header is invalid or has another id.
            StorageError: the write failed; nothing changed.
        """
        check_replacement_header(session_id, header)
        if not is_exact_text(session_id):
            raise SessionNotFoundError(session_id, self.url)
        header_raw = jsonio.dumps(header)
        with self._transaction("replace header", write=True) as conn:
            # RETURNING, not rowcount: in pipeline mode the count is known only after a sync.
            found = conn.execute(
                "UPDATE sessions SET header_json = %s, header_crc = %s, created_at = %s, cwd = %s,"
                " parent_session_id = %s, classified = %s, updated_at = %s,"
                " write_seq = nextval('sessions_write_seq_counter') WHERE id = %s RETURNING 1",
                (header_raw, record_crc(header_raw), *header_columns(header), time.time_ns() // 1000,
                 session_id)).fetchone()
            if found is None:
                raise SessionNotFoundError(session_id, self.url)

    def delete(self, session_id: str) -> None:
        """Delete the session's rows in one transaction; a missing id does nothing.

        Raises:
            StorageError: the delete failed; nothing changed.
        """
        if not is_exact_text(session_id):
            return
        with self._transaction("delete", write=True) as conn:
            for index in DERIVED_INDEXES:
                index.remove(conn, session_id)
            conn.execute("DELETE FROM message_texts WHERE session_id = %s", (session_id,))
            conn.execute("DELETE FROM entries WHERE session_id = %s", (session_id,))
            conn.execute("DELETE FROM sessions WHERE id = %s", (session_id,))

    def reindex(self, session_id: str | None = None) -> int:
        """Recompute all derived data from the entries: the listing state and its SQL
        copies, ``message_texts``, the header copies and every :data:`DERIVED_INDEXES` table.

        ``updated_at`` and ``write_seq`` are kept: a repair is not activity. One
        transaction: a failure changes nothing.

        Args:
            session_id: one session, or ``None`` for all.

        Returns:
            The number of sessions rebuilt.

        Raises:
            InvalidSessionError: a stored record is not valid JSON.
            StorageError: the write failed; nothing changed.
        """
        if session_id is not None and not is_exact_text(session_id):
            return 0
        if session_id is None:
            self._prepare_derived()
        with self._transaction("reindex", write=True) as conn:
            if session_id is None:
                ids = [row[0] for row in conn.execute("SELECT id FROM sessions ORDER BY rowno FOR UPDATE")]
            else:
                ids = [row[0] for row in conn.execute("SELECT id FROM sessions WHERE id = %s FOR UPDATE",
                                                      (session_id,))]
            for sid in ids:
                header_raw = conn.execute("SELECT header_json FROM sessions WHERE id = %s", (sid,)).fetchone()[0]
                header = self._parse_record(header_raw, sid, 1)
                info = InfoAccumulator()
                text_rows = []
                rows: list[tuple[int, dict[str, Any], bytes]] = []
                with conn.cursor(binary=True) as cur:
                    for seq, text in cur.execute("SELECT seq, json FROM entries WHERE session_id = %s ORDER BY seq",
                                                 (sid,)).fetchall():
                        entry = self._parse_record(text, sid, seq + 2)
                        listed = info.add(entry)
                        if listed is not None:
                            text_rows.append((sid, seq, listed.encode("utf-8", "surrogatepass")))
                        rows.append((seq, entry, bytes(text)))
                info.texts.clear()
                conn.execute("DELETE FROM message_texts WHERE session_id = %s", (sid,))
                if text_rows:
                    with conn.cursor() as cur:
                        cur.executemany("INSERT INTO message_texts (session_id, seq, text) VALUES (%s, %s, %s)",
                                        text_rows)
                conn.execute(
                    "UPDATE sessions SET created_at = %s, cwd = %s, parent_session_id = %s, classified = %s,"
                    " entry_count = %s, listing = %s, message_count = %s, modified_ms = %s, name = %s"
                    " WHERE id = %s",
                    (*header_columns(header), len(rows), *listing_values(info), sid))
                for index in DERIVED_INDEXES:
                    index.remove(conn, sid)
                    index.add(conn, sid, rows)
            return len(ids)

    def _prepare_derived(self) -> None:
        """Before a full reindex: let each derived index fix its own schema (the search
        index creates its trigram index if ``pg_trgm`` has become available), each in
        its own transaction under the schema lock."""
        if self.readonly:
            return  # the reindex itself refuses
        for index in DERIVED_INDEXES:
            prepare = getattr(index, "prepare", None)
            if prepare is None:
                continue
            with self._transaction(f"preparing the {index.name} index", write=False) as conn:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                prepare(conn)

    # -- reads --------------------------------------------------------------------------------

    def _parse_record(self, text: Any, session_id: str, line: int) -> dict[str, Any]:
        try:
            record = jsonio.loads(bytes(text))
        except ValueError as exc:
            raise InvalidSessionError(f"stored record is not valid JSON ({exc})", f"{self.url}#{session_id}",
                                      line) from exc
        if not isinstance(record, dict):
            raise InvalidSessionError("stored record is not a JSON object", f"{self.url}#{session_id}", line)
        return record

    def read_skeleton(self, session_id: str) -> ParsedSession:
        """The session's header and skeleton entries (see ``SessionStore.read_skeleton``),
        from the ``entries`` columns plus the first bytes of each message (its role);
        label, leaf, session-info and compaction records, messages whose first bytes
        do not show the role plainly, and rows whose copied ``text`` columns may be
        lossy (U+FFFD, see :func:`~sessiontree.stores.postgres.derived.text_copy`) are parsed whole. The header's CRC is
        checked; entries' CRCs are checked by ``read_entries`` and ``load``.
        """
        from sessiontree.core.tree import SKELETON_FIELDS

        kinds = ["compaction", *SKELETON_FIELDS]
        with self._session_cursor(session_id, "reading a skeleton") as (cur, header_raw):
            rows = cur.execute(
                "SELECT id, parent_id, type, timestamp, CASE WHEN type = 'message'"
                f" THEN substring(json from 1 for {ROLE_HEAD_BYTES}) END,"
                " CASE WHEN type = ANY(%s) THEN json END, seq"
                " FROM entries WHERE session_id = %s ORDER BY seq", (kinds, session_id)).fetchall()
            header = self._parse_record(header_raw, session_id, 1)
            rows = [(*r[:4], None if r[4] is None else bytes(r[4]), r[5], r[6]) for r in rows]

            def fetch_whole(seqs: list[Any]) -> dict[Any, Any]:
                return dict(cur.execute("SELECT seq, json FROM entries WHERE session_id = %s AND seq = ANY(%s)",
                                        (session_id, seqs)).fetchall())

            with gc_paused():
                entries = skeletons_from_rows(
                    rows, lambda text, line: self._parse_record(text, session_id, line), fetch_whole,
                    lossy=lambda r: any(isinstance(v, str) and "\ufffd" in v for v in r[:4]))
        return ParsedSession(header=header, entries=entries, raw=[None] * len(entries), header_raw=header_raw,
                             source_version=CURRENT_VERSION, upgraded=False,
                             lines=list(range(2, len(entries) + 2)), path=None)

    def read_entries(self, session_id: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        """The stored entries of ``ids`` (see ``SessionStore.read_entries``), looked up by
        the ``(session_id, id)`` index, each given the checks :meth:`load` gives it
        (its CRC-32, then parsing and validation, :meth:`_entry`); the line reported
        is ``seq + 2``.

        Raises:
            SessionNotFoundError: no such session.
            CorruptEntryError: a returned record's bytes fail their checksum (this
                wins over a parse error; the first record in file order).
            InvalidSessionError: a returned record is not a valid entry (the first
                in file order).
        """
        if not is_exact_text(session_id):
            raise SessionNotFoundError(session_id, self.url)
        wanted = [i for i in dict.fromkeys(ids) if isinstance(i, str) and is_exact_text(i)]
        with self._transaction("reading entries", write=False) as conn:
            if not self.has_schema(conn) or conn.execute(
                    "SELECT 1 FROM sessions WHERE id = %s", (session_id,)).fetchone() is None:
                raise SessionNotFoundError(session_id, self.url)
            with conn.cursor(binary=True) as cur:
                rows = cur.execute("SELECT id, seq, json, crc FROM entries WHERE session_id = %s AND id = ANY(%s)",
                                   (session_id, wanted)).fetchall() if wanted else []
        # The checks load gives these records, in file order: every CRC first, then parsing
        # and validation (the same errors as load and SQLite's read_entries).
        rows = sorted((seq, entry_id, bytes(text), crc) for entry_id, seq, text, crc in rows)
        where = f"{self.url}#{session_id}"
        for seq, entry_id, text, crc in rows:
            if record_crc(text) != crc:
                raise CorruptEntryError(session_id, entry_id, seq + 2, where)
        with gc_paused():
            found = {entry_id: self._entry(text, session_id, seq + 2, where) for seq, entry_id, text, _ in rows}
        return [found[i] for i in ids if i in found]

    def read(self, session_id: str) -> ParsedSession:
        """Same as :meth:`load`: stored sessions are always format 4, loading writes nothing."""
        return self.load(session_id)

    @contextmanager
    def _session_cursor(self, session_id: str, what: str) -> Iterator[tuple[Any, bytes]]:
        """A binary cursor in a read-only snapshot transaction, with the session's
        header bytes already read and checked against their CRC: header and entries
        come from one snapshot, even across statements (the reading path of
        :meth:`load` and :meth:`read_skeleton`).

        Raises:
            SessionNotFoundError: no such id (or no schema yet).
            CorruptEntryError: the header's bytes fail their checksum.
            StorageError: the database could not be read.
        """
        if not is_exact_text(session_id):
            raise SessionNotFoundError(session_id, self.url)
        with self._transaction(what, write=False, snapshot=True) as conn:
            if not self.has_schema(conn):
                raise SessionNotFoundError(session_id, self.url)
            with conn.cursor(binary=True) as cur:
                row = cur.execute("SELECT header_json, header_crc FROM sessions WHERE id = %s",
                                  (session_id,)).fetchone()
                if row is None:
                    raise SessionNotFoundError(session_id, self.url)
                header_raw = bytes(row[0])
                if record_crc(header_raw) != row[1]:
                    raise CorruptEntryError(session_id, None, 1, f"{self.url}#{session_id}")
                yield cur, header_raw

    def load(self, session_id: str, *, keep_raw: bool = True) -> ParsedSession:
        """The session's header and entries, read in one snapshot, each record's CRC-32 checked
        (``keep_raw``: see ``SessionStore.load``).

        Raises:
            SessionNotFoundError: no such id.
            CorruptEntryError: a record's bytes differ from its recorded checksum.
            InvalidSessionError: a stored record is not a valid entry.
            StorageError: the database could not be read.
        """
        with self._session_cursor(session_id, "load") as (cur, header_raw):
            rows = cur.execute("SELECT json, crc, id FROM entries WHERE session_id = %s ORDER BY seq",
                               (session_id,)).fetchall()
        where = f"{self.url}#{session_id}"
        texts = [bytes(text) for text, _, _ in rows]
        computed = list(map(zlib.crc32, texts))
        for index, (value, (_, crc, entry_id)) in enumerate(zip(computed, rows, strict=False)):
            if value != crc:
                raise CorruptEntryError(session_id, entry_id, index + 2, where)
        with gc_paused():
            return self._parsed(session_id, header_raw, texts, keep_raw)

    def _parsed(self, session_id: str, header_raw: bytes, texts: list[bytes],
                keep_raw: bool = True) -> ParsedSession:
        header = self._parse_record(header_raw, session_id, 1)
        entries = []
        where = f"{self.url}#{session_id}"
        for index, text in enumerate(texts):
            entries.append(self._entry(text, session_id, index + 2, where))
        raw: list[bytes | None] = list(texts) if keep_raw else [None] * len(texts)
        return ParsedSession(header=header, entries=entries, raw=raw, header_raw=header_raw,
                             source_version=CURRENT_VERSION, upgraded=False,
                             lines=list(range(2, len(raw) + 2)), path=None)

    def _entry(self, text: bytes, session_id: str, line: int, where: str) -> dict[str, Any]:
        """One stored record (JSONL ``line``) parsed and validated as an entry: the
        record check of :meth:`load` and :meth:`read_entries`.

        Raises:
            InvalidSessionError: not a JSON object, or not a valid entry.
        """
        return validated(self._parse_record(text, session_id, line), where, line)

    def exists(self, session_id: str) -> bool:
        """Whether the id is stored."""
        if not is_exact_text(session_id):
            return False
        with self._transaction("exists", write=False) as conn:
            if not self.has_schema(conn):
                return False
            return conn.execute("SELECT 1 FROM sessions WHERE id = %s", (session_id,)).fetchone() is not None

    def session_ids(self) -> list[str]:
        """Every stored id, oldest first."""
        with self._transaction("session ids", write=False) as conn:
            if not self.has_schema(conn):
                return []
            return [row[0] for row in conn.execute("SELECT id FROM sessions ORDER BY rowno")]

    def location(self, session_id: str) -> str | None:
        """Always ``None``: sessions live in the database, not in files."""
        return None

    def list_sessions(self, *, cwd: str | None = None, include_internal: bool = False,
                      on_progress: ProgressCallback | None = None,
                      cancel: CancelEvent | None = None) -> SessionListing:
        """Listing rows from the ``sessions`` table alone, newest ``modified`` first.

        ``all_messages_text`` of a row is read from ``message_texts`` on first
        access. A row whose header does not parse is left out and counted in
        ``skipped``.

        Raises:
            ListingCancelledError: ``cancel`` was set before or during the listing.
            StorageError: the database could not be read.
        """
        wanted = resolve_cwd(cwd) if cwd is not None else None
        if cancel is not None:
            Progress(0, None, cancel)
        with self._transaction("listing", write=False) as conn:
            if not self.has_schema(conn):
                return SessionListing()
            with conn.cursor(binary=True) as cur:
                rows = cur.execute("SELECT id, header_json, classified, cwd, updated_at, listing, entry_count"
                                   " FROM sessions ORDER BY rowno").fetchall()
        progress = Progress(len(rows), on_progress, cancel)
        infos = []
        skipped = 0
        loads = jsonio.loads
        for session_id, header_json, classified, session_cwd, updated_at, listing, count in rows:
            lossy = session_cwd is not None and "\ufffd" in session_cwd
            if (include_internal or not classified) and (lossy or cwd_matches(session_cwd, wanted)):
                try:
                    header = loads(bytes(header_json))
                except ValueError:
                    header = None  # damaged by hand: the session cannot be loaded, so it is not listed
                if not (isinstance(header, dict) and isinstance(header.get("id"), str)):
                    skipped += 1
                elif not lossy or cwd_matches(header.get("cwd"), wanted):  # the header has the exact cwd
                    infos.append(info_from_listing(bytes(listing)).to_info(
                        header, session_id, fallback_mtime=updated_at / 1e6,
                        text_loader=functools.partial(self._load_text, session_id), entry_count=count))
            progress.step()
        return sort_listing(infos, skipped)

    def _load_text(self, session_id: str) -> str:
        with self._transaction("reading listing text", write=False) as conn:
            with conn.cursor(binary=True) as cur:
                return " ".join(bytes(text).decode("utf-8", "surrogatepass") for (text,) in cur.execute(
                    "SELECT text FROM message_texts WHERE session_id = %s ORDER BY seq", (session_id,)))

    def search(self, query: str, *, cwd: str | None = None, roles: Iterable[str] | None = None,
               since: Any = None, until: Any = None, session: str | None = None,
               limit: int | None = 50) -> list[Any]:
        """Full-text search through the ``pg_trgm`` index, ranked by ``ts_rank``
        (:mod:`.search`): the same hits as every store.
        See :meth:`SessionStore.search <sessiontree.stores.base.SessionStore.search>` for
        arguments, results and errors."""
        return search_index.search_store(self, query, cwd=cwd, roles=roles, since=since, until=until,
                                         session=session, limit=limit)

    def usage(self, query: UsageQuery | None = None) -> UsageRows:
        """Billed usage summed with SQL aggregates over the usage ledger
        (:mod:`.usage`): no entry is read. A database without
        the ledger (an older schema opened read-only) is answered from its entries by
        :func:`~sessiontree.core.usagerecords.aggregate`, with the same rows. See
        :meth:`SessionStore.usage <sessiontree.stores.base.SessionStore.usage>`.

        Args:
            query: a :class:`~sessiontree.core.usagerecords.UsageQuery`, or ``None`` for everything.

        Returns:
            :class:`~sessiontree.core.usagerecords.UsageRows` (``skipped`` is always 0: every
            stored session can be read).

        Raises:
            StorageError: the database could not be read.
        """
        query = query or UsageQuery()
        wanted = resolve_cwd(query.cwd) if query.cwd is not None else None
        if query.session_id is not None and not is_exact_text(query.session_id):
            return UsageRows()
        with self._transaction("usage", write=False, snapshot=True) as conn:
            if not self.has_schema(conn):
                return UsageRows()
            if "m004_usage_ledger" in self.applied_steps:
                return UsageRows(query_usage(conn, query, functools.partial(self._exact_cwds, conn),
                                             lambda cwd: cwd_matches(cwd, wanted)))
        sessions = ((parsed.header, parsed.entries) for parsed in map(self.read, self.session_ids()))
        return UsageRows(aggregate(sessions, query, lambda cwd: cwd_matches(cwd, wanted)))

    def _exact_cwds(self, conn: Any, session_ids: list[str]) -> dict[str, str | None]:
        """The header ``cwd`` (``None`` unless a string) of each session, exact: from the
        ``cwd`` column, or from the header where the column's copy is lossy."""
        out: dict[str, str | None] = {}
        for session_id, cwd in conn.execute("SELECT id, cwd FROM sessions WHERE id = ANY(%s)", (session_ids,)):
            if cwd is not None and "\ufffd" in cwd:
                header = jsonio.loads(bytes(conn.execute("SELECT header_json FROM sessions WHERE id = %s",
                                                         (session_id,)).fetchone()[0]))
                cwd = header.get("cwd") if isinstance(header, dict) and isinstance(header.get("cwd"), str) else None
            out[session_id] = cwd
        return out

    def find_most_recent(self, cwd: str | None = None, include_internal: bool = False) -> str | None:
        """Id of the session written last (``write_seq``), optionally only for ``cwd``."""
        wanted = resolve_cwd(cwd) if cwd is not None else None
        with self._transaction("find most recent", write=False) as conn:
            if not self.has_schema(conn):
                return None
            sql = ("SELECT id, cwd FROM sessions" + ("" if include_internal else " WHERE NOT classified")
                   + " ORDER BY write_seq DESC")
            with conn.cursor() as cur:
                cur.execute(sql)
                while batch := cur.fetchmany(256):
                    for session_id, session_cwd in batch:
                        if session_cwd is not None and "\ufffd" in session_cwd:
                            # The copy is lossy; the header has the exact value.
                            header = jsonio.loads(bytes(conn.execute(
                                "SELECT header_json FROM sessions WHERE id = %s", (session_id,)).fetchone()[0]))
                            session_cwd = header.get("cwd")
                        if cwd_matches(session_cwd, wanted):
                            found: str = session_id
                            return found
        return None

    # -- verification -------------------------------------------------------------------------

    def verify(self, on_progress: ProgressCallback | None = None) -> list[StoreProblem]:
        """Check every session without changing anything (``sessiontree check --store``).

        In one ``REPEATABLE READ``, read-only snapshot, for every session: each
        record's CRC-32 (``hash-mismatch``), that it parses and is a valid header
        or entry (``invalid-record``), that an entry's copied columns match its
        JSON (``column-drift``), and that ``entry_count``, the header copies,
        the listing state and ``message_texts`` equal a rebuild from the records
        (``metadata-drift``; :meth:`reindex` repairs it), and the file checker's rules
        on the session's JSONL form (:func:`~sessiontree.stores.shared.file_rule_problems`:
        the verdict every store gives). The server keeps its own
        pages' checksums (``data_checksums``), so there is no store-wide integrity step.

        Returns:
            The problems, by session in insertion order.

        Raises:
            StorageError: the database cannot be read.
        """
        problems: list[StoreProblem] = []
        with self._transaction("verify", write=False, snapshot=True) as conn:
            if not self.has_schema(conn):
                return problems
            ids = [row[0] for row in conn.execute("SELECT id FROM sessions ORDER BY rowno")]
            for done, sid in enumerate(ids, 1):
                problems.extend(self._verify_session(conn, sid))
                if on_progress is not None:
                    on_progress(done, len(ids))
        return problems

    def _verify_session(self, conn: Any, session_id: str) -> list[StoreProblem]:
        """The problems of one session (:func:`~sessiontree.stores.verify.verify_stored_session`
        on its rows, read in the caller's snapshot)."""
        with conn.cursor(binary=True) as cur:
            row = cur.execute("SELECT header_json, header_crc, created_at, cwd, parent_session_id, classified,"
                              " entry_count, listing, message_count, modified_ms, name FROM sessions WHERE id = %s",
                              (session_id,)).fetchone()
            rows = cur.execute("SELECT seq, id, parent_id, type, timestamp, json, crc FROM entries"
                               " WHERE session_id = %s ORDER BY seq", (session_id,)).fetchall()
            texts = [(seq, bytes(text).decode("utf-8", "surrogatepass")) for seq, text in cur.execute(
                "SELECT seq, text FROM message_texts WHERE session_id = %s ORDER BY seq", (session_id,))]

        def state_drift(info: InfoAccumulator) -> list[str]:
            rebuilt_listing = listing_values(info)
            drift = [] if jsonio.loads(bytes(row[7])) == jsonio.loads(rebuilt_listing[0]) else ["listing state"]
            drift.extend(f"{name} {value!r} (rebuilt: {rebuilt!r})" for name, value, rebuilt in zip(
                ("message_count", "modified_ms", "name"), row[8:11], rebuilt_listing[1:], strict=True)
                if value != rebuilt)
            return drift

        header_text = bytes(row[0])
        stored = StoredSession(
            header_text=header_text,
            header_intact=record_crc(header_text) == row[1],
            entry_count=row[6],
            header_columns=row[2:6],
            parse=lambda text, line: self._parse_record(text, session_id, line),
            copied_columns=lambda entry: (entry.get("id"), text_copy(entry.get("parentId")),
                                          text_copy(entry.get("type")), text_copy(entry.get("timestamp"))),
            rebuilt_header_columns=header_columns,
            state_drift=state_drift,
            stored_texts=lambda: texts)
        records = (StoredRecord(seq, entry_id, (entry_id, parent, kind, stamp), bytes(text),
                                record_crc(bytes(text)) == crc)
                   for seq, entry_id, parent, kind, stamp, text, crc in rows)
        return verify_stored_session(session_id, f"{self.url}#{session_id}", stored, records)

    def close(self) -> None:
        """Close the pool (its connections and threads). Idempotent; later calls raise StorageError."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


# Module-level so tests can inject a failure in the middle of a write.
def _insert_entry_rows(conn: Any, rows: list[tuple[Any, ...]]) -> None:
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO entries (session_id, seq, id, parent_id, type, timestamp, json, crc)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", rows)


#: Key space (first key) of the transaction-scoped advisory locks :meth:`PostgresStore.sync_commit`
#: takes per source path (second key: the CRC-32 of the path, as a signed 32-bit integer).
SYNC_LOCK = int.from_bytes(b"sync", "big")

_SYNC_COLUMNS = ("path", "session_id", "size", "mtime_ns", "inode", "dev", "consumed", "lines", "entries",
                 "version", "header_hash", "tail_hash")
_SYNC_SQL = ", ".join(_SYNC_COLUMNS)


def _lock_key(path: bytes) -> int:
    """The second key of a path's advisory lock: its CRC-32 as a signed 32-bit int
    (two paths sharing it only take turns)."""
    value = zlib.crc32(path)
    return value - (1 << 32) if value >= 1 << 31 else value


def _sync_state(row: Sequence[Any]) -> SyncState:
    """A ``sync_state`` row (columns of ``_SYNC_SQL``) as a :class:`SyncState`."""
    size, mtime_ns, inode, dev, consumed, lines, entries, version = (int(value) for value in row[2:10])
    return SyncState(bytes(row[0]).decode("utf-8", "surrogatepass"), row[1], size, mtime_ns, inode, dev, consumed,
                     lines, entries, version, bytes(row[10]), bytes(row[11]))

