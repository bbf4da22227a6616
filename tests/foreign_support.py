"""Claude Code and Codex session files built the way those agents write them, for the
foreign-agent suites; the expected trees and usage are worked out by hand in the tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

CC_SID = "7f0c1e2a-0000-4000-8000-000000000001"
CC_RESUMED = "7f0c1e2a-0000-4000-8000-000000000002"
CC_COMPACT = "7f0c1e2a-0000-4000-8000-000000000003"
CODEX_SID = "0199a0b0-0000-7000-8000-00000000c0de"
CWD = "/home/me/proj"
CC_PROJECT = "-home-me-proj"


def jl(records: list[dict[str, Any]]) -> bytes:
    """JSONL as Node writes it (compact separators, one record a line)."""
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def _cc(kind: str, uuid: str, parent: str | None, second: int, message: dict[str, Any] | None = None,
        session: str = CC_SID, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": CWD,
                              "sessionId": session, "version": "1.0.80", "gitBranch": "main", "type": kind}
    if message is not None:
        record["message"] = message
    record.update(uuid=uuid, timestamp=f"2026-03-02T09:00:{second:02d}.000Z", **extra)
    return record


def _usage(inp: int, out: int, read: int, write: int) -> dict[str, Any]:
    return {"input_tokens": inp, "cache_creation_input_tokens": write, "cache_read_input_tokens": read,
            "output_tokens": out, "service_tier": "standard"}


def _asst(msg_id: str, content: list[dict[str, Any]], usage: dict[str, Any], stop: str | None) -> dict[str, Any]:
    return {"id": msg_id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage}


def claude_records(session: str = CC_SID) -> list[dict[str, Any]]:
    """A Claude Code session: a title summary, a tool round trip split over two records
    of one API call, an answer, a follow-up, a rewind to the answer with another
    follow-up (a branch), a file-history snapshot and an unknown record type.

    Billed calls (hand count): msg_1 (10 in, 5 out, 100 read, 20 write), msg_2 (3, 7,
    200, 0), msg_3 (1, 2, 0, 0), msg_4 (4, 6, 50, 10): 4 calls, 18 in, 20 out, 350
    read, 30 write, 418 tokens."""
    u1 = _usage(10, 5, 100, 20)
    return [
        {"type": "summary", "summary": "Fix the parser", "leafUuid": "a5"},
        _cc("user", "u1", None, 1, {"role": "user", "content": "fix the parser please"}, session),
        _cc("assistant", "a1", "u1", 2, _asst("msg_1", [{"type": "thinking", "thinking": "Look first.",
                                                         "signature": "sig"}], u1, None), session,
            requestId="req_1"),
        _cc("assistant", "a2", "a1", 3, _asst("msg_1", [{"type": "tool_use", "id": "toolu_1", "name": "Bash",
                                                         "input": {"command": "ls"}}], u1, "tool_use"), session,
            requestId="req_1"),
        _cc("user", "u2", "a2", 4, {"role": "user", "content": [
            {"tool_use_id": "toolu_1", "type": "tool_result", "content": "parser.py", "is_error": False}]}, session,
            toolUseResult={"stdout": "parser.py", "stderr": "", "interrupted": False}),
        _cc("assistant", "a3", "u2", 5, _asst("msg_2", [{"type": "text", "text": "Done."}], _usage(3, 7, 200, 0),
                                              "end_turn"), session, requestId="req_2"),
        _cc("user", "u4", "a3", 6, {"role": "user", "content": "now add tests"}, session),
        _cc("assistant", "a4", "u4", 7, _asst("msg_3", [{"type": "text", "text": "Added."}], _usage(1, 2, 0, 0),
                                              "end_turn"), session, requestId="req_3"),
        _cc("user", "u5", "a3", 8, {"role": "user", "content": "now add docs instead"}, session),
        _cc("assistant", "a5", "u5", 9, _asst("msg_4", [{"type": "text", "text": "Docs added."}],
                                              _usage(4, 6, 50, 10), "end_turn"), session, requestId="req_4"),
        {"type": "file-history-snapshot", "messageId": "a5", "snapshot": {"trackedFileBackups": {}},
         "isSnapshotUpdate": False},
        {"type": "mystery-record", "uuid": "z1", "sessionId": session, "timestamp": "2026-03-02T09:00:10.000Z"},
    ]


def claude_compaction_records() -> list[dict[str, Any]]:
    """A Claude Code session compacted once: boundary (a new root, linked logically to
    ``a1``), the summary as a user record, then the conversation goes on."""
    s = CC_COMPACT
    return [
        _cc("user", "u1", None, 1, {"role": "user", "content": "start"}, s),
        _cc("assistant", "a1", "u1", 2, _asst("msg_c1", [{"type": "text", "text": "ok"}], _usage(1, 1, 0, 0),
                                              "end_turn"), s, requestId="req_c1"),
        _cc("system", "b1", None, 3, None, s, subtype="compact_boundary", content="Conversation compacted",
            isMeta=False, level="info", logicalParentUuid="a1",
            compactMetadata={"trigger": "manual", "preTokens": 1234}),
        _cc("user", "s1", "b1", 4, {"role": "user", "content": "This session is being continued. Summary: start."},
            s, isCompactSummary=True, isVisibleInTranscriptOnly=True),
        _cc("user", "u2", "s1", 5, {"role": "user", "content": "go on"}, s),
    ]


def subagent_records() -> list[dict[str, Any]]:
    """A subagent transcript (its own file), started by :data:`CC_SID`."""
    recs = [
        _cc("user", "x1", None, 20, {"role": "user", "content": "search the repo"}, CC_SID),
        _cc("assistant", "x2", "x1", 21, _asst("msg_x", [{"type": "text", "text": "found it"}], _usage(2, 3, 0, 0),
                                               "end_turn"), CC_SID, requestId="req_x"),
    ]
    for r in recs:
        r.update(isSidechain=True, agentId="abc123")
    return recs


def _cx(second: int, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": f"2026-03-03T12:00:{second:02d}.000Z", "type": kind, "payload": payload}


def _tc(total: tuple[int, int, int] | None, last: tuple[int, int, int] | None, second: int) -> dict[str, Any]:
    def obj(t: tuple[int, int, int]) -> dict[str, int]:
        return {"input_tokens": t[0], "cached_input_tokens": t[1], "output_tokens": t[2],
                "reasoning_output_tokens": 0, "total_tokens": t[0] + t[2]}
    info = None if total is None else {"total_token_usage": obj(total),
                                       **({"last_token_usage": obj(last)} if last else {}),
                                       "model_context_window": 272000}
    return _cx(second, "event_msg", {"type": "token_count", "info": info,
                                     "rate_limits": {"primary": {"used_percent": 1.0}}})


def codex_records() -> list[dict[str, Any]]:
    """A Codex rollout: meta, model, a tool round trip, two billed calls, a repeated
    token_count, a rate-limit-only token_count, a compaction and an unknown record.

    Billed (hand count): call 1 = 100 in (40 cached), 10 out -> input 60, cacheRead
    40, output 10; call 2 = 150 in (100 cached), 15 out -> input 50, cacheRead 100,
    output 15."""
    return [
        _cx(0, "session_meta", {"id": CODEX_SID, "timestamp": "2026-03-03T12:00:00.000Z", "cwd": CWD,
                                "originator": "codex_cli_rs", "cli_version": "0.46.0"}),
        _cx(1, "turn_context", {"cwd": CWD, "approval_policy": "on-request", "model": "gpt-5-codex",
                                "summary": "auto"}),
        _cx(2, "response_item", {"type": "message", "role": "user",
                                 "content": [{"type": "input_text", "text": "list files"}]}),
        _cx(3, "event_msg", {"type": "user_message", "message": "list files", "images": []}),
        _cx(4, "response_item", {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Listing."}],
                                 "encrypted_content": "gAAA"}),
        _cx(5, "response_item", {"type": "function_call", "name": "shell",
                                 "arguments": "{\"command\":[\"ls\"]}", "call_id": "call_1"}),
        _cx(6, "response_item", {"type": "function_call_output", "call_id": "call_1",
                                 "output": "{\"output\":\"a.py\\n\",\"metadata\":{\"exit_code\":0}}"}),
        _tc((100, 40, 10), (100, 40, 10), 7),
        _tc((100, 40, 10), (100, 40, 10), 8),
        _cx(9, "response_item", {"type": "message", "role": "assistant",
                                 "content": [{"type": "output_text", "text": "There is a.py."}]}),
        _tc((250, 140, 25), (150, 100, 15), 10),
        _tc(None, None, 11),
        _cx(12, "compacted", {"message": "User asked to list files; a.py exists."}),
        _cx(13, "weird_record", {"x": 1}),
    ]


def codex_resumed_records() -> list[dict[str, Any]]:
    """What a resumed session appends: a new turn on the same model and a token_count
    with only the running total (delta by hand: 400-250 in, 240-140 cached, 40-25 out
    -> input 50, cacheRead 100, output 15)."""
    return [
        _cx(30, "turn_context", {"cwd": CWD, "model": "gpt-5-codex"}),
        _cx(31, "response_item", {"type": "message", "role": "user",
                                  "content": [{"type": "input_text", "text": "and again"}]}),
        _cx(32, "response_item", {"type": "message", "role": "assistant",
                                  "content": [{"type": "output_text", "text": "Still a.py."}]}),
        _tc((400, 240, 40), None, 33),
    ]


def write_claude(home: Path, session: str = CC_SID, records: list[dict[str, Any]] | None = None) -> Path:
    """A Claude Code project log in ``home/.claude/projects/<project>/<session>.jsonl``."""
    folder = home / ".claude" / "projects" / CC_PROJECT
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{session}.jsonl"
    path.write_bytes(jl(records if records is not None else claude_records(session)))
    return path


def write_subagent(home: Path) -> Path:
    """The subagent transcript under its session's folder."""
    folder = home / ".claude" / "projects" / CC_PROJECT / CC_SID / "subagents"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "agent-abc123.jsonl"
    path.write_bytes(jl(subagent_records()))
    return path


def write_codex(home: Path, records: list[dict[str, Any]] | None = None) -> Path:
    """A Codex rollout in ``home/.codex/sessions/2026/03/03/``."""
    folder = home / ".codex" / "sessions" / "2026" / "03" / "03"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rollout-2026-03-03T12-00-00-{CODEX_SID}.jsonl"
    path.write_bytes(jl(records if records is not None else codex_records()))
    return path
