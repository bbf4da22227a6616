"""Format rules (docs/rules/, mostly ``seed:`` labels) that no other suite tests on its own.

Each expected value is worked out from the rule sentence quoted in the test's docstring.
"""

from __future__ import annotations

import os

import orjson
import pytest

from builders import assistant_reply as assistant
from builders import user
from sessiontree.core.tree import NameState
from sessiontree.format.bounds import normalize_nested_calls
from sessiontree.session.manager import SessionManager
from sessiontree.stores.jsonl.store import JsonlStore

WF = {"runId": "run-1", "stageId": "stage-build", "stageName": "build"}


def test_continue_recent_skips_an_unloadable_newest_session(tmp_path):
    """"Unloadable sessions are omitted from resume listings": continuing the most
    recent session of a cwd continues the newest one that loads."""
    store = JsonlStore(tmp_path / "s")
    older = SessionManager.create("/p", store=store)
    older.append_message(user("older"))
    newer = SessionManager.create("/p", store=store)
    newer.append_message(user("newer"))
    path = store.location(newer.get_session_id())
    with open(path, "ab") as handle:
        handle.write(b'{"type":"message","id":"torn')  # a torn final record
    os.utime(path)  # and it is the most recently written file
    assert [i.id for i in SessionManager.list("/p", store)] == [older.get_session_id()]
    resumed = SessionManager.continue_recent("/p", store=store)
    assert resumed.get_session_id() == older.get_session_id()


def test_opening_an_early_format_4_file_persists_its_upgrade_once(tmp_path):
    """"Early version-4 files are upgraded automatically when opened ... Opening an older
    JSONL session persists its upgrade": timestamp -> createdAt, parentSession -> parentSessionId."""
    directory = tmp_path / "s"
    directory.mkdir()
    path = directory / "early.jsonl"
    path.write_bytes(b'{"type":"session","version":4,"id":"early","timestamp":"2025-01-01T00:00:00.000Z",'
                     b'"cwd":"/w","parentSession":"/x/2024_parent.jsonl"}\n')
    SessionManager.open(JsonlStore(directory), "early")
    first = path.read_bytes().split(b"\n")[0]
    assert orjson.loads(first) == {"type": "session", "version": 4, "id": "early",
                                   "createdAt": "2025-01-01T00:00:00.000Z", "cwd": "/w",
                                   "parentSessionId": "parent"}
    before = os.stat(path).st_mtime_ns
    SessionManager.open(JsonlStore(directory), "early")
    assert os.stat(path).st_mtime_ns == before  # already upgraded: nothing written


def test_set_session_file_switches_to_a_new_jsonl_file(tmp_path):
    """"setSessionFile(path): Switch to a JSONL file directly" (keeping the manager's cwd)."""
    manager = SessionManager.in_memory("/cwdx")
    target = tmp_path / "d" / "new.jsonl"
    manager.set_session_file(str(target))
    assert manager.get_session_file() == str(target)
    assert manager.get_cwd() == "/cwdx"
    assert manager.get_session_dir() == str(target.parent)
    manager.append_message(user("hi"))
    lines = target.read_bytes().splitlines()
    assert orjson.loads(lines[0])["id"] == manager.get_session_id()
    assert orjson.loads(lines[1])["message"]["content"] == "hi"


def test_context_edit_targets_and_string_normalization():
    """"Targets may be user, assistant, tool-result, or custom-message entries"; a string
    replacement for assistant or tool-result content is "normalized to one text block"."""
    m = SessionManager.in_memory("/w")
    m.append_message(user("go"))
    m.append_message({**assistant(), "content": [{"type": "toolCall", "id": "c1", "name": "bash",
                                                  "arguments": {}}], "stopReason": "toolUse"})
    result = m.append_message({"role": "toolResult", "toolCallId": "c1", "toolName": "bash",
                               "content": [{"type": "text", "text": "long output"}], "isError": False,
                               "timestamp": 3})
    note = m.append_custom_message_entry("note", "hello", True)
    bash = m.append_message({"role": "bashExecution", "command": "ls", "output": "x", "exitCode": 0,
                             "cancelled": False, "truncated": False, "timestamp": 4})
    edit = m.get_entry(m.append_context_edit(result, {"content": "short"}))
    assert edit["replacement"] == {"content": [{"type": "text", "text": "short"}]}
    edit = m.get_entry(m.append_context_edit(note, {"content": "bye"}))
    assert edit["replacement"] == {"content": "bye"}
    projected = m.build_session_projection().messages
    assert projected[2]["content"] == [{"type": "text", "text": "short"}]
    assert (projected[3]["customType"], projected[3]["display"], projected[3]["content"]) == ("note", True, "bye")
    with pytest.raises(ValueError, match=f"Entry {bash} does not contribute editable model content"):
        m.append_context_edit(bash, None)


def test_context_edits_leave_session_accounting_unchanged():
    """Context edits change the model context only, not "session accounting"."""
    m = SessionManager.in_memory("/w")
    first = m.append_message(user("first"))
    m.append_message(assistant("ok"))
    m.append_context_edit(first, None)
    (info,) = SessionManager.list_all(m.get_session_store())
    assert (info.first_message, info.message_count, info.all_messages_text) == ("first", 2, "first ok")
    assert [x["role"] for x in m.build_session_projection().messages] == ["assistant"]


def test_session_dir_and_file_per_store(tmp_path):
    """getSessionDir is "empty string for non-JSONL"; a JSONL session's file is known before
    its first append and exists only after it."""
    sqlite = SessionManager.create("/w")  # no store or directory: the shared SQLite database
    assert sqlite.get_session_store().kind == "sqlite"
    assert sqlite.get_session_dir() == "" and sqlite.get_session_file() is None
    jsonl = SessionManager.create("/w", str(tmp_path / "j"))
    assert jsonl.get_session_dir() == str(tmp_path / "j")
    planned = jsonl.get_session_file()
    assert planned is not None and not os.path.exists(planned)
    jsonl.append_message(user("hi"))
    assert jsonl.get_session_file() == planned and os.path.exists(planned)


def test_a_cleared_name_keeps_its_empty_entry():
    """"A cleared session keeps its trailing empty-name entry"."""
    m = SessionManager.in_memory("/w")
    m.append_session_info("Build fixes")
    entry = m.get_entry(m.append_session_info("   "))
    assert entry["name"] == ""
    reopened = SessionManager.open(m.get_session_store(), m.get_session_id())
    assert reopened.get_session_name_state() == NameState(True, None)
    assert reopened.get_session_name() is None


def test_branch_with_summary_without_a_leaf_starts_a_root():
    """Branching with a summary from no current leaf: the summary is a root, from "root"."""
    m = SessionManager.in_memory("/w")
    m.append_message(user("a"))
    m.reset_leaf()
    entry = m.get_entry(m.branch_with_summary(None, "fresh start"))
    assert (entry["parentId"], entry["fromId"], entry["summary"]) == (None, "root", "fresh start")


def test_new_session_classification_needs_the_complete_marker():
    """newSession options "include parentSession, internal, and workflow"; classification
    requires both markers, a complete workflow object."""
    m = SessionManager.in_memory("/w")
    m.new_session(internal=True, workflow=WF)
    assert list(m.get_header()) == ["type", "version", "id", "createdAt", "cwd", "internal", "workflow"]
    m.new_session(internal=True, workflow={"runId": "r"})
    assert "internal" not in m.get_header() and "workflow" not in m.get_header()


def test_in_memory_parent_id_is_taken_as_it_is(tmp_path, monkeypatch):
    """inMemory does no filesystem I/O: a valid parent id is not looked up as a file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "0190abcd-parent").write_bytes(b'{"type":"session","version":4,"id":"other","cwd":"/w"}\n')
    m = SessionManager.in_memory("/w", parent_session="0190abcd-parent")
    assert m.get_header()["parentSessionId"] == "0190abcd-parent"


def test_nested_call_argument_bound_counts_utf8_bytes():
    """nestedCalls "arguments exceeding 8 KiB per call" are omitted: bytes, not characters."""
    # {"x":"<n é>"} is 8 + 2n bytes of compact UTF-8 JSON.
    fits = {"id": "n1", "name": "t", "status": "ok", "arguments": {"x": "é" * 4092}}  # 8192 bytes
    over = {"id": "n2", "name": "t", "status": "ok", "arguments": {"x": "é" * 4093}}  # 8194 bytes
    out = normalize_nested_calls({"calls": [fits, over], "complete": True})
    assert out["calls"][0] == fits
    assert out["calls"][1] == {"id": "n2", "name": "t", "status": "ok", "argumentsBytes": 8194}
    assert out["complete"] is False


def test_there_is_no_flush():
    """"There is no flush method": every mutation has committed when it returns."""
    assert not hasattr(SessionManager, "flush")
