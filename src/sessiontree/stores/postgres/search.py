"""The PostgreSQL search index: ``pg_trgm`` for substrings, a ``tsvector`` for ranking.

Invariants (the same as :mod:`sessiontree.stores.sqlite.search`):

* **Derived data** (docs/stores.md): :class:`SearchIndex` is a
  :class:`~sessiontree.stores.postgres.derived.DerivedIndex`, so its rows are written
  in the transaction that writes their entries, removed with their session,
  and rebuilt from the entries alone by ``store.reindex()``.
* **The same hits as every other store.** Each row holds ``fold(entry_text(entry).text)``
  (:mod:`sessiontree.core.search`: the text the JSONL and memory stores scan and
  SQLite indexes, folded by the one rule). A query's terms are folded the same
  way and matched as substrings of that column *by the server*: ``LIKE
  '%term%'`` (``%``, ``_`` and ``\\`` escaped) for terms of three or more
  characters, which the trigram index answers, and ``strpos(folded, term) > 0``
  for shorter ones, which a trigram index cannot answer and which are checked
  on the candidates of the longer terms (or by a scan of the table when a
  query has only short terms). Both are exact substring tests on
  code points (``LIKE`` is rechecked on every row the lossy trigram index
  returns), and every row is checked once more with
  :meth:`~sessiontree.core.search.SearchQuery.matches` before it becomes a hit.
  The folding is done in Python, never by the server's ``lower()``, so the
  database's locale and collation cannot change what matches.
* **Every user token is a parameter**: no query text reaches SQL or tsquery syntax.

Tables (schema step ``m003_search_index`` in :mod:`.schema`)::

    search_entries(session_id, seq, type, role, ts_ms, folded,
                   tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', left(folded, 100000))) STORED)
    search_entries_trgm  GIN (folded gin_trgm_ops)      -- substrings (pg_trgm)

(``search_entries_tsv``, a GIN over ``tsv`` that no query used, was dropped by step
``m014_lean_indexes``: ranking reads ``tsv`` from the row.)

Ranking: ``ts_rank(tsv, q, 1)`` (term frequency over the document, divided
by ``1 + log(length)``) where ``q`` ORs every word of every term as a
prefix (:func:`rank_query`): an entry where the terms start words, often, in
a short text ranks first. Ties (a term found only in the middle of words
gives 0) are broken newest first, then by session and entry id, as on every
store. Only the
first :data:`TSV_CHARS` characters of an entry feed its ``tsvector`` (a
``tsvector`` is limited to 1 MB); matching always reads the whole text.

Without ``pg_trgm`` (not installed on the server, or not allowed to create
it) the step creates everything but the trigram index and search runs the
same SQL as a sequential scan of ``search_entries`` on the server: the same
hits, slower. :func:`trigram_available` tells which; a full
``store.reindex()`` tries to create the extension and the index again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from sessiontree.core.search import (
    TRIGRAM,
    SearchFilters,
    SearchHit,
    SearchQuery,
    entry_text,
    fold,
    make_filters,
    parse_query,
)
from sessiontree.format import jsonio
from sessiontree.stores.listing import cwd_matches
from sessiontree.stores.postgres import recent
from sessiontree.stores.postgres.derived import IndexedRow, PostgresReads, info_from_listing, text_copy
from sessiontree.stores.postgres.team import own_rows_apply, own_rows_keys
from sessiontree.stores.search import (
    SessionFacts,
    active_ids,
    check_limit,
    make_hit,
    scan_store,
    title_of,
)
from sessiontree.stores.verify import row_drift

__all__ = [
    "INDEX",
    "TSV_CHARS",
    "SearchIndex",
    "ensure_trigram_index",
    "fill_index",
    "rank_query",
    "search_store",
    "trigram_available",
]

#: Characters of an entry's folded text that feed its ``tsvector`` (ranking only).
TSV_CHARS = 100_000

_INSERT = ("INSERT INTO search_entries (session_id, seq, type, role, ts_ms, folded)"
           " VALUES (%s, %s, %s, %s, %s, %s)")


class SearchIndex:
    """The search index as a :class:`~sessiontree.stores.postgres.derived.DerivedIndex`."""

    name = "search"

    def add(self, conn: Any, session_id: str, rows: Sequence[IndexedRow]) -> None:
        """Index the folded text of new entries of ``session_id`` (inside the writing
        transaction; the ``tsvector`` is computed by the server as a generated column).

        ``rows`` are ``(seq, entry, stored bytes)``: entries after every entry already
        indexed for the session (appends), or all of them after :meth:`remove` (reindex)."""
        out = []
        for seq, entry, _ in rows:
            found = entry_text(entry)
            if found is not None:
                # entry_text's text is clean (no NUL, no lone surrogate): text holds it exactly.
                out.append((session_id, seq, text_copy(entry.get("type")) or "", text_copy(found.role), found.ts_ms,
                            fold(found.text)))
        if out:
            with conn.cursor() as cur:
                cur.executemany(_INSERT, out)

    def remove(self, conn: Any, session_id: str) -> None:
        """Drop ``session_id`` from the index (inside the writing transaction)."""
        conn.execute("DELETE FROM search_entries WHERE session_id = %s", (session_id,))

    def checker(self, conn: Any, session_id: str) -> _SessionCheck:
        """The :class:`~sessiontree.stores.verify.DerivedCheck` of ``session_id``'s
        ``search_entries`` rows (``check --store``): the rows :meth:`add` writes."""
        return _SessionCheck(conn, session_id)

    def prepare(self, conn: Any) -> None:
        """Before a full reindex, in its own transaction: create the trigram index if
        the schema step could not (``pg_trgm`` installed or allowed since)."""
        ensure_trigram_index(conn)


#: The search index (listed in :data:`~sessiontree.stores.postgres.schema.DERIVED_INDEXES`).
INDEX = SearchIndex()


class _SessionCheck:
    """:meth:`SearchIndex.checker`: the rebuilt rows are computed as the entries come."""

    def __init__(self, conn: Any, session_id: str) -> None:
        self.conn, self.session_id = conn, session_id
        self.rows: list[int] = []

    def add(self, seq: int, entry: dict[str, Any]) -> None:
        found = entry_text(entry)
        if found is not None:
            # Hashes, not rows: a session's texts can be hundreds of MB.
            self.rows.append(hash((seq, text_copy(entry.get("type")) or "", text_copy(found.role), found.ts_ms,
                                   fold(found.text))))

    def drift(self) -> list[str]:
        stored = [hash(tuple(row)) for row in self.conn.execute(
            "SELECT seq, type, role, ts_ms, folded FROM search_entries WHERE session_id = %s ORDER BY seq",
            (self.session_id,))]
        return row_drift("search_entries", stored, self.rows)


def ensure_trigram_index(conn: Any) -> bool:
    """Create ``pg_trgm`` (``CREATE EXTENSION IF NOT EXISTS``) and the trigram index of
    ``search_entries.folded`` unless they exist, inside a savepoint of the caller's
    transaction, so a server without the extension (or a role not allowed to create
    it) leaves the transaction usable.

    Returns:
        Whether the trigram index exists afterwards.
    """
    if trigram_available(conn):
        return True
    import psycopg  # installed: there is a connection

    try:
        with conn.transaction():  # a savepoint
            _create_trigram_index(conn)
    except psycopg.Error:  # the extension is not installed, or this role may not create it
        return False
    return True


# Module-level so tests can simulate a server without pg_trgm.
def _create_trigram_index(conn: Any) -> None:
    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    conn.execute("CREATE INDEX IF NOT EXISTS search_entries_trgm ON search_entries USING gin (folded gin_trgm_ops)")


def trigram_available(conn: Any) -> bool:
    """Whether ``search_entries`` has its trigram index (else search scans the table)."""
    return conn.execute("SELECT 1 FROM pg_indexes WHERE schemaname = current_schema()"
                        " AND indexname = 'search_entries_trgm'").fetchone() is not None




def fill_index(conn: Any) -> None:
    """Index every entry already stored (the schema step creating the index)."""
    ids = [row[0] for row in conn.execute("SELECT id FROM sessions ORDER BY rowno")]
    for session_id in ids:
        rows = []
        with conn.cursor(binary=True) as cur:
            for seq, text in cur.execute("SELECT seq, json FROM entries WHERE session_id = %s ORDER BY seq",
                                         (session_id,)):
                try:
                    entry = jsonio.loads(bytes(text))
                except ValueError:
                    continue  # a damaged record: load() reports it; reindex() fills the rest later
                if isinstance(entry, dict) and isinstance(entry.get("type"), str):
                    rows.append((seq, entry, b""))
        INDEX.add(conn, session_id, rows)


# -- queries ----------------------------------------------------------------------------------


def _like(term: str) -> str:
    """A ``LIKE`` pattern matching ``term`` anywhere: ``\\``, ``%`` and ``_`` escaped."""
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def rank_query(query: SearchQuery) -> str | None:
    """The ``tsquery`` (as text) that ranks hits: every word (``\\w+``) of every folded
    term as a prefix (``'word':*``), ORed, so a term inside a longer word (``dedup`` in
    ``_dedup_ids``, ``東京`` in ``東京タワー``) still counts. Quotes and backslashes are
    doubled, so no query reaches tsquery syntax. Words over 500 characters are left
out (a lexeme is limited to 2,047 bytes). ``None`` when no term has a word.

    Example: ``retry "a-b"`` -> ``'retry':* | 'a':* | 'b':*``.
    """
    # A lexeme is at most 2,047 bytes; a longer word cannot rank anything anyway.
    words = dict.fromkeys(word for term in query.folded for word in _WORD.findall(term) if len(word) <= 500)
    if not words:
        return None
    return " | ".join("'" + word.replace("\\", "\\\\").replace("'", "''") + "':*" for word in words)


_WORD = re.compile(r"\w+")


def _allowed(conn: Any, filters: SearchFilters) -> list[str] | None:
    """Session ids passing the session and cwd filters, or ``None`` for every session.

    The ``cwd`` column is a lossy copy where the header's cwd holds what text
    cannot; such sessions are decided from their header."""
    if filters.session is None and filters.cwd is None:
        return None
    if filters.session is not None:
        rows = conn.execute("SELECT id, cwd FROM sessions WHERE id = %s", (filters.session,)).fetchall()
    else:
        rows = conn.execute("SELECT id, cwd FROM sessions").fetchall()
    allowed = []
    for session_id, cwd in rows:
        if cwd is not None and "\ufffd" in cwd:
            header = jsonio.loads(bytes(conn.execute("SELECT header_json FROM sessions WHERE id = %s",
                                                     (session_id,)).fetchone()[0]))
            cwd = header.get("cwd") if isinstance(header, dict) else None
        if cwd_matches(cwd, filters.cwd):
            allowed.append(session_id)
    return allowed


def _facts(conn: Any, session_id: str) -> SessionFacts:
    """Title, name, cwd and active branch of a session, from its listing state and the
    entries' columns (JSON read only for ``leaf`` records and lossy parent ids)."""
    with conn.cursor(binary=True) as cur:
        header_json, listing = cur.execute("SELECT header_json, listing FROM sessions WHERE id = %s",
                                           (session_id,)).fetchone()
        records = cur.execute(
            "SELECT id, parent_id, type, CASE WHEN type = 'leaf' OR strpos(parent_id, U&'\\FFFD') > 0"
            " THEN json END FROM entries WHERE session_id = %s ORDER BY seq", (session_id,)).fetchall()
    header = jsonio.loads(bytes(header_json))
    info = info_from_listing(bytes(listing))
    cwd = header.get("cwd") if isinstance(header, dict) else None
    entries: list[dict[str, Any]] = []
    for entry_id, parent, kind, exact in records:
        entry: dict[str, Any] = {"id": entry_id, "parentId": parent, "type": kind}
        if exact is not None:
            try:
                record = jsonio.loads(bytes(exact))
            except ValueError:
                record = {}
            if isinstance(record, dict):
                entry["parentId"] = record.get("parentId", parent)
                entry["type"] = record.get("type", kind)
                if "targetId" in record:
                    entry["targetId"] = record["targetId"]
        entries.append(entry)
    return SessionFacts(session_id, title_of(info), info.name, cwd if isinstance(cwd, str) else "",
                        active_ids(entries))


# The parts of _limit_first_sql and _scored_walk_sql that are one rule: ``last`` is the
# last of ``best`` in (score, newest, session id, seq) order; the kept rows (``best`` and
# the ties of ``last``) are joined for their entry id and text and ordered as hit_order.
_LAST = """last AS (
            SELECT * FROM best ORDER BY score, coalesce(ts_ms, 0), session_id COLLATE "C" DESC, seq DESC LIMIT 1),"""
_KEPT_HITS = """kept AS (SELECT * FROM best UNION SELECT * FROM tied)
        SELECT k.session_id, k.seq, e.id, s.folded, k.score, k.ts_ms
        FROM kept AS k
        JOIN entries AS e ON e.session_id = k.session_id AND e.seq = k.seq
        JOIN search_entries AS s ON s.session_id = k.session_id AND s.seq = k.seq
        ORDER BY k.score DESC, coalesce(k.ts_ms, 0) DESC, k.session_id COLLATE "C", e.id COLLATE "C"
        LIMIT %s"""


def _limit_first_sql(score: str, cond: str) -> str:
    """The ranked, limited query of :func:`_hits_from_index`, planned limit first.

    Its rows are the first ``limit`` of the full order (score, newest, session id,
    entry id, ids in code-point order: :func:`~sessiontree.core.search.hit_order`),
    exactly those of sorting every match, but the entry id (a join with ``entries``)
    and the folded text are read for about ``limit`` rows only, and the sort over the
    matches is a bounded one on small keys (a top-N heap in memory: sorting every
    match of a common word with its text spilled to disk at a million entries):

    1. ``best``: the first ``limit`` matches by (score, newest, session id, ``seq``);
    2. ``last``: the last of them; every match that the first three keys cannot tell
       from it is in its session, so ``tied`` reads them through the primary key;
    3. ``best`` and ``tied`` hold every match before ``last`` in the full order (all
       matches strictly before it on the first three keys are in ``best``) and every
       match tied with it, so ordering them with the entry id and stopping at
       ``limit`` gives the same rows.

    Parameters, in order: the rank query (if ``score`` has one), ``cond``'s,
    ``limit``, the rank query, ``cond``'s, the rank query, ``limit``.
    """
    keys = f"s.session_id, s.seq, {score} AS score, s.ts_ms"
    return f"""
        WITH best AS (
            SELECT {keys} FROM search_entries AS s WHERE {cond}
            ORDER BY score DESC, coalesce(s.ts_ms, 0) DESC, s.session_id COLLATE "C", s.seq LIMIT %s),
        {_LAST}
        tied AS (
            SELECT {keys} FROM search_entries AS s JOIN last ON s.session_id = last.session_id
            WHERE {cond} AND {score} = last.score AND coalesce(s.ts_ms, 0) = coalesce(last.ts_ms, 0)),
        {_KEPT_HITS}"""


def _scored_walk_sql(walk_from: str) -> str:
    """:func:`_limit_first_sql` for a member's frequent words from step
    ``m013_filtered_walk`` on: the matches come ranked from the walk of the member's
    rows (``walk_from``, :func:`~sessiontree.stores.postgres.recent.scored_walk_sql`:
    at most :data:`EARLY_STOP`, newest first, each with its time and score), so the
    bounded sort, the last kept match and its ties are taken from those rows without
    reading any of them again; only the kept ones (about ``limit``) are joined with
    ``entries`` and ``search_entries``. The same rows as :func:`_limit_first_sql` over
    the walk's keys (the same keys, scores and order).

    Parameters, in order: the walk's (terms, rank query, cap, filters), ``limit``, ``limit``.
    """
    return f"""
        WITH m AS MATERIALIZED (SELECT w.session_id, w.seq, w.score, w.ts_ms FROM {walk_from} AS w),
        best AS (
            SELECT * FROM m ORDER BY score DESC, coalesce(ts_ms, 0) DESC, session_id COLLATE "C", seq LIMIT %s),
        {_LAST}
        tied AS (
            SELECT m.* FROM m JOIN last ON m.session_id = last.session_id AND m.score = last.score
            AND coalesce(m.ts_ms, 0) = coalesce(last.ts_ms, 0)),
        {_KEPT_HITS}"""


def _conditions(query: SearchQuery, filters: SearchFilters, allowed: list[str] | None,
                *, scan: bool, own_keys: list[tuple[str, int]] | None = None) -> tuple[list[str], list[Any]]:
    """The ``WHERE`` conditions on ``search_entries AS s`` and their parameters.

    A term of :data:`~sessiontree.core.search.TRIGRAM` or more characters is a
    ``LIKE '%term%'`` that the trigram index answers, or, with ``scan``, a
    ``strpos(folded, term) > 0``: the same exact substring test, about twice as fast
    when every row is read anyway (a sequential scan), and useless to the index."""
    where: list[str] = []
    params: list[Any] = []
    likes = [_like(term) for term in query.folded if len(term) >= TRIGRAM and not scan]
    if own_keys is not None and likes:
        # A member under row-level security (docs/team.md): the rows the index found
        # through own_search_rows, since the policy keeps a LIKE here from reaching it.
        where.append("(s.session_id, s.seq) IN (SELECT * FROM unnest(%s::text[], %s::int[]))")
        params += [[key[0] for key in own_keys], [key[1] for key in own_keys]]
        likes = []
    for pattern in likes:
        where.append("s.folded LIKE %s")  # the trigram index answers it
        params.append(pattern)
    for term in query.folded:
        if len(term) < TRIGRAM or scan:
            where.append("strpos(s.folded, %s) > 0")  # checked on the candidates (or by the scan)
            params.append(term)
    if allowed is not None:
        where.append("s.session_id = ANY(%s)")
        params.append(allowed)
    if filters.roles is not None:
        kept = [value for value in (text_copy(role) for role in filters.roles) if value is not None]
        where.append("(s.role = ANY(%s) OR s.type = ANY(%s))")
        params += [kept, kept]
    if filters.since_ms is not None:
        where.append("s.ts_ms >= %s")
        params.append(filters.since_ms)
    if filters.until_ms is not None:
        where.append("s.ts_ms < %s")
        params.append(filters.until_ms)
    return where, params


#: Most matches a search with a limit reads when its terms are frequent (the server
#: expects them in :data:`SCAN_SHARE` of the entries or more): it reads matches newest
#: first and stops at this many; the hits are the best ranked of them (docs/search.md,
#: "Frequent terms on PostgreSQL"). Below it every match is read, so a store holding
#: fewer matches gives exactly the hits of every other store.
EARLY_STOP = 5_000

#: The share of the entries above which a search reads them all (a sequential scan
#: with ``strpos``) rather than through the trigram index: measured at 1,000,000
#: entries, a word in 6% of them is found twice as fast through the index, one in 24%
#: 30% faster by the scan (docs/postgres.md, "Search").
SCAN_SHARE = 0.2


def _trigram_pays(conn: Any, cond: str, params: list[Any]) -> bool:
    """Whether to answer ``cond`` through the trigram index: the server's plan for it
    (``EXPLAIN`` without running it, about a millisecond) uses the index and expects
    fewer than :data:`SCAN_SHARE` of the entries to match. Otherwise every row is read
    anyway, and :func:`_conditions`' ``strpos`` form does that about twice as fast as
    ``LIKE``. The same hits either way; only the speed differs."""
    (plan,), = conn.execute(f"EXPLAIN (FORMAT JSON) SELECT s.seq FROM search_entries AS s WHERE {cond}",
                            params).fetchall()
    if "search_entries_trgm" not in json.dumps(plan):
        return False
    (total,), = conn.execute("SELECT reltuples FROM pg_class WHERE oid = 'search_entries'::regclass").fetchall()
    # reltuples is -1 (or 0) before the table's first ANALYZE: trust the plan then.
    return bool(total <= 0 or plan[0]["Plan"]["Plan Rows"] < SCAN_SHARE * total)


def _recent_window(conn: Any, where: list[str], params: list[Any]) -> tuple[list[str], list[Any]]:
    """Frequent terms, a limited search: the conditions narrowed to the
    :data:`EARLY_STOP` newest matches (``ts_ms``, newest first, then session id and
    ``seq``; an entry without a time counts as 1970), found by walking
    ``search_entries_recent`` (step ``m010_search_recent``) and testing each row until
    that many match, instead of reading every match. Where the database lacks that
    index, or the matches are fewer, the conditions are returned as they were."""
    if conn.execute("SELECT to_regclass('search_entries_recent') IS NULL").fetchone()[0]:
        return where, params
    keys = conn.execute(
        f"SELECT s.session_id, s.seq FROM search_entries AS s WHERE {' AND '.join(where)}"
        " ORDER BY coalesce(s.ts_ms, 0) DESC, s.session_id COLLATE \"C\", s.seq LIMIT %s",
        [*params, EARLY_STOP + 1]).fetchall()
    if len(keys) <= EARLY_STOP:
        return where, params  # every match fits: the ordinary query reads no more than this
    keys = keys[:EARLY_STOP]
    return (["(s.session_id, s.seq) IN (SELECT * FROM unnest(%s::text[], %s::int[]))", *where],
            [[key[0] for key in keys], [key[1] for key in keys], *params])


def _hits_from_index(conn: Any, query: SearchQuery, filters: SearchFilters, limit: int | None,
                     team: bool = False) -> list[SearchHit]:
    allowed = _allowed(conn, filters)
    if allowed is not None and not allowed:
        return []
    likes = [_like(term) for term in query.folded if len(term) >= TRIGRAM]
    scored: tuple[str, list[Any]] | None = None
    if team and likes and own_rows_apply(conn):
        # A member. With a limit and step m011 (with a filter, step m013): frequent words
        # are decided from the member's own newest rows that pass the filters, and
        # answered by walking them newest first (stores/postgres/recent.py; from m013 the
        # walk ranks its matches too); else candidates through own_search_rows, or, when
        # the words are too frequent for it, a read of the member's own rows (the scan form).
        kept = recent.walk_filters(filters, allowed)
        level = recent.walk_level(conn) if limit is not None else 0
        walk = level == 2 or (level == 1 and kept is None)
        walk_all, own_keys = (recent.member_sample(conn, query.folded, EARLY_STOP, SCAN_SHARE, kept) if walk
                              else (False, None))
        if not walk_all and own_keys is None:
            own_keys = own_rows_keys(conn, likes)
            # More matches than the trigram cap, yet not frequent among the newest: the
            # newest EARLY_STOP of them, as for frequent words.
            walk_all = own_keys is None and walk
        if walk_all and level == 2:
            scored = recent.scored_walk_sql(kept)
        elif walk_all:
            own_keys = recent.own_recent_keys(conn, query.folded, EARLY_STOP, None, kept)
        if scored is None and own_keys is not None and not own_keys:
            return []
        where, params = _conditions(query, filters, allowed, scan=own_keys is None, own_keys=own_keys)
        frequent = own_keys is None and scored is None
    else:
        where, params = _conditions(query, filters, allowed, scan=False)
        # Conditions are SQL text with %s placeholders: no query text is looked at here.
        frequent = any("LIKE" in part for part in where) and not _trigram_pays(conn, " AND ".join(where), params)
        if frequent:
            where, params = _conditions(query, filters, allowed, scan=True)
    if frequent and limit is not None:
        # Terms in a fifth of the entries or more: stop after the newest EARLY_STOP matches.
        where, params = _recent_window(conn, where, params)
    ranking = rank_query(query)
    rank_params = [ranking] if ranking is not None else []
    score = "ts_rank(s.tsv, %s::tsquery, 1)" if ranking is not None else "0::real"
    cond = " AND ".join(where)
    if scored is not None and limit is not None:
        walk_from, walk_params = scored
        rows = conn.execute(_scored_walk_sql(walk_from),
                            [list(query.folded), ranking, EARLY_STOP, *walk_params, limit, limit]).fetchall()
    elif limit is None:
        sql = (f"SELECT s.session_id, s.seq, e.id, s.folded, {score} AS score, s.ts_ms"
               " FROM search_entries AS s JOIN entries AS e ON e.session_id = s.session_id AND e.seq = s.seq"
               f" WHERE {cond}"
               # Best first, then newest, then ids in code-point order (COLLATE "C"): the
               # order of core.search.hit_order.
               " ORDER BY score DESC, coalesce(s.ts_ms, 0) DESC, s.session_id COLLATE \"C\", e.id COLLATE \"C\"")
        rows = conn.execute(sql, rank_params + params).fetchall()
    else:
        rows = conn.execute(_limit_first_sql(score, cond),
                            [*rank_params, *params, limit, *rank_params, *params, *rank_params, limit]).fetchall()
    found = [row for row in rows if query.matches(row[3])]
    if not found:
        return []
    # The hits' exact values (text for the snippet, type, role, timestamp) from their records.
    with conn.cursor(binary=True) as cur:
        records = {(sid, seq): bytes(text) for sid, seq, text in cur.execute(
            "SELECT e.session_id, e.seq, e.json FROM entries AS e"
            " JOIN unnest(%s::text[], %s::int[]) AS h (sid, seq) ON e.session_id = h.sid AND e.seq = h.seq",
            ([row[0] for row in found], [row[1] for row in found]))}
    facts: dict[str, SessionFacts] = {}
    hits = []
    for session_id, seq, _entry_id, _folded, score, _ts_ms in found:
        entry = jsonio.loads(records[(session_id, seq)])
        text = entry_text(entry)
        if text is None or not filters.keeps(entry.get("type", ""), text.role, text.ts_ms):
            continue  # the lossy copies let it through; the exact values do not
        shared = facts.get(session_id)
        if shared is None:
            shared = facts[session_id] = _facts(conn, session_id)
        hits.append(make_hit(shared, entry["id"], entry["type"], entry.get("timestamp"), text, text.role, query,
                             float(score)))
    return hits


def search_store(store: PostgresReads, query: str, *, cwd: str | None = None, roles: Iterable[str] | None = None,
                 since: Any = None, until: Any = None, session: str | None = None,
                 limit: int | None = 50) -> list[SearchHit]:
    """:meth:`PostgresStore.search <sessiontree.stores.postgres.PostgresStore.search>`: one
    ``REPEATABLE READ`` snapshot.

    A database without the index (an older schema opened read-only) is searched by
    loading and scanning every session, with the same hits (ranked by
    :func:`~sessiontree.core.search.scan_score`).

    Raises:
        SearchQueryError, ValueError: see :meth:`SessionStore.search`.
        StorageError: the database could not be read.
    """
    parsed = parse_query(query)
    filters = make_filters(cwd=cwd, roles=roles, since=since, until=until, session=session)
    limit = check_limit(limit)
    if session is not None and text_copy(session) != session:
        return []  # no stored id holds NUL or a lone surrogate
    with store.read_snapshot("search") as conn:
        if not store.has_schema(conn):
            return []
        if "m003_search_index" in store.applied_steps:
            return _hits_from_index(conn, parsed, filters, limit, "m008_team" in store.applied_steps)
    return scan_store(store, parsed, filters, limit)

