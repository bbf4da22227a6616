"""The writes of a JSONL store: session files created, appended to, rewritten and deleted.

:class:`JsonlWrites` holds the ``StoreCore`` writes (``create``, ``append``,
``replace_header``, ``replace_session``, ``delete``), each under the file's
exclusive lock; the append fast path through a descriptor kept by :mod:`.files`
and the duplicate-id guard (``_file_ids``); and the opens for writing that persist
an older format's upgrade first (``load``, ``open_path``, ``_read_for_writing``).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from typing import Any

from sessiontree.errors import InvalidSessionError, SessionExistsError, SessionNotFoundError, StorageError
from sessiontree.format import jsonio
from sessiontree.format.codec import CURRENT_VERSION, ParsedSession, parse_session, read_header_file

# The file primitives under this module's own (private) names: the writes look them up
# here, so tests inject failures into the store's writes by patching this module (and
# into atomic rewrites by patching sessiontree.format.files, where replace_locked looks).
from sessiontree.format.files import O_CLOEXEC as _O_CLOEXEC
from sessiontree.format.files import first_line
from sessiontree.format.files import fsync_dir as _fsync_dir
from sessiontree.format.files import lock as _lock
from sessiontree.format.files import locked as _locked
from sessiontree.format.files import open_temp as _open_temp
from sessiontree.format.files import read_all as _read_all
from sessiontree.format.files import replace_locked as _replace_locked
from sessiontree.format.files import unlock as _unlock
from sessiontree.format.files import unlock_and_close as _unlock_and_close
from sessiontree.format.files import write_all as _write_all
from sessiontree.stores.jsonl.files import LOOKUP_ATTEMPTS, TAIL_BYTES, JsonlFiles
from sessiontree.stores.jsonl.reads import JsonlReads
from sessiontree.stores.storable import check_header, check_replacement_header, encode_entries, id_in_use_error

__all__ = ["JsonlWrites"]

_JSON_WS = b" \t\r\n"


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


class JsonlWrites:
    """The ``StoreCore`` writes of :class:`~sessiontree.stores.jsonl.store.JsonlStore`
    (documented there and in :mod:`sessiontree.stores.base`), and ``load``, which writes
    an older format's upgrade; it builds on the reads for ``read`` and ``path_for``."""

    def __init__(self, folder: JsonlFiles, reads: JsonlReads) -> None:
        self.folder = folder
        self.reads = reads


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
        needs a caller bug). The same name is refused by the exclusive link:
        when the file that took it holds this session (another process created
        it meanwhile), that is :class:`SessionExistsError`, as if it had been
        there before (docs/stores.md).

        Raises:
            SessionExistsError: a file in the directory has this header id.
            InvalidSessionError: the header or an entry is not valid format 4.
            StorageError: the write failed (or ``path`` is a non-empty file); no file is left.
        """
        self.folder.require_writable("create")
        session_id = check_header(header)
        texts = encode_entries(entries, raw)
        data = b"".join([jsonio.dumps(header), b"\n", *(text + b"\n" for text in texts)])
        target = os.path.abspath(os.fspath(path)) if path is not None else self.reads.path_for(header)
        with self.folder.mutex:
            if self.folder.find(session_id) is not None:
                raise SessionExistsError(session_id)
            if path is not None:
                try:
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                except OSError as exc:
                    raise StorageError(f"cannot create the directory of {target}: {exc}") from exc
            try:
                self._write_new(target, data)
            except StorageError as exc:
                if isinstance(exc.__cause__, FileExistsError) and self._created_meanwhile(target, session_id):
                    # Another process created this very session between our check and
                    # our write: the session is there, as if it had been before.
                    raise SessionExistsError(session_id) from exc
                raise
            self.folder.paths[session_id] = target

    def _created_meanwhile(self, target: str, session_id: str) -> bool:
        """Whether ``target``, found taken by a create, holds ``session_id``'s header
        (another process's create of the same session won the race). The shared
        lock waits for a creator still writing without hard links."""
        try:
            with _locked(target, exclusive=False):
                header = self.folder.header(target)
        except OSError:
            return False
        if header is None or header.get("id") != session_id:
            return False
        self.folder.paths[session_id] = target
        return True

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
        self.folder.require_writable("append")
        texts = encode_entries(entries, raw)
        payload = b"".join(text + b"\n" for text in texts)
        if payload and self._append_held(session_id, entries, payload):
            return
        for _ in range(LOOKUP_ATTEMPTS):
            path = self.folder.require(session_id)
            try:
                with _locked(path, exclusive=True, writable=True) as fd:
                    st = os.fstat(fd)
                    # The header is read every time here: a file can be truncated or
                    # overwritten in place, or its inode reused by another session.
                    # The common case, this store appending again to a file it just
                    # appended to, takes _append_held and skips this.
                    current = _header_is_current(first_line(fd), session_id)
                    if current is None:
                        self.folder.forget(session_id)
                        continue
                    if not current:
                        parsed = parse_session(_read_all(fd), path)
                        if parsed.header["id"] != session_id:
                            self.folder.forget(session_id)
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
                        written = self._append_locked(path, fd, payload, self.folder.fsync, st.st_size)
                        known.update(e["id"] for e in entries)
                        with self.folder.mutex:
                            self.folder.ids[path] = (st.st_dev, st.st_ino, st.st_size + written, known)
                        end = st.st_size + written
                    else:
                        return
                # Outside the file lock: _hold may wait for a kept descriptor's lock,
                # which the fast path holds while it waits for a file lock.
                self.folder.hold(path, st, session_id, end, payload)
                return
            except FileNotFoundError:
                self.folder.forget(session_id)
            except OSError as exc:  # read-only filesystem, permissions: the protocol's error
                raise StorageError(f"cannot append to {path}: {exc}") from exc
        raise SessionNotFoundError(session_id, self.folder.directory)

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
        path = self.folder.paths.get(session_id)
        if path is None:
            return False
        with self.folder.held_lock:
            held = self.folder.held.get(path)
        if held is None or held.session_id != session_id:
            return False
        with held.lock:
            if held.closed:
                return False
            cached = self.folder.ids.get(path)
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
                    written = self._append_locked(path, fd, payload, self.folder.fsync, held.end, newline_ended=True)
                    known.update([entry["id"] for entry in entries])
                    held.end += written
                    held.tail = payload[-TAIL_BYTES:]
                    self.folder.ids[path] = (held.dev, held.ino, held.end, known)
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
                    with self.folder.held_lock:
                        if self.folder.held.get(path) is held:
                            del self.folder.held[path]

    def _file_ids(self, path: str, fd: int, st: os.stat_result) -> set[str]:
        """Entry ids in the locked file ``fd`` (whose ``fstat`` is ``st``): cached
        per inode, reading only the bytes other writers appended since this store
        last looked. The cached set is updated in place (callers hold the lock)."""
        with self.folder.mutex:
            cached = self.folder.ids.get(path)
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
        with self.folder.mutex:
            self.folder.ids[path] = (st.st_dev, st.st_ino, start + complete, ids)
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
        self.folder.require_writable("replace header")
        check_replacement_header(session_id, header)
        header_raw = jsonio.dumps(header)
        for _ in range(LOOKUP_ATTEMPTS):
            path = self.folder.require(session_id)
            try:
                with _locked(path, exclusive=True) as fd:
                    parsed = parse_session(_read_all(fd), path)
                    if parsed.header["id"] != session_id:
                        self.folder.forget(session_id)
                        continue
                    parsed.header = header
                    parsed.header_raw = header_raw
                    _replace_locked(path, fd, parsed.to_bytes())
                    return
            except FileNotFoundError:
                self.folder.forget(session_id)
        raise SessionNotFoundError(session_id, self.folder.directory)

    def replace_session(self, header: dict[str, Any], entries: Sequence[dict[str, Any]],
                        raw: Sequence[bytes | None] | None = None) -> None:
        """Atomically rewrite the session's file with a new header and entries (same
        file, same id): a temporary file renamed over it under the file lock.

        Raises:
            SessionNotFoundError: no file has the header's id.
            InvalidSessionError: the header or an entry is invalid.
            StorageError: the rewrite failed; the file is as it was.
        """
        self.folder.require_writable("replace session")
        session_id = check_header(header)
        texts = encode_entries(entries, raw)
        data = b"".join([jsonio.dumps(header), b"\n", *(text + b"\n" for text in texts)])
        for _ in range(LOOKUP_ATTEMPTS):
            path = self.folder.require(session_id)
            try:
                with _locked(path, exclusive=True) as fd:
                    if _header_is_current(first_line(fd), session_id) is None:
                        self.folder.forget(session_id)
                        continue
                    _replace_locked(path, fd, data)
                    return
            except FileNotFoundError:
                self.folder.forget(session_id)
        raise SessionNotFoundError(session_id, self.folder.directory)

    def delete(self, session_id: str) -> None:
        """Trash (or unlink) every file whose header id is ``session_id``; a missing id does nothing.

        Raises:
            StorageError: a file could be neither trashed nor removed.
        """
        self.folder.require_writable("delete")
        paths = list(self.folder.scan().get(session_id, []))
        with self.folder.mutex:
            known = self.folder.paths.get(session_id)
        if known is not None and known not in paths:
            paths.append(known)
        for path in paths:
            # Before the file lock (lock order: kept descriptors first); an append
            # that keeps one again meanwhile finds the file gone on its next try.
            self.folder.release(path)
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
            self.folder.release(path)
        self.folder.forget(session_id)

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

    # -- opening for writing: an older format's upgrade is persisted first ---------------

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
        if self.folder.readonly:
            parsed = self.reads.read(session_id)  # upgraded in memory only
            if not keep_raw:
                parsed.raw = [None] * len(parsed.entries)
            return parsed
        for _ in range(LOOKUP_ATTEMPTS):
            path = self.folder.require(session_id)
            try:
                parsed = self._read_for_writing(path, session_id)
            except FileNotFoundError:
                parsed = None
            if parsed is not None:
                if not keep_raw:
                    parsed.raw = [None] * len(parsed.entries)
                return parsed
            self.folder.forget(session_id)
        raise SessionNotFoundError(session_id, self.folder.directory)

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
        self.folder.require_writable("open file")
        target = os.path.abspath(os.fspath(path))
        try:
            parsed = self._read_for_writing(target, None)
        except FileNotFoundError:
            return None
        if parsed is not None:
            with self.folder.mutex:
                self.folder.paths[parsed.header["id"]] = target
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
