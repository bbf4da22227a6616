"""The projection a SessionManager keeps and extends on append (ProjectionBuilder).

Whatever the manager does between calls, ``build_session_projection()`` must
equal a projection built from scratch for the same entries and leaf.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import assistant_calls as assistant
from builders import tool_result_text as result
from builders import user_blocks as user
from sessiontree import errors
from sessiontree.core.projection import (
    INTERRUPTED_TEXT,
    ProjectionBuilder,
)
from sessiontree.session.manager import SessionManager
from sessiontree.stores.memory import MemoryStore
from support import FailingMemoryStore, fresh_projection


def assert_same(manager: SessionManager) -> None:
    kept, scratch = manager.build_session_projection(), fresh_projection(manager)
    assert kept == scratch
    assert kept.entries == scratch.entries
    # A caller annotating what it got (top-level keys) must not change the next
    # projection: dicts the projection made are fresh on every call.
    for message in kept.messages:
        message["annotated"] = True
    if kept.model is not None:
        kept.model["annotated"] = True


def synthetic(call_id: str, ts: int) -> dict:
    return {"role": "toolResult", "toolCallId": call_id, "toolName": "bash",
            "content": [{"type": "text", "text": INTERRUPTED_TEXT}], "isError": True, "timestamp": ts}


# ---------------------------------------------------------------- worked examples


def test_extends_by_appended_turn_with_pairing_worked_by_hand():
    m = SessionManager.in_memory("/w")
    u1 = m.append_message(user("go"))
    assert [x["role"] for x in m.build_session_projection().messages] == ["user"]
    a1 = m.append_message(assistant(calls=("c1", "c2"), stop="toolUse", ts=20))
    r1 = m.append_message(result("c1"))
    # The turn was appended here: its second call may still be running, so no
    # synthetic result yet (D-11 trailing rule).
    p = m.build_session_projection()
    assert [x.get("toolCallId") for x in p.messages] == [None, None, "c1"]
    # The next user message closes the window: c2 gets its synthetic result
    # just before it, owned by the user entry.
    u2 = m.append_message(user("next"))
    p = m.build_session_projection()
    assert p.messages[3] == synthetic("c2", 20)
    assert [x["role"] for x in p.messages] == ["user", "assistant", "toolResult", "toolResult", "user"]
    assert [(e.source_entry["id"], len(e.messages)) for e in p.entries] == [
        (u1, 1), (a1, 1), (r1, 1), (u2, 2)]
    assert_same(m)


def test_reopened_session_gets_trailing_synthetic_results_on_the_last_entry():
    store = MemoryStore()
    m = SessionManager.create("/w", store=store)
    m.append_message(user("go"))
    m.append_message(assistant(calls=("c1",), stop="toolUse", ts=7))
    m.append_thinking_level_change("high")
    assert len(m.build_session_projection().messages) == 2
    reopened = SessionManager.open(store, m.get_session_id())
    p = reopened.build_session_projection()
    assert p.messages[-1] == synthetic("c1", 7)
    assert p.thinking_level == "high"
    assert [len(e.messages) for e in p.entries] == [1, 1, 1]  # the synthetic result: last entry
    # A result appended now answers the call: the synthetic one is gone.
    reopened.append_message(result("c1"))
    p = reopened.build_session_projection()
    assert [x.get("isError") for x in p.messages] == [None, None, False]
    assert_same(reopened)


def test_settings_follow_appends():
    m = SessionManager.in_memory("/w")
    m.append_message(user("hi"))
    assert m.build_session_projection().model is None
    m.append_model_change("openai", "gpt")
    m.append_context_window_change(64000)
    p = m.build_session_projection()
    assert (p.model, p.context_window, p.thinking_level) == ({"provider": "openai", "modelId": "gpt"}, 64000, "off")
    m.append_message(assistant("x"))
    m.append_thinking_level_change("low")
    p = m.build_session_projection()
    assert (p.model, p.thinking_level) == ({"provider": "p", "modelId": "m"}, "low")
    assert_same(m)


def test_returned_projection_is_not_shared_with_the_kept_state():
    m = SessionManager.in_memory("/w")
    m.append_message(user("a"))
    first = m.build_session_projection()
    first.messages.append({"role": "user", "content": "injected"})
    first.sources.append({"type": "label"})
    second = m.build_session_projection()
    assert [x["content"][0]["text"] for x in second.messages] == ["a"]
    assert len(second.entries) == 1
    m.append_message(user("b"))
    assert len(m.build_session_projection().messages) == 2
    assert len(first.messages) == 2  # the caller's list is theirs


def test_context_edit_and_compaction_rebuild():
    m = SessionManager.in_memory("/w")
    u1 = m.append_message(user("secret"))
    m.append_message(assistant("ok"))
    m.build_session_projection()
    m.append_context_edit(u1, {"content": "redacted"})
    p = m.build_session_projection()
    assert p.messages[0]["content"] == "redacted"
    assert_same(m)
    kept = m.append_message(user("keep me"))
    m.append_compaction("summary", kept, 100, {"strategy": "verbatim-lines"})
    p = m.build_session_projection()
    assert p.messages[0]["customType"] == "compaction"
    assert p.messages[0]["content"][0]["text"].endswith("summary\n\n[User]: keep me")
    assert_same(m)
    m.append_message(user("after"))
    assert m.build_session_projection().messages[-1]["content"][0]["text"] == "after"
    assert_same(m)


def test_branch_moves_and_entries_on_other_branches():
    m = SessionManager.in_memory("/w")
    u1 = m.append_message(user("1"))
    a1 = m.append_message(assistant("2"))
    m.build_session_projection()
    m.branch(u1)
    m.append_message(assistant("other branch"))
    assert_same(m)
    m.branch(a1)  # back to the first leaf; the other branch grew meanwhile
    assert [x.get("content") for x in m.build_session_projection().messages][1][0]["text"] == "2"
    assert_same(m)
    m.reset_leaf()
    assert m.build_session_projection().messages == []
    m.append_message(user("new root"))
    assert_same(m)
    m.branch_with_summary(u1, "went elsewhere")
    assert m.build_session_projection().messages[-1]["role"] == "branchSummary"
    assert_same(m)


def test_rolled_back_append_leaves_no_trace_in_the_projection():
    store = FailingMemoryStore()
    m = SessionManager.create("/w", store=store)
    m.append_message(user("a"))
    before = m.build_session_projection()
    store.fail = True
    with pytest.raises(errors.StorageError):
        m.append_message(user("lost"))
    assert m.build_session_projection() == before
    store.fail = False
    m.append_message(user("b"))
    assert [x["content"][0]["text"] for x in m.build_session_projection().messages] == ["a", "b"]
    assert_same(m)


def test_builder_advance_refuses_what_it_cannot_apply():
    entries = [{"type": "message", "id": "a", "parentId": None, "timestamp": "t", "message": user("x")}]
    builder = ProjectionBuilder.build(entries, "a", None)
    assert builder.leaf_id == "a"
    not_child = {"type": "message", "id": "b", "parentId": None, "timestamp": "t", "message": user("y")}
    edit = {"type": "context_edit", "id": "c", "parentId": "a", "timestamp": "t", "targetId": "a",
            "replacement": None}
    boundary = {"type": "compaction", "id": "d", "parentId": "a", "timestamp": "t", "summary": "s",
                "firstKeptEntryId": None, "tokensBefore": 1, "details": {"strategy": "verbatim-lines"}}
    for entry in (not_child, edit, boundary):
        assert builder.advance(entry) is False
    assert builder.leaf_id == "a"
    assert len(builder.result(True).messages) == 1
    retired = dict(boundary, details={"strategy": "summary"})
    assert builder.advance(retired) is True  # inert: contributes nothing
    assert builder.result(True).ends == [1, 1]


# ---------------------------------------------------------------- property


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("user"), st.text(alphabet=" ab", max_size=3)),
        st.tuples(st.just("assistant"), st.sampled_from(["toolUse", "stop", "aborted"]),
                  st.lists(st.sampled_from(["c1", "c2", "c3"]), max_size=2, unique=True)),
        st.tuples(st.just("result"), st.sampled_from(["c1", "c2", "c3", "zz"])),
        st.tuples(st.just("system"), st.text(alphabet="xy", max_size=2)),
        st.tuples(st.just("bash"), st.booleans()),
        st.tuples(st.just("custom_message"), st.booleans()),
        st.tuples(st.just("setting"), st.sampled_from(["thinking", "model", "window"])),
        st.tuples(st.just("label"), st.integers(0, 30)),
        st.tuples(st.just("edit"), st.integers(0, 30), st.booleans()),
        st.tuples(st.just("compaction"), st.integers(-1, 30)),
        st.tuples(st.just("branch"), st.integers(0, 30)),
        st.tuples(st.just("reset"),),
        st.tuples(st.just("summary"), st.integers(-1, 30)),
        st.tuples(st.just("fail"),),
        st.tuples(st.just("reopen"),),
        st.tuples(st.just("project"),),
    ),
    max_size=40,
)


def _apply(m: SessionManager, store: FailingMemoryStore, op: tuple) -> SessionManager:
    ids = [e["id"] for e in m.get_entries()]
    pick = (lambda i: ids[i % len(ids)]) if ids else (lambda i: None)
    kind = op[0]
    if kind == "user":
        m.append_message(user(op[1]))
    elif kind == "assistant":
        m.append_message(assistant("t", stop=op[1], calls=tuple(op[2])))
    elif kind == "result":
        m.append_message(result(op[1]))
    elif kind == "system":
        m.append_message({"role": "system", "content": op[1], "timestamp": 5})
    elif kind == "bash":
        m.append_message({"role": "bashExecution", "command": "ls", "output": "x", "exitCode": 0,
                          "cancelled": False, "truncated": False, "excludeFromContext": op[1], "timestamp": 6})
    elif kind == "custom_message":
        m.append_custom_message_entry("note", "hello" if op[1] else " ", True)
    elif kind == "setting":
        {"thinking": lambda: m.append_thinking_level_change("high"),
         "model": lambda: m.append_model_change("q", "r"),
         "window": lambda: m.append_context_window_change(1000)}[op[1]]()
    elif kind == "label" and ids:
        m.append_label_change(pick(op[1]), "L")
    elif kind == "edit" and m.get_branch():
        branch = m.get_branch()
        target = branch[op[1] % len(branch)]  # edits target the active branch only
        editable = target["type"] == "custom_message" or (
            target["type"] == "message" and target["message"]["role"] in ("user", "assistant", "toolResult"))
        if editable:
            m.append_context_edit(target["id"], None if op[2] else {"content": "edited"})
    elif kind == "compaction":
        m.append_compaction("sum", pick(op[1]) if op[1] >= 0 else None, 10, {"strategy": "verbatim-lines"})
    elif kind == "branch" and ids:
        m.branch(pick(op[1]))
    elif kind == "reset":
        m.reset_leaf()
    elif kind == "summary":
        m.branch_with_summary(pick(op[1]) if op[1] >= 0 else None, "went back")
    elif kind == "fail":
        store.fail = True
        with pytest.raises(errors.StorageError):
            m.append_message(user("never stored"))
        store.fail = False
    elif kind == "reopen" and m.is_persisted():
        return SessionManager.open(store, m.get_session_id())
    elif kind == "project":
        m.build_session_projection()
    return m


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_kept_projection_always_equals_a_fresh_build(ops):
    store = FailingMemoryStore()
    m = SessionManager.create("/w", store=store)
    for op in ops:
        m = _apply(m, store, op)
        assert_same(m)
