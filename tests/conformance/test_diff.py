"""``diff_branches`` on every store (docs/diff.md): leaves resolved from the store, a fork
compared with its source session, and the cost columns with shared calls counted once.
Expected values are worked out by hand from the trees of ``tests/diff_trees.py``."""

from __future__ import annotations

import pytest

from builders import header
from diff_trees import fork_of_two_approaches, two_approaches
from sessiontree.diff import DiffInputError, diff_branches
from sessiontree.session.manager import SessionManager

SOURCE = "019cadb4-0000-7000-8000-000000000001"
FORK = "019cadb5-0000-7000-8000-000000000002"


def _fill(store) -> None:
    store.create(header(SOURCE, created="2026-03-02T09:00:00.000Z"), two_approaches())
    store.create(header(FORK, created="2026-03-02T09:05:00.000Z", parentSessionId=SOURCE),
                 fork_of_two_approaches())


def test_two_branches_of_one_session(store) -> None:
    _fill(store)
    # No leaves given: the two most recent leaves, the older (aA2, 09:01:02) as A.
    result = diff_branches(store, SOURCE[:12])
    d = result.diff
    assert (result.session_a, d.leaf_a, result.session_b, d.leaf_b) == (SOURCE, "aA2", SOURCE, "aB1")
    assert (d.common, d.fork_a) == (3, "r1")
    # Common: a1 (110 tokens, $0.001). A: aA1 + aA2 (220 + 330 tokens, $0.005). B: aB1 (440, $0.004).
    u = result.usage
    assert (u["common"].calls, u["common"].total_tokens, u["common"].cost_nanos) == (1, 110, 1_000_000)
    assert (u["a"].calls, u["a"].total_tokens, u["a"].cost_nanos) == (2, 550, 5_000_000)
    assert (u["b"].calls, u["b"].total_tokens, u["b"].cost_nanos) == (1, 440, 4_000_000)
    data = result.to_dict()
    assert data["summary"]["a"]["usage"]["cost"] == "0.005"
    assert data["forkPoint"] == {"a": "r1", "b": "r1"}
    assert [row["status"] for row in data["rows"]] == ["onlyB", "onlyB", "changed", "onlyA", "onlyA"]
    assert data["context"]["settings"]["thinkingLevel"] == {"a": "off", "b": "high"}
    assert data["context"]["b"]["syntheticResults"] == 2


def test_one_leaf_is_compared_with_the_active_leaf(store) -> None:
    _fill(store)
    # The active leaf is aB1 (the last entry); given A = r1 (a prefix of it).
    result = diff_branches(store, SOURCE, "r1")
    assert (result.diff.leaf_a, result.diff.leaf_b, result.diff.common) == ("r1", "aB1", 3)
    # Given the active leaf itself, the other side is the most recent other leaf.
    other = diff_branches(store, SOURCE, None, "aB")
    assert (other.diff.leaf_a, other.diff.leaf_b) == ("aA2", "aB1")


def test_fork_against_its_source(store) -> None:
    _fill(store)
    result = diff_branches(store, FORK, f"{SOURCE[:10]}:aA2", "f4")
    d = result.diff
    assert (result.session_a, result.session_b) == (SOURCE, FORK)
    # The fork's copies f1..f3 match u1 a1 r1 by content.
    assert (d.common, d.fork_a, d.fork_b) == (3, "r1", "f3")
    # a1 and its copy f2 are one bill: counted once, in common. The fork adds no call.
    u = result.usage
    assert (u["common"].calls, u["common"].cost_nanos) == (1, 1_000_000)
    assert (u["a"].calls, u["a"].cost_nanos) == (2, 5_000_000)
    assert (u["b"].calls, u["b"].cost_nanos) == (0, 0)
    # SESSION: alone is that session's leaf as loaded (aB1).
    assert diff_branches(store, FORK, f"{SOURCE}:", "f4").diff.leaf_a == "aB1"


def test_open_manager_reads_its_own_session_from_memory(store) -> None:
    _fill(store)
    manager = SessionManager.open(store, SOURCE)
    result = diff_branches(manager, SOURCE, "aA2", f"{FORK}:f4")
    assert (result.diff.common, result.diff.fork_b) == (3, "f3")
    # B = the manager's active leaf: its kept projection is used, the same as a fresh build
    # (a stored session: the two open calls of aB1 get synthetic results).
    own = diff_branches(manager, SOURCE, "aA2", "aB1")
    fresh = diff_branches(store, SOURCE, "aA2", "aB1")
    assert own.diff.context.b.synthetic_results == 2
    assert own.to_dict() == fresh.to_dict()


def test_identical_branches(store) -> None:
    _fill(store)
    result = diff_branches(store, SOURCE, "aA2", "aA2")
    assert result.identical and result.diff.rows == []
    assert result.to_dict()["identical"] is True


@pytest.mark.parametrize(("a", "b", "message"), [
    ("zz", None, "no entry of session " + SOURCE + " matches 'zz'"),
    ("a", None, "entry of session " + SOURCE + " prefix 'a' is ambiguous"),
    (":aA2", None, "':aA2': expected SESSION:LEAF"),
    ("nosuch:aA2", None, "no session matches 'nosuch'"),
])
def test_bad_input_is_one_clear_error(store, a, b, message) -> None:
    _fill(store)
    with pytest.raises(DiffInputError) as caught:
        diff_branches(store, SOURCE, a, b)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_a_session_with_one_branch_needs_leaves(store) -> None:
    _fill(store)
    with pytest.raises(DiffInputError, match="has 1 branch"):
        diff_branches(store, FORK)
