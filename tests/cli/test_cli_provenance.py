"""``list``, ``search`` and ``stats`` filtered and grouped by provenance (docs/sync.md,
"Provenance"): two laptops sync into one store; each session keeps its first origin."""

from __future__ import annotations

import pytest

from cli_support import run_cli, run_cli_json
from sync_support import head, line

pytestmark = pytest.mark.usefixtures("_fake_home")

A = "019cadb4-6e80-7a3c-9b1d-2f4e6a8c0a01"
B = "019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01"
PROJECT = "--home-me-project--"


def _session(home, session_id: str, word: str, cost: float, tokens: tuple[int, int]) -> None:
    """A pi file in ``home``: a user message holding ``word`` and one billed assistant reply."""
    folder = home / ".pi" / "agent" / "sessions" / PROJECT
    folder.mkdir(parents=True, exist_ok=True)
    user = {"type": "message", "id": f"{session_id[-4:]}0001", "parentId": None,
            "timestamp": "2026-03-01T10:00:01.000Z",
            "message": {"role": "user", "content": f"please {word} now", "timestamp": 1}}
    reply = {"type": "message", "id": f"{session_id[-4:]}0002", "parentId": user["id"],
             "timestamp": "2026-03-01T10:00:02.000Z",
             "message": {"role": "assistant", "content": [{"type": "text", "text": "done"}], "api": "x",
                         "provider": "anthropic", "model": "m1",
                         "usage": {"input": tokens[0], "output": tokens[1], "cacheRead": 0, "cacheWrite": 0,
                                   "cost": {"total": cost}},
                         "stopReason": "stop", "timestamp": 2}}
    (folder / f"2026-03-01T10-00-00-000Z_{session_id}.jsonl").write_bytes(
        line(head(session_id)) + line(user) + line(reply))


def _sync_as(monkeypatch, home, host: str, user: str, store: str) -> None:
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SESSIONTREE_SYNC_HOST", host)
    monkeypatch.setenv("SESSIONTREE_MACHINE_ID", f"id-{host}")
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.setenv(name, user)
    run_cli(store, "sync")


@pytest.fixture
def team(tmp_path, monkeypatch) -> str:
    """A SQLite store holding A from laptop-a (alice) and B from laptop-b (bob)."""
    store = f"sqlite:///{tmp_path / 'team.db'}"
    home_a, home_b = tmp_path / "a", tmp_path / "b"
    _session(home_a, A, "frobnicate", 0.25, (100, 10))
    _session(home_b, B, "frobnicate", 0.5, (200, 20))
    _sync_as(monkeypatch, home_a, "laptop-a", "alice", store)
    _sync_as(monkeypatch, home_b, "laptop-b", "bob", store)
    # laptop-b also holds A (a copy) and syncs it: A keeps laptop-a as its origin.
    _session(home_b, A, "frobnicate", 0.25, (100, 10))
    _sync_as(monkeypatch, home_b, "laptop-b", "bob", store)
    return store


def test_list_filters_by_host_and_user_and_shows_the_origin(team):
    rows = run_cli_json(team, "list", "--json")
    assert {row["id"]: (row["origin"]["host"], row["origin"]["user"], row["origin"]["agent"]) for row in rows} == {
        A: ("laptop-a", "alice", "pi"), B: ("laptop-b", "bob", "pi")}
    assert [row["id"] for row in run_cli_json(team, "list", "--json", "--host", "LAPTOP-A")] == [A]
    assert [row["id"] for row in run_cli_json(team, "list", "--json", "--host", "id-laptop-b")] == [B]
    assert [row["id"] for row in run_cli_json(team, "list", "--json", "--user", "bob")] == [B]
    assert run_cli_json(team, "list", "--json", "--host", "laptop-a", "--user", "bob") == []
    text = run_cli(team, "list").stdout
    assert "alice@laptop-a" in text and "bob@laptop-b" in text


def test_search_filters_by_origin(team):
    everything = run_cli_json(team, "search", "frobnicate", "--json")
    assert sorted(hit["sessionId"] for hit in everything["hits"]) == [A, B]
    only_b = run_cli_json(team, "search", "frobnicate", "--json", "--user", "bob")
    assert [hit["sessionId"] for hit in only_b["hits"]] == [B]
    # The filter applies before the limit: one hit of bob's even when alice's ranks first.
    assert [hit["sessionId"] for hit in run_cli_json(team, "search", "frobnicate", "--json", "-n", "1",
                                                     "--host", "laptop-b")["hits"]] == [B]


def test_stats_by_host_user_and_filtered(team):
    by_host = run_cli_json(team, "stats", "--by", "host", "--json")
    groups = {group["key"]: (group["calls"], group["inputTokens"], group["outputTokens"], group["cost"])
              for group in by_host["groups"]}
    # A's one call (100 in, 10 out, $0.25) is laptop-a's; B's (200, 20, $0.50) laptop-b's.
    assert groups == {"laptop-a": (1, 100, 10, "0.25"), "laptop-b": (1, 200, 20, "0.5")}
    by_user = run_cli_json(team, "stats", "--by", "user", "--json")
    assert {group["key"] for group in by_user["groups"]} == {"alice", "bob"}
    only_a = run_cli_json(team, "stats", "--by", "model", "--host", "laptop-a", "--json")
    assert (only_a["totals"]["calls"], only_a["totals"]["inputTokens"], only_a["totals"]["cost"]) == (1, 100, "0.25")
    assert "laptop-b" in run_cli(team, "stats", "--by", "host").stdout


def test_the_viewer_shows_and_filters_by_origin(team):
    from starlette.testclient import TestClient

    from sessiontree.stores import open_store
    from sessiontree.web.app import create_app

    store = open_store(team, readonly=True)
    try:
        client = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
        page = client.get("/").text
        assert "alice@laptop-a" in page and "bob@laptop-b" in page
        assert '<option value="laptop-a">' in page
        only_bob = client.get("/?user=bob").text
        assert f"/s/{B}" in only_bob and f"/s/{A}" not in only_bob
        found = client.get("/?q=frobnicate&host=laptop-a").text
        assert f"/s/{A}" in found and f"/s/{B}" not in found
        assert "from alice@laptop-a" in client.get(f"/s/{A}").text
    finally:
        store.close()
