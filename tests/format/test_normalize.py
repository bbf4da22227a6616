"""Bounds enforced on write (``seed:nested-calls``, ``seed:session-summary-entry``;
docs/rules/projection.md §3.10, docs/rules/listing.md §3.14, docs/rules/decisions.md D-13). Expected sizes are counted by hand below."""

from __future__ import annotations

import copy

from sessiontree.format.bounds import normalize_nested_calls, normalize_summary


def call(i: int, args: object | None = None, **extra: object) -> dict:
    out: dict = {"id": f"n{i}", "name": "t", "status": "ok", **extra}
    if args is not None:
        out["arguments"] = args
    return out


def test_arguments_over_8_kib_are_omitted_with_their_size() -> None:
    # {"x":"<n a's>"} is 6 + n + 2 bytes of compact JSON.
    fits = call(1, {"x": "a" * 8184})  # 8192 bytes: kept
    over = call(2, {"x": "a" * 8185})  # 8193 bytes: omitted
    out = normalize_nested_calls({"calls": [fits, over], "complete": True})
    assert out["calls"][0] == fits
    assert out["calls"][1] == {"id": "n2", "name": "t", "status": "ok", "argumentsBytes": 8193}
    assert out["complete"] is False


def test_arguments_over_32_kib_across_the_parent_are_omitted() -> None:
    calls = [call(i, {"x": "a" * 7992}) for i in range(5)]  # 8000 bytes each
    out = normalize_nested_calls({"calls": calls, "complete": True})
    # running total 8000, 16000, 24000, 32000 kept; the fifth would reach 40000
    assert [("arguments" in c) for c in out["calls"]] == [True, True, True, True, False]
    assert out["calls"][4]["argumentsBytes"] == 8000
    assert out["complete"] is False


def test_at_most_256_calls_error_text_500_and_unfinished() -> None:
    out = normalize_nested_calls({"calls": [call(i) for i in range(257)], "complete": True})
    assert len(out["calls"]) == 256 and out["calls"][-1]["id"] == "n255" and out["complete"] is False
    out = normalize_nested_calls({"calls": [call(1, error="e" * 501)], "complete": True})
    assert out["calls"][0]["error"] == "e" * 500 and out["complete"] is False
    out = normalize_nested_calls({"calls": [call(1, status="unfinished")], "complete": True})
    assert out["complete"] is False


def test_within_bounds_nothing_changes_and_input_is_untouched() -> None:
    record = {"calls": [call(1, {"path": "a.txt"}), call(2)], "complete": True}
    before = copy.deepcopy(record)
    assert normalize_nested_calls(record) == before
    assert record == before
    bounded = normalize_nested_calls({"calls": [call(i, {"x": "a" * 9000}) for i in range(300)], "complete": True})
    assert normalize_nested_calls(bounded) == bounded  # idempotent


def test_summary_whitespace_collapsed_and_clamped() -> None:
    assert normalize_summary("  Fixed\n\tthe   retry  tests ") == "Fixed the retry tests"
    assert normalize_summary("x" * 160) == "x" * 160
    assert normalize_summary("x" * 161) == "x" * 159 + "\u2026"
    # the cut falls on a space: trailing whitespace goes before the ellipsis
    assert normalize_summary("a" * 158 + " " + "b" * 10) == "a" * 158 + "\u2026"
