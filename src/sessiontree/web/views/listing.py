"""The session list page: filters, search, sort, pages and statistics."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from typing import Any

from sessiontree.core.listing import SessionInfo
from sessiontree.errors import SearchCursorError, SearchQueryError
from sessiontree.format.idprefix import short_session_ids, split_subagent
from sessiontree.search.query import search_request
from sessiontree.search.suggest import suggest
from sessiontree.session.listing import ListingFilter, list_sessions
from sessiontree.session.manager import SessionManager
from sessiontree.stores.base import Provenance, SessionStore
from sessiontree.usage.report import session_stats

__all__ = [
    "ListPage",
    "ListQuery",
    "ListRow",
    "build_list_page",
    "search_sessions",
    "session_title",
]

def session_title(info: SessionInfo) -> str:
    """The title a session is listed under: its name, else its fresh summary, else its first message."""
    return " ".join((info.name or info.summary or info.first_message or "").split())


@dataclass
class ListQuery:
    """The list page's query (all optional).

    Attributes:
        q: search text.
        project: keep sessions of this project directory (the listing's ``cwd`` filter,
            docs/rules/listing.md L.18: the header ``cwd`` resolves to it).
        named: only sessions with a current name.
        since, until: bounds on the last activity (``modified``, whatever the sort), whole
            days, inclusive, UTC (:mod:`sessiontree.session.listing`).
        internal: include internal workflow sessions.
        sort: ``"modified"`` or ``"created"`` (newest first).
        page: 1-based page number (the listing without ``q``).
        per_page: rows per page.
        cursor: with ``q``: continue after the search's last hit of the previous page
            (:attr:`ListPage.next_cursor`; docs/search.md, "Paging"); a search is paged by
            it, not by ``page``.
        host, user: keep sessions first synced or imported on this host (name or
            machine id) / by this user (docs/sync.md, "Provenance").
        agent: keep sessions of this agent (``SessionInfo.agent``: ``pi``, ``claude-code``,
            ``codex``; docs/listing.md, "Agent").
    """

    q: str = ""
    project: str = ""
    agent: str = ""
    host: str = ""
    user: str = ""
    named: bool = False
    since: date | None = None
    until: date | None = None
    internal: bool = False
    sort: str = "modified"
    page: int = 1
    per_page: int = 50
    cursor: str = ""


@dataclass
class ListRow:
    """One row of the session list (see :func:`build_list_page`).

    Attributes:
        info, title, stats, snippet, origin: the session, its title, its usage
            (:func:`~sessiontree.usage.report.session_stats`), its best search hit, its origin.
        relation: how the row relates to another session, shown beside the title:
            ``("subagent", parent id)`` for a subagent session (format/idprefix.py),
            ``("copy", source id)`` for a fork that bills nothing of its own (every call
            it holds is counted at its source: docs/usage.md), else ``None``.
        short_id: the id as lists print it (``PARENT/AGENT`` for a subagent).
    """

    info: SessionInfo
    title: str
    stats: Mapping[str, Any] | None = None
    snippet: str = ""
    origin: Provenance | None = None
    relation: tuple[str, str] | None = None
    short_id: str = ""


@dataclass
class ListPage:
    """One page of the session list.

    Attributes:
        rows: the sessions of this page.
        total: sessions matching the query.
        pages: number of pages.
        projects: every project (cwd) of the store, for the filter.
        search_mode: ``"store"`` when the rows are a search's matches (one page of
            sessions by the search's cursor), empty without a query.
        has_stats: whether the statistics columns (models, tokens, cost from
            :func:`sessiontree.usage.report.session_stats`) are shown.
        message: why the search could not run (a query over the limits of
            docs/search.md), shown above the empty list; ``""`` otherwise.
        hosts, users: every origin host and user of the store, for the filters (empty
            when no session has a recorded origin: the filters and the origin column
            are then not shown).
        suggestions: a search that matched no session: up to three close queries that
            find something (:func:`sessiontree.search.suggest.suggest`), as links.
        agents: every agent of the listed store's sessions, for the filter; the agent
            column is shown once one is not ``pi``.
        next_cursor: a search with more matching sessions than this page: the cursor of
            its next page (:attr:`ListQuery.cursor`), else ``None``.
    """

    query: ListQuery
    rows: list[ListRow]
    total: int
    pages: int
    projects: list[str]
    search_mode: str = ""
    has_stats: bool = False
    message: str = ""
    hosts: list[str] = field(default_factory=list)
    users: list[str] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)
    agents: list[str] = field(default_factory=list)
    next_cursor: str | None = None

    @property
    def show_agent(self) -> bool:
        """Whether the agent column is shown: once any session is another agent's (as ``list``)."""
        return any(agent != "pi" for agent in self.agents)


def search_sessions(store: SessionStore, infos: Sequence[SessionInfo],
                    q: str) -> tuple[list[SessionInfo], dict[str, str], str]:
    """Sessions of ``infos`` matching ``q``, best first, each with the snippet of its best hit
    (the sessions of the first :data:`~sessiontree.search.query.DEFAULT_LIMIT` hits, on one
    page; the list page itself pages a search by its cursor, :func:`build_list_page`).

    The search is :func:`sessiontree.search.query.search` with its default
    limit: the one matching rule of ``sessiontree search`` and of every store
    (docs/search.md), so the list shows the sessions of the hits that command
    prints. A long pending tail of SQLite's index is merged first
    (:func:`~sessiontree.search.query.settle_search_tail`), once, not scanned by
    every query.

    Returns:
        ``(matches, {session id: snippet}, "store")``.

    Raises:
        SearchQueryError: an over-long query.
        StorageError: the store could not be read.
    """
    by_id = {info.id: info for info in infos}
    found: list[SessionInfo] = []
    snippets: dict[str, str] = {}
    # Hits of sessions the filters left out do not use up the search's limit.
    for session_id, hits in search_request(store, q, sessions=by_id).by_session():
        info = by_id.get(session_id)
        if info is not None:
            found.append(info)
            snippets[session_id] = hits[0].snippet
    return found, snippets, "store"


def _search_page(store: SessionStore, infos: Sequence[SessionInfo], q: str, cursor: str,
                 per_page: int) -> tuple[list[SessionInfo], dict[str, str], str | None]:
    """One page of a search's sessions: ``per_page`` sessions of ``infos`` in the order of
    their best hit after ``cursor`` (the one search request, ``per_session``: a session with a
    hit on an earlier page is not listed again), each with that hit's snippet.

    Returns:
        ``(sessions, {session id: snippet}, the next page's cursor or None)``.

    Raises:
        SearchQueryError: an over-long query.
        SearchCursorError: a cursor this search did not make.
    """
    by_id = {info.id: info for info in infos}
    result = search_request(store, q, sessions=by_id, cursor=cursor or None, limit=per_page, per_session=True)
    found = [by_id[hit.session_id] for hit in result.hits]
    return found, {hit.session_id: hit.snippet for hit in result.hits}, result.next_cursor


def build_list_page(store: SessionStore, query: ListQuery, infos: Sequence[SessionInfo] | None = None) -> ListPage:
    """The session list for ``query``: filtered, searched, sorted, one page of it.

    Args:
        store: the store to list (read-only).
        query: see :class:`ListQuery`.
        infos: the listing to use (a cache of ``SessionManager.list_all(store,
            include_internal=True)``); read from the store when omitted.

    A search query the search refuses (over ``MAX_QUERY_CHARS`` characters or
    ``MAX_TERMS`` terms, docs/search.md) gives a page without rows whose
    ``message`` says why; the viewer answers it with status 400.
    """
    if infos is None:
        infos = SessionManager.list_all(store, include_internal=True)
    projects = sorted({i.cwd for i in infos if i.cwd})
    origins = store.provenances()
    # The one listing query of every edge (session/listing.py): project is the cwd filter,
    # since/until whole UTC days of the last activity.
    rows: list[SessionInfo] = list(list_sessions(store, ListingFilter(
        cwd=query.project or None,
        since=datetime.combine(query.since, time.min, UTC) if query.since is not None else None,
        until=datetime.combine(query.until, time.max, UTC) if query.until is not None else None,
        named_only=query.named, agent=query.agent or None, hosts=[query.host] if query.host else (),
        users=[query.user] if query.user else (), include_internal=query.internal), infos=infos))
    key: Callable[[SessionInfo], datetime] = (
        (lambda i: i.created) if query.sort == "created" else (lambda i: i.modified))
    snippets: dict[str, str] = {}
    mode = ""
    message = ""
    suggestions: list[str] = []
    next_cursor: str | None = None
    per_page = max(1, query.per_page)
    if query.q.strip():
        try:
            rows, snippets, next_cursor = _search_page(store, rows, query.q.strip(), query.cursor, per_page)
            mode = "store"
        except (SearchQueryError, SearchCursorError) as exc:
            # The user's own input (an over-long query, a damaged cursor): the page says so, no rows match.
            rows, message = [], str(exc)
        if not rows and not message and not query.cursor:
            # "Did you mean ...?" from the stored words, as the command line and MCP answer.
            suggestions = suggest(store, query.q.strip())
        # A search pages by its cursor: this page is its rows.
        total, pages, window = len(rows), 1, rows
        query.page = 1
    else:
        rows = sorted(rows, key=key, reverse=True)
        total = len(rows)
        pages = max(1, -(-total // per_page))
        page = min(max(1, query.page), pages)
        query.page = page
        window = rows[(page - 1) * per_page: page * per_page]
    stats = session_stats(store, [i.id for i in window], marks=True)
    short = short_session_ids(i.id for i in infos)
    out = [ListRow(i, session_title(i) or "(untitled)", stats.get(i.id), snippets.get(i.id, ""), origins.get(i.id),
                   _relation(i, stats.get(i.id)), short.get(i.id, i.id))
           for i in window]
    return ListPage(query, out, total, pages, projects, mode, has_stats=True, message=message,
                    hosts=sorted({o.host for o in origins.values()}), users=sorted({o.user for o in origins.values()}),
                    suggestions=suggestions, agents=sorted({i.agent for i in infos}), next_cursor=next_cursor)


def _relation(info: SessionInfo, stats: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """:attr:`ListRow.relation` of one session."""
    parts = split_subagent(info.id)
    if parts is not None:
        return ("subagent", parts[0])
    if info.parent_session_id and stats is None:
        return ("copy", info.parent_session_id)
    return None
