"""The session page's reading order on real files of every agent (docs/viewer.md, "Turns"):
one turn per user message with its counts, the parts of one response together, hook,
progress and system records folded into the entry they annotate, a subagent folded at
the call that started it, and exports of a sensible size (issue 41).

Expected values come from ``../shared/corpus/FOREIGN.md`` or from hand counts of the
raw files, cited at each assertion.
"""

from __future__ import annotations

import re
import time

import pytest
from click.testing import CliRunner

from corpus import needs_shared, shared
from sessiontree import SessionManager, open_store
from sessiontree.cli import cli
from sessiontree.core import render
from sessiontree.core.usage import UsageRecord
from sessiontree.format.foreign import map_foreign
from sessiontree.web import page
from sessiontree.web import views as view

LARGEST_CLAUDE = "claude-code/projects/-Users-alex-workspace-cli--worktrees-2/53ea1606-cf60-417b-928a-068324ecc7b3.jsonl"
TASK_2X = "claude-code/projects/-Users-paul-src-entireio-cli/61cb3ba8-484b-4a21-bf99-34f7dc361170.jsonl"
SIDECHAIN_1X = "claude-code/projects/sample-project/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
CODEX = "codex/sessions/2025/09/26/rollout-2025-09-26T17-01-04-019985ca-7ef7-7580-a921-c20ac619f40b.jsonl"
GEMINI = ("gemini/tmp/7e8989f71805c3147f6be9b7a71de2a156f8face69f9380beeeb8a777414f21c/chats/"
          "session-2026-01-15T20-51-f7633853.json")


def _manager(rel: str) -> SessionManager:
    path = shared(rel)
    mapped = map_foreign(path.read_bytes(), str(path))
    assert mapped is not None
    store = open_store("memory:")
    store.create(mapped.header, mapped.entries)
    return SessionManager.from_parsed(store.load(mapped.header["id"]))


def _conversation(rel: str) -> tuple[SessionManager, view.Conversation]:
    manager = _manager(rel)
    return manager, view.build_conversation(manager, None, "raw", limit=10**9)


def _tool_parts(conv: view.Conversation) -> dict[str, view.Part]:
    return {p.call_id: p for item in conv.items for p in item.parts if p.kind == "tool" and p.call_id}


@needs_shared
def test_turn_counts_of_the_largest_claude_code_file_match_foreign_md():
    manager, conv = _conversation(LARGEST_CLAUDE)
    assert len(manager.get_branch()) == len(manager.get_entries())  # one conversation: its branch is the file
    # FOREIGN.md, 53ea1606: 85 tool_use blocks; 51 API calls (one assistant message each);
    # tokens 58 + 2,413 + 4,251,079 + 0 + 342,346.
    assert sum(t.tool_calls for t in conv.turns) == 85
    assert sum(t.assistants for t in conv.turns) == 51
    assert sum(t.tokens for t in conv.turns) == 58 + 2_413 + 4_251_079 + 342_346
    users = [e for e in manager.get_branch()
             if e.get("type") == "message" and e["message"].get("role") == "user"]
    assert len([t for t in conv.turns if not t.continued]) == len(users)


@needs_shared
@pytest.mark.parametrize("rel", [LARGEST_CLAUDE, TASK_2X, SIDECHAIN_1X, CODEX, GEMINI])
def test_annotations_are_folded_never_boxes(rel):
    manager, conv = _conversation(rel)
    assert all(not item.annotation for item in conv.items)
    assert all(item.parts for item in conv.items)  # no empty box
    shown: list[str] = []
    for item in conv.items:
        shown.append(item.id)
        shown += [a.id for a in item.annotations]
        shown += [p.result.id for p in item.parts if p.kind == "tool" and p.result is not None]
    # Every entry of the branch is on the page exactly once (as an item, a folded
    # annotation or a result under its call).
    assert sorted(shown) == sorted(e["id"] for e in manager.get_branch())
    html = page.render_conversation(conv, str(manager.get_session_id()), windowed=False)
    assert '<article class="item annotation' not in html


@needs_shared
def test_a_task_call_folds_the_subagent_its_progress_records_carry():
    _, conv = _conversation(TASK_2X)
    # Hand count of 61cb3ba8: line 10 calls Task (toolu_01Bue4NWfKq8CB3jUprqULNs); lines 12-54
    # are 43 agent_progress records naming it in parentToolUseID; line 56, its result, names
    # toolUseResult.agentId "a1f8104".
    task = _tool_parts(conv)["toolu_01Bue4NWfKq8CB3jUprqULNs"]
    assert task.name == "Task" and task.agent_id == "a1f8104"
    assert task.subagent is not None and len(task.subagent) == 43
    assert task.subagent[0].role == "user" and task.subagent[0].text.startswith("Find and read all files")
    html = page.render_conversation(conv, "61cb3ba8-484b-4a21-bf99-34f7dc361170", windowed=False)
    assert '<details class="subagent"><summary>subagent a1f8104 · 43 messages</summary>' in html


@needs_shared
def test_inline_sidechain_subagents_fold_at_their_calls_and_parallel_calls_group():
    _, conv = _conversation(SIDECHAIN_1X)
    parts = _tool_parts(conv)
    # Hand count of 5c0375b4: lines 12, 13 and 14 are one response (message.id
    # msg_01XU4B1nvSytVjiR8jEYREvX) of three parallel calls, Task, Task, TodoWrite; the first Task has no prompt, the second's
    # subagent wrote lines 16-22 (7 sidechain records, the first carrying its prompt); the
    # Task call of line 25's subagent wrote lines 26-40 (15 records).
    assert parts["toolu_018t5jce2ZNoGr2ADsHGQife"].subagent is None
    assert len(parts["toolu_014YF9TXhDRR7BnpasNJ7gjC"].subagent or []) == 7
    assert len(parts["toolu_01LKfUwrsnof18CpWZQcJH44"].subagent or []) == 15
    groups = [g for t in conv.turns for g in t.groups if g.response_id == "msg_01XU4B1nvSytVjiR8jEYREvX"]
    assert len(groups) == 1 and groups[0].tool_calls == 3 and len(groups[0].items) == 3
    html = page.render_conversation(conv, "5c0375b4-57a5-4f26-b12d-d022ee4e51b7", windowed=False)
    assert "one response · 3 parts · parallel · 3 calls" in html
    # Tool calls of the main conversation: FOREIGN.md's 21 tool_use blocks of 5c0375b4 less the
    # 8 of the sidechain records (lines 18, 20, 28, 30, 32, 34, 36, 38).
    assert sum(t.tool_calls for t in conv.turns) == 21 - 8


@needs_shared
def test_markdown_export_has_one_turn_line_per_user_message():
    manager = _manager(LARGEST_CLAUDE)
    md = render.markdown_transcript(manager.get_header(), manager.get_branch(), cost=view.turn_cost)
    users = [e for e in manager.get_branch() if e.get("type") == "message" and e["message"].get("role") == "user"]
    lines = re.findall(r"^\*\*Turn (\d+):\*\* (.*)$", md, re.M)
    assert [int(n) for n, _ in lines] == list(range(1, len(users) + 1))
    # FOREIGN.md: 85 tool_use blocks in all.
    assert sum(int(m.group(1)) for m in re.finditer(r"(\d+) tool calls?", "\n".join(t for _, t in lines))) == 85
    assert '"type":"progress"' not in md  # no verbatim record unless asked
    with_raw = render.markdown_transcript(manager.get_header(), manager.get_branch(), raw=True)
    assert '"type":"progress"' in with_raw


def _export(tmp_path, rel: str, *extra: str) -> tuple[int, float, str]:
    db = tmp_path / "s.db"
    runner = CliRunner()
    source = shared(rel)
    result = runner.invoke(cli, ["--store", str(db), "sync", str(source)])
    assert result.exit_code == 0, result.output
    out = tmp_path / "out.html"
    session = source.stem.rsplit("-", 5)[-5][:8] if source.stem.startswith("rollout-") else source.stem[:8]
    started = time.monotonic()
    result = runner.invoke(cli, ["--store", str(db), "export", session, "--format", "html", "-o", str(out), *extra])
    seconds = time.monotonic() - started
    assert result.exit_code == 0, result.output
    return out.stat().st_size, seconds, out.read_text("utf-8")


@needs_shared
@pytest.mark.slow
def test_html_export_of_the_largest_claude_code_file_is_at_most_3x_its_size(tmp_path):
    size, _, html = _export(tmp_path, LARGEST_CLAUDE)
    source = shared(LARGEST_CLAUDE).stat().st_size  # 1,379,015 bytes
    assert size <= 3 * source, f"{size:,} bytes for a {source:,}-byte file"
    assert '\\"type\\":\\"progress\\"' not in html and '"type":"progress"' not in html  # no source records
    raw_size, _, raw_html = _export(tmp_path, LARGEST_CLAUDE, "--raw")
    assert "&#34;type&#34;:&#34;progress&#34;" in raw_html and raw_size > size


def test_raw_needs_a_page_format(tmp_path):
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "export", "x", "--format", "jsonl", "--raw"])
    assert result.exit_code == 2 and "--raw needs --format html or markdown" in result.output


def _claude_records(session: str) -> tuple[list[dict], list[dict]]:
    """A Claude Code 2.x parent log whose Task call's result names its subagent, and that
    subagent's transcript. Synthetic: no public file holds both a Task call and the
    transcript of the subagent it ran (FOREIGN.md, "Claude Code <uuid>/subagents")."""
    base = {"isSidechain": False, "userType": "external", "cwd": "/tmp/proj", "sessionId": session,
            "version": "2.1.34"}
    prompt = "Find the shell completion code"
    parent = [
        {**base, "parentUuid": None, "uuid": "u1", "type": "user", "timestamp": "2026-01-01T00:00:00.000Z",
         "message": {"role": "user", "content": "look at completions"}},
        {**base, "parentUuid": "u1", "uuid": "u2", "type": "assistant", "timestamp": "2026-01-01T00:00:01.000Z",
         "requestId": "req_1",
         "message": {"id": "msg_1", "role": "assistant", "model": "claude-opus-4-6", "type": "message",
                     "stop_reason": "tool_use", "usage": {"input_tokens": 3, "output_tokens": 5},
                     "content": [{"type": "tool_use", "id": "toolu_1", "name": "Task",
                                  "input": {"description": "Explore", "prompt": prompt}}]}},
        {**base, "parentUuid": "u2", "uuid": "u3", "type": "user", "timestamp": "2026-01-01T00:00:09.000Z",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                  "content": [{"type": "text", "text": "found it"}]}]},
         "toolUseResult": {"status": "completed", "agentId": "abc1234", "totalTokens": 8}},
    ]
    child_base = {**base, "isSidechain": True, "agentId": "abc1234"}
    child = [
        {**child_base, "parentUuid": None, "uuid": "c1", "type": "user", "timestamp": "2026-01-01T00:00:02.000Z",
         "message": {"role": "user", "content": prompt}},
        {**child_base, "parentUuid": "c1", "uuid": "c2", "type": "assistant", "timestamp": "2026-01-01T00:00:03.000Z",
         "requestId": "req_2",
         "message": {"id": "msg_2", "role": "assistant", "model": "claude-haiku-4-5", "type": "message",
                     "stop_reason": "end_turn", "usage": {"input_tokens": 2, "output_tokens": 2},
                     "content": [{"type": "text", "text": "found it"}]}},
    ]
    return parent, child


@pytest.mark.parametrize("with_child", [True, False])
def test_a_task_call_links_to_its_subagent_session_when_stored(tmp_path, with_child):
    import json

    from starlette.testclient import TestClient

    from sessiontree.web.app import create_app

    session = "5e55e55e-0000-4000-8000-000000000041"
    parent, child = _claude_records(session)
    folder = tmp_path / "projects" / "-tmp-proj"
    folder.mkdir(parents=True)
    (folder / f"{session}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in parent))
    files = [str(folder / f"{session}.jsonl")]
    if with_child:
        (folder / "agent-abc1234.jsonl").write_text("".join(json.dumps(r) + "\n" for r in child))
        files.append(str(folder / "agent-abc1234.jsonl"))
    db = tmp_path / "s.db"
    result = CliRunner().invoke(cli, ["--store", str(db), "sync", *files])
    assert result.exit_code == 0, result.output
    store = open_store(f"sqlite:///{db}")
    try:
        page_html = TestClient(create_app(store), base_url="http://127.0.0.1:8765").get(f"/s/{session}").text
    finally:
        store.close()
    assert "subagent abc1234" in page_html  # the result names the agent either way
    link = f'href="/s/{session}-agent-abc1234"'
    assert (link in page_html) is with_child


def _call(cost_nanos: int | None, tokens: int = 1000) -> UsageRecord:
    return UsageRecord("assistant", "anthropic", "claude-sonnet-4-5", tokens, 10, 0, 0, cost_nanos,
                       1_767_225_600_000, b"")


def test_turn_cost_of_recorded_calls_is_their_sum_and_an_unrecorded_one_is_priced():
    # Recorded costs are summed as recorded (docs/usage.md): 0.105 + 0.02 USD, rounded half-even.
    assert view.turn_cost([_call(105_000_000), _call(20_000_000)]) == "$0.12"
    assert view.turn_cost([_call(0, tokens=0)]) == "$0.00"  # a call that used nothing is free
    assert view.turn_cost([]) == ""
    # One call without a recorded cost: the catalogue estimates it ("~"), beside the recorded one.
    mixed = view.turn_cost([_call(105_000_000), _call(None)])
    assert mixed.startswith("~$") and mixed != "~$0.10"
