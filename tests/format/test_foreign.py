"""Claude Code and Codex files as format-4 sessions (docs/agents/claude-code.md,
docs/agents/codex.md): the mapping, usage counted once, the byte round trip, sync
outcomes and every command on a home holding all four agents.

Expected trees and token sums are worked out by hand from the fixtures in
``foreign_support`` (their docstrings give the counts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import run_cli, run_cli_json
from foreign_support import (
    CC_COMPACT,
    CC_RESUMED,
    CC_SID,
    CODEX_SID,
    CWD,
    claude_compaction_records,
    claude_records,
    codex_records,
    codex_resumed_records,
    jl,
    write_claude,
    write_codex,
    write_subagent,
)
from sessiontree.check.checker import check_bytes
from sessiontree.core.usage import records_from_entries
from sessiontree.format.foreign import map_claude, map_codex, map_foreign, source_bytes
from sessiontree.session.manager import SessionManager
from sessiontree.stores import open_store
from sync_support import OTHER, SID, agent_file

CC_PATH = f"/h/.claude/projects/-home-me-proj/{CC_SID}.jsonl"
CODEX_PATH = f"/h/.codex/sessions/2026/03/03/rollout-2026-03-03T12-00-00-{CODEX_SID}.jsonl"


def _tree(mapped):
    return [(e["type"], e["id"], e["parentId"]) for e in mapped.entries]


def _sums(entries):
    records = list(records_from_entries(entries))
    return (len(records), sum(r.input for r in records), sum(r.output for r in records),
            sum(r.cache_read for r in records), sum(r.cache_write for r in records))


# --------------------------------------------------------------------------- Claude Code mapping


def test_claude_tree_follows_uuid_links_and_a_rewind_is_a_branch():
    mapped = map_claude(jl(claude_records()), CC_PATH)
    assert mapped.header == {"type": "session", "version": 4, "id": CC_SID, "createdAt": "2026-03-02T09:00:01.000Z",
                             "cwd": CWD, "foreign": {"agent": "claude-code"}}
    assert _tree(mapped) == [
        ("custom", "L1", None),          # the title summary: no uuid, first record
        ("message", "u1", "L1"),         # parentUuid null: hangs off the previous entry
        ("message", "a1", "u1"),
        ("message", "a2", "a1"),
        ("message", "u2", "a2"),
        ("message", "a3", "u2"),
        ("message", "u4", "a3"),
        ("message", "a4", "u4"),
        ("message", "u5", "a3"),         # the rewind: a second child of a3
        ("message", "a5", "u5"),
        ("custom", "L11", "a5"),         # file-history snapshot
        ("custom", "z1", "L11"),         # the unknown record, kept inert
    ]
    roles = [e["message"]["role"] for e in mapped.entries if e["type"] == "message"]
    assert roles == ["user", "assistant", "assistant", "toolResult", "assistant", "user", "assistant", "user",
                     "assistant"]
    result = mapped.entries[4]["message"]
    assert (result["toolCallId"], result["toolName"], result["content"], result["isError"]) == (
        "toolu_1", "Bash", [{"type": "text", "text": "parser.py"}], False)
    call = mapped.entries[3]["message"]["content"]
    assert call == [{"type": "toolCall", "id": "toolu_1", "name": "Bash", "arguments": {"command": "ls"}}]
    assert mapped.entries[3]["message"]["stopReason"] == "toolUse"
    assert mapped.unmapped == [(12, "unknown record type 'mystery-record'")]


def test_claude_usage_is_counted_once_per_message_and_request_id():
    mapped = map_claude(jl(claude_records()), CC_PATH)
    # a2 repeats a1's call (msg_1, req_1): the call is billed once, on its newest record (a2).
    assert mapped.entries[2]["foreign"]["billed"] is False
    assert "billed" not in mapped.entries[3]["foreign"]
    assert _sums(mapped.entries) == (4, 18, 20, 350, 30)


def test_claude_compaction_is_an_inert_archival_record_linked_logically():
    mapped = map_claude(jl(claude_compaction_records()), f"/p/{CC_COMPACT}.jsonl")
    assert _tree(mapped) == [("message", "u1", None), ("message", "a1", "u1"),
                             ("custom", "b1", "a1"),       # boundary: logicalParentUuid
                             ("compaction", "s1", "b1"),
                             ("message", "u2", "s1")]
    summary = mapped.entries[3]
    assert summary["summary"] == "This session is being continued. Summary: start."
    assert summary["firstKeptEntryId"] is None and "details" not in summary
    assert mapped.entries[2]["data"] == {"recordType": "system", "subtype": "compact_boundary"}


def test_a_subagent_transcript_is_an_internal_child_session():
    mapped = map_claude(jl([*__import__("foreign_support").subagent_records()]),
                        f"/p/{CC_SID}/subagents/agent-abc123.jsonl")
    header = mapped.header
    assert header["id"] == f"{CC_SID}-agent-abc123"
    assert header["parentSessionId"] == CC_SID
    assert header["internal"] is True
    assert header["workflow"] == {"runId": CC_SID, "stageId": "abc123", "stageName": "subagent"}
    assert _sums(mapped.entries) == (1, 2, 3, 0, 0)


def test_a_record_split_over_several_entries_keeps_its_bytes_once():
    rec = {"parentUuid": None, "sessionId": CC_SID, "type": "user", "uuid": "m1", "timestamp": "2026-03-02T09:00:00Z",
           "message": {"role": "user", "content": [
               {"type": "tool_result", "tool_use_id": "t1", "content": "one"},
               {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "two"}],
                "is_error": True},
               {"type": "text", "text": "and a note"}]}}
    mapped = map_claude(jl([rec]), "/p/x.jsonl")
    assert _tree(mapped) == [("message", "m1", None), ("message", "m1.2", "m1"), ("message", "m1.3", "m1.2")]
    assert [e["message"]["role"] for e in mapped.entries] == ["toolResult", "toolResult", "user"]
    assert mapped.entries[1]["message"]["isError"] is True
    assert "raw" in mapped.entries[0]["foreign"] and mapped.entries[1]["foreign"] == {
        "agent": "claude-code", "line": 1, "part": 2}
    assert source_bytes(mapped.entries) == jl([rec])


# --------------------------------------------------------------------------- Codex mapping


def test_codex_is_one_branch_with_paired_tools_and_usage_deltas():
    mapped = map_codex(jl(codex_records()), CODEX_PATH)
    assert mapped.header == {"type": "session", "version": 4, "id": CODEX_SID,
                             "createdAt": "2026-03-03T12:00:00.000Z", "cwd": CWD, "foreign": {"agent": "codex"}}
    assert [t for t, _, _ in _tree(mapped)] == [
        "custom", "model_change", "message", "custom", "message", "message", "message", "usage", "custom",
        "message", "usage", "custom", "compaction", "custom"]
    assert all(e["parentId"] == (None if i == 0 else f"L{i}") for i, e in enumerate(mapped.entries))
    call = mapped.entries[5]["message"]
    assert call["content"] == [{"type": "toolCall", "id": "call_1", "name": "shell",
                                "arguments": {"command": ["ls"]}}]
    assert mapped.entries[6]["message"]["toolName"] == "shell"
    assert mapped.entries[1] ["modelId"] == "gpt-5-codex"
    # Two calls (the repeated total and the rate-limit-only event are none):
    # 60 + 50 input, 10 + 15 output, 40 + 100 cache read.
    assert _sums(mapped.entries) == (2, 110, 25, 140, 0)
    assert mapped.unmapped == [(14, "unknown record type 'weird_record'")]


def test_codex_resumed_session_counts_the_delta_of_running_totals():
    mapped = map_codex(jl(codex_records() + codex_resumed_records()), CODEX_PATH)
    assert _sums(mapped.entries) == (3, 160, 40, 240, 0)
    # The same model again: no model change, an inert turn context.
    assert mapped.entries[14]["type"] == "custom"


def test_mappings_are_prefix_stable():
    """The entries of the first k records never depend on later ones (what ``grown`` needs)."""
    for records, mapper, path in ((claude_records(), map_claude, CC_PATH),
                                  (codex_records() + codex_resumed_records(), map_codex, CODEX_PATH)):
        whole = mapper(jl(records), path)
        for k in range(1, len(records)):
            part = mapper(jl(records[:k]), path)
            assert part.header_known == (k > 1 or mapper is map_codex)
            if part.header_known:  # before that, sync waits (the header is not known)
                assert part.header == whole.header
                settled = len(part.entries) if part.settled is None else part.settled
                assert part.entries[:settled] == whole.entries[:settled]
                # After the settled part only the billed flag of a call still being written
                # may move (to the call's newest record): docs/agents/README.md.
                def unflagged(entries):
                    return [{**e, "foreign": {k: v for k, v in e["foreign"].items() if k != "billed"}}
                            for e in entries]
                assert unflagged(part.entries) == unflagged(whole.entries[:len(part.entries)])


def test_round_trip_gives_back_the_file_byte_for_byte():
    odd = (b"\n" + jl(claude_records()[:3]) + b"\r\n\n" + b'{"type":"user","bad":"\xff\xfe"}\n'
           + jl(claude_records()[3:]))
    for data, path in ((jl(claude_records()), CC_PATH), (jl(codex_records()), CODEX_PATH), (odd, CC_PATH)):
        mapped = map_foreign(data, path)
        assert mapped is not None
        assert source_bytes(mapped.entries) == data


def test_check_reports_what_the_mapping_did_not_understand_with_lines():
    data = jl(codex_records()) + b'{"timestamp":"x","type":"event_msg","pay'
    problems = check_bytes(data, CODEX_PATH)
    assert [(p.code, p.line) for p in problems] == [("foreign-record-unmapped", 14), ("foreign-record-unmapped", 15)]
    assert check_bytes(jl(claude_records()[:-1]), CC_PATH) == []


def test_a_pi_file_is_not_taken_for_a_foreign_one():
    path = Path(__file__).parents[1] / "data" / "damaged" / "header-id-mismatch.jsonl"
    assert map_foreign(path.read_bytes(), str(path)) is None


# --------------------------------------------------------------------------- sync


@pytest.mark.usefixtures("_fake_home")
def test_copies_of_a_call_in_a_resumed_session_file_are_counted_once(tmp_path, _fake_home):
    write_claude(_fake_home)
    # The history the resumed session starts from, copied with the earlier session's id.
    copied = claude_records()[:6]
    extra = json.loads(json.dumps(claude_records(CC_RESUMED)[7]))
    extra.update(uuid="r9", parentUuid="a3", timestamp="2026-03-02T10:00:00.000Z", requestId="req_9")
    extra["message"]["id"] = "msg_9"
    write_claude(_fake_home, CC_RESUMED, [*copied, extra])
    db = f"sqlite:///{tmp_path / 'r.db'}"
    run_cli(db, "sync")
    totals = run_cli_json(db, "stats", "--by", "agent")
    cc = next(g for g in totals["groups"] if g["key"] == "claude-code")
    # The first file's 4 calls, plus the resumed file's one new call (msg_9: 1 in, 2 out);
    # its copies of msg_1 and msg_2 are the same calls.
    assert (cc["calls"], cc["inputTokens"], cc["outputTokens"]) == (5, 19, 22)
    assert {row["id"] for row in run_cli_json(db, "list")} == {CC_SID, CC_RESUMED}  # one session per file


# --------------------------------------------------------------------------- a home with all four agents


def _four_agent_home(home: Path) -> None:
    agent_file(home, "pi", SID, 3)
    agent_file(home, "atomic", OTHER, 2)
    write_claude(home)
    write_subagent(home)
    write_claude(home, CC_COMPACT, claude_compaction_records())
    write_codex(home)


@pytest.mark.usefixtures("_fake_home")
def test_every_command_works_on_all_four_agents(tmp_path, _fake_home, monkeypatch):
    _four_agent_home(_fake_home)
    db = f"sqlite:///{tmp_path / 'all.db'}"
    report = run_cli_json(db, "sync")
    assert (report["new"], report["rejected"]) == (6, 0)
    listed = run_cli_json(db, "list", "--all")
    assert sorted((row["id"], row["agent"]) for row in listed) == sorted([
        (SID, "pi"), (OTHER, "pi"), (CC_SID, "claude-code"), (f"{CC_SID}-agent-abc123", "claude-code"),
        (CC_COMPACT, "claude-code"), (CODEX_SID, "codex")])
    monkeypatch.setenv("COLUMNS", "120")  # the Claude Code ids share 35 characters: 37-cell id column
    lines = run_cli(db, "list").stdout.splitlines()
    assert lines[0].split() == ["id", "modified", "msgs", "agent", "project", "title"]
    assert all(len(line) <= 120 for line in lines)
    assert {line.split()[4] for line in lines[1:]} == {"pi", "claude-code", "codex"}
    # Search finds text of each foreign agent.
    for query, sid in (("docs instead", CC_SID), ("There is a.py", CODEX_SID)):
        hits = run_cli_json(db, "search", query)
        assert sid in json.dumps(hits), (query, hits)
    stats = {g["key"]: g for g in run_cli_json(db, "stats", "--by", "agent")["groups"]}
    # Claude Code: 4 calls (main) + 1 (compacted session: 1 in, 1 out) + 1 (subagent: 2 in, 3 out).
    cc, codex = stats["claude-code"], stats["codex"]
    assert (cc["calls"], cc["inputTokens"], cc["outputTokens"]) == (6, 21, 24)
    assert (codex["calls"], codex["inputTokens"], codex["cacheReadTokens"]) == (2, 110, 140)
    shown = run_cli(db, "show", CC_SID).stdout
    assert "fix the parser please" in shown
    context = run_cli_json(db, "context", CC_SID)
    roles = [m["role"] for m in context["messages"]]
    assert roles == ["user", "assistant", "assistant", "toolResult", "assistant", "user", "assistant"]
    codex_context = run_cli_json(db, "context", CODEX_SID)
    assert [m["role"] for m in codex_context["messages"]] == ["user", "assistant", "assistant", "toolResult",
                                                              "assistant"]
    for sid, text in ((CC_SID, "now add docs instead"), (CODEX_SID, "There is a.py.")):
        page = run_cli(db, "export", sid, "--format", "html").stdout
        assert text in page
        markdown = run_cli(db, "export", sid, "--format", "markdown").stdout
        assert text in markdown
    out = tmp_path / "back.jsonl"
    for sid, path in ((CC_SID, _fake_home / ".claude/projects/-home-me-proj" / f"{CC_SID}.jsonl"),
                      (CODEX_SID, next((_fake_home / ".codex").rglob("*.jsonl")))):
        run_cli(db, "export", sid, "--format", "source", "-o", str(out))
        assert out.read_bytes() == path.read_bytes()
    # A pi session: its file as restore rebuilds it (issue 39: before, refused).
    run_cli(db, "export", SID, "--format", "source", "-o", str(out))
    assert out.read_bytes() == next((_fake_home / ".pi").rglob(f"*{SID}.jsonl")).read_bytes()
    # check on the agent's own file: the unknown record, with its line.
    checked = run_cli(None, "check", str(_fake_home / ".claude/projects/-home-me-proj" / f"{CC_SID}.jsonl"),
                      code=0).stdout
    assert "foreign-record-unmapped" in checked and ":12" in checked
    with open_store(db) as s:
        manager = SessionManager.open(s, CC_SID)
        assert manager.get_header()["foreign"] == {"agent": "claude-code"}
    assert run_cli(db, "sync").stdout.count("unchanged") >= 1


def test_sidechain_records_inside_a_main_file_stay_out_of_its_context():
    main = claude_records()[1:3]
    side = [dict(r, isSidechain=True, uuid=f"s{i}", parentUuid=None if i == 0 else "s0")
            for i, r in enumerate(claude_records()[1:3])]
    mapped = map_claude(jl(main + side + [dict(claude_records()[6], parentUuid="a1")]), CC_PATH)
    # The sidechain records annotate the main line (no branch); the subagent's call is billed
    # on a usage entry; u4 names a1 and continues the line after them.
    assert _tree(mapped) == [("message", "u1", None), ("message", "a1", "u1"), ("custom", "s0", "a1"),
                             ("usage", "s1", "s0"), ("message", "u4", "s1")]
    assert mapped.entries[2]["data"] == {"recordType": "sidechain"}
    assert mapped.entries[3]["kind"] == "claude-code.subagent"
    # s1 copies a1's record, so it carries the same call (msg_1, req_1): billed once.
    assert _sums(mapped.entries) == (1, 10, 5, 100, 20)
    assert mapped.unmapped == []


def test_import_of_a_foreign_file_says_to_sync_it(tmp_path, _fake_home):
    path = write_codex(_fake_home)
    result = run_cli(f"sqlite:///{tmp_path / 'i.db'}", "import", str(path), code=1)
    assert "a codex session file, not pi/Atomic" in result.stdout + result.stderr
    assert "sessiontree sync PATH" in result.stdout + result.stderr


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
def test_a_call_synced_while_it_was_being_written_is_billed_once_with_its_final_figures(
        store_kind, tmp_path, _fake_home):
    """Claude Code writes one record per content block, and only the newest carries the final
    output count. A sync between two records of one call stores the first as billed; the
    next sync moves the bill to the newest record (the stored tail is replaced), so the call
    counts once with its final figures (docs/agents/README.md, "Prefix-stable")."""
    from foreign_support import _asst, _cc, _usage
    from sessiontree.core.usage import UsageQuery
    from sessiontree.sync.engine import Syncer

    first = [_cc("user", "u1", None, 1, {"role": "user", "content": "hi"}),
             _cc("assistant", "a1", "u1", 2, _asst("msg_1", [{"type": "text", "text": "Let me look."}],
                                                   _usage(3, 1, 100, 10), None), requestId="req_1")]
    later = [_cc("assistant", "a2", "a1", 3, _asst("msg_1", [{"type": "tool_use", "id": "toolu_9", "name": "Bash",
                                                            "input": {"command": "ls"}}],
                                                   _usage(3, 57, 100, 10), None), requestId="req_1")]
    path = write_claude(_fake_home, records=first)
    url = "memory:" if store_kind == "memory" else f"sqlite:///{tmp_path / 's.db'}"
    with open_store(url) as store:
        syncer = Syncer(store)
        assert syncer.sync_file(str(path)).status == "new"
        with path.open("ab") as handle:
            handle.write(jl(later))
        result = Syncer(store).sync_file(str(path))
        assert (result.status, result.added) == ("grown", 1)
        rows = store.usage(UsageQuery(session_id=CC_SID))
        assert (sum(r.calls for r in rows), sum(r.output for r in rows)) == (1, 57)
        assert [e["id"] for e in store.read(CC_SID).entries] == ["u1", "a1", "a2"]


def test_the_parts_of_one_response_are_one_tool_turn():
    """Claude Code writes each tool_use of one response as its own assistant record, then the
    results (corpus 9d440bfc lines 10-14). Synthetic case (the corpus shows it inside larger
    files): two assistant messages with the same responseId and their results after both
    pair as one turn; without a responseId the second message closes the first's window."""
    from sessiontree.core.projection import build_session_projection, repair_orphan_tool_results

    def asst(call: str, response: str | None) -> dict:
        msg = {"role": "assistant", "content": [{"type": "toolCall", "id": call, "name": "Read", "arguments": {}}],
               "stopReason": "toolUse", "timestamp": 1}
        if response is not None:
            msg["responseId"] = response
        return msg

    def result(call: str) -> dict:
        return {"role": "toolResult", "toolCallId": call, "toolName": "Read",
                "content": [{"type": "text", "text": "ok"}], "isError": False, "timestamp": 2}

    one_turn = [asst("c1", "msg_1"), asst("c2", "msg_1"), result("c1"), result("c2")]
    assert repair_orphan_tool_results(one_turn, True) == one_turn
    two_turns = [asst("c1", None), asst("c2", None), result("c1"), result("c2")]
    repaired = repair_orphan_tool_results(two_turns, True)
    assert [m.get("toolCallId") for m in repaired] == [None, "c1", None, "c2"]  # c1 synthetic, real c1 dropped
    entries = [{"type": "message", "id": f"e{i}", "parentId": f"e{i - 1}" if i else None,
                "timestamp": "2026-03-02T09:00:00.000Z", "message": m} for i, m in enumerate(one_turn)]
    assert build_session_projection(entries).messages == one_turn


def test_context_of_a_claude_session_continues_after_its_compaction_as_claude_code_does(tmp_path, _fake_home):
    """``context`` shows a Claude Code session as Claude Code continued after /compact: its
    summary message as it sent it, then what follows, labelled; --current the format-4 rule."""
    from foreign_support import CC_COMPACT

    write_claude(_fake_home, CC_COMPACT, claude_compaction_records())
    db = f"sqlite:///{tmp_path / 'c.db'}"
    run_cli(db, "sync")
    shown = run_cli_json(db, "context", CC_COMPACT, "--json")
    texts = [m["content"] if isinstance(m["content"], str) else m["content"][0]["text"] for m in shown["messages"]]
    assert texts == ["This session is being continued. Summary: start.", "go on"]
    assert shown["historical"]["agent"] == "claude-code"
    assert "WHAT THE AGENT SENT: claude-code" in run_cli(db, "context", CC_COMPACT).stdout
    current = run_cli_json(db, "context", CC_COMPACT, "--current", "--json")
    assert [m["role"] for m in current["messages"]] == ["user", "assistant", "user"]  # start, ok, go on
