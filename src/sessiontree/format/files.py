"""File primitives for session files: descriptors, locks, durable and atomic writes.

Every function here works on one file (or its directory) and knows nothing of
stores. What it guarantees:

* **Locks** are ``fcntl.flock`` on the session file itself: exclusive for a
  writer, shared for a reader. :func:`locked` opens a file and holds its lock,
  retrying when the name was replaced or removed while it waited, so the
  descriptor it yields always reaches the file the name reaches. Without
  ``fcntl`` (non-POSIX systems) locking is a no-op.
* **Atomic replacement** (:func:`replace_locked`) writes a temporary file
  ``<file>.tmp-<pid>-<random>`` in the same directory, fsyncs it and renames
  it over the target; the temporary file never survives a failure the writer
  lives through. A writer holds an exclusive ``flock`` on its temporary file
  for the file's whole life (:func:`open_temp`), so a temporary file nobody
  holds is stale: its writer was killed (:func:`remove_if_stale`).
* **Reads** (:func:`first_line`, :func:`read_all`) use ``pread`` and never move
  the file offset.

Functions are looked up at module level so tests can inject failures
(``monkeypatch.setattr(files, "write_all", ...)``).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import secrets
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX platforms
    fcntl = None  # type: ignore[assignment]

from sessiontree.errors import StorageError

__all__ = [
    "FILE_SUFFIX",
    "O_CLOEXEC",
    "TEMP_GRACE_SECONDS",
    "TEMP_NAME",
    "first_line",
    "fsync_dir",
    "lock",
    "locked",
    "open_temp",
    "read_all",
    "remove_if_stale",
    "remove_stale_temps",
    "replace_locked",
    "sha256_prefix",
    "unlock",
    "unlock_and_close",
    "write_all",
]

#: The suffix of a session file; only ``*<FILE_SUFFIX>.tmp-*`` temporary files are ever removed as stale.
FILE_SUFFIX = ".jsonl"
#: ``os.O_CLOEXEC`` where the platform has it: descriptors are not inherited by child processes.
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
#: A temporary file's name: ``<target>.tmp-<pid>-<12 hex>`` (``<target>.tmp-<12 hex>``
#: from earlier versions, which carried no pid).
TEMP_NAME = re.compile(r"\.tmp-(?:(\d+)-)?[0-9a-f]{12}$")
#: Seconds after which an unlocked temporary file is stale even if the pid in its
#: name is alive (the pid was reused, or the name carries none). A live writer
#: holds the flock from a few microseconds after creating the file, so only a
#: writer stopped inside those microseconds for this long could be mistaken.
TEMP_GRACE_SECONDS = 60.0


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` (``os.write`` may write less than asked)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_dir(directory: str) -> None:
    """Fsync ``directory``, which makes a rename or new name in it durable.

    Best effort, never raises: some filesystems refuse it, and the data itself
    is already on disk when this runs.
    """
    try:
        fd = os.open(directory, os.O_RDONLY | O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_all(fd: int) -> bytes:
    """Every byte of the open file ``fd``, read with ``pread`` from offset 0 (the file
    offset is not moved); bytes appended while reading are included."""
    size = os.fstat(fd).st_size
    chunks: list[bytes] = []
    offset = 0
    while True:
        chunk = os.pread(fd, max(size - offset, 1 << 16), offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)


def sha256_prefix(fd: int, size: int | None = None) -> tuple[bytes, int]:
    """SHA-256 of the first ``size`` bytes of the open file ``fd`` (``None``: up to its
    end), read with ``pread`` in 1 MiB pieces, so a large file is never held whole.

    Returns:
        ``(digest, bytes hashed)``: 32 raw bytes, and fewer bytes than ``size`` when
        the file is shorter.
    """
    digest = hashlib.sha256()
    offset = 0
    while size is None or offset < size:
        chunk = os.pread(fd, 1 << 20 if size is None else min(1 << 20, size - offset), offset)
        if not chunk:
            break
        digest.update(chunk)
        offset += len(chunk)
    return digest.digest(), offset


def first_line(fd: int) -> bytes:
    """The bytes before the first ``\\n`` of the open file ``fd`` (the whole file when
    it has none), read with ``pread`` (the file offset is not moved)."""
    chunks: list[bytes] = []
    offset = 0
    while True:
        chunk = os.pread(fd, 1 << 14, offset)
        if not chunk:
            return b"".join(chunks)
        end = chunk.find(b"\n")
        if end >= 0:
            chunks.append(chunk[:end])
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)


def _pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` may exist (signal 0 tells without sending anything)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return pid > 0  # exists, owned by someone else (or not a pid at all)
    return True


def open_temp(target: str) -> tuple[str, int]:
    """Create ``<target>.tmp-<pid>-<random>`` exclusively and lock it (``flock``, exclusive).

    The caller keeps the descriptor open, and so the lock held, until the temp
    file is renamed over its target or removed: that lock is what tells a
    live writer's temp file from a stale one (:func:`remove_if_stale`).
    """
    tmp = f"{target}.tmp-{os.getpid()}-{secrets.token_hex(6)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_CLOEXEC, 0o600)
    try:
        lock(fd, True)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    return tmp, fd


def remove_if_stale(path: str) -> bool:
    """Remove the temporary file ``path`` if no live writer owns it; return whether it was removed.

    Stale means: nobody holds its ``flock`` (a writer holds it for the temp
    file's whole life), and either the pid in its name is not a running
    process or it is older than :data:`TEMP_GRACE_SECONDS` (the pid check
    covers the instant between creating the file and locking it). The file
    is removed while we hold its lock, after checking the name still reaches
    the inode we locked. Only names matching ``*.jsonl.tmp-[<pid>-]<12 hex>`` qualify.
    """
    match = TEMP_NAME.search(path)
    if match is None or not path[: match.start()].endswith(FILE_SUFFIX) or fcntl is None:
        return False
    try:
        fd = os.open(path, os.O_RDONLY | O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # a live writer holds it
        held = os.fstat(fd)
        if not stat.S_ISREG(held.st_mode):
            return False
        old = time.time() - held.st_mtime >= TEMP_GRACE_SECONDS
        pid = match.group(1)
        if not old and (pid is None or _pid_alive(int(pid))):
            return False
        try:
            current = os.stat(path, follow_symlinks=False)
        except OSError:
            return False
        if (current.st_dev, current.st_ino) != (held.st_dev, held.st_ino):
            return False
        try:
            os.unlink(path)
        except OSError:
            return False
        return True
    finally:
        os.close(fd)


def remove_stale_temps(path: str) -> None:
    """Remove stale ``<path>.tmp-*`` files left by writers killed mid-write (see :func:`remove_if_stale`)."""
    directory, name = os.path.split(path)
    prefix = name + ".tmp-"
    try:
        with os.scandir(directory) as it:
            candidates = [entry.path for entry in it if entry.name.startswith(prefix)]
    except OSError:
        return
    for leftover in candidates:
        remove_if_stale(leftover)


def lock(fd: int, exclusive: bool) -> None:
    """Wait for the ``flock`` of the open file ``fd``: exclusive (a writer) or shared (a reader).

    Raises:
        OSError: the lock could not be taken.
    """
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)


def unlock(fd: int) -> None:
    """Release the ``flock`` held through ``fd``."""
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)


def unlock_and_close(fd: int) -> None:
    """Release the flock explicitly, then close: a child forked meanwhile holds a copy
    of the descriptor, and closing ours alone would leave the lock held by the copy."""
    try:
        unlock(fd)
    except OSError:
        pass
    os.close(fd)


@contextmanager
def locked(path: str, *, exclusive: bool, writable: bool = False) -> Iterator[int]:
    """Open ``path`` and hold its flock; yields the descriptor.

    ``exclusive``: an exclusive (writer's) lock, else a shared one.
    ``writable``: open for appending (``O_RDWR | O_APPEND``), else read-only.
    The lock is released and the descriptor closed when the block ends.

    Raises:
        FileNotFoundError: the file does not exist, or was removed while we waited.
    """
    flags = (os.O_RDWR | os.O_APPEND if writable else os.O_RDONLY) | O_CLOEXEC
    while True:
        fd = os.open(path, flags)
        try:
            lock(fd, exclusive)
            held = os.fstat(fd)
            try:
                current: os.stat_result | None = os.stat(path)
            except FileNotFoundError:
                current = None
        except BaseException:
            unlock_and_close(fd)
            raise
        if current is not None and (current.st_dev, current.st_ino) == (held.st_dev, held.st_ino):
            break
        # Replaced (atomic rewrite) or removed while we waited: our inode is stale.
        unlock_and_close(fd)
        if current is None:
            raise FileNotFoundError(errno.ENOENT, "session file was removed", path)
    try:
        yield fd
    finally:
        unlock_and_close(fd)


def replace_locked(path: str, fd: int, data: bytes) -> None:
    """Atomically replace ``path`` (whose lock ``fd`` holds) with ``data``.

    A symlink is followed: the file it points to is replaced and the link
    kept, so every name of the session still reaches the same file. The
    new file keeps the old one's mode and (where permitted) owner. Temp
    files that a crashed writer left beside it are removed first: they
    are only ever written under this same exclusive lock.

    Raises:
        StorageError: the rewrite failed (the OS error is its ``__cause__``);
            ``path`` is as it was and no temporary file is left.
    """
    path = os.path.realpath(path)
    remove_stale_temps(path)
    tmp = None
    out = -1
    try:
        held = os.fstat(fd)
        tmp, out = open_temp(path)
        os.fchmod(out, stat.S_IMODE(held.st_mode))
        try:
            os.fchown(out, held.st_uid, held.st_gid)
        except OSError:
            pass  # not permitted for non-root writers: they own what they write anyway
        write_all(out, data)
        os.fsync(out)
        os.replace(tmp, path)
        tmp = None
    except BaseException as exc:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        if isinstance(exc, OSError):
            raise StorageError(f"rewriting {path} failed: {exc}") from exc
        raise
    finally:
        if out >= 0:
            os.close(out)  # after the rename it locks the new file: release it at once
    fsync_dir(os.path.dirname(path))
