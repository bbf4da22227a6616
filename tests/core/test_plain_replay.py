"""A rebuild of a plain branch from the steps kept with it (projection.steps.plain_step,
ProjectionBuilder._replay) gives exactly what the general build gives."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_projection import _IDS, TS, sessions

import sessiontree.core.projection.convert as convert_module
import sessiontree.core.projection.incremental as projection_module
import sessiontree.core.projection.steps as steps_module
from sessiontree import SessionManager
from sessiontree.core.projection import (
    LAST_ENTRY,
    ProjectionBuilder,
    build_session_projection,
)
from sessiontree.core.tree import get_branch

_HEADER = {"type": "session", "version": 3, "id": "0190a7b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b", "timestamp": TS,
           "cwd": "/work/a"}


def _general(entries, leaf, monkeypatch_ctx):
    with monkeypatch_ctx.context() as patch:
        patch.setattr(ProjectionBuilder, "build_plain", classmethod(lambda cls, *args: None))
        return ProjectionBuilder.build(entries, leaf, None)


def _copy(steps: projection_module.PlainSteps) -> projection_module.PlainSteps:
    return projection_module.PlainSteps(bytearray(steps.codes), list(steps.items), list(steps.extras))


def _fields(builder: ProjectionBuilder, repair: bool) -> tuple:
    p = builder.result(repair, copy=True)
    return (p.messages, p.thinking_level, p.model, p.context_window, p.system_message, list(p.sources),
            list(p.ends), builder.leaf_id, builder.edits, builder.copies, builder.owned, builder.owned_sources,
            builder.window.allowed, builder.window.answered, builder.window.pending)


_SETTINGS = settings(max_examples=400, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(sessions(), st.one_of(st.just(LAST_ENTRY), st.sampled_from([*_IDS, "nope"])), st.booleans())
def test_a_rebuild_from_the_kept_steps_equals_the_general_build(monkeypatch, entries, leaf, repair):
    plain = ProjectionBuilder.build_plain(entries, leaf, None)
    if plain is None:
        return
    assert plain.plain_ops == steps_module.plain_steps(plain.plain_branch)
    assert len(plain.plain_ops) == len(plain.plain_branch)
    general = _general(entries, leaf, monkeypatch)
    with monkeypatch.context() as patch:  # the entries are not read again: no step is derived
        patch.setattr(projection_module, "plain_step", None)
        again = ProjectionBuilder.build(entries, leaf, None, branch=list(plain.plain_branch),
                                        ops=_copy(plain.plain_ops))
    assert again.plain_branch is not None
    assert _fields(again, repair) == _fields(general, repair) == _fields(plain, repair)


@_SETTINGS
@given(sessions(), st.sampled_from(_IDS), st.integers(min_value=1, max_value=12), st.booleans())
def test_steps_grown_by_advance_rebuild_what_the_general_build_gives(monkeypatch, entries, leaf, cut, repair):
    by_id = {e["id"]: e for e in entries}
    if leaf not in by_id:
        return
    path = get_branch(by_id, leaf)
    cut = min(cut, len(path))
    builder = ProjectionBuilder.build_plain(entries, path[cut - 1]["id"], None)
    if builder is None:
        return
    for entry in path[cut:]:  # each a child of the leaf so far, as the manager appends
        if not builder.advance(entry):
            return  # a new boundary or an edit: the manager builds afresh
    general = _general(entries, path[-1]["id"], monkeypatch)
    assert _fields(builder, repair) == _fields(general, repair)
    if builder.plain_branch is None:
        assert builder.plain_ops is None
        return
    assert builder.plain_ops == steps_module.plain_steps(builder.plain_branch)
    again = ProjectionBuilder.build(entries, path[-1]["id"], None, branch=list(builder.plain_branch),
                                    ops=_copy(builder.plain_ops))
    assert _fields(again, repair) == _fields(general, repair)


def _call(*ids: str, to_use: bool = True, ts: int = 1) -> dict:
    return {"role": "assistant", "stopReason": "toolUse" if to_use else "stop", "timestamp": ts,
            "provider": "p", "model": "m1",
            "content": [{"type": "toolCall", "id": i, "name": "bash", "arguments": {}} for i in ids]}


def _result(call_id: str, ts: int = 2) -> dict:
    return {"role": "toolResult", "toolCallId": call_id, "toolName": "bash", "isError": False, "timestamp": ts,
            "content": [{"type": "text", "text": "ok"}]}


def _pairing_session() -> list[dict]:
    """Every kind of step: calls answered, unanswered (a synthetic result), duplicate and
    orphan results, transparent and closing user, custom and summary messages, a
    system message, a setting change."""
    bodies = [
        {"type": "message", "message": {"role": "user", "content": "start", "timestamp": 1}},
        {"type": "message", "message": _call("c1", "c2", "c1")},
        {"type": "message", "message": _result("c1")},
        {"type": "message", "message": _result("c1")},  # a duplicate: dropped
        {"type": "message", "message": {"role": "user", "content": " \u3000", "timestamp": 3}},  # transparent
        {"type": "custom_message", "customType": "note", "content": "", "display": True},  # transparent
        {"type": "message", "message": {"role": "system", "content": "be brief", "timestamp": 4}},
        {"type": "thinking_level_change", "thinkingLevel": "high"},
        {"type": "custom_message", "customType": "note", "content": "visible", "display": True},  # closes: c2
        {"type": "message", "message": _result("c2")},  # an orphan now: dropped
        {"type": "branch_summary", "summary": "elsewhere", "fromId": "x"},
        {"type": "message", "message": _call("c3", to_use=False, ts=7)},
        {"type": "message", "message": _result("c3")},
        {"type": "model_change", "provider": "q", "modelId": "m2"},
        {"type": "message", "message": _call("c4", ts=9)},  # still open at the leaf
    ]
    entries, parent = [], None
    for i, body in enumerate(bodies):
        entry = {"id": f"s{i:02d}", "parentId": parent, "timestamp": TS, **body}
        entries.append(entry)
        parent = entry["id"]
    return entries


@pytest.mark.parametrize("repair", [True, False])
def test_a_manager_rebuild_replays_the_kept_steps(monkeypatch, repair):
    entries = _pairing_session()
    manager = SessionManager.in_memory("/work/a", entries=[_HEADER, *entries])
    manager._repair_trailing = lambda: repair  # both D-11 modes of the trailing window
    first = manager.build_session_projection()
    kept = manager._branch
    assert kept is not None and kept[3] == len(entries) == len(kept[4])
    expected = build_session_projection(entries, repair_trailing=repair)
    assert first == expected
    # by hand: the duplicate and the orphan are dropped, c2 gets a synthetic result
    # before the visible custom message, the custom and summary messages are made afresh
    roles = [m["role"] for m in first.messages]
    assert roles == ["user", "assistant", "toolResult", "user", "custom", "system", "toolResult", "custom",
                     "branchSummary", "assistant", "toolResult", "assistant"] + (["toolResult"] if repair else [])
    assert first.messages[6]["toolCallId"] == "c2" and first.messages[6]["isError"] is True
    assert (first.thinking_level, first.model) == ("high", {"provider": "p", "modelId": "m1"})
    manager._projector = None
    with monkeypatch.context() as patch:  # the rebuild derives nothing from the entries
        patch.setattr(projection_module, "plain_step", None)
        again = manager.build_session_projection()
    assert again == expected
    assert again.messages[4] is not first.messages[4]  # a made message is a fresh dict per build
    # appended entries extend the kept steps; a rebuild still equals a fresh build
    manager.append_message(_result("c4"))
    manager.append_message({"role": "user", "content": "next", "timestamp": 11})
    manager._projector = None
    after = manager.build_session_projection()
    assert manager._branch[3] == len(entries) + 2 == len(manager._branch[4])
    assert after == build_session_projection(manager.get_entries(), repair_trailing=repair)


def test_a_message_needing_a_copy_forgets_the_kept_steps():
    entries = _pairing_session()[:3]
    manager = SessionManager.in_memory("/work/a", entries=[_HEADER, *entries])
    manager.build_session_projection()
    manager.append_message({"role": "user", "content": None, "timestamp": 5})  # needs a P.1 copy
    assert manager.build_session_projection() == build_session_projection(manager.get_entries())  # advanced
    builder = manager._projector[2]
    assert builder.plain_branch is None and builder.plain_ops is None
    manager._projector = None
    assert manager.build_session_projection() == build_session_projection(manager.get_entries())


@given(st.text(alphabet=st.sampled_from([*sorted(convert_module.JS_WHITESPACE), "a", "\x1c", "\x85", "."]),
               max_size=8))
def test_blank_is_every_character_javascript_whitespace(text):
    assert convert_module.is_js_blank(text) == all(ch in convert_module.JS_WHITESPACE for ch in text)
