"""Listing information (docs/rules/listing.md L.7-L.16, L.19, J, K, O; ``seed:session-info-entry``,
``seed:session-summary-entry``, ``seed:header``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from sessiontree.core.listing import (
    NO_MESSAGES,
    InfoAccumulator,
    is_classified,
    message_text,
    session_info_from_entries,
)

HEADER = {"type": "session", "version": 4, "id": "sess-1", "createdAt": "2023-06-01T12:00:00.000Z", "cwd": "/p"}
CREATED = datetime(2023, 6, 1, 12, 0, tzinfo=UTC)
JAN1_MS = 1704067200000  # 2024-01-01T00:00:00Z
DAY_MS = 86_400_000


def utc(day: int) -> datetime:
    return datetime(2024, 1, day, tzinfo=UTC)


_counter = iter(range(10**6))


def message(role: str, content: Any = ..., ts: Any = ..., entry_ts: str = "2020-01-01T00:00:00.000Z",
            parent: str | None = None, entry_id: str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": role}
    if content is not ...:
        msg["content"] = content
    if ts is not ...:
        msg["timestamp"] = ts
    return {"type": "message", "id": entry_id or f"m{next(_counter)}", "parentId": parent, "timestamp": entry_ts,
            "message": msg}


def entry(kind: str, entry_id: str | None = None, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "id": entry_id or f"e{next(_counter)}", "parentId": None,
            "timestamp": "2020-01-01T00:00:00.000Z", **fields}


def listing(entries: list[dict[str, Any]], header: dict[str, Any] = HEADER, mtime: float | None = None):
    return session_info_from_entries(header, entries, "/dir/s.jsonl", fallback_mtime=mtime)


# --------------------------------------------------------------------------- L.14 message count


def test_message_count_covers_all_roles_and_branches() -> None:
    entries = [
        message("user", "a", entry_id="u1"),
        message("assistant", [], parent="u1", entry_id="a1"),
        message("toolResult", [{"type": "text", "text": "out"}], parent="a1"),
        message("bashExecution", parent="a1"),
        message("custom", "c", parent="a1"),
        message("system", "sys", parent="a1"),
        message("branchSummary", parent="a1"),
        message("user", "other branch", parent="u1"),
        entry("custom_message", customType="x", content="not a message entry", display=True),
        entry("branch_summary", fromId="x", summary="s"),
        entry("session_info", name="n"),
    ]
    assert listing(entries).message_count == 8


# --------------------------------------------------------------------------- L.15 text


def test_message_text_extraction() -> None:
    assert message_text({"role": "user", "content": "  verbatim  "}) == "  verbatim  "
    blocks = [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Part A"},
              {"type": "toolCall", "id": "c", "name": "n", "arguments": {}},
              {"type": "image", "data": "QQ==", "mimeType": "image/png"}, {"type": "text", "text": "Part B"}]
    assert message_text({"role": "assistant", "content": blocks}) == "Part A Part B"
    assert message_text({"role": "user", "content": []}) == ""
    assert message_text({"role": "user", "content": None}) == ""  # L.19
    assert message_text({"role": "user"}) == ""


def test_all_messages_text_and_first_message() -> None:
    entries = [
        message("assistant", [{"type": "text", "text": "before any user"}]),
        message("user", ""),  # empty: skipped
        message("user"),  # no content key: skipped
        message("user", "Hello world"),
        message("toolResult", [{"type": "text", "text": "tool out"}]),
        message("custom", "custom text"),
        message("assistant", [{"type": "thinking", "thinking": "t"}, {"type": "text", "text": "Part A"},
                              {"type": "text", "text": "Part B"}]),
        message("user", [{"type": "image", "data": "QQ==", "mimeType": "image/png"}, {"type": "text", "text": "look"}]),
    ]
    info = listing(entries)
    assert info.first_message == "Hello world"
    assert info.all_messages_text == "before any user Hello world Part A Part B look"


def test_whitespace_first_message_counts() -> None:
    assert listing([message("user", "   "), message("user", "later")]).first_message == "   "


def test_no_user_text_gives_no_messages() -> None:
    entries = [message("assistant", [{"type": "text", "text": "only me"}]), message("user", [])]
    info = listing(entries)
    assert info.first_message == NO_MESSAGES == "(no messages)"
    assert info.all_messages_text == "only me"


# --------------------------------------------------------------------------- L.16 modified


def test_modified_is_newest_user_or_assistant_activity() -> None:
    entries = [
        message("user", "a", ts=JAN1_MS),
        # no numeric message timestamp: the entry's own time counts
        message("assistant", [], entry_ts="2024-01-02T00:00:00.000Z"),
        # a string is not a number: the entry's time is used instead
        message("user", "b", ts=str(JAN1_MS + 9 * DAY_MS), entry_ts="2023-12-31T00:00:00.000Z"),
        # tool results, bash and custom messages never count
        message("toolResult", [], ts=JAN1_MS + 20 * DAY_MS),
        message("bashExecution", ts=JAN1_MS + 20 * DAY_MS),
        message("custom", "c", ts=JAN1_MS + 20 * DAY_MS),
        # nor does a user message without a content key
        message("user", ts=JAN1_MS + 20 * DAY_MS),
    ]
    assert listing(entries).modified == utc(2)


def test_modified_falls_back_to_created_then_mtime() -> None:
    assert listing([]).modified == CREATED
    # negative activity counts as 0, so the header time is used
    assert listing([message("user", "x", ts=-5000)]).modified == CREATED
    header = {k: v for k, v in HEADER.items() if k != "createdAt"}
    mtime = (JAN1_MS + 4 * DAY_MS) / 1000
    assert listing([], header, mtime=mtime).modified == utc(5)


def test_null_content_does_not_drop_the_session() -> None:
    # L.19: null content is treated as [] (the old code lost the whole session).
    info = listing([message("user", None, ts=JAN1_MS + 2 * DAY_MS), message("assistant", None)])
    assert info.message_count == 2
    assert info.first_message == NO_MESSAGES
    assert info.all_messages_text == ""
    assert info.modified == utc(3)


# --------------------------------------------------------------------------- header fields


def test_header_fields() -> None:
    header = dict(HEADER, parentSessionId="parent-1")
    info = listing([], header)
    assert (info.id, info.path, info.cwd, info.parent_session_id, info.created) == (
        "sess-1", "/dir/s.jsonl", "/p", "parent-1", CREATED)
    no_cwd = {k: v for k, v in HEADER.items() if k != "cwd"}
    assert listing([], no_cwd).cwd == ""
    assert listing([], HEADER).parent_session_id is None


# --------------------------------------------------------------------------- names (J, L.8, L.9)


def test_listing_name_states() -> None:
    never = listing([message("user", "x")])
    assert (never.has_name, never.name) == (False, None)
    named = listing([entry("session_info", name="  Refactor auth  ")])
    assert (named.has_name, named.name) == (True, "Refactor auth")
    cleared = listing([entry("session_info", name="Named"), entry("session_info", name="")])
    assert (cleared.has_name, cleared.name) == (True, None)
    renamed = listing([entry("session_info", name=""), entry("session_info", name="Again")])
    assert (renamed.has_name, renamed.name) == (True, "Again")


# --------------------------------------------------------------------------- summary (K)


def test_listing_summary_freshness() -> None:
    u1 = message("user", "q", entry_id="u1")
    a1 = message("assistant", [{"type": "toolCall", "id": "c", "name": "n", "arguments": {}}], entry_id="a1")
    s = entry("session_summary", summary="Did it", summarizedThroughId="a1")
    tool = message("toolResult", [{"type": "text", "text": "r"}])
    assert listing([u1, a1, s]).summary == "Did it"
    assert listing([u1, a1, s, tool]).summary == "Did it"  # tool results do not count
    assert listing([u1, a1, s, tool, message("user", "more")]).summary is None  # stale
    bs = entry("branch_summary", fromId="x", summary="left")
    assert listing([u1, a1, s, bs]).summary is None  # retired
    s2 = entry("session_summary", summary="Again", summarizedThroughId="a1")
    assert listing([u1, a1, s, bs, s2]).summary == "Again"  # valid again
    stale_anchor = entry("session_summary", summary="Old", summarizedThroughId="u1")
    assert listing([u1, a1, stale_anchor]).summary is None


def test_accumulator_state_roundtrip_matches_full_scan() -> None:
    entries = [entry("session_info", name="N"), message("user", "q", ts=JAN1_MS, entry_id="u1"),
               entry("session_summary", summary="S", summarizedThroughId="u1"),
               message("toolResult", [], ts=JAN1_MS + 5 * DAY_MS)]
    full = InfoAccumulator().extend(entries).to_info(HEADER, "p")
    half = InfoAccumulator().extend(entries[:2])
    resumed = InfoAccumulator.from_state(half.to_state()).extend(entries[2:]).to_info(HEADER, "p")
    for name in ("message_count", "first_message", "modified", "has_name", "name", "summary", "created"):
        assert getattr(resumed, name) == getattr(full, name), name


# --------------------------------------------------------------------------- classification (O)

WORKFLOW = {"runId": "run-1", "stageId": "stage-build", "stageName": "build"}


@pytest.mark.parametrize(
    ("header_fields", "expected"),
    [
        ({"internal": True, "workflow": WORKFLOW}, True),
        ({"internal": True, "workflow": dict(WORKFLOW, extra=1)}, True),
        ({"internal": 1, "workflow": WORKFLOW}, False),
        ({"internal": "true", "workflow": WORKFLOW}, False),
        ({"internal": "yes", "workflow": WORKFLOW}, False),
        ({"internal": True}, False),
        ({"workflow": WORKFLOW}, False),
        ({"internal": True, "workflow": None}, False),
        ({"internal": True, "workflow": [WORKFLOW]}, False),
        ({"internal": True, "workflow": dict(WORKFLOW, stageId="")}, False),
        ({"internal": True, "workflow": dict(WORKFLOW, stageName="   ")}, False),
        ({"internal": True, "workflow": dict(WORKFLOW, runId=7)}, False),
        ({"internal": True, "workflow": {"runId": "r", "stageId": "s"}}, False),
    ],
)
def test_classification(header_fields: dict[str, Any], expected: bool) -> None:
    header = dict(HEADER, **header_fields)
    assert is_classified(header) is expected
    info = listing([], header)
    assert info.internal is expected
    assert info.workflow == (header["workflow"] if expected else None)


def test_modified_is_never_earlier_than_created():
    # A branched copy: its messages were written at 00:42, the copy was created at 00:53.
    header = {"type": "session", "version": 4, "id": "s-1", "cwd": "/p",
              "createdAt": "2025-12-09T00:53:00.000Z"}
    entries = [{"type": "message", "id": "a1", "parentId": None, "timestamp": "2025-12-09T00:42:00.000Z",
                "message": {"role": "user", "content": "hi", "timestamp": 1765240920000}}]  # 00:42:00Z
    info = session_info_from_entries(header, entries, "s-1")
    assert info.created.isoformat() == "2025-12-09T00:53:00+00:00"
    assert info.modified == info.created
    # Activity after creation still wins.
    later = [*entries, {"type": "message", "id": "a2", "parentId": "a1", "timestamp": "2025-12-09T01:00:00.000Z",
                        "message": {"role": "assistant", "content": "yo", "timestamp": 1765242000000}}]  # 01:00:00Z
    assert session_info_from_entries(header, later, "s-1").modified.isoformat() == "2025-12-09T01:00:00+00:00"


def test_a_fork_lists_with_its_own_creation_time(tmp_path):
    import json

    from sessiontree.session.manager import SessionManager
    from sessiontree.stores import MemoryStore

    source_file = tmp_path / "old.jsonl"
    header = {"type": "session", "version": 4, "id": "s-old", "cwd": "/p", "createdAt": "2001-09-09T01:46:40.000Z"}
    entry = {"type": "message", "id": "a1", "parentId": None, "timestamp": "2001-09-09T01:46:40.000Z",
             "message": {"role": "user", "content": "old", "timestamp": 1_000_000_000_000}}  # 2001-09-09T01:46:40Z
    source_file.write_text(json.dumps(header) + "\n" + json.dumps(entry) + "\n")
    store = MemoryStore()
    SessionManager.import_from_jsonl(source_file, None, store)
    fork = SessionManager.open(store, "s-old").fork_to("/p")
    infos = {info.id: info for info in SessionManager.list_all(store)}
    assert infos["s-old"].modified.isoformat() == "2001-09-09T01:46:40+00:00"
    mine = infos[fork.get_session_id()]
    assert mine.modified == mine.created > infos["s-old"].modified  # before the rule: the source's 2001
    assert [info.id for info in SessionManager.list_all(store)] == [fork.get_session_id(), "s-old"]
