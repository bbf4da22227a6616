"""``diff`` from a store's summaries gives the whole read's answer, on every store
(docs/decisions/diff-summaries.md): SQLite counts the shared history from its derived
data (``EntrySummaries``), the others read the session whole; the JSON of each is
compared with the whole read's of the same entries held in memory, and a few figures
are checked against a count by hand of the tree below."""

from __future__ import annotations

import json

import pytest

from builders import entry, header, text_block, tool_call
from cli_support import run_cli
from diff_trees import assistant_at, at, result_at, user_at
from sessiontree.diff import diff_branches
from sessiontree.diff.sides import _Sessions
from sessiontree.diff.summarised import summarised_diff
from sessiontree.stores.memory import MemoryStore
from sessiontree.stores.traits import EntrySummaries

SID = "019cadb6-0000-7000-8000-000000000003"


def _compaction(entry_id: str, parent: str, first_kept: str, ts: str) -> dict:
    return {"type": "compaction", "id": entry_id, "parentId": parent, "timestamp": ts, "summary": "[User]: s",
            "firstKeptEntryId": first_kept, "tokensBefore": 10, "details": {"strategy": "verbatim-lines"}}


def _session() -> list[dict]:
    """A compacted history with a context edit, then two branches::

        u1 user; a1 read(src/x.py) bills 100/10 $0.001; r1; a2 edit(src/x.py) + bash, bills
        200/20 with no cost; r2; r3; k1 compaction keeping a2..; x1 context edit of r1
        ├── aA1 write(src/y.py) bills 300/30 $0.003; rA1              (09:01:01)
        └── aB1 Read(file_path=src/z.py) bills 400/40 $0.004; rB1; uB2 (09:02:02, the newest)
    """
    return [
        user_at("u1", None, "start", at(0, 0)),
        assistant_at("a1", "u1", at(0, 1), [text_block("look"), tool_call("c1", "read", {"path": "src/x.py"})],
                     bill=(100, 10, 0.001)),
        result_at("r1", "a1", "c1", "read", "contents", at(0, 2)),
        assistant_at("a2", "r1", at(0, 3), [tool_call("c2", "edit", {"path": "src/x.py"}),
                                            tool_call("c3", "bash", {"command": "ls"})], bill=(200, 20, None)),
        result_at("r2", "a2", "c2", "edit", "ok", at(0, 4)),
        result_at("r3", "r2", "c3", "bash", "x.py", at(0, 5)),
        _compaction("k1", "r3", "a2", at(0, 6)),
        entry("context_edit", "x1", "k1", at(0, 7), targetId="r1", replacement={"content": "trimmed"}),
        assistant_at("aA1", "x1", at(1, 0), [tool_call("cA", "write", {"path": "src/y.py"})], bill=(300, 30, 0.003)),
        result_at("rA1", "aA1", "cA", "write", "ok", at(1, 1)),
        assistant_at("aB1", "x1", at(2, 0), [tool_call("cB", "Read", {"file_path": "src/z.py"})],
                     bill=(400, 40, 0.004)),
        result_at("rB1", "aB1", "cB", "Read", "z", at(2, 1)),
        user_at("uB2", "rB1", "more", at(2, 2)),
    ]


def _whole(args: tuple[str | None, str | None], cost: str) -> dict:
    memory = MemoryStore()
    memory.create(header(SID), _session())
    return diff_branches(memory, SID, *args, cost=cost).to_dict()


@pytest.mark.parametrize("settled", [False, True])
@pytest.mark.parametrize(("args", "cost"), [((None, None), "auto"), ((None, None), "catalog"),
                                            (("aA", None), "recorded"), (("x1", "uB2"), "auto")])
def test_diff_from_summaries_equals_the_whole_read(store, settled, args, cost) -> None:
    store.create(header(SID), _session())
    if settled:
        store.settle_derived()
    result = diff_branches(store, SID, *args, cost=cost).to_dict()
    assert json.dumps(result) == json.dumps(_whole(args, cost))
    if isinstance(store, EntrySummaries):  # the summaries were used, not the whole read
        assert summarised_diff(_Sessions(store), SID, *args, True, cost) is not None


def test_diff_json_counts_by_hand(store) -> None:
    store.create(header(SID), _session())
    data = diff_branches(store, SID).to_dict()
    # The two newest leaves: rA1 (09:01:01) as A, uB2 (09:02:02) as B; u1..x1 shared.
    assert (data["a"]["leafId"], data["b"]["leafId"], data["commonEntries"]) == ("rA1", "uB2", 8)
    common, side_a, side_b = (data["summary"][name] for name in ("common", "a", "b"))
    assert (common["entries"], common["messages"], common["toolCalls"]) == (8, 6, {"bash": 1, "edit": 1, "read": 1})
    assert common["files"] == [{"path": "src/x.py", "tools": ["edit", "read"]}]
    assert (common["firstTimestamp"], common["lastTimestamp"]) == ("2026-03-02T09:00:00.000Z",
                                                                  "2026-03-02T09:00:07.000Z")
    assert common["usage"]["calls"] == 2 and common["usage"]["totalTokens"] == 330
    assert side_a["files"] == [{"path": "src/y.py", "tools": ["write"]}]
    assert side_b["files"] == [{"path": "src/z.py", "tools": ["Read"]}] and side_b["usage"]["totalTokens"] == 440
    assert data["context"]["a"]["contextEdits"] == ["r1"]


def test_diff_json_command_equals_the_whole_read(store) -> None:
    if store.kind == "memory":
        pytest.skip("the command line opens stores by URL")
    store.create(header(SID), _session())
    store.settle_derived()
    out = run_cli(store.url, "diff", SID, "--json").stdout
    assert json.dumps(json.loads(out)) == json.dumps(_whole((None, None), "auto"))


def _changed() -> list[dict]:
    """:func:`_session` with a1 (shared) reading src/w.py and billing $0.005 instead: the same
    outline (ids, parents, types), other records."""
    entries = _session()
    entries[1] = assistant_at("a1", "u1", at(0, 1), [tool_call("c1", "read", {"path": "src/w.py"})],
                              bill=(500, 50, 0.005))
    return entries


@pytest.mark.parametrize("settled", [False, True])
@pytest.mark.parametrize("context", [False, True])
@pytest.mark.parametrize("change", ["replaced", "grown"])
def test_a_session_changed_between_the_summaries_and_the_records(tmp_path, settled, context, change) -> None:
    # The session is replaced (same outline, other records) or grown right after the
    # summaries are read: the answer is the whole read's of one version, never a mix.
    from sessiontree.stores.sqlite import SqliteStore

    grown = [*_session(), user_at("uA2", "rA1", "later", at(3, 0))]
    with SqliteStore(tmp_path / "s.db") as store:
        store.create(header(SID), _session())
        if settled:
            store.settle_derived()
        read = store.read_summaries

        def read_then_change(session_id: str):
            summaries = read(session_id)
            if change == "replaced":
                store.replace_session(header(SID), _changed())
            else:
                store.append(SID, grown[-1:])
            return summaries

        store.read_summaries = read_then_change  # type: ignore[method-assign]
        result = json.dumps(diff_branches(store, SID, "rA1", "uB2", context=context).to_dict())
    answers = []
    for entries in (_session(), _changed() if change == "replaced" else grown):
        memory = MemoryStore()
        memory.create(header(SID), entries)
        answers.append(json.dumps(diff_branches(memory, SID, "rA1", "uB2", context=context).to_dict()))
    assert answers[0] != answers[1] or change == "grown"
    assert result in answers
    if change == "replaced":
        assert result == answers[1]  # the shared a1 was read or summed: the change is seen


def test_a_store_migrated_to_m018_with_a_damaged_record(tmp_path) -> None:
    # A store made before m018, its ledger settled, whose shared a2 record is then damaged
    # (not JSON; its CRC left as it was): the step skips it and the store opens; diff
    # answers from the summaries (records it never reads are not checked,
    # docs/decisions/diff-summaries.md) without a2's two calls, and check --store reports
    # the record. With the ledger pending, a2 is read to be summed: the whole read's error.
    import sqlite3

    from sessiontree.stores.sqlite import SqliteStore

    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        store.create(header(SID), _session())
        store.settle_derived()
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE tool_calls")
    conn.execute("DELETE FROM schema_migrations WHERE name = 'm018_tool_calls'")
    conn.execute("UPDATE entries SET json = '{\"type\": \"message\", torn' WHERE id = 'a2'")
    conn.commit()
    conn.close()
    with SqliteStore(path) as store:
        data = diff_branches(store, SID, context=False).to_dict()
        assert data["commonEntries"] == 8
        assert data["summary"]["common"]["toolCalls"] == {"read": 1}  # a1's read only
        problems = store.verify()
    assert [p.code for p in problems if "a2" in p.message] == ["hash-mismatch"], problems


def _variant(name: str) -> list[dict]:
    """:func:`_session` changed as ``name`` says (each one rule of the seed's "Context Building")."""
    entries = _session()
    if name in ("kept-null", "kept-absent"):
        entries[6] = _compaction("k1", "r3", "a2", at(0, 6)) | {
            "firstKeptEntryId": None if name == "kept-null" else "ffffffff"}
    elif name == "branch-summary":  # B goes through a branch summary: x1 -> s1 -> aB1
        entries.insert(10, entry("branch_summary", "s1", "x1", at(1, 59), fromId="rA1", summary="tried y.py"))
        entries[11] = entries[11] | {"parentId": "s1"}
    elif name == "inert":  # A ends with a retired (non-verbatim) compaction
        entries.append({**_compaction("k2", "rA1", "aA1", at(1, 2)), "details": {"strategy": "summary"}})
    elif name == "newer-boundary":  # A ends with a second active boundary keeping aA1..
        entries.append(_compaction("k2", "rA1", "aA1", at(1, 2)))
    return entries


# The seed's "Context Building" (../shared/seed/session-format.md), counted by hand on
# _session(): k1 keeps a2, r2, r3 ("the entries from that ID up to the boundary") folded into
# one compaction message; x1 (a context edit) gives none; A then has aA1 rA1, B aB1 rB1 uB2.
# (boundaryId, keptTailEntries, messages) per side.
_CONTEXTS = {
    "kept-string": (("k1", 3, 3), ("k1", 3, 4)),
    # firstKeptEntryId null: the boundary and post-boundary messages, no pre-boundary one.
    "kept-null": (("k1", 0, 3), ("k1", 0, 4)),
    # a non-null firstKeptEntryId that is absent: the same, older content not resurrected.
    "kept-absent": (("k1", 0, 3), ("k1", 0, 4)),
    # post-boundary branch-summary entries are messages of the context: B has one more.
    "branch-summary": (("k1", 3, 3), ("k1", 3, 5)),
    # a non-verbatim compaction is skipped as inert: A's boundary stays k1, no message added.
    "inert": (("k1", 3, 3), ("k1", 3, 4)),
    # the latest verbatim-lines compaction is selected: A's context is k2's message alone.
    "newer-boundary": (("k2", 2, 1), ("k1", 3, 4)),
}


@pytest.mark.parametrize("settled", [False, True])
@pytest.mark.parametrize("name", list(_CONTEXTS))
def test_diff_context_follows_the_seed_context_building(store, settled, name) -> None:
    entries = _variant(name)
    store.create(header(SID), entries)
    if settled:
        store.settle_derived()
    leaf_b = "uB2"
    leaf_a = "k2" if name in ("inert", "newer-boundary") else "rA1"
    data = diff_branches(store, SID, leaf_a, leaf_b).to_dict()
    got = tuple((data["context"][side]["boundaryId"], data["context"][side]["keptTailEntries"],
                 data["context"][side]["messages"]) for side in ("a", "b"))
    assert got == _CONTEXTS[name]
    memory = MemoryStore()
    memory.create(header(SID), entries)
    assert json.dumps(data) == json.dumps(diff_branches(memory, SID, leaf_a, leaf_b).to_dict())
    if isinstance(store, EntrySummaries):  # this is the summaries' answer, not the whole read's
        assert summarised_diff(_Sessions(store), SID, leaf_a, leaf_b, True, "auto") is not None


@pytest.mark.parametrize("settled", [False, True])
def test_diff_time_spans_are_the_earliest_and_latest_entry_timestamps(store, settled) -> None:
    # docs/diff.md: each row's time span is the earliest and latest *entry* timestamp (the
    # seed's "Entry Base": an ISO string; not the message's Unix-ms one), not its first and
    # last entry's; the two most recent leaves by entry timestamp, the older as A. Here r1
    # predates the root and r2 is the newest shared entry; rA1 (09:03:00) is now newer than uB2.
    entries = _session()
    entries[2] = entries[2] | {"timestamp": "2026-03-02T08:59:59.000Z"}
    entries[4] = entries[4] | {"timestamp": at(0, 30)}
    entries[9] = entries[9] | {"timestamp": at(3, 0)}
    store.create(header(SID), entries)
    if settled:
        store.settle_derived()
    data = diff_branches(store, SID).to_dict()
    assert (data["a"]["leafId"], data["b"]["leafId"]) == ("uB2", "rA1")
    spans = {row: (data["summary"][row]["firstTimestamp"], data["summary"][row]["lastTimestamp"])
             for row in ("common", "a", "b")}
    assert spans == {"common": ("2026-03-02T08:59:59.000Z", "2026-03-02T09:00:30.000Z"),
                     "a": ("2026-03-02T09:02:00.000Z", "2026-03-02T09:02:02.000Z"),
                     "b": ("2026-03-02T09:01:00.000Z", "2026-03-02T09:03:00.000Z")}
    if isinstance(store, EntrySummaries):
        assert summarised_diff(_Sessions(store), SID, None, None, True, "auto") is not None


@pytest.mark.parametrize("settled", [False, True])
@pytest.mark.parametrize(("edits", "messages_a"), [
    # replacement null omits aA1 from A's context, and rA1, its call gone, is an orphan result
    # and dropped (docs/rules/projection.md): k1's message alone.
    ([None], 1),
    # several edits of one target: the latest on the branch wins, so aA1 is back with the
    # replacement content (no tool call: rA1 is still an orphan): k1's message and aA1.
    ([None, {"content": "redone"}], 2),
])
def test_diff_context_edits_are_branch_relative_and_the_latest_wins(store, settled, edits, messages_a) -> None:
    # The seed's "ContextEditEntry": edits change only future context, the latest edit on the
    # active branch wins, and they are branch-relative: B (a sibling branch) keeps aB1 rB1 uB2
    # after k1's message (4) and does not list aA1 as edited.
    entries = _session()
    parent = "rA1"
    for number, replacement in enumerate(edits):
        entries.append(entry("context_edit", f"e{number}", parent, at(1, 10 + number), targetId="aA1",
                             replacement=replacement))
        parent = f"e{number}"
    store.create(header(SID), entries)
    if settled:
        store.settle_derived()
    data = diff_branches(store, SID, parent, "uB2").to_dict()
    side_a, side_b = data["context"]["a"], data["context"]["b"]
    assert (side_a["messages"], side_b["messages"]) == (messages_a, 4)
    assert "aA1" in side_a["contextEdits"] and "aA1" not in side_b["contextEdits"]
    if isinstance(store, EntrySummaries):
        assert summarised_diff(_Sessions(store), SID, parent, "uB2", True, "auto") is not None
