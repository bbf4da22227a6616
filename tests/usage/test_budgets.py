"""Budgets (docs/budgets.md): spend per period against an amount, ``stats --budget`` exit
statuses, the config file (``budget set|list|remove``), and alerts once per crossing with a
webhook POST to a local HTTP server.

The sessions are synthetic (no real file holds calls on chosen days): every amount below is
the sum of the recorded costs written in the entries, worked out by hand in the comments.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from builders import billed_assistant as _assistant
from builders import header as _header
from builders import usage as _usage
from cli_support import cli_runner, run_cli, run_cli_json
from sessiontree.cli import cli
from sessiontree.stores.sqlite.store import SqliteStore
from sessiontree.usage.alerts import alert_crossings
from sessiontree.usage.budgets import Budget, budget_status, parse_budget
from sessiontree.usage.config import ConfigError, load_budgets, load_config, remove_budget, set_budget

ROOT = Path(__file__).resolve().parents[2]
#: "Now" of the library tests: Wednesday 2026-01-07 12:00 UTC.
NOW_MS = int(datetime(2026, 1, 7, 12, tzinfo=UTC).timestamp() * 1000)
USD = 1_000_000_000


def _store(path):
    """Calls with recorded costs on chosen days (UTC):

    * 2025-12-31 10:00  $2.00   (pi session "a")
    * 2026-01-05 10:00  $0.50   (Monday; pi session "a")
    * 2026-01-07 09:00  $0.25   (Wednesday, "today"; Claude Code session "c")
    * 2026-01-20 10:00  $1.00   (later in January; pi session "a")
    """
    store = SqliteStore(str(path))
    store.create(_header("a", created="2025-12-31T00:00:00.000Z"), [
        _assistant("a1", None, "2025-12-31T10:00:00.000Z", _usage(10, cost=2.0)),
        _assistant("a2", "a1", "2026-01-05T10:00:00.000Z", _usage(10, cost=0.5)),
        _assistant("a3", "a2", "2026-01-20T10:00:00.000Z", _usage(10, cost=1.0))])
    store.create(_header("c", created="2026-01-07T00:00:00.000Z", foreign={"agent": "claude-code"}), [
        _assistant("c1", None, "2026-01-07T09:00:00.000Z", _usage(10, cost=0.25))])
    return store


# Spend of each period holding 2026-01-07 in UTC, summed by hand from _store:
# day 01-07: 0.25; week 01-05..01-11: 0.50 + 0.25; month January: 0.50 + 0.25 + 1.00;
# no period: every call, 2.00 + 0.50 + 0.25 + 1.00.
SPEND = {"day": 250_000_000, "week": 750_000_000, "month": 1_750_000_000, None: 3_750_000_000}
DAYS = {"day": ("2026-01-07", "2026-01-07"), "week": ("2026-01-05", "2026-01-11"),
        "month": ("2026-01-01", "2026-01-31"), None: (None, None)}


@pytest.mark.parametrize("period", ["day", "week", "month", None])
def test_spend_at_under_and_over_the_line_for_each_period(tmp_path, period):
    store = _store(tmp_path / "s.db")
    spend = SPEND[period]
    for amount, over in ((spend, False), (spend + 1, False), (spend - 1, True), (0, True)):
        status, report = budget_status(store, Budget("b", amount, period), tz="UTC", now_ms=NOW_MS)
        assert status.spent_nanos == spend == report.totals.cost_nanos
        assert (status.since, status.until) == DAYS[period]
        assert status.over is over, (period, amount)
        assert status.left_nanos == amount - spend
    store.close()


def test_a_budget_narrowed_to_an_agent_counts_that_agents_calls_only(tmp_path):
    store = _store(tmp_path / "s.db")
    claude, _ = budget_status(store, Budget("b", USD, "month", agents=("claude-code",)), tz="UTC", now_ms=NOW_MS)
    pi, _ = budget_status(store, Budget("b", USD, "month", agents=("pi",)), tz="UTC", now_ms=NOW_MS)
    assert (claude.spent_nanos, pi.spent_nanos) == (250_000_000, 1_500_000_000)
    store.close()


def test_budget_text_is_parsed_strictly():
    assert parse_budget("25") == (25 * USD, None)
    assert parse_budget("$1,000.50/week") == (1_000_500_000_000, "week")
    for bad in ("ten", "-1/day", "5/year", "0.0000000001"):
        with pytest.raises(ValueError):
            parse_budget(bad)


# --------------------------------------------------------------------------- stats --budget


def _today_store(path):
    """Two calls today (UTC): $0.50 and $0.25, at 00:00:00.5 and 00:00:01 so they are always today."""
    today = datetime.now(UTC).date().isoformat()
    store = SqliteStore(str(path))
    store.create(_header("t", created=f"{today}T00:00:00.000Z"), [
        _assistant("t1", None, f"{today}T00:00:00.500Z", _usage(10, cost=0.5)),
        _assistant("t2", "t1", f"{today}T00:00:01.000Z", _usage(10, cost=0.25))])
    store.close()
    return today


def _over(db, *args):
    """``sessiontree ARGS`` that must exit 1 for being over budget: no error line, no traceback."""
    result = cli_runner().invoke(cli, ["--store", db, *args], catch_exceptions=False)
    assert result.exit_code == 1 and "error" not in result.stderr, (result.stdout, result.stderr)
    return result


def test_stats_budget_exit_status_under_at_and_over(tmp_path):
    db = str(tmp_path / "s.db")
    today = _today_store(tmp_path / "s.db")
    under = run_cli(db, "stats", "-z", "UTC", "--budget", "1/day").stdout
    assert f"Budget $1.00/day ({today}): spent $0.75, $0.25 left (75% used)." in under
    at = run_cli(db, "stats", "-z", "UTC", "--budget", "0.75/day").stdout
    assert "$0.00 left" in at
    over = _over(db, "stats", "-z", "UTC", "--budget", "0.74/day")
    assert "over by $0.01" in over.stdout and over.stderr == ""
    data = json.loads(_over(db, "stats", "-z", "UTC", "--budget", "0.70/month", "--json").stdout)
    assert data["budget"]["over"] is True and data["budget"]["spentNanos"] == 750_000_000
    assert data["totals"]["costNanos"] == 750_000_000 and data["budget"]["leftNanos"] == -50_000_000
    # A budget without a period counts every call of the range.
    assert run_cli_json(db, "stats", "--budget", "0.75")["budget"]["over"] is False
    # Bad input is a usage error (2), never confused with "over" (1).
    run_cli(db, "stats", "--budget", "lots", code=2)
    run_cli(db, "stats", "--budget", "1/day", "--since", "7d", code=2)
    run_cli(db, "stats", "--budget", "1/day", "--agent", "codex")  # no codex calls: $0, under


# --------------------------------------------------------------------------- the config file


def test_budget_set_list_remove_keep_the_rest_of_the_config(tmp_path, _config):
    _config.parent.mkdir()
    _config.write_text('theme = "dark"\n\n[other]\nkey = [1, 2]\n')
    run_cli(None, "budget", "set", "daily", "25/day", "--agent", "claude-code", "--webhook", "http://x/h")
    run_cli(None, "budget", "set", "all", "100")
    assert [(b.name, b.amount_nanos, b.period, b.agents, b.webhook) for b in load_budgets()] == [
        ("daily", 25 * USD, "day", ("claude-code",), "http://x/h"), ("all", 100 * USD, None, (), None)]
    data = load_config()
    assert data["theme"] == "dark" and data["other"] == {"key": [1, 2]}
    db = str(tmp_path / "s.db")
    _today_store(tmp_path / "s.db")
    listed = run_cli_json(db, "budget", "list", "-z", "UTC")["budgets"]
    assert [(b["name"], b["spentNanos"], b["over"]) for b in listed] == [("daily", 0, False),
                                                                      ("all", 750_000_000, False)]
    run_cli(None, "budget", "remove", "daily")
    run_cli(None, "budget", "remove", "daily", code=1)
    assert [b.name for b in load_budgets()] == ["all"]
    run_cli(None, "budget", "set", "bad name", "1", code=2)
    run_cli(None, "budget", "set", "x", "1/fortnight", code=2)


def test_an_invalid_config_names_the_file_and_key(_config):
    _config.parent.mkdir()
    _config.write_text('[budgets.daily]\namount = "lots"\n')
    with pytest.raises(ConfigError, match=r"config.toml: budgets.daily.amount: invalid amount"):
        load_budgets()
    _config.write_text("[budgets\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        set_budget(Budget("x", 1))
    assert _config.read_text() == "[budgets\n"  # nothing written over a file it cannot read


def test_remove_from_an_invalid_config_writes_nothing(_config):
    _config.parent.mkdir()
    _config.write_text("[budgets\n")
    with pytest.raises(ConfigError):
        remove_budget("x")
    assert _config.read_text() == "[budgets\n"


# --------------------------------------------------------------------------- alerts and the webhook


class _Hook:
    """A local HTTP server recording every POSTed JSON body."""

    def __init__(self, status=200):
        received = self.received = []
        answer = status

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append((self.headers["Content-Type"], json.loads(body)))
                self.send_response(answer)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_the_webhook_is_posted_once_per_crossing(tmp_path, _config):
    hook = _Hook()
    try:
        store = _store(tmp_path / "s.db")
        set_budget(Budget("week", 600_000_000, "week", webhook=hook.url))  # spend this week: $0.75
        set_budget(Budget("month", 5 * USD, "month", webhook=hook.url))    # $1.75: under, never posted
        first = alert_crossings(store, tz="UTC", now_ms=NOW_MS)
        assert [(a.crossing.status.budget.name, a.posted) for a in first] == [("week", True)]
        assert alert_crossings(store, tz="UTC", now_ms=NOW_MS) == []  # the same crossing: not again
        assert alert_crossings(store, tz="UTC", now_ms=NOW_MS + 3_600_000) == []  # later that week
        assert len(hook.received) == 1
        kind, body = hook.received[0]
        assert kind == "application/json"
        assert (body["event"], body["budget"], body["amount"], body["spent"], body["periodKey"]) == (
            "budget.crossed", "week", "0.6", "0.75", "2026-01-05")
        # The amount raised above the spend: no longer over, forgotten; lowered again: a new crossing.
        set_budget(Budget("week", USD, "week", webhook=hook.url))
        assert alert_crossings(store, tz="UTC", now_ms=NOW_MS) == []
        set_budget(Budget("week", 500_000_000, "week", webhook=hook.url))
        assert len(alert_crossings(store, tz="UTC", now_ms=NOW_MS)) == 1
        # The next week (01-12..01-18) holds no call: not over; the week of 01-19 holds $1.00: crossed.
        assert alert_crossings(store, tz="UTC", now_ms=NOW_MS + 7 * 86_400_000) == []
        assert len(alert_crossings(store, tz="UTC", now_ms=NOW_MS + 14 * 86_400_000)) == 1
        assert [b["periodKey"] for _, b in hook.received] == ["2026-01-05", "2026-01-05", "2026-01-19"]
        store.close()
    finally:
        hook.close()


def test_a_failed_post_is_reported_and_tried_again(tmp_path):
    hook = _Hook(status=500)
    try:
        store = _store(tmp_path / "s.db")
        set_budget(Budget("day", 100_000_000, "day", webhook=hook.url))  # today's spend: $0.25
        failed = alert_crossings(store, tz="UTC", now_ms=NOW_MS)
        assert [(a.posted, a.problem) for a in failed] == [(False, "the webhook answered 500 Internal Server Error")]
        assert len(alert_crossings(store, tz="UTC", now_ms=NOW_MS)) == 1  # not delivered: tried again
        assert len(hook.received) == 2
        store.close()
    finally:
        hook.close()


def _pi_file(folder: Path, today: str, costs: list[float]) -> Path:
    """A pi session file with one billed assistant message per cost, all today (UTC)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "2026-01-01T00-00-00-000Z_0194a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.jsonl"
    lines = [_header("0194a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", created=f"{today}T00:00:00.000Z")]
    parent = None
    for n, cost in enumerate(costs):
        lines.append(_assistant(f"e{n}", parent, f"{today}T00:00:0{n}.000Z", _usage(10, cost=cost)))
        parent = f"e{n}"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_sync_watch_warns_and_posts_once_per_crossing(tmp_path, _config):
    """`sync --watch` in a real process: the first sync crosses the budget (one POST, one
    warning); a later append while still over posts nothing more."""
    hook = _Hook()
    today = datetime.now(UTC).date().isoformat()
    folder = tmp_path / "sessions" / "--w--"
    path = _pi_file(folder, today, [0.5])
    set_budget(Budget("daily", 100_000_000, "day", webhook=hook.url))  # $0.10/day; the file spends $0.50
    db = tmp_path / "s.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "SESSIONTREE_CONFIG": str(_config), "TZ": "UTC"}
    proc = subprocess.Popen([sys.executable, "-c", "from sessiontree.cli import main; main()", "--store",
                             f"sqlite:///{db}", "sync", "--watch", "--debounce", "100", str(tmp_path / "sessions")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not hook.received:
            time.sleep(0.1)
        assert len(hook.received) == 1
        with open(path, "a") as handle:  # one more call: still over, the same crossing
            handle.write(json.dumps(_assistant("e9", "e0", f"{today}T00:00:09.000Z", _usage(10, cost=0.25))) + "\n")
        store_deadline = time.monotonic() + 30
        while time.monotonic() < store_deadline:
            with SqliteStore(str(db), readonly=True) as store:
                if len(store.read("0194a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b").entries) == 2:
                    break
            time.sleep(0.2)
        time.sleep(1.0)  # room for a (wrong) second POST after the batch
    finally:
        proc.send_signal(2)
        _out, err = proc.communicate(timeout=30)
        hook.close()
    assert proc.returncode == 0, err
    assert len(hook.received) == 1 and hook.received[0][1]["spent"] == "0.5"
    assert err.decode().count("sessiontree: warning: Budget daily $0.10/day") == 1
    assert "(webhook notified)" in err.decode()
