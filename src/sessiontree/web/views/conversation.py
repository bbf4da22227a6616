"""The session page's conversation pane: windows of items of one branch, raw or the model's view."""

from __future__ import annotations

import base64
import binascii
import functools
import json as jsonlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from sessiontree.core.projection import is_active_compaction, is_retired_record
from sessiontree.core.render import RETIRED_NOTE, entry_kind, entry_summary, retired_record_text
from sessiontree.core.transcript import bash_text
from sessiontree.core.usage import UsageRecord, records_from_entry
from sessiontree.errors import EntryNotFoundError
from sessiontree.session.manager import SessionManager
from sessiontree.session.reading import ReadOnlySession, readonly_of_manager
from sessiontree.web.views.markdown import markdown_html
from sessiontree.web.views.turns import (
    SUBAGENT_TOOLS,
    SubagentStep,
    Turn,
    annotation_label,
    build_turns,
    fold_annotations,
    is_annotation,
    result_agent_id,
    subagent_steps,
)
from sessiontree.web.views.units import Unit, model_units, raw_units

__all__ = [
    "FOLD_CHARS",
    "FOLD_LINES",
    "MAX_BLOCK_CHARS",
    "PAIRING_LOOKAHEAD",
    "WINDOW_ITEMS",
    "Conversation",
    "Item",
    "Part",
    "build_branch_window",
    "build_conversation",
]

#: Lines and characters above which a text block is folded.
FOLD_LINES = 12
FOLD_CHARS = 1500
#: Characters of one block shown at most; the rest is cut with a note.
MAX_BLOCK_CHARS = 200_000
#: Conversation items rendered at once; earlier ones load on demand.
WINDOW_ITEMS = 200

_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_BASE64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")


@dataclass
class Part:
    """One displayable piece of a conversation item.

    Attributes:
        kind: ``"markdown"`` (``html`` is rendered Markdown), ``"text"``
            (plain text, shown preformatted), ``"thinking"``, ``"image"``
            (``src`` is a ``data:`` URL, or ``None`` with ``text`` saying why),
            ``"tool"`` (a tool call: ``name``, ``text`` = its arguments as
            JSON, ``result`` = the paired result :class:`Item` or ``None``),
            ``"note"``.
        folded: whether the part starts folded (long text, thinking).
        lines: number of lines of ``text``.
    """

    kind: str
    text: str = ""
    html: Markup | None = None
    src: str | None = None
    name: str = ""
    result: Item | None = None
    folded: bool = False
    lines: int = 0
    truncated: int = 0
    call_id: str | None = None
    subagent: list[SubagentStep] | None = None
    agent_id: str | None = None
    subagent_link: str | None = None


@dataclass
class Item:
    """One entry (or projected message) of the conversation pane.

    Attributes:
        id: the entry id (anchor and permalink target), or ``None``.
        kind: css-friendly kind: ``user``, ``assistant``, ``toolResult``,
            ``bashExecution``, ``custom``, ``branchSummary``, ``compaction``,
            ``retired``, ``system``, ``note``, ``omitted``, ``compacted``.
        title: the heading shown (role, tool name, ...).
        timestamp: the entry's ISO timestamp.
        parts: the :class:`Part` list shown in order.
        marks: ``(css class, text)`` badges: edits, synthetic results,
            archival records, kept-tail entries.
        meta: small facts shown on the heading line (model, token usage).
        error: whether it reports an error (tool error, failed turn).
        annotation: whether the entry annotates the conversation (:func:`~sessiontree.web.views.turns.is_annotation`).
        annotations: the annotations folded into this item (shown on demand).
        records: the billed usage records of the entry (turn totals).
        response_id: the ``responseId`` its message shares with the other parts of one response.
        agent_id: for a subagent call's result, the subagent id its source record names.
        source: an annotation's entry (subagent messages are read from its source record).
    """

    id: str | None
    kind: str
    title: str
    timestamp: str | None = None
    parts: list[Part] = field(default_factory=list)
    marks: list[tuple[str, str]] = field(default_factory=list)
    meta: list[str] = field(default_factory=list)
    error: bool = False
    dim: bool = False
    annotation: bool = False
    annotations: list[Item] = field(default_factory=list)
    records: list[UsageRecord] = field(default_factory=list)
    response_id: str | None = None
    agent_id: str | None = None
    source: Mapping[str, Any] | None = field(default=None, repr=False)

    @property
    def source_raw(self) -> str | None:
        """The verbatim source record of the item's entry (``foreign.raw`` of another agent's
        file, docs/agents/README.md), or ``None``; shown only when asked (``export --raw``)."""
        foreign = self.source.get("foreign") if self.source is not None else None
        if not isinstance(foreign, Mapping):
            return None
        raw = foreign.get("raw")
        if isinstance(raw, str):
            return raw.strip("\r\n")
        return "(not UTF-8: kept as base64)" if isinstance(foreign.get("rawBase64"), str) else None

    def annotation_summary(self) -> str:
        """``"5 records: progress x3, system/stop_hook_summary x2"``: the folded annotations, counted by name."""
        counts: dict[str, int] = {}
        for a in self.annotations:
            counts[a.title] = counts.get(a.title, 0) + 1
        names = ", ".join(f"{name} x{n}" if n > 1 else name for name, n in counts.items())
        n = len(self.annotations)
        return f"{n} record{'' if n == 1 else 's'}: {names}"


@dataclass
class Conversation:
    """A window of the conversation of one branch.

    Attributes:
        leaf_id: the branch's leaf.
        view: ``"raw"`` (every entry of the branch) or ``"model"`` (the projection).
        items: the items of this window.
        start: index of the first item of the window among ``total``.
        total: number of items of the whole branch in this view.
        model_note: for the model view, a sentence about the projection
            (message count, model, thinking level).
        turns: ``items`` as turns (:func:`~sessiontree.web.views.turns.build_turns`).
    """

    leaf_id: str | None
    view: str
    items: list[Item]
    start: int
    total: int
    model_note: str = ""
    turns: list[Turn] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.turns:
            self.turns = build_turns(self.items)

    def subagent_calls(self) -> list[Part]:
        """The tool parts of this window that started a subagent naming its id (the
        server links each to the child session when the store holds it)."""
        return [part for item in self.items for part in item.parts if part.kind == "tool" and part.agent_id]


def _string(value: Any, default: str = "") -> str:
    """``value`` when it is a string, else ``default``."""
    return value if isinstance(value, str) else default


def _clip(text: str) -> tuple[str, int]:
    if len(text) <= MAX_BLOCK_CHARS:
        return text, 0
    return text[:MAX_BLOCK_CHARS], len(text) - MAX_BLOCK_CHARS


def _text_part(text: str, kind: str = "text", fold: bool = True) -> Part:
    text, cut = _clip(text)
    lines = text.count("\n") + 1
    folded = fold and (lines > FOLD_LINES or len(text) > FOLD_CHARS)
    html = markdown_html(text) if kind == "markdown" else None
    return Part(kind, text=text, html=html, folded=folded, lines=lines, truncated=cut)


def _image_part(block: Mapping[str, Any]) -> Part:
    mime = block.get("mimeType")
    data = block.get("data")
    if not isinstance(mime, str) or mime.lower() not in _IMAGE_TYPES:
        return Part("image", text=f"image of type {mime!r} not shown")
    if not isinstance(data, str) or not _BASE64.match(data):
        return Part("image", text="image data is not base64; not shown")
    try:
        size = len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return Part("image", text="image data is not base64; not shown")
    return Part("image", src=f"data:{mime.lower()};base64,{data}", text=f"{mime}, {size} bytes")


def _json_text(value: Any) -> str:
    try:
        return jsonlib.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def _content_parts(content: Any, *, markdown: bool) -> list[Part]:
    """Parts of a message ``content`` (a string or blocks), tool calls excluded."""
    if isinstance(content, str):
        return [_text_part(content, "markdown" if markdown else "text", fold=not markdown)] if content else []
    parts: list[Part] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            if block["text"]:
                parts.append(_text_part(block["text"], "markdown" if markdown else "text", fold=not markdown))
        elif kind == "thinking":
            thinking = _string(block.get("thinking"))
            if block.get("redacted") and not thinking:
                thinking = "(redacted thinking)"
            part = _text_part(thinking, "thinking")
            part.folded = True  # thinking is folded by default
            parts.append(part)
        elif kind == "image":
            parts.append(_image_part(block))
    return parts


def _usage_meta(message: Mapping[str, Any]) -> list[str]:
    meta: list[str] = []
    model = message.get("model")
    if isinstance(model, str) and model:
        provider = message.get("provider")
        meta.append(f"{provider}/{model}" if isinstance(provider, str) and provider else model)
    usage = message.get("usage")
    if isinstance(usage, Mapping):
        def num(key: str) -> int:
            value = usage.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else 0
        tokens = f"{num('input')} in, {num('output')} out"
        if num("cacheRead") or num("cacheWrite"):
            tokens += f", cache {num('cacheRead')} read / {num('cacheWrite')} write"
        meta.append(tokens)
        cost = usage.get("cost")
        total = cost.get("total") if isinstance(cost, Mapping) else None
        if isinstance(total, (int, float)) and not isinstance(total, bool) and total:
            meta.append(f"${total:.4f}")
    stop = message.get("stopReason")
    if stop in ("aborted", "error", "length"):
        meta.append(f"stopped: {stop}")
    return meta


def _message_item(entry_id: str | None, timestamp: Any, message: Mapping[str, Any],
                  results: Callable[[str], Item | None]) -> Item:
    """The item of one agent message; ``results(call_id)`` gives a tool call's paired result."""
    role = message.get("role")
    content = message.get("content")
    ts = timestamp if isinstance(timestamp, str) else None
    if role == "user":
        return Item(entry_id, "user", "User", ts, _content_parts(content, markdown=False))
    if role == "assistant":
        item = Item(entry_id, "assistant", "Assistant", ts, _content_parts(content, markdown=True),
                    meta=_usage_meta(message), error=message.get("stopReason") in ("error", "aborted"))
        if isinstance(message.get("errorMessage"), str):
            item.parts.append(Part("note", text=f"error: {message['errorMessage']}"))
        for block in content if isinstance(content, list) else ():
            if isinstance(block, Mapping) and block.get("type") == "toolCall":
                call_id = block.get("id")
                name = _string(block.get("name"), "tool")
                result = results(call_id) if isinstance(call_id, str) else None
                args = _json_text(block.get("arguments"))
                part = _text_part(args)
                part.kind, part.name, part.result = "tool", name, result
                part.call_id = call_id if isinstance(call_id, str) else None
                item.parts.append(part)
        return item
    if role == "toolResult":
        name = _string(message.get("toolName"), "tool")
        item = Item(entry_id, "toolResult", f"Result: {name}", ts, _content_parts(content, markdown=False),
                    error=message.get("isError") is True)
        if not item.parts:
            item.parts.append(Part("note", text="(no output)"))
        return item
    if role == "bashExecution":
        item = Item(entry_id, "bashExecution", "Shell", ts, [_text_part(bash_text(message))],
                    error=message.get("exitCode") not in (0, None) or message.get("cancelled") is True)
        if message.get("excludeFromContext") is True:
            item.marks.append(("muted", "excluded from context (!! command)"))
        return item
    if role == "branchSummary":
        summary = _string(message.get("summary"))
        return Item(entry_id, "branchSummary", "Branch summary", ts, [_text_part(summary, "markdown", fold=False)])
    if role == "custom":
        custom = message.get("customType") if isinstance(message.get("customType"), str) else "custom"
        if custom == "compaction":
            return Item(entry_id, "compaction", "Compaction: what the model sees instead of the turns before",
                        ts, _content_parts(content, markdown=False))
        item = Item(entry_id, "custom", f"Extension message: {custom}", ts, _content_parts(content, markdown=False))
        if message.get("display") is False:
            item.marks.append(("muted", "not displayed in the agent's UI"))
        return item
    if role == "system":
        return Item(entry_id, "system", "System", ts, _content_parts(content, markdown=False))
    return Item(entry_id, "note", str(role), ts, _content_parts(content, markdown=False))


def _note_item(entry: Mapping[str, Any]) -> Item:
    """A short note for an entry that is not a message (settings, labels, names, boundaries)."""
    entry_id = entry.get("id")
    ts = entry.get("timestamp") if isinstance(entry.get("timestamp"), str) else None
    if is_retired_record(entry):
        item = Item(entry_id, "retired", "Retired record", ts,
                    [_text_part(retired_record_text(entry))])
        item.marks.append(("archival", RETIRED_NOTE))
        return item
    if is_active_compaction(entry):
        summary = _string(entry.get("summary"))
        item = Item(entry_id, "compaction", "Compaction boundary", ts, [_text_part(summary)])
        item.marks.append(("boundary", entry_summary(entry)))
        return item
    return Item(entry_id, "note", entry_kind(entry), ts, [Part("note", text=entry_summary(entry, 300))], dim=True)


def _result_index(messages: Sequence[tuple[str | None, Any, Mapping[str, Any]]]) -> dict[int, int]:
    """Pair tool calls with results over one ordered message list: ``{result position: call position}``.

    A result pairs with the nearest earlier unanswered call of the same id
    (the first result wins); others stay standalone.
    """
    open_calls: dict[str, int] = {}
    paired: dict[int, int] = {}
    for position, (_, _, message) in enumerate(messages):
        role = message.get("role")
        content = message.get("content")
        if role == "assistant":
            for block in content if isinstance(content, list) else ():
                if isinstance(block, Mapping) and block.get("type") == "toolCall" and isinstance(block.get("id"), str):
                    open_calls[block["id"]] = position
        elif role == "toolResult":
            call_id = message.get("toolCallId")
            if isinstance(call_id, str) and call_id in open_calls:
                paired[position] = open_calls.pop(call_id)
    return paired


def _items(units: Sequence[Unit], start: int, stop: int) -> list[Item]:
    """Items for ``units[start:stop]``, tool results nested under their calls."""
    messages = [(None, None, u.message) if u.message is not None else (None, None, {}) for u in units]
    paired = _result_index(messages)
    by_call: dict[tuple[int, str], int] = {}
    for result_pos, call_pos in paired.items():
        message = units[result_pos].message
        call_id = message.get("toolCallId") if message is not None else None
        if isinstance(call_id, str):  # always: _result_index pairs string ids only
            by_call[(call_pos, call_id)] = result_pos
    items: list[Item] = []
    for position in range(start, stop):
        unit = units[position]
        if position in paired and paired[position] >= start:
            continue  # shown under its call
        items.append(_unit_item(unit, functools.partial(_paired, units, by_call, position)))
    return _attach_subagents(fold_annotations(items), items)


def _attach_subagents(items: list[Item], every: Sequence[Item]) -> list[Item]:
    """Subagent calls of ``items`` (Claude Code's ``Task``) get the subagent's messages the
    window's annotations carry (:func:`~sessiontree.web.views.turns.subagent_steps`) and
    the agent id the result names, for the page to fold them in at the call."""
    calls: dict[str, str] = {}
    parts: list[Part] = []
    for item in items:
        for part in item.parts:
            if part.kind == "tool" and part.name in SUBAGENT_TOOLS and part.call_id:
                parts.append(part)
                try:
                    prompt = jsonlib.loads(part.text).get("prompt")
                except (ValueError, AttributeError):
                    prompt = None
                calls[part.call_id] = prompt if isinstance(prompt, str) else ""
    if not parts:
        return items
    annotations = [item.source for item in every if item.annotation and item.source is not None]
    steps = subagent_steps(annotations, calls)
    for part in parts:
        found, agent = steps.get(part.call_id or "", ([], None))
        part.subagent = found or None
        part.agent_id = (part.result.agent_id if part.result is not None else None) or agent
    return items


def _paired(units: Sequence[Unit], by_call: Mapping[tuple[int, str], int], call_pos: int, call_id: str) -> Item | None:
    result_pos = by_call.get((call_pos, call_id))
    if result_pos is None:
        return None
    return _unit_item(units[result_pos], lambda _c: None)


def _unit_item(unit: Unit, results: Callable[[str], Item | None]) -> Item:
    entry = unit.entry or {}
    entry_id = entry.get("id") if isinstance(entry.get("id"), str) else None
    timestamp = entry.get("timestamp")
    if unit.kind is None and unit.message is None and is_annotation(entry):
        return Item(entry_id, "annotation", annotation_label(entry),
                    timestamp if isinstance(timestamp, str) else None, dim=True, annotation=True,
                    records=records_from_entry(dict(entry), keyed=False), source=entry)
    if unit.kind is not None:
        item = Item(entry_id, unit.kind, unit.title, timestamp if isinstance(timestamp, str) else None,
                    [Part("note", text=unit.text)], dim=True)
    elif unit.message is not None:
        item = _message_item(entry_id, timestamp, unit.message, results)
    else:
        item = _note_item(entry)
    item.marks.extend(m for m in unit.marks if m not in item.marks)
    if item.source is None and isinstance(entry.get("foreign"), Mapping):
        item.source = entry
    if not item.parts:
        # Never an empty box: an entry with nothing to show says what it is.
        item.parts.append(Part("note", text=entry_summary(entry, 300) or "(no content)"))
    if unit.kind is None and unit.message is not None and unit.message.get("role") in ("assistant", "toolResult"):
        # Billed calls of the raw entry (the model view's message may be a projection of it).
        item.records = records_from_entry(dict(entry), keyed=False) if unit.message is entry.get("message") else []
        response = unit.message.get("responseId")
        item.response_id = response if isinstance(response, str) and response else None
        if unit.message.get("role") == "toolResult":
            item.agent_id = result_agent_id(entry)
    return item


def build_conversation(session: ReadOnlySession | SessionManager, leaf_id: str | None, view: str = "raw", *,
                       start: int | None = None, around: str | None = None,
                       limit: int = WINDOW_ITEMS, kept: bool = False,
                       agent_format: int | None = None) -> Conversation:
    """A window of the conversation of the branch ending at ``leaf_id``.

    Args:
        session: the session, read-only (its answers take the leaf: nothing moves); a
            caller's manager is read as it stands (:func:`readonly_of_manager`).
        leaf_id: the branch's leaf; ``None``: the session's loaded leaf.
        view: ``"raw"``: every entry of the branch; ``"model"``: the
            projection (what the model is sent), with marks for entries that
            send nothing or something else.
        start: first unit of the window; default: the last ``limit`` units.
        around: an entry id the window must contain (a permalink target).
        limit: units per window.
        kept: keep the branch's units with the session (:meth:`ReadOnlySession.kept`,
            per ``(leaf, view)``, the last :data:`KEPT_BRANCHES`), so the next window of
            the same branch costs only its own items.
        agent_format: the format the agent wrote the session in (sync state), or
            ``None``; below 4 the model's view is what pi sent (:func:`model_units`).

    Raises:
        EntryNotFoundError: ``leaf_id`` is not an entry of the session.
        ValueError: ``view`` is neither ``"raw"`` nor ``"model"``.
    """
    if view not in ("raw", "model"):
        raise ValueError(f"unknown view {view!r}: expected 'raw' or 'model'")
    if not isinstance(session, ReadOnlySession):
        session = readonly_of_manager(session)
    if leaf_id is not None and session.get_entry(leaf_id) is None:
        raise EntryNotFoundError(leaf_id)
    leaf = leaf_id if leaf_id is not None else session.get_leaf_id()

    def units_of_branch() -> tuple[list[Unit], str]:
        branch = session.get_branch(leaf)
        if view == "raw":
            return raw_units(branch), ""
        return model_units(session, leaf, branch, agent_format)

    if kept:
        units, note = session.kept(("units", leaf, view), units_of_branch, bound=KEPT_BRANCHES)
    else:
        units, note = units_of_branch()
    total = len(units)
    hit = None
    if around is not None:
        hit = next((i for i, u in enumerate(units) if u.entry is not None and u.entry.get("id") == around), None)
    start, stop = _window_bounds(total, start, hit, limit)
    return Conversation(leaf, view, _items(units, start, stop), start, total, note)


def _window_bounds(total: int, start: int | None, hit: int | None, limit: int) -> tuple[int, int]:
    """``(start, stop)`` of a window of at most ``limit`` of ``total`` items: centred on
    item ``hit`` when given (a permalink target), else from ``start``, else the last
    ``limit`` items; clamped to ``[0, total]``."""
    if hit is not None:
        start = max(0, min(hit - limit // 2, total - limit))
    if start is None:
        start = max(0, total - limit)
    start = max(0, min(start, total))
    return start, min(total, start + limit)


#: Branch views (units of one leaf and view) kept per session version by :func:`build_conversation`.
KEPT_BRANCHES = 8

#: Entries read past a window's end so that a call near the end still finds its result.
PAIRING_LOOKAHEAD = 64


def build_branch_window(path: Sequence[Mapping[str, Any]], load: Callable[[Sequence[str]], Sequence[Mapping[str, Any]]],
                    *, start: int | None = None, around: str | None = None,
                    limit: int = WINDOW_ITEMS) -> Conversation:
    """A window of the raw view of one branch, reading only the window's entries.

    The same window :func:`build_conversation` gives for ``view="raw"``
    (raw items are one per branch entry), but the branch comes as
    skeletons (``store.read_skeleton``) and only the entries of the window
    and :data:`PAIRING_LOOKAHEAD` after it are read in full (``load``,
    i.e. ``store.read_entries``). Tool results are paired with calls
    within what was read: a result more than the look-ahead past the
    window's end is not nested under its call (the last window, the one a
    page opens on, has nothing after it, so it is exact).

    Args:
        path: the branch root first, as skeleton (or full) entries.
        load: ``ids -> full entries``.
        start, around, limit: as :func:`build_conversation`.
    """
    total = len(path)
    hit = None
    if around is not None:
        hit = next((i for i in range(total - 1, -1, -1) if path[i].get("id") == around), None)
    start, stop = _window_bounds(total, start, hit, limit)
    read_to = min(total, stop + PAIRING_LOOKAHEAD)
    ids = [e.get("id") for e in path[start:read_to]]
    full = {e.get("id"): e for e in load([i for i in ids if isinstance(i, str)])}
    entries = [full.get(e.get("id"), e) for e in path[start:read_to]]
    units = raw_units(entries)
    leaf = path[-1].get("id") if path else None
    return Conversation(leaf if isinstance(leaf, str) else None, "raw", _items(units, 0, stop - start),
                        start, total)
