"""What two branches a diff compares: the sessions read once each and the sides resolved
(docs/diff.md, "What is compared"): leaf ids, unique prefixes, ``SESSION:LEAF`` for another
session, and the defaults. Shared by the comparison from a whole read
(:mod:`sessiontree.diff.branches`) and the one from a store's summaries
(:mod:`sessiontree.diff.summarised`), which answer the same questions of a session
(:class:`_Leaves`) from its entries or from its outline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from sessiontree.core.diff import leaf_ids
from sessiontree.core.projection import SessionProjection
from sessiontree.core.tree import loaded_leaf_id
from sessiontree.errors import (
    AmbiguousEntryPrefixError,
    AmbiguousSessionPrefixError,
    SessionError,
    UnknownEntryPrefixError,
    UnknownSessionPrefixError,
)
from sessiontree.format.idprefix import resolve_entry_prefix, resolve_session_prefix
from sessiontree.format.types import Entry
from sessiontree.stores.base import SessionStore

__all__ = ["DiffInputError", "OpenSession"]


@runtime_checkable
class OpenSession(Protocol):
    """What :func:`diff_branches` uses of an open manager (a
    :class:`~sessiontree.session.manager.SessionManager` is one; naming the protocol
    keeps this module off the concrete stores the manager module imports)."""

    def get_session_id(self) -> str:
        """The open session's id."""
        ...

    def get_entries(self) -> list[Entry]:
        """Its entries in file order."""
        ...

    def get_session_store(self) -> SessionStore:
        """The store it belongs to."""
        ...

    def get_leaf_id(self) -> str | None:
        """Its active leaf."""
        ...

    def get_entry_index(self) -> Mapping[str, Entry]:
        """Its ``{entry id: entry}`` index as kept (no copy)."""
        ...

    def build_session_projection(self) -> SessionProjection:
        """The projection of its active leaf (kept between calls)."""
        ...


class DiffInputError(SessionError, ValueError):
    """What to compare cannot be resolved: an unknown or ambiguous session or entry
    id, a malformed ``session:leaf``, or a session with fewer than two branches when
    no leaf is given. The message is one line naming the value."""


@dataclass
class _Side:
    session_id: str
    leaf: str


class _Sessions:
    """Sessions loaded once each, from the manager when it holds them, else read from the store
    (read-only, docs/rules/decisions.md D-9)."""

    def __init__(self, source: OpenSession | SessionStore) -> None:
        if isinstance(source, OpenSession):
            self.manager: OpenSession | None = source
            self.store: SessionStore = source.get_session_store()
        else:
            self.manager = None
            self.store = source
        self.loaded: dict[str, Sequence[Entry]] = {}
        self.indexes: dict[str, Mapping[str, Entry]] = {}

    def resolve(self, text: str) -> str:
        """The one session id equal to or starting with ``text``."""
        if self.manager is not None and text == self.manager.get_session_id():
            return text
        if self.store.exists(text) if text else False:
            return text
        ids = self.store.session_ids()
        if self.manager is not None:
            ids = [*ids, self.manager.get_session_id()]
        try:
            # The one session-prefix rule of every edge (format/idprefix.py: subagents under their parent).
            return resolve_session_prefix(text, dict.fromkeys(ids))
        except (UnknownSessionPrefixError, AmbiguousSessionPrefixError) as exc:
            raise DiffInputError(str(exc)) from exc

    def projection(self, side: _Side) -> SessionProjection | None:
        """The manager's kept projection when ``side`` is its session's active leaf, else ``None``."""
        if (self.manager is not None and side.session_id == self.manager.get_session_id()
                and side.leaf == self.manager.get_leaf_id()):
            return self.manager.build_session_projection()
        return None

    def entries(self, session_id: str) -> Sequence[Entry]:
        found = self.loaded.get(session_id)
        if found is None:
            if self.manager is not None and session_id == self.manager.get_session_id():
                found = self.manager.get_entries()
            else:
                found = self.store.read(session_id).entries
            self.loaded[session_id] = found
        return found

    def index(self, session_id: str) -> Mapping[str, Entry]:
        """``{id: entry}`` of a loaded session's entries: the manager's own index for its
        session (:meth:`OpenSession.get_entry_index`), else built once."""
        found = self.indexes.get(session_id)
        if found is None:
            if self.manager is not None and session_id == self.manager.get_session_id():
                found = self.manager.get_entry_index()
            else:
                found = {e["id"]: e for e in self.entries(session_id) if isinstance(e.get("id"), str)}
            self.indexes[session_id] = found
        return found


def _unique(prefix: str, candidates: Sequence[str], what: str) -> str:
    """The one entry id ``prefix`` names: the rule of every edge (format/idprefix.py)."""
    try:
        return resolve_entry_prefix(prefix, candidates, what=what)
    except (UnknownEntryPrefixError, AmbiguousEntryPrefixError) as exc:
        raise DiffInputError(str(exc)) from None


def _entry_ids(entries: Sequence[Entry]) -> list[str]:
    return [e["id"] for e in entries if isinstance(e.get("id"), str) and e.get("type") != "leaf"]


class _Leaves(Protocol):
    """What resolving a side asks of one session: its loaded leaf, its leaves most recent
    first (:func:`~sessiontree.core.diff.leaf_ids`), whether an id is a whole entry id
    (not a ``leaf`` record), and its entry ids for a prefix."""

    def loaded(self) -> str | None: ...
    def recent(self) -> list[str]: ...
    def has(self, entry_id: str) -> bool: ...
    def ids(self) -> list[str]: ...


class _EntryLeaves:
    """:class:`_Leaves` of a session's loaded entries."""

    def __init__(self, sessions: _Sessions, session_id: str) -> None:
        self.sessions, self.session_id = sessions, session_id

    def loaded(self) -> str | None:
        return loaded_leaf_id(self.sessions.entries(self.session_id))

    def recent(self) -> list[str]:
        return leaf_ids(self.sessions.entries(self.session_id))

    def has(self, entry_id: str) -> bool:
        whole = self.sessions.index(self.session_id).get(entry_id)
        return whole is not None and whole.get("type") != "leaf"

    def ids(self) -> list[str]:
        return _entry_ids(self.sessions.entries(self.session_id))


def _side(sessions: _Sessions, leaves: _Leaves, session_id: str, spec: str) -> _Side:
    """``LEAF`` (an entry of ``session_id``) or ``SESSION:LEAF`` (``SESSION:`` alone: that
    session's leaf as loaded); ids may be unique prefixes."""
    sid = session_id
    leaf_text = spec
    if ":" in spec:
        other, _, leaf_text = spec.partition(":")
        if not other:
            raise DiffInputError(f"{spec!r}: expected SESSION:LEAF")
        sid = sessions.resolve(other)
        leaves = _EntryLeaves(sessions, sid)
    if not leaf_text:
        leaf = leaves.loaded()
        if leaf is None:
            raise DiffInputError(f"session {sid} has no leaf to compare")
        return _Side(sid, leaf)
    if leaves.has(leaf_text):  # a whole id: no need to list them all
        return _Side(sid, leaf_text)
    return _Side(sid, _unique(leaf_text, leaves.ids(), f"entry of session {sid}"))


def _defaults(sessions: _Sessions, leaves: _Leaves, session_id: str, a: str | None,
              b: str | None) -> tuple[_Side, _Side]:
    """The sides to compare; a missing side is the session's active leaf, or its most recent
    other leaf when the given side is the active one; with neither given, the two most
    recent leaves (the older is A)."""
    if a is not None and b is not None:
        return _side(sessions, leaves, session_id, a), _side(sessions, leaves, session_id, b)
    recent = leaves.recent()
    if a is None and b is None:
        if len(recent) < 2:
            raise DiffInputError(f"session {session_id} has {len(recent)} branch(es): give the leaves to compare")
        return _Side(session_id, recent[1]), _Side(session_id, recent[0])
    given = _side(sessions, leaves, session_id, a if a is not None else b)  # type: ignore[arg-type]
    active = leaves.loaded()
    other = active if active is not None and (active != given.leaf or given.session_id != session_id) else None
    if other is None:
        rest = [leaf for leaf in recent if leaf != given.leaf]
        if not rest:
            raise DiffInputError(f"session {session_id} has no other branch to compare {given.leaf} with")
        other = rest[0]
    second = _Side(session_id, other)
    return (given, second) if a is not None else (second, given)
