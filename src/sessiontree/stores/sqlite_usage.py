"""The usage ledger of :class:`~sessiontree.stores.sqlite.SqliteStore`: derived data
(docs/stores.md, "Derived data"), so ``sessiontree stats`` reads no transcript.

One row per billed usage record (:mod:`sessiontree.usagerecords` decides what
one is), written in the transaction that writes its entry, removed with its
session, rebuilt by ``store.reindex()``. Importing this module registers the
schema step ``m005_usage_ledger`` and appends :data:`LEDGER` to
:data:`~sessiontree.stores.sqlite.DERIVED_INDEXES`; ``stores/__init__.py``
imports it, so every opened store has it.

De-duplication happens at query time, in SQL (:func:`query_usage`): rows are
grouped by their content key, each key counts the largest number of rows it
has in one session, and belongs to the earliest session holding it. Measured
by ``benchmarks/bench_stats.py`` (benchmarks/README.md).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from ..usagerecords import BUCKET_MS, UsageQuery, UsageRow, records_from_entry
from .sqlite import DERIVED_INDEXES, migration

__all__ = ["LEDGER", "UsageLedger", "query_usage"]

_RECORD_TYPES = frozenset(("message", "session_summary", "compaction", "branch_summary", "usage"))


@migration
def m005_usage_ledger(conn: sqlite3.Connection) -> None:
    """The ``usage_ledger`` table, filled from the entries already stored."""
    conn.execute("""
        CREATE TABLE usage_ledger (
            -- sessions.id of the session holding the entry.
            session_id TEXT NOT NULL,
            -- entries.seq of the entry, and the record's index within it.
            seq INTEGER NOT NULL,
            n INTEGER NOT NULL,
            -- usagerecords.dedup_key: 16 bytes identifying the billed call by
            -- content, equal in every copy of the entry (forks, imports).
            dedup_key BLOB NOT NULL,
            -- assistant, toolResult, session_summary, compaction, branch_summary, usage.
            source TEXT NOT NULL,
            provider TEXT,
            model TEXT,
            -- Unix milliseconds (UTC) of the record: filters and day grouping.
            ts_ms INTEGER NOT NULL,
            input INTEGER NOT NULL,
            output INTEGER NOT NULL,
            cache_read INTEGER NOT NULL,
            cache_write INTEGER NOT NULL,
            -- Recorded cost.total in nano-dollars; NULL when unusable (to be
            -- priced from a catalogue when asked).
            cost_nanos INTEGER,
            PRIMARY KEY (session_id, seq, n)
        )""")
    # Grouping by key (then session) is the de-duplication: an index makes it a scan in order.
    conn.execute("CREATE INDEX usage_ledger_key ON usage_ledger (dedup_key, session_id)")
    LEDGER.rebuild_all(conn)


class UsageLedger:
    """The :class:`~sessiontree.stores.sqlite.DerivedIndex` writing ``usage_ledger`` rows."""

    name = "usage"

    def add(self, conn: sqlite3.Connection, key: Any, rows: Sequence[tuple[int, dict[str, Any], bytes]]) -> None:
        """Insert a ledger row for every billed record of the new entries ``rows``
        (``(seq, entry, text)``) of session ``key``; inside the writing transaction."""
        values = []
        for seq, entry, _text in rows:
            if entry.get("type") not in _RECORD_TYPES:
                continue
            for n, r in enumerate(records_from_entry(entry)):
                values.append((key, seq, n, r.key, r.source, r.provider, r.model, r.timestamp_ms,
                               r.input, r.output, r.cache_read, r.cache_write, r.cost_nanos))
        if values:
            conn.executemany(
                "INSERT INTO usage_ledger (session_id, seq, n, dedup_key, source, provider, model, ts_ms,"
                " input, output, cache_read, cache_write, cost_nanos) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", values)

    def remove(self, conn: sqlite3.Connection, key: Any) -> None:
        """Delete the ledger rows of session ``key`` (inside the transaction)."""
        conn.execute("DELETE FROM usage_ledger WHERE session_id = ?", (key,))

    def rebuild_all(self, conn: sqlite3.Connection) -> None:
        """Refill the whole ledger from ``entries`` (the schema step on an existing store)."""
        from .. import jsonio

        conn.execute("DELETE FROM usage_ledger")
        for (key,) in conn.execute("SELECT id FROM sessions").fetchall():
            rows = []
            for seq, text in conn.execute(
                    "SELECT seq, json FROM entries WHERE session_id = ? AND type IN"
                    " ('message', 'session_summary', 'compaction', 'branch_summary', 'usage') ORDER BY seq",
                    (key,)):
                try:
                    entry = jsonio.loads(text)
                except ValueError:
                    continue  # a damaged record: check --store reports it, reindex refuses it
                if isinstance(entry, dict):
                    rows.append((seq, entry, b""))
            self.add(conn, key, rows)


#: The ledger instance registered in DERIVED_INDEXES.
LEDGER = UsageLedger()
if not any(getattr(index, "name", None) == LEDGER.name for index in DERIVED_INDEXES):
    DERIVED_INDEXES.append(LEDGER)


def _text(value: Any) -> Any:
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value


def query_usage(conn: sqlite3.Connection, query: UsageQuery, cwd_filter: Any = None) -> list[UsageRow]:
    """Answer :meth:`SqliteStore.usage` from the ledger alone (no entry is read).

    The same result as :func:`sessiontree.usagerecords.aggregate` over the
    sessions' entries: SQL groups the ledger by content key (per session, then
    across sessions), keeps each key once with its multiplicity, and sums per
    group. Rows that may need a catalogue price stay apart by their token counts.

    Args:
        conn: a connection inside a read transaction.
        query: what to sum.
        cwd_filter: ``(cwd) -> bool`` for :attr:`UsageQuery.cwd` (applied to the
            owning sessions, which are few compared with records), or ``None``.
    """
    where, params = [], []
    if query.since_ms is not None:
        where.append("ts_ms >= ?")
        params.append(query.since_ms)
    if query.until_ms is not None:
        where.append("ts_ms < ?")
        params.append(query.until_ms)
    time_sql = (" AND ".join(where)) or "1"
    # Rows to be priced from a catalogue keep their own token counts.
    per_call = "1" if query.price_all else "(l.cost_nanos IS NULL)"
    split = f"CASE WHEN {per_call} THEN l.input || ',' || l.output || ',' || l.cache_read || ',' || l.cache_write END"
    sums = ("sum(m), sum(m * l.input), sum(m * l.output), sum(m * l.cache_read), sum(m * l.cache_write),"
            " sum(m * coalesce(l.cost_nanos, 0))")
    bucket = f"(l.ts_ms - l.ts_ms % {BUCKET_MS})"
    if query.session_id is not None:
        sql = f"""
            WITH me AS (SELECT id, coalesce(created_at, '') AS c FROM sessions WHERE id = ?),
            mine AS (
                SELECT l.rowid AS rid, 1 AS m, EXISTS (
                    SELECT 1 FROM usage_ledger o JOIN sessions s ON s.id = o.session_id, me
                    WHERE o.dedup_key = l.dedup_key AND o.session_id != me.id
                      AND (coalesce(s.created_at, ''), s.id) < (me.c, me.id)) AS copied
                FROM usage_ledger l WHERE l.session_id = (SELECT id FROM me) AND {time_sql})
            SELECT l.session_id, s.cwd, l.provider, l.model, {bucket}, l.cost_nanos IS NOT NULL, mine.copied,
                   {per_call}, {sums}
            FROM mine JOIN usage_ledger l ON l.rowid = mine.rid JOIN sessions s ON s.id = l.session_id
            GROUP BY l.provider, l.model, {bucket}, l.cost_nanos IS NOT NULL, mine.copied, {split}"""
        rows = conn.execute(sql, (query.session_id, *params)).fetchall()
    else:
        session_cols = "o.sid, s.cwd" if query.per_session or query.cwd is not None else "NULL, NULL"
        group_session = "o.sid, " if query.per_session or query.cwd is not None else ""
        sql = f"""
            WITH per AS (
                SELECT dedup_key, session_id, count(*) AS n, min(rowid) AS rid
                FROM usage_ledger WHERE {time_sql} GROUP BY dedup_key, session_id),
            owned AS (
                SELECT per.rid AS rid, per.session_id AS sid,
                       max(per.n) OVER (PARTITION BY per.dedup_key) AS m,
                       row_number() OVER (PARTITION BY per.dedup_key
                                          ORDER BY coalesce(s.created_at, ''), per.session_id) AS r
                FROM per JOIN sessions s ON s.id = per.session_id)
            SELECT {session_cols}, l.provider, l.model, {bucket}, l.cost_nanos IS NOT NULL, 0, {per_call}, {sums}
            FROM owned o JOIN usage_ledger l ON l.rowid = o.rid
            {"JOIN sessions s ON s.id = o.sid" if group_session else ""}
            WHERE o.r = 1
            GROUP BY {group_session}l.provider, l.model, {bucket}, l.cost_nanos IS NOT NULL, {split}"""
        rows = conn.execute(sql, params).fetchall()
    result = []
    for row in rows:
        session_id, cwd = _text(row[0]), _text(row[1])
        if query.session_id is None and query.cwd is not None and cwd_filter is not None and not cwd_filter(cwd):
            continue
        if query.session_id is None and not query.per_session:
            session_id = cwd = None
        result.append(UsageRow(session_id, cwd, _text(row[2]), _text(row[3]), row[4], bool(row[5]), bool(row[6]),
                               bool(row[7]), *row[8:]))
    return result
