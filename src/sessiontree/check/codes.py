"""The checker's problem codes and the shapes of its reports.

:data:`CODES` is the single source of the codes, their severity, whether
``--repair`` fixes them, their one-line description and whether ``import``
still accepts a file with them; :mod:`sessiontree.check.checker` explains
what the severities mean and lists the codes, ``docs/check.md`` holds the
full table. A :class:`Problem` is one finding of ``check``, a
:class:`Change` one edit of ``--repair``, a :class:`RepairResult` the whole
outcome of a repair.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from sessiontree.errors import SessionError
from sessiontree.format import jsonio

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
    "has_errors",
]

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class CodeInfo:
    """What a problem code means.

    Attributes:
        severity: ``"error"`` or ``"warning"`` (what each means:
            :mod:`sessiontree.check.checker`).
        repairable: whether :func:`~sessiontree.check.repair.repair_bytes` fixes it.
        description: one line for listings and ``--help``.
        import_accepts: whether ``sessiontree import`` and ``sync`` (what they read
            with, :func:`~sessiontree.check.glued.parse_unglued`, then
            :meth:`~sessiontree.session.manager.SessionManager.import_session`) still
            accept a file whose only problem has this code: readers tolerate many
            errors on purpose (see ``docs/check.md``). ``sync`` refuses a file exactly
            when ``check`` reports an error whose code has ``False`` here.
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
        import_accepts=True),
    "malformed-line": CodeInfo(
        "warning", True, "a line that is not a JSON object and cannot be split into records (skipped, as pi does)",
        import_accepts=True),
    "glued-records": CodeInfo(
        "error", True, "two or more complete records on one line with no newline between them",
        import_accepts=True),
    "nul-bytes": CodeInfo(
        "error", True, "a run of NUL bytes, as left by a crash",
        import_accepts=True),
    "invalid-utf8": CodeInfo(
        "error", False, "bytes that are not UTF-8 (readers see U+FFFD)",
        import_accepts=True),
    "lone-surrogate": CodeInfo(
        "error", False, "a lone UTF-16 surrogate escape such as \\ud83d, which providers reject",
        import_accepts=True),
    "record-too-large": CodeInfo(
        "error", False, "a record over the bytes one stored record may hold (SQLite's string and BLOB limit)",
        import_accepts=False),
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
    "foreign-record-unmapped": CodeInfo(
        "warning", False, "a Claude Code or Codex record (or part) the mapping to format 4 did not understand",
        import_accepts=False),
    "foreign-bad-value": CodeInfo(
        "warning", False, "a Claude Code, Codex or Gemini CLI value not taken as written (a count or time that "
        "is none; docs/usage.md)", import_accepts=False),
    "nesting-too-deep": CodeInfo(
        "error", False, f"a record nested more than {jsonio.MAX_DEPTH} levels deep (readers and writers refuse it)",
        import_accepts=False),
}

#: Code -> one-line description (derived from :data:`CODES`).
PROBLEM_CODES: dict[str, str] = {code: info.description for code, info in CODES.items()}

#: Codes that :func:`~sessiontree.check.repair.repair_bytes` fixes (derived from :data:`CODES`).
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

