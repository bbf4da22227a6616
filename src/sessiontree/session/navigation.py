"""The reading half of :class:`~sessiontree.session.manager.SessionManager`: the seed's
"Tree Navigation" and "Context & Info" methods (docs/rules/manager.md seed:api) over one
open session's tree, leaf and header.

:class:`SessionNavigation` owns no store work: it reads the state the manager binds
(``_tree``, ``_header``, ``_cwd``, ``_store``, the ids this process appended) and keeps
the projection's state between calls, extended rather than rebuilt as entries are
appended (:meth:`SessionNavigation.build_session_projection`). ``branch`` and
``reset_leaf`` move the leaf and write nothing (docs/rules/tree.md F.3, F.4). The
manager (factories, session management, appends) is its one subclass.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, cast

from sessiontree.core import projection as _projection
from sessiontree.core.projection import context as _projection_context
from sessiontree.core.tree import Entry, NameState, SessionTree, TreeNode
from sessiontree.format.gcpause import gc_paused
from sessiontree.format.types import SessionHeader
from sessiontree.session.binding import session_file_of
from sessiontree.stores.base import SessionFiles, SessionStore
from sessiontree.stores.traits import store_traits

__all__ = ["SessionNavigation"]


class SessionNavigation:
    """Getters, leaf moves and the model context of one open session (module docstring).

    Attributes are bound by the subclass's constructor.
    """

    _store: SessionStore
    _header: dict[str, Any]
    _tree: SessionTree
    _cwd: str
    #: The explicit JSONL path (``open_file``), if any.
    _session_file: str | None
    #: Ids this process appended: their tools may still run (docs/rules/decisions.md D-11).
    _appended: set[str]
    #: The last projection's state, for the tree it was built from and the number of
    #: entries it has seen (see _current_projector).
    _projector: tuple[SessionTree, int, _projection.ProjectionBuilder] | None
    #: The raw branch of a leaf whose projection was built the one-pass way: (tree, leaf
    #: id, a list whose first n items are that branch, n, a list whose first n items are
    #: the build's steps for them); see _current_projector.
    _branch: tuple[SessionTree, str | None, list[Entry], int, _projection.PlainSteps] | None

    # ------------------------------------------------------------------ navigation

    def get_leaf_id(self) -> str | None:
        """The current leaf id, or ``None`` (docs/rules/tree.md F.5)."""
        return self._tree.leaf_id

    def get_leaf_entry(self) -> Entry | None:
        """The current leaf entry, or ``None``."""
        return self._tree.get_entry(self._tree.leaf_id) if self._tree.leaf_id is not None else None

    def get_entry(self, entry_id: str) -> Entry | None:
        """The entry with this id, or ``None``."""
        return self._tree.get_entry(entry_id)

    def get_branch(self, from_id: str | None = None) -> builtins.list[Entry]:
        """Entries from the root to ``from_id`` (default: the leaf), root first (docs/rules/tree.md F.6)."""
        return self._tree.get_branch(from_id)

    def get_tree(self) -> builtins.list[TreeNode]:
        """The whole tree: roots in file order, children oldest first, labels resolved (H)."""
        return self._tree.get_tree()

    def get_children(self, parent_id: str | None) -> builtins.list[Entry]:
        """Direct children of ``parent_id`` in file order (docs/rules/tree.md H.6)."""
        return self._tree.get_children(parent_id)

    def get_label(self, entry_id: str) -> str | None:
        """The current label of ``entry_id`` (I)."""
        return self._tree.get_label(entry_id)

    def branch(self, entry_id: str) -> None:
        """Move the leaf to an earlier entry; writes nothing (docs/rules/tree.md F.3).

        Raises:
            EntryNotFoundError: unknown id.
        """
        self._tree.require(entry_id)
        self._tree.leaf_id = entry_id

    def reset_leaf(self) -> None:
        """Set the leaf to ``None``: the next append starts a new root (docs/rules/tree.md F.4)."""
        self._tree.leaf_id = None

    # ------------------------------------------------------------------ context

    def _repair_trailing(self) -> bool:
        # docs/rules/decisions.md D-11: trailing calls of a turn appended by this process may still be
        # running. Walk up from the leaf only as far as the last assistant turn.
        if not self._appended:
            return True
        get = self._tree.get_entry
        seen: set[str] = set()
        current = self._tree.leaf_id
        while current is not None and current not in seen:
            entry = get(current)
            if entry is None:
                break
            message = entry.get("message") if entry.get("type") == "message" else None
            if isinstance(message, dict) and message.get("role") == "assistant":
                return current not in self._appended
            seen.add(current)
            current = entry.get("parentId")
        return True

    def _current_projector(self) -> _projection.ProjectionBuilder:
        """The projection state of the active branch, extended rather than rebuilt when possible.

        Entries are only ever appended, so a projection built for leaf L
        stays right for as long as the leaf is L, and grows by the entries
        appended below it. Anything else (another leaf, a new compaction
        boundary, a context edit, another tree, fewer entries after a rolled
        back write) builds it afresh.
        """
        tree = self._tree
        cached = self._projector
        count = len(tree)  # len(), not len(tree.entries): a lazy tree answers it without reading
        if cached is not None and cached[0] is tree and cached[1] <= count:
            _, seen, projector = cached
            fresh = True
            for entry in tree.entries_from(seen) if seen < count else ():
                # Entries on other branches are skipped: they can never be
                # ancestors of a leaf that the projector reaches.
                if entry.get("parentId") == projector.leaf_id and not projector.advance(entry):
                    fresh = False
                    break
            if fresh and projector.leaf_id == tree.leaf_id:
                self._projector = (tree, count, projector)
                return projector
        # A plain branch (no boundary, no edit) seen by an earlier build of the same
        # leaf is projected without walking it again, from the steps that build
        # derived from each entry (projection.incremental.plain_step): entries are only ever
        # appended and never changed, so a leaf's branch and those steps never change.
        branch = ops = None
        kept = self._branch
        if (kept is not None and kept[0] is tree and kept[1] == tree.leaf_id
                and kept[3] <= len(kept[2]) and kept[3] <= len(kept[4])):
            n = kept[3]
            branch = kept[2] if n == len(kept[2]) else kept[2][:n]
            ops = kept[4].prefix(n)
        with gc_paused():
            projector = _projection.ProjectionBuilder.build(
                tree.entries, tree.leaf_id, tree.by_id, branch=branch, ops=ops,
                links=lambda: tree.ancestor_links(_projection_context.REMOTE_KINDS))
        self._projector = (tree, len(tree), projector)
        if projector.plain_branch is not None and projector.plain_ops is not None:
            self._branch = (tree, tree.leaf_id, projector.plain_branch, len(projector.plain_branch),
                            projector.plain_ops)
        return projector

    def build_session_projection(self) -> _projection.SessionProjection:
        """The model-visible projection of the active branch
        (docs/rules/projection.md seed:context-building, spec:projection).

        Same result as :func:`sessiontree.core.projection.build_session_projection`
        for the leaf (with docs/rules/decisions.md D-11 trailing repair unless the last assistant turn
        was appended by this manager), but the manager keeps the projection's
        state between calls: after appending a turn, the next call costs in
        proportion to the new entries (plus copying the message list), not
        to the branch. A new boundary, a context edit or a leaf move
        rebuilds it.
        """
        return self._current_projector().result(self._repair_trailing())

    def build_session_context(self) -> _projection.SessionContext:
        """Messages, thinking level and model for the model
        (docs/rules/projection.md seed:context-building)."""
        projection = self.build_session_projection()
        return _projection.SessionContext(messages=projection.messages, thinking_level=projection.thinking_level,
                                          model=projection.model)

    def build_historical_projection(self) -> _projection.HistoricalProjection:
        """The active branch's context as the agent that wrote its latest retired
        summary compaction rebuilt it: an archival view, never what a current
        agent sends (see :func:`sessiontree.core.projection.build_historical_projection`).

        Trailing tool calls are closed as in :meth:`build_session_projection`.
        Built afresh on every call; nothing is written.
        """
        return _projection.build_historical_projection(self._tree.entries, self._tree.leaf_id,
                                                       by_id=self._tree.by_id,
                                                       repair_trailing=self._repair_trailing())

    def build_context_entries(self) -> builtins.list[Entry]:
        """Active-branch entries after the latest compaction boundary (docs/rules/projection.md Q.13)."""
        return _projection.build_context_entries(self._tree.entries, self._tree.leaf_id, by_id=self._tree.by_id)

    # ------------------------------------------------------------------ getters

    def get_entries(self) -> builtins.list[Entry]:
        """All entries, header excluded, in file order (a new list; entries shared)."""
        return builtins.list(self._tree.entries)

    def get_entry_index(self) -> Mapping[str, Entry]:
        """A read-only view of the ``{entry id: entry}`` index the manager keeps (no copy:
        it follows later appends), for a caller that walks paths itself."""
        return MappingProxyType(self._tree.by_id)

    def get_header(self) -> SessionHeader:
        """The session header (docs/rules/format.md seed:header): the stored object itself,
        unknown fields kept; typed by the fields the format defines."""
        return cast(SessionHeader, self._header)

    def get_session_name(self) -> str | None:
        """The display name, ``None`` when never named or cleared (docs/rules/listing.md J.3)."""
        return self._tree.name_state().name

    def get_session_name_state(self) -> NameState:
        """Never named / cleared / named (docs/rules/format.md seed:session-info-entry)."""
        return self._tree.name_state()

    def get_cwd(self) -> str:
        """The absolute working directory."""
        return self._cwd

    def get_session_dir(self) -> str:
        """The JSONL directory, or ``""`` for stores without files."""
        return self._store.directory if isinstance(self._store, SessionFiles) else ""

    def get_session_id(self) -> str:
        """The exact session id."""
        session_id: str = self._header["id"]
        return session_id

    def get_session_store(self) -> SessionStore:
        """The active store."""
        return self._store

    def is_persisted(self) -> bool:
        """Whether the store keeps sessions beyond the process (``StoreTraits.persisted``:
        every store but the memory store)."""
        return store_traits(self._store).persisted

    def get_session_file(self) -> str | None:
        """The JSONL file of this session (existing or future), or ``None``."""
        return session_file_of(self._store, self._header, self._session_file)
