"""View models of the web viewer: what the pages show, built from the library.

This package builds everything a page displays, for the server
(:mod:`sessiontree.web.app`) and the HTML export
(:func:`sessiontree.web.page.render_session_document`) alike; the Jinja2
templates only display these objects. No rule of the format is decided here
either: the tree is laid out with the rules of :meth:`SessionManager.get_tree`
(:func:`build_tree_data` says how; a cyclic session uses it directly), branches from
:meth:`SessionManager.get_branch`, the model's view from
:meth:`SessionManager.build_session_projection`, one-line summaries and
retired-record notes from :mod:`sessiontree.core.render`, and what a view marks
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

One module per page or pane, plus what they share:

* :mod:`~sessiontree.web.views.listing`: the session list (filters, search
  through :func:`sessiontree.search.query.search`, statistics through
  :func:`sessiontree.usage.report.session_stats`);
* :mod:`~sessiontree.web.views.tree`: the session page's tree pane (rows, windows);
* :mod:`~sessiontree.web.views.conversation`: the conversation pane (items, windows),
  over the units of :mod:`~sessiontree.web.views.units` (raw and model views);
* :mod:`~sessiontree.web.views.turns`: the pane's reading order (turns, one response's
  parts together, annotations folded, subagents at their call);
* :mod:`~sessiontree.web.views.compare`: the compare page (two branches aligned, docs/diff.md);
* :mod:`~sessiontree.web.views.markdown` and :mod:`~sessiontree.web.views.common`:
  safe Markdown, surrogate scrubbing and JSON inside a page.

Callers use the package (``from sessiontree.web import views as view``).
"""

from sessiontree.web.views.common import script_json, scrub_surrogates
from sessiontree.web.views.compare import ComparePage, build_compare_page
from sessiontree.web.views.conversation import (
    FOLD_CHARS,
    FOLD_LINES,
    MAX_BLOCK_CHARS,
    PAIRING_LOOKAHEAD,
    WINDOW_ITEMS,
    Conversation,
    Item,
    Part,
    build_branch_window,
    build_conversation,
)
from sessiontree.web.views.listing import (
    ListPage,
    ListQuery,
    ListRow,
    build_list_page,
    search_sessions,
    session_title,
)
from sessiontree.web.views.markdown import markdown_html
from sessiontree.web.views.tree import (
    F_ACTIVE,
    F_BRANCH_POINT,
    F_BRANCH_START,
    F_BRANCH_SUMMARY,
    F_COMPACTION,
    F_CONTEXT_EDIT,
    F_LEAF,
    F_META,
    F_RETIRED,
    F_TOOL,
    F_USER,
    FILTER_MODES,
    TREE_SUMMARY_CHARS,
    TREE_WINDOW_ROWS,
    TreeData,
    build_tree_data,
    leaf_tips,
)
from sessiontree.web.views.turns import Group, Turn, build_turns, turn_cost

__all__ = [
    "FILTER_MODES",
    "FOLD_CHARS",
    "FOLD_LINES",
    "F_ACTIVE",
    "F_BRANCH_POINT",
    "F_BRANCH_START",
    "F_BRANCH_SUMMARY",
    "F_COMPACTION",
    "F_CONTEXT_EDIT",
    "F_LEAF",
    "F_META",
    "F_RETIRED",
    "F_TOOL",
    "F_USER",
    "MAX_BLOCK_CHARS",
    "PAIRING_LOOKAHEAD",
    "TREE_SUMMARY_CHARS",
    "TREE_WINDOW_ROWS",
    "WINDOW_ITEMS",
    "ComparePage",
    "Conversation",
    "Group",
    "Item",
    "ListPage",
    "ListQuery",
    "ListRow",
    "Part",
    "TreeData",
    "Turn",
    "build_branch_window",
    "build_compare_page",
    "build_conversation",
    "build_list_page",
    "build_tree_data",
    "build_turns",
    "leaf_tips",
    "markdown_html",
    "script_json",
    "scrub_surrogates",
    "search_sessions",
    "session_title",
    "turn_cost",
]
