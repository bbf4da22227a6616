"""What search finds in an entry, and how a query matches it: the one rule every store follows.

This module is the low layer of search (it imports only :mod:`tree` and
:mod:`errors`), so every store can use it: the SQLite index
(:mod:`sessiontree.stores.sqlite.search`) stores exactly the text
:func:`entry_text` returns, and the scans of the JSONL and memory stores
(:mod:`sessiontree.stores.search`) match that same text with the same
:meth:`SearchQuery.matches`. Hence the invariant every store upholds: **the same
query gives the same set of hits on every store** (docs/search.md).

What is indexed, per entry (:func:`entry_text`; never image data):

============================  ==============================================================
entry                         text (parts joined by ``"\n"``)
============================  ==============================================================
``message`` user              content: the string, or its ``text`` blocks
``message`` assistant         ``text`` blocks, ``thinking`` blocks, each ``toolCall``'s name
                              and every string, number and boolean inside its arguments
                              (values, not keys), and ``errorMessage``
``message`` toolResult        its ``text`` blocks
``message`` bashExecution     ``command``, then ``output``
``message`` custom, system    content, as for user
``message`` branchSummary,    ``summary``
compactionSummary
``custom_message``            content, as for user (role ``custom``)
``branch_summary``            ``summary`` (role ``branchSummary``)
``compaction``                ``summary``, active or retired (role ``compactionSummary``)
``session_info``              ``name`` (no role)
``session_summary``           ``summary`` (no role)
============================  ==============================================================

Every other entry type (``custom`` state, labels, model changes, context
edits, retired ``context_compaction`` records, unknown types) has no text.
A ``context_edit`` never changes what is indexed: an entry hidden from the
model is still raw history, and still found.

Cleaning: U+0000 and lone UTF-16 surrogates become U+FFFD, in texts and in
queries alike (SQLite's FTS5 stops reading a text at NUL, and SQLite cannot
store a lone surrogate as text).

Matching (:class:`SearchQuery`):

* A query is a list of **terms**. Whitespace separates terms; a ``"`` at the
  start of a term opens a **phrase** that runs to the next ``"`` (or the end
  of the query) and keeps its inner spaces. Nothing else is syntax: ``-``,
  ``*``, ``:``, ``(``, ``NEAR``, ``AND``, ``OR`` are plain text.
* An entry matches when **every** term occurs in its text as a substring
  (AND), after both are **folded** by :func:`fold`.
* :func:`fold` maps each code point to one code point: exactly the case
  folding of SQLite's FTS5 ``trigram`` tokenizer with ``case_sensitive 0``
  (ASCII ``A-Z``, and the Unicode simple lowercase mappings of SQLite's
  table: ``É``->``é``, ``Σ``->``σ``, ``ς``->``σ``, ``µ``->``μ``; no diacritics
  removed, so ``e`` does not find ``é``). The table is :data:`_FOLD_RUNS`,
  taken from SQLite and checked against the running SQLite by the tests.
  Because folding keeps every code point's position, match offsets in the
  folded text are offsets in the original text.

Limits: a query of more than :data:`MAX_QUERY_CHARS` characters or more than
:data:`MAX_TERMS` terms raises :class:`~sessiontree.errors.SearchQueryError`,
as does a query with no term.
"""  # noqa: RUF002 - the Greek letters are folding examples, not look-alikes

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sessiontree.core.tree import parse_timestamp_ms
from sessiontree.errors import SearchQueryError

__all__ = [
    "MAX_QUERY_CHARS",
    "MAX_TERMS",
    "SNIPPET_CHARS",
    "TRIGRAM",
    "EntryText",
    "SearchFilters",
    "SearchHit",
    "SearchQuery",
    "clean",
    "entry_text",
    "fold",
    "hit_order",
    "make_filters",
    "parse_query",
    "scan_score",
    "snippet",
]

#: Longest query accepted, in characters (a longer one is a paste, not a search).
MAX_QUERY_CHARS = 1000
#: Most terms in one query.
MAX_TERMS = 32
#: Terms at least this long can be answered by a trigram index; shorter ones need a scan.
TRIGRAM = 3
#: Characters of entry text a snippet shows (ellipses excluded).
SNIPPET_CHARS = 160

# (first code point, count, step, delta): code points first, first+step, ...
# fold to themselves + delta. Taken from SQLite 3.40's sqlite3Fts5UnicodeFold(c, 0)
# by indexing every code point with a trigram table and reading its vocabulary;
# tests/search/test_search.py checks it against the running SQLite.
_FOLD_RUNS: tuple[tuple[int, int, int, int], ...] = (
    (0x41, 26, 1, 32), (0xB5, 1, 1, 775), (0xC0, 23, 1, 32), (0xD8, 7, 1, 32),
    (0x100, 24, 2, 1), (0x132, 3, 2, 1), (0x139, 8, 2, 1), (0x14A, 23, 2, 1),
    (0x178, 1, 1, -121), (0x179, 3, 2, 1), (0x17F, 1, 1, -268), (0x181, 1, 1, 210),
    (0x182, 2, 2, 1), (0x186, 1, 1, 206), (0x187, 1, 1, 1), (0x189, 2, 1, 205),
    (0x18B, 1, 1, 1), (0x18E, 1, 1, 79), (0x18F, 1, 1, 202), (0x190, 1, 1, 203),
    (0x191, 1, 1, 1), (0x193, 1, 1, 205), (0x194, 1, 1, 207), (0x196, 1, 1, 211),
    (0x197, 1, 1, 209), (0x198, 1, 1, 1), (0x19C, 1, 1, 211), (0x19D, 1, 1, 213),
    (0x19F, 1, 1, 214), (0x1A0, 3, 2, 1), (0x1A6, 1, 1, 218), (0x1A7, 1, 1, 1),
    (0x1A9, 1, 1, 218), (0x1AC, 1, 1, 1), (0x1AE, 1, 1, 218), (0x1AF, 1, 1, 1),
    (0x1B1, 2, 1, 217), (0x1B3, 2, 2, 1), (0x1B7, 1, 1, 219), (0x1B8, 1, 1, 1),
    (0x1BC, 1, 1, 1), (0x1C4, 1, 1, 2), (0x1C5, 1, 1, 1), (0x1C7, 1, 1, 2),
    (0x1C8, 1, 1, 1), (0x1CA, 1, 1, 2), (0x1CB, 9, 2, 1), (0x1DE, 9, 2, 1),
    (0x1F1, 1, 1, 2), (0x1F2, 2, 2, 1), (0x1F6, 1, 1, -97), (0x1F7, 1, 1, -56),
    (0x1F8, 20, 2, 1), (0x220, 1, 1, -130), (0x222, 9, 2, 1), (0x23A, 1, 1, 10795),
    (0x23B, 1, 1, 1), (0x23D, 1, 1, -163), (0x23E, 1, 1, 10792), (0x241, 1, 1, 1),
    (0x243, 1, 1, -195), (0x244, 1, 1, 69), (0x245, 1, 1, 71), (0x246, 5, 2, 1),
    (0x345, 1, 1, 116), (0x370, 2, 2, 1), (0x376, 1, 1, 1), (0x386, 1, 1, 38),
    (0x388, 3, 1, 37), (0x38C, 1, 1, 64), (0x38E, 2, 1, 63), (0x391, 17, 1, 32),
    (0x3A3, 9, 1, 32), (0x3C2, 1, 1, 1), (0x3CF, 1, 1, 8), (0x3D0, 1, 1, -30),
    (0x3D1, 1, 1, -25), (0x3D5, 1, 1, -15), (0x3D6, 1, 1, -22), (0x3D8, 12, 2, 1),
    (0x3F0, 1, 1, -54), (0x3F1, 1, 1, -48), (0x3F4, 1, 1, -60), (0x3F5, 1, 1, -64),
    (0x3F7, 1, 1, 1), (0x3F9, 1, 1, -7), (0x3FA, 1, 1, 1), (0x3FD, 3, 1, -130),
    (0x400, 16, 1, 80), (0x410, 32, 1, 32), (0x460, 17, 2, 1), (0x48A, 27, 2, 1),
    (0x4C0, 1, 1, 15), (0x4C1, 7, 2, 1), (0x4D0, 44, 2, 1), (0x531, 38, 1, 48),
    (0x10A0, 38, 1, 7264), (0x10C7, 1, 1, 7264), (0x10CD, 1, 1, 7264), (0x1E00, 75, 2, 1),
    (0x1E9B, 1, 1, -58), (0x1E9E, 1, 1, -7615), (0x1EA0, 48, 2, 1), (0x1F08, 8, 1, -8),
    (0x1F18, 6, 1, -8), (0x1F28, 8, 1, -8), (0x1F38, 8, 1, -8), (0x1F48, 6, 1, -8),
    (0x1F59, 4, 2, -8), (0x1F68, 8, 1, -8), (0x1F88, 8, 1, -8), (0x1F98, 8, 1, -8),
    (0x1FA8, 8, 1, -8), (0x1FB8, 2, 1, -8), (0x1FBA, 2, 1, -74), (0x1FBC, 1, 1, -9),
    (0x1FBE, 1, 1, -7173), (0x1FC8, 4, 1, -86), (0x1FCC, 1, 1, -9), (0x1FD8, 2, 1, -8),
    (0x1FDA, 2, 1, -100), (0x1FE8, 2, 1, -8), (0x1FEA, 2, 1, -112), (0x1FEC, 1, 1, -7),
    (0x1FF8, 2, 1, -128), (0x1FFA, 2, 1, -126), (0x1FFC, 1, 1, -9), (0x2126, 1, 1, -7517),
    (0x212A, 1, 1, -8383), (0x212B, 1, 1, -8262), (0x2132, 1, 1, 28), (0x2160, 16, 1, 16),
    (0x2183, 1, 1, 1), (0x24B6, 26, 1, 26), (0x2C00, 47, 1, 48), (0x2C60, 1, 1, 1),
    (0x2C62, 1, 1, -10743), (0x2C63, 1, 1, -3814), (0x2C64, 1, 1, -10727), (0x2C67, 3, 2, 1),
    (0x2C6D, 1, 1, -10780), (0x2C6E, 1, 1, -10749), (0x2C6F, 1, 1, -10783), (0x2C70, 1, 1, -10782),
    (0x2C72, 1, 1, 1), (0x2C75, 1, 1, 1), (0x2C7E, 2, 1, -10815), (0x2C80, 50, 2, 1),
    (0x2CEB, 2, 2, 1), (0x2CF2, 1, 1, 1), (0xA640, 23, 2, 1), (0xA680, 12, 2, 1),
    (0xA722, 7, 2, 1), (0xA732, 31, 2, 1), (0xA779, 2, 2, 1), (0xA77D, 1, 1, -35332),
    (0xA77E, 5, 2, 1), (0xA78B, 1, 1, 1), (0xA78D, 1, 1, -42280), (0xA790, 2, 2, 1),
    (0xA7A0, 5, 2, 1), (0xA7AA, 1, 1, -42308), (0xFF21, 26, 1, 32), (0xFFFE, 1, 1, -1),
    (0xFFFF, 1, 1, -2), (0x10400, 40, 1, 40),
)


def _fold_table() -> dict[int, int]:
    table: dict[int, int] = {}
    for first, count, step, delta in _FOLD_RUNS:
        for index in range(count):
            code = first + index * step
            table[code] = code + delta
    return table


_FOLD = _fold_table()
_CLEAN = re.compile("[\x00\ud800-\udfff]")


def clean(text: str) -> str:
    """``text`` with U+0000 and lone surrogates replaced by U+FFFD (same length)."""
    if text.isascii():
        return text.replace("\x00", "\ufffd") if "\x00" in text else text
    return _CLEAN.sub("\ufffd", text)


def fold(text: str) -> str:
    """Case-fold ``text`` one code point at a time, as SQLite's FTS5 trigram
    tokenizer does with ``case_sensitive 0``. ``len(fold(s)) == len(s)``."""
    if text.isascii():
        return text.lower()  # ASCII: A-Z only, as in the table
    return text.translate(_FOLD)


# -- what an entry says -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EntryText:
    """The searchable text of one entry (:func:`entry_text`).

    Attributes:
        role: the message role (``user``, ``assistant``, ``toolResult``,
            ``bashExecution``, ``custom``, ``branchSummary``,
            ``compactionSummary``, ``system``); for other entry types the role
            their text plays (``custom_message`` -> ``custom``,
            ``branch_summary`` -> ``branchSummary``, ``compaction`` ->
            ``compactionSummary``); ``None`` for ``session_info`` and
            ``session_summary``.
        text: the indexed text (cleaned, never empty).
        ts_ms: the entry's ``timestamp`` in ms since the epoch, ``None`` if it
            does not parse (such an entry never passes a ``since``/``until`` filter).
    """

    role: str | None
    text: str
    ts_ms: float | None


def _content_parts(content: Any, out: list[str]) -> None:
    if isinstance(content, str):
        out.append(content)
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str):
                out.append(block["text"])


def _argument_parts(value: Any, out: list[str], depth: int = 0) -> None:
    # Values only: keys ("path", "command") would make every call match them.
    if depth > 64:
        return
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, (int, float)):
        out.append(repr(value) if isinstance(value, float) else str(value))
    elif isinstance(value, Mapping):
        for item in value.values():
            _argument_parts(item, out, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _argument_parts(item, out, depth + 1)


def _message_parts(message: Mapping[str, Any], out: list[str]) -> None:
    role = message.get("role")
    if role == "assistant":
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            for block in content:
                if not isinstance(block, Mapping):
                    continue
                kind = block.get("type")
                if kind == "text" and isinstance(block.get("text"), str):
                    out.append(block["text"])
                elif kind == "thinking" and isinstance(block.get("thinking"), str):
                    out.append(block["thinking"])
                elif kind == "toolCall":
                    if isinstance(block.get("name"), str):
                        out.append(block["name"])
                    _argument_parts(block.get("arguments"), out)
        if isinstance(message.get("errorMessage"), str):
            out.append(message["errorMessage"])
    elif role == "bashExecution":
        for key in ("command", "output"):
            if isinstance(message.get(key), str):
                out.append(message[key])
    elif role in ("branchSummary", "compactionSummary"):
        if isinstance(message.get("summary"), str):
            out.append(message["summary"])
    else:  # user, toolResult, custom, system and unknown roles: their text content
        _content_parts(message.get("content"), out)


_TYPE_ROLES = {"custom_message": "custom", "branch_summary": "branchSummary", "compaction": "compactionSummary"}


def entry_text(entry: Mapping[str, Any]) -> EntryText | None:
    """The searchable text of ``entry`` (the table in the module docstring), or
    ``None`` when it has none. Never raises on any JSON object."""
    kind = entry.get("type")
    parts: list[str] = []
    role: str | None = None
    if kind == "message":
        message = entry.get("message")
        if not isinstance(message, Mapping):
            return None
        role = message.get("role") if isinstance(message.get("role"), str) else None
        _message_parts(message, parts)
    elif kind == "custom_message":
        role = "custom"
        _content_parts(entry.get("content"), parts)
    elif kind in ("branch_summary", "compaction", "session_summary"):
        role = _TYPE_ROLES.get(kind)
        if isinstance(entry.get("summary"), str):
            parts.append(entry["summary"])
    elif kind == "session_info":
        if isinstance(entry.get("name"), str):
            parts.append(entry["name"])
    else:
        return None
    text = "\n".join(part for part in parts if part)
    if not text:
        return None
    return EntryText(role, clean(text), parse_timestamp_ms(entry.get("timestamp")))


# -- queries ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SearchQuery:
    """A parsed query (:func:`parse_query`).

    Attributes:
        text: the query as given.
        terms: the terms as written (cleaned), in order, duplicates removed.
        folded: ``fold`` of each term, same order.
    """

    text: str
    terms: tuple[str, ...]
    folded: tuple[str, ...]

    @property
    def indexable(self) -> tuple[str, ...]:
        """Folded terms of at least :data:`TRIGRAM` characters (a trigram index can answer them)."""
        return tuple(term for term in self.folded if len(term) >= TRIGRAM)

    def fts_expression(self) -> str | None:
        """The FTS5 MATCH expression for the indexable terms on a ``detail=none``
        trigram index, which answers no phrase: every distinct trigram (three
        consecutive code points) of every indexable folded term, each a quoted
        string (``"`` doubled), joined by ``AND``, in order of first appearance;
        ``None`` when no term is long enough. It selects a superset of the
        matches (a term's trigrams may all occur without the term), which the
        caller checks with :meth:`matches`. Quoting makes every character data:
        no query can change the expression's meaning or make it fail to parse."""
        terms = self.indexable
        if not terms:
            return None
        trigrams = dict.fromkeys(term[i:i + TRIGRAM] for term in terms for i in range(len(term) - TRIGRAM + 1))
        return " AND ".join('"' + trigram.replace('"', '""') + '"' for trigram in trigrams)

    def matches(self, folded_text: str) -> bool:
        """Whether every term occurs in ``folded_text`` (already :func:`fold`-ed)."""
        return all(term in folded_text for term in self.folded)


def parse_query(query: str) -> SearchQuery:
    """Parse a query by the rules of the module docstring.

    Raises:
        SearchQueryError: not a ``str``, no term, more than
            :data:`MAX_QUERY_CHARS` characters or :data:`MAX_TERMS` terms.
    """
    if not isinstance(query, str):
        raise SearchQueryError(repr(query), "a query is a string")
    if len(query) > MAX_QUERY_CHARS:
        raise SearchQueryError(query[:80], f"it is {len(query):,} characters long; at most "
                                           f"{MAX_QUERY_CHARS:,} are accepted")
    text = clean(query)
    terms: list[str] = []
    index, end = 0, len(text)
    while index < end:
        char = text[index]
        if char.isspace():
            index += 1
            continue
        if char == '"':
            close = text.find('"', index + 1)
            close = end if close < 0 else close
            term = text[index + 1:close]
            index = close + 1
            if not term.strip():
                continue
        else:
            start = index
            while index < end and not text[index].isspace():
                index += 1
            term = text[start:index]
        terms.append(term)
    seen: dict[str, str] = {}
    for term in terms:
        seen.setdefault(fold(term), term)
    if not seen:
        raise SearchQueryError(query, "it has no search term")
    if len(seen) > MAX_TERMS:
        raise SearchQueryError(query[:80], f"it has {len(seen)} terms; at most {MAX_TERMS} are accepted")
    return SearchQuery(query, tuple(seen.values()), tuple(seen))


# -- filters ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SearchFilters:
    """Which entries a search considers (:func:`make_filters`).

    Attributes:
        cwd: absolute project directory (header ``cwd`` must resolve to it), or ``None``.
        roles: kept roles or entry types, or ``None`` for all.
        since_ms: keep entries whose timestamp is at or after this (ms), or ``None``.
        until_ms: keep entries whose timestamp is before this (ms), or ``None``.
        session: only this session id, or ``None``.
    """

    cwd: str | None = None
    roles: frozenset[str] | None = None
    since_ms: float | None = None
    until_ms: float | None = None
    session: str | None = None

    def keeps(self, entry_type: str, role: str | None, ts_ms: float | None) -> bool:
        """Whether an entry of this type, role and time passes the role and time filters."""
        if self.roles is not None and role not in self.roles and entry_type not in self.roles:
            return False
        if self.since_ms is not None and (ts_ms is None or ts_ms < self.since_ms):
            return False
        if self.until_ms is not None and (ts_ms is None or ts_ms >= self.until_ms):
            return False
        return True


def _ms(value: datetime | str | float | int | None, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a datetime, an ISO-8601 string or milliseconds")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        parsed = parse_timestamp_ms(value.strip())
        if parsed is None:
            raise ValueError(f"{what}: {value!r} is not an ISO-8601 date or time")
        return parsed
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.timestamp() * 1000.0
    raise ValueError(f"{what} must be a datetime, an ISO-8601 string or milliseconds")


def make_filters(*, cwd: str | None = None, roles: Iterable[str] | None = None,
                 since: datetime | str | float | None = None, until: datetime | str | float | None = None,
                 session: str | None = None) -> SearchFilters:
    """Normalise the keyword filters of ``store.search`` (one rule for every store).

    Args:
        cwd: a project directory (made absolute, like the listing's filter).
        roles: roles or entry types to keep (``"user"``, ``"toolResult"``,
            ``"session_info"``, ...); an empty iterable means none is kept.
        since, until: a :class:`~datetime.datetime` (naive = UTC), an ISO-8601
            string (``"2026-01-31"`` is midnight UTC) or ms since the epoch.
            ``since`` is inclusive, ``until`` exclusive.
        session: an exact session id.

    Raises:
        ValueError: a time that does not parse.
    """
    import os

    return SearchFilters(
        cwd=os.path.abspath(cwd) if cwd is not None else None,
        roles=frozenset(roles) if roles is not None else None,
        since_ms=_ms(since, "since"),
        until_ms=_ms(until, "until"),
        session=session,
    )


# -- hits ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SearchHit:
    """One matching entry.

    Attributes:
        session_id: the session's id.
        title: the session's name, else its fresh summary, else its first user
            message (as ``sessiontree list`` shows it).
        session_name: the current session name, ``None`` when never named or cleared.
        cwd: the session header's ``cwd`` (``""`` when absent).
        entry_id: the matching entry's id (``sessiontree show SESSION --entry ID``).
        entry_type: its ``type`` (``message``, ``compaction``, ...).
        role: as :attr:`EntryText.role`.
        timestamp: the entry's ``timestamp`` string as stored (``None`` if not a string).
        snippet: up to :data:`SNIPPET_CHARS` characters of the entry text around
            the first match, newlines and tabs shown as spaces, ``…`` where cut.
        highlights: ``(start, end)`` code-point offsets of the matches in
            ``snippet``, sorted, not overlapping.
        rank: relevance, higher is better; comparable only between hits of one
            search on one store (SQLite: ``-bm25``; PostgreSQL: ``ts_rank``; scans:
            :func:`scan_score`).
        on_active_branch: whether the entry is on the path from the session's
            root to its active leaf; ``False`` for an abandoned branch.
    """

    session_id: str
    title: str
    session_name: str | None
    cwd: str
    entry_id: str
    entry_type: str
    role: str | None
    timestamp: str | None
    snippet: str
    highlights: tuple[tuple[int, int], ...]
    rank: float
    on_active_branch: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (camelCase keys, highlights as ``[start, end]`` pairs)."""
        return {
            "sessionId": self.session_id,
            "title": self.title,
            "sessionName": self.session_name,
            "cwd": self.cwd,
            "entryId": self.entry_id,
            "entryType": self.entry_type,
            "role": self.role,
            "timestamp": self.timestamp,
            "snippet": self.snippet,
            "highlights": [list(span) for span in self.highlights],
            "rank": self.rank,
            "onActiveBranch": self.on_active_branch,
        }


def _spans(folded_text: str, terms: Iterable[str]) -> list[tuple[int, int]]:
    spans = []
    for term in terms:
        start = folded_text.find(term)
        while start >= 0:
            spans.append((start, start + len(term)))
            start = folded_text.find(term, start + 1)
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


_BLANKS = str.maketrans({"\n": " ", "\t": " ", "\r": " "})


def snippet(text: str, query: SearchQuery, width: int = SNIPPET_CHARS,
            folded: str | None = None) -> tuple[str, tuple[tuple[int, int], ...]]:
    """The snippet of ``text`` for ``query`` and its highlight offsets (see :class:`SearchHit`).

    The window starts a quarter of ``width`` before the first match (or at the
    start), so the match is near the left with some context before it.
    ``folded``: ``fold(text)`` when the caller has it already (matching folded
    the text once; folding is the costly part for long non-ASCII texts).
    """
    if folded is None:
        folded = fold(text)
    spans = _spans(folded, query.folded)
    first = spans[0][0] if spans else 0
    start = max(0, min(first - width // 4, len(text) - width))
    end = min(len(text), start + width)
    body = text[start:end].translate(_BLANKS)
    prefix = "…" if start > 0 else ""
    shift = len(prefix) - start
    marks = tuple((max(s, start) + shift, min(e, end) + shift) for s, e in spans if s < end and e > start)
    return prefix + body + ("…" if end < len(text) else ""), marks


def scan_score(folded_text: str, query: SearchQuery) -> float:
    """Relevance of a matching entry for the scanning stores: matched characters
    per character of text, damped for short texts (``sum(count(t) * len(t)) /
    (len(text) + 200)``). Like bm25, it favours entries where the terms are a
    large part of the text; unlike bm25 it ignores how rare a term is across
    the store (a scan does not know that), so orders may differ from SQLite's."""
    matched = sum(folded_text.count(term) * len(term) for term in query.folded)
    return matched / (len(folded_text) + 200)


def hit_order(hit: SearchHit) -> tuple[float, float, str, str]:
    """Sort key of hits, best first: rank descending, then newer first, then ids."""
    stamp = parse_timestamp_ms(hit.timestamp) or 0.0
    return (-hit.rank, -stamp, hit.session_id, hit.entry_id)
