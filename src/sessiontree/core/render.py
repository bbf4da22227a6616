"""Human-readable renderings of sessions: one-line entry summaries, the
drawn entry tree, the projected context, and a Markdown transcript. The styled
(rich) forms of a tree row and of the context listing are in
:mod:`sessiontree.core.styled`, so that the plain renderings (JSON, Markdown, a
``diff --json``) do not import rich.

Presentation only. What an entry *means* (the active branch, the leaf,
labels, the projection) is computed by the library (:mod:`sessiontree.core.tree`,
:mod:`sessiontree.core.projection`, :class:`sessiontree.session.manager.SessionManager`);
this module only turns those results into text, so the command line and any
other front end show the same thing.

Invariants:

* Nothing here modifies an entry or a message.
* Nothing recurses on the depth of a tree or the length of a branch: the
  tree is drawn with an explicit stack, so a 100,000-entry chain draws like a
  short one, and a straight chain does not indent further at each step.
* Renderings tolerate malformed content (missing fields, wrong types) and
  never raise on it: a session that loads can always be shown.
* Every piece of session text in a human-readable rendering (the tree, the
  context listing, the Markdown transcript) has passed through
  :mod:`sessiontree.core.textsafe` before it is cut to a width: one-line fields
  through ``safe_line``, text blocks through ``safe_block``. No control,
  bidi or invisible character of a session reaches the output raw, and no
  cut can split an escape sequence. The ``*_dict`` forms keep raw values
  (their JSON spelling is escaped by the caller, see ``safe_json_text``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from sessiontree.core.projection import (
    HistoricalProjection,
    SessionProjection,
    is_active_compaction,
    is_retired_record,
)
from sessiontree.core.textsafe import safe_block, safe_line
from sessiontree.core.transcript import bash_text, format_tool_call
from sessiontree.core.tree import TreeNode
from sessiontree.core.usage import BILLED_TYPES, UsageRecord, records_from_entry

__all__ = [
    "RETIRED_NOTE",
    "TreeRow",
    "context_dict",
    "entry_kind",
    "entry_summary",
    "historical_context_dict",
    "historical_note",
    "markdown_transcript",
    "retired_record_text",
    "tree_row_dict",
    "tree_rows",
]

_SPACES = re.compile(r"\s+")


#: Per-block character budget of the human-readable context view.
CONTEXT_BLOCK_CHARS = 2000


def _is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, with the usual case (a parsed ``dict``) decided
    without the abstract-class check, which costs more than the rest of a block's rendering."""
    return value.__class__ is dict or isinstance(value, Mapping)


def _one_line(text: str, limit: int = 200) -> str:
    text = safe_line(_SPACES.sub(" ", text).strip())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _content_text(content: Any, *, images: bool = True) -> str:
    """The text of a message ``content`` (string or blocks), images as placeholders."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if not _is_mapping(block):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "image" and images:
            parts.append(image_placeholder(block))
    return "\n".join(parts)


def image_placeholder(block: Mapping[str, Any]) -> str:
    """``[image MIME, N bytes]`` for an ``image`` block (its MIME type made safe; the size
    estimated from the base64 length), what every rendering shows instead of the data."""
    mime = safe_line(block["mimeType"]) if isinstance(block.get("mimeType"), str) else "image"
    data = block.get("data")
    size = f", {len(data) * 3 // 4} bytes" if isinstance(data, str) else ""
    return f"[image {mime}{size}]"


def _blocks(content: Any, kind: str) -> list[Mapping[str, Any]]:
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, Mapping) and b.get("type") == kind]


def entry_kind(entry: Mapping[str, Any]) -> str:
    """A short kind for an entry: the message role for ``message`` entries, else the entry type."""
    if entry.get("type") == "message":
        message = entry.get("message")
        role = message.get("role") if isinstance(message, Mapping) else None
        return role if isinstance(role, str) else "message"
    kind = entry.get("type")
    return kind if isinstance(kind, str) else "?"


def _message_summary(message: Mapping[str, Any]) -> str:
    role = message.get("role")
    content = message.get("content")
    if role == "assistant":
        parts = [_content_text(content)]
        parts += ["→ " + format_tool_call(b) for b in _blocks(content, "toolCall")]
        text = " ".join(p for p in parts if p.strip())
        if not text:
            thinking = " ".join(b["thinking"] for b in _blocks(content, "thinking")
                                if isinstance(b.get("thinking"), str))
            text = f"(thinking) {thinking}" if thinking.strip() else ""
        stop = message.get("stopReason")
        if stop in ("aborted", "error", "length"):
            text = f"[{stop}] {text}".strip()
        return text or "(empty)"
    if role == "toolResult":
        name = message.get("toolName") if isinstance(message.get("toolName"), str) else "tool"
        flag = " (error)" if message.get("isError") else ""
        return f"{name}{flag}: {_content_text(content)}"
    if role == "bashExecution":
        command = message.get("command") if isinstance(message.get("command"), str) else ""
        return f"$ {command}"
    if role == "branchSummary":
        summary = message.get("summary")
        return summary if isinstance(summary, str) else ""
    if role == "custom":
        custom = message.get("customType") if isinstance(message.get("customType"), str) else "custom"
        return f"{custom}: {_content_text(content)}"
    if role == "system":
        text = _content_text(content)
        sections = message.get("sections")
        extra = f" (sections: {', '.join(sections)})" if isinstance(sections, Mapping) and sections else ""
        return (text or "system state change") + extra
    return _content_text(content)


def entry_summary(entry: Mapping[str, Any], limit: int = 200) -> str:
    """One line describing an entry, for trees and lists (whitespace collapsed, clipped to ``limit``)."""
    if is_retired_record(entry):
        return _one_line(retired_record_text(entry), limit)
    kind = entry.get("type")
    text: str
    if kind == "message":
        message = entry.get("message")
        text = _message_summary(message) if isinstance(message, Mapping) else ""
    elif kind == "model_change":
        text = f"{entry.get('provider')}/{entry.get('modelId')}"
    elif kind == "thinking_level_change":
        text = str(entry.get("thinkingLevel"))
    elif kind == "context_window_change":
        text = f"{entry.get('contextWindow')} tokens"
    elif kind == "compaction":
        if is_active_compaction(entry):
            kept = entry.get("firstKeptEntryId")
            text = f"verbatim-lines boundary, kept from {kept}" if kept else "verbatim-lines boundary, nothing kept"
            if isinstance(entry.get("tokensBefore"), int):
                text += f", {entry['tokensBefore']} tokens before"
    elif kind == "context_edit":
        target = entry.get("targetId")
        replacement = entry.get("replacement")
        if replacement is None:
            text = f"omit {target}"
        else:
            body = _content_text(replacement.get("content")) if isinstance(replacement, Mapping) else ""
            text = f"replace {target}: {body}"
    elif kind == "branch_summary":
        summary = entry.get("summary")
        text = f"from {entry.get('fromId')}: {summary if isinstance(summary, str) else ''}"
    elif kind == "custom":
        text = str(entry.get("customType"))
    elif kind == "custom_message":
        text = f"{entry.get('customType')}: {_content_text(entry.get('content'))}"
    elif kind == "label":
        label = entry.get("label")
        text = f"{entry.get('targetId')} = {label}" if isinstance(label, str) and label else f"clear {entry.get('targetId')}"
    elif kind == "session_info":
        name = entry.get("name")
        text = f"name: {name}" if isinstance(name, str) and name.strip() else "name cleared"
    elif kind == "session_summary":
        summary = entry.get("summary")
        text = summary if isinstance(summary, str) else ""
    elif kind == "leaf":
        text = f"leaf → {entry.get('targetId')}"
    else:
        text = "(entry type not known to sessiontree; kept verbatim)"
    return _one_line(text, limit)


# --------------------------------------------------------------------------- retired records

#: How every view marks a retired record
#: (docs/rules/format.md seed:compaction-entry: "parseable and visible to
#: audit/export tools" but "inert in active LLM context").
RETIRED_NOTE = "archival; not in the model context"


def retired_record_text(entry: Mapping[str, Any]) -> str:
    """A one-paragraph description of a retired record (see
    :func:`sessiontree.core.projection.is_retired_record`), marked archival.

    ``compaction`` (summary kind): what it kept and its summary;
    ``context_compaction``: what it deleted; ``compactionSummary`` message:
    its summary. Never raises on malformed fields.
    """
    kind = entry.get("type")
    if kind == "compaction":
        kept = entry.get("firstKeptEntryId")
        facts = [f"kept from {kept}" if isinstance(kept, str) else "nothing kept"]
        if isinstance(entry.get("tokensBefore"), int) and not isinstance(entry.get("tokensBefore"), bool):
            facts.append(f"{entry['tokensBefore']} tokens before")
        summary = entry.get("summary") if isinstance(entry.get("summary"), str) else ""
        return f"retired compaction ({RETIRED_NOTE}; {', '.join(facts)}): {summary}"
    if kind == "context_compaction":
        targets = entry.get("deletedTargets")
        targets = targets if isinstance(targets, list) else []
        named = [str(t.get("entryId")) for t in targets if isinstance(t, Mapping) and t.get("kind") == "entry"]
        other = len(targets) - len(named)
        parts = [f"entries {', '.join(named)}"] if named else []
        if other:
            parts.append(f"{other} other target{'s' if other != 1 else ''}")
        deleted = "; ".join(parts) if parts else "nothing"
        return f"retired context_compaction ({RETIRED_NOTE}): deleted {deleted}"
    message = entry.get("message")
    summary = message.get("summary") if isinstance(message, Mapping) else None
    return f"retired compaction summary ({RETIRED_NOTE}): {summary if isinstance(summary, str) else ''}"


def _md_retired(entry: Mapping[str, Any]) -> list[str]:
    """Markdown lines for a retired record: an archival note, then its text fenced."""
    kind = entry.get("type")
    note = f"*Retired record `{entry.get('id')}` ({RETIRED_NOTE}): "
    if kind == "compaction":
        kept = entry.get("firstKeptEntryId")
        note += ("an older agent compacted the turns above into this summary" +
                 (f" and kept the turns from `{kept}` on" if isinstance(kept, str) else "") +
                 "; `sessiontree context --historical` rebuilds what it sent.*")
        summary = entry.get("summary")
        body = summary if isinstance(summary, str) else ""
    elif kind == "context_compaction":
        note += "an older agent hid these targets from its context.*"
        body = retired_record_text(entry).split(": ", 1)[-1]
    else:
        note += "a compaction summary message of an older agent.*"
        message = entry.get("message")
        summary = message.get("summary") if isinstance(message, Mapping) else None
        body = summary if isinstance(summary, str) else ""
    # The note quotes the record's own ids: escaped here, as every fragment is (see markdown_transcript).
    return ["---", "", _md_block(note), "", _fence(body), "", "---", ""]


# --------------------------------------------------------------------------- tree


@dataclass(frozen=True)
class TreeRow:
    """One drawn line of an entry tree.

    Attributes:
        lead: the connector drawing before the entry (``"│  ├─ "`` and the like).
        entry: the entry of this line.
        label: its current label, if any.
        children: how many children it has (more than one: a branch point).
        active: whether it lies on the active branch (root to leaf).
        leaf: whether it is the active leaf.
        depth: how many branch points lie above it (0 on the first line of descent).
    """

    lead: str
    entry: Mapping[str, Any]
    label: str | None
    children: int
    active: bool
    leaf: bool
    depth: int


def tree_rows(roots: Sequence[TreeNode], leaf_id: str | None, active_ids: Iterable[str]) -> list[TreeRow]:
    """Lay out a forest (from ``get_tree()``) as drawable rows, in pre-order.

    A node with one child continues straight down at the same indentation;
    the children of a branch point are drawn with ``├─``/``└─`` connectors and
    their subtrees indented under them. Iterative: depth does not matter.

    Args:
        roots: the tree roots.
        leaf_id: the active leaf id (marked), or ``None``.
        active_ids: ids of the entries on the active branch.
    """
    active = set(active_ids)
    rows: list[TreeRow] = []
    # (node, lead for this node, prefix for its descendants, depth)
    stack: list[tuple[TreeNode, str, str, int]] = [(root, "", "", 0) for root in reversed(roots)]
    while stack:
        node, lead, prefix, depth = stack.pop()
        entry_id = node.entry.get("id")
        rows.append(TreeRow(lead=lead, entry=node.entry, label=node.label, children=len(node.children),
                            active=entry_id in active, leaf=entry_id == leaf_id, depth=depth))
        children = node.children
        if len(children) == 1:
            stack.append((children[0], prefix, prefix, depth))
            continue
        last = len(children) - 1
        for index in range(last, -1, -1):
            is_last = index == last
            stack.append((children[index], prefix + ("└─ " if is_last else "├─ "),
                          prefix + ("   " if is_last else "│  "), depth + 1))
    return rows


def tree_row_dict(row: TreeRow) -> dict[str, Any]:
    """JSON-ready form of a :class:`TreeRow` (flat; ``parentId`` gives the structure)."""
    return {
        "id": row.entry.get("id"),
        "parentId": row.entry.get("parentId"),
        "type": row.entry.get("type"),
        "kind": entry_kind(row.entry),
        "summary": entry_summary(row.entry),
        "label": row.label,
        "children": row.children,
        "active": row.active,
        "leaf": row.leaf,
        "timestamp": row.entry.get("timestamp"),
    }


# --------------------------------------------------------------------------- context


def context_dict(projection: SessionProjection, session_id: str, leaf_id: str | None) -> dict[str, Any]:
    """JSON-ready form of a projection: settings, the messages, and which entry each came from."""
    model = projection.model
    return {
        "sessionId": session_id,
        "leafId": leaf_id,
        "thinkingLevel": projection.thinking_level,
        "model": dict(model) if model else None,
        "contextWindow": projection.context_window,
        "systemMessage": projection.system_message,
        "messages": projection.messages,
        "entries": [
            {"id": p.source_entry.get("id"), "type": p.source_entry.get("type"), "messageCount": len(p.messages)}
            for p in projection.entries
        ],
    }


# --------------------------------------------------------------------------- markdown
#
# Markdown output is for reading, in a terminal, an editor or a viewer: it is
# always sanitised, whether it goes to a terminal, a pipe or a file (a file
# with raw ESC is as hostile when it is cat-ed). Session text enters it only
# through _md_block (multi-line text, newline and tab kept), _md_inline (one
# line: headings, list items, notes) and _code_span; a retired record's note and
# a turn line pass _md_block whole. Escaping is per character, so the document
# is as safe as its fragments and is not scanned again. The faithful,
# byte-for-byte copy of a session is the JSONL export.


def _md_block(text: str) -> str:
    """Multi-line session text as Markdown prose: :func:`safe_block`, then :func:`_md_html_safe`."""
    return _md_html_safe(safe_block(text))


def _md_inline(value: Any) -> str:
    """A one-line field: unsafe characters (newline included) escaped, so a
    value can never start a heading or a new block of its own; HTML as text
    (:func:`_md_html_safe`)."""
    return _md_html_safe(safe_line(value))


# What would start raw HTML or a character reference in CommonMark: "<" before a tag
# name, "/", "!" or "?"; "&" that begins a named or numeric reference. A lone "<" or "&"
# ("a < b", "x && y") is shown as it is by every renderer, and stays readable in the file.
_HTML_START = re.compile(r"<(?=[A-Za-z/!?])|&(?=#[0-9]{1,7};|#[xX][0-9a-fA-F]{1,6};|[A-Za-z][A-Za-z0-9]{0,31};)")
# An inline code span: a run of backticks (not after a backtick or a backslash, which
# would escape it) up to the next run of the same length. Approximate on purpose: where
# it disagrees with a renderer it finds fewer spans, so it escapes more, never less.
_CODE_SPAN = re.compile(r"(?<![`\\])(`+)(?!`).+?(?<!`)\1(?!`)", re.S)
# A line opening or closing a fenced code block: up to three spaces, three or more ` or ~.
_FENCE_LINE = re.compile(r" {0,3}(`{3,}|~{3,})")


def _escape_html_starts(text: str) -> str:
    return _HTML_START.sub(lambda m: "&lt;" if m.group() == "<" else "&amp;", text)


def _outside_code_spans(text: str) -> str:
    out: list[str] = []
    pos = 0
    for match in _CODE_SPAN.finditer(text):
        out.append(_escape_html_starts(text[pos:match.start()]))
        out.append(match.group())
        pos = match.end()
    out.append(_escape_html_starts(text[pos:]))
    return "".join(out)


def _md_html_safe(text: str) -> str:
    """Markdown prose with HTML shown as text: outside fenced code blocks and inline code
    spans, a ``<`` that would open a tag becomes ``&lt;`` and an ``&`` that would start a
    character reference becomes ``&amp;``, so a previewer that renders HTML in Markdown
    runs none from the session (``<script>``, ``<img onerror=...>``). Code keeps its text:
    every renderer shows code literally (docs/terminal-output.md, "Exports")."""
    if "<" not in text and "&" not in text:
        return text
    if "```" not in text and "~~~" not in text:
        return _outside_code_spans(text)
    out: list[str] = []
    prose: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        match = _FENCE_LINE.match(line)
        if fence is None:
            # A backtick fence's info string cannot hold a backtick (then it is inline code).
            if match and not (match.group(1)[0] == "`" and "`" in line[match.end():]):
                if prose:
                    out.append(_outside_code_spans("\n".join(prose)))
                    prose = []
                fence = match.group(1)
                out.append(line)
            else:
                prose.append(line)
        else:
            out.append(line)
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) \
                    and not line[match.end():].strip():
                fence = None
    if prose:
        out.append(_outside_code_spans("\n".join(prose)))
    return "\n".join(out)


def _longest_backticks(text: str) -> int:
    """The longest run of backticks in ``text``: the largest ``n`` with ``n`` backticks in a
    row somewhere in it (0 without one). A few substring searches, each a fast scan in C,
    instead of listing every run with a regular expression: runs longer than three are rare."""
    longest = 0
    while "`" * (longest + 1) in text:
        longest += 1
    return longest


def _code_span(value: Any) -> str:
    """``value`` as inline code, delimited by more backticks than it contains."""
    text = safe_line(value)
    longest = _longest_backticks(text)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _fence(text: str, info: str = "") -> str:
    text = safe_block(text)  # code: shown literally by every renderer, so no HTML escaping
    longest = _longest_backticks(text)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{text}\n{ticks}"


def _md_content(content: Any) -> list[str]:
    parts: list[str] = []
    if isinstance(content, str):
        if content.strip():
            parts.append(_md_block(content))
        return parts
    for block in content if isinstance(content, list) else []:
        if not _is_mapping(block):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str) and block["text"].strip():
            parts.append(_md_block(block["text"]))
        elif kind == "thinking" and isinstance(block.get("thinking"), str) and block["thinking"].strip():
            quoted = "\n".join("> " + line for line in _md_block(block["thinking"]).split("\n"))
            parts.append("> *Thinking*\n>\n" + quoted)
        elif kind == "toolCall":
            parts.append("**Tool call:**\n\n" + _fence(format_tool_call(block)))
        elif kind == "image":
            parts.append(f"*{_md_inline(image_placeholder(block))}*")
    return parts


def _md_message(message: Mapping[str, Any]) -> tuple[str, list[str]]:
    role = message.get("role")
    content = message.get("content")
    if role == "user":
        return "User", _md_content(content)
    if role == "assistant":
        parts = _md_content(content)
        stop = message.get("stopReason")
        if stop in ("aborted", "error", "length"):
            reason = message.get("errorMessage")
            parts.append(f"*(turn ended: {stop}{': ' + _md_inline(reason) if isinstance(reason, str) else ''})*")
        return "Assistant", parts
    if role == "toolResult":
        name = message.get("toolName") if isinstance(message.get("toolName"), str) else "tool"
        title = f"Tool result: {_md_inline(name)}" + (" (error)" if message.get("isError") else "")
        text = _content_text(content)
        return title, [_fence(text)] if text else ["*(no output)*"]
    if role == "bashExecution":
        return "Shell", [_fence(bash_text(message))]
    if role == "branchSummary":
        summary = message.get("summary")
        return "Branch summary", [_md_block(summary)] if isinstance(summary, str) else []
    if role == "custom":
        return f"Extension message: {_md_inline(message.get('customType'))}", _md_content(content)
    if role == "system":
        return "System", _md_content(content)
    return _md_inline(role), _md_content(content)


def _turn_lines(branch: Sequence[Mapping[str, Any]],
                cost: Callable[[list[UsageRecord]], str] | None) -> dict[int, str]:
    """``{index of a user message in branch: its turn's line}``: one turn per user message,
    up to the next one, with its counts as the viewer shows them (docs/viewer.md, "Turns"):
    assistant messages (the parts of one response, one ``responseId``, count once),
    thoughts, tool calls, tokens of its billed calls (annotations' ``usage`` entries
    included) and, with ``cost``, their cost."""
    lines: dict[int, str] = {}
    starts = [i for i, e in enumerate(branch)
              if e.get("type") == "message" and _is_mapping(e.get("message")) and e["message"].get("role") == "user"]
    for number, start in enumerate(starts, 1):
        stop = starts[number] if number < len(starts) else len(branch)
        responses: set[Any] = set()
        thoughts = calls = 0
        records: list[UsageRecord] = []
        for index in range(start, stop):
            entry = branch[index]
            kind = entry.get("type")
            if kind not in BILLED_TYPES:
                continue  # no billed record, not an assistant message
            message = entry.get("message")
            if kind == "message" and message.__class__ is dict and message.get("role") != "assistant":
                # A user message bills nothing, a tool result only its own usage object
                # (records_from_entry's rule), so most need no call.
                if message.get("role") == "toolResult" and isinstance(message.get("usage"), dict):
                    records.extend(records_from_entry(entry if isinstance(entry, dict) else dict(entry),
                                                      keyed=False))
                continue
            records.extend(records_from_entry(entry if isinstance(entry, dict) else dict(entry), keyed=False))
            if kind != "message" or not _is_mapping(message) or message.get("role") != "assistant":
                continue
            response = message.get("responseId")
            responses.add(response if isinstance(response, str) and response else ("entry", index))
            content = message.get("content")
            for block in content if isinstance(content, list) else ():
                if _is_mapping(block):
                    kind = block.get("type")
                    thoughts += kind == "thinking"
                    calls += kind == "toolCall"
        parts = [f"{len(responses)} assistant message{'' if len(responses) == 1 else 's'}"]
        if thoughts:
            parts.append(f"{thoughts} thought{'' if thoughts == 1 else 's'}")
        parts.append(f"{calls} tool call{'' if calls == 1 else 's'}")
        tokens = sum(r.total_tokens for r in records)
        if tokens:
            parts.append(f"{tokens:,} tokens")
            price = cost(records) if cost is not None else ""
            if price:
                parts.append(price)
        lines[start] = _md_block(f"**Turn {number}:** " + " · ".join(parts))  # the price is the caller's text
    return lines


def _raw_lines(entry: Mapping[str, Any]) -> list[str]:
    """The verbatim source record of an entry of another agent's file (``export --raw``)."""
    foreign = entry.get("foreign")
    if not isinstance(foreign, Mapping):
        return []
    raw = foreign.get("raw")
    text = raw.strip("\r\n") if isinstance(raw, str) else (
        "(not UTF-8: kept as base64)" if isinstance(foreign.get("rawBase64"), str) else None)
    if text is None:
        return []
    return [f"*Source record, line {_md_inline(foreign.get('line'))}:*", "", _fence(text, "json"), ""]


def markdown_transcript(header: Mapping[str, Any], branch: Sequence[Mapping[str, Any]],
                        title: str | None = None, *, raw: bool = False,
                        cost: Callable[[list[UsageRecord]], str] | None = None) -> str:
    """A readable Markdown transcript of one branch (root to leaf): roles, text, tool calls, results.

    Every entry of the branch is shown, including those a compaction boundary
    hides from the model (the boundary itself appears as a note where it
    happened). Retired records (summary compactions, ``context_compaction``,
    ``compactionSummary`` messages) appear where they happened, marked as
    archival and not part of the model context. State changes (model,
    thinking level) appear as short notes; labels, names and extension state
    are left out.

    The result is always sanitised (:mod:`sessiontree.core.textsafe`): control,
    bidi and invisible characters of the session are shown as escapes, text
    blocks keep their newlines and tabs, one-line fields (title, headings,
    notes) are kept on one line. It is safe to print to a terminal and to
    ``cat`` from a file; ``export --format jsonl`` is the verbatim copy.

    Args:
        header: the session header.
        branch: the active branch, root first (``SessionManager.get_branch()``).
        title: the document title; default: the session id.
        raw: also give each entry's verbatim source record (``foreign.raw``, the line of
            another agent's file it was read from), annotations' included; left out by
            default (docs/viewer.md, "Export").
        cost: prices a turn's billed records for its turn line (``"~$0.12"``, ``""`` for
            none); the CLI passes the viewer's rule (this layer cannot price).

    Each user message starts a turn, announced by a line with the turn's counts
    (:func:`_turn_lines`).
    """
    lines = [f"# {_md_inline(title or header.get('id'))}", ""]
    lines.append(f"- Session: {_code_span(header.get('id'))}")
    if header.get("cwd"):
        lines.append(f"- Project: {_code_span(header.get('cwd'))}")
    if header.get("createdAt"):
        lines.append(f"- Created: {_md_inline(header.get('createdAt'))}")
    if header.get("parentSessionId"):
        lines.append(f"- Forked from: {_code_span(header.get('parentSessionId'))}")
    lines.append("")
    turns = _turn_lines(branch, cost)
    for index, entry in enumerate(branch):
        kind = entry.get("type")
        if index in turns:
            lines += ["---", "", turns[index], ""]
        if raw:
            # After the entry's own rendering (below) would split fences from their
            # entry; given first, as the record the entry was read from.
            lines += _raw_lines(entry)
        message = entry.get("message") if kind == "message" else None
        # The usual entry, a message held in a dict, is retired only as a compactionSummary:
        # is_retired_record's rule, decided here without its abstract-class check per entry.
        if (message.get("role") == "compactionSummary" if message.__class__ is dict
                else is_retired_record(entry)):
            lines += _md_retired(entry)
        elif kind == "message" and _is_mapping(message):
            heading, parts = _md_message(message)
            if not parts:
                continue
            lines += [f"## {heading}", "", "\n\n".join(parts), ""]
        elif kind == "custom_message":
            parts = _md_content(entry.get("content"))
            if parts:
                lines += [f"## Extension message: {_md_inline(entry.get('customType'))}", "", "\n\n".join(parts), ""]
        elif kind == "branch_summary":
            summary = entry.get("summary")
            lines += ["## Branch summary", "", _md_block(summary) if isinstance(summary, str) else "", ""]
        elif kind == "compaction" and is_active_compaction(entry):
            summary = entry.get("summary")
            summary = summary if isinstance(summary, str) else ""
            lines += ["---", "", "*Context compacted here. The model sees this verbatim transcript"
                      " (plus the turns kept after it) instead of the turns above:*", "",
                      _fence(summary), "", "---", ""]
        elif kind == "model_change":
            model = f"{entry.get('provider')}/{entry.get('modelId')}"
            lines += [f"*Model: {_md_inline(model)}*", ""]
        elif kind == "thinking_level_change":
            lines += [f"*Thinking level: {_md_inline(entry.get('thinkingLevel'))}*", ""]
    # Every fragment of session text went through textsafe above (_md_block, _md_inline,
    # _code_span, _fence; a turn line through _md_block), the rest is literal text. The
    # escaping is per character, so the joined document is as safe as its fragments: a
    # second pass over the whole document (0.9 s for a 100,000-entry branch) would change
    # nothing (tests/core/test_export_golden.py, tests/test_terminal_safety.py).
    # The trailing newlines stripped to one on the last lines, not on the joined document:
    # strip and append would each copy it whole (140 MB for a 100,000-entry branch).
    while lines and not lines[-1].rstrip("\n"):
        lines.pop()
    if not lines:
        return "\n"
    lines[-1] = lines[-1].rstrip("\n")
    lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------- historical context


def historical_note(historical: HistoricalProjection) -> str:
    """The label every human view of a historical context starts with (``context --historical``)."""
    compaction = historical.compaction
    if compaction is None:
        return ("HISTORICAL VIEW: this branch has no retired compaction after its latest active "
                "boundary, so the context below is the same as the current one.")
    kept = (f"the {historical.kept_entries} entries kept from {historical.first_kept_entry_id}"
            if historical.first_kept_entry_id else "no kept entries")
    return (f"HISTORICAL VIEW (archival; not what a current agent sends): the context as the agent that "
            f"wrote retired compaction {compaction.get('id')} rebuilt it: its summary, then {kept}, "
            f"then the entries after it.")


def agent_view_note(historical: HistoricalProjection, agent_format: int) -> str:
    """The label of a context shown by default as the agent sent it: a session its agent
    wrote in format ``agent_format`` (< 4), whose own summary compaction shaped what the
    agent sent (``context`` and the viewer's model's view, docs/sync.md "What pi sent")."""
    compaction = historical.compaction
    kept = (f"the {historical.kept_entries} entries kept from {historical.first_kept_entry_id}"
            if historical.first_kept_entry_id else "no kept entries")
    name = compaction.get("id") if compaction is not None else "none"
    return (f"WHAT THE AGENT SENT: this session was written in format {agent_format} (pi), whose compaction "
            f"{name} stands for the earlier turns: its summary, then {kept}, then the entries after it. "
            f"--current shows the format-4 rule (such compactions are archival, the whole history is sent).")


def foreign_view_note(historical: HistoricalProjection, agent: str) -> str:
    """The label of a context shown by default as another agent continued it after its own
    compaction (a Claude Code session: its summary message, then what follows;
    docs/agents/claude-code.md, "What the model saw")."""
    compaction = historical.compaction
    name = compaction.get("id") if compaction is not None else "none"
    return (f"WHAT THE AGENT SENT: {agent} continued after its compaction {name} with its summary, then the "
            f"entries after it. --current shows the format-4 rule (such compactions are archival, the whole "
            f"history is shown).")


def historical_context_dict(historical: HistoricalProjection, session_id: str, leaf_id: str | None) -> dict[str, Any]:
    """:func:`context_dict` of a historical context, with a ``historical`` object saying so."""
    data = context_dict(historical.projection, session_id, leaf_id)
    compaction = historical.compaction
    data["historical"] = {
        "rule": "retired-summary-compaction" if compaction is not None else "none",
        "compactionId": compaction.get("id") if compaction is not None else None,
        "firstKeptEntryId": historical.first_kept_entry_id,
        "keptEntries": historical.kept_entries,
        "note": historical_note(historical),
    }
    return data
