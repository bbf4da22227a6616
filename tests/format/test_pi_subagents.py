"""pi-subagents folders in pi's session folder (issue 39, item 6; docs/sync.md, "pi-subagents
folders").

No real files of this layout are public (FOREIGN.md, "Looked for and not found"), so every
fixture here is **synthetic**, laid out as the pi-subagents extension's own code lays it out
(nicobailon/pi-subagents): a session's subagent root is a folder named after its file
(``<ts>_<id>/``), holding ``<runId>/run-<N>/session.jsonl`` for each run and ``forks/`` for
forked context; run artifacts go to ``subagent-artifacts/<runId>_<agent>[_<n>]_transcript.jsonl``
(records ``{version, recordType, source, runId, agent, cwd, ts, timestamp, ...}``) and
``<runId>_<agent>.jsonl`` (the child's event stream), neither with a session header.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_support import run_cli_json
from sessiontree.stores import open_store
from sessiontree.sync.engine import Syncer, discover
from sessiontree.sync.restore import resume_command
from sync_support import SID, agent_file, entries, head, line

pytestmark = pytest.mark.usefixtures("_fake_home")


def _copy(path: Path, where: Path, extra: int) -> Path:
    """A same-id copy of the session file at ``where``, with ``extra`` entries of its own."""
    where.parent.mkdir(parents=True, exist_ok=True)
    data = path.read_bytes()
    last = f"{len(data.splitlines()) - 1:08x}"  # the last entry's id (entries are 1, 2, ...)
    where.write_bytes(data + b"".join(line(e) for e in entries(100, extra, last)))
    return where


def _layout(home: Path) -> tuple[Path, list[Path], list[Path]]:
    own = agent_file(home, n=3)
    root = own.with_suffix("")  # <ts>_<id>/, the folder pi-subagents names after the session file
    copies = [_copy(own, root / "forks" / f"2026-03-01T10-05-00-000Z_{SID}.jsonl", 2),
              _copy(own, root / "a1b2c3d4" / "run-0" / "session.jsonl", 4)]
    artifacts = own.parent / "subagent-artifacts"
    artifacts.mkdir()
    transcript = artifacts / "a1b2c3d4_worker_transcript.jsonl"
    transcript.write_bytes(
        line({"version": 1, "recordType": "message", "source": "foreground", "runId": "a1b2c3d4",
              "agent": "worker", "cwd": "/home/me/project", "ts": 1772359200000,
              "timestamp": "2026-03-01T10:00:00.000Z",
              "message": {"role": "user", "content": [{"type": "text", "text": "do it"}]}})
        + line({"version": 1, "recordType": "tool_start", "source": "foreground", "runId": "a1b2c3d4",
                "agent": "worker", "cwd": "/home/me/project", "ts": 1772359201000,
                "timestamp": "2026-03-01T10:00:01.000Z", "toolName": "bash"}))
    events = artifacts / "a1b2c3d4_worker.jsonl"
    events.write_bytes(line({"type": "message_end", "message": {"role": "assistant", "content": []}}))
    return own, copies, [transcript, events]


def test_a_session_s_own_file_wins_over_its_same_id_copies(_fake_home, tmp_path):
    """Before: the copies inside ``<ts>_<id>/`` were met first (they sort before the file),
    took the session's path, and the own file was then reported diverged (exit 1)."""
    own, copies, artifacts = _layout(_fake_home)
    files, _ = discover([str(own.parent)])
    assert files.index(str(own)) < min(files.index(str(c)) for c in copies)
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    try:
        report = Syncer(store).sync_files(files)
        by_path = {f.path: f for f in report.files}
        assert (by_path[str(own)].status, by_path[str(own)].added) == ("new", 3)
        for copy in copies:
            assert by_path[str(copy)].status == "unchanged"
            assert "copy of session" in (by_path[str(copy)].note or "") and str(own) in by_path[str(copy)].note
        for artifact in artifacts:
            assert by_path[str(artifact)].status == "unchanged"
            assert "pi-subagents artifact" in (by_path[str(artifact)].note or "")
        assert report.ok
        assert len(store.read(SID).entries) == 3  # the copies' own entries are not added
        assert resume_command(store, SID, "/home/me/project") == f"cd /home/me/project && pi --session {own}"
        # Recorded: the next run opens none of them.
        again = Syncer(store).sync_files(files)
        assert {f.status for f in again.files} == {"unchanged"}
    finally:
        store.close()


def test_a_copy_synced_before_its_own_file_hands_the_session_back(_fake_home, tmp_path):
    """A store filled by an earlier version, which met the copy first: the own file takes
    the session back (its content, its path for resume), the copy no longer counts."""
    own, copies, _ = _layout(_fake_home)
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    try:
        first = Syncer(store).sync_file(str(copies[1]))
        assert (first.status, first.added) == ("new", 7)
        result = Syncer(store).sync_file(str(own))
        assert result.status == "replaced" and "no longer count" in (result.reason or "")
        assert len(store.read(SID).entries) == 3
        assert resume_command(store, SID, "/home/me/project") == f"cd /home/me/project && pi --session {own}"
        assert Syncer(store).sync_file(str(copies[1])).status == "unchanged"
    finally:
        store.close()


def test_sync_of_a_home_with_pi_subagents_folders_exits_0(_fake_home, tmp_path):
    """The command a user runs: every file accounted for, nothing rejected, exit 0."""
    own, copies, artifacts = _layout(_fake_home)
    report = run_cli_json(f"sqlite:///{tmp_path / 'c.db'}", "sync")
    statuses = {row["path"]: row["status"] for row in report["files"]}
    assert statuses[str(own)] == "new"
    assert all(statuses[str(p)] == "unchanged" for p in [*copies, *artifacts])
    assert report["rejected"] == 0


def test_a_session_file_inside_an_artifacts_folder_is_still_a_session(_fake_home, tmp_path):
    """Only records without a session header are artifacts: a session file that happens to
    sit in ``subagent-artifacts`` is synced."""
    own = agent_file(_fake_home, n=1)
    other = own.parent / "subagent-artifacts" / "kept.jsonl"
    other.parent.mkdir()
    other.write_bytes(line(head("019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b09")) + b"".join(line(e) for e in entries(1, 1, None)))
    store = open_store("memory:")
    assert Syncer(store).sync_file(str(other)).status == "new"
