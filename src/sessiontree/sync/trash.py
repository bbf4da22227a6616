"""Move a file to the desktop trash under its own name (``archive``; docs/agent-loop.md, "The trash").

``archive`` renames a file beside itself (``<name>.sessiontree-archiving``) before it is moved, so
that no agent or sync reads it meanwhile. The trash must still show, and a desktop "restore from
trash" must bring back, the file's own name and folder: ``<name>`` where it was.

* **Freedesktop (Linux, the BSDs).** The trash specification is followed directly: the home trash
  (``$XDG_DATA_HOME/Trash``, default ``~/.local/share/Trash``, read when called) for a file on its
  device, else the volume's ``$topdir/.Trash/$uid`` (a real folder with the sticky bit) or
  ``$topdir/.Trash-$uid``. The ``.trashinfo`` (``Path=`` the original path, ``DeletionDate=``) is
  created exclusively, written and fsynced first; only then is the file renamed into ``files/``.
  When either step fails (a full disk), the ``.trashinfo`` is removed: nothing is left behind,
  and the file stays where it was.
* **macOS and Windows.** The system trash takes the path it is given (``send2trash``): the file
  is first given its name back with a hard link (never replacing a file an agent wrote there
  meanwhile; then it goes to the trash under the temporary name).
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import time
from urllib.parse import quote

from sessiontree.format.files import O_CLOEXEC, write_all

__all__ = ["trash_file", "trash_folder"]


def _device(path: str) -> int:
    """The device of ``path``, or of its nearest existing ancestor."""
    while True:
        try:
            return os.lstat(path).st_dev
        except FileNotFoundError:
            parent = os.path.dirname(path)
            if parent == path:
                raise
            path = parent


def _mount_point(path: str) -> str:
    path = os.path.realpath(path)
    while not os.path.ismount(path):
        path = os.path.dirname(path)
    return path


def trash_folder(path: str) -> str:
    """The freedesktop trash folder for a file at ``path`` (created when missing, mode 0o700).

    Raises:
        OSError: no trash can be had on the file's volume.
    """
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    home_trash = os.path.join(data_home, "Trash")
    if _device(home_trash) == os.lstat(path).st_dev:
        return home_trash
    top = _mount_point(os.path.dirname(path))
    shared = os.path.join(top, ".Trash")
    with contextlib.suppress(OSError):
        st = os.lstat(shared)
        if stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX:
            own = os.path.join(shared, str(os.getuid()))
            os.makedirs(own, 0o700, exist_ok=True)
            return own
    return os.path.join(top, f".Trash-{os.getuid()}")


def _info_text(original: str) -> bytes:
    path = quote(os.fsencode(original), safe="/")
    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime())
    return f"[Trash Info]\nPath={path}\nDeletionDate={when}\n".encode("ascii")


def _freedesktop(moved: str, original: str) -> str:
    trash = trash_folder(moved)
    files, info = os.path.join(trash, "files"), os.path.join(trash, "info")
    for folder in (files, info):
        os.makedirs(folder, 0o700, exist_ok=True)
    name = os.path.basename(original)
    stem, ext = os.path.splitext(name)
    text = _info_text(original)
    for count in range(1, 10_000):
        chosen = name if count == 1 else f"{stem} {count}{ext}"
        info_path = os.path.join(info, chosen + ".trashinfo")
        try:
            fd = os.open(info_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_CLOEXEC, 0o600)
        except FileExistsError:
            continue
        placed = False
        try:
            try:
                write_all(fd, text)
                os.fsync(fd)
            finally:
                os.close(fd)
            if os.path.lexists(os.path.join(files, chosen)):
                continue  # a file without its info: leave it, take the next name
            os.rename(moved, os.path.join(files, chosen))
            placed = True
            return os.path.join(files, chosen)
        finally:
            if not placed:
                with contextlib.suppress(OSError):
                    os.unlink(info_path)
    raise OSError(f"no free name in the trash {files} for {name}")


def _system(moved: str, original: str) -> str:
    from send2trash import send2trash  # imported on use: only archive on macOS and Windows needs it

    target = moved
    try:
        os.link(moved, original)
    except OSError:
        pass  # a new file is at the name (or no hard links here): trash it under the temporary name
    else:
        os.unlink(moved)
        target = original
    try:
        send2trash(target)
    except OSError:
        raise
    except Exception as exc:  # send2trash raises its own TrashPermissionError and others
        raise OSError(str(exc)) from exc
    return target


def trash_file(moved: str, original: str) -> str:
    """Move the file at ``moved`` to the desktop trash as ``original`` (its own name and place,
    which the trash records for "restore"); returns where it went (freedesktop) or the path
    given to the system trash.

    Raises:
        OSError: it could not be moved; on freedesktop it is then still at ``moved`` and no
            ``.trashinfo`` is left.
    """
    if sys.platform in ("darwin", "win32"):
        return _system(moved, original)
    return _freedesktop(moved, original)
