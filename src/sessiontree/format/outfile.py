"""Writing a whole output file the user asked for: atomic, never through a link.

Used by ``export -o`` and ``check --repair`` (and their library functions).
The rules (docs/output-files.md):

* The bytes go to a temporary file in the target's directory, are flushed to
  disk, and the temporary file is renamed over the target. A failure midway
  (disk full, quota, a kill) leaves the old target untouched, or no target,
  and removes the temporary file: never a truncated output.
* A symbolic link at the target path is refused, not followed: writing
  through it would replace a file the user never named (a link planted
  beside a session file would otherwise redirect ``FILE.repaired.jsonl``).
* Only a regular file is replaced: a directory, a FIFO, a socket or a
  device node at the target path is refused (renaming over it would put a
  plain file where a pipe or a device was, and a write through it could
  block forever or reach hardware).
* The new file's permission bits: ``mode`` when given (``check --repair``
  passes the input file's), else those of the file being replaced, else
  ``0o666`` minus the umask, as a plain ``open()`` would create it. The
  setuid, setgid and sticky bits are never carried over: a session file is
  data, and a copy must not gain a privilege the user never gave it.
"""

from __future__ import annotations

import os
import stat

from sessiontree.errors import SessionError

__all__ = ["OutputPathError", "write_atomic"]


class OutputPathError(SessionError, ValueError):
    """The output path cannot be written safely (a symbolic link, a directory,
    a FIFO, a socket, a device node).

    Attributes:
        path: the refused output path.
        reason: why, in a few words.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"refusing to write {path}: {reason}")


#: The read/write/execute bits of owner, group and others: all a new output file keeps.
_PERMISSION_BITS = 0o777


def _kind(mode: int) -> str:
    """What a non-regular file is, in a few words (for :class:`OutputPathError`)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device node"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def _umask() -> int:
    # The umask can only be read by setting it; set it straight back.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: str | os.PathLike[str], data: bytes, *, mode: int | None = None) -> str:
    """Replace the file at ``path`` with ``data`` atomically.

    Args:
        path: the output file; its directory must exist.
        data: the complete new content.
        mode: permission bits for the new file (``0o644`` style); ``None``
            keeps the bits of the file being replaced, or uses
            ``0o666 & ~umask`` for a new file. Setuid, setgid and sticky
            bits are dropped either way.

    Returns:
        ``path`` as a string.

    Raises:
        OutputPathError: ``path`` is a symbolic link (dangling or not), a
            directory, a FIFO, a socket or a device node; nothing is written.
        OSError: the directory is missing or not writable, or the disk is
            full; the old file at ``path`` (if any) is unchanged and no
            temporary file is left behind. Its ``filename`` is ``path`` (never
            the temporary file's name).
    """
    target = os.fspath(path)
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise OutputPathError(target, "it is a symbolic link (links are not followed)")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OutputPathError(target, f"it is {_kind(st.st_mode)}, not a regular file")
    if mode is None:
        mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
    mode &= _PERMISSION_BITS  # never setuid, setgid or sticky
    directory = os.path.dirname(os.path.abspath(target))
    import tempfile  # with shutil and random, ~3 ms: only when a file is written

    try:
        fd, temp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(target)}.", suffix=".tmp")
    except OSError as exc:
        renamed = _naming(exc, target)
        if renamed is None:
            raise
        raise renamed from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException as exc:
        try:
            os.unlink(temp)
        except OSError:
            pass
        renamed = _naming(exc, target) if isinstance(exc, OSError) else None
        if renamed is None:
            raise
        raise renamed from exc
    return target


def _naming(exc: OSError, target: str) -> OSError | None:
    """``exc`` about ``target``, the path the user gave (``None`` for an error without an
    errno, raised as it is): the temporary file's name is ours, and an error quoting it
    (``.x.jsonl.0_t1fiez.tmp``) names a file the user never saw and that no longer exists.
    The same class and errno, so callers still tell the cases apart."""
    if exc.errno is None:
        return None
    return type(exc)(exc.errno, exc.strerror, target)
