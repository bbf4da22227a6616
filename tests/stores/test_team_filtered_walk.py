"""A member's search with filters (time window, role, session, cwd) takes the walk of
their own newest rows (step ``m013_filtered_walk``, stores/postgres/recent.py), with the
same hits as the paths that do not walk: the member's search without the walk, and the
tables' owner's search over every row, kept to the member's sessions.

Synthetic sessions (builders): each entry at its own second, user and assistant
messages in turn, so which rows are newest and which pass a filter is known from how
they were built."""

from __future__ import annotations

import datetime

import psycopg
import pytest

from builders import assistant_at, header, user_at
from sessiontree.stores.postgres import recent
from sessiontree.stores.postgres import search as pg_search
from sessiontree.stores.postgres.store import PostgresStore
from team_support import as_role, team_stores

pytestmark = pytest.mark.postgres

#: (session id, cwd, first second) of each person's sessions.
_SESSIONS = {
    "alice": [("a-1", "/w/alpha", 100), ("a-2", "/w/alpha", 300), ("a-3", "/w/beta", 500)],
    "bob": [("b-1", "/w/alpha", 200), ("b-2", "/w/beta", 400)],
}
_PER_SESSION = 12


def _entries(who: str, session_id: str, start: int) -> list[dict]:
    """``_PER_SESSION`` entries, user then assistant in turn, at seconds ``start + k``:
    every one says ``zebra``; every third also ``quagga``; user entries ``ask``."""
    out, parent = [], None
    for k in range(_PER_SESSION):
        words = f"zebra {who} {session_id} n{k}" + (" quagga" if k % 3 == 0 else "")
        entry_id = f"{session_id}-e{k}"
        if k % 2 == 0:
            entry = user_at(entry_id, parent, f"ask {words}", 1)
        else:
            entry = assistant_at(entry_id, parent, words, 1)
        entry["timestamp"] = _stamp(start + k)
        out.append(entry)
        parent = entry_id
    return out


@pytest.fixture
def team(pg_url):
    with team_stores(pg_url, dict.fromkeys(_SESSIONS, "member")) as (owner, stores):
        for name, sessions in _SESSIONS.items():
            for session_id, cwd, start in sessions:
                stores[name].create(header(session_id, cwd=cwd), _entries(name, session_id, start))
        yield pg_url, owner, stores


_START = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def _stamp(n: int) -> str:
    """The entry ``timestamp`` of second ``n`` after 2026-01-01T00:00:00Z."""
    return (_START + datetime.timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _second(n: int) -> float:
    """Unix ms of second ``n`` (:func:`_stamp`)."""
    return (_START + datetime.timedelta(seconds=n)).timestamp() * 1000


#: Filter sets: time windows (one not on a whole millisecond), roles, one session, a
#: cwd, and combinations. Each keeps some of alice's matches and drops others.
FILTERS = [
    {"since": _second(305)},
    {"until": _second(306)},
    {"since": _second(104) + 0.5, "until": _second(507) - 0.25},
    {"roles": ["assistant"]},
    {"roles": ["user"], "since": _second(300)},
    {"session": "a-2"},
    {"session": "a-2", "roles": ["user"]},
    {"session": "b-1"},  # bob's: nothing for alice
    {"cwd": "/w/alpha"},
    {"cwd": "/w/beta", "until": _second(505)},
    {"cwd": "/w/alpha", "roles": ["assistant"], "since": _second(110)},
]
QUERIES = ["zebra", "zebra quagga", "ask zebra", "alice a-2", "quagga n1"]


def _keys(hits) -> list[tuple[str, str]]:
    return [(h.session_id, h.entry_id) for h in hits]


def _owner_view(owner: PostgresStore, who: str, query: str, filters: dict, limit: int) -> list[tuple[str, str]]:
    """The tables' owner's search (no row-level security, no walk), kept to ``who``'s
    sessions: the plain path's answer for that member."""
    mine = {session_id for session_id, _cwd, _start in _SESSIONS[who]}
    return [key for key in _keys(owner.search(query, limit=None, **filters)) if key[0] in mine][:limit]


def _walk_calls(monkeypatch) -> list:
    """Record the filters each walk of the member's rows was given."""
    calls: list = []
    real = recent.own_recent_keys

    def spy(conn, terms, cap, visit, where=None):
        calls.append(where)
        return real(conn, terms, cap, visit, where)

    monkeypatch.setattr(recent, "own_recent_keys", spy)
    return calls


@pytest.mark.parametrize("filters", FILTERS, ids=lambda f: "-".join(sorted(f)))
def test_a_filtered_search_walks_and_finds_what_the_plain_paths_find(team, monkeypatch, filters):
    _url, owner, stores = team
    # A sample of 4 makes "zebra" frequent (every row holds it), so the search walks;
    # an early stop above every match makes the walk's answer exact.
    monkeypatch.setattr(recent, "SAMPLE", 4)
    monkeypatch.setattr(pg_search, "EARLY_STOP", 1_000)
    calls = _walk_calls(monkeypatch)
    walked = {query: _keys(stores["alice"].search(query, limit=50, **filters)) for query in QUERIES}
    if filters.get("session") != "b-1":  # bob's session: no session of alice's to search at all
        assert calls and all(where is not None for where in calls), "the filtered search did not walk"
    monkeypatch.setattr(recent, "walk_level", lambda conn: 0)
    for query in QUERIES:
        plain = _keys(stores["alice"].search(query, limit=50, **filters))
        assert walked[query] == plain, query
        assert walked[query] == _owner_view(owner, "alice", query, filters, 50), query
    assert walked["zebra"] or filters.get("session") == "b-1"  # the filters keep something
    if filters.get("session") == "b-1":
        assert not any(walked.values())  # bob's session: none of alice's rows


def test_a_filtered_frequent_word_stops_at_the_newest_matches_that_pass(team, monkeypatch):
    _url, owner, stores = team
    monkeypatch.setattr(recent, "SAMPLE", 4)
    monkeypatch.setattr(pg_search, "EARLY_STOP", 3)
    filters = {"roles": ["assistant"], "until": _second(310)}
    hits = stores["alice"].search("zebra", limit=50, **filters)
    # Alice's assistant entries before second 310, newest first: a-2 at 309, 307, 305.
    assert sorted(h.entry_id for h in hits) == ["a-2-e5", "a-2-e7", "a-2-e9"]
    every = _owner_view(owner, "alice", "zebra", filters, 1_000)
    assert {"a-2-e5", "a-2-e7", "a-2-e9"} < {entry for _sid, entry in every}
    # A cwd filter: the newest three of a-1 and a-2 (/w/alpha), a-3 being in /w/beta.
    hits = stores["alice"].search("zebra", limit=50, cwd="/w/alpha")
    assert sorted(h.entry_id for h in hits) == ["a-2-e10", "a-2-e11", "a-2-e9"]


def test_a_session_filter_smaller_than_the_sample_reads_every_row(team, monkeypatch):
    _url, owner, stores = team
    assert recent.SAMPLE > _PER_SESSION
    calls = _walk_calls(monkeypatch)
    hits = stores["alice"].search("quagga", limit=50, session="a-1")
    assert sorted(h.entry_id for h in hits) == ["a-1-e0", "a-1-e3", "a-1-e6", "a-1-e9"]
    assert calls and calls[0] is not None and calls[0].sessions == ["a-1"]
    assert _keys(hits) == _owner_view(owner, "alice", "quagga", {"session": "a-1"}, 50)


def test_the_filtered_walk_keeps_to_the_callers_rows(team):
    pg_url, _owner, _stores = team
    with psycopg.connect(as_role(pg_url, "bob")) as conn:
        # Alice's session asked for by name: none of bob's rows are in it.
        assert conn.execute("SELECT * FROM own_recent_rows(ARRAY['zebra'], 10, NULL, NULL, NULL, NULL,"
                            " ARRAY['a-1'])").fetchall() == []
        rows = conn.execute("SELECT * FROM own_recent_rows(ARRAY['zebra'], 2, NULL, NULL, NULL, ARRAY['user'],"
                            " ARRAY['b-1', 'a-1'])").fetchall()
        assert rows == [("b-1", 10), ("b-1", 8)]  # b-1's newest user entries (seconds 210, 208)
        # The window's bounds: at or after since, before until (whole milliseconds).
        since, until = int(_second(402)), int(_second(405))
        rows = conn.execute("SELECT * FROM own_recent_rows(ARRAY['zebra'], 10, NULL, %s, %s)",
                            (since, until)).fetchall()
        assert rows == [("b-2", 4), ("b-2", 3), ("b-2", 2)]
        # The ranking walk: bob's matches only, with their times and ranks, never text.
        rows = conn.execute("SELECT * FROM own_recent_scored(ARRAY['zebra'], 'zebra:*', 100, NULL, NULL, NULL,"
                            " ARRAY['a-1', 'b-1'])").fetchall()
        assert [row[:2] for row in rows] == [("b-1", seq) for seq in range(_PER_SESSION - 1, -1, -1)]
        assert all(row[3] > 0 for row in rows) and [row[2] for row in rows] == sorted(
            (row[2] for row in rows), reverse=True)
        assert conn.execute("SELECT * FROM own_recent_scored(ARRAY['alice'], NULL, 100)").fetchall() == []
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE ROLE mallory LOGIN")
    with psycopg.connect(as_role(pg_url, "mallory")) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM own_recent_rows(ARRAY['zebra'], 3, NULL, NULL, NULL, NULL, ARRAY['a-1'])")
        conn.rollback()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM own_recent_scored(ARRAY['zebra'], NULL, 3)")


@pytest.mark.parametrize("early_stop", [5, 1_000])
def test_the_ranking_walk_gives_the_hits_of_ranking_the_walks_keys(team, monkeypatch, early_stop):
    """Step m013's walk ranks its matches itself; step m011's gave keys that the search
    ranked in a second query. Same hits, same order, with and without an early stop."""
    _url, _owner, stores = team
    monkeypatch.setattr(recent, "SAMPLE", 4)
    monkeypatch.setattr(pg_search, "EARLY_STOP", early_stop)
    for query in [*QUERIES, "n1", "zebra alice"]:
        for limit in (1, 3, 50):
            scored = [(h.session_id, h.entry_id, h.rank) for h in stores["alice"].search(query, limit=limit)]
            with monkeypatch.context() as patch:
                patch.setattr(recent, "walk_level", lambda conn: 1)
                keyed = [(h.session_id, h.entry_id, h.rank) for h in stores["alice"].search(query, limit=limit)]
            assert scored == keyed, (query, limit)


def test_the_step_replaces_the_unfiltered_walk(pg_url, monkeypatch):
    import sessiontree.stores.postgres.connection as connection_module
    from sessiontree.stores.postgres.schema import MIGRATIONS

    names = [name for name, _ in MIGRATIONS]
    monkeypatch.setattr(connection_module, "MIGRATIONS", MIGRATIONS[:names.index("m013_filtered_walk")])
    with PostgresStore(pg_url) as old:
        old.team_add("alice", "member")
        with PostgresStore(as_role(pg_url, "alice")) as alice:
            alice.create(header("a-1", cwd="/w/alpha"), _entries("alice", "a-1", 100))
            # Step m011's walk, without filters; with one, the search takes the old path.
            assert len(alice.search("zebra", limit=50, roles=["user"])) == _PER_SESSION // 2
    monkeypatch.undo()
    with PostgresStore(pg_url) as migrated:
        assert migrated.applied_migrations() == names
    with psycopg.connect(pg_url) as conn:
        signatures = {row[0] for row in conn.execute(
            "SELECT oid::regprocedure::text FROM pg_proc WHERE proname = 'own_recent_rows'")}
    assert signatures == {recent.FILTERED.replace(", ", ",")}
    with PostgresStore(as_role(pg_url, "alice")) as alice:
        assert len(alice.search("zebra", limit=50, roles=["user"])) == _PER_SESSION // 2
    with psycopg.connect(as_role(pg_url, "alice")) as conn:
        # The three-argument call of step m011 answers as before (the new arguments default).
        assert conn.execute("SELECT count(*) FROM own_recent_rows(ARRAY['zebra'], 100, NULL)").fetchone()[0] \
            == _PER_SESSION


def test_the_lean_indexes_still_answer_the_walk(team):
    """Step m014_lean_indexes: search_entries_tsv (which no query asked) is gone, the
    walk seeks on the narrowed (owner, time) index, message_texts is found by a hash of
    its session id (its primary key is gone)."""
    pg_url, _owner, _stores = team
    with psycopg.connect(pg_url) as conn:
        indexes = dict(conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'search_entries'")
                       .fetchall())
        assert "search_entries_tsv" not in indexes
        assert indexes["search_entries_owner_recent"].endswith(
            "(owner, COALESCE(ts_ms, (0)::double precision) DESC)"), indexes
        texts = dict(conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'message_texts'")
                     .fetchall())
        assert list(texts) == ["message_texts_session"] and "USING hash (session_id)" in texts["message_texts_session"]
        key = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'usage_ledger_key'").fetchone()[0]
        assert "USING hash (dedup_key)" in key
        # A few rows: the planner would sort them all; forbid that, the table being large.
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            conn.execute(f"SET {setting} = off")
        plan = "\n".join(row[0] for row in conn.execute(
            "EXPLAIN SELECT session_id, seq FROM search_entries WHERE owner = 'alice'"
            " ORDER BY owner, coalesce(ts_ms, 0) DESC, session_id COLLATE \"C\", seq LIMIT 10"))
        assert "search_entries_owner_recent" in plan and "Presorted Key" in plan, plan


def test_the_step_keeps_an_index_built_beforehand(pg_url, monkeypatch):
    """docs/postgres.md, "Database size": a large database builds m014's indexes
    concurrently before the upgrade; the step keeps them (same name and definition)."""
    import sessiontree.stores.postgres.connection as connection_module
    from sessiontree.stores.postgres.schema import MIGRATIONS

    names = [name for name, _ in MIGRATIONS]
    monkeypatch.setattr(connection_module, "MIGRATIONS", MIGRATIONS[:names.index("m014_lean_indexes")])
    with PostgresStore(pg_url):
        pass
    monkeypatch.undo()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE INDEX CONCURRENTLY ledger_key_new ON usage_ledger USING hash (dedup_key)"
                     " WITH (fillfactor = 100)")
        conn.execute("DROP INDEX CONCURRENTLY usage_ledger_key")
        conn.execute("ALTER INDEX ledger_key_new RENAME TO usage_ledger_key")
        before = conn.execute("SELECT 'usage_ledger_key'::regclass::oid").fetchone()[0]
        old_recent = conn.execute("SELECT 'search_entries_owner_recent'::regclass::oid").fetchone()[0]
    with PostgresStore(pg_url) as store:
        assert store.applied_migrations() == names
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT 'usage_ledger_key'::regclass::oid").fetchone()[0] == before  # kept
        # The old, wide owner-recent index was replaced.
        assert conn.execute("SELECT 'search_entries_owner_recent'::regclass::oid").fetchone()[0] != old_recent
