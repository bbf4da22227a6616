"""Usage and cost accounting on every store: the billed-record rule, de-duplication
across copies, pricing, grouping by time zone, the numbers the viewer lists.

Expected values are worked out by hand in the comments; the corpus totals were
summed from the files' assistant ``usage`` objects."""

from __future__ import annotations

import json
import time
from decimal import Decimal

import pytest

from builders import billed_assistant as _assistant
from builders import usage as _usage
from builders import usage_header as _header
from sessiontree.core.usage import (
    records_from_entry,
)
from sessiontree.session.manager import SessionManager
from sessiontree.stores.sqlite.store import SqliteStore
from sessiontree.usage.report import (
    nanos_to_decimal,
    session_usage,
    usage_report,
)
from usage_support import BEFORE, CORPUS_TOTALS, LARGE, FakeCatalog, _by_model, corpus


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


def test_counts_beyond_what_an_agent_can_record_are_unusable_and_never_break_a_write(store):
    # 2**53 - 1 is JavaScript's largest exact integer: taken. One more, or 2**64: 0 tokens.
    from sessiontree.core.usage import MAX_COUNT, records_from_entry

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
