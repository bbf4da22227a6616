"""The viewer's usage dashboard (``/usage``, ``/usage.csv``) against ``sessiontree stats --json``
for the same filters: the same totals and every group equal, to the nano-dollar; and the
session page's Insights panel.

The store holds the three examples, the vendored large pi session (recorded costs) and one
synthetic Claude Code session whose calls record no cost (priced from the catalogue, so
marked ``~``: no real file with known costs and a chosen day shows that).
"""

from __future__ import annotations

import csv
import io
import re
from decimal import Decimal
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from builders import billed_assistant as _assistant
from builders import header as _header
from builders import usage as _usage
from cli_support import run_cli, run_cli_json
from corpus import vendored
from sessiontree.stores import open_store
from sessiontree.web.app import create_app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CLAUDE = "7f0c1e2a-0000-4000-8000-00000000d45b"
SINCE = "2020-01-01"


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    folder = tmp_path_factory.mktemp("usage")
    path = str(folder / "s.db")
    inbox = folder / "in"
    inbox.mkdir()
    for name in ("branching.jsonl", "compaction.jsonl", "interrupted.jsonl"):
        (inbox / name).write_bytes((EXAMPLES / name).read_bytes())
    (inbox / "large.jsonl").write_bytes(vendored("pi-v1/pi-mono-large-session.jsonl").read_bytes())
    run_cli(path, "import", str(inbox))  # records this machine as the sessions' origin
    store = open_store(path, create=False)
    store.create(_header(CLAUDE, cwd="/home/me/app", created="2026-02-01T00:00:00.000Z",
                         foreign={"agent": "claude-code"}), [
        _assistant("c1", None, "2026-02-01T23:30:00.000Z", _usage(1000, 200, 5000, 300),
                   model="claude-sonnet-4-5", provider="anthropic"),
        _assistant("c2", "c1", "2026-02-02T08:15:00.000Z", _usage(10, 20, 6000, 0),
                   model="claude-sonnet-4-5", provider="anthropic")])
    store.close()
    return path


@pytest.fixture(scope="module")
def client(db):
    store = open_store(db, create=False, readonly=True)
    yield TestClient(create_app(store), base_url="http://127.0.0.1:8765")
    store.close()


def _csv(client, query):
    response = client.get(f"/usage.csv?{query}")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(response.text)))


def _row(data):
    """calls, tokens and cost in nano-dollars of a stats JSON group or totals."""
    return (data["calls"], data["totalTokens"], data["costNanos"], data["estimatedCalls"], data["unpricedCalls"])


def _csv_row(row):
    return (int(row["calls"]), int(row["totalTokens"]), int(Decimal(row["cost"]) * 1_000_000_000),
            int(row["estimatedCalls"]), int(row["unpricedCalls"]))


FILTERS = [
    ("", []),
    ("project=/Users/badlogic/workspaces/pi-mono", ["--cwd", "/Users/badlogic/workspaces/pi-mono"]),
    ("agent=claude-code", ["--agent", "claude-code"]),
    ("agent=pi&since=2025-11-21&until=2026-03-02", ["--agent", "pi", "--since", "2025-11-21", "--until", "2026-03-02"]),
]


@pytest.mark.parametrize(("query", "flags"), FILTERS)
@pytest.mark.parametrize("table", ["session", "project", "agent", "model", "host", "user", "weekhour"])
def test_every_table_equals_stats_json(db, client, query, flags, table):
    if table == "weekhour":
        # Not a stats grouping: its groups must still add up to the stats total.
        rows = _csv(client, f"since={SINCE}&tz=UTC&{query}&table=weekhour")
        stats = run_cli_json(db, "stats", "--since", SINCE, "-z", "UTC", *flags)
        total = next(r for r in rows if r["key"] == "total")
        assert _csv_row(total) == _row(stats["totals"])
        assert sum(_csv_row(r)[2] for r in rows if r["key"] != "total") == stats["totals"]["costNanos"]
        return
    if "since=" not in query:
        query += f"&since={SINCE}"
        flags = [*flags, "--since", SINCE]
    rows = _csv(client, f"tz=UTC&{query}&table={table}")
    stats = run_cli_json(db, "stats", "--by", table, "-z", "UTC", *flags)
    assert {r["key"]: _csv_row(r) for r in rows if r["key"] != "total"} == {
        g["key"]: _row(g) for g in stats["groups"]}
    assert _csv_row(rows[-1]) == _row(stats["totals"])


@pytest.mark.parametrize("period", ["day", "week", "month"])
@pytest.mark.parametrize("stack", ["model", "agent", "project"])
def test_the_period_chart_equals_stats_by_period(db, client, period, stack):
    rows = _csv(client, f"since={SINCE}&tz=UTC&period={period}&stack={stack}&table=period")
    stats = run_cli_json(db, "stats", "--by", period, "--since", SINCE, "-z", "UTC")
    by_key: dict[str, list[int]] = {}
    for r in rows[:-1]:
        sums = by_key.setdefault(r["key"], [0, 0, 0, 0, 0])
        for i, value in enumerate(_csv_row(r)):
            sums[i] += value
    # The stacked parts of each period add up to that period's stats group, and the periods to the total.
    assert {k: tuple(v) for k, v in by_key.items()} == {g["key"]: _row(g) for g in stats["groups"]}
    assert _csv_row(rows[-1]) == _row(stats["totals"])
    # The Claude Code calls of 2026-02-01 23:30 and 2026-02-02 08:15 UTC are two days in UTC.
    if period == "day":
        assert {"2026-02-01", "2026-02-02"} <= set(by_key)


def test_the_page_shows_the_stats_numbers_with_estimates_marked(db, client):
    page = client.get(f"/usage?since={SINCE}&tz=UTC")
    assert page.status_code == 200
    html = page.text
    stats = run_cli_json(db, "stats", "--since", SINCE, "-z", "UTC")
    total = re.search(r'id="total-cost">([^<]+)<', html).group(1)
    # Two Claude Code calls without a recorded cost: the total is marked as estimated.
    assert stats["totals"]["estimatedCalls"] == 2
    assert total == "~$" + format(Decimal(stats["totals"]["cost"]).quantize(Decimal("0.01")), ",")
    assert "Pricing complete:" in html and "2 estimated from genai-prices" in html
    # Both charts are drawn, each with its table and CSV link.
    assert '<svg id="period-chart"' in html and '<svg id="heatmap"' in html
    assert html.count('class="table-view"') == 2 and "table=period" in html and "table=weekhour" in html
    day_rows = re.findall(r'<tr data-key="(\d{4}-\d\d-\d\d)">', html)
    assert day_rows == [g["key"] for g in run_cli_json(db, "stats", "--by", "day", "--since", SINCE, "-z",
                                                       "UTC")["groups"]]
    # Top sessions link to their session pages; the dashboard is linked from the list page.
    assert f'href="/s/{CLAUDE}"' in html
    assert 'href="/usage"' in client.get("/").text
    assert 'href="/usage"' in client.get(f"/s/{CLAUDE}").text


def test_themes_filters_and_bad_input(client):
    assert '<html lang="en" class="theme-dark">' in client.get("/usage?theme=dark").text
    assert '<html lang="en" class="theme-auto">' in client.get("/usage?theme=purple").text
    bad = client.get("/usage?since=last+tuesday")
    assert bad.status_code == 400 and "invalid date" in bad.text
    assert client.get("/usage.csv?table=nope").status_code == 404
    hostile = client.get("/usage?project=%3Cscript%3Ealert(1)%3C/script%3E")
    assert "<script>alert(1)" not in hostile.text


def test_csv_cells_that_start_a_formula_are_quoted(tmp_path):
    store = open_store(str(tmp_path / "s.db"), create=True)
    store.create(_header("f", cwd="=cmd|' /C calc'!A0"), [
        _assistant("f1", None, "2026-01-01T10:00:00.000Z", _usage(5, cost=0.5))])
    client = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
    rows = _csv(client, f"since={SINCE}&table=project")
    assert rows[0]["key"] == "'=cmd|' /C calc'!A0"
    store.close()


def test_insights_on_the_dashboard_and_the_session_page(client):
    html = client.get(f"/usage?since={SINCE}&insights=1").text
    # Hand counts (tests/usage/test_insights.py): the large session's one bash loop; branching's abandoned
    # branch at $0.0045 (shown rounded to the cent).
    assert "Sessions with the most error loops" in html and 'href="/s/d703a1a9-' in html
    assert "019cadb4 · a1000007" in html
    session = " ".join(client.get("/s/019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01").text.split())
    assert 'id="insights"' in session and "Insights: 2 tool calls, 0 errors, 0 error loops" in session
    assert "a1000007</a>: 2 entries, $0.00" in session
