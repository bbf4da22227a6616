"""Tool call/result pairing along every branch: the checker's pairing pass.

Pairing (docs/rules/projection.md P.4-P.7, P.9, docs/rules/decisions.md D-11)
is checked on the stored messages along every root-to-leaf branch, before
context edits and compaction, with the projection's own tool-window rule
(:class:`~sessiontree.core.projection.pairing.ToolWindow`, not a copy): an
assistant message opens a window, or joins the open one when it continues the
same response (``responseId``: Claude Code's parallel calls, one record each,
docs/agents/claude-code.md), results match its calls by id, any other
context-visible message closes it, ``system`` messages are transparent. Gaps are warnings, since every
projection repairs them (docs/rules/projection.md seed:interrupted-tool-calls);
a call id repeated in two assistant messages of one branch is an error
(providers reject it).
"""

from __future__ import annotations

from typing import Any

from sessiontree.check.state import FileState, Rec
from sessiontree.core.projection import closes_tool_window, entry_to_context_messages
from sessiontree.core.projection.pairing import ToolWindow

__all__ = ["check_pairing"]


def check_pairing(state: FileState, cycles: list[list[Rec]]) -> None:
    """Report ``tool-call-without-result``, ``orphan-tool-result``,
    ``duplicate-tool-result`` and ``duplicate-tool-call-id`` along every branch
    of ``state.model``; the first entry of each of ``cycles`` is walked as a
    root (as the tree treats it)."""
    _PairingWalk(state).run(cycles)


class _Window:
    """The tool-call window open at one point of a branch: the projection's own
    :class:`~sessiontree.core.projection.pairing.ToolWindow` (one rule, docs/rules/projection.md
    P.4-P.7, including the continuation of one response written as several assistant
    messages), plus, for the report, the entry that carried each call.

    ``rule``: the window (``None``: none open); ``owners``: call id -> the entry of its call.
    Copied (:meth:`fork`) where a branch splits, since the rule's state is mutable.
    """

    __slots__ = ("owners", "rule")

    def __init__(self) -> None:
        self.rule = ToolWindow()
        self.owners: dict[str, Rec] = {}

    def fork(self) -> _Window:
        """An independent copy, for one child of a branch point."""
        copy = _Window()
        rule = copy.rule
        rule.allowed = set(self.rule.allowed)
        rule.answered = set(self.rule.answered)
        rule.pending = list(self.rule.pending)
        rule.timestamp = self.rule.timestamp
        rule.response = self.rule.response
        copy.owners = dict(self.owners)
        return copy


class _PairingWalk:
    """One depth-first walk over the model's branches (an explicit stack)."""

    def __init__(self, state: FileState) -> None:
        self.model = state.model
        self.problem = state.problem

    def run(self, cycles: list[list[Rec]]) -> None:
        """Walk every root-to-leaf branch (docs/rules/projection.md P.4-P.7, P.9,
        docs/rules/decisions.md D-11); ``cycles`` as :func:`check_pairing`."""
        breakers = {id(cycle[0]) for cycle in cycles}
        children: dict[str, list[Rec]] = {}
        roots: list[Rec] = []
        for rec in self.model:
            if rec.parent is None or id(rec) in breakers:
                roots.append(rec)
            else:
                children.setdefault(rec.parent, []).append(rec)
        reported: set[tuple[int, str]] = set()
        active_calls: dict[str, int] = {}  # call id -> line of the assistant message on this branch
        stack: list[tuple[bool, Rec, Any]] = [(True, rec, _Window()) for rec in reversed(roots)]
        while stack:
            enter, rec, payload = stack.pop()
            if not enter:
                for call_id in payload:
                    del active_calls[call_id]
                continue
            window: _Window = payload
            self._step(rec, window, reported)
            registered = self._register_calls(rec, active_calls)
            stack.append((False, rec, registered))
            below = children.get(rec.key or "", [])
            if not below:
                # A reopened session closes trailing calls too (docs/rules/decisions.md D-11).
                self._close(window, reported)
            for index, child in enumerate(reversed(below)):
                # The last child pushed is walked first and may take the window itself.
                stack.append((True, child, window if index == len(below) - 1 else window.fork()))

    def _step(self, rec: Rec, window: _Window, reported: set[tuple[int, str]]) -> None:
        """Advance ``window`` over one entry, reporting what the projection repairs."""
        obj = rec.obj
        stored = obj.get("message") if obj.get("type") == "message" else None
        message: dict[str, Any] = stored if isinstance(stored, dict) else {}
        role = message.get("role")
        rule = window.rule
        if role == "assistant":
            if not rule.continues(message):
                self._close(window, reported)
            rule.open(message)  # a further part of the same response joins the open window
            for block in _blocks(message):
                call_id = block.get("id")
                if block.get("type") == "toolCall" and isinstance(call_id, str):
                    window.owners.setdefault(call_id, rec)
            return
        if role == "toolResult":
            call_id = message.get("toolCallId")
            answered = isinstance(call_id, str) and call_id in rule.answered
            if rule.accept(message):
                return
            if answered:
                self.problem("duplicate-tool-result", rec.line,
                             f'second tool result for "{call_id}" (dropped from model context)', rec.oid)
            else:
                self.problem("orphan-tool-result", rec.line,
                             f'tool result for "{call_id}" answers no tool call of the preceding assistant message '
                             "(dropped from model context)", rec.oid)
            return
        if _closes_window(obj):
            self._close(window, reported)

    def _close(self, window: _Window, reported: set[tuple[int, str]]) -> None:
        """Close ``window``: each call the projection gives a synthetic result is a
        ``tool-call-without-result`` on the line of the entry that carried it (once per entry)."""
        for result in window.rule.close():
            call_id = result["toolCallId"]
            owner = window.owners.get(call_id)
            if owner is None or (id(owner), call_id) in reported:
                continue
            reported.add((id(owner), call_id))
            self.problem("tool-call-without-result", owner.line,
                         f'tool call "{call_id}" ({result["toolName"]}) of a toolUse turn has no result '
                         '(readers add an "interrupted" error result)', owner.oid)
        window.owners.clear()

    def _register_calls(self, rec: Rec, active: dict[str, int]) -> list[str]:
        obj = rec.obj
        message = obj.get("message") if obj.get("type") == "message" else None
        if not isinstance(message, dict) or message.get("role") != "assistant":
            return []
        if message.get("excludeFromContext") is True:
            return []  # docs/rules/projection.md P.9 skips messages that never reach a provider
        registered: list[str] = []
        for block in _blocks(message):
            call_id = block.get("id")
            if block.get("type") != "toolCall" or not isinstance(call_id, str) or call_id in registered:
                continue
            if call_id in active:
                self.problem("duplicate-tool-call-id", rec.line,
                             f'tool call id "{call_id}" also appears in the assistant message on line '
                             f"{active[call_id]} of the same branch (providers reject repeated ids)", rec.oid)
                continue
            active[call_id] = rec.line
            registered.append(call_id)
        return registered


def _closes_window(obj: dict[str, Any]) -> bool:
    """Whether an entry (not assistant/toolResult) yields a message that closes the
    tool-call window: the projection's own rule (docs/rules/projection.md P.2-P.4, Q.6,
    docs/rules/decisions.md D-11)."""
    return any(closes_tool_window(m) for m in entry_to_context_messages(obj))


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict)]
