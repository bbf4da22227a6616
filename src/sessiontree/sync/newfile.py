"""Writing a new file into a folder a command owns, never over anything (``restore``,
``resume``; docs/agent-loop.md, "What is guaranteed"): the :class:`Target` (a root and
validated names below it), a temporary file beside it hard-linked into place, and the
stale temporary files of killed runs swept. Split from :mod:`.restore` by job."""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from dataclasses import dataclass

from sessiontree.errors import SessionError
from sessiontree.format.files import O_CLOEXEC, write_all
from sessiontree.sync.safepath import UnsafePathError, open_folder

__all__ = ["STALE_AFTER", "STALE_ANYWAY", "RestoreError", "Target", "is_stale_temp", "sweep_stale_temps",
           "write_new"]


class RestoreError(SessionError):
    """A restore that cannot be done as asked (target exists with other bytes, a symbolic
    link, a folder that cannot be written, a full disk); nothing was written."""



@dataclass(frozen=True)
class Target:
    """Where a file goes: a folder the command owns (``root``: the agent's sessions folder or
    ``--dir``) and validated names below it (docs/agent-loop.md, "What is guaranteed").

    Attributes:
        root: the folder, absolute (as given: a symbolic link there is the user's choice).
        parts: the folders below it, then the file name; each one path component.
    """

    root: str
    parts: tuple[str, ...]

    @property
    def path(self) -> str:
        """The file's absolute path."""
        return os.path.join(self.root, *self.parts)



#: The temporary file of a restore: ``.<name>.restore-<pid>-<8 hex digits>``.
_TEMP = re.compile(r"\..+\.restore-(\d+)-[0-9a-f]{8}")
#: A temporary file whose writer is gone is stale after this many seconds; any after a day.
STALE_AFTER = 60.0
STALE_ANYWAY = 86400.0


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # another user's process, or no way to tell: assume it is writing
    return True


def is_stale_temp(name: str, mtime: float, now: float | None = None) -> bool:
    """Whether ``name`` is a restore's temporary file left by a killed run: its name is
    ``.<name>.restore-<pid>-<hex>`` and either its process is gone and it was last written
    more than :data:`STALE_AFTER` seconds ago, or it was last written more than a day ago (a
    pid reused, a writer on another host of a shared folder: a live writer keeps it fresh)."""
    match = _TEMP.fullmatch(name)
    if match is None:
        return False
    age = (time.time() if now is None else now) - mtime
    return age > STALE_ANYWAY or (age > STALE_AFTER and not _pid_alive(int(match.group(1))))


def sweep_stale_temps(folder_fd: int) -> list[str]:
    """Remove the stale temporary files of killed restores (:func:`is_stale_temp`) in the
    folder open as ``folder_fd``; returns their names. Errors are ignored (best effort:
    the next run tries again)."""
    removed: list[str] = []
    try:
        with os.scandir(folder_fd) as items:
            names = [item.name for item in items if item.name.startswith(".") and ".restore-" in item.name]
    except OSError:
        return removed
    now = time.time()
    for name in names:
        try:
            st = os.lstat(name, dir_fd=folder_fd)
            if stat.S_ISREG(st.st_mode) and is_stale_temp(name, st.st_mtime, now):
                os.unlink(name, dir_fd=folder_fd)
                removed.append(name)
        except OSError:
            continue
    return removed


def _same_bytes(name: str, folder_fd: int, data: bytes) -> bool:
    try:
        fd = os.open(name, os.O_RDONLY | O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0), dir_fd=folder_fd)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "rb") as handle:
            return handle.read(len(data) + 1) == data
    except OSError:
        return False


def write_new(target: Target, data: bytes) -> str:
    """Write ``data`` as a new file at ``target``; ``"written"``, or ``"present"`` when the
    file is already there with these exact bytes.

    The folders below the target's root are opened one by one (created when missing), none
    of them a symbolic link (:func:`~sessiontree.sync.safepath.open_folder`); in the last
    one, stale temporary files of killed restores are removed (:func:`sweep_stale_temps`),
    a temporary file is written, fsynced and hard-linked to the target name (never
    replacing anything), then removed; the folder is fsynced. Every step works relative
    to the folder's descriptor, so nothing swapped in meanwhile is followed.

    Raises:
        RestoreError: the target exists with other bytes or is not a regular file, is a
            symbolic link, a folder on the way is a link or cannot be created or written,
            the disk is full.
    """
    path = target.path
    folder = os.path.dirname(path)
    name = target.parts[-1]
    try:
        with open_folder(target.root, target.parts[:-1], create=True) as fd:
            return _write_in(fd, folder, name, path, data)
    except UnsafePathError as exc:
        raise RestoreError(f"{exc}") from exc
    except FileExistsError as exc:
        raise RestoreError(f"cannot create the folder {folder}: a file is in the way; nothing was written") from exc
    except OSError as exc:
        raise RestoreError(f"cannot create the folder {folder}: {exc.strerror}; nothing was written") from exc


def _write_in(fd: int, folder: str, name: str, path: str, data: bytes) -> str:
    """:func:`write_new` inside the open folder ``fd``."""
    sweep_stale_temps(fd)
    try:
        st = os.lstat(name, dir_fd=fd)
    except (FileNotFoundError, NotADirectoryError):
        st = None
    except OSError as exc:
        raise RestoreError(f"cannot look at {path}: {exc.strerror}") from exc
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise RestoreError(f"{path} is a symbolic link; nothing was written (remove it or restore with --dir)")
        if not stat.S_ISREG(st.st_mode):
            raise RestoreError(f"{path} exists and is not a regular file; nothing was written")
        if _same_bytes(name, fd, data):
            return "present"
        raise RestoreError(f"{path} exists with other bytes; nothing was written (the agent may have written to it "
                           "since: run sessiontree sync, or restore with --dir or --at)")
    # The name of the temporary file is cut so that it stays one valid name (255 bytes).
    tmp = f".{name[:200]}.restore-{os.getpid()}-{os.urandom(4).hex()}"
    try:
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_CLOEXEC, 0o644, dir_fd=fd)
    except OSError as exc:
        raise RestoreError(f"cannot write in {folder}: {exc.strerror}; nothing was written") from exc
    try:
        try:
            write_all(out, data)
            os.fsync(out)
        finally:
            os.close(out)
        try:
            os.link(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except FileExistsError:
            if _same_bytes(name, fd, data):
                return "present"
            raise RestoreError(f"{path} appeared meanwhile with other bytes; nothing was written") from None
        try:
            os.fsync(fd)
        except OSError:
            pass  # the file is complete and linked; only its durability across a power cut is weaker
        return "written"
    except OSError as exc:
        what = "the disk is full" if exc.errno == errno.ENOSPC else exc.strerror
        raise RestoreError(f"cannot write {path}: {what}; nothing was written") from exc
    finally:
        try:
            os.unlink(tmp, dir_fd=fd)
        except OSError:
            pass

