"""The async driver of :class:`~sessiontree.session.aio.AsyncSessionManager`: where and
when its work runs (docs/aio.md; the invariants are in :mod:`sessiontree.session.aio`).

One writer thread per store (created on first use, retired when the store is closed or
collected), a small shared reader pool, inline calls for a store without I/O
(``StoreTraits.does_io``), the FIFO gate that keeps one manager's mutations in call order,
the outcome a cancelled call carries (:class:`WriteOutcome`, :func:`outcome_of`), and the
lease on a store a factory opened itself.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import os
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sessiontree.errors import SessionError
from sessiontree.session.manager import StoreOrDir, select_store
from sessiontree.stores.base import SessionStore
from sessiontree.stores.traits import store_traits

__all__ = [
    "READER_THREADS",
    "AnyEvent",
    "Gate",
    "Lease",
    "ManagerClosedError",
    "Settled",
    "WriteOutcome",
    "close_owned",
    "deliver",
    "finish",
    "given_store",
    "inline",
    "load_writes",
    "open_target",
    "outcome_of",
    "readers",
    "run",
    "writer_for",
]

#: Threads of the shared reader pool (listings, SQLite loads, file lookups).
READER_THREADS = 4


class ManagerClosedError(SessionError, RuntimeError):
    """A mutation or I/O method was called on an :class:`AsyncSessionManager`
    after :meth:`~AsyncSessionManager.aclose`."""

    def __init__(self) -> None:
        super().__init__("AsyncSessionManager is closed")


@dataclass(frozen=True)
class WriteOutcome:
    """What a cancelled call did before its cancellation was delivered.

    Attributes:
        method: the method's name, e.g. ``"append_message"``.
        committed: ``True`` when the call ran to completion: its writes
            committed and the manager's state includes them. ``False`` when it
            took no effect at all (withdrawn before it started, or its write
            failed).
        result: what the call would have returned (the new entry id, the new
            manager, the listing, ...) when ``committed``; else ``None``.
        error: the call's own error when its write failed (the cancellation
            is still what is raised); else ``None``.
    """

    method: str
    committed: bool
    result: Any = None
    error: BaseException | None = None


_OUTCOME_ATTR = "sessiontree_outcome"


def outcome_of(exc: BaseException) -> WriteOutcome | None:
    """The :class:`WriteOutcome` carried by a cancellation of this module, or ``None``.

    Follows ``__cause__`` and ``__context__``, so it also answers for the
    ``TimeoutError`` that :func:`asyncio.timeout` raises in place of the
    cancellation. (``asyncio.wait_for`` replaces the error object; read
    :attr:`AsyncSessionManager.last_cancelled` there.)
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        outcome = getattr(current, _OUTCOME_ATTR, None)
        if isinstance(outcome, WriteOutcome):
            return outcome
        current = current.__cause__ or current.__context__
    return None


# ---------------------------------------------------------------------- workers

_WRITERS: dict[int, concurrent.futures.ThreadPoolExecutor] = {}
_WRITERS_LOCK = threading.Lock()
_READERS: concurrent.futures.ThreadPoolExecutor | None = None


def _retire_writer(key: int, executor: concurrent.futures.ThreadPoolExecutor) -> None:
    # Takes no lock of this module: as a weakref finalizer it can run inside a
    # garbage collection triggered while this very thread holds _WRITERS_LOCK.
    # The identity check keeps a newer store's writer (an id is reused only
    # after its object, and so this callback, is gone).
    if _WRITERS.get(key) is executor:
        _WRITERS.pop(key, None)
    # No wait: this may run on the writer thread itself (its last job dropped the store).
    executor.shutdown(wait=False)


def writer_for(store: SessionStore) -> concurrent.futures.ThreadPoolExecutor:
    """The store's writer: one thread, so its writes run one at a time in submission order."""
    key = id(store)
    with _WRITERS_LOCK:
        executor = _WRITERS.get(key)
        if executor is None:
            executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=f"sessiontree-writer-{type(store).__name__}")
            _WRITERS[key] = executor
            try:
                # The thread ends with the store: an id is reused only after its object is gone.
                weakref.finalize(store, _retire_writer, key, executor)
            except TypeError:
                pass  # not weak-referenceable: the idle thread lives as long as the process
        return executor


def readers() -> concurrent.futures.ThreadPoolExecutor:
    """The process's one pool of :data:`READER_THREADS` reader threads (made on first use), where
    the async driver runs loads that cannot write (docs/aio.md)."""
    global _READERS
    with _WRITERS_LOCK:
        if _READERS is None:
            _READERS = concurrent.futures.ThreadPoolExecutor(max_workers=READER_THREADS,
                                                             thread_name_prefix="sessiontree-reader")
        return _READERS


def inline(store: SessionStore | None) -> bool:
    """Whether calls on ``store`` run inline on the event loop: a store whose traits declare no I/O
    (memory), where a thread hop would cost more than the call. ``None`` (no store): ``False``."""
    return store is not None and not store_traits(store).does_io


def load_writes(store: SessionStore) -> bool:
    """Whether a load of ``store`` must go to its writer thread (its traits' ``loads_may_write``)."""
    # A JSONL load may persist a format upgrade (docs/rules/decisions.md D-9), and a store that
    # declares nothing may write too: both go to the writer. A SQLite load only reads.
    return store_traits(store).loads_may_write


@dataclass
class Settled:
    """How one job ended: ``ran`` (started at all), its value or error, and the
    first cancellation its awaiting task received meanwhile."""

    ran: bool
    value: Any = None
    error: BaseException | None = None
    cancelled: asyncio.CancelledError | None = None

    @property
    def ok(self) -> bool:
        """Whether the job ran and raised nothing."""
        return self.ran and self.error is None


async def run(store: SessionStore | None, fn: Callable[[], Any], *, write: bool,
               on_cancel: Callable[[], None] | None = None) -> Settled:
    """Run ``fn`` off the loop and wait until it has settled, whatever happens to the waiter.

    ``write`` selects the store's writer thread, else the reader pool; a
    memory store runs ``fn`` inline. When the awaiting task is cancelled, a
    job that has not started is withdrawn (``ran`` False); a running one is
    waited for (``on_cancel`` may ask it to stop early, as listings do). The
    cancellation is returned in ``cancelled``, for the caller to raise once it
    has published or rolled back.
    """
    if inline(store):
        try:
            return Settled(True, fn())
        except Exception as exc:
            return Settled(True, error=exc)
    executor = writer_for(store) if write and store is not None else readers()
    cfut = executor.submit(fn)
    afut = asyncio.wrap_future(cfut)
    cancelled: asyncio.CancelledError | None = None
    while True:
        try:
            # shield: a cancelled waiter must not cancel the write itself.
            value = await asyncio.shield(afut)
            return Settled(True, value, cancelled=cancelled)
        except asyncio.CancelledError as exc:
            if afut.cancelled():
                return Settled(False, cancelled=cancelled or exc)  # withdrawn before it started
            if cancelled is None:
                cancelled = exc
                if not cfut.cancel() and on_cancel is not None:
                    on_cancel()
        except BaseException as exc:  # the job's own error, delivered as it is
            return Settled(True, error=exc, cancelled=cancelled)


def deliver(exc: asyncio.CancelledError, outcome: WriteOutcome) -> asyncio.CancelledError:
    """Attach ``outcome`` to the cancellation about to be re-raised."""
    setattr(exc, _OUTCOME_ATTR, outcome)
    committed = "committed" if outcome.committed else "took no effect"
    exc.add_note(f"sessiontree: the cancelled {outcome.method} {committed}"
                 + (f" (result {outcome.result!r})" if outcome.committed and isinstance(outcome.result, str) else ""))
    return exc


def finish(method: str, settled: Settled, result: Any,
            record: Callable[[WriteOutcome], None] | None = None) -> Any:
    """Return ``result``, raise the job's error, or deliver the pending cancellation."""
    if settled.cancelled is not None:
        outcome = WriteOutcome(method, settled.ok, result if settled.ok else None, settled.error)
        if record is not None:
            record(outcome)
        raise deliver(settled.cancelled, outcome)
    if settled.error is not None:
        raise settled.error
    return result


# ---------------------------------------------------------------------- ordering

class Gate:
    """FIFO mutual exclusion usable from any event loop in any thread.

    ``asyncio.Lock`` binds to one loop; this gate keeps a thread lock for its
    own bookkeeping only (never held across an ``await``) and wakes each
    waiter on the waiter's own loop. Ownership passes directly from the
    releaser to the first waiter, so no later caller can overtake it.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._held = False
        self._waiters: collections.deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = \
            collections.deque()

    async def acquire(self) -> None:
        """Wait for the gate. Cancelled while waiting: not acquired (raises ``CancelledError``)."""
        loop = asyncio.get_running_loop()
        with self._mutex:
            if not self._held:
                self._held = True
                return
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            with self._mutex:
                try:
                    self._waiters.remove((loop, waiter))
                    granted = False
                except ValueError:
                    granted = True  # a release already handed the gate to us
            if granted:
                self.release()
            raise

    def release(self) -> None:
        """Hand the gate to the first waiter, or open it."""
        while True:
            with self._mutex:
                if not self._waiters:
                    self._held = False
                    return
                loop, waiter = self._waiters.popleft()
            try:
                loop.call_soon_threadsafe(_wake, waiter)
                return
            except RuntimeError:
                continue  # that loop is closed: its task will never run, skip it


def _wake(waiter: asyncio.Future[None]) -> None:
    # A cancelled waiter releases the gate itself (see Gate.acquire).
    if not waiter.done():
        waiter.set_result(None)


class Lease:
    """Shared ownership of a store this module opened (from a URL, a directory
    or the configuration); the last manager to release it closes it."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._refs = 1
        self._lock = threading.Lock()

    def retain(self) -> Lease:
        """Take one more reference to the store (each :meth:`release` gives one back); returns self."""
        with self._lock:
            self._refs += 1
        return self

    def release(self) -> bool:
        """Drop one reference; ``True`` when it was the last."""
        with self._lock:
            self._refs -= 1
            return self._refs == 0


def given_store(value: Any) -> bool:
    """Whether a ``store``/``storeOrDir`` argument is a store object (not opened here)."""
    return value is not None and not isinstance(value, (str, os.PathLike))


async def open_target(method: str, value: StoreOrDir | None,
                       session_dir: str | os.PathLike[str] | None = None) -> tuple[SessionStore, Lease | None]:
    """The store an argument selects, opened off the loop when it is not an object already."""
    if value is None and session_dir is not None:
        value = session_dir
    if given_store(value):
        return value, None  # type: ignore[return-value]
    # The manager's rule: None the configured store, a URL that store, any other path a JSONL directory.
    settled = await run(None, functools.partial(select_store, value), write=False)
    store = finish(method, settled, settled.value)
    return store, Lease(store)


async def close_owned(lease: Lease | None) -> None:
    """Release ``lease``; the last release closes the store after its queued writes."""
    if lease is None or not lease.release():
        return
    store = lease.store
    settled = await run(store, store.close, write=True)
    if not inline(store):
        executor = _WRITERS.get(id(store))
        if executor is not None:
            _retire_writer(id(store), executor)
    finish("aclose", settled, None)


class AnyEvent:
    """Set when any of its events is: the caller's ``cancel`` plus the task's own."""

    def __init__(self, *events: Any) -> None:
        self._events = [event for event in events if event is not None]

    def is_set(self) -> bool:
        """Whether any of the events is set."""
        return any(event.is_set() for event in self._events)


# ---------------------------------------------------------------------- the manager
