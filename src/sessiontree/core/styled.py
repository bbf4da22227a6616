"""The styled renderings of :mod:`sessiontree.core.render`: an entry-tree row and the
projected context as rich ``Text`` for a terminal, and the same context listing as plain
text. Kept apart so that the plain renderings (JSON, Markdown, ``diff --json``) do not
import rich; the invariants of :mod:`sessiontree.core.render` hold here too (every piece
of session text passes :mod:`sessiontree.core.textsafe` before it is cut).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.text import Text

from sessiontree.core.projection import SessionProjection
from sessiontree.core.render import (
    CONTEXT_BLOCK_CHARS,
    TreeRow,
    entry_kind,
    entry_summary,
    image_placeholder,
)
from sessiontree.core.textsafe import safe_block, safe_line
from sessiontree.core.transcript import bash_text, format_tool_call

__all__ = ["context_renderables", "context_text", "message_body", "tree_row_text"]


def tree_row_text(row: TreeRow, width: int | None = None) -> Text:
    """A styled line for one :class:`TreeRow`: marker, id, kind, summary, label, branch and leaf marks.

    Entries on the active branch carry ``*``; others are dimmed. A branch
    point shows ``[N branches]``; the active leaf ends with ``← active leaf``.

    Args:
        width: when given, the summary is shortened so that the whole line,
            marks included, fits in ``width`` cells (it keeps at least 20).
    """
    base = "" if row.active else "dim"
    head = Text(no_wrap=True)
    head.append(row.lead, style="dim")
    head.append("* " if row.active else "  ", style="bold green" if row.active else "")
    head.append(safe_line(row.entry.get("id")), style=f"cyan {base}".strip())
    head.append(" ")
    head.append(safe_line(entry_kind(row.entry)), style=f"bold {base}".strip())
    head.append(": ", style=base)
    tail = Text(no_wrap=True)
    if row.label:
        tail.append(f"  [label: {safe_line(row.label)}]", style="bold magenta")
    if row.children > 1:
        tail.append(f"  [{row.children} branches]", style="bold yellow")
    if row.leaf:
        tail.append("  ← active leaf", style="bold green")
    limit = 160 if width is None else max(20, width - head.cell_len - tail.cell_len)
    head.append(entry_summary(row.entry, limit), style=base)
    head.append_text(tail)
    return head


def _clip(text: str, limit: int | None) -> str:
    text = safe_block(text)
    if limit is None or len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more characters; --full shows everything)"


def message_body(message: Mapping[str, Any], limit: int | None = CONTEXT_BLOCK_CHARS) -> Text:
    """The content of one message as styled text: text, thinking, tool calls, tool results, images.

    Args:
        limit: characters kept per block, ``None`` for everything.
    """
    out = Text()

    def add(part: str, style: str = "") -> None:
        if out.plain:
            out.append("\n")
        out.append(part, style=style)

    role = message.get("role")
    content = message.get("content")
    if role == "bashExecution":
        add(_clip(bash_text(message), limit))
    elif role == "branchSummary":
        summary = message.get("summary")
        add(_clip(summary if isinstance(summary, str) else "", limit))
    elif isinstance(content, str):
        add(_clip(content, limit))
    elif isinstance(content, list):
        for block in content:
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                add(_clip(block["text"], limit))
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                add("(thinking) " + _clip(block["thinking"], limit), "dim italic")
            elif kind == "toolCall":
                add("→ " + _clip(format_tool_call(block), limit), "yellow")
            elif kind == "image":
                add(image_placeholder(block), "dim")
    if role == "system":
        sections = message.get("sections")
        if isinstance(sections, Mapping):
            for name, value in sections.items():
                add(f"[section {safe_line(name)}] " + ("(deleted)" if value is None else _clip(str(value), limit)),
                    "dim")
        for key in ("toolsAdded", "toolsRemoved"):
            tools = message.get(key)
            if isinstance(tools, list) and tools:
                names = [t.get("name") if isinstance(t, Mapping) else str(t) for t in tools]
                add(f"{key}: {', '.join(safe_line(n) for n in names)}", "dim")
    if not out.plain:
        out.append("(no content)", style="dim")
    return out


def _message_title(index: int, message: Mapping[str, Any], entry_id: Any) -> Text:
    role = message.get("role") if isinstance(message.get("role"), str) else "?"
    title = Text()
    title.append(f"#{index} ", style="dim")
    title.append(safe_line(role), style="bold")
    if role == "toolResult":
        title.append(f" {safe_line(message.get('toolName'))}")
        if message.get("isError"):
            title.append(" (error)", style="red")
    elif role == "custom":
        title.append(f" {safe_line(message.get('customType'))}")
    elif role == "assistant":
        stop = message.get("stopReason")
        if stop and stop != "stop":
            title.append(f" ({safe_line(stop)})", style="dim")
    title.append(f"  [{safe_line(entry_id)}]", style="cyan dim")
    return title


def _context_parts(projection: SessionProjection, session_id: str, leaf_id: str | None,
                   limit: int | None) -> tuple[Text, list[tuple[Text, Text]]]:
    model = projection.model
    head = Text()
    head.append("session ", style="dim")
    head.append(safe_line(session_id), style="cyan")
    head.append("  leaf ", style="dim")
    head.append(safe_line(leaf_id), style="cyan")
    head.append("\nmodel ", style="dim")
    head.append(safe_line(f"{model.get('provider')}/{model.get('modelId')}") if model else "(none)")
    head.append("  thinking ", style="dim")
    head.append(safe_line(projection.thinking_level))
    head.append("  context window ", style="dim")
    head.append(str(projection.context_window) if projection.context_window else "(default)")
    head.append("  messages ", style="dim")
    head.append(str(len(projection.messages)))
    items: list[tuple[Text, Text]] = []
    for projected in projection.entries:
        for message in projected.messages:
            title = _message_title(len(items) + 1, message, projected.source_entry.get("id"))
            items.append((title, message_body(message, limit)))
    return head, items


def context_renderables(projection: SessionProjection, session_id: str, leaf_id: str | None,
                        *, limit: int | None = CONTEXT_BLOCK_CHARS) -> list[RenderableType]:
    """The projection as a readable listing for a terminal: a settings line, then every
    message (numbered, with its source entry id) and its content, indented and wrapped.

    Args:
        projection: from ``build_session_projection()``.
        session_id: shown in the first line.
        leaf_id: the leaf the projection was built for.
        limit: characters per content block, ``None`` for everything.
    """
    head, items = _context_parts(projection, session_id, leaf_id, limit)
    out: list[RenderableType] = [head]
    for title, body in items:
        out += [Text(""), Group(title, Padding(body, (0, 0, 0, 2), expand=False))]
    return out


def context_text(projection: SessionProjection, session_id: str, leaf_id: str | None,
                 *, limit: int | None = CONTEXT_BLOCK_CHARS) -> str:
    """The same listing as :func:`context_renderables` as plain text, lines not wrapped
    (for pipes and files; fast on long sessions)."""
    head, items = _context_parts(projection, session_id, leaf_id, limit)
    out = [head.plain]
    for title, body in items:
        out += ["", title.plain]
        out += ["  " + line if line else "" for line in body.plain.split("\n")]
    return "\n".join(out) + "\n"
