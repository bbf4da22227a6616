"""The kept-tail transcript grammar (docs/rules/transcript.md §2).

A transcript turns provider-bound messages (``user``, ``assistant``,
``toolResult``; see :func:`sessiontree.core.projection.convert_to_llm`) into a
list of *chunks*. One grammar, two modes:

* ``"compacted"`` renders the durable ``summary`` text a planner works on:
  images become the text ``[image]`` and long tool-result texts are truncated
  at 16000 UTF-16 code units;
* ``"retained"`` renders the kept tail appended to a compaction boundary
  message: images stay image blocks and nothing is truncated.

Invariants:

* A chunk is either a ``str`` (text) or a ``dict`` (a *copy* of an image
  block). Text is merged by :meth:`ChunkList.append_text`, so two text
  chunks are never adjacent in a list built with the primitives here.
* The first section of a serialization has no leading separator; later
  sections are separated by exactly ``"\\n\\n"`` (:meth:`ChunkList.push_section`).
* Inputs are never mutated; image blocks are copied when they enter a list.
* Output is byte-stable: tool-call arguments use JavaScript's
  ``JSON.stringify`` rules (:func:`sessiontree.format.jsonio.js_stringify`) and
  lengths count UTF-16 code units, as the original agent does (docs/rules/format.md
  §2.6), so transcripts written here and there agree byte for byte.

The fixed sentences of the original agent are replaced by our own wording
(:data:`BOUNDARY_PREFIX`, :data:`BRANCH_SUMMARY_PREFIX`,
:data:`BRANCH_SUMMARY_SUFFIX`); the role labels and the ``(filtered N lines)``
marker are part of the grammar and are used as written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from sessiontree.format.jsonio import js_key_order, js_number, js_stringify, utf16_len

__all__ = [
    "ASSISTANT_LABEL",
    "ASSISTANT_THINKING_LABEL",
    "ASSISTANT_TOOL_CALLS_LABEL",
    "BOUNDARY_PREFIX",
    "BRANCH_SUMMARY_PREFIX",
    "BRANCH_SUMMARY_SUFFIX",
    "TOOL_RESULT_LABEL",
    "TOOL_RESULT_TRUNCATE_UNITS",
    "USER_LABEL",
    "Chunk",
    "ChunkList",
    "Mode",
    "bash_text",
    "blocks",
    "branch_summary_text",
    "compose_boundary_content",
    "format_tool_call",
    "serialize_compacted",
    "serialize_messages",
    "truncate_tool_result_text",
]

#: Opens the text of every active compaction boundary message (docs/rules/projection.md
#: Q.10). It must tell the model that a verbatim transcript follows and how
#: elided spans are marked; it ends with a blank line so the durable summary
#: (which starts with a role label) reads as its own paragraph.
BOUNDARY_PREFIX = (
    "Earlier turns of this conversation were compacted. What follows is a "
    "verbatim transcript of them, not a paraphrase: every line shown is "
    "exactly as it was, and each span of removed lines is marked "
    "\"(filtered N lines)\", where N is the number of lines removed there.\n\n"
)

#: Wraps a branch summary when it is handed to the model as a user turn
#: (docs/rules/projection.md P.2, docs/rules/transcript.md §2.3).
BRANCH_SUMMARY_PREFIX = (
    "The conversation came back here from another branch that was abandoned. "
    "A summary of that branch:\n\n<branch-summary>\n"
)
BRANCH_SUMMARY_SUFFIX = "\n</branch-summary>"

# Section headers of the grammar (docs/rules/transcript.md §2.3), used exactly as written.
USER_LABEL = "[User]: "
ASSISTANT_LABEL = "[Assistant]: "
ASSISTANT_THINKING_LABEL = "[Assistant thinking]: "
ASSISTANT_TOOL_CALLS_LABEL = "[Assistant tool calls]: "
TOOL_RESULT_LABEL = "[Tool result]: "

#: Compacted mode truncates each tool-result text chunk above this many
#: UTF-16 code units (docs/rules/transcript.md §2.3).
TOOL_RESULT_TRUNCATE_UNITS = 16000

Chunk = str | dict[str, Any]
"""A text chunk (``str``) or an image chunk (a copy of an image block)."""

Mode = Literal["retained", "compacted"]

_MODES = ("retained", "compacted")


class ChunkList:
    """An output list of chunks with the grammar's primitives (docs/rules/transcript.md §2.2).

    :meth:`append_text` is *appendText* and :meth:`push_section` is
    *pushSection*. The trailing text chunk is kept as a list of parts and
    joined once in :meth:`to_list`: concatenating onto one growing string
    would make a long kept tail quadratic (a 100,000-message tail took
    seconds).

    Args:
        chunks: initial chunks, taken as they are.
    """

    __slots__ = ("_done", "_parts")

    def __init__(self, chunks: Iterable[Chunk] = ()) -> None:
        # `_done` holds every chunk before the trailing text chunk; `_parts`
        # is that trailing text chunk, non-empty exactly when the last chunk
        # is text (it may be [""] after a strip, as in the list form).
        self._done: list[Chunk] = []
        self._parts: list[str] = []
        for chunk in chunks:
            if isinstance(chunk, str):
                self._flush()
                self._parts.append(chunk)
            else:
                self.push_image(chunk)

    def _flush(self) -> None:
        if self._parts:
            self._done.append("".join(self._parts))
            self._parts = []

    def __bool__(self) -> bool:
        return bool(self._done or self._parts)

    def last_is_text(self) -> bool:
        """Whether the last chunk is a text chunk."""
        return bool(self._parts)

    def last_text_ends_with_newline(self) -> bool:
        """Whether the last chunk is text ending in ``"\\n"``."""
        for part in reversed(self._parts):
            if part:
                return part.endswith("\n")
        return False

    def append_text(self, text: str) -> None:
        """*appendText*: nothing for ``""``; merge onto a trailing text chunk; else a new one."""
        if text:
            self._parts.append(text)

    def push_image(self, image: Mapping[str, Any]) -> None:
        """Push an image chunk as it is (callers pass copies)."""
        self._flush()
        self._done.append(image)  # type: ignore[arg-type]

    def strip_one_trailing_newline(self) -> None:
        """Remove exactly one ``"\\n"`` when the last chunk is text ending in one."""
        while self._parts and self._parts[-1] == "":
            if len(self._parts) == 1:
                return
            self._parts.pop()
        if self._parts and self._parts[-1].endswith("\n"):
            self._parts[-1] = self._parts[-1][:-1]

    def push_section(self, header: str, section: Sequence[Chunk]) -> None:
        """*pushSection*: append one labelled section.

        Skips a section without content (no image, no non-empty text).
        Otherwise appends ``"\\n\\n"`` (only when this list is non-empty) plus
        ``header``, then each section chunk: text through :meth:`append_text`,
        images pushed as they are.
        """
        if not any(not isinstance(c, str) or len(c) > 0 for c in section):
            return
        self.append_text(("\n\n" if self else "") + header)
        for chunk in section:
            if isinstance(chunk, str):
                self.append_text(chunk)
            else:
                self.push_image(chunk)

    def to_list(self) -> list[Chunk]:
        """The chunks as a new list (text chunks as ``str``, images as dicts)."""
        out = list(self._done)
        if self._parts:
            out.append("".join(self._parts))
        return out


def _check_mode(mode: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"transcript mode must be 'retained' or 'compacted', not {mode!r}")


def blocks(content: Any, mode: Mode) -> list[Chunk]:
    """The chunks of a user or tool-result ``content`` (docs/rules/transcript.md §2.3 ``blocks``).

    Args:
        content: a string, or a list of content blocks. Anything else (``None``
            included) gives no chunks.
        mode: ``"retained"`` keeps images as image chunks (copies), preceded
            by ``"\\n"`` when the section already has a chunk; ``"compacted"``
            writes ``[image]`` on its own line.

    Returns:
        A new chunk list. Adjacent text blocks are concatenated with nothing
        between them; exactly one trailing ``"\\n"`` of the last text chunk is
        removed; block kinds other than text and image are ignored.

    Raises:
        ValueError: an unknown ``mode``.
    """
    _check_mode(mode)
    if isinstance(content, str):
        return [content] if content else []
    if not isinstance(content, list):
        return []
    out = ChunkList()
    for block in content:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            # A non-string text is data damage; render nothing rather than
            # JavaScript's "undefined".
            out.append_text(text if isinstance(text, str) else "")
        elif kind == "image":
            if mode == "compacted":
                if out.last_is_text() and not out.last_text_ends_with_newline():
                    out.append_text("\n")
                out.append_text("[image]\n")
            else:
                # Retained mode separates an image from anything before it,
                # even text that already ends in a newline (as the original).
                if out:
                    out.append_text("\n")
                out.push_image(dict(block))
    out.strip_one_trailing_newline()
    return out.to_list()


def format_tool_call(block: Mapping[str, Any]) -> str:
    """Render one ``toolCall`` block as ``name(key=JSON, ...)`` (docs/rules/transcript.md §2.3,
    docs/rules/format.md §2.6).

    Values are compact JSON exactly as JavaScript's ``JSON.stringify`` writes
    them; keys follow JavaScript's own-key order (integer-like keys first,
    ascending). Missing or non-object ``arguments`` render as ``name()``
    (docs/rules/format.md §2.6 item 5: the original threw; we do not).
    """
    name = block.get("name")
    arguments = block.get("arguments")
    if not isinstance(arguments, Mapping):
        arguments = {}
    args = ", ".join(f"{key}={js_stringify(arguments[key])}" for key in js_key_order(arguments))
    return f"{name if isinstance(name, str) else ''}({args})"


def _slice_utf16(text: str, units: int) -> str:
    # Slice on UTF-16 code units like JavaScript's String.prototype.slice; a
    # cut inside a surrogate pair leaves a lone surrogate, as it does in JS.
    raw = text.encode("utf-16-le", errors="surrogatepass")
    return raw[: units * 2].decode("utf-16-le", errors="surrogatepass")


def truncate_tool_result_text(text: str) -> str:
    """Compacted-mode truncation of one tool-result text chunk (docs/rules/transcript.md §2.3).

    A text longer than 16000 UTF-16 code units becomes its first 16000 units
    followed by ``"\\n\\n[... N more characters truncated]"``, N being the
    number of units removed. Shorter texts are returned unchanged.
    """
    length = utf16_len(text)
    if length <= TOOL_RESULT_TRUNCATE_UNITS:
        return text
    removed = length - TOOL_RESULT_TRUNCATE_UNITS
    return (
        _slice_utf16(text, TOOL_RESULT_TRUNCATE_UNITS)
        + f"\n\n[... {removed} more characters truncated]"
    )


def bash_text(message: Mapping[str, Any]) -> str:
    """The user-turn text of a ``bashExecution`` message (docs/rules/transcript.md §2.3 *bashText*).

    ``Ran `command```, then the fenced output or ``(no output)``, then
    ``(command cancelled)`` or ``Command exited with code N`` (for a numeric
    non-zero exit code), then the full-output pointer when the output was
    truncated and a path is set.
    """
    command = message.get("command")
    output = message.get("output")
    text = f"Ran `{command if isinstance(command, str) else ''}`\n"
    if isinstance(output, str) and output:
        text += f"```\n{output}\n```"
    else:
        text += "(no output)"
    exit_code = message.get("exitCode")
    if message.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif (
        isinstance(exit_code, (int, float))
        and not isinstance(exit_code, bool)
        and exit_code != 0
    ):
        text += f"\n\nCommand exited with code {js_number(exit_code)}"
    full_output_path = message.get("fullOutputPath")
    if message.get("truncated") and full_output_path:
        text += f"\n\n[Output truncated. Full output: {full_output_path}]"
    return text


def branch_summary_text(summary: str) -> str:
    """A branch summary wrapped for the model (docs/rules/projection.md P.2)."""
    return BRANCH_SUMMARY_PREFIX + summary + BRANCH_SUMMARY_SUFFIX


def _serialize_assistant(out: ChunkList, message: Mapping[str, Any]) -> None:
    texts: list[str] = []
    thinking: list[str] = []
    calls: list[str] = []
    content = message.get("content")
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            value = block.get("text")
            texts.append(value if isinstance(value, str) else "")
        elif kind == "thinking":
            value = block.get("thinking")
            thinking.append(value if isinstance(value, str) else "")
        elif kind == "toolCall":
            calls.append(format_tool_call(block))
    # Fixed section order, whatever the block order (docs/rules/transcript.md §2.3). An
    # empty join yields no section through push_section's content test.
    if thinking:
        out.push_section(ASSISTANT_THINKING_LABEL, ["\n".join(thinking)])
    if texts:
        out.push_section(ASSISTANT_LABEL, ["\n".join(texts)])
    if calls:
        out.push_section(ASSISTANT_TOOL_CALLS_LABEL, ["; ".join(calls)])


def serialize_messages(messages: Iterable[Mapping[str, Any]], mode: Mode) -> list[Chunk]:
    """Serialize provider-bound messages into chunks (docs/rules/transcript.md §2.3).

    Args:
        messages: messages after :func:`sessiontree.core.projection.convert_to_llm`
            (``user``, ``assistant``, ``toolResult``). Any other role, such as
            ``system``, is skipped: the grammar has no section for it.
        mode: ``"retained"`` or ``"compacted"``.

    Returns:
        A new chunk list; in compacted mode it holds at most one text chunk.
        Tool-result ids, names, ``isError``, ``details`` and assistant
        metadata are never rendered.

    Raises:
        ValueError: an unknown ``mode``.
    """
    _check_mode(mode)
    out = ChunkList()
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        if role == "user":
            out.push_section(USER_LABEL, blocks(message.get("content"), mode))
        elif role == "assistant":
            _serialize_assistant(out, message)
        elif role == "toolResult":
            section = blocks(message.get("content"), mode)
            if mode == "compacted":
                section = [
                    truncate_tool_result_text(c) if isinstance(c, str) else c for c in section
                ]
            out.push_section(TOOL_RESULT_LABEL, section)
    return out.to_list()


def serialize_compacted(messages: Iterable[Mapping[str, Any]]) -> str:
    """The compacted-mode transcript of ``messages`` as one string (docs/rules/transcript.md §2).

    ``""`` when no message has content. See :func:`serialize_messages`.
    """
    # Compacted mode never produces image chunks, so the list is one string.
    return "".join(c for c in serialize_messages(messages, "compacted") if isinstance(c, str))


def compose_boundary_content(summary: str, tail: Sequence[Chunk]) -> list[dict[str, Any]]:
    """Content blocks of a compaction boundary message (docs/rules/projection.md Q.10,
    docs/rules/transcript.md §2.4).

    Starts with one text block ``BOUNDARY_PREFIX + summary``; appends
    ``"\\n\\n"`` when ``tail`` is non-empty and ``summary`` is not ``""``;
    then merges the retained-mode ``tail`` chunks: text onto the last block
    when that is a text block, images as new blocks (copies).

    Returns:
        A new list of content blocks (``{"type": "text", "text": ...}`` and
        image blocks).
    """
    content: list[dict[str, Any]] = [{"type": "text", "text": BOUNDARY_PREFIX + summary}]
    if tail and summary != "":
        content[0]["text"] += "\n\n"
    for chunk in tail:
        if isinstance(chunk, str):
            last = content[-1]
            if last.get("type") == "text":
                last["text"] += chunk
            else:
                content.append({"type": "text", "text": chunk})
        else:
            content.append(dict(chunk))
    return content
