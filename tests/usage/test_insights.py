"""Insights (docs/insights.md) against counts made by hand from the raw files.

Every expected number below was counted from the raw JSONL with a few lines of plain
``json`` reading, not with sessiontree: for pi files, ``toolCall`` blocks of assistant
messages by name, ``toolResult`` messages with ``isError: true`` by ``toolName``, call ids
that no ``toolResult`` answers, ``compaction`` lines' ``tokensBefore`` and the usage of the
next assistant line with a non-zero context, runs of consecutive error results; for Codex,
``function_call``/``custom_tool_call`` items by name and their outputs (an error only
when the output says ``success: false``: docs/agents/codex.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import run_cli, run_cli_json
from corpus import needs_shared, shared, vendored
from sessiontree.core.insights import session_facts
from sessiontree.format.codec import read_session_file
from sessiontree.format.foreign import map_codex, map_foreign
from sessiontree.session.manager import SessionManager
from sessiontree.stores.memory import MemoryStore
from sessiontree.stores.sqlite.store import SqliteStore
from sessiontree.sync.engine import Syncer
from sessiontree.usage.insights import insights_of_entries, session_insights, store_insights

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CODEX = "codex/sessions/2025"
CODEX_0926 = f"{CODEX}/09/26/rollout-2025-09-26T17-01-04-019985ca-7ef7-7580-a921-c20ac619f40b.jsonl"
CODEX_0929 = f"{CODEX}/09/29/rollout-2025-09-29T13-09-19-01999469-65fd-7fa2-ab93-d24bb4c714cb.jsonl"
CODEX_1209 = f"{CODEX}/12/09/rollout-2025-12-09T19-55-16-019b04ae-b1c6-7c72-a134-a4c2de66058c.jsonl"


def _tools(facts):
    return {t.name: (t.calls, t.errors) for t in facts.tools.values()}


# --------------------------------------------------------------------------- pi corpus files


def test_large_pi_session_by_hand():
    # pi-mono-large-session.jsonl (vendored): 391 calls; 19 bash errors; one run of 4 bash
    # errors in a row; 18 edit calls never answered (one assistant message's parallel edits);
    # no compaction; 23 files edited by an edit or write whose result is not an error;
    # 46 repeats of an identical call; the longest wait 7,808 ms (bash).
    facts = session_facts(read_session_file(vendored("pi-v1/pi-mono-large-session.jsonl")).entries)
    assert _tools(facts) == {"bash": (192, 19), "edit": (146, 0), "read": (50, 0), "write": (3, 0)}
    assert [(loop.tool, loop.length) for loop in facts.error_loops] == [("bash", 4)]
    assert [c.tool for c in facts.interrupted_calls] == ["edit"] * 18
    assert facts.compactions == [] and facts.abandoned_branches == []
    assert len(facts.files_edited) == 23
    assert facts.repeats == 46
    assert [(w.tool, w.ms) for w in facts.waits[:2]] == [("bash", 7808), ("bash", 7593)]


@needs_shared
def test_pi_session_with_compactions_by_hand():
    # pi-mono-before-compaction.jsonl: 454 calls; errors edit 4, bash 8; no run of 3; 3 read,
    # 2 bash and 1 edit call never answered; compactions at lines 360 (tokensBefore 175,004;
    # the next assistant line, 362, was aborted with zero usage, so the context after is line
    # 364's: 25,739) and 629 (185,014 -> 10 + 0 + 28,607 = 28,617); 44 repeats; 19 files.
    facts = session_facts(read_session_file(shared("pi-v1/pi-mono-before-compaction.jsonl")).entries)
    assert _tools(facts) == {"bash": (206, 8), "edit": (125, 4), "read": (107, 0), "write": (16, 0)}
    assert facts.error_loops == []
    assert sorted(c.tool for c in facts.interrupted_calls) == ["bash", "bash", "edit", "read", "read", "read"]
    assert [(c.tokens_before, c.tokens_after, c.tokens_cut) for c in facts.compactions] == [
        (175_004, 25_739, 149_265), (185_014, 28_617, 156_397)]
    assert facts.repeats == 44 and len(facts.files_edited) == 19


# --------------------------------------------------------------------------- pi examples


def test_branching_example_by_hand():
    # examples/branching.jsonl: the user went back to a1000005 after a1000007; the active leaf
    # is a100000e. Abandoned: a1000006 (user) and a1000007 (assistant, cost 0.0045), one branch
    # from a1000005. Calls: read (answered 1 s later), edit of src/routes/forecast.py (1 s).
    one = insights_of_entries("s", read_session_file(EXAMPLES / "branching.jsonl").entries)
    f = one.facts
    assert _tools(f) == {"read": (1, 0), "edit": (1, 0)}
    assert [(b.leaf_id, b.fork_id, b.entries, b.totals.calls, b.totals.cost_nanos) for b in one.branches] == [
        ("a1000007", "a1000005", 2, 1, 4_500_000)]
    assert one.abandoned_nanos == 4_500_000
    assert f.files_edited == ["src/routes/forecast.py"]
    # Five assistant calls (a1000003, a1000005, a1000007, a100000a, a100000c) at 0.0045 each:
    # $0.0225 for one file edited.
    assert (one.totals.cost_nanos, one.cost_per_file_nanos) == (22_500_000, 22_500_000)
    assert sorted(w.ms for w in f.waits) == [1000, 1000]


def test_interrupted_and_compaction_examples_by_hand():
    interrupted = session_facts(read_session_file(EXAMPLES / "interrupted.jsonl").entries)
    assert [(c.tool, c.call_id, c.entry_id) for c in interrupted.interrupted_calls] == [("bash", "call_21", "c1000003")]
    compaction = session_facts(read_session_file(EXAMPLES / "compaction.jsonl").entries)
    # tokensBefore 1,830; the next assistant (b100000b) was sent 900 input tokens.
    assert [(c.entry_id, c.tokens_before, c.tokens_after, c.tokens_cut) for c in compaction.compactions] == [
        ("b1000009", 1830, 900, 930)]


# --------------------------------------------------------------------------- Codex corpus files


@needs_shared
@pytest.mark.parametrize(("name", "tools", "longest"), [
    # 17 shell calls, every one answered in the same record second (0 ms); no output says success: false.
    (CODEX_0926, {"shell": (17, 0)}, 0),
    # 22 shell and 2 update_plan calls, all answered, the slowest 1 ms later.
    (CODEX_0929, {"shell": (22, 0), "update_plan": (2, 0)}, 1),
    # 4 shell_command and 1 apply_patch (adds myapp/hoge.py); the slowest answer 4,050 ms.
    (CODEX_1209, {"shell_command": (4, 0), "apply_patch": (1, 0)}, 4050),
])
def test_codex_files_by_hand(name, tools, longest):
    facts = session_facts(map_codex(shared(name).read_bytes(), str(shared(name))).entries)
    assert _tools(facts) == tools
    assert facts.error_loops == [] and facts.interrupted_calls == [] and facts.compactions == []
    assert facts.repeats == 0 and facts.abandoned_branches == []
    assert facts.waits[0].ms == longest
    assert facts.files_edited == (["myapp/hoge.py"] if name == CODEX_1209 else [])


CLAUDE = "claude-code/projects"


@needs_shared
@pytest.mark.parametrize(("name", "calls", "errors", "interrupted"), [
    # Counted by hand from the raw files: distinct tool_use ids in top-level (not sidechain)
    # assistant records; errors = their tool_result blocks with is_error true, by tool name;
    # interrupted = tool_use ids no tool_result answers (61cb3ba8 ends while one is open).
    ("-Users-alex-workspace-cli--worktrees-2/53ea1606-cf60-417b-928a-068324ecc7b3.jsonl", 85,
     {"Bash": 2, "Edit": 1}, 0),
    ("-Users-alex-workspace-cli/0cf3db51-1c73-43bb-8d05-dc02739514a5.jsonl", 39, {"Glob": 1, "Grep": 1}, 0),
    ("-Users-alex-workspace-cli/8b418ea5-895d-4ad5-abe8-4489d36e454f.jsonl", 31,
     {"mcp__linear-server__create_comment": 1, "mcp__linear-server__search_documentation": 1}, 0),
    ("-Users-paul-src-entireio-cli/61cb3ba8-484b-4a21-bf99-34f7dc361170.jsonl", 16, {"Skill": 1}, 1),
    ("-Users-paul-src-entireio-cli/9d440bfc-a64f-43be-aa10-10a3764a59ea.jsonl", 5, {}, 0),
    ("-Users-soph-Work-entire-devenv-cli/dc577197-3905-4039-9b27-8ab77a6b087f.jsonl", 12, {}, 0),
    ("-Users-test-user-agent-sample/7f2abd2d-7cfc-4447-9ddd-3ca8d14e02e9.jsonl", 4, {"Bash": 1}, 0),
    ("-workspace/c45af7b1-cb7c-4e51-93db-8cbb250a877a.jsonl", 10, {"Bash": 2}, 0),
    ("sample-project/1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl", 12, {"Write": 1}, 0),
    ("sample-project/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl", 13, {"Edit": 1, "Task": 1}, 0),
    ("sample-project/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl", 11, {}, 0),
])
def test_claude_code_files_by_hand(name, calls, errors, interrupted):
    path = shared(f"{CLAUDE}/{name}")
    mapped = map_foreign(path.read_bytes(), str(path))
    assert mapped is not None
    facts = session_facts(mapped.entries)
    tools = _tools(facts)
    assert sum(n for n, _ in tools.values()) == calls
    assert {tool: e for tool, (_, e) in tools.items() if e} == errors
    assert len(facts.interrupted_calls) == interrupted


# --------------------------------------------------------------------------- rules no real file shows


def _msg(entry_id, parent, role, **fields):
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z",
            "message": {"role": role, **fields}}


def _call(entry_id, parent, call_id, name="bash", arguments=None):
    return _msg(entry_id, parent, "assistant", content=[{"type": "toolCall", "id": call_id, "name": name,
                                                          "arguments": arguments or {"command": "make"}}])


def _result(entry_id, parent, call_id, error, name="bash"):
    return _msg(entry_id, parent, "toolResult", toolCallId=call_id, toolName=name, isError=error, content=[])


def test_an_error_loop_on_a_tree_is_counted_once_and_other_tools_break_it():
    # Synthetic (no real file branches inside a loop): bash fails at r1, r2; then two branches
    # from r2: one fails once more (3 in a row), the other twice more (4 in a row): one loop, 4 long.
    # Then on the second branch a read error breaks the row, and two more bash errors are only 2.
    entries = [
        _call("c1", None, "t1"), _result("r1", "c1", "t1", True),
        _call("c2", "r1", "t2"), _result("r2", "c2", "t2", True),
        _call("c3", "r2", "t3"), _result("r3", "c3", "t3", True),
        _call("c4", "r2", "t4"), _result("r4", "c4", "t4", True),
        _call("c5", "r4", "t5"), _result("r5", "c5", "t5", True),
        _call("c6", "r5", "t6", "read"), _result("r6", "c6", "t6", True, "read"),
        _call("c7", "r6", "t7"), _result("r7", "c7", "t7", True),
        _call("c8", "r7", "t8"), _result("r8", "c8", "t8", True),
    ]
    facts = session_facts(entries)
    assert [(loop.tool, loop.length, loop.first_entry_id, loop.last_entry_id) for loop in facts.error_loops] == [
        ("bash", 4, "r1", "r5")]
    assert _tools(facts) == {"bash": (7, 7), "read": (1, 1)}
    # All seven bash calls have the same arguments: six repeats.
    assert facts.repeats == 6


# --------------------------------------------------------------------------- store, command line


def test_the_command_and_the_store_view_agree(tmp_path):
    db = str(tmp_path / "s.db")
    store = SqliteStore(db)
    for name in ("branching.jsonl", "interrupted.jsonl", "compaction.jsonl"):
        SessionManager.import_from_jsonl(str(EXAMPLES / name), target=store)
    store.close()
    one = run_cli_json(db, "insights", "019cadb4")
    assert (one["toolCalls"], one["abandonedCost"], one["filesEditedList"]) == (2, "0.0045", ["src/routes/forecast.py"])
    assert one["abandonedBranches"][0]["leafId"] == "a1000007"
    every = run_cli_json(db, "insights")
    # Hand sums of the three examples: calls read 1 + edit 1 + bash 1 + bash 2; one interrupted call;
    # one compaction cutting 930 tokens; one abandoned branch at $0.0045.
    assert ({t["name"]: t["calls"] for t in every["tools"]}, every["interruptedCalls"], every["tokensCut"]) == (
        {"bash": 3, "edit": 1, "read": 1}, 1, 930)
    assert [b["leafId"] for b in every["expensiveAbandonedBranches"]] == ["a1000007"]
    text = run_cli(db, "insights", "019cadb4").stdout
    assert "Abandoned branches: 1, cost $0.00" in text and "leaf a1000007 (from a1000005)" in text


def test_a_name_has_one_json_shape_in_a_session_and_in_the_store(tmp_path):
    # docs/insights.md, "JSON": a count is a number in both objects (the new-user test found
    # `interruptedCalls` a list for one session and a number for the store); its items are
    # in `<name>List`. Hand counts of the examples: interrupted.jsonl has one call without a
    # result (bash call_21), compaction.jsonl one compaction, branching.jsonl one edited file.
    db = str(tmp_path / "s.db")
    store = SqliteStore(db)
    for name in ("branching.jsonl", "interrupted.jsonl", "compaction.jsonl"):
        SessionManager.import_from_jsonl(str(EXAMPLES / name), target=store)
    store.close()
    every = run_cli_json(db, "insights")
    sessions = {sid: run_cli_json(db, "insights", sid) for sid in ("019cadb4", "019cadc9", "019cadd2")}
    counts = ("toolCalls", "toolErrors", "errorLoops", "repeatedCalls", "interruptedCalls", "compactions",
              "tokensCut", "filesEdited", "abandonedCostNanos")
    lists = {"errorLoops": "errorLoopList", "interruptedCalls": "interruptedCallList",
             "compactions": "compactionList", "filesEdited": "filesEditedList"}
    for one in sessions.values():
        shared_keys = set(one) & set(every)
        for key in shared_keys:
            assert type(one[key]) is type(every[key]), key
        for key in counts:
            assert isinstance(one[key], int) and isinstance(every[key], int), key
        for count, items in lists.items():
            assert isinstance(one[items], list) and one[count] == len(one[items]), items
            assert items not in every
    assert sessions["019cadd2"]["interruptedCallList"] == [
        {"tool": "bash", "callId": "call_21", "entryId": sessions["019cadd2"]["interruptedCallList"][0]["entryId"]}]
    assert (every["interruptedCalls"], every["compactions"], every["filesEdited"]) == (1, 1, 1)
    assert sum(one["interruptedCalls"] for one in sessions.values()) == every["interruptedCalls"]


@needs_shared
def test_store_insights_of_synced_codex_files(tmp_path):
    store = MemoryStore()
    syncer = Syncer(store)
    for name in (CODEX_0926, CODEX_0929):
        assert syncer.sync_file(str(shared(name))).status == "new"
    every = store_insights(store)
    assert (every.sessions, every.tool_calls, every.tool_errors) == (2, 41, 0)
    sid = next(s for s in store.session_ids() if s.startswith("019985ca"))
    assert session_insights(store, sid).facts.tool_calls == 17
    assert json.loads(json.dumps(every.to_dict()))["toolCalls"] == 41


def test_the_mcp_tool_answers_a_session_and_the_store_within_its_budget(tmp_path):
    from mcp_support import call_tools as _call

    db = str(tmp_path / "s.db")
    store = SqliteStore(db)
    for name in ("branching.jsonl", "compaction.jsonl"):
        SessionManager.import_from_jsonl(str(EXAMPLES / name), target=store)
    store.close()
    one, every, small, missing, redacted = _call(db, [
        ("session_insights", {"session_id": "019cadb4"}), ("session_insights", {}),
        ("session_insights", {"session_id": "019cadc9", "max_chars": 1000}),
        ("session_insights", {"session_id": "nope"}), ("session_insights", {"redact": True})])
    # The store's answer redacted: its filesEdited is a count, nothing to scrub (it was scrubbed as a list).
    assert not redacted.is_error and redacted.structured_content["filesEdited"] == 1
    assert (one.structured_content["abandonedCostNanos"], one.structured_content["filesEditedList"]) == (
        4_500_000, ["src/routes/forecast.py"])
    assert (every.structured_content["sessions"], every.structured_content["tokensCut"]) == (2, 930)
    assert small.structured_content["compactionList"][0]["tokensCut"] == 930
    assert len(small.content[0].text.splitlines()[-1]) <= 1000
    assert missing.is_error and "nope" in missing.content[0].text
