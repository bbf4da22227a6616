"""The JSONL codec: reading rules of format 4 (``seed:session-version``; docs/rules/format.md
D.1-D.23, docs/rules/versions.md C.12-C.13, docs/rules/decisions.md D-2, D-3, D-10, D-15) and writing (E.1).

Fixture lines are built with the standard library's ``json`` (never with the
code under test), and every expected value is worked out from the rules.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree.errors import InvalidSessionError, UnsupportedVersionError
from sessiontree.format import jsonio
from sessiontree.format.codec import (
    parse_session,
    read_header_file,
    read_session_file,
    serialize_session,
    validate_entry,
    validate_header,
)

# --------------------------------------------------------------------------- helpers

HEADER = {"type": "session", "version": 4, "id": "sess-1", "createdAt": "2024-12-03T14:00:00.000Z", "cwd": "/p"}


def line(obj: Any) -> bytes:
    """Compact JSON as the original agent writes it (docs/rules/format.md E.1)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def msg(entry_id: str, parent: str | None, text: str = "Hello", role: str = "user",
        ts: str = "2024-12-03T14:00:01.000Z") -> dict[str, Any]:
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": ts,
            "message": {"role": role, "content": text}}


def jsonl(*records: Any) -> bytes:
    return b"".join((r if isinstance(r, bytes) else line(r)) + b"\n" for r in records)


E1 = msg("a1b2c3d4", None, "Hello")
E2 = msg("b2c3d4e5", "a1b2c3d4", "Again", ts="2024-12-03T14:00:02.000Z")
BASIC = jsonl(HEADER, E1, E2)


def reject(data: bytes, path: str | None = "s.jsonl") -> InvalidSessionError:
    with pytest.raises(InvalidSessionError) as info:
        parse_session(data, path)
    return info.value


# --------------------------------------------------------------------------- accepted shapes


def test_reads_a_format4_session() -> None:
    parsed = parse_session(BASIC, "s.jsonl")
    assert parsed.header == HEADER
    assert parsed.entries == [E1, E2]
    assert parsed.source_version == 4
    assert parsed.steps == []


def test_blank_lines_anywhere_are_skipped() -> None:
    # D.3: empty and whitespace-only lines are skipped, even before the header.
    data = b"\n  \n\t\r\n" + line(HEADER) + b"\n\n" + line(E1) + b"\n \t \n\n" + line(E2) + b"\n\n  \n"
    parsed = parse_session(data, "s.jsonl")
    assert parsed.header == HEADER
    assert parsed.entries == [E1, E2]
    # Physical 1-based lines: header on line 4, E1 on line 6, E2 on line 9.
    assert parsed.lines == [6, 9]


def test_complete_final_record_without_newline_is_accepted() -> None:
    data = line(HEADER) + b"\n" + line(E1) + b"\n" + line(E2)
    parsed = parse_session(data, "s.jsonl")
    assert parsed.entries == [E1, E2]


def test_header_only_file_without_newline_is_accepted() -> None:
    parsed = parse_session(line(HEADER), "s.jsonl")
    assert parsed.header == HEADER
    assert parsed.entries == []


def test_utf8_bom_is_accepted() -> None:
    parsed = parse_session(b"\xef\xbb\xbf" + BASIC, "s.jsonl")
    assert parsed.header == HEADER
    assert parsed.entries == [E1, E2]


def test_only_one_bom_is_stripped() -> None:
    # D-3: *one* leading BOM; a second one leaves the header line unparsable.
    err = reject(b"\xef\xbb\xbf\xef\xbb\xbf" + BASIC)
    assert err.line == 1


def test_crlf_line_ends_are_accepted() -> None:
    data = BASIC.replace(b"\n", b"\r\n")
    parsed = parse_session(data, "s.jsonl")
    assert parsed.header == HEADER
    assert parsed.entries == [E1, E2]


def test_crlf_final_record_without_lf_is_accepted() -> None:
    data = line(HEADER) + b"\r\n" + line(E1) + b"\r"
    assert parse_session(data, "s.jsonl").entries == [E1]


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\u0085", "\x1c", "\x1d", "\x1e"])
def test_line_separators_inside_strings_do_not_split_lines(char: str) -> None:
    # D-3: lines are split on "\n" only. Raw U+2028/U+2029/U+0085 are legal
    # inside JSON strings (the control characters are escaped by any writer).
    text = f"before{char}after"
    entry = msg("a1", None, text)
    data = line(HEADER) + b"\n" + json.dumps(entry, ensure_ascii=False).encode() + b"\n"
    assert char.encode() in data or char < " "  # U+2028/9/85 really are raw in the file
    parsed = parse_session(data, "s.jsonl")
    assert len(parsed.entries) == 1
    assert parsed.entries[0]["message"]["content"] == text


@pytest.mark.parametrize(
    "separator",
    [b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", "\u2028".encode(), "\u2029".encode(), "\u0085".encode()],
    ids=["CR", "VT", "FF", "FS", "GS", "RS", "LS", "PS", "NEL"],
)
def test_records_are_never_split_on_other_line_breaks(separator: bytes) -> None:
    # Two records joined by a non-"\n" break are one line, which is not one
    # JSON object: the session is rejected at that line (D-2, D-3).
    data = line(HEADER) + b"\n" + line(E1) + separator + line(E2) + b"\n"
    err = reject(data)
    assert err.line == 2


def test_unknown_entry_type_with_valid_base_is_kept_verbatim() -> None:
    # D-10 / D.21; ``spec:data-model`` names upstream types such as "leaf".
    unknown_text = b'{"type":"leaf","id":"l1","parentId":"a1b2c3d4","timestamp":"2024-12-03T14:00:03.000Z","targetId":"a1b2c3d4","x":[1, 2]}'
    data = line(HEADER) + b"\n" + line(E1) + b"\n" + unknown_text + b"\n"
    parsed = parse_session(data, "s.jsonl")
    assert parsed.entries[1] == {"type": "leaf", "id": "l1", "parentId": "a1b2c3d4",
                                 "timestamp": "2024-12-03T14:00:03.000Z", "targetId": "a1b2c3d4", "x": [1, 2]}
    assert parsed.to_bytes() == data


def test_stored_entries_are_written_back_byte_for_byte() -> None:
    # ``spec:data-model``: each entry's original JSON text is kept; export writes it back.
    odd = b'{ "type" : "message", "id":"z1", "parentId":null, "timestamp":"2024-12-03T14:00:01.000Z", "message":{"content":"caf\\u00e9 1.0", "role":"user"}, "n": 1.0 }'
    data = line(HEADER) + b"\n" + odd + b"\n"
    parsed = parse_session(data, "s.jsonl")
    assert parsed.entries[0]["message"]["content"] == "café 1.0"
    assert parsed.to_bytes() == data
    assert serialize_session(parsed.header, parsed.entries, parsed.raw) == data


def test_orphans_self_parents_and_cycles_are_tolerated_on_load() -> None:
    # D.22: the loader keeps them; the tree handles them.
    entries = [
        msg("r", None),
        msg("orphan", "missing-id"),
        msg("self", "self"),
        msg("c1", "c2"),
        msg("c2", "c1"),
    ]
    parsed = parse_session(jsonl(HEADER, *entries), "s.jsonl")
    assert [e["id"] for e in parsed.entries] == ["r", "orphan", "self", "c1", "c2"]


def test_any_nonempty_string_is_an_entry_id() -> None:
    # B.2: readers accept any non-empty string id ("1", "m1").
    entries = [msg("1", None), msg("m1", "1")]
    assert parse_session(jsonl(HEADER, *entries), "s.jsonl").entries == entries


# --------------------------------------------------------------------------- rejected lines


def test_torn_final_record_is_rejected_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "torn.jsonl"
    torn = line(E2)[:25]  # '{"type":"message","id":"b' : cut mid-record, no newline
    path.write_bytes(line(HEADER) + b"\n" + line(E1) + b"\n" + torn)
    with pytest.raises(InvalidSessionError) as info:
        read_session_file(path)
    err = info.value
    assert not isinstance(err, UnsupportedVersionError)
    assert err.path == str(path)
    assert err.line == 3
    assert err.reason
    assert str(path) in str(err)


def test_torn_header_is_rejected() -> None:
    err = reject(line(HEADER)[:30])
    assert err.line == 1


def test_malformed_middle_line_is_rejected_with_its_line() -> None:
    data = line(HEADER) + b"\n\n" + line(E1) + b"\n" + b'{"type":"message","id":' + b"\n" + line(E2) + b"\n"
    err = reject(data)
    assert err.path == "s.jsonl"
    assert err.line == 4


def test_malformed_line_terminated_by_newline_at_end_is_rejected() -> None:
    # Not "torn" (it has its newline) but still not an object: rejected, never skipped.
    data = line(HEADER) + b"\n" + line(E1) + b"\n" + b'{"type":"mess' + b"\n"
    assert reject(data).line == 3


def test_two_objects_glued_on_one_line_are_rejected() -> None:
    # D-2 / E.9: the v3 writer could glue records; the reader does not guess.
    data = line(HEADER) + b"\n" + line(E1) + line(E2) + b"\n"
    assert reject(data).line == 2


def test_nan_and_infinity_are_not_json() -> None:
    bad = b'{"type":"custom","id":"c","parentId":null,"timestamp":"t","data":NaN}'
    assert reject(line(HEADER) + b"\n" + bad + b"\n").line == 2


@pytest.mark.parametrize("value", [b"[1,2]", b'"text"', b"42", b"null", b"true", b"[]"])
def test_non_object_line_is_rejected(value: bytes) -> None:
    data = line(HEADER) + b"\n" + value + b"\n" + line(E1) + b"\n"
    assert reject(data).line == 2


@pytest.mark.parametrize("value", [b"[1,2]", b'"session"', b"null"])
def test_non_object_first_line_is_rejected(value: bytes) -> None:
    assert reject(value + b"\n" + line(E1) + b"\n").line == 1


@pytest.mark.parametrize("data", [b"", b"\n", b"  \n\t\n", b"\xef\xbb\xbf"])
def test_empty_or_blank_file_is_rejected(data: bytes) -> None:
    reject(data)


def test_missing_header_is_rejected() -> None:
    err = reject(jsonl(E1, E2))
    assert not isinstance(err, UnsupportedVersionError)
    assert err.line == 1


def test_header_not_first_is_rejected() -> None:
    err = reject(jsonl(E1, HEADER, E2))
    assert err.line == 1


@pytest.mark.parametrize("header_type", ["Session", "message", None, 5])
def test_header_with_wrong_type_is_rejected(header_type: Any) -> None:
    header = dict(HEADER, type=header_type)
    assert reject(jsonl(header, E1)).line == 1


@pytest.mark.parametrize("bad_id", ["<absent>", "", 5, None, ["sess"]])
def test_header_without_a_string_id_is_rejected(bad_id: Any) -> None:
    header = dict(HEADER)
    if bad_id == "<absent>":
        del header["id"]
    else:
        header["id"] = bad_id
    err = reject(jsonl(header, E1))
    assert err.line == 1
    assert "id" in err.reason


@pytest.mark.parametrize(
    ("field", "value", "version"),
    [("cwd", 5, 4), ("cwd", None, 4), ("cwd", ["/p"], 4), ("createdAt", 1733234400000, 4),
     ("timestamp", 1733234400000, 3), ("timestamp", None, 3)],
)
def test_header_field_of_wrong_type_is_rejected(field: str, value: Any, version: int) -> None:
    # D.18: cwd, createdAt and timestamp, when present, are strings.
    header = dict(HEADER, version=version)
    header[field] = value
    err = reject(b"\n" + jsonl(header, E1), "f.jsonl")
    assert err.line == 2
    assert err.path == "f.jsonl"
    assert field in err.reason


def test_header_without_cwd_is_accepted() -> None:
    header = {k: v for k, v in HEADER.items() if k != "cwd"}
    assert parse_session(jsonl(header, E1), "s.jsonl").entries == [E1]


# --------------------------------------------------------------------------- versions


@pytest.mark.parametrize(
    ("raw_version", "expected"),
    [(b"5", 5), (b"9", 9), (b'"3"', "3"), (b'"4"', "4"), (b"0", 0), (b"-1", -1), (b"2.5", 2.5), (b"4.5", 4.5),
     (b"true", True), (b"false", False), (b"null", None), (b"[4]", [4]), (b"{}", {})],
)
def test_unrecognized_versions_are_rejected(raw_version: bytes, expected: Any) -> None:
    # C.2 (the old code loaded version 9), C.12, C.13.
    data = b'{"type":"session","version":' + raw_version + b',"id":"s","cwd":"/p"}\n' + line(E1) + b"\n"
    with pytest.raises(UnsupportedVersionError) as info:
        parse_session(data, "v.jsonl")
    err = info.value
    assert isinstance(err, InvalidSessionError)
    assert type(err.version) is type(expected) and err.version == expected
    assert err.path == "v.jsonl"
    assert err.line == 1


def test_future_version_is_rejected_by_file_readers(tmp_path: Path) -> None:
    path = tmp_path / "future.jsonl"
    path.write_bytes(jsonl(dict(HEADER, version=5), E1))
    with pytest.raises(UnsupportedVersionError) as info:
        read_session_file(path)
    assert info.value.version == 5 and info.value.path == str(path) and info.value.line == 1
    with pytest.raises(UnsupportedVersionError):
        read_header_file(path)


def test_integral_float_version_is_accepted() -> None:
    # C.13: JS cannot tell 3.0 from 3.
    data = b'{"type":"session","version":3.0,"id":"s","timestamp":"2024-01-01T00:00:00.000Z","cwd":"/p"}\n' + line(E1) + b"\n"
    parsed = parse_session(data, "s.jsonl")
    assert parsed.source_version == 3
    assert parsed.header == {"type": "session", "version": 4, "id": "s", "createdAt": "2024-01-01T00:00:00.000Z", "cwd": "/p"}
    assert type(parsed.header["version"]) is int
    assert parsed.entries == [E1]


@pytest.mark.parametrize(("version_field", "expected"), [(b"", 1), (b'"version":1,', 1), (b'"version":2,', 2),
                                                          (b'"version":3,', 3), (b'"version":4,', 4)])
def test_recognized_versions(version_field: bytes, expected: int) -> None:
    data = b'{"type":"session",' + version_field + b'"id":"s","cwd":"/p"}\n'
    parsed = parse_session(data, "s.jsonl")
    assert parsed.source_version == expected
    assert parsed.header["version"] == 4


# --------------------------------------------------------------------------- entry structure (D.19)


def _entry_base(entry_type: str, **fields: Any) -> dict[str, Any]:
    return {"type": entry_type, "id": "x1", "parentId": "a1b2c3d4", "timestamp": "2024-12-03T14:00:05.000Z", **fields}


def _without(entry: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != key}


INVALID_ENTRIES = [
    ("type", _without(_entry_base("custom"), "type")),
    ("type", _entry_base("")),
    ("type", dict(_entry_base("custom"), type=7)),
    ("id", _without(_entry_base("custom"), "id")),
    ("id", dict(_entry_base("custom"), id="")),
    ("id", dict(_entry_base("custom"), id=12345678)),
    ("parentId", _without(_entry_base("custom"), "parentId")),
    ("parentId", dict(_entry_base("custom"), parentId=5)),
    ("parentId", dict(_entry_base("custom"), parentId=["a1b2c3d4"])),
    ("timestamp", _without(_entry_base("custom"), "timestamp")),
    ("timestamp", dict(_entry_base("custom"), timestamp=1733234405000)),
    ("message", _entry_base("message")),
    ("message", _entry_base("message", message="hi")),
    ("role", _entry_base("message", message={"content": "hi"})),
    ("role", _entry_base("message", message={"role": None, "content": "hi"})),
    ("targetId", _entry_base("label", label="x")),
    ("label", _entry_base("label", targetId="a1b2c3d4", label=5)),
    ("label", _entry_base("label", targetId="a1b2c3d4", label=None)),
    ("targetId", _entry_base("context_edit", replacement=None)),
    ("replacement", _entry_base("context_edit", targetId="a1b2c3d4")),
    ("replacement", _entry_base("context_edit", targetId="a1b2c3d4", replacement="text")),
    ("replacement", _entry_base("context_edit", targetId="a1b2c3d4", replacement={"content": 5})),
    ("replacement", _entry_base("context_edit", targetId="a1b2c3d4", replacement={})),
    ("summary", _entry_base("compaction", firstKeptEntryId=None)),
    ("summary", _entry_base("compaction", summary=None)),
    ("firstKeptEntryId", _entry_base("compaction", summary="s", firstKeptEntryId=3)),
]


@pytest.mark.parametrize(("field", "entry"), INVALID_ENTRIES, ids=[f"{f}-{i}" for i, (f, _) in enumerate(INVALID_ENTRIES)])
def test_structurally_invalid_entry_is_rejected(field: str, entry: dict[str, Any]) -> None:
    err = reject(jsonl(HEADER, E1, entry), "bad.jsonl")
    assert err.path == "bad.jsonl"
    assert err.line == 3
    assert field in err.reason
    with pytest.raises(InvalidSessionError):
        validate_entry(entry)


VALID_EDGE_ENTRIES = [
    _entry_base("label", targetId="a1b2c3d4"),  # cleared with "undefined": no label key (A.13)
    _entry_base("label", targetId="a1b2c3d4", label=""),  # cleared with ""
    _entry_base("label", targetId="nowhere", label="kept"),  # target need not exist (I.5)
    _entry_base("context_edit", targetId="a1b2c3d4", replacement=None),
    _entry_base("context_edit", targetId="a1b2c3d4", replacement={"content": "text"}),
    _entry_base("context_edit", targetId="a1b2c3d4", replacement={"content": [{"type": "text", "text": "t"}]}),
    _entry_base("compaction", summary="", firstKeptEntryId=None),
    _entry_base("compaction", summary="s"),
    _entry_base("compaction", summary="s", firstKeptEntryId="a1b2c3d4", details={"strategy": "other"}),
    dict(_entry_base("message", message={"role": "hookMessage"}), parentId=None),
    _entry_base("usage", kind="x"),
]


@pytest.mark.parametrize("entry", VALID_EDGE_ENTRIES)
def test_structurally_valid_edge_entries_are_accepted(entry: dict[str, Any]) -> None:
    assert parse_session(jsonl(HEADER, E1, entry), "s.jsonl").entries == [E1, entry]


def test_validate_header_returns_the_version() -> None:
    assert validate_header(HEADER) == 4
    assert validate_header({"type": "session", "id": "s"}) == 1
    with pytest.raises(InvalidSessionError):
        validate_header(["not", "an", "object"])


# --------------------------------------------------------------------------- duplicates (D-15)


def test_duplicate_entry_id_in_format4_is_rejected() -> None:
    # Even a byte-identical duplicate: old writers never wrote format 4.
    err = reject(jsonl(HEADER, E1, E2, E1), "dup.jsonl")
    assert err.line == 4
    assert err.path == "dup.jsonl"


def test_duplicate_entry_id_with_other_content_in_format4_is_rejected() -> None:
    err = reject(jsonl(HEADER, E1, msg("a1b2c3d4", None, "different")))
    assert err.line == 3


def test_second_header_in_format4_is_rejected() -> None:
    err = reject(jsonl(HEADER, E1, HEADER, E2))
    assert err.line == 3


@pytest.mark.parametrize("version", [2, 3])
def test_old_format_byte_identical_duplicates_and_extra_headers_are_dropped(version: int) -> None:
    header = {"type": "session", "version": version, "id": "old", "timestamp": "2024-12-03T14:00:00.000Z", "cwd": "/p"}
    other_header = dict(header, cwd="/elsewhere")  # an extra header need not be identical
    data = jsonl(header, E1, header, E1, other_header, E2, E1, E2)
    parsed = parse_session(data, "old.jsonl")
    assert parsed.entries == [E1, E2]
    assert parsed.header["cwd"] == "/p"
    assert parsed.lines == [2, 6]


@pytest.mark.parametrize("version", [2, 3])
def test_old_format_duplicate_id_with_different_content_is_rejected(version: int) -> None:
    header = {"type": "session", "version": version, "id": "old", "timestamp": "2024-12-03T14:00:00.000Z", "cwd": "/p"}
    changed = msg("a1b2c3d4", None, "Hello!")
    err = reject(jsonl(header, E1, E2, changed), "old.jsonl")
    assert err.line == 4


def test_old_format_duplicate_differing_only_in_spacing_is_rejected() -> None:
    header = {"type": "session", "version": 3, "id": "old", "timestamp": "2024-12-03T14:00:00.000Z", "cwd": "/p"}
    spaced = json.dumps(E1).encode()  # same content, different bytes
    err = reject(jsonl(header, E1) + spaced + b"\n")
    assert err.line == 3


def test_v1_byte_identical_duplicates_and_extra_headers_are_dropped() -> None:
    header = {"type": "session", "id": "v1dup", "timestamp": "2024-12-03T14:00:00.000Z", "cwd": "/p"}
    r1 = {"type": "message", "timestamp": "2024-12-03T14:00:01.000Z", "message": {"role": "user", "content": "a"}}
    r2 = {"type": "message", "timestamp": "2024-12-03T14:00:02.000Z", "message": {"role": "assistant", "content": []}}
    parsed = parse_session(jsonl(header, r1, r1, header, r2), "v1.jsonl")
    assert [e["message"]["content"] for e in parsed.entries] == ["a", []]
    assert parsed.entries[0]["parentId"] is None
    assert parsed.entries[1]["parentId"] == parsed.entries[0]["id"]


# --------------------------------------------------------------------------- lone surrogates


SURROGATE_ENTRY_TEXT = (
    b'{"type":"message","id":"s1","parentId":null,"timestamp":"2024-12-03T14:00:01.000Z",'
    b'"message":{"role":"toolResult","toolCallId":"c","toolName":"bash","content":[{"type":"text","text":"cut \\ud83d"}],'
    b'"isError":false,"timestamp":1733234401000},"k\\udc00":"\\udfff end"}'
)


def test_lone_surrogate_escapes_are_read() -> None:
    parsed = parse_session(line(HEADER) + b"\n" + SURROGATE_ENTRY_TEXT + b"\n", "s.jsonl")
    entry = parsed.entries[0]
    assert entry["message"]["content"][0]["text"] == "cut \ud83d"
    assert entry["k\udc00"] == "\udfff end"


def test_lone_surrogates_survive_raw_bytes_and_reserialization() -> None:
    data = line(HEADER) + b"\n" + SURROGATE_ENTRY_TEXT + b"\n"
    parsed = parse_session(data, "s.jsonl")
    assert parsed.to_bytes() == data  # stored text
    assert serialize_session(parsed.header, parsed.entries) == data  # re-serialized from the dicts
    again = parse_session(serialize_session(parsed.header, parsed.entries), "s.jsonl")
    assert again.entries == parsed.entries


def test_escaped_surrogate_pair_is_one_character() -> None:
    entry_text = b'{"type":"custom","id":"e","parentId":null,"timestamp":"t","data":"\\ud83d\\ude00"}'
    parsed = parse_session(line(HEADER) + b"\n" + entry_text + b"\n", "s.jsonl")
    assert parsed.entries[0]["data"] == "\U0001f600"


def test_invalid_utf8_is_decoded_with_replacement_and_kept_raw() -> None:
    # D.1: invalid sequences become U+FFFD (as Node's decoder does).
    entry_text = b'{"type":"custom","id":"e","parentId":null,"timestamp":"t","data":"a\xffb"}'
    data = line(HEADER) + b"\n" + entry_text + b"\n"
    parsed = parse_session(data, "s.jsonl")
    assert parsed.entries[0]["data"] == "a\ufffdb"
    assert parsed.to_bytes() == data


# --------------------------------------------------------------------------- read-only readers


def _write_old_files(tmp_path: Path) -> list[Path]:
    v1 = tmp_path / "v1.jsonl"
    v1.write_bytes(jsonl({"type": "session", "id": "one", "timestamp": "2024-01-01T00:00:00.000Z", "cwd": "/p"},
                         {"type": "message", "timestamp": "2024-01-01T00:00:01.000Z", "message": {"role": "user", "content": "x"}}))
    v3 = tmp_path / "v3.jsonl"
    v3.write_bytes(b"\xef\xbb\xbf" + jsonl({"type": "session", "version": 3, "id": "three", "timestamp": "2024-01-01T00:00:00.000Z",
                                            "cwd": "/p", "parentSession": str(v1)}, E1).replace(b"\n", b"\r\n"))
    early4 = tmp_path / "early4.jsonl"
    early4.write_bytes(line({"type": "session", "version": 4, "id": "four", "timestamp": "2024-01-01T00:00:00.000Z", "cwd": "/p"})
                       + b"\n" + line(E1))  # and no final newline
    return [v1, v3, early4]


def test_readers_never_modify_the_file(tmp_path: Path) -> None:
    # C.10, D-9: reading upgrades in memory only.
    for path in _write_old_files(tmp_path):
        before = path.read_bytes()
        stat = os.stat(path)
        parsed = read_session_file(path)
        header = read_header_file(path)
        assert parsed.header["version"] == 4 and header["version"] == 4
        assert path.read_bytes() == before
        assert os.stat(path).st_mtime_ns == stat.st_mtime_ns
    assert sorted(p.name for p in tmp_path.iterdir()) == ["early4.jsonl", "v1.jsonl", "v3.jsonl"]


def test_read_header_file_upgrades_in_memory(tmp_path: Path) -> None:
    v1, v3, early4 = _write_old_files(tmp_path)
    assert read_header_file(v3) == {"type": "session", "version": 4, "id": "three",
                                    "createdAt": "2024-01-01T00:00:00.000Z", "cwd": "/p", "parentSessionId": "one"}
    assert read_header_file(v1) == {"type": "session", "version": 4, "id": "one",
                                    "createdAt": "2024-01-01T00:00:00.000Z", "cwd": "/p"}
    assert read_header_file(early4)["createdAt"] == "2024-01-01T00:00:00.000Z"


def test_read_header_file_reads_only_the_header(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\n \n" + line(HEADER) + b"\n" + b'{"torn')
    assert read_header_file(path) == HEADER


def test_read_header_file_rejects_missing_header(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(jsonl(E1))
    with pytest.raises(InvalidSessionError) as info:
        read_header_file(path)
    assert info.value.line == 1 and info.value.path == str(path)
    blank = tmp_path / "blank.jsonl"
    blank.write_bytes(b"\n\n")
    with pytest.raises(InvalidSessionError):
        read_header_file(blank)


# --------------------------------------------------------------------------- writing (E.1)


def test_serialize_session_writes_compact_lines() -> None:
    entry = {"type": "message", "id": "a1", "parentId": None, "timestamp": "2024-12-03T14:00:01.000Z",
             "message": {"role": "user", "content": "día\n\"quoted\"\u2028", "timestamp": 1733234401000}}
    data = serialize_session(HEADER, [entry])
    expected = (
        '{"type":"session","version":4,"id":"sess-1","createdAt":"2024-12-03T14:00:00.000Z","cwd":"/p"}\n'
        '{"type":"message","id":"a1","parentId":null,"timestamp":"2024-12-03T14:00:01.000Z",'
        '"message":{"role":"user","content":"día\\n\\"quoted\\"\u2028","timestamp":1733234401000}}\n'
    ).encode("utf-8")
    assert data == expected


def test_serialize_session_uses_stored_text_when_given() -> None:
    stored = b'{"type": "custom", "id": "c", "parentId": null, "timestamp": "t"}'
    entry = {"type": "custom", "id": "c", "parentId": None, "timestamp": "t"}
    data = serialize_session(HEADER, [entry, E1], [stored, None])
    assert data == line(HEADER) + b"\n" + stored + b"\n" + line(E1) + b"\n"


def test_serialize_session_with_no_entries() -> None:
    assert serialize_session(HEADER, []) == line(HEADER) + b"\n"


# --------------------------------------------------------------------------- round-trip properties

_SPECIAL = ["\ud83d", "\ude00", "\udfff", "\ud800", "\u2028", "\u2029", "\u0085", "\n", "\r", "\x00", '"', "\\",
            "\ufeff", "é", "\U0001f600", "\x7f"]
_chars = st.one_of(st.characters(), st.sampled_from(_SPECIAL))


def _break_surrogate_pairs(text: str) -> str:
    # A Python str holding a high surrogate followed by a low one is, in JSON
    # (UTF-16 escapes), the same string as the paired character: no writer can
    # keep them apart. Lone surrogates are what the format must preserve.
    out = []
    for ch in text:
        if out and "\ud800" <= out[-1] <= "\udbff" and "\udc00" <= ch <= "\udfff":
            out.append("|")
        out.append(ch)
    return "".join(out)


texts = st.text(_chars, max_size=12).map(_break_surrogate_pairs)
nonempty_texts = st.text(_chars, min_size=1, max_size=12).map(_break_surrogate_pairs)
# Format-4 numbers are JavaScript numbers: integers within the safe range.
json_scalars = (st.none() | st.booleans() | st.integers(-(2**53 - 1), 2**53 - 1)
                | st.floats(allow_nan=False, allow_infinity=False) | texts)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=16,
)
BASE_KEYS = {"type", "id", "parentId", "timestamp"}
VALIDATED_TYPES = {"session", "message", "label", "context_edit", "compaction"}
TYPED_FIELDS = {
    "message": lambda: st.fixed_dictionaries({"message": st.fixed_dictionaries(
        {"role": texts}, optional={"content": json_values, "x": json_values})}),
    "label": lambda: st.fixed_dictionaries({"targetId": texts}, optional={"label": texts}),
    "context_edit": lambda: st.fixed_dictionaries({"targetId": texts, "replacement": st.none() | st.fixed_dictionaries(
        {"content": texts | st.lists(json_values, max_size=3)}, optional={"extra": json_values})}),
    "compaction": lambda: st.fixed_dictionaries({"summary": texts}, optional={"firstKeptEntryId": st.none() | texts,
                                                                               "details": json_values}),
    "custom": lambda: st.fixed_dictionaries({"customType": texts}, optional={"data": json_values}),
    "session_info": lambda: st.fixed_dictionaries({}, optional={"name": json_values}),
}


@st.composite
def sessions(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    header: dict[str, Any] = {"type": "session", "version": 4, "id": draw(nonempty_texts),
                              "createdAt": draw(texts), "cwd": draw(texts)}
    reserved = set(header) | {"timestamp", "parentSession"}  # those would make it an early-4 header
    for key, value in draw(st.dictionaries(texts.filter(lambda k: k not in reserved), json_values, max_size=3)).items():
        header[key] = value
    ids = draw(st.lists(nonempty_texts, unique=True, max_size=8))
    entries = []
    for i, entry_id in enumerate(ids):
        entry_type = draw(st.sampled_from([*TYPED_FIELDS, "branch_summary", "leaf"]) | nonempty_texts.filter(lambda t: t not in VALIDATED_TYPES))
        parent = draw(st.none() | st.sampled_from(ids[:i] or [None]) | texts)
        entry: dict[str, Any] = {"type": entry_type, "id": entry_id, "parentId": parent, "timestamp": draw(texts)}
        if entry_type in TYPED_FIELDS:
            entry.update(draw(TYPED_FIELDS[entry_type]()))
        taken = BASE_KEYS | set(entry)
        for key, value in draw(st.dictionaries(texts.filter(lambda k, taken=taken: k not in taken), json_values, max_size=3)).items():
            entry[key] = value
        entries.append(entry)
    return header, entries


def _key_orders(value: Any) -> Any:
    """The value with every dict replaced by its list of (key, ...) pairs: equality then checks key order."""
    if isinstance(value, dict):
        return [(k, _key_orders(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_key_orders(v) for v in value]
    return (type(value).__name__, value)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_roundtrip_of_generated_sessions(session: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    header, entries = session
    data = serialize_session(header, entries)
    parsed = parse_session(data, "gen.jsonl")
    # Numbers are JavaScript numbers (doubles): 4.922093561796222e16 is written
    # 49220935617962220 (docs/format-bytes.md) and reads back as that int, the same double.
    assert _doubles(parsed.header) == _doubles(header)
    assert _doubles(parsed.entries) == _doubles(entries)
    # Key order and number types as JavaScript sees them once written:
    # array-index keys first, ascending; integral floats written without ".0" read back as ints.
    assert _key_orders(parsed.header) == _key_orders(_js_view(header))
    assert _key_orders(parsed.entries) == _key_orders(_js_view(entries))
    assert data.count(b"\n") == len(entries) + 1


def _doubles(value: Any) -> Any:
    """``value`` with every number as a float (bools kept), for equality as JavaScript numbers."""
    if isinstance(value, dict):
        return {k: _doubles(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_doubles(v) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return value


def _js_view(value: Any) -> Any:
    """``value`` as read back from ``JSON.stringify``'s text (the exact serialiser, not dumps)."""
    return jsonio.loads(jsonio.js_stringify(value))


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_raw_bytes_roundtrip_of_generated_sessions(session: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    header, entries = session
    data = serialize_session(header, entries)
    parsed = parse_session(data, "gen.jsonl")
    assert parsed.to_bytes() == data
    assert serialize_session(parsed.header, parsed.entries) == data
    assert serialize_session(parsed.header, parsed.entries, parsed.raw) == data


def test_bad_line_followed_by_unterminated_blank_is_malformed_not_torn() -> None:
    # The bad record ends with "\n": only a whitespace fragment follows it.
    data = b'{"type":"session","version":4,"id":"a"}\n{bad\n  '
    with pytest.raises(InvalidSessionError) as info:
        parse_session(data, "f.jsonl")
    assert info.value.line == 2 and info.value.reason.startswith("malformed line")


def test_absurdly_nested_line_is_rejected_not_a_crash() -> None:
    data = b'{"type":"session","version":4,"id":"a"}\n' + b"[" * 100_000 + b"\n"
    with pytest.raises(InvalidSessionError) as info:
        parse_session(data, "f.jsonl")
    assert info.value.line == 2


def test_parse_session_accepts_text() -> None:
    text = '{"type":"session","version":4,"id":"a"}\n{"type":"custom","customType":"é","id":"1","parentId":null,"timestamp":"t"}\n'
    parsed = parse_session(text, "f.jsonl")
    assert parsed.entries[0]["customType"] == "é" and parsed.to_bytes() == text.encode("utf-8")
