"""The team store through our commands (docs/team.md): two members and a lead sync their
own agent folders into one PostgreSQL database with their own roles; each one's
``list``, ``show``, ``search``, ``context``, ``export`` and ``stats`` see only their own
sessions; ``team stats`` gives everyone's aggregates, by user for the lead only;
``team open`` and ``team audit``; ``prune`` and ``hold`` as a member.

Synthetic agent files (sync_support): who may read what is checked, which no real file shows."""

from __future__ import annotations

import json

import pytest

from cli_support import run_cli, run_cli_json
from sessiontree.stores.postgres.store import PostgresStore
from sync_support import PROJECT, head, line, record
from team_support import as_role

pytestmark = pytest.mark.postgres

WORDS = {"alice": "aardvark", "bob": "bison", "carol": "caracal"}


def _sid(n: int) -> str:
    return f"019cadb4-6e80-7a3c-9b1d-2f4e6a8c0{n:03x}"


SIDS = {"alice": [_sid(1), _sid(2)], "bob": [_sid(3)], "carol": [_sid(4)]}


def _write_home(tmp_path, name: str):
    home = tmp_path / name
    folder = home / ".pi" / "agent" / "sessions" / PROJECT
    folder.mkdir(parents=True)
    for sid in SIDS[name]:
        lines = [head(sid), record("00000001", None, f"{WORDS[name]} question"),
                 record("00000002", "00000001", f"{WORDS[name]} answer", "assistant")]
        (folder / f"2026-03-01T10-00-00-000Z_{sid}.jsonl").write_bytes(b"".join(map(line, lines)))
    return home


@pytest.fixture
def synced(pg_url, tmp_path, monkeypatch):
    run_cli(pg_url, "team", "add", "alice")
    run_cli(pg_url, "team", "add", "bob", "--role", "member")
    run_cli(pg_url, "team", "add", "carol", "--role", "lead")
    run_cli(pg_url, "team", "add", "dana", "--role", "admin")
    for name in WORDS:
        monkeypatch.setenv("HOME", str(_write_home(tmp_path, name)))
        monkeypatch.setenv("SESSIONTREE_SYNC_HOST", f"{name}-laptop")
        for var in ("PI_CODING_AGENT_DIR", "ATOMIC_CODING_AGENT_DIR", "CLAUDE_CONFIG_DIR", "CODEX_HOME"):
            monkeypatch.delenv(var, raising=False)
        run_cli(as_role(pg_url, name), "sync")
    return pg_url


def test_members_sync_and_read_only_their_own(synced):
    url = synced
    for name, own in SIDS.items():
        me = as_role(url, name)
        listed = run_cli_json(me, "list")
        assert sorted(row["id"] for row in listed) == sorted(own)
        for other, theirs in SIDS.items():
            hits = run_cli_json(me, "search", WORDS[other])
            found = {hit["sessionId"] for hit in hits["hits"]}
            assert found == (set(theirs) if other == name else set()), (name, other, hits)
            if other != name:
                for command in ("show", "context", "export"):
                    run_cli(me, command, theirs[0], code=1)
        out = run_cli(me, "export", own[0]).stdout
        assert WORDS[name] in out
        assert run_cli(me, "show", own[0]).stdout
        assert WORDS[name] in run_cli(me, "context", own[0]).stdout
        run_cli(me, "stats", "--by", "user")  # answers from the member's own rows
        run_cli(me, "check", "--store")  # verify() under row-level security finds nothing wrong
        run_cli(me, "reindex")  # rebuilds the member's own derived rows
        assert {hit["sessionId"] for hit in run_cli_json(me, "search", WORDS[name])["hits"]} == set(own)
    # The owner's reindex rebuilds everyone's derived rows, each still its owner's.
    run_cli(url, "reindex")
    for name, own in SIDS.items():
        assert {hit["sessionId"] for hit in run_cli_json(as_role(url, name), "search", WORDS[name])["hits"]} == set(own)
    # The owner's role sees every session; its `team list` counts them per person.
    people = {row["name"]: (row["role"], row["sessions"]) for row in run_cli_json(url, "team", "list")}
    assert people == {"alice": ("member", 2), "bob": ("member", 1), "carol": ("lead", 1), "dana": ("admin", 0)}


def test_team_stats_and_the_audited_door(synced):
    url = synced
    counts = run_cli_json(as_role(url, "alice"), "team", "stats", "--sessions")
    assert sum(row["sessions"] for row in counts) == 4
    assert all("user_name" not in row for row in counts)
    run_cli(as_role(url, "alice"), "team", "stats", "--by-user", code=1)
    by_user = run_cli_json(as_role(url, "carol"), "team", "stats", "--sessions", "--by-user")
    assert {row["user_name"]: row["sessions"] for row in by_user} == {"alice": 2, "bob": 1, "carol": 1}
    # The lead is refused content: bob's session does not exist for her.
    run_cli(as_role(url, "carol"), "show", SIDS["bob"][0], code=1)
    run_cli(as_role(url, "carol"), "team", "open", SIDS["bob"][0], "--reason", "curious", code=1)
    opened = run_cli(as_role(url, "dana"), "team", "open", SIDS["bob"][0], "--reason", "ticket 42")
    data = json.loads(opened.stdout)
    assert data["header"]["id"] == SIDS["bob"][0] and len(data["entries"]) == 2
    audit = run_cli_json(as_role(url, "bob"), "team", "audit")
    assert [(r["reader"], r["sessionId"], r["reason"]) for r in audit] == [("dana", SIDS["bob"][0], "ticket 42")]
    assert run_cli_json(as_role(url, "alice"), "team", "audit") == []


def test_a_member_prunes_their_own_and_holds(synced):
    url = synced
    alice = as_role(url, "alice")
    run_cli(alice, "hold", SIDS["alice"][0])
    # Every session is older than a day (written 2026-03-01).
    dry = run_cli_json(alice, "prune", "--older-than", "1d", "--dry-run")
    assert [row["sessionId"] for row in dry["sessions"]] == [SIDS["alice"][1]]
    done = run_cli_json(alice, "prune", "--older-than", "1d")
    assert [(row["sessionId"], row["entries"], row["owner"]) for row in done["sessions"]] == [
        (SIDS["alice"][1], 2, "alice")]
    assert sorted(row["id"] for row in run_cli_json(alice, "list")) == [SIDS["alice"][0]]
    # Bob's session is untouched; a member may not prune everyone's.
    assert [row["id"] for row in run_cli_json(as_role(url, "bob"), "list")] == SIDS["bob"]
    run_cli(alice, "prune", "--older-than", "1d", "--everyone", code=1)
    # The admin prunes by policy: every owner's old, unheld sessions.
    done = run_cli_json(as_role(url, "dana"), "prune", "--older-than", "1d", "--everyone")
    assert sorted(row["sessionId"] for row in done["sessions"]) == sorted(SIDS["bob"] + SIDS["carol"])
    with PostgresStore(url) as owner:
        assert owner.session_ids() == [SIDS["alice"][0]]
        log = owner.deletion_log()
    assert [(row["owner"], row["deleted_by"], row["reason"]) for row in log] == [
        ("alice", "alice", "owner"), ("bob", "dana", "policy"), ("carol", "dana", "policy")]
    assert "bison" not in json.dumps(log)


def test_team_commands_on_a_store_without_teams(tmp_path):
    store = f"sqlite:///{tmp_path / 'solo.db'}"
    run_cli(store, "team", "list", code=1)  # a missing store is not created
    assert not (tmp_path / "solo.db").exists()
    run_cli(store, "import", str(tmp_path), code=1)  # nothing to import; the store exists now
    result = run_cli(store, "team", "list", code=1)
    assert "not a team store" in result.stderr

