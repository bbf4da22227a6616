"""Finding a JSONL store's session files, and the descriptors it keeps open between appends.

:class:`JsonlFiles` is the open folder the store's parts share (:mod:`.reads`,
:mod:`.writes`, :mod:`.ledger`, :mod:`.maintenance`, :mod:`.retention`): it opens the
directory, finds a session's file by its header id (the id -> path cache, checked against the
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

from sessiontree.errors import InvalidSessionError, SessionNotFoundError, StorageError, StoreOpenError
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
        store.after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class JsonlFiles:
    """The open folder of a JSONL store, shared by its parts (:mod:`.reads`, :mod:`.writes`,
    :mod:`.ledger`, :mod:`.maintenance`, :mod:`.retention`), which use only its public
    members: the look-up of a session's file, the caches, the kept descriptors and
    :meth:`close`. The arguments and errors are :class:`~sessiontree.stores.jsonl.store.JsonlStore`'s.

    Attributes:
        directory, url, fsync, readonly: as documented on ``JsonlStore``.
        mutex: the re-entrant lock of the caches and of writes within the process.
        paths: session id -> file, checked against the file's header before use.
        ids: file -> (dev, inode, size, entry ids): the duplicate-id guard of append.
        headers: file -> (stat signature, header or ``None``): header reads skipped for
            unchanged files.
        held: file -> descriptor kept open (``O_APPEND``) after an append by this store,
            so the next append of the session skips open, checks and close.
        held_lock: the lock of ``held``.

    Raises:
        StoreOpenError: the directory cannot be created, is missing (``create=False`` or
            ``readonly``), or is not a directory.
    """

    def __init__(self, directory: str, *, create: bool, fsync: bool, readonly: bool) -> None:
        self.directory = os.path.abspath(directory)
        self.fsync = fsync
        self.readonly = readonly
        self.url = "jsonl:///" + self.directory
        if (readonly or not create) and not os.path.isdir(self.directory):
            # Read-only callers: a mistyped path must not look like an empty store.
            raise StoreOpenError(f"no session directory at {self.directory}")
        if not readonly:
            try:
                os.makedirs(self.directory, exist_ok=True)
            except OSError as exc:
                raise StoreOpenError(f"cannot create the session directory {self.directory}: {exc}") from exc
        if not os.path.isdir(self.directory):
            raise StoreOpenError(f"{self.directory} is not a directory")
        self.mutex = threading.RLock()
        self.paths: dict[str, str] = {}
        self.ids: dict[str, tuple[int, int, int, set[str]]] = {}
        self.headers: dict[str, tuple[tuple[int, int, int, int], dict[str, Any] | None]] = {}
        self.held: OrderedDict[str, HeldFile] = OrderedDict()
        self.held_lock = threading.Lock()
        weakref.finalize(self, close_held, self.held)
        LIVE_STORES.add(self)

    def require_writable(self, what: str) -> None:
        """Raise :class:`StorageError` naming ``what`` (the operation) when the folder is opened read-only."""
        if self.readonly:
            raise StorageError(f"{what}: {self.url} is opened read-only")

    # -- finding files ---------------------------------------------------------------------

    def files(self) -> list[str]:
        """Every ``*.jsonl`` file of the store (the directory and one level of project
        folders, see :func:`~sessiontree.stores.jsonl.layout.session_files_in`).
        New sessions are still written flat."""
        return session_files_in(self.directory)

    def header(self, path: str) -> dict[str, Any] | None:
        """The file's (upgraded in memory) header, or ``None`` when unreadable or invalid."""
        try:
            st = os.stat(path)
        except OSError:
            with self.mutex:
                self.headers.pop(path, None)
            return None
        signature = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        with self.mutex:
            cached = self.headers.get(path)
        if cached is not None and cached[0] == signature:
            return cached[1]
        try:
            header: dict[str, Any] | None = read_header_file(path)
        except (OSError, InvalidSessionError):
            header = None
        with self.mutex:
            self.headers[path] = (signature, header)
        return header

    def scan(self) -> dict[str, list[str]]:
        """id -> files with that header id (by name), refreshing the id cache."""
        files = self.files()
        found: dict[str, list[str]] = {}
        for path in files:
            header = self.header(path)
            if header is not None:
                found.setdefault(header["id"], []).append(path)
        with self.mutex:
            # Files created at an explicit path outside the directory are known only
            # through the cache; keep them while their header still matches.
            outside = {sid: path for sid, path in self.paths.items()
                       if sid not in found and os.path.dirname(path) != self.directory}
        for sid, path in outside.items():
            header = self.header(path)
            if header is not None and header["id"] == sid:
                found[sid] = [path]
        with self.mutex:
            self.paths = {sid: paths[0] for sid, paths in found.items()}
            live = set(files) | {paths[0] for paths in found.values()}
            self.headers = {path: value for path, value in self.headers.items() if path in live}
        return found

    def find(self, session_id: str) -> str | None:
        """The path of ``session_id``'s file in the folder, or ``None``: the cached path when its
        header still names the session (same inode), else a scan of the folder (docs/stores.md)."""
        with self.mutex:
            path = self.paths.get(session_id)
            cached = self.headers.get(path) if path is not None else None
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
            header = self.header(path)
            if header is not None and header["id"] == session_id:
                return path
        paths = self.scan().get(session_id)
        return paths[0] if paths else None

    def forget(self, session_id: str) -> None:
        """Drop ``session_id``'s cached path (after its file is deleted or replaced)."""
        with self.mutex:
            self.paths.pop(session_id, None)

    def require(self, session_id: str) -> str:
        """:meth:`find`, raising :class:`SessionNotFoundError` (with the folder) when there is no file."""
        path = self.find(session_id)
        if path is None:
            raise SessionNotFoundError(session_id, self.directory)
        return path

    # -- kept descriptors ------------------------------------------------------------------

    def hold(self, path: str, st: os.stat_result, session_id: str, end: int, written: bytes) -> None:
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
        with self.held_lock:
            previous = self.held.pop(path, None)
            self.held[path] = HeldFile(fd, st.st_dev, st.st_ino, session_id, end, written[-TAIL_BYTES:])
            evicted = [self.held.popitem(last=False)[1] for _ in range(len(self.held) - _HELD_FILES)]
        for old in ([previous] if previous is not None else []) + evicted:
            self.close_one(old)

    @staticmethod
    def close_one(held: HeldFile) -> None:
        """Close one kept descriptor once (later calls do nothing)."""
        # Waits for an append that is using the descriptor (never called holding _held_lock).
        with held.lock:
            if not held.closed:
                held.closed = True
                try:
                    os.close(held.fd)
                except OSError:
                    pass

    def after_fork_in_child(self) -> None:
        """Forget locks and kept descriptors inherited from the parent (called in a forked child)."""
        # Runs in the child right after fork(), before anything else can reuse
        # descriptor numbers: the inherited descriptors share their flocks with
        # the parent, and the locks may have been held by a thread that does
        # not exist here.
        self.mutex = threading.RLock()
        self.held_lock = threading.Lock()
        close_held(self.held)

    def release(self, path: str) -> None:
        """Close the kept descriptor of ``path``, if any (waits for an append using it)."""
        with self.held_lock:
            held = self.held.pop(path, None)
        if held is not None:
            self.close_one(held)

    def close(self) -> None:
        """Drop cached look-ups and close kept descriptors. Idempotent; the store stays usable."""
        with self.mutex:
            self.paths.clear()
            self.headers.clear()
        with self.held_lock:
            held = list(self.held.values())
            self.held.clear()
        for item in held:
            self.close_one(item)
