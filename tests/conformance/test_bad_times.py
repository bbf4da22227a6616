"""A timestamp that gives no date affects only its own session, on every store (docs/listing.md, "Unknown times").

A message's numeric ``timestamp`` of 1e15 (year 33658), an ISO string whose
offset carries it past 9999-12-31 or before 0001-01-01, 1e300, an integer of 31
digits, text: each is unknown wherever a date is shown or grouped. The listing of
every other session, the viewer's list page, ``stats`` and ``search`` go on.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from builders import header
from cli_support import run_cli
from sessiontree.core.listing import UNKNOWN_TIME, InfoAccumulator, is_unknown_time, session_info_from_entries
from sessiontree.session.manager import SessionManager

CREATED = "2026-02-01T09:00:00.000Z"


def _message(entry_id: str, parent: str | None, role: str, stamp: Any, entry_stamp: Any,
             text: str = "hello") -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": stamp}
    if role == "assistant":
        message.update(api="x", provider="p", model="m", stopReason="stop",
                       usage={"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 3,
                              "cost": {"total": 0.1}})
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": entry_stamp, "message": message}


def _session(session_id: str, created: str, stamp: Any, entry_stamp: Any) -> tuple[dict, list[dict]]:
    return header(session_id, created=created), [
        _message("u1", None, "user", stamp, entry_stamp, f"hello {session_id}"),
        _message("a1", "u1", "assistant", stamp, entry_stamp, "answer"),
    ]


#: id -> (createdAt, message timestamp, entry timestamp)
SESSIONS: dict[str, tuple[str, Any, Any]] = {
    "good": (CREATED, 1_700_000_000_000, "2023-11-14T22:13:20.000Z"),
    # The message's time is past 9999: the entry's own ISO time counts instead.
    "future": (CREATED, 1e15, "2026-03-01T10:00:00.000Z"),
    # Nothing gives a date: ISO times whose offsets leave years 1-9999, a negative huge number.
    "nowhen": ("0001-01-01T00:00:00+05:00", -1e15, "9999-12-31T23:00:00-05:00"),
    "absurd": ("2026-02-02T00:00:00.000Z", 10**30, "junk"),
    "huge": ("2026-02-03T00:00:00.000Z", 1e300, "+012345-01-01T00:00:00Z"),
}


def _fill(store: Any) -> None:
    for session_id, (created, stamp, entry_stamp) in SESSIONS.items():
        store.create(*_session(session_id, created, stamp, entry_stamp))


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def test_listing_keeps_every_session_and_each_bad_time_is_its_own(store):
    _fill(store)
    infos = {info.id: info for info in SessionManager.list_all(store)}
    assert set(infos) == set(SESSIONS)
    # good: modified = max(message 2023-11-14, created 2026-02-01) = created.
    assert infos["good"].modified == _utc(CREATED) and infos["good"].created == _utc(CREATED)
    assert infos["future"].modified == _utc("2026-03-01T10:00:00.000Z")
    assert infos["absurd"].modified == _utc("2026-02-02T00:00:00.000Z")  # "junk" and 10**30: no activity
    assert infos["huge"].modified == _utc("2026-02-03T00:00:00.000Z")
    # No date at all: the store's own time of the session where it keeps one (a JSONL
    # file's mtime, a memory store's write time: docs/rules/listing.md L.16), else unknown.
    nowhen = infos["nowhen"]
    assert nowhen.created == nowhen.modified
    assert nowhen.modified == UNKNOWN_TIME or abs(datetime.now(UTC) - nowhen.modified) < timedelta(hours=1)


def test_a_session_whose_times_give_no_date_is_unknown():
    head, entries = _session("nowhen", *SESSIONS["nowhen"])
    info = session_info_from_entries(head, entries, "nowhen")
    assert info.created == info.modified == UNKNOWN_TIME
    assert is_unknown_time(info.modified) and not is_unknown_time(_utc(CREATED))
    # An older version's stored state may hold the time: read as unknown too.
    assert InfoAccumulator(message_count=1, modified_ms=1e15).to_info(head, "nowhen").modified == UNKNOWN_TIME


def test_viewer_list_page_shows_unknown_and_lists_the_rest(store):
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from sessiontree.web.app import create_app

    _fill(store)
    response = TestClient(create_app(store), base_url="http://127.0.0.1:8000").get("/")
    assert response.status_code == 200
    for session_id in SESSIONS:
        assert f"hello {session_id}" in response.text
    assert "2026-03-01 10:00Z" in response.text  # future's entry time
    nowhen = next(i for i in SessionManager.list_all(store) if i.id == "nowhen")
    assert (">unknown</td>" in response.text) == is_unknown_time(nowhen.modified)


@pytest.mark.parametrize("args", [("list",), ("list", "--json"), ("stats",), ("stats", "--by", "week"),
                                  ("stats", "--by", "session"), ("search", "hello"),
                                  ("search", "hello", "--since", "2020-01-01"), ("show", "nowhen"),
                                  ("show", "future")])
def test_commands_never_fail_on_a_time_out_of_range(store, args):
    if store.kind == "memory":
        pytest.skip("the command line opens stores by URL")
    _fill(store)
    result = run_cli(store.url, *args)
    if args[0] == "list" or args == ("search", "hello"):
        for session_id in SESSIONS:
            assert f"hello {session_id}" in result.stdout
    if args == ("list",):
        nowhen = next(i for i in SessionManager.list_all(store) if i.id == "nowhen")
        row = next(line for line in result.stdout.splitlines() if line.startswith("nowhen"))
        assert ("unknown" in row) == is_unknown_time(nowhen.modified)
    if "--since" in args:  # an entry whose timestamp does not parse never passes (docs/search.md)
        assert "hello good" in result.stdout and "hello future" in result.stdout
        assert "hello absurd" not in result.stdout
