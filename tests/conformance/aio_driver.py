"""The async driver of the manager conformance suite: the synchronous
``SessionManager`` interface, every call made through ``AsyncSessionManager``.

``tests/test_manager.py`` is the conformance suite; it names ``SessionManager``
and calls it synchronously. :class:`AsyncDriven` has the same shape, but each
factory, listing, mutation and I/O call builds the coroutine of
:class:`~sessiontree.aio.AsyncSessionManager` and runs it to completion on
one event loop (:data:`RUNNER`); plain getters are passed through. Swapping
the suite's ``SessionManager`` for ``AsyncDriven`` is the second driver.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from sessiontree.session.aio import AsyncSessionManager

#: The loop every driven call runs on; replaced per test by :func:`use_runner`.
RUNNER: asyncio.Runner | None = None


def run(coro: Any) -> Any:
    """Run one coroutine on the driver's loop; plain values pass through."""
    if not inspect.isawaitable(coro):
        return coro
    assert RUNNER is not None, "driver used outside use_runner()"
    result = RUNNER.run(coro)
    return AsyncDriven(result) if isinstance(result, AsyncSessionManager) else result


class _Static:
    """Class-level access: ``AsyncDriven.create(...)`` runs ``AsyncSessionManager.create(...)``."""

    def __get__(self, obj: Any, owner: Any) -> Any:
        return self

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return run(getattr(AsyncSessionManager, self.name)(*args, **kwargs))


class AsyncDriven:
    """A synchronous face over one :class:`AsyncSessionManager`."""

    create = _Static("create")
    open = _Static("open")
    open_file = _Static("open_file")
    continue_recent = _Static("continue_recent")
    in_memory = _Static("in_memory")
    fork_from = _Static("fork_from")
    import_from_jsonl = _Static("import_from_jsonl")
    import_session = _Static("import_session")
    import_files = _Static("import_files")  # a list here, an iterator in the synchronous API
    list = _Static("list")
    list_all = _Static("list_all")

    def __init__(self, inner: AsyncSessionManager) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *args, **kwargs: run(attr(*args, **kwargs))
        return attr


class use_runner:
    """Context manager: a fresh event loop for the driven calls of one test."""

    def __enter__(self) -> asyncio.Runner:
        global RUNNER
        RUNNER = asyncio.Runner()
        return RUNNER

    def __exit__(self, *exc: object) -> None:
        global RUNNER
        runner, RUNNER = RUNNER, None
        if runner is not None:
            runner.close()
