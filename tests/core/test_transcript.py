"""The kept-tail transcript grammar (docs/rules/transcript.md §2.2-§2.5, docs/rules/format.md §2.6).

Expected strings are written out by hand from the grammar, not captured
from the implementation.
"""

from __future__ import annotations

import copy

import pytest

from builders import bare_assistant as assistant
from builders import text_block as text
from builders import tool_result_content as tool_result
from builders import user
from sessiontree.core.transcript import (
    BOUNDARY_PREFIX,
    BRANCH_SUMMARY_PREFIX,
    BRANCH_SUMMARY_SUFFIX,
    ChunkList,
    bash_text,
    blocks,
    branch_summary_text,
    compose_boundary_content,
    format_tool_call,
    serialize_compacted,
    serialize_messages,
    truncate_tool_result_text,
)
from sessiontree.format import jsonio

IMG_A = {"type": "image", "data": "QQ==", "mimeType": "image/png"}
IMG_B = {"type": "image", "data": "Qg==", "mimeType": "image/jpeg"}


# --------------------------------------------------------------- constants


def test_boundary_prefix_describes_verbatim_transcript_and_marker():
    assert "verbatim transcript" in BOUNDARY_PREFIX
    assert "(filtered N lines)" in BOUNDARY_PREFIX
    # It must run straight into the first role label of the summary.
    assert BOUNDARY_PREFIX.endswith("\n\n")


def test_branch_summary_wrapper():
    assert branch_summary_text("S") == BRANCH_SUMMARY_PREFIX + "S" + BRANCH_SUMMARY_SUFFIX


# -------------------------------------------------------------- primitives


def test_append_text_empty_is_a_no_op():
    chunks = ChunkList()
    chunks.append_text("")
    assert chunks.to_list() == [] and not chunks
    chunks = ChunkList([IMG_A])
    chunks.append_text("")
    assert chunks.to_list() == [IMG_A]


def test_append_text_merges_into_last_text_chunk():
    chunks = ChunkList(["a"])
    chunks.append_text("b")
    chunks.append_text("c")
    assert chunks.to_list() == ["abc"]


def test_append_text_after_image_pushes_new_chunk():
    chunks = ChunkList(["a", IMG_A])
    chunks.append_text("b")
    assert chunks.to_list() == ["a", IMG_A, "b"]


def test_push_section_first_section_has_no_separator():
    chunks = ChunkList()
    chunks.push_section("[User]: ", ["hi"])
    assert chunks.to_list() == ["[User]: hi"]


def test_push_section_later_sections_separated_by_blank_line():
    chunks = ChunkList(["[User]: hi"])
    chunks.push_section("[Assistant]: ", ["yo"])
    assert chunks.to_list() == ["[User]: hi\n\n[Assistant]: yo"]


def test_push_section_skips_section_without_content():
    chunks = ChunkList(["x"])
    chunks.push_section("[User]: ", [])
    chunks.push_section("[User]: ", [""])
    chunks.push_section("[User]: ", ["", ""])
    assert chunks.to_list() == ["x"]


def test_push_section_image_only_section_counts():
    chunks = ChunkList()
    chunks.push_section("[Tool result]: ", [IMG_A])
    assert chunks.to_list() == ["[Tool result]: ", IMG_A]


def test_push_section_after_image_starts_new_text_chunk():
    chunks = ChunkList(["[Tool result]: ", IMG_A])
    chunks.push_section("[User]: ", ["ok"])
    assert chunks.to_list() == ["[Tool result]: ", IMG_A, "\n\n[User]: ok"]


def test_push_section_separator_even_when_list_holds_only_empty_text():
    # "non-empty" is about the list, not its text: a lone "" chunk counts.
    chunks = ChunkList([""])
    chunks.push_section("[User]: ", ["a"])
    assert chunks.to_list() == ["\n\n[User]: a"]


def test_strip_one_trailing_newline():
    chunks = ChunkList(["a\n\n"])
    chunks.strip_one_trailing_newline()
    assert chunks.to_list() == ["a\n"]
    chunks = ChunkList(["a\n", IMG_A])
    chunks.strip_one_trailing_newline()
    assert chunks.to_list() == ["a\n", IMG_A]


# ------------------------------------------------------------------ blocks


@pytest.mark.parametrize("mode", ["retained", "compacted"])
def test_blocks_string(mode):
    assert blocks("hello", mode) == ["hello"]
    assert blocks("", mode) == []


@pytest.mark.parametrize("mode", ["retained", "compacted"])
def test_blocks_adjacent_texts_concatenate_without_separator(mode):
    assert blocks([text("Compare "), text("these")], mode) == ["Compare these"]


@pytest.mark.parametrize("mode", ["retained", "compacted"])
def test_blocks_strip_exactly_one_trailing_newline(mode):
    assert blocks([text("a\n\n")], mode) == ["a\n"]
    assert blocks([text("a\n")], mode) == ["a"]


@pytest.mark.parametrize("mode", ["retained", "compacted"])
def test_blocks_string_content_is_not_stripped(mode):
    # The strip happens "after the walk" of an array; a string is returned as is.
    assert blocks("a\n", mode) == ["a\n"]


@pytest.mark.parametrize("mode", ["retained", "compacted"])
def test_blocks_ignore_other_block_kinds(mode):
    assert blocks([text("a"), {"type": "thinking", "thinking": "x"}, text("b")], mode) == ["ab"]


@pytest.mark.parametrize("mode", ["retained", "compacted"])
def test_blocks_of_non_content(mode):
    assert blocks(None, mode) == []


def test_blocks_retained_image_first_has_no_newline_before():
    assert blocks([IMG_A, text("after")], "retained") == [IMG_A, "after"]


def test_blocks_retained_newline_before_image_even_after_newline():
    # "if the section already has any chunk, appendText("\n") (even when that
    # text already ends in "\n")"; nothing after the image.
    assert blocks([text("a\n"), IMG_A], "retained") == ["a\n\n", IMG_A]


def test_blocks_retained_two_images():
    assert blocks([IMG_A, IMG_B], "retained") == [IMG_A, "\n", IMG_B]


def test_blocks_retained_images_are_copies():
    out = blocks([IMG_A], "retained")
    assert out == [IMG_A]
    assert out[0] is not IMG_A


def test_blocks_compacted_image_marker():
    assert blocks([text("a"), IMG_A, text("b")], "compacted") == ["a\n[image]\nb"]
    assert blocks([text("a\n"), IMG_A], "compacted") == ["a\n[image]"]
    assert blocks([IMG_A], "compacted") == ["[image]"]


def test_blocks_unknown_mode():
    with pytest.raises(ValueError):
        blocks("x", "summary")  # type: ignore[arg-type]


# --------------------------------------------------------------- tool calls


def test_tool_call_js_number_and_key_order_reference_2_6():
    args = jsonio.loads('{"b":1,"2":2,"1":3,"f":1.0,"g":1e21,"h":1e-7}')
    assert format_tool_call({"type": "toolCall", "id": "x", "name": "t", "arguments": args}) == (
        "t(1=3, 2=2, b=1, f=1, g=1e+21, h=1e-7)"
    )


def test_tool_call_value_json_forms():
    block = {
        "type": "toolCall",
        "id": "x",
        "name": "w",
        "arguments": {"s": "a.ts", "t": True, "n": None, "x": 2.5, "l": [{"k": "v"}]},
    }
    assert format_tool_call(block) == 'w(s="a.ts", t=true, n=null, x=2.5, l=[{"k":"v"}])'


def test_tool_call_escapes_and_raw_non_ascii():
    block = {"type": "toolCall", "id": "x", "name": "w", "arguments": {"p": "día\n\x01\"\\"}}
    assert format_tool_call(block) == 'w(p="día\\n\\u0001\\"\\\\")'


def test_tool_call_without_arguments():
    assert format_tool_call({"type": "toolCall", "id": "x", "name": "ls", "arguments": {}}) == "ls()"
    assert format_tool_call({"type": "toolCall", "id": "x", "name": "ls"}) == "ls()"


# --------------------------------------------------------------- assistant


def test_assistant_sections_in_fixed_order():
    message = assistant(
        [
            {"type": "toolCall", "id": "1", "name": "a", "arguments": {"x": 1}},
            text("T1"),
            {"type": "thinking", "thinking": "H1"},
            text("T2"),
            {"type": "toolCall", "id": "2", "name": "b", "arguments": {}},
            {"type": "thinking", "thinking": "H2"},
            {"type": "image", "data": "x", "mimeType": "image/png"},
        ],
        stop="toolUse",
    )
    assert serialize_messages([message], "retained") == [
        "[Assistant thinking]: H1\nH2\n\n[Assistant]: T1\nT2\n\n[Assistant tool calls]: a(x=1); b()"
    ]


def test_assistant_empty_text_and_empty_thinking_give_no_section():
    message = assistant([{"type": "thinking", "thinking": ""}, text("")])
    assert serialize_messages([message], "retained") == []


def test_assistant_two_empty_texts_join_to_a_newline():
    # The content test is on the joined text: "" + "\n" + "" is not empty.
    message = assistant([text(""), text("")])
    assert serialize_messages([message], "retained") == ["[Assistant]: \n"]


# ------------------------------------------------------------- tool results


def test_tool_result_metadata_not_rendered():
    ok = tool_result([text("boom")], is_error=False)
    err = {**tool_result([text("boom")], call_id="zz", is_error=True), "details": {"a": 1}}
    assert serialize_messages([ok], "retained") == serialize_messages([err], "retained")
    assert serialize_messages([err], "retained") == ["[Tool result]: boom"]


def test_truncation_counts_utf16_units():
    emoji = "\U0001F600" * 8001  # 16002 UTF-16 units
    assert truncate_tool_result_text(emoji) == (
        "\U0001F600" * 8000 + "\n\n[... 2 more characters truncated]"
    )


def test_truncation_boundary():
    assert truncate_tool_result_text("a" * 16000) == "a" * 16000
    assert truncate_tool_result_text("a" * 16001) == "a" * 16000 + "\n\n[... 1 more characters truncated]"


def test_compacted_mode_truncates_tool_results_only():
    long = "x" * 16005
    messages = [user(long), tool_result([text(long)])]
    assert serialize_compacted(messages) == (
        "[User]: " + long + "\n\n[Tool result]: " + "x" * 16000 + "\n\n[... 5 more characters truncated]"
    )


def test_retained_mode_never_truncates():
    long = "x" * 20000
    assert serialize_messages([tool_result([text(long)])], "retained") == ["[Tool result]: " + long]


def test_system_and_other_roles_are_skipped():
    messages = [
        {"role": "system", "content": "be nice", "timestamp": 0},
        user("hi"),
        {"role": "custom", "customType": "x", "content": "c", "display": True, "timestamp": 0},
    ]
    assert serialize_messages(messages, "retained") == ["[User]: hi"]


def test_serialize_does_not_mutate_input():
    messages = [user([text("a"), IMG_A]), tool_result([IMG_A, IMG_B])]
    before = copy.deepcopy(messages)
    out = serialize_messages(messages, "retained")
    out[1]["data"] = "changed"
    assert messages == before


# --------------------------------------------------------------- bash text


def bash(**fields) -> dict:
    base = {
        "role": "bashExecution",
        "command": "make",
        "output": "",
        "exitCode": 0,
        "cancelled": False,
        "truncated": False,
        "timestamp": 5,
    }
    base.update(fields)
    return base


def test_bash_text_no_output():
    assert bash_text(bash()) == "Ran `make`\n(no output)"


def test_bash_text_output_and_exit_code():
    assert bash_text(bash(output="1 failed", exitCode=2)) == (
        "Ran `make`\n```\n1 failed\n```\n\nCommand exited with code 2"
    )


def test_bash_text_cancelled_wins_over_exit_code():
    assert bash_text(bash(exitCode=130, cancelled=True)) == "Ran `make`\n(no output)\n\n(command cancelled)"


def test_bash_text_undefined_exit_code():
    assert bash_text(bash(exitCode=None)) == "Ran `make`\n(no output)"


def test_bash_text_truncated_needs_a_path():
    assert bash_text(bash(truncated=True)) == "Ran `make`\n(no output)"
    assert bash_text(bash(truncated=True, fullOutputPath="/t/o")) == (
        "Ran `make`\n(no output)\n\n[Output truncated. Full output: /t/o]"
    )


# ------------------------------------------------------------- composition


def test_compose_summary_and_tail():
    assert compose_boundary_content("S", ["[User]: a"]) == [text(BOUNDARY_PREFIX + "S\n\n[User]: a")]


def test_compose_empty_summary_runs_into_tail():
    assert compose_boundary_content("", ["[User]: a"]) == [text(BOUNDARY_PREFIX + "[User]: a")]


def test_compose_summary_without_tail():
    assert compose_boundary_content("S", []) == [text(BOUNDARY_PREFIX + "S")]


def test_compose_images_become_blocks():
    assert compose_boundary_content("S", ["[Tool result]: ", IMG_A, "\n", IMG_B]) == [
        text(BOUNDARY_PREFIX + "S\n\n[Tool result]: "),
        IMG_A,
        text("\n"),
        IMG_B,
    ]


def test_example_2_compacted_contrast_string():
    # docs/rules/transcript.md §2.5 example 2, the provider-converted forms of x1, x2, x4, x5
    # (x3 is excluded) in compacted mode.
    messages = [
        user([text("Compare "), text("these"), {"type": "image", "data": "iVBORw0=", "mimeType": "image/png"}, text("and this\n")]),
        user([text(bash_text(bash(command="make test", output="1 failed", exitCode=1, truncated=True, fullOutputPath="/tmp/out.log")))]),
        user([text("2 warnings")]),
        user([text(branch_summary_text("Tried pinning deps"))]),
    ]
    assert serialize_compacted(messages) == (
        "[User]: Compare these\n[image]\nand this\n\n[User]: Ran `make test`\n```\n1 failed\n```"
        "\n\nCommand exited with code 1\n\n[Output truncated. Full output: /tmp/out.log]"
        "\n\n[User]: 2 warnings\n\n[User]: "
        + BRANCH_SUMMARY_PREFIX
        + "Tried pinning deps"
        + BRANCH_SUMMARY_SUFFIX
    )
