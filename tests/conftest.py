"""Test-wide isolation: no test may touch the user's data directory or trash."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _private_data_dirs(tmp_path_factory, monkeypatch):
    """Point XDG data (the default store and the trash ``send2trash`` uses) into a temp dir."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))
    monkeypatch.delenv("SESSIONTREE_STORE", raising=False)
    # pytest-xdist's workers inherit COLUMNS=80 from execnet; output widths are the tests' choice.
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture
def no_trash(monkeypatch):
    """JSONL deletes unlink instead of trashing, so the inode is really freed."""
    import sessiontree.stores.jsonl.store as jsonl_module

    def refuse(path: str) -> None:
        raise OSError("no trash in tests")

    monkeypatch.setattr(jsonl_module, "_send_to_trash", refuse)


# -- PostgreSQL: one throwaway cluster per test run, one fresh database per test ------------------

@pytest.fixture(scope="session")
def pg_cluster():
    """The run's PostgreSQL cluster (tests/pg.py), started on first use and stopped at the
    end of the run, also when tests fail. Skips, with the reason, when no cluster can be had."""
    import os

    import pg

    reason = pg.unavailable()
    if reason:
        pytest.skip(reason)
    attached = os.environ.get("SESSIONTREE_TEST_PG_CLUSTER")
    cluster = pg.attach_cluster(attached) if attached else pg.start_cluster()
    try:
        yield cluster
    finally:
        if not attached:
            cluster.destroy()


@pytest.fixture
def pg_url(pg_cluster):
    """A ``postgresql://`` URL of a new, empty database, dropped after the test."""
    name = pg_cluster.new_database()
    try:
        yield pg_cluster.url(name)
    finally:
        pg_cluster.drop_database(name)
