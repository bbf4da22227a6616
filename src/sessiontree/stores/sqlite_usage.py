"""The usage ledger of :class:`~sessiontree.stores.sqlite.SqliteStore`: derived data
(docs/stores.md, "Derived data"), so ``sessiontree stats`` reads no transcript.

One row per billed usage record (:mod:`sessiontree.usagerecords` decides what
one is), written in the transaction that writes its entry, removed with its
session, rebuilt by ``store.reindex()``. Importing this module registers the
schema step ``m006_usage_ledger`` and appends :data:`LEDGER` to
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
from .sqlite import DERIVED_INDEXES, _db, migration

__all__ = ["LEDGER", "UsageLedger", "query_usage"]

_RECORD_TYPES = frozenset(("message", "session_summary", "compaction", "branch_summary", "usage"))


@migration
def m006_usage_ledger(conn: sqlite3.Connection) -> None:
    """The ``usage_ledger`` and ``usage_calls`` tables, filled from the entries already stored.

    Both are derived data: tables left by an interrupted or hand-edited history
    are dropped and rebuilt rather than trusted."""
    conn.execute("DROP TABLE IF EXISTS usage_ledger")
    conn.execute("DROP TABLE IF EXISTS usage_calls")
    # WITHOUT ROWID, clustered on the content key: the de-duplicating GROUP BY of
    # query_usage is then one streaming pass over the table, with no sort and no
    # lookups (measured: benchmarks/bench_stats.py).
    conn.execute("""
        CREATE TABLE usage_ledger (
            -- usagerecords.dedup_key: 16 bytes identifying the billed call by
            -- content, equal in every copy of the entry (forks, imports).
            dedup_key BLOB NOT NULL,
            -- sessions.id of the session holding the entry.
            session_id TEXT NOT NULL,
            -- entries.seq of the entry, and the record's index within it.
            seq INTEGER NOT NULL,
            n INTEGER NOT NULL,
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
            PRIMARY KEY (dedup_key, session_id, seq, n)
        ) WITHOUT ROWID""")
    # Deleting or reindexing one session, and show's one-session query.
    conn.execute("CREATE INDEX usage_ledger_session ON usage_ledger (session_id, seq)")
    conn.execute("""
        CREATE TABLE usage_calls (
            -- One row per billed call of the store: the ledger de-duplicated,
            -- kept up to date for the keys each write touches, so a report is
            -- one scan of this table (no GROUP BY over copies at query time).
            dedup_key BLOB PRIMARY KEY,
            -- How many times the call counts: the most rows this key has in one
            -- session (equal records inside one session are distinct calls).
            m INTEGER NOT NULL,
            -- The owner, the earliest session (createdAt, id) holding the key, as
            -- hex(sessions.id): ASCII whatever the id holds (lone surrogates are BLOBs).
            owner TEXT NOT NULL,
            provider TEXT,
            model TEXT,
            ts_ms INTEGER NOT NULL,
            input INTEGER NOT NULL,
            output INTEGER NOT NULL,
            cache_read INTEGER NOT NULL,
            cache_write INTEGER NOT NULL,
            cost_nanos INTEGER
        ) WITHOUT ROWID""")
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
                values.append((key, seq, n, r.key, r.source, _db(r.provider), _db(r.model), r.timestamp_ms,
                               r.input, r.output, r.cache_read, r.cache_write, r.cost_nanos))
        if not values:
            return
        conn.executemany(
            "INSERT INTO usage_ledger (session_id, seq, n, dedup_key, source, provider, model, ts_ms,"
            " input, output, cache_read, cache_write, cost_nanos) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", values)
        # Fast path (every record of a new agent turn): a key with no usage_calls row had no
        # ledger row before this write (usage_calls holds one row per key of the ledger), so
        # its rows are exactly the ones just inserted, all in this session: it counts as
        # many times as it occurs here, and this session owns it. One upsert that inserts
        # only such keys; if any key was already known, recount every key of the write by
        # the full rule (_refresh_calls), which gives the same rows for the new ones.
        fresh: dict[bytes, list[Any]] = {}
        for value in values:
            row = fresh.get(value[3])
            if row is None:
                fresh[value[3]] = [value[3], 1, *value[5:]]
            else:
                row[1] += 1
        inserted = conn.executemany(
            f"INSERT INTO usage_calls (dedup_key, m, owner, {_ATTRS}) VALUES (?, ?, hex(?), ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (dedup_key) DO NOTHING",
            [(row[0], row[1], key, *row[2:]) for row in fresh.values()]).rowcount
        if inserted != len(fresh):
            _refresh_calls(conn, set(fresh))

    def remove(self, conn: sqlite3.Connection, key: Any) -> None:
        """Delete the ledger rows of session ``key`` and recount its calls (inside the transaction)."""
        keys = {row[0] for row in conn.execute("SELECT dedup_key FROM usage_ledger WHERE session_id = ?", (key,))}
        conn.execute("DELETE FROM usage_ledger WHERE session_id = ?", (key,))
        if keys:
            _refresh_calls(conn, keys)

    def settle(self, conn: sqlite3.Connection) -> int:
        """Nothing to finish: the ledger is complete after every write."""
        return 0

    def rebuild_all(self, conn: sqlite3.Connection) -> None:
        """Refill the whole ledger from ``entries`` (the schema step on an existing store)."""
        from .. import jsonio

        conn.execute("DELETE FROM usage_ledger")
        conn.execute("DELETE FROM usage_calls")
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


_ATTRS = "provider, model, ts_ms, input, output, cache_read, cache_write, cost_nanos"


def _refresh_calls(conn: sqlite3.Connection, keys: set[bytes]) -> None:
    """Recompute the ``usage_calls`` rows of ``keys`` from the ledger (the rule of
    :mod:`sessiontree.usagerecords`: multiplicity = most rows in one session, owner
    = earliest session). A key no session holds any more loses its row."""
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS usage_touched (k BLOB PRIMARY KEY) WITHOUT ROWID")
    conn.executemany("INSERT OR IGNORE INTO temp.usage_touched (k) VALUES (?)", ((k,) for k in keys))
    conn.execute("DELETE FROM usage_calls WHERE dedup_key IN (SELECT k FROM temp.usage_touched)")
    # Records sharing a key share their content, so any row's attributes serve.
    conn.execute(f"""
        INSERT INTO usage_calls (dedup_key, m, owner, {_ATTRS})
        SELECT dedup_key, max(n), substr(min(o), instr(min(o), char(1)) + 1), {_ATTRS} FROM (
            SELECT l.dedup_key, count(*) AS n, coalesce(s.created_at, '') || char(1) || hex(l.session_id) AS o,
                   l.provider, l.model, l.ts_ms, l.input, l.output, l.cache_read, l.cache_write, l.cost_nanos
            FROM temp.usage_touched t JOIN usage_ledger l ON l.dedup_key = t.k
            JOIN sessions s ON s.id = l.session_id
            GROUP BY l.dedup_key, l.session_id)
        GROUP BY dedup_key""")
    conn.execute("DELETE FROM temp.usage_touched")


#: The ledger instance registered in DERIVED_INDEXES.
LEDGER = UsageLedger()
if not any(getattr(index, "name", None) == LEDGER.name for index in DERIVED_INDEXES):
    DERIVED_INDEXES.append(LEDGER)


def _text(value: Any) -> Any:
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value


def query_usage(conn: sqlite3.Connection, query: UsageQuery, cwd_filter: Any = None) -> list[UsageRow]:
    """Answer :meth:`SqliteStore.usage` from the ledger alone (no entry is read).

    The same result as :func:`sessiontree.usagerecords.aggregate` over the
    sessions' entries. Records sharing a content key have the same content, so
    SQL can (1) count each key's rows per session, (2) keep each key once with
    the largest of those counts (and, when sessions matter, its owner: the
    smallest ``createdAt``, session id), and (3) sum per group. Rows that may
    need a catalogue price stay apart by their token counts.

    Args:
        conn: a connection inside a read transaction.
        query: what to sum.
        cwd_filter: ``(cwd) -> bool`` for :attr:`UsageQuery.cwd`, applied to the
            owning sessions, or ``None``.
    """
    where, params = [], []
    if query.since_ms is not None:
        where.append("ts_ms >= ?")
        params.append(query.since_ms)
    if query.until_ms is not None:
        where.append("ts_ms < ?")
        params.append(query.until_ms)
    time_sql = (" AND ".join(where)) or "1"
    per_call = "1" if query.price_all else "(cost_nanos IS NULL)"
    # Rows to be priced from a catalogue keep their own token counts.
    split = f"CASE WHEN {per_call} THEN input || ',' || output || ',' || cache_read || ',' || cache_write END"
    sums = ("sum(m), sum(m * input), sum(m * output), sum(m * cache_read), sum(m * cache_write),"
            " sum(m * coalesce(cost_nanos, 0))")
    bucket = f"(ts_ms - ts_ms % {BUCKET_MS})"
    if not query.by_time:
        bucket = f"(CASE WHEN {per_call} THEN {bucket} ELSE 0 END)"
    attrs = _ATTRS
    if query.session_id is not None:
        sql = f"""
            WITH me AS (SELECT id, coalesce(created_at, '') AS c FROM sessions WHERE id = ?)
            SELECT NULL AS owner, provider, model, {bucket}, cost_nanos IS NOT NULL, copied, {per_call}, {sums}
            FROM (
                SELECT 1 AS m, {attrs}, EXISTS (
                    SELECT 1 FROM usage_ledger o JOIN sessions s ON s.id = o.session_id, me
                    WHERE o.dedup_key = l.dedup_key AND o.session_id != me.id
                      AND (coalesce(s.created_at, ''), s.id) < (me.c, me.id)) AS copied
                FROM usage_ledger l WHERE l.session_id = (SELECT id FROM me) AND {time_sql})
            GROUP BY provider, model, {bucket}, cost_nanos IS NOT NULL, copied, {split}"""
        rows = conn.execute(sql, (_db(query.session_id), *params)).fetchall()
        cwd_row = conn.execute("SELECT cwd FROM sessions WHERE id = ?", (_db(query.session_id),)).fetchone()
        owners = {None: (query.session_id, _text(cwd_row[0]) if cwd_row else None)}
    else:
        sessions = query.per_session or query.cwd is not None
        owner = "owner" if sessions else "NULL"
        sql = f"""
            SELECT {owner}, provider, model, {bucket}, cost_nanos IS NOT NULL, 0, {per_call}, {sums}
            FROM usage_calls WHERE {time_sql}
            GROUP BY {owner}, provider, model, {bucket}, cost_nanos IS NOT NULL, {split}"""
        rows = conn.execute(sql, params).fetchall()
        owners: dict[Any, tuple[str | None, str | None]] = {None: (None, None)}
        if sessions:
            cwds = {_text(sid): _text(cwd) for sid, cwd in conn.execute("SELECT id, cwd FROM sessions")}
            for owner_hex in {row[0] for row in rows}:
                sid = bytes.fromhex(owner_hex).decode("utf-8", "surrogatepass")
                owners[owner_hex] = (sid, cwds.get(sid))
    result = []
    for row in rows:
        session_id, cwd = owners[row[0]]
        if query.session_id is None:
            if query.cwd is not None and cwd_filter is not None and not cwd_filter(cwd):
                continue
            if not query.per_session:
                session_id = cwd = None
        result.append(UsageRow(session_id, cwd, _text(row[1]), _text(row[2]), row[3], bool(row[4]), bool(row[5]),
                               bool(row[6]), *row[7:]))
    return result
