"""Fixtures shared by the usage tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _config(tmp_path, monkeypatch):
    """Every test keeps its config file (budgets, docs/budgets.md) in its own folder, never
    the user's: ``<tmp>/config/config.toml``, not created; returns its path."""
    path = tmp_path / "config" / "config.toml"
    monkeypatch.setenv("SESSIONTREE_CONFIG", str(path))
    return path
