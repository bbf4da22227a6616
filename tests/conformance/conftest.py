"""The two fixtures every conformance test runs under.

* ``store``: one fresh store of each kind: memory, SQLite
  (``<tmp>/db/sessions.db``), JSONL (``<tmp>/sessions``) and PostgreSQL (a fresh
  database of the run's throwaway cluster, marked ``postgres``; skipped with the
  reason when no cluster can be had). Closed after the test.
* ``manager``: the ``SessionManager`` API the test drives: the class itself
  (``sync``) or :class:`~conformance.aio_driver.AsyncDriver` (``async``), which
  makes every call through ``AsyncSessionManager`` on an event loop of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance.aio_driver import AsyncDriver
from sessiontree.session.manager import SessionManager
from support import make_store

#: The store kinds of the ``store`` fixture, in the order their tests run.
STORE_KINDS = ("memory", "sqlite", "jsonl", "postgres")


@pytest.fixture(params=[pytest.param(kind, marks=pytest.mark.postgres) if kind == "postgres" else kind
                        for kind in STORE_KINDS])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A fresh, empty store of every kind (see the module docstring)."""
    if request.param == "postgres":
        from sessiontree.stores.postgres.store import PostgresStore

        created = PostgresStore(request.getfixturevalue("pg_url"))
    else:
        created = make_store(request.param, tmp_path)
    yield created
    created.close()


@pytest.fixture(params=["sync", "async"])
def manager(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The manager API under test: ``SessionManager`` or its asynchronous driver."""
    if request.param == "sync":
        yield SessionManager
        return
    with AsyncDriver() as driver:
        yield driver
