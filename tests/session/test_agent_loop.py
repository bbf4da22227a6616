"""``restore``, ``resume``, ``archive`` and ``archived`` (docs/agent-loop.md): what is written
for a session born in the store, refusals that leave nothing behind, each reason a file is
not archived, races with an agent and with another archive, and the commands."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import threading
from pathlib import Path

import pytest

from cli_support import run_cli, run_cli_json
from sessiontree.format import jsonio
from sessiontree.stores.sqlite.store import SqliteStore
from sessiontree.sync import archive as archive_module
from sessiontree.sync import newfile
from sessiontree.sync.archive import ARCHIVING_SUFFIX, archive
from sessiontree.sync.engine import Syncer, discover
from sessiontree.sync.restore import RestoreError, agent_file, encode_cwd, restore
from sync_support import OTHER, SID, append, entries, head, line, sync_one
from sync_support import agent_file as write_agent_file

pytestmark = pytest.mark.usefixtures("_fake_home")

OLD = 1_000_000_000  # 2001: older than any bound the tests use


@pytest.fixture
def sqlite_store(tmp_path):
    created = SqliteStore(str(tmp_path / "store.db"))
    yield created
    created.close()


def _born_in_store(sqlite_store, *, extra: list[dict] | None = None) -> None:
    """A session that never was an agent file: format-4 header, a fork's parent."""
    header = {"type": "session", "version": 4, "id": OTHER, "createdAt": "2026-03-02T08:00:00.000Z",
              "cwd": "/home/me/other", "parentSessionId": SID}
    sqlite_store.create(header, entries(1, 3, None) + (extra or []))


def _old_synced(home: Path, sqlite_store, **kw) -> Path:
    path = write_agent_file(home, **kw)
    os.utime(path, (OLD, OLD))
    assert sync_one(sqlite_store, path).status == "new"
    return path


# -------------------------------------------------------------------------- names and format


def test_the_folder_name_is_the_agents():
    assert encode_cwd("/home/me/my project") == "--home-me-my project--"
    assert encode_cwd("C:\\Users\\me") == "--C--Users-me--"
    # One leading separator is removed, the second becomes a dash.
    assert encode_cwd("//server/share") == "---server-share--"


def test_a_session_born_in_the_store_is_written_as_format_3(sqlite_store, _fake_home):
    window = {"type": "context_window_change", "id": "0000000a", "parentId": "00000003",
              "timestamp": "2026-03-02T08:00:09.000Z", "contextWindow": 200000}
    _born_in_store(sqlite_store, extra=[window])
    result = restore(sqlite_store, OTHER)
    path = Path(result.path)
    assert path == (_fake_home / ".pi" / "agent" / "sessions" / "--home-me-other--"
                    / f"2026-03-02T08-00-00-000Z_{OTHER}.jsonl")
    lines = path.read_bytes().split(b"\n")
    assert lines[0] == (b'{"type":"session","version":3,"id":"' + OTHER.encode()
                        + b'","timestamp":"2026-03-02T08:00:00.000Z","cwd":"/home/me/other","parentSession":"'
                        + SID.encode() + b'"}')
    stored = sqlite_store.read(OTHER)
    assert lines[1:-1] == [stored.entry_bytes(i) for i in range(4)] and lines[-1] == b""
    assert not result.file.byte_exact
    assert result.file.notes == ["pi will not see 1 context_window_change entry: pi has no context-window entry: "
                                 "the window it uses is its own setting"]
    atomic = agent_file(sqlite_store, OTHER, agent="atomic")
    assert atomic.notes == ["atomic will not see 1 context_window_change entry: Atomic has no context-window "
                            "entry: the window it uses is its own setting"]


def test_at_restores_only_the_path_as_a_new_session(sqlite_store, _fake_home):
    path = _old_synced(_fake_home, sqlite_store, n=3)
    side = {"type": "message", "id": "000000bb", "parentId": "00000001", "timestamp": "2026-03-01T10:01:00.000Z",
            "message": {"role": "user", "content": "another way", "timestamp": 2}}
    sqlite_store.append(SID, [side])
    result = restore(sqlite_store, SID, at="00000002")
    written = [json.loads(text) for text in Path(result.path).read_text().splitlines()]
    assert written[0]["parentSession"] == str(path) and written[0]["id"] == result.file.session_id != SID
    assert [e["id"] for e in written[1:]] == ["00000001", "00000002"]


# -------------------------------------------------------------------------- refusals


def test_an_existing_file_with_other_bytes_is_never_overwritten(sqlite_store, _fake_home):
    path = _old_synced(_fake_home, sqlite_store)
    append(path, entries(4, 1, "00000003"))  # the agent wrote on since the sync
    before = path.read_bytes()
    with pytest.raises(RestoreError, match="exists with other bytes"):
        restore(sqlite_store, SID)
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_a_symbolic_link_at_the_target_is_refused(sqlite_store, _fake_home, tmp_path):
    path = _old_synced(_fake_home, sqlite_store)
    path.unlink()
    elsewhere = tmp_path / "elsewhere.jsonl"
    path.symlink_to(elsewhere)
    with pytest.raises(RestoreError, match="symbolic link"):
        restore(sqlite_store, SID)
    assert not elsewhere.exists()


def test_a_folder_that_cannot_be_made_is_one_error_and_nothing_written(sqlite_store, _fake_home, tmp_path):
    _born_in_store(sqlite_store)
    blocker = tmp_path / "blocked"
    blocker.write_text("a file where the folder should be")
    with pytest.raises(RestoreError, match="cannot create the folder"):
        restore(sqlite_store, OTHER, directory=str(blocker))
    assert blocker.read_text() == "a file where the folder should be"


def test_a_full_disk_leaves_no_partial_file(sqlite_store, _fake_home, tmp_path, monkeypatch):
    _born_in_store(sqlite_store)

    def full(fd, data):
        os.write(fd, data[:10])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(newfile, "write_all", full)
    with pytest.raises(RestoreError, match="the disk is full"):
        restore(sqlite_store, OTHER, directory=str(tmp_path / "out"))
    folder = tmp_path / "out" / "--home-me-other--"
    assert list(folder.iterdir()) == []


def test_restoring_twice_is_a_no_op(sqlite_store, _fake_home, tmp_path):
    _born_in_store(sqlite_store)
    first = restore(sqlite_store, OTHER, directory=str(tmp_path / "out"))
    second = restore(sqlite_store, OTHER, directory=str(tmp_path / "out"))
    assert (first.status, second.status, first.path) == ("written", "present", second.path)


# -------------------------------------------------------------------------- archive decisions


def test_each_reason_a_file_stays(sqlite_store, _fake_home):
    kept = _old_synced(_fake_home, sqlite_store, session_id=SID)
    os.utime(kept, None)  # touched now: newer than the bound... and changed since the sync
    fresh = write_agent_file(_fake_home, session_id=OTHER)
    sync_one(sqlite_store, fresh)  # synced just now, modified just now
    unsynced = write_agent_file(_fake_home, session_id=SID[:-2] + "77")
    os.utime(unsynced, (OLD, OLD))
    torn = write_agent_file(_fake_home, session_id=SID[:-2] + "78")
    with open(torn, "ab") as handle:
        handle.write(b'{"type":"message","id":"0')
    os.utime(torn, (OLD, OLD))
    sync_one(sqlite_store, torn)
    grown = write_agent_file(_fake_home, session_id=SID[:-2] + "79")
    os.utime(grown, (OLD, OLD))
    sync_one(sqlite_store, grown)
    sqlite_store.append(SID[:-2] + "79", [{"type": "session_info", "id": "99999999", "parentId": "00000003",
                                    "timestamp": "2026-03-01T10:05:00.000Z", "name": "x"}])
    report = archive(sqlite_store, older_than=86400.0)
    reasons = {Path(r.path).name[:-len(".jsonl")][-2:]: (r.status, r.reason) for r in report.files}
    assert reasons == {
        "01": ("kept", "modified recently"),
        "02": ("kept", "modified recently"),
        "77": ("skipped", "not synced (run sessiontree sync first)"),
        "78": ("skipped", "in progress (its last line is unfinished)"),
        "79": ("skipped", "diverged: the store holds entries the file does not"),
    }
    assert not report.ok  # a diverged file is a problem, as for sync
    assert all(Path(r.path).exists() for r in report.files)


def test_keep_newest_keeps_that_many_per_folder(sqlite_store, _fake_home):
    ids = [SID[:-2] + f"{n:02d}" for n in range(10, 15)]
    for n, session_id in enumerate(ids):
        path = write_agent_file(_fake_home, session_id=session_id)
        os.utime(path, (OLD + n, OLD + n))
        sync_one(sqlite_store, path)
    report = archive(sqlite_store, older_than=None, keep_newest=2, dry_run=True)
    by_id = {Path(r.path).name.split("_")[1][:-6]: r.status for r in report.files}
    assert by_id == {ids[0]: "would archive", ids[1]: "would archive", ids[2]: "would archive",
                     ids[3]: "kept", ids[4]: "kept"}
    assert sqlite_store.archived_files() == [] and all(Path(r.path).exists() for r in report.files)


def test_a_dry_run_opens_only_the_files_it_would_archive(sqlite_store, _fake_home, monkeypatch):
    old = _old_synced(_fake_home, sqlite_store, session_id=SID)
    new = write_agent_file(_fake_home, session_id=OTHER)
    sync_one(sqlite_store, new)
    opened: list[str] = []
    real = archive_module._sha_file
    monkeypatch.setattr(archive_module, "_sha_file", lambda p: opened.append(p) or real(p))
    archive(sqlite_store, older_than=86400.0, dry_run=True)
    assert opened == [str(old)]


def test_a_file_that_grows_while_being_archived_stays_with_its_new_bytes(sqlite_store, _fake_home, monkeypatch):
    path = _old_synced(_fake_home, sqlite_store)
    real = archive_module._sha_file
    calls: list[str] = []

    def agent_appends_after_the_check(p: str):
        result = real(p)
        calls.append(p)
        if len(calls) == 1:  # after the verification read, before the move: the agent appends
            append(Path(p), entries(4, 1, "00000003"))
        return result

    monkeypatch.setattr(archive_module, "_sha_file", agent_appends_after_the_check)
    report = archive(sqlite_store, older_than=86400.0)
    assert [(r.status, r.reason) for r in report.files] == [
        ("skipped", "changed since the last sync (it grew while being archived)")]
    assert path.exists() and path.read_bytes().endswith(line(entries(4, 1, "00000003")[0]))
    assert not Path(str(path) + ARCHIVING_SUFFIX).exists()
    assert [r.state for r in sqlite_store.archived_files()] == []


def test_two_archives_at_once_archive_each_file_once(tmp_path, _fake_home):
    db = str(tmp_path / "two.db")
    setup = SqliteStore(db)
    paths = [_old_synced(_fake_home, setup, session_id=SID[:-2] + f"{n:02d}") for n in range(20)]
    setup.close()
    reports = []

    def run() -> None:
        own = SqliteStore(db)
        try:
            reports.append(archive(own, older_than=86400.0))
        finally:
            own.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    archived = [r.path for report in reports for r in report.files if r.status == "archived"]
    assert sorted(archived) == sorted(map(str, paths))
    check = SqliteStore(db)
    assert len(check.archived_files()) == 20 and {r.state for r in check.archived_files()} == {"done"}
    check.close()


def test_a_failed_move_puts_the_file_back(sqlite_store, _fake_home, monkeypatch):
    path = _old_synced(_fake_home, sqlite_store)
    before = path.read_bytes()

    def no_trash(*paths: str) -> None:
        raise OSError("no trash can on this system")

    monkeypatch.setattr(archive_module, "_trash", no_trash)
    report = archive(sqlite_store, older_than=86400.0)
    assert [(r.status, r.reason) for r in report.files] == [("skipped", "move failed: no trash can on this system")]
    assert path.read_bytes() == before and not report.ok
    assert [r.state for r in sqlite_store.archived_files()] == ["undone"]


def test_a_run_killed_after_the_rename_is_finished_or_put_back(sqlite_store, _fake_home):
    recorded = _old_synced(_fake_home, sqlite_store, session_id=SID)
    loose = _old_synced(_fake_home, sqlite_store, session_id=OTHER)
    sha = hashlib.sha256(recorded.read_bytes()).digest()
    from sessiontree.stores.base import ArchivedFile

    # As a killed run leaves them: both renamed, only the first with its pending record.
    sqlite_store.record_archived(ArchivedFile(str(recorded), SID, sha, recorded.stat().st_size, "pi", 1, "deleted",
                                       "pending"))
    os.rename(recorded, str(recorded) + ARCHIVING_SUFFIX)
    os.rename(loose, str(loose) + ARCHIVING_SUFFIX)
    report = archive(sqlite_store, older_than=10 ** 10, delete=True)  # nothing else is old enough
    assert [(Path(r.path).name, r.status) for r in report.files if r.status == "archived"] == [
        (recorded.name, "archived")]
    assert not Path(str(recorded) + ARCHIVING_SUFFIX).exists() and not recorded.exists()
    assert loose.exists() and not Path(str(loose) + ARCHIVING_SUFFIX).exists()
    assert [r.state for r in sqlite_store.archived_files()] == ["done"]
    assert restore(sqlite_store, SID).file.byte_exact


# -------------------------------------------------------------------------- the commands


def test_the_commands_from_sync_to_archive_to_resume(_fake_home, tmp_path):
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    path = write_agent_file(_fake_home, n=3, version=3)
    os.utime(path, (OLD, OLD))
    run_cli(db, "sync")
    before = path.read_bytes()
    dry = run_cli_json(db, "archive", "--dry-run")
    assert (dry["archived"], dry["bytesFreed"], dry["dryRun"]) == (1, len(before), True) and path.exists()
    out = run_cli(db, "archive", "--older-than", "7d").stdout
    assert len(before) == 139 + 152 + 163 + 158  # the header line and three entry lines, newlines included
    assert out.splitlines()[-1] == "1 archived (612 B freed), 0 kept"
    assert not path.exists()
    listed = run_cli_json(db, "archived")["archived"]
    assert [(r["path"], r["sha256"], r["state"]) for r in listed] == [
        (str(path), hashlib.sha256(before).hexdigest(), "done")]
    out = run_cli(db, "resume", SID[:8]).stdout
    assert path.read_bytes() == before
    assert out.splitlines()[-1] == f"cd /home/me/project && pi --session {path}"
    # resume put the file back: it is no longer away (docs/agent-loop.md, "The audit records").
    assert run_cli_json(db, "archived")["archived"] == []
    assert run_cli(db, "archived").stdout == "No archived files.\n"
    assert [r["state"] for r in run_cli_json(db, "archived", "--all")["archived"]] == ["restored"]
    assert run_cli(db, "archived", "--all").stdout.rstrip().endswith(f"{path} [restored]")
    again = run_cli_json(db, "restore", SID[:8])
    assert (again["status"], again["byteExact"], again["sha256"]) == (
        "present", True, hashlib.sha256(before).hexdigest())
    fork = run_cli_json(db, "resume", SID[:8], "--fork")
    assert fork["command"] == ["pi", "--fork", str(path)]


def test_command_errors_are_one_line(_fake_home, tmp_path):
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    path = write_agent_file(_fake_home, n=2)
    run_cli(db, "sync")
    append(path, entries(3, 1, "00000002"))
    run_cli(db, "restore", SID[:8], code=1, one_error_line=True)
    run_cli(db, "restore", SID[:8], "--at", "zzz", code=1, one_error_line=True)
    # A bad option value is a usage error, exit 2 (tests/cli/test_date_options.py; it exited 1 before 0.2.0).
    result = run_cli(db, "archive", "--older-than", "soon", code=2)
    assert "invalid duration" in result.stderr


def test_hostile_text_in_a_path_is_escaped(_fake_home, tmp_path):
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    folder = _fake_home / ".pi" / "agent" / "sessions" / "--evil\x1b[31m--"
    folder.mkdir(parents=True)
    path = folder / f"x_{SID}.jsonl"
    path.write_bytes(line(head()) + b"".join(line(e) for e in entries(1, 2, None)))
    os.utime(path, (OLD, OLD))
    run_cli(db, "sync")
    out = run_cli(db, "archive").stdout
    assert "\x1b" not in out and "archived" in out
    assert "\x1b" not in run_cli(db, "archived").stdout


def test_reading_a_store_never_requires_writing_it(_fake_home, tmp_path):
    db = tmp_path / "ro.db"
    path = write_agent_file(_fake_home, n=2)
    run_cli(f"sqlite:///{db}", "sync")
    path.unlink()
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    run_cli(f"sqlite:///{db}", "restore", SID[:8])
    run_cli(f"sqlite:///{db}", "archived")
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    assert jsonio.loads(path.read_bytes().split(b"\n")[0])["id"] == SID


def test_sync_of_a_folder_restored_into_is_unchanged(sqlite_store, _fake_home, tmp_path):
    _born_in_store(sqlite_store)
    result = restore(sqlite_store, OTHER, directory=str(tmp_path / "agent"))
    report = Syncer(sqlite_store).sync_files(discover([str(tmp_path / "agent")])[0])
    assert [(r.path, r.status) for r in report.files] == [(result.path, "unchanged")]


# -------------------------------------------------------------------------- the viewer


def test_the_session_page_shows_the_resume_command_and_starts_nothing(sqlite_store, _fake_home, tmp_path):
    from starlette.testclient import TestClient

    from sessiontree.web.app import create_app

    path = _old_synced(_fake_home, sqlite_store)
    _born_in_store(sqlite_store)
    client = TestClient(create_app(sqlite_store), base_url="http://127.0.0.1:8765")
    synced = client.get(f"/s/{SID}").text
    assert f'<code id="resume-command">cd /home/me/project &amp;&amp; pi --session {path}</code>' in synced
    born = client.get(f"/s/{OTHER}").text
    assert f'<code id="resume-command">sessiontree resume {OTHER}</code>' in born
    path.unlink()  # the synced file is gone: the page says how to restore it
    store_only = TestClient(create_app(sqlite_store), base_url="http://127.0.0.1:8765").get(f"/s/{SID}").text
    assert f'<code id="resume-command">sessiontree resume {SID}</code>' in store_only
    assert not path.exists()


def test_other_agents_folders_are_never_archived(sqlite_store, _fake_home):
    pi_file = _old_synced(_fake_home, sqlite_store)
    claude = _fake_home / ".claude" / "projects" / "-home-me-project"
    claude.mkdir(parents=True)
    foreign = claude / "0b4c-session.jsonl"
    foreign.write_bytes(b'{"type":"summary","summary":"x","leafUuid":"u1"}\n')
    os.utime(foreign, (OLD, OLD))
    report = archive(sqlite_store, older_than=86400.0, dry_run=True)
    assert [(r.path, r.status) for r in report.files] == [(str(pi_file), "would archive")]


def test_a_run_killed_after_the_move_before_its_record_is_settled_by_the_next(sqlite_store, _fake_home):
    from sessiontree.stores.base import ArchivedFile

    moved = _old_synced(_fake_home, sqlite_store, session_id=SID)
    back = _old_synced(_fake_home, sqlite_store, session_id=OTHER)
    for path, session_id in ((moved, SID), (back, OTHER)):
        sha = hashlib.sha256(path.read_bytes()).digest()
        sqlite_store.record_archived(ArchivedFile(str(path), session_id, sha, path.stat().st_size, "pi", 1, "trash",
                                           "pending"))
    moved.unlink()  # the move to the trash happened; the kill came before "done"
    archive(sqlite_store, older_than=10 ** 10)  # nothing old enough: only the leftovers are looked at
    assert {r.path: r.state for r in sqlite_store.archived_files()} == {str(moved): "done", str(back): "undone"}
    assert restore(sqlite_store, SID).file.byte_exact and back.exists()


def test_the_format_3_header_keeps_the_agents_key_order(sqlite_store, _fake_home):
    # docs/rules/format.md A.2: a version-3 header is written type, version, id, timestamp, cwd, then
    # parentSession, internal and workflow, each only when there is one.
    workflow = {"runId": "r1", "stageId": "s1", "stageName": "plan"}
    header = {"type": "session", "version": 4, "id": OTHER, "createdAt": "2026-03-02T08:00:00.000Z",
              "cwd": "/w", "parentSessionId": SID, "internal": True, "workflow": workflow}
    sqlite_store.create(header, entries(1, 1, None))
    first = agent_file(sqlite_store, OTHER).data.split(b"\n", 1)[0]
    assert first == (b'{"type":"session","version":3,"id":"' + OTHER.encode()
                     + b'","timestamp":"2026-03-02T08:00:00.000Z","cwd":"/w","parentSession":"' + SID.encode()
                     + b'","internal":true,"workflow":{"runId":"r1","stageId":"s1","stageName":"plan"}}')


def test_a_file_without_its_final_newline_gets_one_before_entries_added_in_the_store(sqlite_store, _fake_home):
    # A complete final record without a newline is a record (seed:session-version); the
    # agent would glue the next record onto it, so the restored file ends that line first.
    path = write_agent_file(_fake_home, n=2, version=3)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    sync_one(sqlite_store, path)
    assert agent_file(sqlite_store, SID).data == path.read_bytes()  # nothing added: byte for byte
    extra = {"type": "session_info", "id": "99999999", "parentId": "00000002",
             "timestamp": "2026-03-01T10:05:00.000Z", "name": "n"}
    sqlite_store.append(SID, [extra])
    assert agent_file(sqlite_store, SID).data == path.read_bytes() + b"\n" + line(extra)
