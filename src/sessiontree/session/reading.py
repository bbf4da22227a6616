"""Sessions opened read-only: the one read service of every edge (issue 40 item 2;
docs/decisions/read-service.md).

The CLI's read commands (``show``, ``context``, ``export``, ``agent``), the viewer and
the MCP server open a stored session here, never by hand:

* **One strategy rule.** :func:`open_readonly` opens a session the way the store's
  declared traits (:func:`sessiontree.stores.traits.store_traits`) and the caller's
  :data:`Need` choose: ``"context"`` is the lazy open where the store
  ``opens_lazily`` (docs/stores.md, "Lazy open": the active branch's context now,
  the rest on first use), ``"outline"`` the skeletons where the store has
  ``partial_reads`` (full entries then by id, :meth:`ReadOnlySession.read_entries`),
  ``"whole"`` and every other case one ``store.read``. ``redact`` reads the whole
  session and redacts it once (:func:`sessiontree.core.secrets.redact_parsed`), so a
  placeholder is the same in every answer. Nothing here writes: ``read`` never
  persists an upgrade (docs/rules/decisions.md D-9), the lazy open never writes, and
  appends are impossible (no append method).
* **The leaf is an argument.** A :class:`ReadOnlySession` answers the seed's getters
  (docs/rules/manager.md seed:api) with its leaf fixed at the loaded leaf
  (docs/rules/tree.md F.1); every branch-dependent answer (branch, projection, context
  entries, historical projection) takes the leaf as an argument instead of moving one.
  Several threads share one session without an outside lock; its own lock only
  guards the records a lazy tree reads on first use and the answers it keeps.
* **One cache policy.** :class:`ReadOnlySessions` keeps the last ``size`` sessions of
  one store and re-reads a session when the store's change token
  (:func:`sessiontree.stores.changes.change_hint`) moves, or, for a store without one
  (memory, PostgreSQL), at most every ``min_reread`` seconds; a re-read that finds
  the same entries keeps the session and what it derived.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from sessiontree.core import projection as _projection
from sessiontree.core.tree import Entry, NameState, SessionTree, TreeNode
from sessiontree.format.codec import ParsedSession
from sessiontree.format.gcpause import gc_paused
from sessiontree.format.types import SessionHeader
from sessiontree.stores.base import SessionStore
from sessiontree.stores.changes import change_hint
from sessiontree.stores.traits import store_traits

if TYPE_CHECKING:
    # Start-up (docs/architecture.md): a whole read (show, export) never loads the session
    # manager and what it brings (import, check, the JSONL store); the lazy open does.
    from sessiontree.session.manager import SessionManager

__all__ = [
    "Need",
    "ReadOnlySession",
    "ReadOnlySessions",
    "open_readonly",
    "readonly_of_manager",
    "readonly_of_parsed",
]

#: What a caller needs of a session: ``"whole"`` every entry, parsed; ``"context"`` the
#: active branch's context first (the lazy open where the store has one); ``"outline"``
#: the tree's skeletons, full entries by id later (the viewer).
Need = Literal["whole", "context", "outline"]

_T = TypeVar("_T")


class ReadOnlySession:
    """One stored session as read, answering with the leaf as an argument.

    Build one with :func:`open_readonly`, :func:`readonly_of_parsed` or
    :meth:`ReadOnlySessions.get`, not directly. The getters are the seed's
    (``get_header``, ``get_entries``, ``get_tree``, ...); ``get_leaf_id`` is always the
    loaded leaf. ``leaf=None`` in an argument means the loaded leaf.

    Attributes:
        session_id: the session's id.
        store: the store it was read from (read-only use only).
        partial: the entries are skeletons (``read_skeleton``): the tree's layout is
            exact, full entries come from :meth:`read_entries` and :meth:`whole`.
        redacted: secrets were replaced when it was read.
    """

    def __init__(self, store: SessionStore, header: dict[str, Any], tree: SessionTree, *,
                 manager: SessionManager | None = None, partial: bool = False, redacted: bool = False) -> None:
        """Bind a read session (see the class docstring); ``manager`` is the private
        manager of a lazy open, kept for the loaded leaf's projection it built."""
        self.store = store
        self.session_id: str = str(header["id"])
        self.partial = partial
        self.redacted = redacted
        self._header = header
        self._tree = tree
        self._manager = manager
        self._loaded_leaf = tree.leaf_id
        self._lock = threading.RLock()
        self._kept: dict[Any, Any] = {}
        self._whole: ReadOnlySession | None = None if partial else self

    # ------------------------------------------------------------------ getters (the seed's)

    def get_session_id(self) -> str:
        """The exact session id."""
        return self.session_id

    def get_header(self) -> SessionHeader:
        """The session header as stored (docs/rules/format.md seed:header)."""
        return cast(SessionHeader, self._header)

    def get_session_store(self) -> SessionStore:
        """The store the session was read from (or a private empty one for a session
        given as read, :func:`readonly_of_parsed`)."""
        return self.store

    def get_leaf_id(self) -> str | None:
        """The loaded leaf (docs/rules/tree.md F.1): never moved."""
        return self._loaded_leaf

    def get_entries(self) -> list[Entry]:
        """All entries in file order (a new list; the entries are shared, never modify them)."""
        with self._lock:
            return list(self._tree.entries)

    def get_entry_index(self) -> Mapping[str, Entry]:
        """``{entry id: entry}`` of every entry (read-only use)."""
        with self._lock:
            return self._tree.by_id

    def get_entry(self, entry_id: str) -> Entry | None:
        """The entry with this id, or ``None``."""
        with self._lock:
            return self._tree.get_entry(entry_id)

    def get_children(self, parent_id: str | None) -> list[Entry]:
        """Direct children of ``parent_id`` in file order (docs/rules/tree.md H.6)."""
        with self._lock:
            return self._tree.get_children(parent_id)

    def get_label(self, entry_id: str) -> str | None:
        """The current label of ``entry_id`` (docs/rules/tree.md I)."""
        with self._lock:
            return self._tree.get_label(entry_id)

    def get_tree(self) -> list[TreeNode]:
        """The whole tree: roots in file order, children oldest first, labels resolved (H)."""
        with self._lock:
            return self._tree.get_tree()

    def get_session_name(self) -> str | None:
        """The display name, ``None`` when never named or cleared (docs/rules/listing.md J.3)."""
        return self.get_session_name_state().name

    def get_session_name_state(self) -> NameState:
        """Never named / cleared / named (docs/rules/format.md seed:session-info-entry)."""
        with self._lock:
            return self._tree.name_state()

    def __len__(self) -> int:
        return len(self._tree)

    @property
    def version(self) -> str:
        """``"<entry count>:<last entry id>"``: what changes when entries are added
        (the viewer's live updates compare it). A lazily opened session names its loaded
        leaf instead of its last entry: reading that record would read them all."""
        with self._lock:
            count = len(self._tree)
            if self._manager is not None:
                return f"{count}:{self._loaded_leaf or ''}"
            last = self._tree.entries_from(count - 1) if count else []
            return f"{count}:{last[0].get('id') if last else ''}"

    # ------------------------------------------------------------------ answers at a leaf

    def _leaf(self, leaf: str | None) -> str | None:
        """``leaf`` checked (``None``: the loaded leaf).

        Raises:
            EntryNotFoundError: ``leaf`` is not an entry of the session.
        """
        if leaf is None:
            return self._loaded_leaf
        self._tree.require(leaf)
        return leaf

    def get_branch(self, leaf: str | None = None) -> list[Entry]:
        """Entries from the root to ``leaf`` (default: the loaded leaf), root first
        (docs/rules/tree.md F.6).

        Raises:
            EntryNotFoundError: unknown ``leaf``.
        """
        with self._lock:
            at = self._leaf(leaf)
            return self._tree.get_branch(at) if at is not None else []

    def build_session_projection(self, leaf: str | None = None) -> _projection.SessionProjection:
        """The model-visible projection of the branch ending at ``leaf`` (default: the loaded
        leaf; docs/rules/projection.md seed:context-building), built once per leaf. Calls
        left open at the branch's end are closed (D-11: nothing here was appended).

        Raises:
            EntryNotFoundError: unknown ``leaf``.
        """
        with self._lock:
            at = self._leaf(leaf)
            key = ("projection", at)
            if key not in self._kept:
                if at == self._loaded_leaf and self._manager is not None:
                    # The lazy open built this leaf's projection from the records it needs.
                    self._kept[key] = self._manager.build_session_projection()
                else:
                    tree = self._full_tree()
                    self._kept[key] = _projection.build_session_projection(tree.entries, at, by_id=tree.by_id)
            projection: _projection.SessionProjection = self._kept[key]
            return projection

    def build_historical_projection(self, leaf: str | None = None) -> _projection.HistoricalProjection:
        """The context at ``leaf`` as the agent that wrote its latest retired summary
        compaction rebuilt it (archival; :func:`sessiontree.core.projection.build_historical_projection`).

        Raises:
            EntryNotFoundError: unknown ``leaf``.
        """
        with self._lock:
            at = self._leaf(leaf)
            tree = self._full_tree()
            return _projection.build_historical_projection(tree.entries, at, by_id=tree.by_id)

    def build_context_entries(self, leaf: str | None = None) -> list[Entry]:
        """The branch's entries after its latest compaction boundary (docs/rules/projection.md Q.13).

        Raises:
            EntryNotFoundError: unknown ``leaf``.
        """
        with self._lock:
            at = self._leaf(leaf)
            tree = self._full_tree()
            return _projection.build_context_entries(tree.entries, at, by_id=tree.by_id)

    def _full_tree(self) -> SessionTree:
        """The tree with every entry parsed (a skeleton session's whole read; the caller holds the lock)."""
        return self._tree if not self.partial else self.whole()._tree

    # ------------------------------------------------------------------ full entries

    def whole(self) -> ReadOnlySession:
        """This session with every entry parsed: itself unless it holds skeletons, else
        the whole session read once (``store.read``)."""
        with self._lock:
            if self._whole is None:
                parsed = self.store.read(self.session_id)
                with gc_paused():
                    self._whole = ReadOnlySession(self.store, parsed.header, SessionTree(parsed.entries))
            return self._whole

    def read_entries(self, ids: Iterable[str]) -> list[Entry]:
        """The full entries of ``ids`` (unknown ids left out): from the session held whole,
        else by id from the store (``read_entries``)."""
        with self._lock:
            held = self._whole
        if held is not None:
            return [entry for entry in map(held.get_entry, ids) if entry is not None]
        return self.store.read_entries(self.session_id, list(ids))

    def kept(self, key: tuple[Any, ...], compute: Callable[[], _T], *, bound: int | None = None) -> _T:
        """``compute()`` once per read of this session (a re-read with new entries starts
        afresh): what an edge derives from a session and shows again, under ``key``.
        With ``bound``, at most that many values whose keys share ``key[0]`` are kept
        (the oldest dropped first)."""
        with self._lock:
            if key not in self._kept:
                self._kept[key] = compute()
                if bound is not None:
                    group = [k for k in self._kept if isinstance(k, tuple) and k[:1] == key[:1]]
                    for old in group[:max(0, len(group) - bound)]:
                        del self._kept[old]
            value: _T = self._kept[key]
            return value


def readonly_of_parsed(parsed: ParsedSession, *, redacted: bool = False) -> ReadOnlySession:
    """A session already read (``store.read``, a file), for reading it: bound as it is,
    not copied, to a private empty store (its entries must not be modified afterwards).

    Raises:
        InvalidSessionError: two entries share an id.
    """
    with gc_paused():  # one index entry per entry; no cycles (see sessiontree.format.gcpause)
        tree = SessionTree(parsed.entries)
    from sessiontree.stores.memory import MemoryStore

    return ReadOnlySession(MemoryStore(), parsed.header, tree, redacted=redacted)


def readonly_of_manager(manager: SessionManager) -> ReadOnlySession:
    """A caller's open manager read as it stands: its entries, with its current leaf as the
    loaded leaf (the manager is not changed, and later appends to it are not seen)."""
    with gc_paused():
        tree = SessionTree(manager.get_entries())
    session = ReadOnlySession(manager.get_session_store(), dict(manager.get_header()), tree)
    session._loaded_leaf = manager.get_leaf_id()
    return session


def open_readonly(store: SessionStore, session_id: str, need: Need = "whole", *,
                  redact: bool = False) -> ReadOnlySession:
    """Open the stored session for reading, by the one strategy rule (module docstring).

    Args:
        store: any store (a read-only one too).
        session_id: the exact id (resolve a prefix first: :mod:`sessiontree.format.idprefix`).
        need: what the caller needs (:data:`Need`); the store's traits choose how.
        redact: read it whole and replace its secrets (docs/secrets.md).

    Raises:
        SessionNotFoundError: no such session.
        InvalidSessionError, StorageError: the stored session cannot be read.
    """
    traits = store_traits(store)
    if redact:
        from sessiontree.core.secrets import redact_parsed

        parsed = redact_parsed(store.read(session_id))[0]
        session = readonly_of_parsed(parsed, redacted=True)
        session.store = store
        return session
    if need == "outline" and traits.partial_reads:
        # A large session's skeletons cost far less than its full read and parse
        # (docs/viewer.md, "What is sent when"); elsewhere they would read everything.
        parsed = store.read_skeleton(session_id)
        with gc_paused():
            tree = SessionTree(parsed.entries)
        return ReadOnlySession(store, parsed.header, tree, partial=True)
    if need == "context" and traits.opens_lazily:
        # The lazy open reads and never writes (docs/stores.md, "Lazy open").
        from sessiontree.session.manager import SessionManager

        manager = SessionManager.open(store, session_id)
        # The manager's own (lazy) tree: this module is its package's reader of it.
        return ReadOnlySession(store, dict(manager.get_header()), manager._tree, manager=manager)
    session = readonly_of_parsed(store.read(session_id))
    session.store = store
    return session


class _Held:
    """A cached session with its change token and when it was last checked."""

    __slots__ = ("checked", "session", "token")

    def __init__(self, session: ReadOnlySession, token: Any, checked: float) -> None:
        self.session, self.token, self.checked = session, token, checked


class ReadOnlySessions:
    """The read service over one store: sessions opened once (:func:`open_readonly`),
    kept while the store's change token does not move (module docstring, "One cache
    policy"). Thread-safe; the store stays owned by the caller.
    """

    def __init__(self, store: SessionStore, need: Need = "whole", *, size: int = 4, redact: bool = False,
                 min_reread: float = 0.5) -> None:
        """Serve ``store``'s sessions as ``need`` says (``redact``: each read whole and
        redacted), at most ``size`` at once; a store without a change token is read
        again at most every ``min_reread`` seconds."""
        self.store = store
        self.need: Need = need
        self.size = size
        self.redact = redact
        self.min_reread = min_reread
        self._held: OrderedDict[str, _Held] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session_id: str) -> ReadOnlySession:
        """The session, read again if the store shows a change.

        Raises:
            SessionNotFoundError: no such session.
            InvalidSessionError, StorageError: the stored session cannot be read.
        """
        with self._lock:  # one read of a session at a time: two requests never read it twice
            held = self._held.get(session_id)
            now = time.monotonic()
            token = change_hint(self.store, session_id)
            if held is not None:
                same = token == held.token if token is not None else now - held.checked < self.min_reread
                if same:
                    self._held.move_to_end(session_id)
                    return held.session
            session = open_readonly(self.store, session_id, self.need, redact=self.redact)
            if held is not None and held.session.version == session.version:
                held.token, held.checked = token, now  # nothing new: keep what was derived
                return held.session
            self._held[session_id] = _Held(session, token, now)
            self._held.move_to_end(session_id)
            while len(self._held) > self.size:
                self._held.popitem(last=False)
            return session

