"""The pure branch comparison (docs/diff.md): fork point, alignment statuses, the
model-context delta and the per-column counts, on hand-built trees whose expected
diffs are worked out by hand below."""

from __future__ import annotations

from typing import Any

from builders import entry
from diff_trees import assistant_at, at, fork_of_two_approaches, two_approaches, user_at
from sessiontree.core.diff import compare_paths, content_key, leaf_ids
from sessiontree.core.projection import INTERRUPTED_TEXT


def ids(rows: list[Any]) -> list[tuple[str, str | None, str | None]]:
    return [(r.status, r.a["id"] if r.a else None, r.b["id"] if r.b else None) for r in rows]


def test_fork_point_statuses_and_columns() -> None:
    entries = two_approaches()
    d = compare_paths(entries, "aA2", entries, "aB1", same_session=True)
    # u1, a1, r1 are shared; the fork point is r1.
    assert (d.common, d.fork_a, d.fork_b) == (3, "r1", "r1")
    # Tails A [aA1 asst, rA1 result, aA2 asst] and B [mB, tB, aB1 asst] share no content:
    # aA1 pairs with the next assistant of B (aB1), skipping mB and tB (only B); rA1, aA2 are left.
    assert ids(d.rows) == [("onlyB", None, "mB"), ("onlyB", None, "tB"), ("changed", "aA1", "aB1"),
                           ("onlyA", "rA1", None), ("onlyA", "aA2", None)]
    common, a, b = d.stats["common"], d.stats["a"], d.stats["b"]
    assert (common.entries, common.messages, common.tool_calls, common.files) == (
        3, 3, {"read": 1}, {"src/x.py": ["read"]})
    assert (a.entries, a.messages, a.tool_calls, a.files) == (3, 3, {"edit": 1}, {"src/x.py": ["edit"]})
    # B: file_path is read as the path too; model and thinking changes are entries, not messages.
    assert (b.entries, b.messages, b.tool_calls, b.files) == (
        3, 1, {"write": 1, "read": 1}, {"src/x.py": ["read"], "src/y.py": ["write"]})
    # Time spans: A 09:01:00..09:01:02, B 09:02:00..09:02:02 (Unix ms of 2026-03-02).
    base = 1772442000000  # 2026-03-02T09:00:00Z
    assert (a.first_ms, a.last_ms) == (base + 60_000, base + 62_000)
    assert (b.first_ms, b.last_ms) == (base + 120_000, base + 122_000)
    assert not d.identical


def test_context_delta_settings_and_synthetic_results() -> None:
    entries = two_approaches()
    c = compare_paths(entries, "aA2", entries, "aB1", same_session=True).context
    assert c is not None
    # A sees u1 a1 r1 aA1 rA1 aA2; B sees u1 a1 r1 aB1 and two synthetic results (its calls
    # were never answered; both owned by aB1, the last entry).
    assert (c.a.messages, c.b.messages) == (6, 6)
    assert (c.a.synthetic_results, c.b.synthetic_results) == (0, 2)
    statuses = [(r.status, r.a[1] if r.a else None, r.b[1] if r.b else None) for r in c.rows]
    # After the three shared messages: [asst, result, asst] vs [asst, synthetic, synthetic]:
    # pairs by role in order, then aA2 (assistant) has no partner and the last synthetic is only in B.
    assert c.common == 3  # u1 a1 r1: the same messages, not listed as rows
    assert statuses == [("changed", "aA1", "aB1"), ("changed", "rA1", "aB1"), ("onlyA", "aA2", None),
                        ("onlyB", None, "aB1")]
    synthetic = c.rows[1].b[0]
    assert synthetic["toolCallId"] == "cB1" and synthetic["content"][0]["text"] == INTERRUPTED_TEXT
    assert c.settings == {"model": ({"provider": "p", "modelId": "m1"}, {"provider": "p", "modelId": "m2"}),
                          "thinkingLevel": ("off", "high")}
    assert not c.identical


def compacted_on_one_side() -> list[dict[str, Any]]:
    """u1 a1 u2 a2; A compacts after a2 keeping u2.. then asks "three"; B asks "three" directly."""
    return [
        user_at("u1", None, "one", at(0, 0)),
        assistant_at("a1", "u1", at(0, 1), [{"type": "text", "text": "reply one"}]),
        user_at("u2", "a1", "two", at(0, 2)),
        assistant_at("a2", "u2", at(0, 3), [{"type": "text", "text": "reply two"}]),
        entry("compaction", "c1", "a2", at(1, 0), summary="[User]: one", firstKeptEntryId="u2", tokensBefore=9,
              details={"strategy": "verbatim-lines"}),
        user_at("u3", "c1", "three", at(1, 1)),
        user_at("u3b", "a2", "three", at(2, 0)),
    ]


def test_compaction_on_one_branch_changes_only_the_context() -> None:
    entries = compacted_on_one_side()
    d = compare_paths(entries, "u3", entries, "u3b", same_session=True)
    # Raw paths: the boundary is only in A; "three" is the same content under another id.
    assert (d.common, d.fork_a) == (4, "a2")
    assert ids(d.rows) == [("onlyA", "c1", None), ("same", "u3", "u3b")]
    c = d.context
    assert c is not None
    # A's next request: [boundary message (owned by c1), u3] with u2 a2 as its kept tail;
    # B's: u1 a1 u2 a2 u3b. Only "three" lines up; the boundary (custom) pairs with nothing.
    assert (c.a.boundary_id, c.a.kept_tail, c.a.messages, c.b.boundary_id, c.b.messages) == ("c1", 2, 2, None, 5)
    assert c.common == 0
    assert [(r.status, r.a[1] if r.a else None, r.b[1] if r.b else None) for r in c.rows] == [
        ("onlyA", "c1", None), ("onlyB", None, "u1"), ("onlyB", None, "a1"), ("onlyB", None, "u2"),
        ("onlyB", None, "a2"), ("same", "u3", "u3b")]
    assert c.rows[0].a[0]["customType"] == "compaction"
    assert c.settings == {}


def test_context_edit_on_one_side() -> None:
    entries = [
        user_at("u1", None, "one", at(0, 0)),
        assistant_at("a1", "u1", at(0, 1), [{"type": "text", "text": "secret"}]),
        entry("context_edit", "e1", "a1", at(1, 0), targetId="a1", replacement=None),
        user_at("u2", "e1", "next", at(1, 1)),
        user_at("u2b", "a1", "next", at(2, 0)),
    ]
    d = compare_paths(entries, "u2", entries, "u2b", same_session=True)
    assert ids(d.rows) == [("onlyA", "e1", None), ("same", "u2", "u2b")]
    c = d.context
    assert c is not None and c.a.edits == ["a1"] and c.b.edits == []
    # The edit omits a1 from A's context: A [u1, u2], B [u1, a1, u2b].
    assert c.common == 1
    assert [(r.status, r.a[1] if r.a else None, r.b[1] if r.b else None) for r in c.rows] == [
        ("onlyB", None, "a1"), ("same", "u2", "u2b")]


def test_identical_and_prefix() -> None:
    entries = two_approaches()
    same = compare_paths(entries, "aA2", entries, "aA2", same_session=True)
    assert (same.common, same.rows, same.identical) == (6, [], True)
    prefix = compare_paths(entries, "r1", entries, "aA2", same_session=True)
    assert prefix.common == 3
    assert ids(prefix.rows) == [("onlyB", None, "aA1"), ("onlyB", None, "rA1"), ("onlyB", None, "aA2")]
    assert not prefix.identical


def test_fork_copied_under_new_ids_matches_by_content() -> None:
    source, fork = two_approaches(), fork_of_two_approaches()
    d = compare_paths(source, "aA2", fork, "f4", same_session=False)
    assert (d.common, d.fork_a, d.fork_b) == (3, "r1", "f3")
    assert ids(d.rows) == [("onlyA", "aA1", None), ("onlyA", "rA1", None), ("onlyA", "aA2", None),
                           ("onlyB", None, "f4")]


def test_same_id_with_other_content_is_changed_across_sessions() -> None:
    source = two_approaches()
    other = [dict(e) for e in source[:3]]
    other[2] = dict(other[2], message=dict(other[2]["message"], content=[{"type": "text", "text": "other"}]))
    d = compare_paths(source, "r1", other, "r1", same_session=False)
    assert d.common == 2
    assert ids(d.rows) == [("changed", "r1", "r1")]


def test_content_key_ignores_ids_and_timestamps_only() -> None:
    a = user_at("x", None, "hi", at(0, 0))
    b = user_at("y", "p", "hi", at(3, 0))
    b["message"]["timestamp"] = 99
    assert content_key(a) == content_key(b)
    assert content_key(a) != content_key(user_at("x", None, "hi!", at(0, 0)))


def test_leaves_most_recent_first() -> None:
    assert leaf_ids(two_approaches()) == ["aB1", "aA2"]
    assert leaf_ids(compacted_on_one_side()) == ["u3b", "u3"]


def test_time_span_of_stamps_of_24_characters_in_another_layout() -> None:
    # Hostile or hand-written stamps of 24 characters ending in "Z" that do not order as
    # their times do: a space for "T" (10:00, sorts before every "T" stamp of the day), an
    # impossible month (sorts last), letters, a non-ASCII digit. The span is the earliest
    # and latest time that parses: 09:00 (u3) .. 10:00 (u1).
    stamps = ["2026-03-02 10:00:00.000Z", "2026-03-02T09:30:00.000Z", "2026-03-02T09:00:00.000Z",
              "2026-13-02T09:30:00.000Z", "zzzzzzzzzzzzzzzzzzzzzzzZ", "2026-03-02T1\u0660:00:00.000Z"]
    parent = None
    entries = []
    for n, stamp in enumerate(stamps, 1):
        entries.append(user_at(f"u{n}", parent, "x", stamp))
        parent = f"u{n}"
    entries.append(user_at("v", "u6", "y", at(0, 0)))
    d = compare_paths(entries, "u6", entries, "v", same_session=True)
    base = 1772442000000  # 2026-03-02T09:00:00Z
    assert (d.stats["common"].first_ms, d.stats["common"].last_ms) == (base, base + 3_600_000)
    assert (d.stats["b"].first_ms, d.stats["b"].last_ms) == (base, base)


def test_a_time_outside_years_1_to_9999_is_no_time_in_the_span() -> None:
    # "0001-01-01T00:00:00+14:00" is 0000-12-31T10:00Z and "9999-12-31T23:59:59.999-14:00"
    # is in year 10000: no date (docs/listing.md, "Unknown times"); the JSON's span could not
    # be written (diff raised ValueError: year 0 is out of range). The span is the rest: 09:00:01.
    from sessiontree.diff import diff_branches
    from sessiontree.stores.memory import MemoryStore

    for stamp in ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59.999-14:00"):
        store = MemoryStore()
        store.create({"type": "session", "version": 4, "id": "s", "createdAt": at(0, 0), "cwd": "/w"},
                     [user_at("u1", None, "x", stamp), user_at("u2", "u1", "y", at(0, 1)),
                      user_at("a", "u2", "a", at(0, 2)), user_at("b", "u2", "b", at(0, 3))])
        common = diff_branches(store, "s", "a", "b").to_dict()["summary"]["common"]
        assert (common["entries"], common["firstTimestamp"], common["lastTimestamp"]) == (
            2, "2026-03-02T09:00:01.000Z", "2026-03-02T09:00:01.000Z")
