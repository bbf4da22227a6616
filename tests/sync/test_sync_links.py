"""A symbolic link to a folder inside an agent's folder is not followed; ``sync`` notes it
once, then counts it quietly while it points to the same place (docs/sync.md, "Quiet
repeats"). The new-user test saw the same note on every run."""

from __future__ import annotations

import os

import pytest

from cli_support import run_cli, run_cli_json
from sync_support import agent_file

pytestmark = pytest.mark.usefixtures("_fake_home")

NOTE = "is a symbolic link to a folder (give it as PATH to sync it)"


def _sync(db: str, *args: str) -> str:
    """The run's output with its lines joined (rich wraps a long note at the terminal's width)."""
    return " ".join(run_cli(db, "sync", *args).stdout.split())


def test_the_link_note_is_said_once_then_counted(_fake_home, tmp_path):
    db = f"sqlite:///{tmp_path / 'links.db'}"
    path = agent_file(_fake_home, n=2)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = path.parent.parent / "--linked--"
    os.symlink(elsewhere, link)

    first = _sync(db)
    assert first.count(NOTE) == 1 and f"not followed: {link} " in first

    second = _sync(db)
    assert NOTE not in second
    assert ", 1 symbolic link to a folder not followed (noted before; --verbose lists it)" in second

    verbose = _sync(db, "--verbose")
    assert f"not followed: {link} {NOTE} (noted before)" in verbose
    data = run_cli_json(db, "sync")
    assert data["linksNotedBefore"] == 1 and len(data["notes"]) == 1

    # Pointed elsewhere: news again, once.
    other = tmp_path / "other"
    other.mkdir()
    os.unlink(link)
    os.symlink(other, link)
    assert _sync(db).count(NOTE) == 1
    assert NOTE not in _sync(db)

    # --strict says it on every run.
    assert _sync(db, "--strict").count(NOTE) == 1
    assert _sync(db, "--strict").count(NOTE) == 1
