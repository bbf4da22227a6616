"""The session page's tree pane: every entry laid out as rows, windows of the visible rows."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from sessiontree.core.projection import is_retired_record
from sessiontree.core.render import entry_kind, entry_summary
from sessiontree.core.tree import label_state, parse_timestamp_ms
from sessiontree.format.gcpause import gc_paused
from sessiontree.session.manager import SessionManager
from sessiontree.session.reading import ReadOnlySession
from sessiontree.web.views.common import script_json

__all__ = [
    "FILTER_MODES",
    "TREE_SUMMARY_CHARS",
    "TREE_WINDOW_ROWS",
    "TreeData",
    "build_tree_data",
    "leaf_tips",
]

#: Filter modes of the tree, as the agent's ``/tree`` has them.
FILTER_MODES: tuple[tuple[str, str], ...] = (
    ("default", "default"),
    ("no-tools", "no tools"),
    ("user-only", "user only"),
    ("labeled-only", "labelled"),
    ("all", "all"),
)

# Row flags (bit values shared with static/app.js).
F_ACTIVE = 1        # on the active path (root to active leaf)
F_LEAF = 2          # the active leaf
F_RETIRED = 4       # a retired, archival record
F_COMPACTION = 8    # an active verbatim compaction boundary
F_BRANCH_SUMMARY = 16
F_TOOL = 32         # a tool result or bash execution (hidden by "no tools")
F_USER = 64         # a user message (kept by "user only")
F_META = 128        # bookkeeping (labels, names, settings, extension state): hidden by "default"
F_BRANCH_POINT = 256
F_BRANCH_START = 512  # first entry of a branch below a branch point
F_CONTEXT_EDIT = 1024

_META_TYPES = frozenset({"label", "session_info", "session_summary", "custom", "model_change",
                         "thinking_level_change", "context_window_change", "leaf", "usage"})

#: Characters of an entry's one-line summary in the tree.
TREE_SUMMARY_CHARS = 120
#: Tree rows the server sends at once (the page asks for more as it scrolls).
TREE_WINDOW_ROWS = 200


@dataclass
class TreeData:
    """The whole entry tree laid out as rows, in pre-order (what the tree pane draws).

    Attributes:
        rows: one list per entry, ``[id, depth, kind, summary, flags, label,
            parent_row, subtree_end, tip_row]``: ``depth`` counts the branch
            points above the row (indentation); ``summary`` is the entry's
            one-line summary, or ``None`` until :meth:`summaries` computed it
            (large sessions: the page asks for the rows it draws); ``flags``
            is an OR of the ``F_*`` bits; ``label`` is the current label or
            ``None``; ``parent_row`` the row index of the parent (``-1`` for a
            root); ``subtree_end`` the index of the last row of its subtree
            (rows ``i+1 .. subtree_end`` are its descendants); ``tip_row`` the
            row of the tip a click on it shows (the active leaf for entries on
            the active path, else the newest tip below it).
        leaf_id: the active leaf, or ``None``.
        index: ``{entry id: row index}``.
        entries: the entry of each row (for summaries computed later).
    """

    rows: list[list[Any]]
    leaf_id: str | None
    index: dict[str, int] = field(default_factory=dict)
    entries: list[Mapping[str, Any]] = field(default_factory=list, repr=False)
    _json: str | None = field(default=None, repr=False)
    #: ``load(ids) -> entries``: full entries for rows laid out from skeletons
    #: (``store.read_entries``); ``None`` when :attr:`entries` are full entries.
    loader: Callable[[Sequence[str]], Sequence[Mapping[str, Any]]] | None = field(default=None, repr=False)
    _visible: dict[Any, list[int]] = field(default_factory=dict, repr=False)
    #: The entries from the root to :attr:`leaf_id` (``get_branch()``) when the
    #: layout walked them anyway, else ``None``.
    active_path: list[Mapping[str, Any]] | None = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        """The JSON the tree pane's script reads: ``{"leaf": ..., "rows": [...]}``."""
        return {"leaf": self.leaf_id, "rows": self.rows}

    def json_text(self) -> Markup:
        """:meth:`to_json` serialized once, safe inside a ``<script>`` element
        (``<``, ``>``, ``&`` and ``'`` written as ``\\u`` escapes, as Jinja2's ``tojson``)."""
        if self._json is None:
            self._json = str(script_json(self.to_json()))
        return Markup(self._json)

    def summaries(self, row_indices: Iterable[int]) -> dict[int, str]:
        """One-line summaries of the given rows (computed once each; unknown indices skipped).

        Rows laid out from skeletons get their full entries from :attr:`loader`
        in one batch (a window's worth of index lookups)."""
        wanted = [i for i in row_indices if 0 <= i < len(self.rows)]
        missing = [i for i in wanted if self.rows[i][3] is None]
        if missing:
            full: Mapping[Any, Mapping[str, Any]] = {}
            if self.loader is not None:
                full = {e.get("id"): e for e in self.loader([self.rows[i][0] for i in missing])}
            for i in missing:
                entry = full.get(self.rows[i][0], self.entries[i])
                self.rows[i][3] = entry_summary(_preview(entry), TREE_SUMMARY_CHARS)
        return {i: self.rows[i][3] for i in wanted}

    def visible(self, mode: str, folded: Iterable[int] = ()) -> list[int]:
        """Row indices shown under filter ``mode`` (:data:`FILTER_MODES`) with the rows of
        ``folded`` folded (their descendants hidden), in order. The active leaf is always
        shown. Linear in the rows; the last few answers are kept."""
        folded = frozenset(folded)
        key = (mode, folded)
        hit = self._visible.get(key)
        if hit is not None:
            return hit
        rows, out = self.rows, []
        i, n = 0, len(rows)
        while i < n:
            row = rows[i]
            if _keep_row(row, mode) or row[4] & F_LEAF:
                out.append(i)
            i = row[7] + 1 if i in folded else i + 1
        if len(self._visible) >= 8:
            self._visible.pop(next(iter(self._visible)), None)  # shared by request threads
        self._visible[key] = out
        return out

    def window(self, *, mode: str = "default", folded: Iterable[int] = (), leaf: str | None = None,
               offset: int = 0, limit: int = TREE_WINDOW_ROWS, find: str | None = None) -> dict[str, Any]:
        """One window of the visible rows, as the tree pane of the server draws it.

        Args:
            mode, folded: as :meth:`visible`.
            leaf: the branch the page shows; its path is marked.
            offset: first visible position to send.
            limit: rows to send (at most :data:`TREE_WINDOW_ROWS` * 4).
            find: an entry id; when it is visible, ``found`` is its position and
                the window is centred on it (``offset`` is ignored).

        Returns:
            ``{"total": visible rows, "entries": all rows, "offset": first
            position sent, "found": position of ``find`` or -1, "rows": [[row
            index, id, depth, kind, summary, flags, label, tip id, branches,
            foldable, on the shown path], ...]}`` (``branches``: children of a
            branch point, else 0).
        """
        visible = self.visible(mode, folded)
        limit = max(1, min(limit, TREE_WINDOW_ROWS * 4))
        found = -1
        if find is not None and find in self.index:
            target = self.index[find]
            at = bisect_left(visible, target)
            if at < len(visible) and visible[at] == target:
                found = at
                offset = at - limit // 2
        offset = max(0, min(offset, len(visible) - 1))
        chosen = visible[offset:offset + limit]
        self.summaries(chosen)
        path: set[int] = set()
        i = self.index.get(leaf, -1) if leaf is not None else -1
        while i >= 0 and i not in path:
            path.add(i)
            i = self.rows[i][6]
        rows = self.rows
        out = []
        for i in chosen:
            row = rows[i]
            branches = 0
            if row[4] & F_BRANCH_POINT:
                j = i + 1
                while j <= row[7]:
                    branches += 1
                    j = rows[j][7] + 1
            foldable = 1 if row[7] > i and row[4] & (F_BRANCH_POINT | F_BRANCH_START) else 0
            out.append([i, row[0], row[1], row[2], row[3], row[4], row[5], rows[row[8]][0], branches,
                        foldable, 1 if i in path else 0])
        return {"total": len(visible), "entries": len(rows), "offset": offset, "found": found, "rows": out}


def _keep_row(row: Sequence[Any], mode: str) -> bool:
    """Whether filter ``mode`` shows ``row`` (the agent's ``/tree`` filters; static/app.js
    applies the same rule to the export's rows)."""
    flags = row[4]
    if mode == "all":
        return True
    if mode == "user-only":
        return bool(flags & F_USER)
    if mode == "labeled-only":
        return row[5] is not None
    if flags & F_META:
        return False
    return not (mode == "no-tools" and flags & F_TOOL)


def _tree_flags(entry: Mapping[str, Any]) -> int:
    flags = 0
    kind = entry.get("type")
    if is_retired_record(entry):
        flags |= F_RETIRED
    elif kind == "compaction":
        flags |= F_COMPACTION
    if kind == "branch_summary":
        flags |= F_BRANCH_SUMMARY
    if kind == "context_edit":
        flags |= F_CONTEXT_EDIT
    if kind in _META_TYPES:
        flags |= F_META
    if kind == "message":
        role = entry_kind(entry)
        if role in ("toolResult", "bashExecution"):
            flags |= F_TOOL
        elif role == "user":
            flags |= F_USER
    return flags


#: Characters of each text kept when summarising an entry for the tree.
_PREVIEW_CHARS = 400


#: Nesting kept when summarising tool-call arguments (deeper values become "…"):
#: a summary shows 120 characters, and the store allows 512 levels, more than
#: Python's recursion limit allows to walk recursively.
_PREVIEW_DEPTH = 8


def _clip_value(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return value[:_PREVIEW_CHARS]
    if isinstance(value, (Mapping, list)) and depth >= _PREVIEW_DEPTH:
        return "…"
    if isinstance(value, Mapping):
        return {k: _clip_value(v, depth + 1) for k, v in list(value.items())[:8]}
    if isinstance(value, list):
        return [_clip_value(v, depth + 1) for v in value[:8]]
    return value


def _preview(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    """``entry`` with the texts of its message cut to a few hundred characters.

    :func:`sessiontree.core.render.entry_summary` keeps its rules; it just does
    not normalise a whole long tool output to show 120 characters of it.
    """
    message = entry.get("message")
    if entry.get("type") != "message" or not isinstance(message, Mapping):
        return entry
    short = dict(message)
    content = message.get("content")
    if isinstance(content, str):
        short["content"] = content[:_PREVIEW_CHARS]
    elif isinstance(content, list):
        blocks = []
        for block in content[:16]:
            if isinstance(block, Mapping):
                block = dict(block)
                for key in ("text", "thinking"):
                    if isinstance(block.get(key), str):
                        block[key] = block[key][:_PREVIEW_CHARS]
                if block.get("type") == "toolCall":
                    block["arguments"] = _clip_value(block.get("arguments"))
                if block.get("type") == "image":
                    block["data"] = ""
            blocks.append(block)
        short["content"] = blocks
    for key in ("command", "summary"):
        if isinstance(short.get(key), str):
            short[key] = short[key][:_PREVIEW_CHARS]
    return {**entry, "message": short}


def build_tree_data(manager: SessionManager | ReadOnlySession, *, summaries: bool = True) -> TreeData:
    """Lay out every entry of the session as tree rows (see :class:`TreeData`).

    With ``summaries=False`` the one-line summaries are left ``None`` for
    :meth:`TreeData.summaries` to fill in on demand: summarising every entry
    of a large session is slow, and a page draws a few dozen rows at a time.

    A node with one child continues at the same depth; the children of a
    branch point (oldest first, as :meth:`SessionManager.get_tree` orders
    them) each start a branch one level deeper. Iterative (an explicit stack),
    linear in the number of entries. Works on skeleton entries
    (``store.read_skeleton``) as on full ones.

    The forest is built here over entry positions, without
    :class:`~sessiontree.core.tree.TreeNode` objects (slow for large sessions),
    with the rules of :func:`sessiontree.core.tree.build_tree`
    (docs/rules/tree.md H.1-H.5): roots in file order, children by parsed
    timestamp (stable). A session with a parent cycle takes the general path.
    """
    with gc_paused():  # a row of new lists per entry: the collector would run again and again
        return _build_tree_data(manager, summaries)


def _build_tree_data(manager: SessionManager | ReadOnlySession, summaries: bool) -> TreeData:
    entries = manager.get_entries()
    n = len(entries)
    position: dict[Any, int] = {}
    for i, entry in enumerate(entries):
        position[entry.get("id")] = i
    parent = [-1] * n
    kids: dict[int, list[int]] = {}
    roots: list[int] = []
    for i, entry in enumerate(entries):
        pid = entry.get("parentId")
        p = position.get(pid, -1) if pid.__class__ is str and pid != entry.get("id") else -1
        if p < 0:
            roots.append(i)
        else:
            parent[i] = p
            got = kids.get(p)
            if got is None:
                kids[p] = [i]
            else:
                got.append(i)
    if n and not roots:
        return _build_tree_data_nodes(manager, summaries=summaries)  # all on cycles
    for siblings in kids.values():
        if len(siblings) > 1:
            siblings.sort(key=lambda i: _timestamp_ms(entries[i]))
    labels = label_state(entries)
    leaf_id = manager.get_leaf_id()
    # The active path, walked over positions (at most n steps: a cycle falls back below).
    active_path: list[int] = []
    at = position.get(leaf_id, -1) if leaf_id is not None else -1
    while at >= 0 and len(active_path) <= n:
        active_path.append(at)
        at = parent[at]
    active_path.reverse()
    active = {entries[i].get("id") for i in active_path}
    rows: list[list[Any]] = []
    ordered: list[Mapping[str, Any]] = []
    push_row, push_entry = rows.append, ordered.append
    multi_root = len(roots) > 1
    stack2: list[tuple[int, int, int, bool]] = [(r, 0, -1, multi_root) for r in reversed(roots)]
    while stack2:
        i, depth, parent_row, starts = stack2.pop()
        entry = entries[i]
        entry_id = entry.get("id")
        kind = entry.get("type")
        if kind == "message":
            message = entry.get("message")
            role = message.get("role") if message.__class__ is dict else None
            if role.__class__ is not str:
                role = None
            flags = F_RETIRED if role == "compactionSummary" else 0
            if role == "toolResult" or role == "bashExecution":
                flags |= F_TOOL
            elif role == "user":
                flags |= F_USER
            kind = role if role is not None else "message"
        else:
            flags = _tree_flags(entry)
            kind = kind if kind.__class__ is str else "?"
        if entry_id in active:
            flags |= F_ACTIVE
        if entry_id == leaf_id:
            flags |= F_LEAF
        children = kids.get(i)
        if children is not None and len(children) > 1:
            flags |= F_BRANCH_POINT
        if starts:
            flags |= F_BRANCH_START
        row = len(rows)
        label = labels.get(entry_id) if entry_id.__class__ is str else None
        push_row([entry_id, depth, kind, entry_summary(_preview(entry), TREE_SUMMARY_CHARS) if summaries else None,
                  flags, label[0] if label else None, parent_row, row, row])
        push_entry(entry)
        if children is not None:
            if len(children) == 1:
                stack2.append((children[0], depth, row, False))
            else:
                for child in reversed(children):
                    stack2.append((child, depth + 1, row, True))
    if len(rows) != n:
        # Entries on (or below) a parent cycle are not reached from a root.
        return _build_tree_data_nodes(manager, summaries=summaries)
    tree = _finish_rows(rows, ordered, leaf_id)
    tree.active_path = [entries[i] for i in active_path]
    return tree


def _timestamp_ms(entry: Mapping[str, Any]) -> float:
    value = parse_timestamp_ms(entry.get("timestamp"))
    return value if value is not None else float("inf")


def _build_tree_data_nodes(manager: SessionManager | ReadOnlySession, *, summaries: bool = True) -> TreeData:
    """:func:`build_tree_data` over :meth:`SessionManager.get_tree`: the general path,
    for sessions with a parent cycle (same rows as the position layout elsewhere;
    tests/web/test_web.py checks both agree)."""
    roots = manager.get_tree()
    leaf_id = manager.get_leaf_id()
    active = {e.get("id") for e in manager.get_branch()}
    rows: list[list[Any]] = []
    entries: list[Mapping[str, Any]] = []
    # (node, depth, parent row, starts a branch)
    stack: list[tuple[Any, int, int, bool]] = [(root, 0, -1, len(roots) > 1) for root in reversed(roots)]
    while stack:
        node, depth, parent, starts = stack.pop()
        entry = node.entry
        entry_id = entry.get("id")
        flags = _tree_flags(entry)
        if entry_id in active:
            flags |= F_ACTIVE
        if entry_id == leaf_id:
            flags |= F_LEAF
        children = node.children
        if len(children) > 1:
            flags |= F_BRANCH_POINT
        if starts:
            flags |= F_BRANCH_START
        row = len(rows)
        rows.append([entry_id, depth, entry_kind(entry),
                     entry_summary(_preview(entry), TREE_SUMMARY_CHARS) if summaries else None,
                     flags, node.label, parent, row, row])
        entries.append(entry)
        if len(children) == 1:
            stack.append((children[0], depth, row, False))
        else:
            for child in reversed(children):
                stack.append((child, depth + 1, row, True))
    return _finish_rows(rows, entries, leaf_id)


def _finish_rows(rows: list[list[Any]], entries: list[Mapping[str, Any]], leaf_id: str | None) -> TreeData:
    """Fill in subtree ends and tip rows of pre-order ``rows`` (see :class:`TreeData`)."""
    # Subtree ends and tips, children before parents (pre-order reversed).
    for i in range(len(rows) - 1, -1, -1):
        parent = rows[i][6]
        if parent >= 0 and rows[i][7] > rows[parent][7]:
            rows[parent][7] = rows[i][7]
    leaf_row = -1
    for i, row in enumerate(rows):
        # The last row of a subtree in pre-order is a tip: that of its newest branch.
        row[8] = row[7]
        if row[0] == leaf_id:
            leaf_row = i
    if leaf_row >= 0:
        for row in rows:
            if row[4] & F_ACTIVE:
                row[8] = leaf_row
    return TreeData(rows, leaf_id, {row[0]: i for i, row in enumerate(rows)}, entries)


def leaf_tips(rows: Iterable[list[Any]]) -> list[list[Any]]:
    """Rows of the tree that are tips (no children): one per branch."""
    return [row for i, row in enumerate(rows) if row[7] == i]
