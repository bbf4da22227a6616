"""Gemini CLI chats as format-4 sessions (docs/agents/gemini.md).

Gemini CLI keeps a session as ONE JSON document (``~/.gemini/tmp/<project
hash>/chats/session-<time>-<id prefix>.json``) that it rewrites whole on every
change: a frame (``sessionId``, ``projectHash``, ``startTime``, ``lastUpdated``,
later versions also ``summary``, ``kind``, ``directories``) around a
``messages`` array. There are no lines to keep one by one, so the verbatim
bytes are split at the message boundaries (:func:`split_document`):

* the first entry (``custom``, ``data.recordType`` ``"document"``) keeps the
  document's opening bytes, from its first byte through the ``[`` of
  ``messages``;
* each message's first entry keeps the bytes from the end of the previous
  message (or the ``[``) through the message's closing ``}``: the separator
  and the message exactly as written;
* the last entry (``custom``, ``"document-end"``) keeps the rest: the array's
  end and any key after it.

Joining them (:func:`~sessiontree.format.foreign.common.source_bytes`) gives the
document back byte for byte. The frame changes on every rewrite
(``lastUpdated``), and Gemini CLI completes its last message in place (tool
results, then tokens), so a rewrite is not an append: sync compares the
messages (:func:`compare_messages`) and stores the new version whole.

A pure function of the document's bytes: :func:`map_gemini`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import orjson

from sessiontree.format.foreign.common import ForeignSession, Record, iso_to_ms, loads_record, token_count
from sessiontree.format.ids import is_valid_session_id

__all__ = [
    "AGENT",
    "GeminiSession",
    "compare_messages",
    "looks_like_gemini",
    "map_gemini",
    "resume_command",
    "split_document",
]

AGENT = "gemini"
#: Message types Gemini CLI writes that are shown to the user, never sent to the model.
_NOTICES = frozenset({"info", "error", "warning"})
_WS = b" \t\r\n"


def looks_like_gemini(value: Any) -> bool:
    """Whether a parsed JSON value is a Gemini CLI chat document (a ``sessionId`` string,
    a ``messages`` array, and ``projectHash`` or ``startTime``)."""
    return (isinstance(value, dict) and isinstance(value.get("sessionId"), str)
            and isinstance(value.get("messages"), list)
            and ("projectHash" in value or "startTime" in value))


def resume_command(session_id: str) -> list[str]:
    """Gemini CLI's own command that continues a session: ``gemini --resume ID``
    (the option exists from Gemini CLI 0.12.0 on; docs/agents/gemini.md)."""
    return ["gemini", "--resume", session_id]


# -- splitting the document at its messages ---------------------------------------------------


def _skip_ws(data: bytes, i: int) -> int:
    while i < len(data) and data[i] in _WS:
        i += 1
    return i


def _end_of_string(data: bytes, i: int) -> int:
    """The index after the string starting at ``data[i] == '"'``."""
    i += 1
    while True:
        j = data.index(b'"', i)
        k = j - 1
        while data[k] == 0x5C:  # a quote after an odd run of backslashes is escaped
            k -= 1
        if (j - 1 - k) % 2 == 0:
            return j + 1
        i = j + 1


def _end_of_value(data: bytes, i: int) -> int:
    """The index after the JSON value starting at ``i`` (the document already parsed)."""
    c = data[i]
    if c == 0x22:
        return _end_of_string(data, i)
    if c in (0x7B, 0x5B):  # { [
        depth = 0
        while True:
            c = data[i]
            if c == 0x22:
                i = _end_of_string(data, i)
                continue
            if c in (0x7B, 0x5B):
                depth += 1
            elif c in (0x7D, 0x5D):
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
    while i < len(data) and data[i] not in b",}] \t\r\n":
        i += 1
    return i


def split_document(data: bytes) -> tuple[int, list[tuple[int, int]]] | None:
    """Where the ``messages`` array of a chat document opens and where each element
    lies: ``(index after "[", [(start, end) of each element])``, or ``None`` when the
    top level has no ``messages`` array. ``data`` must be a valid JSON document."""
    i = _skip_ws(data, 0)
    if i >= len(data) or data[i] != 0x7B:
        return None
    i += 1
    while True:
        i = _skip_ws(data, i)
        if data[i] == 0x7D:
            return None
        key_end = _end_of_string(data, i)
        key = orjson.loads(data[i:key_end])
        i = _skip_ws(data, key_end)
        i = _skip_ws(data, i + 1)  # the colon
        if key == "messages" and data[i] == 0x5B:
            opened = i + 1
            spans: list[tuple[int, int]] = []
            i = _skip_ws(data, opened)
            while data[i] != 0x5D:
                end = _end_of_value(data, i)
                spans.append((i, end))
                i = _skip_ws(data, end)
                if data[i] == 0x2C:
                    i = _skip_ws(data, i + 1)
            return opened, spans
        i = _skip_ws(data, _end_of_value(data, i))
        if data[i] == 0x2C:
            i += 1


@dataclass
class GeminiSession(ForeignSession):
    """A :class:`ForeignSession` of a chat document, plus ``messages``: ``(entry id,
    canonical JSON of the Gemini message)`` of each message in order (what a rewrite
    is compared by: :func:`compare_messages`)."""

    messages: list[tuple[str, bytes]] = field(default_factory=list)


def compare_messages(stored: list[tuple[str, bytes]], new: list[tuple[str, bytes]]) -> tuple[str, str]:
    """How a rewritten chat relates to the version stored before (docs/agents/gemini.md, "Rewrites").

    Args:
        stored: ``(message id, canonical JSON)`` of each message stored, in order.
        new: the same for the rewritten document.

    Returns:
        ``(kind, why)``: ``"same"``; ``"grown"`` (the stored messages are the first
        ones, each unchanged except the last, which Gemini CLI completes in place:
        tool results, thoughts, tokens added); ``"shorter"`` (fewer messages than
        stored); ``"different"`` (a stored message changed or another id stands in
        its place). ``why`` names the message.
    """
    if len(new) < len(stored):
        return "shorter", f"the chat now holds {len(new)} messages where {len(stored)} were synced"
    for k, (message_id, value) in enumerate(stored):
        other_id, other = new[k]
        if other_id != message_id:
            return "different", f"message {k + 1} is {other_id}, was {message_id}"
        if other != value and k < len(stored) - 1:
            return "different", f"message {message_id} (number {k + 1}) changed"
    if len(new) == len(stored) and (not stored or new[-1][1] == stored[-1][1]):
        return "same", ""
    return "grown", ""


# -- the mapping ---------------------------------------------------------------------------


#: The counts of a Gemini CLI message's ``tokens`` that bill.
_TOKENS = ("input", "output", "cached", "thoughts", "tool")


def _count(tokens: dict[str, Any], key: str) -> int:
    return token_count(tokens.get(key))  # docs/usage.md, "Bad values in agent files"


def _usage(tokens: dict[str, Any]) -> dict[str, Any]:
    """Gemini per-message ``tokens`` as format-4 usage (docs/usage.md, "Gemini CLI"):
    ``input`` includes ``cached``, so ``input`` is the uncached rest plus ``tool``
    (tool-use prompt tokens, billed as input); ``cached`` is a cache read; ``thoughts``
    are billed as output, as Google bills them."""
    total_in = _count(tokens, "input")
    cached = min(_count(tokens, "cached"), total_in)
    counts = {"input": total_in - cached + _count(tokens, "tool"),
              "output": _count(tokens, "output") + _count(tokens, "thoughts"),
              "cacheRead": cached, "cacheWrite": 0}
    return {**counts, "totalTokens": sum(counts.values())}


def _text(content: Any) -> str:
    """A message's ``content`` as text: a string, or the ``text`` of its parts (a
    ``PartListUnion`` in later versions)."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if isinstance(content, list):
        return "".join(part if isinstance(part, str) else part.get("text", "") if isinstance(part, dict)
                       and isinstance(part.get("text"), str) else "" for part in content)
    return ""


def _result_text(call: dict[str, Any]) -> str:
    """The text a tool call returned to the model: each ``functionResponse.response``'s
    ``output`` (else ``error``, else the response as JSON), joined."""
    out: list[str] = []
    result = call.get("result")
    for part in result if isinstance(result, list) else []:
        response = part.get("functionResponse") if isinstance(part, dict) else None
        if isinstance(response, dict):
            body = response.get("response")
            if isinstance(body, dict) and isinstance(body.get("output"), str):
                out.append(body["output"])
            elif isinstance(body, dict) and isinstance(body.get("error"), str):
                out.append(body["error"])
            else:
                out.append(orjson.dumps(body).decode())
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            out.append(part["text"])
    if not out and isinstance(call.get("resultDisplay"), str):
        out.append(call["resultDisplay"])
    return "\n".join(out)


class _Mapper:
    def __init__(self, data: bytes, path: str | None) -> None:
        self.data = data
        self.path = path
        self.result: ForeignSession | None = None
        self.last_id: str | None = None
        self.ids: set[str] = set()

    def line_of(self, offset: int) -> int:
        return self.data.count(b"\n", 0, offset) + 1

    def add(self, record: Record, entry: dict[str, Any], entry_id: str, *, part: int = 1,
            extra: dict[str, Any] | None = None) -> str:
        assert self.result is not None
        if entry_id in self.ids:
            entry_id = f"{entry_id}~{record.line}"
        self.ids.add(entry_id)
        self.result.add_entry(record, entry, entry_id, self.last_id, part=part, extra=extra)
        self.last_id = entry_id
        return entry_id

    def message(self, record: Record, value: dict[str, Any] | None, index: int) -> None:
        assert self.result is not None
        if value is None:
            self.add(record, {"type": "custom", "customType": AGENT, "data": {"recordType": "invalid"}},
                     f"M{index}", extra={"unmapped": "a message that is not a JSON object"})
            self.result.unmapped.append((record.line, "a message that is not a JSON object"))
            return
        raw_id = value.get("id")
        entry_id = raw_id if isinstance(raw_id, str) and raw_id else f"M{index}"
        kind = value.get("type")
        stamp = iso_to_ms(value.get("timestamp"))
        if kind == "user":
            self.add(record, {"type": "message", "message": {
                "role": "user", "content": [{"type": "text", "text": _text(value.get("content"))}],
                "timestamp": stamp}}, entry_id)
        elif kind == "gemini":
            self.assistant(record, value, entry_id, stamp)
        elif kind in _NOTICES:
            self.add(record, {"type": "custom", "customType": AGENT,
                              "data": {"recordType": kind, "content": _text(value.get("content"))}}, entry_id)
        else:
            reason = f"message type {kind!r} not mapped"
            self.add(record, {"type": "custom", "customType": AGENT, "data": {"recordType": str(kind)}},
                     entry_id, extra={"unmapped": reason})
            self.result.unmapped.append((record.line, reason))

    def assistant(self, record: Record, value: dict[str, Any], entry_id: str, stamp: int) -> None:
        content: list[dict[str, Any]] = []
        thoughts = value.get("thoughts")
        for thought in thoughts if isinstance(thoughts, list) else []:
            if isinstance(thought, dict):
                subject = thought.get("subject") if isinstance(thought.get("subject"), str) else ""
                description = thought.get("description") if isinstance(thought.get("description"), str) else ""
                content.append({"type": "thinking",
                                "thinking": f"{subject}\n\n{description}" if subject and description
                                else subject or description})
        text = _text(value.get("content"))
        if text:
            content.append({"type": "text", "text": text})
        calls = [c for c in value.get("toolCalls") or [] if isinstance(c, dict)] \
            if isinstance(value.get("toolCalls"), list) else []
        for k, call in enumerate(calls):
            args = call.get("args")
            content.append({"type": "toolCall", "id": str(call.get("id") or f"{entry_id}.call{k + 1}"),
                            "name": str(call.get("name") or ""),
                            "arguments": args if isinstance(args, dict) else {"value": args}})
        tokens = value.get("tokens")
        billed = isinstance(tokens, dict)
        assert self.result is not None
        self.result.check_counts(record.line, tokens, "tokens", _TOKENS)
        model = value.get("model") if isinstance(value.get("model"), str) else ""
        usage = _usage(tokens) if isinstance(tokens, dict) else \
            {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}
        self.add(record, {"type": "message", "message": {
            "role": "assistant", "content": content, "api": "google-gemini-cli", "provider": "google",
            "model": model, "usage": usage, "stopReason": "toolUse" if calls else "stop", "timestamp": stamp}},
            entry_id, extra=None if billed else {"billed": False})
        for k, call in enumerate(calls):
            status = call.get("status")
            if "result" not in call and status not in ("error", "cancelled"):
                continue  # not answered yet: Gemini CLI adds the result in place
            call_id = str(call.get("id") or f"{entry_id}.call{k + 1}")
            self.add(record, {"type": "message", "message": {
                "role": "toolResult", "toolCallId": call_id, "toolName": str(call.get("name") or ""),
                "content": [{"type": "text", "text": _result_text(call)}],
                "isError": status in ("error", "cancelled"),
                "timestamp": iso_to_ms(call.get("timestamp")) or stamp}},
                f"{entry_id}.{k + 2}", part=k + 2)


def map_gemini(data: bytes, path: str | None = None) -> GeminiSession | None:
    """Map a Gemini CLI chat document (its complete bytes) to a format-4 session.

    Args:
        data: the file's bytes: one JSON document.
        path: the file path (the session id comes from ``sessionId``, else from the
            file name).

    Returns:
        A :class:`GeminiSession` (``agent`` ``"gemini"``), or ``None`` when ``data`` is
        not a chat document.
    """
    try:
        value = loads_record(data)
    except ValueError:
        return None
    if not looks_like_gemini(value):
        return None
    where = split_document(data)
    if where is None:
        return None
    opened, spans = where
    session_id = value["sessionId"]
    if not is_valid_session_id(session_id):
        session_id = os.path.splitext(os.path.basename(path or ""))[0]
    header: dict[str, Any] = {"type": "session", "version": 4, "id": session_id,
                              "createdAt": value.get("startTime") if isinstance(value.get("startTime"), str)
                              else "", "cwd": "", "foreign": {"agent": AGENT}}
    mapper = _Mapper(data, path)
    mapper.result = result = GeminiSession(AGENT, header)
    messages = result.messages
    head = Record(1, data[:opened], None)
    mapper.add(head, {"type": "custom", "customType": AGENT, "data": {"recordType": "document"}}, "document")
    previous = opened
    for index, (start, end) in enumerate(spans):
        message = value["messages"][index]
        record = Record(mapper.line_of(start), data[previous:end], message if isinstance(message, dict) else None)
        first = len(result.entries)
        mapper.message(record, record.value, index + 1)
        messages.append((result.entries[first]["id"], orjson.dumps(message, option=orjson.OPT_SORT_KEYS)))
        previous = end
    tail = Record(mapper.line_of(previous), data[previous:], None)
    mapper.add(tail, {"type": "custom", "customType": AGENT, "data": {"recordType": "document-end"}},
               "document-end")
    return result
