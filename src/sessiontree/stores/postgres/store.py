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

The store is composed, not chained (docs/architecture.md, "The store seam";
docs/decisions/store-composition.md): it opens one :class:`~.connection.PostgresDatabase`
(the URL, the pool, the schema check or migration, the transactions, ``close``) and hands
it to its parts, each in its own module and each using only the database's public
members: :mod:`.reads` (``StoreCore`` reads and ``PartialReads``), :mod:`.writes`
(``StoreCore`` writes), :mod:`.ledger` (``SyncLedger``, over the writes part),
:mod:`.maintenance` (``DerivedData`` and ``verify``, over the reads part) and :mod:`.teamaccess`
(``TeamAccess`` and retention, over the reads part). Each public method of
:class:`PostgresStore` is one line handing the call to its part.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from sessiontree.core.usage import UsageQuery, UsageRows
from sessiontree.errors import StoreOpenError
from sessiontree.format.codec import ParsedSession
from sessiontree.stores.base import (
    ArchivedFile,
    AuditRecord,
    CancelEvent,
    ProgressCallback,
    Provenance,
    PruneRecord,
    SessionListing,
    SessionTexts,
    StoreProblem,
    SyncChange,
    SyncState,
    TeamMember,
    TimeBound,
)
from sessiontree.stores.fallbacks import StoreBase
from sessiontree.stores.postgres.connection import (
    DEFAULT_TIMEOUT,
    MIGRATION_LOCK,
    URL_OPTIONS,
    PostgresDatabase,
    redact_url,
)
from sessiontree.stores.postgres.derived import DerivedIndex
from sessiontree.stores.postgres.ledger import SYNC_LOCK, PostgresLedger
from sessiontree.stores.postgres.maintenance import PostgresMaintenance
from sessiontree.stores.postgres.reads import PostgresStoreReads
from sessiontree.stores.postgres.schema import DERIVED_INDEXES, MIGRATIONS
from sessiontree.stores.postgres.teamaccess import PostgresTeam
from sessiontree.stores.postgres.writes import PostgresWrites
from sessiontree.stores.traits import StoreTraits

try:  # an optional extra: sessiontree[postgres]
    import psycopg
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
        db: the open :class:`~.connection.PostgresDatabase` (shared by the parts; tools
            and tests reach the pool and the transactions through it).
        sync_host: the host whose files :meth:`sync_states` and :meth:`sync_commit`
            record (``$SESSIONTREE_SYNC_HOST``, else :func:`socket.gethostname`).

    Raises:
        StoreOpenError: psycopg is missing, the server cannot be reached or
            refuses us, the database holds objects we did not create (docs/postgres.md), or its
            schema has a step this version does not know.
    """

    kind = "postgres"
    #: read_skeleton and read_entries answer from columns and the (session_id, id) index.
    partial_reads = True
    #: The store offers ``TeamAccess`` (docs/team.md).
    supports_team = True

    def traits(self) -> StoreTraits:
        """PostgreSQL's traits (docs/decisions/store-traits.md): partial reads; its run lock
        is its own advisory lock (``run_lock``), so no lock file. A load only reads, but
        the store's one connection serves reads and writes in turn, so its loads stay
        queued with the writes (``loads_may_write``), as they always were."""
        return StoreTraits(partial_reads=True)

    def __init__(self, url: str, *, create: bool = True, readonly: bool = False,
                 prepare_threshold: int | str | None = "url", pool_size: int | None = None,
                 timeout: float | None = None) -> None:
        if psycopg is None:
            raise StoreOpenError("PostgreSQL stores need psycopg 3 and psycopg_pool: "
                                 "pip install 'sessiontree[postgres]'")
        self.db = PostgresDatabase(url, create=create, readonly=readonly, prepare_threshold=prepare_threshold,
                                   pool_size=pool_size, timeout=timeout)
        self.url = self.db.url
        self.readonly = self.db.readonly
        self._reads = PostgresStoreReads(self.db)
        self._writes = PostgresWrites(self.db)
        self._ledger = PostgresLedger(self.db, self._writes)
        self._maintenance = PostgresMaintenance(self.db, self._reads, self)
        self._team = PostgresTeam(self.db, self._reads)

    # -- the database's attributes (documented on the class) -----------------------------

    @property
    def sync_host(self) -> str:
        """Which host's files the sync states and archive records are (settable)."""
        return self.db.sync_host

    @sync_host.setter
    def sync_host(self, value: str) -> None:
        self.db.sync_host = value

    @property
    def applied_steps(self) -> frozenset[str]:
        """Schema steps present in the database (an older schema opened read-only lacks some)."""
        return self.db.applied_steps

    @property
    def prepare_threshold(self) -> int | str | None:
        """psycopg's ``prepare_threshold`` the connections use (``None``: never prepare)."""
        return self.db.prepare_threshold

    @property
    def pool_size(self) -> int:
        """Most connections this store object holds."""
        return self.db.pool_size

    @property
    def timeout(self) -> float:
        """Seconds to wait for a connection before ``StorageError``."""
        return self.db.timeout

    # -- PostgresDatabase (connection) ---------------------------------

    def close(self) -> None:
        """See :meth:`PostgresDatabase.close`."""
        self.db.close()

    def applied_migrations(self) -> list[str]:
        """See :meth:`PostgresDatabase.applied_migrations`."""
        return self.db.applied_migrations()

    def read_snapshot(self, what: str) -> AbstractContextManager[Any]:
        """See :meth:`PostgresDatabase.read_snapshot`."""
        return self.db.read_snapshot(what)

    def has_schema(self, conn: Any) -> bool:
        """See :meth:`PostgresDatabase.has_schema`."""
        return self.db.has_schema(conn)

    # -- PostgresStoreReads (reads) -----------------------------------

    def read(self, session_id: str) -> ParsedSession:
        """See :meth:`PostgresStoreReads.read`."""
        return self._reads.read(session_id)

    def load(self, session_id: str, *, keep_raw: bool = True) -> ParsedSession:
        """See :meth:`PostgresStoreReads.load`."""
        return self._reads.load(session_id, keep_raw=keep_raw)

    def read_texts(self, session_id: str) -> SessionTexts:
        """See :meth:`PostgresStoreReads.read_texts`."""
        return self._reads.read_texts(session_id)

    def read_skeleton(self, session_id: str) -> ParsedSession:
        """See :meth:`PostgresStoreReads.read_skeleton`."""
        return self._reads.read_skeleton(session_id)

    def read_entries(self, session_id: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        """See :meth:`PostgresStoreReads.read_entries`."""
        return self._reads.read_entries(session_id, ids)

    def exists(self, session_id: str) -> bool:
        """See :meth:`PostgresStoreReads.exists`."""
        return self._reads.exists(session_id)

    def session_ids(self) -> list[str]:
        """See :meth:`PostgresStoreReads.session_ids`."""
        return self._reads.session_ids()

    def location(self, session_id: str) -> str | None:
        """See :meth:`PostgresStoreReads.location`."""
        return self._reads.location(session_id)

    def list_sessions(self, *, cwd: str | None = None, include_internal: bool = False,
                      on_progress: ProgressCallback | None = None,
                      cancel: CancelEvent | None = None) -> SessionListing:
        """See :meth:`PostgresStoreReads.list_sessions`."""
        return self._reads.list_sessions(cwd=cwd, include_internal=include_internal, on_progress=on_progress, cancel=cancel)

    def find_most_recent(self, cwd: str | None = None, include_internal: bool = False) -> str | None:
        """See :meth:`PostgresStoreReads.find_most_recent`."""
        return self._reads.find_most_recent(cwd, include_internal)

    # -- PostgresWrites (writes) --------------------------------------

    def create(self, header: dict[str, Any], entries: Sequence[dict[str, Any]] = (),
               raw: Sequence[bytes | None] | None = None, *, path: str | None = None) -> None:
        """See :meth:`PostgresWrites.create`."""
        return self._writes.create(header, entries, raw, path=path)

    def create_many(self, sessions: Iterable[tuple[dict[str, Any], Sequence[dict[str, Any]],
                                                   Sequence[bytes | None] | None]]) -> int:
        """See :meth:`PostgresWrites.create_many`."""
        return self._writes.create_many(sessions)

    def append(self, session_id: str, entries: Sequence[dict[str, Any]],
               raw: Sequence[bytes | None] | None = None) -> None:
        """See :meth:`PostgresWrites.append`."""
        return self._writes.append(session_id, entries, raw)

    def replace_header(self, session_id: str, header: dict[str, Any]) -> None:
        """See :meth:`PostgresWrites.replace_header`."""
        return self._writes.replace_header(session_id, header)

    def replace_session(self, header: dict[str, Any], entries: Sequence[dict[str, Any]],
                        raw: Sequence[bytes | None] | None = None) -> None:
        """See :meth:`PostgresWrites.replace_session`."""
        return self._writes.replace_session(header, entries, raw)

    def delete(self, session_id: str) -> None:
        """See :meth:`PostgresWrites.delete`."""
        return self._writes.delete(session_id)

    # -- PostgresLedger (ledger) --------------------------------------

    def run_lock(self, on_busy: Callable[[], None] | None = None) -> AbstractContextManager[None]:
        """See :meth:`PostgresLedger.run_lock`."""
        return self._ledger.run_lock(on_busy)

    def sync_states(self) -> dict[str, SyncState]:
        """See :meth:`PostgresLedger.sync_states`."""
        return self._ledger.sync_states()

    def sync_commit(self, expect: SyncState | None, state: SyncState, change: SyncChange) -> None:
        """See :meth:`PostgresLedger.sync_commit`."""
        return self._ledger.sync_commit(expect, state, change)

    def sync_shape(self, path: str) -> bytes | None:
        """See :meth:`PostgresLedger.sync_shape`."""
        return self._ledger.sync_shape(path)

    def archived_files(self) -> list[ArchivedFile]:
        """See :meth:`PostgresLedger.archived_files`."""
        return self._ledger.archived_files()

    def record_archived(self, record: ArchivedFile) -> None:
        """See :meth:`PostgresLedger.record_archived`."""
        return self._ledger.record_archived(record)

    def provenances(self) -> dict[str, Provenance]:
        """See :meth:`PostgresLedger.provenances`."""
        return self._ledger.provenances()

    def record_provenance(self, records: Sequence[Provenance]) -> None:
        """See :meth:`PostgresLedger.record_provenance`."""
        return self._ledger.record_provenance(records)

    # -- PostgresMaintenance (maintenance) ----------------------------

    def reindex(self, session_id: str | None = None) -> int:
        """See :meth:`PostgresMaintenance.reindex`."""
        return self._maintenance.reindex(session_id)

    def search(self, query: str, *, cwd: str | None = None, roles: Iterable[str] | None = None,
               since: TimeBound | None = None, until: TimeBound | None = None, session: str | None = None,
               limit: int | None = 50) -> list[Any]:
        """See :meth:`PostgresMaintenance.search`."""
        return self._maintenance.search(query, cwd=cwd, roles=roles, since=since, until=until, session=session, limit=limit)

    def usage(self, query: UsageQuery | None = None) -> UsageRows:
        """See :meth:`PostgresMaintenance.usage`."""
        return self._maintenance.usage(query)

    def verify(self, on_progress: ProgressCallback | None = None) -> list[StoreProblem]:
        """See :meth:`PostgresMaintenance.verify`."""
        return self._maintenance.verify(on_progress)

    # -- PostgresTeam (team) ------------------------------------------

    def team_add(self, name: str, role: str, password: str | None = None) -> None:
        """See :meth:`PostgresTeam.team_add`."""
        return self._team.team_add(name, role, password)

    def team_list(self) -> list[TeamMember]:
        """See :meth:`PostgresTeam.team_list`."""
        return self._team.team_list()

    def team_remove(self, name: str) -> None:
        """See :meth:`PostgresTeam.team_remove`."""
        return self._team.team_remove(name)

    def team_usage(self, *, by_user: bool = False) -> list[dict[str, Any]]:
        """See :meth:`PostgresTeam.team_usage`."""
        return self._team.team_usage(by_user=by_user)

    def team_sessions(self, *, by_user: bool = False) -> list[dict[str, Any]]:
        """See :meth:`PostgresTeam.team_sessions`."""
        return self._team.team_sessions(by_user=by_user)

    def team_open(self, session_id: str, reason: str) -> tuple[int, ParsedSession]:
        """See :meth:`PostgresTeam.team_open`."""
        return self._team.team_open(session_id, reason)

    def team_audit(self) -> list[AuditRecord]:
        """See :meth:`PostgresTeam.team_audit`."""
        return self._team.team_audit()

    def prune(self, older_than_ms: float, *, agent: str | None = None, dry_run: bool = False,
              everyone: bool = False) -> list[PruneRecord]:
        """See :meth:`PostgresTeam.prune`."""
        return self._team.prune(older_than_ms, agent=agent, dry_run=dry_run, everyone=everyone)

    def set_hold(self, session_id: str, held: bool) -> bool:
        """See :meth:`PostgresTeam.set_hold`."""
        return self._team.set_hold(session_id, held)

    def holds(self) -> list[str]:
        """See :meth:`PostgresTeam.holds`."""
        return self._team.holds()

    def deletion_log(self) -> list[dict[str, Any]]:
        """See :meth:`PostgresTeam.deletion_log`."""
        return self._team.deletion_log()
