"""A team store private by construction (docs/team.md): two members and a lead syncing into
one PostgreSQL database, each reading only their own content, through our store and
through direct SQL with their own role; the team aggregates; the audited door.

Synthetic sessions (builders): what is checked is who may read which rows, which no
real agent file shows; the figures compared are the members' own ``usage()`` sums."""

from __future__ import annotations

import psycopg
import pytest

from builders import assistant, chain, message_entry, text_block, usage_header, user
from sessiontree.errors import SessionNotFoundError, StorageError
from sessiontree.stores.postgres.store import PostgresStore
from team_support import as_role, team_stores

pytestmark = pytest.mark.postgres

PEOPLE = {"alice": "member", "bob": "member", "carol": "lead", "dana": "admin"}


def _session(sid: str, word: str, n_calls: int, cwd: str, start: int = 0) -> tuple[dict, list[dict]]:
    """A session of ``n_calls`` billed calls (distinct calls: their times differ by ``start``)."""
    entries = [message_entry("u0", user(f"please {word} now"))]
    parent = "u0"
    for k in range(n_calls):
        msg = assistant([text_block(f"{word} answer {k}")], ts=1767225600000 + start + k * 1000, model=f"m{k % 2}")
        msg["usage"] = {"input": 10 + k, "output": 5, "cacheRead": 0, "cacheWrite": 0,
                        "cost": {"total": 0.001 * (k + 1)}}
        entries.append(message_entry(f"a{k}", msg, parent))
        parent = f"a{k}"
    return usage_header(sid, cwd=cwd), chain(*entries)


@pytest.fixture
def team(pg_url):
    """The database owner's store with the four people added, and a store per person
    holding their own sessions (alice: 2 sessions, bob: 1, carol: 1)."""
    with team_stores(pg_url, PEOPLE) as (owner, stores):
        stores["alice"].create(*_session("s-alice-1", "zebra", 3, "/home/alice/proj/alpha"))
        stores["alice"].create(*_session("s-alice-2", "zebra", 1, "/home/alice/proj/beta", start=86_400_000))
        stores["bob"].create(*_session("s-bob-1", "yak", 2, "/home/bob/src/alpha"))
        stores["carol"].create(*_session("s-carol-1", "xerus", 1, "/home/carol/gamma"))
        yield owner, stores


def _totals(rows) -> tuple[int, int, int, int]:
    calls = sum(r.calls for r in rows)
    return calls, sum(r.input for r in rows), sum(r.output for r in rows), sum(r.cost_nanos for r in rows)


def test_each_member_reads_only_their_own_sessions(team):
    owner, stores = team
    alice, bob = stores["alice"], stores["bob"]
    assert sorted(i.id for i in alice.list_sessions()) == ["s-alice-1", "s-alice-2"]
    assert alice.session_ids() == ["s-alice-1", "s-alice-2"]
    assert bob.session_ids() == ["s-bob-1"]
    assert owner.session_ids() == ["s-alice-1", "s-alice-2", "s-bob-1", "s-carol-1"]
    with pytest.raises(SessionNotFoundError):
        alice.load("s-bob-1")
    assert not alice.exists("s-bob-1")
    assert [h.session_id for h in alice.search("yak")] == []
    assert {h.session_id for h in bob.search("yak")} == {"s-bob-1"}
    assert {h.session_id for h in alice.search("zebra")} == {"s-alice-1", "s-alice-2"}
    # The lead is refused content too.
    with pytest.raises(SessionNotFoundError):
        stores["carol"].load("s-alice-1")
    assert [h.session_id for h in stores["carol"].search("zebra")] == []


def test_a_member_cannot_write_into_another_members_session(team):
    _, stores = team
    with pytest.raises((SessionNotFoundError, StorageError)):
        stores["bob"].append("s-alice-1", [message_entry("b1", user("mine now"), "a2")])
    try:  # a delete of an id the store does not hold may be a no-op; it must not delete
        stores["bob"].delete("s-alice-1")
    except (SessionNotFoundError, StorageError):
        pass
    assert len(stores["alice"].load("s-alice-1").entries) == 4


def _all_tables(conn) -> list[str]:
    return [row[0] for row in conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') ORDER BY 1")]


def test_direct_sql_as_a_member_sees_only_their_rows(team, pg_url):
    _owner, _ = team
    with psycopg.connect(pg_url) as conn:
        tables = _all_tables(conn)
        rls = {row[0]: row[1] for row in conn.execute(
            "SELECT relname, relrowsecurity FROM pg_class WHERE relname = ANY(%s)", (tables,))}
    # Every table of the store but the list of schema steps is under row-level security.
    assert {t for t, on in rls.items() if not on} == {"schema_migrations"}
    for name, own in (("alice", {"s-alice-1", "s-alice-2"}), ("bob", {"s-bob-1"}), ("carol", {"s-carol-1"})):
        with psycopg.connect(as_role(pg_url, name)) as conn:
            for table in tables:
                columns = {row[0] for row in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = %s", (table,))}
                try:
                    rows = conn.execute(f"SELECT * FROM {table}").fetchall()
                except psycopg.errors.InsufficientPrivilege:
                    conn.rollback()
                    continue
                key = "id" if table == "sessions" else "session_id" if "session_id" in columns else None
                if key is not None and table not in ("team_audit", "deletion_log"):
                    seen = {r[0] for r in conn.execute(f"SELECT {key} FROM {table}")}
                    assert seen <= own, (name, table, seen)
                if table in ("entries", "sessions", "search_entries", "usage_ledger", "message_texts"):
                    assert rows, (name, table)
            # Others' content is not there even when asked for by id.
            for table in ("entries", "message_texts", "search_entries", "usage_ledger"):
                assert conn.execute(f"SELECT count(*) FROM {table} WHERE session_id <> ALL(%s)",
                                    (sorted(own),)).fetchone()[0] == 0
            assert conn.execute("SELECT count(*) FROM entries WHERE session_id = 's-bob-1'").fetchone()[0] == (
                3 if name == "bob" else 0)
            if PEOPLE[name] == "member":  # aggregates by user are for leads
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute("SELECT * FROM team_usage_by_user")
                conn.rollback()
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT * FROM team_read(1)")
    with psycopg.connect(as_role(pg_url, "bob")) as conn:
        # A row claiming bob as its owner may not hang off alice's session.
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO entries (session_id, seq, id, type, timestamp, json, crc)"
                         " VALUES ('s-alice-1', 99, 'x99', 'message', 't', '{}', 0)")
        conn.rollback()
        # The search helper that runs with the owner's rights returns only bob's rows.
        assert conn.execute("SELECT * FROM own_search_rows(ARRAY['%zebra%'], 100)").fetchall() == []
        assert {row[0] for row in conn.execute("SELECT * FROM own_search_rows(ARRAY['%yak%'], 100)")} == {"s-bob-1"}
    # The owner sees all four sessions' entries.
    with psycopg.connect(pg_url) as conn:
        assert {r[0] for r in conn.execute("SELECT DISTINCT session_id FROM entries")} == {
            "s-alice-1", "s-alice-2", "s-bob-1", "s-carol-1"}


def test_aggregates_agree_with_each_members_own_stats(team):
    _, stores = team
    own = {name: _totals(stores[name].usage()) for name in ("alice", "bob", "carol")}
    assert own["alice"] == (4, 10 + 11 + 12 + 10, 20, (1 + 2 + 3 + 1) * 1_000_000)
    assert own["bob"][0] == 2
    team_rows = stores["alice"].team_usage()
    assert all("user_name" not in row for row in team_rows)
    total = tuple(sum(row[k] for row in team_rows) for k in ("calls", "input", "output", "cost_nanos"))
    assert total == tuple(sum(v[i] for v in own.values()) for i in range(4))
    # No text, title or path in any aggregate column.
    for row in team_rows:
        assert "/" not in row["project"] and row["project"] in ("alpha", "beta", "gamma")
    # The lead reads them by user; a member may not.
    by_user = stores["carol"].team_usage(by_user=True)
    for name in ("alice", "bob", "carol"):
        mine = [row for row in by_user if row["user_name"] == name]
        assert tuple(sum(row[k] for row in mine) for k in ("calls", "input", "output", "cost_nanos")) == own[name]
    with pytest.raises(StorageError, match="permission denied"):
        stores["alice"].team_usage(by_user=True)
    sessions: dict[str, int] = {}
    for row in stores["carol"].team_sessions(by_user=True):
        sessions[row["user_name"]] = sessions.get(row["user_name"], 0) + row["sessions"]
    assert sessions == {"alice": 2, "bob": 1, "carol": 1}
    assert sum(row["sessions"] for row in stores["alice"].team_sessions()) == 4


def test_team_open_writes_the_audit_record_before_the_content(team, pg_url):
    _owner, stores = team
    dana = stores["dana"]
    # Without a committed audit record of hers, team_read returns nothing.
    with psycopg.connect(as_role(pg_url, "dana")) as conn:
        with conn.transaction():
            audit_id = conn.execute("SELECT team_open('s-bob-1', 'incident 7')").fetchone()[0]
            # The same transaction's record is not enough: it is not committed yet.
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT * FROM team_read(%s)", (audit_id,))
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM team_audit").fetchone()[0] == 0  # rolled back with it
    audit_id, session = dana.team_open("s-bob-1", "incident 7")
    assert session.header["id"] == "s-bob-1" and len(session.entries) == 3
    records = stores["bob"].team_audit()
    assert [(r.id, r.reader, r.session_id, r.session_owner, r.reason) for r in records] == [
        (audit_id, "dana", "s-bob-1", "bob", "incident 7")]
    assert stores["alice"].team_audit() == []
    with pytest.raises(StorageError, match="permission denied"):
        stores["carol"].team_open("s-bob-1", "curious")
    with pytest.raises(ValueError):
        dana.team_open("s-bob-1", "  ")


@pytest.mark.parametrize("who", ["dana", "postgres"])
def test_the_audit_table_refuses_update_and_delete(team, pg_url, who):
    _, stores = team
    stores["dana"].team_open("s-alice-1", "review")
    url = pg_url if who == "postgres" else as_role(pg_url, who)
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in ("UPDATE team_audit SET reason = 'nothing'", "DELETE FROM team_audit",
                          "TRUNCATE team_audit"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO team_audit (reader, session_id, session_owner, reason)"
                         " VALUES ('x', 'y', 'z', 'forged')") if who != "postgres" else (_ for _ in ()).throw(
                psycopg.errors.InsufficientPrivilege())
    assert [r.reason for r in stores["alice"].team_audit()] == ["review"]


def test_team_list_and_remove(team):
    owner, _ = team
    assert [(m.name, m.role, m.sessions) for m in owner.team_list()] == [
        ("alice", "member", 2), ("bob", "member", 1), ("carol", "lead", 1), ("dana", "admin", 0)]
    owner.team_add("erin_h45", "member")
    with PostgresStore(as_role(owner.url, "erin_h45")) as erin:
        erin.create(*_session("s-erin-1", "emu", 1, "/home/erin/delta"))
    owner.team_remove("erin_h45")
    assert [m.name for m in owner.team_list()] == ["alice", "bob", "carol", "dana"]
    # Erin's sessions stay, owned by the name; the owner still has them.
    assert "s-erin-1" in owner.session_ids()
    with pytest.raises(StorageError):
        owner.team_remove("erin_h45")
    with pytest.raises(ValueError):
        owner.team_add("erin_h45", "boss")
    # A role changes group: bob becomes a lead (and only that).
    owner.team_add("bob", "lead")
    assert [m.role for m in owner.team_list() if m.name == "bob"] == ["lead"]


def test_migration_from_todays_schema_keeps_every_session_owned_by_the_migrating_role(pg_url, monkeypatch):
    import sessiontree.stores.postgres.connection as connection_module
    from sessiontree.stores.postgres.schema import MIGRATIONS

    names = [name for name, _ in MIGRATIONS]
    before = names[:names.index("m008_team")]
    assert before[-1] == "m007_cache_write_1h"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE ROLE ops_h45 LOGIN")  # not a superuser, no CREATEROLE
        conn.execute(f'ALTER DATABASE "{pg_url.rsplit("/", 1)[1]}" OWNER TO ops_h45')
    ops_url = as_role(pg_url, "ops_h45")
    try:
        monkeypatch.setattr(connection_module, "MIGRATIONS", [step for step in MIGRATIONS if step[0] in before])
        with PostgresStore(ops_url) as old:
            assert old.applied_migrations() == before
            for n in range(3):
                old.create(*_session(f"s-old-{n}", "walrus", 1, "/srv/old", start=n))
        monkeypatch.undo()
        with PostgresStore(ops_url) as migrated:  # the step runs as ops_h45, the tables' owner
            assert migrated.applied_migrations() == names
            assert migrated.session_ids() == ["s-old-0", "s-old-1", "s-old-2"]
            assert all(len(migrated.load(sid).entries) == 2 for sid in migrated.session_ids())
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT owner, count(*) FROM sessions GROUP BY owner").fetchall() == [("ops_h45", 3)]
            # Handing a session over (docs/team.md) takes its rows along.
        with PostgresStore(pg_url) as superuser:
            superuser.team_add("alice", "member")
        with psycopg.connect(pg_url) as conn:
            conn.execute("UPDATE sessions SET owner = 'alice' WHERE id = 's-old-1'")
        with PostgresStore(as_role(pg_url, "alice")) as alice:
            assert alice.session_ids() == ["s-old-1"]
            assert len(alice.load("s-old-1").entries) == 2
            assert {hit.session_id for hit in alice.search("walrus")} == {"s-old-1"}
            assert sum(row.calls for row in alice.usage()) == 1
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute('REASSIGN OWNED BY ops_h45 TO postgres')
            conn.execute('DROP OWNED BY ops_h45')
            conn.execute("DROP ROLE ops_h45")


def test_mcp_and_viewer_of_a_member_see_only_their_own(team):
    from starlette.testclient import TestClient

    from sessiontree.mcpserver.tools import SessionReader
    from sessiontree.web.app import create_app

    _, stores = team
    reader = SessionReader(stores["alice"])
    listed = reader.list_sessions()
    assert sorted(row["id"] for row in listed["sessions"]) == ["s-alice-1", "s-alice-2"]
    assert reader.search_sessions("yak")["hits"] == []
    assert {hit["sessionId"] for hit in reader.search_sessions("zebra")["hits"]} == {"s-alice-1", "s-alice-2"}
    with pytest.raises(Exception, match="s-bob-1"):
        reader.get_context("s-bob-1")
    client = TestClient(create_app(stores["alice"]), base_url="http://127.0.0.1:8765")
    page = client.get("/").text
    assert "s-alice-1" in page and "s-bob-1" not in page
    assert client.get("/s/s-bob-1").status_code == 404
    assert client.get("/s/s-alice-1").status_code == 200


@pytest.mark.parametrize("cap", [None, 1])
def test_a_members_search_finds_what_the_owner_finds_in_their_sessions(team, monkeypatch, cap):
    """The member's path through own_search_rows (and, past the cap, the read of their
    own rows) gives the owner's hits restricted to the member's sessions."""
    import sessiontree.stores.postgres.team as team_module

    monkeypatch.setattr(team_module, "OWN_ROWS_CAP", cap)
    owner, stores = team
    mine = set(stores["alice"].session_ids())
    for query in ("zebra", "zebra answer", "ze", "answer 0", '"now"', "please", "yak", "nothing-like-it"):
        expected = sorted((h.session_id, h.entry_id) for h in owner.search(query, limit=None) if h.session_id in mine)
        got = sorted((h.session_id, h.entry_id) for h in stores["alice"].search(query, limit=None))
        assert got == expected, query
        limited = [(h.session_id, h.entry_id) for h in stores["alice"].search(query, limit=2)]
        assert limited == [(h.session_id, h.entry_id) for h in owner.search(query, limit=None)
                           if h.session_id in mine][:2], query

