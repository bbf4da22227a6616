"""A member's search with frequent words: their own newest matches, found by walking
their own rows newest first (schema step ``m011_owner_recent``; docs/postgres.md,
"A member's frequent words").

Under row-level security the planner may not test a search condition before the
policy, so a member's search takes its candidates from functions that run with the
tables' owner's rights and restrict themselves to the caller's rows (``session_user``),
returning keys, never text (:mod:`.team`'s ``own_search_rows`` for the trigram index).
For a word in a large share of a member's entries the trigram lookup is the slow part:
the index hands over every row of every owner holding the word's trigrams before the
owner test. So the member's search decides "frequent" first, from a sample of the
member's own newest rows (:data:`SAMPLE`), never from other people's rows (a count
over everyone's text would tell a member how often a word occurs in sessions they
may not read):

* at least :data:`~sessiontree.stores.postgres.search.SCAN_SHARE` of the sample
  matches: frequent. The search walks the member's rows newest first through
  ``search_entries_owner_recent`` (``owner``, time newest first, session id, ``seq``)
  and stops after :data:`~sessiontree.stores.postgres.search.EARLY_STOP` matches; the
  hits are the best ranked of those, as the owner's search with frequent terms
  (docs/search.md, "Frequent terms on PostgreSQL");
* the sample holds every row of the member: its matches are all the matches (exact);
* otherwise the trigram lookup answers, as before.

Every function here takes an open connection inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sessiontree.core.search import SearchFilters
from sessiontree.stores.postgres.derived import text_copy

__all__ = [
    "SAMPLE",
    "WalkFilters",
    "m011_owner_recent",
    "m013_filtered_walk",
    "member_recent_keys",
    "member_sample",
    "own_recent_keys",
    "scored_walk_sql",
    "walk_available",
    "walk_filters",
    "walk_level",
]

#: Newest own rows a member's search reads to decide whether its words are frequent.
#: Measured at 10,000,000 entries (docs/postgres.md): about 10 ms for 2,000 rows.
SAMPLE = 2_000

_OWN_RECENT_ROWS = """
CREATE OR REPLACE FUNCTION own_recent_rows(p_terms text[], p_cap integer, p_visit integer)
RETURNS TABLE (session_id text, seq integer)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
    SELECT w.session_id, w.seq FROM (
        SELECT s.session_id, s.seq, s.folded FROM search_entries AS s
        WHERE s.owner = {owner}
        ORDER BY s.owner, coalesce(s.ts_ms, 0) DESC, s.session_id COLLATE "C", s.seq
        LIMIT p_visit) AS w
    WHERE NOT EXISTS (SELECT 1 FROM unnest(coalesce(p_terms, '{{}}'::text[])) AS t (term)
                      WHERE strpos(w.folded, t.term) = 0)
    LIMIT p_cap
$$"""

#: The caller as a value the ``owner`` indexes answer. ``session_user`` and ``current_user``
#: are of type ``name``, whose collation is ``"C"``; compared with the ``text`` column
#: ``owner`` (the database's default collation) the comparison takes ``"C"``, which no
#: index on ``owner`` has, so every row was read and filtered. Measured at 10,000,000
#: entries: a member's ``usage_rollup`` read 15 ms -> 1 ms, this walk for a role with no
#: rows 6.5 s -> 0.1 ms. Equality is the same in both collations (both deterministic).
SESSION_OWNER = 'session_user::text COLLATE "default"'
CURRENT_OWNER = 'current_user::text COLLATE "default"'

#: Policies ``own_rows`` of steps ``m008_team`` and ``m009_usage_rollup`` rewritten with
#: :data:`CURRENT_OWNER` (same rows, indexed): tables whose rows hang off a session
#: (a write also proves the session is the writer's), and the rest.
_SESSION_ROWS = ("entries", "message_texts", "search_entries", "usage_ledger", "usage_rollup")
_OWN_ROWS = ("sessions", "sync_state", "archived_files")

#: The function's signature, for grants and checks (step ``m011_owner_recent``).
FUNCTION = "own_recent_rows(text[], integer, integer)"

#: The signature step ``m013_filtered_walk`` gives it instead: the search filters too.
FILTERED = "own_recent_rows(text[], integer, integer, double precision, double precision, text[], text[])"

#: The walk that also ranks (step ``m013_filtered_walk``): :data:`_OWN_RECENT_SCORED`.
SCORED = "own_recent_scored(text[], tsquery, integer, double precision, double precision, text[], text[])"

# Step m013_filtered_walk: the walk with the search's filters, each an SQL condition on
# the member's rows before the visit limit (so the sample and the early stop count
# rows that pass them). Dynamic SQL, so each call is planned with its values: a
# session filter is answered through the primary key (a session's rows, sorted), a
# time window through the owner-recent index's time column, the rest as the plain
# walk. The coalesce form of a time bound is the one the index holds; the plain form
# keeps out rows without a time, as the plain search does. Arguments after the first
# three default to NULL (no filter), so the three-argument calls of step m011 still
# answer the same. {rows} is the walked row's columns, {out} what the function returns
# of a match: the keys (own_recent_rows), or the keys, time and rank (own_recent_scored).
_WALK = """
DECLARE
    q text := 'SELECT s.session_id, s.seq, s.ts_ms, s.folded{rows} FROM search_entries AS s WHERE s.owner = $1';
BEGIN
    IF p_since IS NOT NULL THEN
        q := q || ' AND coalesce(s.ts_ms, 0) >= $2 AND s.ts_ms >= $2';
    END IF;
    IF p_until IS NOT NULL THEN
        q := q || ' AND coalesce(s.ts_ms, 0) < $3 AND s.ts_ms < $3';
    END IF;
    IF p_roles IS NOT NULL THEN
        q := q || ' AND (s.role = ANY($4) OR s.type = ANY($4))';
    END IF;
    IF p_sessions IS NOT NULL THEN
        q := q || ' AND s.session_id = ANY($5)';
    END IF;
    RETURN QUERY EXECUTE
        'SELECT {out} FROM (' || q
        || ' ORDER BY s.owner, coalesce(s.ts_ms, 0) DESC, s.session_id COLLATE "C", s.seq LIMIT $6) AS w'
        || ' WHERE NOT EXISTS (SELECT 1 FROM unnest($7) AS t (term) WHERE strpos(w.folded, t.term) = 0)'
        || ' LIMIT $8'
        USING {owner}, p_since, p_until, p_roles, p_sessions, {visit}, coalesce(p_terms, '{{{{}}}}'::text[]), p_cap{more};
END $$"""

_OWN_RECENT_FILTERED = """
CREATE OR REPLACE FUNCTION own_recent_rows(p_terms text[], p_cap integer, p_visit integer,
    p_since double precision DEFAULT NULL, p_until double precision DEFAULT NULL, p_roles text[] DEFAULT NULL,
    p_sessions text[] DEFAULT NULL)
RETURNS TABLE (session_id text, seq integer)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$""" + _WALK.format(
    rows="", out="w.session_id, w.seq", owner="{owner}", visit="p_visit", more="")

# The walk of every row (no visit limit) with each match's time and rank, the score the
# search orders by (search.py's ``ts_rank(s.tsv, q, 1)``, 0 without a rank query), read
# from the row the walk already holds: the ranking then needs no second lookup of
# each match by its key (5,000 of them for a frequent word).
_OWN_RECENT_SCORED = """
CREATE OR REPLACE FUNCTION own_recent_scored(p_terms text[], p_rank tsquery, p_cap integer,
    p_since double precision DEFAULT NULL, p_until double precision DEFAULT NULL, p_roles text[] DEFAULT NULL,
    p_sessions text[] DEFAULT NULL)
RETURNS TABLE (session_id text, seq integer, ts_ms double precision, score real)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$""" + _WALK.format(
    rows=", s.tsv", out="w.session_id, w.seq, w.ts_ms, CASE WHEN $9::tsquery IS NULL THEN 0::real"
    " ELSE ts_rank(w.tsv, $9::tsquery, 1) END", owner="{owner}", visit="NULL::integer", more=", p_rank")


def m013_filtered_walk(conn: Any) -> None:
    """Schema step ``m013_filtered_walk``: ``own_recent_rows`` takes the search filters
    (time window, roles, sessions: :class:`WalkFilters`), so a member's filtered search
    walks their rows as an unfiltered one does instead of asking the trigram index for
    every owner's matches (docs/search.md, "Frequent terms on PostgreSQL"); the
    three-argument form of step ``m011_owner_recent`` is replaced (the new arguments
    default to no filter). ``own_recent_scored`` is the same walk returning each match's
    time and rank, so a frequent word's ranking reads no row twice
    (:func:`scored_walk_sql`). Both run with the tables' owner's rights and keep to the
    caller's rows (``session_user``), returning keys, times and scores, never text. No
    new table, so no new policy; the grants are :func:`~sessiontree.stores.postgres.team.grant_team`'s."""
    from sessiontree.stores.postgres.team import grant_team

    schema = conn.execute("SELECT quote_ident(current_schema())").fetchone()[0]
    conn.execute(f"DROP FUNCTION IF EXISTS {FUNCTION}")
    for sql in (_OWN_RECENT_FILTERED, _OWN_RECENT_SCORED):
        conn.execute(sql.format(schema=schema, owner=f"({SESSION_OWNER})"))
    for signature in (FILTERED, SCORED):
        conn.execute(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC")
    grant_team(conn)


@dataclass(frozen=True)
class WalkFilters:
    """The search filters a walk applies to the member's rows (step ``m013_filtered_walk``).

    Attributes:
        since_ms: keep rows at or after this time (Unix ms), or ``None``.
        until_ms: keep rows before this time (Unix ms), or ``None``.
        roles: keep rows whose role or entry type is one of these, or ``None``.
        sessions: keep rows of these sessions, or ``None`` (every session).
    """

    since_ms: float | None = None
    until_ms: float | None = None
    roles: list[str] | None = None
    sessions: list[str] | None = None


def walk_filters(filters: SearchFilters, allowed: list[str] | None) -> WalkFilters | None:
    """The :class:`WalkFilters` of a search's ``filters`` and the session ids its session
    and cwd filters allow (``allowed``, ``None`` for all); ``None`` when nothing filters.

    The time bounds are compared with ``ts_ms`` as the plain search compares them; roles
    are the column copies it compares (docs/postgres.md, "Search": a role PostgreSQL text
    cannot hold is decided exactly on the hits)."""
    if allowed is None and filters.roles is None and filters.since_ms is None and filters.until_ms is None:
        return None
    roles = None
    if filters.roles is not None:
        roles = [value for value in (text_copy(role) for role in filters.roles) if value is not None]
    return WalkFilters(since_ms=filters.since_ms, until_ms=filters.until_ms, roles=roles, sessions=allowed)


def m011_owner_recent(conn: Any) -> None:
    """Schema step ``m011_owner_recent``: the index a member's frequent-word search walks
    (``search_entries_owner_recent``), ``own_recent_rows`` (the tables' owner's rights,
    the caller's rows only, keys only; executable by members, docs/team.md), and the
    ``own_rows`` policies compared so that the ``owner`` indexes answer them
    (:data:`SESSION_OWNER`; the same rows as before), and ``team_usage_by_user``
    summing before it joins (:func:`usage_by_user_view`). No new table, so no new policy."""
    from sessiontree.stores.postgres.team import grant_team

    schema = conn.execute("SELECT quote_ident(current_schema())").fetchone()[0]
    conn.execute("CREATE INDEX IF NOT EXISTS search_entries_owner_recent ON search_entries"
                 " (owner, (coalesce(ts_ms, 0)) DESC, session_id COLLATE \"C\", seq)")
    conn.execute(_OWN_RECENT_ROWS.format(schema=schema, owner=f"({SESSION_OWNER})"))
    conn.execute(usage_by_user_view())
    mine = f"owner = ({CURRENT_OWNER})"
    for table in _OWN_ROWS:
        conn.execute(f"ALTER POLICY own_rows ON {table} USING ({mine}) WITH CHECK ({mine})")
    for table in _SESSION_ROWS:
        conn.execute(f"ALTER POLICY own_rows ON {table} USING ({mine}) WITH CHECK ({mine}"
                     f" AND EXISTS (SELECT 1 FROM sessions AS s WHERE s.id = {table}.session_id))")
    conn.execute(f"REVOKE ALL ON FUNCTION {FUNCTION} FROM PUBLIC")
    grant_team(conn)


#: Milliseconds in a UTC day; a rollup bucket (15 minutes) never crosses one.
_DAY_MS = 86_400_000


def usage_by_user_view() -> str:
    """``team_usage_by_user`` as step ``m009_usage_rollup`` made it, with the rollup rows
    summed per session, UTC day, provider and model *before* the join with ``sessions``
    and ``provenance`` and the per-row day and project text: the same rows (a session has
    one owner, agent and project), about a third of the joined and formatted rows.
    Measured at 10,000,000 entries: 96,393 rollup rows, 630-694 ms -> 345 ms."""
    from sessiontree.stores.postgres.team import _USAGE_BY_USER_ROLLUP

    day = f"r.bucket - ((r.bucket % {_DAY_MS}) + {_DAY_MS}) % {_DAY_MS}"  # floor, also before 1970
    replacements = [
        ("to_char(to_timestamp(r.bucket / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day",
         "to_char(to_timestamp(r.day_ms / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day"),
        ("FROM usage_rollup AS r JOIN sessions AS s ON s.id = r.session_id",
         f"FROM (SELECT r.session_id, {day} AS day_ms, r.provider, r.model, sum(r.calls) AS calls,"
         " sum(r.input) AS input, sum(r.output) AS output, sum(r.cache_read) AS cache_read,"
         " sum(r.cache_write) AS cache_write, sum(r.cost_nanos) AS cost_nanos"
         " FROM usage_rollup AS r WHERE r.calls <> 0 GROUP BY 1, 2, 3, 4) AS r"
         " JOIN sessions AS s ON s.id = r.session_id"),
        ("LEFT JOIN provenance AS p ON p.session_id = r.session_id\n    WHERE r.calls <> 0",
         "LEFT JOIN provenance AS p ON p.session_id = r.session_id"),
    ]
    view = _USAGE_BY_USER_ROLLUP
    for old, new in replacements:
        if view.count(old) != 1:
            raise AssertionError(f"team_usage_by_user changed: {old!r} not found once")
        view = view.replace(old, new)
    return view


def walk_level(conn: Any) -> int:
    """Which walk the database has: 0 none (before step ``m011_owner_recent``), 1 the
    unfiltered ``own_recent_rows`` of m011, 2 the filtered and scored walks of step
    ``m013_filtered_walk``. One round trip."""
    m011, m013 = conn.execute(f"SELECT to_regprocedure('{FUNCTION}') IS NOT NULL,"
                              f" to_regprocedure('{SCORED}') IS NOT NULL").fetchone()
    return 2 if m013 else 1 if m011 else 0


def walk_available(conn: Any) -> bool:
    """Whether the database has a walk of a member's newest rows (:func:`walk_level`)."""
    return walk_level(conn) > 0


def own_recent_keys(conn: Any, terms: Sequence[str], cap: int, visit: int | None,
                    where: WalkFilters | None = None) -> list[tuple[str, int]]:
    """The ``(session_id, seq)`` of the caller's own search rows holding every one of
    ``terms`` (folded, exact substrings), newest first, from the newest ``visit`` rows
    (``None``: all) that pass ``where`` (``None``: every row; a filter needs step
    ``m013_filtered_walk``), at most ``cap``."""
    if where is None:
        rows = conn.execute("SELECT session_id, seq FROM own_recent_rows(%s::text[], %s, %s)",
                            (list(terms), cap, visit)).fetchall()
    else:
        rows = conn.execute(
            "SELECT session_id, seq FROM own_recent_rows(%s::text[], %s, %s, %s::float8, %s::float8, %s::text[],"
            " %s::text[])", (list(terms), cap, visit, where.since_ms, where.until_ms, where.roles,
                             where.sessions)).fetchall()
    return [(row[0], row[1]) for row in rows]


def member_sample(conn: Any, terms: Sequence[str], cap: int, share: float,
                  where: WalkFilters | None = None) -> tuple[bool, list[tuple[str, int]] | None]:
    """Decide from the member's :data:`SAMPLE` newest rows (that pass ``where``) how
    their search is answered (see the module): ``(True, None)`` the words are frequent,
    walk every row newest first to ``cap`` matches; ``(False, keys)`` the sample was
    every row, ``keys`` are all the matches; ``(False, None)`` not frequent, ask the
    trigram index.

    Args:
        terms: the query's folded terms.
        cap: most matches to keep (the early stop).
        share: the share of the sample that makes the words frequent.
        where: the search's filters (:func:`walk_filters`); the sample and the walk
            count only the rows passing them, so "frequent" and "every row" are decided
            among the rows the search may return.
    """
    found = own_recent_keys(conn, terms, cap, SAMPLE, where)
    if len(found) >= share * SAMPLE:
        # Frequent. (When the sample was every row, the walk finds the same matches, so
        # the count of rows below is not needed: one walk of SAMPLE rows fewer.)
        return True, None
    if len(found) < SAMPLE and _own_rows_at_most(conn, SAMPLE, where):
        return False, found  # the sample read every row the member has: all the matches
    return False, None


def member_recent_keys(conn: Any, terms: Sequence[str], cap: int, share: float,
                       where: WalkFilters | None = None) -> list[tuple[str, int]] | None:
    """A member's candidates when the walk answers (:func:`member_sample`; frequent:
    the keys of the walk of every row, to ``cap`` matches), else ``None`` (ask the
    trigram index)."""
    frequent, found = member_sample(conn, terms, cap, share, where)
    return own_recent_keys(conn, terms, cap, None, where) if frequent else found


def scored_walk_sql(where: WalkFilters | None) -> tuple[str, list[Any]]:
    """The ``FROM`` item (``own_recent_scored(...)``, rows ``session_id, seq, ts_ms,
    score``) of a frequent word's matches with their rank, and its parameters after the
    terms, the rank query and the cap (step ``m013_filtered_walk``)."""
    if where is None:
        return "own_recent_scored(%s::text[], %s::tsquery, %s)", []
    return ("own_recent_scored(%s::text[], %s::tsquery, %s, %s::float8, %s::float8, %s::text[], %s::text[])",
            [where.since_ms, where.until_ms, where.roles, where.sessions])


def _own_rows_at_most(conn: Any, n: int, where: WalkFilters | None = None) -> bool:
    """Whether the caller has at most ``n`` search rows passing ``where`` (an
    empty-terms walk)."""
    return len(own_recent_keys(conn, [], n + 1, n + 1, where)) <= n
