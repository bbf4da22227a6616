"""A branch diff with a 10,000-entry side (docs/diff.md): alignment, counts, cost columns
and the context delta, every expected value worked out by hand below; from a store and
from an open manager (whose shared history is walked once and whose projection is reused)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from builders import header
from diff_trees import assistant_at, user_at
from sessiontree.diff import diff_branches
from sessiontree.session.manager import SessionManager
from sessiontree.stores.memory import MemoryStore

SID = "019cadb4-0000-7000-8000-0000000000aa"
SHARED, SIDE_A, SIDE_B = 1_000, 10_000, 3
_START = datetime(2026, 3, 2, 9, tzinfo=UTC)


def stamp(second: int) -> str:
    """Entry timestamp ``second`` seconds after 2026-03-02T09:00:00Z (distinct stamps keep
    every billed call's key distinct)."""
    return (_START + timedelta(seconds=second)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def chain(prefix: str, parent: str | None, count: int, first_second: int, bill: tuple[int, int, float],
          calls: bool) -> list[dict[str, Any]]:
    """``count`` entries ``{prefix}{i}``: users at even i, billed assistants at odd i; with
    ``calls``, the assistants at i % 1000 == 1 also call read on ``src/{prefix}{i // 1000}.py``
    (left unanswered: the next user message closes the call with a synthetic result)."""
    out = []
    for i in range(count):
        entry_id = f"{prefix}{i}"
        ts = stamp(first_second + i)
        if i % 2 == 0:
            out.append(user_at(entry_id, parent, f"{prefix} question {i}", ts))
        else:
            content: list[dict[str, Any]] = [{"type": "text", "text": f"{prefix} answer {i}"}]
            if calls and i % 1000 == 1:
                content.append({"type": "toolCall", "id": f"call-{entry_id}", "name": "read",
                                "arguments": {"path": f"src/{prefix}{i // 1000}.py"}})
            out.append(assistant_at(entry_id, parent, ts, content, bill=bill))
        parent = entry_id
    return out


def session() -> list[dict[str, Any]]:
    """Shared s0..s999 (assistants bill 10 in, 1 out, $0.00001); A: a0..a9999 below s999
    (assistants bill 20 in, 2 out, $0.00002; 10 reads); B: b0..b2 below s999 (same bill as
    A); B comes last in the file, so b2 is the active leaf."""
    shared = chain("s", None, SHARED, 0, (10, 1, 0.00001), calls=False)
    side_a = chain("a", "s999", SIDE_A, SHARED, (20, 2, 0.00002), calls=True)
    side_b = chain("b", "s999", SIDE_B, 20_000, (20, 2, 0.00002), calls=False)
    return shared + side_a + side_b


@pytest.fixture(scope="module")
def large_store() -> MemoryStore:
    s = MemoryStore()
    s.create(header(SID), session())
    return s


def check(result: Any) -> None:
    d = result.diff
    # The fork: the 1,000 shared entries, s999 last.
    assert (d.common, d.fork_a, d.fork_b, len(d.path_a), len(d.path_b)) == (1_000, "s999", "s999", 11_000, 1_003)
    # Rows: no tail entry of A has the content of one of B (the texts differ), so the two tails
    # are one run differing on both sides, paired by kind in order: a0/b0 (user), a1/b1
    # (assistant), a2/b2 (user) changed; the other 9,997 entries of A only in A.
    statuses = [row.status for row in d.rows]
    assert statuses[:3] == ["changed"] * 3 and statuses[3:] == ["onlyA"] * 9_997
    assert [(row.a["id"], row.b["id"]) for row in d.rows[:3]] == [("a0", "b0"), ("a1", "b1"), ("a2", "b2")]
    # Counts: every entry is a message; A's reads at a1, a1001, ..., a9001 touch src/a0.py .. src/a9.py.
    common, a, b = d.stats["common"], d.stats["a"], d.stats["b"]
    assert (common.entries, common.messages, common.tool_calls) == (1_000, 1_000, {})
    assert (a.entries, a.messages, a.tool_calls) == (10_000, 10_000, {"read": 10})
    assert a.files == {f"src/a{k}.py": ["read"] for k in range(10)}
    assert (b.entries, b.messages, b.tool_calls, b.files) == (3, 3, {}, {})
    # Time spans: shared seconds 0..999, A 1,000..10,999, B 20,000..20,002 after 09:00:00.
    start_ms = _START.timestamp() * 1000
    assert (common.first_ms, common.last_ms) == (start_ms, start_ms + 999_000)
    assert (a.first_ms, a.last_ms) == (start_ms + 1_000_000, start_ms + 10_999_000)
    assert (b.first_ms, b.last_ms) == (start_ms + 20_000_000, start_ms + 20_002_000)
    # Cost columns: 500 shared calls of 11 tokens and 10,000 nano-dollars; A's 5,000 calls and
    # B's one call (b1) of 22 tokens and 20,000 nano-dollars each; no call is on both tails.
    u = result.usage
    assert (u["common"].calls, u["common"].total_tokens, u["common"].cost_nanos) == (500, 5_500, 5_000_000)
    assert (u["a"].calls, u["a"].total_tokens, u["a"].cost_nanos) == (5_000, 110_000, 100_000_000)
    assert (u["b"].calls, u["b"].total_tokens, u["b"].cost_nanos) == (1, 22, 20_000)
    # Context: both share the 1,000 messages of s0..s999; A adds its 10,000 and a synthetic
    # result for each of its 10 unanswered reads (placed before the user message that
    # follows the call): 11,010; B adds 3: 1,003.
    c = d.context
    assert (c.common, c.a.messages, c.b.messages, c.a.synthetic_results, c.b.synthetic_results) == (
        1_000, 11_010, 1_003, 10, 0)
    # Aligned: a0/b0 and a1/b1 changed, the synthetic result after a1 has no toolResult on
    # B to pair with (only in A), a2/b2 changed, then the other 10,007 messages of A.
    context_statuses = [row.status for row in c.rows]
    assert context_statuses[:4] == ["changed", "changed", "onlyA", "changed"]
    assert context_statuses[4:] == ["onlyA"] * 10_006
    assert len(c.rows) == 10_010
    assert c.settings == {} and not result.identical


def test_a_ten_thousand_entry_side_from_a_store(large_store: MemoryStore) -> None:
    check(diff_branches(large_store, SID, "a9999", "b2"))


def test_a_ten_thousand_entry_side_from_an_open_manager(large_store: MemoryStore) -> None:
    manager = SessionManager.open(large_store, SID)
    assert manager.get_leaf_id() == "b2"  # B's projection is the manager's own
    check(diff_branches(manager, SID, "a9999", "b2"))
    # Swapped sides, the same manager: A is now the active leaf.
    swapped = diff_branches(manager, SID, "b2", "a9999")
    assert (swapped.diff.common, swapped.usage["b"].calls, swapped.usage["a"].calls) == (1_000, 5_000, 1)
