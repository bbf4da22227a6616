"""Tool-call/result pairing (docs/rules/projection.md P.4-P.9,
docs/rules/decisions.md D-11): the tool-window rule (:class:`ToolWindow`),
its plain-list form :func:`repair_orphan_tool_results`, the provider-bound
:func:`convert_to_llm` (conversion, then pairing repaired) and the P.9 guard.

The projection's hot loops keep inlined copies of :class:`ToolWindow` (and of
:func:`closes_tool_window`) for speed, each pinned against the rule by a test
comparing it with the general build (all Hypothesis tests but the last row's):

==============================================  ===================  =============================================
inlined copy                                    of                   pinned by
==============================================  ===================  =============================================
``ProjectionBuilder.extend`` (accept, close),   ToolWindow           ``test_projection.py::test_property_``
``incremental._open``                                                ``projection_never_mutates_input``
``ProjectionBuilder._extend_plain`` (accept,    ToolWindow           ``test_fast_path_equivalence.py::test_the_``
close), ``incremental._open_plain``                                  ``one_pass_build_equals_the_general_build``
``ProjectionBuilder._replay`` (accept, close,   ToolWindow           ``test_plain_replay.py::test_a_rebuild_from_``
open from the recorded steps)                                        ``the_kept_steps_equals_the_general_build``,
                                                                     ``::test_steps_grown_by_advance_rebuild_``
                                                                     ``what_the_general_build_gives``
``steps.plain_step`` (which ops close)          closes_tool_window   the same two
"a user message is transparent exactly when     closes_tool_window   ``test_fast_path_equivalence.py::test_a_``
its content is invisible" (the three loops)                          ``user_message_closes_a_tool_window_only_``
                                                                     ``when_visible`` (examples)
==============================================  ===================  =============================================
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sessiontree.core.projection.convert import convert_message, drops_in_conversion
from sessiontree.core.projection.model import ABSENT, INTERRUPTED_TEXT, Message
from sessiontree.errors import ToolPairingError

__all__ = [
    "assert_tool_pairing_invariant",
    "closes_tool_window",
    "convert_to_llm",
    "repair_orphan_tool_results",
]


def is_pairing_transparent(message: Any) -> bool:
    """Whether ``message`` neither closes a tool-call window nor is dropped by pairing:
    a non-mapping, a ``system`` message, or one that :func:`convert_to_llm` drops."""
    # docs/rules/decisions.md D-11: system messages neither close a pairing window nor are dropped.
    # Messages that provider conversion drops are transparent too, so that
    # pairing agent messages gives what the original gave by pairing after
    # conversion (a `!!` bash run while a tool runs must not orphan its result).
    if not isinstance(message, Mapping):
        return True
    return message.get("role") == "system" or drops_in_conversion(message)


def closes_tool_window(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` ends an open tool-call window (docs/rules/projection.md P.4,
    docs/rules/decisions.md D-11).

    An ``assistant`` message does (it opens its own); a ``toolResult`` never
    does; anything else does unless it is transparent: a ``system`` message,
    or one that :func:`convert_to_llm` drops (docs/rules/projection.md P.2, P.3, with JavaScript's
    whitespace for "blank"). :class:`ToolWindow` pairs with this rule (the
    projection's hot loops inline it); ``sessiontree.check`` uses it, with
    :class:`ToolWindow` itself, to report what the projection will repair.
    """
    role = message.get("role")
    if role == "toolResult":
        return False
    return role == "assistant" or not is_pairing_transparent(message)


def synthetic_tool_result(call_id: str, name: str, timestamp: Any) -> Message:
    """The error ``toolResult`` standing in for call ``call_id`` (tool ``name``) that never
    got one, with ``timestamp`` unless it is :data:`ABSENT`."""
    # docs/rules/projection.md P.5: the result of a call that never got one.
    result: Message = {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": INTERRUPTED_TEXT}],
        "isError": True,
    }
    if timestamp is not ABSENT:
        result["timestamp"] = timestamp
    return result


def tool_calls(content: Any) -> list[tuple[str, str]]:
    """The tool calls of an assistant message's ``content``, as ``(id, name)`` pairs
    in block order: every ``toolCall`` block whose ``id`` and ``name`` are both
    strings (docs/rules/projection.md P.4); repeated ids are kept. ``[]`` for
    anything but a list."""
    if not isinstance(content, list):
        return []
    calls = []
    for block in content:
        if (block.__class__ is dict or isinstance(block, Mapping)) and block.get("type") == "toolCall":
            call_id, name = block.get("id"), block.get("name")
            if isinstance(call_id, str) and isinstance(name, str):
                calls.append((call_id, name))
    return calls


class ToolWindow:
    """The tool-pairing state between one assistant turn and the next
    (docs/rules/projection.md P.4-P.7, docs/rules/decisions.md D-11): the rule written once, behind
    :func:`repair_orphan_tool_results`; the projection keeps this object as its
    state, and its hot loops (``ProjectionBuilder.extend``, ``_extend_plain``,
    ``_replay``) spell :meth:`accept`, :meth:`close` and :meth:`open` out inline
    on its sets and list, each naming the test that checks the copy.

    An assistant message closes the previous window and opens its own, unless
    it continues the response that opened the window (:meth:`continues`: the
    same ``responseId``, an agent that writes one API response as several
    messages, as Claude Code writes one record per content block): its calls
    then join the open window; a tool result is kept only when its call is
    allowed in the window and not yet answered; any other non-transparent
    message closes the window.
    """

    __slots__ = ("allowed", "answered", "pending", "response", "timestamp")

    def __init__(self) -> None:
        self.allowed: set[str] = set()
        self.answered: set[str] = set()
        self.pending: list[tuple[str, str]] = []
        self.timestamp: Any = ABSENT
        #: The ``responseId`` of the assistant message that opened the window (``None``: none).
        self.response: str | None = None

    def continues(self, message: Mapping[str, Any]) -> bool:
        """Whether assistant ``message`` is a further part of the window's own response
        (a non-empty string ``responseId`` equal to the one that opened the window)."""
        response = message.get("responseId")
        return self.response is not None and response == self.response

    @property
    def is_open(self) -> bool:
        """Whether closing would do anything."""
        return bool(self.pending or self.allowed)

    def accept(self, message: Mapping[str, Any]) -> bool:
        """Whether a ``toolResult`` is kept (else it is an orphan or a duplicate)."""
        call_id = message.get("toolCallId")
        if isinstance(call_id, str) and call_id in self.allowed and call_id not in self.answered:
            self.answered.add(call_id)
            return True
        return False

    def synthetic(self) -> list[Message]:
        """One synthetic result per unanswered call of a ``toolUse`` turn (the window stays open)."""
        return [synthetic_tool_result(call_id, name, self.timestamp)
                for call_id, name in self.pending if call_id not in self.answered]

    def close(self) -> list[Message]:
        """End the window, returning :meth:`synthetic`."""
        synthetic = self.synthetic()
        self.pending.clear()  # in place: the projection keeps references to these
        self.allowed.clear()
        self.answered.clear()
        self.response = None
        return synthetic

    def open(self, message: Mapping[str, Any]) -> None:
        """Start the window of an assistant message (call :meth:`close` first)."""
        # Only a turn that stopped to use tools expects results; aborted, error,
        # length-limited and "pending" turns are dropped whole by provider
        # adapters, so a synthetic result would be an orphan. One result per id,
        # never two.
        to_use = message.get("stopReason") == "toolUse"
        for call_id, name in tool_calls(message.get("content")):
            if to_use and call_id not in self.allowed:
                self.pending.append((call_id, name))
            self.allowed.add(call_id)
        self.timestamp = message.get("timestamp", ABSENT)
        response = message.get("responseId")
        self.response = response if isinstance(response, str) and response else None


def _pair(messages: Sequence[Any], repair_trailing: bool) -> list[int | Message] | None:
    """Tool pairing plan (docs/rules/projection.md P.4-P.7, docs/rules/decisions.md D-11).

    Returns ``None`` when nothing changes, else the new order as a list whose
    items are either an index into ``messages`` (kept) or a synthetic result
    (inserted just before the kept item that closed its window, or at the end).
    """
    plan: list[int | Message] = []
    changed = False
    window = ToolWindow()
    for index, message in enumerate(messages):
        if is_pairing_transparent(message):
            plan.append(index)
            continue
        role = message.get("role")
        if role == "toolResult":
            if window.accept(message):
                plan.append(index)
            else:
                changed = True  # orphan or duplicate
            continue
        if role == "assistant" and window.continues(message):
            plan.append(index)  # a further part of the open window's response
            window.open(message)
            continue
        synthetic = window.close()
        if synthetic:
            plan.extend(synthetic)
            changed = True
        plan.append(index)
        if role == "assistant":
            window.open(message)
    if repair_trailing:
        synthetic = window.close()
        if synthetic:
            plan.extend(synthetic)
            changed = True
    return plan if changed else None


def repair_orphan_tool_results(
    messages: list[dict[str, Any]], repair_trailing: bool
) -> list[dict[str, Any]]:
    """Pair tool results with their calls (docs/rules/projection.md P.4-P.8, docs/rules/decisions.md D-11).

    Walking in order: an ``assistant`` message closes the previous window and
    opens its own (allowed ids: its ``toolCall`` blocks with string ``id`` and
    ``name``); a ``toolResult`` is kept only when its ``toolCallId`` is allowed
    in the current window and not yet answered (orphans and duplicates are
    dropped); any other message closes the window. ``system`` messages, and
    messages that :func:`convert_to_llm` would drop, are transparent: they
    neither close the window nor are dropped.

    Closing a window of a ``stopReason == "toolUse"`` turn inserts, before the
    closing message and in call order, one synthetic result per unanswered
    call: ``{"role": "toolResult", "toolCallId", "toolName", "content":
    [text(INTERRUPTED_TEXT)], "isError": True, "timestamp": <assistant
    timestamp>}``. Aborted, error, length-limited and ``"pending"`` turns get
    none, though results for their ids are still accepted.

    Args:
        messages: the messages; never mutated.
        repair_trailing: close the window still open at the end too (for a
            reopened session, whose tools cannot still be running).

    Returns:
        ``messages`` itself when nothing changed, else a new list.
    """
    plan = _pair(messages, repair_trailing)
    if plan is None:
        return messages
    return [messages[item] if isinstance(item, int) else item for item in plan]


def assert_tool_pairing_invariant(messages: Iterable[Mapping[str, Any]]) -> None:
    """Refuse provider-bound context in which one tool call id appears in two
    different assistant messages (docs/rules/projection.md P.9). Assistant messages with
    ``excludeFromContext: true`` are skipped. Nothing is repaired.

    Raises:
        ToolPairingError: naming every such id, in first-seen order.
    """
    owner: dict[str, int] = {}
    repeated: list[str] = []
    for index, message in enumerate(messages):
        if message.get("role") != "assistant" or message.get("excludeFromContext") is True:
            continue
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if isinstance(block, Mapping) and block.get("type") == "toolCall" and isinstance(block.get("id"), str):
                call_id = block["id"]
                first = owner.setdefault(call_id, index)
                if first != index and call_id not in repeated:
                    repeated.append(call_id)
    if repeated:
        raise ToolPairingError(repeated)


def convert_to_llm(
    messages: Iterable[dict[str, Any]], *, repair_trailing: bool = False
) -> list[dict[str, Any]]:
    """Provider-bound messages from agent messages (docs/rules/projection.md P.2, P.3, P.4).

    Args:
        messages: agent messages (e.g. :attr:`SessionProjection.messages`);
            never modified.
        repair_trailing: also close tool calls still open at the end (docs/rules/projection.md P.6);
            the original's resume paths use it, plain conversion does not.

    Returns:
        A new list of ``system``, ``user``, ``assistant`` and ``toolResult``
        messages:

        * ``assistant``/``toolResult`` kept (null content as ``[]``); legacy
          ``redacted_thinking`` blocks become ``{"type": "thinking",
          "thinking": "", "thinkingSignature": data, "redacted": True}`` in a
          copy;
        * ``system`` passes through unchanged (format 4);
        * ``user`` kept when visible (docs/rules/projection.md P.3), array content filtered to visible
          blocks;
        * ``bashExecution`` becomes a user text (``bash_text``) unless
          ``excludeFromContext`` is true;
        * ``custom`` becomes a user message of its visible blocks unless
          excluded or invisible (``display`` has no effect);
        * ``branchSummary`` with a non-empty summary becomes a wrapped user text;
        * ``compactionSummary`` and unknown roles are dropped.

        Tool pairing is then repaired with :func:`repair_orphan_tool_results`.
    """
    out: list[Message] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        converted = convert_message(message)
        if converted is not None:
            out.append(converted)
    return repair_orphan_tool_results(out, repair_trailing)
