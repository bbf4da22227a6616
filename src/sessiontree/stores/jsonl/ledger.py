"""The sync ledger of a JSONL store: what ``sessiontree sync`` took from each file.

:class:`JsonlLedger` keeps the sync states in a log of JSON lines next to the
session files (:data:`~sessiontree.stores.jsonl.layout.SYNC_STATE_FILE`), reads it
(``sync_states``) and applies a session change then appends the file's new state
under a separate lock file (``sync_commit``), through the writes of :mod:`.writes`.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import orjson

from sessiontree.errors import StorageError, SyncConflictError
from sessiontree.format import jsonio
from sessiontree.format.files import O_CLOEXEC as _O_CLOEXEC
from sessiontree.format.files import lock as _lock
from sessiontree.format.files import unlock_and_close as _unlock_and_close
from sessiontree.format.files import write_all as _write_all
from sessiontree.stores.base import ArchivedFile, Provenance, SyncChange, SyncState
from sessiontree.stores.jsonl.files import JsonlFiles
from sessiontree.stores.jsonl.layout import ARCHIVE_LOG_FILE, PROVENANCE_FILE, SYNC_LOCK_FILE, SYNC_STATE_FILE
from sessiontree.stores.jsonl.writes import JsonlWrites
from sessiontree.stores.syncing import apply_sync_change, sync_expected

__all__ = ["JsonlLedger"]


class JsonlLedger:
    """The ``SyncLedger`` of :class:`~sessiontree.stores.jsonl.store.JsonlStore`
    (:class:`sessiontree.stores.base.SyncLedger`); a sync commit writes the session
    first, so it builds on :class:`~sessiontree.stores.jsonl.writes.JsonlWrites`."""

    def __init__(self, folder: JsonlFiles, writes: JsonlWrites) -> None:
        self.folder = folder
        self.writes = writes
        #: The sync state log as last read: states by path, (dev, inode, bytes read), lines read.
        self._sync_cache: dict[str, SyncState] = {}
        self._sync_seen: tuple[int, int, int] = (0, 0, 0)
        self._sync_lines = 0
        #: The provenance log as last read: records by session, (dev, inode, bytes read).
        self._prov_cache: dict[str, Provenance] = {}
        self._prov_seen: tuple[int, int, int] = (0, 0, 0)


    #: The sync state log as last read: states by path, (dev, inode, bytes read), lines read.
    _sync_cache: dict[str, SyncState]
    _sync_seen: tuple[int, int, int]
    _sync_lines: int

    # -- sync state (docs/sync.md) ----------------------------------------------------------
    #
    # A log of JSON lines, one SyncState (or {"path": ..., "forget": true}) per commit,
    # the last line of a path winning: a commit appends one short line instead of
    # rewriting a file that grows with the number of synced files. Commits hold an
    # flock on a separate lock file (the log itself is replaced when compacted), and
    # read only what other processes appended since this store last looked.
    def _sync_paths(self) -> tuple[str, str]:
        return (os.path.join(self.folder.directory, SYNC_STATE_FILE), os.path.join(self.folder.directory, SYNC_LOCK_FILE))

    def _sync_refresh(self) -> dict[str, SyncState]:
        """Bring the cached states up to date with the log; returns the cache (call under ``_mutex``)."""
        log, _ = self._sync_paths()
        try:
            st = os.stat(log)
        except FileNotFoundError:
            self._sync_cache, self._sync_seen = {}, (0, 0, 0)
            return self._sync_cache
        dev_ino = (st.st_dev, st.st_ino)
        if self._sync_seen[:2] != dev_ino or st.st_size < self._sync_seen[2]:
            self._sync_cache, self._sync_seen = {}, (*dev_ino, 0)
        start = self._sync_seen[2]
        if st.st_size > start:
            with open(log, "rb") as handle:
                handle.seek(start)
                data = handle.read(st.st_size - start)
            complete = data.rfind(b"\n") + 1  # a line still being written is read next time
            for line in data[:complete].split(b"\n"):
                if not line.strip():
                    continue
                try:
                    record = jsonio.loads(line)
                    if record.get("forget"):
                        self._sync_cache.pop(record["path"], None)
                    else:
                        state = SyncState.from_dict(record)
                        self._sync_cache[state.path] = state
                except (ValueError, KeyError, TypeError, AttributeError):
                    continue  # a damaged line forgets nothing: that file is just compared again
            self._sync_lines += data[:complete].count(b"\n")
            self._sync_seen = (*dev_ino, start + complete)
        return self._sync_cache

    def sync_states(self) -> dict[str, SyncState]:
        """Every recorded sync state, by source path, from the state log."""
        with self.folder.mutex:
            return dict(self._sync_refresh())

    def sync_commit(self, expect: SyncState | None, state: SyncState, change: SyncChange) -> None:
        """Apply ``change`` and record ``state``, under the store's sync lock, if the
        recorded state is still ``expect``. See :meth:`SessionStore.sync_commit`.

        The session write and the state line are two writes: a crash between them
        leaves the state behind the file, and the next sync finds the entries
        already stored (compares, and records the state) instead of adding them twice.

        Raises:
            SyncConflictError, SessionExistsError, SessionNotFoundError, InvalidSessionError,
            StorageError: as the protocol says.
        """
        self.folder.require_writable("sync")
        log, _ = self._sync_paths()
        with self._sync_lock(), self.folder.mutex:
            if not sync_expected(expect, self._sync_refresh().get(state.path)):
                raise SyncConflictError(state.path)
            # The provenance is written here, under the sync lock this commit holds
            # (record_provenance would take it again: flock does not nest).
            apply_sync_change(self.writes, dataclasses.replace(change, provenance=None))
            if change.kind == "create" and change.provenance is not None:
                self._append_provenance([change.provenance])
            _append_to(log, _state_line(state), fsync=self.folder.fsync, what="cannot record the sync state in")
            self._sync_refresh()
            if self._sync_lines > 2 * len(self._sync_cache) + 1000:
                self._sync_compact(log)

    def sync_shape(self, path: str) -> bytes | None:
        """The recorded file shape of ``path``, from the state log. See :meth:`SessionStore.sync_shape`."""
        with self.folder.mutex:
            state = self._sync_refresh().get(path)
            return None if state is None else state.shape

    def archived_files(self) -> list[ArchivedFile]:
        """Every archive record, oldest first, from the archive log (a damaged line is
        skipped). See :meth:`SessionStore.archived_files`.

        Raises:
            StorageError: the log exists but cannot be read.
        """
        path = os.path.join(self.folder.directory, ARCHIVE_LOG_FILE)
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StorageError(f"cannot read the archive records {path}: {exc}") from exc
        records: dict[tuple[str, bytes], ArchivedFile] = {}
        for line in data[:data.rfind(b"\n") + 1].split(b"\n"):
            if not line.strip():
                continue
            try:
                record = ArchivedFile.from_dict(orjson.loads(line))
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
            records[(record.path, record.sha256)] = record
        return list(records.values())

    def record_archived(self, record: ArchivedFile) -> None:
        """Append an archive record to the archive log, under the sync lock, fsynced.
        See :meth:`SessionStore.record_archived`.

        Raises:
            StorageError: the store is read-only or the log cannot be written.
        """
        self.folder.require_writable("archive record")
        path = os.path.join(self.folder.directory, ARCHIVE_LOG_FILE)
        with self._sync_lock():
            # Always fsynced, whatever ``self.folder.fsync`` says: the record is all that
            # remembers a source file was archived.
            _append_to(path, orjson.dumps(record.to_dict()) + b"\n", fsync=True,
                       what="cannot write the archive record to")

    def provenances(self) -> dict[str, Provenance]:
        """Every recorded origin by session id, from the provenance log (the first line of
        an id wins; a damaged line is skipped). See :meth:`SessionStore.provenances`.

        Raises:
            StorageError: the log exists but cannot be read.
        """
        with self.folder.mutex:
            return dict(self._provenance_refresh())

    def _provenance_refresh(self) -> dict[str, Provenance]:
        """Bring the cached records up to date with the log, reading only the lines appended
        since the last look (the log is append-only); returns the cache (under ``_mutex``)."""
        path = os.path.join(self.folder.directory, PROVENANCE_FILE)
        cache: dict[str, Provenance] = self._prov_cache
        seen: tuple[int, int, int] = self._prov_seen
        try:
            st = os.stat(path)
            if seen[:2] != (st.st_dev, st.st_ino) or st.st_size < seen[2]:
                cache, seen = {}, (st.st_dev, st.st_ino, 0)
            if st.st_size > seen[2]:
                with open(path, "rb") as handle:
                    handle.seek(seen[2])
                    data = handle.read(st.st_size - seen[2])
                complete = data.rfind(b"\n") + 1  # a line still being written is read next time
                for line in data[:complete].split(b"\n"):
                    if not line.strip():
                        continue
                    try:
                        record = Provenance.from_dict(orjson.loads(line))
                    except (ValueError, KeyError, TypeError, AttributeError):
                        continue
                    cache.setdefault(record.session_id, record)
                seen = (seen[0], seen[1], seen[2] + complete)
        except FileNotFoundError:
            cache, seen = {}, (0, 0, 0)
        except OSError as exc:
            raise StorageError(f"cannot read the provenance records {path}: {exc}") from exc
        self._prov_cache, self._prov_seen = cache, seen
        return cache

    def record_provenance(self, records: Sequence[Provenance]) -> None:
        """Append the origins whose ids have none yet, under the sync lock.
        See :meth:`SessionStore.record_provenance`.

        Raises:
            StorageError: the store is read-only or the log cannot be written.
        """
        self.folder.require_writable("provenance record")
        if not records:
            return
        with self._sync_lock():
            self._append_provenance(records)

    def _append_provenance(self, records: Sequence[Provenance]) -> None:
        """Append the records whose ids have none yet (the caller holds the sync lock)."""
        with self.folder.mutex:
            known = self._provenance_refresh()
        fresh: dict[str, Provenance] = {}
        for record in records:
            if record.session_id not in known:
                fresh.setdefault(record.session_id, record)
        if not fresh:
            return
        _append_to(os.path.join(self.folder.directory, PROVENANCE_FILE),
                   b"".join(orjson.dumps(record.to_dict()) + b"\n" for record in fresh.values()),
                   fsync=self.folder.fsync, what="cannot write the provenance records to")

    @contextmanager
    def _sync_lock(self) -> Iterator[None]:
        """Hold the store's sync lock (an exclusive flock on its own lock file) for the block.

        Raises:
            StorageError: the lock file cannot be opened or locked.
        """
        _, lock = self._sync_paths()
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | _O_CLOEXEC, 0o644)
        except OSError as exc:
            raise StorageError(f"cannot open the sync lock {lock}: {exc}") from exc
        try:
            try:
                _lock(fd, True)
            except OSError as exc:
                raise StorageError(f"cannot take the sync lock {lock}: {exc}") from exc
            yield
        finally:
            _unlock_and_close(fd)

    def _sync_compact(self, log: str) -> None:
        """Rewrite the log with one line per path (atomically; under the sync lock)."""
        data = b"".join(_state_line(state) for state in self._sync_cache.values())
        tmp = f"{log}.tmp-{os.getpid()}-{secrets.token_hex(6)}"
        try:
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, log)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return  # compaction is an optimization: the long log stays valid
        self._sync_lines = len(self._sync_cache)
        st = os.stat(log)
        self._sync_seen = (st.st_dev, st.st_ino, st.st_size)


def _append_to(path: str, data: bytes, *, fsync: bool, what: str) -> None:
    """Append ``data`` (whole lines) to one of the store's own logs, creating it,
    then ``fsync`` it if asked; the caller holds the sync lock.

    Raises:
        StorageError: ``"{what} {path}: {reason}"`` when the file cannot be written.
    """
    try:
        out = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _O_CLOEXEC, 0o644)
        try:
            _write_all(out, data)
            if fsync:
                os.fsync(out)
        finally:
            os.close(out)
    except OSError as exc:
        raise StorageError(f"{what} {path}: {exc}") from exc


def _state_line(state: SyncState) -> bytes:
    """One line of the sync-state log. Plain orjson, not :func:`jsonio.dumps`: this
    is our own file, not a session record, and ``mtime_ns`` (beyond 2**53) must
    read back exactly, where JavaScript's number rules would round it."""
    return orjson.dumps(state.to_dict()) + b"\n"
