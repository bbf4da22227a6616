"""What a :class:`~sessiontree.session.manager.SessionManager` binds: the store a
``storeOrDir`` argument selects, a new session's header, its JSONL file, and a prepared
switch of the session it is bound to (docs/rules/manager.md seed:api).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sessiontree.core.listing import is_classified
from sessiontree.core.tree import SessionTree
from sessiontree.format.ids import is_valid_session_id, new_session_id, validate_session_id
from sessiontree.format.upgrade import parent_session_to_id
from sessiontree.session.builders import now_iso
from sessiontree.stores import open_store
from sessiontree.stores.base import SessionFiles, SessionStore
from sessiontree.stores.jsonl.store import JsonlStore

__all__ = ["StoreOrDir", "Switch", "child_header", "classification_of", "inherited_classification", "new_header", "resolve_store", "select_store", "session_file_of"]

#: A ``storeOrDir`` argument: a store, a store URL, or a JSONL directory.
StoreOrDir = SessionStore | str | os.PathLike[str]
_R = TypeVar("_R")


def select_store(value: StoreOrDir | None) -> SessionStore:
    """The store a ``storeOrDir`` argument selects (docs/rules/manager.md seed:api).

    ``None``: the configured store (``SESSIONTREE_STORE``, else the shared
    SQLite database). A :class:`SessionStore`: itself. A store URL
    (``sqlite:///...``, ``jsonl:///...``, ``memory:``): that store. Any other
    string or path is a directory, which explicitly selects JSONL.

    Raises:
        StoreOpenError: the store cannot be opened (never a fallback to memory).
    """
    if value is None:
        return open_store(None)
    if isinstance(value, str) and (value == "memory:" or "://" in value):
        return open_store(value)
    if isinstance(value, (str, os.PathLike)):
        return JsonlStore(os.fspath(value))
    return value


def resolve_store(store: StoreOrDir | None, session_dir: str | os.PathLike[str] | None) -> SessionStore:
    """``store`` when given, else ``session_dir`` (JSONL), else the configured store."""
    return select_store(store if store is not None else session_dir)


def classification_of(internal: bool, workflow: Any) -> dict[str, Any] | None:
    """The ``internal``/``workflow`` pair to write, or ``None`` (docs/rules/listing.md O.3)."""
    if internal is True and is_classified({"internal": True, "workflow": workflow}):
        return {"internal": True, "workflow": workflow}
    return None


def inherited_classification(header: dict[str, Any]) -> dict[str, Any] | None:
    """The ``internal``/``workflow`` pair a copy of a classified session keeps, or ``None``."""
    return {"internal": True, "workflow": header["workflow"]} if is_classified(header) else None


def child_header(parent_id: str, cwd: str, session_id: str | None,
                 classification: dict[str, Any] | None) -> dict[str, Any]:
    """The header of a new session copied from ``parent_id`` (a fork, a branched session):
    :func:`new_header` with ``parentSessionId`` the parent's id, the classification last."""
    header = new_header(session_id, cwd, None, None)
    header["parentSessionId"] = parent_id
    if classification:
        header.update(classification)
    return header


def new_header(session_id: str | None, cwd: str, parent_session: str | None = None,
                classification: dict[str, Any] | None = None) -> dict[str, Any]:
    """A format-4 header in the key order of docs/rules/format.md A.3 (the seed's
    "SessionHeader" and "Session Version": ``createdAt`` and ``parentSessionId``).

    Args:
        session_id: the id to use, or ``None`` for a new UUIDv7 (docs/rules/format.md B.5).
        cwd: the working directory, stored as given.
        parent_session: the parent session's id, or a legacy path to its file that is
            looked up for the id (docs/rules/versions.md §3.3, decisions.md D-8); a path
            whose id cannot be found adds no ``parentSessionId`` (nothing is raised).
        classification: ``internal``/``workflow`` keys added last, or ``None``.

    Returns:
        A new dict ``{"type", "version": 4, "id", "createdAt", "cwd"[, "parentSessionId"]
        [, classification]}``; ``createdAt`` is now, ISO-8601 UTC with milliseconds.

    Raises:
        InvalidSessionIdError: ``session_id`` is not a valid session id (B.5).
    """
    header: dict[str, Any] = {
        "type": "session",
        "version": 4,
        "id": validate_session_id(session_id) if session_id is not None else new_session_id(),
        "createdAt": now_iso(),
        "cwd": cwd,
    }
    if parent_session is not None:
        # An id is taken as it is: only a legacy path needs a look-up (in_memory
        # must not touch the filesystem, and a file named like the id must not win).
        parent_id = parent_session if is_valid_session_id(parent_session) else parent_session_to_id(parent_session)
        if parent_id is not None:
            header["parentSessionId"] = parent_id
    if classification:
        header.update(classification)
    return header


def session_file_of(store: SessionStore, header: dict[str, Any], session_file: str | None) -> str | None:
    """The JSONL file of a session (existing or future): ``session_file`` when
    explicit, else where a store with files (:class:`SessionFiles`) has it or
    would create it; ``None`` for stores without files. A JSONL store looks on disk."""
    if session_file is not None:
        return session_file
    if isinstance(store, SessionFiles):
        return store.location(header["id"]) or store.path_for(header)
    return None


@dataclass(frozen=True, slots=True)
class Switch(Generic[_R]):
    """A prepared change of the session a manager is bound to, applied by
    :meth:`SessionManager._switch`.

    The ``_prepare_*`` methods build one, doing (and committing) whatever
    store work the change needs, without changing the manager: a failure
    leaves it as it was, and the asynchronous manager prepares off the event
    loop and applies the result on it.

    Attributes:
        header: the header from now on.
        tree: the entries from now on, or ``None`` to keep the entries, the
            leaf and the record of this process's appends (a header-only change).
        store: the store from now on.
        saved: whether the session exists in that store.
        session_file: the explicit JSONL path, if any.
        result: what the public method returns.
    """

    header: dict[str, Any]
    tree: SessionTree | None
    store: SessionStore
    saved: bool
    session_file: str | None
    result: _R
