"""The usage ledger of :class:`~sessiontree.stores.postgres.store.PostgresStore`:
derived data, so ``sessiontree stats`` on a team database reads no transcript.

One row per billed usage record (:mod:`sessiontree.core.usage` decides what
one is and computes its content key), written in the transaction that writes
its entry (a :class:`~sessiontree.stores.postgres.derived.DerivedIndex`), removed with
its session, rebuilt by ``store.reindex()``. Its table comes from the schema step
``m004_usage_ledger`` (:mod:`.schema`).

De-duplication happens at query time, in SQL aggregates (:func:`query_usage`),
not at write time as SQLite's ``usage_calls`` table does: many hosts append to
one PostgreSQL database at once, and a table of de-duplicated calls kept up to
date by every write would make writers of different sessions that share a
copied call (a fork and its parent) contend for the same rows. The query:

1. ``GROUP BY dedup_key, session_id`` counts each key's rows per session
   (rows sharing a key share their content, so their attributes group along);
2. per key, the largest of those counts (``max() OVER (PARTITION BY key)``)
   and, when sessions matter, its owner: the earliest session holding it
   (``DISTINCT ON`` ordered by ``createdAt``, then id, ``COLLATE "C"``, which is
   Python's code-point order);
3. ``sum()`` per group, rows that may need a catalogue price kept apart by
   their four token counts.

The result equals :func:`sessiontree.core.usage.aggregate` over the same
sessions (tests/stores/test_postgres_usage.py checks it on random stores). **Rollups** (schema step ``m009_usage_rollup``, docs/postgres.md "Usage rollups"):
a store-wide report sums ``usage_rollup``, per (session, provider, model, 15-minute
UTC bucket, priced shape), as SQLite's does, instead of every ledger row. A ledger
row is *settled* by :func:`settle` in the transaction that writes it, into one of
two states (``usage_ledger.shared``):

* ``false``: its key is held by one session only; the row is summed into that
  session's rollup row (de-duplication needs nothing more: every row of the key is
  in that session, so the key's multiplicity is its row count);
* ``true``: its key is, or was, held by more than one session; the row stays out of
  the rollup and the query de-duplicates these rows as above (few: forks, imports).

Every row of one key is in the same state, so the two parts never count a call
twice. When a key gains a second session its rolled rows are taken out of the rollup
and marked shared; a key whose other sessions are deleted stays shared (still exact,
only read per row) until ``reindex`` rebuilds the rollup (:func:`rebuild_rollup`).
Writers of different sessions settling one key take turns on a transaction-level
advisory lock per key (taken in key order, so they cannot deadlock); the settle
runs with the owner's rights (``usage_settle``, a ``SECURITY DEFINER`` function)
because a member cannot see whether another member holds the key. Under
row-level security a member's rollup rows are their own (``owner``, as the ledger's).

Token
counts and costs are ``numeric``: JSON allows integers beyond 64 bits, and a
ledger row must never make an append fail. Provider and model are ``text``:
one holding NUL or a lone surrogate is reported with U+FFFD in its place.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

from sessiontree.core.usage import BILLED_TYPES, BUCKET_MS, UsageQuery, UsageRow, records_from_entry
from sessiontree.format import jsonio
from sessiontree.stores.postgres.derived import IndexedRow, text_copy
from sessiontree.stores.postgres.team import OWNED_TABLES, move_owner_sql
from sessiontree.stores.syncing import ledger_row_owner
from sessiontree.stores.verify import row_drift

__all__ = ["LEDGER", "ROLLUP_STEP", "UsageLedger", "create_rollup", "fill_ledger", "query_usage", "rebuild_rollup"]

#: The schema step creating ``usage_rollup`` and ``usage_settle``; before it (an older
#: schema opened read-only, or the steps that fill the ledger) nothing is settled.
ROLLUP_STEP = "m009_usage_rollup"

_RECORD_TYPES = tuple(sorted(BILLED_TYPES))  # a fixed order for the SQL parameters

_INSERT = ("INSERT INTO usage_ledger (session_id, seq, n, dedup_key, source, provider, model, ts_ms,"
           " input, output, cache_read, cache_write, cost_nanos, cache_write_1h)"
           " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)")


class UsageLedger:
    """The :class:`~sessiontree.stores.postgres.derived.DerivedIndex` writing ``usage_ledger`` rows."""

    name = "usage"

    def add(self, conn: Any, session_id: str, rows: Sequence[IndexedRow]) -> None:
        """Insert a ledger row for every billed record of the new entries ``rows``
        (``(seq, entry, stored bytes)``) of ``session_id`` and settle them (:func:`settle`),
        inside the writing transaction."""
        if self.insert(conn, session_id, rows):
            settle(conn, session_id)

    def insert(self, conn: Any, session_id: str, rows: Sequence[IndexedRow]) -> bool:
        """:meth:`add` without the settle (the schema steps filling the ledger, before
        ``m009_usage_rollup`` settles every row); whether any row was written."""
        values = []
        for seq, entry, _ in rows:
            if entry.get("type") not in _RECORD_TYPES:
                continue
            for n, r in enumerate(records_from_entry(entry)):
                values.append((session_id, seq, n, r.key, r.source, text_copy(r.provider), text_copy(r.model),
                               r.timestamp_ms, r.input, r.output, r.cache_read, r.cache_write, r.cost_nanos,
                               r.cache_write_1h))
        if values:
            with conn.cursor() as cur:
                cur.executemany(_INSERT, values)
        return bool(values)

    def remove(self, conn: Any, session_id: str) -> None:
        """Delete the ledger rows and rollup rows of ``session_id`` (inside the writing
        transaction). Its shared keys stay shared in other sessions (exact; see the module)."""
        conn.execute("DELETE FROM usage_ledger WHERE session_id = %s", (session_id,))
        if _has_rollup(conn):
            conn.execute("DELETE FROM usage_rollup WHERE session_id = %s", (session_id,))


    def checker(self, conn: Any, session_id: str) -> _SessionCheck:
        """The :class:`~sessiontree.stores.verify.DerivedCheck` of ``session_id``'s
        ``usage_ledger`` rows (``check --store``): the rows :meth:`add` writes."""
        return _SessionCheck(conn, session_id)


class _SessionCheck:
    """:meth:`UsageLedger.checker`: the rebuilt rows are computed as the entries come."""

    def __init__(self, conn: Any, session_id: str) -> None:
        self.conn, self.session_id = conn, session_id
        self.rows: list[tuple[Any, ...]] = []

    def add(self, seq: int, entry: dict[str, Any]) -> None:
        if entry.get("type") in _RECORD_TYPES:
            for n, r in enumerate(records_from_entry(entry)):
                self.rows.append((seq, n, r.key, r.source, text_copy(r.provider), text_copy(r.model),
                                  r.timestamp_ms, r.input, r.output, r.cache_read, r.cache_write, r.cost_nanos,
                                  r.cache_write_1h))

    def drift(self) -> list[str]:
        stored = [tuple(row) for row in self.conn.execute(
            "SELECT seq, n, dedup_key, source, provider, model, ts_ms, input, output, cache_read, cache_write,"
            " cost_nanos, cache_write_1h FROM usage_ledger WHERE session_id = %s ORDER BY seq, n",
            (self.session_id,))]
        return row_drift("usage_ledger", stored, self.rows)


#: The usage ledger (listed in :data:`~sessiontree.stores.postgres.schema.DERIVED_INDEXES`).
LEDGER = UsageLedger()


def fill_ledger(conn: Any) -> None:
    """Write the ledger rows of every entry already stored (the schema step creating the ledger)."""
    # The column of step m007_cache_write_1h, which this code writes: m004 runs it first.
    conn.execute("ALTER TABLE usage_ledger ADD COLUMN IF NOT EXISTS cache_write_1h numeric NOT NULL DEFAULT 0")
    placeholders = ", ".join(["%s"] * len(_RECORD_TYPES))
    for (session_id,) in conn.execute("SELECT id FROM sessions ORDER BY rowno").fetchall():
        rows = []
        with conn.cursor(binary=True) as cur:
            for seq, text in cur.execute(f"SELECT seq, json FROM entries WHERE session_id = %s"
                                         f" AND type IN ({placeholders}) ORDER BY seq",
                                         (session_id, *_RECORD_TYPES)):
                try:
                    entry = jsonio.loads(bytes(text))
                except ValueError:
                    continue  # a damaged record: verify() reports it, reindex() refuses it
                if isinstance(entry, dict):
                    rows.append((seq, entry, b""))
        LEDGER.insert(conn, session_id, rows)


# -- rollups (step m009_usage_rollup) -------------------------------------------------

#: Class id of the advisory locks a settle takes per key (the object id is the key's
#: first 4 bytes): an arbitrary constant, apart from the schema lock's single key.
SETTLE_LOCK_CLASS = 0x5E55

# A ledger row's rollup key: provider and model '' for NULL (core.usage never records
# an empty name), the floored 15-minute bucket, and the priced shape: '' when the
# recorded cost is usable, else the token counts, so calls to be priced from the
# catalogue keep theirs (tiered prices are not linear in tokens).
_BUCKET = f"(ts_ms - mod(mod(ts_ms, {BUCKET_MS}) + {BUCKET_MS}, {BUCKET_MS}))"
_SHAPE = ("(CASE WHEN cost_nanos IS NULL THEN input || ',' || output || ',' || cache_read || ',' || cache_write"
          " || ',' || cache_write_1h ELSE '' END)")
_ROLLUP_KEY = f"session_id, coalesce(provider, ''), coalesce(model, ''), {_BUCKET}, {_SHAPE}"


def _rollup_move(sign: str, source: str) -> str:
    """SQL adding (``sign=""``) or taking out (``sign="-"``) the ledger-shaped rows of
    ``source`` (a ``FROM ... WHERE ...``) to or from their rollup rows."""
    return f"""
    INSERT INTO usage_rollup (session_id, provider, model, bucket, shape, calls, input, output, cache_read,
                              cache_write, cost_nanos, cache_write_1h)
    SELECT {_ROLLUP_KEY}, {sign}count(*), {sign}sum(input), {sign}sum(output), {sign}sum(cache_read),
           {sign}sum(cache_write), {sign}sum(coalesce(cost_nanos, 0)), {sign}sum(cache_write_1h)
    {source}
    GROUP BY 1, 2, 3, 4, 5
    ON CONFLICT (session_id, provider, model, bucket, shape) DO UPDATE SET
        calls = usage_rollup.calls + excluded.calls, input = usage_rollup.input + excluded.input,
        output = usage_rollup.output + excluded.output,
        cache_read = usage_rollup.cache_read + excluded.cache_read,
        cache_write = usage_rollup.cache_write + excluded.cache_write,
        cost_nanos = usage_rollup.cost_nanos + excluded.cost_nanos,
        cache_write_1h = usage_rollup.cache_write_1h + excluded.cache_write_1h"""


# The pending keys of p_session that another session holds, or that are shared already.
_TO_SHARE = """
    SELECT DISTINCT p.dedup_key FROM usage_ledger AS p
    WHERE p.session_id = p_session AND p.shared IS NULL AND EXISTS (
        SELECT 1 FROM usage_ledger AS o WHERE o.dedup_key = p.dedup_key
          AND (o.session_id <> p_session OR o.shared))"""

_SETTLE = f"""
CREATE OR REPLACE FUNCTION usage_settle(p_session text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {{schema}}, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM sessions WHERE id = p_session AND owner = session_user)
       AND NOT pg_has_role(session_user, current_user, 'MEMBER') THEN
        RAISE EXCEPTION 'usage_settle: session % is not yours', p_session USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM pg_advisory_xact_lock({SETTLE_LOCK_CLASS}, k.k) FROM (
        SELECT DISTINCT ('x' || encode(substr(dedup_key, 1, 4), 'hex'))::bit(32)::integer AS k
        FROM usage_ledger WHERE session_id = p_session AND shared IS NULL ORDER BY 1) AS k;
    -- Keys gaining a second session: their rolled rows leave the rollup, all become shared.
    WITH to_share AS MATERIALIZED ({_TO_SHARE}),
    taken AS ({_rollup_move("-", "FROM usage_ledger WHERE shared = false"
                                 " AND dedup_key IN (SELECT dedup_key FROM to_share)")}
        RETURNING 1)
    UPDATE usage_ledger SET shared = true
    WHERE dedup_key IN (SELECT dedup_key FROM to_share) AND shared IS NOT TRUE;
    -- The rest are held by this session alone: into its rollup rows.
    WITH rolled AS (UPDATE usage_ledger SET shared = false WHERE session_id = p_session AND shared IS NULL
                    RETURNING session_id, provider, model, ts_ms, input, output, cache_read, cache_write,
                              cost_nanos, cache_write_1h)
    {_rollup_move("", "FROM rolled")};
END $$"""


# The rollup rows carry their session's owner too (step m008's function, restated with them).
_MOVE_OWNER = move_owner_sql((*OWNED_TABLES, "usage_rollup"))


#: Connections known to see ``usage_rollup`` (a table is never taken away by a schema
#: step), so an append asks once per connection, not once per write (a read in a
#: pipelined write costs a round trip).
_ROLLUP_SEEN: weakref.WeakSet[Any] = weakref.WeakSet()


def _has_rollup(conn: Any) -> bool:
    if conn in _ROLLUP_SEEN:
        return True
    seen = bool(conn.execute("SELECT to_regclass('usage_rollup') IS NOT NULL").fetchone()[0])
    if seen:
        _ROLLUP_SEEN.add(conn)
    return seen


def settle(conn: Any, session_id: str) -> None:
    """Settle the new ledger rows of ``session_id`` into the rollup or the shared rows
    (``usage_settle``; see the module), inside the writing transaction. Nothing before
    the rollup's schema step (its step settles every row at once)."""
    if _has_rollup(conn):
        conn.execute("SELECT usage_settle(%s)", (session_id,))


def rebuild_rollup(conn: Any) -> None:
    """Recompute every ledger row's state and ``usage_rollup`` from the ledger (the
    schema step and a whole-store ``reindex``): a key is shared when more than one
    session holds it."""
    conn.execute("""
        UPDATE usage_ledger SET shared = dedup_key IN (
            SELECT dedup_key FROM usage_ledger GROUP BY dedup_key HAVING count(DISTINCT session_id) > 1)""")
    conn.execute("DELETE FROM usage_rollup")
    conn.execute(_rollup_move("", "FROM usage_ledger WHERE shared = false"))


def create_rollup(conn: Any) -> None:
    """Schema step ``m009_usage_rollup``: ``usage_ledger.shared``, the ``usage_rollup``
    table (under row-level security like the ledger, docs/team.md) and ``usage_settle``,
    filled from the ledger."""
    schema = conn.execute("SELECT quote_ident(current_schema())").fetchone()[0]
    conn.execute("ALTER TABLE usage_ledger ADD COLUMN IF NOT EXISTS shared boolean")
    # The rows the query de-duplicates (few); a member's are found by owner.
    conn.execute("CREATE INDEX IF NOT EXISTS usage_ledger_shared ON usage_ledger (owner) WHERE shared")
    conn.execute("DROP TABLE IF EXISTS usage_rollup")
    conn.execute("""
        CREATE TABLE usage_rollup (
            -- The session holding the calls (their keys are held by no other session).
            session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            -- '' for a provider or model not recorded.
            provider text NOT NULL,
            model text NOT NULL,
            -- Start of the 15-minute UTC bucket, Unix ms (floored).
            bucket bigint NOT NULL,
            -- '' when the calls' recorded costs are usable, else their token counts
            -- 'input,output,cacheRead,cacheWrite,cacheWrite1h'.
            shape text NOT NULL,
            -- Sums over the calls: count, tokens, recorded cost in nano-dollars (0 where unusable).
            calls numeric NOT NULL,
            input numeric NOT NULL,
            output numeric NOT NULL,
            cache_read numeric NOT NULL,
            cache_write numeric NOT NULL,
            cost_nanos numeric NOT NULL,
            cache_write_1h numeric NOT NULL,
            -- The session's owner (row-level security, docs/team.md).
            owner text NOT NULL DEFAULT current_user,
            PRIMARY KEY (session_id, provider, model, bucket, shape)
        )""")
    conn.execute("CREATE INDEX usage_rollup_owner ON usage_rollup (owner)")
    conn.execute("CREATE TRIGGER usage_rollup_owner BEFORE INSERT ON usage_rollup"
                 " FOR EACH ROW EXECUTE FUNCTION session_row_owner()")
    conn.execute("ALTER TABLE usage_rollup ENABLE ROW LEVEL SECURITY")
    conn.execute("CREATE POLICY own_rows ON usage_rollup USING (owner = current_user)"
                 " WITH CHECK (owner = current_user"
                 " AND EXISTS (SELECT 1 FROM sessions AS s WHERE s.id = usage_rollup.session_id))")
    conn.execute(_SETTLE.format(schema=schema))
    conn.execute("REVOKE ALL ON FUNCTION usage_settle(text) FROM PUBLIC")
    # A session handed to someone else takes its rollup rows along (m008's function, plus them).
    conn.execute(_MOVE_OWNER)
    rebuild_rollup(conn)



_ATTRS = "provider, model, ts_ms, input, output, cache_read, cache_write, cost_nanos, cache_write_1h"


def query_usage(conn: Any, query: UsageQuery, cwd_of: Callable[[list[str]], dict[str, str | None]],
                cwd_filter: Callable[[str | None], bool] | None = None, *, rollup: bool = False) -> list[UsageRow]:
    """Answer :meth:`PostgresStore.usage` from the ledger with SQL aggregates (no entry is read).

    With ``rollup`` (the database has step ``m009_usage_rollup``), a store-wide query
    sums ``usage_rollup`` and de-duplicates only the shared ledger rows (see the module),
    as SQLite does, except where the rollup cannot answer, which read every ledger row
    (same result): ``price_all`` (every call priced on its own tokens), and a
    ``since_ms`` / ``until_ms`` off a 15-minute boundary (a bucket cannot be split).

    Args:
        conn: a connection inside a read transaction.
        query: what to sum (:class:`~sessiontree.core.usage.UsageQuery`).
        cwd_of: ``(session ids) -> {id: exact header cwd}`` for the owners that matter.
        cwd_filter: ``(cwd) -> bool`` for :attr:`UsageQuery.cwd`, applied to the owning
            sessions, or ``None``.
        rollup: whether ``usage_rollup`` and the ledger's ``shared`` states exist.

    Returns:
        The rows of :func:`sessiontree.core.usage.aggregate` for the same sessions,
        in no particular order.
    """
    where, params = [], []
    if query.since_ms is not None:
        where.append("ts_ms >= %s")
        params.append(query.since_ms)
    if query.until_ms is not None:
        where.append("ts_ms < %s")
        params.append(query.until_ms)
    time_sql = " AND ".join(where) or "true"
    # Written from "cost_nanos IS NOT NULL", a grouped expression, so the SELECT list may use it.
    per_call = "true" if query.price_all else "(NOT (cost_nanos IS NOT NULL))"
    # Python's floor modulo, also before 1970.
    bucket = f"(ts_ms - mod(mod(ts_ms, {BUCKET_MS}) + {BUCKET_MS}, {BUCKET_MS}))"
    if not query.by_time:
        bucket = f"(CASE WHEN {per_call} THEN {bucket} ELSE 0 END)"
    # Rows to be priced from a catalogue keep their own token counts.
    split = ", ".join(f"(CASE WHEN {per_call} THEN {name} END)" for name in
                      ("input", "output", "cache_read", "cache_write", "cache_write_1h"))
    sums = ("sum(m), sum(m * input), sum(m * output), sum(m * cache_read), sum(m * cache_write),"
            " sum(m * coalesce(cost_nanos, 0)), sum(m * cache_write_1h)")
    group = f"provider, model, {bucket}, cost_nanos IS NOT NULL, {split}"
    if query.session_id is not None:
        # "Held by an earlier session?" once per distinct key (``held``), not per row: a
        # session of N equal calls (one key) costs one look at the key's rows, where a
        # per-row EXISTS read all N of them for each of the N (issue 38).
        sql = f"""
            WITH me AS (SELECT id, coalesce(created_at, '') AS c FROM sessions WHERE id = %s),
            mine AS MATERIALIZED (
                SELECT dedup_key, {_ATTRS} FROM usage_ledger
                WHERE session_id = (SELECT id FROM me) AND {time_sql}),
            held AS MATERIALIZED (
                SELECT k.k FROM (SELECT DISTINCT dedup_key AS k FROM mine) AS k WHERE EXISTS (
                    SELECT 1 FROM usage_ledger AS o JOIN sessions AS s ON s.id = o.session_id, me
                    WHERE o.dedup_key = k.k AND o.session_id <> me.id
                      AND (coalesce(s.created_at, '') COLLATE "C", s.id COLLATE "C") < (me.c, me.id)))
            SELECT NULL, provider, model, {bucket}, cost_nanos IS NOT NULL, copied, {per_call}, {sums}
            FROM (SELECT 1 AS m, {_ATTRS}, dedup_key IN (SELECT k FROM held) AS copied FROM mine) AS mine
            GROUP BY copied, {group}"""
        rows = conn.execute(sql, (query.session_id, *params)).fetchall()
        owners: dict[Any, tuple[str | None, str | None]] = {
            None: (query.session_id, cwd_of([query.session_id]).get(query.session_id))}
    else:
        sessions = query.per_session or query.cwd is not None
        rolled = rollup and not query.price_all and all(
            bound is None or bound % BUCKET_MS == 0 for bound in (query.since_ms, query.until_ms))
        if rolled:
            # Only the shared rows are de-duplicated here; the rollup holds the rest.
            time_sql = f"shared AND {time_sql}"
        if sessions:
            # Per key: the most rows in one session, and the owner (earliest createdAt, then id).
            calls = f"""
                SELECT DISTINCT ON (per.dedup_key) per.session_id AS owner,
                       max(per.n) OVER (PARTITION BY per.dedup_key) AS m, {_ATTRS}
                FROM (SELECT dedup_key, session_id, count(*) AS n, {_ATTRS} FROM usage_ledger
                      WHERE {time_sql} GROUP BY dedup_key, session_id, {_ATTRS}) AS per
                JOIN sessions AS s ON s.id = per.session_id
                ORDER BY per.dedup_key, coalesce(s.created_at, '') COLLATE "C", per.session_id COLLATE "C" """
        else:
            calls = f"""
                SELECT NULL::text AS owner, max(n) AS m, {_ATTRS}
                FROM (SELECT dedup_key, session_id, count(*) AS n, {_ATTRS} FROM usage_ledger
                      WHERE {time_sql} GROUP BY dedup_key, session_id, {_ATTRS}) AS per
                GROUP BY dedup_key, {_ATTRS}"""
        sql = f"""
            SELECT owner, provider, model, {bucket}, cost_nanos IS NOT NULL, false, {per_call}, {sums}
            FROM ({calls}) AS calls GROUP BY owner, {group}"""
        rows = conn.execute(sql, params).fetchall()
        if rolled:
            rows += _rollup_rows(conn, query, sessions)
        owners = {None: (None, None)}
        if sessions:
            cwds = cwd_of(sorted({row[0] for row in rows}))
            owners.update({sid: (sid, cwd) for sid, cwd in cwds.items()})
    merged: dict[tuple[Any, ...], UsageRow] = {}
    # Rows of either part with equal attributes add up (calls and sums are linear).
    for row in rows:
        reported = ledger_row_owner(query, owners[row[0]], cwd_filter)
        if reported is None:
            continue
        session_id, cwd = reported
        call_count, tokens, cost = int(row[7]), [int(value) for value in row[8:12]], int(row[12])
        hour = int(row[13])
        priced_per_call = bool(row[6])
        key = (session_id, cwd, row[1], row[2], int(row[3]), bool(row[4]), bool(row[5]), priced_per_call,
               tuple(value // call_count for value in (*tokens, hour)) if priced_per_call else None)
        out = merged.get(key)
        if out is None:
            merged[key] = UsageRow(session_id, cwd, row[1], row[2], int(row[3]), bool(row[4]), bool(row[5]),
                                   priced_per_call, call_count, tokens[0], tokens[1], tokens[2], tokens[3],
                                   cost, hour)
        else:
            out.calls += call_count
            out.input, out.output = out.input + tokens[0], out.output + tokens[1]
            out.cache_read, out.cache_write = out.cache_read + tokens[2], out.cache_write + tokens[3]
            out.cost_nanos += cost
            out.cache_write_1h += hour
    return list(merged.values())


def _rollup_rows(conn: Any, query: UsageQuery, sessions: bool) -> list[tuple[Any, ...]]:
    """The rollup part of a store-wide :func:`query_usage`, in the shape of its ledger
    rows ``(owner, provider, model, bucket, has cost, copied, priced per call, calls,
    input, output, cache_read, cache_write, cost_nanos, cache_write_1h)``. The bounds
    are on 15-minute boundaries, so comparing buckets selects the same calls."""
    where, params = ["calls <> 0"], []
    if query.since_ms is not None:
        where.append("bucket >= %s")
        params.append(query.since_ms)
    if query.until_ms is not None:
        where.append("bucket < %s")
        params.append(query.until_ms)
    owner = "session_id" if sessions else "NULL::text"
    # Calls with a usable recorded cost sum across buckets unless time matters;
    # calls to be priced keep their bucket (prices change over time).
    bucket = "bucket" if query.by_time else "(CASE WHEN shape = '' THEN 0 ELSE bucket END)"
    rows: list[tuple[Any, ...]] = conn.execute(f"""
        SELECT {owner}, nullif(provider, ''), nullif(model, ''), {bucket}, shape = '', false, shape <> '',
               sum(calls), sum(input), sum(output), sum(cache_read), sum(cache_write), sum(cost_nanos),
               sum(cache_write_1h)
        FROM usage_rollup WHERE {" AND ".join(where)}
        GROUP BY {owner}, provider, model, {bucket}, shape""", params).fetchall()
    return rows
