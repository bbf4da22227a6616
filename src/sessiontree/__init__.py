"""sessiontree: AI coding-agent sessions as trees of entries (format 4).

Read, write, upgrade, project and store sessions of the format described in
``docs/rules/``. The public surface:

* :class:`SessionManager` and :class:`AsyncSessionManager`: the format's
  SessionManager API, synchronous and as coroutines.
* Stores: :class:`SqliteStore` (default), :class:`JsonlStore`,
  :class:`MemoryStore`, :class:`PostgresStore` (with the ``postgres`` extra),
  behind the :class:`SessionStore` protocol, and :func:`open_store` for URLs.
* The format core: :func:`parse_session`, :func:`read_session_file`,
  :func:`serialize_session`, :class:`ParsedSession`,
  :func:`build_session_projection`; the tree's :class:`TreeNode` and
  :class:`NameState`; a listing row, :class:`SessionInfo`.
* Errors: :class:`SessionError` and its subclasses.

Layering (imports point one way only; docs/architecture.md, checked by
import-linter): ``format`` <- ``core`` <- ``check`` <- ``stores`` <-
``session`` <- ``search``/``usage``/``sync`` <- ``web`` <- ``cli``.
"""

from importlib import import_module
from typing import Any

from sessiontree import errors as _errors
from sessiontree.errors import *  # noqa: F403 - the exception hierarchy: a small leaf module, always loaded

# Attributes are imported on first use (PEP 562): ``import sessiontree.format``
# stays cheap and never drags in the stores or the manager.
_LAZY = {
    "SessionManager": "session.manager",
    "AsyncSessionManager": "session.aio",
    "SessionStore": "stores.base",
    "SqliteStore": "stores.sqlite.store",
    "JsonlStore": "stores.jsonl.store",
    "MemoryStore": "stores.memory",
    "PostgresStore": "stores.postgres.store",
    "open_store": "stores",
    "SessionInfo": "core.listing",
    "ParsedSession": "format.codec",
    "parse_session": "format.codec",
    "read_session_file": "format.codec",
    "serialize_session": "format.codec",
    "build_session_projection": "core.projection.build",
    "NameState": "core.tree",
    "TreeNode": "core.tree",
}


def __getattr__(name: str) -> Any:
    """A public name of :data:`_LAZY` (PEP 562): imported on first use, then cached in
    the module's globals. Raises AttributeError for any other name."""
    if name == "__version__":
        # importlib.metadata costs more to import than the rest of this package's
        # start-up: read only when asked (``--version``, the MCP server's handshake).
        globals()[name] = _version()
        return globals()[name]
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sessiontree' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The loaded names and the lazy ones, sorted."""
    return sorted({*globals(), *_LAZY, "__version__"})


def _version() -> str:
    """The installed distribution's version (``pyproject.toml`` is its one source); a
    source tree put on ``sys.path`` without being installed has no metadata."""
    found = _version_from_path()
    if found is not None:
        return found
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sessiontree")
    except PackageNotFoundError:
        return "0+unknown"


def _version_from_path() -> str | None:
    """The ``Version:`` of the first ``sessiontree`` metadata directory on ``sys.path``
    (``*.dist-info/METADATA``, ``*.egg-info/PKG-INFO``), the one ``importlib.metadata``
    finds first; ``None`` when there is none (an installed zip or a custom finder: the
    caller asks ``importlib.metadata`` then). Importing ``importlib.metadata`` costs
    more than the rest of ``sessiontree --version`` together (docs/architecture.md, "Start-up")."""
    import os
    import sys

    for entry in sys.path:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:
            continue
        for name in names:
            lower = name.lower()
            if lower.startswith(("sessiontree-", "sessiontree.")) and lower.endswith((".dist-info", ".egg-info")):
                stem = lower.rsplit(".", 1)[0].split("-", 1)[0]
                if stem != "sessiontree":
                    continue
                meta = os.path.join(entry or ".", name, "METADATA" if lower.endswith(".dist-info") else "PKG-INFO")
                try:
                    with open(meta, encoding="utf-8") as handle:
                        for line in handle:
                            if line.startswith("Version:"):
                                return line[len("Version:"):].strip()
                            if not line.strip():
                                break  # the end of the headers
                except OSError:
                    continue
    return None


__all__ = [
    *_LAZY,
    *(name for name in _errors.__all__ if name != "INVALID_SESSION_ID_MESSAGE"),
]
