"""Finding the files ``sessiontree sync`` reads: the ``*.jsonl`` files (and Gemini CLI
chats) under the folders given, links and loops handled, problems reported as
``rejected`` results, never raised (docs/sync.md, "Where the agents keep their sessions")."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable

from sessiontree.errors import SessionError
from sessiontree.format import jsonio
from sessiontree.sync.gemini import is_gemini_name
from sessiontree.sync.reading import JSON_WS, SUFFIX
from sessiontree.sync.results import FileResult

__all__ = ["artifact_note", "discover", "is_header_line", "os_reason"]


def discover(paths: Iterable[str], exclude: str | None = None,
             links: list[str] | None = None) -> tuple[list[str], list[FileResult]]:
    """The ``*.jsonl`` files under ``paths`` (files or folders, searched recursively).

    Symbolic links are followed; a link back to a folder being searched is a
    ``symbolic link loop`` and is reported, a folder reached twice is read
    once. Dangling links, unreadable folders and non-regular files are
    reported, never raised.

    Args:
        paths: files and folders, as given.
        exclude: a folder whose files are never synced (a JSONL store that is
            itself the target).
        links: when given, a symbolic link to a folder found below ``paths`` is not
            followed but appended here (an agent's own folder: docs/agent-loop.md,
            "What is guaranteed"); the paths themselves are followed.

    Returns:
        ``(files, rejected)``: absolute file paths, sorted within each folder
        and without duplicates (same inode), and one ``rejected`` result per
        problem found.
    """
    files: list[str] = []
    rejected: list[FileResult] = []
    seen_files: set[tuple[int, int]] = set()
    seen_dirs: set[tuple[int, int]] = set()
    excluded = os.path.realpath(exclude) if exclude else None

    def reject(path: str, reason: str) -> None:
        rejected.append(FileResult(path, "rejected", reason=reason))

    def add_file(path: str, st: os.stat_result) -> None:
        key = (st.st_dev, st.st_ino)
        if key not in seen_files:
            seen_files.add(key)
            files.append(path)

    def walk(directory: str, ancestors: frozenset[tuple[int, int]]) -> None:
        try:
            st = os.stat(directory)
        except OSError as exc:
            reject(directory, os_reason(exc, directory))
            return
        key = (st.st_dev, st.st_ino)
        if key in ancestors:
            reject(directory, "symbolic link loop (it leads back to a folder being read)")
            return
        if key in seen_dirs:
            return
        seen_dirs.add(key)
        if excluded is not None and os.path.realpath(directory) == excluded:
            return
        try:
            with os.scandir(directory) as it:
                items = sorted(it, key=lambda item: item.name)
        except OSError as exc:
            reject(directory, os_reason(exc, directory))
            return
        inner = ancestors | {key}
        # A folder's own files before its subfolders: a session's own file is met before
        # the same-id copies pi-subagents keeps in a folder named after it (docs/sync.md,
        # "pi-subagents folders").
        items.sort(key=lambda item: (_is_folder(item), item.name))
        for item in items:
            if links is not None and item.is_symlink():
                try:
                    to_folder = item.is_dir()
                except OSError:
                    to_folder = False
                if to_folder:
                    links.append(item.path)
                    continue
            if item.name.endswith(SUFFIX) or is_gemini_name(item.path):
                try:
                    item_st = os.stat(item.path)
                except OSError as exc:
                    reject(item.path, os_reason(exc, item.path))
                    continue
                if stat.S_ISREG(item_st.st_mode):
                    add_file(item.path, item_st)
                    continue
                if not stat.S_ISDIR(item_st.st_mode):
                    reject(item.path, "not a regular file")
                    continue
            try:
                is_dir = item.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                walk(item.path, inner)
            elif item.is_symlink() and not os.path.exists(item.path) and item.name.endswith(SUFFIX):
                reject(item.path, "dangling symbolic link")

    for raw in paths:
        path = os.path.abspath(os.path.expanduser(raw))
        try:
            st = os.stat(path)
        except OSError as exc:
            reject(path, os_reason(exc, path))
            continue
        if stat.S_ISDIR(st.st_mode):
            walk(path, frozenset())
        elif stat.S_ISREG(st.st_mode):
            add_file(path, st)
        else:
            reject(path, "not a regular file")
    return files, rejected


def is_header_line(line: bytes) -> bool:
    """Whether a file's first line is a session header (a BOM before it allowed); ``False``
    for a damaged first line that readers skip (docs/sync.md, "Malformed lines")."""
    if line.lstrip(JSON_WS + b"\xef\xbb\xbf").startswith(b'{"type":"session"'):
        return True  # pi's and Atomic's own header: no need to parse it
    try:
        value = jsonio.loads(line.lstrip(b"\xef\xbb\xbf"))
    except (ValueError, SessionError):
        return False
    return isinstance(value, dict) and value.get("type") == "session"


def _is_folder(item: os.DirEntry[str]) -> bool:
    """Whether a folder entry is a folder (a link to one too); ``False`` when it cannot be told."""
    try:
        return item.is_dir() and not item.name.endswith(SUFFIX)
    except OSError:
        return False


#: The folder pi-subagents writes its run artifacts to, beside the sessions (docs/sync.md).
_ARTIFACTS_FOLDER = "subagent-artifacts"


def artifact_note(path: str, first: bytes) -> str | None:
    """The note for a pi-subagents artifact (a subagent run's transcript or event stream in
    a ``subagent-artifacts`` folder, whose first record is no session header), else ``None``."""
    if os.path.basename(os.path.dirname(path)) != _ARTIFACTS_FOLDER:
        return None
    try:
        value = jsonio.loads(first)
    except (ValueError, SessionError):
        value = None
    if isinstance(value, dict) and value.get("type") == "session":
        return None
    return ("a pi-subagents artifact (a subagent run's transcript or events, no session header): skipped; "
            "the run's session is its own file")


def os_reason(exc: OSError, path: str) -> str:
    """A one-line reason for an OS error on ``path`` (a loop, a dangling link, a permission)."""
    if exc.errno == errno.ELOOP:
        return "symbolic link loop"
    if exc.errno == errno.ENOENT:
        return "dangling symbolic link" if os.path.islink(path) else "vanished (no such file or directory)"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return exc.strerror or str(exc)


