"""``check --store`` on sessions synced from other agents (issue 44 item 1; docs/check.md).

The store check runs the file rules over each session's JSONL form. They know the entry
types sessiontree's own mappings write (``usage``: Codex ``token_count``, Claude Code
subagent calls; docs/agents/), and they pair tool calls and results with the projection's
own tool-window rule (``core/projection/pairing.py`` ``ToolWindow``, docs/rules/projection.md
P.4-P.7): Claude Code writes one record per ``tool_use`` of a response, each its own
assistant message carrying the response's ``responseId``, and the results come after all
of them (docs/agents/claude-code.md, "One response is one turn").

Expected figures come from the raw corpus files, counted here, never from our output.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import corpus
from cli_support import run_cli, run_cli_json

SHARED = corpus.shared()
CLAUDE = SHARED / "claude-code" / "projects"
SMALL = CLAUDE / "-Users-paul-src-entireio-cli" / "9d440bfc-a64f-43be-aa10-10a3764a59ea.jsonl"
TASK = CLAUDE / "-Users-paul-src-entireio-cli" / "61cb3ba8-484b-4a21-bf99-34f7dc361170.jsonl"
#: The first of the two parallel calls of 9d440bfc lines 10-14 (docs/agents/claude-code.md).
PARALLEL_CALL = "toolu_014GH4in5GEv9x8H8px5WfUC"

pytestmark = corpus.NEEDS_SHARED


def _sync(tmp_path: Path, *files: Path) -> tuple[str, dict]:
    """Sync ``files`` (copied into one folder) into a fresh store; its ``check --store --json``."""
    folder = tmp_path / "home"
    folder.mkdir()
    for file in files:
        shutil.copy(file, folder / file.name)
    db = str(tmp_path / "s.db")
    run_cli(db, "sync", str(folder))
    result = run_cli(db, "check", "--store", "--json")
    return db, json.loads(result.stdout)


def _tool_use_ids(path: Path) -> set[str]:
    """The ids of every ``tool_use`` block of a Claude Code file (read from the raw records)."""
    ids = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        content = (record.get("message") or {}).get("content")
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_use":
                ids.add(block["id"])
    return ids


def _result_ids(path: Path) -> set[str]:
    """The ``tool_use_id`` of every ``tool_result`` block of a Claude Code file."""
    ids = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        content = (record.get("message") or {}).get("content")
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_result":
                ids.add(block["tool_use_id"])
    return ids


def test_parallel_calls_of_one_response_pair_as_the_projection_pairs_them(tmp_path):
    # The raw file answers every call it makes (counted here): nothing to warn about.
    assert _tool_use_ids(SMALL) == _result_ids(SMALL) and PARALLEL_CALL in _tool_use_ids(SMALL)
    db, report = _sync(tmp_path, SMALL)
    assert report["errors"] == 0
    assert report["problems"] == []
    # The same verdict as the file check, and the projection adds no synthetic result.
    session = "9d440bfc-a64f-43be-aa10-10a3764a59ea"
    context = run_cli_json(db, "context", session)
    results = [m for m in context["messages"] if m.get("role") == "toolResult"]
    assert PARALLEL_CALL in {m["toolCallId"] for m in results}
    assert not any(m.get("isError") and "interrupted" in json.dumps(m.get("content")).lower() for m in results)


def test_a_truly_orphaned_result_is_still_reported(tmp_path):
    # A synthetic fixture: the real file with the result of the first parallel call renamed
    # to an id no tool_use of the file carries (real damage: the projection drops it).
    text = SMALL.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    result_lines = [i for i, line in enumerate(lines) if f'"tool_use_id":"{PARALLEL_CALL}"' in line]
    assert len(result_lines) == 1
    damaged = tmp_path / "damaged" / SMALL.name
    damaged.parent.mkdir()
    index = result_lines[0]
    lines[index] = lines[index].replace(f'"tool_use_id":"{PARALLEL_CALL}"', '"tool_use_id":"toolu_NOSUCHCALL"')
    damaged.write_text("".join(lines), encoding="utf-8")
    _, report = _sync(tmp_path, damaged)
    assert report["errors"] == 0
    orphans = [p for p in report["problems"] if p["code"] == "orphan-tool-result"]
    assert len(orphans) == 1 and "toolu_NOSUCHCALL" in orphans[0]["message"]
    # The call it no longer answers gets a synthetic result from the projection: reported too.
    # (The renamed result no longer continues the response's line, so the mapping makes it a
    # branch, docs/agents/claude-code.md; the other parallel call is then open on that branch.)
    unanswered = [p["message"] for p in report["problems"] if p["code"] == "tool-call-without-result"]
    assert any(PARALLEL_CALL in message for message in unanswered)
    assert {p["code"] for p in report["problems"]} == {"orphan-tool-result", "tool-call-without-result"}


def test_mapped_usage_entries_are_known(tmp_path):
    # 61cb3ba8 bills a Task subagent's calls (agent_progress records with usage): usage entries.
    raw = TASK.read_text(encoding="utf-8")
    assert '"agent_progress"' in raw and '"usage"' in raw
    db, report = _sync(tmp_path, TASK)
    assert not [p for p in report["problems"] if p["code"] == "unknown-entry-type"]
    exported = run_cli(db, "export", "61cb3ba8-484b-4a21-bf99-34f7dc361170", "-o", str(tmp_path / "out.jsonl"))
    assert exported.exit_code == 0
    types = [json.loads(line)["type"] for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert "usage" in types  # so the check above had something to judge


@pytest.mark.slow
def test_the_whole_synced_corpus_gives_no_false_warning(tmp_path):
    folders = [SHARED / agent for agent in corpus.FOREIGN_AGENTS]
    home = tmp_path / "home"
    for folder in folders:
        shutil.copytree(folder, home / folder.name)
    db = str(tmp_path / "s.db")
    run_cli(db, "sync", str(home))
    report = json.loads(run_cli(db, "check", "--store", "--json").stdout)
    assert report["sessions"] == 13 + 3 + 7  # FOREIGN.md: 13 Claude Code, 3 Gemini, 7 Codex files
    assert report["errors"] == 0
    # The one call the corpus never answers: the last tool_use of 61cb3ba8, the file ends with it
    # open (docs/agents/claude-code.md); counted from the raw file.
    open_calls = _tool_use_ids(TASK) - _result_ids(TASK)
    assert len(open_calls) == 1
    assert [(p["code"], p["sessionId"]) for p in report["problems"]] == [
        ("tool-call-without-result", "61cb3ba8-484b-4a21-bf99-34f7dc361170")]
    assert next(iter(open_calls)) in report["problems"][0]["message"]
