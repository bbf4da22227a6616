"""The session-mode usage query is linear in the session's ledger rows (issue 38 item 3).

A session of N identical billed calls (one ``dedup_key``, synthetic: no real file
repeats a call 8,000 times) used to cost N x N row visits: the query asked "is this
call held by an earlier session?" with one ``EXISTS`` per ledger row, each walking
every row of the key. The work is measured without a clock: SQLite VM steps (a
progress handler: four times the rows must cost about four times the steps, not
sixteen) and PostgreSQL rows visited (``EXPLAIN ANALYZE``: at most a few times the
ledger's rows, where the old query read N x N). The answer itself is checked
against :func:`sessiontree.core.usage.aggregate` and by hand.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from builders import billed_assistant, usage, usage_header
from sessiontree.core.usage import UsageQuery
from sessiontree.stores.sqlite.usage import query_usage as sqlite_query
from support import make_store

SID = "019cae00-0000-7000-8000-0000000e8000"
LATER = "019cae00-0000-7000-8000-0000000e7000"
STAMP = "2026-01-01T10:00:00.000Z"


def _identical_calls(n: int, model: str = "m-known") -> list[dict[str, Any]]:
    """``n`` assistant entries billing the same call (same times, provider, model and usage):
    one ``dedup_key``, ``n`` distinct calls inside one session (docs/usage.md)."""
    entries, parent = [], None
    for i in range(n):
        entry = billed_assistant(f"a{i:05d}", parent, STAMP, usage(10, 5, 0, 0, 0.01), model)
        entries.append(entry)
        parent = entry["id"]
    return entries


def _totals(rows) -> tuple[int, int, int, set[bool]]:
    return (sum(r.calls for r in rows), sum(r.input for r in rows), sum(r.output for r in rows),
            {r.copied for r in rows})


def _sqlite_steps(store, query: UsageQuery) -> tuple[int, list[Any]]:
    """Virtual-machine steps (in hundreds) SQLite takes to answer ``query`` on ``store``."""
    ticks = [0]

    def tick() -> int:
        ticks[0] += 1
        return 0

    store.usage(UsageQuery())  # settles the ledger's tail first: only the query is counted
    with store.read_transaction() as conn:
        conn.set_progress_handler(tick, 100)
        try:
            rows = sqlite_query(conn, query, lambda cwd: True)
        finally:
            conn.set_progress_handler(None, 0)
    return ticks[0], rows


def test_sqlite_session_usage_of_identical_calls_is_linear(tmp_path):
    steps = {}
    for n in (500, 2000):
        store = make_store("sqlite", tmp_path / str(n))
        try:
            store.create(usage_header(SID), _identical_calls(n))
            steps[n], rows = _sqlite_steps(store, UsageQuery(session_id=SID, by_time=False))
        finally:
            store.close()
        assert _totals(rows) == (n, 10 * n, 5 * n, {False})  # hand count: n calls of 10 in, 5 out
    # Four times the rows: about four times the steps (the old per-row EXISTS took 16x).
    assert steps[2000] < 6 * steps[500], steps


def test_sqlite_session_usage_of_8000_identical_calls(tmp_path):
    """The issue's input: one session of 8,000 identical billed calls (no other session holds
    them; a later session's copy does not make them copied)."""
    store = make_store("sqlite", tmp_path)
    try:
        store.create(usage_header(SID), _identical_calls(8000))
        store.create(usage_header(LATER, created="2026-02-01T00:00:00.000Z"), _identical_calls(1))
        ticks, rows = _sqlite_steps(store, UsageQuery(session_id=SID, by_time=False))
        assert _totals(rows) == (8000, 80000, 40000, {False})
        # Measured: 7,700 ticks (96 VM steps a row); the per-row EXISTS took 8,000+ steps a
        # row (640,000+ ticks). The bound leaves five times the room.
        assert ticks < 40_000, ticks
        # The later session's one call is a copy of a call the first session holds.
        assert _totals(store.usage(UsageQuery(session_id=LATER))) == (1, 10, 5, {True})
    finally:
        store.close()


# --------------------------------------------------------------------------- PostgreSQL


class _Recorder:
    """A connection that records the SQL run through it (and runs it)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.statements: list[tuple[str, tuple[Any, ...]]] = []

    def execute(self, sql: str, params: Any = ()) -> Any:
        self.statements.append((sql, tuple(params)))
        return self.conn.execute(sql, params)


def _visited(plan: dict[str, Any]) -> int:
    """Rows a plan node and its children produced, over all their loops (``EXPLAIN ANALYZE``)."""
    own = int(plan.get("Actual Rows", 0)) * int(plan.get("Actual Loops", 1))
    return own + sum(_visited(child) for child in plan.get("Plans", []))


@pytest.mark.postgres
def test_postgres_session_usage_of_identical_calls_is_linear(pg_url):
    import psycopg

    from sessiontree.stores.postgres.store import PostgresStore
    from sessiontree.stores.postgres.usage import query_usage as pg_query

    visited = {}
    store = PostgresStore(pg_url)
    try:
        # Other sessions' calls, as in any store in use: 6,000 distinct keys, more than
        # one in-memory hash table holds below (the old query was linear only while it did).
        filler = [billed_assistant(f"f{i:05d}", f"f{i - 1:05d}" if i else None,
                                   f"2026-01-02T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}.000Z",
                                   usage(1, 1, 0, 0, 0.01)) for i in range(6000)]
        store.create(usage_header(LATER.replace("e7000", "f0000")), filler)
    finally:
        store.close()
    for n in (250, 1000):
        store = PostgresStore(pg_url)
        try:
            sid = f"{SID[:-4]}{n:04d}"
            store.create(usage_header(sid), _identical_calls(n, f"m{n}"))  # a key of its own
            assert _totals(store.usage(UsageQuery(session_id=sid, by_time=False))) == (n, 10 * n, 5 * n, {False})
        finally:
            store.close()
        with psycopg.connect(pg_url) as conn:
            # As on a large store, where the ledger's keys do not fit in one hash table in
            # memory: the planner then asks EXISTS row by row (an index lookup each).
            conn.execute("ANALYZE usage_ledger")
            conn.execute("SET work_mem = '64kB'")
            conn.execute("SET hash_mem_multiplier = 1")
            recorder = _Recorder(conn)
            pg_query(recorder, UsageQuery(session_id=sid, by_time=False), lambda ids: dict.fromkeys(ids))
            sql, params = next((s, p) for s, p in recorder.statements if "usage_ledger" in s)
            explained = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params).fetchone()[0]
            plan = (explained if isinstance(explained, list) else json.loads(explained))[0]["Plan"]
            ledger = conn.execute("SELECT count(*) FROM usage_ledger").fetchone()[0]
            visited[n] = (_visited(plan), ledger)
    assert re.search(r"\bEXISTS\b", sql)  # the same question is asked: once per key now
    # Linear: the plan reads each ledger row a few times at most, whichever plan it picks (an
    # index lookup per key, or one hash of the ledger). The per-row EXISTS read n x n rows.
    assert all(rows <= 3 * ledger for rows, ledger in visited.values()), visited
