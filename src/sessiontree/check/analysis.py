"""Running the checker's passes over one file: :func:`check_bytes` and :func:`check_file`.

The passes run in order over one :class:`~sessiontree.check.state.FileState`:
lines and records (:mod:`~sessiontree.check.reader`), header, entries, ids,
parents and references (:mod:`~sessiontree.check.structure`), tool pairing
(:mod:`~sessiontree.check.pairing`). :mod:`~sessiontree.check.repair` runs
them too, then its own repairs. None of them writes to the checked file.
"""

from __future__ import annotations

import os

from sessiontree.check.codes import CODES, Problem
from sessiontree.check.pairing import check_pairing
from sessiontree.check.reader import read_lines
from sessiontree.check.state import FileState
from sessiontree.check.structure import (
    build_model,
    check_entries,
    check_header,
    check_references,
    collect_entries,
    find_cycles,
    report_cycles,
)
from sessiontree.format.foreign import map_foreign

__all__ = ["analyse", "check_bytes", "check_file"]


def analyse(data: bytes, path: str) -> FileState:
    """Every check on the bytes of one file, in order; the returned state holds
    the problems (in the order found), the byte- and record-level changes a
    repair makes, and the records the repair works on. Never raises on any content."""
    state = FileState(data, path)
    read_lines(state)
    check_header(state)
    collect_entries(state)
    check_entries(state)
    build_model(state)
    check_references(state)
    cycles = find_cycles(state)
    report_cycles(state, cycles)
    check_pairing(state, cycles)
    return state


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
    foreign = _foreign_problems(data, path)
    if foreign is not None:
        return foreign
    return analyse(data, path).sorted_problems()


def _foreign_problems(data: bytes, path: str) -> list[Problem] | None:
    """The report on a Claude Code or Codex file (docs/agents/README.md): every record,
    or part of one, its mapping did not understand, and every value it did not take as
    written (docs/usage.md, "Bad values in agent files"), with its line; ``None`` when the
    file is not one (its first record is a pi/Atomic header or no agent's)."""
    mapped = map_foreign(data, path)  # what sync reads: mapped and validated (docs/agents/README.md)
    if mapped is None:
        return None
    problems: list[Problem] = []
    refusal = mapped.refusal()
    if refusal is not None:
        problems.append(Problem("invalid-session-id", CODES["invalid-session-id"].severity, path, 1,
                                f"{mapped.agent} file: {refusal} (sync refuses the file)"))
    info = CODES["foreign-record-unmapped"]
    problems += [Problem("foreign-record-unmapped", info.severity, path, line,
                         f"{mapped.agent} record: {reason}; its bytes are kept verbatim")
                 for line, reason in sorted(mapped.unmapped)]
    bad = CODES["foreign-bad-value"]
    problems += [Problem("foreign-bad-value", bad.severity, path, value.line,
                         f"{mapped.agent} record: {value.field} {value.value} is {value.problem} "
                         f"(taken as {value.taken}; docs/usage.md); its bytes are kept verbatim")
                 for value in sorted(mapped.bad_values, key=lambda v: v.line)]
    return problems


def check_file(path: str | os.PathLike[str]) -> list[Problem]:
    """:func:`check_bytes` on a file's content; the file is only read.

    Raises:
        OSError: the file cannot be read.
    """
    name = os.fspath(path)
    with open(name, "rb") as handle:
        data = handle.read()
    return check_bytes(data, name)

