"""Search across sessions: the one entry point of the command line and the web viewer.

The rules (what is indexed, how a query matches, how hits look) live in
:mod:`sessiontree.core.search`; each store answers with
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

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sessiontree.core.search import MAX_QUERY_CHARS, SearchHit, SearchQuery, hit_order, parse_query
from sessiontree.errors import SearchCursorError
from sessiontree.stores.base import SessionStore

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_QUERY_CHARS",
    "SearchHit",
    "SearchQuery",
    "SearchResult",
    "decode_cursor",
    "encode_cursor",
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
        hits: at most ``limit`` hits, best first (with ``per_session``: each session's first
            hit after the cursor, one per session; see :func:`search_request`).
        more: whether the store holds more hits than ``hits`` (ask with a higher limit, or
            with :attr:`next_cursor`).
        next_cursor: the cursor that continues after the last hit (or after the last hit
            looked at, with ``per_session``) when ``more``, else ``None`` (docs/search.md, "Paging").
        shape: the fingerprint of the query and filters the cursors carry (internal).
    """

    query: str
    hits: list[SearchHit] = field(default_factory=list)
    more: bool = False
    next_cursor: str | None = None
    shape: str = field(default="", repr=False, compare=False)

    def by_session(self) -> list[tuple[str, list[SearchHit]]]:
        """:func:`group_by_session` of :attr:`hits`."""
        return group_by_session(self.hits)

    def cursor_after(self, count: int) -> str:
        """The cursor that continues after the first ``count`` hits (a front end that shows
        fewer than it got: MCP under its size budget).

        Raises:
            ValueError: ``count`` is not ``1..len(hits)``.
        """
        if not 1 <= count <= len(self.hits):
            raise ValueError(f"count must be 1..{len(self.hits)}, not {count}")
        return encode_cursor(self.shape, self.hits[count - 1])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``{"query", "hits": [SearchHit.to_dict(), ...], "more", "nextCursor"}``."""
        return {"query": self.query, "hits": [hit.to_dict() for hit in self.hits], "more": self.more,
                "nextCursor": self.next_cursor}


#: Version of the cursor's content (docs/search.md, "Paging").
_CURSOR_VERSION = 1
_INVALID = "pass a cursor exactly as a previous page gave it"


def _shape(query: str, cwd: str | None, roles: Sequence[str] | None, since: Any, until: Any,
           session: str | None) -> str:
    """A short hash of what decides a search's hits and their order (not ``limit``)."""
    text = json.dumps([query, cwd, sorted(roles) if roles is not None else None, str(since), str(until), session],
                      ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:16]


def _seal(shape: str, key: list[Any]) -> str:
    """The check a cursor carries: a hash of the search's shape and the hit's key."""
    text = json.dumps([_CURSOR_VERSION, shape, key], ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:16]


def encode_cursor(shape: str, hit: SearchHit) -> str:
    """The opaque cursor continuing after ``hit`` in the search of fingerprint ``shape``:
    URL-safe base64 (no padding) of ``{"v", "k": hit_order(hit), "c": check}``, where the
    check hashes the search's query and filters with the key (docs/search.md, "Paging")."""
    key = list(hit_order(hit))
    raw = json.dumps({"v": _CURSOR_VERSION, "k": key, "c": _seal(shape, key)}, ensure_ascii=True,
                     separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode("ascii")).decode("ascii").rstrip("=")


def decode_cursor(cursor: str, shape: str) -> tuple[float, float, str, str]:
    """The sort key (:func:`~sessiontree.core.search.hit_order`) of the hit ``cursor``
    continues after, checked against the search of fingerprint ``shape``.

    Raises:
        SearchCursorError: not a cursor :func:`encode_cursor` made (damaged, cut, edited),
            or made for another query or other filters.
    """
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")).decode("ascii"))
    except (ValueError, UnicodeError, binascii.Error):
        raise SearchCursorError(cursor, _INVALID) from None
    key = data.get("k") if isinstance(data, dict) else None
    if (not isinstance(key, list) or len(key) != 4 or data.get("v") != _CURSOR_VERSION
            or not all(isinstance(k, int | float) and not isinstance(k, bool) for k in key[:2])
            or not all(isinstance(k, str) for k in key[2:])):
        raise SearchCursorError(cursor, _INVALID)
    if data.get("c") != _seal(shape, key):
        raise SearchCursorError(cursor, "it was made for another query or other filters (or edited): "
                                        "repeat the search that gave it, changing only the cursor")
    return float(key[0]), float(key[1]), key[2], key[3]


def _split(hits: list[SearchHit], key: tuple[float, float, str, str],
           final: bool) -> tuple[list[SearchHit], list[SearchHit]] | None:
    """``(hits up to the cursor's hit, hits after it)``: after that hit (by its ids) where the
    answer holds it, so a store's own order is followed; where it does not (deleted since,
    and ``final``: the whole answer is in hand), after the hits whose key is not after the
    cursor's. ``None``: not found yet and more hits can be asked for."""
    for at, hit in enumerate(hits):
        if hit.session_id == key[2] and hit.entry_id == key[3]:
            return hits[:at + 1], hits[at + 1:]
    if not final:
        return None
    return [h for h in hits if hit_order(h) <= key], [h for h in hits if hit_order(h) > key]


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
           sessions: Container[str] | None = None, cursor: str | None = None,
           per_session: bool = False) -> SearchResult:
    """Search every session of ``store`` (arguments as :meth:`SessionStore.search`).

    ``sessions``, when given, keeps only hits of those sessions (``--host``/``--user``:
    the ids :func:`sessiontree.stores.origin.matching_sessions` gives). The store is
    asked for more hits (four times as many each time) until enough are left after the
    filter and the cursor, or there are no more, so the hits are the first ``limit`` of the
    filtered ranking after the cursor.

    ``cursor`` (a :attr:`SearchResult.next_cursor` of the same query and filters) continues
    after the hit it names (docs/search.md, "Paging"); ``per_session`` counts ``limit`` in
    sessions: each session's first hit after the cursor, sessions with a hit up to the cursor
    left out (they were on an earlier page).

    Returns:
        A :class:`SearchResult`; ``more`` tells whether hits were left out by ``limit``.

    Raises:
        SearchQueryError: an empty or over-long query.
        SearchCursorError: a cursor not made by this search.
        ValueError: a bad ``limit``, ``since`` or ``until``.
        StorageError: the store could not be read.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive integer or None, not {limit!r}")
    roles = tuple(roles) if roles is not None else None  # asked again below: not a one-shot iterator
    shape = _shape(query, cwd, roles, since, until, session)
    after = decode_cursor(cursor, shape) if cursor else None
    want = None if limit is None else limit + 1
    ask = want if after is None and not per_session else (None if want is None else max(64, want * 4))
    while True:
        hits = store.search(query, cwd=cwd, roles=roles, since=since, until=until, session=session, limit=ask)
        final = ask is None or len(hits) < ask
        kept = hits if sessions is None else [hit for hit in hits if hit.session_id in sessions]
        parts = ([], kept) if after is None else _split(kept, after, final)
        if parts is not None:
            page = _page(parts[0], parts[1], limit, per_session)
            if final or page is not None:
                break
        ask = None if ask is None else ask * 4
    if page is None:  # the whole answer is in hand and short of a full page
        page = _page(parts[0], parts[1], None, per_session)
        assert page is not None
    shown, last = page
    return SearchResult(query, shown, last is not None,
                        encode_cursor(shape, last) if last is not None else None, shape)


def _page(before: list[SearchHit], rest: list[SearchHit], limit: int | None,
          per_session: bool) -> tuple[list[SearchHit], SearchHit | None] | None:
    """``(the page's hits, the last hit the page covers when more follow)`` from the hits up to
    the cursor and after it; ``None`` when ``rest`` holds no full page and one more hit."""
    if not per_session:
        if limit is None or len(rest) <= limit:
            return (rest, None) if limit is None else None
        return rest[:limit], rest[limit - 1]
    seen = {hit.session_id for hit in before}
    shown: list[SearchHit] = []
    for at, hit in enumerate(rest):
        if hit.session_id in seen:
            continue
        if limit is not None and len(shown) == limit:
            return shown, rest[at - 1]  # hits of sessions already shown are covered too
        seen.add(hit.session_id)
        shown.append(hit)
    return (shown, None) if limit is None else None


def search_request(store: SessionStore, query: str, *, cwd: str | None = None, roles: Iterable[str] | None = None,
                   since: datetime | str | float | None = None, until: datetime | str | float | None = None,
                   session: str | None = None, limit: int | None = DEFAULT_LIMIT,
                   sessions: Container[str] | None = None, cursor: str | None = None,
                   per_session: bool = False, on_merge: Callable[[int], None] | None = None) -> SearchResult:
    """A search asked by a front end: the one use case of ``sessiontree search``, the
    viewer's list page and MCP ``search_sessions`` (issue 40 item 3). The store's pending
    index tail is settled once (:func:`settle_search_tail`, ``on_merge`` as there), then
    :func:`search` answers with the other arguments, which mean what they mean there:
    pages by ``cursor`` (docs/search.md, "Paging"), ``per_session`` for the viewer's list.

    Returns:
        A :class:`SearchResult`.

    Raises:
        SearchQueryError: an empty or over-long query.
        SearchCursorError: a cursor not made by this search (damaged, or another query's).
        ValueError: a bad ``limit``, ``since`` or ``until``.
        StorageError: the store could not be read.
    """
    settle_search_tail(store, on_merge)
    return search(store, query, cwd=cwd, roles=roles, since=since, until=until, session=session, limit=limit,
                  sessions=sessions, cursor=cursor, per_session=per_session)


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
