"""Context projection (``seed:context-building``; docs/rules/projection.md P, Q, R, S, §3.6-§3.8;
docs/rules/transcript.md §2.5; docs/rules/decisions.md D-11).

Expected values are worked out by hand from the documents; the fixed
sentences are the module constants substituted for the rules' placeholders.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import assistant as asst
from builders import chain, user
from builders import entry as ent
from builders import message_entry as msg
from builders import text_block as text
from builders import tool_call as call
from builders import tool_result as tres
from sessiontree.core.projection import (
    INTERRUPTED_TEXT,
    LAST_ENTRY,
    SessionContext,
    build_context_entries,
    build_session_context,
    build_session_projection,
    convert_to_llm,
    entry_to_context_messages,
    get_current_system_message,
    repair_orphan_tool_results,
)
from sessiontree.core.transcript import (
    BOUNDARY_PREFIX,
    BRANCH_SUMMARY_PREFIX,
    BRANCH_SUMMARY_SUFFIX,
    serialize_compacted,
)

TS = "2026-02-01T09:00:00.000Z"
TS_MS = 1769936400000  # 2026-02-01T09:00:00Z: 20485 days * 86400 s + 9 h
DETAILS = {
    "strategy": "verbatim-lines",
    "promptVersion": 3,
    "rung": "planned",
    "parameters": {"compression_ratio": 0.5, "preserve_recent": 4, "query": "retries"},
    "stats": {"linesBefore": 10, "linesDeleted": 5, "linesKept": 5},
}
IMG_PNG = {"type": "image", "data": "QQ==", "mimeType": "image/png"}
IMG_JPG = {"type": "image", "data": "Qg==", "mimeType": "image/jpeg"}


# ------------------------------------------------------------------ builders


def synthetic(call_id: str, name: str, ts: int) -> dict:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [text(INTERRUPTED_TEXT)],
        "isError": True,
        "timestamp": ts,
    }


def system(content: Any, ts: int = 0, **fields: Any) -> dict:
    return {"role": "system", "content": content, "timestamp": ts, **fields}


def compaction(id_: str, summary: str, first_kept: Any = "ABSENT", **fields: Any) -> dict:
    entry = ent("compaction", id_, summary=summary, tokensBefore=1000, details=copy.deepcopy(DETAILS), **fields)
    if first_kept != "ABSENT":
        # Keep the file's key order: firstKeptEntryId right after summary.
        entry = {**{k: entry[k] for k in ("type", "id", "parentId", "timestamp", "summary")},
                 "firstKeptEntryId": first_kept,
                 **{k: v for k, v in entry.items() if k not in ("type", "id", "parentId", "timestamp", "summary")}}
    return entry


def edit(id_: str, target: str, replacement: Any) -> dict:
    return ent("context_edit", id_, targetId=target, replacement=replacement)


def boundary(content: list, ts: int = TS_MS, details: dict = DETAILS) -> dict:
    return {
        "role": "custom",
        "customType": "compaction",
        "content": content,
        "display": True,
        "details": details,
        "timestamp": ts,
    }


def ids(entries: list[dict]) -> list[str]:
    return [e["id"] for e in entries]


def proj_ids(projection) -> list[str]:
    return [p.source_entry["id"] for p in projection.entries]


def messages_of(projection, entry_id: str) -> list[dict]:
    for projected in projection.entries:
        if projected.source_entry["id"] == entry_id:
            return projected.messages
    raise KeyError(entry_id)


# ======================================================= docs/rules/transcript.md §2.5 examples


def example_1() -> list[dict]:
    return chain(
        msg("e0", user("earlier")),
        msg("u1", user("Please add retries")),
        msg(
            "a1",
            asst(
                [
                    {"type": "thinking", "thinking": "Need the client file"},
                    text("Looking now."),
                    call("call_7", "read", {"path": "net/client.py", "offset": 10}),
                ],
                "toolUse",
            ),
        ),
        msg("t1", tres("call_7", [text("def get():\n    pass\n")], name="read")),
        msg("a2", asst([text("Added."), text("Done.")], "stop")),
        {
            **compaction("c1", "[User]: earlier\n(filtered 3 lines)", "u1"),
            "timestamp": "2026-02-01T09:05:00.000Z",
        },
        msg("u2", {"role": "user", "content": "thanks", "timestamp": 1700000000900}),
    )


def test_example_1_summary_plus_tail():
    entries = example_1()
    ctx = build_session_context(entries)
    t1 = (
        BOUNDARY_PREFIX
        + "[User]: earlier\n(filtered 3 lines)\n\n[User]: Please add retries\n\n"
        "[Assistant thinking]: Need the client file\n\n[Assistant]: Looking now.\n\n"
        '[Assistant tool calls]: read(path="net/client.py", offset=10)\n\n'
        "[Tool result]: def get():\n    pass\n\n[Assistant]: Added.\nDone."
    )
    assert ctx.messages == [
        boundary([text(t1)], ts=1769936700000),
        {"role": "user", "content": "thanks", "timestamp": 1700000000900},
    ]
    assert ctx.messages[1] is entries[-1]["message"]
    assert ctx.thinking_level == "off"
    assert ctx.model == {"provider": "anthropic", "modelId": "m1"}


def test_example_1_projection_entries():
    entries = example_1()
    projection = build_session_projection(entries)
    assert proj_ids(projection) == ["c1", "u1", "a1", "t1", "a2", "u2"]
    assert [len(p.messages) for p in projection.entries] == [1, 0, 0, 0, 0, 1]
    assert projection.messages == [m for p in projection.entries for m in p.messages]


def example_2() -> list[dict]:
    return chain(
        msg("x0", user("gone")),
        msg(
            "x1",
            user([text("Compare "), text("these"), {"type": "image", "data": "iVBORw0=", "mimeType": "image/png"}, text("and this\n")]),
        ),
        msg(
            "x2",
            {
                "role": "bashExecution",
                "command": "make test",
                "output": "1 failed",
                "exitCode": 1,
                "cancelled": False,
                "truncated": True,
                "fullOutputPath": "/tmp/out.log",
                "timestamp": 3,
            },
        ),
        msg(
            "x3",
            {
                "role": "bashExecution",
                "command": "secret",
                "output": "hunter2",
                "exitCode": 0,
                "cancelled": False,
                "truncated": False,
                "excludeFromContext": True,
                "timestamp": 4,
            },
        ),
        ent("custom_message", "x4", customType="lint", content=[text("   "), text("2 warnings")], display=False),
        ent("branch_summary", "x5", fromId="zz", summary="Tried pinning deps"),
        {**compaction("c2", "", "x1"), "timestamp": "2026-02-01T09:06:00.000Z"},
    )


def test_example_2_retained_images_bash_custom_branch_summary():
    ctx = build_session_context(example_2())
    assert ctx.messages == [
        boundary(
            [
                text(BOUNDARY_PREFIX + "[User]: Compare these\n"),
                {"type": "image", "data": "iVBORw0=", "mimeType": "image/png"},
                text(
                    "and this\n\n[User]: Ran `make test`\n```\n1 failed\n```\n\nCommand exited with code 1"
                    "\n\n[Output truncated. Full output: /tmp/out.log]\n\n[User]: 2 warnings\n\n[User]: "
                    + BRANCH_SUMMARY_PREFIX
                    + "Tried pinning deps"
                    + BRANCH_SUMMARY_SUFFIX
                ),
            ],
            ts=1769936760000,
        )
    ]


def test_example_2_compacted_contrast():
    entries = example_2()
    agent_messages = [m for e in entries[1:6] for m in entry_to_context_messages(e)]
    assert serialize_compacted(convert_to_llm(agent_messages)) == (
        "[User]: Compare these\n[image]\nand this\n\n[User]: Ran `make test`\n```\n1 failed\n```"
        "\n\nCommand exited with code 1\n\n[Output truncated. Full output: /tmp/out.log]"
        "\n\n[User]: 2 warnings\n\n[User]: "
        + BRANCH_SUMMARY_PREFIX
        + "Tried pinning deps"
        + BRANCH_SUMMARY_SUFFIX
    )


def example_3() -> list[dict]:
    return chain(
        msg("n0", user("run it")),
        msg("n1", asst([call("c_a", "bash", {"command": "ls"})], "toolUse", ts=10)),
        msg("n2", tres("c_a", [text("README")])),
        msg(
            "n3",
            asst(
                [
                    call(
                        "c_b",
                        "edit",
                        {"path": "día.txt", "edits": [{"old": "a", "new": "b\n"}], "dry": False, "n": 2.5, "none": None},
                    )
                ],
                "toolUse",
                ts=12,
            ),
        ),
        msg("n4", user(" \n ")),
        msg("n5", user("continue")),
        msg("n6", asst([text(""), call("c_c", "screenshot", {})], "toolUse")),
        msg("n7", tres("c_c", [IMG_PNG, IMG_JPG], name="screenshot")),
        msg("n8", tres("c_c", [text("duplicate")], name="screenshot")),
        {**compaction("c3", "[User]: run it", "n2"), "timestamp": "2026-02-01T09:07:00.000Z"},
    )


def test_example_3_pairing_inside_tail_and_json_arguments():
    ctx = build_session_context(example_3())
    expected_text = (
        BOUNDARY_PREFIX
        + "[User]: run it\n\n"
        '[Assistant tool calls]: edit(path="día.txt", edits=[{"old":"a","new":"b\\n"}], dry=false, n=2.5, none=null)'
        "\n\n[Tool result]: " + INTERRUPTED_TEXT + "\n\n[User]: continue\n\n"
        "[Assistant tool calls]: screenshot()\n\n[Tool result]: "
    )
    assert ctx.messages == [
        boundary([text(expected_text), IMG_PNG, text("\n"), IMG_JPG], ts=1769936820000)
    ]
    converted = convert_to_llm(ctx.messages)
    assert converted == [{"role": "user", "content": [text(expected_text), IMG_PNG, IMG_JPG], "timestamp": 1769936820000}]


def test_example_3_tail_conversion_inserts_synthetic_before_closing_user():
    entries = example_3()
    tail = [e["message"] for e in entries[2:9]]  # n2 .. n8
    assert convert_to_llm(tail) == [
        entries[3]["message"],
        synthetic("c_b", "edit", 12),
        entries[5]["message"],
        entries[6]["message"],
        entries[7]["message"],
    ]


def test_example_3_build_context_entries():
    assert ids(build_context_entries(example_3())) == ["c3", "n2", "n3", "n4", "n5", "n6", "n7", "n8"]


# ========================================================== Q.6 / Q.16 mapping


def test_message_entry_maps_to_its_message():
    entry = msg("m", user("hi"))
    out = entry_to_context_messages(entry)
    assert out == [user("hi")]
    assert out[0] is entry["message"]


def test_custom_message_entry_mapping():
    entry = ent(
        "custom_message",
        "cm",
        customType="ext",
        content="hi",
        display=True,
        details={"a": 1},
        timestamp="2026-02-01T09:05:00.000Z",
    )
    assert entry_to_context_messages(entry) == [
        {"role": "custom", "customType": "ext", "content": "hi", "display": True, "details": {"a": 1}, "timestamp": 1769936700000}
    ]


def test_custom_message_flags_and_null_content():
    entry = ent("custom_message", "cm", customType="ext", content=None, display=False, stageAdmissionKey="k", excludeFromContext=True)
    assert entry_to_context_messages(entry) == [
        {
            "role": "custom",
            "customType": "ext",
            "content": [],
            "display": False,
            "stageAdmissionKey": "k",
            "timestamp": TS_MS,
            "excludeFromContext": True,
        }
    ]
    entry = ent("custom_message", "cm", customType="ext", content="x", display=True, excludeFromContext=False)
    assert "excludeFromContext" not in entry_to_context_messages(entry)[0]


def test_branch_summary_mapping():
    assert entry_to_context_messages(ent("branch_summary", "b", fromId="f", summary="went left")) == [
        {"role": "branchSummary", "summary": "went left", "fromId": "f", "timestamp": TS_MS}
    ]
    assert entry_to_context_messages(ent("branch_summary", "b", fromId="f", summary="")) == []
    # G.4: a whitespace-only summary does contribute.
    assert len(entry_to_context_messages(ent("branch_summary", "b", fromId="f", summary="  "))) == 1


@pytest.mark.parametrize(
    "entry",
    [
        ent("label", "l", targetId="x", label="cp"),
        ent("custom", "c", customType="ext", data={"n": 1}),
        ent("model_change", "mc", provider="openai", modelId="gpt"),
        ent("thinking_level_change", "t", thinkingLevel="high"),
        ent("context_window_change", "w", contextWindow=1000),
        ent("session_info", "s", name="n"),
        ent("session_summary", "ss", summary="x", summarizedThroughId="a"),
        ent("context_edit", "ce", targetId="x", replacement=None),
        ent("context_compaction", "cc", promptVersion=1, deletedTargets=[], protectedEntryIds=[]),
        ent("compaction", "old", summary="sum", firstKeptEntryId=None, tokensBefore=1),
        ent("compaction", "old2", summary="sum", firstKeptEntryId=None, tokensBefore=1, details={"strategy": "summary"}),
        ent("leaf", "lf", targetId="x"),
    ],
)
def test_entries_without_context_messages(entry):
    assert entry_to_context_messages(entry) == []


def test_active_compaction_entry_maps_to_boundary_without_tail():
    entry = compaction("c", "SUM", "x")
    assert entry_to_context_messages(entry) == [boundary([text(BOUNDARY_PREFIX + "SUM")])]
    checkpoint = system("rules", ts=5)
    entry = compaction("c", "SUM", None, systemMessage=checkpoint)
    assert entry_to_context_messages(entry) == [checkpoint, boundary([text(BOUNDARY_PREFIX + "SUM")])]


# ================================================================ P.1 null content


def test_null_content_normalized_in_copies():
    entries = chain(msg("u", {"role": "user", "content": None, "timestamp": 1}), msg("a", {**asst([]), "content": None}))
    del entries[1]["message"]["content"]  # missing counts as null too
    snapshot = copy.deepcopy(entries)
    projection = build_session_projection(entries)
    assert projection.messages[0] == {"role": "user", "content": [], "timestamp": 1}
    assert projection.messages[1]["content"] == []
    assert entries == snapshot
    assert projection.entries[0].source_entry is not entries[0]
    assert projection.entries[0].source_entry["message"]["content"] == []


def test_null_content_of_other_roles_untouched():
    entry = msg("b", {"role": "bashExecution", "command": "x", "content": None})
    assert entry_to_context_messages(entry)[0] is entry["message"]


# ========================================================== P.2 / P.3 conversion


def test_convert_assistant_redacted_thinking_in_copy_only():
    message = asst([{"type": "redacted_thinking", "data": "sig"}, text("hi")])
    snapshot = copy.deepcopy(message)
    out = convert_to_llm([message])
    assert out == [{**snapshot, "content": [{"type": "thinking", "thinking": "", "thinkingSignature": "sig", "redacted": True}, text("hi")]}]
    assert message == snapshot


def test_convert_keeps_assistant_and_tool_result_objects():
    a = asst([call("c1")], "toolUse")
    r = tres("c1")
    out = convert_to_llm([a, r])
    assert out[0] is a and out[1] is r


def test_convert_null_content_assistant_and_tool_result():
    a = {**asst([]), "content": None}
    r = {**tres("zz"), "content": None}
    out = convert_to_llm([a, {**r, "toolCallId": "zz"}])
    assert out[0]["content"] == []
    assert a["content"] is None


def test_convert_bash_execution():
    bash = {"role": "bashExecution", "command": "ls", "output": "a", "exitCode": 0, "cancelled": False, "truncated": False, "timestamp": 9}
    assert convert_to_llm([bash]) == [{"role": "user", "content": [text("Ran `ls`\n```\na\n```")], "timestamp": 9}]
    assert convert_to_llm([{**bash, "excludeFromContext": True}]) == []


def test_convert_custom():
    custom = {"role": "custom", "customType": "x", "content": "note", "display": False, "timestamp": 7}
    assert convert_to_llm([custom]) == [{"role": "user", "content": [text("note")], "timestamp": 7}]
    assert convert_to_llm([{**custom, "excludeFromContext": True}]) == []
    assert convert_to_llm([{**custom, "content": " \t"}]) == []
    assert convert_to_llm([{**custom, "content": [text(" "), IMG_PNG, text("x")]}]) == [
        {"role": "user", "content": [IMG_PNG, text("x")], "timestamp": 7}
    ]


def test_convert_branch_summary():
    bs = {"role": "branchSummary", "summary": "S", "fromId": "f", "timestamp": 4}
    assert convert_to_llm([bs]) == [{"role": "user", "content": [text(BRANCH_SUMMARY_PREFIX + "S" + BRANCH_SUMMARY_SUFFIX)], "timestamp": 4}]
    assert convert_to_llm([{**bs, "summary": ""}]) == []


@pytest.mark.parametrize(
    "content",
    ["", "  \n\t", "\ufeff\u00a0\u3000", [], [text("  ")], [{"type": ""}], [{"text": "no type"}], [{"type": "text", "text": 5}]],
)
def test_convert_invisible_user_dropped(content):
    assert convert_to_llm([user(content)]) == []


def test_convert_visible_user():
    string_user = user(" hi ")
    assert convert_to_llm([string_user])[0] is string_user
    # U+001C is whitespace to Python's strip but not to JavaScript's trim.
    assert len(convert_to_llm([user("\x1c")])) == 1
    future = {"type": "future_kind", "x": 1}
    assert convert_to_llm([user([text(" "), future, IMG_PNG, text("a")])]) == [user([future, IMG_PNG, text("a")])]


def test_convert_system_passes_through_and_drops_unknown():
    s = system("rules")
    out = convert_to_llm([s, {"role": "compactionSummary", "summary": "x"}, {"role": "weird"}])
    assert out == [s] and out[0] is s


def test_convert_trailing_repair_only_on_request():
    a = asst([call("c1")], "toolUse", ts=4)
    assert convert_to_llm([a]) == [a]
    assert convert_to_llm([a], repair_trailing=True) == [a, synthetic("c1", "bash", 4)]


# ========================================================= pairing (P.4-P.8, D-11)


def test_interrupted_text_wording():
    lowered = INTERRUPTED_TEXT.lower()
    assert "interrupted" in lowered
    assert "unavailable" in lowered
    for claim in ("no side effect", "no side-effect", "did not run", "was not run", "no effect", "nothing happened"):
        assert claim not in lowered


def test_repair_returns_same_list_when_nothing_changes():
    messages = [user("hi"), asst([call("c1")], "toolUse"), tres("c1"), asst([text("done")])]
    assert repair_orphan_tool_results(messages, True) is messages


def test_repair_synthetic_before_closing_message():
    a = asst([call("c1", "read"), call("c2", "bash"), call("c3", "grep")], "toolUse", ts=50)
    r2 = tres("c2")
    u = user("next")
    messages = [a, r2, u]
    snapshot = copy.deepcopy(messages)
    out = repair_orphan_tool_results(messages, False)
    assert out == [a, r2, synthetic("c1", "read", 50), synthetic("c3", "grep", 50), u]
    assert messages == snapshot


def test_repair_next_assistant_closes_window():
    a1 = asst([call("c1")], "toolUse", ts=7)
    a2 = asst([text("hm")])
    assert repair_orphan_tool_results([a1, a2], False) == [a1, synthetic("c1", "bash", 7), a2]


@pytest.mark.parametrize("stop", ["aborted", "error", "length", "pending", "stop"])
def test_repair_no_synthetic_for_non_tool_use_turns(stop):
    messages = [asst([call("c1")], stop), user("again")]
    assert repair_orphan_tool_results(messages, True) is messages
    trailing = [asst([call("c1")], stop)]
    assert repair_orphan_tool_results(trailing, True) is trailing


def test_repair_accepts_results_of_aborted_turn():
    messages = [asst([call("c1")], "aborted"), tres("c1")]
    assert repair_orphan_tool_results(messages, True) is messages


def test_repair_trailing_on_and_off():
    a = asst([call("c1", "read")], "toolUse", ts=3)
    messages = [user("go"), a]
    assert repair_orphan_tool_results(messages, False) is messages
    assert repair_orphan_tool_results(messages, True) == [user("go"), a, synthetic("c1", "read", 3)]


def test_repair_drops_orphans_and_duplicates():
    a = asst([call("c1")], "toolUse")
    before = tres("c0")
    unknown = tres("zz")
    first = tres("c1")
    dup = tres("c1", [text("again")])
    u = user("x")
    late = tres("c1", [text("late")])
    assert repair_orphan_tool_results([before, a, unknown, first, dup, u, late], True) == [a, first, u]


def test_repair_reused_id_accepted_once_per_turn():
    a1 = asst([call("c1")], "toolUse")
    a2 = asst([call("c1")], "toolUse")
    r1, r2, r3 = tres("c1", [text("1")]), tres("c1", [text("2")]), tres("c1", [text("3")])
    assert repair_orphan_tool_results([a1, r1, a2, r2, r3], True) == [a1, r1, a2, r2]


def test_repair_call_without_string_name_is_not_allowed():
    a = asst([{"type": "toolCall", "id": "c1", "arguments": {}}], "toolUse")
    assert repair_orphan_tool_results([a, tres("c1"), user("x")], True) == [a, user("x")]


def test_repair_system_is_transparent():
    a = asst([call("c1")], "toolUse", ts=8)
    s = system("new rule")
    r = tres("c1")
    kept = [a, s, r]
    assert repair_orphan_tool_results(kept, True) is kept
    u = user("x")
    # The system message does not close the window, the user message does.
    assert repair_orphan_tool_results([a, s, u], False) == [a, s, synthetic("c1", "bash", 8), u]
    # At the end, a system message does not hide a trailing call.
    assert repair_orphan_tool_results([a, s], True) == [a, s, synthetic("c1", "bash", 8)]


def test_repair_messages_conversion_drops_are_transparent():
    # A `!!` command (excluded from context) recorded while a tool ran must
    # not orphan the tool's result: conversion drops it, so pairing ignores it.
    a = asst([call("c1")], "toolUse")
    hidden = {"role": "bashExecution", "command": "ls", "output": "", "exitCode": 0, "cancelled": False, "truncated": False, "excludeFromContext": True, "timestamp": 5}
    r = tres("c1")
    kept = [a, hidden, r]
    assert repair_orphan_tool_results(kept, True) is kept


# ---- D-11 in the projection


def test_projection_synthetic_owned_by_closing_entry():
    entries = chain(msg("u1", user("go")), msg("a1", asst([call("c1", "read")], "toolUse", ts=20)), msg("u2", user("hello?")))
    projection = build_session_projection(entries, repair_trailing=False)
    assert messages_of(projection, "a1") == [entries[1]["message"]]
    assert messages_of(projection, "u2") == [synthetic("c1", "read", 20), entries[2]["message"]]
    assert projection.messages == [entries[0]["message"], entries[1]["message"], synthetic("c1", "read", 20), entries[2]["message"]]


def test_projection_trailing_repair_flag():
    entries = chain(msg("u1", user("go")), msg("a1", asst([call("c1")], "toolUse", ts=20)))
    assert build_session_projection(entries, repair_trailing=False).messages == [entries[0]["message"], entries[1]["message"]]
    repaired = build_session_projection(entries)
    assert repaired.messages == [entries[0]["message"], entries[1]["message"], synthetic("c1", "bash", 20)]
    assert messages_of(repaired, "a1") == [entries[1]["message"], synthetic("c1", "bash", 20)]
    assert build_session_context(entries).messages == repaired.messages


def test_projection_trailing_synthetic_owned_by_last_entry():
    entries = chain(msg("a1", asst([call("c1")], "toolUse", ts=20)), ent("label", "l1", targetId="a1", label="x"))
    projection = build_session_projection(entries)
    assert messages_of(projection, "a1") == [entries[0]["message"]]
    assert messages_of(projection, "l1") == [synthetic("c1", "bash", 20)]


@pytest.mark.parametrize("stop", ["aborted", "error", "length", "pending"])
def test_projection_no_synthetic_for_non_tool_use(stop):
    entries = chain(msg("a1", asst([call("c1")], stop)), msg("u1", user("x")))
    assert build_session_projection(entries).messages == [entries[0]["message"], entries[1]["message"]]


def test_projection_drops_orphan_and_duplicate_results():
    entries = chain(
        msg("r0", tres("c9")),
        msg("a1", asst([call("c1")], "toolUse")),
        msg("r1", tres("c1")),
        msg("r2", tres("c1", [text("dup")])),
    )
    projection = build_session_projection(entries)
    assert [len(p.messages) for p in projection.entries] == [0, 1, 1, 0]
    assert projection.messages == [entries[1]["message"], entries[2]["message"]]


def test_projection_system_transparent_to_pairing():
    entries = chain(msg("a1", asst([call("c1")], "toolUse")), msg("s1", system("x")), msg("r1", tres("c1")))
    assert build_session_projection(entries).messages == [e["message"] for e in entries]


def test_projection_result_after_boundary_for_tail_call_is_orphan():
    entries = chain(
        msg("a1", asst([call("c1")], "toolUse")),
        compaction("c", "S", "a1"),
        msg("r1", tres("c1")),
    )
    projection = build_session_projection(entries)
    assert len(projection.messages) == 1
    assert messages_of(projection, "r1") == []


# ======================================================= firstKeptEntryId (Q.7)


def fk_session(first_kept: Any) -> list[dict]:
    entries = chain(
        msg("p0", user("old")),
        msg("p1", user("kept")),
        compaction("b", "S", first_kept),
        msg("p2", user("after")),
    )
    entries.append(msg("q1", user("other branch"), parent="p0"))
    return entries


def test_first_kept_string_found():
    entries = fk_session("p1")
    projection = build_session_projection(entries, "p2")
    assert projection.messages == [boundary([text(BOUNDARY_PREFIX + "S\n\n[User]: kept")]), entries[3]["message"]]
    assert proj_ids(projection) == ["b", "p1", "p2"]
    assert messages_of(projection, "p1") == []
    assert ids(build_context_entries(entries, "p2")) == ["b", "p1", "p2"]


@pytest.mark.parametrize("first_kept", [None, "ABSENT", "unknown", "p2", "b", "q1"])
def test_first_kept_not_found_gives_no_tail(first_kept):
    entries = fk_session(first_kept)
    assert ("firstKeptEntryId" in entries[2]) == (first_kept != "ABSENT")
    projection = build_session_projection(entries, "p2")
    assert projection.messages == [boundary([text(BOUNDARY_PREFIX + "S")]), entries[3]["message"]]
    assert proj_ids(projection) == ["b", "p2"]
    assert ids(build_context_entries(entries, "p2")) == ["b", "p2"]


def test_only_latest_boundary_counts():
    entries = chain(
        msg("u0", user("zero")),
        msg("u1", user("one")),
        compaction("old", "OLD", "u0"),
        msg("u2", user("two")),
        compaction("new", "NEW", "u1"),
        msg("u3", user("three")),
    )
    projection = build_session_projection(entries)
    assert projection.messages == [
        boundary([text(BOUNDARY_PREFIX + "NEW\n\n[User]: one\n\n[User]: two")]),
        entries[5]["message"],
    ]
    assert proj_ids(projection) == ["new", "u1", "old", "u2", "u3"]


def test_boundary_details_and_timestamp():
    entries = chain(msg("u0", user("a")), {**compaction("c", "S", None), "timestamp": "2026-02-01T09:05:00.000Z"})
    (message,) = build_session_projection(entries).messages
    assert message["details"] == DETAILS
    assert message["timestamp"] == 1769936700000


@pytest.mark.parametrize(
    "inert",
    [
        ent("compaction", "k", summary="SUMMARY", firstKeptEntryId="u1", tokensBefore=5),
        ent("compaction", "k", summary="SUMMARY", firstKeptEntryId="u1", tokensBefore=5, details={"strategy": "llm"}),
        ent("compaction", "k", summary="SUMMARY", firstKeptEntryId="u1", tokensBefore=5, details={"strategy": "Verbatim-lines"}),
        ent("context_compaction", "k", promptVersion=1, deletedTargets=[{"kind": "entry", "entryId": "u0"}], protectedEntryIds=[]),
        ent("leaf", "k", targetId="u0"),
        ent("future_kind", "k", payload={"x": 1}),
    ],
)
def test_inert_records(inert):
    entries = chain(msg("u0", user("zero")), msg("u1", user("one")), inert, msg("u2", user("two")))
    projection = build_session_projection(entries)
    assert projection.messages == [entries[0]["message"], entries[1]["message"], entries[3]["message"]]
    assert proj_ids(projection) == ["u0", "u1", "k", "u2"]
    assert messages_of(projection, "k") == []


def test_no_boundary_emits_all_context_entries_in_order():
    entries = chain(
        msg("u0", user("hi")),
        ent("custom_message", "cm", customType="x", content="c", display=True),
        ent("branch_summary", "bs", fromId="f", summary="s"),
        msg("b", {"role": "bashExecution", "command": "ls", "output": "", "exitCode": 0, "cancelled": False, "truncated": False, "timestamp": 1}),
        ent("custom", "cu", customType="x", data={}),
    )
    projection = build_session_projection(entries)
    assert [m["role"] for m in projection.messages] == ["user", "custom", "branchSummary", "bashExecution"]
    assert ids(build_context_entries(entries)) == ["u0", "cm", "bs", "b", "cu"]


# ============================================================ context edits (R)


def test_edit_latest_per_target_wins_and_keeps_metadata():
    entries = chain(
        msg("u1", user("orig", ts=111)),
        msg("a1", asst([text("reply")])),
        edit("e1", "u1", {"content": "first"}),
        edit("e2", "u1", {"content": "second"}),
    )
    snapshot = copy.deepcopy(entries)
    projection = build_session_projection(entries)
    assert projection.messages[0] == {"role": "user", "content": "second", "timestamp": 111}
    assert messages_of(projection, "e1") == [] and messages_of(projection, "e2") == []
    assert entries == snapshot


def test_edit_null_omits_target():
    entries = chain(msg("u1", user("secret")), msg("u2", user("fine")), edit("e1", "u1", None))
    projection = build_session_projection(entries)
    assert projection.messages == [entries[1]["message"]]
    assert proj_ids(projection) == ["u1", "u2", "e1"]
    assert messages_of(projection, "u1") == []


def test_edit_is_branch_relative():
    entries = chain(msg("u1", user("orig")), msg("a1", asst([text("r")])), edit("e1", "u1", None))
    entries.append(msg("u2", user("other"), parent="a1"))
    assert build_session_projection(entries, "e1").messages == [entries[1]["message"]]
    # Before the edit, and on a sibling branch, the original shows again.
    assert build_session_projection(entries, "a1").messages == [entries[0]["message"], entries[1]["message"]]
    assert build_session_projection(entries, "u2").messages == [entries[0]["message"], entries[1]["message"], entries[3]["message"]]


def test_edit_string_normalized_for_assistant_and_tool_result():
    a0 = asst([{"type": "thinking", "thinking": "long"}, text("long answer")], ts=29)
    a1 = asst([call("c1")], "toolUse", ts=30)
    entries = chain(
        msg("a0", a0),
        msg("a1", a1),
        msg("r1", tres("c1", [text("huge output")], ts=31)),
        msg("u1", user([text("list content")])),
        ent("custom_message", "cm", customType="x", content=[text("c")], display=True),
        edit("e1", "a0", {"content": "short"}),
        edit("e2", "r1", {"content": "trimmed"}),
        edit("e3", "u1", {"content": "plain"}),
        edit("e4", "cm", {"content": "also plain"}),
    )
    projection = build_session_projection(entries)
    assert projection.messages[0] == {**a0, "content": [text("short")]}
    assert projection.messages[1] is a1
    assert projection.messages[2] == {**tres("c1", ts=31), "content": [text("trimmed")]}
    assert projection.messages[3] == {"role": "user", "content": "plain", "timestamp": 1}
    assert projection.messages[4]["content"] == "also plain"
    assert projection.messages[4]["customType"] == "x"


def test_edit_with_array_replacement():
    entries = chain(msg("u1", user("a")), edit("e1", "u1", {"content": [text("x"), IMG_PNG]}))
    assert build_session_projection(entries).messages == [user([text("x"), IMG_PNG])]


def test_edit_of_non_editable_target_is_inert():
    bash = {"role": "bashExecution", "command": "ls", "output": "", "exitCode": 0, "cancelled": False, "truncated": False, "timestamp": 1}
    entries = chain(
        msg("b1", bash),
        msg("s1", system("rules")),
        ent("branch_summary", "bs", fromId="f", summary="s"),
        edit("e1", "b1", None),
        edit("e2", "s1", None),
        edit("e3", "bs", None),
    )
    assert [m["role"] for m in build_session_projection(entries).messages] == ["bashExecution", "system", "branchSummary"]


def test_malformed_edit_does_not_hide_earlier_edit():
    entries = chain(msg("u1", user("a")), edit("e1", "u1", {"content": "b"}), ent("context_edit", "e2", targetId="u1"))
    assert build_session_projection(entries).messages == [user("b")]


def test_edits_applied_inside_kept_tail_before_serialization():
    entries = chain(
        msg("u0", user("zero")),
        msg("u1", user("secret")),
        msg("a1", asst([text("ok")])),
        edit("e1", "u1", None),
        edit("e2", "a1", {"content": "redacted"}),
        compaction("c", "S", "u0"),
        msg("u2", user("two")),
        edit("e3", "u0", {"content": "ZERO"}),
    )
    snapshot = copy.deepcopy(entries)
    projection = build_session_projection(entries)
    assert projection.messages == [
        boundary([text(BOUNDARY_PREFIX + "S\n\n[User]: ZERO\n\n[Assistant]: redacted")]),
        entries[6]["message"],
    ]
    assert proj_ids(projection) == ["c", "u0", "u1", "a1", "e1", "e2", "u2", "e3"]
    assert entries == snapshot


def test_edits_run_before_pairing():
    # R.8: omitting a toolUse turn orphans its results; omitting a result
    # makes the call unanswered.
    entries = chain(
        msg("a1", asst([call("c1")], "toolUse")),
        msg("r1", tres("c1")),
        msg("a2", asst([call("c2", "read")], "toolUse", ts=40)),
        msg("r2", tres("c2")),
        msg("u1", user("go on")),
        edit("e1", "a1", None),
        edit("e2", "r2", None),
    )
    projection = build_session_projection(entries)
    assert projection.messages == [entries[2]["message"], synthetic("c2", "read", 40), entries[4]["message"]]
    assert messages_of(projection, "r1") == []
    assert messages_of(projection, "u1") == [synthetic("c2", "read", 40), entries[4]["message"]]


# =========================================================== system (docs/rules/projection.md §3.6)


def test_system_replay_content_sections_tools():
    s1 = system("A", ts=100, sections={"x": "1", "y": "2"}, toolsAdded=[{"name": "read", "description": "r"}, {"name": "bash", "description": "b"}])
    s2 = system(
        [text("B"), text("C")],
        ts=200,
        sections={"x": None, "z": "3", "y": "22"},
        toolsRemoved=[{"name": "read"}],
        toolsAdded=[{"name": "read", "description": "r2"}],
    )
    s3 = system("", ts=300)
    result = get_current_system_message([user("u"), s1, asst([]), s2, s3])
    assert result == {
        "role": "system",
        "content": "A\n\nB\nC",
        "sections": {"y": "22", "z": "3"},
        "toolsAdded": [{"name": "bash", "description": "b"}, {"name": "read", "description": "r2"}],
        "timestamp": 100,
    }
    assert list(result["sections"]) == ["y", "z"]


def test_system_replay_positions():
    s1 = system("", sections={"a": "1", "b": "2"}, toolsAdded=[{"name": "t1"}, {"name": "t2"}])
    s2 = system("", sections={"a": None}, toolsAdded=[{"name": "t1", "v": 2}])
    s3 = system("", sections={"a": "3"})
    result = get_current_system_message([s1, s2, s3])
    assert list(result["sections"].items()) == [("b", "2"), ("a", "3")]
    assert result["toolsAdded"] == [{"name": "t1", "v": 2}, {"name": "t2"}]


def test_system_replay_empty_cases():
    assert get_current_system_message([]) is None
    assert get_current_system_message([user("x"), asst([])]) is None
    assert get_current_system_message([{"role": "system", "content": ""}]) == {"role": "system", "content": "", "timestamp": 0}


def test_system_replay_does_not_mutate():
    s1 = system("A", sections={"x": "1"}, toolsAdded=[{"name": "t"}])
    s2 = system("B", sections={"x": None}, toolsRemoved=[{"name": "t"}])
    snapshot = copy.deepcopy([s1, s2])
    get_current_system_message([s1, s2])
    assert [s1, s2] == snapshot


def test_projection_system_messages_without_boundary():
    entries = chain(msg("s1", system("one", ts=5)), msg("u1", user("hi")), msg("s2", system("two", ts=6)))
    projection = build_session_projection(entries)
    assert projection.messages == [e["message"] for e in entries]
    assert projection.system_message == {"role": "system", "content": "one\n\ntwo", "timestamp": 5}


def test_projection_system_checkpoint_before_boundary():
    checkpoint = system("base rules", ts=TS_MS, sections={"env": "linux"})
    entries = chain(
        msg("s0", system("base rules", ts=1, sections={"env": "linux"})),
        msg("u1", user("one")),
        msg("s1", system("tail rule", ts=2)),
        compaction("c", "S", "u1", systemMessage=checkpoint),
        msg("s2", system("new rule", ts=3)),
        msg("u2", user("two")),
    )
    projection = build_session_projection(entries)
    # System text is never serialized into the kept tail.
    assert projection.messages == [
        checkpoint,
        boundary([text(BOUNDARY_PREFIX + "S\n\n[User]: one")]),
        entries[4]["message"],
        entries[5]["message"],
    ]
    assert messages_of(projection, "c") == projection.messages[:2]
    assert messages_of(projection, "s1") == []
    assert projection.system_message == {
        "role": "system",
        "content": "base rules\n\nnew rule",
        "sections": {"env": "linux"},
        "timestamp": TS_MS,
    }


def test_projection_boundary_without_checkpoint():
    entries = chain(msg("s0", system("gone")), compaction("c", "S", None), msg("u", user("x")))
    projection = build_session_projection(entries)
    assert [m["role"] for m in projection.messages] == ["custom", "user"]
    assert projection.system_message is None


# ========================================================= settings (Q.3, S)


def test_settings_defaults():
    projection = build_session_projection(chain(msg("u", user("x"))))
    assert (projection.thinking_level, projection.model, projection.context_window) == ("off", None, None)


def test_settings_last_wins_along_whole_path_including_compacted_part():
    entries = chain(
        ent("thinking_level_change", "t1", thinkingLevel="high"),
        ent("context_window_change", "w1", contextWindow=200000),
        ent("model_change", "m1", provider="openai", modelId="gpt-4o"),
        msg("u0", user("x")),
        ent("thinking_level_change", "t2", thinkingLevel="low"),
        compaction("c", "S", None),
        msg("u1", user("y")),
    )
    projection = build_session_projection(entries)
    assert projection.thinking_level == "low"
    assert projection.model == {"provider": "openai", "modelId": "gpt-4o"}
    assert projection.context_window == 200000
    ctx = build_session_context(entries)
    assert (ctx.thinking_level, ctx.model) == ("low", {"provider": "openai", "modelId": "gpt-4o"})
    assert not hasattr(ctx, "context_window")


def test_model_from_assistant_and_model_change_interleaved():
    entries = chain(
        ent("model_change", "m1", provider="openai", modelId="gpt-4o"),
        msg("a1", asst([text("x")], provider="anthropic", model="claude")),
    )
    assert build_session_projection(entries).model == {"provider": "anthropic", "modelId": "claude"}
    entries.append(ent("model_change", "m2", parent="a1", provider="google", modelId="gemini"))
    assert build_session_projection(entries).model == {"provider": "google", "modelId": "gemini"}


def test_assistant_without_provider_or_model_is_skipped():
    bare = {"role": "assistant", "content": [text("x")], "stopReason": "stop", "timestamp": 1}
    entries = chain(
        ent("model_change", "m1", provider="openai", modelId="gpt-4o"),
        msg("a1", bare),
        msg("a2", {**bare, "provider": "anthropic"}),
    )
    assert build_session_projection(entries).model == {"provider": "openai", "modelId": "gpt-4o"}


def test_settings_ignore_other_branches_and_edits():
    entries = chain(
        ent("thinking_level_change", "t1", thinkingLevel="medium"),
        msg("a1", asst([text("x")], provider="anthropic", model="claude")),
        edit("e1", "a1", None),
    )
    entries.append(ent("thinking_level_change", "t2", parent="t1", thinkingLevel="high"))
    entries.append(ent("context_window_change", "w2", parent="t1", contextWindow=5))
    projection = build_session_projection(entries, "e1")
    assert projection.messages == []
    assert projection.thinking_level == "medium"
    assert projection.model == {"provider": "anthropic", "modelId": "claude"}  # R.7: raw entries
    assert projection.context_window is None


# ============================================================ leaf resolution


def two_branches() -> list[dict]:
    entries = chain(msg("r", user("root")), msg("a", user("branch a")))
    entries.append(msg("b", user("branch b"), parent="r"))
    entries.append(ent("thinking_level_change", "tb", parent="b", thinkingLevel="high"))
    return entries


def test_build_session_context_leaf_rules_q1():
    entries = two_branches()
    assert build_session_context(entries, None) == SessionContext([], "off", None)
    assert build_session_context([], LAST_ENTRY) == SessionContext([], "off", None)
    last = build_session_context(entries)
    assert [m["content"] for m in last.messages] == ["root", "branch b"]
    assert last.thinking_level == "high"
    assert build_session_context(entries, "nope") == last
    assert [m["content"] for m in build_session_context(entries, "a").messages] == ["root", "branch a"]


def test_build_context_entries_leaf_rules_q13():
    entries = two_branches()
    assert build_context_entries(entries, None) == []
    assert build_context_entries(entries, "nope") == []
    assert build_context_entries([]) == []
    assert ids(build_context_entries(entries)) == ["r", "b", "tb"]
    assert ids(build_context_entries(entries, "a")) == ["r", "a"]


def test_build_session_projection_leaf_rules_follow_context_entries():
    entries = two_branches()
    for leaf in (None, "nope"):
        projection = build_session_projection(entries, leaf)
        assert projection.entries == [] and projection.messages == []
        assert projection.thinking_level == "off"
    assert proj_ids(build_session_projection(entries)) == ["r", "b", "tb"]
    assert proj_ids(build_session_projection(entries, "a")) == ["r", "a"]


# ================================================================ scale


def long_chain(n: int = 100_000) -> list[dict]:
    entries = []
    parent = None
    for i in range(n):
        entry_id = f"{i:08x}"
        message = user(f"u{i}") if i % 2 == 0 else asst([text(f"a{i}")])
        entries.append(msg(entry_id, message, parent))
        parent = entry_id
    return entries


def test_100k_entry_chain_projects_without_recursion():
    entries = long_chain()
    projection = build_session_projection(entries)
    assert len(projection.messages) == 100_000
    assert projection.messages[-1] is entries[-1]["message"]
    assert len(build_context_entries(entries)) == 100_000


def test_100k_entry_kept_tail_serializes_without_recursion():
    entries = long_chain()
    entries.append({**compaction("ffffffff", "S", "00000000"), "parentId": entries[-1]["id"]})
    compacted = build_session_projection(entries)
    assert len(compacted.messages) == 1
    body = compacted.messages[0]["content"][0]["text"]
    assert body.startswith(BOUNDARY_PREFIX + "S\n\n[User]: u0\n\n[Assistant]: a1\n\n")
    assert body.endswith("[Assistant]: a99999")
    assert len(compacted.entries) == 100_001


# ====================================================== hypothesis properties

_IDS = [f"e{i}" for i in range(12)]
_CALL_IDS = ["c1", "c2", "c3"]

_text_block = st.builds(text, st.sampled_from(["", " ", "hi", "a\n", "día"]))
_content = st.one_of(
    st.none(),
    st.sampled_from(["", "  ", "hello"]),
    st.lists(st.one_of(_text_block, st.just(IMG_PNG), st.just({"type": "thinking", "thinking": "t"})), max_size=3),
)


def _message_strategy() -> st.SearchStrategy[dict]:
    assistant = st.builds(
        lambda calls, stop, txt: asst([text(txt), *[call(c) for c in calls]], stop),
        st.lists(st.sampled_from(_CALL_IDS), max_size=3),
        st.sampled_from(["toolUse", "stop", "aborted", "error", "length", "pending"]),
        st.sampled_from(["", "ok"]),
    )
    return st.one_of(
        st.builds(user, _content),
        assistant,
        st.builds(lambda c, content: tres(c, content if isinstance(content, list) else None), st.sampled_from(_CALL_IDS), _content),
        st.builds(lambda c: system(c, sections={"s": c or None}, toolsAdded=[{"name": "t"}]), st.sampled_from(["", "rule"])),
        st.builds(
            lambda excl: {"role": "bashExecution", "command": "ls", "output": "o", "exitCode": 1, "cancelled": False, "truncated": False, "excludeFromContext": excl, "timestamp": 1},
            st.booleans(),
        ),
        st.just({"role": "branchSummary", "summary": "bs", "fromId": "x", "timestamp": 1}),
        st.just({"role": "compactionSummary", "summary": "old"}),
    )


def _entry_body() -> st.SearchStrategy[dict]:
    ref = st.sampled_from([*_IDS, "zzz"])
    messages = _message_strategy()
    return st.one_of(
        st.builds(lambda m: {"type": "message", "message": m}, messages),
        st.builds(lambda c, d: {"type": "custom_message", "customType": "x", "content": c, "display": d}, _content, st.booleans()),
        st.builds(lambda s: {"type": "branch_summary", "fromId": "x", "summary": s}, st.sampled_from(["", "went"])),
        st.builds(
            lambda fk, strat, cp: {
                "type": "compaction",
                "summary": "[User]: s",
                **({} if fk == "ABSENT" else {"firstKeptEntryId": fk}),
                "tokensBefore": 1,
                "details": {"strategy": strat},
                **({"systemMessage": system("cp", sections={"k": "v"})} if cp else {}),
            },
            st.one_of(st.none(), st.just("ABSENT"), ref),
            st.sampled_from(["verbatim-lines", "summary"]),
            st.booleans(),
        ),
        st.builds(
            lambda t, r: {"type": "context_edit", "targetId": t, "replacement": r},
            ref,
            st.one_of(st.none(), st.builds(lambda c: {"content": c}, st.one_of(st.just("new"), st.lists(_text_block, max_size=2)))),
        ),
        st.builds(lambda v: {"type": "thinking_level_change", "thinkingLevel": v}, st.sampled_from(["low", "high"])),
        st.just({"type": "model_change", "provider": "p", "modelId": "m"}),
        st.just({"type": "context_window_change", "contextWindow": 1000}),
        st.just({"type": "label", "targetId": "e0", "label": "x"}),
        st.just({"type": "context_compaction", "deletedTargets": []}),
        st.just({"type": "mystery", "x": [1, 2]}),
    )


_ENTRY_BODY = _entry_body()  # built once: strategy construction is costly


@st.composite
def sessions(draw) -> list[dict]:
    n = draw(st.integers(min_value=0, max_value=len(_IDS)))
    entries = []
    for i in range(n):
        body = draw(_ENTRY_BODY)
        parent = None if i == 0 else draw(st.one_of(st.just(_IDS[i - 1]), st.sampled_from(_IDS[:i]), st.none()))
        entries.append({"type": body["type"], "id": _IDS[i], "parentId": parent, "timestamp": TS, **{k: v for k, v in body.items() if k != "type"}})
    return entries


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), st.one_of(st.just(LAST_ENTRY), st.none(), st.sampled_from([*_IDS, "nope"])), st.booleans())
def test_property_projection_never_mutates_input(entries, leaf, repair_trailing):
    snapshot = copy.deepcopy(entries)
    projection = build_session_projection(entries, leaf, repair_trailing=repair_trailing)
    context_entries = build_context_entries(entries, leaf)
    build_session_context(entries, leaf, repair_trailing=repair_trailing)
    provider = convert_to_llm(projection.messages, repair_trailing=repair_trailing)
    for entry in entries:
        entry_to_context_messages(entry)
    assert entries == snapshot
    # Structural invariants of the projection (Q.17, D-11).
    assert projection.messages == [m for p in projection.entries for m in p.messages]
    assert proj_ids(projection) == ids(context_entries)
    assert repair_orphan_tool_results(projection.messages, repair_trailing) is projection.messages
    assert all(m["role"] in ("system", "user", "assistant", "toolResult") for m in provider)


# --------------------------------------------------------------------------- P.9 guard


def _assistant_calls(*ids: str, exclude: bool = False) -> dict:
    message = {"role": "assistant", "stopReason": "toolUse", "timestamp": 1,
               "content": [{"type": "toolCall", "id": i, "name": "bash", "arguments": {}} for i in ids]}
    if exclude:
        message["excludeFromContext"] = True
    return message


def test_tool_pairing_guard_refuses_a_call_id_in_two_assistant_messages() -> None:
    from sessiontree.core.projection import assert_tool_pairing_invariant
    from sessiontree.errors import ToolPairingError

    ok = [_assistant_calls("a", "b"), {"role": "user", "content": "x", "timestamp": 2}, _assistant_calls("c")]
    assert assert_tool_pairing_invariant(ok) is None
    # the same id twice inside ONE message is not this guard's business
    assert assert_tool_pairing_invariant([_assistant_calls("a", "a")]) is None
    # excluded assistant messages are skipped
    assert assert_tool_pairing_invariant([_assistant_calls("a"), _assistant_calls("a", exclude=True)]) is None
    with pytest.raises(ToolPairingError) as info:
        assert_tool_pairing_invariant([_assistant_calls("a", "b"), _assistant_calls("b"), _assistant_calls("a", "b")])
    assert info.value.call_ids == ["b", "a"]
    assert str(info.value) == ("Context is structurally invalid for the provider: tool call ids b, a appear in "
                               "more than one assistant message. The request was not sent.")
    with pytest.raises(ValueError, match="tool call id c appears in more than one"):
        assert_tool_pairing_invariant([_assistant_calls("c"), _assistant_calls("c")])
