"""Test-wide isolation: no test may touch the user's data directory or trash."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _private_data_dirs(tmp_path_factory, monkeypatch):
    """Point XDG data (the default store and the trash ``send2trash`` uses) into a temp dir."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))
    monkeypatch.delenv("SESSIONTREE_STORE", raising=False)


@pytest.fixture
def no_trash(monkeypatch):
    """JSONL deletes unlink instead of trashing, so the inode is really freed."""
    import sessiontree.stores.jsonl as jsonl_module

    def refuse(path: str) -> None:
        raise OSError("no trash in tests")

    monkeypatch.setattr(jsonl_module, "_send_to_trash", refuse)
