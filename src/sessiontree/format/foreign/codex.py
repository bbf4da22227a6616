"""Codex rollouts as format-4 sessions (docs/agents/codex.md).

A pure, prefix-stable function of the file's complete bytes: :func:`map_codex`.
Codex records have no links: each entry's parent is the previous entry, so a
rollout is one branch. Billed usage comes from ``token_count`` events only, as
per-call deltas (``last_token_usage``, or the growth of ``total_token_usage``
when that is absent); an event whose running total did not grow is no call.
"""

from __future__ import annotations

import os
from typing import Any

import orjson

from sessiontree.format.foreign.common import ForeignSession, Record, iso_to_ms, iter_records, token_count
from sessiontree.format.ids import is_valid_session_id

__all__ = ["AGENT", "map_codex"]

AGENT = "codex"
_TOKENS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")
#: Response items that are Codex's own bookkeeping, never sent to the model (``ghost_snapshot``:
#: the git snapshot ``/undo`` restores): inert, and not reported as unmapped.
_BOOKKEEPING_ITEMS = frozenset({"ghost_snapshot"})

Counts = tuple[int, int, int, int]


def _counts(raw: Any) -> Counts | None:
    """``(input_tokens, cached_input_tokens, output_tokens, reasoning_output_tokens)`` of a
    Codex usage object (a missing field, or one that is not a whole number from 0 to 2^53-1,
    is 0: docs/usage.md, "Bad values in agent files")."""
    if not isinstance(raw, dict):
        return None
    out = [token_count(raw.get(key)) for key in _TOKENS]
    return out[0], out[1], out[2], out[3]


def _usage(counts: Counts) -> dict[str, Any]:
    """Codex counts as format-4 usage, as OpenAI bills them (docs/usage.md, "Codex"):
    ``input_tokens`` includes the cached part, so ``input`` is the uncached rest and
    ``cacheRead`` the cached part; reasoning tokens are part of ``output_tokens`` and
    billed as output, so ``output`` keeps them (their share is the entry's
    ``reasoningTokens``, never added again)."""
    total_in, cached, output, _reasoning = counts
    cached = min(cached, total_in)
    usage = {"input": total_in - cached, "output": output, "cacheRead": cached, "cacheWrite": 0}
    return {**usage, "totalTokens": sum(usage.values())}


class _Mapper:
    def __init__(self, path: str | None) -> None:
        self.path = path
        self.result: ForeignSession | None = None
        self.last_id: str | None = None
        self.model = ""
        self.tool_names: dict[str, str] = {}
        self.total: Counts | None = None
        self.responses = 0  # model responses met so far (their items share a responseId)
        self.in_response = False

    def header(self, records: list[Record]) -> dict[str, Any]:
        stem = os.path.splitext(os.path.basename(self.path or ""))[0]
        meta: dict[str, Any] = {}
        # The first readable record (damaged lines before it are inert entries).
        for record in [r for r in records if r.value is not None][:1]:
            value = record.value or {}
            if value.get("type") == "session_meta" and isinstance(value.get("payload"), dict):
                meta = {**value["payload"], "timestamp": value["payload"].get("timestamp", value.get("timestamp"))}
            elif "instructions" in value:
                meta = value
        session_id = meta.get("id")
        if not is_valid_session_id(session_id):
            session_id = stem[-36:] if is_valid_session_id(stem[-36:]) else stem
        return {"type": "session", "version": 4, "id": session_id,
                "createdAt": meta.get("timestamp") if isinstance(meta.get("timestamp"), str) else "",
                "cwd": meta.get("cwd") if isinstance(meta.get("cwd"), str) else "",
                "foreign": {"agent": AGENT}}

    def add(self, record: Record, entry: dict[str, Any], *, part: int = 1,
            extra: dict[str, Any] | None = None) -> None:
        assert self.result is not None
        entry_id = f"L{record.line}" if part == 1 else f"L{record.line}.{part}"
        self.result.add_entry(record, entry, entry_id, self.last_id, part=part, extra=extra)
        self.last_id = entry_id

    def inert(self, record: Record, kind: str, reason: str | None = None, subtype: str | None = None) -> None:
        assert self.result is not None
        data: dict[str, Any] = {"recordType": kind}
        if subtype:
            data["subtype"] = subtype
        self.add(record, {"type": "custom", "customType": AGENT, "data": data},
                 extra={"unmapped": reason} if reason else None)
        if reason:
            self.result.unmapped.append((record.line, reason))

    def map_record(self, record: Record) -> None:
        value = record.value
        if value is None:
            self.inert(record, "invalid", "not a JSON object (a torn or damaged line)")
            return
        kind = value.get("type")
        payload = value.get("payload")
        if kind is None and "instructions" in value:
            self.inert(record, "session_meta")
            return
        if kind in ("message", "reasoning", "function_call", "function_call_output") and payload is None:
            payload, kind = value, "response_item"  # rollouts before records were wrapped
        if not isinstance(payload, dict):
            self.inert(record, str(kind), f"record {kind!r} without a payload object")
            return
        ptype = payload.get("type")
        stamp = iso_to_ms(value.get("timestamp"))
        if kind == "session_meta":
            self.inert(record, "session_meta")
        elif kind == "turn_context":
            model = payload.get("model")
            if isinstance(model, str) and model and model != self.model:
                self.model = model
                self.add(record, {"type": "model_change", "provider": "openai", "modelId": model})
            else:
                self.inert(record, "turn_context")
        elif kind == "compacted":
            self.in_response = False
            message = payload.get("message")
            self.add(record, {"type": "compaction", "summary": message if isinstance(message, str) else "",
                              "firstKeptEntryId": None})
        elif kind == "event_msg":
            if ptype == "token_count":
                self.token_count(record, payload)
            else:
                self.inert(record, "event_msg", subtype=str(ptype))
        elif kind == "response_item":
            self.response_item(record, payload, stamp)
        else:
            self.inert(record, str(kind), f"unknown record type {kind!r}")

    def token_count(self, record: Record, payload: dict[str, Any]) -> None:
        info = payload.get("info")
        if isinstance(info, dict):
            assert self.result is not None
            for name in ("total_token_usage", "last_token_usage"):
                self.result.check_counts(record.line, info.get(name), f"payload.info.{name}", _TOKENS)
        total = _counts(info.get("total_token_usage")) if isinstance(info, dict) else None
        last = _counts(info.get("last_token_usage")) if isinstance(info, dict) else None
        if total is None or total == self.total:
            # No new call: an event with rate limits only, or the same running total again.
            self.inert(record, "event_msg", subtype="token_count")
            return
        if last is None:
            previous = self.total or (0, 0, 0, 0)
            last = (max(0, total[0] - previous[0]), max(0, total[1] - previous[1]),
                    max(0, total[2] - previous[2]), max(0, total[3] - previous[3]))
        self.total = total
        self.in_response = False  # Codex counts a response's tokens once it is complete
        if not any(last):
            self.inert(record, "event_msg", subtype="token_count")
            return
        entry: dict[str, Any] = {"type": "usage", "kind": "codex.token_count", "provider": "openai",
                                 "model": self.model, "usage": _usage(last)}
        if last[3]:
            entry["reasoningTokens"] = min(last[3], last[2])
        self.add(record, entry)

    def response_item(self, record: Record, payload: dict[str, Any], stamp: int) -> None:
        assert self.result is not None
        ptype = payload.get("type")
        role = payload.get("role")
        if not (ptype == "message" and role == "assistant") and ptype not in (
                "reasoning", "function_call", "custom_tool_call", "local_shell_call", *_BOOKKEEPING_ITEMS):
            self.in_response = False  # an output, a user or developer message: the response is over
        if ptype == "message" and role == "user":
            self.add(record, {"type": "message", "message": {
                "role": "user", "content": self.blocks(payload.get("content"), record), "timestamp": stamp}})
        elif ptype == "message" and role == "assistant":
            self.assistant(record, self.blocks(payload.get("content"), record), stamp, "stop")
        elif ptype == "message":
            # A developer or system message: instructions the model saw. A custom_message
            # has no message-level timestamp; its entry keeps the record's ISO time.
            self.add(record, {"type": "custom_message", "customType": f"{AGENT}.{role}",
                              "content": self.blocks(payload.get("content"), record), "display": False})
        elif ptype == "reasoning":
            summary = payload.get("summary")
            texts = [s.get("text", "") for s in summary if isinstance(s, dict)] if isinstance(summary, list) else []
            self.assistant(record, [{"type": "thinking", "thinking": "\n\n".join(t for t in texts if isinstance(t, str))}],
                           stamp, "stop")
        elif ptype in ("function_call", "custom_tool_call", "local_shell_call"):
            call_id = payload.get("call_id") or payload.get("id") or f"L{record.line}"
            name = str(payload.get("name") or ("local_shell" if ptype == "local_shell_call" else ""))
            self.tool_names[str(call_id)] = name
            arguments: Any
            if ptype == "function_call":
                try:
                    arguments = orjson.loads(payload.get("arguments") or "{}")
                except (orjson.JSONDecodeError, TypeError):
                    arguments = {"arguments": payload.get("arguments")}
            elif ptype == "custom_tool_call":
                arguments = {"input": payload.get("input")}
            else:
                arguments = payload.get("action")
            self.assistant(record, [{"type": "toolCall", "id": str(call_id), "name": name,
                                     "arguments": arguments if isinstance(arguments, dict) else {"value": arguments}}],
                           stamp, "toolUse")
        elif ptype in ("function_call_output", "custom_tool_call_output"):
            call_id = str(payload.get("call_id", ""))
            output = payload.get("output")
            is_error = False
            if isinstance(output, dict):
                is_error = output.get("success") is False
                output = output.get("content", "")
            text = output if isinstance(output, str) else orjson.dumps(output).decode()
            self.add(record, {"type": "message", "message": {
                "role": "toolResult", "toolCallId": call_id, "toolName": self.tool_names.get(call_id, ""),
                "content": [{"type": "text", "text": text}], "isError": is_error, "timestamp": stamp}})
        elif ptype in _BOOKKEEPING_ITEMS:
            self.inert(record, "response_item", subtype=str(ptype))
        else:
            self.inert(record, "response_item", f"response item {ptype!r} not mapped", subtype=str(ptype))

    def assistant(self, record: Record, content: list[dict[str, Any]], stamp: int, stop: str) -> None:
        if not self.in_response:
            # The first item of a model response: the items up to the next output, user
            # message or token count are that response's (docs/agents/codex.md).
            self.responses += 1
            self.in_response = True
        usage = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}
        self.add(record, {"type": "message", "message": {
            "role": "assistant", "content": content, "api": "openai-responses", "provider": "openai",
            "model": self.model, "usage": usage, "stopReason": stop, "timestamp": stamp,
            "responseId": f"r{self.responses}"}},
            extra={"billed": False})

    def blocks(self, content: Any, record: Record) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") in ("input_text", "output_text", "text") \
                    and isinstance(block.get("text"), str):
                out.append({"type": "text", "text": block["text"]})
            elif isinstance(block, dict):
                assert self.result is not None
                self.result.unmapped.append((record.line, f"content block {block.get('type')!r} not mapped"))
        return out


def map_codex(data: bytes, path: str | None = None) -> ForeignSession:
    """Map a Codex rollout (complete bytes) to a format-4 session.

    Args:
        data: the file's complete records.
        path: the file path: the session id comes from ``session_meta``, else from
            the UUID at the end of the file name.

    Returns:
        A :class:`ForeignSession`; records not understood become inert ``custom``
        entries listed in ``unmapped``.
    """
    mapper = _Mapper(path)
    records = list(iter_records(data))
    header = mapper.header(records)
    first = next((r.value for r in records if r.value is not None), None)
    known = first is not None and (first.get("type") == "session_meta" or "instructions" in first)
    mapper.result = result = ForeignSession(AGENT, header, header_known=known)
    for record in records:
        mapper.map_record(record)
    return result
