"""Tool call/result pairing along every branch: the checker's pairing pass.

Pairing (docs/rules/projection.md P.4-P.7, P.9, docs/rules/decisions.md D-11)
is checked on the stored messages along every root-to-leaf branch, before
context edits and compaction: an assistant message opens a window, results
match its calls by id, any other context-visible message closes it,
``system`` messages are transparent. Gaps are warnings, since every
projection repairs them (docs/rules/projection.md seed:interrupted-tool-calls);
a call id repeated in two assistant messages of one branch is an error
(providers reject it).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from sessiontree.check.state import FileState, Rec
from sessiontree.core.projection import closes_tool_window, entry_to_context_messages

__all__ = ["check_pairing"]


def check_pairing(state: FileState, cycles: list[list[Rec]]) -> None:
    """Report ``tool-call-without-result``, ``orphan-tool-result``,
    ``duplicate-tool-result`` and ``duplicate-tool-call-id`` along every branch
    of ``state.model``; the first entry of each of ``cycles`` is walked as a
    root (as the tree treats it)."""
    _PairingWalk(state).run(cycles)


class _Window(NamedTuple):
    """The tool-call window an assistant message opened.

    ``owner``: that message (``None``: no window); ``allowed``: its call ids;
    ``pending``: ``(id, name)`` of the calls of a toolUse turn, which need a
    result; ``answered``: call ids answered so far.
    """

    owner: Rec | None
    allowed: frozenset[str]
    pending: tuple[tuple[str, str], ...]
    answered: frozenset[str]


_NO_WINDOW = _Window(None, frozenset(), (), frozenset())


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
        stack: list[tuple[bool, Rec, Any]] = [(True, rec, _NO_WINDOW) for rec in reversed(roots)]
        while stack:
            enter, rec, payload = stack.pop()
            if not enter:
                for call_id in payload:
                    del active_calls[call_id]
                continue
            window = self._step(rec, payload, reported)
            registered = self._register_calls(rec, active_calls)
            stack.append((False, rec, registered))
            below = children.get(rec.key or "", [])
            if not below:
                # A reopened session closes trailing calls too (docs/rules/decisions.md D-11).
                self._close(window, reported)
            for child in reversed(below):
                stack.append((True, child, window))

    def _step(self, rec: Rec, window: _Window, reported: set[tuple[int, str]]) -> _Window:
        obj = rec.obj
        stored = obj.get("message") if obj.get("type") == "message" else None
        message: dict[str, Any] = stored if isinstance(stored, dict) else {}
        role = message.get("role")
        if role == "assistant":
            self._close(window, reported)
            calls = tuple(
                (block["id"], block["name"]) for block in _blocks(message)
                if block.get("type") == "toolCall" and isinstance(block.get("id"), str)
                and isinstance(block.get("name"), str)
            )
            pending = calls if message.get("stopReason") == "toolUse" else ()
            return _Window(rec, frozenset(c[0] for c in calls), pending, frozenset())
        if role == "toolResult":
            call_id = message.get("toolCallId")
            if not isinstance(call_id, str) or call_id not in window.allowed:
                self.problem("orphan-tool-result", rec.line,
                             f'tool result for "{call_id}" answers no tool call of the preceding assistant message '
                             "(dropped from model context)", rec.oid)
                return window
            if call_id in window.answered:
                self.problem("duplicate-tool-result", rec.line,
                             f'second tool result for "{call_id}" (dropped from model context)', rec.oid)
                return window
            return window._replace(answered=window.answered | {call_id})
        if _closes_window(obj):
            self._close(window, reported)
            return _NO_WINDOW
        return window

    def _close(self, window: _Window, reported: set[tuple[int, str]]) -> None:
        owner = window.owner
        if owner is None:
            return
        for call_id, name in window.pending:
            if call_id in window.answered or (id(owner), call_id) in reported:
                continue
            reported.add((id(owner), call_id))
            self.problem("tool-call-without-result", owner.line,
                         f'tool call "{call_id}" ({name}) of a toolUse turn has no result '
                         '(readers add an "interrupted" error result)', owner.oid)

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
