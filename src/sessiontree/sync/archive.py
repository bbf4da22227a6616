"""Move old, synced agent files out of the agents' folders (``sessiontree archive``).

A file is archived only when the store can give it back byte for byte
(docs/agent-loop.md, "What is verified before anything is moved"):

1. it is synced and unchanged since (size, mtime, inode and device equal the
   recorded state; the file is not even opened when they differ), all its
   bytes were consumed (no unfinished last line), and it is older than the
   bound (or not among the newest ``keep_newest`` of its agent);
2. the store rebuilds its bytes (:func:`~sessiontree.sync.restore.agent_file`)
   and their SHA-256 equals the file's, read now;
3. under the store's sync run lock (one archive or sync at a time on a SQLite
   or JSONL store, per host on a PostgreSQL one: docs/postgres.md), the file is renamed beside itself to a name no agent or
   sync reads (``<name>.sessiontree-archiving``), the renamed file is hashed
   again and must still match (an agent appending through the path before the
   rename is caught here; one appending after it creates a new file, which
   stays), an audit record is written (``pending``), and only then is it moved
   to the trash under its own name (:mod:`.trash`) or deleted, and the record marked ``done``.

A SIGKILL at any point leaves the file in its folder, or renamed beside it
(put back, or finished when its record was written, by the next run), or
gone with the store able to rebuild it: never lost.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sessiontree.errors import SessionError, StorageError
from sessiontree.format.files import O_CLOEXEC, sha256_prefix
from sessiontree.stores.base import ArchivedFile, SessionStore, SyncState
from sessiontree.sync.discovery import discover
from sessiontree.sync.restore import agent_file, sweep_stale_temps
from sessiontree.sync.runlock import run_lock
from sessiontree.sync.safepath import UnsafePathError, check_under
from sessiontree.sync.sources import AGENTS, agent_sources
from sessiontree.sync.trash import trash_file

__all__ = ["ARCHIVING_SUFFIX", "PROBLEMS", "ArchiveReport", "ArchivedResult", "archive", "archived_state"]

#: Suffix of a file being archived (renamed beside itself): no agent or sync reads it.
ARCHIVING_SUFFIX = ".sessiontree-archiving"
#: Skip reasons that are problems (exit status 1), as ``rejected``/``diverged`` are for sync;
#: the other skips (too new, in progress, not synced) are normal.
PROBLEMS = ("diverged", "cannot reproduce", "move failed")


@dataclass
class ArchivedResult:
    """What ``archive`` did with one file.

    Attributes:
        path: the file.
        status: ``"archived"``, ``"would archive"`` (dry run), ``"kept"`` (not old
            enough / among the newest) or ``"skipped"``.
        reason: why it was kept or skipped (a short phrase; the first word of a
            problem is in :data:`PROBLEMS`).
        session_id: the session it holds, when known.
        size: its size in bytes.
        agent: whose folder it is in.
    """

    path: str
    status: str
    reason: str | None = None
    session_id: str | None = None
    size: int = 0
    agent: str = ""

    @property
    def problem(self) -> bool:
        """Whether this skip is a problem (exit status 1)."""
        return self.status == "skipped" and self.reason is not None and self.reason.startswith(PROBLEMS)

    def to_dict(self) -> dict[str, Any]:
        """JSON data (camelCase keys)."""
        return {"path": self.path, "status": self.status, "reason": self.reason, "sessionId": self.session_id,
                "size": self.size, "agent": self.agent}


@dataclass
class ArchiveReport:
    """The outcome of one ``archive`` run: one result per file looked at, in order."""

    files: list[ArchivedResult] = field(default_factory=list)
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        """No file was skipped for a problem."""
        return not any(result.problem for result in self.files)

    def summary(self) -> str:
        """One line: files archived, bytes freed, kept, skipped by reason."""
        done = [r for r in self.files if r.status in ("archived", "would archive")]
        freed = sum(r.size for r in done)
        verb = "would archive" if self.dry_run else "archived"
        parts = [f"{len(done)} {verb} ({_size(freed)} {'to free' if self.dry_run else 'freed'})"]
        kept = sum(1 for r in self.files if r.status == "kept")
        parts.append(f"{kept} kept")
        reasons: dict[str, int] = {}
        for r in self.files:
            if r.status == "skipped":
                key = (r.reason or "").split(":", 1)[0].split(" (", 1)[0]
                reasons[key] = reasons.get(key, 0) + 1
        parts += [f"{count} skipped ({reason})" for reason, count in sorted(reasons.items())]
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON data: per-file results and the totals."""
        done = [r for r in self.files if r.status in ("archived", "would archive")]
        return {"files": [r.to_dict() for r in self.files], "dryRun": self.dry_run,
                "archived": len(done), "bytesFreed": sum(r.size for r in done),
                "kept": sum(1 for r in self.files if r.status == "kept"),
                "skipped": sum(1 for r in self.files if r.status == "skipped"), "ok": self.ok}


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{count} B"


def _sha_file(path: str) -> tuple[bytes, int]:
    """SHA-256 and size of a file's bytes (read in pieces, never whole)."""
    fd = os.open(path, os.O_RDONLY | O_CLOEXEC)
    try:
        return sha256_prefix(fd)
    finally:
        os.close(fd)


def _trash(moved: str, original: str) -> None:
    """Move the renamed file ``moved`` to the desktop trash under its own name ``original``
    (:func:`~sessiontree.sync.trash.trash_file`: a desktop "restore" brings back the name the
    agent lists; a failure leaves no ``.trashinfo``).

    Raises:
        OSError: it could not be moved.
    """
    trash_file(moved, original)


def _sweep(root: str) -> None:
    """Remove the stale temporary files of killed restores in ``root`` (one folder, not a link)."""
    try:
        fd = os.open(root, os.O_RDONLY | O_CLOEXEC | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return
    try:
        sweep_stale_temps(fd)
    finally:
        os.close(fd)


def _finish_leftovers(store: SessionStore, folders: Sequence[str], delete: bool,
                      records: dict[tuple[str, bytes], ArchivedFile]) -> list[ArchivedResult]:
    """Finish what a killed run left: a renamed file whose bytes match its pending
    record is moved on; any other renamed file is renamed back when its name is free;
    a pending record whose file and renamed copy are both gone is marked ``done`` (the
    move happened), one whose file is back under its name with its bytes ``undone`` (a
    new file of the agent under that name is not the archived one: ``done``)."""
    results: list[ArchivedResult] = []
    for folder in folders:
        for root, _, names in os.walk(folder):  # symbolic links to folders are not followed
            if any(name.startswith(".") and ".restore-" in name for name in names):
                _sweep(root)
            for name in names:
                if not name.endswith(".jsonl" + ARCHIVING_SUFFIX):
                    continue
                moved = os.path.join(root, name)
                original = moved[:-len(ARCHIVING_SUFFIX)]
                try:
                    sha, size = _sha_file(moved)
                except OSError:
                    continue
                record = records.get((original, sha))
                if record is not None:
                    try:
                        os.unlink(moved) if delete else _trash(moved, original)
                    except FileNotFoundError:
                        continue  # taken meanwhile: its record is settled below
                    except OSError as exc:
                        results.append(ArchivedResult(original, "skipped", f"move failed: {exc}", record.session_id,
                                                      size))
                        continue
                    store.record_archived(ArchivedFile(original, record.session_id, sha, size, record.agent,
                                                       record.archived_at, "deleted" if delete else "trash", "done"))
                    results.append(ArchivedResult(original, "archived", "finished a run that was stopped",
                                                  record.session_id, size, record.agent))
                elif not os.path.lexists(original):
                    os.rename(moved, original)
    # A run killed after the move but before its record said so: the file is gone (the
    # trash or deleted, as the record says), the renamed copy too: the move happened.
    # One whose file is back under its name (put back) did not.
    for record in store.archived_files():
        if record.state != "pending" or os.path.lexists(record.path + ARCHIVING_SUFFIX):
            continue
        store.record_archived(replace(record, state="undone" if _holds(record.path, record.sha256) else "done"))
    return results


def archive(store: SessionStore, *, older_than: float | None = 30 * 86400.0, keep_newest: int | None = None,
            agents: Sequence[str] | None = None, dry_run: bool = False, delete: bool = False,
            now: float | None = None, environ: Mapping[str, str] | None = None, home: str | None = None,
            folders: Sequence[tuple[str, str]] | None = None,
            on_file: Callable[[ArchivedResult], None] | None = None) -> ArchiveReport:
    """Archive the agents' synced, unchanged, old files (rules in the module docstring).

    Args:
        store: the store the files were synced into (writable unless ``dry_run``).
        older_than: seconds; only files whose mtime is older than this (``None``: no age bound).
        keep_newest: keep this many newest files per agent folder (``None``: no such bound).
            With both bounds, a file must pass both.
        agents: only these agents' folders (default: pi's and Atomic's; other agents'
            files are never archived).
        dry_run: decide and verify, move nothing, write nothing.
        delete: remove files instead of moving them to the trash.
        now: the current time (seconds since the epoch; tests fix it).
        environ, home: where to find the agents' folders.
        folders: ``(agent, folder)`` pairs to use instead of the agents' own folders.
        on_file: called with each result as it is decided.

    Returns:
        An :class:`ArchiveReport`.

    Raises:
        StorageError: the store could not be read or written.
    """
    now = time.time() if now is None else now
    if folders is None:
        # Only the agents restore gives files back to (pi, Atomic): a Claude Code or Codex
        # file is mapped, not kept with a shape, so it is never archived (docs/agent-loop.md).
        own = {name for name, _, _ in AGENTS}
        folders = [(source.agent, source.path) for source in agent_sources(environ, home)
                   if source.exists and source.agent in own and (agents is None or source.agent in agents)]
    report = ArchiveReport(dry_run=dry_run)

    def emit(result: ArchivedResult) -> None:
        report.files.append(result)
        if on_file is not None:
            on_file(result)

    with run_lock(store) if not dry_run else contextlib.nullcontext():
        states = store.sync_states()
        stored_ids = set(store.session_ids())
        records = {(record.path, record.sha256): record for record in store.archived_files()}
        if not dry_run:
            for result in _finish_leftovers(store, [folder for _, folder in folders], delete, records):
                emit(result)
        for agent, folder in folders:
            links: list[str] = []
            paths, _ = discover([folder], links=links)
            for link in links:
                emit(ArchivedResult(link, "skipped", "a symbolic link to a folder (not followed)", None, 0, agent))
            stats: list[tuple[str, os.stat_result]] = []
            for path in paths:
                try:
                    stats.append((path, os.stat(path)))
                except OSError:
                    continue
            newest = {path for path, _ in sorted(stats, key=lambda item: item[1].st_mtime_ns, reverse=True)
                      [:keep_newest]} if keep_newest is not None else set()
            for path, st in stats:
                emit(_one(store, agent, folder, path, st, states.get(path), stored_ids, newest, older_than,
                          now, dry_run, delete))
    return report


def _one(store: SessionStore, agent: str, folder: str, path: str, st: os.stat_result, state: SyncState | None,
         stored_ids: set[str], newest: set[str], older_than: float | None, now: float, dry_run: bool,
         delete: bool) -> ArchivedResult:
    """Decide, verify and archive one file found in ``folder`` (the agent's sessions folder)."""
    size = st.st_size
    if path in newest:
        return ArchivedResult(path, "kept", "among the newest", state.session_id if state else None, size, agent)
    if older_than is not None and st.st_mtime > now - older_than:
        return ArchivedResult(path, "kept", "modified recently", state.session_id if state else None, size, agent)
    if state is None or state.session_id not in stored_ids:
        return ArchivedResult(path, "skipped", "not synced (run sessiontree sync first)", None, size, agent)
    if (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev) != (state.size, state.mtime_ns, state.inode, state.dev):
        return ArchivedResult(path, "skipped", "changed since the last sync (run sessiontree sync first)",
                              state.session_id, size, agent)
    if state.consumed != state.size:
        return ArchivedResult(path, "skipped", "in progress (its last line is unfinished)", state.session_id, size,
                              agent)
    try:
        rebuilt = agent_file(store, state.session_id, agent=agent, state=state)
    except (SessionError, StorageError) as exc:
        return ArchivedResult(path, "skipped", f"cannot reproduce: {exc}", state.session_id, size, agent)
    try:
        sha, read = _sha_file(path)
    except FileNotFoundError:
        return ArchivedResult(path, "skipped", _VANISHED, state.session_id, size, agent)
    except OSError as exc:
        return ArchivedResult(path, "skipped", f"cannot read: {exc.strerror}", state.session_id, size, agent)
    if sha != rebuilt.sha256 or read != len(rebuilt.data):
        reason = ("diverged: the store holds entries the file does not" if rebuilt.extra
                  else "cannot reproduce: the store does not rebuild its bytes exactly")
        return ArchivedResult(path, "skipped", reason, state.session_id, size, agent)
    try:
        check_under(folder, path)  # no symbolic link on the way: only files of the folder itself move
    except UnsafePathError as exc:
        return ArchivedResult(path, "skipped", f"not moved: {exc}", state.session_id, size,
                              agent)
    except OSError as exc:
        return ArchivedResult(path, "skipped", f"cannot read: {exc.strerror}", state.session_id,
                              size, agent)
    if dry_run:
        return ArchivedResult(path, "would archive", None, state.session_id, size, agent)
    moved = path + ARCHIVING_SUFFIX
    try:
        os.rename(path, moved)
    except FileNotFoundError:
        return ArchivedResult(path, "skipped", _VANISHED, state.session_id, size, agent)
    except OSError as exc:
        return ArchivedResult(path, "skipped", f"move failed: {exc.strerror}", state.session_id, size, agent)
    try:
        again, _ = _sha_file(moved)
    except OSError:
        again = b""
    if again != sha:
        _put_back(moved, path)
        return ArchivedResult(path, "skipped", "changed since the last sync (it grew while being archived)",
                              state.session_id, size, agent)
    # Recorded after the rename: a run killed before this line leaves a renamed file with no
    # record, which the next run puts back; one killed after it, a record the next run finishes.
    record = ArchivedFile(path, state.session_id, sha, size, agent, int(time.time() * 1000),
                          "deleted" if delete else "trash", "pending")
    try:
        store.record_archived(record)
    except StorageError:
        _put_back(moved, path)
        raise
    try:
        os.unlink(moved) if delete else _trash(moved, path)
    except OSError as exc:
        _put_back(moved, path)
        if not os.path.lexists(path) and not os.path.lexists(moved):
            # Gone from under us (taken by another process, not by us): the record says what
            # is true, the file is no longer in the folder, and the store rebuilds it.
            store.record_archived(replace(record, state="done"))
            return ArchivedResult(path, "skipped", _VANISHED, state.session_id, size, agent)
        store.record_archived(replace(record, state="undone"))
        return ArchivedResult(path, "skipped", f"move failed: {exc}", state.session_id, size, agent)
    store.record_archived(ArchivedFile(path, state.session_id, sha, size, agent, record.archived_at,
                                       record.destination, "done"))
    return ArchivedResult(path, "archived", None, state.session_id, size, agent)


#: Why a file that was there when the run listed its folder is skipped: it is gone.
_VANISHED = "vanished (another run may have archived it)"


def _holds(path: str, sha: bytes) -> bool:
    """Whether the file at ``path`` has the bytes of SHA-256 ``sha`` (put back after a failed
    move), not a new file an agent wrote under the same name since."""
    try:
        return _sha_file(path)[0] == sha
    except OSError:
        return False


def archived_state(record: ArchivedFile) -> str:
    """What ``archived`` shows of ``record`` (docs/agent-loop.md, "The audit records"): its
    recorded state, except that a ``done`` record whose file is back at its path with the
    archived bytes (``restore``, ``resume``, or a person taking it out of the trash) is
    ``"restored"``. Only a regular file of the recorded size is read (hashed), never a
    link or a FIFO; the record itself is not changed (a read-only store can answer)."""
    if record.state != "done":
        return record.state
    try:
        st = os.lstat(record.path)
    except OSError:
        return record.state
    if stat.S_ISREG(st.st_mode) and st.st_size == record.size and _holds(record.path, record.sha256):
        return "restored"
    return record.state


def _put_back(moved: str, path: str) -> None:
    """Rename a file back to its name, unless an agent created a new file there meanwhile
    (then it stays beside it, renamed, and the next run reports it)."""
    if not os.path.lexists(path):
        try:
            os.rename(moved, path)
        except OSError:
            pass
