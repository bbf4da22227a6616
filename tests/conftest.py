"""Test-wide fixtures: isolation (no test may touch the user's data directory or trash),
the fake trash and home of the JSONL and sync suites, and the PostgreSQL cluster.

Markers (registered in pyproject.toml): ``slow``, ``stress``, ``browser``, ``postgres``,
``timing``, ``corpus``. The default run (``python -m pytest``) deselects the first five;
``-m ""`` runs everything."""

from __future__ import annotations

import pytest


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test that asks for the PostgreSQL cluster is marked ``postgres`` (tests that
    reach it only through ``request.getfixturevalue`` carry the mark themselves)."""
    for item in items:
        if {"pg_cluster", "pg_url"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.postgres)


@pytest.fixture(autouse=True)
def _private_data_dirs(tmp_path_factory, monkeypatch):
    """Point XDG data (the default store and the trash ``send2trash`` uses) and XDG cache (the price
    cache, usage/prices.py) into temp dirs."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    monkeypatch.delenv("SESSIONTREE_PRICE_CACHE", raising=False)
    monkeypatch.delenv("SESSIONTREE_STORE", raising=False)
    # pytest-xdist's workers inherit COLUMNS=80 from execnet; output widths are the tests' choice.
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture
def no_trash(monkeypatch):
    """JSONL deletes unlink instead of trashing, so the inode is really freed."""
    import sessiontree.stores.jsonl.writes as jsonl_module

    def refuse(path: str) -> None:
        raise OSError("no trash in tests")

    monkeypatch.setattr(jsonl_module, "_send_to_trash", refuse)


@pytest.fixture
def fake_trash(monkeypatch: pytest.MonkeyPatch, tmp_path):
    """JSONL deletes move files into ``<tmp>/trash`` (never the user's real trash); returns that directory."""
    import os

    import sessiontree.stores.jsonl.writes as jsonl_module

    trash = tmp_path / "trash"

    def send(path: str) -> None:
        trash.mkdir(exist_ok=True)
        os.rename(path, trash / os.path.basename(path))

    monkeypatch.setattr(jsonl_module, "_send_to_trash", send)
    return trash


@pytest.fixture
def _fake_home(tmp_path, monkeypatch):
    """A fake ``$HOME`` (``<tmp>/home``) without the agents' folder variables; the default
    store is ``<tmp>/default.db``. The sync suites use it for every test."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("PI_CODING_AGENT_DIR", "ATOMIC_CODING_AGENT_DIR", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME",
                 "COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SESSIONTREE_STORE", f"sqlite:///{tmp_path / 'default.db'}")
    return home


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
