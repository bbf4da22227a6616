"""The manager conformance suite, second driver: every test of
``tests/test_manager.py``, unchanged, run through ``AsyncSessionManager``.

One suite, two drivers, every store: ``test_manager.py`` collected as itself
is the synchronous driver; here each of its tests runs again with the
suite's ``SessionManager`` replaced by :class:`aio_driver.AsyncDriven`, so
every factory, listing, mutation and I/O call goes through a coroutine of
:class:`~sessiontree.aio.AsyncSessionManager` on an event loop. The tests
are collected from the module when this file is imported, so a test added
to the suite is driven both ways without touching this file. The suite's
``store`` fixture (memory, SQLite, JSONL, PostgreSQL) parametrizes both.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import test_manager as suite
from aio_driver import AsyncDriven, use_runner
from test_manager import store  # noqa: F401  (the suite's store fixture, every store)


def _driven(test: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(test)  # same name, fixtures (via __wrapped__) and marks
    def run_async_driver(*args: Any, **kwargs: Any) -> Any:
        original = suite.SessionManager
        suite.SessionManager = AsyncDriven  # type: ignore[misc]
        try:
            with use_runner():
                return test(*args, **kwargs)
        finally:
            suite.SessionManager = original  # type: ignore[misc]
    return run_async_driver


SUITE_TESTS = sorted(name for name in vars(suite) if name.startswith("test_") and callable(getattr(suite, name)))

for _name in SUITE_TESTS:
    globals()[f"{_name}__async_driver"] = _driven(getattr(suite, _name))
del _name


def test_the_async_driver_covers_the_whole_suite():
    """A guard on the generation above: no suite test is left out, and the
    driver really is asynchronous underneath."""
    generated = {name[: -len("__async_driver")] for name in globals() if name.endswith("__async_driver")}
    assert generated == set(SUITE_TESTS) and len(SUITE_TESTS) > 40
    with use_runner():
        manager = AsyncDriven.in_memory("/tmp")
        assert type(manager.inner).__name__ == "AsyncSessionManager"
        entry_id = manager.append_message({"role": "user", "content": "hi"})
        assert manager.get_leaf_id() == entry_id
