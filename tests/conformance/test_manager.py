"""SessionManager conformance: every method of the seed's API (docs/rules/manager.md
``seed:api``), run unchanged on every store (``store``) and through both drivers
(``manager``: ``SessionManager`` itself, or every call through ``AsyncSessionManager``)."""

from __future__ import annotations

import inspect
import itertools
import json
import os
import re
from typing import Any

import pytest

from builders import assistant_ms as assistant
from builders import tool_result_ms as tool_result
from builders import user_ms as user
from conformance.aio_driver import AsyncDriven, AsyncDriver
from sessiontree import errors
from sessiontree.format.codec import read_session_file
from sessiontree.session.manager import SessionManager
from sessiontree.stores.memory import MemoryStore
from sessiontree.stores.sqlite.store import SqliteStore

UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
HEX8 = re.compile(r"^[0-9a-f]{8}$")
ISO_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")

WORKFLOW = {"runId": "run-1", "stageId": "stage-build", "stageName": "build"}


def reopen(m: Any) -> Any:
    """The session of ``m`` opened again from its store, through the driver that made ``m``."""
    api = m.driver if isinstance(m, AsyncDriven) else SessionManager
    return api.open(m.get_session_store(), m.get_session_id())


# ---------------------------------------------------------------- create / open

def test_create_writes_nothing_until_first_mutation(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store)
    assert UUID7.match(m.get_session_id())
    assert not store.exists(m.get_session_id())
    m.append_message(user("hi"))
    assert store.exists(m.get_session_id())
    header = m.get_header()
    assert list(header) == ["type", "version", "id", "createdAt", "cwd"]
    assert header["version"] == 4 and ISO_MS.match(header["createdAt"]) and header["cwd"] == str(tmp_path)


def test_open_missing_id_raises_and_creates_nothing(manager, store):
    with pytest.raises(errors.SessionNotFoundError):
        manager.open(store, "no-such-session")
    assert store.session_ids() == []


def test_open_validates_id(manager, store):
    with pytest.raises(errors.InvalidSessionIdError):
        manager.open(store, "../etc")


def test_create_with_invalid_id(manager, store, tmp_path):
    for bad in ["", "-abc", "abc-", "abc/def", "abc def", "é", "abc\n"]:
        with pytest.raises(errors.InvalidSessionIdError) as info:
            manager.create(str(tmp_path), store=store, id=bad)
        assert str(info.value) == errors.INVALID_SESSION_ID_MESSAGE


def test_roundtrip_through_store(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store, id="abc-123_def.456")
    u = m.append_message(user("hello"))
    a = m.append_message(assistant("hi"))
    again = reopen(m)
    assert [e["id"] for e in again.get_entries()] == [u, a]
    assert again.get_leaf_id() == a
    assert again.get_entry(a)["parentId"] == u
    assert again.get_header() == m.get_header()
    assert again.get_cwd() == str(tmp_path)


def test_open_cwd_override(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store)
    m.append_message(user("x"))
    other = manager.open(store, m.get_session_id(), str(tmp_path / "elsewhere"))
    assert other.get_cwd() == str(tmp_path / "elsewhere")


def test_duplicate_create_id_raises_exists(manager, store, tmp_path):
    first = manager.create(str(tmp_path), store=store, id="same")
    first.append_message(user("a"))
    second = manager.create(str(tmp_path), store=store, id="same")
    with pytest.raises(errors.SessionExistsError):
        second.append_message(user("b"))
    assert second.get_entries() == []  # the failed entry is not published


# ---------------------------------------------------------------- entry shapes (docs/rules/format.md A)

def test_entry_key_orders(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store)
    u = m.append_message(user("hi"))
    m.append_thinking_level_change("high")
    m.append_model_change("openai", "gpt-4o")
    m.append_context_window_change(200000)
    m.append_custom_entry("ext")
    m.append_custom_entry("ext", None)
    m.append_custom_message_entry("ext", "injected", True)
    m.append_label_change(u, "checkpoint")
    m.append_label_change(u, "")
    m.append_label_change(u)
    m.append_session_info("  My name  ")
    m.append_session_summary("line\n  two", u)
    m.append_compaction("[User]: hi", None, 10, {"strategy": "verbatim-lines", "rung": "extension"})
    entries = reopen(m).get_entries()
    base = ["type", "id", "parentId", "timestamp"]
    keys = [list(e) for e in entries]
    assert keys[0] == [*base, "message"]
    assert keys[1] == [*base, "thinkingLevel"]
    assert keys[2] == [*base, "provider", "modelId"]
    assert keys[3] == [*base, "contextWindow"]
    assert keys[4] == ["type", "customType", "id", "parentId", "timestamp"]
    assert keys[5] == ["type", "customType", "data", "id", "parentId", "timestamp"] and entries[5]["data"] is None
    assert keys[6] == ["type", "customType", "content", "display", "id", "parentId", "timestamp"]
    assert keys[7] == [*base, "targetId", "label"]
    assert entries[8]["label"] == ""
    assert keys[9] == [*base, "targetId"]
    assert entries[10]["name"] == "My name"
    assert entries[11]["summary"] == "line two"
    assert keys[12] == [*base, "summary", "firstKeptEntryId", "tokensBefore", "details", "fromHook"]
    assert entries[12]["firstKeptEntryId"] is None and entries[12]["fromHook"] is True
    for entry in entries:
        assert HEX8.match(entry["id"]) and ISO_MS.match(entry["timestamp"])
    # every append is a child of the previous leaf
    for previous, entry in itertools.pairwise(entries):
        assert entry["parentId"] == previous["id"]


def test_compaction_without_extension_rung_has_no_from_hook(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store)
    u = m.append_message(user("a"))
    c = m.append_compaction("s", u, 5, {"strategy": "verbatim-lines", "rung": "planned"})
    assert "fromHook" not in m.get_entry(c)


def test_unknown_targets_raise_entry_not_found(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store)
    m.append_message(user("a"))
    leaf = m.get_leaf_id()
    for call in (lambda: m.branch("nope"), lambda: m.append_label_change("nope", "x"),
                 lambda: m.append_session_summary("s", "nope"), lambda: m.append_compaction("s", "nope", 1, {}),
                 lambda: m.branch_with_summary("nope", "s"), lambda: m.create_branched_session("nope"),
                 lambda: m.append_context_edit("nope", None)):
        with pytest.raises(errors.EntryNotFoundError) as info:
            call()
        assert str(info.value) == "Entry nope not found"
    assert m.get_leaf_id() == leaf and len(m.get_entries()) == 1


def test_append_message_validation(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store)
    with pytest.raises(ValueError):
        m.append_message({"content": "no role"})
    with pytest.raises(ValueError):
        m.append_message(assistant(stop="pending"))
    with pytest.raises(ValueError):
        m.append_context_window_change(0)
    with pytest.raises(ValueError):
        m.append_context_window_change(True)
    assert m.get_entries() == []


def test_summary_is_clamped(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store)
    u = m.append_message(user("a"))
    s = m.append_session_summary("x" * 200, u)
    assert m.get_entry(s)["summary"] == "x" * 159 + "\u2026"


def test_nested_calls_bounded_on_append(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store)
    calls = [{"id": f"n{i}", "name": "t", "status": "ok", "arguments": {}} for i in range(300)]
    message = {**tool_result("c1"), "nestedCalls": {"calls": calls, "complete": True}}
    entry_id = m.append_message(message)
    stored = m.get_entry(entry_id)["message"]["nestedCalls"]
    assert len(stored["calls"]) == 256 and stored["complete"] is False
    assert len(message["nestedCalls"]["calls"]) == 300  # the caller's dict is untouched


# ---------------------------------------------------------------- tree navigation

def test_branch_reset_and_children(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store)
    a = m.append_message(user("a"))
    b = m.append_message(assistant("b"))
    m.branch(a)
    c = m.append_message(assistant("c"))
    assert m.get_entry(c)["parentId"] == a
    assert [e["id"] for e in m.get_children(a)] == [b, c]
    assert [e["id"] for e in m.get_branch()] == [a, c]
    assert [e["id"] for e in m.get_branch(b)] == [a, b]
    m.reset_leaf()
    assert m.get_leaf_id() is None and m.get_leaf_entry() is None
    assert m.build_session_context().messages == []
    r = m.append_message(user("new root"))
    assert m.get_entry(r)["parentId"] is None
    roots = m.get_tree()
    assert [n.entry["id"] for n in roots] == [a, r]
    # branch() is not persisted: reopening puts the leaf on the last record
    again = reopen(m)
    assert again.get_leaf_id() == r


def test_branch_with_summary(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store)
    a = m.append_message(user("a"))
    b = m.append_message(assistant("b"))
    s = m.branch_with_summary(a, "tried b")
    entry = m.get_entry(s)
    assert entry["parentId"] == a and entry["fromId"] == b and entry["summary"] == "tried b"
    assert list(entry) == ["type", "id", "parentId", "timestamp", "fromId", "summary"]
    assert m.get_leaf_id() == s
    r = m.branch_with_summary(None, "from scratch", details={"readFiles": []}, from_hook=True)
    entry = m.get_entry(r)
    assert entry["parentId"] is None and entry["fromId"] == s
    assert entry["details"] == {"readFiles": []} and entry["fromHook"] is True


def test_labels_and_tree(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store)
    a = m.append_message(user("a"))
    label_entry = m.append_label_change(a, "start")
    assert m.get_label(a) == "start"
    node = m.get_tree()[0]
    assert node.label == "start" and node.label_timestamp == m.get_entry(label_entry)["timestamp"]
    m.append_label_change(a, "")
    assert m.get_label(a) is None
    assert reopen(m).get_label(a) is None


def test_name_state(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store)
    m.append_message(user("a"))
    state = m.get_session_name_state()
    assert (state.has_name, state.name) == (False, None)
    m.append_session_info(" Refactor ")
    assert m.get_session_name() == "Refactor"
    m.append_session_info("")
    state = reopen(m).get_session_name_state()
    assert (state.has_name, state.name) == (True, None)
    assert m.get_session_name() is None


# ---------------------------------------------------------------- context edits (docs/rules/projection.md R)

def test_context_edit_rules(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store)
    u = m.append_message(user("secret"))
    a = m.append_message(assistant("answer"))
    t = m.append_model_change("p", "m")
    with pytest.raises(ValueError, match="must be null or contain string/array content"):
        m.append_context_edit(u, {"text": "x"})
    with pytest.raises(ValueError, match=f"Entry {t} does not contribute editable model content"):
        m.append_context_edit(t, None)
    e = m.append_context_edit(a, {"content": "short"})
    assert m.get_entry(e)["replacement"] == {"content": [{"type": "text", "text": "short"}]}
    e2 = m.append_context_edit(u, {"content": "redacted"})
    assert m.get_entry(e2)["replacement"] == {"content": "redacted"}
    messages = m.build_session_context().messages
    assert [msg["content"] for msg in messages] == ["redacted", [{"type": "text", "text": "short"}]]
    assert m.get_entry(u)["message"]["content"] == "secret"  # raw history unchanged
    m.branch(u)
    off = m.append_message(assistant("other"))
    with pytest.raises(ValueError, match=f"Entry {a} is not on the active branch"):
        m.append_context_edit(a, None)
    assert m.get_leaf_id() == off
    # branch-relative: on this branch the edit of u does not apply
    assert m.build_session_context().messages[0]["content"] == "secret"


# ---------------------------------------------------------------- projection through the manager (D-11)

def test_trailing_unanswered_call_left_open_in_process_and_closed_on_reopen(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store)
    m.append_message(user("run"))
    m.append_message(assistant("", stop="toolUse", calls=[("c1", "bash")]))
    assert [msg["role"] for msg in m.build_session_context().messages] == ["user", "assistant"]
    reopened = reopen(m)
    roles = [msg["role"] for msg in reopened.build_session_context().messages]
    assert roles == ["user", "assistant", "toolResult"]
    synthetic = reopened.build_session_context().messages[-1]
    assert synthetic["toolCallId"] == "c1" and synthetic["isError"] is True
    text = synthetic["content"][0]["text"].lower()
    assert "interrupted" in text and "no side effect" not in text
    assert len(reopened.get_entries()) == 2  # nothing was written


def test_compaction_stores_system_checkpoint(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store)
    m.append_message({"role": "system", "content": "Be terse.", "sections": {"a": "1"}, "timestamp": 5})
    u = m.append_message(user("hi"))
    c = m.append_compaction("[User]: hi", u, 10, {"strategy": "verbatim-lines", "rung": "planned"})
    entry = m.get_entry(c)
    assert list(entry)[-1] == "systemMessage"
    checkpoint = entry["systemMessage"]
    assert checkpoint["role"] == "system" and checkpoint["content"] == "Be terse."
    assert checkpoint["sections"] == {"a": "1"}
    from sessiontree.core.tree import parse_timestamp_ms
    assert checkpoint["timestamp"] == int(parse_timestamp_ms(entry["timestamp"]))
    projection = m.build_session_projection()
    assert projection.messages[0]["role"] == "system"
    assert projection.messages[1]["customType"] == "compaction"


def test_context_window_in_projection(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store)
    m.append_context_window_change(1000)
    m.append_context_window_change(2000)
    m.append_message(user("a"))
    assert m.build_session_projection().context_window == 2000


def test_build_context_entries(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store)
    a = m.append_message(user("a"))
    b = m.append_message(assistant("b"))
    c = m.append_compaction("[User]: a", b, 1, {"strategy": "verbatim-lines"})
    d = m.append_message(user("d"))
    assert [e["id"] for e in m.build_context_entries()] == [c, b, d]
    assert a not in [e["id"] for e in m.build_context_entries()]


# ---------------------------------------------------------------- sessions: new, branch, fork, delete

def test_new_session_clears_state(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store)
    a = m.append_message(user("a"))
    m.append_label_change(a, "x")
    old = m.get_session_id()
    m.new_session(parent_session=old)
    assert m.get_session_id() != old and m.get_entries() == [] and m.get_leaf_id() is None
    assert m.get_label(a) is None
    assert m.get_header()["parentSessionId"] == old
    assert not store.exists(m.get_session_id())
    m.append_message(user("b"))
    assert store.exists(m.get_session_id()) and store.exists(old)


def test_classification_pair_rules(manager, store, tmp_path):
    ok = manager.create(str(tmp_path), store=store, internal=True, workflow=WORKFLOW)
    assert ok.get_header()["internal"] is True and ok.get_header()["workflow"] == WORKFLOW
    for internal, workflow in [(True, None), (False, WORKFLOW), (True, {**WORKFLOW, "stageId": " "}),
                               ("yes", WORKFLOW)]:
        header = manager.create(str(tmp_path), store=store, internal=internal, workflow=workflow).get_header()
        assert "internal" not in header and "workflow" not in header


def test_mark_session_internal(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store)
    m.append_message(user("a"))
    m.mark_session_internal({"runId": "r", "stageId": ""})  # invalid: nothing
    assert "internal" not in m.get_header()
    m.mark_session_internal(WORKFLOW)
    assert reopen(m).get_header()["workflow"] == WORKFLOW
    m.mark_session_internal({"runId": "r2", "stageId": "s2", "stageName": "n2"})  # existing valid kept
    assert reopen(m).get_header()["workflow"] == WORKFLOW


def test_create_branched_session_rechains_around_labels(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store, internal=True, workflow=WORKFLOW)
    u = m.append_message(user("a"))
    lab = m.append_label_change(u, "keep")
    a = m.append_message(assistant("b"))
    c = m.append_compaction("s", lab, 1, {"strategy": "verbatim-lines"})
    old_id = m.get_session_id()
    label_ts = m.get_entry(lab)["timestamp"]
    m.create_branched_session(c)
    assert m.get_session_id() != old_id
    entries = m.get_entries()
    assert [e["type"] for e in entries] == ["message", "message", "compaction", "label"]
    assert entries[1]["id"] == a and entries[1]["parentId"] == u  # re-chained around the dropped label
    assert entries[2]["firstKeptEntryId"] == a  # remapped to the next kept entry (D-5)
    assert entries[3]["targetId"] == u and entries[3]["label"] == "keep" and entries[3]["timestamp"] == label_ts
    assert entries[3]["parentId"] == c and entries[3]["id"] != lab
    header = m.get_header()
    assert header["parentSessionId"] == old_id and header["workflow"] == WORKFLOW
    assert store.exists(m.get_session_id())
    assert [e["id"] for e in reopen(m).get_entries()] == [e["id"] for e in entries]


def test_fork_to_copies_everything(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store)
    a = m.append_message(user("a"))
    m.append_message(assistant("b"))
    m.branch(a)
    m.append_message(assistant("c"))
    fork = m.fork_to(str(tmp_path / "other"))
    assert fork.get_session_id() != m.get_session_id()
    assert fork.get_header()["parentSessionId"] == m.get_session_id()
    assert fork.get_cwd() == str(tmp_path / "other")
    assert fork.get_entries() == m.get_entries()
    assert len(reopen(m).get_entries()) == 3


def test_fork_to_inherits_classification_unless_given(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store, internal=True, workflow=WORKFLOW)
    m.append_message(user("a"))
    assert m.fork_to(str(tmp_path)).get_header()["workflow"] == WORKFLOW
    other = {"runId": "r9", "stageId": "s9", "stageName": "n9"}
    assert m.fork_to(str(tmp_path), internal=True, workflow=other).get_header()["workflow"] == other


def test_delete_session(manager, store, tmp_path):
    m = manager.create(str(tmp_path), store=store)
    m.append_message(user("a"))
    other = m.fork_to(str(tmp_path))
    with pytest.raises(errors.SessionInUseError):
        m.delete_session(m.get_session_id())
    m.delete_session("not-there")  # no-op
    m.delete_session(other.get_session_id())
    assert not store.exists(other.get_session_id()) and store.exists(m.get_session_id())


# ---------------------------------------------------------------- listing

def test_list_and_list_all(manager, store, tmp_path):
    proj = str(tmp_path / "proj")
    m = manager.create(proj, store=store)
    # Message times after the sessions' creation (now): modified is never earlier than created.
    m.append_message(user("first question", ts=4000000000000))
    m.append_message(assistant("answer", ts=4000000005000))
    m.append_session_info("Named")
    n = manager.create(str(tmp_path / "other"), store=store)
    n.append_message(user("elsewhere", ts=3900000000000))
    w = manager.create(proj, store=store, internal=True, workflow=WORKFLOW)
    w.append_message(user("workflow", ts=4100000000000))
    rows = manager.list(proj, store)
    assert [r.id for r in rows] == [m.get_session_id()]
    row = rows[0]
    assert row.name == "Named" and row.has_name and row.message_count == 2
    assert row.first_message == "first question" and row.cwd == proj
    assert row.all_messages_text == "first question answer"
    assert row.modified.timestamp() == 4000000005.0
    with_internal = manager.list(proj, store, include_internal=True)
    assert [r.id for r in with_internal] == [w.get_session_id(), m.get_session_id()]
    assert with_internal[0].internal and with_internal[0].workflow == WORKFLOW
    everything = manager.list_all(store)
    assert [r.id for r in everything] == [m.get_session_id(), n.get_session_id()]
    calls = []
    manager.list_all(store, lambda done, total: calls.append((done, total)))
    assert calls and calls[-1][0] == calls[-1][1]


def test_list_cancelled(manager, store, tmp_path):
    import threading

    m = manager.create(str(tmp_path), store=store)
    m.append_message(user("a"))
    event = threading.Event()
    event.set()
    with pytest.raises(errors.ListingCancelledError):
        manager.list_all(store, cancel=event)


def test_continue_recent(manager, store, tmp_path):
    proj = str(tmp_path / "p")
    fresh = manager.continue_recent(proj, store=store)
    assert fresh.get_entries() == []
    fresh.append_message(user("a"))
    again = manager.continue_recent(proj, store=store)
    assert again.get_session_id() == fresh.get_session_id()
    w = manager.create(proj, store=store, internal=True, workflow=WORKFLOW)
    w.append_message(user("w"))
    assert manager.continue_recent(proj, store=store).get_session_id() == fresh.get_session_id()
    assert manager.continue_recent(proj, store=store, include_internal=True).get_session_id() == w.get_session_id()


# ---------------------------------------------------------------- failure injection

class FailingStore:
    """Wraps a store; its writes fail while ``fail`` is set."""

    def __init__(self, inner):
        self.inner = inner
        self.fail = False
        self.url, self.kind = inner.url, inner.kind

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def append(self, session_id, entries):
        if self.fail:
            raise errors.StorageError("injected failure") from OSError(28, "No space left on device")
        return self.inner.append(session_id, entries)


def test_failed_write_leaves_state_unchanged(manager, store, tmp_path):
    wrapped = FailingStore(store)
    m = manager.create(str(tmp_path), store=wrapped)
    a = m.append_message(user("a"))
    m.append_label_change(a, "x")
    before = (m.get_leaf_id(), list(m.get_entries()), m.get_label(a))
    wrapped.fail = True
    with pytest.raises(errors.StorageError):
        m.append_message(user("lost"))
    with pytest.raises(errors.StorageError):
        m.append_label_change(a, "y")
    with pytest.raises(errors.StorageError):
        m.branch_with_summary(a, "s")
    assert (m.get_leaf_id(), list(m.get_entries()), m.get_label(a)) == before
    wrapped.fail = False
    retry = m.append_message(user("retry"))
    assert m.get_entry(retry)["parentId"] == before[0]
    assert len(reopen(m).get_entries()) == 3


# ---------------------------------------------------------------- memory, files, import/export

def test_in_memory_does_no_io(manager, tmp_path, monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("filesystem I/O in memory mode")

    m = manager.in_memory(str(tmp_path))
    monkeypatch.setattr("builtins.open", forbidden)
    m.append_message(user("a"))
    assert not m.is_persisted() and m.get_session_dir() == "" and m.get_session_file() is None


def test_in_memory_with_entries(manager, tmp_path):
    header = {"type": "session", "version": 3, "id": "given", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/x"}
    entries = [{"type": "message", "id": "1", "parentId": None, "timestamp": "2026-01-01T00:00:01.000Z",
                "message": user("a")}]
    m = manager.in_memory(str(tmp_path), entries=[header, *entries])
    assert m.get_session_id() == "given" and m.get_header()["createdAt"] == "2026-01-01T00:00:00.000Z"
    assert m.get_leaf_id() == "1"


def test_open_file_missing_writes_header_at_once(manager, tmp_path):
    path = tmp_path / "s" / "new.jsonl"
    m = manager.open_file(str(path), cwd_override=str(tmp_path))
    lines = path.read_bytes().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["id"] == m.get_session_id()
    again = manager.open_file(str(path))
    assert again.get_session_id() == m.get_session_id()
    assert m.get_session_file() == str(path) and m.get_session_dir() == str(tmp_path / "s")


def test_open_file_zero_bytes(manager, tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    m = manager.open_file(str(path))
    assert json.loads(path.read_bytes())["id"] == m.get_session_id()


def test_open_file_not_a_session_untouched(manager, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"type":"message"}\n')
    with pytest.raises(errors.InvalidSessionError):
        manager.open_file(str(path))
    assert path.read_bytes() == b'{"type":"message"}\n'


def test_open_file_persists_upgrade_then_appends(manager, tmp_path):
    path = tmp_path / "old.jsonl"
    path.write_bytes(
        b'{"type":"session","version":3,"id":"old-1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}\n'
        b'{"type":"message","id":"m1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}'
    )
    m = manager.open_file(str(path))
    lines = path.read_bytes().split(b"\n")
    assert json.loads(lines[0]) == {"type": "session", "version": 4, "id": "old-1",
                                    "createdAt": "2026-01-01T00:00:00.000Z", "cwd": "/w"}
    assert path.read_bytes().endswith(b"\n")
    m.append_message(assistant("yo"))
    parsed = read_session_file(str(path))
    assert next(e["id"] for e in parsed.entries) == "m1" and len(parsed.entries) == 2
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]


def test_import_export_roundtrip(manager, store, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(
        b'{"type":"session","version":4,"id":"imp-1","createdAt":"2026-01-01T00:00:00.000Z","cwd":"/w"}\n'
        b'{"type":"message","id":"m1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"\\ud83d hi","timestamp":1.0}}\n'
        b'{"zeta":1,"type":"custom_thing","id":"x1","parentId":"m1","timestamp":"2026-01-01T00:00:02.000Z"}\n'
    )
    m = manager.import_from_jsonl(str(src), None, store)
    assert m.get_session_id() == "imp-1" and m.get_header()["cwd"] == "/w"
    exported = store.load("imp-1").to_bytes()
    assert exported == src.read_bytes()
    with pytest.raises(errors.SessionExistsError):
        manager.import_from_jsonl(str(src), None, store)
    moved = manager.import_from_jsonl(str(src), str(tmp_path / "proj"), MemoryStore())
    assert moved.get_header()["cwd"] == str(tmp_path / "proj")


def test_fork_from_file_upgrades_v1(manager, tmp_path):
    src = tmp_path / "v1.jsonl"
    src.write_bytes(
        b'{"type":"session","id":"v1-sess","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}\n'
        b'{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"a","timestamp":1}}\n'
    )
    before = src.read_bytes()
    fork = manager.fork_from(str(src), str(tmp_path), store=MemoryStore())
    assert fork.get_header()["parentSessionId"] == "v1-sess"
    assert len(fork.get_entries()) == 1 and HEX8.match(fork.get_entries()[0]["id"])
    assert src.read_bytes() == before


def test_store_open_error_never_falls_back(manager, tmp_path):
    bad = tmp_path / "garbage.db"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(errors.StoreOpenError):
        manager.create(str(tmp_path), store=f"sqlite:///{bad}").append_message(user("x"))


def test_fork_from_inherits_a_valid_classification_only(manager, tmp_path):
    header = {"type": "session", "version": 4, "id": "wf-src", "createdAt": "2026-01-01T00:00:00.000Z",
              "cwd": "/w", "internal": True, "workflow": WORKFLOW}
    src = tmp_path / "wf.jsonl"
    src.write_text(json.dumps(header) + "\n")
    assert manager.fork_from(str(src), str(tmp_path), store=MemoryStore()).get_header()["workflow"] == WORKFLOW
    malformed = {**header, "id": "wf-bad", "workflow": {**WORKFLOW, "stageName": " "}}
    src.write_text(json.dumps(malformed) + "\n")
    forked = manager.fork_from(str(src), str(tmp_path), store=MemoryStore()).get_header()
    assert "internal" not in forked and "workflow" not in forked  # a malformed marker is never copied


def test_import_session_of_an_already_read_file(manager, store, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(b'{"type":"session","version":4,"id":"pre-read","createdAt":"2026-01-01T00:00:00.000Z","cwd":"/w"}\n')
    parsed = read_session_file(str(src))
    assert manager.import_session(parsed, None, store).get_session_id() == "pre-read"
    with pytest.raises(errors.SessionExistsError):
        manager.import_session(parsed, None, store)


def _session_file(path, session_id: str, text: str = "hi") -> str:
    path.write_bytes(
        b'{"type":"session","version":4,"id":"%s","createdAt":"2026-01-01T00:00:00.000Z","cwd":"/w"}\n' % session_id.encode()
        + b'{"type":"message","id":"m1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",'
          b'"message":{"role":"user","content":"%s","timestamp":1}}\n' % text.encode())
    return str(path)


def test_import_files_gives_each_file_its_own_outcome_in_a_failing_group(manager, store, tmp_path):
    manager.import_from_jsonl(_session_file(tmp_path / "old.jsonl", "old"), None, store)
    (tmp_path / "bad.jsonl").write_bytes(b'{"type":"session","version":4}\n')
    paths = [_session_file(tmp_path / "a.jsonl", "a"),
             str(tmp_path / "bad.jsonl"),                       # invalid: rejected when read
             _session_file(tmp_path / "old2.jsonl", "old"),     # id already stored: the group fails as a whole
             str(tmp_path / "missing.jsonl"),                   # unreadable
             _session_file(tmp_path / "b.jsonl", "b", "two"),
             _session_file(tmp_path / "b2.jsonl", "b", "other")]  # same id twice in one group
    outcomes = list(manager.import_files(paths, None, store, batch_sessions=10))
    assert [o.path for o in outcomes] == paths
    assert [o.session_id for o in outcomes] == ["a", None, "old", None, "b", "b"]
    assert [o.entries for o in outcomes] == [1, 0, 0, 0, 1, 0]
    assert outcomes[0].error is None and outcomes[4].error is None
    assert isinstance(outcomes[1].error, errors.InvalidSessionError)
    assert isinstance(outcomes[2].error, errors.SessionExistsError)
    assert isinstance(outcomes[3].error, FileNotFoundError)
    assert isinstance(outcomes[5].error, errors.SessionExistsError)
    # The group fell back to one write per session: the good files are stored, the first "b" kept.
    assert store.load("a").entries[0]["message"]["content"] == "hi"
    assert store.load("b").entries[0]["message"]["content"] == "two"


def test_import_files_groups_by_count_and_reports_only_committed_groups(manager, tmp_path):
    store = SqliteStore(str(tmp_path / "s.db"))
    paths = [_session_file(tmp_path / f"{i}.jsonl", f"s{i}") for i in range(5)]
    stored_when_yielded = []
    for outcome in manager.import_files(paths, str(tmp_path / "proj"), store, batch_sessions=2):
        # Yielded after its group committed: a second connection sees it.
        stored_when_yielded.append(outcome.session_id in SqliteStore(str(tmp_path / "s.db")).session_ids())
        assert outcome.error is None and outcome.entries == 1
    assert stored_when_yielded == [True] * 5
    assert store.load("s4").header["cwd"] == str(tmp_path / "proj")
    assert sorted(store.session_ids()) == [f"s{i}" for i in range(5)]


def test_every_test_of_the_suite_runs_through_both_drivers():
    """A guard on the suite: every test takes the ``manager`` fixture (so it runs through
    ``SessionManager`` and through ``AsyncSessionManager``), and the async driver really is
    asynchronous underneath."""
    tests = {name: value for name, value in globals().items() if name.startswith("test_") and callable(value)}
    tests.pop("test_every_test_of_the_suite_runs_through_both_drivers")
    assert all("manager" in inspect.signature(test).parameters for test in tests.values())
    assert len(tests) > 40
    with AsyncDriver() as driver:
        manager = driver.in_memory("/tmp")
        assert type(manager.inner).__name__ == "AsyncSessionManager"
        entry_id = manager.append_message({"role": "user", "content": "hi"})
        assert manager.get_leaf_id() == entry_id
