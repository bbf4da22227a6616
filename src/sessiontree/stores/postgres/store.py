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

The class is assembled from one mixin per capability of the store protocol
(:mod:`sessiontree.stores.base`), each in its own module: :mod:`.connection`
(the URL, the pool, the schema check or migration, the transactions, ``close``),
:mod:`.reads` (``StoreCore`` reads and ``PartialReads``), :mod:`.writes`
(``StoreCore`` writes), :mod:`.ledger` (``SyncLedger``) and :mod:`.maintenance`
(``DerivedData`` and ``verify``). This module opens the store (``__init__``) and
re-exports the public names.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from sessiontree.errors import StoreOpenError
from sessiontree.stores.fallbacks import StoreBase
from sessiontree.stores.origin import host_name
from sessiontree.stores.postgres.connection import (
    MIGRATION_LOCK,
    URL_OPTIONS,
    error_first_line,
    parse_threshold,
    redact_url,
    split_url,
    step_names,
)
from sessiontree.stores.postgres.derived import DerivedIndex
from sessiontree.stores.postgres.ledger import SYNC_LOCK, PostgresLedger
from sessiontree.stores.postgres.maintenance import PostgresMaintenance
from sessiontree.stores.postgres.reads import PostgresStoreReads
from sessiontree.stores.postgres.schema import DERIVED_INDEXES, MIGRATIONS
from sessiontree.stores.postgres.team import PostgresTeam
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

#: Seconds to wait for a pooled connection (and for connecting) before ``StorageError``.
DEFAULT_TIMEOUT = 30.0


class PostgresStore(PostgresTeam, PostgresLedger, PostgresWrites, PostgresMaintenance, PostgresStoreReads, StoreBase):
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
            refuses us, the database holds objects we did not create (docs/postgres.md), or its
            schema has a step this version does not know.
    """

    kind = "postgres"
    #: read_skeleton and read_entries answer from columns and the (session_id, id) index.
    partial_reads = True

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
        self._conninfo, options = split_url(url)
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
        self._initialised = True
        #: Which host's files the sync states are (``SESSIONTREE_SYNC_HOST``, else the host name).
        self.sync_host: str = host_name()
        #: Schema steps present in the database when it was opened.
        self.applied_steps: frozenset[str] = frozenset(step_names())
        try:
            probe = self._connect()
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
