"""Rebuilding the model context of a session branch (docs/rules/projection.md seed:context-building).

The projection walks the active branch root to leaf and returns the
model-visible messages together with the entries they come from
(docs/rules/projection.md §3.6-§3.8, docs/rules/decisions.md D-11).

Invariants:

* Raw entries and their messages are never mutated. Where something must
  change (null content, a context edit, a converted block) a shallow copy is
  made; unchanged messages are shared with the raw entries, as the original
  agent shares them.
* Nothing here recurses on the length of a branch: paths are walked with
  loops (:func:`sessiontree.tree.get_branch` is iterative too), so a
  100,000-entry chain projects like a short one.
* Projection messages are *agent* messages (docs/rules/projection.md Q.9, Q.17): ``custom``,
  ``bashExecution``, ``branchSummary`` and ``system`` keep their stored roles,
  and the active compaction boundary is a ``custom`` message with
  ``customType: "compaction"``. Provider-bound conversion is a separate step,
  :func:`convert_to_llm`.
* Tool pairing is applied by the projection itself (docs/rules/decisions.md D-11): orphaned and
  duplicate tool results are dropped; each unanswered call of a
  ``stopReason == "toolUse"`` turn gets a synthetic error result, owned by the
  entry whose message closes the window (or by the last entry, for calls still
  open at the end of a reopened session). Applying :func:`convert_to_llm` to
  the projection's messages gives exactly what converting first and repairing
  afterwards (the original order) gives: messages that conversion would drop
  are transparent to pairing, like ``system`` messages.
* Settings (thinking level, model, context window) are replayed from the raw
  entries of the whole path, including the compacted part; context edits
  never change them (docs/rules/projection.md Q.3, R.7, S).
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final

from sessiontree.core.transcript import (
    bash_text,
    branch_summary_text,
    compose_boundary_content,
    serialize_messages,
)
from sessiontree.core.tree import get_branch, loaded_leaf_id, parse_timestamp_ms
from sessiontree.errors import ToolPairingError
from sessiontree.format.gcpause import gc_paused
from sessiontree.format.types import Entry

__all__ = [
    "HISTORICAL_SUMMARY_PREFIX",
    "HISTORICAL_SUMMARY_SUFFIX",
    "INTERRUPTED_TEXT",
    "LAST_ENTRY",
    "HistoricalProjection",
    "ProjectedEntry",
    "ProjectionBuilder",
    "SessionContext",
    "SessionProjection",
    "assert_tool_pairing_invariant",
    "build_context_entries",
    "build_historical_projection",
    "build_session_context",
    "build_session_projection",
    "closes_tool_window",
    "convert_to_llm",
    "entry_to_context_messages",
    "get_current_system_message",
    "is_active_compaction",
    "is_retired_record",
    "repair_orphan_tool_results",
]

Message = dict[str, Any]

#: Text of the synthetic error result given to a tool call that never got a
#: result (docs/rules/projection.md seed:interrupted-tool-calls; P.5). It must not claim that the
#: call had no effect: the process may have stopped after the tool ran.
INTERRUPTED_TEXT: Final = (
    "Tool execution was interrupted before its result was recorded, so the "
    "result is unavailable. The tool may have run partly or completely; its "
    "effects are unknown and should be checked before retrying."
)


class _Leaf(enum.Enum):
    LAST = "last entry"


#: Default ``leaf_id``: the leaf as loaded, i.e. the last entry of the list
#: (docs/rules/projection.md Q.1, Q.13), or the target of a final upstream ``leaf`` record
#: (:func:`sessiontree.tree.loaded_leaf_id`), so that a projection of stored
#: entries and a manager that loaded them agree.
LAST_ENTRY: Final = _Leaf.LAST

LeafArg = str | None | _Leaf

# Roles whose null or missing content is replaced by [] (docs/rules/projection.md P.1).
_CONTENT_ROLES = frozenset({"user", "assistant", "toolResult", "custom"})
# Roles a context edit may target inside a `message` entry (docs/rules/projection.md R.1).
_EDITABLE_ROLES = frozenset({"user", "assistant", "toolResult"})
# Roles whose string replacement becomes one text block (docs/rules/projection.md R.2).
_ARRAY_CONTENT_ROLES = frozenset({"assistant", "toolResult"})

# JavaScript's String.prototype.trim whitespace (WhiteSpace + LineTerminator).
# Python's str.strip differs (it strips U+001C-U+001F and U+0085 and keeps
# U+FEFF), and visibility must match the original byte for byte.
_JS_WHITESPACE = frozenset(
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


# Marks a key that is absent, as opposed to present with the value None.
_ABSENT: Final = object()


# --------------------------------------------------------------------------
# Data classes


@dataclass(frozen=True)
class ProjectedEntry:
    """One entry of a projection and the model-visible messages it contributes.

    Attributes:
        source_entry: the (P.1-normalized) entry on the active branch; shared
            with the raw entries unless its content had to be normalized.
        messages: its messages in context order. ``[]`` for state entries,
            omitted edit targets and kept-tail entries (whose text lives in
            the boundary message).
    """

    source_entry: dict[str, Any]
    messages: list[dict[str, Any]]


@dataclass(frozen=True)
class SessionProjection:
    """The context-edited projection of one branch (docs/rules/projection.md seed:context-building, Q.17).

    Attributes:
        messages: the model-visible messages in context order (agent
            messages, not provider-converted).
        thinking_level: the last ``thinking_level_change`` on the path, ``"off"``
            by default.
        model: ``{"provider", "modelId"}`` of the last model change or
            assistant message on the path, ``None`` by default.
        context_window: the last ``context_window_change`` value, ``None`` by
            default (docs/rules/projection.md §3.8).
        system_message: the replayed system state of ``messages``
            (:func:`get_current_system_message`), ``None`` without one.
        sources: the context entries, exactly :func:`build_context_entries`
            for the same leaf (P.1-normalized).
        ends: per source, the offset in ``messages`` just past the messages
            it contributes (non-decreasing; the last is ``len(messages)``).
        entries: (property) one :class:`ProjectedEntry` per source with its
            slice of ``messages``; ``messages`` is their concatenation.

    Built by :func:`build_session_projection`. ``entries`` is materialized
    on first access from the source entries and, per source entry, the
    offset in ``messages`` where its messages end: most callers (building a
    request) only read ``messages``, and one object per entry of a long
    branch costs more than the rest of the projection.
    """

    messages: list[dict[str, Any]]
    thinking_level: str = "off"
    model: dict[str, Any] | None = None
    context_window: int | None = None
    system_message: dict[str, Any] | None = None
    #: The context entries, in order (``build_context_entries``).
    sources: Sequence[dict[str, Any]] = field(default=(), repr=False)
    #: ``ends[i]``: the offset in ``messages`` just past ``sources[i]``'s
    #: messages (non-decreasing; the last one is ``len(messages)``).
    ends: Sequence[int] = field(default=(), repr=False)

    @cached_property
    def entries(self) -> list[ProjectedEntry]:
        """One :class:`ProjectedEntry` per context entry, built once on first access."""
        messages, start, out = self.messages, 0, []
        for source, end in zip(self.sources, self.ends):
            out.append(ProjectedEntry(source, messages[start:end]))
            start = end
        return out


@dataclass(frozen=True)
class SessionContext:
    """What :func:`build_session_context` returns (docs/rules/projection.md Q.1, Q.17).

    Attributes:
        messages: the projection's messages.
        thinking_level: as in :class:`SessionProjection`.
        model: as in :class:`SessionProjection`.
    """

    messages: list[dict[str, Any]] = field(default_factory=list)
    thinking_level: str = "off"
    model: dict[str, Any] | None = None


# --------------------------------------------------------------------------
# Small helpers


# The same characters as one string, for str.strip: a text is blank exactly when
# stripping them leaves nothing (one C call instead of a generator per text).
_JS_WHITESPACE_CHARS: Final = "".join(sorted(_JS_WHITESPACE))


def _is_blank(text: str) -> bool:
    return not text.strip(_JS_WHITESPACE_CHARS)


def _block_visible(block: Any) -> bool:
    # docs/rules/projection.md P.3: images and non-blank texts are visible; an unknown block
    # kind with a non-blank type fails visible so future kinds are not lost.
    if not isinstance(block, Mapping):
        return False
    kind = block.get("type")
    if kind == "image":
        return True
    if kind == "text":
        text = block.get("text")
        return isinstance(text, str) and not _is_blank(text)
    return isinstance(kind, str) and not _is_blank(kind)


def _content_visible(content: Any) -> bool:
    if isinstance(content, str):
        return not _is_blank(content)
    if isinstance(content, list):
        return any(_block_visible(b) for b in content)
    return False


def _iso_to_ms(value: Any) -> int | None:
    """Whole milliseconds since the epoch of an entry timestamp, like JS ``Date.parse``
    (:func:`sessiontree.tree.parse_timestamp_ms`, truncated); a number is taken
    as it is; ``None`` when unparsable (JavaScript would give NaN, written as null)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    ms = parse_timestamp_ms(value)
    return None if ms is None else int(ms // 1)


def _role(message: Mapping[str, Any]) -> str | None:
    """The message's role when it is a string, else ``None``: a list or object
    role must not reach a set lookup (unhashable), whatever the input."""
    role = message.get("role")
    return role if isinstance(role, str) else None


def _normalize_entry(entry: Entry) -> Entry:
    """docs/rules/projection.md P.1: null/missing content of a user-like message becomes ``[]`` in a copy."""
    if entry.get("type") != "message":
        return entry
    message = entry.get("message")
    if (
        isinstance(message, dict)
        and _role(message) in _CONTENT_ROLES
        and message.get("content") is None
    ):
        fixed = dict(entry)
        fixed["message"] = {**message, "content": []}
        return fixed
    return entry


def is_active_compaction(entry: Mapping[str, Any]) -> bool:
    """Whether ``entry`` is an active verbatim compaction boundary
    (docs/rules/format.md seed:compaction-entry).

    True only for ``type == "compaction"`` with ``details.strategy`` exactly
    ``"verbatim-lines"``; retired summary compactions are inert.
    """
    if entry.get("type") != "compaction":
        return False
    details = entry.get("details")
    return isinstance(details, Mapping) and details.get("strategy") == "verbatim-lines"


def is_retired_record(entry: Mapping[str, Any]) -> bool:
    """Whether ``entry`` is a retired, archival record (docs/rules/format.md seed:compaction-entry,
    "ContextCompactionEntry (Retired)", "Extended Message Types"; docs/rules/versions.md C.14).

    True for a ``compaction`` without ``details.strategy == "verbatim-lines"``
    (a summary compaction of older agents), a ``context_compaction`` (logical
    deletions of older agents) and a ``message`` whose role is
    ``compactionSummary``. Such records are kept, parsed and shown by audit
    and export tools, and contribute nothing to the model context of
    :func:`build_session_projection` (the format's projection). Only
    :func:`build_historical_projection` gives a retired ``compaction`` its
    old meaning back, for a historical view.
    """
    kind = entry.get("type")
    if kind == "compaction":
        return not is_active_compaction(entry)
    if kind == "context_compaction":
        return True
    if kind == "message":
        message = entry.get("message")
        return isinstance(message, Mapping) and message.get("role") == "compactionSummary"
    return False


def _copy_present(target: dict[str, Any], source: Mapping[str, Any], *keys: str) -> None:
    # A JS `undefined` property is dropped on write; copying only present
    # keys gives the same JSON as the original.
    for key in keys:
        if key in source:
            target[key] = source[key]


def _context_message(entry: Entry) -> Message | None:
    """docs/rules/projection.md Q.6: the context message of one (normalized) entry, without edits.

    Compactions give nothing here: only the latest boundary speaks, and it is
    built by the projection itself (docs/rules/projection.md Q.11).
    """
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        return message if isinstance(message, dict) else None
    if kind == "custom_message":
        content = entry.get("content")
        out: Message = {
            "role": "custom",
            "customType": entry.get("customType"),
            "content": [] if content is None else content,
        }
        _copy_present(out, entry, "display", "details", "stageAdmissionKey")
        out["timestamp"] = _iso_to_ms(entry.get("timestamp"))
        if entry.get("excludeFromContext") is True:
            out["excludeFromContext"] = True
        return out
    if kind == "branch_summary":
        summary = entry.get("summary")
        if not isinstance(summary, str) or summary == "":
            return None
        out = {"role": "branchSummary", "summary": summary}
        _copy_present(out, entry, "fromId")
        out["timestamp"] = _iso_to_ms(entry.get("timestamp"))
        return out
    return None


def _boundary_message(boundary: Mapping[str, Any], tail: Sequence[Any]) -> Message:
    # docs/rules/projection.md Q.9/Q.10: one visible custom message holding summary + tail.
    summary = boundary.get("summary")
    return {
        "role": "custom",
        "customType": "compaction",
        "content": compose_boundary_content(summary if isinstance(summary, str) else "", tail),
        "display": True,
        "details": boundary.get("details"),
        "timestamp": _iso_to_ms(boundary.get("timestamp")),
    }


def _boundary_messages(boundary: Mapping[str, Any], tail: Sequence[Any]) -> list[Message]:
    # docs/rules/projection.md §3.6, Q.17: the systemMessage checkpoint is replayed before
    # the compacted transcript.
    out: list[Message] = []
    checkpoint = boundary.get("systemMessage")
    if isinstance(checkpoint, dict):
        out.append(checkpoint)
    out.append(_boundary_message(boundary, tail))
    return out


def entry_to_context_messages(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The context messages one entry contributes on its own (docs/rules/projection.md Q.6, Q.16).

    Args:
        entry: a session entry (not modified).

    Returns:
        * ``message``: ``[message]`` (any role; null content becomes ``[]`` in
          a copy, docs/rules/projection.md P.1);
        * ``custom_message``: ``[{"role": "custom", customType, content,
          display, details?, stageAdmissionKey?, timestamp (ms),
          excludeFromContext?}]``;
        * ``branch_summary`` with a non-empty summary: ``[{"role":
          "branchSummary", summary, fromId, timestamp (ms)}]``;
        * an active verbatim ``compaction``: its ``systemMessage`` checkpoint
          when stored, then the boundary message without a kept tail (as the
          boundary entry's messages of a projection with an empty tail);
        * anything else: ``[]``.

    Context edits are not applied: they depend on the branch.
    """
    normalized = _normalize_entry(entry if isinstance(entry, dict) else dict(entry))
    if is_active_compaction(normalized):
        return _boundary_messages(normalized, [])
    message = _context_message(normalized)
    return [] if message is None else [message]


# --------------------------------------------------------------------------
# Provider conversion and tool pairing


def _drops_in_conversion(message: Mapping[str, Any]) -> bool:
    """Whether :func:`convert_to_llm` drops ``message`` entirely (docs/rules/projection.md P.2)."""
    role = message.get("role")
    if role in ("assistant", "toolResult", "system"):
        return False
    if role == "user":
        return not _content_visible(message.get("content"))
    if role == "bashExecution":
        return message.get("excludeFromContext") is True
    if role == "custom":
        return message.get("excludeFromContext") is True or not _content_visible(
            message.get("content")
        )
    if role == "branchSummary":
        summary = message.get("summary")
        return not (isinstance(summary, str) and summary != "")
    return True  # compactionSummary and unknown roles


def _is_transparent(message: Any) -> bool:
    # docs/rules/decisions.md D-11: system messages neither close a pairing window nor are dropped.
    # Messages that provider conversion drops are transparent too, so that
    # pairing agent messages gives what the original gave by pairing after
    # conversion (a `!!` bash run while a tool runs must not orphan its result).
    if not isinstance(message, Mapping):
        return True
    return message.get("role") == "system" or _drops_in_conversion(message)


def closes_tool_window(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` ends an open tool-call window (docs/rules/projection.md P.4,
    docs/rules/decisions.md D-11).

    An ``assistant`` message does (it opens its own); a ``toolResult`` never
    does; anything else does unless it is transparent: a ``system`` message,
    or one that :func:`convert_to_llm` drops (docs/rules/projection.md P.2, P.3, with JavaScript's
    whitespace for "blank"). The projection pairs with this rule inline;
    ``sessiontree.check`` uses it to report what the projection will repair.
    """
    role = message.get("role")
    if role == "toolResult":
        return False
    return role == "assistant" or not _is_transparent(message)


def _convert_one(message: Message) -> Message | None:
    """docs/rules/projection.md P.2 for one message; ``None`` when it is dropped."""
    role = message.get("role")
    if role == "assistant":
        content = message.get("content")
        if content is None:
            return {**message, "content": []}
        if isinstance(content, list) and any(
            isinstance(b, Mapping) and b.get("type") == "redacted_thinking" for b in content
        ):
            # Legacy blocks are rewritten in the copy only (docs/rules/projection.md P.2).
            converted = [
                {
                    "type": "thinking",
                    "thinking": "",
                    "thinkingSignature": b.get("data"),
                    "redacted": True,
                }
                if isinstance(b, Mapping) and b.get("type") == "redacted_thinking"
                else b
                for b in content
            ]
            return {**message, "content": converted}
        return message
    if role == "toolResult":
        return {**message, "content": []} if message.get("content") is None else message
    if role == "system":
        return message
    if _drops_in_conversion(message):
        return None
    if role == "user":
        content = message.get("content")
        if isinstance(content, list):
            visible = [b for b in content if _block_visible(b)]
            if len(visible) != len(content):
                return {**message, "content": visible}
        return message
    user: Message = {"role": "user"}
    if role == "bashExecution":
        user["content"] = [{"type": "text", "text": bash_text(message)}]
    elif role == "custom":
        content = message.get("content")
        if isinstance(content, str):
            user["content"] = [{"type": "text", "text": content}]
        else:
            user["content"] = [b for b in content if _block_visible(b)]
    else:  # branchSummary with a non-empty summary
        user["content"] = [{"type": "text", "text": branch_summary_text(message["summary"])}]
    _copy_present(user, message, "timestamp")
    return user


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
        converted = _convert_one(message)
        if converted is not None:
            out.append(converted)
    return repair_orphan_tool_results(out, repair_trailing)


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


def _synthetic_result(call_id: str, name: str, timestamp: Any) -> Message:
    result: Message = {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": INTERRUPTED_TEXT}],
        "isError": True,
    }
    if timestamp is not _ABSENT:
        result["timestamp"] = timestamp
    return result



class _ToolWindow:
    """The tool-pairing state between one assistant turn and the next
    (docs/rules/projection.md P.4-P.7, docs/rules/decisions.md D-11): the one implementation behind
    :func:`repair_orphan_tool_results` and the projection.

    An assistant message closes the previous window and opens its own; a
    tool result is kept only when its call is allowed in the window and not
    yet answered; any other non-transparent message closes the window.
    """

    __slots__ = ("allowed", "answered", "pending", "timestamp")

    def __init__(self) -> None:
        self.allowed: set[str] = set()
        self.answered: set[str] = set()
        self.pending: list[tuple[str, str]] = []
        self.timestamp: Any = _ABSENT

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
        return [_synthetic_result(call_id, name, self.timestamp)
                for call_id, name in self.pending if call_id not in self.answered]

    def close(self) -> list[Message]:
        """End the window, returning :meth:`synthetic`."""
        synthetic = self.synthetic()
        self.pending.clear()  # in place: the projection keeps references to these
        self.allowed.clear()
        self.answered.clear()
        return synthetic

    def open(self, message: Mapping[str, Any]) -> None:
        """Start the window of an assistant message (call :meth:`close` first)."""
        content = message.get("content")
        if isinstance(content, list):
            to_use = message.get("stopReason") == "toolUse"
            for block in content:
                if (block.__class__ is dict or isinstance(block, Mapping)) and block.get("type") == "toolCall":
                    call_id, name = block.get("id"), block.get("name")
                    if isinstance(call_id, str) and isinstance(name, str):
                        # Only a turn that stopped to use tools expects results;
                        # aborted, error, length-limited and "pending" turns are
                        # dropped whole by provider adapters, so a synthetic
                        # result would be an orphan. One result per id, never two.
                        if to_use and call_id not in self.allowed:
                            self.pending.append((call_id, name))
                        self.allowed.add(call_id)
        self.timestamp = message.get("timestamp", _ABSENT)


def _pair(messages: Sequence[Any], repair_trailing: bool) -> list[int | Message] | None:
    """Tool pairing plan (docs/rules/projection.md P.4-P.7, docs/rules/decisions.md D-11).

    Returns ``None`` when nothing changes, else the new order as a list whose
    items are either an index into ``messages`` (kept) or a synthetic result
    (inserted just before the kept item that closed its window, or at the end).
    """
    plan: list[int | Message] = []
    changed = False
    window = _ToolWindow()
    for index, message in enumerate(messages):
        if _is_transparent(message):
            plan.append(index)
            continue
        role = message.get("role")
        if role == "toolResult":
            if window.accept(message):
                plan.append(index)
            else:
                changed = True  # orphan or duplicate
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


# --------------------------------------------------------------------------
# System messages


def _system_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b["text"]
            for b in content
            if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return ""


def get_current_system_message(messages: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Replay the ``system`` messages of ``messages`` in order
    (docs/rules/projection.md §3.6, seed:system-messages).

    * content: each message's text (strings as they are, text blocks joined
      with ``"\\n"``) is collected when non-empty; the collection is joined
      with ``"\\n\\n"``;
    * ``sections``: a name -> value map; ``None`` deletes, a new name goes to
      the end, an existing name keeps its place;
    * tools: per message ``toolsRemoved`` (by name) first, then ``toolsAdded``
      (set by name).

    Returns:
        ``{"role": "system", "content": str, "sections"?: {...}, "toolsAdded"?:
        [current tools], "timestamp": <first system message's timestamp or
        0>}`` (``sections``/``toolsAdded`` only when non-empty), or ``None``
        when there is no system message. Inputs are not modified.
    """
    texts: list[str] = []
    sections: dict[str, Any] = {}
    tools: dict[Any, Any] = {}
    timestamp: Any = _ABSENT
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") != "system":
            continue
        if timestamp is _ABSENT:
            timestamp = message.get("timestamp")
        text = _system_text(message.get("content"))
        if text:
            texts.append(text)
        patch = message.get("sections")
        if isinstance(patch, Mapping):
            for name, value in patch.items():
                if value is None:
                    sections.pop(name, None)
                else:
                    sections[name] = value
        removed = message.get("toolsRemoved")
        for tool in removed if isinstance(removed, list) else []:
            if isinstance(tool, Mapping):
                tools.pop(tool.get("name"), None)
        added = message.get("toolsAdded")
        for tool in added if isinstance(added, list) else []:
            if isinstance(tool, Mapping):
                tools[tool.get("name")] = tool
    if timestamp is _ABSENT:  # no system message (hence no tools either)
        return None
    result: dict[str, Any] = {"role": "system", "content": "\n\n".join(texts)}
    if sections:
        result["sections"] = sections
    if tools:
        result["toolsAdded"] = list(tools.values())
    result["timestamp"] = 0 if timestamp is None else timestamp
    return result


# --------------------------------------------------------------------------
# Paths, boundaries, edits


def _index(entries: Iterable[Entry]) -> dict[str, Entry]:
    return {e["id"]: e for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)}


def _last_id(entries: Sequence[Entry], by_id: Mapping[str, Entry] | None = None) -> str | None:
    """The leaf as loaded (:data:`LAST_ENTRY`): one rule with the manager's."""
    return loaded_leaf_id(entries, by_id)


def _resolve_leaf(entries: Sequence[Entry], leaf_id: LeafArg,
                  by_id: Mapping[str, Entry] | None) -> tuple[str | None, Mapping[str, Entry]]:
    """The leaf to walk from and the id index (docs/rules/projection.md Q.13 leaf rules):
    ``None`` when ``leaf_id`` is ``None`` or unknown; the last entry for
    :data:`LAST_ENTRY`."""
    if leaf_id is None:
        return None, by_id or {}
    if by_id is None:
        by_id = _index(entries)
    if leaf_id is LAST_ENTRY:
        return _last_id(entries, by_id), by_id
    if isinstance(leaf_id, str) and leaf_id in by_id:
        return leaf_id, by_id
    return None, by_id


@dataclass(frozen=True)
class _Layout:
    """Where the active boundary and its kept tail sit on a path (docs/rules/projection.md Q.4, Q.7)."""

    boundary: int | None  # index of the latest verbatim compaction
    first_kept: int | None  # index where the kept tail starts, if any


def _layout(path: Sequence[Entry]) -> _Layout:
    boundary: int | None = None
    for index in range(len(path) - 1, -1, -1):
        if is_active_compaction(path[index]):
            boundary = index
            break
    return _layout_at(path, boundary)


def _layout_at(path: Sequence[Entry], boundary: int | None) -> _Layout:
    """The boundary at ``boundary`` (or none) and where its kept tail starts."""
    if boundary is None:
        return _Layout(None, None)
    first_kept_id = path[boundary].get("firstKeptEntryId")
    if not isinstance(first_kept_id, str):
        return _Layout(boundary, None)
    for index in range(boundary):
        if path[index].get("id") == first_kept_id:
            return _Layout(boundary, index)
    # Unknown, after the boundary, on another branch or the boundary itself:
    # no tail, never a resurrection of older content (docs/rules/projection.md seed:context-building).
    return _Layout(boundary, None)


def _context_entries(path: list[Entry], layout: _Layout) -> list[Entry]:
    if layout.boundary is None:
        return path
    tail = path[layout.first_kept : layout.boundary] if layout.first_kept is not None else []
    return [path[layout.boundary], *tail, *path[layout.boundary + 1 :]]


def _valid_replacement(edit: Mapping[str, Any]) -> bool:
    if "replacement" not in edit:
        return False
    replacement = edit["replacement"]
    return replacement is None or (
        isinstance(replacement, Mapping) and isinstance(replacement.get("content"), (str, list))
    )


def _latest_edits(path: Iterable[Entry]) -> dict[str, Entry]:
    """docs/rules/projection.md R.4: the latest valid ``context_edit`` per target on the path."""
    edits: dict[str, Entry] = {}
    for entry in path:
        if entry.get("type") == "context_edit":
            target = entry.get("targetId")
            # A malformed edit is rejected on load and append; if one slips
            # through it is inert rather than hiding an earlier valid edit.
            if isinstance(target, str) and _valid_replacement(entry):
                edits[target] = entry
    return edits


def _is_editable(entry: Mapping[str, Any]) -> bool:
    if entry.get("type") == "custom_message":
        return True
    message = entry.get("message")
    return (
        entry.get("type") == "message"
        and isinstance(message, Mapping)
        and _role(message) in _EDITABLE_ROLES
    )


def _edited_message(entry: Entry, edits: Mapping[str, Entry]) -> Message | None:
    """The entry's context message with the latest edit applied (docs/rules/projection.md R.5)."""
    message = _context_message(entry)
    if message is None:
        return None
    entry_id = entry.get("id")
    edit = edits.get(entry_id) if isinstance(entry_id, str) else None
    if edit is None or not _is_editable(entry):
        return message
    replacement = edit["replacement"]
    if replacement is None:
        return None
    content = replacement["content"]
    if isinstance(content, str) and _role(message) in _ARRAY_CONTENT_ROLES:
        content = [{"type": "text", "text": content}]
    return {**message, "content": content}


#: Entry types that only set a setting (assistant messages set the model too).
_SETTING_KINDS = frozenset({"thinking_level_change", "model_change", "context_window_change"})
#: Entry types that act on the context from anywhere on the branch: boundaries
#: (docs/rules/projection.md Q.4), edits (R.4) and settings (Q.3, S).
_FAR_KINDS = _SETTING_KINDS | {"compaction", "context_edit"}


def _setting(entry: Entry) -> tuple[str, Any] | None:
    """The setting one path entry sets (docs/rules/projection.md Q.3, S), as ``(attribute, value)``
    with attribute ``"thinking_level"``, ``"model"`` or ``"context_window"``;
    ``None`` when it sets none."""
    kind = entry.get("type")
    if kind == "thinking_level_change":
        level = entry.get("thinkingLevel")
        return ("thinking_level", level) if isinstance(level, str) else None
    if kind == "model_change":
        return "model", {"provider": entry.get("provider"), "modelId": entry.get("modelId")}
    if kind == "context_window_change":
        value = entry.get("contextWindow")
        return ("context_window", value) if isinstance(value, int) and not isinstance(value, bool) else None
    if kind == "message":
        message = entry.get("message")
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            provider, model_id = message.get("provider"), message.get("model")
            # docs/rules/projection.md S.2 [P]: an assistant without provider/model says nothing
            # about the model; the original set a half-undefined object.
            if isinstance(provider, str) and isinstance(model_id, str):
                return "model", {"provider": provider, "modelId": model_id}
    return None


def _replay_settings(path: Iterable[Entry]) -> tuple[str, dict[str, Any] | None, int | None]:
    """docs/rules/projection.md Q.3, S: thinking level, model and context window of the whole path."""
    settings: dict[str, Any] = {"thinking_level": "off", "model": None, "context_window": None}
    for entry in path:
        setting = _setting(entry)
        if setting is not None:
            settings[setting[0]] = setting[1]
    return settings["thinking_level"], settings["model"], settings["context_window"]


# --------------------------------------------------------------------------
# Public builders


def build_context_entries(
    entries: Sequence[dict[str, Any]],
    leaf_id: LeafArg = LAST_ENTRY,
    *,
    by_id: Mapping[str, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Active-branch entries that shape the context (docs/rules/projection.md Q.13).

    Args:
        entries: all entries of the session, header excluded, in file order.
        leaf_id: the leaf. ``None`` gives ``[]``; an unknown id gives ``[]``;
            :data:`LAST_ENTRY` (default) uses the leaf as loaded: the last
            entry of ``entries``, or the target of a final ``leaf`` record.
        by_id: optional index ``{entry id: entry}`` of ``entries`` that the
            caller already keeps (e.g. a :class:`~sessiontree.tree.SessionTree`'s),
            saving one pass over all entries; it must equal
            ``{e["id"]: e for e in entries}``.

    Returns:
        The P.1-normalized path root first when there is no active boundary;
        otherwise ``[boundary, *kept-tail entries (all types), *entries after
        the boundary]``. Entries before the boundary and outside the tail are
        left out.
    """
    scan = _scan_up(entries, leaf_id, by_id)
    return _context_entries(scan.path, _layout_at(scan.path, scan.boundary))


def build_session_projection(
    entries: Sequence[dict[str, Any]],
    leaf_id: LeafArg = LAST_ENTRY,
    *,
    by_id: Mapping[str, dict[str, Any]] | None = None,
    repair_trailing: bool = True,
) -> SessionProjection:
    """The context-edited projection of one branch
    (docs/rules/projection.md seed:context-building; Q.17, R, S, docs/rules/decisions.md D-11).

    Args:
        entries: all entries of the session, header excluded, in file order.
            Never modified.
        leaf_id: the leaf, resolved as in :func:`build_context_entries`
            (``None`` or an unknown id: an empty projection; default
            :data:`LAST_ENTRY`), so that ``entries`` of the result are exactly
            that function's output.
        by_id: optional index ``{entry id: entry}`` of ``entries`` (see
            :func:`build_context_entries`).
        repair_trailing: close tool calls still open at the end of the branch
            with synthetic results. ``True`` for sessions loaded from a store
            or file; ``False`` for entries this process appended (their tools
            may still be running).

    Returns:
        A :class:`SessionProjection`:

        * no active boundary: every path entry contributes its context
          message (docs/rules/projection.md Q.6) with the latest context edit applied;
        * with the latest verbatim boundary: the boundary entry contributes
          ``[systemMessage checkpoint (if stored), boundary message]`` whose
          text is ``BOUNDARY_PREFIX + summary`` plus the kept tail (edited,
          converted, pair-repaired and serialized in retained mode); kept-tail
          entries contribute ``[]``; entries after the boundary contribute as
          above;
        * tool pairing (docs/rules/decisions.md D-11) is applied across the result; synthetic results
          belong to the entry whose message closes the window, or to the last
          entry for trailing ones;
        * settings are replayed from the raw entries of the whole path.

    Cost: one walk up from the leaf and two passes over the path (settings,
    boundary and edits; then messages with tool pairing inline), so it is
    linear in the branch length. The cyclic garbage collector is paused
    meanwhile: the projection allocates one container per entry and no
    reference cycles, and collector passes over a large loaded session
    cost about a quarter of the time (measured with ``benchmarks/run.py``).
    """
    with gc_paused():
        return _project(entries, leaf_id, by_id, repair_trailing)


@dataclass
class _Scan:
    """What the first pass over a branch finds (docs/rules/projection.md P.1, Q.3, Q.4, R.4, S)."""

    path: list[Entry]  # root first, P.1-normalized
    thinking_level: str
    model: dict[str, Any] | None
    context_window: int | None
    boundary: int | None  # index in path of the latest active compaction
    edits: dict[str, Entry]  # the latest valid context_edit per target
    copies: list[Entry] = field(default_factory=list)  # path entries that are
                                                       # docs/rules/projection.md P.1 copies


def _scan_up(entries: Sequence[Entry], leaf_id: LeafArg, by_id: Mapping[str, Entry] | None) -> _Scan:
    """Walk from the leaf to the root and take in the path's state on the way.

    Walking upwards, the *latest* item of a kind on the path is the *first*
    one met, so each kind is looked at only until it is found. A walk longer
    than the number of entries has met a parent cycle: it is redone by
    :func:`_scan_down` on :func:`sessiontree.tree.get_branch`'s path (which
    stops where an id repeats), so the result never depends on the route.
    """
    leaf, by_id = _resolve_leaf(entries, leaf_id, by_id)
    if leaf is None:
        return _Scan([], "off", None, None, None, {})
    path: list[Entry] = []
    append = path.append
    get = by_id.get
    budget = len(by_id)
    thinking_level: Any = _ABSENT
    model: Any = _ABSENT
    context_window: Any = _ABSENT
    boundary_up: int | None = None
    edits: dict[str, Entry] = {}
    normalize_up: list[int] = []
    content_roles = _CONTENT_ROLES
    current = leaf
    while current is not None:
        entry = get(current)
        if entry is None:
            break
        budget -= 1
        if budget < 0:
            return _scan_down(get_branch(by_id, leaf))
        kind = entry.get("type")
        if kind == "message":
            message = entry.get("message")
            is_dict = message.__class__ is dict  # the common case, without an ABC check
            if is_dict or isinstance(message, Mapping):
                role = message.get("role")
                if (message.get("content") is None and isinstance(role, str) and role in content_roles
                        and (is_dict or isinstance(message, dict))):
                    normalize_up.append(len(path))
                if model is _ABSENT and role == "assistant":
                    setting = _setting(entry)  # the one settings rule
                                               # (docs/rules/projection.md S.2: may say nothing)
                    if setting is not None:
                        model = setting[1]
        elif isinstance(kind, str) and kind in _SETTING_KINDS:
            # Walking up, the latest setting of a kind is the first one met.
            setting = _setting(entry)
            if setting is not None:
                if setting[0] == "thinking_level" and thinking_level is _ABSENT:
                    thinking_level = setting[1]
                elif setting[0] == "model" and model is _ABSENT:
                    model = setting[1]
                elif setting[0] == "context_window" and context_window is _ABSENT:
                    context_window = setting[1]
        elif kind == "compaction":
            if boundary_up is None and is_active_compaction(entry):
                boundary_up = len(path)
        elif kind == "context_edit":
            target = entry.get("targetId")
            # A malformed edit is rejected on load and append; if one slips
            # through it is inert rather than hiding an earlier valid edit.
            if isinstance(target, str) and target not in edits and _valid_replacement(entry):
                edits[target] = entry
        append(entry)
        current = entry.get("parentId")
    path.reverse()
    last = len(path) - 1
    copies: list[Entry] = []
    for index in normalize_up:
        path[last - index] = _normalize_entry(path[last - index])
        copies.append(path[last - index])
    return _Scan(
        path,
        "off" if thinking_level is _ABSENT else thinking_level,
        None if model is _ABSENT else model,
        None if context_window is _ABSENT else context_window,
        None if boundary_up is None else last - boundary_up,
        edits,
        copies,
    )


def _scan_down(raw_path: list[Entry]) -> _Scan:
    """:func:`_scan_up`'s result from a root-first path (the slow, obviously right way)."""
    path = [_normalize_entry(e) for e in raw_path]
    thinking_level, model, context_window = _replay_settings(path)
    copies = [entry for entry, raw in zip(path, raw_path) if entry is not raw]
    return _Scan(path, thinking_level, model, context_window, _layout(path).boundary, _latest_edits(path),
                 copies)


# What the one-pass build of a plain branch does with one entry (see _plain_step),
# as the first item of an (op, item, extra) step. The ops that close the tool
# window are numbered together (<= _OP_MADE), so that the replay tests for them at once.
_OP_RESULT = 0  # a tool result (item: the message; extra: its toolCallId if a string, else None)
_OP_ASSISTANT = 1  # an assistant message without tool calls (item: it; extra: its timestamp or _ABSENT)
_OP_CALLS = 2  # an assistant message with tool calls and stopReason "toolUse" (item: it; extra:
#                (its timestamp or _ABSENT, id, name, id, name, ...) of the first call of each id)
_OP_CALLS_KEPT = 3  # the same with another stopReason: its calls are allowed but left unanswered
_OP_CLOSE = 4  # another stored message that closes the tool window (item: the message)
_OP_MADE = 5  # a custom_message or branch_summary (item: the entry; extra: whether its message closes)
_OP_TRANSPARENT = 6  # a stored message transparent to pairing, not a system one (item: the message)
_OP_SYSTEM = 7  # a stored system message (item: the message)
_OP_SETTING = 8  # a setting change (item: the entry)
_OP_SKIP = 9  # nothing to project (item, extra: None)

#: One step of :func:`_plain_step`: (op, item, extra).
PlainOp = tuple[int, Any, Any]
_SKIP_OP: Final[PlainOp] = (_OP_SKIP, None, None)


class PlainSteps:
    """The :func:`_plain_step` steps of a plain branch, in branch order, kept as three
    parallel lists: ``codes`` (a ``bytearray`` of ops), ``items`` and ``extras``.

    Parallel lists rather than a tuple per entry: a 100,000-entry branch then
    adds three containers, not 100,000, for the cyclic collector to count and
    traverse (what :func:`_plain_step` returns is transient).
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


def _plain_step(entry: Entry) -> PlainOp | None:
    """What the one-pass build of a plain branch (:meth:`ProjectionBuilder._build_plain`)
    derives from one entry of it, as one ``(op, item, extra)`` step (the ``_OP_*``
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
            return _OP_RESULT, message, call_id if isinstance(call_id, str) else None
        if role == "assistant":
            if content is None:
                return None
            calls = None
            if isinstance(content, list):
                for block in content:
                    if (block.__class__ is dict or isinstance(block, Mapping)) and block.get("type") == "toolCall":
                        call_id, name = block.get("id"), block.get("name")
                        if isinstance(call_id, str) and isinstance(name, str):
                            if calls is None:
                                calls = [(call_id, name)]
                            else:
                                calls.append((call_id, name))
            stamp = message.get("timestamp", _ABSENT)
            if calls is None:
                return _OP_ASSISTANT, message, stamp
            op = _OP_CALLS if message.get("stopReason") == "toolUse" else _OP_CALLS_KEPT
            if len(calls) == 1:
                return op, message, (stamp, *calls[0])
            first: dict[str, str] = {}  # an id repeated in one message: its first call counts (_ToolWindow.open)
            for call_id, name in calls:
                first.setdefault(call_id, name)
            return op, message, (stamp, *itertools.chain.from_iterable(first.items()))
        if content is None and isinstance(role, str) and role in _CONTENT_ROLES:
            return None  # needs a docs/rules/projection.md P.1 copy: the general build makes it
        # a user message is transparent exactly when its content is invisible
        if _content_visible(content) if role == "user" else not _is_transparent(message):
            return _OP_CLOSE, message, None
        return (_OP_SYSTEM if role == "system" else _OP_TRANSPARENT), message, None
    if kind == "custom_message" or kind == "branch_summary":
        made = _context_message(entry)
        return _SKIP_OP if made is None else (_OP_MADE, entry, not _is_transparent(made))
    if kind == "compaction" or kind == "context_edit":
        return None
    if isinstance(kind, str) and kind in _SETTING_KINDS and _setting(entry) is not None:
        return _OP_SETTING, entry, None
    return _SKIP_OP


def _plain_ops(path: Iterable[Entry]) -> PlainSteps | None:
    """:func:`_plain_step` of each entry of ``path``, in order; ``None`` when one is ``None``."""
    ops = PlainSteps()
    for entry in path:
        step = _plain_step(entry)
        if step is None:
            return None
        ops.append(step)
    return ops


def _project(
    entries: Sequence[Entry],
    leaf_id: LeafArg,
    by_id: Mapping[str, Entry] | None,
    repair_trailing: bool,
) -> SessionProjection:
    return ProjectionBuilder.build(entries, leaf_id, by_id).result(repair_trailing, copy=False)


class ProjectionBuilder:
    """A branch's projection that can grow with the branch (docs/rules/projection.md seed:context-building).

    :meth:`build` projects a branch from scratch, exactly as
    :func:`build_session_projection`; :meth:`advance` extends it by one entry
    appended below its leaf, in time proportional to that entry;
    :meth:`result` gives the :class:`SessionProjection`.
    :class:`~sessiontree.manager.SessionManager` keeps one between calls, so
    an agent that appends a turn and rebuilds its context does work in
    proportion to the turn, not to the session. What cannot be applied
    incrementally (a new active compaction boundary, a context edit) makes
    :meth:`advance` refuse; the caller then builds afresh.

    Attributes:
        leaf_id: the leaf projected so far (``None`` for an empty branch).
        plain_branch: when the branch is plain (see :meth:`_build_plain`), the
            raw branch of :attr:`leaf_id` root first, which a caller may keep and
            give to a later :meth:`build` of the same leaf (it is the
            :attr:`sources` list itself: a copy must be kept); else ``None``.
        plain_ops: with :attr:`plain_branch`, one step per entry of it
            (:func:`_plain_step`: what the build derives from each entry), which
            a caller may keep with the branch and give to that later build, so
            that it replays the steps instead of reading the entries; else
            ``None``. Like :attr:`plain_branch`, :meth:`advance` appends to it.

    The synthetic results of a tool window still open at the leaf are not
    part of the state: whether they are wanted depends on the caller (docs/rules/decisions.md D-11),
    so :meth:`result` adds them.
    """

    __slots__ = (
        "context_window",
        "copies",
        "edits",
        "ends",
        "leaf_id",
        "messages",
        "model",
        "owned",
        "owned_sources",
        "plain_branch",
        "plain_ops",
        "sources",
        "system_messages",
        "thinking_level",
        "window",
    )

    def __init__(self, leaf_id: str | None, thinking_level: str, model: dict[str, Any] | None,
                 context_window: int | None, edits: dict[str, Entry]) -> None:
        self.leaf_id = leaf_id
        self.sources: list[Entry] = []  # the context entries (build_context_entries)
        self.messages: list[Message] = []
        self.ends: list[int] = []  # per source: offset in messages just past its own
        self.window = _ToolWindow()
        self.system_messages: list[Message] = []
        self.edits = edits
        self.thinking_level = thinking_level
        self.model = model
        self.context_window = context_window
        # What the projection made itself (not stored data), so that result()
        # can hand out fresh copies as a fresh build would: entry ids of the
        # sources that are docs/rules/projection.md P.1 copies; positions in messages of dicts it made;
        # (source position, message position or -1) of the docs/rules/projection.md P.1 copies.
        self.copies: set[str] = set()
        self.owned: list[int] = []
        self.owned_sources: list[tuple[int, int]] = []
        # The raw branch root first when the build was the one-pass one (a plain
        # branch: the sources are that branch), else None. advance() appends to it.
        self.plain_branch: list[Entry] | None = None
        self.plain_ops: PlainSteps | None = None  # _plain_step of each plain_branch entry

    @classmethod
    def build(cls, entries: Sequence[Entry], leaf_id: LeafArg,
              by_id: Mapping[str, Entry] | None, *, branch: list[Entry] | None = None,
              ops: PlainSteps | None = None) -> ProjectionBuilder:
        """Project the branch of ``leaf_id`` from scratch (see :func:`build_session_projection`).

        Args:
            branch: the raw branch of ``leaf_id`` root first, when the caller kept
                it from an earlier build (:attr:`plain_branch`): a plain branch is
                then projected without walking it again. It must be exactly what
                that earlier build walked (entries are only ever appended, so
                the branch of a given leaf never changes).
            ops: with ``branch``, that earlier build's :attr:`plain_ops` for it
                (the first ``len(branch)`` steps): the build then replays them
                rather than reading the entries (see :func:`_plain_step`).
        """
        if by_id is None and leaf_id is not None:
            by_id = _index(entries)  # once, for both ways of building
        fast = cls._build_plain(entries, leaf_id, by_id, branch, ops)
        if fast is not None:
            return fast
        # Pass 1, walking up from the leaf: the path (P.1-normalized), settings
        # replay (docs/rules/projection.md Q.3, S), the latest active boundary
        # (docs/rules/projection.md Q.4), the latest valid
        # edit per target (docs/rules/projection.md R.4).
        scan = _scan_up(entries, leaf_id, by_id)
        path, edits = scan.path, scan.edits
        self = cls(path[-1]["id"] if path else None, scan.thinking_level, scan.model,
                   scan.context_window, edits)
        self.copies = {entry["id"] for entry in scan.copies}
        layout = _layout_at(path, scan.boundary)
        context_entries = _context_entries(path, layout)
        self.sources = context_entries
        if layout.boundary is None:
            self._extend(context_entries)
            return self
        tail_entries = context_entries[1 : 1 + _tail_length(layout)]
        tail_messages = [m for e in tail_entries if (m := _edited_message(e, edits)) is not None]
        # docs/rules/transcript.md §2.1: convert (pairing repaired, no trailing repair),
        # then serialize in retained mode.
        tail_chunks = serialize_messages(convert_to_llm(tail_messages), "retained")
        # The boundary's messages go through the same pairing steps as
        # everything else, as stand-in entries without ids (no edit applies).
        stand_ins = [{"type": "message", "message": m}
                     for m in _boundary_messages(context_entries[0], tail_chunks)]
        after = context_entries[1 + len(tail_entries):]
        self._extend(stand_ins)
        boundary_message = stand_ins[-1]["message"]
        self.owned += [i for i, m in enumerate(self.messages) if m is boundary_message]
        # The boundary entry owns what its stand-ins produced; the kept-tail
        # entries own nothing (their text is in the boundary message).
        self.ends[:] = [len(self.messages)] * (1 + len(tail_entries))
        self.owned_sources += [(1 + k, -1) for k, entry in enumerate(tail_entries) if entry["id"] in self.copies]
        self._extend(after)
        return self

    @classmethod
    def build_partial(cls, ids: Sequence[str], parent_ids: Sequence[str | None], types: Sequence[str],
                      fetch: Callable[[list[int]], Sequence[Entry]]) -> tuple[ProjectionBuilder, dict[int, Entry]] | None:
        """:meth:`build` for a branch of which only an outline is at hand, reading as few
        entries as the result depends on; ``None`` when that would be the whole branch.

        What a projection of a branch with an active compaction boundary
        depends on, and so what is read (``fetch``), walking up from the leaf:

        * every entry after the latest active boundary, the boundary itself and
          its kept tail (docs/rules/projection.md Q.4, Q.7, seed:context-building);
        * wherever they sit on the branch, the entries that act from afar: every
          ``compaction`` (to find the latest active one), ``context_edit``
          (docs/rules/projection.md R.4: an edit may target a kept-tail entry)
          and setting change (docs/rules/projection.md Q.3, S);
        * the model (docs/rules/projection.md S.2) is the first model change or
          assistant message naming its model met walking up: message records
          above the boundary are read only until one decides it.

        Nothing else above the boundary reaches the result: those entries are
        outside the context, and each is passed to :meth:`build` as a stand-in
        (a run of them as one stand-in that links the run's ends), so the
        build is exactly the full one (checked by a Hypothesis property in
        ``tests/test_lazy_open.py``).

        Args:
            ids, parent_ids, types: the branch root first (leaf last), each
                entry's ``id``, ``parentId`` and ``type``; every ``parent_ids[i]``
                is ``ids[i - 1]`` (a walk that met no cycle and no duplicate id,
                as :func:`sessiontree.tree.get_branch` gives it).
            fetch: the full entries at the given branch positions, in that
                order; their ``id``, ``parentId`` and ``type`` must be those of
                the outline (the caller checks).

        Returns:
            ``(builder, read)``: the builder for the leaf ``ids[-1]``, and every
            entry read, by branch position; or ``None`` when the branch has no
            active boundary (the caller builds from all its entries).
        """
        count = len(ids)
        read: dict[int, Entry] = {}

        def load(positions: Iterable[int]) -> None:
            wanted = [p for p in positions if p not in read]
            if wanted:
                read.update(zip(wanted, fetch(wanted)))

        load(itertools.compress(range(count), map(_FAR_KINDS.__contains__, types)))  # in C: no loop per entry
        boundary = next((i for i in range(count - 1, -1, -1)
                         if types[i] == "compaction" and is_active_compaction(read[i])), None)
        if boundary is None:
            return None
        load(range(boundary + 1, count))
        first_kept = read[boundary].get("firstKeptEntryId")
        if isinstance(first_kept, str):
            start = next((i for i in range(boundary) if ids[i] == first_kept), None)
            if start is not None:
                load(range(start, boundary))
        # The model (S.2): what _scan_up takes is the first model change, or assistant
        # naming its model, met walking up. Messages above the boundary are read in
        # batches only while none has decided it.
        position = count - 1
        while position >= 0:
            entry = read.get(position)
            if entry is None:
                if types[position] != "message":
                    position -= 1  # unread and not a message: sets no model (model changes are read)
                    continue
                load([p for p in range(position, max(position - 256, -1), -1) if types[p] == "message"])
                entry = read[position]
            kind = entry.get("type")
            if kind == "model_change" or (kind == "message" and _setting(entry) is not None):
                break
            position -= 1
        # The branch as build() walks it: the entries read, and one stand-in per run
        # of unread entries (id of the run's last, parent of its first), which
        # _scan_up passes over (no message, no setting, no edit, no boundary).
        view: dict[str, Entry] = {}
        after = 0  # the first position not yet in the view
        for i in sorted(read):
            if i > after:  # positions after..i-1 were not read: one stand-in
                view[ids[i - 1]] = {"type": types[i - 1], "id": ids[i - 1], "parentId": parent_ids[after]}
            view[ids[i]] = read[i]
            after = i + 1
        # (the leaf, count - 1, is always read: it is after the boundary or is the boundary)
        return cls.build((), ids[-1], view), read

    @classmethod
    def _build_plain(cls, entries: Sequence[Entry], leaf_id: LeafArg,
                     by_id: Mapping[str, Entry] | None,
                     branch: list[Entry] | None = None,
                     ops: PlainSteps | None = None) -> ProjectionBuilder | None:
        """:meth:`build` in one pass over the branch, for a plain one; ``None`` otherwise.

        A branch is plain when it has no ``compaction`` (active or retired), no
        ``context_edit``, no message needing a docs/rules/projection.md P.1 copy (null content of a
        user-like role) or stored as anything but a dict, and no parent cycle: then the context
        entries are the path itself, nothing is edited, and the projection is
        one pass over the path (:meth:`_extend_plain`), which also notes the
        settings (docs/rules/projection.md Q.3, S) and records each entry's
        step (:func:`_plain_step`) for a later rebuild of the same leaf to
        replay (:meth:`_replay`). The walk up collects only the path. On
        anything else the caller builds the general way; the result is the
        same either way.
        """
        leaf, index = _resolve_leaf(entries, leaf_id, by_id)
        if leaf is None:
            return None
        if branch is not None:
            return cls._plain_from(leaf, branch, ops)
        path: list[Entry] = []
        append, get = path.append, index.get
        current: Any = leaf
        # At most one step per indexed entry (the count kept by the loop, in C): a
        # walk still going after that has met an id twice.
        for _ in itertools.repeat(None, len(index)):
            entry = get(current)
            if entry is None:
                break
            kind = entry.get("type")
            if kind == "compaction" or kind == "context_edit":
                # Met walking up, so a session with compactions gives up after
                # the entries since its latest boundary, not after the whole path.
                return None
            append(entry)
            current = entry.get("parentId")
        else:
            if get(current) is not None:
                return None  # a parent cycle: the general build stops where an id repeats
        path.reverse()
        return cls._plain_from(leaf, path)

    @classmethod
    def _plain_from(cls, leaf: str, path: list[Entry], ops: PlainSteps | None = None) -> ProjectionBuilder | None:
        """The one-pass build over ``path``, the raw branch of ``leaf`` root first (see
        :meth:`_build_plain`); ``None`` when it is not plain after all. ``ops``:
        the :func:`_plain_step` of each entry of ``path`` when the caller has them
        (they are replayed), else they are recorded by the pass."""
        self = cls(leaf, "off", None, None, {})
        self.sources = path
        self.plain_branch = path
        if ops is not None and len(ops) == len(path):
            self.plain_ops = ops
            settings = self._replay(ops)
        else:
            self.plain_ops = PlainSteps()
            found = self._extend_plain(path, self.plain_ops)
            if found is None:
                return None
            settings = found
        if "thinking_level" in settings:
            self.thinking_level = settings["thinking_level"][1]
        if "context_window" in settings:
            self.context_window = settings["context_window"][1]
        # The model: the last model_change, unless a later assistant message names one
        # (docs/rules/projection.md S.2).
        position, model = settings.get("model", (-1, None))
        for i in range(len(path) - 1, position, -1):
            entry = path[i]
            if entry.get("type") == "message" and entry["message"].get("role") == "assistant":
                setting = _setting(entry)
                if setting is not None:
                    model = setting[1]
                    break
        self.model = model
        return self

    def _extend_plain(self, path: Iterable[Entry], steps: PlainSteps) -> dict[str, tuple[int, Any]] | None:
        """The first build of a plain branch: :meth:`_extend` over the raw path (no edit,
        no copy applies), recording each entry's :func:`_plain_step` in ``steps``
        as it goes. Returns what :meth:`_replay` returns, or ``None`` (the builder
        is then spent) at an entry a plain branch cannot have."""
        # One pass, reading each entry once: _extend's pairing steps inline (see
        # there), specialized to a plain path, with the step noted per entry.
        # tests/test_plain_replay.py checks the steps against _plain_step.
        messages, window, ends = self.messages, self.window, self.ends
        push, mark, own = messages.append, ends.append, self.owned.append
        allowed, answered, pending = window.allowed, window.answered, window.pending
        add_code, add_item, add_extra = steps.codes.append, steps.items.append, steps.extras.append
        content_visible, is_transparent = _content_visible, _is_transparent
        stamp = window.timestamp
        settings: dict[str, tuple[int, Any]] = {}
        for entry in path:
            kind = entry.get("type")
            if kind == "message":
                item = message = entry.get("message")
                if message.__class__ is not dict:
                    return None  # the general build gives it no message (or a P.1 copy of a dict subclass)
                role = message.get("role")
                content = message.get("content")
                if role == "toolResult":
                    if content is None:
                        return None  # needs a docs/rules/projection.md P.1 copy: the general build makes it
                    call_id = message.get("toolCallId")
                    if not isinstance(call_id, str):
                        call_id = None
                    add_code(_OP_RESULT)
                    add_item(message)
                    add_extra(call_id)
                    # _ToolWindow.accept: an orphan or a duplicate is dropped
                    if call_id in allowed and call_id not in answered:
                        answered.add(call_id)
                        push(message)
                    mark(len(messages))
                    continue
                if role == "assistant":
                    if content is None:
                        return None
                    op = _OP_ASSISTANT
                elif content is None and isinstance(role, str) and role in _CONTENT_ROLES:
                    return None
                # a user message is transparent exactly when its content is invisible
                elif content_visible(content) if role == "user" else not is_transparent(message):
                    op = _OP_CLOSE
                else:
                    op = _OP_SYSTEM if role == "system" else _OP_TRANSPARENT
            elif kind == "custom_message" or kind == "branch_summary":
                message = _context_message(entry)
                if message is None:
                    add_code(_OP_SKIP)
                    add_item(None)
                    add_extra(None)
                    mark(len(messages))
                    continue
                item, op = entry, _OP_MADE
            elif kind == "compaction" or kind == "context_edit":
                return None
            else:
                setting = _setting(entry) if isinstance(kind, str) and kind in _SETTING_KINDS else None
                if setting is None:
                    add_code(_OP_SKIP)
                    add_item(None)
                else:
                    settings[setting[0]] = (len(ends), setting[1])
                    add_code(_OP_SETTING)
                    add_item(entry)
                add_extra(None)
                mark(len(messages))
                continue
            extra = None
            if op == _OP_MADE:
                extra = not is_transparent(message)
            if op <= _OP_CLOSE or extra:
                # _ToolWindow.close
                if pending:
                    for call_id, name in pending:
                        if call_id not in answered:
                            own(len(messages))
                            push(_synthetic_result(call_id, name, stamp))
                    pending.clear()
                if allowed:
                    allowed.clear()
                    answered.clear()
            elif op == _OP_SYSTEM:
                self.system_messages.append(message)
            if op == _OP_MADE:
                own(len(messages))
            push(message)
            if op == _OP_ASSISTANT:
                # _ToolWindow.open (the window was just closed): the first call of each id
                extra = stamp = message.get("timestamp", _ABSENT)
                if isinstance(content, list):
                    to_use = message.get("stopReason") == "toolUse"
                    for block in content:
                        if (block.__class__ is dict or isinstance(block, Mapping)) and block.get("type") == "toolCall":
                            call_id, name = block.get("id"), block.get("name")
                            if isinstance(call_id, str) and isinstance(name, str):
                                if call_id not in allowed:
                                    if to_use:
                                        pending.append((call_id, name))
                                    if op == _OP_ASSISTANT:
                                        op, extra = (_OP_CALLS if to_use else _OP_CALLS_KEPT), (stamp, call_id, name)
                                    else:
                                        extra += (call_id, name)
                                allowed.add(call_id)
            add_code(op)
            add_item(item)
            add_extra(extra)
            mark(len(messages))
        window.timestamp = stamp
        return settings

    def _replay(self, ops: PlainSteps) -> dict[str, tuple[int, Any]]:
        """:meth:`_extend` over a plain branch from its :func:`_plain_step` steps: the same
        messages, ends, owned positions, system messages and tool pairing
        (docs/rules/decisions.md D-11), without reading the entries. Returns
        the position and value of the last thinking-level, context-window and
        model-change setting (docs/rules/projection.md Q.3, S) on the branch,
        by name (``"thinking_level"``, ``"model"``, ``"context_window"``)."""
        # Spelled out inline like _extend (the hot path of a rebuild): one
        # iteration per entry, the window's sets mutated in place; the ops are
        # local names, most frequent first.
        messages, window, ends = self.messages, self.window, self.ends
        push, mark, own = messages.append, ends.append, self.owned.append
        allowed, answered, pending = window.allowed, window.answered, window.pending
        stamp = window.timestamp
        result_op, assistant_op, calls_op, close_op, last_closing, made_op = (
            _OP_RESULT, _OP_ASSISTANT, _OP_CALLS, _OP_CLOSE, _OP_MADE, _OP_MADE)
        transparent_op, system_op, setting_op = _OP_TRANSPARENT, _OP_SYSTEM, _OP_SETTING
        settings: dict[str, tuple[int, Any]] = {}
        for op, item, extra in zip(ops.codes, ops.items, ops.extras):
            if op == result_op:
                # _ToolWindow.accept: an orphan or a duplicate is dropped (allowed holds strings only)
                if extra in allowed and extra not in answered:
                    answered.add(extra)
                    push(item)
            elif op <= last_closing and (op != made_op or extra):
                if op == made_op:
                    item = _context_message(item)  # made afresh on every build, as _extend does
                # _ToolWindow.close
                if pending:
                    for call_id, name in pending:
                        if call_id not in answered:
                            own(len(messages))
                            push(_synthetic_result(call_id, name, stamp))
                    pending.clear()
                if allowed:
                    allowed.clear()
                    answered.clear()
                if op == made_op:
                    own(len(messages))
                push(item)
                # _ToolWindow.open, on the window just emptied
                if op == assistant_op:
                    stamp = extra
                elif op < close_op:  # calls: (timestamp, id, name, id, name, ...)
                    stamp = extra[0]
                    for k in range(1, len(extra), 2):
                        allowed.add(extra[k])
                        if op == calls_op:
                            pending.append((extra[k], extra[k + 1]))
            elif op == transparent_op:
                push(item)
            elif op == system_op:
                self.system_messages.append(item)
                push(item)
            elif op == made_op:  # a made message transparent to pairing
                own(len(messages))
                push(_context_message(item))
            elif op == setting_op:
                setting = _setting(item)
                if setting is not None:
                    settings[setting[0]] = (len(ends), setting[1])
            mark(len(messages))
        window.timestamp = stamp
        return settings

    def _extend(self, body: Iterable[Entry]) -> None:
        """Pass 2 over context entries (P.1-normalized): their messages, edits
        applied, and tool pairing (docs/rules/decisions.md D-11). Records one end offset per entry.
        (A plain branch is built by :meth:`_replay` instead.)"""
        # The projection's hot path, one iteration per entry of the branch:
        # the pairing steps of :class:`_ToolWindow` (accept, close, open) are
        # spelled out inline on the window's own sets and list, which are
        # mutated in place (never rebound) so that the window stays the state.
        # A synthetic result belongs to the entry whose message closes its window.
        messages, edits, window, copies = self.messages, self.edits, self.window, self.copies
        push, mark, own = messages.append, self.ends.append, self.owned.append
        allowed, answered, pending = window.allowed, window.answered, window.pending
        content_visible, is_transparent = _content_visible, _is_transparent
        for entry in body:
            kind = entry.get("type")
            made = False  # whether the message is a dict made here, not stored data
            if kind == "message":
                message = entry.get("message")
                if message.__class__ is not dict and not isinstance(message, dict):
                    mark(len(messages))
                    continue
                if copies and entry.get("id") in copies:
                    made = True
                    self.owned_sources.append((len(self.ends), -1))
            elif kind == "custom_message" or kind == "branch_summary":
                message = _context_message(entry)
                if message is None:
                    mark(len(messages))
                    continue
                made = True
            else:
                mark(len(messages))
                continue
            if edits:
                entry_id = entry.get("id")
                if isinstance(entry_id, str) and entry_id in edits:
                    edited = _edited_message(entry, edits)
                    if edited is None:
                        mark(len(messages))
                        continue
                    made = made or edited is not message
                    message = edited
            role = message.get("role")
            if role == "toolResult":
                # _ToolWindow.accept
                call_id = message.get("toolCallId")
                if not (isinstance(call_id, str) and call_id in allowed and call_id not in answered):
                    mark(len(messages))
                    continue  # an orphan or a duplicate, dropped
                answered.add(call_id)
            elif (role == "assistant"
                  # a user message is transparent exactly when its content is invisible
                  or (content_visible(message.get("content")) if role == "user" else not is_transparent(message))):
                # _ToolWindow.close
                if pending:
                    timestamp = window.timestamp
                    for call_id, name in pending:
                        if call_id not in answered:
                            own(len(messages))
                            push(_synthetic_result(call_id, name, timestamp))
                    pending.clear()
                if allowed:
                    allowed.clear()
                    answered.clear()
            elif role == "system":
                self.system_messages.append(message)
            if made:
                own(len(messages))
                if copies and entry.get("id") in copies and message is entry.get("message"):
                    self.owned_sources[-1] = (len(self.ends), len(messages))
            push(message)
            if role == "assistant":
                # _ToolWindow.open (the window was just closed)
                content = message.get("content")
                if isinstance(content, list):
                    to_use = message.get("stopReason") == "toolUse"
                    for block in content:
                        if (block.__class__ is dict or isinstance(block, Mapping)) and block.get("type") == "toolCall":
                            call_id, name = block.get("id"), block.get("name")
                            if isinstance(call_id, str) and isinstance(name, str):
                                if to_use and call_id not in allowed:
                                    pending.append((call_id, name))
                                allowed.add(call_id)
                window.timestamp = message.get("timestamp", _ABSENT)
            mark(len(messages))

    def advance(self, entry: Entry) -> bool:
        """Extend the projection by ``entry``, a new child of :attr:`leaf_id`.

        Returns:
            ``False``, changing nothing, when ``entry`` is not a child of the
            leaf or changes earlier context (an active compaction boundary, a
            context edit): the projection must then be built afresh.
        """
        entry_id = entry.get("id")
        if (not isinstance(entry_id, str) or self.leaf_id is None
                or entry.get("parentId") != self.leaf_id or entry_id in self.edits):
            return False
        kind = entry.get("type")
        if kind == "context_edit" or is_active_compaction(entry):
            return False
        setting = _setting(entry)
        if setting is not None:
            name, value = setting
            setattr(self, name, value)
        normalized = _normalize_entry(entry)
        if normalized is not entry:
            self.copies.add(entry_id)
        if self.plain_branch is not None:
            step = None if normalized is not entry else _plain_step(entry)
            if step is None:
                # No longer a branch the one-pass build takes (see _build_plain): forget it,
                # before appending, since it is the sources list itself.
                self.plain_branch = self.plain_ops = None
                self.sources = list(self.sources)
            elif self.plain_ops is not None:
                self.plain_ops.append(step)
        self.sources.append(normalized)
        self._extend((normalized,))
        self.leaf_id = entry_id
        return True

    def result(self, repair_trailing: bool, *, copy: bool = True) -> SessionProjection:
        """The projection. ``copy=False`` hands over the lists (the projector is then spent).

        ``repair_trailing``: close tool calls still open at the end with
        synthetic results, owned by the last entry (docs/rules/decisions.md D-11).
        """
        messages, ends, sources, model = self.messages, self.ends, self.sources, self.model
        window = self.window
        trailing = window.is_open and repair_trailing and ends
        if copy or trailing:
            messages, ends = list(messages), list(ends)
        if copy:
            # Fresh top-level dicts for everything the projection made, as a
            # fresh build gives: a caller annotating a returned message in
            # place must not change the next projection.
            for index in self.owned:
                messages[index] = dict(messages[index])
            sources = list(sources)
            for position, index in self.owned_sources:
                source = sources[position] = dict(sources[position])
                source["message"] = messages[index] if index >= 0 else dict(source["message"])
            model = None if model is None else dict(model)
        if trailing:
            # Synthetic results of the still-open window, without closing it:
            # the next appended message may still answer the calls.
            messages.extend(window.synthetic())
            ends[-1] = len(messages)
        return SessionProjection(
            messages=messages,
            thinking_level=self.thinking_level,
            model=model,
            context_window=self.context_window,
            system_message=get_current_system_message(self.system_messages) if self.system_messages else None,
            sources=sources,
            ends=ends,
        )


def _tail_length(layout: _Layout) -> int:
    if layout.boundary is None or layout.first_kept is None:
        return 0
    return layout.boundary - layout.first_kept


def build_session_context(
    entries: Sequence[dict[str, Any]],
    leaf_id: LeafArg = LAST_ENTRY,
    *,
    repair_trailing: bool = True,
) -> SessionContext:
    """Messages, thinking level and model of one branch
    (docs/rules/projection.md seed:context-building; Q.1, Q.17).

    The leaf is resolved as in the original ``buildSessionContext`` (docs/rules/projection.md Q.1):
    ``None`` gives the empty context; an unknown id and :data:`LAST_ENTRY`
    both use the leaf as loaded (the last entry of ``entries``, or the target
    of a final ``leaf`` record); no entries give the empty context.
    Everything else is :func:`build_session_projection` for that leaf.
    """
    if leaf_id is None:
        return SessionContext()
    by_id = _index(entries)
    leaf = leaf_id if isinstance(leaf_id, str) and leaf_id in by_id else _last_id(entries, by_id)
    projection = build_session_projection(entries, leaf, by_id=by_id, repair_trailing=repair_trailing)
    return SessionContext(
        messages=projection.messages,
        thinking_level=projection.thinking_level,
        model=projection.model,
    )


# --------------------------------------------------------------------------
# The historical view of retired summary compactions

#: Wraps the summary of a retired compaction in the historical view
#: (:func:`build_historical_projection`). Older agents handed the model their
#: summary as one user turn wrapped in fixed sentences; this is our own
#: wording for it, so the historical view reproduces which records the model
#: saw and the summary text itself, not the old wrapper byte for byte.
HISTORICAL_SUMMARY_PREFIX = (
    "The earlier part of this conversation was compacted. A summary of it "
    "follows; the turns kept after the summary are shown as they were.\n\n<summary>\n"
)
HISTORICAL_SUMMARY_SUFFIX = "\n</summary>"


@dataclass(frozen=True)
class HistoricalProjection:
    """What :func:`build_historical_projection` returns.

    Attributes:
        projection: the rebuilt context, with the same shape and rules as a
            :class:`SessionProjection` (``sources``/``entries`` name the entry
            each message came from; the summary message belongs to the
            compaction entry).
        compaction: the retired ``compaction`` entry that shaped it, or
            ``None`` when the branch has no retired compaction after its
            latest active boundary; ``projection`` is then exactly the
            format's projection (:func:`build_session_projection`).
        first_kept_entry_id: the id where the kept entries start (the
            compaction's ``firstKeptEntryId`` found on the path before it), or
            ``None`` when nothing before the compaction was kept.
        kept_entries: how many path entries (of any type) lie between the
            first kept entry and the compaction, the first one included.
    """

    projection: SessionProjection
    compaction: dict[str, Any] | None = None
    first_kept_entry_id: str | None = None
    kept_entries: int = 0

    @property
    def is_historical(self) -> bool:
        """Whether a retired compaction shaped the result (``compaction`` is set)."""
        return self.compaction is not None


def _historical_summary_message(compaction: Mapping[str, Any]) -> Message:
    summary = compaction.get("summary")
    text = HISTORICAL_SUMMARY_PREFIX + (summary if isinstance(summary, str) else "") + HISTORICAL_SUMMARY_SUFFIX
    return {
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "timestamp": _iso_to_ms(compaction.get("timestamp")),
    }


def build_historical_projection(
    entries: Sequence[dict[str, Any]],
    leaf_id: LeafArg = LAST_ENTRY,
    *,
    by_id: Mapping[str, dict[str, Any]] | None = None,
    repair_trailing: bool = True,
) -> HistoricalProjection:
    """The context as the agent that wrote a retired summary compaction rebuilt it.

    This is an archival view, never the context a current agent sends: under
    format 4 a ``compaction`` without ``details.strategy == "verbatim-lines"``
    is inert (docs/rules/format.md seed:compaction-entry), so :func:`build_session_projection`
    shows every older turn again. Older agents treated every compaction as a
    boundary; this function answers "what did the model see back then?" with
    their rule (docs/rules/projection.md Q.4-Q.8 applied to any compaction, with the kept
    entries emitted as ordinary messages rather than serialized):

    * the path is the branch root to leaf, the leaf resolved as in
      :func:`build_context_entries`;
    * the *latest* ``compaction`` on the path wins, whatever its strategy.
      When it is an active verbatim boundary (or there is none), the result
      is the format's projection and :attr:`HistoricalProjection.compaction`
      is ``None``; older compactions never count;
    * that compaction contributes one ``user`` message,
      ``HISTORICAL_SUMMARY_PREFIX + summary + HISTORICAL_SUMMARY_SUFFIX``
      as one text block, timestamped with the compaction's time (ms);
    * the kept entries are those from the first path entry before the
      compaction whose id is its ``firstKeptEntryId`` up to the compaction
      (docs/rules/projection.md Q.7: ``null``, absent, unknown, off-branch or later ids keep nothing);
      each contributes its ordinary context message (docs/rules/projection.md Q.6), then every entry
      after the compaction does. Entries before the kept ones contribute
      nothing;
    * otherwise the format's rules apply unchanged: settings replayed over the
      whole path (docs/rules/projection.md Q.3, S), the latest context edit per target (R), tool
      pairing with synthetic interrupted results (docs/rules/decisions.md D-11; ``repair_trailing``
      as in :func:`build_session_projection`). Retired ``context_compaction``
      records and stored ``compactionSummary`` messages stay inert: their
      old effect is not reconstructed.

    Args:
        entries: all entries of the session, header excluded, in file order.
            Never modified.
        leaf_id: the leaf (``None`` or an unknown id: an empty result;
            default :data:`LAST_ENTRY`, the leaf as loaded).
        by_id: optional id index of ``entries`` (see :func:`build_context_entries`).
        repair_trailing: see :func:`build_session_projection`.

    Returns:
        A :class:`HistoricalProjection`. Raises nothing for malformed
        entries: they contribute what :func:`build_session_projection` would.
    """
    with gc_paused():
        scan = _scan_up(entries, leaf_id, by_id)
        path = scan.path
        latest: int | None = None
        for index in range(len(path) - 1, -1, -1):
            if path[index].get("type") == "compaction":
                latest = index
                break
        if latest is None or is_active_compaction(path[latest]):
            return HistoricalProjection(_project(entries, leaf_id, by_id, repair_trailing))
        compaction = path[latest]
        first_kept = _layout_at(path, latest).first_kept
        kept = path[first_kept:latest] if first_kept is not None else []
        builder = ProjectionBuilder(path[-1]["id"], scan.thinking_level, scan.model, scan.context_window,
                                    scan.edits)
        builder.copies = {entry["id"] for entry in scan.copies}
        builder.sources = [compaction, *kept, *path[latest + 1:]]
        # The summary goes through the same pairing step as everything else,
        # as a stand-in entry without an id (no edit applies to it).
        builder._extend(({"type": "message", "message": _historical_summary_message(compaction)},))
        builder._extend(builder.sources[1:])
        return HistoricalProjection(
            builder.result(repair_trailing, copy=False),
            compaction,
            kept[0]["id"] if kept else None,
            len(kept),
        )
