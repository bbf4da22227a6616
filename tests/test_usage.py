"""Usage and cost accounting (issue 14): the billed-record rule, de-duplication across
copies, pricing, grouping by time zone, the SQLite ledger, and ``sessiontree stats``.

Expected values are worked out by hand in the comments; the corpus totals were
summed from the files' assistant ``usage`` objects (issue 14).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import billed_assistant as _assistant
from builders import usage as _usage
from builders import usage_header as _header
from sessiontree.cli import cli
from sessiontree.core.usagerecords import (
    UsageQuery,
    cost_to_nanos,
    dedup_key,
    records_from_entry,
)
from sessiontree.session.manager import SessionManager
from sessiontree.stores.jsonl.store import JsonlStore
from sessiontree.stores.memory import MemoryStore
from sessiontree.stores.sqlite.store import SqliteStore
from sessiontree.usage.report import (
    GenaiPricesCatalog,
    format_usd,
    nanos_to_decimal,
    parse_date_bound,
    resolve_timezone,
    session_usage,
    usage_report,
)

CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus" / "pi-v1"
BEFORE = CORPUS / "pi-mono-before-compaction.jsonl"
LARGE = CORPUS / "pi-mono-large-session.jsonl"
corpus = pytest.mark.skipif(not BEFORE.exists(), reason="shared/corpus not beside the checkout")

OPUS = "anthropic/claude-opus-4-5"
SONNET = "anthropic/claude-sonnet-4-5"
CODEX = "openai/gpt-5.1-codex"
#: Summed by hand from the files (issue 14): calls, input, output, cache read, cache write, cost.
CORPUS_TOTALS = {
    OPUS: (484, 3_689, 187_895, 54_693_675, 1_685_320, "42.5959075"),
    SONNET: (452, 1_049, 83_156, 43_229_469, 4_296_232, "30.3301977"),
    CODEX: (1, 0, 0, 0, 0, "0"),
}


class FakeCatalog:
    """$1 per million tokens of every kind for known models: easy to check by hand."""

    name = "fake-catalog"

    def __init__(self, known=("m-known",)):
        self.known = set(known)
        self.asked = []

    def price(self, provider, model, input, output, cache_read, cache_write, at_ms):
        self.asked.append((provider, model, input, output, cache_read, cache_write))
        if model not in self.known:
            return None
        return (input + output + cache_read + cache_write) * 1000  # 1e-6 USD = 1000 nanos per token


@pytest.fixture(params=["sqlite", "jsonl", "memory", "postgres"])
def store(request, tmp_path):
    if request.param == "sqlite":
        s = SqliteStore(str(tmp_path / "s.db"))
    elif request.param == "jsonl":
        s = JsonlStore(str(tmp_path / "j"))
    elif request.param == "postgres":
        from sessiontree.stores.postgres.store import PostgresStore

        s = PostgresStore(request.getfixturevalue("pg_url"))
    else:
        s = MemoryStore()
    yield s
    s.close()


def _by_model(report):
    return {g.key: (g.totals.calls, g.totals.input, g.totals.output, g.totals.cache_read, g.totals.cache_write,
                    str(nanos_to_decimal(g.totals.cost_nanos))) for g in report.groups}


# --------------------------------------------------------------------------- corpus


@corpus
def test_corpus_totals_hold_through_forks_branches_copies_and_context_edits(store, tmp_path):
    before = SessionManager.import_from_jsonl(BEFORE, target=store)
    large = SessionManager.import_from_jsonl(LARGE, target=store)
    assert _by_model(usage_report(store, by="model")) == CORPUS_TOTALS
    # Per session, the totals of each file.
    by_session = {g.key: g.totals for g in usage_report(store, by="session").groups}
    assert str(nanos_to_decimal(by_session[before.get_session_id()].cost_nanos)) == "42.5959075"
    assert str(nanos_to_decimal(by_session[large.get_session_id()].cost_nanos)) == "30.3301977"

    # Fork both, branch one (mid-session: a prefix of its calls), import an export under another id,
    # import the raw format-1 file under another id (the upgrade derives *different* entry ids),
    # and context-edit an assistant entry of each original.
    before.fork_to("/elsewhere")
    large.fork_to("/elsewhere")
    assistant_ids = [e["id"] for e in large.get_entries()
                     if e["type"] == "message" and e["message"]["role"] == "assistant"]
    SessionManager.open(store, large.get_session_id()).create_branched_session(assistant_ids[200])
    exported = json.loads(store.read(before.get_session_id()).to_bytes().split(b"\n", 1)[0])
    rest = store.read(before.get_session_id()).to_bytes().split(b"\n", 1)[1]
    exported["id"] = "copy-of-before"
    (tmp_path / "copy.jsonl").write_bytes(json.dumps(exported).encode() + b"\n" + rest)
    SessionManager.import_from_jsonl(tmp_path / "copy.jsonl", target=store)
    lines = LARGE.read_bytes().split(b"\n", 1)
    v1 = json.loads(lines[0])
    v1["id"] = "v1-copy-of-large"
    (tmp_path / "v1copy.jsonl").write_bytes(json.dumps(v1).encode() + b"\n" + lines[1])
    copy = SessionManager.import_from_jsonl(tmp_path / "v1copy.jsonl", target=store)
    assert {e["id"] for e in copy.get_entries()}.isdisjoint({e["id"] for e in large.get_entries()})
    for manager in (before, large):
        reopened = SessionManager.open(store, manager.get_session_id())
        target = next(e["id"] for e in reopened.get_entries()
                      if e["type"] == "message" and e["message"]["role"] == "assistant")
        reopened.append_context_edit(target, None)
    assert len(store.session_ids()) == 7
    assert _by_model(usage_report(store, by="model")) == CORPUS_TOTALS
    # Every call is owned by one session: the earliest (createdAt) holding it. The exported copy kept
    # its source's createdAt, so the tie goes to the smaller id ("copy-of-before" < "ffae...").
    by_session = {g.key: g.totals.calls for g in usage_report(store, by="session").groups}
    assert by_session == {"copy-of-before": 484, large.get_session_id(): 453}
    # A copy's own view: everything it holds, all of it copied.
    mine = session_usage(store, copy.get_session_id())
    assert (mine.totals.calls, mine.copied.calls, mine.billed.calls) == (453, 453, 0)
    if isinstance(store, SqliteStore):
        store.reindex()
        assert _by_model(usage_report(store, by="model")) == CORPUS_TOTALS


@corpus
def test_corpus_catalog_prices_match_recorded_costs(tmp_path):
    # The recorded costs were computed with the providers' list prices, so the offline
    # catalogue gives the same totals: a cross-check of both.
    store = SqliteStore(str(tmp_path / "s.db"))
    SessionManager.import_from_jsonl(BEFORE, target=store)
    SessionManager.import_from_jsonl(LARGE, target=store)
    report = usage_report(store, by="model", cost="catalog")
    assert _by_model(report) == CORPUS_TOTALS
    # 27 calls (aborted turns) used no tokens: free in every mode, not estimated.
    assert (report.totals.estimated_calls, report.totals.recorded_calls) == (910, 27)
    assert report.catalog.startswith("genai-prices")


# --------------------------------------------------------------------------- sources


def test_every_usage_source_counts(store):
    ts = "2026-01-01T10:00:00.000Z"
    entries = [
        _assistant("a1", None, ts, _usage(10, 20, 30, 40, 0.5)),
        {"type": "message", "id": "t1", "parentId": "a1", "timestamp": ts,
         "message": {"role": "toolResult", "toolCallId": "c1", "toolName": "agent", "content": [],
                     "isError": False, "timestamp": 2, "usage": _usage(1, 2, 0, 0, 0.25)}},
        {"type": "session_summary", "id": "s1", "parentId": "t1", "timestamp": ts, "summary": "x",
         "summarizedThroughId": "a1", "usage": {"input": 812, "output": 21}},
        {"type": "compaction", "id": "c1", "parentId": "s1", "timestamp": ts, "summary": "s",
         "firstKeptEntryId": None, "tokensBefore": 1, "usage": _usage(100, 0, 0, 0, 0.125)},
        {"type": "branch_summary", "id": "b1", "parentId": "c1", "timestamp": ts, "fromId": "a1",
         "summary": "left", "usage": _usage(0, 5, 0, 0, 0.0625)},
        {"type": "usage", "id": "u1", "parentId": "b1", "timestamp": ts, "kind": "title",
         "provider": "p", "model": "m-known", "usage": _usage(3, 4, 0, 0, 1.0)},
        # Not billed: a user message, a context edit of the assistant entry.
        {"type": "message", "id": "m1", "parentId": "u1", "timestamp": ts,
         "message": {"role": "user", "content": "hi", "timestamp": 3}},
        {"type": "context_edit", "id": "e1", "parentId": "m1", "timestamp": ts, "targetId": "a1",
         "replacement": None},
    ]
    store.create(_header("s"), entries)
    sources = [r.source for e in entries for r in records_from_entry(e)]
    assert sources == ["assistant", "toolResult", "session_summary", "compaction", "branch_summary", "usage"]
    catalog = FakeCatalog()
    report = usage_report(store, by="model", catalog=catalog)
    t = report.totals
    assert t.calls == 6
    assert (t.input, t.output, t.cache_read, t.cache_write) == (10 + 1 + 812 + 100 + 3, 20 + 2 + 21 + 5 + 4, 30, 40)
    # Recorded 0.5 + 0.25 + 0.125 + 0.0625 + 1.0 = 1.9375; the summary has no cost and no model: unpriced.
    assert t.recorded_nanos == 1_937_500_000 and t.cost_nanos == 1_937_500_000
    assert (t.unpriced_calls, t.unpriced_tokens, t.unpriced_models) == (1, 833, {"unknown/unknown"})
    assert not report.complete
    assert _by_model(report)["p/m-known"][0] == 2  # the assistant call and the usage entry


def test_abandoned_branch_calls_count(store):
    entries = [_assistant("a1", None, "2026-01-01T10:00:00.000Z", _usage(1, 1, cost=0.001)),
               _assistant("a2", "a1", "2026-01-01T10:01:00.000Z", _usage(2, 2, cost=0.002)),
               _assistant("a3", "a1", "2026-01-01T10:02:00.000Z", _usage(4, 4, cost=0.004))]  # sibling of a2
    store.create(_header("s"), entries)
    t = usage_report(store).totals
    assert (t.calls, t.input, t.cost_nanos) == (3, 7, 7_000_000)


# --------------------------------------------------------------------------- de-duplication


def test_copies_count_once_and_distinct_calls_never_merge(store):
    a = _assistant("a1", None, "2026-01-01T10:00:00.000Z", _usage(10, 10, cost=0.01))
    b = _assistant("a2", "a1", "2026-01-01T10:00:00.000Z", _usage(10, 10, cost=0.01))  # same content, new id
    c = _assistant("a3", "a2", "2026-01-01T10:00:00.001Z", _usage(10, 10, cost=0.01))  # 1 ms later
    d = _assistant("a4", "a3", "2026-01-01T10:00:00.001Z", _usage(10, 11, cost=0.01))  # other usage
    store.create(_header("orig", created="2026-01-01T00:00:00.000Z", cwd="/one"), [a, b, c, d])
    # A copy in another session (an old fork: other entry ids, same content), and a partial copy.
    renamed = [{**e, "id": "x" + e["id"]} for e in (a, b, c, d)]
    for i, e in enumerate(renamed):
        e["parentId"] = renamed[i - 1]["id"] if i else None
    store.create(_header("fork", created="2026-02-01T00:00:00.000Z", cwd="/two"), renamed)
    store.create(_header("part", created="2026-03-01T00:00:00.000Z", cwd="/two"), [a])
    t = usage_report(store).totals
    # Inside one session, a and b are two calls (a session never holds a copy of its own entry).
    assert (t.calls, t.output, t.cost_nanos) == (4, 41, 40_000_000)
    projects = {g.key: g.totals.calls for g in usage_report(store, by="project").groups}
    assert projects == {"/one": 4}
    assert usage_report(store, cwd="/two").totals.calls == 0
    # When the original is deleted, the earliest remaining copy owns the calls.
    store.delete("orig")
    assert {g.key: g.totals.calls for g in usage_report(store, by="session").groups} == {"fork": 4}
    assert session_usage(store, "part").copied.calls == 1
    assert session_usage(store, "fork").copied.calls == 0


def test_key_ignores_key_order_and_entry_id():
    u1 = {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 0.1}}
    u2 = {"cost": {"total": 0.1}, "cacheWrite": 0, "cacheRead": 0, "output": 2, "input": 1}
    r1 = records_from_entry(_assistant("aaaa0001", None, "2026-01-01T10:00:00.000Z", u1))[0]
    r2 = records_from_entry(_assistant("bbbb0002", "x", "2026-01-01T10:00:00.000Z", u2))[0]
    r3 = records_from_entry(_assistant("aaaa0001", None, "2026-01-01T10:00:01.000Z", u1))[0]
    assert r1.key == r2.key and r1.key != r3.key


# --------------------------------------------------------------------------- costs


@pytest.mark.parametrize("cost, estimated", [(None, True), (0, True), (-0.5, True), (0.002, False)])
def test_unusable_recorded_costs_are_estimated(store, cost, estimated):
    store.create(_header("s"), [_assistant("a1", None, "2026-01-01T10:00:00.000Z", _usage(1000, 500, cost=cost))])
    report = usage_report(store, catalog=FakeCatalog())
    t = report.totals
    if estimated:
        # 1,500 tokens at $1 per million: $0.0015.
        assert (t.estimated_calls, t.estimated_nanos, t.cost_nanos, t.recorded_calls) == (1, 1_500_000, 1_500_000, 0)
        assert report.catalog == "fake-catalog"
        assert usage_report(store, cost="recorded").totals.unpriced_calls == 1
    else:
        assert (t.recorded_calls, t.cost_nanos, t.estimated_calls) == (1, 2_000_000, 0)
        assert report.catalog is None  # never consulted
        assert usage_report(store, cost="catalog", catalog=FakeCatalog()).totals.cost_nanos == 1_500_000


def test_zero_tokens_with_zero_cost_is_free_not_missing(store):
    store.create(_header("s"), [_assistant("a1", None, "2026-01-01T10:00:00.000Z", _usage(cost=0))])
    t = usage_report(store, catalog=FakeCatalog()).totals
    assert (t.calls, t.recorded_calls, t.unpriced_calls, t.cost_nanos) == (1, 1, 0, 0)


def test_unknown_models_are_named_and_partial_totals_say_so(store):
    store.create(_header("s"), [
        _assistant("a1", None, "2026-01-01T10:00:00.000Z", _usage(100, cost=0.5)),
        _assistant("a2", "a1", "2026-01-01T10:01:00.000Z", _usage(7, 3), model="mystery-1", provider="acme")])
    report = usage_report(store, catalog=FakeCatalog())
    data = report.to_dict()
    assert data["pricing"] == {"complete": False, "recordedCalls": 1, "estimatedCalls": 0, "unpricedCalls": 1,
                               "unpricedTokens": 10, "unpricedModels": ["acme/mystery-1"], "skippedSessions": 0,
                               "catalog": "fake-catalog"}
    assert data["totals"]["cost"] == "0.5"


def test_cost_conversion_is_exact():
    assert cost_to_nanos(0.1) == 100_000_000
    assert cost_to_nanos(42.5959075) == 42_595_907_500
    assert cost_to_nanos(float("nan")) is None and cost_to_nanos(float("inf")) is None
    assert cost_to_nanos(-1) is None and cost_to_nanos(True) is None and cost_to_nanos("1") is None
    assert str(nanos_to_decimal(100_000_000_000)) == "100"
    assert str(nanos_to_decimal(1)) == "1E-9" or nanos_to_decimal(1) == Decimal("0.000000001")
    assert format_usd(42_595_907_500) == "$42.60"


def test_genai_prices_catalog_prices_a_known_call():
    # claude-opus-4-5: $5/M input, $25/M output, $0.50/M cache read, $6.25/M cache write.
    # 1,000 input + 100 output + 1,000 cache read + 2,000 cache write
    # = 0.005 + 0.0025 + 0.0005 + 0.0125 = $0.0205.
    price = GenaiPricesCatalog().price("anthropic", "claude-opus-4-5", 1000, 100, 1000, 2000,
                                       1_765_000_000_000)
    assert price == 20_500_000
    assert GenaiPricesCatalog().price("nobody", "no-such-model-xyz", 1, 1, 0, 0, 0) is None


# --------------------------------------------------------------------------- time


def test_day_grouping_follows_the_time_zone(store):
    # 23:30 UTC on 1 March is 00:30 on 2 March in UTC+1 (Berlin has no DST in March before the 30th).
    store.create(_header("s"), [
        _assistant("a1", None, "2025-03-01T23:30:00.000Z", _usage(1, cost=0.001)),
        _assistant("a2", "a1", "2025-03-01T22:59:00.000Z", _usage(2, cost=0.002))])
    days = lambda **kw: {g.key: g.totals.calls for g in usage_report(store, by="day", **kw).groups}  # noqa: E731
    assert days(tz="UTC") == {"2025-03-01": 2}
    assert days(tz="+01:00") == {"2025-03-01": 1, "2025-03-02": 1}
    assert days(tz="Europe/Berlin") == {"2025-03-01": 1, "2025-03-02": 1}
    assert days(tz="Asia/Kathmandu") == {"2025-03-02": 2}  # +05:45: a quarter-hour zone
    # --since / --until are days of the same zone.
    assert days(tz="Europe/Berlin", since="2025-03-02") == {"2025-03-02": 1}
    assert days(tz="UTC", until="20250301") == {"2025-03-01": 2}
    assert days(tz="Europe/Berlin", until="2025-03-01") == {"2025-03-01": 1}
    weeks = {g.key for g in usage_report(store, by="week", tz="+01:00").groups}
    assert weeks == {"2025-02-24"}  # 1 and 2 March 2025 are a Saturday and Sunday: the week of Monday 24 Feb
    assert {g.key for g in usage_report(store, by="month", tz="+01:00").groups} == {"2025-03"}


def test_local_zone_is_the_default(store, monkeypatch):
    store.create(_header("s"), [_assistant("a1", None, "2025-03-01T23:30:00.000Z", _usage(1, cost=0.001))])
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    try:
        assert [g.key for g in usage_report(store, by="day").groups] == ["2025-03-02"]
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_relative_since_and_bad_values():
    berlin = resolve_timezone("Europe/Berlin")
    now = 1_741_000_000_000  # 2025-03-03T11:06:40Z
    assert parse_date_bound("1d", berlin, end=False, now_ms=now) == 1_740_956_400_000  # 2025-03-02T23:00Z
    assert parse_date_bound("7d", berlin, end=False, now_ms=now) == 1_740_956_400_000 - 6 * 86_400_000
    for bad in ("yesterday", "2025-13-01", "0d"):
        with pytest.raises(ValueError):
            parse_date_bound(bad, berlin, end=False, now_ms=now)
    with pytest.raises(ValueError):
        resolve_timezone("Mars/Olympus")


# --------------------------------------------------------------------------- the SQLite ledger


def _ledger(store):
    return store._connection().execute(
        "SELECT session_id, seq, source, input, cost_nanos FROM usage_ledger ORDER BY session_id, seq").fetchall()


def _rollup(store):
    return store._connection().execute(
        "SELECT owner, provider, model, bucket, shape, calls, input, cost_nanos FROM usage_rollup"
        " ORDER BY owner, provider, model, bucket, shape").fetchall()


def test_ledger_is_written_with_entries_removed_with_sessions_and_rebuilt(tmp_path):
    store = SqliteStore(str(tmp_path / "s.db"))
    store.create(_header("s"), [_assistant("a1", None, "2026-01-01T10:00:00.000Z", _usage(5, cost=0.5))])
    store.append("s", [_assistant("a2", "a1", "2026-01-01T10:01:00.000Z", _usage(6))])
    assert _ledger(store) == [("s", 0, "assistant", 5, 500_000_000), ("s", 1, "assistant", 6, None)]
    # The rollup: one row per (owner, provider, model, bucket, shape); the unpriced call keeps its tokens.
    rollup = [("73", "p", "m-known", 1_767_261_600_000, "", 1, 5, 500_000_000),
              ("73", "p", "m-known", 1_767_261_600_000, "6,0,0,0", 1, 6, 0)]  # 2026-01-01T10:00Z
    assert _rollup(store) == rollup
    store._connection().execute("DELETE FROM usage_calls")  # drift, in both derived tables
    store._connection().execute("DELETE FROM usage_rollup")
    assert usage_report(store).totals.calls == 0
    assert store.reindex() == 1
    assert _ledger(store) == [("s", 0, "assistant", 5, 500_000_000), ("s", 1, "assistant", 6, None)]
    assert store._connection().execute("SELECT m, owner FROM usage_calls").fetchall() == [(1, "73"), (1, "73")]  # hex("s")
    assert _rollup(store) == rollup
    store._connection().execute("UPDATE usage_rollup SET calls = 7")  # drift in the rollup alone
    assert store.reindex() == 1
    assert _rollup(store) == rollup
    store.delete("s")
    assert _ledger(store) == []
    assert store._connection().execute("SELECT count(*) FROM usage_calls").fetchone()[0] == 0
    assert _rollup(store) == []


def test_schema_step_fills_the_ledger_of_an_existing_store(tmp_path):
    path = str(tmp_path / "s.db")
    store = SqliteStore(path)
    store.create(_header("s"), [_assistant("a1", None, "2026-01-01T10:00:00.000Z", _usage(5, cost=0.5))])
    store.close()
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE usage_ledger")
    conn.execute("DROP TABLE usage_calls")
    conn.execute("DELETE FROM schema_migrations WHERE name = 'm006_usage_ledger'")
    conn.commit()
    conn.close()
    readonly = SqliteStore(path, readonly=True)  # an older schema read as it is: answered from entries
    assert usage_report(readonly).totals.calls == 1
    readonly.close()
    store = SqliteStore(path)
    assert "m006_usage_ledger" in store.applied_migrations()
    assert _ledger(store) == [("s", 0, "assistant", 5, 500_000_000)]


# --------------------------------------------------------------------------- command line


@corpus
def test_stats_command_on_the_corpus(tmp_path):
    db = str(tmp_path / "s.db")
    runner = CliRunner()
    assert runner.invoke(cli, ["--store", db, "import", str(BEFORE), str(LARGE)]).exit_code == 0
    result = runner.invoke(cli, ["--store", db, "stats", "--by", "model"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["model", "calls", "input", "output", "cache", "read", "cache", "write", "total",
                                "tokens", "cost"]
    assert lines[1].split() == [OPUS, "484", "3,689", "187,895", "54,693,675", "1,685,320", "56,570,579", "$42.60"]
    assert lines[4].split() == ["total", "937", "4,738", "271,051", "97,923,144", "5,981,552", "104,180,485",
                                "$72.93"]
    result = runner.invoke(cli, ["--store", db, "stats", "--by", "day", "--timezone", "UTC", "--json"])
    data = json.loads(result.output)
    assert data["schemaVersion"] == 1 and data["by"] == "day" and data["pricing"]["complete"] is True
    assert [g["key"] for g in data["groups"]] == ["2025-11-20", "2025-11-21", "2025-12-08", "2025-12-09"]
    assert data["totals"]["cost"] == "72.9261052" and data["totals"]["costNanos"] == 72_926_105_200

    def no_floats(value):
        if isinstance(value, dict):
            return all(no_floats(v) for v in value.values())
        if isinstance(value, list):
            return all(no_floats(v) for v in value)
        return not isinstance(value, float)

    assert no_floats(data)
    text = runner.invoke(cli, ["--store", db, "stats", "--by", "day", "-z", "UTC"]).output
    assert "████████████████████████████████████████  $29.47" in text  # the most expensive day: a full bar
    show = json.loads(runner.invoke(cli, ["--store", db, "show", "d703", "--json"]).output)
    assert show["usage"]["totals"]["cost"] == "30.3301977" and show["usage"]["totals"]["calls"] == 453
    shown = runner.invoke(cli, ["--store", db, "show", "ffae"]).output
    assert "anthropic/claude-opus-4-5 (484)" in shown and "$42.5959" in shown
    listed = runner.invoke(cli, ["--store", db, "list", "--cost"]).output
    assert "$42.60" in listed and "$30.33" in listed
    rows = json.loads(runner.invoke(cli, ["--store", db, "list", "--cost", "--json"]).output)
    assert {r["id"][:4]: r["usage"]["cost"] for r in rows} == {"ffae": "42.5959075", "d703": "30.3301977"}


def test_stats_sanitises_session_strings_and_rejects_bad_flags(tmp_path):
    store = SqliteStore(str(tmp_path / "s.db"))
    store.create(_header("s", cwd="/evil\x1b[31m"), [
        _assistant("a1", None, "2026-01-01T10:00:00.000Z", _usage(5, cost=0.5), model="m\x1b]0;x\x07")])
    store.close()
    runner = CliRunner()
    for by in ("model", "project"):
        out = runner.invoke(cli, ["--store", str(tmp_path / "s.db"), "stats", "--by", by]).output
        assert "\x1b" not in out and "\x07" not in out
    bad = runner.invoke(cli, ["--store", str(tmp_path / "s.db"), "stats", "--since", "last tuesday"])
    assert bad.exit_code == 1 and "invalid date" in bad.output
    empty = runner.invoke(cli, ["--store", str(tmp_path / "s.db"), "stats", "--since", "2030-01-01"])
    assert empty.exit_code == 0 and "No usage recorded in that range." in empty.output


def test_store_usage_protocol_rows_agree(tmp_path):
    # The three implementations give the same rows for the same sessions (ledger == recomputation).
    entries = [_assistant("a1", None, "2026-01-01T10:00:00.000Z", _usage(5, cost=0.5)),
               _assistant("a2", "a1", "2026-01-01T10:20:00.000Z", _usage(6)),
               _assistant("a3", "a2", "2026-01-01T10:21:00.000Z", _usage(6))]
    results = []
    for s in (SqliteStore(str(tmp_path / "s.db")), JsonlStore(str(tmp_path / "j")), MemoryStore()):
        s.create(_header("one"), entries)
        s.create(_header("two", created="2026-02-01T00:00:00.000Z"), entries[:2])
        for query in (UsageQuery(), UsageQuery(per_session=True), UsageQuery(session_id="two"),
                      UsageQuery(price_all=True), UsageQuery(since_ms=1_767_261_600_000)):
            rows = sorted((r.session_id or "", r.provider, r.model, r.bucket, r.recorded, r.copied, r.per_call,
                           r.calls, r.input, r.cost_nanos) for r in s.usage(query))
            results.append((s.kind, query, rows))
        s.close()
    by_kind = {}
    for kind, query, rows in results:
        by_kind.setdefault(kind, []).append(rows)
    assert by_kind["sqlite"] == by_kind["jsonl"] == by_kind["memory"]
    # a2 and a3 have no cost and the same tokens in one bucket: one per-call row of 2 calls.
    assert ("", "p", "m-known", 1_767_262_500_000, False, False, True, 2, 12, 0) in by_kind["sqlite"][0]  # 10:15Z
    assert os.path.exists(tmp_path / "s.db")


def test_counts_beyond_what_an_agent_can_record_are_unusable_and_never_break_a_write(store):
    # 2**53 - 1 is JavaScript's largest exact integer: taken. One more, or 2**64: 0 tokens.
    from sessiontree.core.usagerecords import MAX_COUNT, records_from_entry

    def assistant(entry_id, tokens):
        return {"type": "message", "id": entry_id, "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
                "message": {"role": "assistant", "content": [], "provider": "p", "model": "m", "timestamp": 1,
                            "usage": {"input": tokens, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                                      "cost": {"total": 10**12}}}}

    assert records_from_entry(assistant("a", MAX_COUNT))[0].input == MAX_COUNT
    assert records_from_entry(assistant("a", MAX_COUNT + 1))[0].input == 0
    # A recorded cost of a trillion dollars is beyond MAX_COST_NANOS: unusable, not an overflow.
    assert records_from_entry(assistant("a", 5))[0].cost_nanos is None
    store.create(_header("huge"), [assistant("a1", 2**64)])  # before the bound: OverflowError in SQLite
    assert store.load("huge").entries[0]["id"] == "a1"


def test_session_stats_feeds_the_viewer_list(store):
    # Two calls owned by "a" (10 + 5 tokens, $0.000001 + $0.000002), none by "b".
    from decimal import Decimal

    from sessiontree.usage.report import session_stats

    def call(entry_id, parent, second, tokens, cost):
        return {"type": "message", "id": entry_id, "parentId": parent,
                "timestamp": f"2026-01-01T00:00:0{second}.000Z",
                "message": {"role": "assistant", "content": [], "provider": "p", "model": "m", "timestamp": second,
                            "usage": {"input": tokens, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                                      "cost": {"total": cost}}}}

    store.create(_header("a"), [call("c1", None, 1, 10, 0.000001), call("c2", "c1", 2, 5, 0.000002)])
    store.create(_header("b"), [])
    assert session_stats(store, ["a", "b"]) == {"a": {"models": ["p/m"], "tokens": 15,
                                                     "cost": Decimal("0.000003")}}
    assert session_stats(store, ["b"]) == {}


def _old_dedup_key(source, entry, message, usage, provider, model, extra):
    """The rule as first written: canonical (sorted) usage, jsonio.dumps, BLAKE2b-128."""
    import hashlib

    from sessiontree.core.usagerecords import _canonical
    from sessiontree.format import jsonio

    parts = [source, entry.get("timestamp"), message.get("timestamp") if message is not None else None,
             provider, model, extra, _canonical(usage)]
    return hashlib.blake2b(jsonio.dumps(parts), digest_size=16).digest()


_key_text = st.one_of(st.text(max_size=5), st.sampled_from(["input", "output", "cacheRead", "0", "10", "2", "é", "z",
                                                            "Z", "\U0001f600", "\uffff", "\ud800", "a\x00"]))
_usage_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
              st.floats(allow_nan=False), st.text(max_size=5),
              st.sampled_from([0.033697, 1.0, 0.0, -0.0, 1e-7, 1e21, 2**53 + 1])),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_key_text, inner, max_size=5)),
    max_leaves=10)


@settings(max_examples=500, deadline=None)
@given(_usage_values, st.sampled_from(["2026-01-01T00:00:00.000Z", None, 5]), st.sampled_from([None, "p", "\ud800"]))
def test_dedup_key_fast_path_gives_the_stored_keys(usage, stamp, provider):
    """Ledger rows already stored hold keys of the original rule: the orjson fast path
    must give the same 16 bytes for any usage value (key order, numbers, surrogates)."""
    entry = {"type": "message", "id": "a", "parentId": None, "timestamp": stamp}
    message = {"role": "assistant", "timestamp": 1700000000000, "usage": usage}
    for args in (("assistant", entry, message, usage, provider, "m", None),
                 ("usage", entry, None, usage, None, None, "kind")):
        assert dedup_key(*args) == _old_dedup_key(*args)
