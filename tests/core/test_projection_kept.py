"""The projection a manager keeps between calls, under attack: messages and models the
caller annotates or edits, copies of the stored entries, boundaries, null content,
random operations, and a JSONL write that fails half way.

Each test checks that the kept projection equals one built from scratch and that what
the caller is handed never changes the next projection.
"""

from __future__ import annotations

import os
import random

import pytest

import sessiontree.stores.jsonl.writes as jsonl_module
from sessiontree import errors
from sessiontree.errors import StorageError
from sessiontree.session.manager import SessionManager
from support import FailingMemoryStore, fresh_projection, ids_in


def test_kept_projection_source_entries_stay_the_stored_entries_after_a_boundary():
    """Kept projection: ProjectionBuilder.copies holds id() of the P.1 copies of the whole
    path, but only those inside the context stay alive: the copies of null-content messages
    before a verbatim boundary (outside the kept tail) are freed when build() returns. Their
    ids are then reused by new entry dicts that advance() sees, which extend() takes for P.1
    copies: result() hands out a copy of the stored entry as source_entry and a copy of its
    stored message, where a fresh build (and the docs: "shared with the raw entries unless
    its content had to be normalized") gives the stored objects. Null content is common
    (assistant turns with only tool calls from OpenAI-style providers). The projections
    still compare equal; identity (and so in-place annotation semantics) differs."""
    for _ in range(5):
        m = SessionManager.in_memory("/w")
        for _ in range(20):
            m.append_message({"role": "assistant", "content": None, "stopReason": "stop"})
        kept = m.append_message({"role": "user", "content": "keep"})
        m.append_compaction("summary", kept, 10, {"strategy": "verbatim-lines"})
        m.build_session_projection()
        for i in range(60):
            m.append_message({"role": "user", "content": f"m{i}"})
            projection, scratch = m.build_session_projection(), fresh_projection(m)
            assert projection == scratch
            stored = {id(e) for e in m.get_entries()}
            for position, (mine, theirs) in enumerate(zip(projection.sources, scratch.sources, strict=False)):
                if id(theirs) in stored:
                    assert mine is theirs, f"step {i}: source {position} is a copy of the stored entry"
            assert projection.messages[-1] is m.get_entries()[-1]["message"]


def test_held_kept_projection_copies_for_null_content_tail_and_edits():
    """Null-content entries in the kept tail, edits of null-content entries, many system
    messages; every returned dict mutated at top level; the next kept projection still equals
    a fresh build, and source_entry['message'] is the projected message where a fresh build's is."""
    m = SessionManager.in_memory("/w")
    for k in range(6):
        m.append_message({"role": "system", "content": f"s{k}", "sections": {"x": str(k)}, "timestamp": k})
    first = m.append_message({"role": "user", "content": None})
    m.append_message({"role": "assistant", "content": None, "provider": "p", "model": "m"})
    target = m.append_message({"role": "user", "content": None})
    m.append_compaction("sum", first, 10, {"strategy": "verbatim-lines"})
    m.append_context_edit(target, {"content": "edited"})
    for k in range(3):
        m.append_message({"role": "user", "content": None})
        m.append_message({"role": "system", "content": f"t{k}", "timestamp": 9})
    null_id = m.append_message({"role": "toolResult", "content": None, "toolCallId": "zz", "toolName": "b"})
    m.append_context_edit(m.get_leaf_id(), None)
    m.append_message({"role": "user", "content": None})
    del null_id
    for _ in range(3):
        p = m.build_session_projection()
        assert p == fresh_projection(m)
        scratch = fresh_projection(m)
        for mine, theirs in zip(p.entries, scratch.entries, strict=False):
            message = theirs.source_entry.get("message")
            shared = any(message is x for x in theirs.messages)
            assert shared == any(mine.source_entry.get("message") is x for x in mine.messages)
        stored = {id(e.get(key)) for e in m.get_entries() for key in ("message", "systemMessage")}
        for message in p.messages:  # stored messages (and checkpoints) are the caller's data: leave them
            if id(message) not in stored:
                message["junk"] = 1
                message.pop("content", None)
        for source in p.sources:
            if isinstance(source.get("message"), dict) and not any(source is e for e in m.get_entries()):
                source["message"]["junk"] = 2
                source["junk"] = 3
        if p.model is not None:
            p.model.clear()
        if p.system_message is not None:
            p.system_message.clear()
        assert m.build_session_projection() == fresh_projection(m)
        assert not [x for x in m.build_session_projection().messages if "junk" in x]


def _custom_message(m):
    m.append_message({"role": "user", "content": "hi"})
    m.append_custom_message_entry("note", "original", True)
    return -1


def _branch_summary(m):
    m.append_message({"role": "user", "content": "hi"})
    m.branch_with_summary(m.get_leaf_id(), "went elsewhere")
    return -1


def _synthetic_result(m):
    m.append_message({"role": "user", "content": "go"})
    m.append_message({"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "bash",
                                                        "arguments": {}}], "stopReason": "toolUse", "timestamp": 1})
    m.append_message({"role": "user", "content": "next"})  # closes the window: synthetic result for c1
    return 2


def _boundary(m):
    kept = m.append_message({"role": "user", "content": "keep"})
    m.append_compaction("summary", kept, 10, {"strategy": "verbatim-lines"})
    return 0


def _null_content(m):
    m.append_message({"role": "user", "content": None})  # projected as a copy with content []
    return 0


def _edited(m):
    target = m.append_message({"role": "user", "content": "secret"})
    m.append_context_edit(target, {"content": "redacted"})  # projected as an edited copy
    return 0


@pytest.mark.parametrize("setup", [_custom_message, _branch_summary, _synthetic_result, _boundary,
                                   _null_content, _edited])
def test_annotating_a_returned_message_does_not_change_the_next_projection(setup):
    """Kept projection: Messages the projection itself
    makes (custom_message/branch_summary messages, synthetic tool results, the compaction
    boundary, P.1 and context-edit copies) are not stored entries' messages, yet the kept
    ProjectionBuilder hands the same dicts to every later call. A caller annotating the
    request in place (e.g. adding cache_control, as prompt-caching clients do) changes
    every later projection, which then differs from a fresh build."""
    m = SessionManager.in_memory("/w")
    index = setup(m)
    first = m.build_session_projection()
    message = first.messages[index]
    assert all(message is not e.get("message") for e in m.get_entries())  # not a stored message
    message["cache_control"] = {"type": "ephemeral"}
    assert "cache_control" not in fresh_projection(m).messages[index]  # no stored entry was touched
    again = m.build_session_projection()
    assert again == fresh_projection(m)


def test_editing_the_returned_model_does_not_change_the_next_projection():
    """Kept projection: ``model`` is a dict the projection builds; the kept builder
    returns the same dict every time, so a caller overriding ``context.model['modelId']``
    for one request changes every later projection."""
    m = SessionManager.in_memory("/w")
    m.append_model_change("openai", "gpt")
    context = m.build_session_context()
    context.model["modelId"] = "one-off override"
    assert m.build_session_projection().model == {"provider": "openai", "modelId": "gpt"}


def _random_message(rng: random.Random) -> dict:
    kind = rng.choice(["user", "null", "assistant", "bare_assistant", "result", "system", "bash", "custom",
                       "summary", "unknown"])
    calls = rng.sample(["c1", "c2", "c3"], rng.randint(0, 2))
    if kind == "user":
        return {"role": "user", "content": rng.choice(["a", " ", [{"type": "image", "data": "x"}], []])}
    if kind == "null":
        return {"role": rng.choice(["user", "assistant", "toolResult", "custom"]), "content": None}
    if kind in ("assistant", "bare_assistant"):
        msg = {"role": "assistant", "content": [{"type": "toolCall", "id": c, "name": "bash", "arguments": {}}
                                                for c in calls],
               "stopReason": rng.choice(["toolUse", "stop", "aborted"]), "timestamp": rng.randint(1, 9)}
        if kind == "assistant":
            msg.update(provider="p", model=rng.choice(["m1", "m2"]))
        return msg
    if kind == "result":
        return {"role": "toolResult", "toolCallId": rng.choice(["c1", "c2", "c3", "zz"]), "toolName": "bash",
                "content": [{"type": "text", "text": "o"}], "isError": False}
    if kind == "system":
        msg = {"role": "system", "content": rng.choice(["s", "", [{"type": "text", "text": "q"}]]),
               "timestamp": rng.choice([None, 5])}
        if rng.random() < 0.5:
            msg["sections"] = {rng.choice("ab"): rng.choice([None, "v"])}
        if rng.random() < 0.5:
            msg["toolsAdded"] = [{"name": rng.choice("xy")}]
        if rng.random() < 0.3:
            msg["toolsRemoved"] = [{"name": rng.choice("xy")}]
        return msg
    if kind == "bash":
        return {"role": "bashExecution", "command": "ls", "output": "o", "exitCode": 0, "cancelled": False,
                "truncated": False, "excludeFromContext": rng.random() < 0.5}
    if kind == "custom":
        return {"role": "custom", "customType": "k", "content": rng.choice(["x", " ", []]), "display": True}
    if kind == "summary":
        return {"role": "branchSummary", "summary": rng.choice(["s", ""]), "fromId": "root"}
    return {"role": "mystery", "content": "?"}


def _random_step(m: SessionManager, rng: random.Random) -> SessionManager:
    store = m.get_session_store()
    ids = [e["id"] for e in m.get_entries()]
    op = rng.choice(["msg"] * 8 + ["cm", "setting", "label", "info", "edit", "compaction", "branch", "reset",
                                   "bws", "fail", "reopen", "project", "project", "new", "branched", "fork",
                                   "mutate"])
    if op == "msg":
        m.append_message(_random_message(rng))
    elif op == "cm":
        m.append_custom_message_entry("n", rng.choice(["h", " ", [{"type": "text", "text": "z"}], None]),
                                      rng.random() < 0.5)
    elif op == "setting":
        rng.choice([lambda: m.append_thinking_level_change("high"), lambda: m.append_model_change("q", "r"),
                    lambda: m.append_context_window_change(rng.randint(1, 9) * 1000)])()
    elif op == "label" and ids:
        m.append_label_change(rng.choice(ids), rng.choice(["L", None]))
    elif op == "info":
        m.append_session_info(rng.choice(["n", ""]))
    elif op == "edit" and m.get_branch():
        target = rng.choice(m.get_branch())
        try:
            m.append_context_edit(target["id"], rng.choice([None, {"content": "ed"}]))
        except ValueError:
            pass
    elif op == "compaction":
        m.append_compaction("sum", rng.choice(ids) if ids and rng.random() < 0.7 else None, 10,
                            rng.choice([{"strategy": "verbatim-lines"}, {"strategy": "summary"}, None]))
    elif op == "branch" and ids:
        m.branch(rng.choice(ids))
    elif op == "reset":
        m.reset_leaf()
    elif op == "bws":
        m.branch_with_summary(rng.choice(ids) if ids and rng.random() < 0.8 else None, rng.choice(["w", ""]))
    elif op == "fail" and isinstance(store, FailingMemoryStore):
        store.fail = True
        with pytest.raises(errors.StorageError):
            m.append_message({"role": "user", "content": "lost"})
        store.fail = False
    elif op == "reopen" and m._saved:
        return SessionManager.open(store, m.get_session_id())
    elif op == "project":
        m.build_session_projection()
    elif op == "new" and rng.random() < 0.3:
        m.new_session()
    elif op == "branched" and ids and m._saved:
        m.create_branched_session(rng.choice(ids))
    elif op == "fork" and m._saved and rng.random() < 0.5:
        return m.fork_to("/w2")
    elif op == "mutate":  # mutate the returned lists (not the messages): must not leak
        p = m.build_session_projection()
        p.messages.append({"role": "user", "content": "junk"})
        p.messages.reverse()
        if isinstance(p.sources, list):
            p.sources.clear()
        p.entries.clear()
    return m


def test_kept_projection_matches_a_fresh_build_under_more_operations():
    """Beyond test_projection_incremental's property (null content, bare
    assistants, system sections/tools, retired and null-detail compactions, labels
    clearing, new_session, create_branched_session, fork_to, list mutation)."""
    for seed in range(150):
        rng = random.Random(seed)
        m = SessionManager.create("/w", store=FailingMemoryStore())
        for _ in range(rng.randint(5, 40)):
            m = _random_step(m, rng)
            kept, scratch = m.build_session_projection(), fresh_projection(m)
            assert kept == scratch, seed
            assert kept.entries == scratch.entries, seed


def test_kept_projection_with_a_jsonl_store_whose_fast_path_write_fails(tmp_path, monkeypatch):
    """A JSONL fast-path write that fails half way leaves file, tree and projection as before."""
    m = SessionManager.create("/w", str(tmp_path))
    m.append_message({"role": "user", "content": "a"})
    m.append_message({"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "bash",
                                                        "arguments": {}}], "stopReason": "toolUse"})
    before = m.build_session_projection()
    path = m.get_session_file()
    data = open(path, "rb").read()

    def half(fd, payload):
        os.write(fd, payload[: len(payload) // 2])
        raise OSError(28, "ENOSPC (injected)")

    monkeypatch.setattr(jsonl_module, "_write_all", half)
    with pytest.raises(StorageError):
        m.append_message({"role": "toolResult", "toolCallId": "c1", "toolName": "bash", "content": []})
    monkeypatch.undo()
    assert open(path, "rb").read() == data
    assert m.build_session_projection() == before == fresh_projection(m)
    m.append_message({"role": "toolResult", "toolCallId": "c1", "toolName": "bash", "content": []})
    assert m.build_session_projection() == fresh_projection(m)
    assert ids_in(path) == [e["id"] for e in m.get_entries()]
