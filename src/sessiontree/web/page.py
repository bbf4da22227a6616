"""The one HTML renderer of the viewer: Jinja2 templates over :mod:`sessiontree.web.views`.

Both the server (:mod:`sessiontree.web.app`) and ``export --format html``
(:func:`render_session_document`) render sessions through the functions
here, with the same templates: the server links its stylesheet and script,
the export inlines them (and the images are ``data:`` URLs already), so the
file opens from disk with no server and no network.

Escaping: the environment autoescapes every template, so any session text
reaches the page as text. The only values marked safe are rendered Markdown
(raw HTML disabled, see :func:`sessiontree.web.views.markdown_html`) and the
inlined assets of the package itself. JSON embedded in a page goes through
Jinja2's ``tojson`` filter, which escapes ``<``, ``>``, ``&`` and ``'`` so
that no session text can close the ``<script>`` element that holds it.
"""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime
from functools import lru_cache
from importlib import resources
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from sessiontree.core.listing import is_unknown_time
from sessiontree.core.render import entry_summary
from sessiontree.diff.branches import BranchComparison
from sessiontree.format.foreign.common import agent_of_header
from sessiontree.session.manager import SessionManager
from sessiontree.session.reading import ReadOnlySession, readonly_of_manager
from sessiontree.stores.base import Provenance
from sessiontree.web import views as view

__all__ = [
    "SERVER_CSP",
    "environment",
    "render_conversation",
    "render_list_page",
    "render_session_document",
    "render_session_page",
    "static_text",
]

#: Content-Security-Policy of every page the server sends: scripts, styles
#: and fetches only from the server itself, images also from ``data:`` URLs
#: (session images), nothing framed, no plugins, no inline script or style.
SERVER_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src data:; "
              "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")

#: Branches listed in the branch menu, newest first (every branch stays reachable from the tree).
BRANCH_MENU_TIPS = 300
#: Branches the export pre-renders at most (two views each); a session with
#: more tips gets its active branch and the newest others.
EXPORT_MAX_BRANCHES = 50
#: Entries of all pre-rendered branches together, at most.
EXPORT_MAX_ENTRIES = 20_000


@lru_cache(maxsize=1)
def environment() -> Environment:
    """The Jinja2 environment of the viewer (package templates, autoescape on for all)."""
    env = Environment(loader=PackageLoader("sessiontree.web", "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True),
                      trim_blocks=True, lstrip_blocks=True)
    env.globals["FILTER_MODES"] = view.FILTER_MODES
    env.filters["urlpart"] = url_part
    env.filters["listtime"] = list_time
    env.globals["insights_money"] = insights_money
    env.globals["turn_cost"] = view.turn_cost
    return env


def insights_money(rows: Any) -> str:
    """The cost of JSON rows with ``costNanos`` (the insights panel): ``$0.12``; ``~`` when
    any part was estimated, ``+?`` when calls were left unpriced (docs/usage.md)."""
    from sessiontree.usage.report import format_usd

    rows = list(rows)
    text = format_usd(sum(int(r.get("costNanos", 0)) for r in rows))
    if any(r.get("estimatedCalls") for r in rows):
        text = "~" + text
    return text + (" +?" if any(r.get("unpricedCalls") for r in rows) else "")


def list_time(value: datetime, fmt: str = "%Y-%m-%d %H:%MZ") -> str:
    """A session's listing time (UTC) as ``fmt``, or ``unknown`` for
    :data:`~sessiontree.core.listing.UNKNOWN_TIME` (docs/listing.md, "Unknown times")."""
    if is_unknown_time(value):
        return "unknown"
    return value.astimezone(UTC).strftime(fmt)


def url_part(value: object) -> str:
    """``value`` as one URL component (query value, fragment, path segment): every
    reserved character percent-encoded, so an id cannot add a parameter or end the
    component; lone surrogates become U+FFFD first (they have no UTF-8 form)."""
    return quote(view.scrub_surrogates(str(value)), safe="")


@lru_cache(maxsize=4)
def static_text(name: str) -> str:
    """A file of the package's ``static/`` folder, as text."""
    return resources.files("sessiontree.web").joinpath("static", name).read_text("utf-8")


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def render_list_page(page: view.ListPage, *, token_query: str = "") -> str:
    """The session list page (server only)."""
    return view.scrub_surrogates(environment().get_template("list.html").render(
        page=page, q=page.query, inline=False, token_query=token_query,
        suggest_query=lambda text: urlencode({"q": text})))


def render_conversation(conversation: view.Conversation, session_id: str, *, windowed: bool = True,
                        raw: bool = False) -> str:
    """The conversation pane's inner HTML for one window of a branch; with ``raw``, each
    entry of another agent's file shows its verbatim source record (folded)."""
    return view.scrub_surrogates(environment().get_template("conversation.html").render(
        conv=conversation, session_id=session_id, windowed=windowed, show_raw=raw))


def render_compare_page(compare: view.ComparePage) -> str:
    """The compare page (server only; docs/diff.md)."""
    return view.scrub_surrogates(environment().get_template("compare.html").render(cmp=compare, inline=False))


def _session_context(manager: SessionManager | ReadOnlySession, tree: view.TreeData, conversation: view.Conversation,
                     window: dict[str, Any] | None = None) -> dict[str, Any]:
    header = manager.get_header()
    tip_rows = [i for i, row in enumerate(tree.rows) if row[7] == i]
    tip_rows.reverse()  # newest branches first
    tree.summaries(tip_rows[:BRANCH_MENU_TIPS])
    tips = [tree.rows[i] for i in tip_rows[:BRANCH_MENU_TIPS]]
    return {
        "header": header,
        "session_id": header.get("id"),
        "title": manager.get_session_name() or header.get("id"),
        "tree_json": tree.json_text() if window is None else view.script_json(
            {"leaf": tree.leaf_id, "windowed": True, **window}),
        "tips": tips,
        "tip_count": len(tip_rows),
        "conv": conversation,
        "entry_count": len(tree.rows),
        "agent": agent_of_header(header),
    }


def render_session_page(manager: SessionManager | ReadOnlySession, tree: view.TreeData, conversation: view.Conversation, *,
                        version: str = "", token_query: str = "", window: dict[str, Any] | None = None,
                        resume_command: str | None = None, redacted: bool | None = None,
                        here: str = "/", origin: Provenance | None = None,
                        insights: dict[str, Any] | None = None) -> str:
    """The session page the server sends (assets linked, live updates on).

    With ``window`` (:meth:`TreeData.window`) the page carries only those tree
    rows and its script fetches the others as the tree scrolls; without, it
    carries every row. ``resume_command`` is shown with a copy button (the
    server starts no process; docs/agent-loop.md). ``redacted`` (``None``: no
    toggle) is the state the ``redacted`` toggle shows; ``here`` the page's path
    and query, where the toggle returns to. ``origin``, when the session has one
    (docs/sync.md, "Provenance"), is shown in the header as ``from user@host``. ``insights``
    (:meth:`sessiontree.usage.insights.SessionInsights.to_dict`) is shown as a folded panel
    under the header (docs/insights.md)."""
    context = _session_context(manager, tree, conversation, window)
    return view.scrub_surrogates(environment().get_template("session.html").render(
        **context, inline=False, version=version, token_query=token_query, resume_command=resume_command,
        redacted=redacted, here=here, origin=origin, insights=insights,
        conversation_html=Markup(render_conversation(conversation, context["session_id"]))))


def render_session_document(manager: SessionManager | ReadOnlySession, comparison: BranchComparison | None = None,
                            *, raw: bool = False) -> str:
    """The session page as one self-contained HTML document (``export --format html``).

    Styles, script and images are inline; a ``<meta>`` Content-Security-Policy
    allows exactly the inlined style and script (by hash) and ``data:``
    images, so the file makes no network request when opened. The active
    branch and up to :data:`EXPORT_MAX_BRANCHES` other branches (newest
    first, :data:`EXPORT_MAX_ENTRIES` entries in all) are pre-rendered in
    both views; the tree shows every entry.

    With ``comparison`` (``export --compare``, docs/diff.md), its summary and aligned
    rows, raw and model's view, are pre-rendered as the compare page shows them, in a
    section folded above the panes (opened without script); its text is escaped
    like the rest.

    The verbatim source records of another agent's entries (``foreign.raw``) stay out of
    the page unless ``raw`` (``export --raw``): they are the bulk of such a file and a
    reader has the page's own rendering of them (docs/viewer.md, "Export").

    A manager is read as it stands (:func:`~sessiontree.session.reading.readonly_of_manager`):
    its leaf is the active one, and nothing moves it.
    """
    session = manager if isinstance(manager, ReadOnlySession) else readonly_of_manager(manager)
    active_leaf = session.get_leaf_id()
    tree = view.build_tree_data(session)
    active = view.build_conversation(session, None, "raw", limit=10**9)
    branches: list[dict[str, Any]] = []
    budget = EXPORT_MAX_ENTRIES
    tips = [row[0] for row in reversed(view.leaf_tips(tree.rows))]
    if active_leaf is not None:
        tips = [active_leaf, *[t for t in tips if t != active_leaf]]
    for tip in tips[:EXPORT_MAX_BRANCHES]:
        length = len(session.get_branch(tip))
        if branches and length > budget:
            continue
        budget -= length
        for which in ("raw", "model"):
            conv = active if (tip == active_leaf and which == "raw") else \
                view.build_conversation(session, tip, which, limit=10**9)
            branches.append({"leaf": tip, "view": which,
                             "html": Markup(render_conversation(conv, session.get_session_id(),
                                                                windowed=False, raw=raw))})
    context = _session_context(session, tree, active)
    comparisons = [] if comparison is None else [
        view.build_compare_page(comparison, session.get_session_id(), which, []) for which in ("raw", "model")]
    css, js = static_text("app.css"), static_text("app.js")
    csp = (f"default-src 'none'; script-src {_hash(js)}; style-src {_hash(css)}; img-src data:; "
           "base-uri 'none'; form-action 'none'")
    return view.scrub_surrogates(environment().get_template("session.html").render(
        **context, inline=True, css=Markup(css), js=Markup(js), csp=csp, branches=branches, comparisons=comparisons,
        omitted_branches=max(0, len(tips) - len({b["leaf"] for b in branches})),
        conversation_html=Markup(branches[0]["html"]) if branches else Markup(""),
        version="", token_query="", entry_summary=entry_summary))
