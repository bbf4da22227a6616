"""Claude Code project logs as format-4 sessions (docs/agents/claude-code.md).

A pure function of the file's complete bytes and its path: :func:`map_claude`.
The mapping is *prefix-stable*: the entries of the first ``n`` records never depend
on later records, so a file that grows maps to the same entries plus new ones
(what sync's ``grown`` needs).
"""

from __future__ import annotations

import os
from typing import Any

from sessiontree.format.foreign.common import (
    ForeignSession,
    Record,
    iso_to_ms,
    iter_records,
    text_blocks,
)
from sessiontree.format.ids import is_valid_session_id

__all__ = ["AGENT", "map_claude"]

AGENT = "claude-code"
_STOP = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "toolUse", "max_tokens": "length",
         "refusal": "stop", "pause_turn": "stop"}
#: Record types kept as inert records without a report (their content is bookkeeping).
_INERT = frozenset({"summary", "file-history-snapshot", "queue-operation", "progress", "system"})


def _usage(raw: Any) -> dict[str, Any]:
    """Anthropic usage as format-4 usage (cost only when the record has ``costUSD``)."""
    usage = raw if isinstance(raw, dict) else {}

    def n(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

    counts = {"input": n("input_tokens"), "output": n("output_tokens"),
              "cacheRead": n("cache_read_input_tokens"), "cacheWrite": n("cache_creation_input_tokens")}
    return {**counts, "totalTokens": sum(counts.values())}


class _Mapper:
    """State carried from record to record (all of it from earlier records only)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.result: ForeignSession | None = None
        self.by_uuid: dict[str, str] = {}  # source uuid -> entry id (first occurrence)
        self.ids: set[str] = set()
        self.last_id: str | None = None
        self.tool_names: dict[str, str] = {}
        self.calls: dict[tuple[str, str], str] = {}  # (message id, request id) -> first entry id
        self.known = False
        self.sidechain_file = False

    # -- header -------------------------------------------------------------------------------

    def header(self, records: list[Record]) -> dict[str, Any]:
        stem = os.path.splitext(os.path.basename(self.path or ""))[0]
        session_id = cwd = created = agent_id = None
        sidechain = False
        self.known = False
        for record in records:
            value = record.value
            if value is None or not isinstance(value.get("sessionId"), str):
                continue
            session_id = value["sessionId"]
            cwd = value.get("cwd") if isinstance(value.get("cwd"), str) else None
            created = value.get("timestamp") if isinstance(value.get("timestamp"), str) else None
            sidechain = value.get("isSidechain") is True
            agent_id = value.get("agentId") if isinstance(value.get("agentId"), str) else None
            self.known = True
            break
        header: dict[str, Any] = {"type": "session", "version": 4}
        if sidechain and session_id and (agent_id or stem.startswith("agent-")):
            # A subagent transcript: a child session of the conversation that started it.
            child = agent_id or stem[len("agent-"):]
            header["id"] = f"{session_id}-agent-{child}"
            header.update(createdAt=created or "", cwd=cwd or "", parentSessionId=session_id, internal=True,
                          workflow={"runId": session_id, "stageId": child, "stageName": "subagent"})
        else:
            # The file name is the session id; records copied from an earlier session (a
            # resumed conversation) may still carry that session's id.
            header["id"] = stem if is_valid_session_id(stem) else session_id
            header.update(createdAt=created or "", cwd=cwd or "")
        header["foreign"] = {"agent": AGENT}
        self.sidechain_file = "parentSessionId" in header
        return header

    # -- entries ------------------------------------------------------------------------------

    def new_id(self, wanted: str | None, record: Record, part: int) -> str:
        candidate = wanted if wanted else f"L{record.line}"
        if part > 1:
            candidate = f"{candidate}.{part}"
        while candidate in self.ids:
            candidate = f"{candidate}~{record.line}"
        self.ids.add(candidate)
        return candidate

    def add(self, record: Record, entry: dict[str, Any], *, uuid: str | None, parent: str | None,
            part: int = 1, extra: dict[str, Any] | None = None) -> str:
        assert self.result is not None
        entry_id = self.new_id(uuid, record, part)
        self.result.add_entry(record, entry, entry_id, parent, part=part, extra=extra)
        if uuid and part == 1 and uuid not in self.by_uuid:
            self.by_uuid[uuid] = entry_id
        self.last_id = entry_id
        return entry_id

    def parent_of(self, value: dict[str, Any]) -> str | None:
        for key in ("parentUuid", "logicalParentUuid"):
            linked = value.get(key)
            if isinstance(linked, str) and linked in self.by_uuid:
                return self.by_uuid[linked]
        return self.last_id

    def inert(self, record: Record, kind: str, reason: str | None = None) -> None:
        assert self.result is not None
        value = record.value or {}
        uuid = value.get("uuid") if isinstance(value.get("uuid"), str) else None
        data: dict[str, Any] = {"recordType": kind}
        if isinstance(value.get("subtype"), str):
            data["subtype"] = value["subtype"]
        extra = {"unmapped": reason} if reason else None
        parent = self.parent_of(value) if value else self.last_id
        self.add(record, {"type": "custom", "customType": AGENT, "data": data}, uuid=uuid, parent=parent,
                 extra=extra)
        if reason:
            self.result.unmapped.append((record.line, reason))

    def map_record(self, record: Record) -> None:
        assert self.result is not None
        value = record.value
        if value is None:
            self.inert(record, "invalid", "not a JSON object (a torn or damaged line)")
            return
        kind = value.get("type") if isinstance(value.get("type"), str) else None
        message = value.get("message")
        if value.get("isSidechain") is True and not self.sidechain_file and kind in ("user", "assistant"):
            # A subagent's turn inside the main file (older versions): kept out of the
            # main conversation's context, as Claude Code keeps it.
            self.inert(record, "sidechain")
        elif kind == "user" and isinstance(message, dict):
            self.user(record, value, message)
        elif kind == "assistant" and isinstance(message, dict):
            self.assistant(record, value, message)
        elif kind == "custom-title" and isinstance(value.get("customTitle"), str):
            self.add(record, {"type": "session_info", "name": value["customTitle"]}, uuid=None,
                     parent=self.last_id)
        elif kind in _INERT:
            self.inert(record, str(kind))
        else:
            self.inert(record, kind if kind is not None else "unknown",
                       f"unknown record type {kind!r}" if kind is not None else "record without a type")

    def user(self, record: Record, value: dict[str, Any], message: dict[str, Any]) -> None:
        uuid = value.get("uuid") if isinstance(value.get("uuid"), str) else None
        parent = self.parent_of(value)
        stamp = iso_to_ms(value.get("timestamp"))
        content = message.get("content")
        if value.get("isCompactSummary") is True:
            summary = " ".join(block["text"] for block in text_blocks(content))
            self.add(record, {"type": "compaction", "summary": summary, "firstKeptEntryId": None}, uuid=uuid,
                     parent=parent)
            return
        if value.get("isMeta") is True:
            self.add(record, {"type": "custom_message", "customType": f"{AGENT}.meta",
                              "content": content if isinstance(content, str) else text_blocks(content),
                              "display": False, "timestamp": stamp}, uuid=uuid, parent=parent)
            return
        if isinstance(content, str):
            self.add(record, {"type": "message", "message": {"role": "user", "content": content,
                                                              "timestamp": stamp}}, uuid=uuid, parent=parent)
            return
        blocks = content if isinstance(content, list) else []
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        others = [b for b in blocks if not (isinstance(b, dict) and b.get("type") == "tool_result")]
        part = 1
        for block in results:
            call_id = str(block.get("tool_use_id") or "")
            body = self.user_blocks(block.get("content"), record)
            msg = {"role": "toolResult", "toolCallId": call_id, "toolName": self.tool_names.get(call_id, ""),
                   "content": body, "isError": block.get("is_error") is True, "timestamp": stamp}
            parent = self.add(record, {"type": "message", "message": msg}, uuid=uuid, parent=parent, part=part)
            part += 1
        if others or not results:
            msg = {"role": "user", "content": self.user_blocks(others, record), "timestamp": stamp}
            self.add(record, {"type": "message", "message": msg}, uuid=uuid, parent=parent, part=part)

    def user_blocks(self, content: Any, record: Record) -> list[dict[str, Any]]:
        if isinstance(content, str):
            return [{"type": "text", "text": content}]
        out: list[dict[str, Any]] = []
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                out.append({"type": "text", "text": block["text"]})
            elif block.get("type") == "image" and isinstance(block.get("source"), dict) \
                    and block["source"].get("type") == "base64":
                out.append({"type": "image", "data": block["source"].get("data", ""),
                            "mimeType": block["source"].get("media_type", "")})
            else:
                assert self.result is not None
                self.result.unmapped.append((record.line, f"content block {block.get('type')!r} not mapped"))
        return out

    def assistant(self, record: Record, value: dict[str, Any], message: dict[str, Any]) -> None:
        uuid = value.get("uuid") if isinstance(value.get("uuid"), str) else None
        parent = self.parent_of(value)
        content: list[dict[str, Any]] = []
        blocks = message.get("content")
        for block in blocks if isinstance(blocks, list) else []:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text" and isinstance(block.get("text"), str):
                content.append({"type": "text", "text": block["text"]})
            elif btype == "thinking":
                content.append({"type": "thinking", "thinking": str(block.get("thinking", ""))})
            elif btype == "tool_use" and isinstance(block.get("id"), str):
                name = str(block.get("name", ""))
                self.tool_names[block["id"]] = name
                arguments = block.get("input")
                content.append({"type": "toolCall", "id": block["id"], "name": name,
                                "arguments": arguments if isinstance(arguments, dict) else {}})
            else:
                assert self.result is not None
                self.result.unmapped.append((record.line, f"content block {btype!r} not mapped"))
        reason = message.get("stop_reason")
        stop = _STOP.get(reason, "stop") if isinstance(reason, str) else (
            "toolUse" if any(b["type"] == "toolCall" for b in content) else "stop")
        msg: dict[str, Any] = {"role": "assistant", "content": content, "api": "anthropic-messages",
                               "provider": "anthropic", "model": str(message.get("model", "")),
                               "usage": _usage(message.get("usage")), "stopReason": stop,
                               "timestamp": iso_to_ms(value.get("timestamp"))}
        if isinstance(value.get("costUSD"), (int, float)) and not isinstance(value.get("costUSD"), bool):
            msg["usage"]["cost"] = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                                    "total": value["costUSD"]}
        if value.get("isApiErrorMessage") is True:
            msg["stopReason"] = "error"
            msg["errorMessage"] = " ".join(b["text"] for b in content if b["type"] == "text")
        extra: dict[str, Any] | None = None
        key = (message.get("id"), value.get("requestId"))
        if isinstance(key[0], str) and isinstance(key[1], str):
            first = self.calls.get((key[0], key[1]))
            if first is None:
                self.calls[(key[0], key[1])] = uuid or f"L{record.line}"
            else:
                # The same API call written again (one record per content block): billed once.
                extra = {"billed": False}
        self.add(record, {"type": "message", "message": msg}, uuid=uuid, parent=parent, extra=extra)


def map_claude(data: bytes, path: str | None = None) -> ForeignSession:
    """Map a Claude Code project log (complete bytes) to a format-4 session.

    Args:
        data: the file's complete records (an unfinished last line left out by the caller).
        path: the file path: its stem is the session id when no record names one.

    Returns:
        A :class:`ForeignSession`; records not understood become inert ``custom``
        entries listed in ``unmapped`` (never dropped, never raised).
    """
    mapper = _Mapper(path)
    records = list(iter_records(data))
    header = mapper.header(records)
    mapper.result = result = ForeignSession(AGENT, header, header_known=mapper.known)
    for record in records:
        mapper.map_record(record)
    return result

