"""The per-user daily usage rollup (stores/postgres/daily.py, step ``m012_usage_daily``):
the lead's aggregates by user read ``usage_daily`` and give the rows step m011's view
gave (summing every session's rollup rows), through every change a rollup row goes
through; they agree with the members' own ``stats``; members read only their own daily
rows and write none.

Synthetic sessions (builders): the figures are counted from how the sessions are built
(call ``k`` of a session: input ``10 + k``, output 5, cost ``(k + 1)`` thousandths of a
dollar, model ``m{k % 2}``)."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest

from builders import assistant, chain, message_entry, text_block, usage_header, user
from sessiontree.stores.base import Provenance
from sessiontree.stores.postgres import daily, recent
from sessiontree.stores.postgres.store import PostgresStore
from team_support import as_role, team_stores

pytestmark = pytest.mark.postgres

DAY = 86_400_000
T0 = 1767225600000  # 2026-01-01T00:00:00Z


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _calls(word: str, n_calls: int, start: int, first: int = 0, parent: str | None = "u0") -> list[dict]:
    out = []
    for k in range(first, first + n_calls):
        msg = assistant([text_block(f"{word} answer {k}")], ts=T0 + start + k * 1000, model=f"m{k % 2}")
        msg["usage"] = {"input": 10 + k, "output": 5, "cacheRead": 0, "cacheWrite": 0,
                        "cost": {"total": 0.001 * (k + 1)}}
        out.append(message_entry(f"a{k}", msg, parent, ts=_iso(T0 + start + k * 1000)))
        parent = f"a{k}"
    return out


def _session(sid: str, word: str, n_calls: int, cwd: str, start: int = 0) -> tuple[dict, list[dict]]:
    """A session of ``n_calls`` billed calls, one second apart from ``T0 + start``."""
    return usage_header(sid, cwd=cwd), chain(message_entry("u0", user(f"please {word} now")),
                                             *_calls(word, n_calls, start))


@pytest.fixture
def team(pg_url):
    """Two members (alice: 2 sessions on two days, bob: 1) and a lead (carol: 1 session).
    bob's two calls have the times and tokens of alice's first two, so their content keys
    are the same: shared keys, which the views read from the ledger (per user)."""
    with team_stores(pg_url, {"alice": "member", "bob": "member", "carol": "lead"}) as (owner, stores):
        stores["alice"].create(*_session("s-alice-1", "zebra", 3, "/home/alice/proj/alpha"))
        stores["alice"].create(*_session("s-alice-2", "zebra", 1, "/home/alice/proj/beta", start=DAY))
        stores["bob"].create(*_session("s-bob-1", "yak", 2, "/home/bob/src/alpha/"))
        stores["carol"].create(*_session("s-carol-1", "xerus", 1, "/home/carol/gamma", start=-DAY - 1000))
        yield owner, stores


def _old_view(conn) -> None:
    """Step m011's ``team_usage_by_user`` (every session's rollup rows) as ``old_usage_by_user``."""
    text = recent.usage_by_user_view().replace("VIEW team_usage_by_user ", "VIEW old_usage_by_user ", 1)
    conn.execute(text)


def _views_equal(pg_url: str) -> list[tuple]:
    """Both views' rows (asserted equal) and ``usage_daily`` equal to its rebuild from the rollup."""
    with psycopg.connect(pg_url) as conn:
        _old_view(conn)
        order = " ORDER BY 1, 2, 3, 4, 5, 6"
        new = conn.execute("SELECT * FROM team_usage_by_user" + order).fetchall()
        old = conn.execute("SELECT * FROM old_usage_by_user" + order).fetchall()
        assert new == old
        kept = conn.execute("SELECT * FROM usage_daily WHERE calls <> 0 ORDER BY 1, 2, 3, 4, 5, 6").fetchall()
        # Every daily row taken to 0 is 0 throughout.
        assert all(all(v == 0 for v in row[6:]) for row in conn.execute(
            "SELECT * FROM usage_daily WHERE calls = 0"))
        daily.rebuild_daily(conn)
        assert conn.execute("SELECT * FROM usage_daily WHERE calls <> 0 ORDER BY 1, 2, 3, 4, 5, 6").fetchall() == kept
        conn.rollback()
    return new


def _totals(rows) -> tuple[int, int, int, int]:
    return (sum(r.calls for r in rows), sum(r.input for r in rows), sum(r.output for r in rows),
            sum(r.cost_nanos for r in rows))


def _by_user(rows: list[dict]) -> dict[str, tuple[int, int, int, int]]:
    out: dict[str, tuple[int, int, int, int]] = {}
    for row in rows:
        was = out.get(row["user_name"], (0, 0, 0, 0))
        out[row["user_name"]] = tuple(a + row[k] for a, k in zip(was, ("calls", "input", "output", "cost_nanos"),
                                                                 strict=True))  # type: ignore[assignment]
    return out


def test_the_lead_reads_the_daily_rollup_equal_to_the_old_view_and_the_members_stats(team, pg_url):
    _, stores = team
    rows = _views_equal(pg_url)
    # 4 + 2 + 1 calls: alice's on two days and models, a project from a cwd ending in '/'.
    assert {(r[0], r[1], r[3], r[5], int(r[6])) for r in rows} == {
        ("alice", "2026-01-01", "m0", "alpha", 2), ("alice", "2026-01-01", "m1", "alpha", 1),
        ("alice", "2026-01-02", "m0", "beta", 1), ("bob", "2026-01-01", "m0", "alpha", 1),
        ("bob", "2026-01-01", "m1", "alpha", 1), ("carol", "2025-12-30", "m0", "gamma", 1)}
    expected = {"alice": (4, 10 + 11 + 12 + 10, 20, (1 + 2 + 3 + 1) * 1_000_000),
                "bob": (2, 10 + 11, 10, (1 + 2) * 1_000_000), "carol": (1, 10, 5, 1_000_000)}
    own = {name: _totals(stores[name].usage()) for name in ("alice", "bob", "carol")}
    assert own == expected
    assert _by_user(stores["carol"].team_usage(by_user=True)) == expected
    team_rows = stores["alice"].team_usage()
    assert tuple(sum(r[k] for r in team_rows) for k in ("calls", "input", "output", "cost_nanos")) == tuple(
        sum(v[i] for v in expected.values()) for i in range(4))


def test_every_change_to_a_rollup_row_moves_the_daily_sums(team, pg_url):
    owner, stores = team
    alice, bob = stores["alice"], stores["bob"]
    # Appends settle into existing rollup rows (the upsert) and new ones.
    alice.append("s-alice-1", _calls("zebra", 2, 0, first=3, parent="a2"))
    _views_equal(pg_url)
    # Provenance recorded after the calls: their agent changes.
    alice.record_provenance([Provenance("s-alice-1", "h1", "0" * 16, "alice", "claude", "/f.jsonl", 1)])
    rows = _views_equal(pg_url)
    assert {r[4] for r in rows if r[0] == "alice" and r[5] == "alpha"} == {"claude"}
    # A copy of alice's calls in a second session of hers: the keys become shared.
    alice.create(*_session("s-alice-3", "zebra", 3, "/home/alice/proj/alpha"))
    _views_equal(pg_url)
    assert _by_user(stores["carol"].team_usage(by_user=True))["alice"] == _totals(alice.usage())
    # A header rewritten with another cwd: the project follows.
    head = alice.load("s-alice-2").header
    alice.replace_header("s-alice-2", {**head, "cwd": "/home/alice/proj/delta"})
    rows = _views_equal(pg_url)
    assert "delta" in {r[5] for r in rows} and "beta" not in {r[5] for r in rows}
    # A session handed to another owner takes its sums along.
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE sessions SET owner = 'bob' WHERE id = 's-alice-2'")
    _views_equal(pg_url)
    assert _by_user(stores["carol"].team_usage(by_user=True))["bob"] == _totals(bob.usage())
    # Deleting (the member's own) and reindexing (the owner's).
    bob.delete("s-bob-1")
    _views_equal(pg_url)
    owner.reindex()
    by_user = _by_user(stores["carol"].team_usage(by_user=True))
    _views_equal(pg_url)
    assert by_user == {name: _totals(stores[name].usage()) for name in ("alice", "bob", "carol")}
    assert by_user["bob"] == (1, 10, 5, 1_000_000)  # s-alice-2's one call, now bob's


def test_members_read_only_their_own_daily_rows_and_write_none(team, pg_url):
    # bob's calls of the fixture equal alice's first two (shared keys, read from the
    # ledger): one of his own in the rollup.
    team[1]["bob"].create(*_session("s-bob-2", "yak", 1, "/b", start=5 * DAY))
    for name in ("alice", "bob"):
        with psycopg.connect(as_role(pg_url, name)) as conn:
            assert {r[0] for r in conn.execute("SELECT owner FROM usage_daily")} == {name}
            for statement in ("INSERT INTO usage_daily VALUES (current_user, 0, '', '', '', '', 1, 1, 1, 1, 1, 1, 1)",
                              "UPDATE usage_daily SET calls = 0", "DELETE FROM usage_daily"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(statement)
                conn.rollback()
            # The trigger functions are not callable (a trigger's function never is), nor granted.
            with pytest.raises(psycopg.Error):
                conn.execute("SELECT usage_daily_move()")
            conn.rollback()


def test_the_step_fills_the_daily_rollup_from_an_older_schema(pg_url, monkeypatch):
    import sessiontree.stores.postgres.connection as connection_module
    from sessiontree.stores.postgres.schema import MIGRATIONS

    names = [name for name, _ in MIGRATIONS]
    # The schema before the daily rollup (steps after it, m013 on, follow it here too).
    monkeypatch.setattr(connection_module, "MIGRATIONS", MIGRATIONS[:names.index(daily.DAILY_STEP)])
    with PostgresStore(pg_url) as old:
        old.team_add("alice", "member")
        with PostgresStore(as_role(pg_url, "alice")) as alice:
            alice.create(*_session("s-1", "zebra", 3, "/p/alpha"))
            alice.create(*_session("s-2", "zebra", 2, "/p/beta", start=DAY))
        with psycopg.connect(pg_url) as conn:
            _old_view(conn)
            conn.commit()
            before = conn.execute("SELECT * FROM old_usage_by_user ORDER BY 1, 2, 3, 4, 5, 6").fetchall()
    monkeypatch.undo()
    with PostgresStore(pg_url) as migrated:
        assert migrated.applied_migrations() == names
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM usage_daily").fetchone()[0] == 4  # (day, model, project)
    assert _views_equal(pg_url) == before
    assert sum(int(r[6]) for r in before) == 5
