"""Search by scanning entries: the JSONL and memory stores, and SQLite's fallbacks.

The matching rule is :mod:`sessiontree.core.search`'s, applied to the text
:func:`~sessiontree.core.search.entry_text` extracts, so a scan finds exactly
the entries the SQLite index finds (docs/search.md). Ranking is
:func:`~sessiontree.core.search.scan_score`: a scan sees one session at a
time and cannot weigh a term by its rarity across the store as bm25 does, so
the order of hits may differ from SQLite's; the set may not.

Also here, for every store: the session-level parts of a hit (its title and
whether an entry is on the active branch), computed the same way everywhere.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from sessiontree.core.listing import InfoAccumulator, first_message_prefix
from sessiontree.core.search import (
    EntryText,
    SearchFilters,
    SearchHit,
    SearchQuery,
    entry_text,
    fold,
    hit_order,
    scan_score,
    snippet,
)
from sessiontree.core.tree import get_branch, loaded_leaf_id
from sessiontree.format.codec import ParsedSession
from sessiontree.stores.listing import cwd_matches

__all__ = ["SessionFacts", "active_ids", "check_limit", "make_hit", "scan", "scan_store", "session_facts", "top_hits"]


def check_limit(limit: int | None) -> int | None:
    """``limit`` validated: a positive ``int`` or ``None`` (no limit).

    Raises:
        ValueError: zero, negative, or not an integer.
    """
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a positive integer or None, not {limit!r}")
    return limit


class SessionFacts:
    """What every hit of one session shares: id, title, name, cwd, active-branch ids.

    Attributes:
        session_id, title, name, cwd: as in :class:`~sessiontree.core.search.SearchHit`.
        branch: ids of the entries from the root to the active leaf.
    """

    __slots__ = ("branch", "cwd", "name", "session_id", "title")

    def __init__(self, session_id: str, title: str, name: str | None, cwd: str, branch: frozenset[str]) -> None:
        self.session_id = session_id
        self.title = title
        self.name = name
        self.cwd = cwd
        self.branch = branch


def active_ids(entries: Sequence[dict[str, Any]]) -> frozenset[str]:
    """Ids on the active branch: root to the leaf the records give (:func:`~sessiontree.core.tree.loaded_leaf_id`).

    ``entries`` need only ``id``, ``parentId``, ``type`` and, for ``leaf``
    records, ``targetId``."""
    by_id = {e["id"]: e for e in entries if isinstance(e.get("id"), str)}
    leaf = loaded_leaf_id(entries, by_id)
    return frozenset(e["id"] for e in get_branch(by_id, leaf))


def title_of(info: InfoAccumulator) -> str:
    """Name, else fresh summary, else first user message (``sessiontree list``'s title; the
    message cut as a listing cuts it, docs/listing.md "First message")."""
    return info.name or info.summary or (
        first_message_prefix(info.first_message) if info.first_message is not None else "(no messages)")


def session_facts(header: Mapping[str, Any], entries: Sequence[dict[str, Any]]) -> SessionFacts:
    """The :class:`SessionFacts` of a loaded session."""
    info = InfoAccumulator()
    for entry in entries:
        info.add(entry)
    cwd = header.get("cwd")
    return SessionFacts(header["id"], title_of(info), info.name, cwd if isinstance(cwd, str) else "",
                        active_ids(entries))


def make_hit(facts: SessionFacts, entry_id: str, entry_type: str, timestamp: Any, found: EntryText | str,
             role: str | None, query: SearchQuery, rank: float, *, folded: str | None = None,
             on_branch: bool | None = None) -> SearchHit:
    """One :class:`~sessiontree.core.search.SearchHit` (snippet and highlights computed here).

    ``folded``: ``fold`` of the text, when the caller has it. ``on_branch``: the
    active-branch flag when the caller knows it (SQLite keeps it with its index);
    ``None`` looks the entry up in ``facts.branch``."""
    text = found.text if isinstance(found, EntryText) else found
    shown, marks = snippet(text, query, folded=folded)
    return SearchHit(
        session_id=facts.session_id, title=facts.title, session_name=facts.name, cwd=facts.cwd,
        entry_id=entry_id, entry_type=entry_type, role=role,
        timestamp=timestamp if isinstance(timestamp, str) else None,
        snippet=shown, highlights=marks, rank=rank,
        on_active_branch=entry_id in facts.branch if on_branch is None else on_branch)


def top_hits(hits: Iterable[SearchHit], limit: int | None) -> list[SearchHit]:
    """The best ``limit`` hits (all when ``None``), best first (:func:`~sessiontree.core.search.hit_order`)."""
    if limit is None:
        return sorted(hits, key=hit_order)
    return heapq.nsmallest(limit, hits, key=hit_order)


def scan(sessions: Iterable[tuple[Mapping[str, Any], Sequence[dict[str, Any]]]], query: SearchQuery,
         filters: SearchFilters, limit: int | None,
         facts: Callable[[Mapping[str, Any], Sequence[dict[str, Any]]], SessionFacts] = session_facts,
         ) -> list[SearchHit]:
    """Search ``(header, entries)`` pairs by scanning every entry.

    The session and cwd filters are applied to each header here (callers may
    skip sessions earlier, as an optimisation only); roles and times per entry.

    Returns:
        At most ``limit`` hits, best first.
    """
    hits: list[SearchHit] = []
    for header, entries in sessions:
        if filters.session is not None and header.get("id") != filters.session:
            continue
        if not cwd_matches(header.get("cwd"), filters.cwd):
            continue
        found = []
        for entry in entries:
            text = entry_text(entry)
            if text is None or not filters.keeps(entry.get("type", ""), text.role, text.ts_ms):
                continue
            folded = fold(text.text)
            if query.matches(folded):
                found.append((entry, text, scan_score(folded, query)))
        if not found:
            continue
        shared = facts(header, entries)
        for entry, text, score in found:
            hits.append(make_hit(shared, entry["id"], entry["type"], entry.get("timestamp"), text, text.role,
                                 query, score))
        if limit is not None and len(hits) > 4 * limit:
            hits = top_hits(hits, limit)  # keep memory bounded on a store full of hits
    return top_hits(hits, limit)


class ScannedStore(Protocol):
    """What :func:`scan_store` reads: a store's (or its reads part's) public ids, existence
    check and whole-session read."""

    def session_ids(self) -> list[str]:
        """Every stored session id."""
        ...

    def exists(self, session_id: str) -> bool:
        """Whether the session is stored."""
        ...

    def read(self, session_id: str) -> ParsedSession:
        """The whole session, without writing anything.

        Raises:
            SessionNotFoundError: no such session."""
        ...


def scan_store(store: ScannedStore, query: SearchQuery, filters: SearchFilters, limit: int | None) -> list[SearchHit]:
    """:func:`scan` over the sessions of ``store`` read one at a time (``store.read``):
    the fallback of the indexed stores when their index is absent (an older schema
    opened read-only, or no ``pg_trgm``), with the same hits as the index.

    Returns:
        At most ``limit`` hits, best first.
    """
    ids = [filters.session] if filters.session is not None else store.session_ids()

    def sessions() -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
        for session_id in ids:
            if store.exists(session_id):
                loaded = store.read(session_id)
                yield loaded.header, loaded.entries

    return scan(sessions(), query, filters, limit)
