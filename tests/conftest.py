"""Test-wide isolation: no test may touch the user's data directory or trash."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _private_data_dirs(tmp_path_factory, monkeypatch):
    """Point XDG data (the default store and the trash ``send2trash`` uses) into a temp dir."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))
    monkeypatch.delenv("SESSIONTREE_STORE", raising=False)
