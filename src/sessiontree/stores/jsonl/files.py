"""Finding a JSONL store's session files, and the descriptors it keeps open between appends.

:class:`JsonlFiles` is the common base of the store's capability mixins
(:mod:`.reads`, :mod:`.writes`, :mod:`.ledger`, :mod:`.maintenance`): it declares the
attributes :class:`~sessiontree.stores.jsonl.store.JsonlStore` sets when it opens,
finds a session's file by its header id (the id -> path cache, checked against the
file's header, and the directory scan), keeps the descriptors of files the store
appended to (:class:`HeldFile`, at most ``_HELD_FILES``, reused by the append fast path
of :mod:`.writes`), closes them in a child after ``fork`` (the hook registered here)
and in :meth:`JsonlFiles.close`.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from sessiontree.errors import InvalidSessionError, SessionNotFoundError, StorageError
from sessiontree.format.codec import read_header_file
from sessiontree.format.files import O_CLOEXEC as _O_CLOEXEC
from sessiontree.stores.jsonl.layout import session_files_in

__all__ = ["LIVE_STORES", "LOOKUP_ATTEMPTS", "TAIL_BYTES", "HeldFile", "JsonlFiles", "close_held"]

#: How often a session file replaced or moved under us is looked up again.
LOOKUP_ATTEMPTS = 5


@dataclass
class HeldFile:
    """A session file's descriptor kept by a store between its appends."""

    fd: int
    dev: int
    ino: int
    session_id: str
    end: int  # the file size this store's own last write left
    tail: bytes  # the last bytes of this store's last write (its last record, mostly whole)
    #: Held for a whole fast-path append (its flock wait included), so one busy
    #: file never stalls appends to the store's other files.
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False


def close_held(held: dict[str, HeldFile]) -> None:
    """Close kept descriptors without waiting for their locks (garbage collection: no
    append can be running; fork: the threads that held them do not exist in the child)."""
    for item in held.values():
        item.closed = True
        try:
            os.close(item.fd)
        except OSError:
            pass
    held.clear()


#: Bytes of a write remembered to recognise the file on the next append: enough for
#: the whole last record of most writes, whose random id no other session shares.
TAIL_BYTES = 4096

#: Descriptors a store keeps open for appends, at most (least recently used go first).
_HELD_FILES = 8

#: Live stores, for the after-fork hook.
LIVE_STORES: weakref.WeakSet[JsonlFiles] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for store in list(LIVE_STORES):
        store._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class JsonlFiles:
    """What the capability mixins of :class:`~sessiontree.stores.jsonl.store.JsonlStore`
    share: the attributes it sets when it opens (declared here), the look-up of a
    session's file, the kept descriptors and :meth:`close`."""

    directory: str
    url: str
    kind: str
    fsync: bool
    readonly: bool
    _mutex: threading.RLock
    _paths: dict[str, str]
    _ids: dict[str, tuple[int, int, int, set[str]]]
    _headers: dict[str, tuple[tuple[int, int, int, int], dict[str, Any] | None]]
    _held: OrderedDict[str, HeldFile]
    _held_lock: threading.Lock

    def _require_writable(self, what: str) -> None:
        if self.readonly:
            raise StorageError(f"{what}: {self.url} is opened read-only")

    # -- finding files ---------------------------------------------------------------------

    def _files(self) -> list[str]:
        """Every ``*.jsonl`` file of the store (the directory and one level of project
        folders, see :func:`~sessiontree.stores.jsonl.layout.session_files_in`).
        New sessions are still written flat."""
        return session_files_in(self.directory)

    def _header(self, path: str) -> dict[str, Any] | None:
        """The file's (upgraded in memory) header, or ``None`` when unreadable or invalid."""
        try:
            st = os.stat(path)
        except OSError:
            with self._mutex:
                self._headers.pop(path, None)
            return None
        signature = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        with self._mutex:
            cached = self._headers.get(path)
        if cached is not None and cached[0] == signature:
            return cached[1]
        try:
            header: dict[str, Any] | None = read_header_file(path)
        except (OSError, InvalidSessionError):
            header = None
        with self._mutex:
            self._headers[path] = (signature, header)
        return header

    def _scan(self) -> dict[str, list[str]]:
        """id -> files with that header id (by name), refreshing the id cache."""
        files = self._files()
        found: dict[str, list[str]] = {}
        for path in files:
            header = self._header(path)
            if header is not None:
                found.setdefault(header["id"], []).append(path)
        with self._mutex:
            # Files created at an explicit path outside the directory are known only
            # through the cache; keep them while their header still matches.
            outside = {sid: path for sid, path in self._paths.items()
                       if sid not in found and os.path.dirname(path) != self.directory}
        for sid, path in outside.items():
            header = self._header(path)
            if header is not None and header["id"] == sid:
                found[sid] = [path]
        with self._mutex:
            self._paths = {sid: paths[0] for sid, paths in found.items()}
            live = set(files) | {paths[0] for paths in found.values()}
            self._headers = {path: value for path, value in self._headers.items() if path in live}
        return found

    def _find(self, session_id: str) -> str | None:
        with self._mutex:
            path = self._paths.get(session_id)
            cached = self._headers.get(path) if path is not None else None
        if path is not None:
            if cached is not None and cached[1] is not None and cached[1]["id"] == session_id:
                try:
                    st = os.stat(path)
                except OSError:
                    st = None
                # Same inode as when the header was read: appends never change a
                # header and rewrites replace the inode (os.replace). Every caller
                # checks the header again under the file lock, so skipping the
                # re-read here is safe and saves an open+read per append.
                if st is not None and cached[0][:2] == (st.st_dev, st.st_ino):
                    return path
            header = self._header(path)
            if header is not None and header["id"] == session_id:
                return path
        paths = self._scan().get(session_id)
        return paths[0] if paths else None

    def _forget(self, session_id: str) -> None:
        with self._mutex:
            self._paths.pop(session_id, None)

    def _require(self, session_id: str) -> str:
        path = self._find(session_id)
        if path is None:
            raise SessionNotFoundError(session_id, self.directory)
        return path

    # -- kept descriptors ------------------------------------------------------------------

    def _hold(self, path: str, st: os.stat_result, session_id: str, end: int, written: bytes) -> None:
        """Keep a descriptor of ``path`` for :meth:`_append_held`, after this store's own
        append to it: ``st`` was the locked ``fstat`` before that write, ``end`` the
        size it left, ``written`` what it wrote. Never called while holding a file lock."""
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | _O_CLOEXEC)
        except OSError:
            return  # the fast path is an optimization only
        try:
            mine = os.fstat(fd)
        except OSError:
            os.close(fd)
            return
        if (mine.st_dev, mine.st_ino) != (st.st_dev, st.st_ino):
            os.close(fd)  # replaced meanwhile
            return
        with self._held_lock:
            previous = self._held.pop(path, None)
            self._held[path] = HeldFile(fd, st.st_dev, st.st_ino, session_id, end, written[-TAIL_BYTES:])
            evicted = [self._held.popitem(last=False)[1] for _ in range(len(self._held) - _HELD_FILES)]
        for old in ([previous] if previous is not None else []) + evicted:
            self._close_held(old)

    @staticmethod
    def _close_held(held: HeldFile) -> None:
        # Waits for an append that is using the descriptor (never called holding _held_lock).
        with held.lock:
            if not held.closed:
                held.closed = True
                try:
                    os.close(held.fd)
                except OSError:
                    pass

    def _after_fork_in_child(self) -> None:
        # Runs in the child right after fork(), before anything else can reuse
        # descriptor numbers: the inherited descriptors share their flocks with
        # the parent, and the locks may have been held by a thread that does
        # not exist here.
        self._mutex = threading.RLock()
        self._held_lock = threading.Lock()
        close_held(self._held)

    def _release(self, path: str) -> None:
        """Close the kept descriptor of ``path``, if any (waits for an append using it)."""
        with self._held_lock:
            held = self._held.pop(path, None)
        if held is not None:
            self._close_held(held)

    def close(self) -> None:
        """Drop cached look-ups and close kept descriptors. Idempotent; the store stays usable."""
        with self._mutex:
            self._paths.clear()
            self._headers.clear()
        with self._held_lock:
            held = list(self._held.values())
            self._held.clear()
        for item in held:
            self._close_held(item)
