"""Usage and cost accounting: the billed-record rule, de-duplication across
copies, pricing, grouping by time zone, the SQLite ledger, and ``sessiontree stats``.

Expected values are worked out by hand in the comments; the corpus totals were
summed from the files' assistant ``usage`` objects.
"""

from __future__ import annotations

import json
import os
import sqlite3
from decimal import Decimal

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import billed_assistant as _assistant
from builders import usage as _usage
from builders import usage_header as _header
from sessiontree.cli import cli
from sessiontree.core.usage import (
    UsageQuery,
    cost_to_nanos,
    dedup_key,
    records_from_entry,
)
from sessiontree.session.manager import SessionManager
from sessiontree.stores.jsonl.store import JsonlStore
from sessiontree.stores.memory import MemoryStore
from sessiontree.stores.sqlite import search as sqlite_search
from sessiontree.stores.sqlite.store import SqliteStore
from sessiontree.usage.report import (
    GenaiPricesCatalog,
    format_usd,
    nanos_to_decimal,
    parse_date_bound,
    resolve_timezone,
    usage_report,
)
from usage_support import BEFORE, CORPUS_TOTALS, LARGE, OPUS, _by_model, corpus

# --------------------------------------------------------------------------- corpus


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


# --------------------------------------------------------------------------- de-duplication


def test_key_ignores_key_order_and_entry_id():
    u1 = {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 0.1}}
    u2 = {"cost": {"total": 0.1}, "cacheWrite": 0, "cacheRead": 0, "output": 2, "input": 1}
    r1 = records_from_entry(_assistant("aaaa0001", None, "2026-01-01T10:00:00.000Z", u1))[0]
    r2 = records_from_entry(_assistant("bbbb0002", "x", "2026-01-01T10:00:00.000Z", u2))[0]
    r3 = records_from_entry(_assistant("aaaa0001", None, "2026-01-01T10:00:01.000Z", u1))[0]
    assert r1.key == r2.key and r1.key != r3.key


# --------------------------------------------------------------------------- costs


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
    return store.db.connection().execute(
        "SELECT session_id, seq, source, input, cost_nanos FROM usage_ledger ORDER BY session_id, seq").fetchall()


def _rollup(store):
    return store.db.connection().execute(
        "SELECT owner, provider, model, bucket, shape, calls, input, cost_nanos FROM usage_rollup"
        " ORDER BY owner, provider, model, bucket, shape").fetchall()


def test_ledger_is_written_with_entries_removed_with_sessions_and_rebuilt(tmp_path):
    store = SqliteStore(str(tmp_path / "s.db"))
    store.create(_header("s"), [_assistant("a1", None, "2026-01-01T10:00:00.000Z", _usage(5, cost=0.5))])
    store.append("s", [_assistant("a2", "a1", "2026-01-01T10:01:00.000Z", _usage(6))])
    assert _ledger(store) == []  # pending: no write writes ledger rows
    assert store.settle_derived() == 2
    assert _ledger(store) == [("s", 0, "assistant", 5, 500_000_000), ("s", 1, "assistant", 6, None)]
    # The rollup: one row per (owner, provider, model, bucket, shape); the unpriced call keeps its tokens.
    rollup = [("73", "p", "m-known", 1_767_261_600_000, "", 1, 5, 500_000_000),
              ("73", "p", "m-known", 1_767_261_600_000, "6,0,0,0", 1, 6, 0)]  # 2026-01-01T10:00Z
    assert _rollup(store) == rollup
    store.db.connection().execute("DELETE FROM usage_calls")  # drift, in both derived tables
    store.db.connection().execute("DELETE FROM usage_rollup")
    assert usage_report(store).totals.calls == 0
    assert store.reindex() == 1
    assert _ledger(store) == [("s", 0, "assistant", 5, 500_000_000), ("s", 1, "assistant", 6, None)]
    assert store.db.connection().execute("SELECT m, owner FROM usage_calls").fetchall() == [(1, "73"), (1, "73")]  # hex("s")
    assert _rollup(store) == rollup
    store.db.connection().execute("UPDATE usage_rollup SET calls = 7")  # drift in the rollup alone
    assert store.reindex() == 1
    assert _rollup(store) == rollup
    store.delete("s")
    assert _ledger(store) == []
    assert store.db.connection().execute("SELECT count(*) FROM usage_calls").fetchone()[0] == 0
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
    # A bad option value is a usage error, exit 2, on every command (docs/usage.md, "Dates on the command line").
    assert bad.exit_code == 2 and "invalid date" in bad.output
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
    for kind, _query, rows in results:
        by_kind.setdefault(kind, []).append(rows)
    assert by_kind["sqlite"] == by_kind["jsonl"] == by_kind["memory"]
    # a2 and a3 have no cost and the same tokens in one bucket: one per-call row of 2 calls.
    assert ("", "p", "m-known", 1_767_262_500_000, False, False, True, 2, 12, 0) in by_kind["sqlite"][0]  # 10:15Z
    assert os.path.exists(tmp_path / "s.db")


def _old_dedup_key(source, entry, message, usage, provider, model, extra):
    """The rule as first written: canonical (sorted) usage, jsonio.dumps, BLAKE2b-128."""
    import hashlib

    from sessiontree.format import jsonio

    parts = [source, entry.get("timestamp"), message.get("timestamp") if message is not None else None,
             provider, model, extra, jsonio.sorted_keys(usage)]
    return hashlib.blake2b(jsonio.dumps(parts), digest_size=16).digest()


_key_text = st.one_of(st.text(max_size=5), st.sampled_from(["input", "output", "cacheRead", "0", "10", "2", "é", "z",
                                                            "Z", "\U0001f600", "\uffff", "\ud800", "a\x00"]))
_usage_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
              st.floats(allow_nan=False), st.text(max_size=5),
              st.sampled_from([0.033697, 1.0, 0.0, -0.0, 1e-7, 1e21, 2**53 + 1])),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_key_text, inner, max_size=5)),
    max_leaves=10)


@pytest.mark.slow
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


# -- the ledger's pending tail (docs/decisions/bulk-settle.md) ------------------------------------


def _tail_store(path):
    """Two sessions sharing a copied call ("s2" forked from "s1": the same record),
    then one more call appended to "s1": all pending, no ledger row written."""
    store = SqliteStore(path)
    store.create(_header("s1"), [_assistant("a1", None, "2026-01-01T10:00:00.000Z", _usage(5, cost=0.5))])
    store.create(_header("s2", created="2026-01-02T00:00:00.000Z"),
                 [_assistant("a1", None, "2026-01-01T10:00:00.000Z", _usage(5, cost=0.5))])
    store.append("s1", [_assistant("a2", "a1", "2026-01-01T10:01:00.000Z", _usage(7, cost=0.25))])
    return store


def test_writes_leave_the_ledger_pending_and_a_query_settles_it(tmp_path):
    store = _tail_store(str(tmp_path / "s.db"))
    assert _ledger(store) == []
    # The copied call counts once (5 + 7 input tokens, $0.75), as after a settle.
    totals = usage_report(store, by="model").totals
    assert (totals.calls, totals.input, totals.cost_nanos) == (2, 12, 750_000_000)
    assert len(_ledger(store)) == 3  # the query settled the tail: a1 in both sessions, a2
    store.close()


def test_a_read_only_store_that_cannot_settle_sums_the_entries(tmp_path, monkeypatch):
    path = str(tmp_path / "s.db")
    _tail_store(path).close()
    reader = SqliteStore(path, readonly=True)

    def refused(timeout):
        raise OSError("read-only file")

    monkeypatch.setattr(reader, "_writable_twin", refused)
    totals = usage_report(reader, by="model").totals
    assert (totals.calls, totals.input, totals.cost_nanos) == (2, 12, 750_000_000)
    assert reader.db.connection().execute("SELECT count(*) FROM usage_ledger").fetchone()[0] == 0  # nothing written
    reader.close()


def test_a_read_only_store_answers_a_short_tail_without_writing(tmp_path):
    # The settle runs in a second handle's transaction that is rolled back: the file is unchanged.
    path = str(tmp_path / "s.db")
    _tail_store(path).close()
    reader = SqliteStore(path, readonly=True)
    before = open(path, "rb").read()
    totals = usage_report(reader, by="model").totals
    assert (totals.calls, totals.input, totals.cost_nanos) == (2, 12, 750_000_000)
    assert reader.db.connection().execute("SELECT count(*) FROM usage_ledger").fetchone()[0] == 0
    assert open(path, "rb").read() == before
    reader.close()


def test_a_read_only_store_settles_a_long_tail_for_good(tmp_path, monkeypatch):
    # Longer than the search's MAX_PENDING (here 2 of the 3 records): settled and kept, as a search merges.
    monkeypatch.setattr(sqlite_search, "MAX_PENDING", 2)
    path = str(tmp_path / "s.db")
    _tail_store(path).close()
    reader = SqliteStore(path, readonly=True)
    totals = usage_report(reader, by="model").totals
    assert (totals.calls, totals.input, totals.cost_nanos) == (2, 12, 750_000_000)
    assert reader.db.connection().execute("SELECT count(*) FROM usage_ledger").fetchone()[0] == 3
    reader.close()


def test_check_store_and_reindex_agree_with_a_pending_ledger(tmp_path):
    store = _tail_store(str(tmp_path / "s.db"))
    assert store.verify() == []  # pending records are not missing rows
    assert store.settle_derived() == 3  # each entry counted once, though two indexes settle it
    assert store.verify() == []
    store.append("s2", [_assistant("b2", "a1", "2026-01-01T11:00:00.000Z", _usage(1, cost=0.1))])
    assert store.reindex() == 2  # rebuilds the ledger whole, the pending record included
    assert len(_ledger(store)) == 4
    assert store.verify() == []
    store.close()
