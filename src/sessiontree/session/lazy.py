"""The lazy open of a stored session: read what the context needs now, the rest on first use.

What a user waits for when resuming a session is its context. For a session
with an active compaction boundary, that is the part of the active branch
after the boundary, its kept tail and a few records from further up
(:meth:`sessiontree.core.projection.ProjectionBuilder.build_partial`); the other
records (typically nearly all of a long session) are neither parsed nor
read. :func:`open_lazy` builds that much from the store's outline
(:meth:`~sessiontree.stores.base.SessionStore.read_outline`: ids, parent ids
and types, no record parsed) and returns a :class:`LazySessionTree`, which
reads the rest of the session when something first asks for it
(docs/stores.md, "Lazy open").

Invariants:

* **Same answers.** Every getter, projection and append of a manager over a
  lazy tree gives what it gives over the fully loaded tree (a Hypothesis
  property in ``tests/session/test_lazy_open.py`` compares them on random trees).
* **The snapshot of the open.** Records are read later from the rows the
  outline saw; rows appended since by other writers are never taken in (as
  with a full open, which reads them neither). If the session was replaced or
  deleted meanwhile, :class:`~sessiontree.errors.SessionChangedError` is raised
  rather than mixing two versions.
* **Falls back.** Wherever laziness could give another answer or another
  error than a full load, or would save little, :func:`open_lazy` returns
  ``None`` and the caller loads everything: no ``compaction`` record among the
  last :data:`PROBE` records, no active boundary on the branch, a final ``leaf`` record,
  duplicate ids, a parent cycle, a record that fails its checks (the full load
  then reports the first failure in file order), a record whose JSON
  disagrees with the store's copied columns, a schema without checksums.
* **Errors of unread records come late.** A record that is never read is never
  checked: a damaged record off the context is reported (``CorruptEntryError``,
  ``InvalidSessionError``) by the call that first reads it, not by ``open``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from sessiontree.core.projection import ProjectionBuilder
from sessiontree.core.tree import (
    LEAF_ENTRY_TYPE,
    Entry,
    NameState,
    SessionTree,
    label_state,
    session_name_state,
)
from sessiontree.errors import EntryNotFoundError, InvalidSessionError, SessionChangedError
from sessiontree.format.gcpause import gc_paused
from sessiontree.stores.base import SessionOutline, SessionStore
from sessiontree.stores.traits import HeldLoads, RecentEntryTypes

__all__ = ["PROBE", "LazySessionTree", "RecordSource", "open_held", "open_lazy"]

#: How many of a session's last records are looked at for a compaction before the
#: lazy open reads an outline: a boundary further back leaves too little to save
#: for the outline's cost, and a session never compacted (the common case) pays
#: only these look-ups.
PROBE = 4096


class RecordSource(Protocol):
    """Where a :class:`LazySessionTree` reads the records it has not read yet: a store
    (``read_entries_at`` of its outline), or a session held as its stored bytes
    (:func:`open_held`)."""

    @property
    def url(self) -> str:
        """The store's URL, for error messages."""
        ...

    def read_entries_at(self, outline: SessionOutline, positions: Sequence[int]) -> list[Entry]:
        """The full entries at ``positions`` of ``outline`` (see ``SessionStore.read_entries_at``)."""
        ...


class _Drift(Exception):
    """A record's JSON disagrees with the store's copied columns (a store edited by hand)."""


def _check_columns(outline: SessionOutline, positions: Sequence[int], entries: Sequence[Entry]) -> None:
    ids, parents, types = outline.ids, outline.parent_ids, outline.types
    for position, entry in zip(positions, entries, strict=False):
        if (entry.get("id"), entry.get("parentId"), entry.get("type")) != (
                ids[position], parents[position], types[position]):
            raise _Drift(position)


def open_lazy(store: SessionStore, session_id: str) -> tuple[dict[str, Any], LazySessionTree,
                                                              ProjectionBuilder] | None:
    """Open a session reading only what its active branch's projection needs.

    Args:
        store: any store. Only one that reads outlines from columns, which it says
            by having ``recent_entry_types(session_id, count)`` (SQLite), is
            opened lazily; for any other this returns ``None`` at once (its
            generic outline is a full read).
        session_id: the exact session id.

    Returns:
        ``(header, tree, builder)``: the header, a :class:`LazySessionTree`
        whose leaf is the loaded leaf (docs/rules/tree.md F.1), and the
        projection of that leaf's branch; or ``None`` when the session must be
        loaded in full instead (see the module's "Falls back").

    Raises:
        SessionNotFoundError: no such session.
        StorageError: the store could not be read.
    """
    if not isinstance(store, RecentEntryTypes) or "compaction" not in store.recent_entry_types(session_id, PROBE):
        # No compaction near the end: the context is (nearly) the whole branch, and the
        # outline would only add to the full load. A few thousand row look-ups decide.
        return None
    try:
        outline = store.read_outline(session_id)
    except InvalidSessionError:
        return None  # the full load reports it, with the same precedence as always
    count = len(outline)
    if count == 0 or outline.stamps is None or outline.types[-1] == LEAF_ENTRY_TYPE:
        return None
    with gc_paused():  # one index item per entry, no cycles (see sessiontree.format.gcpause)
        position_of = dict(zip(outline.ids, range(count), strict=False))
    if len(position_of) != count:
        return None  # duplicate ids: the full load raises for the first one
    # The loaded leaf's branch (docs/rules/tree.md F.1, F.6), from the columns.
    parents, get = outline.parent_ids, position_of.get
    path: list[int] = []
    push = path.append
    current: int | None = count - 1
    steps = count
    while current is not None:
        push(current)
        steps -= 1
        if steps < 0:
            return None  # a parent cycle: the full build stops where an id repeats
        parent = parents[current]
        current = get(parent) if parent is not None else None
    path.reverse()

    def fetch(branch_positions: list[int]) -> Sequence[Entry]:
        positions = [path[i] for i in branch_positions]
        entries = store.read_entries_at(outline, positions)
        _check_columns(outline, positions, entries)
        return entries

    ids, types = outline.ids, outline.types
    try:
        with gc_paused():
            built = ProjectionBuilder.build_partial(list(map(ids.__getitem__, path)),
                                                    list(map(parents.__getitem__, path)),
                                                    list(map(types.__getitem__, path)), fetch)
    except (InvalidSessionError, SessionChangedError, _Drift):
        return None  # the full load gives the answer (or the first error in file order)
    if built is None:
        return None
    builder, read = built
    tree = LazySessionTree(store, outline, position_of, {path[i]: entry for i, entry in read.items()})
    return outline.header, tree, builder


def open_held(store: SessionStore, session_id: str) -> tuple[dict[str, Any], LazySessionTree] | None:
    """Open a session with every record checked now and held as its stored bytes, each
    parsed when first used (docs/decisions/held-records.md; ``SessionManager.open(...,
    lazy=False)``).

    Args:
        store: any store. Only one that can hold a session (``load_held``, SQLite)
            is opened this way; for any other this returns ``None`` at once.
        session_id: the exact session id.

    Returns:
        ``(header, tree)``: the header and a :class:`LazySessionTree` over the held
        records, none read yet, whose leaf is the loaded leaf (docs/rules/tree.md
        F.1); or ``None`` when the session must be loaded the plain way (the
        store declined, see ``SqliteStore.load_held``, or the leaf's branch has a
        parent cycle).

    Raises:
        SessionNotFoundError: no such session.
        StorageError: the store could not be read.
    """
    if not isinstance(store, HeldLoads):
        return None
    held = store.load_held(session_id)
    if held is None:
        return None
    outline, position_of = held.outline, held.position_of
    parents, get = outline.parent_ids, position_of.get
    current: int | None = len(outline) - 1 if len(outline) else None
    steps = len(outline)
    while current is not None:  # the leaf's branch, for a parent cycle (the plain build stops at it)
        steps -= 1
        if steps < 0:
            return None
        parent = parents[current]
        current = get(parent) if parent is not None else None
    return outline.header, LazySessionTree(held, outline, position_of, {})


class LazySessionTree(SessionTree):
    """A :class:`~sessiontree.core.tree.SessionTree` over a stored session of which only some
    entries were read; the others are read on first use.

    Cheap without reading the rest: the leaf, ``len``, ``in``, :meth:`add` and
    :meth:`pop` (appends and their rollback), :meth:`entries_from` past the
    opened entries, :meth:`get_entry` and :meth:`require` (one record when it
    was not read yet), :meth:`get_children`, :attr:`labels` and
    :meth:`name_state` (only the records concerned), :meth:`get_branch` of a
    branch mostly read already. Anything that needs every entry (``entries``,
    ``by_id``, :meth:`get_tree`, ...) reads the rest once, in one read
    snapshot, and the object then *becomes* a plain ``SessionTree`` (same
    object, so whatever holds it keeps it), holding the same entry dicts as
    before for the entries already read.

    Raises (from anything that reads): ``SessionChangedError`` when the
    session was replaced or deleted since it was opened; ``CorruptEntryError``
    or ``InvalidSessionError`` for a damaged record read then (see the
    module docstring).
    """

    def __init__(self, store: RecordSource, outline: SessionOutline, position_of: dict[str, int],
                 read: dict[int, Entry]) -> None:
        """Wrap an outline and the entries read so far.

        Args:
            store: where the other records are read (:meth:`~sessiontree.stores.base.SessionStore.read_entries_at`,
                or a held session's, :func:`open_held`).
            outline: the session's outline at open; its entries stay the
                tree's first ``len(outline)`` entries.
            position_of: ``{id: position}`` of the outline's entries (unique ids).
            read: the entries read so far, by position (checked against the outline).
        """
        # SessionTree.__init__ is not called: entries and by_id exist only once read.
        self._store = store
        self._outline = outline
        self._position_of = position_of
        self._read = read
        self._added: list[Entry] = []
        self._added_ids: dict[str, Entry] = {}
        self._lazy_labels: dict[str, tuple[str, str]] | None = None
        self.leaf_id = outline.ids[-1] if len(outline) else None

    # -- reading ----------------------------------------------------------------

    def _fetch(self, positions: Sequence[int]) -> list[Entry]:
        """The entries at outline ``positions``, reading those not read yet (kept)."""
        read = self._read
        missing = sorted({p for p in positions if p not in read})
        if missing:
            with gc_paused():
                entries = self._store.read_entries_at(self._outline, missing)
            try:
                _check_columns(self._outline, missing, entries)
            except _Drift as drift:
                position = drift.args[0]
                raise InvalidSessionError("the stored record's id, parentId or type differs from the store's "
                                          "copied columns: the store is damaged (run sessiontree check --store)",
                                          f"{self._store.url}#{self._outline.session_id}", position + 2) from None
            read.update(zip(missing, entries, strict=False))
        return [read[p] for p in positions]

    def _materialize(self) -> None:
        """Read every entry not read yet and become a plain :class:`SessionTree`."""
        count = len(self._outline)
        entries = self._fetch(range(count))
        entries.extend(self._added)
        with gc_paused():
            by_id = dict(zip(self._outline.ids, entries[:count], strict=False))
        by_id.update(self._added_ids)
        state = {"entries": entries, "by_id": by_id, "_labels": None, "leaf_id": self.leaf_id,
                 # The outline's columns, for the tree's first ancestor_links (they hold
                 # what the links need without touching the parsed entries).
                 "_columns": (self._position_of, self._outline.parent_ids, self._outline.types)}
        self.__dict__.clear()
        self.__dict__.update(state)
        self.__class__ = SessionTree  # type: ignore[assignment]

    @property
    def entries(self) -> list[Entry]:  # type: ignore[override]
        """Every entry in file order, as :attr:`SessionTree.entries` (reads the rest first)."""
        self._materialize()
        return self.entries

    @property
    def by_id(self) -> dict[str, Entry]:  # type: ignore[override]
        """Entries by id, as :attr:`SessionTree.by_id` (reads the rest of the session first)."""
        self._materialize()
        return self.by_id

    # -- what needs no (or little) reading ---------------------------------------

    def __len__(self) -> int:
        return len(self._outline) + len(self._added)

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self._position_of or entry_id in self._added_ids

    def add(self, entry: Entry) -> None:
        """Append ``entry`` (already parented) and make it the leaf."""
        self._added.append(entry)
        self._added_ids[entry["id"]] = entry
        self.leaf_id = entry["id"]
        if entry.get("type") == "label":
            self._lazy_labels = None

    def pop(self, previous_leaf: str | None) -> Entry:
        """Remove the last entry added and restore ``previous_leaf`` (rollback of :meth:`add`)."""
        entry = self._added.pop()
        del self._added_ids[entry["id"]]
        self.leaf_id = previous_leaf
        if entry.get("type") == "label":
            self._lazy_labels = None
        return entry

    def entries_from(self, position: int) -> list[Entry]:
        """``entries[position:]``; reads nothing when ``position`` is past the opened entries."""
        count = len(self._outline)
        if position >= count:
            return self._added[position - count:]
        return super().entries_from(position)

    def get_entry(self, entry_id: str) -> Entry | None:
        """The entry with this id, or ``None``; reads its record alone if not read yet."""
        entry = self._added_ids.get(entry_id)
        if entry is not None:
            return entry
        position = self._position_of.get(entry_id)
        if position is None:
            return None
        return self._fetch([position])[0]

    def require(self, entry_id: str) -> Entry:
        """See :meth:`SessionTree.require`."""
        entry = self.get_entry(entry_id) if isinstance(entry_id, str) else None
        if entry is None:
            raise EntryNotFoundError(entry_id)
        return entry

    def get_branch(self, from_id: str | None = None) -> list[Entry]:
        """See :meth:`SessionTree.get_branch`; reads the branch's unread records, or the
        whole session when most of the branch is unread."""
        outline = self._outline
        parents, position_of, added = outline.parent_ids, self._position_of, self._added_ids
        current: Any = self.leaf_id if from_id is None else from_id
        seen: set[str] = set()
        walk: list[Entry | int] = []  # an added entry, or an outline position
        while current is not None and current not in seen:
            entry = added.get(current)
            if entry is not None:
                walk.append(entry)
                parent = entry.get("parentId")
            else:
                position = position_of.get(current)
                if position is None:
                    break
                walk.append(position)
                parent = parents[position]
            seen.add(current)
            current = parent
        walk.reverse()
        positions = [item for item in walk if isinstance(item, int)]
        if 2 * sum(p not in self._read for p in positions) > len(outline):
            self._materialize()
            return self.get_branch(from_id)
        fetched = iter(self._fetch(positions))
        return [next(fetched) if isinstance(item, int) else item for item in walk]

    def get_children(self, parent_id: str | None) -> list[Entry]:
        """See :meth:`SessionTree.get_children`; reads only the children's records."""
        positions = [p for p, parent in enumerate(self._outline.parent_ids) if parent == parent_id]
        return [*self._fetch(positions), *(e for e in self._added if e.get("parentId") == parent_id)]

    @property
    def labels(self) -> dict[str, tuple[str, str]]:
        """See :attr:`SessionTree.labels`; reads only the ``label`` records."""
        if self._lazy_labels is None:
            positions = [p for p, kind in enumerate(self._outline.types) if kind == "label"]
            self._lazy_labels = label_state([*self._fetch(positions),
                                             *(e for e in self._added if e.get("type") == "label")])
        return self._lazy_labels

    def name_state(self) -> NameState:
        """See :meth:`SessionTree.name_state`; reads only the last ``session_info`` record."""
        for entry in reversed(self._added):
            if entry.get("type") == "session_info":
                return session_name_state([entry])
        types = self._outline.types
        for position in range(len(types) - 1, -1, -1):
            if types[position] == "session_info":
                return session_name_state(self._fetch([position]))
        return NameState(False)
