"""The reads of a JSONL store: sessions read, looked up and listed, each file under its shared lock.

:class:`JsonlReads` holds the ``StoreCore`` reads that never write (``read``,
``exists``, ``session_ids``, ``location``, ``list_sessions``, ``find_most_recent``,
``path_for``); ``load``, which persists an older format's upgrade,
is in :mod:`.writes`, and ``PartialReads`` are the generic ones of
:class:`~sessiontree.stores.fallbacks.StoreBase` (a file is read whole anyway).
:func:`read_file` reads one session file of any format in memory.
"""

from __future__ import annotations

import os
from typing import Any

from sessiontree.core.listing import SessionInfo, is_classified, session_info_from_entries
from sessiontree.errors import InvalidSessionError, SessionNotFoundError, StorageError
from sessiontree.format.codec import ParsedSession, parse_session
from sessiontree.format.files import locked as _locked
from sessiontree.format.files import read_all as _read_all
from sessiontree.stores.base import CancelEvent, ProgressCallback, SessionListing
from sessiontree.stores.jsonl.files import LOOKUP_ATTEMPTS, JsonlFiles
from sessiontree.stores.jsonl.layout import file_name_for
from sessiontree.stores.listing import Progress, cwd_matches, resolve_cwd, sort_listing

__all__ = ["JsonlReads", "read_file"]

#: What :meth:`JsonlReads._list_one` returns for a file that cannot be loaded.
_UNLOADABLE: Any = object()


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


class JsonlReads:
    """The reads of :class:`~sessiontree.stores.jsonl.store.JsonlStore` (documented
    there and in :mod:`sessiontree.stores.base`)."""

    def __init__(self, folder: JsonlFiles) -> None:
        self.folder = folder


    def read(self, session_id: str) -> ParsedSession:
        """The session in format 4, read under a shared lock; the file is never
        written, even when it holds an older format (docs/rules/decisions.md D-9 read-only paths).

        Raises:
            SessionNotFoundError: no file has this header id.
            InvalidSessionError, UnsupportedVersionError: the file is invalid.
            StorageError: the file could not be read.
        """
        for _ in range(LOOKUP_ATTEMPTS):
            path = self.folder.require(session_id)
            try:
                parsed = read_file(path)
            except FileNotFoundError:
                self.folder.forget(session_id)
                continue
            except OSError as exc:
                raise StorageError(f"cannot read {path}: {exc}") from exc
            if parsed.header["id"] == session_id:
                return parsed
            self.folder.forget(session_id)
        raise SessionNotFoundError(session_id, self.folder.directory)

    def path_for(self, header: dict[str, Any]) -> str:
        """Where :meth:`create` would write a new session with this header
        (docs/rules/decisions.md D-7 name)."""
        return os.path.join(self.folder.directory, file_name_for(header))

    def exists(self, session_id: str) -> bool:
        """Whether a file in the store has this header id."""
        return self.folder.find(session_id) is not None

    def session_ids(self) -> list[str]:
        """Ids of every file with a valid header (by file name), internal ones included."""
        return list(self.folder.scan())

    def location(self, session_id: str) -> str | None:
        """The session's file, or ``None`` when no file has this id."""
        return self.folder.find(session_id)

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
        files = self.folder.files()
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
        header = self.folder.header(path)
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
        for path in self.folder.files():
            header = self.folder.header(path)
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

