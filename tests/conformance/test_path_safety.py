"""No session content moves a write out of the agent's folder, on every store and for every agent
(issue 38, items 1, 4 and 9; docs/agent-loop.md, "What is guaranteed").

The minimal inputs of the report, rebuilt: a pi header whose ``createdAt`` is a path, a Claude Code
record whose ``timestamp`` is one, a Codex ``session_meta`` whose ``payload.timestamp`` is one (the
files are synthetic: no real file holds such a value); an archive record naming a path outside the
folder (what a hostile host could put in a shared store); a symbolic link where the project folder
goes, and one to an unrelated folder inside the sessions folder.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from urllib.parse import unquote

import pytest

from foreign_support import CC_SID, CODEX_SID, claude_records, codex_records, write_claude, write_codex
from sessiontree.stores.base import ArchivedFile
from sessiontree.sync.archive import ARCHIVING_SUFFIX, archive
from sessiontree.sync.restore import RestoreError, restore
from sync_support import SID, entries, head, line, sync_one
from sync_support import agent_file as write_agent_file

pytestmark = pytest.mark.usefixtures("_fake_home")

OLD = 1_000_000_000  # 2001: older than any bound the tests use
FOLDERS = {"pi": (".pi", "agent", "sessions"), "atomic": (".atomic", "agent", "sessions")}


def _every_file(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if not p.is_dir()}


def _hostile_session(store, source: str, home: Path, evil: str) -> str:
    """A session of ``source`` whose time fields are ``evil``; its id."""
    if source == "pi":
        header = {**head(), "createdAt": evil}
        store.create(header, entries(1, 2, None))
        return SID
    if source == "claude-code":
        records = claude_records()
        for record in records:
            if "timestamp" in record:
                record["timestamp"] = evil
        assert sync_one(store, write_claude(home, records=records)).status == "new"
        return CC_SID
    records = codex_records()
    records[0]["payload"]["timestamp"] = evil
    for record in records:
        record["timestamp"] = evil
    assert sync_one(store, write_codex(home, records=records)).status == "new"
    return CODEX_SID


@pytest.mark.parametrize("source", ["pi", "claude-code", "codex"])
@pytest.mark.parametrize("agent", ["pi", "atomic"])
@pytest.mark.parametrize("where", ["absolute", "relative", "dotdot"])
def test_a_hostile_timestamp_never_leaves_the_agents_folder(store, _fake_home, tmp_path, source, agent, where):
    # Before: os.path.join dropped the agent's folder for an absolute value and created the
    # folders on the way: restore wrote <tmp>/any/where/pwn_<id>.jsonl.
    evil = {"absolute": str(tmp_path / "any" / "where" / "pwn"), "relative": "any/where/pwn",
            "dotdot": "../../../../any/where/pwn"}[where]
    session_id = _hostile_session(store, source, _fake_home, evil)
    folder = _fake_home.joinpath(*FOLDERS[agent])
    before = _every_file(tmp_path)
    result = restore(store, session_id, agent=agent)
    written = Path(result.path)
    assert written.parent.parent == folder and written.name.endswith(f"_{session_id}.jsonl")
    assert "pwn" not in result.path and not (tmp_path / "any").exists()
    assert _every_file(tmp_path) - before == {written}


@pytest.mark.parametrize("source", ["pi", "claude-code", "codex"])
def test_dir_does_not_let_a_hostile_timestamp_out_either(store, _fake_home, tmp_path, source):
    session_id = _hostile_session(store, source, _fake_home, str(tmp_path / "any" / "pwn"))
    out = tmp_path / "out"
    before = _every_file(tmp_path)
    result = restore(store, session_id, directory=str(out))
    assert Path(result.path).parent.parent == out and not (tmp_path / "any").exists()
    assert _every_file(tmp_path) - before == {Path(result.path)}


@pytest.mark.parametrize("agent", ["pi", "atomic"])
def test_an_archive_record_naming_a_path_outside_is_not_followed(store, _fake_home, tmp_path, agent):
    # A record in a shared store says the file came from outside the agent's folder: restore
    # puts it inside, under the same name, and writes nothing where the record points.
    path = write_agent_file(_fake_home, agent=agent)
    data = path.read_bytes()
    sync_one(store, path)
    outside = tmp_path / "elsewhere" / "x" / path.name
    store.record_archived(ArchivedFile(str(outside), SID, hashlib.sha256(data).digest(), len(data), agent, 1,
                                       "trash", "done"))
    path.unlink()
    result = restore(store, SID, agent=agent)
    assert result.path == str(path) and path.read_bytes() == data
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("agent", ["pi", "atomic"])
def test_restore_never_writes_through_a_symlinked_project_folder(store, _fake_home, tmp_path, agent):
    # Before: os.makedirs followed the link and the file landed in the unrelated folder.
    store.create(head(cwd="/home/me/project"), entries(1, 2, None))
    sessions = _fake_home.joinpath(*FOLDERS[agent])
    sessions.mkdir(parents=True)
    unrelated = tmp_path / "unrelated"
    unrelated.mkdir()
    (sessions / "--home-me-project--").symlink_to(unrelated)
    with pytest.raises(RestoreError, match="symbolic link"):
        restore(store, SID, agent=agent)
    assert list(unrelated.iterdir()) == []


@pytest.mark.parametrize("agent", ["pi", "atomic"])
def test_archive_never_moves_files_through_a_symlinked_folder(store, _fake_home, tmp_path, agent):
    # Before: archive descended into the link and moved the unrelated folder's file to the trash.
    unrelated = tmp_path / "unrelated"
    unrelated.mkdir()
    theirs = unrelated / f"2026-03-01T10-00-00-000Z_{SID}.jsonl"
    theirs.write_bytes(line(head()) + b"".join(line(e) for e in entries(1, 2, None)))
    os.utime(theirs, (OLD, OLD))
    sessions = _fake_home.joinpath(*FOLDERS[agent])
    sessions.mkdir(parents=True)
    (sessions / "--linked--").symlink_to(unrelated)
    assert sync_one(store, sessions / "--linked--" / theirs.name).status == "new"  # synced through the link
    report = archive(store, older_than=86400.0, agents=[agent])
    assert theirs.exists() and not Path(str(theirs) + ARCHIVING_SUFFIX).exists()
    assert [(r.path, r.status) for r in report.files] == [(str(sessions / "--linked--"), "skipped")]
    assert "symbolic link" in (report.files[0].reason or "") and report.ok


@pytest.mark.parametrize("agent", ["pi", "atomic"])
def test_a_trashed_file_keeps_its_own_name(store, _fake_home, tmp_path, monkeypatch, agent):
    # Before: the trash held <name>.jsonl.sessiontree-archiving, so a desktop "restore from
    # trash" brought back a file the agent does not list.
    trash = tmp_path / "xdg" / "Trash"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    import send2trash.plat_other as plat  # the old implementation read its trash folder at import

    monkeypatch.setattr(plat, "HOMETRASH_B", os.fsencode(trash), raising=False)
    monkeypatch.setattr(plat, "HOMETRASH", str(trash), raising=False)
    monkeypatch.setattr(plat, "XDG_DATA_HOME", os.fsencode(tmp_path / "xdg"), raising=False)
    path = write_agent_file(_fake_home, agent=agent)
    data = path.read_bytes()
    os.utime(path, (OLD, OLD))
    sync_one(store, path)
    report = archive(store, older_than=86400.0, agents=[agent])
    assert [r.status for r in report.files] == ["archived"] and not path.exists()
    assert sorted(p.name for p in (trash / "files").iterdir()) == [path.name]
    assert (trash / "files" / path.name).read_bytes() == data
    info = (trash / "info" / f"{path.name}.trashinfo").read_text()
    assert f"Path={path}" in unquote(info) and ARCHIVING_SUFFIX not in info
    assert restore(store, SID, agent=agent).file.byte_exact and path.read_bytes() == data
