"""Search across sessions: the one entry point of the command line and the web viewer.

The rules (what is indexed, how a query matches, how hits look) live in
:mod:`sessiontree.core.searchtext`; each store answers with
:meth:`~sessiontree.stores.base.SessionStore.search` (SQLite through its FTS5
index, JSONL and memory by scanning, the same hits everywhere). This module
adds what a front end needs on top: whether there are more hits than shown,
hits grouped by session, and dates as a user types them. docs/search.md
describes the whole feature.

Example::

    from sessiontree.search.query import search
    result = search(store, '"flaky retry" parser', roles=["user", "assistant"], limit=20)
    for session_id, hits in result.by_session():
        ...
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sessiontree.core.searchtext import MAX_QUERY_CHARS, SearchHit, SearchQuery, parse_query
from sessiontree.stores.base import SessionStore

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_QUERY_CHARS",
    "SearchHit",
    "SearchQuery",
    "SearchResult",
    "group_by_session",
    "parse_query",
    "parse_when",
    "search",
    "search_request",
    "settle_search_tail",
]

#: Hits returned when no limit is given.
DEFAULT_LIMIT = 50

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_COMPACT_DATE = re.compile(r"\d{8}")
_RELATIVE = re.compile(r"(\d+)([dw])")


@dataclass(frozen=True)
class SearchResult:
    """The answer to one search.

    Attributes:
        query: the query as given.
        hits: at most ``limit`` hits, best first.
        more: whether the store holds more hits than ``hits`` (ask with a higher limit).
    """

    query: str
    hits: list[SearchHit] = field(default_factory=list)
    more: bool = False

    def by_session(self) -> list[tuple[str, list[SearchHit]]]:
        """:func:`group_by_session` of :attr:`hits`."""
        return group_by_session(self.hits)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``{"query", "hits": [SearchHit.to_dict(), ...], "more"}``."""
        return {"query": self.query, "hits": [hit.to_dict() for hit in self.hits], "more": self.more}


def group_by_session(hits: Sequence[SearchHit]) -> list[tuple[str, list[SearchHit]]]:
    """``(session_id, hits)`` pairs: sessions in the order of their best hit, each
    session's hits in their given order (best first)."""
    groups: dict[str, list[SearchHit]] = {}
    for hit in hits:
        groups.setdefault(hit.session_id, []).append(hit)
    return list(groups.items())


def search(store: SessionStore, query: str, *, cwd: str | None = None, roles: Iterable[str] | None = None,
           since: datetime | str | float | None = None, until: datetime | str | float | None = None,
           session: str | None = None, limit: int | None = DEFAULT_LIMIT,
           sessions: Container[str] | None = None) -> SearchResult:
    """Search every session of ``store`` (arguments as :meth:`SessionStore.search`).

    ``sessions``, when given, keeps only hits of those sessions (``--host``/``--user``:
    the ids :func:`sessiontree.stores.origin.matching_sessions` gives). The store is
    asked for twice as many hits until enough are left after the filter or there are
    no more, so the hits are the first ``limit`` of the filtered ranking.

    Returns:
        A :class:`SearchResult`; ``more`` tells whether hits were left out by ``limit``.

    Raises:
        SearchQueryError: an empty or over-long query.
        ValueError: a bad ``limit``, ``since`` or ``until``.
        StorageError: the store could not be read.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive integer or None, not {limit!r}")
    want = None if limit is None else limit + 1
    ask = want
    roles = tuple(roles) if roles is not None else None  # asked again below: not a one-shot iterator
    while True:
        hits = store.search(query, cwd=cwd, roles=roles, since=since, until=until, session=session, limit=ask)
        if sessions is None:
            break
        kept = [hit for hit in hits if hit.session_id in sessions]
        if ask is None or want is None or len(kept) >= want or len(hits) < ask:
            hits = kept
            break
        ask *= 4
    more = limit is not None and len(hits) > limit
    return SearchResult(query, hits[:limit] if limit is not None else hits, more)


def search_request(store: SessionStore, query: str, *, cwd: str | None = None, roles: Iterable[str] | None = None,
                   since: datetime | str | float | None = None, until: datetime | str | float | None = None,
                   session: str | None = None, limit: int | None = DEFAULT_LIMIT,
                   sessions: Container[str] | None = None,
                   on_merge: Callable[[int], None] | None = None) -> SearchResult:
    """A search asked by a front end: the one use case of ``sessiontree search``, the
    viewer's list page and MCP ``search_sessions`` (issue 40 item 3). The store's pending
    index tail is settled once (:func:`settle_search_tail`, ``on_merge`` as there), then
    :func:`search` answers with the other arguments, which mean what they mean there.

    Returns:
        A :class:`SearchResult`.

    Raises:
        SearchQueryError: an empty or over-long query.
        ValueError: a bad ``limit``, ``since`` or ``until``.
        StorageError: the store could not be read.
    """
    settle_search_tail(store, on_merge)
    return search(store, query, cwd=cwd, roles=roles, since=since, until=until, session=session, limit=limit,
                  sessions=sessions)


def settle_search_tail(store: SessionStore, on_merge: Callable[[int], None] | None = None) -> int:
    """Before a search by a front end (``sessiontree search``, the viewer): let ``store``
    merge a long pending tail of its search index
    (:meth:`~sessiontree.stores.base.SessionStore.settle_search_tail`), so this search
    and the next ones read the index instead of scanning the tail (docs/search.md,
    "When the index is merged"). Stores that defer nothing return 0; a store that
    cannot merge (read-only file, lock held) returns 0 too, and the search scans
    the tail with the same hits.

    Args:
        store: the store about to be searched.
        on_merge: called with the number of pending records just before a merge
            (to tell the user why the search pauses).

    Returns:
        The number of records merged.
    """
    return store.settle_search_tail(on_merge)


def parse_when(text: str, *, end: bool = False, now: datetime | None = None) -> datetime:
    """A date or time as a user types it, as an aware UTC datetime.

    The forms ``stats --since`` takes (docs/usage.md), in UTC days:
    ``YYYY-MM-DD`` or ``YYYYMMDD`` is that day: its start, or with ``end=True``
    the start of the next day (so ``--until 2026-01-31`` includes the 31st);
    for a start only, ``Nd`` / ``Nw`` is the last N days or weeks including
    today (``7d`` starts at midnight UTC six days ago). Anything else must be
    ISO-8601 (``2026-01-31T12:00``, ``...Z``, ``...+02:00``; no zone means UTC)
    and is taken as it is.

    Args:
        now: "today" for ``Nd`` / ``Nw`` (default: the current time).

    Raises:
        ValueError: none of these forms, a count below 1, or ``Nd`` as an end.
    """
    value = text.strip()
    if _DATE.fullmatch(value) or _COMPACT_DATE.fullmatch(value):
        try:
            day = datetime.strptime(value, "%Y-%m-%d" if "-" in value else "%Y%m%d").replace(tzinfo=UTC)
        except ValueError:
            raise ValueError(f"{text!r} is not a date (YYYY-MM-DD or YYYYMMDD)") from None
        return day + timedelta(days=1) if end else day
    relative = _RELATIVE.fullmatch(value)
    if relative:
        if end:
            raise ValueError(f"an end takes a date (YYYY-MM-DD), not {text!r}")
        count = int(relative.group(1)) * (7 if relative.group(2) == "w" else 1)
        if count < 1:
            raise ValueError(f"{text!r}: the count must be at least 1")
        today = (now or datetime.now(UTC)).astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        return today - timedelta(days=count - 1)
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError:
        raise ValueError(f"{text!r} is not a date (YYYY-MM-DD, YYYYMMDD), a count of days (7d) "
                         "or an ISO-8601 time") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
