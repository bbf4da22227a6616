"""``JsonlStore``: one format-4 JSONL file per session in one directory
(docs/rules/stores.md seed:file-location, spec:stores).

Invariants:

* **Names are not identity.** New files are named ``<createdAt with ':' and
  '.' replaced by '-'>_<session_id_hash(id)>.jsonl`` (docs/rules/decisions.md D-7), directly in the
  directory; an odd or missing ``createdAt`` is normalized or replaced by the
  current time so the name always has that shape. Lookups by id read headers
  (:func:`~sessiontree.format.read_header_file`) and never parse names; an
  id -> path cache is checked against the file's header and rebuilt by a
  directory scan on a miss. Where files live: :mod:`sessiontree.stores.jsonl.layout`.
* **Every write holds the file lock**: an exclusive ``fcntl.flock`` on the
  session file itself. After locking, the descriptor's inode is compared
  with the path's, so a writer that waited while another process replaced or
  deleted the file retries on the new file (or finds the session gone)
  instead of writing to an unlinked inode. Readers take a shared lock, so
  they never see half an append.
* **Appends are all or nothing**: one ``write`` of every new line, then
  ``fsync``. A file whose last byte is not ``\\n`` gets one first, in the same
  write (docs/rules/format.md D.9); a torn last record is refused, not buried. If
  anything fails, the file is truncated back to its previous size and
  :class:`~sessiontree.errors.StorageError` is raised with the OS error as
  ``__cause__`` (docs/rules/format.md E.5); if the truncation fails too, the error says so and
  carries both (``rollback_error``).
* **Rewrites are atomic**: upgrades of older formats found by ``load`` (docs/rules/decisions.md D-9),
  ``replace_header`` and new files are written to ``<file>.tmp-<pid>-<random>``
  in the same directory, fsynced, then renamed over (or hard-linked to) the
  target; the temporary file never survives a failure the writer lives
  through (docs/rules/format.md E.13). A writer holds an exclusive ``flock`` on its temporary file
  from the moment it creates it until it is renamed or removed, so a temp
  file nobody holds is stale: its writer was killed. Such files are removed
  when the store is opened for writing and before each rewrite of their
  target, under their own lock (see :func:`sessiontree.format.files.remove_if_stale`); they are never
  listed, and a read-only store never removes anything.
* **Reading never writes**: listing, header look-ups, ``find_most_recent`` and
  :func:`read_file` parse in memory only (docs/rules/versions.md seed:session-version,
  docs/rules/decisions.md D-9).
* ``delete`` moves every file whose header has the id to the platform trash
  (``send2trash``) and unlinks it where there is no usable trash (docs/rules/stores.md spec:stores).

Locking uses ``fcntl`` and so protects writers on POSIX systems; elsewhere
the store works without cross-process locking. The locks, reads and atomic
rewrites themselves are :mod:`sessiontree.format.files`; upgrading a file in
place by command (``sessiontree migrate``) is :mod:`sessiontree.format.migrate`.
"""

from __future__ import annotations

import errno
import os
import secrets
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from sessiontree.core.listing import SessionInfo, is_classified, session_info_from_entries
from sessiontree.core.searchtext import SearchHit, make_filters, parse_query
from sessiontree.core.usagerecords import UsageQuery, UsageRows, aggregate
from sessiontree.errors import (
    InvalidSessionError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
    StoreOpenError,
    SyncConflictError,
)
from sessiontree.format import jsonio
from sessiontree.format.codec import CURRENT_VERSION, ParsedSession, parse_session, read_header_file

# The file primitives under this module's own (private) names: the store's calls look
# them up here, so tests inject failures into the store's writes by patching this module
# (and into atomic rewrites by patching sessiontree.format.files, where replace_locked looks).
from sessiontree.format.files import O_CLOEXEC as _O_CLOEXEC
from sessiontree.format.files import TEMP_NAME as _TEMP_NAME
from sessiontree.format.files import first_line
from sessiontree.format.files import fsync_dir as _fsync_dir
from sessiontree.format.files import lock as _lock
from sessiontree.format.files import locked as _locked
from sessiontree.format.files import open_temp as _open_temp
from sessiontree.format.files import read_all as _read_all
from sessiontree.format.files import remove_if_stale as _remove_if_stale
from sessiontree.format.files import replace_locked as _replace_locked
from sessiontree.format.files import unlock as _unlock
from sessiontree.format.files import unlock_and_close as _unlock_and_close
from sessiontree.format.files import write_all as _write_all
from sessiontree.stores.base import CancelEvent, ProgressCallback, SessionListing, StoreProblem, SyncChange, SyncState
from sessiontree.stores.jsonl.layout import (
    FILE_SUFFIX,
    SYNC_LOCK_FILE,
    SYNC_STATE_FILE,
    file_name_for,
    session_files_in,
)
from sessiontree.stores.scan import check_limit, scan
from sessiontree.stores.shared import (
    Progress,
    StoreBase,
    check_header,
    check_replacement_header,
    cwd_matches,
    encode_entries,
    file_rule_problems,
    header_of,
    id_in_use_error,
    resolve_cwd,
    sort_listing,
    sync_expected,
)

__all__ = ["JsonlStore", "read_file"]

_JSON_WS = b" \t\r\n"
_ATTEMPTS = 5  # a session file replaced or moved under us is looked up again this often


# -- low-level file helpers (module-level so tests can inject failures) -----------------------

def _truncate(fd: int, size: int) -> None:
    os.ftruncate(fd, size)
    os.fsync(fd)


def _send_to_trash(path: str) -> None:
    """Move ``path`` to the platform trash (raises when there is none usable)."""
    from send2trash import send2trash  # imported late: it inspects the platform on import

    send2trash(path)


def _last_line(fd: int, size: int) -> bytes:
    """The bytes after the last ``\\n`` of a file of ``size`` bytes."""
    chunks: list[bytes] = []
    end = size
    while end > 0:
        start = max(0, end - (1 << 14))
        chunk = os.pread(fd, end - start, start)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            chunks.append(chunk[cut + 1:])
            break
        chunks.append(chunk)
        end = start
    return b"".join(reversed(chunks))


@dataclass
class _Held:
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


def _close_all(held: dict[str, _Held]) -> None:
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
_TAIL = 4096


#: What :meth:`JsonlStore._list_one` returns for a file that cannot be loaded.
_UNLOADABLE: Any = object()

#: Descriptors a store keeps open for appends, at most (least recently used go first).
_HELD_FILES = 8

#: Live stores, for the after-fork hook.
_STORES: weakref.WeakSet[JsonlStore] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for store in list(_STORES):
        store._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def read_file(path: str | os.PathLike[str]) -> ParsedSession:
    """Read a session file of any supported format into format 4, in memory.

    The file is read under a shared lock (never half an append) and never
    written, whatever its format.

    Raises:
        OSError: the file cannot be read (``FileNotFoundError`` when missing).
        InvalidSessionError, UnsupportedVersionError: see :func:`~sessiontree.format.parse_session`.
    """
    path = os.path.abspath(os.fspath(path))
    with _locked(path, exclusive=False) as fd:
        data = _read_all(fd)
    return parse_session(data, path)


def _header_is_current(line: bytes, session_id: str) -> bool | None:
    """Whether a first line is this session's format-4 header needing no upgrade.

    Returns ``None`` when it is another session's header (the cache was stale),
    ``False`` when the file must be parsed in full (older format, BOM, blank or
    odd first line), ``True`` when appending directly is safe.
    """
    if line.startswith(b"\xef\xbb\xbf"):
        return False
    try:
        header = jsonio.loads(line)
    except ValueError:
        return False
    if not isinstance(header, dict) or header.get("type") != "session":
        return False
    if header.get("id") != session_id:
        return None
    version = header.get("version")
    return (type(version) is int and version == CURRENT_VERSION
            and "timestamp" not in header and "parentSession" not in header)


class JsonlStore(StoreBase):
    """A :class:`~sessiontree.stores.base.SessionStore` over a directory of JSONL files.

    Args:
        directory: where the session files live (created when missing).
        create: with ``False``, a missing directory raises ``StoreOpenError``
            instead of being created (read-only tools).
        readonly: never write anything: the directory is not created, stale
            temporary files are left alone, :meth:`load` upgrades older files
            in memory only (like :meth:`read`), and every write raises
            ``StorageError``. Implies ``create=False``.
        fsync: ``True`` (default): an append returns once its bytes are on
            disk (they survive a power loss). ``False`` (opt-in): once they are
            in the operating system's cache (they survive a crash of the
            process, not of the machine), the durability of the original
            agent's appends, which never fsync. Rewrites always fsync.

    Attributes:
        url: ``jsonl:///`` + the absolute directory (four slashes for ``/...``).
        kind: ``"jsonl"``.
        directory: the absolute directory.
        readonly: whether the store was opened read-only.

    A writable open removes stale temporary files that killed writers left in
    the directory (:meth:`remove_stale_temps`).

    Raises:
        StoreOpenError: the directory cannot be created or is not a directory.
    """

    kind = "jsonl"

    def __init__(self, directory: str | os.PathLike[str], *, create: bool = True, fsync: bool = True,
                 readonly: bool = False) -> None:
        self.directory = os.path.abspath(os.fspath(directory))
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
        self._mutex = threading.RLock()
        #: session id -> file, checked against the file's header before use.
        self._paths: dict[str, str] = {}
        #: file -> (dev, inode, size, entry ids): the duplicate-id guard of append.
        self._ids: dict[str, tuple[int, int, int, set[str]]] = {}
        #: file -> (stat signature, header or None): header reads skipped for unchanged files.
        self._headers: dict[str, tuple[tuple[int, int, int, int], dict[str, Any] | None]] = {}
        #: file -> descriptor kept open (O_APPEND) after an append by this store, so
        #: the next append of the session skips open, checks and close (_append_held).
        self._held: OrderedDict[str, _Held] = OrderedDict()
        self._held_lock = threading.Lock()
        #: The sync state log as last read: states by path, (dev, inode, bytes read), lines read.
        self._sync_cache: dict[str, SyncState] = {}
        self._sync_seen: tuple[int, int, int] = (0, 0, 0)
        self._sync_lines = 0
        weakref.finalize(self, _close_all, self._held)
        _STORES.add(self)
        if not readonly:
            self.remove_stale_temps()

    def remove_stale_temps(self) -> int:
        """Remove temporary files (``*.jsonl.tmp-*``) of this directory that no live
        writer owns: left by a writer killed mid-write (see :func:`~sessiontree.format.files.remove_if_stale`
        for how staleness is decided). Runs on every writable open.

        Returns:
            The number of files removed.

        Raises:
            StorageError: the store is read-only.
        """
        self._require_writable("removing stale temporary files")
        try:
            with os.scandir(self.directory) as it:
                candidates = [entry.path for entry in it if _TEMP_NAME.search(entry.name)
                              and FILE_SUFFIX + ".tmp-" in entry.name]
        except OSError:
            return 0
        return sum(_remove_if_stale(path) for path in candidates)

    def _require_writable(self, what: str) -> None:
        if self.readonly:
            raise StorageError(f"{what}: {self.url} is opened read-only")

    def __repr__(self) -> str:
        return f"JsonlStore({self.directory!r})"

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

    # -- writes ---------------------------------------------------------------------------

    def create(self, header: dict[str, Any], entries: Sequence[dict[str, Any]] = (),
               raw: Sequence[bytes | None] | None = None, *, path: str | None = None) -> None:
        """Write a new session file, complete or not at all.

        Args:
            header, entries, raw: see :meth:`SessionStore.create`.
            path: the exact file to write (``SessionManager.open_file``); it may
                exist only if empty. Default: a new docs/rules/decisions.md D-7 name in the directory.

        The id check and the write are serialized within this process; two
        processes creating the *same* id at once with different ``createdAt``
        values could both succeed (ids are UUIDv7 or caller-chosen, so this
        needs a caller bug). The same name is refused by the exclusive link.

        Raises:
            SessionExistsError: a file in the directory has this header id.
            InvalidSessionError: the header or an entry is not valid format 4.
            StorageError: the write failed (or ``path`` is a non-empty file); no file is left.
        """
        self._require_writable("create")
        session_id = check_header(header)
        texts = encode_entries(entries, raw)
        data = b"".join([jsonio.dumps(header), b"\n", *(text + b"\n" for text in texts)])
        target = os.path.abspath(os.fspath(path)) if path is not None else self.path_for(header)
        with self._mutex:
            if self._find(session_id) is not None:
                raise SessionExistsError(session_id)
            if path is not None:
                try:
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                except OSError as exc:
                    raise StorageError(f"cannot create the directory of {target}: {exc}") from exc
            self._write_new(target, data)
            self._paths[session_id] = target

    def _write_new(self, target: str, data: bytes) -> None:
        """Make ``target`` hold ``data``: a new file, or one that exists empty."""
        tmp = None
        fd = -1
        try:
            tmp, fd = _open_temp(target)
            os.fchmod(fd, 0o644)
            _write_all(fd, data)
            os.fsync(fd)
            try:
                # A hard link publishes the complete file under its name, and only if
                # the name is free: no reader ever sees a partial new session.
                os.link(tmp, target)
            except FileExistsError:
                self._replace_empty(target, tmp)
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
                    raise
                self._create_exclusive(target, data)  # filesystems without hard links
        except OSError as exc:
            raise StorageError(f"cannot write {target}: {exc}") from exc
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass  # best effort; a later writer removes it as stale
            if fd >= 0:
                os.close(fd)  # releases the temp file's lock, after it is gone
        _fsync_dir(os.path.dirname(target))

    @staticmethod
    def _replace_empty(target: str, tmp: str) -> None:
        # open_file() on a 0-byte path writes the header into it (docs/rules/format.md D.10).
        with _locked(target, exclusive=True) as fd:
            if os.fstat(fd).st_size != 0:
                raise FileExistsError(errno.EEXIST, "file exists and is not empty", target)
            os.replace(tmp, target)

    @staticmethod
    def _create_exclusive(target: str, data: bytes) -> None:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_CLOEXEC, 0o644)
        try:
            _lock(fd, True)
            _write_all(fd, data)
            os.fsync(fd)
        except BaseException:
            _unlock_and_close(fd)
            os.unlink(target)
            raise
        _unlock_and_close(fd)

    def append(self, session_id: str, entries: Sequence[dict[str, Any]],
               raw: Sequence[bytes | None] | None = None) -> None:
        """Append entries under the file lock in one write, then fsync (unless ``fsync=False``).

        ``raw``: optional stored JSON text per entry, written as it is.

        An older-format file is upgraded first, atomically and together with
        the new entries (docs/rules/versions.md seed:session-version).

        Raises:
            SessionNotFoundError: no file has this header id.
            InvalidSessionError: an entry is invalid, or the file ends in a torn record.
            StorageError: the write failed; the file is as it was.
        """
        self._require_writable("append")
        texts = encode_entries(entries, raw)
        payload = b"".join(text + b"\n" for text in texts)
        if payload and self._append_held(session_id, entries, payload):
            return
        for _ in range(_ATTEMPTS):
            path = self._require(session_id)
            try:
                with _locked(path, exclusive=True, writable=True) as fd:
                    st = os.fstat(fd)
                    # The header is read every time here: a file can be truncated or
                    # overwritten in place, or its inode reused by another session.
                    # The common case, this store appending again to a file it just
                    # appended to, takes _append_held and skips this.
                    current = _header_is_current(first_line(fd), session_id)
                    if current is None:
                        self._forget(session_id)
                        continue
                    if not current:
                        parsed = parse_session(_read_all(fd), path)
                        if parsed.header["id"] != session_id:
                            self._forget(session_id)
                            continue
                        if parsed.upgraded:
                            used = {e["id"] for e in parsed.entries}
                            clash = next((e["id"] for e in entries if e["id"] in used), None)
                            if clash is not None:
                                raise id_in_use_error(session_id, clash, path)
                            _replace_locked(path, fd, parsed.to_bytes() + payload)
                            return
                    if payload:
                        known = self._file_ids(path, fd, st)
                        clash = next((e["id"] for e in entries if e["id"] in known), None)
                        if clash is not None:
                            # Another writer of this file used the id: appending it again
                            # would make the file unreadable (duplicate ids, docs/rules/decisions.md D-15).
                            raise id_in_use_error(session_id, clash, path)
                        written = self._append_locked(path, fd, payload, self.fsync, st.st_size)
                        known.update(e["id"] for e in entries)
                        with self._mutex:
                            self._ids[path] = (st.st_dev, st.st_ino, st.st_size + written, known)
                        end = st.st_size + written
                    else:
                        return
                # Outside the file lock: _hold may wait for a kept descriptor's lock,
                # which the fast path holds while it waits for a file lock.
                self._hold(path, st, session_id, end, payload)
                return
            except FileNotFoundError:
                self._forget(session_id)
            except OSError as exc:  # read-only filesystem, permissions: the protocol's error
                raise StorageError(f"cannot append to {path}: {exc}") from exc
        raise SessionNotFoundError(session_id, self.directory)

    def _append_held(self, session_id: str, entries: Sequence[dict[str, Any]], payload: bytes) -> bool:
        """The append fast path: lock, check, write (and fsync), unlock, through the
        descriptor an earlier append of this store kept open.

        It applies only while nothing changed since that append: the name still
        reaches the same inode, its size is where this store's own last write
        left it, and it still ends with the bytes of that write (so nobody else
        wrote: its id set is complete, its header is the one checked then, its
        last byte is a newline). Anything else returns ``False`` having written
        nothing, and :meth:`append` takes the full path (which re-reads what
        changed). Threads of this process take turns on the descriptor's own
        lock: they share the descriptor, so flock would not separate them.
        Lock order: a descriptor's lock, then its file lock; ``_held_lock``
        (the table of descriptors) is never held while waiting for either.

        Raises:
            InvalidSessionError: an entry id is already used in the file.
            StorageError: the write failed; the file is as it was.
        """
        path = self._paths.get(session_id)
        if path is None:
            return False
        with self._held_lock:
            held = self._held.get(path)
        if held is None or held.session_id != session_id:
            return False
        with held.lock:
            if held.closed:
                return False
            cached = self._ids.get(path)
            if cached is None or cached[0] != held.dev or cached[1] != held.ino or cached[2] != held.end:
                return False
            fd = held.fd
            drop = False
            try:
                _lock(fd, True)
                try:
                    # One stat of the name tells both: it still reaches our inode (so
                    # that inode is linked), and the inode's size. The tail of our last
                    # write, read back, tells an in-place overwrite that happens to
                    # leave the same size (`cp other.jsonl this.jsonl`): another
                    # session's last record differs, if only in its random id.
                    current = os.stat(path)
                    if (current.st_ino != held.ino or current.st_dev != held.dev
                            or current.st_size != held.end
                            or os.pread(fd, len(held.tail), held.end - len(held.tail)) != held.tail):
                        drop = True  # replaced, removed or written by someone else
                        return False
                    known = cached[3]
                    for entry in entries:
                        if entry["id"] in known:
                            raise id_in_use_error(session_id, entry["id"], path)
                    written = self._append_locked(path, fd, payload, self.fsync, held.end, newline_ended=True)
                    known.update([entry["id"] for entry in entries])
                    held.end += written
                    held.tail = payload[-_TAIL:]
                    self._ids[path] = (held.dev, held.ino, held.end, known)
                    return True
                finally:
                    _unlock(fd)
            except FileNotFoundError:
                drop = True
                return False
            except OSError as exc:
                raise StorageError(f"cannot append to {path}: {exc}") from exc
            finally:
                if drop:
                    held.closed = True
                    os.close(held.fd)
                    with self._held_lock:
                        if self._held.get(path) is held:
                            del self._held[path]

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
            self._held[path] = _Held(fd, st.st_dev, st.st_ino, session_id, end, written[-_TAIL:])
            evicted = [self._held.popitem(last=False)[1] for _ in range(len(self._held) - _HELD_FILES)]
        for old in ([previous] if previous is not None else []) + evicted:
            self._close_held(old)

    @staticmethod
    def _close_held(held: _Held) -> None:
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
        _close_all(self._held)

    def _release(self, path: str) -> None:
        """Close the kept descriptor of ``path``, if any (waits for an append using it)."""
        with self._held_lock:
            held = self._held.pop(path, None)
        if held is not None:
            self._close_held(held)

    def _file_ids(self, path: str, fd: int, st: os.stat_result) -> set[str]:
        """Entry ids in the locked file ``fd`` (whose ``fstat`` is ``st``): cached
        per inode, reading only the bytes other writers appended since this store
        last looked. The cached set is updated in place (callers hold the lock)."""
        with self._mutex:
            cached = self._ids.get(path)
        if cached is not None and cached[:2] == (st.st_dev, st.st_ino) and cached[2] <= st.st_size:
            ids = cached[3]
            data = os.pread(fd, st.st_size - cached[2], cached[2]) if st.st_size > cached[2] else b""
            start = cached[2]
        else:
            ids = set()
            data = _read_all(fd)
            start = 0
        # Only bytes up to the last newline count as read: a record another
        # writer has not finished yet is read again, whole, next time (its id
        # is taken now too if it already parses).
        complete = data.rfind(b"\n") + 1
        for line in data.split(b"\n"):
            if not line.strip(_JSON_WS):
                continue
            try:
                record = jsonio.loads(line.strip(_JSON_WS))
            except ValueError:
                continue  # damage is the reader's and check's business, not this guard's
            if isinstance(record, dict) and record.get("type") != "session" and isinstance(record.get("id"), str):
                ids.add(record["id"])
        with self._mutex:
            self._ids[path] = (st.st_dev, st.st_ino, start + complete, ids)
        return ids

    @staticmethod
    def _append_locked(path: str, fd: int, payload: bytes, fsync: bool = True, size: int | None = None,
                       *, newline_ended: bool = False) -> int:
        """Append ``payload`` to the locked file; returns the number of bytes written.

        ``newline_ended``: the caller knows the file ends with a newline (its own last write).
        """
        if size is None:
            size = os.fstat(fd).st_size
        if size and not newline_ended and os.pread(fd, 1, size - 1) != b"\n":
            tail = _last_line(fd, size)
            if tail.strip(_JSON_WS + b"\x0b\x0c"):
                try:
                    jsonio.loads(tail.strip(_JSON_WS))
                except ValueError as exc:
                    # Burying a torn record under new lines would hide the damage;
                    # `check --repair` is the place to fix it.
                    raise InvalidSessionError(
                        "torn final record: the last line is incomplete JSON with no newline", path) from exc
            # A complete last record without its newline: end it first (docs/rules/format.md D.9).
            payload = b"\n" + payload
        try:
            _write_all(fd, payload)
            if fsync:
                os.fsync(fd)
        except BaseException as exc:
            try:
                _truncate(fd, size)
            except OSError as rollback_exc:
                error = StorageError(f"append to {path} failed ({exc}) and the rollback failed too "
                                     f"({rollback_exc}); the file may hold a partial record")
                error.rollback_error = rollback_exc
                raise error from exc
            if isinstance(exc, OSError):
                raise StorageError(f"append to {path} failed: {exc}") from exc
            raise
        return len(payload)

    def replace_header(self, session_id: str, header: dict[str, Any]) -> None:
        """Atomically rewrite the file with a new header (same id); entries keep their bytes.

        Raises:
            SessionNotFoundError: no file has this header id.
            InvalidSessionError: the header is invalid or has another id, or the file is invalid.
            StorageError: the rewrite failed; the file is as it was.
        """
        self._require_writable("replace header")
        check_replacement_header(session_id, header)
        header_raw = jsonio.dumps(header)
        for _ in range(_ATTEMPTS):
            path = self._require(session_id)
            try:
                with _locked(path, exclusive=True) as fd:
                    parsed = parse_session(_read_all(fd), path)
                    if parsed.header["id"] != session_id:
                        self._forget(session_id)
                        continue
                    parsed.header = header
                    parsed.header_raw = header_raw
                    _replace_locked(path, fd, parsed.to_bytes())
                    return
            except FileNotFoundError:
                self._forget(session_id)
        raise SessionNotFoundError(session_id, self.directory)

    def replace_session(self, header: dict[str, Any], entries: Sequence[dict[str, Any]],
                        raw: Sequence[bytes | None] | None = None) -> None:
        """Atomically rewrite the session's file with a new header and entries (same
        file, same id): a temporary file renamed over it under the file lock.

        Raises:
            SessionNotFoundError: no file has the header's id.
            InvalidSessionError: the header or an entry is invalid.
            StorageError: the rewrite failed; the file is as it was.
        """
        self._require_writable("replace session")
        session_id = check_header(header)
        texts = encode_entries(entries, raw)
        data = b"".join([jsonio.dumps(header), b"\n", *(text + b"\n" for text in texts)])
        for _ in range(_ATTEMPTS):
            path = self._require(session_id)
            try:
                with _locked(path, exclusive=True) as fd:
                    if _header_is_current(first_line(fd), session_id) is None:
                        self._forget(session_id)
                        continue
                    _replace_locked(path, fd, data)
                    return
            except FileNotFoundError:
                self._forget(session_id)
        raise SessionNotFoundError(session_id, self.directory)

    # -- sync state (docs/sync.md) ----------------------------------------------------------
    #
    # A log of JSON lines, one SyncState (or {"path": ..., "forget": true}) per commit,
    # the last line of a path winning: a commit appends one short line instead of
    # rewriting a file that grows with the number of synced files. Commits hold an
    # flock on a separate lock file (the log itself is replaced when compacted), and
    # read only what other processes appended since this store last looked.

    def _sync_paths(self) -> tuple[str, str]:
        return (os.path.join(self.directory, SYNC_STATE_FILE), os.path.join(self.directory, SYNC_LOCK_FILE))

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
        with self._mutex:
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
        self._require_writable("sync")
        log, lock = self._sync_paths()
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | _O_CLOEXEC, 0o644)
        except OSError as exc:
            raise StorageError(f"cannot open the sync lock {lock}: {exc}") from exc
        try:
            _lock(fd, True)
            with self._mutex:
                if not sync_expected(expect, self._sync_refresh().get(state.path)):
                    raise SyncConflictError(state.path)
                if change.kind == "create":
                    self.create(header_of(change), change.entries, change.raw)
                elif change.kind == "append":
                    self.append(change.session_id, change.entries, change.raw)
                elif change.kind == "replace":
                    self.replace_session(header_of(change), change.entries, change.raw)
                line = _state_line(state)
                try:
                    out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _O_CLOEXEC, 0o644)
                    try:
                        _write_all(out, line)
                        if self.fsync:
                            os.fsync(out)
                    finally:
                        os.close(out)
                except OSError as exc:
                    raise StorageError(f"cannot record the sync state in {log}: {exc}") from exc
                self._sync_refresh()
                if self._sync_lines > 2 * len(self._sync_cache) + 1000:
                    self._sync_compact(log)
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

    def delete(self, session_id: str) -> None:
        """Trash (or unlink) every file whose header id is ``session_id``; a missing id does nothing.

        Raises:
            StorageError: a file could be neither trashed nor removed.
        """
        self._require_writable("delete")
        paths = list(self._scan().get(session_id, []))
        with self._mutex:
            known = self._paths.get(session_id)
        if known is not None and known not in paths:
            paths.append(known)
        for path in paths:
            # Before the file lock (lock order: kept descriptors first); an append
            # that keeps one again meanwhile finds the file gone on its next try.
            self._release(path)
            try:
                # Under the lock, so a concurrent writer finishes first or finds the file gone.
                with _locked(path, exclusive=True):
                    try:
                        header = read_header_file(path)
                    except InvalidSessionError:
                        continue
                    if header["id"] != session_id:
                        continue
                    self._remove(path)
            except FileNotFoundError:
                continue
            # An append between the release above and the removal may have kept
            # the file open again; nothing can keep it once it is gone.
            self._release(path)
        self._forget(session_id)

    @staticmethod
    def _remove(path: str) -> None:
        try:
            _send_to_trash(path)
            return
        except Exception:
            pass  # no usable trash here (headless system, other volume...): delete instead
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StorageError(f"cannot delete {path}: {exc}") from exc

    # -- reads ----------------------------------------------------------------------------

    def read(self, session_id: str) -> ParsedSession:
        """The session in format 4, read under a shared lock; the file is never
        written, even when it holds an older format (docs/rules/decisions.md D-9 read-only paths).

        Raises:
            SessionNotFoundError: no file has this header id.
            InvalidSessionError, UnsupportedVersionError: the file is invalid.
            StorageError: the file could not be read.
        """
        for _ in range(_ATTEMPTS):
            path = self._require(session_id)
            try:
                parsed = read_file(path)
            except FileNotFoundError:
                self._forget(session_id)
                continue
            except OSError as exc:
                raise StorageError(f"cannot read {path}: {exc}") from exc
            if parsed.header["id"] == session_id:
                return parsed
            self._forget(session_id)
        raise SessionNotFoundError(session_id, self.directory)

    def load(self, session_id: str, *, keep_raw: bool = True) -> ParsedSession:
        """Read the session into format 4; persist an older format's upgrade first
        (docs/rules/decisions.md D-9). ``keep_raw``: see ``SessionStore.load``.

        The upgrade is written atomically under the exclusive lock; the result
        then has ``upgraded == False`` (the file is format 4), while
        ``source_version`` and ``steps`` tell what was converted.

        Raises:
            SessionNotFoundError: no file has this header id.
            InvalidSessionError, UnsupportedVersionError: the file is invalid.
            StorageError: the file could not be read, or the upgrade not written.
        """
        parsed: ParsedSession | None
        if self.readonly:
            parsed = self.read(session_id)  # upgraded in memory only
            if not keep_raw:
                parsed.raw = [None] * len(parsed.entries)
            return parsed
        for _ in range(_ATTEMPTS):
            path = self._require(session_id)
            try:
                parsed = self._read_for_writing(path, session_id)
            except FileNotFoundError:
                parsed = None
            if parsed is not None:
                if not keep_raw:
                    parsed.raw = [None] * len(parsed.entries)
                return parsed
            self._forget(session_id)
        raise SessionNotFoundError(session_id, self.directory)

    def open_path(self, path: str | os.PathLike[str]) -> ParsedSession | None:
        """Open one file for writing (``SessionManager.open_file``), in or outside the directory.

        Returns:
            ``None`` when the file is missing or empty (the caller then writes
            a new header with ``create(..., path=path)``); otherwise the session
            in format 4, an older format's upgrade persisted atomically under
            the lock first (docs/rules/decisions.md D-9). The session id is then bound to this file.

        Raises:
            InvalidSessionError, UnsupportedVersionError: a non-empty file that
                is not a valid session (left untouched).
            StorageError: the file could not be read, or the upgrade not written.
        """
        self._require_writable("open file")
        target = os.path.abspath(os.fspath(path))
        try:
            parsed = self._read_for_writing(target, None)
        except FileNotFoundError:
            return None
        if parsed is not None:
            with self._mutex:
                self._paths[parsed.header["id"]] = target
        return parsed

    def _read_for_writing(self, path: str, session_id: str | None) -> ParsedSession | None:
        """Parse ``path`` and persist a pending upgrade under the exclusive lock.

        Returns ``None`` when the file is empty or (with ``session_id``) holds
        another session. Raises ``FileNotFoundError`` when it is gone.
        """
        def parse_if_ours(fd: int) -> ParsedSession | None:
            data = _read_all(fd)
            if not data:
                return None
            parsed = parse_session(data, path)
            return None if session_id is not None and parsed.header["id"] != session_id else parsed

        try:
            with _locked(path, exclusive=False) as fd:
                parsed = parse_if_ours(fd)
            if parsed is None or not parsed.upgraded:
                return parsed
            with _locked(path, exclusive=True) as fd:
                # Read again: another process may have upgraded or appended meanwhile.
                parsed = parse_if_ours(fd)
                if parsed is None:
                    return None
                if parsed.upgraded:
                    _replace_locked(path, fd, parsed.to_bytes())
                    parsed.upgraded = False
                return parsed
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc}") from exc

    def path_for(self, header: dict[str, Any]) -> str:
        """Where :meth:`create` would write a new session with this header
        (docs/rules/decisions.md D-7 name)."""
        return os.path.join(self.directory, file_name_for(header))

    def exists(self, session_id: str) -> bool:
        """Whether a file in the store has this header id."""
        return self._find(session_id) is not None

    def session_ids(self) -> list[str]:
        """Ids of every file with a valid header (by file name), internal ones included."""
        return list(self._scan())

    def location(self, session_id: str) -> str | None:
        """The session's file, or ``None`` when no file has this id."""
        return self._find(session_id)

    def list_sessions(self, *, cwd: str | None = None, include_internal: bool = False,
                      on_progress: ProgressCallback | None = None,
                      cancel: CancelEvent | None = None) -> SessionListing:
        """Parse each ``*.jsonl`` file of the directory in memory and list it (docs/rules/listing.md).

        Files that fail to load are left out and counted in ``skipped``;
        internal sessions and other cwds are skipped by their header before the
        body is parsed (docs/rules/listing.md L.4), and not counted. Temporary files are never listed.
        Nothing is ever written. ``on_progress`` is called once per file.

        Raises:
            ListingCancelledError: ``cancel`` was set before or during the listing.
        """
        wanted = resolve_cwd(cwd) if cwd is not None else None
        Progress(0, None, cancel)  # cancelled before starting: do not even scan
        files = self._files()
        progress = Progress(len(files), on_progress, cancel)
        infos: list[SessionInfo] = []
        skipped = 0
        for path in files:
            info = self._list_one(path, wanted, include_internal)
            if info is _UNLOADABLE:
                skipped += 1
            elif info is not None:
                infos.append(info)
            progress.step()
        return sort_listing(infos, skipped)

    def _list_one(self, path: str, wanted: str | None, include_internal: bool) -> Any:
        """The file's listing row; ``None`` when filtered out; ``_UNLOADABLE`` when it cannot be loaded."""
        header = self._header(path)
        if header is None:
            return _UNLOADABLE if os.path.exists(path) else None
        if not include_internal and is_classified(header):
            return None
        if not cwd_matches(header.get("cwd"), wanted):
            return None
        try:
            with _locked(path, exclusive=False) as fd:
                data = _read_all(fd)
                mtime = os.fstat(fd).st_mtime
            parsed = parse_session(data, path)
        except FileNotFoundError:
            return None  # removed meanwhile: nothing to report
        except (OSError, InvalidSessionError):
            return _UNLOADABLE
        # Re-check on the full parse: the file may have changed since its header was read.
        if not include_internal and is_classified(parsed.header):
            return None
        if not cwd_matches(parsed.header.get("cwd"), wanted):
            return None
        return session_info_from_entries(parsed.header, parsed.entries, path, fallback_mtime=mtime)

    def find_most_recent(self, cwd: str | None = None, include_internal: bool = False) -> str | None:
        """Id of the session whose file was modified last (docs/rules/listing.md M.1), or ``None``.

        Only the first record (the header) of each file is read.
        """
        wanted = resolve_cwd(cwd) if cwd is not None else None
        best: tuple[int, str] | None = None
        best_id: str | None = None
        for path in self._files():
            header = self._header(path)
            if header is None:
                continue
            if not include_internal and is_classified(header):
                continue
            if not cwd_matches(header.get("cwd"), wanted):
                continue
            try:
                key = (os.stat(path).st_mtime_ns, path)
            except OSError:
                continue
            if best is None or key > best:
                best, best_id = key, header["id"]
        return best_id

    def session_files(self) -> list[str]:
        """Every ``*.jsonl`` file directly in the directory (absolute paths, by name),
        valid or not; temporary files excluded.

        Raises:
            StorageError: the directory cannot be read.
        """
        return self._files()

    def search(self, query: str, *, cwd: str | None = None, roles: Iterable[str] | None = None,
               since: Any = None, until: Any = None, session: str | None = None,
               limit: int | None = 50) -> list[SearchHit]:
        """Search by reading and scanning every session file (each under its shared
        lock; nothing is written). See :meth:`SessionStore.search`. Files that
        cannot be loaded are passed over, as listings pass them over.

        Raises:
            SearchQueryError, ValueError: see :meth:`SessionStore.search`.
            StorageError: the directory cannot be read.
        """
        parsed = parse_query(query)
        filters = make_filters(cwd=cwd, roles=roles, since=since, until=until, session=session)
        limit = check_limit(limit)
        if filters.session is not None:
            found = self._find(filters.session)
            paths = [found] if found is not None else []
        else:
            paths = self._files()

        def sessions() -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
            for path in paths:
                header = self._header(path)
                # The header alone decides the cwd filter: no need to read the body.
                if header is None or not cwd_matches(header.get("cwd"), filters.cwd):
                    continue
                try:
                    session_data = read_file(path)
                except (OSError, InvalidSessionError):
                    continue
                yield session_data.header, session_data.entries

        return scan(sessions(), parsed, filters, limit)

    def reindex(self, session_id: str | None = None) -> int:
        """Nothing to rebuild: a JSONL store keeps no derived data on disk (listing,
        search and usage are computed from the files when asked). See
        :meth:`SessionStore.reindex`.

        Returns:
            The number of sessions the call covers (every file with a valid
            header, or 1 for a stored ``session_id``, 0 for an unknown one).
        """
        if session_id is not None:
            return 1 if self.exists(session_id) else 0
        return len(self.session_ids())

    def usage(self, query: UsageQuery | None = None) -> UsageRows:
        """Billed usage computed by reading every session file (a JSONL store keeps no
        ledger). A file that cannot be read is left out and counted in ``skipped``.
        See :meth:`SessionStore.usage`.

        Raises:
            StorageError: the directory cannot be read.
        """
        query = query or UsageQuery()
        wanted = resolve_cwd(query.cwd) if query.cwd is not None else None
        skipped = 0

        def sessions() -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
            nonlocal skipped
            for session_id in self.session_ids():
                try:
                    parsed = self.read(session_id)
                except (SessionNotFoundError, InvalidSessionError, StorageError):
                    skipped += 1
                    continue
                yield parsed.header, parsed.entries

        rows = aggregate(sessions(), query, lambda cwd: cwd_matches(cwd, wanted))
        return UsageRows(rows, skipped)

    def verify(self, on_progress: ProgressCallback | None = None) -> list[StoreProblem]:
        """Run the file checker (:func:`sessiontree.check.check_bytes`) over every
        session file, each read under its shared lock; nothing is written.

        Returns:
            One :class:`StoreProblem` per problem the checker reports (its code,
            severity, line and entry id; ``path`` the file, ``session_id`` the
            header id when the header is readable), plus ``unreadable`` for a
            file that cannot be read.

        Raises:
            StorageError: the directory cannot be read.
        """
        files = self._files()
        problems: list[StoreProblem] = []
        for done, path in enumerate(files, 1):
            header = self._header(path)
            session_id = header["id"] if header is not None else None
            try:
                with _locked(path, exclusive=False) as fd:
                    data = _read_all(fd)
            except FileNotFoundError:
                data = None
            except OSError as exc:
                problems.append(StoreProblem("unreadable", f"cannot read the file: {exc.strerror or exc}",
                                             session_id=session_id, path=path))
                data = None
            if data is not None:
                problems.extend(file_rule_problems(data, session_id, path))
            if on_progress is not None:
                on_progress(done, len(files))
        return problems

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


def _state_line(state: SyncState) -> bytes:
    """One line of the sync-state log. Plain orjson, not :func:`jsonio.dumps`: this
    is our own file, not a session record, and ``mtime_ns`` (beyond 2**53) must
    read back exactly, where JavaScript's number rules would round it."""
    return orjson.dumps(state.to_dict()) + b"\n"
