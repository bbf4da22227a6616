"""The maintenance of a JSONL store: derived data, search, usage and checks over its files.

:class:`JsonlMaintenance` holds ``DerivedData`` (``reindex``: a JSONL store keeps no
derived data on disk, so there is nothing to rebuild), ``search`` and ``usage``
computed by reading every file, ``verify`` (the file checker over every file) and
:meth:`JsonlMaintenance.remove_stale_temps`, run on every writable open.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

from sessiontree.core.search import SearchHit, make_filters, parse_query
from sessiontree.core.usage import UsageQuery, UsageRows, aggregate
from sessiontree.errors import InvalidSessionError, SessionNotFoundError, StorageError
from sessiontree.format.files import TEMP_NAME as _TEMP_NAME
from sessiontree.format.files import locked as _locked
from sessiontree.format.files import read_all as _read_all
from sessiontree.format.files import remove_if_stale as _remove_if_stale
from sessiontree.stores.base import ProgressCallback, StoreProblem, TimeBound
from sessiontree.stores.jsonl.files import JsonlFiles
from sessiontree.stores.jsonl.layout import FILE_SUFFIX
from sessiontree.stores.jsonl.reads import JsonlReads, read_file
from sessiontree.stores.listing import cwd_matches, resolve_cwd
from sessiontree.stores.search import check_limit, scan
from sessiontree.stores.storable import file_rule_problems

__all__ = ["JsonlMaintenance"]


class JsonlMaintenance:
    """The ``DerivedData``, search, usage and ``verify`` of
    :class:`~sessiontree.stores.jsonl.store.JsonlStore` (documented in
    :mod:`sessiontree.stores.base`), each reading the files as they are."""

    def __init__(self, folder: JsonlFiles, reads: JsonlReads) -> None:
        self.folder = folder
        self.reads = reads


    def remove_stale_temps(self) -> int:
        """Remove temporary files (``*.jsonl.tmp-*``) of this directory that no live
        writer owns: left by a writer killed mid-write (see :func:`~sessiontree.format.files.remove_if_stale`
        for how staleness is decided). Runs on every writable open.

        Returns:
            The number of files removed.

        Raises:
            StorageError: the store is read-only.
        """
        self.folder.require_writable("removing stale temporary files")
        try:
            with os.scandir(self.folder.directory) as it:
                candidates = [entry.path for entry in it if _TEMP_NAME.search(entry.name)
                              and FILE_SUFFIX + ".tmp-" in entry.name]
        except OSError:
            return 0
        return sum(_remove_if_stale(path) for path in candidates)

    def search(self, query: str, *, cwd: str | None = None, roles: Iterable[str] | None = None,
               since: TimeBound | None = None, until: TimeBound | None = None, session: str | None = None,
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
            found = self.folder.find(filters.session)
            paths = [found] if found is not None else []
        else:
            paths = self.folder.files()

        def sessions() -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
            for path in paths:
                header = self.folder.header(path)
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
            return 1 if self.reads.exists(session_id) else 0
        return len(self.reads.session_ids())

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
            for session_id in self.reads.session_ids():
                try:
                    parsed = self.reads.read(session_id)
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
        files = self.folder.files()
        problems: list[StoreProblem] = []
        for done, path in enumerate(files, 1):
            header = self.folder.header(path)
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
