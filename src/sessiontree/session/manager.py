"""``SessionManager``: the format's SessionManager API in Python (docs/rules/manager.md spec:python-api).

Invariants (docs/rules/manager.md seed:api; docs/rules/decisions.md D-1, D-9, docs/rules/format.md E.11):

* Write-through. Every mutation has committed to the store when it returns.
  A session from :meth:`SessionManager.create` / :meth:`new_session` writes
  its header together with its first mutation, so creating and closing
  without mutations leaves nothing behind; :meth:`open_file` on a missing or
  empty file writes the header at once. There is no ``flush``.
* A failed write raises :class:`~sessiontree.errors.StorageError` and leaves
  the manager exactly as before: the entry is not published, the leaf and
  labels are restored (docs/rules/format.md E.6).
* Factories without an explicit store or directory use the configured store
  (``SESSIONTREE_STORE``, else the shared SQLite database); a directory
  argument selects JSONL; :meth:`in_memory` selects memory and does no I/O.
  A store that cannot be opened raises ``StoreOpenError``; there is never a
  fallback to memory.
* The manager talks to storage only through the ``SessionStore`` protocol.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

from sessiontree.core import projection as _projection
from sessiontree.core.listing import SessionInfo, is_classified
from sessiontree.core.tree import Entry, SessionTree
from sessiontree.errors import InvalidSessionError, SessionInUseError, StorageError
from sessiontree.format.codec import ParsedSession, read_session_file
from sessiontree.format.gcpause import gc_paused
from sessiontree.format.ids import validate_session_id
from sessiontree.format.types import AgentMessage
from sessiontree.format.upgrade import upgrade_header
from sessiontree.session import builders, importing
from sessiontree.session.binding import (
    StoreOrDir,
    Switch,
    child_header,
    classification_of,
    inherited_classification,
    new_header,
    resolve_store,
    select_store,
    session_file_of,
)
from sessiontree.session.builders import UNSET
from sessiontree.session.importing import ImportOutcome
from sessiontree.session.lazy import open_held, open_lazy
from sessiontree.session.navigation import SessionNavigation
from sessiontree.stores.base import CancelEvent, ProgressCallback, SessionStore
from sessiontree.stores.jsonl.store import JsonlStore
from sessiontree.stores.memory import MemoryStore

__all__ = ["SessionManager", "StoreOrDir", "select_store"]


_R = TypeVar("_R")


class SessionManager(SessionNavigation):
    """One open session: its header, entry tree and leaf, bound to a store.

    Build one with the static constructors (:meth:`create`, :meth:`open`,
    :meth:`open_file`, :meth:`continue_recent`, :meth:`in_memory`,
    :meth:`fork_from`, :meth:`import_from_jsonl`), not directly.
    """

    def __init__(self, store: SessionStore, header: dict[str, Any], entries: Sequence[Entry] = (),
                 *, cwd: str, saved: bool, session_file: str | None = None) -> None:
        """Bind a header and entries to ``store``.

        Args:
            store: where mutations are written.
            header: the format-4 header (its ``id`` is the session id).
            entries: entries in file order; the leaf is the last one, or the
                target of a final upstream ``leaf`` record
                (:func:`sessiontree.core.tree.loaded_leaf_id`).
            cwd: the manager's working directory (absolute).
            saved: whether the session already exists in the store.
            session_file: explicit JSONL path (``open_file``), if any.
        """
        self._store = store
        self._header = header
        self._tree = SessionTree(entries)
        self._cwd = os.path.abspath(cwd)
        self._saved = saved
        self._session_file = session_file
        # What each attribute holds: SessionNavigation's class body.
        self._appended: set[str] = set()
        self._projector = None
        self._branch = None

    # ------------------------------------------------------------------ factories

    @classmethod
    def create(cls, cwd: str, session_dir: str | os.PathLike[str] | None = None, *,
               store: StoreOrDir | None = None, id: str | None = None,
               parent_session: str | None = None, internal: bool = False,
               workflow: dict[str, Any] | None = None) -> SessionManager:
        """A new session (docs/rules/manager.md seed:create).

        Nothing is written until the first mutation (docs/rules/decisions.md D-1).

        Args:
            cwd: the session's working directory (made absolute).
            session_dir: a directory selects a JSONL store there.
            store: an explicit store or store URL (wins over ``session_dir``).
            id: a session id to use instead of a new UUIDv7.
            parent_session: the parent session id (a path is converted, docs/rules/manager.md §3.15).
            internal, workflow: workflow classification; written only as a valid pair
            (docs/rules/listing.md O.3).

        Raises:
            InvalidSessionIdError: ``id`` is not a valid session id.
            StoreOpenError: the store cannot be opened.
            SessionExistsError: on the first write, if ``id`` is taken.
        """
        target = resolve_store(store, session_dir)
        cwd = os.path.abspath(cwd)
        header = new_header(id, cwd, parent_session, classification_of(internal, workflow))
        return cls(target, header, cwd=cwd, saved=False)

    @classmethod
    def open(cls, store: SessionStore | str, session_id: str, cwd_override: str | None = None, *,
             lazy: bool = True) -> SessionManager:
        """Open an existing session by exact id (docs/rules/manager.md seed:open-store).

        An older JSONL file has its format-4 upgrade persisted atomically first (docs/rules/decisions.md D-9).

        **Lazy open** (SQLite, ``lazy=True``, docs/stores.md "Lazy open"): a
        session whose active branch has a compaction boundary is opened from
        the store's outline plus the records its context needs (the entries
        since the boundary, its kept tail, and the setting changes, edits and
        boundaries further up); the other records are read, once, when
        something first needs them (the whole tree, a branch move, an
        off-branch entry). Every result is the same as after a full load. A
        damaged record that was not read is reported by the call that first
        reads it rather than here, and if another process replaces or deletes
        the session before then, that call raises
        :class:`~sessiontree.errors.SessionChangedError`. ``lazy=False``
        reads and checks every record now, as a full load does (the same
        errors); a SQLite session is then held as its records' stored bytes,
        each parsed when first used, never read from the store again
        (docs/decisions/held-records.md).

        Raises:
            InvalidSessionIdError: malformed id (docs/rules/format.md B.8).
            SessionNotFoundError: no such session; nothing is created.
            InvalidSessionError: the stored session is invalid.
        """
        validate_session_id(session_id)
        target = select_store(store)
        if lazy:  # the store decides whether it can (open_lazy returns None otherwise)
            opened = open_lazy(target, session_id)
            if opened is not None:
                header, tree, builder = opened
                cwd = cwd_override if cwd_override is not None else (header.get("cwd") or os.getcwd())
                manager = cls(target, header, cwd=cwd, saved=True)
                manager._tree = tree
                manager._projector = (tree, len(tree), builder)
                return manager
        else:
            held = open_held(target, session_id)
            if held is not None:
                header, tree = held
                cwd = cwd_override if cwd_override is not None else (header.get("cwd") or os.getcwd())
                manager = cls(target, header, cwd=cwd, saved=True)
                manager._tree = tree
                return manager
        # The manager keeps only the entries: the store need not hold the stored texts
        # (SQLite frees each as soon as it is parsed).
        parsed = target.load(session_id, keep_raw=False)
        cwd = cwd_override if cwd_override is not None else (parsed.header.get("cwd") or os.getcwd())
        return cls(target, parsed.header, parsed.entries, cwd=cwd, saved=True)

    @classmethod
    def open_file(cls, path: str | os.PathLike[str], session_dir: str | os.PathLike[str] | None = None,
                  cwd_override: str | None = None) -> SessionManager:
        """Open a JSONL file directly, creating it if missing (docs/rules/manager.md seed:open-file).

        A missing or 0-byte file gets a new session whose header is written at
        once (docs/rules/decisions.md D-1,
        docs/rules/format.md D.10). An older format is upgraded and persisted
        atomically under the file lock before anything else is written (docs/rules/decisions.md D-9).
        The working directory is ``cwd_override``, else the header's, else the
        process's (docs/rules/format.md D.13).

        Raises:
            InvalidSessionError: a non-empty file that is not a valid session
                (file left untouched).
            StorageError: writing the header or the upgrade failed.
        """
        path = os.path.abspath(os.fspath(path))
        store = JsonlStore(os.fspath(session_dir) if session_dir is not None else os.path.dirname(path))
        parsed = store.open_path(path)
        if parsed is None:
            cwd = os.path.abspath(cwd_override if cwd_override is not None else os.getcwd())
            header = new_header(None, cwd)
            store.create(header, [], path=path)
            return cls(store, header, cwd=cwd, saved=True, session_file=path)
        cwd = cwd_override if cwd_override is not None else (parsed.header.get("cwd") or os.getcwd())
        return cls(store, parsed.header, parsed.entries, cwd=cwd, saved=True, session_file=path)

    @classmethod
    def continue_recent(cls, cwd: str, session_dir: str | os.PathLike[str] | None = None, *,
                        store: StoreOrDir | None = None,
                        include_internal: bool = False) -> SessionManager:
        """Continue the most recent regular session of ``cwd`` or create one
        (docs/rules/manager.md seed:continue-recent, docs/rules/listing.md M.2/M.3).

        Recency is the session's last write. The found session is opened with
        the given ``cwd``. Workflow sessions are considered only with
        ``include_internal``. Unloadable sessions are skipped, as in resume
        listings (docs/rules/manager.md seed:api): when the most recent one does not
        load, the newest loadable row of ``list`` is continued instead.

        Raises:
            StoreOpenError: the store cannot be opened.
            StorageError: creating the new session failed.
        """
        target = resolve_store(store, session_dir)
        cwd = os.path.abspath(cwd)
        recent = target.find_most_recent(cwd, include_internal)
        if recent is not None:
            try:
                return cls.open(target, recent, cwd_override=cwd)
            except InvalidSessionError:
                for info in target.list_sessions(cwd=cwd, include_internal=include_internal):
                    if info.id == recent:
                        continue
                    try:
                        return cls.open(target, info.id, cwd_override=cwd)
                    except InvalidSessionError:
                        continue
        return cls.create(cwd, store=target)

    @classmethod
    def in_memory(cls, cwd: str | None = None, *, id: str | None = None, parent_session: str | None = None,
                  internal: bool = False, workflow: dict[str, Any] | None = None,
                  entries: Sequence[dict[str, Any]] | None = None) -> SessionManager:
        """A session in a private :class:`MemoryStore`; no filesystem I/O
        (docs/rules/manager.md seed:in-memory, §3.5).

        Args:
            entries: optional records. When they include a header (``type ==
                "session"``) it is used, upgraded to format 4; the other
                records are the entries and the leaf is decided as on load
                (:func:`sessiontree.core.tree.loaded_leaf_id`).

        Raises:
            InvalidSessionIdError: ``id`` is not a valid session id.
            InvalidSessionError: ``entries`` are not a valid session.
        """
        cwd = os.path.abspath(cwd if cwd is not None else os.getcwd())
        records = list(entries or [])
        headers = [r for r in records if r.get("type") == "session"]
        body = [r for r in records if r.get("type") != "session"]
        if headers:
            header = upgrade_header(headers[0])
        else:
            header = new_header(id, cwd, parent_session, classification_of(internal, workflow))
        store = MemoryStore()
        manager = cls(store, header, body, cwd=cwd, saved=False)
        if body:
            manager._write(body)
            manager._saved = True
        return manager

    @classmethod
    def from_parsed(cls, parsed: ParsedSession, cwd: str | None = None) -> SessionManager:
        """A manager over a session already read, for reading it: navigation and projections.

        The cheap way to look at a stored session without the risk of
        writing to it (read-only CLI commands, the web viewer): the parsed
        header and entries are bound as they are, not copied, re-serialized
        or re-validated (they were validated when read), to a private, empty
        :class:`~sessiontree.stores.memory.MemoryStore`. Building the manager
        this way costs the index of its ids, where :meth:`in_memory` would
        re-encode and re-parse every entry.

        Args:
            parsed: a session as a store's ``read``/``load`` or
                :func:`sessiontree.format.codec.read_session_file` returns it
                (format 4). Its header and entry dicts become the manager's
                and must not be modified afterwards.
            cwd: the manager's working directory; default the header's
                ``cwd``, else the process's (made absolute).

        Returns:
            A manager whose leaf is the loaded leaf
            (:func:`sessiontree.core.tree.loaded_leaf_id`). Moving the leaf
            (:meth:`branch`, :meth:`reset_leaf`) and every getter and
            projection work as on :meth:`open`, with the same results.

        Read-only safety: the session is not in the private store, so any
        append raises :class:`~sessiontree.errors.SessionNotFoundError` and
        leaves the manager as it was; nothing this manager does can reach the
        store or file the session was read from.

        Raises:
            InvalidSessionError: two entries share an id.
        """
        cwd = cwd if cwd is not None else (parsed.header.get("cwd") or os.getcwd())
        with gc_paused():  # one index entry per entry; no cycles (see sessiontree.format.gcpause)
            return cls(MemoryStore(), parsed.header, parsed.entries, cwd=cwd, saved=True)

    @classmethod
    def fork_from(cls, source_path: str | os.PathLike[str], target_cwd: str,
                  session_dir: str | os.PathLike[str] | None = None, *,
                  store: StoreOrDir | None = None, id: str | None = None,
                  internal: bool = False, workflow: dict[str, Any] | None = None) -> SessionManager:
        """Fork a JSONL file into a new session (docs/rules/manager.md seed:fork-from, N.7-N.10).

        The source is read and upgraded in memory (never modified); every
        entry is copied in order; the new header has ``cwd`` = ``target_cwd``
        and ``parentSessionId`` = the source id; classification comes from the
        arguments, else from a valid source pair (docs/rules/decisions.md D-14).

        Raises:
            OSError: the source cannot be read.
            InvalidSessionError: the source is not a valid session.
        """
        parsed = read_session_file(source_path)
        target = resolve_store(store, session_dir)
        return cls._fork(parsed, target, target_cwd, id, internal, workflow)

    @classmethod
    def _fork(cls, source: ParsedSession, target: SessionStore, cwd: str, session_id: str | None,
              internal: bool, workflow: dict[str, Any] | None) -> SessionManager:
        cwd = os.path.abspath(cwd)
        header = child_header(source.header["id"], cwd, session_id,
                              classification_of(internal, workflow) or inherited_classification(source.header))
        raw = [source.entry_bytes(i) for i in range(len(source.entries))]
        target.create(header, source.entries, raw)
        return cls(target, header, source.entries, cwd=cwd, saved=True)

    @classmethod
    def import_from_jsonl(cls, input_path: str | os.PathLike[str], cwd: str | None = None,
                          target: StoreOrDir | None = None) -> SessionManager:
        """Import a JSONL file keeping its id (docs/rules/manager.md seed:import,
        docs/rules/decisions.md D-16).

        The file is read with the format-4 reader and upgraded in memory (it
        is never modified); id, ``createdAt``, parent, classification and every
        entry (with its stored JSON text) are kept. The header ``cwd`` becomes
        ``cwd`` when given (the import lands in that project), else it is kept.

        Args:
            target: a store, a store URL, or a directory (JSONL); default: the configured store.

        Raises:
            FileNotFoundError: the input file does not exist.
            InvalidSessionError: the file is not a valid session.
            InvalidSessionIdError: the file's session id is not a valid id.
            SessionExistsError: the id is already in the target store (target untouched).
        """
        return cls.import_session(read_session_file(input_path), cwd, target)

    @classmethod
    def import_session(cls, parsed: ParsedSession, cwd: str | None = None,
                       target: StoreOrDir | None = None) -> SessionManager:
        """Import an already-read session (see :meth:`import_from_jsonl`), for
        callers that have parsed the file themselves and should not read it twice.

        Raises:
            InvalidSessionIdError, SessionExistsError: as :meth:`import_from_jsonl`.
            InvalidSessionError: a record over :data:`~sessiontree.format.bounds.MAX_RECORD_BYTES`
                bytes (:func:`~sessiontree.session.importing.check_record_sizes`).
        """
        validate_session_id(parsed.header["id"])
        importing.check_record_sizes(parsed)
        store = select_store(target)
        header, entries, raw = importing.import_record(parsed, cwd)
        store.create(header, entries, raw)
        return cls(store, header, entries, cwd=header.get("cwd") or os.getcwd(), saved=True)

    @classmethod
    def import_files(cls, paths: Iterable[str | os.PathLike[str]], cwd: str | None = None,
                     target: StoreOrDir | None = None, *, batch_sessions: int | None = None,
                     batch_bytes: int | None = None, settle: bool = False) -> Iterator[ImportOutcome]:
        """Import many JSONL files keeping their ids, as :meth:`import_from_jsonl` does
        for each (docs/rules/manager.md seed:import; what ``sessiontree import`` runs).

        Files are read in order and written in groups of up to ``batch_sessions``
        sessions or ``batch_bytes`` bytes of entry text, each group in one
        transaction of the store's ``create_many`` (stores without it: one
        ``create`` per session). A group that fails as a whole (an id already
        stored, a storage error) is written again one session per transaction,
        so every file gets its own outcome and one bad file costs no other its
        import. Each group's outcomes are yielded, in file order, only after its
        transaction committed: a yielded "imported" is as durable as the store
        makes any write, and an interruption (``KeyboardInterrupt``) or crash
        loses only the group in progress, none of whose files was reported, so
        running the same import again finishes it.

        Args:
            paths: the files, in order.
            cwd: as for :meth:`import_from_jsonl` (the imports land in that project).
            target: a store, a store URL, or a directory (JSONL); default: the configured store.
            batch_sessions, batch_bytes: the group bounds (default
                :data:`~sessiontree.session.importing.IMPORT_BATCH_SESSIONS`,
                :data:`~sessiontree.session.importing.IMPORT_BATCH_BYTES`).
            settle: settle each group's derived data (search index, usage ledger) as it
                is written, from the entries in hand (SQLite; what ``sessiontree import``
                does); call ``settle_derived()`` at the end still.

        Returns:
            An iterator of one :class:`ImportOutcome` per path, in order. Errors of
            single files are in the outcomes; nothing is raised for them.
        """
        # A generator: nothing, not even opening the store, happens before the first next().
        yield from importing.import_files(paths, select_store(target), cwd, batch_sessions=batch_sessions,
                                          batch_bytes=batch_bytes, settle=settle)

    # ------------------------------------------------------------------ listing

    @staticmethod
    def list(cwd: str, store_or_dir: StoreOrDir | None = None,
             on_progress: ProgressCallback | None = None, *, include_internal: bool = False,
             cancel: CancelEvent | None = None) -> builtins.list[SessionInfo]:
        """Sessions of one project, newest first (docs/rules/listing.md seed:listing; group L).

        Internal workflow sessions are left out unless ``include_internal``.

        Raises:
            ListingCancelledError: ``cancel`` was set; no partial list.
        """
        store = select_store(store_or_dir)
        return store.list_sessions(cwd=os.path.abspath(cwd), include_internal=include_internal,
                                   on_progress=on_progress, cancel=cancel)

    @staticmethod
    def list_all(store_or_dir: StoreOrDir | None = None,
                 on_progress: ProgressCallback | None = None, *, include_internal: bool = False,
                 cancel: CancelEvent | None = None) -> builtins.list[SessionInfo]:
        """Sessions of every project in the store, newest first (docs/rules/listing.md seed:listing).

        Returns:
            One :class:`SessionInfo` per loadable session (unloadable ones are
            left out); workflow sessions only with ``include_internal``.

        Raises:
            StoreOpenError: the store cannot be opened.
            ListingCancelledError: ``cancel`` was set.
        """
        store = select_store(store_or_dir)
        return store.list_sessions(include_internal=include_internal, on_progress=on_progress, cancel=cancel)

    # ------------------------------------------------------------------ session management

    def new_session(self, *, id: str | None = None, parent_session: str | None = None,
                    internal: bool = False, workflow: dict[str, Any] | None = None) -> str | None:
        """Start a new, empty session in the same store (docs/rules/manager.md seed:new-session, T.3).

        Labels, entries and the leaf are cleared; nothing is written until the
        first mutation.

        Returns:
            The new session's JSONL path when the store has files, else ``None``.
        """
        return self._switch(self._prepare_new_session(id=id, parent_session=parent_session, internal=internal,
                                                      workflow=workflow))

    def mark_session_internal(self, workflow: dict[str, Any] | None = None) -> None:
        """Apply valid workflow ownership (docs/rules/manager.md seed:mark-internal,
        docs/rules/listing.md O.4).

        Does nothing when the header is already classified or ``workflow`` is
        invalid; otherwise sets ``internal: true`` and ``workflow`` and, when
        the session is already stored, replaces its header at once.

        Raises:
            StorageError: the header could not be written (the header is unchanged).
        """
        self._switch(self._prepare_mark_internal(workflow))

    def set_session_file(self, path: str | os.PathLike[str]) -> None:
        """Switch this manager to a JSONL file, keeping its cwd
        (docs/rules/manager.md seed:set-session-file, T.4).

        A missing file is created on the first append; an existing one is opened
        as :meth:`open_file` does (an older format's upgrade persisted).

        Raises:
            InvalidSessionError: the file is not a valid session.
            StorageError: persisting an upgrade failed.
        """
        self._switch(self._prepare_session_file(path))

    def create_branched_session(self, leaf_id: str) -> str | None:
        """Extract the branch ending at ``leaf_id`` into a new session and switch to it
        (docs/rules/manager.md seed:create-branched; N.1-N.6, docs/rules/decisions.md D-5,
        docs/rules/manager.md §3.15).

        Label entries on the path are dropped and the kept entries re-chained
        around them; labels of path entries are recreated (original text and
        timestamp, new ids) after the last path entry
        (:func:`~sessiontree.session.builders.branched_session_entries`). The
        new header has ``parentSessionId`` = the current id and inherits a
        valid classification. The new session is written at once.

        Returns:
            The new JSONL path when the store has files, else ``None``.

        Raises:
            EntryNotFoundError: ``leaf_id`` is unknown.
            StorageError: the write failed (the manager is unchanged).
        """
        return self._switch(self._prepare_branched_session(leaf_id))

    # The session switches in two steps: _prepare_* does the store work and
    # returns a Switch without touching the manager; _switch applies it in
    # memory. The asynchronous manager runs the first off the loop, the second on it.

    def _prepare_new_session(self, *, id: str | None, parent_session: str | None, internal: bool,
                             workflow: dict[str, Any] | None) -> Switch[str | None]:
        """The switch of :meth:`new_session`; looks up the new session's file (JSONL: on disk)."""
        header = new_header(id, self._cwd, parent_session, classification_of(internal, workflow))
        return Switch(header, SessionTree(), self._store, False, None, session_file_of(self._store, header, None))

    def _prepare_mark_internal(self, workflow: dict[str, Any] | None) -> Switch[None] | None:
        """The switch of :meth:`mark_session_internal` (``None``: nothing to do), its header written when stored."""
        if is_classified(self._header) or classification_of(True, workflow) is None:
            return None
        header = {k: v for k, v in self._header.items() if k not in ("internal", "workflow")}
        header["internal"] = True
        header["workflow"] = workflow
        if self._saved:
            self._store.replace_header(self.get_session_id(), header)
        return Switch(header, None, self._store, self._saved, self._session_file, None)

    def _prepare_session_file(self, path: str | os.PathLike[str]) -> Switch[None]:
        """The switch of :meth:`set_session_file`: the file opened (or created) as :meth:`open_file` does."""
        other = SessionManager.open_file(path, cwd_override=self._cwd)
        return Switch(other._header, other._tree, other._store, other._saved, other._session_file, None)

    def _prepare_branched_session(self, leaf_id: str) -> Switch[str | None]:
        """The switch of :meth:`create_branched_session`, its new session written."""
        kept = builders.branched_session_entries(self._tree, leaf_id)
        header = child_header(self.get_session_id(), self._cwd, None, inherited_classification(self._header))
        # Entries that were not changed keep their stored JSON text.
        self._store.create(header, kept)
        return Switch(header, SessionTree(kept), self._store, True, None, session_file_of(self._store, header, None))

    def _switch(self, switch: Switch[_R] | None) -> _R | None:
        """Apply a prepared switch (``None``: nothing); returns its ``result``. In memory only.

        A new tree also forgets which entries this process appended and the
        projection state kept for the old tree; the cwd never changes.
        """
        if switch is None:
            return None
        self._store = switch.store
        self._header = switch.header
        self._saved = switch.saved
        self._session_file = switch.session_file
        if switch.tree is not None:
            self._tree = switch.tree
            self._appended = set()
            self._projector = None
            self._branch = None
        return switch.result

    def fork_to(self, cwd: str, target: StoreOrDir | None = None, *,
                id: str | None = None, internal: bool = False,
                workflow: dict[str, Any] | None = None) -> SessionManager:
        """Copy every entry of this session into a new session (docs/rules/manager.md seed:fork-to, §3.5).

        Entries of all branches are copied in order with their ids; the new
        header has a new id (or ``id``), ``cwd``, and ``parentSessionId`` = this
        id; classification per docs/rules/decisions.md D-14. This session is unchanged.

        Args:
            target: a store, store URL or JSONL directory; default: this store.

        Returns:
            A manager opened on the copy.

        Raises:
            StoreOpenError: ``target`` cannot be opened.
            SessionExistsError: ``id`` is already stored there.
            StorageError: the copy could not be written (nothing is left behind).
        """
        store = self._store if target is None else select_store(target)
        if self._saved:
            source = self._store.load(self.get_session_id())  # keeps each entry's stored JSON text
        else:
            source = ParsedSession(header=self._header, entries=self._tree.entries,
                                   raw=[None] * len(self._tree.entries), header_raw=b"", source_version=4)
        return SessionManager._fork(source, store, cwd, id, internal, workflow)

    def delete_session(self, session_id: str) -> None:
        """Delete another session of this store (docs/rules/manager.md seed:delete-session).

        An id that is not in the store does nothing.

        Raises:
            SessionInUseError: ``session_id`` is this manager's session.
            StorageError: the removal failed.
        """
        if session_id == self.get_session_id():
            raise SessionInUseError(session_id)
        self._store.delete(session_id)

    # ------------------------------------------------------------------ appending
    #
    # Every append builds its entry with a pure builder of
    # sessiontree.session.builders from _entry_state(), writes it (_write) and only
    # then publishes it (_publish). The asynchronous manager uses the same three
    # steps, with the write on the store's writer thread.

    def _entry_state(self) -> builders.EntryState:
        """The state entry builders read: this manager's tree and the active branch's
        system message. A view, not a copy: valid until the next mutation (the
        asynchronous manager builds while it holds its gate, so none runs meanwhile)."""
        return builders.EntryState(self._tree, self._system_message)

    def _system_message(self) -> dict[str, Any] | None:
        """The system-message state of the active branch (docs/rules/projection.md §3.6), or ``None``."""
        return _projection.get_current_system_message(self._current_projector().system_messages)

    def _write(self, entries: Sequence[Entry]) -> None:
        """Commit ``entries`` to the store: appended to the stored session or, before
        its first write, stored with the header as a new session.

        Changes nothing in memory, so it may run on another thread while the
        manager is not mutated (the asynchronous manager's writer).

        Raises:
            StorageError: the write failed (an ``OSError`` is wrapped, as ``__cause__``).
        """
        try:
            if self._saved:
                self._store.append(self.get_session_id(), entries)
            else:
                self._store.create(self._header, entries, path=self._session_file)
        except StorageError:
            raise
        except OSError as exc:
            raise StorageError(f"could not write session {self.get_session_id()}: {exc}") from exc

    def _publish(self, entries: Sequence[Entry]) -> str:
        """Make entries that :meth:`_write` committed part of the session, in order (the
        last becomes the leaf) and appended by this process; returns the last id."""
        self._saved = True
        tree, appended = self._tree, self._appended
        for entry in entries:
            tree.add(entry)
            appended.add(entry["id"])
        last: str = entries[-1]["id"]
        return last

    def _commit(self, entry: Entry) -> str:
        """Write ``entry``, then publish it: a failed write publishes nothing."""
        entries = [entry]
        self._write(entries)
        return self._publish(entries)

    def append_message(self, message: AgentMessage) -> str:
        """Append a ``message`` entry (docs/rules/format.md seed:message-entry).

        Tool results have their ``nestedCalls`` bounded (docs/rules/projection.md §3.10).

        Returns:
            The new entry id.

        Raises:
            ValueError: ``message`` is not an object with a string ``role``, or
                is an assistant message with ``stopReason == "pending"`` (docs/rules/projection.md §3.11),
                or the entry would nest deeper than ``jsonio.MAX_DEPTH``
                (``jsonio.NestingError``; nothing is written).
            StorageError: the write failed; nothing was appended.
        """
        return self._commit(builders.message_entry(self._entry_state(), message))

    def append_thinking_level_change(self, level: str) -> str:
        """Append a ``thinking_level_change`` (stored as given, docs/rules/format.md A.7;
        seed:thinking-level-change).

        Returns the new entry's id. Raises ``StorageError`` when the write fails
        (nothing is published; see :meth:`append_message`).
        """
        return self._commit(builders.thinking_level_change_entry(self._entry_state(), level))

    def append_context_window_change(self, context_window: int) -> str:
        """Append a ``context_window_change`` of ``context_window`` tokens (docs/rules/projection.md §3.8).

        Raises:
            ValueError: not a positive ``int`` (``bool`` excluded).
        """
        return self._commit(builders.context_window_change_entry(self._entry_state(), context_window))

    def append_model_change(self, provider: str, model_id: str) -> str:
        """Append a ``model_change`` (docs/rules/format.md A.8; seed:model-change).

        Returns the new entry's id. Raises ``StorageError`` when the write fails
        (nothing is published; see :meth:`append_message`).
        """
        return self._commit(builders.model_change_entry(self._entry_state(), provider, model_id))

    def append_compaction(self, compacted_text: str, first_kept_entry_id: str | None,
                          tokens_before: int, details: Any) -> str:
        """Append a verbatim-line compaction boundary (docs/rules/format.md seed:compaction-entry;
        docs/rules/projection.md Q.14, §3.6).

        ``fromHook: true`` is written when ``details["rung"] == "extension"``.
        The current system-message state, if any, is stored as the
        ``systemMessage`` checkpoint.

        Raises:
            EntryNotFoundError: a non-null ``first_kept_entry_id`` is unknown.
        """
        return self._commit(builders.compaction_entry(self._entry_state(), compacted_text, first_kept_entry_id,
                                                      tokens_before, details))

    def append_custom_entry(self, custom_type: str, data: Any = UNSET) -> str:
        """Append extension state, not in context (docs/rules/format.md seed:custom-entry; A.11:
        base fields last; no ``data`` key when not provided, ``null`` when ``None``).

        Returns the new entry's id. Raises ``StorageError`` when the write fails
        (nothing is published; see :meth:`append_message`).
        """
        return self._commit(builders.custom_entry(self._entry_state(), custom_type, data))

    def append_session_info(self, name: str) -> str:
        """Set the display name, trimmed; an empty name clears it and the empty entry
        stays (docs/rules/format.md seed:session-info-entry).

        Returns the new entry's id. Raises ``StorageError`` when the write fails
        (nothing is published; see :meth:`append_message`).
        """
        return self._commit(builders.session_info_entry(self._entry_state(), name))

    def append_session_summary(self, summary: str, summarized_through_id: str, usage: Any = UNSET) -> str:
        """Store a resume-picker summary anchored to a message
        (docs/rules/format.md seed:session-summary-entry, docs/rules/decisions.md D-13).

        Raises:
            EntryNotFoundError: ``summarized_through_id`` is unknown.
        """
        return self._commit(builders.session_summary_entry(self._entry_state(), summary, summarized_through_id,
                                                           usage))

    def append_custom_message_entry(self, custom_type: str, content: Any, display: bool,
                                    details: Any = UNSET) -> str:
        """Append an extension message that is in context (docs/rules/format.md seed:custom-message-entry;
        A.12: base fields last).

        Returns the new entry's id. Raises ``StorageError`` when the write fails
        (nothing is published; see :meth:`append_message`).
        """
        return self._commit(builders.custom_message_entry(self._entry_state(), custom_type, content, display,
                                                          details))

    def append_label_change(self, target_id: str, label: str | None = None) -> str:
        """Set (non-empty ``label``) or clear (``""`` or ``None``) a label
        (docs/rules/tree.md I.1, docs/rules/format.md A.13).

        Raises:
            EntryNotFoundError: ``target_id`` is unknown; nothing appended.
        """
        return self._commit(builders.label_entry(self._entry_state(), target_id, label))

    def append_context_edit(self, target_id: str, replacement: dict[str, Any] | None) -> str:
        """Append a branch-local context edit (docs/rules/format.md seed:context-edit-entry,
        docs/rules/projection.md R.1/R.2).

        Args:
            replacement: ``None`` omits the target from model context;
                ``{"content": str | blocks}`` replaces only its content. A string
                for an assistant or tool-result target is stored as one text block.

        Raises:
            ValueError: a malformed replacement.
            EntryNotFoundError: unknown target.
            ValueError: the target is not on the active branch, or does not
                contribute editable model content.
        """
        return self._commit(builders.context_edit_entry(self._entry_state(), target_id, replacement))

    # ------------------------------------------------------------------ navigation (changes)

    def branch_with_summary(self, branch_from_id: str | None, summary: str, details: Any = UNSET,
                            from_hook: Any = UNSET, usage: Any = UNSET) -> str:
        """Move the leaf to ``branch_from_id`` and append a ``branch_summary`` there
        (docs/rules/format.md seed:branch-summary-entry; docs/rules/tree.md G.2, docs/rules/decisions.md D-4).

        ``fromId`` is the leaf that was left (``"root"`` when there was none);
        the summary is stored as given. The leaf moves when the entry is
        published, so a failed write leaves it where it was.

        Raises:
            EntryNotFoundError: a non-null ``branch_from_id`` is unknown.
            StorageError: the write failed; nothing was appended.
        """
        return self._commit(builders.branch_summary_entry(self._entry_state(), branch_from_id, summary, details,
                                                          from_hook, usage))
