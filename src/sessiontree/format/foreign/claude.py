"""Claude Code project logs as format-4 sessions (docs/agents/claude-code.md).

A pure function of the file's complete bytes and its path: :func:`map_claude`.

The tree follows what Claude Code itself rebuilds on ``--resume`` (its loader, read
from ``@anthropic-ai/claude-code`` 2.1.38 and 2.1.90): progress records are not part of
the conversation, the records of one API response (one ``message.id``, written one
record per content block, each chained to the previous) and the tool results that
hang off them are one turn, and only a record whose parent already continued with
another prompt or response is a branch (docs/agents/claude-code.md, "The tree").

The mapping is *prefix-stable* except for one flag: the entries of the first ``n``
records never depend on later records, but the ``foreign.billed`` flag of the records
of a call that may still be streaming moves to its newest record
(:attr:`~sessiontree.format.foreign.common.ForeignSession.settled` says up to where
nothing can change, :attr:`~sessiontree.format.foreign.common.ForeignSession.moves`
where a bill moved; docs/agents/README.md).
"""

from __future__ import annotations

import math
import os
from decimal import Decimal
from typing import Any

from sessiontree.format.foreign.common import (
    ForeignSession,
    Record,
    iso_to_ms,
    iter_records,
    text_blocks,
    token_count,
)
from sessiontree.format.ids import is_valid_session_id

__all__ = ["AGENT", "SUBAGENT_USAGE", "claude_usage", "map_claude"]

AGENT = "claude-code"
#: ``kind`` of the ``usage`` entries that bill a subagent's call seen in the parent's file
#: (an inline sidechain record of 1.0.x, or the ``agent_progress`` record of 2.x).
SUBAGENT_USAGE = "claude-code.subagent"
_STOP = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "toolUse", "max_tokens": "length",
         "refusal": "stop", "pause_turn": "stop"}
#: Record types kept as inert records without a report (their content is bookkeeping).
_INERT = frozenset({"summary", "file-history-snapshot", "queue-operation", "progress", "system", "attachment",
                    "tag", "agent-name", "agent-color", "agent-setting", "mode", "permission-mode", "pr-link",
                    "worktree-state", "attribution-snapshot", "content-replacement", "speculation-accept"})
#: The shape class of an entry that annotates the conversation and never decides the tree's
#: shape (progress, hooks, system records, snapshots, sidechain records, unmapped lines).
_ANNOTATION = "annotation"
#: How far back a record's parent is looked for behind the newest entry (a safety bound:
#: in real files the walk crosses the few records of one turn and its annotations).
_WALK_LIMIT = 100_000


#: The counts of Anthropic's ``usage`` that bill, and of its ``cache_creation`` split.
USAGE_COUNTS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
_SPLIT_COUNTS = ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")


def _count(usage: dict[str, Any], key: str) -> int:
    return token_count(usage.get(key))


def claude_usage(raw: Any) -> dict[str, Any]:
    """Anthropic ``usage`` as format-4 usage (docs/usage.md, "Claude Code"): ``input`` =
    ``input_tokens``, ``output`` = ``output_tokens``, ``cacheRead`` =
    ``cache_read_input_tokens``, ``cacheWrite`` = ``cache_creation_input_tokens``; when the
    record splits its cache writes by lifetime, ``cacheWrite1h`` = the 1-hour part
    (``cache_creation.ephemeral_1h_input_tokens``, priced at its own rate), the rest being
    5-minute writes. A count that is not a whole number from 0 to 2^53-1 is 0 (docs/usage.md,
    "Bad values in agent files"; :meth:`_Mapper.check_usage` reports it)."""
    usage = raw if isinstance(raw, dict) else {}
    counts = {"input": _count(usage, "input_tokens"), "output": _count(usage, "output_tokens"),
              "cacheRead": _count(usage, "cache_read_input_tokens"),
              "cacheWrite": _count(usage, "cache_creation_input_tokens")}
    result: dict[str, Any] = {**counts, "totalTokens": sum(counts.values())}
    split = usage.get("cache_creation")
    if isinstance(split, dict):
        hour = min(_count(split, "ephemeral_1h_input_tokens"), counts["cacheWrite"])
        if hour:
            result["cacheWrite1h"] = hour
    return result


def _call_key(message: dict[str, Any], request: Any) -> tuple[str, str] | None:
    mid = message.get("id")
    return (mid, request) if isinstance(mid, str) and isinstance(request, str) else None


class _Mapper:
    """State carried from record to record (all of it from earlier records only, except
    the billed flag, which moves to a call's newest record)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.result: ForeignSession | None = None
        self.by_uuid: dict[str, str] = {}  # source uuid -> the entry its children hang off (first occurrence)
        self.ids: set[str] = set()
        self.last_id: str | None = None
        self.parent: dict[str, str | None] = {}  # entry id -> parent entry id
        self.shape: dict[str, str | None] = {}  # entry id -> _ANNOTATION, a turn (message id) or None (a prompt)
        self.tool_names: dict[str, str] = {}
        self.tool_turn: dict[str, str] = {}  # tool_use id -> message id of the response that made the call
        self.billed: dict[Any, tuple[dict[str, Any], int]] = {}  # call key -> (the entry billing it, its index)
        self.open: dict[Any, tuple[Any, int]] = {}  # stream -> (call key, index of the call's first entry)
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

    # -- the tree -----------------------------------------------------------------------------

    def new_id(self, wanted: str | None, record: Record, part: int) -> str:
        candidate = wanted if wanted else f"L{record.line}"
        if part > 1:
            candidate = f"{candidate}.{part}"
        while candidate in self.ids:
            candidate = f"{candidate}~{record.line}"
        self.ids.add(candidate)
        return candidate

    def add(self, record: Record, entry: dict[str, Any], *, uuid: str | None, parent: str | None,
            shape: str | None, part: int = 1, extra: dict[str, Any] | None = None) -> str:
        assert self.result is not None
        entry_id = self.new_id(uuid, record, part)
        self.result.add_entry(record, entry, entry_id, parent, part=part, extra=extra)
        self.parent[entry_id] = parent
        self.shape[entry_id] = shape
        self.last_id = entry_id
        return entry_id

    def link(self, uuid: str | None, entry_id: str) -> None:
        """Children naming ``uuid`` hang off ``entry_id`` (the record's last entry)."""
        if uuid and uuid not in self.by_uuid:
            self.by_uuid[uuid] = entry_id

    def named_parent(self, value: dict[str, Any]) -> str | None:
        """The entry of the record's ``parentUuid`` (a compaction boundary: its
        ``logicalParentUuid``), or ``None`` when it names none that is in the file."""
        for key in ("parentUuid", "logicalParentUuid"):
            linked = value.get(key)
            if isinstance(linked, str) and linked in self.by_uuid:
                return self.by_uuid[linked]
        return None

    def place(self, value: dict[str, Any]) -> str | None:
        """The parent of a conversation record's entry (docs/agents/claude-code.md, "The tree").

        The newest entry when the record's parent is it or lies behind it across
        annotations and the records of the parent's own turn (a parallel tool call, its
        result, a progress record); the named parent itself otherwise (a branch: that
        parent already went on with another prompt or response). A record whose parent
        is not in the file continues the newest entry."""
        named = self.named_parent(value)
        tip = self.last_id
        if named is None or tip is None or named == tip:
            return tip
        turn = self.shape.get(named)
        if turn == _ANNOTATION:
            turn = None
        at: str | None = tip
        for _ in range(_WALK_LIMIT):
            if at is None or at == named:
                break
            shape = self.shape.get(at)
            if shape != _ANNOTATION and (turn is None or shape != turn):
                break
            at = self.parent.get(at)
        return tip if at == named else named

    # -- billing ------------------------------------------------------------------------------

    def bill(self, key: Any, stream: Any, entry: dict[str, Any]) -> None:
        """Bill ``key``'s call on ``entry`` (its newest record), unbilling the record that
        billed it so far; ``key`` ``None`` is a call of one record."""
        assert self.result is not None
        if key is None:
            return
        index = len(self.result.entries) - 1
        earlier = self.billed.get(key)
        if earlier is not None:
            # The same API call written again (one record per content block): billed once,
            # with the figures of its newest record (the last carries the final output count).
            earlier[0]["foreign"]["billed"] = False
            self.result.moves.append((earlier[1], index))
        self.billed[key] = (entry, index)
        current = self.open.get(stream)
        if current is None or current[0] != key:
            if stream == "main":
                # The main conversation's next API call starts only once every tool call of
                # its previous response has its result: the subagents those calls ran are done.
                self.open.clear()
            self.open[stream] = (key, index)

    # -- records ------------------------------------------------------------------------------

    def inert(self, record: Record, kind: str, reason: str | None = None) -> None:
        assert self.result is not None
        value = record.value or {}
        uuid = value.get("uuid") if isinstance(value.get("uuid"), str) else None
        data: dict[str, Any] = {"recordType": kind}
        if isinstance(value.get("subtype"), str):
            data["subtype"] = value["subtype"]
        extra = {"unmapped": reason} if reason else None
        entry_id = self.add(record, {"type": "custom", "customType": AGENT, "data": data}, uuid=uuid,
                            parent=self.last_id, shape=_ANNOTATION, extra=extra)
        self.link(uuid, entry_id)
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
            # A subagent's turn inside the main file (1.0.x): out of the main conversation,
            # as Claude Code keeps it; its API calls are billed.
            self.sidechain(record, value, kind)
        elif kind == "user" and isinstance(message, dict):
            self.user(record, value, message)
        elif kind == "assistant" and isinstance(message, dict):
            self.assistant(record, value, message)
        elif kind == "custom-title" and isinstance(value.get("customTitle"), str):
            self.add(record, {"type": "session_info", "name": value["customTitle"]}, uuid=None,
                     parent=self.last_id, shape=_ANNOTATION)
        elif kind == "progress":
            self.progress(record, value)
        elif kind == "system" and value.get("subtype") == "compact_boundary":
            self.boundary(record, value)
        elif kind in _INERT:
            self.inert(record, str(kind))
        else:
            self.inert(record, kind if kind is not None else "unknown",
                       f"unknown record type {kind!r}" if kind is not None else "record without a type")

    def boundary(self, record: Record, value: dict[str, Any]) -> None:
        """A compaction boundary: an annotation in the line of its ``logicalParentUuid``."""
        uuid = value.get("uuid") if isinstance(value.get("uuid"), str) else None
        data: dict[str, Any] = {"recordType": "system", "subtype": "compact_boundary"}
        entry_id = self.add(record, {"type": "custom", "customType": AGENT, "data": data}, uuid=uuid,
                            parent=self.place(value), shape=_ANNOTATION)
        self.link(uuid, entry_id)

    def check_usage(self, record: Record, message: dict[str, Any], place: str) -> None:
        """Report the bad counts of ``message``'s ``usage`` (``place``: the message's place in
        the record) and a bad ``costUSD`` of the record (docs/usage.md, "Bad values in agent files")."""
        assert self.result is not None
        usage = message.get("usage")
        self.result.check_counts(record.line, usage, f"{place}.usage", USAGE_COUNTS)
        if isinstance(usage, dict):
            self.result.check_counts(record.line, usage.get("cache_creation"), f"{place}.usage.cache_creation",
                                     _SPLIT_COUNTS)

    def usage_entry(self, record: Record, message: dict[str, Any], key: Any, stream: Any,
                    data: dict[str, Any], stamp: Any, place: str = "message") -> None:
        """A subagent's API call seen in this file: a billed ``usage`` entry, an annotation.
        ``stamp`` is the time of the subagent's own record of the call: as ``call`` it keys
        the call as the subagent's transcript does, so a call held by both files counts once.
        ``place``: where ``message`` is in the record, for reports of its bad values."""
        assert self.result is not None
        self.check_usage(record, message, place)
        value = record.value or {}
        uuid = value.get("uuid") if isinstance(value.get("uuid"), str) else None
        entry: dict[str, Any] = {"type": "usage", "kind": SUBAGENT_USAGE, "provider": "anthropic",
                                 "model": str(message.get("model", "")),
                                 "usage": claude_usage(message.get("usage")), "data": data}
        if isinstance(stamp, str):
            entry["call"] = {"timestamp": stamp, "messageTimestamp": iso_to_ms(stamp)}
        if place != "message":
            self.result.check_time(record.line, stamp, place.rsplit(".", 1)[0] + ".timestamp")
        entry_id = self.add(record, entry, uuid=uuid, parent=self.last_id, shape=_ANNOTATION)
        self.link(uuid, entry_id)
        self.bill(key, stream, self.result.entries[-1])

    def sidechain(self, record: Record, value: dict[str, Any], kind: str) -> None:
        message = value.get("message")
        if kind == "assistant" and isinstance(message, dict) and isinstance(message.get("usage"), dict):
            agent = value.get("agentId") if isinstance(value.get("agentId"), str) else None
            self.usage_entry(record, message, _call_key(message, value.get("requestId")), ("sidechain", agent),
                             {"recordType": "sidechain", "agentId": agent}, value.get("timestamp"))
        else:
            self.inert(record, "sidechain")

    def progress(self, record: Record, value: dict[str, Any]) -> None:
        """A progress record; one of ``agent_progress`` carrying a subagent's API call (its
        ``data.message`` an assistant record with ``usage``) bills that call."""
        data = value.get("data")
        inner = data.get("message") if isinstance(data, dict) else None
        message = inner.get("message") if isinstance(inner, dict) else None
        if (isinstance(data, dict) and data.get("type") == "agent_progress" and isinstance(inner, dict)
                and inner.get("type") == "assistant" and isinstance(message, dict)
                and isinstance(message.get("usage"), dict)):
            agent = data.get("agentId") if isinstance(data.get("agentId"), str) else None
            self.usage_entry(record, message, _call_key(message, inner.get("requestId")), ("agent", agent),
                             {"recordType": "progress", "subtype": "agent_progress", "agentId": agent},
                             inner.get("timestamp"), "data.message.message")
        else:
            self.inert(record, "progress")

    def user(self, record: Record, value: dict[str, Any], message: dict[str, Any]) -> None:
        uuid = value.get("uuid") if isinstance(value.get("uuid"), str) else None
        stamp = iso_to_ms(value.get("timestamp"))
        content = message.get("content")
        parent = self.place(value)
        if value.get("isCompactSummary") is True:
            summary = " ".join(block["text"] for block in text_blocks(content))
            self.link(uuid, self.add(record, {"type": "compaction", "summary": summary, "firstKeptEntryId": None},
                                     uuid=uuid, parent=parent, shape=None))
            return
        if value.get("isMeta") is True:
            # The entry's own timestamp is the record's (an ISO string: add_entry sets it).
            self.link(uuid, self.add(record, {"type": "custom_message", "customType": f"{AGENT}.meta",
                                              "content": content if isinstance(content, str) else
                                              text_blocks(content), "display": False},
                                     uuid=uuid, parent=parent, shape=None))
            return
        if isinstance(content, str):
            self.link(uuid, self.add(record, {"type": "message", "message": {"role": "user", "content": content,
                                                                              "timestamp": stamp}},
                                     uuid=uuid, parent=parent, shape=None))
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
            parent = self.add(record, {"type": "message", "message": msg}, uuid=uuid, parent=parent,
                              shape=self.tool_turn.get(call_id), part=part)
            part += 1
        if others or not results:
            msg = {"role": "user", "content": self.user_blocks(others, record), "timestamp": stamp}
            parent = self.add(record, {"type": "message", "message": msg}, uuid=uuid, parent=parent, shape=None,
                              part=part)
        assert parent is not None
        self.link(uuid, parent)

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
        assert self.result is not None
        uuid = value.get("uuid") if isinstance(value.get("uuid"), str) else None
        mid = message.get("id")
        turn = mid if isinstance(mid, str) else f"L{record.line}"
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
                self.tool_turn[block["id"]] = turn
                arguments = block.get("input")
                content.append({"type": "toolCall", "id": block["id"], "name": name,
                                "arguments": arguments if isinstance(arguments, dict) else {}})
            else:
                self.result.unmapped.append((record.line, f"content block {btype!r} not mapped"))
        reason = message.get("stop_reason")
        stop = _STOP.get(reason, "stop") if isinstance(reason, str) else (
            "toolUse" if any(b["type"] == "toolCall" for b in content) else "stop")
        self.check_usage(record, message, "message")
        msg: dict[str, Any] = {"role": "assistant", "content": content, "api": "anthropic-messages",
                               "provider": "anthropic", "model": str(message.get("model", "")),
                               "usage": claude_usage(message.get("usage")), "stopReason": stop,
                               "timestamp": iso_to_ms(value.get("timestamp"))}
        if isinstance(message.get("id"), str) and message["id"]:
            # One API response written as several records: the projection pairs its tool
            # calls as one turn (core/projection/pairing.py ToolWindow).
            msg["responseId"] = message["id"]
        cost = value.get("costUSD")
        if isinstance(cost, (int, float)) and not isinstance(cost, bool) and cost >= 0:
            if _cost_held(cost):
                msg["usage"]["cost"] = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": cost}
            else:
                self.result.bad_value(record.line, "costUSD", cost, "above $4,611,686,018",
                                      "absent: priced from its tokens")
        elif cost is not None:
            # A cost that is no amount is not taken: the call is priced from its tokens,
            # as a record without costUSD is (docs/usage.md, "Bad values in agent files").
            self.result.bad_value(record.line, "costUSD", cost, "negative" if isinstance(cost, (int, float))
                                  and not isinstance(cost, bool) else "not a number", "absent: priced from its tokens")
        if value.get("isApiErrorMessage") is True:
            msg["stopReason"] = "error"
            msg["errorMessage"] = " ".join(b["text"] for b in content if b["type"] == "text")
        entry_id = self.add(record, {"type": "message", "message": msg}, uuid=uuid, parent=self.place(value),
                            shape=turn)
        self.link(uuid, entry_id)
        self.bill(_call_key(message, value.get("requestId")), "main", self.result.entries[-1])


def _cost_held(cost: int | float) -> bool:
    """Whether a cost of 0 or more in USD is one the usage ledger can hold: at most 2^62
    nano-dollars, rounded as ``core.usage.cost_to_nanos`` rounds (a larger one would be
    dropped there without a word, so the mapping notes it instead)."""
    if isinstance(cost, float) and not math.isfinite(cost):
        return False
    return int((Decimal(repr(cost)) * 1_000_000_000).to_integral_value()) <= 2**62


def map_claude(data: bytes, path: str | None = None) -> ForeignSession:
    """Map a Claude Code project log (complete bytes) to a format-4 session.

    Args:
        data: the file's complete records (an unfinished last line left out by the caller).
        path: the file path: its stem is the session id when no record names one.

    Returns:
        A :class:`ForeignSession`; records not understood become inert ``custom``
        entries listed in ``unmapped`` (never dropped, never raised). Its ``settled``
        is the number of leading entries no later record can change: those before the
        first record of a call that may still be streaming (the newest call of each
        stream: the main conversation, and each subagent seen since the main
        conversation's newest call began).
    """
    mapper = _Mapper(path)
    records = list(iter_records(data))
    header = mapper.header(records)
    mapper.result = result = ForeignSession(AGENT, header, header_known=mapper.known)
    for record in records:
        mapper.map_record(record)
    firsts = [first for _, first in mapper.open.values()]
    result.settled = min(firsts) if firsts else len(result.entries)
    return result
