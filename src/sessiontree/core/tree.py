"""The entry tree: leaf, branches, children, labels, names, summary freshness.

Invariants (docs/rules/tree.md seed:tree-structure; group F, H, I, docs/rules/listing.md):

* Entries keep file order; that order is insertion order.
* The leaf after loading is decided in one place, :func:`loaded_leaf_id`:
  the last record in file order, whatever its type (docs/rules/tree.md F.1), except that an
  upstream ``leaf`` record (a persisted move of the leaf, docs/rules/format.md spec:data-model) stands
  for its target. Every append becomes a child of the leaf and the new leaf
  (docs/rules/tree.md F.2).
* Walks never recurse and stop when an id repeats, so self-parents, parent
  cycles and trees 100,000 entries deep are safe (docs/rules/tree.md F.6, H.5).
* Labels, the session name and the session summary are global state over
  all entries in file order, not along the active branch (docs/rules/tree.md I.3,
  docs/rules/listing.md J.2, K.2).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeGuard

from sessiontree.errors import EntryNotFoundError, InvalidSessionError
from sessiontree.format.times import iso_datetime
from sessiontree.format.types import Entry

__all__ = [
    "LEAF_ENTRY_TYPE",
    "MAX_TIME_MS",
    "MIN_TIME_MS",
    "SKELETON_FIELDS",
    "AncestorLinks",
    "Entry",
    "NameState",
    "SessionTree",
    "TreeNode",
    "build_tree",
    "get_branch",
    "label_state",
    "loaded_leaf_id",
    "parse_timestamp_ms",
    "session_name_state",
    "skeleton_entry",
    "time_in_range",
    "utc_from_ms",
]

#: Entry type of the upstream agent's persisted leaf move: ``{"type": "leaf",
#: "id", "parentId", "timestamp", "targetId": <entry id or null>}`` (docs/rules/format.md spec:data-model).
LEAF_ENTRY_TYPE = "leaf"


def loaded_leaf_id(entries: Sequence[Entry], by_id: Mapping[str, Entry] | None = None) -> str | None:
    """The active leaf of a session as loaded from its records (docs/rules/tree.md F.1;
    docs/rules/format.md spec:data-model ``leaf``).

    The records are replayed in file order, and each one moves the leaf:

    * an ordinary entry (any type but ``leaf``) makes itself the leaf, as
      an append does (docs/rules/tree.md F.1, F.2);
    * a ``leaf`` record whose ``targetId`` names an entry of the session
      moves the leaf to that entry (the upstream agent writes one when it
      navigates the tree; the record itself is never the leaf);
    * a ``leaf`` record whose ``targetId`` is ``null`` resets the leaf to
      ``None`` (the upstream form of ``reset_leaf``: the next append starts
      a new root);
    * a ``leaf`` record whose ``targetId`` is missing, not a string, or
      names no entry of the session is ignored: the leaf stays where the
      records before it put it (never on the ``leaf`` record itself, and
      never lost entirely because of one bad record).

    So the last record decides, unless it is a ``leaf`` record that cannot be
    honoured; entries written after a ``leaf`` record are ordinary entries
    and the last of them is the leaf.

    Args:
        entries: all entries of the session, header excluded, in file order.
        by_id: the id index of ``entries`` when the caller has one (it must
            equal ``{e["id"]: e for e in entries}``); built when omitted.

    Returns:
        The leaf id, or ``None`` (no entries, or a final reset).

    Cost: it walks back from the end only over trailing ``leaf`` records
    that cannot be honoured, so it is constant time for ordinary sessions.
    """
    index: Mapping[str, Entry] | None = by_id
    for position in range(len(entries) - 1, -1, -1):
        entry = entries[position]
        if not isinstance(entry, Mapping):
            continue
        if entry.get("type") != LEAF_ENTRY_TYPE:
            entry_id = entry.get("id")
            return entry_id if isinstance(entry_id, str) else None
        if "targetId" in entry and entry["targetId"] is None:
            return None
        target = entry.get("targetId")
        if isinstance(target, str):
            if index is None:
                index = {e["id"]: e for e in entries if isinstance(e, Mapping) and isinstance(e.get("id"), str)}
            if target in index:
                return target
    return None


#: What :func:`skeleton_entry` keeps of an entry, by entry type (every type
#: keeps ``type``, ``id``, ``parentId`` and ``timestamp``); ``message`` keeps
#: only ``message.role`` and ``compaction`` only ``details.strategy``.
SKELETON_FIELDS: Mapping[str, tuple[str, ...]] = {
    "label": ("targetId", "label"),
    LEAF_ENTRY_TYPE: ("targetId",),
    "session_info": ("name",),
}


def skeleton_entry(entry: Mapping[str, Any]) -> Entry:
    """The part of ``entry`` the tree needs, without its content (a "skeleton" record).

    Kept: ``type``, ``id``, ``parentId``, ``timestamp`` (those present), the
    fields of :data:`SKELETON_FIELDS` for label, leaf and session-info records,
    ``message.role`` of a ``message`` and ``details.strategy`` of a
    ``compaction``. That is everything :func:`build_tree`, :func:`label_state`,
    :func:`loaded_leaf_id`, :func:`get_branch`, :func:`session_name_state`,
    ``render.entry_kind`` and ``projection.is_retired_record`` read, so each of
    them gives the same answer on skeletons as on the full entries
    (docs/rules/tree.md F.1, F.6, H.1-H.5, I.2-I.7; docs/rules/listing.md J.2).
    Stores answer ``read_skeleton`` with these records
    (:meth:`sessiontree.stores.base.SessionStore.read_skeleton`).

    Returns:
        A new dict; ``entry`` is not modified.
    """
    out: Entry = {key: entry[key] for key in ("type", "id", "parentId", "timestamp") if key in entry}
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        if isinstance(message, Mapping):
            # An absent and a null role mean the same to every reader (not a string).
            out["message"] = {"role": message["role"]} if message.get("role") is not None else {}
        elif "message" in entry:
            out["message"] = message
    elif kind == "compaction":
        details = entry.get("details")
        if isinstance(details, Mapping):
            out["details"] = {"strategy": details["strategy"]} if details.get("strategy") is not None else {}
        elif "details" in entry:
            out["details"] = details
    else:
        for key in SKELETON_FIELDS.get(kind, ()) if isinstance(kind, str) else ():
            if key in entry:
                out[key] = entry[key]
    return out


def get_branch(by_id: Mapping[str, Entry], leaf_id: str | None) -> list[Entry]:
    """Entries from a root down to ``leaf_id``, root first (docs/rules/tree.md F.6).

    Follows ``parentId`` links upwards. An unknown or ``None`` start gives
    ``[]``; a missing parent ends the walk silently; a self-parent or a parent
    cycle ends it when an id repeats (the old code looped forever).
    """
    path: list[Entry] = []
    seen: set[str] = set()
    current = leaf_id
    while current is not None and current not in seen:
        entry = by_id.get(current)
        if entry is None:
            break
        seen.add(current)
        path.append(entry)
        current = entry.get("parentId")
    path.reverse()
    return path


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: Unix milliseconds of 0001-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z: the
#: instants a ``datetime`` can hold. A timestamp outside them (a message's numeric
#: ``timestamp`` of 1e15, an ISO string whose offset carries it past year 9999) is
#: unknown wherever a date is shown or grouped (docs/listing.md, "Unknown times").
MIN_TIME_MS = -62135596800000.0
MAX_TIME_MS = 253402300799999.0


def time_in_range(ms: Any) -> TypeGuard[float]:
    """Whether ``ms`` is a number (not a bool) of Unix milliseconds within
    :data:`MIN_TIME_MS`..:data:`MAX_TIME_MS` (NaN, infinities and integers too
    large for a float are not). Never raises."""
    if ms.__class__ is bool or not isinstance(ms, (int, float)):
        return False
    try:
        return MIN_TIME_MS <= ms <= MAX_TIME_MS  # False for NaN; int vs float compares exactly
    except OverflowError:  # pragma: no cover - Python compares big ints with floats exactly
        return False


def utc_from_ms(ms: Any) -> datetime | None:
    """The aware UTC ``datetime`` of Unix milliseconds ``ms``, or ``None`` when
    :func:`time_in_range` refuses it (the caller shows it as unknown). Never raises;
    does not depend on the platform's ``time_t`` range."""
    if not time_in_range(ms):
        return None
    return _EPOCH + timedelta(milliseconds=float(ms))


def parse_timestamp_ms(value: Any) -> float | None:
    """Milliseconds since the epoch of an ISO-8601 string, or ``None`` if unparsable.

    Exact to the microsecond (``"...00.123Z"`` gives ``...123.0``). A string
    without a zone is read as UTC (the one rule:
    :func:`sessiontree.format.times.iso_datetime`).
    """
    if not isinstance(value, str):
        return None
    parsed = iso_datetime(value)
    if parsed is None:
        return None
    return ((parsed - _EPOCH) // timedelta(microseconds=1)) / 1000.0


@dataclass
class TreeNode:
    """One node of :func:`build_tree` (docs/rules/tree.md H.1).

    Attributes:
        entry: the entry itself (shared, not copied).
        children: child nodes, oldest timestamp first, file order on ties.
        label: the entry's current label, if any.
        label_timestamp: the ``timestamp`` of the label entry that set it.
    """

    entry: Entry
    children: list[TreeNode] = field(default_factory=list)
    label: str | None = None
    label_timestamp: str | None = None


def label_state(entries: Iterable[Entry]) -> dict[str, tuple[str, str]]:
    """Current labels: ``{target id: (label, label entry timestamp)}`` (docs/rules/tree.md I.2-I.7).

    Computed over all entries in file order; a later label entry for a target
    overrides an earlier one; ``""`` or an absent label clears it. Targets that
    do not exist are kept (docs/rules/tree.md I.5). Dict order is the label map's insertion order.
    """
    labels: dict[str, tuple[str, str]] = {}
    for entry in entries:
        if entry.get("type") != "label":
            continue
        target = entry.get("targetId")
        if not isinstance(target, str):
            continue
        text = entry.get("label")
        if isinstance(text, str) and text:
            labels[target] = (text, entry.get("timestamp", ""))
        else:
            labels.pop(target, None)
    return labels


def build_tree(entries: list[Entry], labels: Mapping[str, tuple[str, str]] | None = None) -> list[TreeNode]:
    """All entries as a forest of :class:`TreeNode` (docs/rules/tree.md H.1-H.5).

    Roots, in file order: entries whose ``parentId`` is null, is their own id,
    or names a missing entry. Entries caught in a parent cycle are unreachable
    from those roots; the first of each cycle in file order becomes a root so
    nothing is lost. Children are sorted by parsed timestamp (stable).
    """
    if labels is None:
        labels = label_state(entries)
    nodes: dict[str, TreeNode] = {}
    order: list[TreeNode] = []
    for entry in entries:
        label = labels.get(entry["id"])
        node = TreeNode(entry, [], label[0] if label else None, label[1] if label else None)
        nodes[entry["id"]] = node
        order.append(node)
    roots: list[TreeNode] = []
    for node in order:
        parent_id = node.entry.get("parentId")
        parent = nodes.get(parent_id) if isinstance(parent_id, str) and parent_id != node.entry["id"] else None
        if parent is None:
            roots.append(node)
        else:
            parent.children.append(node)
    # Nodes unreachable from a root sit on a cycle (or below one): break it.
    reached: set[int] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        reached.add(id(node))
        stack.extend(node.children)
    if len(reached) != len(order):
        position = {id(node): i for i, node in enumerate(order)}
        for node in order:
            if id(node) in reached:
                continue
            # An unreached node's parent exists and is unreached too, so walking
            # up ends on the cycle it hangs from. Only a cycle member may become
            # a root: nodes below the cycle keep their (existing) parent (docs/rules/tree.md H.2).
            walked: set[int] = set()
            current = node
            while id(current) not in walked:
                walked.add(id(current))
                current = nodes[current.entry["parentId"]]
            cycle = [current]
            member = nodes[current.entry["parentId"]]
            while member is not current:
                cycle.append(member)
                member = nodes[member.entry["parentId"]]
            root = min(cycle, key=lambda n: position[id(n)])
            parent = nodes[root.entry["parentId"]]
            parent.children = [c for c in parent.children if c is not root]
            roots.append(root)
            stack = [root]
            while stack:
                current = stack.pop()
                reached.add(id(current))
                stack.extend(c for c in current.children if id(c) not in reached)
        roots.sort(key=lambda n: position[id(n)])  # roots stay in file order (docs/rules/tree.md H.3)
    for node in order:
        if len(node.children) > 1:
            node.children.sort(key=_timestamp_key)
    return roots


def _timestamp_key(node: TreeNode) -> float:
    value = parse_timestamp_ms(node.entry.get("timestamp"))
    return value if value is not None else float("inf")


@dataclass(frozen=True)
class NameState:
    """Session name state (docs/rules/format.md seed:session-info-entry, docs/rules/listing.md J.2).

    ``has_name`` is False when never named; True with ``name=None`` when the
    latest ``session_info`` cleared it; True with the name when named.
    """

    has_name: bool
    name: str | None = None


def session_name_state(entries: Iterable[Entry]) -> NameState:
    """The name state from the last ``session_info`` entry in file order (docs/rules/listing.md J.2)."""
    last: Entry | None = None
    for entry in entries:
        if entry.get("type") == "session_info":
            last = entry
    if last is None:
        return NameState(False)
    name = last.get("name")
    name = name.strip() if isinstance(name, str) else ""
    return NameState(True, name or None)


class AncestorLinks:
    """Integer links up a session's tree, for walks that care about a few entry types.

    For the entry at file position ``p``: ``parent[p]`` is the position of its
    parent (``-1`` for a root or a parent id that names no entry), and
    ``nearest[p]`` the position of its nearest ancestor-or-self whose ``type``
    is one of :attr:`kinds` (``-1`` if none). A walk up the branch that only
    needs entries of those types jumps ``p = nearest[parent[p]]`` and so
    touches only them (docs/rules/tree.md F.6: same ancestors as a walk by
    ``parentId``).

    Built only for a tree whose every parent comes before its child in file
    order (every append does, so a loaded session almost always does): the
    links then have no cycle. Every ``parentId`` must name an entry (or be
    ``None``): a dangling one could come to name an entry appended later.
    :meth:`for_entries` returns ``None`` otherwise,
    and callers walk by ids as before. Kept up to date by
    :meth:`SessionTree.add` and :meth:`SessionTree.pop` once built.
    """

    __slots__ = ("kinds", "nearest", "parent", "position")

    def __init__(self, kinds: frozenset[str]) -> None:
        """Empty links for entry types ``kinds`` (fill with :meth:`push`)."""
        self.kinds = kinds
        self.position: dict[str, int] = {}
        self.parent: list[int] = []
        self.nearest: list[int] = []

    @classmethod
    def for_entries(cls, entries: Sequence[Entry], kinds: frozenset[str]) -> AncestorLinks | None:
        """The links of ``entries`` (file order, unique ids), or ``None`` when some
        entry's ``parentId`` is neither ``None`` nor the id of an entry before it (a
        forward or dangling link, a self-parent, an unhashable value)."""
        return cls.for_columns({entry["id"]: index for index, entry in enumerate(entries)},
                               [entry.get("parentId") for entry in entries],
                               [entry.get("type") for entry in entries], kinds)

    @classmethod
    def for_columns(cls, position: dict[str, int], parent_ids: Sequence[Any], types: Sequence[Any],
                    kinds: frozenset[str]) -> AncestorLinks | None:
        """:meth:`for_entries` from the entries' columns: ``{id: file position}``
        (taken over, not copied), each entry's ``parentId`` and ``type``. A store's
        copied columns give them without touching the entries (a cache miss each,
        in a large session, about as slow as the walk the links save)."""
        get = position.get
        try:
            parent = [-1 if p is None else get(p, -2) for p in parent_ids]
        except TypeError:  # an unhashable parentId
            return None
        nearest: list[int] = []
        push = nearest.append
        for index, (up, kind) in enumerate(zip(parent, types, strict=True)):
            if up >= index or up == -2:
                return None
            push(index if kind.__class__ is str and kind in kinds else (nearest[up] if up >= 0 else -1))
        links = cls(kinds)
        links.position, links.parent, links.nearest = position, parent, nearest
        return links

    def push(self, entry: Entry) -> bool:
        """Index ``entry``, appended after every indexed entry; ``False`` (nothing indexed)
        when its ``parentId`` is neither ``None`` nor the id of an indexed entry (a link
        that could later point forward once an entry of that id is appended)."""
        parent_id = entry.get("parentId")
        if parent_id is None:
            up = -1
        else:
            up = self.position.get(parent_id, -1) if parent_id.__class__ is str else -1
            if up < 0:
                return False
        index = len(self.parent)
        self.position[entry["id"]] = index
        self.parent.append(up)
        kind = entry.get("type")
        self.nearest.append(index if kind.__class__ is str and kind in self.kinds
                            else (self.nearest[up] if up >= 0 else -1))
        return True

    def drop_last(self, entry: Entry) -> None:
        """Forget the last indexed entry (``entry``), as :meth:`SessionTree.pop` does."""
        self.parent.pop()
        self.nearest.pop()
        del self.position[entry["id"]]


class SessionTree:
    """The entries of one session with their id index, leaf and labels.

    Entries are the caller's dicts and are never copied or modified. Mutators
    (:meth:`add`, :meth:`pop`) keep the index and labels consistent so that a
    failed write can be rolled back exactly.
    """

    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        """Index ``entries`` (file order); the leaf is :func:`loaded_leaf_id` of them
        (the last record, or the target of a final ``leaf`` record; docs/rules/tree.md F.1,
        docs/rules/format.md spec:data-model).

        Raises:
            InvalidSessionError: two entries share an id.
        """
        self.entries: list[Entry] = list(entries)
        self.leaf_id: str | None = None
        self._labels: dict[str, tuple[str, str]] | None = None
        # One comprehension builds the index; a duplicate shows as a shorter
        # index (or a record without a hashable id raises), and the entries
        # are then walked in order for the same error as an entry-by-entry build.
        try:
            self.by_id: dict[str, Entry] = {entry["id"]: entry for entry in self.entries}
        except (KeyError, TypeError):
            self.by_id = {}
        if len(self.by_id) != len(self.entries):
            self.by_id = {}
            for entry in self.entries:
                if entry["id"] in self.by_id:
                    raise InvalidSessionError(f'duplicate entry id "{entry["id"]}"')
                self.by_id[entry["id"]] = entry
        self.leaf_id = loaded_leaf_id(self.entries, self.by_id)

    #: Ancestor links by entry types, built on first use (:meth:`ancestor_links`);
    #: ``None`` per kinds: the tree cannot have them (a forward or dangling parent link).
    _links: dict[frozenset[str], AncestorLinks | None] | None = None
    #: ``({id: position}, parentIds, types)`` of the first entries, from a store's
    #: columns (:class:`~sessiontree.session.lazy.LazySessionTree` leaves them), for
    #: the first :meth:`ancestor_links`; used once.
    _columns: tuple[dict[str, int], Sequence[Any], Sequence[Any]] | None = None

    def ancestor_links(self, kinds: frozenset[str]) -> AncestorLinks | None:
        """:class:`AncestorLinks` of this tree's entries for ``kinds``, built on the first
        call (one pass over the entries) and kept up to date by :meth:`add` and
        :meth:`pop`; ``None`` when the tree has a parent link they cannot hold."""
        cache = self._links
        if cache is None:
            cache = self._links = {}
        if kinds not in cache:
            columns, self._columns = self._columns, None
            links: AncestorLinks | None
            if columns is not None and len(columns[1]) <= len(self.entries):
                links = AncestorLinks.for_columns(*columns, kinds)
                for entry in self.entries[len(columns[1]):]:
                    if links is None or not links.push(entry):
                        links = None
                        break
            else:
                links = AncestorLinks.for_entries(self.entries, kinds)
            cache[kinds] = links
        return cache[kinds]

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self.by_id

    def add(self, entry: Entry) -> None:
        """Append ``entry`` (already parented) and make it the leaf."""
        self.entries.append(entry)
        self.by_id[entry["id"]] = entry
        self.leaf_id = entry["id"]
        if entry.get("type") == "label":
            self._labels = None
        if self._links:
            for kinds, links in self._links.items():
                if links is not None and not links.push(entry):
                    self._links[kinds] = None

    def pop(self, previous_leaf: str | None) -> Entry:
        """Remove the last entry and restore ``previous_leaf`` (rollback of :meth:`add`)."""
        entry = self.entries.pop()
        del self.by_id[entry["id"]]
        self.leaf_id = previous_leaf
        if entry.get("type") == "label":
            self._labels = None
        if self._links:
            # Links that could not hold some entry are dropped and rebuilt on next use.
            for kinds, links in list(self._links.items()):
                if links is None or len(links.parent) != len(self.entries) + 1:
                    del self._links[kinds]
                else:
                    links.drop_last(entry)
        return entry

    def entries_from(self, position: int) -> list[Entry]:
        """The entries from file position ``position`` on (``entries[position:]``): what
        was appended since a caller last saw ``position`` entries."""
        return self.entries[position:]

    def get_entry(self, entry_id: str) -> Entry | None:
        """The entry with this id, or ``None``."""
        return self.by_id.get(entry_id)

    def require(self, entry_id: str) -> Entry:
        """The entry with this id.

        Raises:
            EntryNotFoundError: ``Entry <id> not found``.
        """
        entry = self.by_id.get(entry_id) if isinstance(entry_id, str) else None
        if entry is None:
            raise EntryNotFoundError(entry_id)
        return entry

    def get_branch(self, from_id: str | None = None) -> list[Entry]:
        """Root-first path to ``from_id`` (default: the leaf); ``[]`` if unknown (docs/rules/tree.md F.6)."""
        return get_branch(self.by_id, self.leaf_id if from_id is None else from_id)

    def get_children(self, parent_id: str | None) -> list[Entry]:
        """Entries whose ``parentId`` equals ``parent_id``, in file order (docs/rules/tree.md H.6)."""
        return [e for e in self.entries if e.get("parentId") == parent_id]

    @property
    def labels(self) -> dict[str, tuple[str, str]]:
        """Current labels ``{target: (label, timestamp)}`` (see :func:`label_state`)."""
        if self._labels is None:
            self._labels = label_state(self.entries)
        return self._labels

    def get_label(self, entry_id: str) -> str | None:
        """The current label of ``entry_id`` (which need not exist, docs/rules/tree.md I.5)."""
        label = self.labels.get(entry_id)
        return label[0] if label else None

    def get_tree(self) -> list[TreeNode]:
        """The whole forest with labels resolved (see :func:`build_tree`)."""
        return build_tree(self.entries, self.labels)

    def name_state(self) -> NameState:
        """See :func:`session_name_state`."""
        return session_name_state(self.entries)

