"""The usage ledger of :class:`~sessiontree.stores.sqlite.store.SqliteStore`: derived data
(docs/stores.md, "Derived data"), so ``sessiontree stats`` reads no transcript.

One row per billed usage record (:mod:`sessiontree.core.usage` decides what
one is), removed with its session, rebuilt by ``store.reindex()``.
:data:`LEDGER` is the :class:`~sessiontree.stores.sqlite.derived.DerivedIndex`; its
tables come from the schema steps ``m006_usage_ledger``, ``m007_usage_rollup`` and
``m011_bulk_settle`` (:mod:`.schema`).

**The pending tail** (docs/decisions/bulk-settle.md): no write writes a ledger
row. Entries after their session's watermark (``usage_merged``; the sessions
written since the last full settle are those with ``sessions.updated_at`` above
``usage_state.updated_at``) are pending until :func:`merge_usage` settles them in
bulk: ``store.settle_derived()`` at the end of ``import`` and ``sync``, a
``reindex``, and a usage query, which settles the tail before it reads the ledger
(``SqliteStore.usage``; a store it cannot write sums the entries instead), so an
answer is never stale.

De-duplication happens at settle time: ``usage_calls`` holds each billed call
of the store once (its multiplicity: the most rows its key has in one
session; its owner: the earliest session holding it), recounted for the keys
each write touches. ``usage_rollup`` sums ``usage_calls`` per (owner,
provider, model, 15-minute UTC bucket, priced shape), kept by the same
recount, so a report sums one rollup row per session, model and quarter hour
instead of one row per call (docs/usage.md, "Storage and speed").
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from sessiontree.core.usage import BILLED_TYPES, BUCKET_MS, UsageQuery, UsageRow, records_from_entry
from sessiontree.format import jsonio
from sessiontree.stores.sqlite.derived import IndexedRow, from_db, to_db
from sessiontree.stores.syncing import ledger_row_owner
from sessiontree.stores.verify import row_drift

__all__ = ["LEDGER", "UsageLedger", "ensure_hour_columns", "query_usage", "rebuild_rollup"]

#: A Unix-millisecond column's 15-minute UTC bucket, floored (SQL's ``%`` truncates
#: toward zero; a record dated before 1970 belongs to the bucket below it, as in
#: :mod:`sessiontree.core.usage`).
def _bucket_sql(column: str) -> str:
    return f"({column} - (({column} % {BUCKET_MS}) + {BUCKET_MS}) % {BUCKET_MS})"


#: A call's "priced shape": '' when its recorded cost is usable, else its four token
#: counts (and its 1-hour cache writes when it has any), so calls to be priced from a
#: catalogue stay one shape per rollup row.
_SHAPE = ("CASE WHEN cost_nanos IS NULL THEN input || ',' || output || ',' || cache_read || ',' || cache_write"
          " || CASE WHEN cache_write_1h > 0 THEN ',' || cache_write_1h ELSE '' END ELSE '' END")

_ROLLUP_KEY = f"owner, coalesce(provider, ''), coalesce(model, ''), {_bucket_sql('ts_ms')}, {_SHAPE}"

def _rollup_move(sign: str, source: str) -> str:
    """The statement adding (``sign=""``) or taking out (``sign="-"``) the calls of
    ``source`` (a ``FROM ... WHERE ...`` giving ``usage_calls``-shaped rows) to or from
    their rollup rows."""
    return f"""
    INSERT INTO usage_rollup (owner, provider, model, bucket, shape, calls, input, output, cache_read,
                              cache_write, cost_nanos, cache_write_1h)
    SELECT {_ROLLUP_KEY}, {sign}sum(m), {sign}sum(m * input), {sign}sum(m * output),
           {sign}sum(m * cache_read), {sign}sum(m * cache_write), {sign}sum(m * coalesce(cost_nanos, 0)),
           {sign}sum(m * cache_write_1h)
    {source}
    GROUP BY 1, 2, 3, 4, 5
    ON CONFLICT (owner, provider, model, bucket, shape) DO UPDATE SET
        calls = calls + excluded.calls, input = input + excluded.input, output = output + excluded.output,
        cache_read = cache_read + excluded.cache_read, cache_write = cache_write + excluded.cache_write,
        cost_nanos = cost_nanos + excluded.cost_nanos, cache_write_1h = cache_write_1h + excluded.cache_write_1h"""


# Built once: the statement cache hashes the text on every execute, and a str caches its hash.
# (The WHERE keeps SQLite from reading the upsert's ON as a join constraint.)
_TOUCHED = "FROM temp.usage_touched t JOIN usage_calls c ON c.dedup_key = t.k WHERE 1"
#: The ``usage_calls`` rows of the keys in ``temp.usage_touched``, into / out of the rollup.
_ROLLUP_ADD = _rollup_move("", _TOUCHED)
_ROLLUP_SUBTRACT = _rollup_move("-", _TOUCHED)
#: Adds a ``usage_calls`` row about to be inserted, given as its values ``(dedup_key, m,
#: session key, provider, model, ts_ms, input, output, cache_read, cache_write,
#: cost_nanos, cache_write_1h)``, to its rollup row, unless ``usage_calls`` already holds that key (the
#: append fast path of :meth:`UsageLedger.add`: the same sums :data:`_ROLLUP_ADD` adds
#: once the row is in, so the rollup matches ``usage_calls`` at every step).
_ROLLUP_ADD_NEW_CALL = _rollup_move(
    "", "FROM (SELECT ? AS dedup_key, ? AS m, hex(?) AS owner, ? AS provider, ? AS model, ? AS ts_ms,"
        " ? AS input, ? AS output, ? AS cache_read, ? AS cache_write, ? AS cost_nanos, ? AS cache_write_1h) AS c"
        " WHERE NOT EXISTS (SELECT 1 FROM usage_calls u WHERE u.dedup_key = c.dedup_key)")


def ensure_hour_columns(conn: sqlite3.Connection) -> None:
    """Add ``cache_write_1h`` (schema step ``m016_cache_write_1h``) to each usage table that
    exists and lacks it: the schema steps before it rebuild these tables with this code."""
    for table in ("usage_ledger", "usage_calls", "usage_rollup"):
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if columns and "cache_write_1h" not in columns:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN cache_write_1h INTEGER NOT NULL DEFAULT 0")


def rebuild_rollup(conn: sqlite3.Connection) -> None:
    """Refill ``usage_rollup`` from ``usage_calls`` (the schema step and a whole-store reindex)."""
    ensure_hour_columns(conn)
    conn.execute("DELETE FROM usage_rollup")
    conn.execute(f"""
        INSERT INTO usage_rollup (owner, provider, model, bucket, shape, calls, input, output, cache_read,
                                  cache_write, cost_nanos, cache_write_1h)
        SELECT {_ROLLUP_KEY}, sum(m), sum(m * input), sum(m * output), sum(m * cache_read), sum(m * cache_write),
               sum(m * coalesce(cost_nanos, 0)), sum(m * cache_write_1h)
        FROM usage_calls GROUP BY 1, 2, 3, 4, 5""")


def _has_rollup(conn: sqlite3.Connection) -> bool:
    return conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'usage_rollup'").fetchone() is not None


class UsageLedger:
    """The :class:`~sessiontree.stores.sqlite.derived.DerivedIndex` writing ``usage_ledger`` rows."""

    name = "usage"

    def add(self, conn: sqlite3.Connection, key: Any, rows: Sequence[IndexedRow]) -> None:
        """Nothing to write for new entries of session ``key``: no statement at all.

        On a store with the pending tail (schema step ``m011_bulk_settle``) they
        stay pending until a settle (:func:`merge_usage`): the write moved the
        session's ``updated_at`` above ``usage_state.updated_at``, which is how
        settles and queries find it. A query never answers from a ledger with a
        tail (:meth:`SqliteMaintenance.usage` settles it first, or sums the
        entries). On an older schema (a step before ``m011`` running this code)
        the rows are written at once, as they always were."""
        if not _has_pending_tables(conn):
            self._add(conn, key, rows, True)

    def writes_on_add(self, conn: sqlite3.Connection) -> bool:
        """Only on a schema without the pending tail (before ``m011_bulk_settle``)."""
        return not _has_pending_tables(conn)

    def created(self, conn: sqlite3.Connection, sessions: Sequence[tuple[Any, Sequence[dict[str, Any]]]]) -> None:
        """Settle sessions created in this transaction from their entries in hand
        (:func:`settle_created`)."""
        settle_created(conn, sessions)

    def _add(self, conn: sqlite3.Connection, key: Any, rows: Sequence[IndexedRow],
             rollup: bool) -> None:
        values = []
        for seq, entry, _text in rows:
            if entry.get("type") not in BILLED_TYPES:
                continue
            for n, r in enumerate(records_from_entry(entry)):
                values.append((key, seq, n, r.key, r.source, to_db(r.provider), to_db(r.model), r.timestamp_ms,
                               r.input, r.output, r.cache_read, r.cache_write, r.cost_nanos, r.cache_write_1h))
        if not values:
            return
        conn.executemany(
            "INSERT INTO usage_ledger (session_id, seq, n, dedup_key, source, provider, model, ts_ms,"
            " input, output, cache_read, cache_write, cost_nanos, cache_write_1h) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            values)
        # Fast path (every record of a new agent turn): a key with no usage_calls row had no
        # ledger row before this write (usage_calls holds one row per key of the ledger), so
        # its rows are exactly the ones just inserted, all in this session: it counts as
        # many times as it occurs here, and this session owns it. One upsert that inserts
        # only such keys, after one that adds only them to the rollup; if any key was already
        # known, recount every key of the write by the full rule (_refresh_calls), which
        # gives the same rows for the new ones.
        fresh: dict[bytes, list[Any]] = {}
        for value in values:
            row = fresh.get(value[3])
            if row is None:
                fresh[value[3]] = [value[3], 1, *value[5:]]
            else:
                row[1] += 1
        calls = [(row[0], row[1], key, *row[2:]) for row in fresh.values()]
        if rollup:  # first: it adds only keys usage_calls does not hold yet
            conn.executemany(_ROLLUP_ADD_NEW_CALL, calls)
        inserted = conn.executemany(
            f"INSERT INTO usage_calls (dedup_key, m, owner, {_ATTRS}) VALUES (?, ?, hex(?), ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (dedup_key) DO NOTHING", calls).rowcount
        if inserted != len(fresh):
            _refresh_calls(conn, set(fresh), rollup)

    def remove(self, conn: sqlite3.Connection, key: Any) -> None:
        """Delete the ledger rows of session ``key`` and recount its calls (inside the transaction)."""
        keys = {row[0] for row in conn.execute("SELECT dedup_key FROM usage_ledger WHERE session_id = ?", (key,))}
        conn.execute("DELETE FROM usage_ledger WHERE session_id = ?", (key,))
        if keys:
            _refresh_calls(conn, keys)
        if _has_pending_tables(conn):
            conn.execute("DELETE FROM usage_merged WHERE session_id = ?", (key,))
            # As the search index does: the mark never stays above every remaining session,
            # or a later write's updated_at could fall at or below it and be missed.
            conn.execute("UPDATE usage_state SET updated_at = (SELECT coalesce(max(updated_at), 0) FROM sessions"
                         " WHERE id != ?) WHERE updated_at > (SELECT coalesce(max(updated_at), 0) FROM sessions"
                         " WHERE id != ?)", (key, key))

    def pending(self, conn: sqlite3.Connection) -> int:
        """Records after their session's ledger watermark (:func:`pending_usage`)."""
        return pending_usage(conn)

    def settle(self, conn: sqlite3.Connection, budget: int | None = None) -> int:
        """Write the ledger rows of pending records: all of them, or about ``budget``
        records (:func:`merge_usage`); returns how many records were read (fewer than
        ``budget``: nothing is left)."""
        return merge_usage(conn, budget)

    def reindexed(self, conn: sqlite3.Connection, everything: bool) -> None:
        """After ``store.reindex()`` rebuilt sessions with :meth:`remove` and :meth:`add`
        (which writes nothing): settle them now, in the same transaction, so a rebuilt
        ledger holds every record (a rebuilt session keeps its ``updated_at``, so it
        is found by its missing watermark). A whole-store reindex also rebuilds
        ``usage_rollup`` from ``usage_calls``, so drift in the rollup itself is
        repaired too (the incremental upkeep only moves what it is told about)."""
        if _has_pending_tables(conn):
            keys = [row[0] for row in conn.execute(
                "SELECT id FROM sessions WHERE id NOT IN (SELECT session_id FROM usage_merged)")]
            _merge_sessions(conn, [(key, -1) for key in keys], None)
            merge_usage(conn)
        if everything and _has_rollup(conn):
            rebuild_rollup(conn)

    def rebuild_all(self, conn: sqlite3.Connection) -> None:
        """Refill the whole ledger from ``entries`` (the schema step on an existing store)."""
        ensure_hour_columns(conn)
        conn.execute("DELETE FROM usage_ledger")
        conn.execute("DELETE FROM usage_calls")
        # Calls first, the rollup once at the end (the schema step m006 runs before
        # m007 creates the rollup; and one GROUP BY beats a recount per session).
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
            self._add(conn, key, rows, False)
        if _has_rollup(conn):
            rebuild_rollup(conn)


    def checker(self, conn: sqlite3.Connection, key: Any) -> _SessionCheck:
        """The :class:`~sessiontree.stores.verify.DerivedCheck` of session ``key``'s
        ``usage_ledger`` rows (``check --store``): the rows :meth:`add` writes."""
        watermark: int | None = None
        if _has_pending_tables(conn):
            row = conn.execute("SELECT seq FROM usage_merged WHERE session_id = ?", (key,)).fetchone()
            watermark = -1 if row is None else row[0]
        return _SessionCheck(conn, key, watermark)

    def store_drift(self, conn: sqlite3.Connection) -> list[str]:
        """How ``usage_calls`` differs from a recount of the ledger and ``usage_rollup``
        from a sum of ``usage_calls`` (the rules of :func:`_refresh_calls` and
        :func:`rebuild_rollup`), in rows that differ either way (``check --store``).
        Rollup rows left with no call (``calls = 0``) are ignored: the upkeep may
        leave them, and they add nothing."""
        drift = []
        calls = (f"SELECT dedup_key, max(n), substr(min(o), instr(min(o), char(1)) + 1), {_ATTRS} FROM ("
                 " SELECT l.dedup_key, count(*) AS n, coalesce(s.created_at, '') || char(1) || hex(l.session_id)"
                 " AS o, l.provider, l.model, l.ts_ms, l.input, l.output, l.cache_read, l.cache_write, l.cost_nanos,"
                 " l.cache_write_1h"
                 " FROM usage_ledger l JOIN sessions s ON s.id = l.session_id GROUP BY l.dedup_key, l.session_id)"
                 " GROUP BY dedup_key")
        stored = f"SELECT dedup_key, m, owner, {_ATTRS} FROM usage_calls"
        differ = _differ(conn, stored, calls)
        if differ:
            drift.append(f"usage_calls ({differ} rows differ from a recount of usage_ledger)")
        if _has_rollup(conn):
            sums = (f"SELECT {_ROLLUP_KEY}, sum(m), sum(m * input), sum(m * output), sum(m * cache_read),"
                    " sum(m * cache_write), sum(m * coalesce(cost_nanos, 0)), sum(m * cache_write_1h)"
                    " FROM usage_calls GROUP BY 1, 2, 3, 4, 5")
            stored = ("SELECT owner, provider, model, bucket, shape, calls, input, output, cache_read, cache_write,"
                      " cost_nanos, cache_write_1h FROM usage_rollup WHERE calls != 0")
            differ = _differ(conn, stored, sums)
            if differ:
                drift.append(f"usage_rollup ({differ} rows differ from the sums of usage_calls)")
        return drift


def _differ(conn: sqlite3.Connection, left: str, right: str) -> int:
    """How many rows one query gives and the other does not (both ways)."""
    return sum(conn.execute(f"SELECT count(*) FROM ({a} EXCEPT {b})").fetchone()[0]
               for a, b in ((left, right), (right, left)))


class _SessionCheck:
    """:meth:`UsageLedger.checker`: the rebuilt rows are computed as the entries come."""

    def __init__(self, conn: sqlite3.Connection, key: Any, watermark: int | None = None) -> None:
        self.conn, self.key, self.watermark = conn, key, watermark
        self.rows: list[tuple[Any, ...]] = []

    def add(self, seq: int, entry: dict[str, Any]) -> None:
        if self.watermark is not None and seq > self.watermark:
            return  # pending: no ledger row yet
        if entry.get("type") in BILLED_TYPES:
            for n, r in enumerate(records_from_entry(entry)):
                self.rows.append((seq, n, r.key, r.source, to_db(r.provider), to_db(r.model), r.timestamp_ms,
                                  r.input, r.output, r.cache_read, r.cache_write, r.cost_nanos, r.cache_write_1h))

    def drift(self) -> list[str]:
        stored = [tuple(row) for row in self.conn.execute(
            "SELECT seq, n, dedup_key, source, provider, model, ts_ms, input, output, cache_read, cache_write,"
            " cost_nanos, cache_write_1h FROM usage_ledger WHERE session_id = ? ORDER BY seq, n", (self.key,))]
        return row_drift("usage_ledger", stored, self.rows)


_ATTRS = "provider, model, ts_ms, input, output, cache_read, cache_write, cost_nanos, cache_write_1h"


def _refresh_calls(conn: sqlite3.Connection, keys: set[bytes], rollup: bool = True) -> None:
    """Recompute the ``usage_calls`` rows of ``keys`` from the ledger (the rule of
    :mod:`sessiontree.core.usage`: multiplicity = most rows in one session, owner
    = earliest session). A key no session holds any more loses its row.

    With ``rollup``, ``usage_rollup`` moves with them: the old rows' sums are
    taken out before the recount and the new rows' sums put in after it, and a
    rollup row left with no call is deleted (found through the partial index on
    ``calls = 0``, so the search costs nothing when none is left)."""
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS usage_touched (k BLOB PRIMARY KEY) WITHOUT ROWID")
    conn.executemany("INSERT OR IGNORE INTO temp.usage_touched (k) VALUES (?)", ((k,) for k in keys))
    emptied = False
    if rollup:
        before = conn.total_changes
        conn.execute(_ROLLUP_SUBTRACT)
        emptied = conn.total_changes != before  # an append of new calls subtracts nothing
    conn.execute("DELETE FROM usage_calls WHERE dedup_key IN (SELECT k FROM temp.usage_touched)")
    # Records sharing a key share their content, so any row's attributes serve.
    conn.execute(f"""
        INSERT INTO usage_calls (dedup_key, m, owner, {_ATTRS})
        SELECT dedup_key, max(n), substr(min(o), instr(min(o), char(1)) + 1), {_ATTRS} FROM (
            SELECT l.dedup_key, count(*) AS n, coalesce(s.created_at, '') || char(1) || hex(l.session_id) AS o,
                   l.provider, l.model, l.ts_ms, l.input, l.output, l.cache_read, l.cache_write, l.cost_nanos,
                   l.cache_write_1h
            FROM temp.usage_touched t JOIN usage_ledger l ON l.dedup_key = t.k
            JOIN sessions s ON s.id = l.session_id
            GROUP BY l.dedup_key, l.session_id)
        GROUP BY dedup_key""")
    if rollup:
        conn.execute(_ROLLUP_ADD)
        if emptied:
            conn.execute("DELETE FROM usage_rollup WHERE calls = 0")
    conn.execute("DELETE FROM temp.usage_touched")


def _has_pending_tables(conn: sqlite3.Connection) -> bool:
    """Whether the database has the ledger's pending tail (schema step ``m011_bulk_settle``)."""
    return conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'usage_merged'").fetchone() is not None


def pending_usage(conn: sqlite3.Connection) -> int:
    """How many records are after their session's ledger watermark, from the sessions
    written since the last full settle (``sessions.updated_at`` above
    ``usage_state.updated_at``): one index range and one primary-key probe per such
    session, no record read. 0 on a schema without the pending tail."""
    if not _has_pending_tables(conn):
        return 0
    count: int = conn.execute(
        "SELECT coalesce(sum((SELECT coalesce(max(seq), -1) FROM entries WHERE session_id = s.id)"
        " - coalesce(m.seq, -1)), 0) FROM sessions AS s LEFT JOIN usage_merged AS m ON m.session_id = s.id"
        " WHERE s.updated_at > (SELECT updated_at FROM usage_state)").fetchone()[0]
    return count


def merge_usage(conn: sqlite3.Connection, budget: int | None = None) -> int:
    """Write the ledger rows of pending records (inside a write transaction): every
    one, or about ``budget`` records (the sessions written longest ago first), so a
    long tail settles in several short transactions. When everything is merged the
    mark ``usage_state.updated_at`` moves to the newest session. Returns the number
    of records the watermarks moved over (fewer than ``budget``: nothing is left)."""
    if not _has_pending_tables(conn):
        return 0
    mark = conn.execute("SELECT updated_at FROM usage_state").fetchone()[0]
    dirty = conn.execute("SELECT s.id, coalesce(m.seq, -1) FROM sessions AS s"
                         " LEFT JOIN usage_merged AS m ON m.session_id = s.id"
                         " WHERE s.updated_at > ? ORDER BY s.updated_at", (mark,)).fetchall()
    taken = _merge_sessions(conn, dirty, budget)
    if budget is None or taken < budget:
        conn.execute("UPDATE usage_state SET updated_at = (SELECT coalesce(max(updated_at), 0) FROM sessions)")
    return taken


_PENDING_SQL = ("SELECT seq, CASE WHEN type IN ('message', 'session_summary', 'compaction', 'branch_summary',"
                " 'usage') THEN json END FROM entries WHERE session_id = ? AND seq > ? ORDER BY seq")


def _merge_sessions(conn: sqlite3.Connection, sessions: Sequence[tuple[Any, int]], budget: int | None) -> int:
    """Ledger rows for the records of each ``(session key, watermark)`` after its
    watermark, up to about ``budget`` records in all; the watermarks move past what
    was read (damaged records included: ``check --store`` reports them). The calls
    and the rollup are recounted once for the whole batch. Returns the records read."""
    values: list[tuple[Any, ...]] = []
    marks: list[tuple[Any, int]] = []
    owners: dict[bytes, Any] = {}  # dedup key -> its one session in this batch, or _SHARED
    taken = 0
    for key, after in sessions:
        if budget is not None and taken >= budget:
            break
        bound = "" if budget is None else f" LIMIT {int(budget - taken)}"
        last, count = after, 0
        for seq, text in conn.execute(_PENDING_SQL + bound, (key, after)).fetchall():
            last, count = seq, count + 1
            if text is None:
                continue
            try:
                entry = jsonio.loads(text)
            except ValueError:
                continue
            if not isinstance(entry, dict):
                continue
            _collect(values, owners, key, seq, entry)
        taken += count
        if count:
            marks.append((key, last))
    if values:
        _insert_batch(conn, values, owners)
    if marks:
        conn.executemany("INSERT INTO usage_merged (session_id, seq) VALUES (?, ?)"
                         " ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq", marks)
    return taken


#: :func:`_merge_sessions`: a key held by more than one session of the batch.
_SHARED = object()


def _collect(values: list[tuple[Any, ...]], owners: dict[bytes, Any], key: Any, seq: int,
             entry: dict[str, Any]) -> None:
    """Add the ledger rows of ``entry`` (session ``key``, position ``seq``) to ``values``
    and note in ``owners`` which session holds each record key (:data:`_SHARED` once
    two sessions of the batch do)."""
    for n, r in enumerate(records_from_entry(entry)):
        values.append((key, seq, n, r.key, r.source, to_db(r.provider), to_db(r.model), r.timestamp_ms,
                       r.input, r.output, r.cache_read, r.cache_write, r.cost_nanos, r.cache_write_1h))
        seen = owners.get(r.key, key)
        owners[r.key] = key if seen == key else _SHARED


def settle_created(conn: sqlite3.Connection, sessions: Sequence[tuple[Any, Sequence[dict[str, Any]]]]) -> None:
    """Ledger rows for sessions created in this transaction, from their entries in hand
    (``(key, entries)``, every entry of the session, ``seq`` = position): what
    :func:`_merge_sessions` writes for them, without reading or parsing a record
    again; their watermarks move to their last entry. Used by a bulk import that
    settles as it writes (:meth:`SqliteWrites.create_many` with ``settle``)."""
    if not _has_pending_tables(conn):
        return  # an older schema: the writes wrote the rows
    values: list[tuple[Any, ...]] = []
    owners: dict[bytes, Any] = {}
    marks: list[tuple[Any, int]] = []
    for key, entries in sessions:
        for seq, entry in enumerate(entries):
            if entry.get("type") not in BILLED_TYPES:
                continue
            _collect(values, owners, key, seq, entry)
        if entries:
            marks.append((key, len(entries) - 1))
    if values:
        _insert_batch(conn, values, owners)
    if marks:
        conn.executemany("INSERT INTO usage_merged (session_id, seq) VALUES (?, ?)"
                         " ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq", marks)
    if pending_usage(conn) == 0:
        # Nothing else pending: the mark moves as a full settle moves it.
        conn.execute("UPDATE usage_state SET updated_at = (SELECT coalesce(max(updated_at), 0) FROM sessions)")


def _insert_batch(conn: sqlite3.Connection, values: list[tuple[Any, ...]], owners: dict[bytes, Any]) -> None:
    """Insert ledger rows of several sessions, then recount their keys' calls and
    rollup rows: a key new to the store and held by one session of the batch takes
    the fast path of :meth:`UsageLedger._add` (its rows are exactly the ones just
    inserted); any other key is recounted by the full rule (:func:`_refresh_calls`)."""
    # In key order: the ledger is clustered on the key, so each page is visited once.
    values.sort(key=lambda value: (value[3], value[0], value[1], value[2]))
    conn.executemany(
        "INSERT INTO usage_ledger (session_id, seq, n, dedup_key, source, provider, model, ts_ms,"
        " input, output, cache_read, cache_write, cost_nanos, cache_write_1h) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        values)
    fresh: dict[bytes, list[Any]] = {}
    for value in values:
        if owners[value[3]] is _SHARED:
            continue
        row = fresh.get(value[3])
        if row is None:
            fresh[value[3]] = [value[3], 1, value[0], *value[5:]]
        else:
            row[1] += 1
    calls = list(map(tuple, fresh.values()))
    conn.executemany(_ROLLUP_ADD_NEW_CALL, calls)
    inserted = conn.executemany(
        f"INSERT INTO usage_calls (dedup_key, m, owner, {_ATTRS}) VALUES (?, ?, hex(?), ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (dedup_key) DO NOTHING", calls).rowcount
    refresh = {k for k, owner in owners.items() if owner is _SHARED}
    if inserted != len(fresh):
        refresh.update(fresh)
    if refresh:
        _refresh_calls(conn, refresh)


#: The usage ledger (listed in :data:`~sessiontree.stores.sqlite.schema.DERIVED_INDEXES`).
LEDGER = UsageLedger()


def query_usage(conn: sqlite3.Connection, query: UsageQuery, cwd_filter: Any = None) -> list[UsageRow]:
    """Answer :meth:`SqliteStore.usage` from the ledger alone (no entry is read).

    The same result as :func:`sessiontree.core.usage.aggregate` over the
    sessions' entries. Records sharing a content key have the same content, so
    ``usage_calls`` holds each billed call once with its multiplicity and owner
    (:func:`_refresh_calls`), and a store-wide report sums ``usage_rollup``, its
    per (owner, provider, model, 15-minute bucket, priced shape) sums. Rows that
    may need a catalogue price stay apart by their token counts.

    The rollup answers every store-wide query except these, which sum
    ``usage_calls`` (same result, one row per call):

    * ``price_all`` (``--cost catalog``): every call is priced on its own token
      counts, and the rollup keeps those only for calls without a usable cost;
    * a ``since_ms`` / ``until_ms`` that is not on a 15-minute boundary (a
      zone whose offset at that date is not whole quarter hours, such as a
      historical local mean time or a ``+01:07`` offset): the rollup cannot
      split a bucket;
    * a database whose rollup is missing (an older schema opened read-only),
      or whose sums overflowed 64-bit integers (SQLite then stores a float).

    Session mode (``query.session_id``) reads that session's ``usage_ledger`` rows.

    Args:
        conn: a connection inside a read transaction.
        query: what to sum.
        cwd_filter: ``(cwd) -> bool`` for :attr:`UsageQuery.cwd`, applied to the
            owning sessions, or ``None``.
    """
    if query.session_id is None and not query.price_all and all(
            bound is None or bound % BUCKET_MS == 0 for bound in (query.since_ms, query.until_ms)) \
            and _has_rollup(conn):
        rows = _query_rollup(conn, query, cwd_filter)
        if rows is not None:
            return rows
    return _query_calls(conn, query, cwd_filter)


def _time_where(query: UsageQuery, column: str) -> tuple[str, list[int]]:
    where, params = [], []
    if query.since_ms is not None:
        where.append(f"{column} >= ?")
        params.append(query.since_ms)
    if query.until_ms is not None:
        where.append(f"{column} < ?")
        params.append(query.until_ms)
    return (" AND ".join(where)) or "1", params


def _owners(conn: sqlite3.Connection, owner_hexes: set[Any]) -> dict[Any, tuple[str | None, str | None]]:
    """``{hex owner: (session id, header cwd)}`` for the owners in ``owner_hexes``."""
    owners: dict[Any, tuple[str | None, str | None]] = {None: (None, None)}
    cwds = {from_db(sid): from_db(cwd) for sid, cwd in conn.execute("SELECT id, cwd FROM sessions")}
    for owner_hex in owner_hexes:
        sid = bytes.fromhex(owner_hex).decode("utf-8", "surrogatepass")
        owners[owner_hex] = (sid, cwds.get(sid))
    return owners


def _query_rollup(conn: sqlite3.Connection, query: UsageQuery, cwd_filter: Any) -> list[UsageRow] | None:
    """A store-wide query summed from ``usage_rollup``; ``None`` when a sum is not an
    exact integer (an overflowed rollup: the caller sums ``usage_calls`` instead)."""
    time_sql, params = _time_where(query, "bucket")
    sessions = query.per_session or query.cwd is not None
    owner = "owner" if sessions else "NULL"
    # Calls with a usable recorded cost sum across buckets unless time matters;
    # calls to be priced keep their bucket (prices change over time).
    bucket = "bucket" if query.by_time else "(CASE WHEN shape = '' THEN 0 ELSE bucket END)"
    if sessions:
        # Grouped by owner, a rollup row whose group key is its whole primary key (every row
        # when time matters, else every row to be priced) is its own group: read as stored,
        # without the temporary B-tree a GROUP BY builds (4,412 rows: 15 -> 9 ms). Row order
        # does not matter: every caller sums the rows.
        kept = "1" if query.by_time else "shape != ''"
        plain = f"""
            SELECT owner, nullif(provider, ''), nullif(model, ''), bucket, shape = '', shape != '',
                   calls, input, output, cache_read, cache_write, cost_nanos, cache_write_1h
            FROM usage_rollup WHERE {time_sql} AND {kept}"""
        if query.by_time:
            rows = conn.execute(plain, params).fetchall()
        else:
            rows = conn.execute(f"""{plain}
                UNION ALL
                SELECT owner, nullif(provider, ''), nullif(model, ''), 0, 1, 0,
                       sum(calls), sum(input), sum(output), sum(cache_read), sum(cache_write), sum(cost_nanos),
                       sum(cache_write_1h)
                FROM usage_rollup WHERE {time_sql} AND shape = ''
                GROUP BY owner, provider, model""", [*params, *params]).fetchall()
    else:
        rows = conn.execute(f"""
            SELECT {owner}, nullif(provider, ''), nullif(model, ''), {bucket}, shape = '', shape != '',
                   sum(calls), sum(input), sum(output), sum(cache_read), sum(cache_write), sum(cost_nanos),
                   sum(cache_write_1h)
            FROM usage_rollup WHERE {time_sql}
            GROUP BY {owner}, provider, model, {bucket}, shape""", params).fetchall()
    owners = _owners(conn, {row[0] for row in rows}) if sessions else {None: (None, None)}
    result = []
    for row in rows:
        sums = row[6:]
        if float in map(type, sums):
            return None
        session_id, cwd = owners[row[0]]
        if query.cwd is not None and cwd_filter is not None and not cwd_filter(cwd):
            continue
        if not query.per_session:
            session_id = cwd = None
        result.append(UsageRow(session_id, cwd, from_db(row[1]), from_db(row[2]), row[3], bool(row[4]), False,
                               bool(row[5]), *sums))
    return result


def _query_calls(conn: sqlite3.Connection, query: UsageQuery, cwd_filter: Any) -> list[UsageRow]:
    """:func:`query_usage` summed from ``usage_calls`` (store-wide) or ``usage_ledger``
    (session mode): SQL (1) counts each key's rows per session, (2) keeps each key
    once with the largest of those counts and, when sessions matter, its owner (the
    smallest ``createdAt``, session id), (3) sums per group."""
    time_sql, params = _time_where(query, "ts_ms")
    per_call = "1" if query.price_all else "(cost_nanos IS NULL)"
    # Rows to be priced from a catalogue keep their own token counts.
    split = (f"CASE WHEN {per_call} THEN input || ',' || output || ',' || cache_read || ',' || cache_write"
             " || ',' || cache_write_1h END")
    sums = ("sum(m), sum(m * input), sum(m * output), sum(m * cache_read), sum(m * cache_write),"
            " sum(m * coalesce(cost_nanos, 0)), sum(m * cache_write_1h)")
    bucket = _bucket_sql("ts_ms")
    if not query.by_time:
        bucket = f"(CASE WHEN {per_call} THEN {bucket} ELSE 0 END)"
    attrs = _ATTRS
    if query.session_id is not None:
        # "Held by an earlier session?" is asked once per distinct key (``held``), not per
        # row: a session of N equal calls (one key) costs one look at the key's rows, where a
        # per-row EXISTS walked all N of them for each of the N (issue 38).
        sql = f"""
            WITH me AS (SELECT id, coalesce(created_at, '') AS c FROM sessions WHERE id = ?),
            mine AS (
                SELECT dedup_key, {attrs} FROM usage_ledger
                WHERE session_id = (SELECT id FROM me) AND {time_sql}),
            held AS (
                SELECT k FROM (SELECT DISTINCT dedup_key AS k FROM mine) WHERE EXISTS (
                    SELECT 1 FROM usage_ledger o JOIN sessions s ON s.id = o.session_id, me
                    WHERE o.dedup_key = k AND o.session_id != me.id
                      AND (coalesce(s.created_at, ''), s.id) < (me.c, me.id)))
            SELECT NULL AS owner, provider, model, {bucket}, cost_nanos IS NOT NULL, copied, {per_call}, {sums}
            FROM (SELECT 1 AS m, {attrs}, dedup_key IN (SELECT k FROM held) AS copied FROM mine)
            GROUP BY provider, model, {bucket}, cost_nanos IS NOT NULL, copied, {split}"""
        rows = conn.execute(sql, (to_db(query.session_id), *params)).fetchall()
        owners: dict[Any, tuple[str | None, str | None]]
        cwd_row = conn.execute("SELECT cwd FROM sessions WHERE id = ?", (to_db(query.session_id),)).fetchone()
        owners = {None: (query.session_id, from_db(cwd_row[0]) if cwd_row else None)}
    else:
        sessions = query.per_session or query.cwd is not None
        owner = "owner" if sessions else "NULL"
        sql = f"""
            SELECT {owner}, provider, model, {bucket}, cost_nanos IS NOT NULL, 0, {per_call}, {sums}
            FROM usage_calls WHERE {time_sql}
            GROUP BY {owner}, provider, model, {bucket}, cost_nanos IS NOT NULL, {split}"""
        rows = conn.execute(sql, params).fetchall()
        owners = _owners(conn, {row[0] for row in rows}) if sessions else {None: (None, None)}
    result = []
    for row in rows:
        reported = ledger_row_owner(query, owners[row[0]], cwd_filter)
        if reported is None:
            continue
        session_id, cwd = reported
        result.append(UsageRow(session_id, cwd, from_db(row[1]), from_db(row[2]), row[3], bool(row[4]), bool(row[5]),
                               bool(row[6]), *row[7:]))
    return result
