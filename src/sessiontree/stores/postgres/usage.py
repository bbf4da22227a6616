"""The usage ledger of :class:`~sessiontree.stores.postgres.store.PostgresStore`:
derived data, so ``sessiontree stats`` on a team database reads no transcript.

One row per billed usage record (:mod:`sessiontree.core.usagerecords` decides what
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

The result equals :func:`sessiontree.core.usagerecords.aggregate` over the same
sessions (tests/test_postgres_usage.py checks it on random stores). Token
counts and costs are ``numeric``: JSON allows integers beyond 64 bits, and a
ledger row must never make an append fail. Provider and model are ``text``:
one holding NUL or a lone surrogate is reported with U+FFFD in its place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sessiontree.core.usagerecords import BUCKET_MS, UsageQuery, UsageRow, records_from_entry
from sessiontree.format import jsonio
from sessiontree.stores.postgres.derived import IndexedRow, text_copy
from sessiontree.stores.shared import ledger_row_owner
from sessiontree.stores.verify import row_drift

__all__ = ["LEDGER", "UsageLedger", "fill_ledger", "query_usage"]

_RECORD_TYPES = ("message", "session_summary", "compaction", "branch_summary", "usage")

_INSERT = ("INSERT INTO usage_ledger (session_id, seq, n, dedup_key, source, provider, model, ts_ms,"
           " input, output, cache_read, cache_write, cost_nanos, cache_write_1h)"
           " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)")


class UsageLedger:
    """The :class:`~sessiontree.stores.postgres.derived.DerivedIndex` writing ``usage_ledger`` rows."""

    name = "usage"

    def add(self, conn: Any, session_id: str, rows: Sequence[IndexedRow]) -> None:
        """Insert a ledger row for every billed record of the new entries ``rows``
        (``(seq, entry, stored bytes)``) of ``session_id``, inside the writing transaction."""
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

    def remove(self, conn: Any, session_id: str) -> None:
        """Delete the ledger rows of ``session_id`` (inside the writing transaction)."""
        conn.execute("DELETE FROM usage_ledger WHERE session_id = %s", (session_id,))


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
        LEDGER.add(conn, session_id, rows)



_ATTRS = "provider, model, ts_ms, input, output, cache_read, cache_write, cost_nanos, cache_write_1h"


def query_usage(conn: Any, query: UsageQuery, cwd_of: Callable[[list[str]], dict[str, str | None]],
                cwd_filter: Callable[[str | None], bool] | None = None) -> list[UsageRow]:
    """Answer :meth:`PostgresStore.usage` from the ledger with SQL aggregates (no entry is read).

    Args:
        conn: a connection inside a read transaction.
        query: what to sum (:class:`~sessiontree.core.usagerecords.UsageQuery`).
        cwd_of: ``(session ids) -> {id: exact header cwd}`` for the owners that matter.
        cwd_filter: ``(cwd) -> bool`` for :attr:`UsageQuery.cwd`, applied to the owning
            sessions, or ``None``.

    Returns:
        The rows of :func:`sessiontree.core.usagerecords.aggregate` for the same sessions,
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
        owners = {None: (None, None)}
        if sessions:
            cwds = cwd_of(sorted({row[0] for row in rows}))
            owners.update({sid: (sid, cwd) for sid, cwd in cwds.items()})
    merged: dict[tuple[Any, ...], UsageRow] = {}
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
