"""The async driver of the manager conformance suite: the synchronous
``SessionManager`` interface, every call made through ``AsyncSessionManager``.

:class:`AsyncDriver` has the class-level face of ``SessionManager``
(``create``, ``open``, ``list_all``, ...); each factory, listing, mutation and
I/O call builds the coroutine of
:class:`~sessiontree.session.aio.AsyncSessionManager` and runs it to
completion on the driver's own event loop. A manager it returns is an
:class:`AsyncDriven` on the same loop; its plain getters are passed through.
The ``manager`` fixture (``conftest.py``) hands a test either
``SessionManager`` or a fresh driver, so one suite runs both ways.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from sessiontree.session.aio import AsyncSessionManager


class _Loop:
    """One event loop; runs coroutines to completion and wraps the managers they return."""

    def __init__(self, driver: AsyncDriver) -> None:
        self.runner = asyncio.Runner()
        self.driver = driver

    def run(self, value: Any) -> Any:
        """Run ``value`` to completion when it is a coroutine; plain values pass through."""
        if not inspect.iscoroutine(value):
            return value
        result: Any = self.runner.run(value)
        return AsyncDriven(result, self) if isinstance(result, AsyncSessionManager) else result


class AsyncDriver:
    """``SessionManager``'s static factories and listings, run through ``AsyncSessionManager``.

    A context manager: the loop is closed on exit. ``import_files`` returns a list
    here (an iterator in the synchronous API).
    """

    def __init__(self) -> None:
        self._loop = _Loop(self)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(AsyncSessionManager, name)
        if not callable(attr):
            return attr
        return lambda *args, **kwargs: self._loop.run(attr(*args, **kwargs))

    def __enter__(self) -> AsyncDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.runner.close()


class AsyncDriven:
    """A synchronous face over one :class:`AsyncSessionManager`; ``driver`` is the
    :class:`AsyncDriver` that made it (to open its session again the same way)."""

    def __init__(self, inner: AsyncSessionManager, loop: _Loop) -> None:
        self.inner = inner
        self.driver = loop.driver
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *args, **kwargs: self._loop.run(attr(*args, **kwargs))
        return attr
