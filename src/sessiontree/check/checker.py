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
  are judged by :func:`~sessiontree.format.codec.validate_header`,
  :func:`~sessiontree.format.codec.validate_entry` and
  :func:`~sessiontree.format.codec.parse_version`, whose messages become the
  problem messages; upgrades run through :func:`~sessiontree.format.upgrade.upgrade`.
* :data:`CODES` is the single source of the codes, their severity, whether
  ``--repair`` fixes them and their one-line description.

Severity. An *error* is damage: the strict reader rejects the file (docs/rules/versions.md
seed:session-version, docs/rules/format.md D.17-D.19,
docs/rules/decisions.md D-2, D-15), or reading it silently
loses or misplaces content, or a provider request built from it is refused.
A *warning* is legacy or odd content that every reader handles in a defined
way (an upgrade, a skipped line, an inert record, a synthetic tool result). A
malformed line is one: pi's loader skips a line it cannot parse, and so do
``sync`` and ``import`` (docs/sync.md, "Malformed lines"); the repaired copy
leaves it out.
A caller exits 1 when any error was found.

================================  ========  ======  =================================
code                              severity  repair  what
================================  ========  ======  =================================
torn-final-record                 error     yes     last record incomplete, no newline
torn-record                       error     yes     incomplete record, then a record
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
malformed-line                    warning   yes     line is not one JSON object (skipped)
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
foreign-record-unmapped           warning   no      Claude Code/Codex record not mapped
foreign-bad-value                 warning   no      agent's count or time not taken
nesting-too-deep                  error     no      record deeper than jsonio.MAX_DEPTH
record-too-large                  error     no      record over bounds.MAX_RECORD_BYTES
================================  ========  ======  =================================

``docs/check.md`` holds the full table, including which codes ``import``
still accepts (:attr:`CodeInfo.import_accepts`).

Why some are warnings: tool-pairing gaps are repaired by every projection
(docs/rules/projection.md seed:interrupted-tool-calls,
docs/rules/decisions.md D-11), dangling label/edit/summary targets
are tolerated and inert (docs/rules/tree.md I.5, docs/rules/projection.md R.4,
docs/rules/listing.md K.4), and file names are never
parsed for identity (docs/rules/decisions.md D-7).

Where the rules live. This module is the checker's public face; the work is
done by one module per job, each documenting its rules:

* :mod:`~sessiontree.check.codes`: the codes and the report shapes
  (:class:`Problem`, :class:`Change`, :class:`RepairResult`);
* :mod:`~sessiontree.check.salvage`: taking damaged lines apart (glued,
  torn and malformed records) and salvaging fields from them;
* :mod:`~sessiontree.check.reader`: bytes into lines and records (BOM, CRLF,
  NUL runs, blank lines, invalid UTF-8);
* :mod:`~sessiontree.check.structure`: header, entries, ids, parents,
  references and cycles;
* :mod:`~sessiontree.check.pairing`: tool call/result pairing along every branch;
* :mod:`~sessiontree.check.repair`: the repairs on ids and parents, the
  copy's bytes and its atomic write;
* :mod:`~sessiontree.check.analysis`: the passes in order (:func:`check_bytes`).
"""

from __future__ import annotations

from sessiontree.check.analysis import check_bytes, check_file
from sessiontree.check.codes import (
    CODES,
    PROBLEM_CODES,
    REPAIRABLE_CODES,
    Change,
    CodeInfo,
    Problem,
    RepairResult,
    RepairTargetError,
    Severity,
    has_errors,
)
from sessiontree.check.repair import repair_bytes, repair_file, write_repaired

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
