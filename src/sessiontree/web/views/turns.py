"""The conversation pane's reading order for every agent: annotations folded into the entry
they annotate, the parts of one response together, one turn per user message, and a
subagent's conversation folded at the call that started it (docs/viewer.md, "Turns").

Works on the :class:`~sessiontree.web.views.conversation.Item` list of one window, after
tool results are nested under their calls; nothing here reads the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from sessiontree.core.usage import UsageRecord
from sessiontree.usage.totals import turn_cost

#: An item of :mod:`sessiontree.web.views.conversation` (``Item``; named loosely here so that
#: this module, which that one imports, does not import it back).
Item = Any

__all__ = [
    "Group",
    "SubagentStep",
    "Turn",
    "annotation_label",
    "build_turns",
    "fold_annotations",
    "is_annotation",
    "result_agent_id",
    "subagent_steps",
    "turn_cost",
]

#: Tool names whose call starts a subagent (Claude Code's ``Task``, renamed ``Agent`` in 2.1).
SUBAGENT_TOOLS = frozenset({"Task", "Agent"})
#: Steps of one subagent shown inline at most; the rest are in its own session.
MAX_SUBAGENT_STEPS = 200
#: Characters of one subagent step's text shown inline at most.
MAX_STEP_CHARS = 2000


def is_annotation(entry: Mapping[str, Any]) -> bool:
    """Whether an entry annotates the conversation rather than being part of it: an
    inert record of another agent (a ``custom`` entry with a ``foreign`` object: hooks,
    progress, system records, snapshots; docs/agents/README.md) or an upstream ``usage``
    entry (a billed call recorded beside the messages). Such entries are folded into the
    entry before them, never drawn as boxes of their own."""
    kind = entry.get("type")
    if kind == "usage":
        return True
    return kind == "custom" and isinstance(entry.get("foreign"), Mapping)


def annotation_label(entry: Mapping[str, Any]) -> str:
    """A short name of an annotation: ``progress``, ``system/stop_hook_summary``, ``usage``."""
    if entry.get("type") == "usage":
        kind = entry.get("kind")
        return f"usage ({kind})" if isinstance(kind, str) and kind else "usage"
    data = entry.get("data")
    data = data if isinstance(data, Mapping) else {}
    record = data.get("recordType")
    subtype = data.get("subtype")
    name = record if isinstance(record, str) and record else str(entry.get("customType") or "record")
    if isinstance(subtype, str) and subtype:
        name += f"/{subtype}"
    foreign = entry.get("foreign")
    if isinstance(foreign, Mapping) and isinstance(foreign.get("unmapped"), str):
        name += " (not understood)"
    return name


def _raw_record(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The verbatim source record of an entry (``foreign.raw``) as JSON, or ``None``."""
    foreign = entry.get("foreign")
    raw = foreign.get("raw") if isinstance(foreign, Mapping) else None
    if not isinstance(raw, str):
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


@dataclass
class SubagentStep:
    """One message of a subagent, as the parent's file recorded it.

    Attributes:
        role: ``user`` or ``assistant``.
        text: its text, tool calls as ``name(arguments)``, tool results as their text;
            cut at :data:`MAX_STEP_CHARS`.
    """

    role: str
    text: str


def _block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    if not isinstance(block, Mapping):
        return ""
    kind = block.get("type")
    text = block.get("text")
    if kind == "text" and isinstance(text, str):
        return text
    if kind == "tool_use":
        args = orjson.dumps(block.get("input"), option=orjson.OPT_NON_STR_KEYS).decode("utf-8", "replace") \
            if block.get("input") is not None else ""
        return f"→ {block.get('name')}({args})"
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            return "\n".join(_block_text(b) for b in content)
        return f"← {content}" if isinstance(content, str) else ""
    thinking = block.get("thinking")
    if kind == "thinking" and isinstance(thinking, str):
        return "(thinking) " + thinking
    return ""


def _step(record: Mapping[str, Any]) -> SubagentStep | None:
    message = record.get("message")
    if not isinstance(message, Mapping):
        return None
    role = message.get("role")
    if not isinstance(role, str):
        role = str(record.get("type") or "")
    content = message.get("content")
    blocks = content if isinstance(content, list) else [content]
    text = "\n".join(t for t in (_block_text(b) for b in blocks) if t)
    if not text:
        return None
    if len(text) > MAX_STEP_CHARS:
        text = text[:MAX_STEP_CHARS] + f"… ({len(text) - MAX_STEP_CHARS} more characters)"
    return SubagentStep(role, text)


def subagent_steps(annotations: Sequence[Mapping[str, Any]], calls: Mapping[str, str]
                   ) -> dict[str, tuple[list[SubagentStep], str | None]]:
    """The subagent messages a parent's file carries, per call that started them:
    ``{call id: (steps, agent id or None)}``.

    Claude Code records them two ways (docs/agents/claude-code.md, "Subagents"): 2.x
    writes ``progress`` records of ``data.type: "agent_progress"`` naming the call in
    ``parentToolUseID`` and the agent in ``data.agentId``, the subagent's record in
    ``data.message``; 1.0.x writes the subagent's records inline with ``isSidechain:
    true``, its first one (no ``parentUuid``) carrying the call's prompt, the others
    chained to it by ``parentUuid``. ``calls`` maps each subagent call's id to its
    prompt; a chain whose first prompt matches none is left out.
    """
    found: dict[str, tuple[list[SubagentStep], str | None]] = {}
    by_prompt = {prompt: call for call, prompt in calls.items() if prompt}
    chain: dict[str, str] = {}  # sidechain uuid -> call id
    for entry in annotations:
        foreign = entry.get("foreign")
        raw = foreign.get("raw") if isinstance(foreign, Mapping) else None
        if not isinstance(raw, str) or ("agent_progress" not in raw and '"isSidechain":true' not in raw):
            continue
        record = _raw_record(entry)
        if record is None:
            continue
        call: str | None = None
        agent: str | None = None
        inner: Mapping[str, Any] | None = None
        data = record.get("data")
        if record.get("type") == "progress" and isinstance(data, Mapping) and data.get("type") == "agent_progress":
            parent = record.get("parentToolUseID")
            call = parent if isinstance(parent, str) and parent in calls else None
            agent = data.get("agentId") if isinstance(data.get("agentId"), str) else None
            inner = data.get("message") if isinstance(data.get("message"), Mapping) else None
        elif record.get("isSidechain") is True:
            uuid, parent = record.get("uuid"), record.get("parentUuid")
            if parent is None:
                message = record.get("message")
                content = message.get("content") if isinstance(message, Mapping) else None
                call = by_prompt.get(content) if isinstance(content, str) else None
            elif isinstance(parent, str):
                call = chain.get(parent)
            if call is not None and isinstance(uuid, str):
                chain[uuid] = call
            agent = record.get("agentId") if isinstance(record.get("agentId"), str) else None
            inner = record
        if call is None or inner is None:
            continue
        steps, known = found.setdefault(call, ([], None))
        if agent and not known:
            found[call] = (steps, agent)
        step = _step(inner)
        if step is not None and len(steps) < MAX_SUBAGENT_STEPS:
            steps.append(step)
    return found


def result_agent_id(entry: Mapping[str, Any] | None) -> str | None:
    """The subagent id a Task call's result names (Claude Code 2.x writes
    ``toolUseResult.agentId`` on the result's record), or ``None``."""
    if entry is None:
        return None
    foreign = entry.get("foreign")
    raw = foreign.get("raw") if isinstance(foreign, Mapping) else None
    if not isinstance(raw, str) or '"agentId"' not in raw:
        return None
    record = _raw_record(entry)
    result = record.get("toolUseResult") if record is not None else None
    agent = result.get("agentId") if isinstance(result, Mapping) else None
    return agent if isinstance(agent, str) and agent else None


def fold_annotations(items: list[Item]) -> list[Item]:
    """``items`` with every annotation (:func:`is_annotation`, marked by the builder as
    ``item.annotation``) moved into the ``annotations`` of the item before it (the entry it
    annotates: the mappings hang annotations off the newest entry); annotations before
    any other item go to the first one after them. A window of annotations only keeps
    them as items (there is nothing to fold them into)."""
    kept: list[Item] = []
    pending: list[Item] = []
    for item in items:
        if item.annotation:
            if kept:
                kept[-1].annotations.append(item)
            else:
                pending.append(item)
            continue
        if pending:
            item.annotations[:0] = pending
            pending = []
        kept.append(item)
    return kept if kept else pending


@dataclass
class Group:
    """Consecutive items of one model response (one ``responseId``; Claude Code writes
    one record per content block), or a single item.

    Attributes:
        items: the items, in order.
        response_id: the shared ``responseId``, or ``None`` for a single item.
        tool_calls: tool calls made by the response (``parallel`` when two or more).
    """

    items: list[Item]
    response_id: str | None = None
    tool_calls: int = 0


@dataclass
class Turn:
    """One user message and what followed it up to the next one.

    Attributes:
        groups: the turn's :class:`Group` list; the first holds the user's message
            unless ``continued``.
        continued: the turn began before this window (or the branch starts with no
            user message).
        assistants: assistant messages (one per response: the parts of one response count once).
        thoughts: thinking blocks.
        tool_calls: tool calls.
        records: billed usage records of the turn's entries and annotations.
    """

    groups: list[Group] = field(default_factory=list)
    continued: bool = False
    assistants: int = 0
    thoughts: int = 0
    tool_calls: int = 0
    records: list[UsageRecord] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        """Tokens of the turn's billed calls (input, output, cache read and write)."""
        return sum(r.total_tokens for r in self.records)


def _walk(item: Item) -> list[Item]:
    return [item, *item.annotations]


def build_turns(items: Sequence[Item]) -> list[Turn]:
    """The turns of a window's items (annotations already folded): a new turn at each
    user message; consecutive items sharing a ``responseId`` grouped (docs/viewer.md)."""
    turns: list[Turn] = []
    responses: set[str] = set()
    for item in items:
        if item.kind == "user" or not turns:
            turns.append(Turn(continued=item.kind != "user"))
        turn = turns[-1]
        last = turn.groups[-1] if turn.groups else None
        if item.response_id and last is not None and last.response_id == item.response_id:
            last.items.append(item)
        else:
            last = Group([item], item.response_id)
            turn.groups.append(last)
        calls = sum(1 for p in item.parts if p.kind == "tool")
        last.tool_calls += calls
        turn.tool_calls += calls
        turn.thoughts += sum(1 for p in item.parts if p.kind == "thinking")
        if item.kind == "assistant":
            key = item.response_id or f"#{id(item)}"
            if key not in responses:
                responses.add(key)
                turn.assistants += 1
        for each in _walk(item):
            turn.records.extend(each.records)
            for part in each.parts:
                if part.result is not None:
                    turn.records.extend(part.result.records)
    return turns
