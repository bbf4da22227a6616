"""Tests of sessiontree.check: one damaged file per problem code, exact reports,
exact repairs, and the real corpus.

``tests/data/damaged/<code>.jsonl`` is a damaged input and
``<code>.expected.json`` its exact report (list of ``Problem.to_dict()``),
both written by hand. For a repairable code, ``<code>.repair.json`` is the
exact change list and ``<code>.repaired.jsonl`` the exact repaired copy.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import corpus
from sessiontree.check import checker as check_module
from sessiontree.check.checker import (
    CODES,
    PROBLEM_CODES,
    REPAIRABLE_CODES,
    Change,
    Problem,
    RepairTargetError,
    check_bytes,
    check_file,
    has_errors,
    repair_bytes,
    repair_file,
)
from sessiontree.check.glued import parse_unglued
from sessiontree.format.codec import parse_session
from sessiontree.format.ids import session_id_hash
from support import field_paths

DAMAGED = Path(__file__).resolve().parents[1] / "data" / "damaged"

# The file-name check needs a <timestamp>_<id>.jsonl name; the data file for
# that code is checked under this name instead of its own.
VIRTUAL_NAMES = {"header-id-mismatch": "2026-02-01T09-00-00-000Z_other.jsonl"}

HEADER = b'{"type":"session","version":4,"id":"chk","createdAt":"2026-02-01T09:00:00.000Z","cwd":"/w"}'
USER = (b'{"type":"message","id":"u1","parentId":null,"timestamp":"2026-02-01T09:00:01.000Z",'
        b'"message":{"role":"user","content":"hi","timestamp":1}}')
ASSISTANT = (b'{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-02-01T09:00:02.000Z",'
             b'"message":{"role":"assistant","content":[{"type":"text","text":"hello"}],"stopReason":"stop",'
             b'"timestamp":2}}')
CLEAN = HEADER + b"\n" + USER + b"\n" + ASSISTANT + b"\n"


#: The limit the tests of ``record-too-large`` run under: its data file holds a
#: record of 5,000 bytes (the real limit, 1,000,000,000 bytes, is too big for a test file).
TEST_RECORD_LIMIT = 4096


@pytest.fixture(autouse=True)
def _small_record_limit(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lower ``bounds.MAX_RECORD_BYTES`` for the tests parametrized with ``code="record-too-large"``."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("code") == "record-too-large":
        from sessiontree.format import bounds

        monkeypatch.setattr(bounds, "MAX_RECORD_BYTES", TEST_RECORD_LIMIT, raising=False)


def _name(code: str) -> str:
    return VIRTUAL_NAMES.get(code, f"{code}.jsonl")


def _load(code: str, suffix: str) -> object:
    return json.loads((DAMAGED / f"{code}{suffix}").read_text(encoding="utf-8"))


def _dicts(items: list[Problem] | list[Change]) -> list[dict[str, object]]:
    return [item.to_dict() for item in items]


# ---------------------------------------------------------------- the code table


def test_every_code_has_a_damaged_file_and_an_expected_report() -> None:
    for code in PROBLEM_CODES:
        assert (DAMAGED / f"{code}.jsonl").is_file(), code
        assert (DAMAGED / f"{code}.expected.json").is_file(), code


def test_every_repairable_code_has_a_repair_case() -> None:
    for code in REPAIRABLE_CODES:
        assert (DAMAGED / f"{code}.repair.json").is_file(), code
        assert (DAMAGED / f"{code}.repaired.jsonl").is_file(), code


def test_no_data_file_without_a_code() -> None:
    suffixes = (".expected.json", ".repair.json", ".repaired.jsonl", ".jsonl")
    for path in DAMAGED.iterdir():
        code = next(path.name[: -len(s)] for s in suffixes if path.name.endswith(s))
        assert code in PROBLEM_CODES, path.name


def test_code_table_is_consistent() -> None:
    assert set(PROBLEM_CODES) == set(CODES)
    assert REPAIRABLE_CODES == {c for c, info in CODES.items() if info.repairable}
    for code, info in CODES.items():
        assert code == code.lower() and " " not in code and "_" not in code
        assert info.severity in ("error", "warning")
        assert info.description and "\n" not in info.description
        # The module docstring documents every code with its severity.
        assert f"{code} " in (check_module.__doc__ or ""), code


# ---------------------------------------------------------------- one report per code


@pytest.mark.parametrize("code", sorted(PROBLEM_CODES))
def test_damaged_file_gives_its_exact_report(code: str) -> None:
    data = (DAMAGED / f"{code}.jsonl").read_bytes()
    problems = check_bytes(data, _name(code))
    assert _dicts(problems) == _load(code, ".expected.json")
    assert code in {p.code for p in problems}
    for problem in problems:
        assert problem.severity == CODES[problem.code].severity


@pytest.mark.parametrize("code", sorted(PROBLEM_CODES))
def test_check_file_reads_like_check_bytes(code: str) -> None:
    path = DAMAGED / f"{code}.jsonl"
    before = path.read_bytes()
    assert check_file(path) == check_bytes(before, str(path))
    assert path.read_bytes() == before


# ---------------------------------------------------------------- repairs


@pytest.mark.parametrize("code", sorted(REPAIRABLE_CODES))
def test_repair_gives_exact_changes_and_copy(code: str) -> None:
    data = (DAMAGED / f"{code}.jsonl").read_bytes()
    result = repair_bytes(data, _name(code))
    assert _dicts(result.changes) == _load(code, ".repair.json")
    assert result.data == (DAMAGED / f"{code}.repaired.jsonl").read_bytes()
    assert result.problems == check_bytes(data, _name(code))
    assert result.remaining == check_bytes(result.data, _name(code))
    assert not has_errors(result.remaining)
    assert code not in {p.code for p in result.remaining}
    # The copy is a format-4 file the strict reader accepts.
    assert parse_session(result.data).source_version == 4
    if not has_errors(result.problems):
        # Nothing was damaged: the copy is exactly the reader's own format-4 rewrite (what
        # sync and import read: malformed lines skipped as pi does).
        assert result.data == parse_unglued(data)[0].to_bytes()


@pytest.mark.parametrize("code", sorted(REPAIRABLE_CODES))
def test_repair_is_idempotent(code: str) -> None:
    data = (DAMAGED / f"{code}.jsonl").read_bytes()
    first = repair_bytes(data, _name(code))
    second = repair_bytes(first.data, _name(code))
    assert second.changes == []
    assert second.data == first.data


@pytest.mark.parametrize("code", sorted(set(PROBLEM_CODES) - REPAIRABLE_CODES))
def test_repair_keeps_what_it_cannot_fix(code: str) -> None:
    data = (DAMAGED / f"{code}.jsonl").read_bytes()
    result = repair_bytes(data, _name(code))
    assert result.changes == []
    assert result.data == data  # every such input is otherwise clean format 4
    assert result.remaining == result.problems


def test_dropped_bytes_are_kept_in_the_change() -> None:
    data = (DAMAGED / "nul-bytes.jsonl").read_bytes()
    changes = repair_bytes(data, "x.jsonl").changes
    assert [c.dropped for c in changes] == [b"\x00" * 32, b"\x00" * 16]


def test_repair_file_writes_a_copy_and_leaves_the_input_unchanged(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    shutil.copyfile(DAMAGED / "torn-record.jsonl", source)
    before = source.read_bytes()
    stat = source.stat()
    out = tmp_path / "out" / "fixed.jsonl"
    out.parent.mkdir()
    result = repair_file(source, out)
    assert source.read_bytes() == before
    assert source.stat().st_mtime_ns == stat.st_mtime_ns
    assert out.read_bytes() == result.data == (DAMAGED / "torn-record.repaired.jsonl").read_bytes()
    assert result.out_path == str(out)
    assert not has_errors(check_file(out))
    assert sorted(os.listdir(out.parent)) == ["fixed.jsonl"]  # no temporary file left


def test_repair_file_replaces_an_existing_output(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(CLEAN)
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"old")
    repair_file(source, out)
    assert out.read_bytes() == CLEAN


def test_repair_file_refuses_to_write_over_its_input(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    shutil.copyfile(DAMAGED / "glued-records.jsonl", source)
    before = source.read_bytes()
    link = tmp_path / "link.jsonl"
    link.symlink_to(source)
    hard = tmp_path / "hard.jsonl"
    os.link(source, hard)
    for target in (source, tmp_path / "." / "in.jsonl", link, hard):
        with pytest.raises(RepairTargetError):
            repair_file(source, target)
    assert source.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["hard.jsonl", "in.jsonl", "link.jsonl"]


def test_repair_target_error_is_a_session_and_value_error() -> None:
    from sessiontree.errors import SessionError

    error = RepairTargetError("x.jsonl")
    assert isinstance(error, SessionError) and isinstance(error, ValueError)
    assert error.path == "x.jsonl"


# ---------------------------------------------------------------- more inputs


def test_clean_file_has_no_problem_and_repairs_to_itself() -> None:
    assert check_bytes(CLEAN, "clean.jsonl") == []
    result = repair_bytes(CLEAN, "clean.jsonl")
    assert result.data == CLEAN and result.changes == [] and not result.changed


@pytest.mark.parametrize("data, reason", [
    (b"", "no session header: the file is empty or blank"),
    (b" \n\n\t\n", "no session header: the file is empty or blank"),
])
def test_empty_files_have_no_header(data: bytes, reason: str) -> None:
    problems = check_bytes(data, "e.jsonl")
    assert [(p.code, p.line, p.message) for p in problems if p.code == "missing-header"] == [
        ("missing-header", None, reason)]


def test_torn_header_alone_reports_torn_record_and_missing_header() -> None:
    problems = check_bytes(b'{"type":"session","vers', "t.jsonl")
    assert [(p.code, p.line) for p in problems] == [("missing-header", None), ("torn-final-record", 1)]
    assert problems[0].message == "no session header: the file has no readable record"


def test_several_problems_in_one_file_are_all_reported() -> None:
    data = (b"\xef\xbb\xbf" + HEADER + b"\r\n" + USER + ASSISTANT + b"\r\n" + b"\x00" * 4 + b"\r\n"
            + b'{"type":"label","id":"l1","parentId":"zz","timestamp":"t","targetId":"gone"}\r\n'
            + b'{"type":"message","id":"u1","parentId":"a1"')
    problems = check_bytes(data, "many.jsonl")
    assert [(p.code, p.line) for p in problems] == [
        ("bom", 1),
        ("crlf", 1),
        ("glued-records", 2),
        ("nul-bytes", 3),
        ("dangling-parent", 4),
        ("label-target-missing", 4),
        ("torn-final-record", 5),
    ]
    result = repair_bytes(data, "many.jsonl")
    assert not has_errors(result.remaining)
    assert [p.code for p in result.remaining] == ["label-target-missing"]


def test_torn_record_glued_before_a_record_at_the_end_of_the_file() -> None:
    data = HEADER + b"\n" + USER + b"\n" + b'{"type":"message","id":"x' + ASSISTANT
    problems = check_bytes(data, "t.jsonl")
    assert [(p.code, p.line) for p in problems] == [("torn-record", 3), ("missing-final-newline", 3)]
    assert repair_bytes(data, "t.jsonl").data == CLEAN


def test_record_followed_by_a_torn_tail_on_the_last_line() -> None:
    data = HEADER + b"\n" + USER + b"\n" + ASSISTANT + b'{"type":"message","id":"u2","par'
    problems = check_bytes(data, "t.jsonl")
    assert [(p.code, p.line, p.entry_id) for p in problems] == [("torn-final-record", 3, "u2")]
    assert f"at byte {len(ASSISTANT)} of the line" in problems[0].message
    assert repair_bytes(data, "t.jsonl").data == CLEAN


def test_content_blocks_inside_a_torn_record_are_not_taken_for_records() -> None:
    torn = (b'{"type":"message","id":"a1","parentId":"u1","timestamp":"t","message":{"role":"assistant",'
            b'"content":[{"type":"text","text":"hi"},{"type":"toolCall","id":"c1","name":"x","arguments":{}}')
    problems = check_bytes(HEADER + b"\n" + USER + b"\n" + torn, "t.jsonl")
    assert [p.code for p in problems] == ["torn-final-record"]


def test_malformed_line_is_left_out_of_the_copy_and_its_children_reparented() -> None:
    """Issue 39: readers skip a malformed line as pi does, and the repaired copy leaves it
    out (its bytes in the change); an entry under it climbs to its salvaged parent."""
    broken = b'{"type":"message","id":"a1","parentId":"u1","timestamp":"t","message":{oops}}'
    child = b'{"type":"message","id":"u2","parentId":"a1","timestamp":"t","message":{"role":"user","content":"x"}}'
    data = HEADER + b"\n" + USER + b"\n" + broken + b"\n" + child + b"\n"
    problems = check_bytes(data, "m.jsonl")
    assert [(p.code, p.line, p.entry_id) for p in problems] == [
        ("malformed-line", 3, "a1"), ("dangling-parent", 4, "u2")]
    assert [p.severity for p in problems] == ["warning", "error"]
    assert problems[1].message == 'parentId "a1" names no entry (its record on line 3 is damaged)'
    result = repair_bytes(data, "m.jsonl")
    assert [(c.code, c.line, c.description, c.dropped) for c in result.changes] == [
        ("malformed-line", 3, "dropped the malformed line (readers skip it)", broken),
        ("dangling-parent", 4, 're-parented from missing "a1" to "u1", its nearest surviving ancestor', None)]
    assert result.data == HEADER + b"\n" + USER + b"\n" + child.replace(b'"parentId":"a1"', b'"parentId":"u1"') + b"\n"
    assert result.remaining == []


def test_reparenting_follows_salvaged_parents_through_several_lost_records() -> None:
    lost1 = b'{"type":"message","id":"m2","parentId":"a1","timestamp":"t","mess'
    lost2 = b'{"type":"message","id":"m3","parentId":"m2","timestamp":"t","mess'
    child = b'{"type":"message","id":"m4","parentId":"m3","timestamp":"t","message":{"role":"user","content":"x"}}'
    data = CLEAN + lost1 + lost2 + child + b"\n"
    result = repair_bytes(data, "r.jsonl")
    assert [c.code for c in result.changes] == ["torn-record", "torn-record", "dangling-parent"]
    assert result.changes[-1].description == 're-parented from missing "m3" to "a1", its nearest surviving ancestor'
    assert result.data.endswith(child.replace(b'"parentId":"m3"', b'"parentId":"a1"') + b"\n")
    assert not has_errors(result.remaining)


def test_reparenting_that_closes_a_cycle_is_broken_too() -> None:
    # x1's lost parent "m9" was itself a child of x2, which descends from x1.
    lost = b'{"type":"message","id":"m9","parentId":"x2","timestamp":"t","mess'
    x1 = b'{"type":"custom","id":"x1","parentId":"m9","timestamp":"t","customType":"k"}'
    x2 = b'{"type":"custom","id":"x2","parentId":"x1","timestamp":"t","customType":"k"}'
    data = HEADER + b"\n" + lost + x1 + b"\n" + x2 + b"\n"
    result = repair_bytes(data, "c.jsonl")
    assert [(c.code, c.line) for c in result.changes] == [
        ("torn-record", 2), ("dangling-parent", 2), ("parent-cycle", 2)]
    assert not has_errors(result.remaining)


# A torn "a1" glued before "r1" on line 3, while "a1"'s parent "u1" sits on a
# malformed line (a stray quote) that the copy keeps as written. Found by
# test_never_raises_and_repair_is_stable: the first repair used to keep
# r1 -> "a1" (a record it drops) and a second repair made r1 a root.
_KEPT_U1 = (b'{"type":"message","id":"u1"","parentId":null,"timestamp":"2026-02-01T09:00:01.000Z",'
            b'"message":{"role":"user","content":"hi","timestamp":1}}')
_TORN_A1 = (b'{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-02-01T09:00:02.000Z",'
            b'"message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"read",'
            b'"arguments":{"path":"a.txt"}}],"stopReason":"toolUse",""parentId":"a1"')
_R1 = (b'{"type":"message","id":"r1","parentId":"a1","timestamp":"2026-02-01T09:00:03.000Z",'
       b'"message":{"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text":"data"}],'
       b'"isError":false,"timestamp":3}}')
_A2 = (b'{"type":"message","id":"a2","parentId":"r1","timestamp":"2026-02-01T09:00:04.000Z",'
       b'"message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"read",'
       b'"arguments":{"path":"a.txt"}}],"stopReason":"toolUse","timestamp":4}}')
_R2 = (b'{"type":"message","id":"r2","parentId":"a2","timestamp":"2026-02-01T09:00:05.000Z",'
       b'"message":{"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text":"data"}],'
       b'"isError":false,"timestamp":5}}')


def test_torn_parent_of_an_entry_under_a_kept_malformed_line_is_reparented_in_one_pass() -> None:
    data = b"\n".join([HEADER, _KEPT_U1, _TORN_A1 + _R1, _A2, _R2]) + b"\n"
    problems = check_bytes(data, "k.jsonl")
    assert [(p.code, p.line, p.entry_id) for p in problems] == [
        ("malformed-line", 2, "u1"),
        ("torn-record", 3, "a1"),
        ("dangling-parent", 3, "r1"),
        ("orphan-tool-result", 3, "r1"),
    ]
    result = repair_bytes(data, "k.jsonl")
    assert len(_TORN_A1) == 237
    assert _dicts(result.changes) == [
        # Readers skip the malformed line 2 (as pi does); the copy leaves it out.
        {"code": "malformed-line", "line": 2, "description": "dropped the malformed line (readers skip it)",
         "entryId": "u1", "dropped": _KEPT_U1.decode("utf-8"),
         "droppedBase64": base64.b64encode(_KEPT_U1).decode("ascii")},
        {"code": "torn-record", "line": 3, "description": "dropped the 237-byte torn record", "entryId": "a1",
         "dropped": _TORN_A1.decode("utf-8"), "droppedBase64": base64.b64encode(_TORN_A1).decode("ascii")},
        # "a1" is dropped; its salvaged parent "u1" is dropped too, and was a root.
        {"code": "dangling-parent", "line": 3,
         "description": 're-parented from missing "a1" to null (no ancestor survives): now a root',
         "entryId": "r1"},
    ]
    r1_fixed = (b'{"type":"message","id":"r1","parentId":null,"timestamp":"2026-02-01T09:00:03.000Z",'
                b'"message":{"role":"toolResult","toolCallId":"c1","toolName":"read",'
                b'"content":[{"type":"text","text":"data"}],"isError":false,"timestamp":3}}')
    assert result.data == b"\n".join([HEADER, r1_fixed, _A2, _R2]) + b"\n"
    assert not has_errors(result.remaining)
    again = repair_bytes(result.data, "k.jsonl")
    assert again.changes == [] and again.data == result.data


def test_an_id_on_a_dropped_malformed_line_does_not_survive() -> None:
    # "m1" is both a dropped torn record (child of u1) and readable on a
    # malformed line, which the copy leaves out too (issue 39): x1 climbs to
    # "u1" whichever of the two comes first.
    torn = b'{"type":"message","id":"m1","parentId":"u1","timestamp":"t","mess'
    x1 = b'{"type":"custom","id":"x1","parentId":"m1","timestamp":"t","customType":"k"}'
    kept = b'{"type":"custom","id":"m1","parentId":"u1","timestamp":"t",oops}'
    for lines in ([torn + x1, kept], [kept, torn + x1]):
        data = HEADER + b"\n" + USER + b"\n" + b"\n".join(lines) + b"\n"
        result = repair_bytes(data, "k.jsonl")
        assert sorted(c.code for c in result.changes) == ["dangling-parent", "malformed-line", "torn-record"]
        assert result.data == HEADER + b"\n" + USER + b"\n" + x1.replace(b'"m1"', b'"u1"') + b"\n"
        again = repair_bytes(result.data, "k.jsonl")
        assert again.changes == [] and again.data == result.data


@pytest.mark.parametrize("data, changes, repaired", [
    # CRLF written twice: the CR run is one line end.
    (HEADER + b"\r\r\n" + USER + b"\r\n" + ASSISTANT + b"\r\r\r\n",
     [("crlf", 1, "converted 3 CRLF line ends to LF")], CLEAN),
    # A CR that only a NUL run kept from its LF.
    (HEADER + b"\n" + USER + b"\r\x00\x00\n" + ASSISTANT + b"\n",
     [("nul-bytes", 2, "removed 2 NUL bytes"), ("crlf", 2, "converted 1 CRLF line end to LF")], CLEAN),
    # A malformed line is left out, its CRLF end with it.
    (HEADER + b"\n{oops\r\r\n", [("malformed-line", 2, "dropped the malformed line (readers skip it)"),
                                 ("crlf", 2, "converted 1 CRLF line end to LF")], HEADER + b"\n"),
], ids=["crlf-twice", "cr-nul-lf", "malformed-line"])
def test_cr_runs_before_a_line_feed_are_one_crlf_end(
        data: bytes, changes: list[tuple[str, int, str]], repaired: bytes) -> None:
    result = repair_bytes(data, "cr.jsonl")
    assert [(c.code, c.line, c.description) for c in result.changes] == changes
    assert result.data == repaired
    again = repair_bytes(result.data, "cr.jsonl")
    assert again.changes == [] and again.data == result.data


_BOM_BYTES = b"\xef\xbb\xbf"
_STRIPPED_BOM = ("bom", 1, "removed the UTF-8 byte order mark from the start of the malformed line")
_DROPPED = ("malformed-line", 1, "dropped the malformed line (readers skip it)")


@pytest.mark.parametrize("data, changes, repaired", [
    # A second BOM before a malformed first line would be the copy's BOM.
    (_BOM_BYTES * 2 + b'{oops\n' + USER + b"\n",
     [("bom", 1, "removed the UTF-8 byte order mark"), _STRIPPED_BOM, _DROPPED], USER + b"\n"),
    # A BOM split by a NUL run.
    (b"\xef\xbb\x00\x00\xbf{oops\n" + USER + b"\n",
     [("nul-bytes", 1, "removed 2 NUL bytes"), _STRIPPED_BOM, _DROPPED], USER + b"\n"),
    # A BOM on the second line, once a blank first line is dropped.
    (b" \n" + _BOM_BYTES + b"{oops\n" + USER + b"\n",
     [("blank-line", 1, "removed the whitespace-only line"), ("bom", 2, _STRIPPED_BOM[2]),
      ("malformed-line", 2, _DROPPED[2])], USER + b"\n"),
    # Nothing after the BOM: a blank line.
    (_BOM_BYTES * 2 + b"\n" + HEADER + b"\n",
     [("bom", 1, "removed the UTF-8 byte order mark"), _STRIPPED_BOM,
      ("blank-line", 1, "removed the whitespace-only line")], HEADER + b"\n"),
], ids=["second-bom", "nul-split-bom", "after-blank-line", "bom-only-line"])
def test_a_bom_that_would_begin_the_copy_is_removed(
        data: bytes, changes: list[tuple[str, int, str]], repaired: bytes) -> None:
    result = repair_bytes(data, "b.jsonl")
    assert [(c.code, c.line, c.description) for c in result.changes] == changes
    assert result.data == repaired
    again = repair_bytes(result.data, "b.jsonl")
    assert again.changes == [] and again.data == result.data


def test_duplicate_id_with_other_content_in_format_3_is_an_error() -> None:
    header3 = b'{"type":"session","version":3,"id":"chk","timestamp":"2026-02-01T09:00:00.000Z","cwd":"/w"}'
    other = USER.replace(b'"hi"', b'"bye"')
    problems = check_bytes(header3 + b"\n" + USER + b"\n" + other + b"\n", "d.jsonl")
    assert [(p.code, p.severity, p.line) for p in problems] == [
        ("legacy-version", "warning", 1), ("duplicate-id", "error", 3)]


def test_early_format_4_header_is_a_legacy_warning() -> None:
    early = b'{"type":"session","version":4,"id":"chk","timestamp":"2026-02-01T09:00:00.000Z","cwd":"/w"}'
    data = early + b"\n" + USER + b"\n"
    problems = check_bytes(data, "e.jsonl")
    assert [(p.code, p.line) for p in problems] == [("legacy-version", 1)]
    assert problems[0].message.startswith("early format-4 header")
    assert repair_bytes(data, "e.jsonl").data == HEADER + b"\n" + USER + b"\n"


def test_invalid_header_with_unsupported_version_reports_both() -> None:
    header = b'{"type":"session","version":"4","cwd":"/w"}'
    problems = check_bytes(header + b"\n" + USER + b"\n", "h.jsonl")
    assert [(p.code, p.message) for p in problems] == [
        ("invalid-header", 'header field "id" must be a non-empty string'),
        ("unsupported-version", "unsupported session version '4'"),
    ]


@pytest.mark.parametrize("name, expect_problem", [
    (f"2026-02-01T09-00-00-000Z_{session_id_hash('chk')}.jsonl", False),
    ("2026-02-01T09-00-00-000Z_chk.jsonl", False),
    ("2026-02-01T09-00-00-000Z_0123456789abcdef.jsonl", True),
    ("chk.jsonl", False),
    ("notes_other.jsonl", False),
])
def test_file_name_id_check(name: str, expect_problem: bool) -> None:
    codes = [p.code for p in check_bytes(CLEAN, os.path.join("some", "dir", name))]
    assert codes == (["header-id-mismatch"] if expect_problem else [])


#: a1, below USER: an assistant message calling the ``read`` tool as c1.
CALL = (b'{"type":"message","id":"a1","parentId":"u1","timestamp":"t","message":{"role":"assistant",'
        b'"content":[{"type":"toolCall","id":"c1","name":"read","arguments":{}}],"stopReason":"toolUse"}}')


def _read_result(entry_id: str, parent: str) -> bytes:
    """The record of ``read``'s result for c1 (of :data:`CALL`), as ``entry_id`` below ``parent``."""
    return (b'{"type":"message","id":"' + entry_id.encode() + b'","parentId":"' + parent.encode()
            + b'","timestamp":"t","message":{"role":"toolResult","toolCallId":"c1","toolName":"read",'
            b'"content":[],"isError":false}}')


def test_tool_pairing_is_checked_per_branch() -> None:
    answer = _read_result("r1", "a1")
    system = (b'{"type":"message","id":"s1","parentId":"a1","timestamp":"t","message":{"role":"system",'
              b'"content":"be brief"}}')
    late = _read_result("r2", "s1")
    other = b'{"type":"message","id":"u2","parentId":"a1","timestamp":"t","message":{"role":"user","content":"no"}}'
    # Branch 1 answers c1; branch 2 answers it after a transparent system
    # message; branch 3 leaves it open. One warning, on the call.
    data = HEADER + b"\n" + USER + b"\n" + b"\n".join([CALL, answer, system, late, other]) + b"\n"
    problems = check_bytes(data, "p.jsonl")
    assert [(p.code, p.line, p.entry_id) for p in problems] == [("tool-call-without-result", 3, "a1")]


def test_a_blank_user_message_by_javascript_rules_is_transparent_to_pairing() -> None:
    # U+FEFF is whitespace for JavaScript's trim (not for Python's str.strip): the
    # user message is invisible, conversion drops it, and the later result still
    # answers c1, exactly as the projection pairs it. No warning.
    blank = (b'{"type":"message","id":"u2","parentId":"a1","timestamp":"t","message":{"role":"user",'
             b'"content":"\\ufeff"}}')
    answer = _read_result("r1", "u2")
    data = HEADER + b"\n" + USER + b"\n" + b"\n".join([CALL, blank, answer]) + b"\n"
    assert check_bytes(data, "p.jsonl") == []


def test_trailing_unanswered_call_is_reported() -> None:
    problems = check_bytes(HEADER + b"\n" + USER + b"\n" + CALL + b"\n", "p.jsonl")
    assert [p.code for p in problems] == ["tool-call-without-result"]


def test_nul_bytes_inside_a_record_are_cut_out_and_the_record_kept() -> None:
    data = HEADER + b"\n" + USER[:1] + b"\x00" * 3 + USER[1:] + b"\n" + ASSISTANT + b"\n"
    problems = check_bytes(data, "n.jsonl")
    assert [(p.code, p.line, p.message) for p in problems] == [
        ("nul-bytes", 2, "run of 3 NUL bytes at byte 1 of the line (left by a crash)")]
    assert repair_bytes(data, "n.jsonl").data == CLEAN


def test_torn_tail_padded_with_nul_bytes_reports_offsets_in_the_stored_line() -> None:
    tail = b'{"type":"message","id":"u2","parentId":"a1","times'
    data = CLEAN + b"\x00" * 8 + tail + b"\x00" * 100
    problems = check_bytes(data, "n.jsonl")
    assert [(p.code, p.line, p.message) for p in problems] == [
        ("nul-bytes", 4, "run of 8 NUL bytes at byte 0 of the line (left by a crash)"),
        ("nul-bytes", 4, f"run of 100 NUL bytes at byte {8 + len(tail)} of the line (left by a crash)"),
        ("torn-final-record", 4,
         f"torn final record: the last line is incomplete JSON with no newline ({len(tail)} bytes at byte 8 of the line)"),
    ]
    result = repair_bytes(data, "n.jsonl")
    assert result.data == CLEAN
    assert [c.dropped for c in result.changes] == [b"\x00" * 8, b"\x00" * 100, tail]


def test_deeply_nested_line_is_reported_not_a_crash() -> None:
    # Deeper than the nesting limit before it is found incomplete: reported as too deep.
    data = HEADER + b"\n" + b"[" * 200_000 + b"\n" + USER + b"\n"
    problems = check_bytes(data, "n.jsonl")
    assert [(p.code, p.line) for p in problems] == [("nesting-too-deep", 2)]
    assert repair_bytes(data, "n.jsonl").data == data


def test_problem_and_change_dicts() -> None:
    problem = Problem("bom", "warning", "f.jsonl", 1, "m", None)
    assert problem.to_dict() == {"code": "bom", "severity": "warning", "path": "f.jsonl", "line": 1,
                                 "message": "m", "entryId": None}
    assert str(problem) == "f.jsonl:1: warning: m [bom]"
    assert str(Problem("missing-header", "error", "f.jsonl", None, "m")) == "f.jsonl: error: m [missing-header]"
    change = Change("nul-bytes", 2, "removed", None, b"\x00\xff")
    assert change.to_dict()["dropped"] == "\x00\\xff"
    assert change.to_dict()["droppedBase64"] == "AP8="
    assert "dropped" not in Change("crlf", 1, "converted").to_dict()
    with pytest.raises(AttributeError):
        problem.code = "x"  # type: ignore[misc]


# ---------------------------------------------------------------- robustness

_SAMPLES = [
    (DAMAGED / f"{code}.jsonl").read_bytes() for code in ("duplicate-tool-call-id", "compaction-kept-off-branch",
                                                          "legacy-version", "duplicate-id", "parent-cycle")
]


@st.composite
def _damaged(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(_SAMPLES)))
    for _ in range(draw(st.integers(0, 4))):
        where = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["cut", "insert", "delete", "replace"]))
        chunk = draw(st.sampled_from([b"\n", b"\x00\x00\x00", b"{", b"}", b'"', b"\r\n", b"\xff", b"\\ud83d",
                                      b'"parentId":"a1"', b'{"type":"session","id":"x"}', b" "]))
        if action == "cut":
            del data[where:]
        elif action == "insert":
            data[where:where] = chunk
        elif action == "delete":
            del data[where:where + draw(st.integers(1, 40))]
        else:
            data[where:where + len(chunk)] = chunk
    return bytes(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_damaged())
def test_never_raises_and_repair_is_stable(data: bytes) -> None:
    problems = check_bytes(data, "fuzz.jsonl")
    for problem in problems:
        assert problem.code in CODES and problem.severity == CODES[problem.code].severity
    result = repair_bytes(data, "fuzz.jsonl")
    assert result.remaining == check_bytes(result.data, "fuzz.jsonl")
    left = {p.code for p in result.remaining if p.severity == "error"} & REPAIRABLE_CODES
    # Only a child of a record on a kept malformed line stays dangling (on purpose).
    assert left <= {"dangling-parent"}
    if left:
        assert "malformed-line" in {p.code for p in result.remaining}
    again = repair_bytes(result.data, "fuzz.jsonl")
    assert again.data == result.data and again.changes == []


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_never_raises_on_arbitrary_bytes(data: bytes) -> None:
    check_bytes(data, "bytes.jsonl")
    repair_bytes(data, "bytes.jsonl")


# ---------------------------------------------------------------- the real corpus

# (file, expected warnings as (code, line)); no errors expected. Both files
# are format 1, so entry ids are the ones the upgrade assigns; the test takes
# them from the strict reader rather than pinning the migration's generator.
CORPUS_WARNINGS = {
    "pi-v1/pi-mono-large-session.jsonl": [
        ("legacy-version", 1),
    ],
    "pi-v1/pi-mono-before-compaction.jsonl": [
        ("legacy-version", 1),
        ("retired-compaction", 360),
        ("tool-call-without-result", 628),
        ("retired-compaction", 629),
    ],
}


#: Where each file is read: the large session from the repository, the other from the whole corpus.
CORPUS_PATHS = {corpus.LARGE_SESSION: corpus.vendored(corpus.LARGE_SESSION),
                corpus.BEFORE_COMPACTION: corpus.shared(corpus.BEFORE_COMPACTION)}


@pytest.mark.parametrize("name", [pytest.param(name, marks=corpus.NEEDS_SHARED)
                                  if name == corpus.BEFORE_COMPACTION else name for name in sorted(CORPUS_WARNINGS)])
def test_real_corpus_has_no_errors(name: str) -> None:
    path = CORPUS_PATHS[name]
    problems = check_file(path)
    assert not has_errors(problems)
    assert [(p.code, p.line) for p in problems] == CORPUS_WARNINGS[name]
    data = path.read_bytes()
    parsed = parse_session(data, str(path))
    id_at_line = dict(zip(parsed.lines, (entry["id"] for entry in parsed.entries), strict=False))
    assert [p.entry_id for p in problems] == [id_at_line.get(p.line) if p.line != 1 else None for p in problems]
    result = repair_bytes(data, str(path))
    # The only repair is the upgrade, and it is the strict reader's own rewrite.
    assert [c.code for c in result.changes] == ["legacy-version"]
    assert result.data == parsed.to_bytes()
    assert [(p.code, p.entry_id) for p in result.remaining] == [
        (p.code, p.entry_id) for p in problems if p.code != "legacy-version"]


# --------------------------------------------------------------------------
# Every JSON type in every field

# One entry of every type, with the fields each rule of check reads, so
# substituting a field reaches the rule that reads it.
_ALL_TYPES_SESSION = [
    {"type": "session", "version": 4, "id": "types", "createdAt": "2026-02-01T09:00:00.000Z", "cwd": "/w",
     "parentSessionId": "p1"},
    {"type": "model_change", "id": "e1", "parentId": None, "timestamp": "2026-02-01T09:00:01.000Z",
     "provider": "anthropic", "modelId": "m"},
    {"type": "thinking_level_change", "id": "e2", "parentId": "e1", "timestamp": "2026-02-01T09:00:02.000Z",
     "thinkingLevel": "high"},
    {"type": "context_window_change", "id": "e3", "parentId": "e2", "timestamp": "2026-02-01T09:00:03.000Z",
     "contextWindow": 1000},
    {"type": "message", "id": "e4", "parentId": "e3", "timestamp": "2026-02-01T09:00:04.000Z",
     "message": {"role": "user", "content": [{"type": "text", "text": "hi"},
                                             {"type": "image", "data": "AA==", "mimeType": "image/png"}],
                 "timestamp": 4}},
    {"type": "message", "id": "e5", "parentId": "e4", "timestamp": "2026-02-01T09:00:05.000Z",
     "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"},
                                                  {"type": "toolCall", "id": "c1", "name": "bash",
                                                   "arguments": {"command": "ls"}}],
                 "stopReason": "toolUse", "excludeFromContext": False, "timestamp": 5}},
    {"type": "message", "id": "e6", "parentId": "e5", "timestamp": "2026-02-01T09:00:06.000Z",
     "message": {"role": "toolResult", "toolCallId": "c1", "toolName": "bash",
                 "content": [{"type": "text", "text": "a"}], "isError": False, "timestamp": 6}},
    {"type": "message", "id": "e7", "parentId": "e6", "timestamp": "2026-02-01T09:00:07.000Z",
     "message": {"role": "bashExecution", "command": "ls", "output": "a", "exitCode": 0,
                 "excludeFromContext": True, "timestamp": 7}},
    {"type": "custom_message", "id": "e8", "parentId": "e7", "timestamp": "2026-02-01T09:00:08.000Z",
     "customType": "note", "content": "x", "display": True, "details": {"k": 1}},
    {"type": "custom", "id": "e9", "parentId": "e8", "timestamp": "2026-02-01T09:00:09.000Z",
     "customType": "state", "data": {"k": 1}},
    {"type": "label", "id": "e10", "parentId": "e9", "timestamp": "2026-02-01T09:00:10.000Z",
     "targetId": "e4", "label": "start"},
    {"type": "context_edit", "id": "e11", "parentId": "e10", "timestamp": "2026-02-01T09:00:11.000Z",
     "targetId": "e6", "replacement": {"content": "short"}},
    {"type": "compaction", "id": "e12", "parentId": "e11", "timestamp": "2026-02-01T09:00:12.000Z",
     "summary": "s", "firstKeptEntryId": "e4", "tokensBefore": 10,
     "details": {"strategy": "verbatim-lines"},
     "systemMessage": {"role": "system", "content": "sys"}},
    {"type": "context_compaction", "id": "e13", "parentId": "e12", "timestamp": "2026-02-01T09:00:13.000Z"},
    {"type": "branch_summary", "id": "e14", "parentId": "e13", "timestamp": "2026-02-01T09:00:14.000Z",
     "fromId": "e5", "summary": "b"},
    {"type": "session_info", "id": "e15", "parentId": "e14", "timestamp": "2026-02-01T09:00:15.000Z",
     "name": "n"},
    {"type": "session_summary", "id": "e16", "parentId": "e15", "timestamp": "2026-02-01T09:00:16.000Z",
     "summarizedThroughId": "e14", "summary": "done"},
]

_JSON_SAMPLES = [None, True, 3, 2.5, "x", ["a", {"role": "user"}], {"role": ["user"], "type": {}}]


_field_paths = field_paths


def _substituted(records: list, index: int, path: tuple, replacement: object) -> bytes:
    copy = json.loads(json.dumps(records))
    target = copy[index]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = replacement
    return b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in copy)


def test_every_json_type_in_every_field_never_raises():
    """A list/object role reached projection.convert.normalize_entry and
    raised TypeError (unhashable). Every rule must take any JSON type anywhere."""
    base = b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in _ALL_TYPES_SESSION)
    # The sample is clean but for its inert legacy record.
    assert [p.code for p in check_bytes(base, "types.jsonl")] == ["retired-compaction"]
    tried = 0
    for index, record in enumerate(_ALL_TYPES_SESSION):
        for path in _field_paths(record):
            for replacement in _JSON_SAMPLES:
                data = _substituted(_ALL_TYPES_SESSION, index, path, replacement)
                try:
                    check_bytes(data, "types.jsonl")
                    result = repair_bytes(data, "types.jsonl")
                except Exception as exc:
                    pytest.fail(f"record {index} field {path!r} = {replacement!r}: {exc!r}")
                assert result.remaining == check_bytes(result.data, "types.jsonl")
                tried += 1
    assert tried > 700


def test_list_role_is_reported_not_raised():
    """The case that reached the projection: a message whose role is an array."""
    data = _substituted(_ALL_TYPES_SESSION, 4, ("message", "role"), ["user"])
    codes = [(p.code, p.line) for p in check_bytes(data, "types.jsonl")]
    assert ("invalid-entry", 5) in codes


# --------------------------------------------------------------------------
# check and import agree

HEADER_4_0 = b'{"type":"session","version":4.0,"id":"four","createdAt":"2026-02-01T09:00:00.000Z","cwd":"/w"}'
FILE_4_0 = HEADER_4_0 + b"\n" + USER + b"\n" + ASSISTANT + b"\n"


def _stores(tmp_path: Path) -> dict[str, object]:
    from sessiontree.stores.jsonl.store import JsonlStore
    from sessiontree.stores.memory import MemoryStore
    from sessiontree.stores.sqlite.store import SqliteStore

    return {"memory": MemoryStore(), "sqlite": SqliteStore(tmp_path / "s.db"), "jsonl": JsonlStore(tmp_path / "store")}


def test_version_4_0_is_version_4_in_check_and_read(tmp_path: Path) -> None:
    """JSON cannot tell 4.0 from 4: every path takes it as format 4."""
    from sessiontree.format.codec import read_session_file

    assert check_bytes(FILE_4_0, "four.jsonl") == []
    path = tmp_path / "four.jsonl"
    path.write_bytes(FILE_4_0)
    parsed = read_session_file(path)
    assert parsed.header["version"] == 4 and type(parsed.header["version"]) is int
    assert parsed.source_version == 4
    assert parsed.upgraded is False  # already format 4: nothing to persist


@pytest.mark.parametrize("kind", ["memory", "sqlite", "jsonl"])
def test_version_4_0_imports_into_every_store(tmp_path: Path, kind: str) -> None:
    from sessiontree.format.codec import read_session_file
    from sessiontree.session.manager import SessionManager

    path = tmp_path / "four.jsonl"
    path.write_bytes(FILE_4_0)
    store = _stores(tmp_path)[kind]
    manager = SessionManager.import_session(read_session_file(path), None, store)
    assert [e["id"] for e in manager.get_entries()] == ["u1", "a1"]
    manager.append_message({"role": "user", "content": "more"})
    reread = SessionManager.open(store, "four")
    assert len(reread.get_entries()) == 3


@pytest.mark.parametrize("kind", ["memory", "sqlite", "jsonl"])
def test_version_4_0_header_created_directly_in_every_store(tmp_path: Path, kind: str) -> None:
    store = _stores(tmp_path)[kind]
    header = json.loads(HEADER_4_0)
    assert isinstance(header["version"], float)
    store.create(header)  # type: ignore[attr-defined]
    assert store.read("four").header["id"] == "four"  # type: ignore[attr-defined]


def test_version_4_0_open_file_and_migrate(tmp_path: Path) -> None:
    from sessiontree.format.migrate import migrate_file
    from sessiontree.session.manager import SessionManager

    path = tmp_path / "four.jsonl"
    path.write_bytes(FILE_4_0)
    result = migrate_file(path)
    assert (result.upgraded, result.backup, result.from_version) == (False, None, 4)
    assert path.read_bytes() == FILE_4_0
    manager = SessionManager.open_file(path)
    manager.append_message({"role": "user", "content": "more"})
    assert path.read_bytes().startswith(FILE_4_0)
    assert check_bytes(path.read_bytes(), "four.jsonl") == []


def test_invalid_session_id_in_header_is_an_error() -> None:
    """``import`` refuses a header id that is not a valid session id; check says so."""
    from sessiontree.errors import InvalidSessionIdError
    from sessiontree.session.manager import SessionManager
    from sessiontree.stores.memory import MemoryStore

    data = HEADER.replace(b'"id":"chk"', b'"id":"../../etc/x"') + b"\n" + USER + b"\n"
    problems = check_bytes(data, "x.jsonl")
    assert [(p.code, p.severity, p.line) for p in problems] == [("invalid-session-id", "error", 1)]
    assert "../../etc/x" in problems[0].message
    with pytest.raises(InvalidSessionIdError):
        SessionManager.import_session(parse_session(data, "x.jsonl"), None, MemoryStore())


def _imports(data: bytes, name: str, store: object) -> bool:
    """Whether the library's import (what ``sessiontree import`` runs) accepts the bytes."""
    from sessiontree.errors import SessionError
    from sessiontree.session.manager import SessionManager

    try:
        # What `sessiontree import` reads with (session/importing.py): glued records read
        # apart, malformed lines skipped as pi does.
        SessionManager.import_session(parse_unglued(data, name)[0], None, store)  # type: ignore[arg-type]
    except SessionError:
        return False
    return True


@pytest.mark.parametrize("code", sorted(CODES))
def test_import_accepts_column_matches_import(tmp_path: Path, code: str) -> None:
    """The table's ``import_accepts`` flag, checked against a real import of the
    code's damaged file (which shows that code, plus at most codes that do
    not decide the outcome), into a memory and an SQLite store."""
    data = (DAMAGED / f"{code}.jsonl").read_bytes()
    codes = {p.code for p in check_bytes(data, _name(code))}
    assert code in codes
    others = codes - {code}
    # Another code in the file must not decide the outcome on its own.
    assert all(CODES[c].import_accepts for c in others) or not CODES[code].import_accepts, others
    stores = _stores(tmp_path)
    for kind in ("memory", "sqlite"):
        assert _imports(data, _name(code), stores[kind]) == CODES[code].import_accepts, (code, kind)


def test_docs_code_table_matches_codes() -> None:
    """docs/check.md lists every code with the severity, repair and import flags of CODES."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "check.md").read_text(encoding="utf-8")
    rows = {}
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = tuple(cells[1:4])
    expected = {code: (info.severity, "yes" if info.repairable else "no", "yes" if info.import_accepts else "no")
                for code, info in CODES.items()}
    assert rows == expected


# ---------------------------------------------------------------- the record size limit import refuses


def test_a_record_over_the_store_limit_is_reported_and_refused_by_import(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """check and import share one limit (bounds.MAX_RECORD_BYTES): a record of 5,000 bytes
    over a 4,096-byte limit is an error for check and refused by import into every store; a
    record of exactly the limit is fine."""
    from click.testing import CliRunner

    from sessiontree.cli import cli
    from sessiontree.errors import InvalidSessionError
    from sessiontree.format import bounds
    from sessiontree.session.manager import SessionManager

    monkeypatch.setattr(bounds, "MAX_RECORD_BYTES", TEST_RECORD_LIMIT, raising=False)
    data = (DAMAGED / "record-too-large.jsonl").read_bytes()
    assert len(data.split(b"\n")[1]) == 5000
    problems = check_bytes(data, "big.jsonl")
    assert [(p.code, p.severity, p.line, p.entry_id) for p in problems] == [("record-too-large", "error", 2, "u1")]
    path = tmp_path / "big.jsonl"
    path.write_bytes(data)
    result = CliRunner().invoke(cli, ["check", str(path)])
    assert result.exit_code == 1 and "[record-too-large]" in result.output and ": ok" not in result.output
    for kind, store in _stores(tmp_path).items():
        with pytest.raises(InvalidSessionError, match="record of 5,000 bytes is over the 4,096 bytes"):
            SessionManager.import_session(parse_session(data, str(path)), None, store)
        assert store.session_ids() == [], kind  # type: ignore[attr-defined]
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / "cli.db"), "import", str(path)])
    assert result.exit_code == 1 and "line 2: a record of 5,000 bytes is over the 4,096" in result.output
    # At the limit itself: no problem, and import accepts it.
    monkeypatch.setattr(bounds, "MAX_RECORD_BYTES", 5000)
    assert check_bytes(data, "big.jsonl") == []
    SessionManager.import_session(parse_session(data, str(path)), None, _stores(tmp_path / "at")["memory"])


def test_the_record_limit_is_sqlites_own() -> None:
    """The shared limit is what the SQLite library stores at most (SQLITE_LIMIT_LENGTH)."""
    import sqlite3

    from sessiontree.format.bounds import MAX_RECORD_BYTES

    conn = sqlite3.connect(":memory:")
    try:
        assert conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) == MAX_RECORD_BYTES == 1_000_000_000
    finally:
        conn.close()
