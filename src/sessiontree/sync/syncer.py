"""The :class:`Syncer`: each source file (or session of a source store) brought into one
store, with exactly one outcome (the rules are in :mod:`sessiontree.sync.engine`'s
docstring and docs/sync.md)."""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from sessiontree.errors import (
    InvalidSessionError,
    SessionError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
    SyncConflictError,
)
from sessiontree.format.codec import ParsedSession
from sessiontree.format.files import first_line
from sessiontree.format.foreign import map_records
from sessiontree.format.foreign.common import ForeignSession, bad_values_note
from sessiontree.format.ids import is_valid_session_id
from sessiontree.format.inputlimit import check_input_size
from sessiontree.format.shape import FileShape, ShapeError, shape_of
from sessiontree.stores.base import Provenance, SessionStore, SyncChange, SyncState
from sessiontree.stores.traits import BulkWrites
from sessiontree.sync.comparison import compare, mapped_again, merge_for_replace, remapped, rewritten, upgrade_rewrite
from sessiontree.sync.discovery import artifact_note, is_header_line, os_reason
from sessiontree.sync.gemini import maybe_gemini, sync_gemini
from sessiontree.sync.omp import maybe_omp, sync_omp
from sessiontree.sync.reading import (
    JSON_WS,
    TAIL_CHECK,
    complete_prefix,
    file_state,
    foreign_agent,
    lines_in,
    open_source,
    pread_range,
    prefix_sha,
    sha,
    whole_shape,
)
from sessiontree.sync.results import FileResult, SyncReport
from sessiontree.sync.sources import agent_sources

if TYPE_CHECKING:
    from sessiontree.stores.origin import Here

__all__ = ["Syncer"]


class Syncer:
    """Sync files (and source stores) into one store.

    Args:
        store: the target store (writable, unless ``dry_run``).
        replace: resolve ``diverged`` files by replacing the stored session
            with the file's content (``replaced``).
        dry_run: decide every outcome, write nothing.
        finished_after: seconds after which a Claude Code or Codex file whose last line
            has no newline, unchanged since, is taken as finished: that line is read
            when it is a complete record (docs/sync.md, "In progress"). ``None``
            (the default, and ``sync --strict``): such a line always waits.

    The recorded states and stored ids are read once at construction (one
    query each), so deciding that 10,000 files are unchanged costs 10,000
    ``stat`` calls and nothing else.
    """

    def __init__(self, store: SessionStore, *, replace: bool = False, dry_run: bool = False,
                 finished_after: float | None = None) -> None:
        self.store = store
        self.replace = replace
        self.dry_run = dry_run
        self.finished_after = finished_after
        self._here: Here | None = None  # this host, machine and user, read at the first origin
        # Which agent's folder a file is in, for the provenance of the sessions it creates.
        self._folders = sorted(((source.path.rstrip(os.sep) + os.sep, source.agent) for source in agent_sources()),
                               key=lambda item: -len(item[0]))
        self._refresh()

    def _finished(self, st: os.stat_result) -> bool:
        """Whether a file unchanged since ``st`` has rested longer than ``finished_after``."""
        return self.finished_after is not None and time.time() - st.st_mtime > self.finished_after

    def _refresh(self) -> None:
        self.states: dict[str, SyncState] = self.store.sync_states()
        self.stored_ids: set[str] = set(self.store.session_ids())

    # -- driving -----------------------------------------------------------------------------

    def sync_files(self, files: Sequence[str], *, on_file: Callable[[str], None] | None = None,
                   stop: threading.Event | None = None,
                   on_settle: Callable[[int, int], None] | None = None) -> SyncReport:
        """Sync each file in turn; stop between files when ``stop`` is set.

        Args:
            files: absolute paths (from :func:`discover`).
            on_file: called with each path after it is done (progress).
            stop: checked before each file.
            on_settle: progress of the final settle of derived data, ``(entries
                settled, entries pending)`` after each of its transactions.

        Returns:
            A :class:`SyncReport` (``interrupted`` and ``left`` when stopped).
        """
        report = SyncReport()
        bulk = self.store if isinstance(self.store, BulkWrites) else None
        in_hand = bulk.settled_in_hand if bulk is not None else 0
        with self._batched():
            for index, path in enumerate(files):
                if stop is not None and stop.is_set():
                    report.interrupted = True
                    report.left = len(files) - index
                    break
                report.files.append(self.sync_file(path))
                if on_file is not None:
                    on_file(path)
        if not self.dry_run and not report.interrupted and any(
                r.status in ("new", "grown", "replaced") for r in report.files):
            # Sessions were written: let the store finish the derived work writes defer
            # (SQLite's search tail, docs/search.md), here rather than in a later search.
            # Not when stopped (as an interrupted import): the stop asked to end now, and
            # the CLI catches SIGINT, so a long settle could not be interrupted again;
            # what is left stays pending and is still found.
            try:
                report.indexed = self.store.settle_derived(on_progress=on_settle)
            except StorageError:
                # The files are synced; a lock held too long only leaves the merge for later.
                report.index_left = True
            # New sessions a store indexed as it wrote them (SQLite: from the entries in hand).
            report.indexed += (bulk.settled_in_hand - in_hand) if bulk is not None else 0
        return report

    def _batched(self) -> contextlib.AbstractContextManager[None]:
        """The store's batched writes when it has them (SQLite's ``bulk_writes``), else
        nothing: a sync commits in large batches, each file's change still atomic, because
        the agent's files remain the source (docs/sync.md, "Durability")."""
        if self.dry_run or not isinstance(self.store, BulkWrites):
            return contextlib.nullcontext()
        return self.store.bulk_writes(seconds=1.0, writes=200)

    def sync_file(self, path: str) -> FileResult:
        """Sync one file; never raises for a problem of the file (it becomes ``rejected``).

        A conflict with another sync process (the recorded state moved on) is
        retried with fresh state; a file that keeps changing under that is rejected.

        Raises:
            StorageError: the store itself failed (not the file's fault).
        """
        path = os.path.abspath(path)
        for _ in range(5):
            try:
                return self._sync_file(path)
            except (SyncConflictError, SessionExistsError, SessionNotFoundError):
                # Another process wrote (or deleted) this file's session meanwhile: decide again.
                self._refresh()
        return FileResult(path, "rejected", reason="another sync kept changing this file's session; try again")

    def _sync_file(self, path: str) -> FileResult:
        state = self.states.get(path)
        stored = state is not None and state.session_id in self.stored_ids
        try:
            st = os.stat(path)
        except OSError as exc:
            return FileResult(path, "rejected", reason=os_reason(exc, path))
        if not stat.S_ISREG(st.st_mode):
            return FileResult(path, "rejected", reason="not a regular file")
        if stored and state is not None and (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev) == (
                state.size, state.mtime_ns, state.inode, state.dev):
            pending = state.size - state.consumed
            # A mapped file's unfinished last line left from a run before it rested long enough:
            # read it once more (it may be a complete record now taken as finished).
            if not (pending and state.version == 0 and self._finished(st)):
                return FileResult(path, "in-progress" if pending else "unchanged", state.session_id,
                                  pending=pending)
        try:
            fd = open_source(path)
        except OSError as exc:
            return FileResult(path, "rejected", reason=os_reason(exc, path))
        try:
            fst = os.fstat(fd)
            if (stored and state is not None and state.version >= 2 and fst.st_size >= state.consumed
                    and (fst.st_ino, fst.st_dev) == (state.inode, state.dev)):
                result = self._grow(path, fd, fst, state)
                if result is not None:
                    return result
            return self._whole(path, fd, fst, state)
        except OSError as exc:
            return FileResult(path, "rejected", reason=f"cannot read: {os_reason(exc, path)}")
        finally:
            os.close(fd)

    def origin(self, session_id: str, source: str, agent: str | None = None) -> Provenance:
        """The :class:`Provenance` of a session this run creates from ``source`` (a file:
        its agent is the agent whose folder holds it, else ``""``; docs/sync.md, "Provenance")."""
        from sessiontree.stores.origin import here, origin_here  # socket, getpass: only when a session is created

        if agent is None:
            agent = next((name for folder, name in self._folders if source.startswith(folder)), "")
        if self._here is None:
            self._here = here()  # read once a run: the host, machine and user do not change within it
        return origin_here(session_id, agent=agent, source=source, where=self._here)

    def _commit(self, expect: SyncState | None, state: SyncState, change: SyncChange) -> None:
        if self.dry_run:
            return
        self.store.sync_commit(expect, state, change)
        self.states[state.path] = state
        if change.kind == "create":
            self.stored_ids.add(change.session_id)

    # -- pi-subagents: a session's own file and its same-id copies -----------------------------

    def _own_file(self, path: str, session_id: str) -> str | None:
        """The session's own file when ``path`` is a same-id copy inside the folder named
        after it (``<ts>_<id>/forks/...``, ``<ts>_<id>/<runId>/run-0/session.jsonl``: the
        folder pi-subagents keeps beside a session file), else ``None``."""
        if session_id not in self.stored_ids:
            return None
        for other, state in self.states.items():
            if (other != path and state.session_id == session_id and state.entries > 0
                    and path.startswith(os.path.splitext(other)[0] + os.sep)):
                return other
        return None

    def _copies_taken_over(self, path: str, session_id: str) -> list[SyncState]:
        """The recorded states of same-id copies inside ``path``'s own folder that hold the
        session (synced before its own file, as an earlier version met them first)."""
        if session_id not in self.stored_ids:
            return []
        root = os.path.splitext(path)[0] + os.sep
        return [state for other, state in self.states.items()
                if state.session_id == session_id and state.entries > 0 and other.startswith(root)]

    # -- a file that only grew: read the new bytes --------------------------------------------

    def _grow(self, path: str, fd: int, fst: os.stat_result, state: SyncState) -> FileResult | None:
        """Sync the bytes after ``state.consumed``, or ``None`` when they cannot be trusted
        (the caller then reads the whole file)."""
        header = first_line(fd)
        if sha(header) != state.header_hash:
            return None
        if not is_header_line(header):
            return None  # malformed lines before the header (skipped as pi does): read whole
        low = max(0, state.consumed - TAIL_CHECK)
        try:
            check_input_size(fst.st_size - state.consumed, path)  # only the new bytes are read
        except InvalidSessionError as exc:
            return FileResult(path, "rejected", state.session_id, reason=exc.reason)
        before = pread_range(fd, low, state.consumed)
        if len(before) != state.consumed - low or sha(before) != state.tail_hash:
            return None
        new = pread_range(fd, state.consumed, fst.st_size)
        complete, pending = complete_prefix(new)
        chunk = new[:complete]
        ended = before.endswith(b"\n")
        if chunk:
            # Newlines in the consumed bytes, plus the chunk's; an unterminated last line counts.
            lines = state.lines - (0 if ended else 1) + chunk.count(b"\n") + (0 if chunk.endswith(b"\n") else 1)
            tail = sha((before + chunk)[-TAIL_CHECK:])
        else:
            lines, tail = state.lines, state.tail_hash
        moved = file_state(path, fst, session_id=state.session_id, consumed=state.consumed + complete, lines=lines,
                           entries=state.entries, version=state.version, header_hash=state.header_hash,
                           tail_hash=tail)
        if not chunk.strip(JSON_WS + b"\x0b\x0c"):
            # Nothing new but blank lines or an unfinished one: record where the file is now.
            if chunk:
                previous = self._previous_shape(path)
                if previous is None:
                    return None
                try:
                    more = shape_of(chunk, None, [], lambda i: b"", first_line=2)
                except ShapeError:
                    return None
                moved = replace(moved, shape=previous.extended(more, prefix_sha(fd, state.consumed + complete)).encode())
            else:
                moved = replace(moved, shape=self._previous_blob(path))
            self._commit(state, moved, SyncChange("none", state.session_id))
            return FileResult(path, "in-progress" if pending else "unchanged", state.session_id, pending=pending)
        from sessiontree.check.glued import parse_unglued  # deferred: an unchanged run reads no file
        from sessiontree.session.importing import check_record_sizes

        try:
            parsed, split = parse_unglued(header + b"\n" + chunk, path)
            check_record_sizes(parsed, path)
        except InvalidSessionError as exc:
            line = exc.line
            if line is not None:
                line = state.lines + (line - 1) - (0 if ended else 1)
            return FileResult(path, "rejected", state.session_id, reason=exc.reason, line=line)
        if parsed.header.get("id") != state.session_id:
            return None
        raw = [parsed.entry_bytes(i) for i in range(len(parsed.entries))]
        shape = self._grown_shape(path, fd, state, chunk, parsed)
        if shape is None:
            return None  # no shape to extend (recorded before shapes were kept): read the file whole once
        moved = replace(moved, entries=state.entries + len(raw), shape=shape)
        try:
            self._commit(state, moved, SyncChange("append", state.session_id, entries=parsed.entries, raw=raw))
        except (InvalidSessionError, SessionNotFoundError):
            return None  # an id already stored, the session gone: compare the whole file instead
        return FileResult(path, "grown" if raw else ("in-progress" if pending else "unchanged"),
                          state.session_id, added=len(raw), pending=pending,
                          note=split.note(state.lines - (1 if ended else 2)) if split is not None else None)

    def _previous_blob(self, path: str) -> bytes | None:
        """The encoded shape recorded for ``path`` (the state objects may not carry it)."""
        state = self.states.get(path)
        if state is not None and state.shape is not None:
            return state.shape
        return self.store.sync_shape(path)

    def _previous_shape(self, path: str) -> FileShape | None:
        """The decoded shape recorded for ``path``, or ``None`` (none recorded, or undecodable)."""
        blob = self._previous_blob(path)
        if blob is None:
            return None
        try:
            return FileShape.decode(blob)
        except ShapeError:
            return None

    def _grown_shape(self, path: str, fd: int, state: SyncState, chunk: bytes,
                     parsed: ParsedSession) -> bytes | None:
        """The recorded shape extended by the appended ``chunk`` (parsed after the header
        line, so its lines count from 2), with the SHA-256 of every consumed byte; ``None``
        when there is no recorded shape to extend or the chunk's lines do not fit it."""
        previous = self._previous_shape(path)
        if previous is None or previous.size != state.consumed:
            return None
        try:
            more = shape_of(chunk, None, parsed.lines, parsed.entry_bytes, first_line=2)
        except ShapeError:
            return None
        return previous.extended(more, prefix_sha(fd, state.consumed + len(chunk))).encode()

    # -- anything else: read the whole file and compare ---------------------------------------

    def _whole(self, path: str, fd: int, fst: os.stat_result, state: SyncState | None) -> FileResult:
        note = artifact_note(path, first_line(fd))
        if note is not None:
            return FileResult(path, "unchanged", note=note)
        try:
            check_input_size(fst.st_size, path)  # refused before it is read (docs/stores.md, "Large files")
        except InvalidSessionError as exc:
            return FileResult(path, "rejected", reason=exc.reason)
        data = pread_range(fd, 0, fst.st_size)
        if maybe_gemini(path, data):  # one JSON document rewritten whole (docs/agents/gemini.md)
            gemini = sync_gemini(self, path, data, fst, state)
            if gemini is not None:
                return FileResult(path, **vars(gemini))
        if maybe_omp(data):  # a title slot rewritten in place (docs/agents/README.md, "oh-my-pi")
            omp = sync_omp(self, path, data, fst, state)
            if omp is not None:
                return FileResult(path, **vars(omp))
        complete, pending = complete_prefix(data)
        agent = foreign_agent(data[:complete])  # the one sniff of the file (a torn last line left out)
        if pending and agent is not None and self._finished(fst):
            # A Claude Code or Codex file whose torn last line has rested past
            # ``finished_after``: the agent is gone; the line is its last (inert) record
            # (docs/sync.md, "Quiet repeats"). pi's files keep their own rule.
            complete, pending = len(data), 0
        body = data[:complete]
        if not body.strip(JSON_WS + b"\x0b\x0c"):
            if pending or not data:
                return FileResult(path, "in-progress", reason="no complete record yet", pending=pending)
            return FileResult(path, "rejected", reason="not a session: the file is blank")
        if agent is not None:
            foreign = self._whole_foreign(path, body, fst, state, pending, agent)
            if foreign is not None:
                return foreign
        from sessiontree.check.glued import parse_unglued  # deferred: an unchanged run reads no file
        from sessiontree.session.importing import check_record_sizes

        try:
            parsed, split = parse_unglued(body, path)
            check_record_sizes(parsed, path)
        except InvalidSessionError as exc:
            return FileResult(path, "rejected", reason=exc.reason, line=exc.line)
        session_id = parsed.header["id"]
        if not is_valid_session_id(session_id):
            return FileResult(path, "rejected", session_id, reason=f"invalid session id {session_id!r}", line=1)
        own = self._own_file(path, session_id)
        if own is not None:
            # A same-id copy inside the session's own folder (pi-subagents): recorded, so it is
            # not read again while unchanged, with no entries (never counted, never the
            # session's path for restore or resume), and nothing stored from it.
            copy = file_state(path, fst, session_id=session_id, consumed=complete, lines=lines_in(body), entries=0,
                              version=0, header_hash=sha(body.split(b"\n", 1)[0]), tail_hash=sha(body[-TAIL_CHECK:]))
            self._commit(self.states.get(path), copy, SyncChange("none", session_id))
            return FileResult(path, "unchanged", session_id, pending=pending,
                              note=f"a copy of session {session_id} in its own file's folder (pi-subagents); "
                                   f"the session is {own}: not counted again")
        taken = self._copies_taken_over(path, session_id)
        raw = [parsed.entry_bytes(i) for i in range(len(parsed.entries))]
        new_state = file_state(path, fst, session_id=session_id, consumed=complete, lines=lines_in(body),
                               entries=len(raw), version=parsed.source_version,
                               header_hash=sha(body.split(b"\n", 1)[0]), tail_hash=sha(body[-TAIL_CHECK:]),
                               shape=whole_shape(body, parsed, split.header_line if split is not None else None))
        expect = self.states.get(path)
        synced_before = state.entries if state is not None and state.session_id == session_id else 0
        notes = []
        if taken:
            # The session's own file takes the session back from the copies an earlier sync
            # met first: the stored session becomes the file's (the copies' own entries stay in
            # their files), and the copies are recorded as copies.
            try:
                self._commit(expect, new_state, SyncChange("replace", session_id, dict(parsed.header),
                                                           parsed.entries, raw))
            except InvalidSessionError as exc:
                return FileResult(path, "rejected", session_id, reason=f"replacing failed: {exc.reason}")
            for copy in taken:
                self._commit(copy, replace(copy, entries=0, version=0, shape=None),
                             SyncChange("none", session_id))
            many = len(taken) > 1
            result = FileResult(path, "replaced", session_id, added=len(raw), pending=pending,
                                reason=f"the session's own file: it replaces what {len(taken)} same-id "
                                       f"cop{'ies' if many else 'y'} in its folder (pi-subagents) gave "
                                       f"before; they no longer count")
        else:
            result = self._reconcile(path, parsed, raw, pending, synced_before,
                                     lambda change: self._commit(expect, new_state, change))
        if result.status == "new" and state is not None and state.session_id == session_id:
            # Synced before, since deleted from the store: the agent's file is the source,
            # so it comes back, but never silently (docs/sync.md, "A deleted session").
            notes.append("re-imported: this session was deleted from the store after an earlier sync, "
                         "and the agent's file still holds it (remove the file to keep it out)")
        if split is not None and result.status not in ("rejected", "diverged"):
            notes.append(split.note())
        if notes:
            result.note = "; ".join(notes)
        return result

    def _whole_foreign(self, path: str, body: bytes, fst: os.stat_result, state: SyncState | None,
                       pending: int, agent: str) -> FileResult | None:
        """Sync a Claude Code or Codex file through its mapping (docs/agents/README.md), or
        ``None`` when it is not one. Such a file is always read whole (its state's
        ``version`` is 0, so the grown-file path never trusts an offset into it: a
        mapping needs the earlier records, e.g. to pair tool results and count usage
        once) and records no shape (``restore`` is for pi and Atomic; a foreign session
        is given back with ``export --format source``)."""
        if not body.strip(JSON_WS + b"\x0b\x0c"):
            return FileResult(path, "in-progress", reason="no complete record yet", pending=pending)
        mapped = map_records(agent, body, path)  # ``agent``: the caller's one sniff of the file
        if mapped is None:
            return None
        result = self._whole_mapped(path, body, fst, state, pending, mapped)
        if result is not None and mapped.bad_values and result.status in ("new", "grown", "replaced"):
            # Values taken otherwise are said once: those of the lines this run added (all of
            # them for a new or replaced session), as sync reports other flaws of a file.
            before = state.lines if (result.status == "grown" and state is not None
                                     and state.session_id == result.session_id) else 0
            fresh = [value for value in mapped.bad_values if value.line > before]
            if fresh:
                note = bad_values_note(fresh)
                result.note = f"{result.note}; {note}" if result.note else note
        return result

    def _whole_mapped(self, path: str, body: bytes, fst: os.stat_result, state: SyncState | None,
                      pending: int, mapped: ForeignSession) -> FileResult | None:
        """:meth:`_whole_foreign` once the file is mapped (``mapped``)."""
        if not mapped.header_known:
            return FileResult(path, "in-progress", reason="no record names the session yet",
                              pending=pending + len(body))
        refusal = mapped.refusal()  # the same decision `check` reports (docs/agents/README.md)
        if refusal is not None:
            return FileResult(path, "rejected", reason=refusal, line=1)
        parsed = mapped.parsed(path)
        session_id = parsed.header["id"]
        count = len(parsed.entries)
        new_state = file_state(path, fst, session_id=session_id, consumed=len(body), lines=lines_in(body),
                               entries=count, version=0, header_hash=sha(body.split(b"\n", 1)[0]),
                               tail_hash=sha(body[-TAIL_CHECK:]))
        expect = self.states.get(path)
        synced_before = state.entries if state is not None and state.session_id == session_id else 0
        appended = (state is not None and expect is state and synced_before and state.version == 0
                    and session_id in self.stored_ids and (fst.st_ino, fst.st_dev) == (state.inode, state.dev)
                    and state.consumed <= len(body) and count >= state.entries
                    # A last record taken as finished without its newline may be continued on its line.
                    and body[state.consumed - 1:state.consumed] in (b"\n", b"")
                    and sha(body.split(b"\n", 1)[0]) == state.header_hash
                    and sha(body[max(0, state.consumed - TAIL_CHECK):state.consumed]) == state.tail_hash)
        # The stored entries are the mapping of a shorter file: when a bill moved from one of
        # them to a newer record, they must be replaced (comparing with this mapping's own
        # ``settled`` missed every file that grew past the call: billed twice).
        if appended and state is not None and not mapped.prefix_stable(state.entries):
            replaced = self._replace_unsettled(path, parsed, state.entries, pending,
                                               lambda change: self._commit(expect, new_state, change))
            if replaced is not None:
                return replaced
        if appended and state is not None:
            # Only appended to (same file, same first line, same bytes before the consumed
            # offset): the mapping is prefix-stable, so the entries already synced are the
            # first ones; append the rest without reading the stored session back.
            added = parsed.entries[state.entries:]
            texts: list[bytes | None] = [parsed.entry_bytes(i) for i in range(state.entries, count)]
            try:
                self._commit(expect, new_state, SyncChange("append", session_id, entries=added, raw=texts)
                             if added
                             else SyncChange("none", session_id))
            except (InvalidSessionError, SessionNotFoundError):
                pass  # an id already stored, the session gone: compare the whole session below
            else:
                return FileResult(path, "grown" if added else ("in-progress" if pending else "unchanged"),
                                  session_id, added=len(added), pending=pending)
        raw = [parsed.entry_bytes(i) for i in range(count)]
        return self._reconcile(path, parsed, raw, pending, synced_before,
                               lambda change: self._commit(expect, new_state, change), source=body)

    def _replace_unsettled(self, path: str, parsed: ParsedSession, stored_count: int, pending: int,
                           commit: Callable[[SyncChange], None]) -> FileResult | None:
        """A foreign file synced while a Claude Code call was still being written: the call's
        billed flag has moved to its newest record (docs/agents/README.md, "Prefix-stable"),
        so the stored session is replaced by the file's entries (entries set with
        sessiontree kept, as ``sync --replace`` keeps them). ``None`` when the stored
        session cannot be read (the caller then compares the whole session)."""
        session_id = parsed.header["id"]
        try:
            stored = self.store.read(session_id)
        except (SessionNotFoundError, InvalidSessionError, StorageError):
            return None
        count = len(parsed.entries)
        raw = [parsed.entry_bytes(i) for i in range(count)]
        entries, texts, _kept, _superseded, _dropped = merge_for_replace(stored, parsed, raw)
        try:
            commit(SyncChange("replace", session_id, dict(parsed.header), entries, texts))
        except InvalidSessionError as exc:
            return FileResult(path, "rejected", session_id, reason=f"replacing failed: {exc.reason}")
        added = count - stored_count
        return FileResult(path, "grown" if added else ("in-progress" if pending else "unchanged"),
                          session_id, added=added, pending=pending)

    def _reconcile(self, path: str, parsed: ParsedSession, raw: list[bytes], pending: int, synced_before: int,
                   commit: Callable[[SyncChange], None], source: bytes | None = None) -> FileResult:
        """Decide new / unchanged / grown / diverged / replaced for a parsed source and write it.

        ``source``: a foreign file's complete bytes. When its stored session differs from
        the file's mapping although the records it was mapped from are the file's own
        (a prefix of ``source``), the mapping changed, not the file: the session is mapped
        again (``replaced``), as docs/agents/README.md ("Mapped again") says."""
        session_id = parsed.header["id"]
        stored: ParsedSession | None = None
        if session_id in self.stored_ids or self.store.exists(session_id):
            try:
                stored = self.store.read(session_id)
            except SessionNotFoundError:
                stored = None
            except (InvalidSessionError, StorageError) as exc:
                return FileResult(path, "rejected", session_id,
                                  reason=f"the stored session cannot be read to compare: {exc}")
        if stored is None:
            try:
                commit(SyncChange("create", session_id, dict(parsed.header), parsed.entries, raw,
                                  provenance=self.origin(session_id, path)))
            except InvalidSessionError as exc:
                return FileResult(path, "rejected", session_id, reason=exc.reason, line=exc.line)
            return FileResult(path, "new", session_id, added=len(raw), pending=pending)
        compared = compare(stored, parsed, raw, synced_before)
        if compared.kind == "same":
            commit(SyncChange("none", session_id))
            return FileResult(path, "in-progress" if pending else "unchanged", session_id, pending=pending)
        if compared.kind == "grown":
            added = parsed.entries[compared.common:]
            commit(SyncChange("append", session_id, entries=added, raw=raw[compared.common:]))
            return FileResult(path, "grown", session_id, added=len(added), pending=pending)
        mapping = upgrade_rewrite(stored, parsed, synced_before) if synced_before else None
        if mapping is not None:
            entries, texts, kept = rewritten(stored, parsed, raw, mapping)
            try:
                commit(SyncChange("replace", session_id, dict(parsed.header), entries, texts))
            except InvalidSessionError as exc:
                return FileResult(path, "rejected", session_id, reason=f"replacing failed: {exc.reason}")
            reason = (f"the agent rewrote the file (an upgrade): the same {len(mapping)} entries under new ids "
                      "and header; taken as the stored session" +
                      (f", {kept} entries set with sessiontree kept on the new ids" if kept else ""))
            return FileResult(path, "replaced", session_id, added=len(raw), reason=reason,
                              pending=pending, kept=kept, superseded=len(mapping))
        if source is not None and mapped_again(stored, source):
            entries, texts, kept = remapped(stored, parsed, raw)
            try:
                commit(SyncChange("replace", session_id, dict(parsed.header), entries, texts))
            except InvalidSessionError as exc:
                return FileResult(path, "rejected", session_id, reason=f"replacing failed: {exc.reason}")
            return FileResult(path, "replaced", session_id, added=len(raw), pending=pending, kept=kept,
                              reason="mapped again: the file's records are the ones stored, read by this "
                                     "version's mapping" + (f" ({kept} entries set with sessiontree kept)"
                                                            if kept else ""))
        index = compared.index
        line: int | None
        if index is None:
            line = 1  # the header
        else:
            line = parsed.lines[index] if index < len(parsed.lines) else None
        entry_id = parsed.entries[index]["id"] if index is not None and index < len(parsed.entries) else None
        what = f"entry {entry_id} " if entry_id is not None else ""
        reason = f"diverged: {what}{compared.reason}"
        if not self.replace:
            return FileResult(path, "diverged", session_id, reason=reason, line=line, entry_id=entry_id,
                              pending=pending)
        entries, texts, kept, superseded, dropped = merge_for_replace(stored, parsed, raw)
        try:
            commit(SyncChange("replace", session_id, dict(parsed.header), entries, texts))
        except InvalidSessionError as exc:
            return FileResult(path, "rejected", session_id, reason=f"replacing failed: {exc.reason}")
        return FileResult(path, "replaced", session_id, added=len(raw), reason=reason, line=line,
                          entry_id=entry_id, pending=pending, kept=kept, superseded=superseded, dropped=dropped)

    # -- another store as the source ----------------------------------------------------------

    def sync_store(self, source: SessionStore, *, on_session: Callable[[str], None] | None = None,
                   stop: threading.Event | None = None) -> SyncReport:
        """Copy every session of ``source`` into the target: new ones created, grown ones
        appended, diverged ones reported (or replaced). No per-file state is kept: each
        session is compared in full (a store has no files to ``stat``).

        Returns:
            A :class:`SyncReport`; each result's path is ``<source url>#<session id>``.
        """
        report = SyncReport()
        ids = sorted(source.session_ids())
        try:
            # A session the source knows the origin of keeps it: the copy is not its origin.
            origins = source.provenances()
        except (SessionError, AttributeError, NotImplementedError):
            origins = {}
        for index, session_id in enumerate(ids):
            if stop is not None and stop.is_set():
                report.interrupted, report.left = True, len(ids) - index
                break
            where = f"{source.url}#{session_id}"
            try:
                parsed = source.read(session_id)
            except (SessionError, OSError) as exc:
                report.files.append(FileResult(where, "rejected", session_id, reason=str(exc)))
                continue
            raw = [parsed.entry_bytes(i) for i in range(len(parsed.entries))]

            def commit(change: SyncChange, where: str = where) -> None:
                if self.dry_run:
                    return
                if change.kind == "create":
                    self.store.create(change.header or {}, change.entries, change.raw)
                    self.stored_ids.add(change.session_id)
                    known = origins.get(change.session_id)
                    self.store.record_provenance([known if known is not None else self.origin(
                        change.session_id, where, "")])
                elif change.kind == "append":
                    self.store.append(change.session_id, change.entries, change.raw)
                elif change.kind == "replace":
                    self.store.replace_session(change.header or {}, change.entries, change.raw)

            try:
                report.files.append(self._reconcile(where, parsed, raw, 0, 0, commit))
            except SessionExistsError:
                self._refresh()
                report.files.append(self._reconcile(where, parsed, raw, 0, 0, commit))
            if on_session is not None:
                on_session(where)
        return report


