"""Every MCP tool within ``max_chars`` (issue 41 item 6; docs/mcp.md, "Paging and budgets").

The store holds the real sessions of ``../shared/corpus`` (pi, Codex and Claude Code files,
synced as a user's home would be): long Codex rollouts, pi sessions with large tool results.
An answer, the text block a client reads (summary line, note, JSON) and the structured JSON
alike, is never over ``max_chars``, for every tool, at the smallest budget and two more.
"""

from __future__ import annotations

import json
import shutil
from typing import Any

import anyio
import pytest

import corpus
from cli_support import cli_runner
from mcp_support import call_tools
from sessiontree.cli import cli
from sessiontree.mcpserver.paging import json_size
from sessiontree.mcpserver.tools import SessionReader
from sessiontree.stores import open_store

SHARED = corpus.shared()
BUDGETS = (1000, 3000, 8000)


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    if not (SHARED / "codex").is_dir():
        pytest.skip("the shared corpus is not beside the checkout")
    folder = tmp_path_factory.mktemp("corpus")
    for name in ("codex", "claude-code", "pi-v1"):
        shutil.copytree(SHARED / name, folder / name)
    path = str(tmp_path_factory.mktemp("store") / "s.db")
    # Some files may be rejected (a mapping refusing a file is not what this suite tests).
    result = cli_runner().invoke(cli, ["--store", path, "sync", "--json", str(folder)], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.stderr
    data = json.loads(result.stdout)
    assert data["new"] >= 8, data  # the 7 Codex rollouts and the 2 pi files at least
    return path


_calls = call_tools


def _biggest(store_path: str, n: int = 3) -> list[str]:
    store = open_store(store_path, create=False, readonly=True)
    try:
        ids = store.session_ids()
        return sorted(ids, key=lambda i: -len(store.read(i).entries))[:n]
    finally:
        store.close()


def test_every_tool_stays_within_max_chars(db):
    sessions = _biggest(db)
    calls: list[tuple[str, dict[str, Any]]] = []
    for budget in BUDGETS:
        calls += [("search_sessions", {"query": "the", "limit": 500, "max_chars": budget}),
                  ("list_sessions", {"limit": 500, "include_internal": True, "max_chars": budget})]
        for by in ("day", "session", "model", "agent"):
            calls.append(("usage_stats", {"by": by, "max_chars": budget}))
        for sid in sessions:
            calls += [("get_session", {"session_id": sid, "max_chars": budget}),
                      ("get_context", {"session_id": sid, "max_chars": budget}),
                      ("get_entries", {"session_id": sid, "max_chars": budget}),
                      ("get_entries", {"session_id": sid, "max_chars": budget, "raw": True, "fold": False}),
                      ("diff_branches", {"session_id": sid, "max_chars": budget})]
    results = _calls(db, calls)
    tools_answered = set()
    for (name, args), result in zip(calls, results, strict=True):
        text = result.content[0].text
        if result.is_error:
            # Only "nothing to compare" is expected (a session with one branch).
            assert name == "diff_branches", (name, args, text)
            continue
        tools_answered.add(name)
        budget = args["max_chars"]
        assert len(text) <= budget, (name, args, len(text))
        assert json_size(result.structured_content) <= budget, (name, args)
    assert tools_answered >= {"search_sessions", "list_sessions", "usage_stats", "get_session", "get_context",
                              "get_entries"}


def test_a_page_cut_by_the_budget_continues(db):
    sid = _biggest(db, 1)[0]
    (first,) = _calls(db, [("get_entries", {"session_id": sid, "max_chars": 1000})])
    data = first.structured_content
    assert data["truncated"] and data["returned"] >= 1
    (second,) = _calls(db, [("get_entries", {"session_id": sid, "max_chars": 1000,
                                             "cursor": data["nextCursor"]})])
    assert not second.is_error and len(second.content[0].text) <= 1000


def test_entries_come_without_the_source_record_unless_asked(db):
    codex = next(i for i in _biggest(db, 20) if i.startswith("019985ca"))
    store = open_store(db, create=False, readonly=True)
    try:
        reader = SessionReader(store)
        plain = reader.get_entries(codex, max_chars=20_000)
        asked = reader.get_entries(codex, max_chars=20_000, raw=True)
    finally:
        store.close()
    foreign = [row["entry"]["foreign"] for row in plain["entries"] if "foreign" in row["entry"]]
    assert foreign and all("raw" not in f and "rawBase64" not in f for f in foreign)
    assert any(f.get("rawChars", 0) > 0 for f in foreign)
    assert any("raw" in row["entry"].get("foreign", {}) for row in asked["entries"])
    # Without the records, more entries fit the same budget.
    assert plain["returned"] > asked["returned"]


def test_other_agents_inert_records_are_folded_into_the_row_before():
    """Synthetic entries shaped as the Claude Code mapping keeps hook and progress records
    (``custom`` entries with ``foreign``: docs/agents/claude-code.md): folding is a rule of
    the answer, not of any one file."""
    from sessiontree.mcpserver.tools import _fold_rows, folded_kind, without_source_record

    def msg(i: str) -> dict[str, Any]:
        return {"type": "message", "id": i, "foreign": {"agent": "claude-code", "line": 1, "raw": "{}\n"}}

    def inert(i: str, kind: str, subtype: str | None = None) -> dict[str, Any]:
        data = {"recordType": kind, **({"subtype": subtype} if subtype else {})}
        return {"type": "custom", "id": i, "customType": "claude-code", "data": data,
                "foreign": {"agent": "claude-code", "line": 2, "raw": "{}\n"}}

    pi_custom = {"type": "custom", "id": "p1", "customType": "my-extension", "data": {}}
    entries = [inert("h0", "progress"), msg("m1"), inert("h1", "progress"), inert("h2", "system", "stop_hook_summary"),
               inert("h3", "progress"), msg("m2"), pi_custom]
    rows = _fold_rows(entries)
    assert [(e["id"], folded) for e, folded in rows] == [
        ("m1", {"progress": ["h0", "h1", "h3"], "system:stop_hook_summary": ["h2"]}),
        ("m2", {}), ("p1", {})]
    assert folded_kind(pi_custom) is None and folded_kind(msg("m")) is None
    assert without_source_record(msg("m1"))["foreign"] == {"agent": "claude-code", "line": 1, "rawChars": 3}
    assert without_source_record(pi_custom) is pi_custom
    # The entry asked about (get_entries around=ID) is never folded away.
    assert [e["id"] for e, _ in _fold_rows(entries, frozenset({"h1"}))] == ["m1", "h1", "m2", "p1"]
    only_inert = [inert("a", "progress"), inert("b", "progress")]
    assert [e["id"] for e, _ in _fold_rows(only_inert)] == ["a", "b"]


def test_every_description_lists_what_its_schema_accepts(db):
    from mcp import Client

    from sessiontree.mcpserver.server import build_server

    store = open_store(db, create=False, readonly=True)

    async def main() -> Any:
        async with Client(build_server(store)) as client:
            return await client.list_tools()

    try:
        listed = anyio.run(main)
    finally:
        store.close()
    for tool in listed.tools:
        for name, spec in tool.input_schema["properties"].items():
            assert name in tool.description, (tool.name, name)
            options = spec.get("enum") or next((s.get("enum") for s in spec.get("anyOf", []) if s.get("enum")), None)
            for value in options or ():
                assert value in tool.description, (tool.name, name, value)
    usage = next(t for t in listed.tools if t.name == "usage_stats")
    assert all(word in usage.description for word in ("agent", "host", "user"))


def test_the_summary_line_is_cut_to_its_reserve(db):
    (result,) = _calls(db, [("search_sessions", {"query": "zq" * 400, "max_chars": 1000})])
    assert not result.is_error and len(result.content[0].text) <= 1000

