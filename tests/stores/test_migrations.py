"""Format upgrades 1 -> 2 -> 3 -> 4 (``seed:session-version``; docs/rules/versions.md C.3-C.9,
§3.3; docs/rules/decisions.md D-8, D-15; docs/rules/format.md B.10).

Expected values are derived from the rules by hand; fixture files are built
with the standard library's ``json``.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from sessiontree.format.codec import parse_session
from sessiontree.format.upgrade import parent_session_to_id, upgrade_header

HEX8 = re.compile(r"[0-9a-f]{8}")


def line(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def jsonl(*records: Any) -> bytes:
    return b"".join((r if isinstance(r, bytes) else line(r)) + b"\n" for r in records)


# --------------------------------------------------------------------------- v1 -> v2


V1_HEADER = {"type": "session", "id": "sess-v1", "timestamp": "2024-01-01T00:00:00.000Z", "cwd": "/w"}


def _rec(kind: str, second: int, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "timestamp": f"2024-01-01T00:00:{second:02d}.000Z", **fields}


def _user(second: int, text: str) -> dict[str, Any]:
    return _rec("message", second, message={"role": "user", "content": text, "timestamp": 1704067200000 + second * 1000})


def _compaction(second: int, index: Any) -> dict[str, Any]:
    return _rec("compaction", second, summary=f"s{second}", firstKeptEntryIndex=index, tokensBefore=100)


# Record index (header = 0) -> record. Blank lines in the file do not count.
V1_RECORDS: list[dict[str, Any]] = [
    _user(1, "one"),                                   # 1
    _rec("message", 2, message={"role": "assistant", "content": [{"type": "text", "text": "two"}],
                                "provider": "p", "model": "m", "stopReason": "stop", "timestamp": 1704067202000}),  # 2
    _compaction(3, 1),                                 # 3: back reference -> id of record 1
    _compaction(4, 0),                                 # 4: the header -> absent
    _compaction(5, 7),                                 # 5: forward reference -> absent
    _compaction(6, "2"),                               # 6: not a number -> untouched
    _user(7, "seven"),                                 # 7
    _compaction(8, 99),                                # 8: no such record -> absent
    _compaction(9, 1.5),                               # 9: no record at a fraction -> absent
    _compaction(10, True),                             # 10: a boolean is not a number -> untouched
    _compaction(11, 2.0),                              # 11: JSON 2.0 is the number 2 -> id of record 2
    _compaction(12, -1),                               # 12: no record -> absent
    _rec("message", 13, message={"role": "hookMessage", "customType": "h", "content": "hooked",
                                 "display": True, "timestamp": 1704067213000}),  # 13
    _rec("thinking_level_change", 14, thinkingLevel="high"),  # 14
]


def _v1_file() -> bytes:
    # A blank line after the first record: record indexes are not line numbers.
    return line(V1_HEADER) + b"\n" + line(V1_RECORDS[0]) + b"\n\n" + jsonl(*V1_RECORDS[1:])


def test_v1_assigns_unique_8_hex_ids_chained_in_file_order() -> None:
    parsed = parse_session(_v1_file(), "v1.jsonl")
    assert parsed.source_version == 1
    assert parsed.steps == ["v1_to_v2", "v2_to_v3", "v3_to_v4"]
    ids = [e["id"] for e in parsed.entries]
    assert len(ids) == len(V1_RECORDS)
    assert all(HEX8.fullmatch(i) for i in ids)
    assert len(set(ids)) == len(ids)
    assert [e["parentId"] for e in parsed.entries] == [None, *ids[:-1]]


def test_v1_ids_are_deterministic_across_reads() -> None:
    first = parse_session(_v1_file(), "v1.jsonl")
    second = parse_session(_v1_file(), "v1.jsonl")
    assert [e["id"] for e in first.entries] == [e["id"] for e in second.entries]
    assert first.to_bytes() == second.to_bytes()


def test_v1_ids_are_unique_in_a_large_file() -> None:
    # B.10: the old collision set was never filled; ours must be real.
    records = [_user(i % 60, f"m{i}") for i in range(30_000)]
    parsed = parse_session(jsonl(V1_HEADER, *records), "big.jsonl")
    ids = [e["id"] for e in parsed.entries]
    assert len(set(ids)) == 30_000
    assert all(HEX8.fullmatch(i) for i in ids)


def test_v1_first_kept_entry_index_conversion() -> None:
    entries = parse_session(_v1_file(), "v1.jsonl").entries
    ids = [e["id"] for e in entries]
    by_index = {i + 1: entry for i, entry in enumerate(entries)}  # header = record 0

    assert by_index[3]["firstKeptEntryId"] == ids[0]
    assert by_index[11]["firstKeptEntryId"] == ids[1]
    for absent in (4, 5, 8, 9, 12):
        assert "firstKeptEntryId" not in by_index[absent], absent
        assert "firstKeptEntryIndex" not in by_index[absent], absent
    assert by_index[3].get("firstKeptEntryIndex", "gone") == "gone"
    assert by_index[6]["firstKeptEntryIndex"] == "2" and "firstKeptEntryId" not in by_index[6]
    assert by_index[10]["firstKeptEntryIndex"] is True and "firstKeptEntryId" not in by_index[10]


def test_v1_new_keys_are_appended_at_the_end() -> None:
    entries = parse_session(_v1_file(), "v1.jsonl").entries
    assert list(entries[0]) == ["type", "timestamp", "message", "id", "parentId"]
    # index deleted; id, parentId, then firstKeptEntryId added in that order
    assert list(entries[2]) == ["type", "timestamp", "summary", "tokensBefore", "id", "parentId", "firstKeptEntryId"]
    assert list(entries[3]) == ["type", "timestamp", "summary", "tokensBefore", "id", "parentId"]
    assert list(entries[5]) == ["type", "timestamp", "summary", "firstKeptEntryIndex", "tokensBefore", "id", "parentId"]
    # written out the same way
    first_line = parse_session(_v1_file(), "v1.jsonl").to_bytes().split(b"\n")[1]
    assert first_line.startswith(line(V1_RECORDS[0])[:-1] + b',"id":"')
    assert first_line.endswith(b'","parentId":null}')


def test_v1_header_becomes_a_v4_header() -> None:
    parsed = parse_session(_v1_file(), "v1.jsonl")
    assert parsed.header == {"type": "session", "version": 4, "id": "sess-v1",
                             "createdAt": "2024-01-01T00:00:00.000Z", "cwd": "/w"}
    assert list(parsed.header) == ["type", "version", "id", "createdAt", "cwd"]
    assert parsed.header_raw == line(parsed.header)


def test_v1_steps_are_cumulative_hook_message_becomes_custom() -> None:
    entries = parse_session(_v1_file(), "v1.jsonl").entries
    assert entries[12]["message"]["role"] == "custom"
    assert entries[12]["message"]["content"] == "hooked"


def test_v1_record_with_invalid_structure_is_rejected_after_upgrade() -> None:
    from sessiontree.errors import InvalidSessionError

    bad = {"type": "message", "timestamp": "2024-01-01T00:00:01.000Z", "message": "not an object"}
    with pytest.raises(InvalidSessionError) as info:
        parse_session(jsonl(V1_HEADER, _user(1, "ok"), bad), "v1.jsonl")
    assert info.value.line == 3


# --------------------------------------------------------------------------- v2 -> v3


V2_HEADER = {"type": "session", "version": 2, "id": "sess-v2", "timestamp": "2024-02-01T00:00:00.000Z", "cwd": "/w"}
HOOK = {"type": "message", "id": "h1", "parentId": None, "timestamp": "2024-02-01T00:00:01.000Z",
        "message": {"role": "hookMessage", "customType": "ext", "content": "from hook", "display": False,
                    "details": {"k": 1}, "timestamp": 1706745601000}}
PLAIN_TEXT = b'{"type":"message", "id":"u1","parentId":"h1","timestamp":"2024-02-01T00:00:02.000Z","message":{"role":"user","content":"hi"}}'
NOT_A_MESSAGE = {"type": "custom", "id": "x1", "parentId": "u1", "timestamp": "2024-02-01T00:00:03.000Z",
                 "customType": "c", "data": {"role": "hookMessage"}, "message": {"role": "hookMessage"}}


def test_v2_hook_message_becomes_custom_and_nothing_else_changes() -> None:
    data = line(V2_HEADER) + b"\n" + line(HOOK) + b"\n" + PLAIN_TEXT + b"\n" + line(NOT_A_MESSAGE) + b"\n"
    parsed = parse_session(data, "v2.jsonl")
    assert parsed.steps == ["v2_to_v3", "v3_to_v4"]
    expected = copy.deepcopy(HOOK)
    expected["message"]["role"] = "custom"
    assert parsed.entries[0] == expected
    assert list(parsed.entries[0]["message"]) == list(HOOK["message"])
    assert parsed.entries[1] == json.loads(PLAIN_TEXT)
    assert parsed.entries[2] == NOT_A_MESSAGE  # only "message" entries are touched
    out = parsed.to_bytes().split(b"\n")
    assert out[1] == line(expected)
    assert out[2] == PLAIN_TEXT  # unchanged entries keep their bytes
    assert out[3] == line(NOT_A_MESSAGE)


# --------------------------------------------------------------------------- v3 / early 4 -> 4


def test_v3_header_upgrade_and_entries_kept_byte_for_byte() -> None:
    header = {"type": "session", "version": 3, "id": "sess-v3", "timestamp": "2024-03-01T00:00:00.000Z", "cwd": "/w"}
    data = line(header) + b"\n" + PLAIN_TEXT.replace(b'"parentId":"h1"', b'"parentId":null') + b"\n"
    parsed = parse_session(data, "v3.jsonl")
    assert parsed.steps == ["v3_to_v4"]
    assert parsed.header == {"type": "session", "version": 4, "id": "sess-v3",
                             "createdAt": "2024-03-01T00:00:00.000Z", "cwd": "/w"}
    assert parsed.to_bytes() == line(parsed.header) + b"\n" + data.split(b"\n")[1] + b"\n"


@pytest.mark.parametrize("version", [3, 4])
def test_created_at_wins_when_both_are_present(version: int) -> None:
    header = {"type": "session", "version": version, "id": "s", "timestamp": "2024-01-01T00:00:00.000Z",
              "createdAt": "2025-05-05T05:05:05.005Z", "cwd": "/w"}
    parsed = parse_session(jsonl(header), "s.jsonl")
    assert parsed.header == {"type": "session", "version": 4, "id": "s", "createdAt": "2025-05-05T05:05:05.005Z", "cwd": "/w"}


def test_early_v4_header_is_upgraded() -> None:
    header = {"type": "session", "version": 4, "id": "early", "timestamp": "2024-01-01T00:00:00.000Z", "cwd": "/w",
              "parentSession": "/old/2024-01-01T00-00-00-000Z_parent-7.jsonl"}
    parsed = parse_session(jsonl(header), "s.jsonl")
    assert parsed.steps == ["v3_to_v4"]
    assert parsed.header == {"type": "session", "version": 4, "id": "early", "createdAt": "2024-01-01T00:00:00.000Z",
                             "cwd": "/w", "parentSessionId": "parent-7"}


def test_early_v4_with_only_parent_session_is_upgraded() -> None:
    header = {"type": "session", "version": 4, "id": "early", "createdAt": "2024-01-01T00:00:00.000Z", "cwd": "/w",
              "parentSession": "parent-8"}
    parsed = parse_session(jsonl(header), "s.jsonl")
    assert parsed.header == {"type": "session", "version": 4, "id": "early", "createdAt": "2024-01-01T00:00:00.000Z",
                             "cwd": "/w", "parentSessionId": "parent-8"}


def test_current_v4_header_is_left_as_written() -> None:
    text = b'{"type":"session","version":4,"id":"s","createdAt":"2024-01-01T00:00:00.000Z","cwd":"/w","zz":1,"parentSessionId":"p"}'
    parsed = parse_session(text + b"\n", "s.jsonl")
    assert parsed.steps == []
    assert parsed.header_raw == text
    assert parsed.to_bytes() == text + b"\n"


def test_v4_header_key_order() -> None:
    # A.3: type, version, id, createdAt, cwd, parentSessionId, internal, workflow.
    workflow = {"stageName": "build", "runId": "run-1", "stageId": "stage-build", "extra": " kept "}
    header = {"cwd": "/w", "workflow": workflow, "legacy": {"a": 1}, "internal": True,
              "parentSession": "parent-9", "timestamp": "2024-01-01T00:00:00.000Z", "id": "ordered",
              "version": 3, "type": "session"}
    parsed = parse_session(jsonl(header), "s.jsonl")
    keys = list(parsed.header)
    assert keys[:8] == ["type", "version", "id", "createdAt", "cwd", "parentSessionId", "internal", "workflow"]
    assert set(keys) == set(keys[:8]) | {"legacy"}
    assert parsed.header["workflow"] == workflow and list(parsed.header["workflow"]) == list(workflow)  # O.2
    assert parsed.header["legacy"] == {"a": 1}  # unknown keys kept (C.9)
    assert parsed.header["internal"] is True


def test_upgrade_header_returns_a_copy() -> None:
    header = {"type": "session", "version": 3, "id": "s", "timestamp": "2024-01-01T00:00:00.000Z", "cwd": "/w",
              "parentSession": "p-1"}
    snapshot = copy.deepcopy(header)
    upgraded = upgrade_header(header)
    assert header == snapshot
    assert upgraded == {"type": "session", "version": 4, "id": "s", "createdAt": "2024-01-01T00:00:00.000Z",
                        "cwd": "/w", "parentSessionId": "p-1"}


# --------------------------------------------------------------------------- parentSession -> parentSessionId (docs/rules/versions.md §3.3)


def _write_parent(directory: Path, file_id: str | Any, name: str) -> Path:
    path = directory / name
    path.write_bytes(jsonl({"type": "session", "version": 3, "id": file_id, "timestamp": "2024-01-01T00:00:00.000Z",
                            "cwd": "/w"}))
    return path


def test_parent_session_branch1_reads_the_header_of_an_existing_file(tmp_path: Path) -> None:
    # The header id wins over what the file name says (first match wins).
    parent = _write_parent(tmp_path, "real-id-42", "2024-01-01T00-00-00-000Z_name-in-file.jsonl")
    assert parent_session_to_id(str(parent)) == "real-id-42"
    child = {"type": "session", "version": 3, "id": "child", "timestamp": "2024-01-02T00:00:00.000Z", "cwd": "/w",
             "parentSession": str(parent)}
    child_path = tmp_path / "child.jsonl"
    child_path.write_bytes(jsonl(child))
    parsed = parse_session(child_path.read_bytes(), str(child_path))
    assert parsed.header == {"type": "session", "version": 4, "id": "child", "createdAt": "2024-01-02T00:00:00.000Z",
                             "cwd": "/w", "parentSessionId": "real-id-42"}
    assert list(parsed.header) == ["type", "version", "id", "createdAt", "cwd", "parentSessionId"]


def test_parent_session_existing_file_without_usable_header_falls_through(tmp_path: Path) -> None:
    parent = _write_parent(tmp_path, 42, "2024-01-01T00-00-00-000Z_from-name.jsonl")
    assert parent_session_to_id(str(parent)) == "from-name"
    garbage = tmp_path / "x_garbage-name.jsonl"
    garbage.write_bytes(b"not json\n")
    assert parent_session_to_id(str(garbage)) == "garbage-name"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # 2: a *.jsonl name: the text after the first "_" (or the whole stem)
        ("/nowhere/2024-12-03T14-00-00-000Z_0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.jsonl",
         "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"),
        ("/nowhere/a_b_c.jsonl", "b_c"),
        ("/nowhere/plain-id.jsonl", "plain-id"),
        ("C:\\Users\\me\\sessions\\2024-01-01T00-00-00-000Z_win-id.jsonl", "win-id"),
        ("2024_abc.jsonl", "abc"),
        # 3: already an id
        ("abc-123_def.456", "abc-123_def.456"),
        ("x", "x"),
        ("abc.jsonl.bak", "abc.jsonl.bak"),
        # 4: dropped
        ("/nowhere/2024_-bad.jsonl", None),
        ("/nowhere/2024_bad id.jsonl", None),
        ("/path/to/file.txt", None),
        ("dir/abc", None),
        ("dir\\abc", None),
        ("a b", None),
        ("-abc", None),
        ("abc\n", None),
        ("é", None),
        ("", None),
        (5, None),
        (None, None),
        (["a"], None),
        ("bad\x00path/x.txt", None),
    ],
)
def test_parent_session_conversion_rules(value: Any, expected: str | None) -> None:
    assert parent_session_to_id(value) == expected


def test_parent_session_conversion_never_fails_an_upgrade(tmp_path: Path) -> None:
    # A directory "exists" but is not a readable session file; no rule matches.
    header = {"type": "session", "version": 3, "id": "child", "timestamp": "2024-01-02T00:00:00.000Z", "cwd": "/w",
              "parentSession": str(tmp_path)}
    parsed = parse_session(jsonl(header), str(tmp_path / "child.jsonl"))
    assert "parentSessionId" not in parsed.header
    assert "parentSession" not in parsed.header
    assert parsed.header["version"] == 4


def test_v1_header_id_with_a_lone_surrogate_upgrades() -> None:
    from sessiontree.format.codec import parse_session

    data = b'{"type":"session","id":"\\ud83dchk","timestamp":"2025-01-01T00:00:00.000Z"}\n' \
           b'{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"a"}}\n'
    parsed = parse_session(data, "f.jsonl")
    assert parsed.header["id"] == "\ud83dchk" and len(parsed.entries[0]["id"]) == 8
