"""Every real Codex rollout of ``../shared/corpus/codex`` synced into every store kind, checked
per file against the figures of ``../shared/corpus/FOREIGN.md`` (counted by hand and
cross-checked with ccusage there, never taken from our output): calls, input including the
cached part, cached, output including reasoning, reasoning, messages by role, function calls
and their outputs, one branch (docs/agents/codex.md, docs/usage.md "Codex").

The developer-message case is a synthetic record (no corpus rollout has one: FOREIGN.md,
"Looked for and not found"), built the way Codex 0.66 writes a ``response_item`` message.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from corpus import foreign_files, needs_shared, shared
from sessiontree.check.checker import check_bytes
from sessiontree.core.projection import INTERRUPTED_TEXT, build_session_context
from sessiontree.core.usage import records_from_entries
from sessiontree.format.codec import validate_entry
from sessiontree.format.foreign import map_codex, map_foreign, source_bytes
from sessiontree.stores import open_store
from sessiontree.sync.engine import Syncer

KINDS = ["memory", "sqlite", "jsonl", pytest.param("postgres", marks=pytest.mark.postgres)]


def _foreign_md_codex() -> dict[str, dict[str, Any]]:
    """The per-file rows of FOREIGN.md's Codex table, keyed by file name."""
    text = shared("FOREIGN.md").read_text(encoding="utf-8")
    section = text[text.index("### Codex"):text.index("### Gemini CLI")]
    rows: dict[str, dict[str, Any]] = {}
    for line in section.splitlines():
        match = re.match(r"\| `(rollout-[^`]+)` \|(.*)\|$", line)
        if not match:
            continue
        cells = [c.strip() for c in match.group(2).split("|")]

        def n(cell: str) -> int:
            return int(cell.replace(",", ""))

        user, assistant = (n(x) for x in cells[7].split("/"))
        calls, outputs = (n(x) for x in cells[8].split("/"))
        rows[match.group(1)] = {"calls": n(cells[0]), "input": n(cells[1]), "cached": n(cells[2]),
                                "output": n(cells[4]), "reasoning": n(cells[5]), "user": user,
                                "assistant": assistant, "function_calls": calls, "outputs": outputs}
    return rows


def _url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "postgres":
        return request.getfixturevalue("pg_url")
    return {"memory": "memory:", "sqlite": f"sqlite:///{tmp_path / 's.db'}", "jsonl": f"jsonl:///{tmp_path / 's'}"}[kind]


def _raw_value(entry: dict[str, Any]) -> dict[str, Any] | None:
    raw = entry.get("foreign", {}).get("raw")
    return orjson.loads(raw) if isinstance(raw, str) and raw.strip() else None


def _figures(entries: list[dict[str, Any]]) -> dict[str, int]:
    """The figures FOREIGN.md counts, read from stored entries: usage from the billed usage
    records (the stores' own rule), messages and function calls from the mapped entries."""
    records = list(records_from_entries(entries))
    roles = {"user": 0, "assistant": 0}
    calls = outputs = 0
    for entry in entries:
        message = entry.get("message") if entry["type"] == "message" else None
        if entry["type"] == "custom_message" and entry.get("customType") == "codex.developer":
            continue
        if isinstance(message, dict):
            content = message.get("content") if isinstance(message.get("content"), list) else []
            if message["role"] == "toolResult":
                outputs += 1
            elif message["role"] == "assistant" and any(b.get("type") == "toolCall" for b in content):
                calls += 1
            elif message["role"] == "assistant" and any(b.get("type") == "text" for b in content):
                roles["assistant"] += 1
            elif message["role"] == "user":
                roles["user"] += 1
    return {"calls": len(records), "input": sum(r.input + r.cache_read for r in records),
            "cached": sum(r.cache_read for r in records), "output": sum(r.output for r in records),
            "reasoning": sum(e.get("reasoningTokens", 0) for e in entries if e["type"] == "usage"),
            "user": roles["user"], "assistant": roles["assistant"], "function_calls": calls, "outputs": outputs}


@needs_shared
@pytest.mark.parametrize("kind", KINDS)
def test_every_codex_rollout_syncs_with_foreign_md_figures(kind, tmp_path, request):
    expected = _foreign_md_codex()
    files = foreign_files("codex")
    assert sorted(p.name for p in files) == sorted(expected)  # the table covers every file
    store = open_store(_url(kind, tmp_path, request))
    try:
        report = Syncer(store).sync_files([str(p) for p in files])
        assert [(Path(f.path).name, f.status, f.reason) for f in report.files] == \
            [(p.name, "new", None) for p in files]
        for path in files:
            session_id = next(f.session_id for f in report.files if f.path == str(path))
            parsed = store.read(session_id)
            entries = parsed.entries
            assert _figures(entries) == expected[path.name], path.name
            # One branch: Codex records carry no links.
            parents = {e["parentId"] for e in entries}
            assert [e["id"] for e in entries if e["id"] not in parents] == [entries[-1]["id"]], path.name
            # The stored records give the file back byte for byte.
            assert source_bytes(entries) == path.read_bytes(), path.name
    finally:
        store.close()


@needs_shared
@pytest.mark.parametrize("path", foreign_files("codex"), ids=lambda p: p.name[-20:])
def test_codex_context_pairs_every_call_with_its_real_result(path):
    """``context`` shows the result the file holds for each call (paired by ``call_id``),
    never the synthetic interrupted one: every function call of the corpus has its output."""
    mapped = map_foreign(path.read_bytes(), str(path))
    assert mapped is not None
    context = build_session_context(mapped.parsed(str(path)).entries)
    results = {m["toolCallId"]: m for m in context.messages if m.get("role") == "toolResult"}
    outputs = {}
    for line in path.read_bytes().splitlines():
        value = orjson.loads(line)
        payload = value.get("payload") or {}
        if payload.get("type") in ("function_call_output", "custom_tool_call_output"):
            outputs[payload["call_id"]] = payload
    assert set(results) == set(outputs)
    for call_id, message in results.items():
        text = "".join(b.get("text", "") for b in message["content"])
        assert INTERRUPTED_TEXT not in text, call_id
        out = outputs[call_id]["output"]
        assert text == (out if isinstance(out, str) else out.get("content", "")), call_id


@needs_shared
@pytest.mark.parametrize("path", foreign_files("codex"), ids=lambda p: p.name[-20:])
def test_ghost_snapshots_are_bookkeeping_not_unmapped(path):
    """``ghost_snapshot`` (the undo snapshot of Codex 0.63+, three corpus files) is inert and
    not reported: it is never sent to the model."""
    mapped = map_foreign(path.read_bytes(), str(path))
    assert mapped is not None
    assert mapped.unmapped == []
    assert check_bytes(path.read_bytes(), str(path)) == []


# ------------------------------------------------------------------ developer messages (synthetic)

def _developer_rollout() -> bytes:
    """A synthetic rollout (no corpus file has a developer message): meta, the developer
    instructions message newer Codex writes first, a user message, an answer."""
    sid = "019b04ae-b1c6-7c72-a134-a4c2de66058d"
    records = [
        {"timestamp": "2026-01-05T10:00:00.000Z", "type": "session_meta",
         "payload": {"id": sid, "timestamp": "2026-01-05T10:00:00.000Z", "cwd": "/w", "originator": "codex_cli_rs",
                     "cli_version": "0.77.0"}},
        {"timestamp": "2026-01-05T10:00:00.100Z", "type": "response_item",
         "payload": {"type": "message", "role": "developer",
                     "content": [{"type": "input_text", "text": "<permissions instructions>sandbox</permissions>"}]}},
        {"timestamp": "2026-01-05T10:00:01.000Z", "type": "response_item",
         "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}},
        {"timestamp": "2026-01-05T10:00:02.000Z", "type": "response_item",
         "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]}},
    ]
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def test_a_developer_message_syncs_and_check_agrees(tmp_path):
    """Regression: the developer message's custom_message carried epoch ms where the entry
    timestamp goes, so the store refused the whole rollout while ``check`` said ok."""
    data = _developer_rollout()
    folder = tmp_path / "sessions" / "2026" / "01" / "05"
    folder.mkdir(parents=True)
    path = folder / "rollout-2026-01-05T10-00-00-019b04ae-b1c6-7c72-a134-a4c2de66058d.jsonl"
    path.write_bytes(data)
    mapped = map_codex(data, str(path))
    developer = mapped.entries[1]
    assert developer["type"] == "custom_message" and developer["customType"] == "codex.developer"
    assert developer["timestamp"] == "2026-01-05T10:00:00.100Z"
    validate_entry(developer)
    store = open_store("memory:")
    result = Syncer(store).sync_file(str(path))
    assert (result.status, result.reason) == ("new", None)
    assert check_bytes(data, str(path)) == []
    # The instructions are what the model saw: in the context, before the user's message.
    texts = [m for m in build_session_context(store.read(result.session_id).entries).messages]
    assert [m["role"] for m in texts] == ["custom", "user", "assistant"]


def _parallel_rollout() -> bytes:
    """A synthetic rollout (the corpus rollouts call one function per response): one
    response (reasoning, two function calls, its token count), then both outputs, the
    way Codex writes parallel calls."""
    sid = "019b04ae-b1c6-7c72-a134-a4c2de66058e"
    items = [("session_meta", {"id": sid, "timestamp": "2026-01-05T10:00:00.000Z", "cwd": "/w"}),
             ("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}),
             ("response_item", {"type": "reasoning", "summary": []}),
             ("response_item", {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}),
             ("response_item", {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c2"}),
             ("event_msg", {"type": "token_count", "info": {"total_token_usage": {"input_tokens": 10, "output_tokens": 2},
                                                            "last_token_usage": {"input_tokens": 10, "output_tokens": 2}}}),
             ("response_item", {"type": "function_call_output", "call_id": "c1", "output": "one"}),
             ("response_item", {"type": "function_call_output", "call_id": "c2", "output": "two"}),
             ("response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]})]
    return b"".join(orjson.dumps({"timestamp": f"2026-01-05T10:00:0{i}.000Z", "type": kind, "payload": payload}) + b"\n"
                    for i, (kind, payload) in enumerate(items))


def test_the_items_of_one_response_share_a_response_id():
    """Prefix-stable: an assistant item opens a response unless one is open; an output, a
    user message or a token count closes it (docs/agents/codex.md)."""
    mapped = map_codex(_parallel_rollout(), "/x/rollout-2026-01-05T10-00-00-019b04ae-b1c6-7c72-a134-a4c2de66058e.jsonl")
    ids = [(e["message"]["role"], e["message"].get("responseId")) for e in mapped.entries if e["type"] == "message"]
    assert ids == [("user", None), ("assistant", "r1"), ("assistant", "r1"), ("assistant", "r1"),
                   ("toolResult", None), ("toolResult", None), ("assistant", "r2")]


def test_parallel_calls_of_one_response_get_their_real_results():
    """Before: the second call's message closed the first call's window, so ``context``
    showed a synthetic "interrupted" result for ``c1`` and dropped its real one."""
    from sessiontree.core.projection.pairing import ToolWindow

    if not hasattr(ToolWindow, "continues"):
        pytest.skip("needs the projection's responseId pairing (branch h39-claude, issue 39 item 3)")
    mapped = map_codex(_parallel_rollout(), "/x/rollout-2026-01-05T10-00-00-019b04ae-b1c6-7c72-a134-a4c2de66058e.jsonl")
    messages = build_session_context(mapped.parsed().entries).messages
    results = [(m["toolCallId"], m["content"][0]["text"]) for m in messages if m["role"] == "toolResult"]
    assert results == [("c1", "one"), ("c2", "two")]


@needs_shared
def test_a_session_stored_by_an_older_mapping_is_mapped_again(tmp_path, monkeypatch):
    """A rollout synced by a version whose mapping made other entries (here: usage entries
    without ``reasoningTokens``, and one more entry for the last record), read whole again
    (its inode changed: an editor or a copy wrote it anew, same bytes): the file's records
    are the stored ones, so the session is mapped again (``replaced``), a name set with
    sessiontree kept. Before, it was reported diverged and sync exited 1."""
    import sessiontree.sync.syncer as engine

    path = foreign_files("codex")[-1]  # 019b04ae: its calls have reasoning tokens
    real = engine.map_records

    def older(agent, data, name=None):
        mapped = real(agent, data, name)
        for entry in mapped.entries:
            entry.pop("reasoningTokens", None)
        last = mapped.entries[-1]
        mapped.entries.append({"type": "custom", "customType": "codex", "data": {}, "id": last["id"] + ".2",
                               "parentId": last["id"], "timestamp": last["timestamp"],
                               "foreign": {"agent": "codex", "line": last["foreign"]["line"], "part": 2}})
        mapped.lines.append(mapped.lines[-1])
        return mapped

    copy = tmp_path / path.name
    copy_bytes = path.read_bytes()
    copy.write_bytes(copy_bytes)
    path = copy
    store = open_store("memory:")
    monkeypatch.setattr(engine, "map_records", older)
    first = Syncer(store).sync_file(str(path))
    assert first.status == "new"
    monkeypatch.setattr(engine, "map_records", real)
    from sessiontree.session.manager import SessionManager

    manager = SessionManager.open(store, first.session_id)
    manager.append_session_info("named here")
    path.unlink()
    path.write_bytes(copy_bytes)
    again = Syncer(store).sync_file(str(path))
    assert again.status == "replaced" and "mapped again" in (again.reason or ""), (again.status, again.reason)
    entries = store.read(first.session_id).entries
    assert sum(e.get("reasoningTokens", 0) for e in entries if e["type"] == "usage") == \
        _foreign_md_codex()[path.name]["reasoning"]
    assert entries[-1]["type"] == "session_info" and entries[-1]["name"] == "named here"
    assert Syncer(store).sync_file(str(path)).status == "unchanged"
