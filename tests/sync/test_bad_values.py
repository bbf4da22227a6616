"""Bad counts and times in agent files (docs/usage.md, "Bad values in agent files"): the
entry is kept, the value is accounted as the rule says, and sync says so once, naming the
file's line and the field; ``check FILE`` lists each.

Synthetic files: no file of ../shared/corpus holds such a value (the 23 Claude Code, Codex
and Gemini CLI files were read for it: none), so the expected totals below are hand sums
of the records written here.
"""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import run_cli, run_cli_json
from corpus import needs_shared
from corpus import shared as corpus_file
from sessiontree.stores import SqliteStore
from sessiontree.sync.engine import Syncer

SID = "5c1d0d6c-0d4e-4f55-9f0a-6a2b8c3d4e51"
CODEX_SID = "019ab730-4906-7b12-8569-c53c5dde1150"


def _claude(uuid: str, parent: str | None, kind: str, stamp: object, **extra: object) -> dict:
    record = {"parentUuid": parent, "isSidechain": False, "cwd": "/w", "sessionId": SID, "type": kind,
              "uuid": uuid, "timestamp": stamp}
    record.update(extra)
    return record


def _answer(uuid: str, parent: str, mid: str, usage: dict, stamp: object = "2026-03-02T09:00:02.000Z",
            **extra: object) -> dict:
    return _claude(uuid, parent, "assistant", stamp, requestId=f"r-{mid}", message={
        "id": mid, "role": "assistant", "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn", "usage": usage}, **extra)


def _write(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _claude_file(tmp_path: Path) -> Path:
    folder = tmp_path / "claude" / "projects" / "-w"
    folder.mkdir(parents=True)
    path = folder / f"{SID}.jsonl"
    _write(path, [
        _claude("u1", None, "user", "2026-03-02T09:00:01.000Z", message={"role": "user", "content": "hi"}),
        # line 2: a good call, input 10, output 20, cache read 300, cache write 4,000, written 12.0-style
        _answer("a1", "u1", "m1", {"input_tokens": 10.0, "output_tokens": 20, "cache_read_input_tokens": 300,
                                   "cache_creation_input_tokens": 4000}),
        _claude("u2", "a1", "user", "yesterday", message={"role": "user", "content": "again"}),  # line 3
        # line 4: input "12" (text), output 7, cache read -5, cache write 1.5, and a negative costUSD
        _answer("a2", "u2", "m2", {"input_tokens": "12", "output_tokens": 7, "cache_read_input_tokens": -5,
                                   "cache_creation_input_tokens": 1.5}, costUSD=-1),
        # line 5: a time past year 9999 as JavaScript writes it, and a count above 2^53-1
        _answer("a3", "a2", "m3", {"input_tokens": 1, "output_tokens": 2 ** 53}, stamp="+010000-01-01T00:00:00.000Z"),
    ])
    return path


def test_a_claude_code_file_with_bad_values_is_kept_accounted_and_noted_once(tmp_path):
    path = _claude_file(tmp_path)
    db = tmp_path / "s.db"
    store = SqliteStore(str(db))
    result = Syncer(store).sync_file(str(path))
    assert result.status == "new"
    note = result.note or ""
    assert note.startswith("7 values not taken as written (docs/usage.md, \"Bad values in agent files\"): ")
    assert 'line 3: timestamp "yesterday" is not an ISO-8601 time (taken as no time)' in note
    assert 'line 4: message.usage.input_tokens "12" is not a number (taken as 0)' in note
    assert "line 4: message.usage.cache_read_input_tokens -5 is negative (taken as 0)" in note
    assert note.endswith("; 4 more (`sessiontree check FILE` lists each)")
    # Every record is kept: 5 entries, the bad ones byte for byte in their raw text.
    entries = store.load(SID).entries
    assert len(entries) == 5
    assert entries[3]["foreign"]["raw"] == path.read_text().splitlines(keepends=True)[3]
    store.close()

    # Accounted: 3 calls; input 10 + 0 + 1, output 20 + 7 + 0, cache read 300 + 0 + 0,
    # cache write 4,000 + 0 + 0 (hand sums of the records above).
    totals = run_cli_json(f"sqlite:///{db}", "stats", "--by", "session", "--json")["totals"]
    assert (totals["calls"], totals["inputTokens"], totals["outputTokens"], totals["cacheReadTokens"],
            totals["cacheWriteTokens"]) == (3, 11, 27, 300, 4000)

    # check FILE names each one, with its line and field.
    checked = run_cli(None, "check", str(path), "--json")
    found = [(p["line"], p["message"].split(" record: ", 1)[1].split(" ", 1)[0])
             for p in json.loads(checked.stdout)[0]["problems"] if p["code"] == "foreign-bad-value"]
    assert found == [(3, "timestamp"), (4, "message.usage.input_tokens"), (4, "message.usage.cache_read_input_tokens"),
                     (4, "message.usage.cache_creation_input_tokens"), (4, "costUSD"),
                     (5, "message.usage.output_tokens"), (5, "timestamp")]


def test_a_grown_file_notes_only_the_new_lines(tmp_path):
    path = _claude_file(tmp_path)
    store = SqliteStore(str(tmp_path / "s.db"))
    syncer = Syncer(store)
    assert syncer.sync_file(str(path)).status == "new"
    assert syncer.sync_file(str(path)).note is None  # unchanged: nothing said again
    with open(path, "a") as handle:
        handle.write(json.dumps(_answer("a4", "a3", "m4", {"input_tokens": -1, "output_tokens": 3})) + "\n")
    grown = syncer.sync_file(str(path))
    assert grown.status == "grown"
    assert grown.note == ('1 value not taken as written (docs/usage.md, "Bad values in agent files"): line 6: '
                          "message.usage.input_tokens -1 is negative (taken as 0) (`sessiontree check FILE` "
                          "lists each)")
    store.close()


def test_a_codex_token_count_with_bad_values(tmp_path):
    folder = tmp_path / "codex" / "sessions" / "2025" / "11" / "24"
    folder.mkdir(parents=True)
    path = folder / f"rollout-2025-11-24T12-46-26-{CODEX_SID}.jsonl"
    meta = {"timestamp": "2025-11-24T18:46:26.000Z", "type": "session_meta",
            "payload": {"id": CODEX_SID, "timestamp": "2025-11-24T18:46:26.000Z", "cwd": "/w"}}

    def count(total: dict, last: dict) -> dict:
        return {"timestamp": "2025-11-24T18:47:00.000Z", "type": "event_msg",
                "payload": {"type": "token_count", "info": {"total_token_usage": total, "last_token_usage": last}}}

    good = {"input_tokens": 100, "cached_input_tokens": 40, "output_tokens": 10, "reasoning_output_tokens": 0}
    bad = {"input_tokens": 150, "cached_input_tokens": "lots", "output_tokens": 15, "reasoning_output_tokens": -2}
    _write(path, [meta, count(good, good), count({**good, "input_tokens": 250, "output_tokens": 25}, bad)])
    db = tmp_path / "c.db"
    store = SqliteStore(str(db))
    result = Syncer(store).sync_file(str(path))
    assert result.status == "new"
    assert ("line 3: payload.info.last_token_usage.cached_input_tokens \"lots\" is not a number (taken as 0)"
            in (result.note or ""))
    assert "line 3: payload.info.last_token_usage.reasoning_output_tokens -2 is negative (taken as 0)" in (
        result.note or "")
    store.close()
    # Call 1: input 100 of which 40 cached, output 10. Call 2 (its last_token_usage): input 150,
    # cached taken as 0, output 15. Uncached input 60 + 150, cache read 40 + 0, output 10 + 15.
    totals = run_cli_json(f"sqlite:///{db}", "stats", "--by", "session", "--json")["totals"]
    assert (totals["calls"], totals["inputTokens"], totals["cacheReadTokens"], totals["outputTokens"]) == (
        2, 210, 40, 25)


@needs_shared
def test_a_gemini_chat_with_a_bad_count_is_noted_with_its_message_line(tmp_path):
    # The real chat faff42ab with one count made a text: its second message starts on line 13
    # (counted in the file), its tokens.input is 12874 on line 26.
    real = corpus_file("gemini/tmp/7e8989f71805c3147f6be9b7a71de2a156f8face69f9380beeeb8a777414f21c/chats/"
                       "session-2026-01-10T02-08-faff42ab.json").read_bytes()
    assert real.splitlines()[12] == b"    {" and real.splitlines()[25] == b'        "input": 12874,'
    chat = tmp_path / "session-2026-01-10T02-08-faff42ab.json"
    chat.write_bytes(real.replace(b'"input": 12874,', b'"input": "12874",', 1))
    store = SqliteStore(str(tmp_path / "g.db"))
    result = Syncer(store).sync_file(str(chat))
    assert result.status == "new"
    assert result.note == ('1 value not taken as written (docs/usage.md, "Bad values in agent files"): line 13: '
                           'tokens.input "12874" is not a number (taken as 0) (`sessiontree check FILE` lists each)')
    store.close()


def test_numbers_beyond_a_double_keep_the_call_and_are_noted(tmp_path):
    # 1e309 and a 400-digit integer are JSON (RFC 8259 lets a reader bound its numbers);
    # JavaScript, Claude Code's language, reads them as Infinity. The record is still a
    # call: its other counts are taken, the bad one is 0 and noted; a costUSD beyond what
    # the store can hold ($4,611,686,018, 2^62 nano-dollars) is noted and priced from the
    # tokens. Hand sums: calls 3, input 0 + 5 + 1, output 7 + 0 + 2.
    folder = tmp_path / "claude" / "projects" / "-w"
    folder.mkdir(parents=True)
    path = folder / f"{SID}.jsonl"
    lines = [
        json.dumps(_claude("u1", None, "user", "2026-03-02T09:00:01.000Z", message={"role": "user", "content": "hi"})),
        json.dumps(_answer("a1", "u1", "m1", {"input_tokens": 11, "output_tokens": 7})).replace(
            '"input_tokens": 11', '"input_tokens": 1e309'),
        json.dumps(_answer("a2", "a1", "m2", {"input_tokens": 5, "output_tokens": 12})).replace(
            '"output_tokens": 12', '"output_tokens": -' + "9" * 400),
        json.dumps(_answer("a3", "a2", "m3", {"input_tokens": 1, "output_tokens": 2}, costUSD=1e300)),
        '{"type": "assistant", "a": NaN}',  # not JSON: no record, as before
    ]
    path.write_text("\n".join(lines) + "\n")
    db = tmp_path / "s.db"
    store = SqliteStore(str(db))
    result = Syncer(store).sync_file(str(path))
    assert result.status == "new"
    note = result.note or ""
    assert note.startswith("3 values not taken as written")
    assert "line 2: message.usage.input_tokens Infinity is above 2^53-1 (taken as 0)" in note
    assert "line 3: message.usage.output_tokens -Infinity is negative (taken as 0)" in note
    assert "line 4: costUSD 1e+300 is above $4,611,686,018 (taken as absent: priced from its tokens)" in note
    assert len(store.load(SID).entries) == 5
    store.close()
    totals = run_cli_json(f"sqlite:///{db}", "stats", "--by", "session", "--json")["totals"]
    assert (totals["calls"], totals["inputTokens"], totals["outputTokens"], totals["recordedCalls"]) == (3, 6, 9, 0)
    checked = json.loads(run_cli(None, "check", str(path), "--json").stdout)[0]["problems"]
    assert sorted((p["line"], p["code"]) for p in checked) == [
        (2, "foreign-bad-value"), (3, "foreign-bad-value"), (4, "foreign-bad-value"), (5, "foreign-record-unmapped")]


@needs_shared
def test_a_gemini_chat_with_a_count_beyond_a_double_is_still_read(tmp_path):
    # The real chat faff42ab with its tokens.input of line 26 made 1e309: the chat is read
    # (it was refused whole: "not a chat document") and the count noted.
    real = corpus_file("gemini/tmp/7e8989f71805c3147f6be9b7a71de2a156f8face69f9380beeeb8a777414f21c/chats/"
                       "session-2026-01-10T02-08-faff42ab.json").read_bytes()
    chat = tmp_path / "session-2026-01-10T02-08-faff42ab.json"
    chat.write_bytes(real.replace(b'"input": 12874,', b'"input": 1e309,', 1))
    store = SqliteStore(str(tmp_path / "g.db"))
    result = Syncer(store).sync_file(str(chat))
    assert result.status == "new"
    assert result.note == ('1 value not taken as written (docs/usage.md, "Bad values in agent files"): line 13: '
                           'tokens.input Infinity is above 2^53-1 (taken as 0) (`sessiontree check FILE` lists each)')
    store.close()


def test_a_time_without_a_zone_is_utc_whatever_the_machine_zone(tmp_path, monkeypatch):
    # A record time without an offset ("2026-03-02T09:00:00", written by hand or another
    # tool) is UTC, as everywhere else (core.tree.parse_timestamp_ms; docs/listing.md): the
    # message time and the usage ledger's time must not move with the machine's zone.
    # 2026-03-02T09:00:00Z is 20,514 days and 9 hours after the epoch: 1,772,442,000,000 ms.
    import time

    from sessiontree.core.usage import timestamp_ms
    from sessiontree.format.foreign.common import iso_to_ms

    monkeypatch.setenv("TZ", "Pacific/Kiritimati")  # UTC+14: local 09:00 is 19:00 the day before in UTC
    time.tzset()
    try:
        assert iso_to_ms("2026-03-02T09:00:00") == 1772442000000
        assert timestamp_ms({"timestamp": "2026-03-02T09:00:00"}) == 1772442000000
        folder = tmp_path / "claude" / "projects" / "-w"
        folder.mkdir(parents=True)
        path = folder / f"{SID}.jsonl"
        _write(path, [_claude("u1", None, "user", "2026-03-02T09:00:00", message={"role": "user", "content": "hi"}),
                      _answer("a1", "u1", "m1", {"input_tokens": 1, "output_tokens": 2}, stamp="2026-03-02T09:00:00")])
        db = tmp_path / "s.db"
        store = SqliteStore(str(db))
        assert Syncer(store).sync_file(str(path)).note is None  # an ISO-8601 time: nothing to note
        assert store.load(SID).entries[1]["message"]["timestamp"] == 1772442000000
        store.close()
        days = run_cli_json(f"sqlite:///{db}", "stats", "--by", "day", "--timezone", "UTC", "--json")["groups"]
        assert [group["key"] for group in days] == ["2026-03-02"]
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
