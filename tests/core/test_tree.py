"""The entry tree: branches, forest, labels, names, summary freshness
(``seed:tree-structure``, ``seed:label-entry``, ``seed:session-info-entry``, ``seed:session-summary-entry``;
docs/rules/tree.md F, H, I; docs/rules/listing.md J, K)."""

from __future__ import annotations

from typing import Any

import pytest

from sessiontree.core.listing import InfoAccumulator
from sessiontree.core.tree import (
    NameState,
    SessionTree,
    TreeNode,
    build_tree,
    get_branch,
    label_state,
    session_name_state,
)
from sessiontree.errors import EntryNotFoundError, InvalidSessionError


def ent(entry_id: str, parent: str | None, ts: str = "2024-01-01T00:00:00.000Z", kind: str = "custom",
        **fields: Any) -> dict[str, Any]:
    return {"type": kind, "id": entry_id, "parentId": parent, "timestamp": ts, **fields}


def message(entry_id: str, parent: str | None, role: str, ts: str = "2024-01-01T00:00:00.000Z",
            content: Any = "x") -> dict[str, Any]:
    return ent(entry_id, parent, ts, "message", message={"role": role, "content": content})


def index(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["id"]: e for e in entries}


def ids(entries: list[dict[str, Any]]) -> list[str]:
    return [e["id"] for e in entries]


def shape(nodes: list[TreeNode]) -> list[Any]:
    """Nested (id, children) pairs, built without recursion."""
    out: list[Any] = []
    stack: list[tuple[list[TreeNode], list[Any]]] = [(nodes, out)]
    while stack:
        level, target = stack.pop()
        for node in level:
            children: list[Any] = []
            target.append((node.entry["id"], children))
            stack.append((node.children, children))
    return out


def all_nodes(nodes: list[TreeNode]) -> list[TreeNode]:
    seen: list[TreeNode] = []
    stack = list(nodes)
    while stack:
        node = stack.pop()
        seen.append(node)
        stack.extend(node.children)
    return seen


# --------------------------------------------------------------------------- get_branch (F.6)


def test_get_branch_is_root_first() -> None:
    entries = [ent("a", None), ent("b", "a"), ent("c", "b"), ent("x", "a")]
    assert ids(get_branch(index(entries), "c")) == ["a", "b", "c"]
    assert ids(get_branch(index(entries), "x")) == ["a", "x"]
    assert get_branch(index(entries), "c")[0] is entries[0]  # entries are shared, not copied


def test_get_branch_unknown_or_none_start_is_empty() -> None:
    entries = [ent("a", None)]
    assert get_branch(index(entries), "nope") == []
    assert get_branch(index(entries), None) == []


def test_get_branch_stops_at_a_missing_parent() -> None:
    entries = [ent("b", "gone"), ent("c", "b")]
    assert ids(get_branch(index(entries), "c")) == ["b", "c"]


def test_get_branch_self_parent_terminates() -> None:
    entries = [ent("s", "s"), ent("t", "s")]
    assert ids(get_branch(index(entries), "t")) == ["s", "t"]


def test_get_branch_cycle_terminates_with_each_entry_once() -> None:
    entries = [ent("a", "c"), ent("b", "a"), ent("c", "b"), ent("leaf", "c")]
    path = ids(get_branch(index(entries), "leaf"))
    assert path[-1] == "leaf"
    assert sorted(path) == ["a", "b", "c", "leaf"]
    # Walking up from "leaf": c, b, a, then c repeats. Root first: a, b, c, leaf.
    assert path == ["a", "b", "c", "leaf"]


def test_get_branch_on_a_100000_deep_chain() -> None:
    entries = [ent("e0", None)] + [ent(f"e{i}", f"e{i - 1}") for i in range(1, 100_000)]
    path = get_branch(index(entries), "e99999")
    assert len(path) == 100_000
    assert path[0]["id"] == "e0" and path[-1]["id"] == "e99999"


# --------------------------------------------------------------------------- build_tree (H)


def test_roots_are_null_self_and_orphan_parents_in_file_order() -> None:
    # H.2 / H.3
    entries = [
        ent("child", "r1"),
        ent("orphan", "missing"),
        ent("r1", None),
        ent("self", "self"),
        {"type": "custom", "id": "nokey", "timestamp": "2024-01-01T00:00:00.000Z"},  # no parentId key
        ent("r2", None, ts="2023-01-01T00:00:00.000Z"),  # older, still after: roots are not sorted
    ]
    roots = build_tree(entries)
    assert [n.entry["id"] for n in roots] == ["orphan", "r1", "self", "nokey", "r2"]
    assert shape(roots)[1] == ("r1", [("child", [])])
    assert roots[0].entry is entries[1]


def test_children_are_sorted_by_parsed_timestamp_stably() -> None:
    # H.4: ascending by the parsed time; ties keep file order.
    entries = [
        ent("p", None),
        ent("c1", "p", ts="2024-01-01T10:00:03.000Z"),
        ent("c2", "p", ts="2024-01-01T10:00:01.000Z"),
        ent("c3", "p", ts="2024-01-01T10:00:03.000Z"),
        ent("c4", "p", ts="2024-01-01T10:00:02.000Z"),
        # 11:30+02:00 is 09:30Z: earliest, though its text sorts last
        ent("c5", "p", ts="2024-01-01T11:30:00.000+02:00"),
        ent("c6", "p", ts="2024-01-01T10:00:01.000Z"),
    ]
    roots = build_tree(entries)
    assert [c.entry["id"] for c in roots[0].children] == ["c5", "c2", "c6", "c4", "c1", "c3"]


def test_get_children_is_file_order_not_time_order() -> None:
    # H.6
    entries = [ent("p", None), ent("late", "p", ts="2024-01-02T00:00:00.000Z"),
               ent("early", "p", ts="2024-01-01T00:00:00.000Z"), ent("root2", None)]
    tree = SessionTree(entries)
    assert ids(tree.get_children("p")) == ["late", "early"]
    assert ids(tree.get_children(None)) == ["p", "root2"]


def test_every_entry_appears_exactly_once_even_in_cycles() -> None:
    entries = [ent("a", "b"), ent("b", "a"), ent("r", None), ent("s", "s"), ent("x", "y"), ent("y", "z"), ent("z", "x")]
    roots = build_tree(entries)
    nodes = all_nodes(roots)
    assert sorted(n.entry["id"] for n in nodes) == sorted(ids(entries))
    assert len(nodes) == len(entries)


def test_cycle_roots_keep_file_order() -> None:
    # The cycle a <-> b is broken at its first member in file order, "a", which
    # then is a root like any other: roots stay in file order (H.3).
    entries = [ent("a", "b"), ent("b", "a"), ent("r", None)]
    assert shape(build_tree(entries)) == [("a", [("b", [])]), ("r", [])]


def test_entries_below_a_cycle_keep_their_parent() -> None:
    # "d" hangs from cycle member "a", which exists: d is not a root (H.2),
    # even though it comes first in the file.
    entries = [ent("d", "a", ts="2024-01-01T00:00:02.000Z"), ent("a", "b"), ent("b", "a", ts="2024-01-01T00:00:01.000Z")]
    assert shape(build_tree(entries)) == [("a", [("b", []), ("d", [])])]


def test_build_tree_on_a_100000_deep_chain() -> None:
    entries = [ent("e0", None)] + [ent(f"e{i}", f"e{i - 1}") for i in range(1, 100_000)]
    roots = build_tree(entries)
    assert len(roots) == 1
    depth, node = 1, roots[0]
    while node.children:
        assert len(node.children) == 1
        node = node.children[0]
        depth += 1
    assert depth == 100_000 and node.entry["id"] == "e99999"


def test_build_tree_on_a_100000_long_cycle() -> None:
    entries = [ent(f"e{i}", f"e{(i - 1) % 100_000}") for i in range(100_000)]
    roots = build_tree(entries)
    assert [r.entry["id"] for r in roots] == ["e0"]
    assert len(all_nodes(roots)) == 100_000


def test_build_tree_fresh_nodes_shared_entries() -> None:
    # H.5
    entries = [ent("a", None), ent("b", "a")]
    first, second = build_tree(entries), build_tree(entries)
    assert first[0] is not second[0]
    assert first[0].entry is second[0].entry is entries[0]


# --------------------------------------------------------------------------- labels (I)


def label(entry_id: str, target: str, text: Any = ..., ts: str = "2024-01-01T00:00:00.000Z") -> dict[str, Any]:
    entry = ent(entry_id, None, ts, "label", targetId=target)
    if text is not ...:
        entry["label"] = text
    return entry


def test_label_set_and_timestamp() -> None:
    entries = [ent("a", None), label("l1", "a", "checkpoint-1", ts="2024-01-01T00:00:05.000Z")]
    assert label_state(entries) == {"a": ("checkpoint-1", "2024-01-01T00:00:05.000Z")}


def test_later_label_overrides_earlier() -> None:
    entries = [ent("a", None), label("l1", "a", "one", "T1"), label("l2", "a", "two", "T2")]
    assert label_state(entries) == {"a": ("two", "T2")}


@pytest.mark.parametrize("cleared", ["", ...], ids=["empty-string", "absent"])
def test_label_cleared_with_empty_or_absent(cleared: Any) -> None:
    entries = [ent("a", None), label("l1", "a", "one"), label("l2", "a", cleared)]
    assert label_state(entries) == {}
    tree = SessionTree(entries)
    assert tree.get_label("a") is None
    node = next(n for n in all_nodes(tree.get_tree()) if n.entry["id"] == "a")
    assert node.label is None and node.label_timestamp is None


def test_whitespace_label_is_a_label() -> None:
    # I.2: any truthy string sets it.
    assert label_state([label("l", "a", " ")]) == {"a": (" ", "2024-01-01T00:00:00.000Z")}


def test_label_state_is_global_across_branches() -> None:
    # I.3: the label on another branch still counts.
    entries = [ent("a", None), ent("b", "a"), ent("c", "a"), label("l1", "b", "on-b")]
    entries[-1]["parentId"] = "c"
    tree = SessionTree(entries)
    tree.leaf_id = "b"
    assert tree.get_label("b") == "on-b"


def test_label_with_missing_target_is_kept() -> None:
    # I.5
    tree = SessionTree([ent("a", None), label("l1", "ghost", "boo")])
    assert tree.get_label("ghost") == "boo"


def test_label_map_insertion_order() -> None:
    # I.7: re-setting keeps the position; clearing then setting moves it to the end.
    entries = [label("1", "a", "A1"), label("2", "b", "B1"), label("3", "a", "A2")]
    assert list(label_state(entries)) == ["a", "b"]
    entries += [label("4", "a", ""), label("5", "a", "A3")]
    assert list(label_state(entries)) == ["b", "a"]
    assert label_state(entries)["a"] == ("A3", "2024-01-01T00:00:00.000Z")


def test_tree_nodes_expose_label_and_its_timestamp() -> None:
    # I.4 / H.1
    entries = [ent("a", None), ent("b", "a"), label("l1", "b", "mark", ts="2024-01-01T00:00:09.000Z")]
    entries[2]["parentId"] = "b"
    nodes = {n.entry["id"]: n for n in all_nodes(SessionTree(entries).get_tree())}
    assert (nodes["b"].label, nodes["b"].label_timestamp) == ("mark", "2024-01-01T00:00:09.000Z")
    assert (nodes["a"].label, nodes["a"].label_timestamp) == (None, None)


# --------------------------------------------------------------------------- session tree basics (F)


def test_leaf_is_the_last_entry_in_file_order() -> None:
    # F.1: not the deepest entry, not the newest timestamp; any type.
    entries = [ent("a", None, ts="2024-01-03T00:00:00.000Z"), ent("b", "a"), ent("c", "b"),
               label("l", "a", "x", ts="2024-01-01T00:00:00.000Z")]
    assert SessionTree(entries).leaf_id == "l"
    assert SessionTree([]).leaf_id is None


def test_session_tree_rejects_duplicate_ids() -> None:
    with pytest.raises(InvalidSessionError):
        SessionTree([ent("a", None), ent("a", None)])


def test_require_unknown_entry_message() -> None:
    tree = SessionTree([ent("a", None)])
    with pytest.raises(EntryNotFoundError) as info:
        tree.require("zz")
    assert str(info.value) == "Entry zz not found"
    assert isinstance(info.value, KeyError)


def test_session_tree_branch_from_leaf_and_unknown() -> None:
    entries = [ent("a", None), ent("b", "a"), ent("c", "a")]
    tree = SessionTree(entries)
    assert ids(tree.get_branch()) == ["a", "c"]
    assert ids(tree.get_branch("b")) == ["a", "b"]
    assert tree.get_branch("nope") == []


# --------------------------------------------------------------------------- session name (J)


def info(entry_id: str, name: Any = ...) -> dict[str, Any]:
    entry = ent(entry_id, None, kind="session_info")
    if name is not ...:
        entry["name"] = name
    return entry


def test_never_named() -> None:
    assert session_name_state([ent("a", None)]) == NameState(False, None)


def test_named_and_trimmed() -> None:
    assert session_name_state([info("i", "  Refactor auth\nmodule \t")]) == NameState(True, "Refactor auth\nmodule")


@pytest.mark.parametrize("name", ["", "   ", "\n\t", ...], ids=["empty", "spaces", "newline-tab", "absent"])
def test_cleared_name_keeps_has_name(name: Any) -> None:
    state = session_name_state([info("i1", "Named"), info("i2", name)])
    assert state == NameState(True, None)


def test_last_session_info_in_file_order_wins_across_branches() -> None:
    entries = [ent("a", None), info("i1", "First"), ent("b", "a"), info("i2", "Second")]
    entries[1]["parentId"] = "b"  # on another branch than i2
    entries[3]["parentId"] = "a"
    assert session_name_state(entries) == NameState(True, "Second")
    assert session_name_state([info("i1", ""), info("i2", "Back")]) == NameState(True, "Back")


# --------------------------------------------------------------------------- summary freshness (K)


def summary(entry_id: str, through: str, text: str = "Did things") -> dict[str, Any]:
    return ent(entry_id, None, kind="session_summary", summary=text, summarizedThroughId=through)


def branch_summary(entry_id: str) -> dict[str, Any]:
    return ent(entry_id, None, kind="branch_summary", fromId="x", summary="left branch")


def listing(entries: list[dict[str, Any]]) -> InfoAccumulator:
    """The listing state of ``entries``: the one implementation of K.2-K.4."""
    return InfoAccumulator().extend(entries)


def test_summary_fresh_while_its_anchor_is_newest() -> None:
    entries = [message("u1", None, "user"), message("a1", "u1", "assistant"), summary("s1", "a1")]
    assert listing(entries).anchor_id == "a1"
    assert listing(entries).summary == "Did things"


def test_tool_results_and_other_roles_do_not_count() -> None:
    # K.3: tool results, bash, custom, branchSummary messages and non-message entries are ignored.
    entries = [message("u1", None, "user"), message("a1", "u1", "assistant"), summary("s1", "a1"),
               message("t1", "a1", "toolResult"), message("b1", "t1", "bashExecution"),
               message("c1", "b1", "custom"), message("bs", "c1", "branchSummary"),
               message("sy", "bs", "system"), ent("m", "sy", kind="model_change")]
    assert listing(entries).anchor_id == "a1"
    assert listing(entries).summary == "Did things"


def test_newer_user_message_makes_summary_stale() -> None:
    entries = [message("u1", None, "user"), summary("s1", "u1"), message("u2", "u1", "user")]
    assert listing(entries).summary is None


def test_tool_call_only_assistant_turn_counts() -> None:
    calls = [{"type": "toolCall", "id": "c", "name": "bash", "arguments": {}}]
    entries = [message("u1", None, "user"), summary("s1", "u1"), message("a1", "u1", "assistant", content=calls)]
    assert listing(entries).anchor_id == "a1"
    assert listing(entries).summary is None


def test_later_branch_summary_retires_the_summary() -> None:
    entries = [message("u1", None, "user"), summary("s1", "u1"), branch_summary("b1")]
    assert listing(entries).summary_text is None
    assert listing(entries).summary is None


def test_summary_after_branch_summary_is_valid_again() -> None:
    entries = [message("u1", None, "user"), summary("s0", "u1", "old"), branch_summary("b1"),
               summary("s1", "u1", "new")]
    assert listing(entries).summary_text == entries[3]["summary"]
    assert listing(entries).summary == "new"


def test_latest_summary_is_the_candidate() -> None:
    entries = [message("u1", None, "user"), message("a1", "u1", "assistant"), summary("s1", "a1", "fresh one"),
               summary("s2", "u1", "stale one")]
    # s2 is the candidate and its anchor is not the newest message: nothing shown.
    assert listing(entries).summary is None


def test_timestamps_without_a_zone_are_utc_whatever_the_machine_zone(monkeypatch) -> None:
    import time

    from sessiontree.core.tree import parse_timestamp_ms

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        # 2024-01-01T00:00:00Z is 19,723 days after the epoch: 1,704,067,200,000 ms.
        assert parse_timestamp_ms("2024-01-01T00:00:00") == 1704067200000.0
        assert parse_timestamp_ms("2024-01-01T00:00:00.123Z") == 1704067200123.0
        assert parse_timestamp_ms("2024-01-01T01:00:00+01:00") == 1704067200000.0
        assert parse_timestamp_ms("not a time") is None
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
