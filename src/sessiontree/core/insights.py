"""Insights of one session computed from its entries, no model calls (docs/insights.md).

Pure functions of a session's format-4 entries (every branch, in file order):
they read the tree (``id``/``parentId``, the loaded leaf: docs/rules/tree.md F.1),
``toolCall`` blocks of assistant messages, ``toolResult`` messages and their
``isError``, ``compaction`` entries and billed usage records
(:mod:`sessiontree.core.usage`). Pricing lives above, in
:mod:`sessiontree.usage.insights`. The definitions, each with a hand-counted
example, are in docs/insights.md; the names below follow them:

* **tool calls / tool errors by tool**: ``toolCall`` blocks by ``name``;
  ``toolResult`` messages with ``isError: true`` by the result's ``toolName``
  (else the name of the call it answers).
* **error loop**: :data:`LOOP_MIN` or more tool results in a row on one path
  of the tree, all errors of the same tool (results of other tools in between
  break the row; other entries do not).
* **repeated identical calls**: calls with the same ``name`` and the same
  ``arguments`` (compared as JSON with sorted keys) as an earlier call of the
  session.
* **interrupted calls**: calls whose ``id`` no ``toolResult`` of the session
  answers (``toolCallId``).
* **compactions**: ``compaction`` entries, ``tokensBefore``, and the context
  of the first assistant call after each one on its branch (input + cache
  read + cache write of its usage); the tokens cut are the difference.
* **abandoned branches**: entries off the active branch (root to the loaded
  leaf), grouped by the leaf that ends them, each with its billed records.
* **files edited**: paths given to an editing tool (:data:`EDIT_TOOLS`) by a
  call whose result is not an error.
* **waits**: the time from an assistant entry holding a call to the
  ``toolResult`` entry answering it (entry ``timestamp`` s).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sessiontree.core.tree import LEAF_ENTRY_TYPE, loaded_leaf_id, parse_timestamp_ms
from sessiontree.core.usage import UsageRecord, records_from_entries

__all__ = [
    "EDIT_TOOLS",
    "LOOP_MIN",
    "AbandonedBranch",
    "CompactionCut",
    "ErrorLoop",
    "InterruptedCall",
    "RepeatedCall",
    "SessionFacts",
    "ToolCount",
    "Wait",
    "session_facts",
]

#: Error results of one tool in a row that make an error loop.
LOOP_MIN = 3
#: Longest waits kept per session.
WAITS_KEPT = 5
#: Tools that edit files, and the argument naming the file: pi (``edit``, ``write``),
#: Claude Code (``Edit``, ``Write``, ``MultiEdit``, ``NotebookEdit``); Codex's
#: ``apply_patch`` names its files inside the patch (``*** Update File: PATH``), also
#: when older Codex ran it as ``shell`` with ``["apply_patch", PATCH]``.
EDIT_TOOLS: Mapping[str, tuple[str, ...]] = {
    "edit": ("path", "file_path"),
    "write": ("path", "file_path"),
    "Edit": ("file_path",),
    "Write": ("file_path",),
    "MultiEdit": ("file_path",),
    "NotebookEdit": ("notebook_path",),
    "apply_patch": (),
}
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+?)\s*$", re.MULTILINE)


@dataclass
class ToolCount:
    """Calls and error results of one tool."""

    name: str
    calls: int = 0
    errors: int = 0


@dataclass
class ErrorLoop:
    """Error results of one tool in a row on one path (at least :data:`LOOP_MIN`).

    Attributes:
        tool: the tool's name.
        length: how many error results in a row.
        first_entry_id, last_entry_id: the first and last of those results.
    """

    tool: str
    length: int
    first_entry_id: str
    last_entry_id: str


@dataclass
class RepeatedCall:
    """A call made more than once with the same name and arguments.

    Attributes:
        tool: the name.
        arguments: the arguments as compact JSON with sorted keys (cut to 200 characters).
        count: how many calls (2 or more); ``count - 1`` are repeats.
        entry_ids: the assistant entries holding them, in file order.
    """

    tool: str
    arguments: str
    count: int
    entry_ids: list[str]


@dataclass
class InterruptedCall:
    """A call no result answers."""

    tool: str
    call_id: str
    entry_id: str


@dataclass
class CompactionCut:
    """One compaction and what it cut.

    Attributes:
        entry_id: the compaction entry.
        tokens_before: its ``tokensBefore`` (``None`` when not a non-negative integer:
            Claude Code's and Codex's compactions record none).
        tokens_after: the context of the first assistant call below it on its branch
            (input + cache read + cache write), ``None`` when there is none.
        tokens_cut: ``tokens_before - tokens_after`` when both are known.
    """

    entry_id: str
    tokens_before: int | None
    tokens_after: int | None

    @property
    def tokens_cut(self) -> int | None:
        """``tokens_before - tokens_after`` when both are known, else ``None``."""
        if self.tokens_before is None or self.tokens_after is None:
            return None
        return self.tokens_before - self.tokens_after


@dataclass
class AbandonedBranch:
    """Entries off the active branch that end at one leaf.

    Attributes:
        leaf_id: the leaf ending the branch.
        fork_id: the entry it leaves from (on the active branch, or on another
            abandoned branch), ``None`` when it starts a root of its own.
        entries: its entries off the active branch (an entry shared with an
            earlier abandoned branch, in file order of leaves, is counted there).
        records: the billed records of those entries.
    """

    leaf_id: str
    fork_id: str | None
    entries: int
    records: list[UsageRecord] = field(default_factory=list)


@dataclass
class Wait:
    """The time between a call and its result, milliseconds."""

    tool: str
    call_id: str
    call_entry_id: str
    result_entry_id: str
    ms: int


@dataclass
class SessionFacts:
    """Everything :func:`session_facts` counts in one session (definitions in the module docstring)."""

    tools: dict[str, ToolCount] = field(default_factory=dict)
    error_loops: list[ErrorLoop] = field(default_factory=list)
    repeated_calls: list[RepeatedCall] = field(default_factory=list)
    interrupted_calls: list[InterruptedCall] = field(default_factory=list)
    compactions: list[CompactionCut] = field(default_factory=list)
    abandoned_branches: list[AbandonedBranch] = field(default_factory=list)
    files_edited: list[str] = field(default_factory=list)
    waits: list[Wait] = field(default_factory=list)
    records: list[UsageRecord] = field(default_factory=list)

    @property
    def tool_calls(self) -> int:
        """Every tool call of the session."""
        return sum(t.calls for t in self.tools.values())

    @property
    def tool_errors(self) -> int:
        """Every error result of the session."""
        return sum(t.errors for t in self.tools.values())

    @property
    def repeats(self) -> int:
        """Calls repeating an earlier identical call (each group's count minus one, summed)."""
        return sum(r.count - 1 for r in self.repeated_calls)


def _message(entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
    if entry.get("type") != "message":
        return None
    message = entry.get("message")
    return message if isinstance(message, Mapping) else None


def _calls(message: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, list):
        for block in content:
            if isinstance(block, Mapping) and block.get("type") == "toolCall":
                yield block


def _name(value: Any) -> str:
    return value if isinstance(value, str) and value else "(unnamed)"


def _canonical(arguments: Any) -> str:
    try:
        return json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return repr(arguments)


def _edited_paths(name: str, arguments: Any) -> list[str]:
    if not isinstance(arguments, Mapping):
        return []
    command = arguments.get("command")
    if name == "shell" and isinstance(command, list) and len(command) >= 2 and command[0] == "apply_patch":
        # Older Codex ran its patches through the shell tool: ["apply_patch", PATCH].
        return _PATCH_FILE.findall(command[1]) if isinstance(command[1], str) else []
    keys = EDIT_TOOLS.get(name)
    if keys is None:
        return []
    if name == "apply_patch":
        text = arguments.get("input", arguments.get("patch"))
        return _PATCH_FILE.findall(text) if isinstance(text, str) else []
    for key in keys:
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return [value]
    return []


def _context_tokens(message: Mapping[str, Any]) -> int | None:
    usage = message.get("usage")
    if not isinstance(usage, Mapping):
        return None
    total = 0
    for key in ("input", "cacheRead", "cacheWrite"):
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            total += value
    return total or None


def session_facts(entries: Sequence[Mapping[str, Any]]) -> SessionFacts:
    """Count the insights of one session (the definitions of the module docstring).

    Args:
        entries: the session's entries, header excluded, in file order (all branches).

    Returns:
        A :class:`SessionFacts`; loops, repeats and interrupted calls in file order,
        waits longest first (at most :data:`WAITS_KEPT`), abandoned branches in file
        order of their leaves.
    """
    facts = SessionFacts()
    nodes = [e for e in entries if isinstance(e.get("id"), str) and e.get("type") != LEAF_ENTRY_TYPE]
    by_id = {e["id"]: e for e in nodes}
    position = {e["id"]: i for i, e in enumerate(nodes)}
    # Calls: by id (for results), by (name, arguments) (repeats), the editing ones.
    call_of: dict[str, tuple[str, str, Any]] = {}  # call id -> (name, entry id, arguments)
    same: dict[tuple[str, str], RepeatedCall] = {}
    results: dict[str, Mapping[str, Any]] = {}  # call id -> the result entry answering it (first)
    for entry in nodes:
        message = _message(entry)
        if message is None:
            continue
        role = message.get("role")
        if role == "assistant":
            for block in _calls(message):
                name = _name(block.get("name"))
                facts.tools.setdefault(name, ToolCount(name)).calls += 1
                call_id = block.get("id")
                if isinstance(call_id, str):
                    call_of.setdefault(call_id, (name, entry["id"], block.get("arguments")))
                key = (name, _canonical(block.get("arguments")))
                group = same.get(key)
                if group is None:
                    same[key] = RepeatedCall(name, key[1][:200], 1, [entry["id"]])
                else:
                    group.count += 1
                    group.entry_ids.append(entry["id"])
        elif role == "toolResult":
            call_id = message.get("toolCallId")
            if isinstance(call_id, str):
                results.setdefault(call_id, entry)
            if message.get("isError") is True:
                recorded = message.get("toolName")
                if not (isinstance(recorded, str) and recorded) and isinstance(call_id, str) and call_id in call_of:
                    recorded = call_of[call_id][0]
                tool = _name(recorded)
                facts.tools.setdefault(tool, ToolCount(tool)).errors += 1
    facts.repeated_calls = [group for group in same.values() if group.count > 1]
    # Interrupted calls, waits and edited files: each call against its result.
    waits: list[Wait] = []
    edited: dict[str, None] = {}
    for call_id, (name, entry_id, arguments) in call_of.items():
        result = results.get(call_id)
        if result is None:
            facts.interrupted_calls.append(InterruptedCall(name, call_id, entry_id))
            continue
        start = parse_timestamp_ms(by_id[entry_id].get("timestamp"))
        end = parse_timestamp_ms(result.get("timestamp"))
        if start is not None and end is not None:
            waits.append(Wait(name, call_id, entry_id, result["id"], int(end - start)))
        message = _message(result)
        if message is not None and message.get("isError") is not True:
            for path in _edited_paths(name, arguments):
                edited.setdefault(path, None)
    waits.sort(key=lambda w: (-w.ms, position.get(w.call_entry_id, 0)))
    facts.waits = waits[:WAITS_KEPT]
    facts.files_edited = list(edited)
    facts.error_loops = _error_loops(nodes, by_id, call_of)
    facts.compactions = _compactions(nodes)
    facts.abandoned_branches = _abandoned(entries, nodes, by_id)
    facts.records = list(records_from_entries(entries, keyed=False))  # type: ignore[arg-type]
    return facts


def _error_loops(nodes: Sequence[Mapping[str, Any]], by_id: Mapping[str, Mapping[str, Any]],
                 call_of: Mapping[str, tuple[str, str, Any]]) -> list[ErrorLoop]:
    """Rows of error results of one tool on each path: each result continues the row of the
    nearest tool result above it on its path (parents come before children in the file;
    an entry whose parent comes later starts afresh)."""
    # For each entry: the row ending at the nearest result at or above it,
    # (tool, length, first result id, last result id); length 0 after a success.
    row_at: dict[str, tuple[str, int, str, str] | None] = {}
    continued: set[str] = set()  # results whose row a later result continues
    ends: list[tuple[str, int, str, str]] = []
    for entry in nodes:
        entry_id = entry["id"]
        parent = entry.get("parentId")
        above = row_at.get(parent) if isinstance(parent, str) else None
        message = _message(entry)
        if message is None or message.get("role") != "toolResult":
            row_at[entry_id] = above
            continue
        if message.get("isError") is not True:
            row_at[entry_id] = None  # a success (or another tool) ends the row
            continue
        name = message.get("toolName")
        call_id = message.get("toolCallId")
        if not (isinstance(name, str) and name) and isinstance(call_id, str) and call_id in call_of:
            name = call_of[call_id][0]
        name = _name(name)
        if above is not None and above[0] == name:
            row = (name, above[1] + 1, above[2], entry_id)
            continued.add(above[3])
        else:
            row = (name, 1, entry_id, entry_id)
        row_at[entry_id] = row
        ends.append(row)
    # A row is reported at its end (a result no later result continues), once per first result
    # (two branches continuing one row: the longer one).
    best: dict[str, ErrorLoop] = {}
    for name, length, first, last in ends:
        if last in continued or length < LOOP_MIN:
            continue
        if first not in best or best[first].length < length:
            best[first] = ErrorLoop(name, length, first, last)
    order = {e["id"]: i for i, e in enumerate(nodes)}
    return sorted(best.values(), key=lambda loop: order.get(loop.first_entry_id, 0))


def _compactions(nodes: Sequence[Mapping[str, Any]]) -> list[CompactionCut]:
    out: list[CompactionCut] = []
    for index, entry in enumerate(nodes):
        if entry.get("type") != "compaction":
            continue
        before = entry.get("tokensBefore")
        tokens_before = before if isinstance(before, int) and not isinstance(before, bool) and before >= 0 else None
        below = {entry["id"]}
        after: int | None = None
        for later in nodes[index + 1:]:
            if later.get("parentId") not in below:
                continue
            below.add(later["id"])
            message = _message(later)
            if message is not None and message.get("role") == "assistant":
                after = _context_tokens(message)
                if after is not None:
                    break
        out.append(CompactionCut(entry["id"], tokens_before, after))
    return out


def _abandoned(entries: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]],
               by_id: Mapping[str, Mapping[str, Any]]) -> list[AbandonedBranch]:
    leaf = loaded_leaf_id(list(entries))  # type: ignore[arg-type]
    active: set[str] = set()
    current: Any = leaf
    while isinstance(current, str) and current in by_id and current not in active:
        active.add(current)
        current = by_id[current].get("parentId")
    parents = {e.get("parentId") for e in nodes}
    assigned: set[str] = set()
    out: list[AbandonedBranch] = []
    for entry in nodes:
        entry_id = entry["id"]
        if entry_id in parents or entry_id in active:
            continue  # not a leaf, or the active leaf
        segment: list[Any] = []
        current = entry_id
        while (isinstance(current, str) and current in by_id and current not in active
               and current not in assigned):
            assigned.add(current)
            segment.append(by_id[current])
            current = by_id[current].get("parentId")
        fork = current if isinstance(current, str) and current in by_id else None
        segment.reverse()
        out.append(AbandonedBranch(entry_id, fork, len(segment),
                                   list(records_from_entries(segment, keyed=False))))
    return out
