"""Writing the repaired copy: the structural repairs, the copy's bytes, the atomic write.

Repairs are conservative and each is listed as a
:class:`~sessiontree.check.codes.Change`: split glued records; drop torn
records, NUL runs and blank lines (dropped bytes kept in the change); keep
one copy of a byte-identical duplicate; rename a differing duplicate id (to
a deterministic 8-hex id) together with the references that name it;
re-parent an entry whose parent is missing to its nearest surviving
ancestor, or make it a root when none survives; break a cycle at its first
entry in file order, which becomes a root (as the tree already treats it,
docs/rules/tree.md H.2); strip a BOM, CRLF ends, add the final newline, and
upgrade to format 4 exactly as the reader does. The byte-level ones are
decided by :mod:`~sessiontree.check.reader` and
:mod:`~sessiontree.check.structure` as they read; the ones on ids and
parents here, after every check. A malformed line is left out of the copy
(readers skip it, as pi does; its bytes are in the change). Everything else
is kept as written: a record nested too deep stays in the copy byte for
byte, so what the repair cannot fix is still reported by ``check`` on the
copy (:attr:`~sessiontree.check.codes.RepairResult.remaining`).

Idempotent: repairing a repaired copy changes nothing (no change listed,
the same bytes). Each repair decides from what the copy will hold, not from
what it drops, so a second pass reaches the same decisions.

Surviving ancestors. The walk starts at the missing parent and climbs
through the records this repair drops (torn records), using the
``parentId`` salvaged from each. An id *survives* when the copy still holds
it: as an entry, or readable on a line the copy keeps as written (a record
nested too deep; an id readable there counts as surviving, even when a torn
record with the same id is dropped too). So an entry whose missing parent is
itself on a kept line is left alone (fixing that line by hand restores the
link), and one whose lost parent descends from a kept line is re-parented to
that line's id, still reported as a dangling parent until the line is fixed.
The id on a dropped malformed line does not survive: the walk climbs past it
through the ``parentId`` salvaged from it. The walk never stops at a dropped record, so a
second repair of the copy, which no longer holds it, finds the same ancestor.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from sessiontree.check.analysis import analyse, check_bytes
from sessiontree.check.codes import RepairResult, RepairTargetError
from sessiontree.check.state import UNKNOWN, FileState, Kept
from sessiontree.check.structure import find_cycles
from sessiontree.format import jsonio
from sessiontree.format.foreign import map_foreign
from sessiontree.format.outfile import write_atomic

__all__ = ["output", "repair_bytes", "repair_file", "repair_structure", "write_repaired"]


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
        any content. A Claude Code or Codex file is not repaired (a copy in another
        agent's format would not be that agent's file): its copy is its bytes, its
        problems the records its mapping did not understand (docs/agents/README.md).
    """
    if map_foreign(data, path) is not None:
        problems = check_bytes(data, path)
        return RepairResult(data, [], problems, check_bytes(data, out_path or path), path)
    state = analyse(data, path)
    repair_structure(state)
    repaired = output(state)
    changes = sorted(state.changes, key=lambda c: c.line or 0)
    remaining = check_bytes(repaired, out_path or path)
    return RepairResult(repaired, changes, state.sorted_problems(), remaining, path)


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
    ``out_path`` or the complete copy (:func:`sessiontree.format.outfile.write_atomic`).
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


def repair_structure(state: FileState) -> None:
    """The repairs on ids and parents, after every check of ``state``: rename
    differing duplicate ids (and the references meant for them), re-parent
    entries whose parent is missing, then break the cycles left (re-parenting
    can close one). Edits the records' ``obj`` and lists each change."""
    for rec in state.model:
        if rec.key != rec.oid:
            state.change("duplicate-id", rec.line, f'renamed duplicate id "{rec.oid}" to "{rec.key}"', rec.oid)
            rec.obj["id"] = rec.key
            rec.changed = True
        for name, key in rec.refs.items():
            if key is not None and key != rec.obj[name]:
                state.change("duplicate-id", rec.line,
                             f'{name} "{rec.obj[name]}" now names "{key}", the renamed duplicate it meant', rec.oid)
                rec.obj[name] = key
                rec.changed = True
    for rec in state.model:
        if not rec.parent_missing:
            continue
        missing = rec.obj["parentId"]
        new_parent, on_kept_line = _surviving_ancestor(state, missing)
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
                description += f" (kept as written on malformed line {state.kept_ids[new_parent]})"
        state.change("dangling-parent", rec.line, description, rec.oid)
    # Re-parenting can close a cycle, so cycles are found after it.
    for cycle in find_cycles(state):
        first = cycle[0]
        state.change("parent-cycle", first.line,
                     f'set parentId "{first.obj["parentId"]}" to null to break the cycle: now a root', first.oid)
        first.obj["parentId"] = None
        first.parent = None
        first.changed = True


def _surviving_ancestor(state: FileState, missing: str) -> tuple[str | None, bool]:
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
        if current is None or current is UNKNOWN or current in seen:
            return None, False
        if current in state.first_def:
            return state.first_def[current].key, False
        if current in state.kept_ids:
            return current, True
        found = state.lost.get(current)
        if found is None:
            return None, False
        seen.add(current)
        current = found[1]


def output(state: FileState) -> bytes:
    """The repaired file's bytes: lines kept as written, changed records re-serialized, dropped ones left out."""
    lines: list[bytes] = []
    for item in state.items:
        if isinstance(item, Kept):
            lines.append(item.data)
        elif item.dropped:
            continue
        elif item is state.header:
            lines.append(jsonio.dumps(state.header_obj) if state.header_changed else item.raw)
        else:
            lines.append(jsonio.dumps(item.obj) if item.changed else item.raw)
    return b"\n".join(lines) + b"\n" if lines else b""
