"""Search on PostgreSQL: the pg_trgm index, its fallback, ranking, and the index as
derived data. The conformance tests (the same hits as every store) are in tests/search/test_search.py,
whose ``store`` fixture includes PostgreSQL."""

from __future__ import annotations

import psycopg
import pytest

from builders import search_header as header
from builders import search_message as msg
from search_corpus import CORPUS, EXPECTED, fill, ids
from sessiontree import SessionManager
from sessiontree.core.search import parse_query
from sessiontree.errors import StorageError
from sessiontree.stores import MemoryStore
from sessiontree.stores.postgres import search as postgres_search
from sessiontree.stores.postgres import store as postgres_module
from sessiontree.stores.postgres.store import PostgresStore

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("pg_cluster")]


@pytest.fixture
def pg(pg_url):
    store = fill(PostgresStore(pg_url))
    yield store
    store.close()


def index_rows(store):
    with store.db.transaction("test", write=False) as conn:
        return conn.execute("SELECT session_id, seq, type, role, ts_ms, folded, tsv::text FROM search_entries"
                            " ORDER BY session_id, seq").fetchall()


def test_same_hits_as_a_scan_for_hostile_queries(pg):
    memory = fill(MemoryStore())
    for query in ["🎉", "a\x00b", "\"NEAR(x y)\"", "NEAR(x y)", "party and", "a-b", "ΣΥΦ", "tt", "%", "_", "\\",
                  "100%", "a_b", "'", "':*", "x & y", "!retry", "retry:*", "ab" * 300, "é" * 600, "K"]:
        assert ids(pg.search(query, limit=None)) == ids(memory.search(query, limit=None)), query


def test_like_wildcards_are_literal(pg):
    pg.create(header("sess-wild", "/w"), [msg("w1000001", None, "user", "50% off_sale \\ done", 0),
                                          msg("w2000002", "w1000001", "user", "50X offXsale", 1)])
    assert ids(pg.search("50%", limit=None)) == {"w1000001"}
    assert ids(pg.search("off_sale", limit=None)) == {"w1000001"}
    assert ids(pg.search("\\", limit=None)) == {"w1000001"}
    assert ids(pg.search("f_", limit=None)) == {"w1000001"}  # short: strpos, no wildcard either


def test_ranking_and_limit(pg):
    order = [hit.entry_id for hit in pg.search("retry", limit=None)]
    assert order[0] == "a7000007" and order[-1] == "c2000002"  # three times in a short text; once in 1,500 chars
    ranks = [hit.rank for hit in pg.search("retry", limit=None)]
    assert ranks == sorted(ranks, reverse=True)
    assert [hit.entry_id for hit in pg.search("retry", limit=3)] == order[:3]
    # A term inside a longer word ranks by prefix: 東京タワー starts with 東京.
    assert [hit.entry_id for hit in pg.search("東京", limit=None)] == ["b1000001", "a9000009"]
    # Only terms without words: every rank 0, newest first.
    assert [hit.rank for hit in pg.search("*", limit=None)] == [0.0]


def test_a_limit_inside_a_tie_keeps_the_first_entry_ids(pg_url):
    # The same text at the same minute: hits the score and time cannot tell apart, ordered by
    # session id, then entry id. In "tie-b" the ids run backwards from the stored order, so
    # a plan that stopped at the limit in stored order would keep e5/e4 instead of e1/e2.
    backwards = [f"e{n}00000{n}" for n in range(5, 0, -1)]
    entries = [msg(entry_id, backwards[i - 1] if i else None, "user", "knot tie", 0)
               for i, entry_id in enumerate(backwards)]
    batch = [(header("tie-a", "/w"), [msg("m0000001", None, "user", "knot tie", 0)]),
             (header("tie-b", "/w"), entries),
             (header("tie-c", "/w"), [msg("a0000001", None, "user", "knot tie", 0)])]
    memory = MemoryStore()
    store = PostgresStore(pg_url)
    try:
        for target in (store, memory):
            for session_header, session_entries in batch:
                target.create(session_header, session_entries)
        full = ["m0000001", "e1000001", "e2000002", "e3000003", "e4000004", "e5000005", "a0000001"]
        for limit in (1, 2, 3, 6, 7, 50):
            got = [hit.entry_id for hit in store.search("knot tie", limit=limit)]
            assert got == full[:limit], limit
            assert got == [hit.entry_id for hit in memory.search("knot tie", limit=limit)], limit
    finally:
        store.close()


def test_rank_query_quotes_everything():
    assert postgres_search.rank_query(parse_query("retry \"a-b\" *")) == "'retry':* | 'a':* | 'b':*"
    assert postgres_search.rank_query(parse_query("* % '")) is None
    assert postgres_search.rank_query(parse_query("x" * 600)) is None


def test_the_trigram_index_answers_long_terms(pg):
    with pg.db.transaction("test", write=False) as conn:
        assert postgres_search.trigram_available(conn)
        conn.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(row[0] for row in conn.execute(
            "EXPLAIN SELECT 1 FROM search_entries WHERE folded LIKE %s AND strpos(folded, %s) > 0",
            ("%retry%", "py")))
    assert "search_entries_trgm" in plan


def test_the_index_and_the_scan_give_the_same_hits_in_the_same_order(pg, monkeypatch):
    # LIKE through the trigram index, or strpos over every row: the same exact substring test.
    # (Stores rank differently: the memory store decides the set, not the order.)
    memory = fill(MemoryStore())
    for query in [*EXPECTED, "a-b", "100%", "a_b", "tt", "retry py", "ΣΥΦ"]:
        for limit in (None, 3):
            answers = []
            for through_index in (True, False):
                monkeypatch.setattr(postgres_search, "_trigram_pays", lambda conn, cond, params, v=through_index: v)
                answers.append([(hit.entry_id, hit.rank) for hit in pg.search(query, limit=limit)])
            assert answers[0] == answers[1], (query, limit)
            if limit is None:
                assert {entry_id for entry_id, _ in answers[0]} == ids(memory.search(query, limit=None)), query


def test_a_word_in_a_large_share_of_the_entries_is_scanned(pg_url):
    # 40 entries: "common" in all of them, "rarely" in one (1/40 < SCAN_SHARE <= 40/40).
    store = PostgresStore(pg_url)
    try:
        chain = [msg(f"f{n:07d}", f"f{n - 1:07d}" if n else None, "user",
                     "common words" + (" rarely" if n == 7 else ""), 0) for n in range(40)]
        store.create(header("share", "/w"), chain)
        with store.db.transaction("test", write=True) as conn:
            conn.execute("ANALYZE search_entries")
            conn.execute("SET LOCAL enable_seqscan = off")  # a table this small is scanned anyway
            assert postgres_search._trigram_pays(conn, "s.folded LIKE %s", ["%rarely%"])
            assert not postgres_search._trigram_pays(conn, "s.folded LIKE %s", ["%common%"])
            conn.execute("SET LOCAL enable_seqscan = on")
            conn.execute("SET LOCAL enable_bitmapscan = off")
            conn.execute("SET LOCAL enable_indexscan = off")
            # A plan without the index: strpos.
            assert not postgres_search._trigram_pays(conn, "s.folded LIKE %s", ["%rarely%"])
        assert [hit.entry_id for hit in store.search("common", limit=2)] == ["f0000000", "f0000001"]
        assert [hit.entry_id for hit in store.search("rarely", limit=2)] == ["f0000007"]
    finally:
        store.close()


def test_without_pg_trgm_search_scans_with_the_same_hits(pg_url, monkeypatch):
    def refused(conn):
        raise psycopg.errors.UndefinedFile('could not open extension control file "pg_trgm.control"')

    monkeypatch.setattr(postgres_search, "_create_trigram_index", refused)
    store = fill(PostgresStore(pg_url))
    with store.db.transaction("test", write=False) as conn:
        assert not postgres_search.trigram_available(conn)
    for query in ("retry", "dedup", "py", "東京"):
        assert ids(store.search(query, limit=None)) == EXPECTED[query]
    monkeypatch.undo()  # the extension is installed now: a full reindex creates the index
    assert store.reindex() == 3
    with store.db.transaction("test", write=False) as conn:
        assert postgres_search.trigram_available(conn)
    assert ids(store.search("retry", limit=None)) == EXPECTED["retry"]
    store.close()


def test_an_older_schema_is_scanned_read_only_and_filled_when_migrated(pg_url):
    fill(PostgresStore(pg_url)).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TABLE search_entries")
        conn.execute("DELETE FROM schema_migrations WHERE name = 'm003_search_index'")
    readonly = PostgresStore(pg_url, readonly=True)
    assert ids(readonly.search("dedup", limit=None)) == EXPECTED["dedup"]
    readonly.close()
    migrated = PostgresStore(pg_url)  # the step fills the index from the stored entries
    assert "m003_search_index" in migrated.applied_migrations()
    assert len(index_rows(migrated)) == 14  # entries with text: 8 + 4 + 2
    assert ids(migrated.search("retry", limit=None)) == EXPECTED["retry"]
    migrated.close()


def test_the_index_is_derived_data(pg):
    manager = SessionManager.open(pg, "sess-beta")
    manager.append_message({"role": "user", "content": "a zebra crossing", "timestamp": 5})
    forked = manager.fork_to("/w/fork", pg)
    pg.delete("sess-gamma")
    head, entries = CORPUS[0]
    pg.replace_session(head, entries[:3])  # sess-alpha shrinks to three entries
    before = index_rows(pg)
    assert {row[0] for row in before} == {"sess-alpha", "sess-beta", forked.get_session_id()}
    assert ids(pg.search("zebra", limit=None)) == {manager.get_entries()[-1]["id"]}
    assert len(pg.search("zebra", limit=None, session=forked.get_session_id())) == 1
    assert ids(pg.search("retry", limit=None)) == {"a1000001", "a2000002", "b4000004"}
    assert pg.reindex() == 3
    assert index_rows(pg) == before
    assert pg.verify() == []


def test_a_failed_append_leaves_no_index_rows(pg, monkeypatch):
    def broken(conn, session_id, rows):
        raise psycopg.errors.DiskFull("injected")

    monkeypatch.setattr(postgres_search.INDEX, "add", broken)
    with pytest.raises(StorageError):
        pg.append("sess-beta", [msg("b5000005", "b4000004", "user", "zebra crossing", 5)])
    monkeypatch.undo()
    assert pg.search("zebra") == []
    assert len(pg.load("sess-beta").entries) == 4


def test_lossy_columns_are_decided_from_the_records(pg):
    """A cwd and a role PostgreSQL text cannot hold exactly: the copies are U+FFFD, the
    filters answer from the exact values."""
    pg.create({**header("sess-odd", "/w/\ud800x")}, [
        msg("o1000001", None, "user", "odd retry", 0),
        {"type": "message", "id": "o2000002", "parentId": "o1000001", "timestamp": "2026-01-01T10:01:00.000Z",
         "message": {"role": "r\ud800", "content": "odd retry again", "timestamp": 1}}])
    assert ids(pg.search("odd", cwd="/w/\ud800x", limit=None)) == {"o1000001", "o2000002"}
    assert ids(pg.search("odd", cwd="/w/\udc00x", limit=None)) == set()  # same U+FFFD copy, other cwd
    assert ids(pg.search("odd", roles=["r\ud800"], limit=None)) == {"o2000002"}
    assert ids(pg.search("odd", roles=["r\udc00"], limit=None)) == set()
    assert pg.search("odd", session="sess-\ud800") == []


def test_module_registers_its_step_after_sync_state():
    names = [name for name, _ in postgres_module.MIGRATIONS]
    assert names.index("m002_sync_state") < names.index("m003_search_index")
    assert postgres_search.INDEX in postgres_module.DERIVED_INDEXES


def test_frequent_terms_stop_at_the_newest_matches(pg_url, monkeypatch):
    """Issue 45: terms the server expects in a large share of the entries are read newest
    first, and a limited search stops after EARLY_STOP matches; the hits are ranked
    within those (docs/search.md, "Frequent terms on PostgreSQL"). Synthetic entries:
    the rule is about counts no real file reaches in a test."""
    store = PostgresStore(pg_url)
    try:
        # Ten matches, one a minute; the oldest two rank best (the word three times).
        chain = [msg(f"g{n:07d}", f"g{n - 1:07d}" if n else None, "user",
                     "walrus walrus walrus" if n < 2 else "a walrus among many other words here", n)
                 for n in range(10)]
        store.create(header("many", "/w"), chain)
        monkeypatch.setattr(postgres_search, "_trigram_pays", lambda conn, cond, params: False)
        everything = [hit.entry_id for hit in store.search("walrus", limit=None)]
        assert everything[:2] == ["g0000001", "g0000000"]  # best rank, then newest
        assert [hit.entry_id for hit in store.search("walrus", limit=3)] == everything[:3]  # 10 <= EARLY_STOP
        monkeypatch.setattr(postgres_search, "EARLY_STOP", 4)
        # The four newest matches (minutes 6-9), equal in rank: newest first.
        assert [hit.entry_id for hit in store.search("walrus", limit=3)] == ["g0000009", "g0000008", "g0000007"]
        assert len(store.search("walrus", limit=50)) == 4
        assert len(store.search("walrus", limit=None)) == 10  # no limit: every match
        # Through the trigram index (a rare term) nothing stops early.
        monkeypatch.setattr(postgres_search, "_trigram_pays", lambda conn, cond, params: True)
        assert len(store.search("walrus", limit=50)) == 10
    finally:
        store.close()
