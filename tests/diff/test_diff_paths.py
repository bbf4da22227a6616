"""The diff walks the shared history once (docs/diff.md "Speed"): the two paths it gives are
exactly :func:`get_branch`'s, whatever the parent links (roots, missing parents, cycles,
self-parents), and the entries it reports as known-shared are the same entries."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sessiontree.core.diff import _paths
from sessiontree.core.tree import get_branch


@st.composite
def _forest(draw: st.DrawFn) -> dict[str, dict]:
    """Up to 12 entries e0..en whose parent is any entry, none, or a missing id."""
    n = draw(st.integers(min_value=1, max_value=12))
    ids = [f"e{i}" for i in range(n)]
    parents = st.one_of(st.none(), st.sampled_from(ids), st.just("missing"))
    return {i: {"type": "message", "id": i, "parentId": draw(parents)} for i in ids}


@settings(max_examples=500, deadline=None)
@given(_forest(), st.data())
def test_the_paths_are_get_branch_s(by_id: dict[str, dict], data: st.DataObject) -> None:
    leaf_a = data.draw(st.sampled_from(sorted(by_id)))
    leaf_b = data.draw(st.sampled_from(sorted(by_id)))
    path_a, path_b, known = _paths(by_id, leaf_a, by_id, leaf_b)
    assert path_a == get_branch(by_id, leaf_a) and path_b == get_branch(by_id, leaf_b)
    assert all(path_a[i] is path_b[i] for i in range(known))


def test_a_tail_meets_the_other_path_below_the_root() -> None:
    # r <- s1 <- s2 <- a1 <- a2 (A);  s2 <- b1 (B): A's walk stops at s2, the third entry of B's path.
    links = {"r": None, "s1": "r", "s2": "s1", "a1": "s2", "a2": "a1", "b1": "s2"}
    by_id = {i: {"id": i, "parentId": p} for i, p in links.items()}
    path_a, path_b, known = _paths(by_id, "a2", by_id, "b1")
    assert [e["id"] for e in path_a] == ["r", "s1", "s2", "a1", "a2"]
    assert [e["id"] for e in path_b] == ["r", "s1", "s2", "b1"]
    assert known == 3
