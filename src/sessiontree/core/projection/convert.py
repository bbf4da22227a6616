"""Message conversion, entry by entry and message by message: what an entry
contributes to the context on its own (docs/rules/projection.md P.1, Q.6, Q.9,
Q.10) and what provider-bound conversion keeps, drops and rewrites of one agent
message (P.2, P.3, with JavaScript's whitespace for "blank").

:func:`~sessiontree.core.projection.pairing.convert_to_llm`, which converts a
whole list and then repairs its tool pairing, lives with the pairing rule
(pairing needs this module's drop rule, so it sits above it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from sessiontree.core.projection.model import Entry, Message, is_active_compaction, message_role
from sessiontree.core.transcript import bash_text, branch_summary_text, compose_boundary_content
from sessiontree.core.tree import parse_timestamp_ms

__all__ = ["entry_to_context_messages"]

#: JavaScript's String.prototype.trim whitespace (WhiteSpace + LineTerminator).
#: Python's str.strip differs (it strips U+001C-U+001F and U+0085 and keeps
#: U+FEFF), and visibility must match the original byte for byte.
JS_WHITESPACE = frozenset(
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


# The same characters as one string, for str.strip: a text is blank exactly when
# stripping them leaves nothing (one C call instead of a generator per text).
_JS_WHITESPACE_CHARS: Final = "".join(sorted(JS_WHITESPACE))


def is_js_blank(text: str) -> bool:
    """Whether ``text`` is empty or only :data:`JS_WHITESPACE` (JavaScript's ``!text.trim()``)."""
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
        return isinstance(text, str) and not is_js_blank(text)
    return isinstance(kind, str) and not is_js_blank(kind)


def is_content_visible(content: Any) -> bool:
    """Whether a user message's ``content`` shows anything (docs/rules/projection.md P.3): a
    non-blank string, or a list with a visible block; ``False`` for any other type."""
    if isinstance(content, str):
        return not is_js_blank(content)
    if isinstance(content, list):
        return any(_block_visible(b) for b in content)
    return False


def iso_to_ms(value: Any) -> int | None:
    """Whole milliseconds since the epoch of an entry timestamp, like JS ``Date.parse``
    (:func:`sessiontree.core.tree.parse_timestamp_ms`, truncated); a number is taken
    as it is; ``None`` when unparsable (JavaScript would give NaN, written as null)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    ms = parse_timestamp_ms(value)
    return None if ms is None else int(ms // 1)


#: Roles whose null or missing content is replaced by [] (docs/rules/projection.md P.1).
CONTENT_ROLES = frozenset({"user", "assistant", "toolResult", "custom"})


def normalize_entry(entry: Entry) -> Entry:
    """docs/rules/projection.md P.1: null/missing content of a user-like message becomes ``[]`` in a copy."""
    if entry.get("type") != "message":
        return entry
    message = entry.get("message")
    if (
        isinstance(message, dict)
        and message_role(message) in CONTENT_ROLES
        and message.get("content") is None
    ):
        fixed = dict(entry)
        fixed["message"] = {**message, "content": []}
        return fixed
    return entry


def _copy_present(target: dict[str, Any], source: Mapping[str, Any], *keys: str) -> None:
    # A JS `undefined` property is dropped on write; copying only present
    # keys gives the same JSON as the original.
    for key in keys:
        if key in source:
            target[key] = source[key]


def context_message(entry: Entry) -> Message | None:
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
        out["timestamp"] = iso_to_ms(entry.get("timestamp"))
        if entry.get("excludeFromContext") is True:
            out["excludeFromContext"] = True
        return out
    if kind == "branch_summary":
        summary = entry.get("summary")
        if not isinstance(summary, str) or summary == "":
            return None
        out = {"role": "branchSummary", "summary": summary}
        _copy_present(out, entry, "fromId")
        out["timestamp"] = iso_to_ms(entry.get("timestamp"))
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
        "timestamp": iso_to_ms(boundary.get("timestamp")),
    }


def boundary_messages(boundary: Mapping[str, Any], tail: Sequence[Any]) -> list[Message]:
    """The messages a compaction ``boundary`` entry stands for, given its kept ``tail``
    messages: its ``systemMessage`` checkpoint (when a dict), then the boundary message."""
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
    normalized = normalize_entry(entry if isinstance(entry, dict) else dict(entry))
    if is_active_compaction(normalized):
        return boundary_messages(normalized, [])
    message = context_message(normalized)
    return [] if message is None else [message]


def drops_in_conversion(message: Mapping[str, Any]) -> bool:
    """Whether :func:`convert_to_llm` drops ``message`` entirely (docs/rules/projection.md P.2)."""
    role = message.get("role")
    if role in ("assistant", "toolResult", "system"):
        return False
    if role == "user":
        return not is_content_visible(message.get("content"))
    if role == "bashExecution":
        return message.get("excludeFromContext") is True
    if role == "custom":
        return message.get("excludeFromContext") is True or not is_content_visible(
            message.get("content")
        )
    if role == "branchSummary":
        summary = message.get("summary")
        return not (isinstance(summary, str) and summary != "")
    return True  # compactionSummary and unknown roles


def convert_message(message: Message) -> Message | None:
    """docs/rules/projection.md P.2 for one message; ``None`` when it is dropped."""
    role = message.get("role")
    if role == "assistant":
        content: Any = message.get("content")
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
    if drops_in_conversion(message):
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
