"""``resume`` and ``restore`` speak the session's agent (issue 39, item 5; docs/agent-loop.md, "Each
agent's own file"): ``claude --resume ID`` and ``codex resume ID`` in the session's cwd, the agent's
own file written back verbatim into its own folder layout when it was removed, nothing written under
another agent's folder, a pi file only with ``--as pi`` (which ``sync`` then sees as unchanged), and
the folder names each agent uses, learnt from the real corpus layout (``../shared/corpus``).

The Claude Code and Codex files of the command tests are the synthetic ones of foreign_support (the
layout is what matters here); the folder-name tests read the real files.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

import corpus
from cli_support import run_cli, run_cli_json
from foreign_support import CC_SID, CODEX_SID, CWD, write_claude, write_codex
from sessiontree.sync.restore import _codex_parts, claude_project_folder
from sync_support import SID
from sync_support import agent_file as write_agent_file

pytestmark = pytest.mark.usefixtures("_fake_home")

FOLDERS = {"pi": (".pi",), "claude-code": (".claude",), "codex": (".codex",)}


def _files(home: Path) -> set[Path]:
    return {p for p in home.rglob("*") if p.is_file()}


def _three_agents(home: Path, db: str) -> dict[str, tuple[str, Path]]:
    """A pi, a Claude Code and a Codex session file in the fake home, synced; agent -> (id, path)."""
    found = {"pi": (SID, write_agent_file(home)), "claude-code": (CC_SID, write_claude(home)),
             "codex": (CODEX_SID, write_codex(home))}
    report = run_cli_json(db, "sync")
    assert sorted(f["status"] for f in report["files"]) == ["new"] * 3
    return found


# --------------------------------------------------------------------------- the agents' folder names


def _first_cwd(path: Path) -> str | None:
    for raw in path.read_bytes().splitlines():
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("cwd"), str):
            return record["cwd"]
    return None


@corpus.needs_shared
def test_claude_codes_project_folder_names_are_the_real_ones():
    # Every Claude Code file of the corpus sits in the folder Claude Code made for the cwd of its
    # first record, except sample-project, whose publisher renamed it (FOREIGN.md: paths sanitized).
    checked = 0
    for path in corpus.foreign_files("claude-code"):
        folder = path.parent.name
        if folder == "sample-project" or path.suffix != ".jsonl":
            continue
        cwd = _first_cwd(path)
        assert cwd is not None, path
        assert claude_project_folder(cwd) == folder, (path, cwd)
        checked += 1
    assert checked == 10  # the files outside sample-project (corpus/claude-code/projects/-*/: 2+1+2+1+2+2)


@corpus.needs_shared
@pytest.mark.parametrize(("name", "zone"), [
    ("2025/09/26/rollout-2025-09-26T17-01-04-019985ca-7ef7-7580-a921-c20ac619f40b.jsonl", "Asia/Kolkata"),
    ("2025/12/09/rollout-2025-12-09T19-55-16-019b04ae-b1c6-7c72-a134-a4c2de66058c.jsonl", "UTC"),
])
def test_codex_names_a_rollout_by_its_start_in_local_time(monkeypatch, name, zone):
    # The real rollouts: session_meta.payload.timestamp 11:31:04.567Z is 17:01:04 in UTC+5:30, the
    # time in the file's name and folders; the December one was written in UTC.
    path = corpus.shared("codex/sessions") / name
    meta = json.loads(path.read_bytes().split(b"\n", 1)[0])
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        parts = _codex_parts({"createdAt": meta["payload"]["timestamp"]}, meta["payload"]["id"])
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert "/".join(parts) == name


# --------------------------------------------------------------------------- resume per agent


@pytest.mark.parametrize("agent", ["pi", "claude-code", "codex"])
def test_resume_per_agent_writes_nothing_under_another_agents_folder(_fake_home, tmp_path, agent):
    # Before: resume of a Claude Code or Codex session wrote a pi file into ~/.pi and printed pi's command.
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    session_id, path = _three_agents(_fake_home, db)[agent]
    data = path.read_bytes()
    path.unlink()  # removed (or archived) since the sync
    before = _files(_fake_home)
    result = run_cli_json(db, "resume", session_id[:8])
    assert _files(_fake_home) - before == {path} and path.read_bytes() == data
    assert result["path"] == str(path) and result["sha256"] == hashlib.sha256(data).hexdigest()
    assert result["byteExact"] is True and result["cwd"] == (CWD if agent != "pi" else "/home/me/project")
    expected = {"pi": ["pi", "--session", str(path)], "claude-code": ["claude", "--resume", CC_SID],
                "codex": ["codex", "resume", CODEX_SID]}[agent]
    assert result["command"] == expected
    line = run_cli(db, "resume", session_id[:8]).stdout.splitlines()[-1]
    assert line == f"cd {result['cwd']} && {' '.join(expected)}"
    assert _files(_fake_home) - before == {path}  # the file in place: nothing more written


def test_resume_exec_runs_claude_in_the_sessions_folder(_fake_home, tmp_path, monkeypatch):
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    _three_agents(_fake_home, db)
    calls: list[tuple] = []
    monkeypatch.setattr(os, "chdir", lambda path: calls.append(("cd", path)))
    monkeypatch.setattr(os, "execvp", lambda program, argv: calls.append((program, list(argv))))
    run_cli(db, "resume", CC_SID[:8], "--exec")
    assert calls == [("cd", CWD), ("claude", ["claude", "--resume", CC_SID])]
    calls.clear()
    run_cli(db, "resume", CC_SID[:8], "--fork", "--exec")
    assert calls[-1] == ("claude", ["claude", "--resume", CC_SID, "--fork-session"])


def test_codex_has_no_fork_and_says_so(_fake_home, tmp_path):
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    _three_agents(_fake_home, db)
    error = run_cli(db, "resume", CODEX_SID[:8], "--fork", code=1, one_error_line=True).stderr
    assert "codex resume has no fork" in error


def test_a_pi_file_of_a_foreign_session_only_when_asked_and_sync_sees_it_unchanged(_fake_home, tmp_path):
    # Before: the pi file restore wrote made every later sync report it diverged (exit 1).
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    found = _three_agents(_fake_home, db)
    pi_folder = _fake_home / ".pi" / "agent" / "sessions"
    before = _files(pi_folder)
    for agent in ("claude-code", "codex"):
        session_id, path = found[agent]
        now = _files(pi_folder)
        assert run_cli_json(db, "restore", session_id[:8])["path"] == str(path)  # its own file, in place
        assert _files(pi_folder) == now
        written = Path(run_cli_json(db, "restore", session_id[:8], "--agent", "pi")["path"])
        assert written.parent.parent == pi_folder and written.name.endswith(f"_{session_id}.jsonl")
    report = run_cli_json(db, "sync")
    assert {f["status"] for f in report["files"]} == {"unchanged"} and len(report["files"]) == 5
    # Unchanged by stat, and unchanged when read whole as well.
    for path in _files(pi_folder) - before:
        os.utime(path, (time.time() + 5, time.time() + 5))
    assert {f["status"] for f in run_cli_json(db, "sync")["files"]} == {"unchanged"}


def test_restore_as_pi_is_the_spelling_the_docs_use(_fake_home, tmp_path):
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    _three_agents(_fake_home, db)
    result = run_cli_json(db, "restore", CC_SID[:8], "--as", "pi")
    assert result["path"].startswith(str(_fake_home / ".pi" / "agent" / "sessions" / "--home-me-proj--"))


def test_a_session_synced_from_elsewhere_goes_to_the_agents_own_layout(_fake_home, tmp_path):
    # Synced from a folder given as PATH: the recorded path is not in Claude Code's folder, so the
    # file goes where Claude Code keeps it: projects/<cwd as Claude names it>/<id>.jsonl.
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    source = write_claude(tmp_path / "elsewhere")
    run_cli(db, "sync", str(source))
    before = _files(_fake_home)
    result = run_cli_json(db, "restore", CC_SID[:8])
    target = _fake_home / ".claude" / "projects" / "-home-me-proj" / f"{CC_SID}.jsonl"
    assert result["path"] == str(target) and target.read_bytes() == source.read_bytes()
    assert _files(_fake_home) - before == {target}


def test_the_viewer_shows_the_agents_own_command(_fake_home, tmp_path):
    from starlette.testclient import TestClient

    from sessiontree.stores.sqlite.store import SqliteStore
    from sessiontree.web.app import create_app

    db = tmp_path / "cli.db"
    found = _three_agents(_fake_home, f"sqlite:///{db}")
    store = SqliteStore(str(db))
    try:
        page = TestClient(create_app(store), base_url="http://127.0.0.1:8765").get(f"/s/{CC_SID}").text
        assert f'<code id="resume-command">cd {CWD} &amp;&amp; claude --resume {CC_SID}</code>' in page
        found["codex"][1].unlink()
        page = TestClient(create_app(store), base_url="http://127.0.0.1:8765").get(f"/s/{CODEX_SID}").text
        assert f'<code id="resume-command">sessiontree resume {CODEX_SID}</code>' in page
    finally:
        store.close()


def test_a_claude_subagent_transcript_is_resumed_through_its_session(_fake_home, tmp_path):
    from foreign_support import write_subagent

    db = f"sqlite:///{tmp_path / 'cli.db'}"
    _three_agents(_fake_home, db)
    write_subagent(_fake_home)
    run_cli(db, "sync")
    [child] = [s["id"] for s in run_cli_json(db, "list", "--all") if "-agent-" in s["id"]]
    error = run_cli(db, "resume", child, code=1, one_error_line=True).stderr
    assert "subagent" in error and CC_SID in error
