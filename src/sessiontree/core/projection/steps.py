"""The steps of a plain branch: what the one-pass build of a branch without
compactions, edits or P.1 copies (``ProjectionBuilder.build_plain``) derives from
each entry (:func:`plain_step`), kept with the branch (:class:`PlainSteps`) so that
a rebuild replays them (``ProjectionBuilder._replay``) without reading the entries
again (docs/decisions/projection-modules.md)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any, Final

from sessiontree.core.projection.context import SETTING_KINDS, entry_setting
from sessiontree.core.projection.convert import CONTENT_ROLES, context_message, is_content_visible
from sessiontree.core.projection.model import ABSENT, Entry
from sessiontree.core.projection.pairing import is_pairing_transparent, tool_calls

__all__ = [
    "OP_ASSISTANT",
    "OP_CALLS",
    "OP_CALLS_KEPT",
    "OP_CLOSE",
    "OP_MADE",
    "OP_RESULT",
    "OP_SETTING",
    "OP_SKIP",
    "OP_SYSTEM",
    "OP_TRANSPARENT",
    "SKIP_OP",
    "PlainOp",
    "PlainSteps",
    "plain_step",
    "plain_steps",
]

# What the one-pass build of a plain branch does with one entry (see plain_step),
# as the first item of an (op, item, extra) step. The ops that close the tool
# window are numbered together (<= OP_MADE), so that the replay tests for them at once.
OP_RESULT = 0  # a tool result (item: the message; extra: its toolCallId if a string, else None)
OP_ASSISTANT = 1  # an assistant message without tool calls (item: it; extra: its timestamp or ABSENT)
OP_CALLS = 2  # an assistant message with tool calls and stopReason "toolUse" (item: it; extra:
#                (its timestamp or ABSENT, id, name, id, name, ...) of the first call of each id)
OP_CALLS_KEPT = 3  # the same with another stopReason: its calls are allowed but left unanswered
OP_CLOSE = 4  # another stored message that closes the tool window (item: the message)
OP_MADE = 5  # a custom_message or branch_summary (item: the entry; extra: whether its message closes)
OP_TRANSPARENT = 6  # a stored message transparent to pairing, not a system one (item: the message)
OP_SYSTEM = 7  # a stored system message (item: the message)
OP_SETTING = 8  # a setting change (item: the entry)
OP_SKIP = 9  # nothing to project (item, extra: None)

#: One step of :func:`plain_step`: (op, item, extra).
PlainOp = tuple[int, Any, Any]
SKIP_OP: Final[PlainOp] = (OP_SKIP, None, None)


class PlainSteps:
    """The :func:`plain_step` steps of a plain branch, in branch order, kept as three
    parallel lists: ``codes`` (a ``bytearray`` of ops), ``items`` and ``extras``.

    Parallel lists rather than a tuple per entry: a branch of n entries then
    adds three containers, not n, for the cyclic collector to count and
    traverse (what :func:`plain_step` returns is transient).
    """

    __slots__ = ("codes", "extras", "items")

    def __init__(self, codes: bytearray | None = None, items: list[Any] | None = None,
                 extras: list[Any] | None = None) -> None:
        self.codes = bytearray() if codes is None else codes
        self.items: list[Any] = [] if items is None else items
        self.extras: list[Any] = [] if extras is None else extras

    def __len__(self) -> int:
        return len(self.codes)

    def append(self, step: PlainOp) -> None:
        """Add one step at the end."""
        op, item, extra = step
        self.codes.append(op)
        self.items.append(item)
        self.extras.append(extra)

    def prefix(self, count: int) -> PlainSteps:
        """The first ``count`` steps (``self`` when that is all of them)."""
        if count == len(self.codes):
            return self
        return PlainSteps(self.codes[:count], self.items[:count], self.extras[:count])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PlainSteps):
            return NotImplemented
        return (self.codes, self.items, self.extras) == (other.codes, other.items, other.extras)

    __hash__ = None  # type: ignore[assignment]  # mutable


def plain_step(entry: Entry) -> PlainOp | None:
    """What the one-pass build of a plain branch (:meth:`ProjectionBuilder.build_plain`)
    derives from one entry of it, as one ``(op, item, extra)`` step (the ``OP_*``
    codes); ``None`` when a plain branch cannot have the entry: a ``compaction``, a
    ``context_edit``, a message needing a docs/rules/projection.md P.1 copy or
    stored as anything but a dict.

    A step is a pure function of its entry (on a plain branch no edit and no
    P.1 copy applies): the message the entry contributes, how it takes part in
    tool pairing (docs/rules/decisions.md D-11: answers a call, opens calls,
    closes the window, or is transparent), or the setting it changes. Stored
    entries are never mutated, so the steps of a branch stay right for as long
    as the branch is kept, and a rebuild replays them
    (:meth:`ProjectionBuilder._replay`) without reading the entries again: the
    steps sit in three contiguous lists (:class:`PlainSteps`), where the entries
    are scattered over the loaded session's heap. The pairing itself, which
    depends on the order of the whole branch, is done by the replay on every
    build. The first build records the steps in its own pass
    (:meth:`ProjectionBuilder._extend_plain`); this function gives the step of
    one appended entry (:meth:`ProjectionBuilder.advance`), and the tests check
    the two agree.
    """
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        if message.__class__ is not dict:
            return None  # the general build gives it no message (or a P.1 copy of a dict subclass)
        role = message.get("role")
        content = message.get("content")
        if role == "toolResult":
            if content is None:
                return None  # needs a docs/rules/projection.md P.1 copy: the general build makes it
            call_id = message.get("toolCallId")
            return OP_RESULT, message, call_id if isinstance(call_id, str) else None
        if role == "assistant":
            if content is None or "responseId" in message:
                return None  # a response in parts: the general build pairs it (pairing.ToolWindow)
            calls = tool_calls(content)
            stamp = message.get("timestamp", ABSENT)
            if not calls:
                return OP_ASSISTANT, message, stamp
            op = OP_CALLS if message.get("stopReason") == "toolUse" else OP_CALLS_KEPT
            if len(calls) == 1:
                return op, message, (stamp, *calls[0])
            first: dict[str, str] = {}  # an id repeated in one message: its first call counts (ToolWindow.open)
            for call_id, name in calls:
                first.setdefault(call_id, name)
            return op, message, (stamp, *itertools.chain.from_iterable(first.items()))
        if content is None and isinstance(role, str) and role in CONTENT_ROLES:
            return None  # needs a docs/rules/projection.md P.1 copy: the general build makes it
        # a user message is transparent exactly when its content is invisible
        if is_content_visible(content) if role == "user" else not is_pairing_transparent(message):
            return OP_CLOSE, message, None
        return (OP_SYSTEM if role == "system" else OP_TRANSPARENT), message, None
    if kind == "custom_message" or kind == "branch_summary":
        made = context_message(entry)
        return SKIP_OP if made is None else (OP_MADE, entry, not is_pairing_transparent(made))
    if kind == "compaction" or kind == "context_edit":
        return None
    if isinstance(kind, str) and kind in SETTING_KINDS and entry_setting(entry) is not None:
        return OP_SETTING, entry, None
    return SKIP_OP


def plain_steps(path: Iterable[Entry]) -> PlainSteps | None:
    """:func:`plain_step` of each entry of ``path``, in order; ``None`` when one is ``None``."""
    ops = PlainSteps()
    for entry in path:
        step = plain_step(entry)
        if step is None:
            return None
        ops.append(step)
    return ops
