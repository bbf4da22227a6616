"""Suggestions for a search that found nothing: "did you mean compaction?" (docs/search.md, "Suggestions").

One function below the edges (the command line, the viewer and the MCP server call
:func:`suggest` after a search with no hits), over the store's own search
(:meth:`~sessiontree.stores.base.SessionStore.search`): it works the same on every
store, whatever answers the search (SQLite's FTS5 trigram index, PostgreSQL, the
memory and JSONL scans), and every word it offers is in the stored sessions.

The rule:

1. Only terms that find nothing on their own (in the same scope: project, roles,
   dates, session) are replaced; a query whose terms each find something, but not
   together, gets no suggestion. Phrases and terms shorter than :data:`MIN_TERM`
   characters are left alone.
2. For such a term, up to three fragments (its first, middle and last
   ``max(3, ⌈n/2⌉)`` characters of ``n``) are searched; the words of the hits'
   snippets holding a fragment are the candidates (the index's vocabulary around
   where the term would be).
3. A candidate is kept when its similarity to the term (``difflib`` ratio of the
   case-folded words) is at least :data:`MIN_SIMILARITY`; candidates are ranked by
   similarity, then by how often they were seen, then alphabetically.
4. Each suggestion is the whole query with the term replaced, kept only when it
   finds something in the same scope; at most ``limit`` (3) are returned.

Costs: one search per term, up to three per missing term, one per suggestion
checked; nothing when the query had hits (the callers ask only then).
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sessiontree.core.search import fold, parse_query
from sessiontree.errors import SearchQueryError
from sessiontree.stores.base import SessionStore

__all__ = ["MIN_SIMILARITY", "MIN_TERM", "suggest"]

#: Terms shorter than this are not guessed at (too many words are near them).
MIN_TERM = 4
#: How close a word must be to the term (``difflib.SequenceMatcher.ratio``).
MIN_SIMILARITY = 0.8
#: Hits read per fragment.
_FRAGMENT_HITS = 40
#: Candidates tried per term before the whole query is checked.
_PER_TERM = 6
_WORD = re.compile(r"\w+")


def _quoted(term: str) -> str:
    """A term as a query holds it: a phrase in double quotes (``"`` doubled inside)."""
    return f'"{term.replace(chr(34), chr(34) * 2)}"' if any(c.isspace() or c == '"' for c in term) else term


def _fragments(term: str) -> list[str]:
    n = len(term)
    size = max(3, (n + 1) // 2)
    return list(dict.fromkeys(term[start:start + size] for start in (0, (n - size) // 2, n - size)))


def suggest(store: SessionStore, query: str, *, limit: int = 3, cwd: str | None = None,
            roles: Iterable[str] | None = None, since: datetime | str | float | None = None,
            until: datetime | str | float | None = None, session: str | None = None) -> list[str]:
    """Up to ``limit`` queries close to ``query`` that find something (the module's rule).

    Args:
        store: the store searched.
        query: the query that found nothing.
        limit: at most this many suggestions.
        cwd, roles, since, until, session: the scope of the search, as given to it.

    Returns:
        Whole queries (the query with its unknown terms replaced), best first; ``[]``
        when nothing close is found, or the query cannot be parsed.

    Raises:
        StorageError: the store could not be read.
    """
    try:
        parsed = parse_query(query)
    except SearchQueryError:
        return []
    roles = tuple(roles) if roles is not None else None
    scope: dict[str, Any] = {"cwd": cwd, "roles": roles, "since": since, "until": until, "session": session}

    def finds(text: str) -> bool:
        try:
            return bool(store.search(text, limit=1, **scope))
        except SearchQueryError:
            return False

    choices: list[tuple[str, list[str]]] = []
    for term in parsed.terms:
        if finds(_quoted(term)):
            choices.append((term, [term]))
            continue
        words = _near(store, term, scope)
        if not words:
            return []  # a term nothing is near: no query could find something
        choices.append((term, words))
    if all(words == [term] for term, words in choices):
        return []  # every term finds something on its own, only not together
    out: list[str] = []
    for rank in range(_PER_TERM):
        # The rank-th candidate of each replaced term (the best ones first), the others as typed.
        picked = [words[min(rank, len(words) - 1)] for _term, words in choices]
        text = " ".join(_quoted(word) for word in picked)
        if text not in out and text != query and finds(text):
            out.append(text)
        if len(out) >= limit:
            break
    return out


def _near(store: SessionStore, term: str, scope: dict[str, Any]) -> list[str]:
    """Words of the stored sessions close to ``term`` (steps 2 and 3 of the rule), best first."""
    folded = fold(term)
    if len(folded) < MIN_TERM or any(c.isspace() for c in folded):
        return []
    seen: Counter[str] = Counter()
    shown: dict[str, str] = {}
    for fragment in _fragments(folded):
        try:
            hits = store.search(fragment, limit=_FRAGMENT_HITS, **scope)
        except SearchQueryError:
            continue
        for hit in hits:
            for word in _WORD.findall(hit.snippet):
                key = fold(word)
                if fragment in key and key != folded and len(key) >= MIN_TERM:
                    seen[key] += 1
                    shown.setdefault(key, word.lower() if word.lower() == key else word)
    scored = []
    for key, count in seen.items():
        ratio = difflib.SequenceMatcher(None, folded, key).ratio()
        if ratio >= MIN_SIMILARITY:
            scored.append((-ratio, -count, key))
    return [shown[key] for _r, _c, key in sorted(scored)[:_PER_TERM]]
