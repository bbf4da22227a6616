"""Session stores and store URLs (docs/rules/stores.md spec:stores).

URLs follow SQLAlchemy's convention: the scheme, ``:///``, then a path, so an
absolute path gives four slashes.

=================================  ==========================================
``sqlite:///sessions.db``          SQLite file relative to the current directory
``sqlite:////home/me/sessions.db`` SQLite file, absolute
``jsonl:///sessions``              JSONL directory, relative
``jsonl:////home/me/sessions``     JSONL directory, absolute
``memory:``                        in memory, no I/O
``postgresql://user@host/db``      PostgreSQL, as libpq takes the URL (also
                                   ``postgres://``, unix sockets via ``?host=/dir``)
a plain path                       an existing directory (or one ending in a
                                   slash) is JSONL, anything else a SQLite file
=================================  ==========================================

Without an argument the store comes from ``SESSIONTREE_STORE`` (a URL or a
path), else it is SQLite at ``<platformdirs user data dir>/sessions.db``.
A store that cannot be opened raises :class:`~sessiontree.errors.StoreOpenError`;
there is never a fallback to memory.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sessiontree.errors import StoreOpenError
from sessiontree.stores.base import CancelEvent, ProgressCallback, SessionListing, SessionStore, StoreProblem

if TYPE_CHECKING:
    from sessiontree.stores.jsonl.store import JsonlStore
    from sessiontree.stores.memory import MemoryStore
    from sessiontree.stores.sqlite.store import SqliteStore

__all__ = [
    "STORE_ENV",
    "CancelEvent",
    "JsonlStore",
    "MemoryStore",
    "PostgresStore",
    "ProgressCallback",
    "SessionListing",
    "SessionStore",
    "SqliteStore",
    "StoreLocation",
    "StoreProblem",
    "default_sqlite_path",
    "default_store_url",
    "open_store",
    "resolve_store",
]

#: Environment variable naming the default store (a URL or a plain path).
STORE_ENV = "SESSIONTREE_STORE"
_APP_NAME = "sessiontree"
# At least two letters, so a Windows drive ("C:\\...") is never taken for a scheme.
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]+):")


def default_sqlite_path() -> str:
    """``<platformdirs.user_data_dir("sessiontree")>/sessions.db``, absolute."""
    import platformdirs  # with pathlib and tempfile, ~8 ms: not for a store named by URL or path

    return os.path.abspath(os.path.join(platformdirs.user_data_dir(_APP_NAME), "sessions.db"))


def default_store_url() -> str:
    """The store used when none is given: ``$SESSIONTREE_STORE`` if set and non-empty,
    else ``sqlite:///`` + :func:`default_sqlite_path` (four slashes, the path being absolute)."""
    configured = os.environ.get(STORE_ENV, "").strip()
    if configured:
        return configured
    return "sqlite:///" + default_sqlite_path()


def _url_path(url: str, scheme: str) -> str:
    rest = url[len(scheme) + 1:]
    if not rest.startswith("///") or len(rest) == 3:
        raise StoreOpenError(f"invalid store URL {url!r}: expected {scheme}:///relative/path "
                             f"or {scheme}:////absolute/path")
    return rest[3:]


def open_store(url_or_path: str | os.PathLike[str] | None = None, *, create: bool = True,
               readonly: bool = False, quick_check: bool = False) -> SessionStore:
    """Open the store named by a URL or a plain path (docs/rules/stores.md spec:stores).

    Args:
        url_or_path: ``sqlite:///...``, ``jsonl:///...``, ``memory:``, or a
            plain path (an existing directory or a path ending in a separator
            means JSONL, anything else a SQLite file; ``~`` is expanded).
            ``None`` means :func:`default_store_url`.
        create: create a missing SQLite file or JSONL directory, and
            initialise an empty SQLite database (default). With ``False`` a
            missing one raises ``StoreOpenError`` (a mistyped path is an error,
            not an empty store) and an empty database is left uninitialised.
        readonly: open for reading only: nothing is created, initialised,
            migrated or cleaned up, and every write raises ``StorageError``
            (implies ``create=False``). Reading commands use it, so they work
            on stores the user can only read and never change a store.
        quick_check: SQLite only: refuse (``StoreOpenError``) a writable open of a
            database that fails ``PRAGMA quick_check``. Costs a read of the
            whole file, so bulk writers (``import``) ask for it; others do not.

    Returns:
        A :class:`SqliteStore`, :class:`JsonlStore`, :class:`MemoryStore` or
        :class:`~sessiontree.stores.postgres.PostgresStore` (``psycopg`` is
        imported only then: it is the optional extra ``sessiontree[postgres]``).

    Raises:
        StoreOpenError: an unknown or unsupported scheme, a malformed URL, or a store that cannot be
            opened: among others an existing SQLite database of another program
            (refused and left byte for byte as it was), a damaged one (with
            ``quick_check``), or one we may not write when writing was asked for.
    """
    where = resolve_store(url_or_path)
    if where.kind == "postgres":
        from sessiontree.stores.postgres.store import PostgresStore

        return PostgresStore(where.connect_url or where.url, create=create, readonly=readonly)
    # Each backend is imported when a URL asks for it: a short command (the status line)
    # does not pay for the others (docs/statusline.md).
    if where.kind == "memory":
        from sessiontree.stores.memory import MemoryStore

        return MemoryStore()
    path = where.path
    assert path is not None  # resolve_store gives every file store its path
    if where.kind == "jsonl":
        from sessiontree.stores.jsonl.store import JsonlStore

        return JsonlStore(path, create=create, readonly=readonly)
    from sessiontree.stores.sqlite.store import SqliteStore

    return SqliteStore(path, create=create, readonly=readonly, quick_check=quick_check)


@dataclass(frozen=True)
class StoreLocation:
    """Where a store URL or path points, found without opening anything.

    Attributes:
        kind: ``"sqlite"``, ``"jsonl"``, ``"memory"`` or ``"postgres"``.
        path: the SQLite file or JSONL directory as given (``~`` expanded;
            relative paths stay relative), ``None`` for memory and PostgreSQL.
        url: what was resolved (the argument, or :func:`default_store_url`).
        source: ``"argument"``, ``"environment"`` (``$SESSIONTREE_STORE``) or ``"default"``.
        connect_url: PostgreSQL only: the URL as given, password included (``url``
            is shown to users, so it has none); ``None`` for other stores.
    """

    kind: str
    path: str | None
    url: str
    source: str
    connect_url: str | None = None

    @property
    def exists(self) -> bool:
        """Whether the file or directory is there (a memory store always is; a
        PostgreSQL database is taken to be, since finding out means connecting)."""
        return self.path is None or os.path.exists(self.path)


def resolve_store(url_or_path: str | os.PathLike[str] | None = None) -> StoreLocation:
    """Resolve a store URL or plain path (rules of :func:`open_store`) without opening it.

    Raises:
        StoreOpenError: empty, malformed, or an unknown or unsupported scheme
            (``postgresql+driver://`` is).
    """
    if url_or_path is None:
        source = "environment" if os.environ.get(STORE_ENV, "").strip() else "default"
        url_or_path = default_store_url()
    else:
        source = "argument"
    target = os.fspath(url_or_path)
    if not target:
        raise StoreOpenError("empty store URL")
    match = _SCHEME.match(target)
    if match is None:
        path = os.path.expanduser(target)
        kind = "jsonl" if os.path.isdir(path) or path.endswith(("/", os.sep)) else "sqlite"
        return StoreLocation(kind, path, target, source)
    scheme = match.group(1).lower()
    if scheme == "memory":
        if target[len("memory:"):] not in ("", "//"):
            raise StoreOpenError(f"invalid store URL {target!r}: a memory store is just 'memory:'")
        return StoreLocation("memory", None, target, source)
    if scheme in ("sqlite", "jsonl"):
        return StoreLocation(scheme, _url_path(target, scheme), target, source)
    if scheme in ("postgresql", "postgres"):
        from sessiontree.stores.postgres.store import redact_url

        if not target[len(scheme) + 1:].startswith("//"):
            raise StoreOpenError(f"invalid store URL {redact_url(target)!r}: expected postgresql://[user@]host/db "
                                 "or postgresql:///db?host=/socket/dir")
        return StoreLocation("postgres", None, redact_url(target), source, connect_url=target)
    if scheme.startswith("postgresql+"):
        # The URL itself is not echoed: it may carry a password.
        raise StoreOpenError(f"unsupported store URL scheme {scheme!r}: write postgresql://... "
                             "(psycopg 3 is the only driver)")
    raise StoreOpenError(f"unknown store URL scheme {scheme!r}; "
                         "expected sqlite:///PATH, jsonl:///DIR, postgresql://HOST/DB or memory:")


_BACKENDS = {"SqliteStore": "sessiontree.stores.sqlite.store", "JsonlStore": "sessiontree.stores.jsonl.store",
             "MemoryStore": "sessiontree.stores.memory", "PostgresStore": "sessiontree.stores.postgres.store"}


def __getattr__(name: str) -> object:
    # The store classes are imported on first use: psycopg is an optional extra, and every
    # backend costs start-up time to a command that does not use it (the status line).
    module = _BACKENDS.get(name)
    if module is not None:
        from importlib import import_module

        value = getattr(import_module(module), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
