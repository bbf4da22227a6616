"""Syncing oh-my-pi files, whose first line omp rewrites in place (docs/agents/README.md, "oh-my-pi").

An omp file grows like a pi file (lines appended), except its 256-byte title slot,
which omp overwrites when the title changes. A changed file is mapped whole
(:func:`~sessiontree.format.foreign.omp.map_omp`; its state's ``version`` is 0) and
compared with the stored session without the title entry:

* the stored entries are the file's first ones, same ids and bytes: ``grown`` (new
  entries, or only the title rewritten: +0 entries), the stored session becomes the
  file's version (entries set with sessiontree kept); ``unchanged`` when nothing
  differs at all;
* otherwise ``diverged`` (the store untouched; ``sync --replace``: ``replaced``).

A last line without its newline is left for the next run (``in-progress``).
"""

from __future__ import annotations

import hashlib
import os

from sessiontree.errors import InvalidSessionError
from sessiontree.format.codec import ParsedSession
from sessiontree.format.foreign.omp import TITLE_ID, map_omp
from sessiontree.format.ids import is_valid_session_id
from sessiontree.stores.base import SyncChange, SyncState
from sessiontree.sync.reading import file_state
from sessiontree.sync.rewrites import Outcome, SyncerView, merged_with_store, stored_to_compare

__all__ = ["maybe_omp", "sync_omp"]

_TAIL = 4096


def maybe_omp(data: bytes) -> bool:
    """Whether ``data`` starts with what omp's title slot starts with."""
    return data.startswith(b'{"type":"title"')


def _file_entries(session: ParsedSession) -> list[tuple[str, bytes]]:
    """``(id, bytes)`` of the entries taken from the file, the title entry left out."""
    return [(entry["id"], session.entry_bytes(i)) for i, entry in enumerate(session.entries)
            if isinstance(entry.get("foreign"), dict) and entry["id"] != TITLE_ID]


def sync_omp(syncer: SyncerView, path: str, data: bytes, fst: os.stat_result,
             state: SyncState | None) -> Outcome | None:
    """Sync one omp file (module docstring), or ``None`` when it has no title slot.

    Raises:
        SyncConflictError: another sync moved the file's state on (the caller retries).
    """
    cut = data.rfind(b"\n") + 1
    body, pending = data[:cut], len(data) - cut
    try:
        mapped = map_omp(body, path)
    except InvalidSessionError as exc:
        return Outcome("rejected", reason=f"an oh-my-pi file: {exc.reason}",
                          line=exc.line + 1 if exc.line else None)
    if mapped is None:
        return None
    parsed = mapped.parsed(path)
    session_id = parsed.header["id"]
    if not is_valid_session_id(session_id):
        return Outcome("rejected", reason=f"invalid session id {session_id!r}", line=2)
    new_state = file_state(path, fst, session_id=session_id, consumed=len(body), lines=body.count(b"\n"),
                           entries=len(parsed.entries), version=0,
                           header_hash=hashlib.sha256(body.split(b"\n", 1)[0]).digest(),
                           tail_hash=hashlib.sha256(body[-_TAIL:]).digest())
    expect = syncer.states.get(path)

    def commit(change: SyncChange) -> None:
        syncer._commit(expect, new_state, change)

    raw = [parsed.entry_bytes(i) for i in range(len(parsed.entries))]
    found = stored_to_compare(syncer, session_id)
    if isinstance(found, Outcome):
        return found
    stored = found
    if stored is None:
        try:
            commit(SyncChange("create", session_id, dict(parsed.header), parsed.entries, raw,
                              provenance=syncer.origin(session_id, path, agent="omp")))
        except InvalidSessionError as exc:
            return Outcome("rejected", session_id, reason=exc.reason, line=exc.line)
        return Outcome("new", session_id, added=len(raw), pending=pending)
    before, after = _file_entries(stored), _file_entries(parsed)
    grown = after[:len(before)] == before and stored.header == parsed.header
    if grown:
        from_file = sum(1 for entry in stored.entries if isinstance(entry.get("foreign"), dict))
        if from_file == len(raw) and all(stored.entry_bytes(i) == raw[i] for i in range(from_file)):
            commit(SyncChange("none", session_id))
            return Outcome("in-progress" if pending else "unchanged", session_id, pending=pending)
    if grown or syncer.replace:
        entries, texts = merged_with_store(stored, parsed)
        try:
            commit(SyncChange("replace", session_id, dict(parsed.header), entries, texts))
        except InvalidSessionError as exc:
            return Outcome("rejected", session_id, reason=f"replacing failed: {exc.reason}")
        if grown:
            return Outcome("grown", session_id, added=len(after) - len(before), pending=pending)
        return Outcome("replaced", session_id, added=len(raw), pending=pending,
                          reason="diverged: the file no longer extends the stored session")
    first = next((k for k, pair in enumerate(before) if k >= len(after) or after[k] != pair), len(before))
    what = f"entry {before[first][0]} " if first < len(before) else "the header "
    return Outcome("diverged", session_id, reason=f"diverged: {what}differs from the stored one",
                      pending=pending)
