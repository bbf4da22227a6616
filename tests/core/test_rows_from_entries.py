"""``rows_from_entries`` sums a history into the rows ``rows_from_records`` gives for its
unkeyed records (docs/usage.md), whatever the entries hold."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sessiontree.core.usage import (
    MAX_COUNT,
    UsageQuery,
    records_from_entries,
    rows_from_entries,
    rows_from_records,
)

_counts = st.one_of(st.integers(min_value=-2, max_value=10**6), st.just(MAX_COUNT + 1), st.just(3.0), st.just(True),
                    st.none(), st.text(max_size=2))
_costs = st.one_of(st.sampled_from([0.0011, 2e-06, 1, 0.5, 12.25]), st.sampled_from([0.0011, 3]), st.floats(allow_nan=True, allow_infinity=True), st.integers(min_value=-5, max_value=10**12),
                   st.just(True), st.none(), st.just([1]), st.just({"x": 1}), st.just(0), st.just(0.0), st.just(-0.0),
                   st.just(1e300))


@st.composite
def _entry(draw: st.DrawFn) -> dict:
    names = ["input", "output", "cacheRead", "cacheWrite"]
    if draw(st.booleans()):  # the usual shape: all four counts, integers near the bounds
        usage = {name: draw(st.sampled_from([0, 1, 7, -1, MAX_COUNT, MAX_COUNT + 1])) for name in names}
    else:
        usage = {name: draw(_counts) for name in draw(st.sets(st.sampled_from(names)))}
    cost = draw(_costs)
    usage["cost"] = draw(st.sampled_from([{"total": cost}, {"total": cost}, cost, {}]))
    kind = draw(st.sampled_from(["message", "message", "message", "usage", "compaction", "label"]))
    role = draw(st.sampled_from(["assistant", "assistant", "user", "toolResult"]))
    message = {"role": role, "content": [], "usage": draw(st.sampled_from([usage, usage, usage, None, [1]])),
               "provider": draw(st.sampled_from(["p", "", None, 3])), "model": draw(st.sampled_from(["m", "n", None])),
               "timestamp": draw(st.integers(min_value=0, max_value=2 * 10**12))}
    entry: dict = {"type": kind, "id": "e", "parentId": None,
                   "timestamp": draw(st.sampled_from(["2026-01-01T00:00:00.000Z", "2026-02-03T10:20:30.456Z",
                                                      "bad", None]))}
    if kind == "message":
        entry["message"] = draw(st.sampled_from([message, message, "text"]))
        if draw(st.booleans()) and draw(st.booleans()):
            entry["foreign"] = {"billed": draw(st.booleans())}
    else:
        entry["usage"] = usage
    return entry


def _rows(rows: list) -> list:
    # NaN-free comparison: rows are sums of integers, but order is not part of the rule.
    return sorted(repr(row) for row in rows)


@settings(max_examples=400, deadline=None)
@given(st.lists(_entry(), max_size=12), st.booleans(), st.booleans())
def test_the_one_pass_sum_equals_the_records_summed(entries: list, price_all: bool, by_time: bool) -> None:
    query = UsageQuery(price_all=price_all, by_time=by_time)
    expected = rows_from_records(records_from_entries(entries, keyed=False), query)
    assert _rows(rows_from_entries(entries, query)) == _rows(expected)


def test_a_history_of_recorded_calls_is_one_row_per_model() -> None:
    # Three calls: two of model m (100+10 tokens at $0.0011, 5 input at $0.000002), one of n ($1).
    def call(model: str, tokens: int, out: int, cost: float) -> dict:
        return {"type": "message", "id": model, "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
                "message": {"role": "assistant", "provider": "p", "model": model, "content": [],
                            "usage": {"input": tokens, "output": out, "cacheRead": 0, "cacheWrite": 0,
                                      "cost": {"total": cost}}}}
    user = {"type": "message", "id": "u", "parentId": None, "message": {"role": "user", "content": "hi"}}
    rows = {row.model: row for row in rows_from_entries([call("m", 100, 10, 0.0011), user, call("m", 5, 0, 0.000002),
                                                         call("n", 1, 1, 1.0)], UsageQuery(by_time=False))}
    assert set(rows) == {"m", "n"}
    m = rows["m"]
    assert (m.calls, m.input, m.output, m.cost_nanos, m.recorded) == (2, 105, 10, 1_100_000 + 2_000, True)
    assert (rows["n"].calls, rows["n"].cost_nanos) == (1, 1_000_000_000)
