"""The SQLite usage rollup (``usage_rollup``, docs/usage.md "Storage and speed"): after
any sequence of writes, a report summed from the rollup equals the one summed from
``usage_calls`` (one row per billed call) and the one computed from the entries by
the memory store, and the table equals its own rebuild from ``usage_calls``.
"""

from __future__ import annotations

import shutil
import tempfile
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import billed_assistant_model as _entry
from sessiontree.core.usage import BUCKET_MS, UsageQuery
from sessiontree.stores.memory import MemoryStore
from sessiontree.stores.sqlite import usage as sqlite_usage
from sessiontree.stores.sqlite.store import SqliteStore
from sessiontree.usage.report import usage_report


class TieredCatalog:
    """A catalogue whose price is not linear in tokens: $1 per million tokens for a call
    of at most 5 input tokens, $2 above (a context-size tier); model "n" is unknown."""

    name = "tiered-test-catalog"

    def price(self, provider, model, input, output, cache_read, cache_write, at_ms):
        if model != "m":
            return None
        return (input + output + cache_read + cache_write) * (1000 if input <= 5 else 2000)


# Times around a bucket edge, a UTC day edge and 1970 (a floored bucket below zero).
TIMES = ["2026-01-01T23:44:59.999Z", "2026-01-01T23:45:00.000Z", "2026-01-02T00:10:00.000Z",
         "2026-01-02T09:00:00.000Z", "1969-12-31T23:59:59.000Z"]
call = st.tuples(st.sampled_from(TIMES), st.sampled_from([0, 5, 7]), st.sampled_from([None, 0, 0.002, 0.5]),
                 st.sampled_from(["m", "n", None]))
CREATED = ["2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z"]
op = st.one_of(
    st.tuples(st.just("create"), st.sampled_from(CREATED), st.sampled_from(["/w/a", "/w/b"]),
              st.lists(call, max_size=3)),
    st.tuples(st.just("append"), st.integers(0, 9), st.lists(call, min_size=1, max_size=2)),
    st.tuples(st.just("repeat"), st.integers(0, 9)),  # the same call again in one session: a second bill
    st.tuples(st.just("fork"), st.integers(0, 9), st.sampled_from(CREATED)),  # a copy, maybe dated earlier
    st.tuples(st.just("delete"), st.integers(0, 9)),
    st.tuples(st.just("reindex"), st.sampled_from([None, 0, 1])),
    # The ledger's bulk settle, whole or in budgets of a few records (keys shared
    # across the sessions of one batch, settled rows then written to again).
    st.tuples(st.just("settle"), st.sampled_from([None, 1, 2, 3])),
)


def _apply(store, sessions, ops):
    """Run ``ops`` on ``store``, keeping ``sessions`` ({id: (header, entries)}) as the truth."""
    counter = 0

    def new_id():
        nonlocal counter
        counter += 1
        return f"e{counter}"

    def pick(index):
        ids = sorted(sessions)
        return ids[index % len(ids)] if ids else None

    for item in ops:
        kind = item[0]
        if kind == "create":
            sid = f"s{len(sessions)}-{counter}"
            counter += 1  # unique even when a deletion makes len(sessions) repeat
            entries, parent = [], None
            for when, tokens, cost, model in item[3]:
                entries.append(_entry(new_id(), parent, when, tokens, cost, model))
                parent = entries[-1]["id"]
            header = {"type": "session", "version": 4, "id": sid, "createdAt": item[1], "cwd": item[2]}
            store.create(header, entries)
            sessions[sid] = (header, entries)
        elif kind in ("append", "repeat"):
            sid = pick(item[1])
            if sid is None:
                continue
            header, entries = sessions[sid]
            parent = entries[-1]["id"] if entries else None
            if kind == "append":
                calls = item[2]
            elif entries:  # same timestamp, usage and model, another id: the same content key
                last = entries[-1]
                calls = [(last["timestamp"], last["message"]["usage"]["input"],
                          last["message"]["usage"].get("cost", {}).get("total"), last["message"].get("model"))]
            else:
                continue
            added = []
            for when, tokens, cost, model in calls:
                added.append(_entry(new_id(), parent, when, tokens, cost, model))
                parent = added[-1]["id"]
            store.append(sid, added)
            entries.extend(added)
        elif kind == "fork":
            source = pick(item[1])
            if source is None:
                continue
            sid = f"f{len(sessions)}-{counter}"
            counter += 1
            header = {**sessions[source][0], "id": sid, "createdAt": item[2]}
            entries = [dict(e) for e in sessions[source][1]]
            store.create(header, entries)
            sessions[sid] = (header, entries)
        elif kind == "delete":
            sid = pick(item[1])
            if sid is not None:
                store.delete(sid)
                del sessions[sid]
        elif kind == "reindex":
            store.reindex(None if item[1] is None else pick(item[1]))
        elif kind == "settle":
            with store.write_transaction("settle") as conn:
                sqlite_usage.merge_usage(conn, item[1])


def _rollup_rows(conn):
    return conn.execute("SELECT * FROM usage_rollup ORDER BY owner, provider, model, bucket, shape").fetchall()


QUERIES = [{"by": by} for by in ("day", "week", "month", "session", "model", "provider", "project")] + [
    {"by": "day", "tz": "+05:45"}, {"by": "day", "tz": "America/St_Johns"}, {"by": "session", "since": "2026-01-02"},
    {"by": "day", "since": "2026-01-02", "tz": "+01:00"}, {"by": "model", "cwd": "/w/a"},
    {"by": "session", "cwd": "/w/b", "until": "2026-01-01"}, {"by": "model", "cost": "recorded"},
    {"by": "day", "cost": "catalog"}, {"by": "day", "since": "2026-01-02", "tz": "+00:07"},
]


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=12))
def test_rollup_reports_equal_ledger_reports_after_any_writes(ops):
    directory = tempfile.mkdtemp(prefix="rollup-")
    store = SqliteStore(f"{directory}/s.db")
    try:
        sessions: dict = {}
        _apply(store, sessions, ops)
        store.settle_derived()
        conn = store.db.connection()
        # The table is exactly what a rebuild from usage_calls gives, empty rows included (none).
        kept = _rollup_rows(conn)
        conn.execute("SAVEPOINT check_rollup")
        sqlite_usage.rebuild_rollup(conn)
        assert kept == _rollup_rows(conn)
        conn.execute("ROLLBACK TO check_rollup")
        conn.execute("RELEASE check_rollup")
        assert all(row[5] > 0 for row in kept)
        memory = MemoryStore()
        for header, entries in sessions.values():
            memory.create(header, entries)
        catalog = TieredCatalog()
        for query in QUERIES:
            rollup = usage_report(store, catalog=catalog, **query).to_dict()
            with mock.patch.object(sqlite_usage, "_has_rollup", lambda conn: False):
                calls = usage_report(store, catalog=catalog, **query).to_dict()
            assert rollup == calls, query
            assert rollup == usage_report(memory, catalog=catalog, **query).to_dict(), query
    finally:
        store.close()
        shutil.rmtree(directory, ignore_errors=True)


def test_rollup_serves_aligned_queries_and_leaves_the_rest_to_usage_calls(tmp_path):
    # Which path answers: the rollup for whole quarter-hour bounds, usage_calls for
    # --cost catalog and for a bound inside a bucket.
    store = SqliteStore(str(tmp_path / "s.db"))
    store.create({"type": "session", "version": 4, "id": "s", "createdAt": CREATED[0], "cwd": "/w"},
                 [_entry("a", None, "2026-01-01T10:05:00.000Z", 5, 0.5, "m")])
    seen = []
    real = sqlite_usage._query_calls

    def spy(conn, query, cwd_filter):
        seen.append(query)
        return real(conn, query, cwd_filter)

    day = 1_767_225_600_000  # 2026-01-01T00:00Z
    with mock.patch.object(sqlite_usage, "_query_calls", spy):
        assert store.usage(UsageQuery(since_ms=day))[0].calls == 1
        assert store.usage(UsageQuery(since_ms=day + 7 * 60_000))[0].calls == 1  # 00:07: not a bucket edge
        assert store.usage(UsageQuery(price_all=True))[0].calls == 1
    assert [q.since_ms for q in seen] == [day + 7 * 60_000, None]
    assert day % BUCKET_MS == 0
    store.close()


def test_an_overflowed_rollup_falls_back_to_usage_calls(tmp_path):
    # SQLite turns an integer sum past 2**63 into a float; a report never uses one.
    store = SqliteStore(str(tmp_path / "s.db"))
    store.create({"type": "session", "version": 4, "id": "s", "createdAt": CREATED[0], "cwd": "/w"},
                 [_entry("a", None, "2026-01-01T10:05:00.000Z", 5, 0.5, "m")])
    store.settle_derived()
    conn = store.db.connection()
    conn.execute("UPDATE usage_rollup SET cost_nanos = cost_nanos + 9223372036854775807")
    assert conn.execute("SELECT typeof(cost_nanos) FROM usage_rollup").fetchone()[0] == "real"
    assert usage_report(store, by="model").totals.cost_nanos == 500_000_000  # $0.5, from usage_calls
    store.close()
