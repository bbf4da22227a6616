"""Find damage in session files and write repaired copies (``sessiontree check``).

People bring session files damaged by crashes, full disks, concurrent
writers, editors (BOM, CRLF) and old versions. :func:`check_bytes` reports
every problem it can find in one pass, each with file, 1-based line and a
stable code; :func:`repair_bytes` derives a repaired format-4 copy and lists
every change it made. Neither ever modifies its input (docs/rules/decisions.md D-9).

Invariants:

* Tolerant: no input makes :func:`check_bytes` or :func:`repair_bytes` raise.
  A damaged line does not hide the problems of the lines after it.
* Idempotent: repairing a repaired copy changes nothing (no change listed,
  the same bytes). Each repair decides from what the copy will hold, not
  from what it drops, so a second pass reaches the same decisions.
* The strict reader's rules are not restated here: header and entry shapes
  are judged by :func:`~sessiontree.format.validate_header`,
  :func:`~sessiontree.format.validate_entry` and
  :func:`~sessiontree.format.parse_version`, whose messages become the
  problem messages; upgrades run through :func:`~sessiontree.migrations.upgrade`.
* :data:`CODES` is the single source of the codes, their severity, whether
  ``--repair`` fixes them and their one-line description.

Severity. An *error* is damage: the strict reader rejects the file (docs/rules/versions.md
seed:session-version, docs/rules/format.md D.17-D.19,
docs/rules/decisions.md D-2, D-15), or reading it silently
loses or misplaces content, or a provider request built from it is refused.
A *warning* is legacy or odd content that every reader handles in a defined
way (an upgrade, a skipped line, an inert record, a synthetic tool result).
A caller exits 1 when any error was found.

================================  ========  ======  =================================
code                              severity  repair  what
================================  ========  ======  =================================
torn-final-record                 error     yes     last record incomplete, no newline
torn-record                       error     yes     incomplete record, then a record
malformed-line                    error     no      line is not one JSON object
glued-records                     error     yes     several records on one line
nul-bytes                         error     yes     run of NUL bytes left by a crash
invalid-utf8                      error     no      bytes that are not UTF-8
lone-surrogate                    error     no      ``"\\ud83d"``-style lone surrogate
missing-header                    error     no      no ``type:"session"`` first record
invalid-header                    error     no      header fails validate_header
invalid-session-id                error     no      header id not a valid session id
unsupported-version               error     no      future or unknown version
extra-header                      error     no      second header in a format-4 file
invalid-entry                     error     no      entry fails validate_entry
duplicate-id                      error     yes     two entries with one id
dangling-parent                   error     yes     parentId names no entry
parent-cycle                      error     yes     parentId links form a cycle
compaction-kept-off-branch        error     no      firstKeptEntryId not on the branch
tool-arguments-not-object         error     no      toolCall ``arguments`` not an object
duplicate-tool-call-id            error     no      one call id in two assistant turns
bom                               warning   yes     UTF-8 byte order mark
crlf                              warning   yes     CRLF line ends
missing-final-newline             warning   yes     last record without newline
blank-line                        warning   yes     whitespace-only line
legacy-version                    warning   yes     format 1-3 or early-4 header
legacy-duplicate                  warning   yes     old writers' duplicate record/header
unknown-entry-type                warning   no      entry type this library lacks
unknown-message-role              warning   no      message role this library lacks
retired-compaction                warning   no      inert retired compaction record
tool-call-without-result          warning   no      unanswered call of a toolUse turn
orphan-tool-result                warning   no      result with no call in its window
duplicate-tool-result             warning   no      second result for one call
label-target-missing              warning   no      label on a missing entry
edit-target-missing               warning   no      context edit of a missing entry
summary-target-missing            warning   no      session_summary anchor missing
header-id-mismatch                warning   no      file name id differs from header
nesting-too-deep                  error     no      record deeper than jsonio.MAX_DEPTH
================================  ========  ======  =================================

``docs/check.md`` holds the full table, including which codes ``import``
still accepts (:attr:`CodeInfo.import_accepts`).

Why some are warnings: tool-pairing gaps are repaired by every projection
(docs/rules/projection.md seed:interrupted-tool-calls,
docs/rules/decisions.md D-11), dangling label/edit/summary targets
are tolerated and inert (docs/rules/tree.md I.5, docs/rules/projection.md R.4,
docs/rules/listing.md K.4), and file names are never
parsed for identity (docs/rules/decisions.md D-7).

Reading rules the checker follows. Lines are split on ``\\n`` only (docs/rules/decisions.md D-3).
A line that does not parse is taken apart with ``json.JSONDecoder.raw_decode``:
two or more complete objects are *glued records*; an incomplete record
followed by a complete one (a crash, then an append after it) is a *torn
record*; an incomplete tail at the very end of the file with no newline is a
*torn final record*; anything else is *malformed*. NUL bytes never occur in
valid JSON text, so runs of them are cut out first. Ids are resolved as an
appending writer sees them: a reference names the nearest earlier entry
with that id (the first one for a forward reference).

Tool pairing (docs/rules/projection.md P.4-P.7, P.9, docs/rules/decisions.md D-11) is checked on the stored
messages along every branch, before context edits and compaction: an
assistant message opens a window, results match its calls by id, any other
context-visible message closes it, ``system`` messages are transparent.

Repairs are conservative and each is listed as a :class:`Change`: split
glued records; drop torn records, NUL runs and blank lines (dropped bytes
kept in the change); keep one copy of a byte-identical duplicate; rename a
differing duplicate id (to a deterministic 8-hex id) together with the
references that name it; re-parent an entry whose parent is missing to its
nearest surviving ancestor, or make it a root when none survives; break a
cycle at its first entry in file order, which becomes a root (as the tree
already treats it, docs/rules/tree.md H.2); strip a BOM, CRLF ends, add the final
newline, and upgrade to format 4 exactly as the reader does. Everything else
is kept as written: a malformed line stays in the copy byte for byte
(without its NUL runs), so what the repair cannot fix is still reported by
``check`` on the copy (:attr:`RepairResult.remaining`).

Surviving ancestors. The walk starts at the missing parent and climbs
through the records this repair drops (torn records), using the
``parentId`` salvaged from each. An id *survives* when the copy still holds
it: as an entry, or readable on a malformed line that the copy keeps as
written (an id readable from a kept malformed line counts as surviving,
even when a torn record with the same id is dropped too). So an entry whose
missing parent is itself on a kept line is left alone (fixing that line by
hand restores the link), and one whose lost parent descends from a kept
line is re-parented to that line's id, still reported as a dangling parent
until the line is fixed. The walk never stops at a dropped record, so a
second repair of the copy, which no longer holds it, finds the same ancestor.

Line ends and the first line. A run of CRs before the LF (CRLF written
twice, or with NUL runs between the CR and the LF) is one CRLF end, so no CR
is left to make the copy's LF a CRLF again. A BOM at the start of a
malformed line before any record (a second BOM, or one that NUL runs had
split) would be the copy's leading BOM, which readers strip; it is removed
(``bom``) and the rest of the line is read as the line.
"""

from __future__ import annotations

import base64
import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from sessiontree.core.projection import closes_tool_window, entry_to_context_messages, is_active_compaction
from sessiontree.errors import INVALID_SESSION_ID_MESSAGE, InvalidSessionError, SessionError, UnsupportedVersionError
from sessiontree.format import jsonio
from sessiontree.format.codec import parse_version, split_lines, validate_entry, validate_header
from sessiontree.format.ids import derived_entry_id, is_valid_session_id, session_id_hash
from sessiontree.format.outfile import write_atomic
from sessiontree.format.types import ENTRY_TYPES, MESSAGE_ROLES
from sessiontree.format.upgrade import Records, upgrade

__all__ = [
    "CODES",
    "PROBLEM_CODES",
    "REPAIRABLE_CODES",
    "Change",
    "CodeInfo",
    "Problem",
    "RepairResult",
    "RepairTargetError",
    "Severity",
    "check_bytes",
    "check_file",
    "has_errors",
    "repair_bytes",
    "repair_file",
    "write_repaired",
]

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class CodeInfo:
    """What a problem code means.

    Attributes:
        severity: ``"error"`` or ``"warning"`` (see the module docstring).
        repairable: whether :func:`repair_bytes` fixes it.
        description: one line for listings and ``--help``.
        import_accepts: whether ``sessiontree import`` (and
            :meth:`~sessiontree.manager.SessionManager.import_session` after
            :func:`~sessiontree.format.read_session_file`) still accepts a
            file whose only problem has this code: readers tolerate many
            errors on purpose (see ``docs/check.md``).
    """

    severity: Severity
    repairable: bool
    description: str
    import_accepts: bool


#: Every problem code: the single source of codes, severities and descriptions.
CODES: dict[str, CodeInfo] = {
    "torn-final-record": CodeInfo(
        "error", True, "the last record is incomplete JSON with no newline after it",
        import_accepts=False),
    "torn-record": CodeInfo(
        "error", True, "an incomplete record followed, on the same line, by a record appended later",
        import_accepts=False),
    "malformed-line": CodeInfo(
        "error", False, "a line that is not a JSON object and cannot be split into records",
        import_accepts=False),
    "glued-records": CodeInfo(
        "error", True, "two or more complete records on one line with no newline between them",
        import_accepts=False),
    "nul-bytes": CodeInfo(
        "error", True, "a run of NUL bytes, as left by a crash",
        import_accepts=False),
    "invalid-utf8": CodeInfo(
        "error", False, "bytes that are not UTF-8 (readers see U+FFFD)",
        import_accepts=True),
    "lone-surrogate": CodeInfo(
        "error", False, "a lone UTF-16 surrogate escape such as \\ud83d, which providers reject",
        import_accepts=True),
    "missing-header": CodeInfo(
        "error", False, 'no session header: the first record is not {"type": "session"}',
        import_accepts=False),
    "invalid-header": CodeInfo(
        "error", False, "the session header has a missing or wrongly typed field",
        import_accepts=False),
    "invalid-session-id": CodeInfo(
        "error", False, "the header id is not a valid session id, so import refuses the file",
        import_accepts=False),
    "unsupported-version": CodeInfo(
        "error", False, "the header's version is a future or unrecognized value",
        import_accepts=False),
    "extra-header": CodeInfo(
        "error", False, "a second session header in a format-4 file",
        import_accepts=False),
    "invalid-entry": CodeInfo(
        "error", False, "an entry with a missing or wrongly typed field",
        import_accepts=False),
    "duplicate-id": CodeInfo(
        "error", True, "two entries share one id",
        import_accepts=False),
    "dangling-parent": CodeInfo(
        "error", True, "an entry's parentId names no entry",
        import_accepts=True),
    "parent-cycle": CodeInfo(
        "error", True, "parentId links form a cycle that no root reaches",
        import_accepts=True),
    "compaction-kept-off-branch": CodeInfo(
        "error", False, "a verbatim compaction whose firstKeptEntryId is not before it on its branch",
        import_accepts=True),
    "tool-arguments-not-object": CodeInfo(
        "error", False, "a tool call whose arguments is not a JSON object",
        import_accepts=True),
    "duplicate-tool-call-id": CodeInfo(
        "error", False, "one tool call id in two assistant messages of a branch",
        import_accepts=True),
    "bom": CodeInfo(
        "warning", True, "a UTF-8 byte order mark at the start of the file",
        import_accepts=True),
    "crlf": CodeInfo(
        "warning", True, "lines end with CRLF instead of LF",
        import_accepts=True),
    "missing-final-newline": CodeInfo(
        "warning", True, "the last record has no newline after it",
        import_accepts=True),
    "blank-line": CodeInfo(
        "warning", True, "a whitespace-only line",
        import_accepts=True),
    "legacy-version": CodeInfo(
        "warning", True, "format 1-3 or an early format-4 header, upgraded when read",
        import_accepts=True),
    "legacy-duplicate": CodeInfo(
        "warning", True, "a duplicate record or extra header of an old writer, dropped when upgraded",
        import_accepts=True),
    "unknown-entry-type": CodeInfo(
        "warning", False, "an entry type this library does not know (kept, inert)",
        import_accepts=True),
    "unknown-message-role": CodeInfo(
        "warning", False, "a message role this library does not know (not sent)",
        import_accepts=True),
    "retired-compaction": CodeInfo(
        "warning", False, "a retired compaction record or message (kept, inert)",
        import_accepts=True),
    "tool-call-without-result": CodeInfo(
        "warning", False, "a tool call of a toolUse turn without a result",
        import_accepts=True),
    "orphan-tool-result": CodeInfo(
        "warning", False, "a tool result that answers no call of its assistant message",
        import_accepts=True),
    "duplicate-tool-result": CodeInfo(
        "warning", False, "a second result for one tool call",
        import_accepts=True),
    "label-target-missing": CodeInfo(
        "warning", False, "a label whose targetId names no entry",
        import_accepts=True),
    "edit-target-missing": CodeInfo(
        "warning", False, "a context edit whose targetId names no entry",
        import_accepts=True),
    "summary-target-missing": CodeInfo(
        "warning", False, "a session_summary whose summarizedThroughId names no entry",
        import_accepts=True),
    "header-id-mismatch": CodeInfo(
        "warning", False, "the id in the file name differs from the header id",
        import_accepts=True),
    "nesting-too-deep": CodeInfo(
        "error", False, f"a record nested more than {jsonio.MAX_DEPTH} levels deep (readers and writers refuse it)",
        import_accepts=False),
}

#: Code -> one-line description (derived from :data:`CODES`).
PROBLEM_CODES: dict[str, str] = {code: info.description for code, info in CODES.items()}

#: Codes that :func:`repair_bytes` fixes (derived from :data:`CODES`).
REPAIRABLE_CODES: frozenset[str] = frozenset(code for code, info in CODES.items() if info.repairable)


@dataclass(frozen=True)
class Problem:
    """One problem found in a session file.

    Attributes:
        code: a key of :data:`CODES` (stable, kebab-case).
        severity: ``"error"`` or ``"warning"``, fixed per code.
        path: the file as the caller named it.
        line: 1-based physical line, or ``None`` for the file as a whole.
        message: what is wrong, naming the field or id at fault.
        entry_id: the entry concerned, when one is.
    """

    code: str
    severity: Severity
    path: str
    line: int | None
    message: str
    entry_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The problem as a JSON-ready dict with keys
        ``code, severity, path, line, message, entryId``."""
        return {
            "code": self.code,
            "severity": self.severity,
            "path": self.path,
            "line": self.line,
            "message": self.message,
            "entryId": self.entry_id,
        }

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.severity}: {self.message} [{self.code}]"


@dataclass(frozen=True)
class Change:
    """One change :func:`repair_bytes` made.

    Attributes:
        code: the problem code the change repairs.
        line: 1-based line of the input it concerns.
        description: what was done.
        entry_id: the entry concerned (its id in the input), when one is.
        dropped: the exact bytes removed from the input, when bytes were removed.
    """

    code: str
    line: int | None
    description: str
    entry_id: str | None = None
    dropped: bytes | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``code, line, description, entryId``, and, when
        bytes were dropped, ``dropped`` (readable text: UTF-8 with
        ``\\xNN`` for other bytes) and ``droppedBase64`` (the exact bytes)."""
        out: dict[str, Any] = {
            "code": self.code,
            "line": self.line,
            "description": self.description,
            "entryId": self.entry_id,
        }
        if self.dropped is not None:
            out["dropped"] = self.dropped.decode("utf-8", "backslashreplace")
            out["droppedBase64"] = base64.b64encode(self.dropped).decode("ascii")
        return out


@dataclass
class RepairResult:
    """The outcome of :func:`repair_bytes` / :func:`repair_file`.

    Attributes:
        data: the repaired file (format 4 when the header could be read).
        changes: every change made, by input line.
        problems: what :func:`check_bytes` found in the input.
        remaining: what :func:`check_bytes` finds in ``data`` (no errors
            unless the input had damage that is not repairable).
        path: the input path as named by the caller.
        out_path: where ``data`` was written, if it was.
    """

    data: bytes
    changes: list[Change]
    problems: list[Problem]
    remaining: list[Problem]
    path: str
    out_path: str | None = None

    @property
    def changed(self) -> bool:
        """Whether the copy differs from the input in any way."""
        return bool(self.changes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready report: ``path, outPath, changes, problems, remaining``."""
        return {
            "path": self.path,
            "outPath": self.out_path,
            "changes": [c.to_dict() for c in self.changes],
            "problems": [p.to_dict() for p in self.problems],
            "remaining": [p.to_dict() for p in self.remaining],
        }


class RepairTargetError(SessionError, ValueError):
    """The repair output path is the input file: repairs never edit their input.

    Attributes:
        path: the refused output path.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"refusing to write the repaired copy over its input: {path}")


def has_errors(problems: Iterable[Problem]) -> bool:
    """Whether any problem is an error (a caller then exits 1)."""
    return any(p.severity == "error" for p in problems)


# --------------------------------------------------------------------------
# Low-level reading

_BOM = b"\xef\xbb\xbf"
_JSON_WS = " \t\r\n"
# Blank as the strict reader sees it: JSON whitespace plus \v and \f (docs/rules/format.md D.3).
_BLANK = b" \t\r\n\x0b\x0c"
_NUL_RUN = re.compile(rb"\x00+")
# Every writer starts a record with its "type" key (docs/rules/format.md A.3-A.17).
_RECORD_START = re.compile(r'\{\s*"type"\s*:')
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_TIMESTAMP_NAME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z_(.+)\.jsonl")
_UNKNOWN = object()  # a salvaged record whose parentId could not be read


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON constant {name}")


# Only used to find where pieces of a damaged line begin and end; the pieces
# themselves are parsed with jsonio.loads, exactly as the strict reader does.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _JSON_WS:
        pos += 1
    return pos


def _loads(data: bytes) -> tuple[Any, str | None]:
    """``(value, None)``, or ``(None, reason)`` when ``data`` is not JSON."""
    try:
        return jsonio.loads(data), None
    except ValueError as exc:  # jsonio.loads reports absurd nesting as a ValueError too
        return None, str(exc)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


@dataclass
class _Piece:
    """A part of a damaged line: a complete JSON ``value``, a ``fragment``
    (incomplete text followed by a later record) or trailing ``junk``."""

    kind: str
    start: int  # byte offset in the line as stored
    data: bytes  # without surrounding JSON whitespace
    error: str = ""


def _looks_like_record(value: Any) -> bool:
    # Content blocks also start with "type"; records are told apart by their
    # string timestamp (every entry) or by being a header.
    return isinstance(value, dict) and (value.get("type") == "session" or isinstance(value.get("timestamp"), str))


def _records_until(text: str, pos: int) -> int:
    """How far ``text[pos:]`` reads as complete records: ``len(text)`` when it
    is one or more records and nothing else, else the offset where it fails."""
    start = pos
    while pos < len(text):
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):
            return pos
        if not _looks_like_record(value):
            return pos
        pos = _skip_ws(text, end)
    return pos if pos > start else start


def _resume_point(text: str, pos: int) -> int | None:
    """The first record start after ``pos`` from which the rest of the text
    reads as complete records, or ``None``."""
    failed_at = pos
    for match in _RECORD_START.finditer(text, pos + 1):
        start = match.start()
        if start < failed_at:
            # Inside a run of records already read from an earlier start; it
            # fails at the same place, so do not read it again (keeps this linear).
            continue
        reached = _records_until(text, start)
        if reached == len(text) and reached > start:
            return start
        failed_at = max(failed_at, reached)
    return None


def _decompose(line: bytes, in_line: Callable[[int], int]) -> list[_Piece]:
    """Split a line that does not parse into pieces.

    ``in_line`` maps a byte offset of ``line`` to the offset reported to the
    user (the line as stored, before NUL runs were cut out).
    """
    # surrogateescape maps every byte to one character and back, so slices
    # of the text re-encode to exactly the original bytes.
    text = line.decode("utf-8", "surrogateescape")
    one_byte_chars = len(text) == len(line)

    def offset(index: int) -> int:
        if one_byte_chars:
            return in_line(index)
        return in_line(len(text[:index].encode("utf-8", "surrogateescape")))

    def raw(start: int, end: int) -> bytes:
        return text[start:end].strip(_JSON_WS).encode("utf-8", "surrogateescape")

    pieces: list[_Piece] = []
    pos = _skip_ws(text, 0)
    while pos < len(text):
        try:
            _, end = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            error = f"{exc.msg} at byte {offset(exc.pos)} of the line"
        except (ValueError, RecursionError) as exc:
            error = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        else:
            pieces.append(_Piece("value", offset(pos), raw(pos, end)))
            pos = _skip_ws(text, end)
            continue
        resume = _resume_point(text, pos)
        end = len(text) if resume is None else resume
        starts = _torn_starts(text, pos, end)
        for first, last in zip(starts, [*starts[1:], end]):
            kind = "junk" if resume is None and last == end else "fragment"
            pieces.append(_Piece(kind, offset(first), raw(first, last), error))
        if resume is None:
            break
        pos = resume
    return pieces


def _torn_starts(text: str, start: int, end: int) -> list[int]:
    """Where the torn records in ``text[start:end]`` begin.

    Several records can be torn in a row (each crash leaves one). A later
    start is recognized by a readable top-level ``parentId``, which content
    blocks never have.
    """
    starts = [start]
    window = text if end == len(text) else text[:end]  # one copy, not one per candidate
    for match in _RECORD_START.finditer(window, start + 1):
        if "parentId" in _salvage_text(window, match.start()):
            starts.append(match.start())
    return starts


def _salvage(data: bytes) -> dict[str, Any]:
    """Top-level string/null fields readable from the start of a damaged record.

    Walks ``{"key": value, ...}`` and stops at the first thing it cannot
    read, so the base fields of a truncated entry (written first by every
    writer of ``message`` entries) are recovered.
    """
    return _salvage_text(data.decode("utf-8", "replace"))


def _salvage_text(text: str, pos: int = 0) -> dict[str, Any]:
    """:func:`_salvage` on ``text[pos:]``, without copying it."""
    pos = _skip_ws(text, pos)
    if not text.startswith("{", pos):
        return {}
    pos += 1
    out: dict[str, Any] = {}
    while True:
        pos = _skip_ws(text, pos)
        if text.startswith(",", pos):
            pos += 1
            continue
        if not text.startswith('"', pos):
            return out
        try:
            key, pos = _DECODER.raw_decode(text, pos)
            pos = _skip_ws(text, pos)
            if not text.startswith(":", pos):
                return out
            value, pos = _DECODER.raw_decode(text, _skip_ws(text, pos + 1))
        except (ValueError, RecursionError):
            return out
        if (value is None or isinstance(value, str)) and key not in out:
            out[key] = value


def _lone_surrogates(value: Any) -> Iterator[tuple[str, str]]:
    """``(json path, surrogate)`` for every string or key holding a lone surrogate."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            match = _LONE_SURROGATE.search(item)
            if match:
                yield path or "(value)", match.group()
        elif isinstance(item, dict):
            for key in reversed(list(item)):
                sub = f"{path}.{key}" if path else str(key)
                match = _LONE_SURROGATE.search(key) if isinstance(key, str) else None
                if match:
                    yield sub, match.group()
                stack.append((item[key], sub))
        elif isinstance(item, list):
            for i in range(len(item) - 1, -1, -1):
                stack.append((item[i], f"{path}[{i}]"))


def _closes_window(obj: dict[str, Any]) -> bool:
    """Whether an entry (not assistant/toolResult) yields a message that closes the
    tool-call window: the projection's own rule (docs/rules/projection.md P.2-P.4, Q.6,
    docs/rules/decisions.md D-11)."""
    return any(closes_tool_window(m) for m in entry_to_context_messages(obj))


# --------------------------------------------------------------------------
# The analysis


@dataclass
class _Rec:
    """A readable record (header or entry) of the file."""

    line: int
    raw: bytes  # the record's text as written (no newline, no CR)
    obj: dict[str, Any]
    dropped: bool = False  # left out of the repaired copy
    changed: bool = False  # re-serialized in the repaired copy
    position: int = 0  # record index in the file, header = 0 (format-1 upgrade)
    oid: str | None = None  # the id as written
    key: str | None = None  # unique id in the model (renamed for duplicates)
    refs: dict[str, str | None] = field(default_factory=dict)
    parent: str | None = None  # model key of the parent, None for roots/missing
    parent_missing: bool = False


@dataclass
class _Kept:
    """An unreadable line, kept as written in the repaired copy."""

    line: int
    data: bytes


class _Window(NamedTuple):
    owner: _Rec | None
    allowed: frozenset[str]
    pending: tuple[tuple[str, str], ...]
    answered: frozenset[str]


_NO_WINDOW = _Window(None, frozenset(), (), frozenset())


def _ref_fields(obj: dict[str, Any]) -> list[str]:
    """Fields of an entry that name another entry."""
    kind = obj.get("type")
    fields = ["parentId", "targetId"]
    if kind == "compaction":
        fields.append("firstKeptEntryId")
    elif kind == "session_summary":
        fields.append("summarizedThroughId")
    elif kind == "branch_summary":
        fields.append("fromId")
    return fields


class _Analysis:
    """One pass over a file's bytes: problems always, repairs when asked."""

    def __init__(self, data: bytes, path: str, repair: bool) -> None:
        self.data = data
        self.path = path
        self.problems: list[Problem] = []
        self.changes: list[Change] = []
        self.items: list[_Rec | _Kept] = []
        # id -> (line, parentId or _UNKNOWN, kept in the copy) of the first
        # damaged record with that id (for messages)
        self.salvaged: dict[str, tuple[int, Any, bool]] = {}
        # id -> line of the first malformed line kept in the copy that shows it
        self.kept_ids: dict[str, int] = {}
        # id -> (line, parentId or _UNKNOWN) of the first dropped torn record
        self.lost: dict[str, tuple[int, Any]] = {}
        self._crlf_lines: list[int] = []  # lines whose end was CR(s) + LF
        self.header: _Rec | None = None
        self.header_obj: dict[str, Any] | None = None
        self.header_changed = False
        self.version: int | None = None
        self.header_valid = False
        self.entries: list[_Rec] = []
        self.model: list[_Rec] = []
        self.by_key: dict[str, _Rec] = {}
        self.first_def: dict[str, _Rec] = {}
        self.final_output = False
        self._scan()
        self._read_header()
        self._collect_entries()
        self._check_entries()
        self._build_model()
        self._check_references()
        cycles = self._cycles()
        self._report_cycles(cycles)
        self._check_pairing(cycles)
        if repair:
            self._repair_structure()

    # -- reporting

    def problem(self, code: str, line: int | None, message: str, entry_id: str | None = None) -> None:
        """Record a problem ``code`` (a key of ``CODES``, which gives its severity) at file ``line``."""
        self.problems.append(Problem(code, CODES[code].severity, self.path, line, message, entry_id))

    def change(self, code: str, line: int | None, description: str, entry_id: str | None = None,
               dropped: bytes | None = None) -> None:
        """Record a repair ``code`` made at file ``line`` (``dropped``: the bytes it removed, if any)."""
        self.changes.append(Change(code, line, description, entry_id, dropped))

    def sorted_problems(self) -> list[Problem]:
        """The problems by file line (file-level ones, line ``None``, first)."""
        # Stable: within a line, problems keep the order in which they were found.
        return sorted(self.problems, key=lambda p: p.line or 0)

    # -- bytes and lines

    def _scan(self) -> None:
        data = self.data
        if data.startswith(_BOM):
            self.problem("bom", 1, "UTF-8 byte order mark at the start of the file (readers strip it)")
            self.change("bom", 1, "removed the UTF-8 byte order mark", dropped=_BOM)
        lines, terminated = split_lines(data)
        try:
            data.decode("utf-8")
            valid_utf8 = True
        except UnicodeDecodeError:
            valid_utf8 = False
        has_nul = b"\x00" in data
        crlf_lines = self._crlf_lines
        for index, line in enumerate(lines):
            number = index + 1
            if not valid_utf8:
                self._check_utf8(number, line)
            if line.endswith(b"\r"):
                crlf_lines.append(number)
                # A run of CRs before the LF (a CRLF file converted twice) is
                # one line end: a CR left at the end of the line would make the
                # copy's LF a CRLF again.
                line = line.rstrip(b"\r")
            final = index == len(lines) - 1 and not terminated
            self._scan_line(number, line, final, has_nul)
        if crlf_lines:
            count = len(crlf_lines)
            self.problem("crlf", crlf_lines[0],
                         f"{count} line{'s' if count > 1 else ''} end with CRLF (readers accept it; a rewrite writes LF)")
            self.change("crlf", crlf_lines[0], f"converted {count} CRLF line end{'s' if count > 1 else ''} to LF")
        if self.final_output:
            self.problem("missing-final-newline", len(lines),
                         "the last record has no newline after it (readers accept it)")
            self.change("missing-final-newline", len(lines), "added the final newline")

    def _check_utf8(self, number: int, line: bytes) -> None:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.problem("invalid-utf8", number,
                         f"invalid UTF-8 byte 0x{line[exc.start]:02x} at byte {exc.start} of the line "
                         "(readers replace invalid bytes with U+FFFD)")

    def _scan_line(self, number: int, line: bytes, final: bool, has_nul: bool) -> None:
        if not line.strip(_BLANK):
            self.problem("blank-line", number, "whitespace-only line (readers skip it)")
            self.change("blank-line", number, "removed the whitespace-only line", dropped=line)
            return
        removed: list[tuple[int, int]] = []  # (offset in the line without NULs, run length)
        if has_nul and b"\x00" in line:
            # NUL bytes never belong to JSON text, so cutting them out first
            # also restores a record whose bytes were merely interleaved with them.
            for match in _NUL_RUN.finditer(line):
                size = match.end() - match.start()
                removed.append((match.start() - sum(length for _, length in removed), size))
                self.problem("nul-bytes", number,
                             f"run of {size} NUL byte{'s' if size > 1 else ''} at byte {match.start()} of the line "
                             "(left by a crash)")
                self.change("nul-bytes", number, f"removed {size} NUL byte{'s' if size > 1 else ''}",
                            dropped=match.group())
            line = _NUL_RUN.sub(b"", line)
            if not line.strip(_BLANK):
                return  # nothing but NUL bytes (and whitespace)
            if line.endswith(b"\r"):
                # CRs that only NUL bytes kept from the LF ("\r\0\0\n"): a CRLF end too.
                if number not in self._crlf_lines:
                    self._crlf_lines.append(number)
                line = line.rstrip(b"\r")

        def in_line(offset: int) -> int:
            # Offsets in the original line, NUL runs included.
            return offset + sum(length for at, length in removed if at <= offset)

        self._read_line(number, line, final, in_line)

    def _read_line(self, number: int, line: bytes, final: bool, in_line: Callable[[int], int]) -> None:
        """Records, torn records or a kept malformed line from a non-blank line without NULs."""
        try:
            value = jsonio.loads(line)
        except jsonio.NestingError:
            # Readers refuse the record; it is kept as written, like a malformed line.
            self._add_kept(number, line, [_Piece("value", 0, line)],
                           f"record nested more than {jsonio.MAX_DEPTH} levels deep (readers reject the file)",
                           final, code="nesting-too-deep")
            return
        except ValueError:
            value = None
        if isinstance(value, dict):  # the common case: one record on its line
            self._add_record(number, line, value, final)
            return
        pieces = _decompose(line, in_line)
        values: list[tuple[_Piece, dict[str, Any]]] = []
        reason: str | None = None
        for piece in pieces:
            if piece.kind == "value":
                value, error = _loads(piece.data)
                if error is not None:
                    reason = reason or f"malformed line: not valid JSON ({error})"
                elif not isinstance(value, dict):
                    reason = reason or "malformed line: not a JSON object"
                else:
                    values.append((piece, value))
            elif piece.kind == "junk" and not (final and piece is pieces[-1]):
                reason = reason or f"malformed line: not valid JSON ({piece.error})"
        if reason is not None:
            if not self.items and line.startswith(_BOM):
                self._strip_leading_bom(number, line, final, in_line)
                return
            self._add_kept(number, line, pieces, reason, final)
            return
        if len(values) > 1:
            self.problem("glued-records", number,
                         f"{len(values)} complete records on one line with no newline between them")
            self.change("glued-records", number, f"split {len(values)} glued records onto separate lines")
        for piece in pieces:
            if piece.kind == "value":
                continue
            fields = _salvage(piece.data)
            entry_id = fields.get("id") if isinstance(fields.get("id"), str) and fields.get("id") else None
            self._remember_salvage(entry_id, number, fields, kept=False)
            size = len(piece.data)
            if piece.kind == "fragment":
                self.problem("torn-record", number,
                             f"torn record: {size} bytes of incomplete JSON at byte {piece.start} of the line, "
                             "followed on the same line by a record written after it", entry_id)
                self.change("torn-record", number, f"dropped the {size}-byte torn record", entry_id, piece.data)
            else:
                self.problem("torn-final-record", number,
                             f"torn final record: the last line is incomplete JSON with no newline "
                             f"({size} bytes at byte {piece.start} of the line)", entry_id)
                self.change("torn-final-record", number, f"dropped the {size}-byte torn final record",
                            entry_id, piece.data)
        for piece, value in values:
            # A record followed by a dropped torn tail is not "missing" its newline.
            self._add_record(number, piece.data, value, final and piece is pieces[-1])

    def _strip_leading_bom(self, number: int, line: bytes, final: bool, in_line: Callable[[int], int]) -> None:
        """A malformed line the copy would begin with starts with a BOM (a
        second one, or one that NUL runs had split): as the copy's first bytes
        it would be read as the file's BOM, so it is removed now and the rest
        of the line read as the line."""
        rest = line
        while rest.startswith(_BOM):
            rest = rest[len(_BOM):]
        size = len(line) - len(rest)
        self.problem("bom", number,
                     "UTF-8 byte order mark at the start of a malformed line before any record "
                     "(a copy that begins with this line would read it as the file's byte order mark)")
        self.change("bom", number, "removed the UTF-8 byte order mark from the start of the malformed line",
                    dropped=line[:size])
        if not rest.strip(_BLANK):
            self.problem("blank-line", number, "whitespace-only line (readers skip it)")
            self.change("blank-line", number, "removed the whitespace-only line", dropped=rest)
            return
        self._read_line(number, rest, final, lambda offset: in_line(offset + size))

    def _add_record(self, number: int, raw: bytes, obj: dict[str, Any], final: bool) -> None:
        self.items.append(_Rec(number, raw, obj))
        self.final_output = final

    def _add_kept(self, number: int, line: bytes, pieces: list[_Piece], reason: str, final: bool,
                  code: str = "malformed-line") -> None:
        entry_id = None
        for piece in pieces:
            fields = _salvage(piece.data)
            found = fields.get("id")
            if isinstance(found, str) and found:
                entry_id = entry_id or found
                self._remember_salvage(found, number, fields, kept=True)
        self.problem(code, number, reason, entry_id)
        self.items.append(_Kept(number, line))
        self.final_output = final

    def _remember_salvage(self, entry_id: str | None, number: int, fields: dict[str, Any], kept: bool) -> None:
        if not entry_id:
            return
        parent = fields.get("parentId", _UNKNOWN)
        if entry_id not in self.salvaged:
            self.salvaged[entry_id] = (number, parent, kept)
        if kept:
            self.kept_ids.setdefault(entry_id, number)
        elif entry_id not in self.lost:
            self.lost[entry_id] = (number, parent)

    # -- header and version

    def _records(self) -> list[_Rec]:
        return [item for item in self.items if isinstance(item, _Rec)]

    def _read_header(self) -> None:
        records = self._records()
        if not records:
            blank = not self.data.replace(_BOM, b"", 1).strip(_BLANK)
            reason = "the file is empty or blank" if blank else "the file has no readable record"
            self.problem("missing-header", None, f"no session header: {reason}")
            return
        first = records[0]
        if first.obj.get("type") != "session":
            try:
                validate_header(first.obj)
            except InvalidSessionError as exc:
                self.problem("missing-header", first.line, exc.reason)
            return
        self.header = first
        self.header_obj = first.obj
        valid = True
        try:
            self.version = validate_header(first.obj)
        except UnsupportedVersionError as exc:
            self.problem("unsupported-version", first.line, exc.reason)
            valid = False
        except InvalidSessionError as exc:
            self.problem("invalid-header", first.line, exc.reason)
            valid = False
            try:
                self.version = parse_version(first.obj)
            except UnsupportedVersionError as exc2:
                self.problem("unsupported-version", first.line, exc2.reason)
        if valid:
            self._check_file_name(first)
            session_id = first.obj["id"]
            if not is_valid_session_id(session_id):
                # Readers open such a file; import refuses it (docs/rules/format.md B.4/B.5).
                self.problem("invalid-session-id", first.line,
                             f'header id "{session_id}" is not a valid session id (import refuses it: '
                             f"{INVALID_SESSION_ID_MESSAGE})")
        self.header_valid = valid

    def _check_file_name(self, header: _Rec) -> None:
        """docs/rules/decisions.md D-7: files are named ``<ts>_<id>`` (old) or ``<ts>_<16 hex of
        sha256(id)>``."""
        match = _TIMESTAMP_NAME.fullmatch(os.path.basename(self.path))
        if match is None:
            return
        named = match.group(1)
        session_id = header.obj["id"]
        expected = session_id_hash(session_id)
        if named not in (session_id, expected):
            self.problem("header-id-mismatch", header.line,
                         f'file name carries "{named}", which is neither the header id "{session_id}" '
                         f'nor its hash "{expected}"')

    # -- entries

    def _collect_entries(self) -> None:
        records = self._records()
        if self.header is not None:
            records = records[1:]
        legacy = self.version is not None and self.version < 4
        seen: dict[bytes, int] = {}
        position = 0
        for rec in records:
            position += 1  # counted before dropping, as the strict reader does (v1 indexes)
            rec.position = position
            if rec.obj.get("type") == "session":
                if legacy:
                    self.problem("legacy-duplicate", rec.line,
                                 "extra session header (dropped when the file is upgraded)")
                    self._drop(rec, "legacy-duplicate", "dropped the extra session header", entry_id=None)
                else:
                    try:
                        validate_entry(rec.obj)
                    except InvalidSessionError as exc:
                        self.problem("extra-header", rec.line, exc.reason)
                continue
            if legacy:
                text = rec.raw.strip(_BLANK)
                if text in seen:
                    # Old buggy writers repeated records (docs/rules/format.md E.3/E.4,
                    # docs/rules/decisions.md D-15).
                    self.problem("legacy-duplicate", rec.line,
                                 f"byte-identical copy of line {seen[text]} (dropped when the file is upgraded)",
                                 _id_of(rec.obj))
                    self._drop(rec, "legacy-duplicate", f"dropped the byte-identical copy of line {seen[text]}")
                    continue
                seen[text] = rec.line
            self.entries.append(rec)
        if self.header_valid and self.version is not None:
            self._upgrade()

    def _drop(self, rec: _Rec, code: str, description: str, entry_id: Any = ...) -> None:
        rec.dropped = True
        self.change(code, rec.line, description, _id_of(rec.obj) if entry_id is ... else entry_id, rec.raw)

    def _upgrade(self) -> None:
        assert self.header is not None and self.version is not None
        records = Records(header=self.header.obj, entries=[rec.obj for rec in self.entries],
                          base_dir=os.path.dirname(os.path.abspath(self.path)))
        steps = upgrade(records, self.version, [rec.position for rec in self.entries])
        if not steps:
            return
        for index in records.changed:
            self.entries[index].changed = True
        self.header_obj = records.header
        self.header_changed = records.header_changed
        names = ", ".join(steps)
        if self.version < 4:
            self.problem("legacy-version", self.header.line,
                         f"format {self.version} session; readers upgrade it to format 4 in memory ({names})")
            self.change("legacy-version", self.header.line, f"upgraded from format {self.version} to 4 ({names})")
        else:
            self.problem("legacy-version", self.header.line,
                         "early format-4 header (timestamp/parentSession); readers upgrade it in memory "
                         f"({names})")
            self.change("legacy-version", self.header.line, f"upgraded the early format-4 header ({names})")

    def _check_entries(self) -> None:
        if self.header is not None:
            self._check_surrogates(self.header)
        for rec in self.entries:
            obj = rec.obj
            entry_id = _id_of(obj)
            try:
                validate_entry(obj)
            except InvalidSessionError as exc:
                self.problem("invalid-entry", rec.line, exc.reason, entry_id)
            kind = obj.get("type")
            if isinstance(kind, str) and kind and kind not in ENTRY_TYPES:
                self.problem("unknown-entry-type", rec.line, f'unknown entry type "{kind}" (kept verbatim, inert)',
                             entry_id)
            elif kind == "context_compaction":
                self.problem("retired-compaction", rec.line, "retired context_compaction record (inert)", entry_id)
            elif kind == "compaction" and not is_active_compaction(obj):
                self.problem("retired-compaction", rec.line,
                             'retired summary-compaction record (details.strategy is not "verbatim-lines"; inert)',
                             entry_id)
            message = obj.get("message") if kind == "message" else None
            if isinstance(message, dict):
                self._check_message(rec, message, entry_id)
            self._check_surrogates(rec)

    def _check_message(self, rec: _Rec, message: dict[str, Any], entry_id: str | None) -> None:
        role = message.get("role")
        if role == "compactionSummary":
            self.problem("retired-compaction", rec.line, "retired compactionSummary message (inert)", entry_id)
        elif isinstance(role, str) and role not in MESSAGE_ROLES:
            self.problem("unknown-message-role", rec.line,
                         f'unknown message role "{role}" (kept, not sent to the model)', entry_id)
        if role != "assistant" or not isinstance(message.get("content"), list):
            return
        for block in message["content"]:
            if not isinstance(block, dict) or block.get("type") != "toolCall":
                continue
            label = f'tool call "{block.get("id")}" ({block.get("name")})'
            if "arguments" not in block:
                self.problem("tool-arguments-not-object", rec.line, f"{label} has no arguments", entry_id)
            elif not isinstance(block["arguments"], dict):
                self.problem("tool-arguments-not-object", rec.line,
                             f"{label} has arguments of type {_json_type(block['arguments'])}, not an object",
                             entry_id)

    def _check_surrogates(self, rec: _Rec) -> None:
        if not _SURROGATE_ESCAPE.search(rec.raw):
            return  # a lone surrogate can only come from a \\udxxx escape
        found = list(_lone_surrogates(rec.obj))
        if not found:
            return
        where, char = found[0]
        more = f" and {len(found) - 1} more" if len(found) > 1 else ""
        self.problem("lone-surrogate", rec.line,
                     f"lone UTF-16 surrogate \\u{ord(char):04x} in {where}{more} (providers reject it)",
                     _id_of(rec.obj))

    # -- the tree

    def _build_model(self) -> None:
        keyed = [rec for rec in self.entries if _id_of(rec.obj) is not None]
        used: set[str] = {_id_of(rec.obj) for rec in keyed} | set(self.salvaged)  # type: ignore[misc]
        session_id = self.header_obj.get("id") if self.header_obj else None
        defs: dict[str, list[_Rec]] = {}
        for rec in keyed:
            oid = _id_of(rec.obj)
            assert oid is not None
            rec.oid = oid
            earlier = defs.get(oid)
            if earlier is None:
                rec.key = oid
                defs[oid] = [rec]
                continue
            twin = next((d for d in earlier if d.raw.strip(_BLANK) == rec.raw.strip(_BLANK)), None)
            if twin is not None:
                self.problem("duplicate-id", rec.line,
                             f'duplicate entry id "{oid}" (byte-identical copy of line {twin.line})', oid)
                self._drop(rec, "duplicate-id", f"dropped the byte-identical copy of line {twin.line}")
                continue
            self.problem("duplicate-id", rec.line, f'duplicate entry id "{oid}" (first on line {earlier[0].line})',
                         oid)
            # Deterministic, so repairing the same file twice gives the same copy.
            rec.key = derived_entry_id(f"repair:{session_id}:{rec.line}:{oid}", used)
            used.add(rec.key)
            earlier.append(rec)
        self.model = [rec for rec in keyed if not rec.dropped]
        self.first_def = {oid: recs[0] for oid, recs in defs.items()}
        # Resolve references as an appending writer saw them: the nearest
        # earlier definition, else (a forward reference) the first one.
        current: dict[str, str] = {}
        for rec in self.model:
            for name in _ref_fields(rec.obj):
                ref = rec.obj.get(name)
                if isinstance(ref, str):
                    key = current.get(ref)
                    if key is None and ref in self.first_def:
                        key = self.first_def[ref].key
                    rec.refs[name] = key
            assert rec.oid is not None and rec.key is not None
            current[rec.oid] = rec.key
            parent = rec.obj.get("parentId")
            rec.parent = rec.refs.get("parentId")
            rec.parent_missing = isinstance(parent, str) and rec.parent is None
        self.by_key = {rec.key: rec for rec in self.model if rec.key is not None}

    def _check_references(self) -> None:
        for rec in self.model:
            obj = rec.obj
            kind = obj.get("type")
            if rec.parent_missing:
                parent = obj["parentId"]
                self.problem("dangling-parent", rec.line, f'parentId "{parent}" names no entry{self._damaged(parent)}',
                             rec.oid)
            target = obj.get("targetId")
            if isinstance(target, str) and rec.refs.get("targetId") is None:
                if kind == "label":
                    self.problem("label-target-missing", rec.line,
                                 f'label targets "{target}", which names no entry{self._damaged(target)}', rec.oid)
                elif kind == "context_edit":
                    self.problem("edit-target-missing", rec.line,
                                 f'context edit targets "{target}", which names no entry{self._damaged(target)}',
                                 rec.oid)
            anchor = obj.get("summarizedThroughId")
            if kind == "session_summary" and isinstance(anchor, str) and rec.refs.get("summarizedThroughId") is None:
                self.problem("summary-target-missing", rec.line,
                             f'summarizedThroughId "{anchor}" names no entry{self._damaged(anchor)} '
                             "(the summary is never shown)", rec.oid)
            if kind == "compaction" and is_active_compaction(obj) and isinstance(obj.get("firstKeptEntryId"), str):
                self._check_kept(rec)

    def _damaged(self, entry_id: str) -> str:
        found = self.salvaged.get(entry_id)
        return f" (its record on line {found[0]} is damaged)" if found else ""

    def _check_kept(self, rec: _Rec) -> None:
        """docs/rules/projection.md Q.7: the kept entry must precede the boundary on its path."""
        kept = rec.obj["firstKeptEntryId"]
        key = rec.refs.get("firstKeptEntryId")
        lost = "(the kept tail is lost from the rebuilt context)"
        if key is None:
            reason = f'firstKeptEntryId "{kept}" names no entry {lost}'
        elif key == rec.key:
            reason = f'firstKeptEntryId "{kept}" is the compaction itself {lost}'
        elif key in self._ancestors(rec):
            return
        else:
            reason = f'firstKeptEntryId "{kept}" is not before the compaction on its branch {lost}'
        self.problem("compaction-kept-off-branch", rec.line, reason, rec.oid)

    def _ancestors(self, rec: _Rec) -> set[str]:
        seen: set[str] = set()
        current = rec.parent
        while current is not None and current not in seen and current != rec.key:
            seen.add(current)
            current = self.by_key[current].parent
        return seen

    def _cycles(self) -> list[list[_Rec]]:
        """Parent cycles, each starting at its first entry in file order."""
        state: dict[str, bool] = {}  # key -> walk finished
        order = {id(rec): index for index, rec in enumerate(self.model)}
        cycles: list[list[_Rec]] = []
        for start in self.model:
            walk: dict[str, int] = {}
            path: list[str] = []
            key = start.key
            while key is not None and key not in state:
                state[key] = False
                walk[key] = len(path)
                path.append(key)
                key = self.by_key[key].parent
            if key is not None and key in walk:
                members = [self.by_key[k] for k in path[walk[key]:]]
                first = min(range(len(members)), key=lambda i: order[id(members[i])])
                cycles.append(members[first:] + members[:first])
            for k in path:
                state[k] = True
        cycles.sort(key=lambda c: c[0].line)
        return cycles

    def _report_cycles(self, cycles: list[list[_Rec]]) -> None:
        for cycle in cycles:
            chain = " -> ".join(str(rec.oid) for rec in [*cycle, cycle[0]])
            self.problem("parent-cycle", cycle[0].line, f"parent cycle {chain}: no root reaches these entries",
                         cycle[0].oid)

    # -- tool pairing

    def _check_pairing(self, cycles: list[list[_Rec]]) -> None:
        """docs/rules/projection.md P.4-P.7, P.9 and
        docs/rules/decisions.md D-11 along every root-to-leaf branch."""
        breakers = {id(cycle[0]) for cycle in cycles}
        children: dict[str, list[_Rec]] = {}
        roots: list[_Rec] = []
        for rec in self.model:
            if rec.parent is None or id(rec) in breakers:
                roots.append(rec)
            else:
                children.setdefault(rec.parent, []).append(rec)
        reported: set[tuple[int, str]] = set()
        active_calls: dict[str, int] = {}  # call id -> line of the assistant message on this branch
        stack: list[tuple[bool, _Rec, Any]] = [(True, rec, _NO_WINDOW) for rec in reversed(roots)]
        while stack:
            enter, rec, payload = stack.pop()
            if not enter:
                for call_id in payload:
                    del active_calls[call_id]
                continue
            window = self._step(rec, payload, reported)
            registered = self._register_calls(rec, active_calls)
            stack.append((False, rec, registered))
            below = children.get(rec.key or "", [])
            if not below:
                # A reopened session closes trailing calls too (docs/rules/decisions.md D-11).
                self._close(window, reported)
            for child in reversed(below):
                stack.append((True, child, window))

    def _step(self, rec: _Rec, window: _Window, reported: set[tuple[int, str]]) -> _Window:
        obj = rec.obj
        message = obj.get("message") if obj.get("type") == "message" else None
        role = message.get("role") if isinstance(message, dict) else None
        if role == "assistant":
            self._close(window, reported)
            calls = tuple(
                (block["id"], block["name"]) for block in _blocks(message)
                if block.get("type") == "toolCall" and isinstance(block.get("id"), str)
                and isinstance(block.get("name"), str)
            )
            pending = calls if message.get("stopReason") == "toolUse" else ()
            return _Window(rec, frozenset(c[0] for c in calls), pending, frozenset())
        if role == "toolResult":
            call_id = message.get("toolCallId")
            if not isinstance(call_id, str) or call_id not in window.allowed:
                self.problem("orphan-tool-result", rec.line,
                             f'tool result for "{call_id}" answers no tool call of the preceding assistant message '
                             "(dropped from model context)", rec.oid)
                return window
            if call_id in window.answered:
                self.problem("duplicate-tool-result", rec.line,
                             f'second tool result for "{call_id}" (dropped from model context)', rec.oid)
                return window
            return window._replace(answered=window.answered | {call_id})
        if _closes_window(obj):
            self._close(window, reported)
            return _NO_WINDOW
        return window

    def _close(self, window: _Window, reported: set[tuple[int, str]]) -> None:
        owner = window.owner
        if owner is None:
            return
        for call_id, name in window.pending:
            if call_id in window.answered or (id(owner), call_id) in reported:
                continue
            reported.add((id(owner), call_id))
            self.problem("tool-call-without-result", owner.line,
                         f'tool call "{call_id}" ({name}) of a toolUse turn has no result '
                         '(readers add an "interrupted" error result)', owner.oid)

    def _register_calls(self, rec: _Rec, active: dict[str, int]) -> list[str]:
        obj = rec.obj
        message = obj.get("message") if obj.get("type") == "message" else None
        if not isinstance(message, dict) or message.get("role") != "assistant":
            return []
        if message.get("excludeFromContext") is True:
            return []  # docs/rules/projection.md P.9 skips messages that never reach a provider
        registered: list[str] = []
        for block in _blocks(message):
            call_id = block.get("id")
            if block.get("type") != "toolCall" or not isinstance(call_id, str) or call_id in registered:
                continue
            if call_id in active:
                self.problem("duplicate-tool-call-id", rec.line,
                             f'tool call id "{call_id}" also appears in the assistant message on line '
                             f"{active[call_id]} of the same branch (providers reject repeated ids)", rec.oid)
                continue
            active[call_id] = rec.line
            registered.append(call_id)
        return registered

    # -- repairs

    def _repair_structure(self) -> None:
        for rec in self.model:
            if rec.key != rec.oid:
                self.change("duplicate-id", rec.line, f'renamed duplicate id "{rec.oid}" to "{rec.key}"', rec.oid)
                rec.obj["id"] = rec.key
                rec.changed = True
            for name, key in rec.refs.items():
                if key is not None and key != rec.obj[name]:
                    self.change("duplicate-id", rec.line,
                                f'{name} "{rec.obj[name]}" now names "{key}", the renamed duplicate it meant', rec.oid)
                    rec.obj[name] = key
                    rec.changed = True
        for rec in self.model:
            if not rec.parent_missing:
                continue
            missing = rec.obj["parentId"]
            new_parent, on_kept_line = self._surviving_ancestor(missing)
            if new_parent == missing:
                continue  # the parent's line is kept as written; fixing it restores the link
            rec.obj["parentId"] = new_parent
            # An id on a kept malformed line is no entry of the model (yet).
            rec.parent = None if on_kept_line else new_parent
            rec.changed = True
            if new_parent is None:
                description = f're-parented from missing "{missing}" to null (no ancestor survives): now a root'
            else:
                description = f're-parented from missing "{missing}" to "{new_parent}", its nearest surviving ancestor'
                if on_kept_line:
                    description += f" (kept as written on malformed line {self.kept_ids[new_parent]})"
            self.change("dangling-parent", rec.line, description, rec.oid)
        # Re-parenting can close a cycle, so cycles are found after it.
        for cycle in self._cycles():
            first = cycle[0]
            self.change("parent-cycle", first.line,
                        f'set parentId "{first.obj["parentId"]}" to null to break the cycle: now a root', first.oid)
            first.obj["parentId"] = None
            first.parent = None
            first.changed = True

    def _surviving_ancestor(self, missing: str) -> tuple[str | None, bool]:
        """``(id, on a kept line)`` of the nearest ancestor of a missing parent
        that survives in the copy, ``(None, False)`` when none does.

        The walk starts at ``missing`` itself and follows the salvaged
        ``parentId`` of the torn records this pass drops. An ancestor survives
        when it is an entry (its model key is returned) or when its id is
        readable on a malformed line the copy keeps as written (the id is
        returned, and ``missing`` itself when that line holds it). The copy
        holds exactly the entries and kept lines of this pass and no dropped
        record, so a second pass finds the same ancestor at its first step.
        """
        seen: set[str] = set()
        current: Any = missing
        while True:
            if current is None or current is _UNKNOWN or current in seen:
                return None, False
            if current in self.first_def:
                return self.first_def[current].key, False
            if current in self.kept_ids:
                return current, True
            found = self.lost.get(current)
            if found is None:
                return None, False
            seen.add(current)
            current = found[1]

    def output(self) -> bytes:
        """The repaired file's bytes: lines kept as written, changed records re-serialized, dropped ones left out."""
        lines: list[bytes] = []
        for item in self.items:
            if isinstance(item, _Kept):
                lines.append(item.data)
            elif item.dropped:
                continue
            elif item is self.header:
                lines.append(jsonio.dumps(self.header_obj) if self.header_changed else item.raw)
            else:
                lines.append(jsonio.dumps(item.obj) if item.changed else item.raw)
        return b"\n".join(lines) + b"\n" if lines else b""


def _id_of(obj: dict[str, Any]) -> str | None:
    entry_id = obj.get("id")
    return entry_id if isinstance(entry_id, str) and entry_id else None


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict)]


# --------------------------------------------------------------------------
# Public API


def check_bytes(data: bytes, path: str) -> list[Problem]:
    """Every problem in the bytes of one session file.

    Args:
        data: the whole file, exactly as stored.
        path: how to name the file in problems; its base name is also
            compared with the header id when it has the ``<ts>_<id>.jsonl``
            or ``<ts>_<hash>.jsonl`` shape (docs/rules/decisions.md D-7).

    Returns:
        Problems sorted by line (file-wide ones first), several per line
        possible, in a deterministic order. Empty when the file is clean.
        Never raises on any content.
    """
    return _Analysis(data, path, repair=False).sorted_problems()


def check_file(path: str | os.PathLike[str]) -> list[Problem]:
    """:func:`check_bytes` on a file's content; the file is only read.

    Raises:
        OSError: the file cannot be read.
    """
    name = os.fspath(path)
    with open(name, "rb") as handle:
        data = handle.read()
    return check_bytes(data, name)


def repair_bytes(data: bytes, path: str, out_path: str | None = None) -> RepairResult:
    """A repaired format-4 copy of a session file's bytes, and the list of changes.

    Repairs are the conservative ones of the module docstring; everything
    else is kept as written. ``data`` itself is never modified.

    Args:
        data: the whole input file.
        path: the input's name, as in :func:`check_bytes`.
        out_path: the name the copy will have (checked for
            ``header-id-mismatch`` in :attr:`RepairResult.remaining`);
            defaults to ``path``.

    Returns:
        A :class:`RepairResult`: ``data`` is the copy (format 4 whenever the
        header is readable), ``changes`` what was done, ``problems`` the
        input's problems, ``remaining`` the copy's problems. Never raises on
        any content.
    """
    analysis = _Analysis(data, path, repair=True)
    repaired = analysis.output()
    changes = sorted(analysis.changes, key=lambda c: c.line or 0)
    remaining = check_bytes(repaired, out_path or path)
    return RepairResult(repaired, changes, analysis.sorted_problems(), remaining, path)


def repair_file(path: str | os.PathLike[str], out_path: str | os.PathLike[str]) -> RepairResult:
    """Write a repaired copy of ``path`` to ``out_path`` atomically.

    The input is only read. The copy is written to a temporary file in the
    output directory, flushed to disk and renamed over ``out_path``, so a
    crash leaves either the old ``out_path`` or the complete copy.

    Raises:
        RepairTargetError: ``out_path`` is the input file (same path, or a
            link to the same file).
        OSError: the input cannot be read or the copy cannot be written.
    """
    source = os.fspath(path)
    _refuse_same_file(source, os.fspath(out_path))
    with open(source, "rb") as handle:
        data = handle.read()
    return write_repaired(repair_bytes(data, source, os.fspath(out_path)), out_path)


def _refuse_same_file(source: str, target: str) -> None:
    same = os.path.realpath(source) == os.path.realpath(target)
    if not same and os.path.exists(target) and os.path.exists(source):
        same = os.path.samefile(source, target)
    if same:
        raise RepairTargetError(target)


def write_repaired(result: RepairResult, out_path: str | os.PathLike[str]) -> RepairResult:
    """Write ``result.data`` (from :func:`repair_bytes`) to ``out_path`` atomically.

    The copy is written to a temporary file in the output directory, flushed
    to disk and renamed over ``out_path``, so a failure leaves either the old
    ``out_path`` or the complete copy (:func:`sessiontree.outfile.write_atomic`).
    The copy gets the permission bits of the input file; a symbolic link at
    ``out_path`` is refused, not followed (docs/output-files.md).

    Returns:
        ``result``, with ``out_path`` set.

    Raises:
        RepairTargetError: ``out_path`` is the input (``result.path``) itself.
        OutputPathError: ``out_path`` is a symbolic link or a directory.
        OSError: the copy cannot be written.
    """
    target = os.fspath(out_path)
    _refuse_same_file(result.path, target)
    try:
        mode: int | None = stat.S_IMODE(os.stat(result.path).st_mode)
    except (OSError, ValueError):
        mode = None  # repaired from bytes that came from nowhere on disk
    write_atomic(target, result.data, mode=mode)
    result.out_path = target
    return result
