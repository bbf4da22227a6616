"""View models of the web viewer: what the pages show, built from the library.

One module builds everything a page displays, for the server
(:mod:`sessiontree.web.app`) and the HTML export
(:func:`sessiontree.web.page.render_session_document`) alike; the Jinja2
templates only display these objects. No rule of the format is decided here
either: the tree is laid out with the rules of :meth:`SessionManager.get_tree`
(:func:`build_tree_data` says how; a cyclic session uses it directly), branches from
:meth:`SessionManager.get_branch`, the model's view from
:meth:`SessionManager.build_session_projection`, one-line summaries and
retired-record notes from :mod:`sessiontree.render`, and what a view marks
(edited, omitted, synthetic, kept in a compaction) is read off the
projection's result, never recomputed.

Invariants:

* Nothing here recurses on the depth of the tree or the length of a branch:
  a 100,000-entry chain lays out like a short one.
* Session text is never trusted: every string reaches the page through
  Jinja2 autoescaping; Markdown is rendered by ``markdown-it-py`` with raw
  HTML disabled and its link validation (no ``javascript:``, ``vbscript:``,
  ``file:`` or non-image ``data:`` URLs); image blocks become ``data:``
  URLs only for raster image types with base64 payloads.
* Nothing here writes to a store.

Seams for APIs other issues add (feature-detected, so this module works
before and after they land):

* search: :func:`search_sessions` calls ``store.search(query)`` when the
  store has it (issue 13), else scans titles and
  :attr:`SessionInfo.all_messages_text`;
* statistics: :func:`stats_provider` returns
  ``sessiontree.usage.session_stats`` when that module exists (issue 14),
  else ``None``, and the list hides its model, token and cost columns.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import json as jsonlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timezone
from typing import Any

from markdown_it import MarkdownIt
from markupsafe import Markup, escape

from sessiontree.core.listing import SessionInfo
from sessiontree.core.projection import INTERRUPTED_TEXT, is_active_compaction, is_retired_record, latest_edits
from sessiontree.core.render import RETIRED_NOTE, entry_kind, entry_summary, retired_record_text
from sessiontree.core.transcript import bash_text
from sessiontree.core.tree import label_state, parse_timestamp_ms
from sessiontree.format.gcpause import gc_paused
from sessiontree.search.query import settle_search_tail
from sessiontree.session.manager import SessionManager
from sessiontree.stores.base import SessionStore

__all__ = [
    "FILTER_MODES",
    "TREE_WINDOW_ROWS",
    "Conversation",
    "Item",
    "ListPage",
    "ListQuery",
    "ListRow",
    "Part",
    "TreeData",
    "build_branch_window",
    "build_conversation",
    "build_list_page",
    "build_tree_data",
    "markdown_html",
    "script_json",
    "scrub_surrogates",
    "search_sessions",
    "session_title",
    "stats_provider",
]

# --------------------------------------------------------------------------- Markdown

# CommonMark with tables and strikethrough; raw HTML off (session text is
# untrusted), typographer and linkify off (what the model wrote is shown as
# written). markdown-it's default validateLink refuses javascript:, vbscript:,
# file: and non-image data: URLs.
_MD = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"])
_DEFAULT_IMAGE = _MD.renderer.rules["image"]
#: A Markdown image is drawn only from a ``data:`` URL of a raster type with a
#: base64 payload; any other source would make the browser fetch a URL the
#: session chose (blocked by the Content-Security-Policy anyway).
_MD_IMAGE_SRC = re.compile(r"^data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/]*={0,2}\Z", re.IGNORECASE)


def _md_image(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    src = token.attrGet("src") or ""
    if _MD_IMAGE_SRC.match(src):
        return _DEFAULT_IMAGE(tokens, idx, options, env)
    alt = self.renderInlineAsText(token.children or [], options, env)
    return str(escape(f"[image: {alt}] ({src})"))


_MD.renderer.rules["image"] = _md_image.__get__(_MD.renderer)


_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_surrogates(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD.

    JSON may carry ``"\\ud800"`` alone (an agent that cut a string inside a
    UTF-16 pair writes exactly that); Python keeps it in a ``str``, and
    encoding a page that contains it as UTF-8 raises. Every page and JSON
    body the viewer sends goes through this once, at the end.
    """
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def markdown_html(text: str) -> Markup:
    """``text`` rendered as Markdown, safe to put in a page.

    Raw HTML in ``text`` is shown as text; links with dangerous schemes are
    left as text. Never raises on odd input.
    """
    return Markup(_MD.render(text))


# --------------------------------------------------------------------------- tree

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
                         "thinking_level_change", "context_window_change", "leaf"})

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
    loader: Callable[[Sequence[str]], list[Mapping[str, Any]]] | None = field(default=None, repr=False)
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
            full: Mapping[str, Mapping[str, Any]] = {}
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
            self._visible.pop(next(iter(self._visible)))
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
            from bisect import bisect_left

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


def script_json(value: Any) -> Markup:
    """``value`` as JSON safe inside a ``<script>`` element: ``<``, ``>``, ``&`` and ``'``
    written as ``\\u`` escapes (as Jinja2's ``tojson``), lone surrogates as U+FFFD."""
    import orjson

    try:
        text = orjson.dumps(value).decode("utf-8")
    except orjson.JSONEncodeError:
        # A lone surrogate (a string cut inside a UTF-16 pair): orjson refuses it.
        text = scrub_surrogates(jsonlib.dumps(value, ensure_ascii=False))
    return Markup(text.replace("&", "\\u0026").replace("<", "\\u003c")
                  .replace(">", "\\u003e").replace("'", "\\u0027"))


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

    :func:`sessiontree.render.entry_summary` keeps its rules; it just no
    longer normalises a 200 KB tool output to show 120 characters of it
    (that made the tree of a 100,000-entry session take seconds).
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


def build_tree_data(manager: SessionManager, *, summaries: bool = True) -> TreeData:
    """Lay out every entry of the session as tree rows (see :class:`TreeData`).

    With ``summaries=False`` the one-line summaries are left ``None`` for
    :meth:`TreeData.summaries` to fill in on demand: summarising 100,000
    entries costs seconds, and a page draws a few dozen rows at a time.

    A node with one child continues at the same depth; the children of a
    branch point (oldest first, as :meth:`SessionManager.get_tree` orders
    them) each start a branch one level deeper. Iterative (an explicit stack),
    linear in the number of entries. Works on skeleton entries
    (``store.read_skeleton``) as on full ones.

    The forest is built here over entry positions, without
    :class:`~sessiontree.tree.TreeNode` objects (a 100,000-entry session took
    seconds that way), with the rules of :func:`sessiontree.tree.build_tree`
    (docs/rules/tree.md H.1-H.5): roots in file order, children by parsed
    timestamp (stable). A session with a parent cycle takes the general path.
    """
    with gc_paused():  # 100,000 rows of new lists: the collector would run ~100 times
        return _build_tree_data(manager, summaries)


def _build_tree_data(manager: SessionManager, summaries: bool) -> TreeData:
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
    for p, children in kids.items():
        if len(children) > 1:
            children.sort(key=lambda i: _timestamp_ms(entries[i]))
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


def _build_tree_data_nodes(manager: SessionManager, *, summaries: bool = True) -> TreeData:
    """:func:`build_tree_data` over :meth:`SessionManager.get_tree`: the general path,
    for sessions with a parent cycle (same rows as the position layout elsewhere;
    tests/test_web.py checks both agree)."""
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
        for i, row in enumerate(rows):
            if row[4] & F_ACTIVE:
                row[8] = leaf_row
    return TreeData(rows, leaf_id, {row[0]: i for i, row in enumerate(rows)}, entries)


# --------------------------------------------------------------------------- conversation

#: Lines and characters above which a text block is folded.
FOLD_LINES = 12
FOLD_CHARS = 1500
#: Characters of one block shown at most; the rest is cut with a note.
MAX_BLOCK_CHARS = 200_000
#: Conversation items rendered at once; earlier ones load on demand.
WINDOW_ITEMS = 200

_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_BASE64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")


@dataclass
class Part:
    """One displayable piece of a conversation item.

    Attributes:
        kind: ``"markdown"`` (``html`` is rendered Markdown), ``"text"``
            (plain text, shown preformatted), ``"thinking"``, ``"image"``
            (``src`` is a ``data:`` URL, or ``None`` with ``text`` saying why),
            ``"tool"`` (a tool call: ``name``, ``text`` = its arguments as
            JSON, ``result`` = the paired result :class:`Item` or ``None``),
            ``"note"``.
        folded: whether the part starts folded (long text, thinking).
        lines: number of lines of ``text``.
    """

    kind: str
    text: str = ""
    html: Markup | None = None
    src: str | None = None
    name: str = ""
    result: Item | None = None
    folded: bool = False
    lines: int = 0
    truncated: int = 0


@dataclass
class Item:
    """One entry (or projected message) of the conversation pane.

    Attributes:
        id: the entry id (anchor and permalink target), or ``None``.
        kind: css-friendly kind: ``user``, ``assistant``, ``toolResult``,
            ``bashExecution``, ``custom``, ``branchSummary``, ``compaction``,
            ``retired``, ``system``, ``note``, ``omitted``, ``compacted``.
        title: the heading shown (role, tool name, ...).
        timestamp: the entry's ISO timestamp.
        parts: the :class:`Part` list shown in order.
        marks: ``(css class, text)`` badges: edits, synthetic results,
            archival records, kept-tail entries.
        meta: small facts shown on the heading line (model, token usage).
        error: whether it reports an error (tool error, failed turn).
    """

    id: str | None
    kind: str
    title: str
    timestamp: str | None = None
    parts: list[Part] = field(default_factory=list)
    marks: list[tuple[str, str]] = field(default_factory=list)
    meta: list[str] = field(default_factory=list)
    error: bool = False
    dim: bool = False


@dataclass
class Conversation:
    """A window of the conversation of one branch.

    Attributes:
        leaf_id: the branch's leaf.
        view: ``"raw"`` (every entry of the branch) or ``"model"`` (the projection).
        items: the items of this window.
        start: index of the first item of the window among ``total``.
        total: number of items of the whole branch in this view.
        model_note: for the model view, a sentence about the projection
            (message count, model, thinking level).
    """

    leaf_id: str | None
    view: str
    items: list[Item]
    start: int
    total: int
    model_note: str = ""


def _clip(text: str) -> tuple[str, int]:
    if len(text) <= MAX_BLOCK_CHARS:
        return text, 0
    return text[:MAX_BLOCK_CHARS], len(text) - MAX_BLOCK_CHARS


def _text_part(text: str, kind: str = "text", fold: bool = True) -> Part:
    text, cut = _clip(text)
    lines = text.count("\n") + 1
    folded = fold and (lines > FOLD_LINES or len(text) > FOLD_CHARS)
    html = markdown_html(text) if kind == "markdown" else None
    return Part(kind, text=text, html=html, folded=folded, lines=lines, truncated=cut)


def _image_part(block: Mapping[str, Any]) -> Part:
    mime = block.get("mimeType")
    data = block.get("data")
    if not isinstance(mime, str) or mime.lower() not in _IMAGE_TYPES:
        return Part("image", text=f"image of type {mime!r} not shown")
    if not isinstance(data, str) or not _BASE64.match(data):
        return Part("image", text="image data is not base64; not shown")
    try:
        size = len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return Part("image", text="image data is not base64; not shown")
    return Part("image", src=f"data:{mime.lower()};base64,{data}", text=f"{mime}, {size} bytes")


def _json_text(value: Any) -> str:
    import json

    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def _content_parts(content: Any, *, markdown: bool) -> list[Part]:
    """Parts of a message ``content`` (a string or blocks), tool calls excluded."""
    if isinstance(content, str):
        return [_text_part(content, "markdown" if markdown else "text", fold=not markdown)] if content else []
    parts: list[Part] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            if block["text"]:
                parts.append(_text_part(block["text"], "markdown" if markdown else "text", fold=not markdown))
        elif kind == "thinking":
            thinking = block.get("thinking") if isinstance(block.get("thinking"), str) else ""
            if block.get("redacted") and not thinking:
                thinking = "(redacted thinking)"
            part = _text_part(thinking, "thinking")
            part.folded = True  # thinking is folded by default
            parts.append(part)
        elif kind == "image":
            parts.append(_image_part(block))
    return parts


def _usage_meta(message: Mapping[str, Any]) -> list[str]:
    meta: list[str] = []
    model = message.get("model")
    if isinstance(model, str) and model:
        provider = message.get("provider")
        meta.append(f"{provider}/{model}" if isinstance(provider, str) and provider else model)
    usage = message.get("usage")
    if isinstance(usage, Mapping):
        def num(key: str) -> int:
            value = usage.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else 0
        tokens = f"{num('input')} in, {num('output')} out"
        if num("cacheRead") or num("cacheWrite"):
            tokens += f", cache {num('cacheRead')} read / {num('cacheWrite')} write"
        meta.append(tokens)
        cost = usage.get("cost")
        total = cost.get("total") if isinstance(cost, Mapping) else None
        if isinstance(total, (int, float)) and not isinstance(total, bool) and total:
            meta.append(f"${total:.4f}")
    stop = message.get("stopReason")
    if stop in ("aborted", "error", "length"):
        meta.append(f"stopped: {stop}")
    return meta


def _message_item(entry_id: str | None, timestamp: Any, message: Mapping[str, Any],
                  results: Callable[[str], Item | None]) -> Item:
    """The item of one agent message; ``results(call_id)`` gives a tool call's paired result."""
    role = message.get("role")
    content = message.get("content")
    ts = timestamp if isinstance(timestamp, str) else None
    if role == "user":
        return Item(entry_id, "user", "User", ts, _content_parts(content, markdown=False))
    if role == "assistant":
        item = Item(entry_id, "assistant", "Assistant", ts, _content_parts(content, markdown=True),
                    meta=_usage_meta(message), error=message.get("stopReason") in ("error", "aborted"))
        if isinstance(message.get("errorMessage"), str):
            item.parts.append(Part("note", text=f"error: {message['errorMessage']}"))
        for block in content if isinstance(content, list) else ():
            if isinstance(block, Mapping) and block.get("type") == "toolCall":
                call_id = block.get("id")
                name = block.get("name") if isinstance(block.get("name"), str) else "tool"
                result = results(call_id) if isinstance(call_id, str) else None
                args = _json_text(block.get("arguments"))
                part = _text_part(args)
                part.kind, part.name, part.result = "tool", name, result
                item.parts.append(part)
        return item
    if role == "toolResult":
        name = message.get("toolName") if isinstance(message.get("toolName"), str) else "tool"
        item = Item(entry_id, "toolResult", f"Result: {name}", ts, _content_parts(content, markdown=False),
                    error=message.get("isError") is True)
        if not item.parts:
            item.parts.append(Part("note", text="(no output)"))
        return item
    if role == "bashExecution":
        item = Item(entry_id, "bashExecution", "Shell", ts, [_text_part(bash_text(message))],
                    error=message.get("exitCode") not in (0, None) or message.get("cancelled") is True)
        if message.get("excludeFromContext") is True:
            item.marks.append(("muted", "excluded from context (!! command)"))
        return item
    if role == "branchSummary":
        summary = message.get("summary") if isinstance(message.get("summary"), str) else ""
        return Item(entry_id, "branchSummary", "Branch summary", ts, [_text_part(summary, "markdown", fold=False)])
    if role == "custom":
        custom = message.get("customType") if isinstance(message.get("customType"), str) else "custom"
        if custom == "compaction":
            return Item(entry_id, "compaction", "Compaction: what the model sees instead of the turns before",
                        ts, _content_parts(content, markdown=False))
        item = Item(entry_id, "custom", f"Extension message: {custom}", ts, _content_parts(content, markdown=False))
        if message.get("display") is False:
            item.marks.append(("muted", "not displayed in the agent's UI"))
        return item
    if role == "system":
        return Item(entry_id, "system", "System", ts, _content_parts(content, markdown=False))
    return Item(entry_id, "note", str(role), ts, _content_parts(content, markdown=False))


def _entry_message(entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The agent message an entry displays as (raw view), or ``None``."""
    kind = entry.get("type")
    if kind == "message" and isinstance(entry.get("message"), Mapping):
        return entry["message"]
    if kind == "custom_message":
        return {"role": "custom", "customType": entry.get("customType"), "content": entry.get("content"),
                "display": entry.get("display")}
    if kind == "branch_summary":
        return {"role": "branchSummary", "summary": entry.get("summary"), "fromId": entry.get("fromId")}
    return None


def _note_item(entry: Mapping[str, Any]) -> Item:
    """A short note for an entry that is not a message (settings, labels, names, boundaries)."""
    entry_id = entry.get("id")
    ts = entry.get("timestamp") if isinstance(entry.get("timestamp"), str) else None
    if is_retired_record(entry):
        item = Item(entry_id, "retired", "Retired record", ts,
                    [_text_part(retired_record_text(entry))])
        item.marks.append(("archival", f"archival: {RETIRED_NOTE}"))
        return item
    if is_active_compaction(entry):
        summary = entry.get("summary") if isinstance(entry.get("summary"), str) else ""
        item = Item(entry_id, "compaction", "Compaction boundary", ts, [_text_part(summary)])
        item.marks.append(("boundary", entry_summary(entry)))
        return item
    return Item(entry_id, "note", entry_kind(entry), ts, [Part("note", text=entry_summary(entry, 300))], dim=True)


def _result_index(messages: Sequence[tuple[str | None, Any, Mapping[str, Any]]]) -> dict[int, int]:
    """Pair tool calls with results over one ordered message list: ``{result position: call position}``.

    A result pairs with the nearest earlier unanswered call of the same id
    (the first result wins); others stay standalone.
    """
    open_calls: dict[str, int] = {}
    paired: dict[int, int] = {}
    for position, (_, _, message) in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            for block in message.get("content") if isinstance(message.get("content"), list) else ():
                if isinstance(block, Mapping) and block.get("type") == "toolCall" and isinstance(block.get("id"), str):
                    open_calls[block["id"]] = position
        elif role == "toolResult":
            call_id = message.get("toolCallId")
            if isinstance(call_id, str) and call_id in open_calls:
                paired[position] = open_calls.pop(call_id)
    return paired


@dataclass
class _Unit:
    """One row of a view before items are built: an entry, maybe with its messages."""

    entry: Mapping[str, Any] | None
    message: Mapping[str, Any] | None = None
    marks: list[tuple[str, str]] = field(default_factory=list)
    kind: str | None = None   # "omitted" / "compacted" placeholders
    title: str = ""
    text: str = ""


def _raw_units(branch: Sequence[Mapping[str, Any]]) -> list[_Unit]:
    return [_Unit(entry, _entry_message(entry)) for entry in branch]


def _model_units(manager: SessionManager, branch: Sequence[Mapping[str, Any]]) -> tuple[list[_Unit], str]:
    """The projection as units: each projected message with its source entry and marks,
    plus placeholders for entries that send nothing (compacted, kept in the boundary,
    omitted by an edit, dropped by tool pairing) and archival records."""
    projection = manager.build_session_projection()
    by_id = {pe.source_entry.get("id"): pe for pe in projection.entries}
    edits = latest_edits(branch)
    boundary = next((pe.source_entry for pe in projection.entries if is_active_compaction(pe.source_entry)), None)
    units: list[_Unit] = []
    compacted: list[Mapping[str, Any]] = []

    def flush_compacted() -> None:
        if compacted:
            first, last = compacted[0].get("id"), compacted[-1].get("id")
            units.append(_Unit(compacted[0], kind="compacted", title=f"{len(compacted)} entries not sent",
                               text=f"Entries {first} … {last} lie before the compaction boundary; the model "
                                    f"sees them only through the compaction message."))
            compacted.clear()

    # Branch order; the boundary's kept tail is shown where the boundary is (it is
    # inside the boundary's message), the entries before it are collapsed.
    boundary_id = boundary.get("id") if boundary is not None else None
    boundary_index = next((i for i, e in enumerate(branch) if e.get("id") == boundary_id), None)
    # The kept tail: context entries that lie before the boundary on the branch.
    kept_ids = ({e.get("id") for e in branch[:boundary_index]} & set(by_id)) if boundary_index is not None else set()
    for index, entry in enumerate(branch):
        entry_id = entry.get("id")
        pe = by_id.get(entry_id)
        if is_retired_record(entry):
            units.append(_Unit(entry, marks=[("archival", f"archival: {RETIRED_NOTE}")]))
            continue
        if boundary_index is not None and index < boundary_index:
            if entry_id in kept_ids:
                flush_compacted()
                units.append(_Unit(entry, kind="omitted", title="kept in the compaction message",
                                   text=entry_summary(entry, 160),
                                   marks=[("kept", f"kept tail of boundary {boundary_id}")]))
            else:
                compacted.append(entry)
            continue
        flush_compacted()
        if pe is None:
            # Not a context entry at all (state, labels, names): shown as a note.
            if _entry_message(entry) is None:
                units.append(_Unit(entry))
            continue
        edit = edits.get(entry_id) if isinstance(entry_id, str) else None
        own = _entry_message(entry)
        own_is_result = own is not None and own.get("role") == "toolResult"
        if not pe.messages:
            if edit is not None and edit.get("replacement") is None:
                units.append(_Unit(entry, kind="omitted", title="omitted from the model's context",
                                   text=entry_summary(entry, 160),
                                   marks=[("edit", f"omitted by context edit {edit.get('id')}")]))
            elif own_is_result:
                units.append(_Unit(entry, kind="omitted", title="dropped: orphaned or duplicate tool result",
                                   text=entry_summary(entry, 160), marks=[("edit", "dropped by tool pairing")]))
            elif own is None and entry.get("type") not in ("message", "custom_message", "branch_summary"):
                units.append(_Unit(entry))
            else:
                units.append(_Unit(entry, kind="omitted", title="sends nothing to the model",
                                   text=entry_summary(entry, 160)))
            continue
        for message in pe.messages:
            marks: list[tuple[str, str]] = []
            synthetic = message.get("role") == "toolResult" and (
                not own_is_result or message.get("toolCallId") != own.get("toolCallId"))
            if synthetic:
                marks.append(("synthetic", "synthetic result: the call was interrupted, none was recorded"))
            elif edit is not None and own is not None and message.get("role") == own.get("role") \
                    and message.get("content") is not own.get("content"):
                marks.append(("edit", f"content replaced by context edit {edit.get('id')}"))
            if entry is boundary and message.get("role") == "system":
                marks.append(("muted", "system checkpoint stored with the boundary"))
            units.append(_Unit(entry, message, marks))
    flush_compacted()
    model = projection.model
    note = (f"{len(projection.messages)} messages sent to the model"
            + (f"; model {model.get('provider')}/{model.get('modelId')}" if isinstance(model, Mapping) else "")
            + f"; thinking level {projection.thinking_level}")
    if any(m.get("content") and isinstance(m.get("content"), list) and any(
            isinstance(b, Mapping) and b.get("text") == INTERRUPTED_TEXT for b in m["content"])
           for m in projection.messages if m.get("role") == "toolResult"):
        note += "; includes synthetic results for interrupted tool calls"
    return units, note


def _items(units: Sequence[_Unit], start: int, stop: int) -> list[Item]:
    """Items for ``units[start:stop]``, tool results nested under their calls."""
    messages = [(None, None, u.message) if u.message is not None else (None, None, {}) for u in units]
    paired = _result_index(messages)
    by_call: dict[tuple[int, str], int] = {}
    for result_pos, call_pos in paired.items():
        call_id = units[result_pos].message.get("toolCallId")  # type: ignore[union-attr]
        by_call[(call_pos, call_id)] = result_pos
    items: list[Item] = []
    for position in range(start, stop):
        unit = units[position]
        if position in paired and paired[position] >= start:
            continue  # shown under its call
        items.append(_unit_item(unit, lambda call_id, p=position: _paired(units, by_call, p, call_id)))
    return items


def _paired(units: Sequence[_Unit], by_call: Mapping[tuple[int, str], int], call_pos: int, call_id: str) -> Item | None:
    result_pos = by_call.get((call_pos, call_id))
    if result_pos is None:
        return None
    return _unit_item(units[result_pos], lambda _c: None)


def _unit_item(unit: _Unit, results: Callable[[str], Item | None]) -> Item:
    entry = unit.entry or {}
    entry_id = entry.get("id") if isinstance(entry.get("id"), str) else None
    timestamp = entry.get("timestamp")
    if unit.kind is not None:
        item = Item(entry_id, unit.kind, unit.title, timestamp if isinstance(timestamp, str) else None,
                    [Part("note", text=unit.text)], dim=True)
    elif unit.message is not None:
        item = _message_item(entry_id, timestamp, unit.message, results)
    else:
        item = _note_item(entry)
    item.marks.extend(m for m in unit.marks if m not in item.marks)
    return item


def build_conversation(manager: SessionManager, leaf_id: str | None, view: str = "raw", *,
                       start: int | None = None, around: str | None = None,
                       limit: int = WINDOW_ITEMS, memo: dict[Any, Any] | None = None) -> Conversation:
    """A window of the conversation of the branch ending at ``leaf_id``.

    Args:
        manager: an (in-memory, read-only) manager of the session; its leaf
            is moved to ``leaf_id`` (nothing is written).
        leaf_id: the branch's leaf; ``None`` keeps the manager's leaf.
        view: ``"raw"``: every entry of the branch; ``"model"``: the
            projection (what the model is sent), with marks for entries that
            send nothing or something else.
        start: first unit of the window; default: the last ``limit`` units.
        around: an entry id the window must contain (a permalink target).
        limit: units per window.
        memo: a dict the caller keeps per session version: the branch's
            units are kept there per ``(leaf, view)``, so the next window of
            the same branch costs only its own items.

    Raises:
        EntryNotFoundError: ``leaf_id`` is not an entry of the session.
        ValueError: ``view`` is neither ``"raw"`` nor ``"model"``.
    """
    if view not in ("raw", "model"):
        raise ValueError(f"unknown view {view!r}: expected 'raw' or 'model'")
    if leaf_id is not None:
        manager.branch(leaf_id)
    key = (manager.get_leaf_id(), view)
    if memo is not None and key in memo:
        units, note = memo[key]
    else:
        branch = manager.get_branch()
        note = ""
        if view == "raw":
            units = _raw_units(branch)
        else:
            units, note = _model_units(manager, branch)
        if memo is not None:
            if len(memo) >= 8:
                memo.pop(next(iter(memo)))
            memo[key] = (units, note)
    total = len(units)
    hit = None
    if around is not None:
        hit = next((i for i, u in enumerate(units) if u.entry is not None and u.entry.get("id") == around), None)
    start, stop = _window_bounds(total, start, hit, limit)
    return Conversation(manager.get_leaf_id(), view, _items(units, start, stop), start, total, note)


def _window_bounds(total: int, start: int | None, hit: int | None, limit: int) -> tuple[int, int]:
    """``(start, stop)`` of a window of at most ``limit`` of ``total`` items: centred on
    item ``hit`` when given (a permalink target), else from ``start``, else the last
    ``limit`` items; clamped to ``[0, total]``."""
    if hit is not None:
        start = max(0, min(hit - limit // 2, total - limit))
    if start is None:
        start = max(0, total - limit)
    start = max(0, min(start, total))
    return start, min(total, start + limit)


#: Entries read past a window's end so that a call near the end still finds its result.
PAIRING_LOOKAHEAD = 64


def build_branch_window(path: Sequence[Mapping[str, Any]], load: Callable[[Sequence[str]], list[Mapping[str, Any]]],
                    *, start: int | None = None, around: str | None = None,
                    limit: int = WINDOW_ITEMS) -> Conversation:
    """A window of the raw view of one branch, reading only the window's entries.

    The same window :func:`build_conversation` gives for ``view="raw"``
    (raw items are one per branch entry), but the branch comes as
    skeletons (``store.read_skeleton``) and only the entries of the window
    and :data:`PAIRING_LOOKAHEAD` after it are read in full (``load``,
    i.e. ``store.read_entries``). Tool results are paired with calls
    within what was read: a result more than the look-ahead past the
    window's end is not nested under its call (the last window, the one a
    page opens on, has nothing after it, so it is exact).

    Args:
        path: the branch root first, as skeleton (or full) entries.
        load: ``ids -> full entries``.
        start, around, limit: as :func:`build_conversation`.
    """
    total = len(path)
    hit = None
    if around is not None:
        hit = next((i for i in range(total - 1, -1, -1) if path[i].get("id") == around), None)
    start, stop = _window_bounds(total, start, hit, limit)
    read_to = min(total, stop + PAIRING_LOOKAHEAD)
    ids = [e.get("id") for e in path[start:read_to]]
    full = {e.get("id"): e for e in load([i for i in ids if isinstance(i, str)])}
    entries = [full.get(e.get("id"), e) for e in path[start:read_to]]
    units = _raw_units(entries)
    leaf = path[-1].get("id") if path else None
    return Conversation(leaf if isinstance(leaf, str) else None, "raw", _items(units, 0, stop - start),
                        start, total)


# --------------------------------------------------------------------------- session list


def session_title(info: SessionInfo) -> str:
    """The title a session is listed under: its name, else its fresh summary, else its first message."""
    return " ".join((info.name or info.summary or info.first_message or "").split())


@dataclass
class ListQuery:
    """The list page's query (all optional).

    Attributes:
        q: search text.
        project: keep sessions whose cwd equals this or lies below it.
        named: only sessions with a current name.
        since, until: ``modified`` (or ``created``, with ``sort="created"``) date bounds, inclusive, UTC.
        internal: include internal workflow sessions.
        sort: ``"modified"`` or ``"created"`` (newest first).
        page: 1-based page number.
        per_page: rows per page.
    """

    q: str = ""
    project: str = ""
    named: bool = False
    since: date | None = None
    until: date | None = None
    internal: bool = False
    sort: str = "modified"
    page: int = 1
    per_page: int = 50


@dataclass
class ListRow:
    """One row of the session list (see :func:`build_list_page`)."""

    info: SessionInfo
    title: str
    stats: Mapping[str, Any] | None = None
    snippet: str = ""


@dataclass
class ListPage:
    """One page of the session list.

    Attributes:
        rows: the sessions of this page.
        total: sessions matching the query.
        pages: number of pages.
        projects: every project (cwd) of the store, for the filter.
        search_mode: ``"store"`` (``store.search``) or ``"scan"`` (fallback),
            empty without a query.
        has_stats: whether the statistics columns are shown.
    """

    query: ListQuery
    rows: list[ListRow]
    total: int
    pages: int
    projects: list[str]
    search_mode: str = ""
    has_stats: bool = False


def search_sessions(store: SessionStore, infos: Sequence[SessionInfo], q: str) -> tuple[list[SessionInfo], dict[str, str], str]:
    """Sessions of ``infos`` matching ``q``, best first, with snippets, and how they were found.

    Uses ``store.search(q)`` when the store has one (issue 13: its results
    may be objects or dicts with ``session_id`` / ``sessionId`` / ``id``
    and an optional ``snippet``); otherwise a case-insensitive scan of every
    word of ``q`` over each session's title and
    :attr:`SessionInfo.all_messages_text`, in listing order.

    Returns:
        ``(matches, {session id: snippet}, "store" | "scan")``.
    """
    search = getattr(store, "search", None)
    if callable(search):
        settle_search_tail(store)  # a long pending tail is merged once, not scanned by every query
        by_id = {info.id: info for info in infos}
        found: list[SessionInfo] = []
        snippets: dict[str, str] = {}
        for hit in search(q):
            get = hit.get if isinstance(hit, Mapping) else (lambda k, h=hit: getattr(h, k, None))
            sid = get("session_id") or get("sessionId") or get("id")
            if isinstance(sid, str) and sid in by_id and by_id[sid] not in found:
                found.append(by_id[sid])
                snippet = get("snippet")
                if isinstance(snippet, str):
                    snippets[sid] = snippet
        return found, snippets, "store"
    words = [w for w in q.casefold().split() if w]
    found = []
    snippets = {}
    for info in infos:
        title = session_title(info)
        haystack = f"{title}\n{info.all_messages_text}"
        folded = haystack.casefold()
        if all(w in folded for w in words):
            found.append(info)
            at = folded.find(words[0]) if words else 0
            if at > len(title):
                snippets[info.id] = " ".join(haystack[max(0, at - 60): at + 100].split())
    return found, snippets, "scan"


def stats_provider() -> Callable[[SessionStore, Sequence[str]], Mapping[str, Mapping[str, Any]]] | None:
    """The statistics of the list page: :func:`sessiontree.usage.session_stats` (models,
    tokens and cost per session), looked up when the page is built; ``None`` hides the
    columns (a build without the usage module).
    """
    try:
        usage = importlib.import_module("sessiontree.usage.report")
    except ImportError:
        return None
    hook = getattr(usage, "session_stats", None)
    return hook if callable(hook) else None


def _day(value: datetime) -> date:
    return value.astimezone(UTC).date()


def build_list_page(store: SessionStore, query: ListQuery, infos: Sequence[SessionInfo] | None = None) -> ListPage:
    """The session list for ``query``: filtered, searched, sorted, one page of it.

    Args:
        store: the store to list (read-only).
        query: see :class:`ListQuery`.
        infos: the listing to use (a cache of ``SessionManager.list_all(store,
            include_internal=True)``); read from the store when omitted.
    """
    if infos is None:
        infos = SessionManager.list_all(store, include_internal=True)
    projects = sorted({i.cwd for i in infos if i.cwd})
    rows = [i for i in infos if query.internal or not i.internal]
    if query.project:
        prefix = query.project.rstrip("/") + "/"
        rows = [i for i in rows if i.cwd == query.project or i.cwd.startswith(prefix)]
    if query.named:
        rows = [i for i in rows if i.name]
    key: Callable[[SessionInfo], datetime] = (lambda i: i.created) if query.sort == "created" else (lambda i: i.modified)
    if query.since is not None:
        rows = [i for i in rows if _day(key(i)) >= query.since]
    if query.until is not None:
        rows = [i for i in rows if _day(key(i)) <= query.until]
    snippets: dict[str, str] = {}
    mode = ""
    if query.q.strip():
        rows, snippets, mode = search_sessions(store, rows, query.q.strip())
    else:
        rows = sorted(rows, key=key, reverse=True)
    total = len(rows)
    per_page = max(1, query.per_page)
    pages = max(1, -(-total // per_page))
    page = min(max(1, query.page), pages)
    query.page = page
    window = rows[(page - 1) * per_page: page * per_page]
    hook = stats_provider()
    stats: Mapping[str, Mapping[str, Any]] = {}
    if hook is not None:
        stats = hook(store, [i.id for i in window]) or {}
    out = [ListRow(i, session_title(i) or "(untitled)", stats.get(i.id), snippets.get(i.id, "")) for i in window]
    return ListPage(query, out, total, pages, projects, mode, hook is not None)


def leaf_tips(rows: Iterable[list[Any]]) -> list[list[Any]]:
    """Rows of the tree that are tips (no children): one per branch."""
    return [row for i, row in enumerate(rows) if row[7] == i]
