"""What ``archive`` reports and records when a file is taken from under it (issue 38 item 5):
"vanished", never "cannot read", for a file gone before it is read; ``done``, never
``undone``, for a file that is no longer in the folder (docs/agent-loop.md). Every store
that keeps archive records; the interference is synthetic (a monkeypatched step)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from sessiontree.stores.base import ArchivedFile
from sessiontree.sync import archive as archive_module
from sessiontree.sync.archive import ARCHIVING_SUFFIX, archive
from support import make_store
from sync_support import SID, sync_one
from sync_support import agent_file as write_agent_file

pytestmark = pytest.mark.usefixtures("_fake_home")

OLD = 1_000_000_000
VANISHED = "vanished (another run may have archived it)"


def _old_synced(home: Path, store) -> Path:
    path = write_agent_file(home, session_id=SID)
    os.utime(path, (OLD, OLD))
    assert sync_one(store, path).status == "new"
    return path


@pytest.fixture(params=["sqlite", "jsonl", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request, tmp_path):
    if request.param == "postgres":
        from sessiontree.stores.postgres.store import PostgresStore

        made = PostgresStore(request.getfixturevalue("pg_url"), create=True)
    else:
        made = make_store(request.param, tmp_path)
    yield made
    made.close()


def test_a_file_gone_before_it_is_read_vanished(store, _fake_home, monkeypatch):
    path = _old_synced(_fake_home, store)
    real = archive_module.agent_file

    def rebuild_then_the_file_goes(*args, **kwargs):
        rebuilt = real(*args, **kwargs)
        path.unlink()  # another process took it between the listing and the read
        return rebuilt

    monkeypatch.setattr(archive_module, "agent_file", rebuild_then_the_file_goes)
    report = archive(store, older_than=86400.0)
    assert [(r.status, r.reason) for r in report.files] == [("skipped", VANISHED)]
    assert report.ok


def test_a_file_taken_during_the_move_is_recorded_done_not_undone(store, _fake_home, tmp_path, monkeypatch):
    path = _old_synced(_fake_home, store)
    trash = tmp_path / "trash"
    trash.mkdir()

    def taken_first(p: str, original: str) -> None:
        os.rename(p, trash / Path(p).name)  # another run's recovery moved it to the trash
        raise FileNotFoundError(2, "No such file or directory", p)

    monkeypatch.setattr(archive_module, "_trash", taken_first)
    report = archive(store, older_than=86400.0)
    assert [(r.status, r.reason) for r in report.files] == [("skipped", VANISHED)]
    assert report.ok
    assert [(r.path, r.state) for r in store.archived_files()] == [(str(path), "done")]


def test_a_pending_record_whose_name_holds_a_new_file_is_done(store, _fake_home):
    path = _old_synced(_fake_home, store)
    sha = hashlib.sha256(path.read_bytes()).digest()
    # A killed run's move happened (the renamed copy is gone), then the agent wrote a new
    # file under the same name: the archived bytes are not back.
    store.record_archived(ArchivedFile(str(path), SID, sha, path.stat().st_size, "pi", 1, "trash", "pending"))
    path.write_bytes(path.read_bytes() + b"\n")
    os.utime(path, None)
    assert not Path(str(path) + ARCHIVING_SUFFIX).exists()
    archive(store, older_than=86400.0)
    assert [r.state for r in store.archived_files()] == ["done"]
