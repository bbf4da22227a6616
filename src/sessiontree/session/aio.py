"""``AsyncSessionManager``: the format's SessionManager API as coroutines
(docs/rules/manager.md spec:python-api).

The format's API is asynchronous (docs/rules/manager.md seed:api): "Await create, open, continueRecent, forkFrom,
and all session mutations. A resolved mutation has committed to its store; a
failed write rejects with its typed storage error without publishing the
failed entry." This module gives asyncio programs that API without blocking
their event loop. It wraps a synchronous :class:`~sessiontree.session.manager.SessionManager`
and reuses all of its rules; only *where* and *when* the work runs changes.
An append builds its entry with the same pure builder
(:mod:`sessiontree.session.builders`), has the wrapped manager write it on
the store's writer thread, and publishes it on the loop; a session switch
(``new_session``, ``set_session_file``, ...) is prepared by the wrapped
manager off the loop and applied on it.

Invariants:

* **Off the loop.** Store work never runs on the event loop. Writes of a
  SQLite or JSONL store run on that store's one writer thread (created on
  first use, ended when the store is closed through this module or garbage
  collected), so writes reach a store in the order they were issued.
  Reads (listing, ``open``/``load`` of SQLite, ``get_session_file``) run on
  a small shared reader pool, so they can overlap with writes where the
  store allows it. A :class:`~sessiontree.stores.memory.MemoryStore` does no
  I/O and is called inline, without threads. What runs on the loop is
  in-memory work: argument checks, building the entry, publishing it.
* **Call order.** Mutations of one manager (every ``append_*``,
  ``branch``, ``reset_leaf``, ``branch_with_summary``, the session-management
  methods) pass a FIFO gate and run one at a time, in the order their
  coroutines started. Each one builds its entry from the state the
  previous one left, so concurrent appends from many tasks chain exactly as
  if they had been awaited one by one (each ``parentId`` is the entry of the
  call before it). A call that fails or is cancelled before it wrote leaves
  the state as it found it, so the next call chains onto the last committed
  entry.
* **Commit, then publish.** An entry enters the manager's tree only after
  its write committed; while the write is in flight, getters show the state
  before it. A failed write raises its typed error (``StorageError`` with
  the OS or database error as ``__cause__``, ...) and publishes nothing.
* **Settle, then cancel.** A call cancelled while its write is queued but
  not started withdraws it (nothing written). A call cancelled while its
  write runs waits for the write to finish, publishes it if it committed,
  and only then raises :class:`asyncio.CancelledError`. The error carries a
  :class:`WriteOutcome` (read it with :func:`outcome_of`, which also finds it
  behind the ``TimeoutError`` of :func:`asyncio.timeout`), and the manager
  keeps the latest one as :attr:`AsyncSessionManager.last_cancelled`. A
  plain ``CancelledError`` is raised, never a subclass, because
  :func:`asyncio.timeout` recognizes its own cancellation by exact type.
* **Any loop, any thread.** The gate and the workers hand results back to
  the loop that awaits them, never to the loop that made the manager, so
  the API works (and cannot deadlock on a blocked loop) when called from
  another thread's loop. The synchronous ``SessionManager`` may still be
  used inside a running loop; it blocks the loop for the duration of the
  store call, which is what this module exists to avoid.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from sessiontree.core import projection as _projection
from sessiontree.core.listing import SessionInfo
from sessiontree.core.tree import Entry, NameState, TreeNode
from sessiontree.format.codec import ParsedSession
from sessiontree.format.types import AgentMessage, SessionHeader
from sessiontree.session import aiodriver as driver
from sessiontree.session import builders
from sessiontree.session.aiodriver import READER_THREADS, ManagerClosedError, WriteOutcome, outcome_of
from sessiontree.session.builders import UNSET
from sessiontree.session.importing import ImportOutcome
from sessiontree.session.manager import SessionManager, StoreOrDir
from sessiontree.stores.base import CancelEvent, ProgressCallback, SessionStore

__all__ = ["READER_THREADS", "AsyncSessionManager", "ManagerClosedError", "WriteOutcome", "outcome_of"]


class AsyncSessionManager:
    """One open session, driven from asyncio (the format's awaited SessionManager API).

    Build one with the static coroutines (:meth:`create`, :meth:`open`,
    :meth:`open_file`, :meth:`continue_recent`, :meth:`in_memory`,
    :meth:`fork_from`, :meth:`import_from_jsonl`, :meth:`import_session`),
    or wrap an existing synchronous manager with :meth:`wrap`. Names,
    arguments, return values and errors are those of
    :class:`~sessiontree.session.manager.SessionManager`; see its methods for the
    format rules.

    Coroutines: every factory, listing, mutation and I/O method, plus
    :meth:`branch` and :meth:`reset_leaf` (they move the leaf, so they take
    their turn after earlier appends) and :meth:`get_session_file` (a JSONL
    store looks the file up on disk). Plain methods: the in-memory getters
    (tree navigation, context building, ``get_header``, ``get_session_id``,
    ...); they read the committed state and never block on I/O, though
    building a cold projection of a long session is CPU work on the loop.

    Use ``async with`` or :meth:`aclose` to release a store that the
    manager opened itself.
    """

    def __init__(self, manager: SessionManager, *, _lease: driver.Lease | None = None) -> None:
        """Wrap a synchronous manager; prefer the factories or :meth:`wrap`.

        Do not use ``manager`` directly afterwards: its writes would bypass
        the ordering gate.
        """
        self._core = manager
        self._gate = driver.Gate()
        self._lease = _lease
        self._closed = False
        #: The outcome of the latest cancelled call on this manager, or ``None``.
        self.last_cancelled: WriteOutcome | None = None

    @classmethod
    def wrap(cls, manager: SessionManager) -> AsyncSessionManager:
        """An async manager over an existing synchronous one (which it then owns;
        its store is not closed by :meth:`aclose`, since it was not opened here)."""
        return cls(manager)

    def __repr__(self) -> str:
        return f"AsyncSessionManager({self._core.get_session_id()!r}, store={self._core.get_session_store()!r})"

    # ------------------------------------------------------------------ plumbing

    def _record(self, outcome: WriteOutcome) -> None:
        self.last_cancelled = outcome

    async def _enter(self, method: str) -> None:
        """Take this manager's turn; refused once closed."""
        if self._closed:
            raise ManagerClosedError()
        try:
            await self._gate.acquire()
        except asyncio.CancelledError as exc:
            outcome = WriteOutcome(method, False)
            self._record(outcome)
            driver.deliver(exc, outcome)
            raise
        if self._closed:
            self._gate.release()
            raise ManagerClosedError()

    async def _append_via(self, method: str, build: Callable[..., Entry], *args: Any) -> str:
        """Build an entry on the loop, commit it on the store's writer, then publish it.

        ``build`` is the entry builder of ``SessionManager.<method>``
        (:mod:`sessiontree.session.builders`), called with the manager's
        :meth:`~SessionManager._entry_state` and ``args``: it checks the
        arguments and builds the entry without changing anything. The entry
        enters the tree (and becomes the leaf) only once its write committed.
        """
        await self._enter(method)
        try:
            core = self._core
            entry = build(core._entry_state(), *args)
            entries = [entry]
            settled = await driver.run(core.get_session_store(), functools.partial(core._write, entries), write=True)
            if settled.ok:
                core._publish(entries)
        finally:
            self._gate.release()
        entry_id: str = driver.finish(method, settled, entry["id"], self._record)
        return entry_id

    async def _swap_via(self, method: str, prepare: Callable[[], Any]) -> Any:
        """Run ``prepare`` (a ``SessionManager._prepare_*`` step, or a plain store call)
        on the store's writer; apply the switch it returns once it succeeded.

        For the methods that replace the session (header, tree, store) rather
        than append to it: the prepare step leaves the manager untouched, so
        readers on the loop see the old state until the new one is complete,
        and a failure or a withdrawn job changes nothing.
        """
        await self._enter(method)
        try:
            core = self._core
            old_store = core.get_session_store()
            settled = await driver.run(old_store, prepare, write=True)
            result = None
            if settled.ok:
                result = core._switch(settled.value)
                if core.get_session_store() is not old_store:
                    # set_session_file opened a JSONL store of its own: ours to close.
                    previous, self._lease = self._lease, driver.Lease(core.get_session_store())
                    await driver.close_owned(previous)
        finally:
            self._gate.release()
        return driver.finish(method, settled, result, self._record)

    @classmethod
    async def _factory(cls, method: str, target: StoreOrDir | None, build: Callable[[SessionStore], SessionManager],
                       *, write: bool, session_dir: str | os.PathLike[str] | None = None) -> AsyncSessionManager:
        store, lease = await driver.open_target(method, target, session_dir)
        writes = write if not callable(write) else write(store)
        settled = await driver.run(store, functools.partial(build, store), write=writes)
        manager = cls(settled.value, _lease=lease) if settled.ok else None
        if manager is None:
            await driver.close_owned(lease)
        result: AsyncSessionManager = driver.finish(method, settled, manager)  # raises when manager is None
        return result

    def _check_open(self) -> None:
        if self._closed:
            raise ManagerClosedError()

    # ------------------------------------------------------------------ lifetime

    async def aclose(self) -> None:
        """Wait for this manager's queued and running mutations, then close.

        A store the manager opened itself (from a URL, a directory or the
        configuration) is closed once no manager derived from it uses it; a
        store passed in is left open. Getters keep answering from memory;
        mutations and I/O methods raise :class:`ManagerClosedError`.
        Idempotent.
        """
        if self._closed:
            return
        await self._gate.acquire()
        try:
            if self._closed:
                return
            self._closed = True
            lease, self._lease = self._lease, None
        finally:
            self._gate.release()
        await driver.close_owned(lease)

    async def __aenter__(self) -> AsyncSessionManager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` has run."""
        return self._closed

    # ------------------------------------------------------------------ factories

    @classmethod
    async def create(cls, cwd: str, session_dir: str | os.PathLike[str] | None = None, *,
                     store: StoreOrDir | None = None, id: str | None = None,
                     parent_session: str | None = None, internal: bool = False,
                     workflow: dict[str, Any] | None = None) -> AsyncSessionManager:
        """A new session; nothing is written until the first mutation (see :meth:`SessionManager.create`).

        Raises:
            InvalidSessionIdError, StoreOpenError: as the synchronous method.
        """
        def build(target: SessionStore) -> SessionManager:
            return SessionManager.create(cwd, store=target, id=id, parent_session=parent_session,
                                         internal=internal, workflow=workflow)
        return await cls._factory("create", store, build, write=False, session_dir=session_dir)

    @classmethod
    async def open(cls, store: SessionStore | str, session_id: str,
                   cwd_override: str | None = None, *, lazy: bool = True) -> AsyncSessionManager:
        """Open an existing session by exact id (see :meth:`SessionManager.open`).

        The whole session is read in the open's worker thread whatever ``lazy``
        says (accepted for the same signature as the synchronous method): a
        lazily opened manager reads the rest of the session on first use, which
        here would be store work on the event loop (see "Off the loop").

        Raises:
            InvalidSessionIdError, SessionNotFoundError, InvalidSessionError: as the synchronous method.
        """
        def build(target: SessionStore) -> SessionManager:
            # A full load: a lazily opened manager reads the rest of the session on
            # first use, which would be store work on the loop (see "Off the loop").
            return SessionManager.open(target, session_id, cwd_override, lazy=False)
        return await cls._factory("open", store, build, write=driver.load_writes)  # type: ignore[arg-type]

    @classmethod
    async def open_file(cls, path: str | os.PathLike[str], session_dir: str | os.PathLike[str] | None = None,
                        cwd_override: str | None = None) -> AsyncSessionManager:
        """Open a JSONL file directly, creating it if missing (see :meth:`SessionManager.open_file`).

        The file's store is opened here, so :meth:`aclose` closes it.

        Raises:
            InvalidSessionError, StorageError: as the synchronous method.
        """
        settled = await driver.run(None, functools.partial(SessionManager.open_file, path, session_dir, cwd_override),
                             write=False)
        manager = cls(settled.value, _lease=driver.Lease(settled.value.get_session_store())) if settled.ok else None
        result: AsyncSessionManager = driver.finish("open_file", settled, manager)  # raises when manager is None
        return result

    @classmethod
    async def continue_recent(cls, cwd: str, session_dir: str | os.PathLike[str] | None = None, *,
                              store: StoreOrDir | None = None,
                              include_internal: bool = False) -> AsyncSessionManager:
        """Continue the most recent regular session of ``cwd`` or create one
        (see :meth:`SessionManager.continue_recent`).

        Raises:
            StoreOpenError, StorageError: as the synchronous method.
        """
        def build(target: SessionStore) -> SessionManager:
            return SessionManager.continue_recent(cwd, store=target, include_internal=include_internal)
        return await cls._factory("continue_recent", store, build, write=driver.load_writes,  # type: ignore[arg-type]
                                  session_dir=session_dir)

    @classmethod
    async def in_memory(cls, cwd: str | None = None, *, id: str | None = None, parent_session: str | None = None,
                        internal: bool = False, workflow: dict[str, Any] | None = None,
                        entries: Sequence[dict[str, Any]] | None = None) -> AsyncSessionManager:
        """A session in a private memory store; no I/O and no threads (see :meth:`SessionManager.in_memory`).

        Raises:
            InvalidSessionIdError, InvalidSessionError: as the synchronous method.
        """
        return cls(SessionManager.in_memory(cwd, id=id, parent_session=parent_session, internal=internal,
                                            workflow=workflow, entries=entries))

    @classmethod
    async def from_parsed(cls, parsed: ParsedSession, cwd: str | None = None) -> AsyncSessionManager:
        """A read-only view of a session already read (see :meth:`SessionManager.from_parsed`);
        no I/O and no threads: nothing is copied or written.

        Raises:
            SessionNotFoundError: later, from any write (the private store holds nothing).
        """
        return cls(SessionManager.from_parsed(parsed, cwd))

    @classmethod
    async def fork_from(cls, source_path: str | os.PathLike[str], target_cwd: str,
                        session_dir: str | os.PathLike[str] | None = None, *,
                        store: StoreOrDir | None = None, id: str | None = None,
                        internal: bool = False, workflow: dict[str, Any] | None = None) -> AsyncSessionManager:
        """Fork a JSONL file into a new session (see :meth:`SessionManager.fork_from`).

        Raises:
            OSError, InvalidSessionError: the source cannot be read or is invalid.
            SessionExistsError, StorageError: as the synchronous method.
        """
        def build(target: SessionStore) -> SessionManager:
            return SessionManager.fork_from(source_path, target_cwd, store=target, id=id,
                                            internal=internal, workflow=workflow)
        return await cls._factory("fork_from", store, build, write=True, session_dir=session_dir)

    @classmethod
    async def import_from_jsonl(cls, input_path: str | os.PathLike[str], cwd: str | None = None,
                                target: StoreOrDir | None = None) -> AsyncSessionManager:
        """Import a JSONL file keeping its id (see :meth:`SessionManager.import_from_jsonl`).

        Raises:
            FileNotFoundError, InvalidSessionError, InvalidSessionIdError,
            SessionExistsError: as the synchronous method.
        """
        def build(store: SessionStore) -> SessionManager:
            return SessionManager.import_from_jsonl(input_path, cwd, store)
        return await cls._factory("import_from_jsonl", target, build, write=True)

    @classmethod
    async def import_files(cls, paths: Iterable[str | os.PathLike[str]], cwd: str | None = None,
                           target: StoreOrDir | None = None, *, batch_sessions: int | None = None,
                           batch_bytes: int | None = None, settle: bool = False) -> builtins.list[ImportOutcome]:
        """Import many JSONL files keeping their ids, in groups of sessions per transaction
        (see :meth:`SessionManager.import_files`, also for ``settle``), on the store's
        writer thread.

        Returns:
            One :class:`ImportOutcome` per path, in order (errors of single files are in
            the outcomes). Cancelling the awaiting task stops reading further files; the
            group being written is finished, and the outcomes so far travel with the
            cancellation (:class:`WriteOutcome`).

        Raises:
            StoreOpenError: the target store cannot be opened.
        """
        store, lease = await driver.open_target("import_files", target)
        stop = threading.Event()

        def until_stopped() -> Iterator[str | os.PathLike[str]]:
            for path in paths:
                if stop.is_set():
                    return
                yield path

        def work() -> builtins.list[ImportOutcome]:
            return builtins.list(SessionManager.import_files(until_stopped(), cwd, store,
                                                             batch_sessions=batch_sessions,
                                                             batch_bytes=batch_bytes, settle=settle))
        try:
            settled = await driver.run(store, work, write=True, on_cancel=stop.set)
        finally:
            await driver.close_owned(lease)
        outcomes: builtins.list[ImportOutcome] = driver.finish("import_files", settled, settled.value)
        return outcomes

    @classmethod
    async def import_session(cls, parsed: ParsedSession, cwd: str | None = None,
                             target: StoreOrDir | None = None) -> AsyncSessionManager:
        """Import an already-read session (see :meth:`SessionManager.import_session`).

        Raises:
            InvalidSessionIdError, SessionExistsError: as the synchronous method.
        """
        def build(store: SessionStore) -> SessionManager:
            return SessionManager.import_session(parsed, cwd, store)
        return await cls._factory("import_session", target, build, write=True)

    # ------------------------------------------------------------------ listing

    @staticmethod
    async def list(cwd: str, store_or_dir: StoreOrDir | None = None,
                   on_progress: ProgressCallback | None = None, *, include_internal: bool = False,
                   cancel: CancelEvent | None = None) -> builtins.list[SessionInfo]:
        """Sessions of one project, newest first (see :meth:`SessionManager.list`).

        ``on_progress(loaded, total)`` is called on the awaiting loop, in
        order, before the result is returned. Cancelling the awaiting task
        stops the listing after the session being examined; so does setting
        ``cancel``.

        Raises:
            ListingCancelledError: ``cancel`` was set; no partial list.
            StoreOpenError: the store cannot be opened.
        """
        return await AsyncSessionManager._listing("list", store_or_dir, on_progress, cancel,
                                                  lambda store, progress, stop: SessionManager.list(
                                                      cwd, store, progress, include_internal=include_internal,
                                                      cancel=stop))

    @staticmethod
    async def list_all(store_or_dir: StoreOrDir | None = None,
                       on_progress: ProgressCallback | None = None, *, include_internal: bool = False,
                       cancel: CancelEvent | None = None) -> builtins.list[SessionInfo]:
        """Sessions of every project in the store, newest first (see :meth:`SessionManager.list_all`
        and :meth:`list` for progress and cancellation).

        Raises:
            ListingCancelledError, StoreOpenError: as :meth:`list`.
        """
        return await AsyncSessionManager._listing("list_all", store_or_dir, on_progress, cancel,
                                                  lambda store, progress, stop: SessionManager.list_all(
                                                      store, progress, include_internal=include_internal,
                                                      cancel=stop))

    @staticmethod
    async def _listing(method: str, store_or_dir: StoreOrDir | None, on_progress: ProgressCallback | None,
                       cancel: CancelEvent | None, call: Callable[..., builtins.list[SessionInfo]]
                       ) -> builtins.list[SessionInfo]:
        loop = asyncio.get_running_loop()
        store, lease = await driver.open_target(method, store_or_dir)
        stop = threading.Event()
        progress = None
        if on_progress is not None:
            if driver.inline(store):
                progress = on_progress
            else:
                def progress(loaded: int, total: int) -> None:
                    loop.call_soon_threadsafe(on_progress, loaded, total)
        try:
            settled = await driver.run(store, functools.partial(call, store, progress, driver.AnyEvent(cancel, stop)),
                                 write=False, on_cancel=stop.set)
        finally:
            await driver.close_owned(lease)
        rows: builtins.list[SessionInfo] = driver.finish(method, settled, settled.value)
        return rows

    # ------------------------------------------------------------------ session management

    async def new_session(self, *, id: str | None = None, parent_session: str | None = None,
                          internal: bool = False, workflow: dict[str, Any] | None = None) -> str | None:
        """Start a new, empty session in the same store (see :meth:`SessionManager.new_session`).

        Returns:
            The new session's JSONL path when the store has files, else ``None``.
        """
        core = self._core
        path: str | None = await self._swap_via("new_session", functools.partial(
            core._prepare_new_session, id=id, parent_session=parent_session, internal=internal, workflow=workflow))
        return path

    async def mark_session_internal(self, workflow: dict[str, Any] | None = None) -> None:
        """Apply valid workflow ownership (see :meth:`SessionManager.mark_session_internal`).

        Raises:
            StorageError: the header could not be written (the header is unchanged).
        """
        await self._swap_via("mark_session_internal", functools.partial(self._core._prepare_mark_internal, workflow))

    async def set_session_file(self, path: str | os.PathLike[str]) -> None:
        """Switch to a JSONL file, keeping the cwd (see :meth:`SessionManager.set_session_file`).

        The file's store is opened here and closed by :meth:`aclose`.

        Raises:
            InvalidSessionError, StorageError: as the synchronous method (the manager is unchanged).
        """
        await self._swap_via("set_session_file", functools.partial(self._core._prepare_session_file, path))

    async def create_branched_session(self, leaf_id: str) -> str | None:
        """Extract the branch ending at ``leaf_id`` into a new session and switch to it
        (see :meth:`SessionManager.create_branched_session`).

        Raises:
            EntryNotFoundError: ``leaf_id`` is unknown.
            StorageError: the write failed (the manager is unchanged).
        """
        path: str | None = await self._swap_via("create_branched_session",
                                                functools.partial(self._core._prepare_branched_session, leaf_id))
        return path

    async def fork_to(self, cwd: str, target: StoreOrDir | None = None, *, id: str | None = None,
                      internal: bool = False, workflow: dict[str, Any] | None = None) -> AsyncSessionManager:
        """Copy every entry into a new session (see :meth:`SessionManager.fork_to`); this one is unchanged.

        Returns:
            An :class:`AsyncSessionManager` on the copy (sharing this manager's
            store when ``target`` is ``None``).

        Raises:
            StoreOpenError, SessionExistsError, StorageError: as the synchronous method.
        """
        method = "fork_to"
        await self._enter(method)
        try:
            core = self._core
            if target is None:
                store, lease = core.get_session_store(), (self._lease.retain() if self._lease is not None else None)
            else:
                store, lease = await driver.open_target(method, target)
            job = functools.partial(SessionManager.fork_to, core, cwd, store, id=id, internal=internal,
                                    workflow=workflow)
            settled = await driver.run(store, job, write=True)
            fork = AsyncSessionManager(settled.value, _lease=lease) if settled.ok else None
            if fork is None:
                await driver.close_owned(lease)
        finally:
            self._gate.release()
        result: AsyncSessionManager = driver.finish(method, settled, fork, self._record)  # raises when fork is None
        return result

    async def delete_session(self, session_id: str) -> None:
        """Delete another session of this store (see :meth:`SessionManager.delete_session`).

        Raises:
            SessionInUseError: ``session_id`` is this manager's session.
            StorageError: the removal failed.
        """
        # Nothing to switch: the call returns None, which _switch ignores.
        await self._swap_via("delete_session", functools.partial(self._core.delete_session, session_id))

    # ------------------------------------------------------------------ appending

    async def append_message(self, message: AgentMessage) -> str:
        """Append a ``message`` entry; returns its id once committed (see :meth:`SessionManager.append_message`).

        Raises:
            ValueError: not a message object, or a ``"pending"`` assistant message.
            StorageError: the write failed; nothing was published.
        """
        return await self._append_via("append_message", builders.message_entry, message)

    async def append_thinking_level_change(self, level: str) -> str:
        """Append a ``thinking_level_change``; returns its id once committed.

        Raises:
            StorageError: the write failed; nothing was published.
        """
        return await self._append_via("append_thinking_level_change", builders.thinking_level_change_entry, level)

    async def append_context_window_change(self, context_window: int) -> str:
        """Append a ``context_window_change`` of ``context_window`` tokens; returns its id once committed.

        Raises:
            ValueError: not a positive ``int``.
            StorageError: the write failed; nothing was published.
        """
        return await self._append_via("append_context_window_change", builders.context_window_change_entry,
                                      context_window)

    async def append_model_change(self, provider: str, model_id: str) -> str:
        """Append a ``model_change``; returns its id once committed.

        Raises:
            StorageError: the write failed; nothing was published.
        """
        return await self._append_via("append_model_change", builders.model_change_entry, provider, model_id)

    async def append_compaction(self, compacted_text: str, first_kept_entry_id: str | None,
                                tokens_before: int, details: Any) -> str:
        """Append a verbatim-line compaction boundary (see :meth:`SessionManager.append_compaction`).

        Raises:
            EntryNotFoundError: a non-null ``first_kept_entry_id`` is unknown.
            StorageError: the write failed; nothing was published.
        """
        return await self._append_via("append_compaction", builders.compaction_entry, compacted_text,
                                      first_kept_entry_id, tokens_before, details)

    async def append_custom_entry(self, custom_type: str, data: Any = UNSET) -> str:
        """Append extension state, not in context; returns its id once committed.

        Raises:
            StorageError: the write failed; nothing was published.
        """
        return await self._append_via("append_custom_entry", builders.custom_entry, custom_type, data)

    async def append_session_info(self, name: str) -> str:
        """Set the display name (``""`` clears it); returns the entry id once committed.

        Raises:
            StorageError: the write failed; nothing was published.
        """
        return await self._append_via("append_session_info", builders.session_info_entry, name)

    async def append_session_summary(self, summary: str, summarized_through_id: str, usage: Any = UNSET) -> str:
        """Store a resume-picker summary anchored to a message (see
        :meth:`SessionManager.append_session_summary`).

        Raises:
            EntryNotFoundError: ``summarized_through_id`` is unknown.
            StorageError: the write failed; nothing was published.
        """
        return await self._append_via("append_session_summary", builders.session_summary_entry, summary,
                                      summarized_through_id, usage)

    async def append_custom_message_entry(self, custom_type: str, content: Any, display: bool,
                                          details: Any = UNSET) -> str:
        """Append an extension message that is in context; returns its id once committed.

        Raises:
            StorageError: the write failed; nothing was published.
        """
        return await self._append_via("append_custom_message_entry", builders.custom_message_entry, custom_type,
                                      content, display, details)

    async def append_label_change(self, target_id: str, label: str | None = None) -> str:
        """Set or clear a label (see :meth:`SessionManager.append_label_change`).

        Raises:
            EntryNotFoundError: ``target_id`` is unknown; nothing appended.
            StorageError: the write failed; nothing was published.
        """
        return await self._append_via("append_label_change", builders.label_entry, target_id, label)

    async def append_context_edit(self, target_id: str, replacement: dict[str, Any] | None) -> str:
        """Append a branch-local context edit (see :meth:`SessionManager.append_context_edit`).

        Raises:
            ValueError, EntryNotFoundError: as the synchronous method.
            StorageError: the write failed; nothing was published.
        """
        return await self._append_via("append_context_edit", builders.context_edit_entry, target_id, replacement)

    async def branch_with_summary(self, branch_from_id: str | None, summary: str, details: Any = UNSET,
                                  from_hook: Any = UNSET, usage: Any = UNSET) -> str:
        """Move the leaf to ``branch_from_id`` and append a ``branch_summary`` there
        (see :meth:`SessionManager.branch_with_summary`). The leaf moves only
        once the entry committed.

        Raises:
            EntryNotFoundError: a non-null ``branch_from_id`` is unknown.
            StorageError: the write failed; the leaf is where it was.
        """
        return await self._append_via("branch_with_summary", builders.branch_summary_entry, branch_from_id, summary,
                                      details, from_hook, usage)

    # ------------------------------------------------------------------ leaf moves (ordered, no I/O)

    async def branch(self, entry_id: str) -> None:
        """Move the leaf to an earlier entry, after the mutations called before
        this one; writes nothing (see :meth:`SessionManager.branch`).

        Raises:
            EntryNotFoundError: unknown id.
        """
        await self._enter("branch")
        try:
            self._core.branch(entry_id)
        finally:
            self._gate.release()

    async def reset_leaf(self) -> None:
        """Set the leaf to ``None``, after the mutations called before this one (see
        :meth:`SessionManager.reset_leaf`)."""
        await self._enter("reset_leaf")
        try:
            self._core.reset_leaf()
        finally:
            self._gate.release()

    # ------------------------------------------------------------------ plain getters (in memory)

    def get_leaf_id(self) -> str | None:
        """The current leaf id (committed state), or ``None``. Plain method."""
        return self._core.get_leaf_id()

    def get_leaf_entry(self) -> Entry | None:
        """The current leaf entry, or ``None``. Plain method."""
        return self._core.get_leaf_entry()

    def get_entry(self, entry_id: str) -> Entry | None:
        """The committed entry with this id, or ``None``. Plain method."""
        return self._core.get_entry(entry_id)

    def get_branch(self, from_id: str | None = None) -> builtins.list[Entry]:
        """Entries from the root to ``from_id`` (default: the leaf), root first. Plain method."""
        return self._core.get_branch(from_id)

    def get_tree(self) -> builtins.list[TreeNode]:
        """The whole tree (see :meth:`SessionManager.get_tree`). Plain method."""
        return self._core.get_tree()

    def get_children(self, parent_id: str | None) -> builtins.list[Entry]:
        """Direct children of ``parent_id`` in file order. Plain method."""
        return self._core.get_children(parent_id)

    def get_label(self, entry_id: str) -> str | None:
        """The current label of ``entry_id``. Plain method."""
        return self._core.get_label(entry_id)

    def build_session_projection(self) -> _projection.SessionProjection:
        """The model-visible projection of the active branch (see
        :meth:`SessionManager.build_session_projection`). Plain method: in-memory
        CPU work on the loop, proportional to new entries once built."""
        return self._core.build_session_projection()

    def build_session_context(self) -> _projection.SessionContext:
        """Messages, thinking level and model for the model. Plain method."""
        return self._core.build_session_context()

    def build_historical_projection(self) -> _projection.HistoricalProjection:
        """The archival context the agent that wrote the latest retired compaction
        rebuilt (see :meth:`SessionManager.build_historical_projection`). Plain method:
        in-memory CPU work on the loop; nothing is written."""
        return self._core.build_historical_projection()

    def build_context_entries(self) -> builtins.list[Entry]:
        """Active-branch entries after the latest compaction boundary. Plain method."""
        return self._core.build_context_entries()

    def get_entries(self) -> builtins.list[Entry]:
        """All committed entries in file order (a new list). Plain method."""
        return self._core.get_entries()

    def get_entry_index(self) -> Mapping[str, Entry]:
        """A read-only view of the ``{entry id: entry}`` index (no copy). Plain method."""
        return self._core.get_entry_index()

    def get_header(self) -> SessionHeader:
        """The session header. Plain method."""
        return self._core.get_header()

    def get_session_name(self) -> str | None:
        """The display name, ``None`` when never named or cleared. Plain method."""
        return self._core.get_session_name()

    def get_session_name_state(self) -> NameState:
        """Never named / cleared / named. Plain method."""
        return self._core.get_session_name_state()

    def get_cwd(self) -> str:
        """The absolute working directory. Plain method."""
        return self._core.get_cwd()

    def get_session_dir(self) -> str:
        """The JSONL directory, or ``""`` for stores without files. Plain method."""
        return self._core.get_session_dir()

    def get_session_id(self) -> str:
        """The exact session id. Plain method."""
        return self._core.get_session_id()

    def get_session_store(self) -> SessionStore:
        """The active store. Plain method."""
        return self._core.get_session_store()

    def is_persisted(self) -> bool:
        """Whether the store is not a memory store. Plain method."""
        return self._core.is_persisted()

    async def get_session_file(self) -> str | None:
        """The JSONL file of this session (existing or future), or ``None``.

        A coroutine: a JSONL store checks the file's header on disk.
        """
        self._check_open()
        core = self._core
        settled = await driver.run(core.get_session_store(), core.get_session_file, write=False)
        path: str | None = driver.finish("get_session_file", settled, settled.value, self._record)
        return path
