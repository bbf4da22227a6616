"""Files written, moved or trashed in the agents' folders (issue 38, items 1, 4, 8 and 9;
docs/agent-loop.md, "What is guaranteed"): the commands with hostile session content, a killed
restore's temporary file, a full disk in the trash, the printed resume command, ``serve --expose``,
and a property test that no string in any header or record field moves a write out of the agent's
folder or ``--dir``. The store-independent half; tests/conformance/test_path_safety.py runs the
rest on every store. Every input is synthetic: no real session file holds these values.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from cli_support import run_cli, run_cli_json
from foreign_support import claude_records, codex_records, jl
from sessiontree.errors import SessionError
from sessiontree.stores.memory import MemoryStore
from sessiontree.stores.sqlite.store import SqliteStore
from sessiontree.sync.archive import ARCHIVING_SUFFIX, archive
from sessiontree.sync.engine import Syncer
from sessiontree.sync.restore import RestoreError, restore, restore_source, resume_command
from sync_support import SID, entries, head, sync_one
from sync_support import agent_file as write_agent_file

pytestmark = pytest.mark.usefixtures("_fake_home")

OLD = 1_000_000_000
SESSIONS = (".pi", "agent", "sessions")


def _store_with(tmp_path: Path, header: dict) -> str:
    """A SQLite store holding one session with ``header``; its URL."""
    db = tmp_path / "cli.db"
    store = SqliteStore(str(db))
    try:
        store.create(header, entries(1, 2, None))
    finally:
        store.close()
    return f"sqlite:///{db}"


def _words(line: str) -> list[bytes]:
    """The words bash makes of ``cd A && B C D``: A, then B C D (each as bytes)."""
    script = "printf '%s\\0' " + line.replace("cd ", "", 1).replace(" && ", "; printf '%s\\0' ", 1)
    out = subprocess.run(["bash", "-c", script], capture_output=True, check=True).stdout
    return out.split(b"\0")[:-1]


# --------------------------------------------------------------------------- item 1: the commands


def test_resume_exec_runs_the_agent_only_on_a_file_inside_its_folder(_fake_home, tmp_path, monkeypatch):
    # Before: the header's createdAt chose the path, and --exec ran pi on <tmp>/evil/pwn_<id>.jsonl.
    db = _store_with(tmp_path, {**head(), "createdAt": str(tmp_path / "evil" / "pwn")})
    ran: list[list[str]] = []
    monkeypatch.setattr(os, "chdir", lambda path: None)
    monkeypatch.setattr(os, "execvp", lambda program, argv: ran.append(list(argv)))
    run_cli(db, "resume", SID[:8], "--exec")
    [[program, option, path]] = ran
    assert (program, option) == ("pi", "--session")
    assert Path(path).parent.parent == _fake_home.joinpath(*SESSIONS) and Path(path).is_file()
    assert not (tmp_path / "evil").exists()


def test_restore_dir_keeps_a_hostile_name_inside_dir(_fake_home, tmp_path):
    db = _store_with(tmp_path, {**head(), "createdAt": "../../../evil/pwn"})
    out = tmp_path / "out"
    result = run_cli_json(db, "restore", SID[:8], "--dir", str(out))
    assert Path(result["path"]).parent.parent == out and not (tmp_path / "evil").exists()


def test_a_nul_in_cwd_is_an_error_naming_the_session_and_field(_fake_home, tmp_path):
    # Before: "sessiontree: error: embedded null byte".
    db = _store_with(tmp_path, head(cwd="/home/me/a\x00b"))
    for command in ("restore", "resume"):
        error = run_cli(db, command, SID[:8], code=1, one_error_line=True).stderr
        assert SID in error and '"cwd"' in error and "NUL" in error, error


def test_the_printed_resume_command_names_the_cwd_with_control_characters(_fake_home, tmp_path):
    # Before: the line was escaped for the terminal after quoting, so `cd` named another path.
    cwd = "/tmp/x\x1b]0;pwned\x07y/\u202ez"
    db = _store_with(tmp_path, head(cwd=cwd))
    line = run_cli(db, "resume", SID[:8]).stdout.splitlines()[-1]
    assert "\x1b" not in line and "\x07" not in line and "\u202e" not in line
    words = _words(line)
    assert words[0] == cwd.encode() and words[1:3] == [b"pi", b"--session"]
    assert Path(os.fsdecode(words[3])).is_file()


def test_the_viewers_resume_command_names_the_same_bytes(_fake_home, tmp_path):
    cwd = "/tmp/it's\x1b[31m red"
    path = write_agent_file(_fake_home)
    path.write_bytes(path.read_bytes().replace(b'"cwd":"/home/me/project"', json.dumps(cwd).encode().join(
        [b'"cwd":', b""])))
    store = MemoryStore()
    assert sync_one(store, path).status == "new"
    line = resume_command(store, SID, cwd)
    assert "\x1b" not in line
    assert _words(line) == [cwd.encode(), b"pi", b"--session", str(path).encode()]


# --------------------------------------------------------------------------- item 4: sync and links


def test_sync_does_not_descend_into_a_symlinked_folder_of_an_agent(_fake_home, tmp_path):
    # Before: the unrelated folder's session was synced through the link.
    own = write_agent_file(_fake_home)
    unrelated = tmp_path / "unrelated"
    unrelated.mkdir()
    other = "019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b09"
    (unrelated / f"x_{other}.jsonl").write_bytes(jl([head(other), *entries(1, 1, None)]))
    link = _fake_home.joinpath(*SESSIONS) / "--linked--"
    link.symlink_to(unrelated)
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    report = run_cli_json(db, "sync")
    assert [f["path"] for f in report["files"]] == [str(own)]
    assert any(str(link) in note and "symbolic link" in note for note in report["notes"])
    # Given as PATH, the folder is read as it leads.
    assert run_cli_json(db, "sync", str(link))["files"][0]["status"] == "new"


# --------------------------------------------------------------------------- item 8: a killed restore


_KILLED = """
import os, signal, sys
import sessiontree.sync.restore as r
import sessiontree.sync.newfile as newfile
from sessiontree.stores.sqlite.store import SqliteStore

def dying(fd, data):
    os.write(fd, data[:10])
    os.kill(os.getpid(), signal.SIGKILL)

newfile.write_all = dying
r.restore(SqliteStore(sys.argv[1]), sys.argv[2])
"""


def test_a_killed_restores_temporary_file_is_removed_by_the_next(_fake_home, tmp_path):
    # Before: .<name>.restore-PID-HEX stayed beside the target for ever.
    _store_with(tmp_path, head())
    env = {**os.environ, "HOME": str(_fake_home)}
    done = subprocess.run([sys.executable, "-c", _KILLED, str(tmp_path / "cli.db"), SID], env=env, check=False)
    assert done.returncode == -signal.SIGKILL
    folder = _fake_home.joinpath(*SESSIONS) / "--home-me-project--"
    [left] = [p for p in folder.iterdir() if ".restore-" in p.name]
    assert left.name.startswith(f".2026-03-01T10-00-00-000Z_{SID}.jsonl.restore-")
    os.utime(left, (OLD, OLD))  # the killed writer is gone and it is old: stale
    live = folder / f".other.jsonl.restore-{os.getpid()}-0badcafe"
    live.write_bytes(b"being written")  # a live restore's file is never removed
    store = SqliteStore(str(tmp_path / "cli.db"))
    try:
        result = restore(store, SID)
    finally:
        store.close()
    assert sorted(p.name for p in folder.iterdir()) == sorted([Path(result.path).name, live.name])


# --------------------------------------------------------------------------- item 9: the trash


def test_a_full_disk_leaves_no_empty_trashinfo(_fake_home, tmp_path, monkeypatch):
    # Before: send2trash created <name>.trashinfo, failed to write it, and left it empty.
    trash = tmp_path / "xdg" / "Trash"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    import send2trash.plat_other as plat

    monkeypatch.setattr(plat, "HOMETRASH_B", os.fsencode(trash), raising=False)
    monkeypatch.setattr(plat, "HOMETRASH", str(trash), raising=False)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    # The failure is injected where each implementation writes the .trashinfo.
    monkeypatch.setattr(plat, "info_for", full)
    try:
        import sessiontree.sync.trash as trash_module
    except ImportError:
        pass
    else:
        monkeypatch.setattr(trash_module, "write_all", full)
    store = MemoryStore()
    path = write_agent_file(_fake_home)
    data = path.read_bytes()
    os.utime(path, (OLD, OLD))
    sync_one(store, path)
    report = archive(store, older_than=86400.0)
    assert [r.status for r in report.files] == ["skipped"] and "move failed" in (report.files[0].reason or "")
    assert path.read_bytes() == data and not Path(str(path) + ARCHIVING_SUFFIX).exists()
    assert [p for p in trash.rglob("*") if p.is_file()] == []
    assert [r.state for r in store.archived_files()] == ["undone"]


# --------------------------------------------------------------------------- item 9: serve --expose


def test_serve_expose_on_loopback_generates_a_token(monkeypatch):
    # Before: --expose on 127.0.0.1 served every session without a token.
    import uvicorn

    from cli_support import cli_runner
    from sessiontree.cli import cli

    served: list[object] = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: served.append(self.config))
    result = cli_runner().invoke(cli, ["--store", "memory:", "serve", "--host", "127.0.0.1", "--port", "0",
                                       "--expose"], catch_exceptions=False)
    assert result.exit_code == 0 and served
    assert "?token=" in result.stderr
    plain = cli_runner().invoke(cli, ["--store", "memory:", "serve", "--port", "0"], catch_exceptions=False)
    assert plain.exit_code == 0 and "?token=" not in plain.stderr


# --------------------------------------------------------------------------- the property


_PIECES = ["/", "..", ".", "x", ":", "\\", "\x00", "\x1b", "~", " ", "@OUT@", "2026-03-01T10:00:00Z", "_", "\n"]
_HOSTILE = st.one_of(st.text(max_size=30),
                     st.lists(st.sampled_from(_PIECES), max_size=8).map("".join),
                     st.integers(min_value=-(2 ** 63), max_value=2 ** 63 - 1), st.none())


def _tree(base: Path) -> set[str]:
    return {str(p) for p in base.rglob("*")}


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(source=st.sampled_from(["pi", "claude-code", "codex"]), agent=st.sampled_from(["pi", "atomic", "own"]),
       use_dir=st.booleans(), elsewhere=st.booleans(), stamp=_HOSTILE, cwd=_HOSTILE, ident=_HOSTILE,
       entry_stamp=_HOSTILE, entry_id=_HOSTILE)
def test_no_session_content_moves_a_write_out_of_the_folder(_fake_home, tmp_path, source, agent, use_dir, elsewhere,
                                                            stamp, cwd, ident, entry_stamp, entry_id):
    # agent "own": a Claude Code or Codex session written back as its agent's own file (resume);
    # elsewhere: the file was synced from a folder outside the agent's, so its place is computed
    # from the session's content.
    outside = str(tmp_path / "outside")

    def put(value):
        return value.replace("@OUT@", outside) if isinstance(value, str) else value

    stamp, cwd, ident, entry_stamp, entry_id = map(put, (stamp, cwd, ident, entry_stamp, entry_id))
    store = MemoryStore()
    if source == "pi":
        header = {**head(), "createdAt": stamp, "cwd": cwd}
        if isinstance(ident, str) and ident:
            header["id"] = ident
        record = {**entries(1, 1, None)[0], "timestamp": entry_stamp}
        try:
            store.create(header, [record])
        except (SessionError, ValueError, TypeError):
            assume(False)
        session_id = header["id"]
    else:
        if source == "claude-code":
            records = claude_records()
            for item in records:
                item.update(timestamp=stamp, cwd=cwd, uuid=item.get("uuid") and f"{entry_id}{item['uuid']}")
                if item.get("parentUuid"):
                    item["parentUuid"] = f"{entry_id}{item['parentUuid']}"
            folder = _fake_home / ".claude" / "projects" / "-p"
        else:
            records = codex_records()
            records[0]["payload"].update(timestamp=stamp, cwd=cwd, **({"id": ident} if ident else {}))
            for item in records[1:]:
                item["timestamp"] = entry_stamp
            folder = _fake_home / ".codex" / "sessions" / "2026" / "03" / "03"
        if elsewhere:
            folder = tmp_path / "elsewhere"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"rollout-{os.urandom(4).hex()}.jsonl"
        path.write_bytes(jl(records))
        result = Syncer(store).sync_file(str(path))
        assume(result.status == "new" and result.session_id)
        session_id = str(result.session_id)
        path.unlink()  # gone since the sync: resume writes it back
    home = str(tmp_path / "home")
    own = {"claude-code": (".claude", "projects"), "codex": (".codex", "sessions")}
    assume(agent != "own" or source in own)
    folders = {"pi": SESSIONS, "atomic": (".atomic", "agent", "sessions"), **own}
    root = tmp_path / "dir" if use_dir else Path(home).joinpath(*folders[source if agent == "own" else agent])
    before = _tree(tmp_path)
    directory = str(root) if use_dir else None
    try:
        if agent == "own":
            done = restore_source(store, session_id, directory=directory, environ={}, home=home)
        else:
            done = restore(store, session_id, agent=agent, directory=directory, environ={}, home=home)
    except RestoreError:
        done = None
    event(f"{agent} {'refused' if done is None else done.status}")
    added = _tree(tmp_path) - before
    inside = str(root) + os.sep
    chain = {str(root), *map(str, root.parents)}  # the folder itself is made when missing
    assert all(path.startswith(inside) or path in chain for path in added), added
    if done is not None:
        assert done.path.startswith(inside) and os.path.isfile(done.path)
        assert os.path.realpath(done.path).startswith(os.path.realpath(root) + os.sep)


def test_sync_watch_of_the_agents_folders_leaves_files_behind_a_link_alone(_fake_home, tmp_path):
    from sessiontree.cli.sync import _inside

    own = write_agent_file(_fake_home)
    unrelated = tmp_path / "unrelated"
    unrelated.mkdir()
    (unrelated / "x.jsonl").write_bytes(b"{}\n")
    sessions = _fake_home.joinpath(*SESSIONS)
    (sessions / "--linked--").symlink_to(unrelated)
    assert _inside([str(sessions)], str(own))
    assert not _inside([str(sessions)], str(sessions / "--linked--" / "x.jsonl"))
    assert not _inside([str(sessions)], str(tmp_path / "elsewhere.jsonl"))


@pytest.mark.parametrize(("created", "stamp"), [
    # The seed's "Session files": <timestamp>_<session id>.jsonl, pi's timestamp being its
    # creation time as toISOString() gives it with ":" and "." as "-" (always UTC).
    ("2026-03-01T10:00:00.000Z", "2026-03-01T10-00-00-000Z"),
    ("2026-03-01T10:00:00.5Z", "2026-03-01T10-00-00-500Z"),
    ("2026-03-01T12:00:00.000+02:00", "2026-03-01T10-00-00-000Z"),  # an offset: the same instant, in UTC
    (1_772_359_200_000, "2026-03-01T10-00-00-000Z"),  # epoch milliseconds (an early header)
])
def test_a_session_file_is_named_as_the_seed_names_it(created, stamp):
    from sessiontree.sync.safepath import session_file_name

    assert session_file_name({"id": SID, "createdAt": created}) == f"{stamp}_{SID}.jsonl"


def test_a_time_that_does_not_parse_names_the_file_by_the_current_time():
    from sessiontree.sync.safepath import session_file_name

    for hostile in ("/any/where/pwn", "2026-13-45T99:00:00Z", "", None, -5, True):
        name = session_file_name({"id": SID, "createdAt": hostile}, now=1_772_359_200.0)
        assert name == f"2026-03-01T10-00-00-000Z_{SID}.jsonl", hostile
