"""One sync process per store (the run lock, an ``flock`` or the store's own: docs/sync.md,
"Durability"), and the watch of ``sync --watch`` (docs/sync.md, "Watching")."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sessiontree.errors import StorageError
from sessiontree.format.files import O_CLOEXEC, unlock_and_close
from sessiontree.stores.base import SessionStore
from sessiontree.stores.traits import OwnRunLock, store_traits
from sessiontree.sync.gemini import is_gemini_name
from sessiontree.sync.reading import SUFFIX

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX platforms
    fcntl = None  # type: ignore[assignment]

__all__ = ["run_lock", "run_lock_path", "watch"]


def run_lock_path(store: SessionStore) -> str | None:
    """Where the run lock of ``store`` lives: beside a SQLite file, inside a JSONL folder
    (the store's declared ``StoreTraits.run_lock_path``)."""
    return store_traits(store).run_lock_path


@contextlib.contextmanager
def run_lock(store: SessionStore, on_busy: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold the store's sync run lock (an ``flock``): one sync process works on a store at
    a time, the others wait. ``on_busy`` is called once when the lock is held by
    another process, before waiting (the CLI says so: the only "error" two concurrent
    syncs may show). Stores without a file (memory) need no lock.

    A PostgreSQL store holds its own: an advisory lock per host
    (:meth:`~sessiontree.stores.postgres.ledger.PostgresLedger.run_lock`, docs/postgres.md).

    Raises:
        StorageError: the lock file cannot be created (the database cannot be reached).
    """
    if isinstance(store, OwnRunLock):
        with store.run_lock(on_busy):
            yield
        return
    path = run_lock_path(store)
    if path is None or fcntl is None:
        yield
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | O_CLOEXEC, 0o644)
    except OSError as exc:
        raise StorageError(f"cannot create the sync lock {path}: {exc}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_busy is not None:
                on_busy()
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        unlock_and_close(fd)


def watch(roots: Sequence[str], on_change: Callable[[list[str]], None], stop: threading.Event,
          *, debounce_ms: int = 400, on_ready: Callable[[], None] | None = None) -> None:
    """Call ``on_change(paths)`` with the ``*.jsonl`` files that changed under ``roots``,
    debounced, until ``stop`` is set (``watchfiles``). Files removed meanwhile are left out.

    Args:
        roots: existing folders or files to watch.
        on_change: gets the sorted absolute paths of changed files that still exist.
        stop: set it (e.g. from a SIGINT handler) to end the watch after the current batch.
        debounce_ms: changes within this window are grouped into one batch.
        on_ready: called once, when the watch is known to be running (its first
            batch or timeout): a file an agent appended to after the caller's first
            sync but before the watch began gives no event, so the caller syncs
            everything once more then (unchanged files cost a ``stat``).
    """
    import watchfiles  # imported on use: only --watch needs it

    def only_sessions(change: Any, path: str) -> bool:
        return path.endswith(SUFFIX) or is_gemini_name(path)

    for changes in watchfiles.watch(*roots, watch_filter=only_sessions, debounce=debounce_ms,
                                    stop_event=stop, raise_interrupt=False, rust_timeout=500,
                                    yield_on_timeout=True):
        if on_ready is not None:
            ready, on_ready = on_ready, None
            ready()
        paths = sorted({os.path.abspath(path) for _, path in changes if os.path.isfile(path)})
        if paths:
            on_change(paths)
        if stop.is_set():
            break
