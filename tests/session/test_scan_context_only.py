"""``scan_up(..., context_only=True)``: the walk a projection build makes, which leaves the
entries above the active boundary's kept tail as stored. Its context part must be what
the slow, obviously right scan of the whole path gives (``_scan_down`` of
``get_branch``): the same context entries (P.1-normalized), settings, edits and copies."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_lazy_open import stored_sessions

from sessiontree.core.projection.context import REMOTE_KINDS, _scan_down, context_order, layout_at, scan_up
from sessiontree.core.tree import AncestorLinks, SessionTree, get_branch

TS = "2026-02-01T09:00:00.000Z"


def _context(scan):
    return context_order(scan.path, layout_at(scan.path, scan.boundary))


def _same_context(entries: list[dict], leaf: str) -> None:
    by_id = {e["id"]: e for e in entries}
    fast = scan_up(entries, leaf, by_id, context_only=True)
    slow = _scan_down(get_branch(by_id, leaf))
    context = _context(slow)
    assert _context(fast) == context
    assert (fast.thinking_level, fast.model, fast.context_window, fast.edits) == (
        slow.thinking_level, slow.model, slow.context_window, slow.edits)
    # copies: what the build takes of them is the set of their ids in the context
    in_context = {e["id"] for e in context}
    assert {e["id"] for e in fast.copies} & in_context == {e["id"] for e in slow.copies} & in_context
    # the path is the end of the whole one (from the context's first entry on, or all of
    # it when the walk never met the tail's first entry) and holds the whole context
    assert fast.path == slow.path[len(slow.path) - len(fast.path):]
    assert in_context <= {e["id"] for e in fast.path}
    if fast.boundary is None:
        assert fast.path == slow.path
    # With the tree's ancestor links (when it can have them) the walk jumps above the
    # tail, and must give exactly the same scan.
    links = AncestorLinks.for_entries(entries, REMOTE_KINDS)
    calls = []
    jumped = scan_up(entries, leaf, by_id, context_only=True,
                     links=lambda: calls.append(1) or links)
    assert len(calls) <= 1
    assert jumped == fast


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stored_sessions(), st.data())
def test_the_context_part_of_the_walk_is_the_whole_scans(entries, data):
    leaf = data.draw(st.sampled_from([e["id"] for e in entries]))
    _same_context(entries, leaf)


_ASSISTANT = {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "provider": "p",
              "model": "tail-model", "stopReason": "stop", "timestamp": 2}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stored_sessions(), st.data())
def test_the_walk_with_ancestor_links_is_the_walk_without(entries, data):
    # Dangling parents made roots, so that the tree can have links (one dangling
    # parentId is enough for it not to: it could come to name a later entry).
    entries = [{**e, "parentId": None} if e["parentId"] == "missing" else e for e in entries]
    assert AncestorLinks.for_entries(entries, REMOTE_KINDS) is not None
    leaf = data.draw(st.sampled_from([e["id"] for e in entries]))
    # Most examples: an active boundary on the leaf's branch whose kept tail starts
    # with an assistant naming the model, so that the walk above the tail jumps.
    branch = get_branch({e["id"]: e for e in entries}, leaf)
    if len(branch) >= 4 and data.draw(st.integers(0, 4)):
        at = {e["id"]: i for i, e in enumerate(entries)}
        boundary = data.draw(st.integers(2, len(branch) - 1))
        kept = data.draw(st.integers(1, boundary - 1))
        entries[at[branch[kept]["id"]]] = {**branch[kept], "type": "message", "message": _ASSISTANT}
        entries[at[branch[boundary]["id"]]] = {
            "type": "compaction", "id": branch[boundary]["id"], "parentId": branch[boundary]["parentId"],
            "timestamp": TS, "summary": "s", "firstKeptEntryId": branch[kept]["id"], "tokensBefore": 1,
            "details": {"strategy": "verbatim-lines"}}
    _same_context(entries, leaf)


def _links_shape(links):
    return None if links is None else (links.position, links.parent, links.nearest)


def test_ancestor_links_hold_parents_and_the_nearest_entry_of_a_kind():
    kinds = frozenset({"model_change"})
    entries = [_msg("a", None), {"type": "model_change", "id": "m", "parentId": "a", "timestamp": TS,
                                 "provider": "p", "modelId": "x"},
               _msg("b", "m"), _msg("c", "a"), _msg("d", None)]
    links = AncestorLinks.for_entries(entries, kinds)
    assert _links_shape(links) == ({"a": 0, "m": 1, "b": 2, "c": 3, "d": 4}, [-1, 0, 1, 0, -1], [-1, 1, 1, -1, -1])


def test_no_ancestor_links_for_forward_dangling_self_or_odd_parents():
    kinds = frozenset({"model_change"})
    assert AncestorLinks.for_entries([_msg("a", "b"), _msg("b", None)], kinds) is None  # forward
    assert AncestorLinks.for_entries([_msg("a", "gone")], kinds) is None  # dangling
    assert AncestorLinks.for_entries([_msg("a", "a")], kinds) is None  # its own parent
    assert AncestorLinks.for_entries([_msg("a", None), {**_msg("b", None), "parentId": ["a"]}], kinds) is None
    assert AncestorLinks.for_entries([_msg("a", None), {**_msg("b", None), "parentId": 7}], kinds) is None


def test_a_trees_links_follow_add_and_pop():
    kinds = REMOTE_KINDS
    tree = SessionTree([_msg("a", None), _msg("b", "a")])
    links = tree.ancestor_links(kinds)
    assert tree.ancestor_links(kinds) is links  # built once
    edit = {"type": "context_edit", "id": "e", "parentId": "b", "timestamp": TS, "targetId": "a",
            "replacement": None}
    tree.add(edit)
    tree.add(_msg("c", "e"))
    assert _links_shape(tree.ancestor_links(kinds)) == _links_shape(AncestorLinks.for_entries(tree.entries, kinds))
    assert tree.ancestor_links(kinds).nearest == [-1, -1, 2, 2]
    tree.pop("e")
    tree.pop("b")
    assert _links_shape(tree.ancestor_links(kinds)) == ({"a": 0, "b": 1}, [-1, 0], [-1, -1])
    tree.add(_msg("x", "nowhere"))  # a dangling parent: no links from now on
    assert tree.ancestor_links(kinds) is None
    tree.pop("b")  # rebuilt on next use
    assert _links_shape(tree.ancestor_links(kinds)) == ({"a": 0, "b": 1}, [-1, 0], [-1, -1])


def _msg(entry_id: str, parent: str | None, role: str = "user", content: object = "x") -> dict:
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": TS,
            "message": {"role": role, "content": content, "timestamp": 1}}


def test_null_content_above_the_tail_is_left_as_stored_and_in_the_tail_normalized():
    entries = [_msg("a", None, content=None), _msg("b", "a"),
               {"type": "thinking_level_change", "id": "t", "parentId": "b", "timestamp": TS, "thinkingLevel": "high"},
               _msg("c", "t", content=None), _msg("d", "c", "assistant", [{"type": "text", "text": "ok"}]),
               {"type": "compaction", "id": "k", "parentId": "d", "timestamp": TS, "summary": "s",
                "firstKeptEntryId": "c", "tokensBefore": 1, "details": {"strategy": "verbatim-lines"}},
               _msg("e", "k")]
    by_id = {e["id"]: e for e in entries}
    scan = scan_up(entries, "e", by_id, context_only=True)
    assert [e["id"] for e in scan.path] == ["c", "d", "k", "e"]  # from the tail on; "a" (null content) left out
    assert scan.path[0] is not entries[3] and scan.path[0]["message"]["content"] == []  # in the tail: a P.1 copy
    assert [e["id"] for e in scan.copies] == ["c"]
    assert scan.thinking_level == "high"  # found above the tail all the same
    _same_context(entries, "e")


def test_a_parent_cycle_above_the_boundary_is_walked_the_slow_way():
    entries = [_msg("a", "c"), _msg("b", "a"), _msg("c", "b"),
               {"type": "compaction", "id": "k", "parentId": "c", "timestamp": TS, "summary": "s",
                "firstKeptEntryId": None, "tokensBefore": 1, "details": {"strategy": "verbatim-lines"}},
               _msg("d", "k")]
    by_id = {e["id"]: e for e in entries}
    scan = scan_up(entries, "d", by_id, context_only=True)
    assert [e["id"] for e in scan.path] == [e["id"] for e in get_branch(by_id, "d")]  # _scan_down's whole path
    _same_context(entries, "d")
