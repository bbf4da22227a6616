"""Where a command may write or move a file in an agent's folder (docs/agent-loop.md, "Where restore
writes" and "What is guaranteed").

Session content is hostile: a header's ``createdAt``, a Claude Code record's ``timestamp``, a Codex
``session_meta`` timestamp, a ``cwd`` or an id can hold ``/``, ``..``, a NUL or a terminal escape,
and a session synced into a shared PostgreSQL store by another host is as hostile as an imported
file. Every command that writes or moves a file in an agent's folder (``restore``, ``resume``,
``archive``) goes through this module:

* **Names only from validated parts.** :func:`file_stamp` turns a timestamp that parses into
  pi's file-name form (``2026-03-01T10-00-00-000Z``, UTC), and anything else into the current
  time; :func:`name_part` accepts one path component only (not empty, not ``.`` or ``..``, no
  ``/`` or ``\\``, no NUL, no control character); :func:`cwd_folder` is pi's folder name of a
  working directory (:func:`encode_cwd`) with control characters replaced by ``-`` and a NUL
  refused.
* **Under the root, no symbolic link on the way.** A target is a root (the agent's sessions
  folder, or ``--dir DIR``: chosen by the user, so followed when it is itself a link) and
  validated components below it. :func:`open_folder` opens the components one by one relative
  to the previous one (``O_NOFOLLOW | O_DIRECTORY``, created with ``mkdir`` when asked), so a
  symbolic link or a file anywhere below the root is refused, also one swapped in meanwhile;
  the caller then works in the folder through its descriptor (``dir_fd``). :func:`parts_under`
  gives the components of a recorded path (a sync state's, an archive record's) below a root, or
  ``None`` when it is not under it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from sessiontree.core.tree import parse_timestamp_ms
from sessiontree.errors import SessionError
from sessiontree.format.files import O_CLOEXEC

__all__ = [
    "UnsafePathError",
    "check_under",
    "cwd_folder",
    "encode_cwd",
    "file_stamp",
    "local_stamp",
    "name_part",
    "open_folder",
    "parse_time",
    "parts_under",
    "session_file_name",
]

#: C0 controls, DEL and C1 controls: never in a name made from session content.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
#: Epoch milliseconds accepted as a timestamp: 1970 to 9999.
_MAX_MS = 253402300799999
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class UnsafePathError(SessionError):
    """A file name or folder from session content (or a recorded path) that would leave the
    folder a command owns, pass a symbolic link, or hold a character no name may hold;
    nothing was written."""


def encode_cwd(cwd: str) -> str:
    """The folder name pi and Atomic give a working directory: ``--<cwd>--`` with one
    leading separator removed and every ``/``, ``\\`` and ``:`` replaced by ``-``."""
    body = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    for char in "/\\:":
        body = body.replace(char, "-")
    return f"--{body}--"


def parse_time(value: Any) -> datetime | None:
    """An ISO 8601 time (a time without an offset is UTC) or epoch milliseconds as an aware
    datetime; ``None`` for anything else (a path, text, a number out of range, ``None``).
    An ISO string is read by the tree's one reader of entry times
    (:func:`~sessiontree.core.tree.parse_timestamp_ms`)."""
    ms: float | None = None
    if isinstance(value, str) and 10 <= len(value) <= 40 and value[:4].isdigit():
        ms = parse_timestamp_ms(value)
    elif isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= _MAX_MS:
        ms = float(value)
    if ms is None:
        return None
    try:
        return datetime.fromtimestamp(ms / 1000, UTC)
    except (OverflowError, ValueError, OSError):
        return None


def file_stamp(value: Any, now: float | None = None) -> str:
    """The timestamp part of an agent's file name, as pi writes it (``new Date().toISOString()``
    with ``:`` and ``.`` as ``-``): ``2026-03-01T10-00-00-000Z``, in UTC.

    ``value`` as :func:`parse_time` reads it; anything it does not read gives the current time
    (``now``, seconds since the epoch, when given). The result holds only digits, ``-``, ``T``
    and ``Z``, whatever ``value`` is.
    """
    moment = parse_time(value) or datetime.fromtimestamp(time.time() if now is None else now, UTC)
    return (f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}-{moment.minute:02d}-"
            f"{moment.second:02d}-{moment.microsecond // 1000:03d}Z")


def local_stamp(value: Any, now: float | None = None) -> str:
    """``YYYY-MM-DDThh-mm-ss`` in the local time zone, as Codex names its rollouts (the real
    corpus: a session started at 11:31:04Z in UTC+5:30 is ``2025/09/26/rollout-2025-09-26T17-01-04-...``);
    ``value`` as :func:`parse_time` reads it, else the current time. Only digits, ``-`` and ``T``."""
    moment = parse_time(value) or datetime.fromtimestamp(time.time() if now is None else now, UTC)
    try:
        local = moment.astimezone()
    except (OverflowError, ValueError, OSError):
        local = moment
    return (f"{local.year:04d}-{local.month:02d}-{local.day:02d}T{local.hour:02d}-{local.minute:02d}-"
            f"{local.second:02d}")


def name_part(value: Any, what: str, *, controls: bool = False) -> str:
    """``value`` when it is one path component, else :class:`UnsafePathError` naming ``what``.

    One component: a non-empty string, not ``.`` or ``..``, without ``/``, ``\\`` or NUL, at most
    255 bytes in UTF-8 (a longer name is refused by every file system); without control
    characters unless ``controls`` (a name already on disk, recorded by ``sync``, may hold them).
    """
    if not isinstance(value, str) or not value or value in (".", ".."):
        raise UnsafePathError(f"{what} {value!r} is not a file name")
    bad = "/\\\x00" if controls else None
    if (bad is not None and any(char in value for char in bad)) or (
            bad is None and ("/" in value or "\\" in value or _CONTROL.search(value))):
        raise UnsafePathError(f"{what} {value!r} holds a path separator or a control character")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise UnsafePathError(f"{what} {value!r} is not valid Unicode") from exc
    if size > 255:
        raise UnsafePathError(f"{what} is {size} bytes long; a file name holds at most 255")
    return value


def cwd_folder(cwd: Any, session_id: str = "") -> str:
    """pi's folder name of a working directory (:func:`encode_cwd`), made a safe name: control
    characters become ``-``; a NUL, or a name too long, is :class:`UnsafePathError` naming the
    session and the field."""
    where = f"session {session_id}: " if session_id else ""
    text = "" if cwd is None else str(cwd)
    if "\x00" in text:
        raise UnsafePathError(f"{where}header field \"cwd\" holds a NUL byte; no folder can be named after it")
    folder = _CONTROL.sub("-", encode_cwd(text))
    try:
        return name_part(folder, f"{where}the folder of header field \"cwd\"")
    except UnsafePathError as exc:
        raise UnsafePathError(str(exc)) from None


def session_file_name(header: dict[str, Any], now: float | None = None) -> str:
    """The agent's name for a session file, ``<timestamp>_<id>.jsonl`` (pi's; the seed's
    "Session files": ``<selected-jsonl-directory>/<timestamp>_<session-id-hash>.jsonl``), from validated
    parts: the header's ``timestamp`` or ``createdAt`` through :func:`file_stamp` (the current
    time when it does not parse) and its ``id`` through :func:`name_part`.

    Raises:
        UnsafePathError: the id is no file name.
    """
    stamp = file_stamp(header.get("timestamp") or header.get("createdAt"), now)
    session_id = name_part(header.get("id"), "session id")
    return name_part(f"{stamp}_{session_id}.jsonl", "file name")


def parts_under(root: str, path: str) -> tuple[str, ...] | None:
    """The components of ``path`` below ``root`` (both made absolute and normalised, ``..``
    collapsed), or ``None`` when ``path`` is not strictly below ``root``.

    ``root`` is compared as given and with its symbolic links resolved, so a path recorded
    through either spelling is found. Components are not checked here (see :func:`name_part`).
    """
    if "\x00" in path or "\x00" in root:
        return None
    target = os.path.normpath(os.path.abspath(path))
    for base in {os.path.normpath(os.path.abspath(root)), os.path.realpath(root)}:
        prefix = base.rstrip(os.sep) + os.sep
        if target.startswith(prefix) and len(target) > len(prefix):
            return tuple(target[len(prefix):].split(os.sep))
    return None


@contextlib.contextmanager
def open_folder(root: str, parts: tuple[str, ...] | list[str], *, create: bool) -> Iterator[int]:
    """A descriptor of the folder ``root/parts...``, opened one component at a time, none of
    them a symbolic link; closed on exit.

    ``root`` is the folder the command owns (the agent's sessions folder or ``--dir``): it is
    resolved (a link there is the user's choice) and created with its parents when ``create``.
    Each part must pass :func:`name_part` (control characters allowed: a recorded name);
    with ``create`` a missing one is made (mode 0o755 before the umask).

    Raises:
        UnsafePathError: a part is no name, or is a symbolic link or not a folder.
        OSError: the root or a part cannot be opened or created (``FileNotFoundError`` when
            one is missing and ``create`` is false).
    """
    for part in parts:
        name_part(part, "folder name", controls=True)
    base = os.path.realpath(root)
    if create:
        os.makedirs(base, exist_ok=True)
    fd = os.open(base, os.O_RDONLY | _O_DIRECTORY | O_CLOEXEC)
    try:
        where = base
        for part in parts:
            where = os.path.join(where, part)
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            try:
                inner = os.open(part, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | O_CLOEXEC, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    try:
                        link = stat.S_ISLNK(os.lstat(part, dir_fd=fd).st_mode)
                    except OSError:
                        link = exc.errno == errno.ELOOP
                    what = "a symbolic link" if link else "not a folder"
                    raise UnsafePathError(f"{where} is {what}; nothing is written through it") from None
                raise
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def check_under(root: str, path: str) -> tuple[str, ...]:
    """The components of ``path`` below ``root``, checked: every one a name (:func:`name_part`,
    control characters allowed), every folder on the way a real folder (no symbolic link), the
    last one not a symbolic link. For moving a file the command found in the agent's folder.

    Raises:
        UnsafePathError: ``path`` is not under ``root``, or passes a symbolic link.
        OSError: a folder on the way cannot be opened.
    """
    parts = parts_under(root, path)
    if parts is None:
        raise UnsafePathError(f"{path} is not inside {root}; it is not touched")
    with open_folder(root, parts[:-1], create=False) as fd:
        name_part(parts[-1], "file name", controls=True)
        if stat.S_ISLNK(os.lstat(parts[-1], dir_fd=fd).st_mode):
            raise UnsafePathError(f"{path} is a symbolic link; it is not touched")
    return parts
