"""A member's search with frequent words (stores/postgres/recent.py, step
``m011_owner_recent``): decided from the member's own newest rows, answered by walking
them newest first, and the walking function keeps to the caller's rows under direct SQL.

Synthetic sessions: each person's entries one second apart (``user_at``), so which rows
are newest is known from how they were built."""

from __future__ import annotations

import psycopg
import pytest

from builders import header, user_at
from sessiontree.stores.postgres import recent
from sessiontree.stores.postgres import search as pg_search
from team_support import as_role, team_stores

pytestmark = pytest.mark.postgres


def _entries(who: str) -> list[dict]:
    """Ten user entries ``e1``..``e10`` saying ``zebra WHO K`` at second K (seq K-1)."""
    out, parent = [], None
    for k in range(1, 11):
        out.append(user_at(f"e{k}", parent, f"zebra {who} {k}", k))
        parent = f"e{k}"
    return out


@pytest.fixture
def team(pg_url):
    with team_stores(pg_url, {"alice": "member", "bob": "member"}) as (owner, stores):
        stores["alice"].create(header("s-alice"), _entries("alice"))
        stores["bob"].create(header("s-bob"), _entries("bob"))
        yield pg_url, owner, stores


def test_own_recent_rows_returns_the_callers_rows_newest_first(team):
    pg_url, _owner, _stores = team
    with psycopg.connect(as_role(pg_url, "bob")) as conn:
        rows = conn.execute("SELECT * FROM own_recent_rows(ARRAY['zebra'], 3, NULL)").fetchall()
        assert rows == [("s-bob", 9), ("s-bob", 8), ("s-bob", 7)]  # e10, e9, e8
        # p_visit: only the newest two rows are looked at.
        assert conn.execute("SELECT * FROM own_recent_rows(ARRAY['zebra'], 10, 2)").fetchall() == [
            ("s-bob", 9), ("s-bob", 8)]
        assert conn.execute("SELECT * FROM own_recent_rows(ARRAY['bob 3'], 10, NULL)").fetchall() == [("s-bob", 2)]
        # Alice's words are in the table, not in bob's rows.
        assert conn.execute("SELECT * FROM own_recent_rows(ARRAY['alice'], 10, NULL)").fetchall() == []
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE ROLE eve LOGIN")
    with psycopg.connect(as_role(pg_url, "eve")) as conn:
        # Not on the team: no grant, so the function is refused (not an empty answer).
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM own_recent_rows(ARRAY['zebra'], 3, NULL)")


def test_frequent_words_give_the_best_of_the_members_newest_matches(team, monkeypatch):
    _url, _owner, stores = team
    monkeypatch.setattr(recent, "SAMPLE", 4)
    monkeypatch.setattr(pg_search, "EARLY_STOP", 3)
    # "zebra" is in all of alice's four newest rows: frequent; her three newest matches.
    hits = stores["alice"].search("zebra", limit=50)
    assert sorted(h.entry_id for h in hits) == ["e10", "e8", "e9"]
    assert {h.session_id for h in hits} == {"s-alice"}


def test_a_rare_word_is_found_through_the_trigram_index_exactly(team, monkeypatch):
    _url, _owner, stores = team
    monkeypatch.setattr(recent, "SAMPLE", 4)
    monkeypatch.setattr(pg_search, "EARLY_STOP", 3)
    # In none of the four newest rows (e7..e10): not frequent, so every match; "alice 1"
    # is also in "zebra alice 10".
    assert [h.entry_id for h in stores["alice"].search("alice 3", limit=50)] == ["e3"]
    assert sorted(h.entry_id for h in stores["alice"].search("alice 1", limit=50)) == ["e1", "e10"]
    assert stores["alice"].search("bob", limit=50) == []


def test_a_member_with_fewer_rows_than_the_sample_gets_every_match(team):
    _url, owner, stores = team
    assert recent.SAMPLE > 10
    hits = stores["alice"].search("zebra", limit=50)
    assert sorted(h.entry_id for h in hits) == sorted(f"e{k}" for k in range(1, 11))
    assert [(h.session_id, h.entry_id) for h in hits] == [
        (h.session_id, h.entry_id) for h in owner.search("zebra", limit=None) if h.session_id == "s-alice"]


def test_the_policies_are_answered_by_the_owner_indexes(team):
    """The own_rows policies compare owner in the default collation (step m011), so an
    index on owner answers them; compared with current_user (a name, collation "C")
    they were a filter over every row."""
    pg_url, _owner, _stores = team
    with psycopg.connect(as_role(pg_url, "bob")) as conn:
        conn.execute("SET enable_seqscan = off")
        for table, index in (("usage_rollup", "usage_rollup_owner"), ("sessions", "sessions_owner"),
                             ("search_entries", "search_entries_owner_recent")):
            plan = "\n".join(row[0] for row in conn.execute(f"EXPLAIN SELECT count(*) FROM {table}"))
            assert index in plan and "Index Cond: (owner = " in plan, plan
        # Still only bob's rows.
        assert {row[0] for row in conn.execute("SELECT session_id FROM search_entries")} == {"s-bob"}
