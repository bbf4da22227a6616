"""The usage ledger on PostgreSQL SQL aggregates over ``usage_ledger``
give exactly the rows :func:`sessiontree.core.usage.aggregate` computes from the entries,
for every kind of query, on random stores full of copies."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import billed_assistant_cost as _assistant
from builders import usage_header as _header
from sessiontree.core import usage as core_usage
from sessiontree.stores.listing import cwd_matches, resolve_cwd
from sessiontree.stores.postgres.store import PostgresStore

UsageQuery = core_usage.UsageQuery

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("pg_cluster")]


def _expected(sessions, query):
    wanted = resolve_cwd(query.cwd) if query.cwd is not None else None
    return core_usage.aggregate(sessions, query, lambda cwd: cwd_matches(cwd, wanted))


def _rows(rows):
    return sorted((r.session_id or "", r.cwd or "", r.provider or "", r.model or "", r.bucket, r.recorded, r.copied,
                   r.per_call, r.calls, r.input, r.output, r.cache_read, r.cache_write, r.cost_nanos) for r in rows)


QUERIES = [UsageQuery(), UsageQuery(by_time=False), UsageQuery(per_session=True), UsageQuery(price_all=True),
           UsageQuery(per_session=True, by_time=False, price_all=True), UsageQuery(cwd="/w/a"),
           UsageQuery(cwd="/w/b", by_time=False), UsageQuery(since_ms=1_767_261_600_000),
           UsageQuery(until_ms=1_767_263_400_000, per_session=True), UsageQuery(session_id="s0"),
           UsageQuery(session_id="s2", by_time=False), UsageQuery(session_id="s3", price_all=True)]

call = st.tuples(st.sampled_from(["2026-01-01T09:50:00.000Z", "2026-01-01T10:00:00.000Z",
                                  "2026-01-01T10:20:00.000Z", "2026-01-01T10:40:00.000Z"]),
                 st.sampled_from([0, 5, 7]), st.sampled_from([None, 0, 0.002, 0.5]), st.sampled_from(["m", "n"]))
session = st.tuples(st.sampled_from(["2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z"]),
                    st.sampled_from(["/w/a", "/w/b"]), st.lists(call, max_size=4),
                    st.lists(st.integers(0, 7), max_size=3))  # copied calls


@pytest.fixture(scope="module")
def shared_url(pg_cluster):
    name = pg_cluster.new_database("usage")
    yield pg_cluster.url(name)
    pg_cluster.drop_database(name)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.lists(session, min_size=1, max_size=4))
def test_ledger_sums_equal_the_rule_on_random_stores(shared_url, sessions):
    store = PostgresStore(shared_url)
    try:
        for sid in store.session_ids():
            store.delete(sid)
        made = []
        pool = []  # every call written so far: copies reuse them verbatim, as forks do
        for n, (created, cwd, calls, copies) in enumerate(sessions):
            entries, parent = [], None
            for k, (ts, inp, cost, model) in enumerate(calls):
                entry = _assistant(f"e{n}x{k}", parent, ts, inp, cost, model)
                entries.append(entry)
                parent = entry["id"]
            for index in copies:
                if pool or entries:
                    # From an earlier session (a copy) or this one (the same call twice in one
                    # session: distinct calls, as the rule says).
                    candidates = pool + entries
                    source = candidates[index % len(candidates)]
                    entries.append({**source, "id": f"c{n}x{len(entries)}", "parentId": parent})
                    parent = entries[-1]["id"]
            pool.extend(entries)
            made.append((_header(f"s{n}", created, cwd), entries))
        for head, entries in made:
            store.create(head, entries[:1])
            if entries[1:]:
                store.append(head["id"], entries[1:])
        for query in QUERIES:
            assert _rows(store.usage(query)) == _rows(_expected(made, query)), query
    finally:
        store.close()


def test_ledger_is_derived_data(pg_url):
    store = PostgresStore(pg_url)
    entries = [_assistant("a1", None, "2026-01-01T10:00:00.000Z", 5, 0.5),
               _assistant("a2", "a1", "2026-01-01T10:20:00.000Z", 6, None)]
    store.create(_header("one"), entries)
    store.create(_header("two", created="2026-02-01T00:00:00.000Z"), entries[:1])  # a copy
    before = _rows(store.usage(UsageQuery(per_session=True)))
    assert [row[8] for row in before] == [1, 1]  # two calls, the copy counted once, owned by "one"
    with store.db.transaction("test", write=False) as conn:
        ledger = conn.execute("SELECT * FROM usage_ledger ORDER BY session_id, seq").fetchall()
    assert len(ledger) == 3
    assert store.reindex() == 2
    with store.db.transaction("test", write=False) as conn:
        assert conn.execute("SELECT * FROM usage_ledger ORDER BY session_id, seq").fetchall() == ledger
    store.delete("one")  # the copy's owner is now "two"
    assert _rows(store.usage(UsageQuery(per_session=True)))[0][0] == "two"
    store.replace_session(_header("two", created="2026-02-01T00:00:00.000Z"), entries)
    assert sum(row.calls for row in store.usage()) == 2
    assert store.verify() == []
    store.close()


def test_an_older_schema_read_only_is_answered_from_the_entries(pg_url):
    import psycopg

    store = PostgresStore(pg_url)
    store.create(_header("one"), [_assistant("a1", None, "2026-01-01T10:00:00.000Z", 5, 0.5)])
    expected = _rows(store.usage())
    store.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        # An older schema has neither the ledger nor the later steps (m007's views read it).
        conn.execute("DROP TABLE usage_ledger CASCADE")
        conn.execute("DELETE FROM schema_migrations WHERE name IN ('m004_usage_ledger', 'm008_team',"
                     " 'm009_usage_rollup')")
    with PostgresStore(pg_url, readonly=True) as readonly:
        assert _rows(readonly.usage()) == expected
    with PostgresStore(pg_url) as migrated:  # the step fills the ledger from the entries
        assert _rows(migrated.usage()) == expected
        with migrated.db.transaction("test", write=False) as conn:
            assert conn.execute("SELECT count(*) FROM usage_ledger").fetchone()[0] == 1


def test_huge_token_counts_do_not_fail_an_append(pg_url):
    with PostgresStore(pg_url) as store:
        store.create(_header("one"), [_assistant("a1", None, "2026-01-01T10:00:00.000Z", 2**70, None)])
        # Beyond 2**53 - 1 no agent counted it: unusable, 0 tokens (core.usage.MAX_COUNT), as on every store.
        assert [row.input for row in store.usage()] == [0]


def _ledger_states(store):
    with store.db.transaction("test", write=False) as conn:
        return {(sid, seq): shared for sid, seq, shared in conn.execute(
            "SELECT session_id, seq, shared FROM usage_ledger")}


def test_store_wide_stats_read_the_rollup_not_the_ledger(pg_url):
    """Issue 45: a store-wide report sums ``usage_rollup`` (one row per session, model and
    quarter hour), so changing the ledger rows of keys one session holds changes only the
    reports that must read them (session mode, ``price_all``), not ``stats``."""
    import psycopg

    with PostgresStore(pg_url) as store:
        entries = [_assistant("a1", None, "2026-01-01T10:00:00.000Z", 5, 0.5),
                   _assistant("a2", "a1", "2026-01-01T10:20:00.000Z", 6, None)]
        store.create(_header("one"), entries)
        queries = [UsageQuery(), UsageQuery(per_session=True), UsageQuery(by_time=False),
                   UsageQuery(since_ms=1_767_261_600_000, until_ms=1_767_263_400_000)]
        before = [_rows(store.usage(q)) for q in queries]
        assert before[0] == _rows(_expected([(_header("one"), entries)], UsageQuery()))
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE usage_ledger SET input = input + 1000")  # not through the store
    with PostgresStore(pg_url) as store:
        assert [_rows(store.usage(q)) for q in queries] == before
        assert sum(row.input for row in store.usage(UsageQuery(session_id="one"))) == 11 + 2000
        assert store.reindex() == 1
        assert [_rows(store.usage(q)) for q in queries] == before


def test_a_key_held_by_a_second_session_leaves_the_rollup(pg_url):
    """A copied call (a fork) is summed once: its rows leave the rollup and are
    de-duplicated per query; after its other holder is deleted it stays exact, and a
    whole-store reindex rolls it up again."""
    with PostgresStore(pg_url) as store:
        entries = [_assistant("a1", None, "2026-01-01T10:00:00.000Z", 5, 0.5),
                   _assistant("a2", "a1", "2026-01-01T10:20:00.000Z", 6, None)]
        store.create(_header("one"), entries)
        assert set(_ledger_states(store).values()) == {False}
        store.create(_header("two", created="2026-02-01T00:00:00.000Z"), entries[:1])  # a copy of a1
        assert _ledger_states(store) == {("one", 0): True, ("one", 1): False, ("two", 0): True}
        made = [(_header("one"), entries), (_header("two", created="2026-02-01T00:00:00.000Z"), entries[:1])]
        for query in QUERIES[:9]:
            assert _rows(store.usage(query)) == _rows(_expected(made, query)), query
        assert sum(row.calls for row in store.usage()) == 2
        store.delete("one")
        assert _ledger_states(store) == {("two", 0): True}
        assert _rows(store.usage(UsageQuery(per_session=True))) == _rows(
            _expected(made[1:], UsageQuery(per_session=True)))
        store.reindex()
        assert _ledger_states(store) == {("two", 0): False}
        assert _rows(store.usage(UsageQuery(per_session=True))) == _rows(
            _expected(made[1:], UsageQuery(per_session=True)))
