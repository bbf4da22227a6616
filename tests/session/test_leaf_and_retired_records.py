"""Upstream ``leaf`` records, retired records in audit views, and the historical
context of retired summary compactions (``spec:data-model``, ``spec:projection``,
``seed:compaction-entry``, ``seed:context-compaction``; docs/rules/tree.md F;
docs/rules/projection.md Q; docs/format-rules.md).

Every expected value below was worked out by hand from the records written
in the test (or, for the corpus, from the raw JSON lines of the file, without
this library).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

import corpus
from builders import assistant_at as assistant
from builders import at_second as ts
from builders import tool_result_at as tool_result
from builders import user_at as user
from sessiontree.cli import cli
from sessiontree.core import render, styled
from sessiontree.core.projection import (
    HISTORICAL_SUMMARY_PREFIX,
    HISTORICAL_SUMMARY_SUFFIX,
    LAST_ENTRY,
    build_historical_projection,
    build_session_context,
    build_session_projection,
    is_retired_record,
)
from sessiontree.core.tree import SessionTree, loaded_leaf_id
from sessiontree.format.codec import read_session_file
from sessiontree.session.manager import SessionManager

BEFORE = corpus.shared(corpus.BEFORE_COMPACTION)
LARGE = corpus.vendored(corpus.LARGE_SESSION)


def leaf(entry_id: str, parent: str | None, target: Any, second: int, *, with_target: bool = True) -> dict[str, Any]:
    entry = {"type": "leaf", "id": entry_id, "parentId": parent, "timestamp": ts(second)}
    if with_target:
        entry["targetId"] = target
    return entry


def retired_compaction(entry_id: str, parent: str, summary: str, first_kept: str | None, second: int,
                       **extra: Any) -> dict[str, Any]:
    return {"type": "compaction", "id": entry_id, "parentId": parent, "timestamp": ts(second),
            "summary": summary, "firstKeptEntryId": first_kept, "tokensBefore": 100, **extra}


VERBATIM = {"strategy": "verbatim-lines", "promptVersion": 3, "rung": "planned"}

HEADER = {"type": "session", "version": 4, "id": "rules-1", "createdAt": ts(0), "cwd": "/tmp/rules"}


def write(path: Path, entries: list[dict[str, Any]], header: dict[str, Any] = HEADER) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in [header, *entries]), encoding="utf-8")
    return path


def texts(messages: list[dict[str, Any]]) -> list[str]:
    out = []
    for message in messages:
        content = message.get("content")
        out.append(content if isinstance(content, str) else "".join(
            b.get("text", "") for b in content or [] if isinstance(b, dict)))
    return out


def run(*args: str) -> Any:
    try:
        runner = CliRunner(mix_stderr=False)  # click 8.1
    except TypeError:
        runner = CliRunner()
    result = runner.invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, (args, result.stdout, result.stderr)
    return result


# The chain u1 <- a1 <- u2 <- a2 used by the leaf tests.
CHAIN = [user("u1", None, "first", 1), assistant("a1", "u1", "one", 2),
         user("u2", "a1", "second", 3), assistant("a2", "u2", "two", 4)]


# --------------------------------------------------------------------------- 1. leaf records


def test_leaf_record_as_the_last_record_moves_the_leaf_to_its_target():
    entries = [*CHAIN, leaf("l1", "a2", "a1", 5)]
    assert loaded_leaf_id(entries) == "a1"
    tree = SessionTree(entries)
    assert tree.leaf_id == "a1"
    assert [e["id"] for e in tree.get_branch()] == ["u1", "a1"]


def test_entries_after_a_leaf_record_append_from_its_target_and_the_last_one_is_the_leaf():
    # The upstream agent moved from a2 back to u1, then answered again there.
    entries = [*CHAIN, leaf("l1", "a2", "u1", 5), assistant("a3", "u1", "three", 6)]
    assert loaded_leaf_id(entries) == "a3"
    assert [e["id"] for e in SessionTree(entries).get_branch()] == ["u1", "a3"]


def test_unknown_or_malformed_leaf_target_is_ignored():
    # The leaf stays where the records before the bad one put it.
    assert loaded_leaf_id([*CHAIN, leaf("l1", "a2", "zzzzzzzz", 5)]) == "a2"
    assert loaded_leaf_id([*CHAIN, leaf("l1", "a2", "u1", 5), leaf("l2", "a2", "nope", 6)]) == "u1"
    assert loaded_leaf_id([*CHAIN, leaf("l1", "a2", None, 5, with_target=False)]) == "a2"
    assert loaded_leaf_id([*CHAIN, leaf("l1", "a2", 7, 5)]) == "a2"
    # Nothing but unusable leaf records: no leaf at all.
    assert loaded_leaf_id([leaf("l1", None, "x", 1)]) is None
    assert loaded_leaf_id([]) is None


def test_null_leaf_target_resets_the_leaf():
    entries = [*CHAIN, leaf("l1", "a2", None, 5)]
    assert loaded_leaf_id(entries) is None
    manager = SessionManager.in_memory("/tmp/rules", entries=[HEADER, *entries])
    assert manager.get_leaf_id() is None
    assert manager.build_session_projection().messages == []
    new_id = manager.append_message({"role": "user", "content": "fresh start", "timestamp": 9})
    assert manager.get_entry(new_id)["parentId"] is None


def test_manager_projection_and_append_follow_the_leaf_record(tmp_path):
    path = write(tmp_path / "s.jsonl", [*CHAIN, leaf("l1", "a2", "a1", 5)])
    manager = SessionManager.open_file(str(path))
    assert manager.get_leaf_id() == "a1"
    assert manager.get_leaf_entry()["id"] == "a1"
    assert texts(manager.build_session_projection().messages) == ["first", "one"]
    assert [e["id"] for e in manager.build_context_entries()] == ["u1", "a1"]
    # The library functions over the stored entries agree with the manager.
    stored = read_session_file(path).entries
    assert texts(build_session_projection(stored).messages) == ["first", "one"]
    assert texts(build_session_projection(stored, LAST_ENTRY).messages) == ["first", "one"]
    assert texts(build_session_context(stored, "unknown").messages) == ["first", "one"]
    # Appending after loading continues from the target.
    new_id = manager.append_message({"role": "user", "content": "again", "timestamp": 10})
    assert manager.get_entry(new_id)["parentId"] == "a1"
    assert manager.get_leaf_id() == new_id
    reopened = SessionManager.open_file(str(path))
    assert reopened.get_leaf_id() == new_id
    assert texts(reopened.build_session_projection().messages) == ["first", "one", "again"]


def test_cli_show_and_context_agree_on_the_leaf(tmp_path):
    store = f"sqlite:///{tmp_path / 's.db'}"
    run("--store", store, "import", str(write(tmp_path / "s.jsonl", [*CHAIN, leaf("l1", "a2", "a1", 5)])))
    shown = json.loads(run("--store", store, "show", "rules-1", "--tree", "--json").stdout)
    assert shown["leafId"] == "a1" and shown["activeBranchLength"] == 2
    rows = {row["id"]: row for row in shown["tree"]}
    assert [r for r, row in rows.items() if row["leaf"]] == ["a1"]
    assert rows["l1"]["active"] is False and rows["a2"]["active"] is False
    context = json.loads(run("--store", store, "context", "rules-1", "--json").stdout)
    assert context["leafId"] == "a1"
    assert texts(context["messages"]) == ["first", "one"]
    assert "a1 assistant: one  ← active leaf" in run("--store", store, "show", "rules-1", "--tree").stdout


def test_a_leaf_record_is_not_a_tip_of_the_tree(tmp_path):
    # u1 <- a1 <- u2 <- a2, and a leaf record hanging off a1 (written while a1 was the leaf):
    # one tip, a2; the leaf record is bookkeeping, not a second branch.
    store = f"sqlite:///{tmp_path / 's.db'}"
    run("--store", store, "import", str(write(tmp_path / "s.jsonl", [*CHAIN, leaf("l1", "a1", "u1", 5)])))
    shown = json.loads(run("--store", store, "show", "rules-1", "--json").stdout)
    assert shown["leafCount"] == 1


# --------------------------------------------------------------------------- 2. retired records shown


RETIRED_SESSION = [
    user("u1", None, "old question", 1),
    assistant("a1", "u1", "old answer", 2),
    retired_compaction("c1", "a1", "S-old summary", "a1", 3),
    {"type": "context_compaction", "id": "x1", "parentId": "c1", "timestamp": ts(4), "promptVersion": 1,
     "deletedTargets": [{"kind": "entry", "entryId": "u1"}, {"kind": "block", "entryId": "a1", "index": 0}],
     "protectedEntryIds": [], "stats": {}},
    {"type": "message", "id": "m1", "parentId": "x1", "timestamp": ts(5),
     "message": {"role": "compactionSummary", "summary": "legacy summary text", "tokensBefore": 5, "timestamp": 5}},
    user("u2", "m1", "new question", 6),
]


def test_is_retired_record():
    by_id = {e["id"]: e for e in RETIRED_SESSION}
    assert [e["id"] for e in RETIRED_SESSION if is_retired_record(e)] == ["c1", "x1", "m1"]
    assert not is_retired_record({**by_id["c1"], "details": VERBATIM})
    assert is_retired_record({**by_id["c1"], "details": {"strategy": "summary"}})


def test_tree_rows_mark_retired_records_as_archival():
    manager = SessionManager.in_memory("/tmp/rules", entries=[HEADER, *RETIRED_SESSION])
    rows = render.tree_rows(manager.get_tree(), manager.get_leaf_id(), [e["id"] for e in manager.get_branch()])
    summaries = {row.entry["id"]: render.entry_summary(row.entry) for row in rows}
    assert summaries["c1"] == ("retired compaction (archival; not in the model context; kept from a1, "
                               "100 tokens before): S-old summary")
    assert summaries["x1"] == ("retired context_compaction (archival; not in the model context): "
                               "deleted entries u1; 1 other target")
    assert summaries["m1"] == "retired compaction summary (archival; not in the model context): legacy summary text"
    line = styled.tree_row_text(rows[2]).plain
    assert line == ("* c1 compaction: retired compaction (archival; not in the model context; kept from a1, "
                    "100 tokens before): S-old summary")
    # Still inert in the model context.
    assert texts(manager.build_session_projection().messages) == [
        "old question", "old answer", "", "new question"]  # "" is the stored compactionSummary (no content)


def test_markdown_export_shows_every_retired_record():
    manager = SessionManager.in_memory("/tmp/rules", entries=[HEADER, *RETIRED_SESSION])
    md = render.markdown_transcript(manager.get_header(), manager.get_branch())
    assert ("*Retired record `c1` (archival; not in the model context): an older agent compacted the turns "
            "above into this summary and kept the turns from `a1` on; `sessiontree context --historical` "
            "rebuilds what it sent.*\n\n```\nS-old summary\n```") in md
    assert ("*Retired record `x1` (archival; not in the model context): an older agent hid these targets "
            "from its context.*\n\n```\ndeleted entries u1; 1 other target\n```") in md
    assert ("*Retired record `m1` (archival; not in the model context): a compaction summary message of "
            "an older agent.*\n\n```\nlegacy summary text\n```") in md
    # In the order they happened, between the turns around them.
    assert md.index("old answer") < md.index("`c1`") < md.index("`x1`") < md.index("`m1`") < md.index("new question")


def test_cli_show_tree_and_markdown_export_show_retired_records(tmp_path):
    store = f"sqlite:///{tmp_path / 's.db'}"
    run("--store", store, "import", str(write(tmp_path / "r.jsonl", RETIRED_SESSION)))
    tree = run("--store", store, "show", "rules-1", "--tree").stdout
    assert "c1 compaction: retired compaction (archival; not in the model context; kept from a1" in tree
    assert "x1 context_compaction: retired context_compaction (archival; not in the model context)" in tree
    assert "m1 compactionSummary: retired compaction summary (archival; not in the model context)" in tree
    md = run("--store", store, "export", "rules-1", "--format", "markdown").stdout
    assert md.count("(archival; not in the model context)") == 3


# --------------------------------------------------------------------------- 3. historical context

# e1 - e2 - e3 - e4(call k1) - e5(result k1) - c1(retired, keeps from e3) - e6 - ed(edit e5) - e8
HISTORICAL_SESSION = [
    user("e1", None, "old question", 1),
    assistant("e2", "e1", "old answer", 2),
    user("e3", "e2", "keep me", 3),
    assistant("e4", "e3", "running", 4, calls=["k1"]),
    tool_result("e5", "e4", "k1", "ok", 5),
    {**retired_compaction("c1", "e5", "Summary of e1-e2", "e3", 0), "timestamp": "2026-02-01T09:05:00.000Z"},
    user("e6", "c1", "after", 7),
    {"type": "context_edit", "id": "ed", "parentId": "e6", "timestamp": ts(8), "targetId": "e5",
     "replacement": {"content": [{"type": "text", "text": "edited ok"}]}},
    assistant("e8", "ed", "done", 9),
]
SUMMARY_TEXT = HISTORICAL_SUMMARY_PREFIX + "Summary of e1-e2" + HISTORICAL_SUMMARY_SUFFIX


def test_historical_projection_summary_then_kept_entries_then_later_ones():
    result = build_historical_projection(HISTORICAL_SESSION)
    assert result.is_historical and result.compaction["id"] == "c1"
    assert result.first_kept_entry_id == "e3" and result.kept_entries == 3
    projection = result.projection
    # 1 summary + e3, e4, e5 (edited) kept + e6, e8 after; e1, e2 dropped.
    assert projection.messages[0] == {"role": "user", "content": [{"type": "text", "text": SUMMARY_TEXT}],
                                      "timestamp": 1769936700000}
    assert texts(projection.messages) == [SUMMARY_TEXT, "keep me", "running", "edited ok", "after", "done"]
    assert [p.source_entry["id"] for p in projection.entries] == ["c1", "e3", "e4", "e5", "e6", "ed", "e8"]
    assert [len(p.messages) for p in projection.entries] == [1, 1, 1, 1, 1, 0, 1]
    assert projection.model == {"provider": "p", "modelId": "m"}
    # The default (seed) projection ignores the retired compaction entirely.
    assert texts(build_session_projection(HISTORICAL_SESSION).messages) == [
        "old question", "old answer", "keep me", "running", "edited ok", "after", "done"]


def test_historical_projection_which_compaction_wins():
    base = HISTORICAL_SESSION[:6]
    # A later retired compaction wins over an earlier one; nothing kept when its id is unknown.
    later = [*base, user("e6", "c1", "after", 7),
             retired_compaction("c2", "e6", "Second summary", "nope", 8), user("e9", "c2", "last", 9)]
    result = build_historical_projection(later)
    assert result.compaction["id"] == "c2" and result.first_kept_entry_id is None and result.kept_entries == 0
    assert texts(result.projection.messages) == [
        HISTORICAL_SUMMARY_PREFIX + "Second summary" + HISTORICAL_SUMMARY_SUFFIX, "last"]
    # A later active verbatim boundary wins: the result is the seed's projection.
    verbatim = [*base, {"type": "compaction", "id": "v1", "parentId": "c1", "timestamp": ts(8), "summary": "",
                        "firstKeptEntryId": None, "tokensBefore": 1, "details": VERBATIM},
                user("e9", "v1", "last", 9)]
    result = build_historical_projection(verbatim)
    assert result.compaction is None and not result.is_historical
    assert result.projection.messages == build_session_projection(verbatim).messages
    assert len(result.projection.messages) == 2  # boundary message + "last"
    # A retired compaction after a verbatim boundary wins over it.
    after_verbatim = [*verbatim, retired_compaction("c3", "e9", "Third", "e9", 10), user("e10", "c3", "end", 11)]
    result = build_historical_projection(after_verbatim)
    assert result.compaction["id"] == "c3" and result.first_kept_entry_id == "e9"
    assert texts(result.projection.messages) == [
        HISTORICAL_SUMMARY_PREFIX + "Third" + HISTORICAL_SUMMARY_SUFFIX, "last", "end"]


def test_historical_projection_leaf_before_the_compaction_and_empty():
    result = build_historical_projection(HISTORICAL_SESSION, "e5")
    assert result.compaction is None
    assert texts(result.projection.messages) == ["old question", "old answer", "keep me", "running", "ok"]
    assert build_historical_projection(HISTORICAL_SESSION, None).projection.messages == []
    assert build_historical_projection([]).projection.messages == []


def test_historical_projection_closes_an_unanswered_call_in_the_kept_entries():
    # e4's call is never answered; e6 (a user turn) closes the window (D-11).
    entries = [e for e in HISTORICAL_SESSION if e["id"] not in ("e5", "ed")]
    entries[4] = {**entries[4], "parentId": "e4"}  # c1 now hangs below e4
    entries[6] = {**entries[6], "parentId": "e6"}  # and e8 below e6
    messages = build_historical_projection(entries).projection.messages
    assert [m["role"] for m in messages] == ["user", "user", "assistant", "toolResult", "user", "assistant"]
    assert messages[3]["isError"] is True and messages[3]["toolCallId"] == "k1"


def test_manager_and_cli_historical_context(tmp_path):
    path = write(tmp_path / "h.jsonl", HISTORICAL_SESSION)
    manager = SessionManager.open_file(str(path))
    assert texts(manager.build_historical_projection().projection.messages)[1:] == [
        "keep me", "running", "edited ok", "after", "done"]
    store = f"sqlite:///{tmp_path / 's.db'}"
    run("--store", store, "import", str(path))
    data = json.loads(run("--store", store, "context", "rules-1", "--historical", "--json").stdout)
    assert data["historical"]["rule"] == "retired-summary-compaction"
    assert data["historical"]["compactionId"] == "c1" and data["historical"]["firstKeptEntryId"] == "e3"
    assert data["historical"]["keptEntries"] == 3
    assert len(data["messages"]) == 6
    assert "historical" not in json.loads(run("--store", store, "context", "rules-1", "--json").stdout)
    out = run("--store", store, "context", "rules-1", "--historical").stdout
    assert out.splitlines()[0] == (
        "HISTORICAL VIEW (archival; not what a current agent sends): the context as the agent that wrote "
        "retired compaction c1 rebuilt it: its summary, then the 3 entries kept from e3, then the entries after it.")
    assert "messages 6" in out
    assert "HISTORICAL" not in run("--store", store, "context", "rules-1").stdout


@corpus.needs_shared
def test_corpus_before_compaction_historical_context_is_summary_plus_kept_tail():
    # Independently of this library: the raw lines (header = index 0), the
    # last compaction record, and its firstKeptEntryIndex.
    records = [json.loads(line) for line in BEFORE.read_text(encoding="utf-8").splitlines() if line.strip()]
    compactions = [i for i, r in enumerate(records) if r["type"] == "compaction"]
    assert compactions == [359, 628]  # lines 360 and 629
    first_kept = records[628]["firstKeptEntryIndex"]
    assert first_kept == 551
    kept_and_after = sum(1 for r in records[first_kept:] if r["type"] == "message")
    assert kept_and_after == 445  # 77 before the compaction + 368 after it
    # One call of the toolUse turn just before the compaction (line 628) is
    # never answered; the user turn after the compaction closes it (D-11),
    # as in the default projection (990 stored + 1 synthetic = 991).
    entries = read_session_file(BEFORE).entries
    result = build_historical_projection(entries)
    assert result.compaction["timestamp"] == records[628]["timestamp"]
    assert result.first_kept_entry_id == entries[first_kept - 1]["id"]
    assert result.kept_entries == 628 - 551  # records on lines 552..628
    messages = result.projection.messages
    assert len(messages) == 1 + kept_and_after + 1 == 447
    assert texts(messages[:1])[0].startswith(HISTORICAL_SUMMARY_PREFIX + "# Context Checkpoint")
    synthetic = [m for m in messages if m.get("role") == "toolResult" and m.get("isError") is True
                 and "interrupted" in m["content"][0]["text"]]
    assert len(synthetic) == 1
    assert len(build_session_projection(entries).messages) == 991


def test_corpus_large_session_has_no_retired_compaction():
    entries = read_session_file(LARGE).entries
    result = build_historical_projection(entries)
    assert result.compaction is None
    assert len(result.projection.messages) == 914
