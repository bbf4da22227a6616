"""The command line, driven through its real entry point against temporary stores.

Every command is exercised through click's ``CliRunner`` on ``sessiontree.cli.cli``
(the object behind the ``sessiontree`` console script), plus one run of the
installed script in a subprocess. Each test uses a SQLite store under
``tmp_path`` (``--store`` or ``$SESSIONTREE_STORE``); the user's data
directory is redirected to ``tmp_path`` too, so a test can never touch real data.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

import corpus
from cli_support import cli_runner, run_cli, run_cli_json
from sessiontree.cli import cli
from sessiontree.format.codec import read_session_file
from sessiontree.session.manager import SessionManager
from sessiontree.stores import open_store

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CORPUS = corpus.shared_pi_folder()
CORPUS_FILES = corpus.shared_files()

BRANCHING = "019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01"
COMPACTION = "019cadc9-1f40-7b2e-8d3c-4a5b6c7d8e02"
INTERRUPTED = "019cadd2-8a00-7c1f-a2b3-5c6d7e8f9003"
LARGE = "d703a1a9-1b7b-4fb1-b512-c9738b1fe617"
BEFORE_COMPACTION = "ffae836b-9420-4060-ac13-7745215f90ff"


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """Never the user's data directory: the default store and XDG dirs point into tmp_path."""
    monkeypatch.setenv("SESSIONTREE_STORE", f"sqlite:///{tmp_path / 'env-default.db'}")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture
def db(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'sessions.db'}"


_runner = cli_runner
run = run_cli
run_json = run_cli_json


@pytest.fixture
def loaded(db) -> str:
    """A store holding the three example sessions."""
    run(db, "import", str(EXAMPLES))
    return db


# --------------------------------------------------------------------------- import


def test_import_directory_then_reimport_is_idempotent(db):
    result = run(db, "import", str(EXAMPLES))
    assert "3 imported, 0 already present, 0 rejected" in result.stdout
    for session_id in (BRANCHING, COMPACTION, INTERRUPTED):
        assert session_id in result.stdout
    before = run(db, "export", BRANCHING).stdout_bytes

    again = run_json(db, "import", str(EXAMPLES))
    assert (again["imported"], again["present"], again["rejected"]) == (0, 3, 0)
    assert {row["reason"] for row in again["files"]} == {"already present"}
    assert run(db, "export", BRANCHING).stdout_bytes == before
    assert len(run_json(db, "list")) == 3


def test_import_recurses_and_gives_a_reason_for_every_rejected_file(db, tmp_path):
    tree = tmp_path / "in" / "nested" / "deeper"
    tree.mkdir(parents=True)
    shutil.copy(EXAMPLES / "branching.jsonl", tree / "a.jsonl")
    shutil.copy(EXAMPLES / "compaction.jsonl", tmp_path / "in" / "b.jsonl")
    (tmp_path / "in" / "notes.txt").write_text("ignored: not *.jsonl")
    (tmp_path / "in" / "torn.jsonl").write_bytes(
        (EXAMPLES / "interrupted.jsonl").read_bytes() + b'{"type":"message","id":"c1')
    (tmp_path / "in" / "nested" / "empty.jsonl").write_bytes(b"")
    (tmp_path / "in" / "future.jsonl").write_text('{"type":"session","version":9,"id":"x","cwd":"/"}\n')
    (tmp_path / "empty-dir").mkdir()

    data = run_json(db, "import", str(tmp_path / "in"), str(tmp_path / "missing.jsonl"),
                    str(tmp_path / "empty-dir"), code=1)
    by_name = {Path(row["path"]).name: row for row in data["files"]}
    assert by_name["a.jsonl"]["status"] == "imported"
    assert by_name["b.jsonl"]["status"] == "imported"
    assert "notes.txt" not in by_name
    assert "torn final record" in by_name["torn.jsonl"]["reason"]
    assert "line 5" in by_name["torn.jsonl"]["reason"]
    assert "empty" in by_name["empty.jsonl"]["reason"]
    assert "unsupported session version 9" in by_name["future.jsonl"]["reason"]
    assert by_name["missing.jsonl"]["reason"] == "no such file or directory"
    assert by_name["empty-dir"]["reason"] == "directory contains no *.jsonl files"
    assert (data["imported"], data["present"], data["rejected"]) == (2, 0, 5)
    assert {row["id"] for row in run_json(db, "list")} == {BRANCHING, COMPACTION}


def test_import_human_output_and_exit_status(db, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    result = run(db, "import", str(EXAMPLES / "branching.jsonl"), str(bad), code=1)
    assert "imported" in result.stdout and "rejected" in result.stdout
    assert "line 1: malformed line" in result.stdout
    assert "1 imported, 0 already present, 1 rejected" in result.stdout
    assert result.stderr.strip() == "sessiontree: error: 1 of 2 files rejected"


def test_import_same_id_with_different_content_is_rejected(loaded, tmp_path):
    changed = tmp_path / "changed.jsonl"
    text = (EXAMPLES / "branching.jsonl").read_text().replace("Try option 1: quote it.", "Try option 1.")
    changed.write_text(text)
    data = run_json(loaded, "import", str(changed), code=1)
    assert data["files"][0]["status"] == "rejected"
    assert data["files"][0]["reason"] == "session id already present with different content"
    assert "Try option 1: quote it." in run(loaded, "export", BRANCHING).stdout


def test_import_keeps_the_files_own_cwd(loaded):
    rows = run_json(loaded, "list", "--cwd", "/home/dev/projects/weather-app")
    assert {row["id"] for row in rows} == {BRANCHING, COMPACTION}


# --------------------------------------------------------------------------- list


def _internal_session(tmp_path: Path) -> Path:
    path = tmp_path / "stage.jsonl"
    header = {"type": "session", "version": 4, "id": "workflow-stage-1", "createdAt": "2026-03-03T08:00:00.000Z",
              "cwd": "/home/dev/projects/notes", "internal": True,
              "workflow": {"runId": "run-1", "stageId": "stage-build", "stageName": "build"}}
    entry = {"type": "message", "id": "d1000001", "parentId": None, "timestamp": "2026-03-03T08:00:01.000Z",
             "message": {"role": "user", "content": "build the docs", "timestamp": 1772524801000}}
    path.write_text(json.dumps(header) + "\n" + json.dumps(entry) + "\n")
    return path


def test_list_newest_first_with_filters(loaded, tmp_path):
    run(loaded, "import", str(_internal_session(tmp_path)))
    rows = run_json(loaded, "list")
    assert [row["id"] for row in rows] == [INTERRUPTED, COMPACTION, BRANCHING]
    assert rows[2]["name"] == "Fix 500 on city names with spaces"

    assert next(r["id"] for r in run_json(loaded, "list", "--internal")) == "workflow-stage-1"
    assert len(run_json(loaded, "list", "--all")) == 4
    assert [r["id"] for r in run_json(loaded, "list", "--cwd", "/home/dev/projects/notes")] == [INTERRUPTED]
    assert [r["id"] for r in run_json(loaded, "list", "--cwd", "/home/dev/projects/notes", "--internal")] == [
        "workflow-stage-1", INTERRUPTED]
    assert [r["id"] for r in run_json(loaded, "list", "-n", "1")] == [INTERRUPTED]
    assert run_json(loaded, "list", "--cwd", "/nowhere") == []

    table = run(loaded, "list", "--all").stdout
    assert table.splitlines()[0].split()[:3] == ["id", "modified", "msgs"]
    assert "[workflow build] build the docs" in table
    assert BRANCHING[:8] in table and BRANCHING not in table and "Fix 500 on city names with spaces" in table
    assert BRANCHING in run(loaded, "list", "--full-ids").stdout
    assert "No sessions for /nowhere." in run(loaded, "list", "--cwd", "/nowhere").stdout


def test_list_usage_errors_exit_2(loaded):
    result = run(loaded, "list", "--all", "--cwd", "/x", code=2)
    assert "cannot be combined" in result.stderr
    run(loaded, "list", "--limit", "0", code=2)


def test_store_from_environment_and_plain_path(tmp_path, monkeypatch):
    db_path = tmp_path / "from-env.db"
    monkeypatch.setenv("SESSIONTREE_STORE", f"sqlite:///{db_path}")
    run(None, "import", str(EXAMPLES / "compaction.jsonl"))
    assert db_path.exists()
    assert [r["id"] for r in run_json(str(db_path), "list")] == [COMPACTION]
    # --store wins over the environment.
    other = f"sqlite:///{tmp_path / 'other.db'}"
    run(other, "import", str(EXAMPLES / "branching.jsonl"))
    assert [r["id"] for r in run_json(other, "list")] == [BRANCHING]


def test_jsonl_store_directory(tmp_path):
    store_dir = tmp_path / "jsonl-store"
    store_dir.mkdir()
    run(str(store_dir), "import", str(EXAMPLES))
    assert len(list(store_dir.glob("*.jsonl"))) == 3
    assert next(r["id"] for r in run_json(f"jsonl:///{store_dir}", "list")) == INTERRUPTED


@corpus.needs_shared
def test_read_only_commands_never_write_to_a_jsonl_store(tmp_path):
    store_dir = tmp_path / "old-files"
    store_dir.mkdir()
    old = store_dir / "old.jsonl"
    shutil.copy(CORPUS_FILES[0], old)  # format 1
    original = old.read_bytes()
    store = str(store_dir)
    session_id = read_session_file(old).header["id"]
    run(store, "list")
    run(store, "show", session_id[:6], "--tree")
    run(store, "context", session_id[:6])
    run(store, "export", session_id[:6], "--format", "markdown")
    run(store, "export", session_id[:6])
    assert old.read_bytes() == original


# --------------------------------------------------------------------------- show


def test_show_header_info_and_tree(loaded):
    out = run(loaded, "show", "019cadb4", "--tree").stdout
    assert BRANCHING in out
    assert "Fix 500 on city names with spaces" in out
    assert "/home/dev/projects/weather-app" in out
    assert "14 (2 leaves; active branch 12 entries)" in out
    lines = out.splitlines()
    branch_point = next(line for line in lines if " a1000005 " in line)
    assert branch_point.startswith("* ")
    assert "[label: two-options]" in branch_point and "[2 branches]" in branch_point
    abandoned = next(line for line in lines if " a1000006 " in line)
    assert abandoned.startswith("├─   a1000006 user: Try option 1")
    taken = next(line for line in lines if " a1000008 " in line)
    assert taken.startswith("└─ * a1000008 branch_summary:")
    leaf = next(line for line in lines if " a100000e " in line)
    assert leaf.endswith("← active leaf")
    assert sum("← active leaf" in line for line in lines) == 1


def test_show_json(loaded):
    data = run_json(loaded, "show", BRANCHING, "--tree")
    assert data["header"]["id"] == BRANCHING
    assert data["info"]["name"] == "Fix 500 on city names with spaces"
    assert data["info"]["messageCount"] == 10
    assert data["leafId"] == "a100000e" and data["entryCount"] == 14 and data["leafCount"] == 2
    assert data["labels"] == {"a1000005": "two-options"}
    rows = {row["id"]: row for row in data["tree"]}
    assert rows["a1000005"]["children"] == 2 and rows["a1000005"]["label"] == "two-options"
    assert rows["a1000006"]["active"] is False and rows["a1000009"]["active"] is True
    assert [r["id"] for r in data["tree"] if r["leaf"]] == ["a100000e"]
    assert "tree" not in run_json(loaded, "show", BRANCHING)


def test_session_prefixes(loaded):
    result = run(loaded, "show", "019cad", code=1)
    assert "ambiguous" in result.stderr and BRANCHING in result.stderr and COMPACTION in result.stderr
    result = run(loaded, "show", "zzz", code=1)
    assert result.stderr.strip() == "sessiontree: error: no session matches 'zzz'"
    assert run_json(loaded, "show", "019cadc")["header"]["id"] == COMPACTION


# --------------------------------------------------------------------------- context


def test_context_compaction_boundary_and_tool_calls(loaded):
    out = run(loaded, "context", COMPACTION).stdout
    assert "model anthropic/claude-sonnet-4-5  thinking medium" in out
    assert "messages 5" in out
    assert "#1 custom compaction  [b1000009]" in out
    assert "verbatim transcript" in out
    assert "(filtered 3 lines)" in out
    assert "[User]: Now take the default from WEATHER_UNITS when it is set." in out
    assert '→ bash(command="pytest -q")' in out
    assert "#4 toolResult bash  [b100000c]" in out


def test_context_json_matches_the_library_projection(loaded, tmp_path):
    data = run_json(loaded, "context", COMPACTION)
    store = open_store(loaded)
    try:
        projection = SessionManager.open(store, COMPACTION).build_session_projection()
    finally:
        store.close()
    assert data["messages"] == json.loads(json.dumps(projection.messages))
    assert data["thinkingLevel"] == "medium"
    assert data["model"] == {"provider": "anthropic", "modelId": "claude-sonnet-4-5"}
    assert [e["id"] for e in data["entries"]][:3] == ["b1000009", "b1000007", "b1000008"]


def test_context_interrupted_tool_call_gets_a_synthetic_result(loaded):
    data = run_json(loaded, "context", INTERRUPTED)
    last = data["messages"][-1]
    assert last["role"] == "toolResult" and last["isError"] is True
    assert "interrupted" in last["content"][0]["text"]
    assert "toolResult bash (error)" in run(loaded, "context", INTERRUPTED).stdout


def test_context_leaf_prefix(loaded):
    data = run_json(loaded, "context", BRANCHING, "--leaf", "a1000007")
    assert data["leafId"] == "a1000007"
    texts = [json.dumps(m) for m in data["messages"]]
    assert any("Try option 1: quote it." in t for t in texts)
    assert not any("option 2 instead" in t for t in texts)
    run(loaded, "context", BRANCHING, "--leaf", "a10000", code=1)
    result = run(loaded, "context", BRANCHING, "--leaf", "ffff", code=1)
    assert "no entry matches 'ffff'" in result.stderr


def test_context_shortens_long_blocks_unless_full(db, tmp_path):
    manager = SessionManager.create("/tmp/project", store=open_store(db))
    manager.append_message({"role": "user", "content": "x" * 5000, "timestamp": 1})
    session_id = manager.get_session_id()
    manager.get_session_store().close()
    assert "3000 more characters; --full shows everything" in run(db, "context", session_id).stdout
    assert "x" * 5000 in run(db, "context", session_id, "--full").stdout


# --------------------------------------------------------------------------- export


def test_export_jsonl_is_byte_identical_and_markdown_is_readable(loaded, tmp_path):
    assert run(loaded, "export", BRANCHING).stdout_bytes == (EXAMPLES / "branching.jsonl").read_bytes()
    target = tmp_path / "out.jsonl"
    result = run(loaded, "export", COMPACTION, "-o", str(target))
    assert target.read_bytes() == (EXAMPLES / "compaction.jsonl").read_bytes()
    assert f"Exported {COMPACTION} to {target}" in result.stderr

    md = run(loaded, "export", BRANCHING, "--format", "markdown").stdout
    assert md.startswith("# Fix 500 on city names with spaces\n")
    assert "## User" in md and "## Assistant" in md and "## Tool result: read" in md
    assert '**Tool call:**\n\n```\nread(path="src/routes/forecast.py")\n```' in md
    assert "## Branch summary" in md
    assert "Try option 1: quote it." not in md  # the abandoned branch is not on the active path
    md = run(loaded, "export", COMPACTION, "--format", "markdown").stdout
    assert "Context compacted here" in md and "Add a --units flag" in md
    run(loaded, "export", BRANCHING, "--format", "pdf", code=2)  # html is a format too (tests/web/test_web.py)


# --------------------------------------------------------------------------- fork, delete, name, label


def test_fork_whole_session_and_at_an_entry(loaded):
    data = run_json(loaded, "fork", "019cadb4")
    assert data["parentSessionId"] == BRANCHING and data["entries"] == 14
    forked = run_json(loaded, "show", data["sessionId"])
    assert forked["header"]["parentSessionId"] == BRANCHING
    assert forked["header"]["cwd"] == "/home/dev/projects/weather-app"

    data = run_json(loaded, "fork", BRANCHING, "--at", "a1000007", "--cwd", "/elsewhere")
    branch = run_json(loaded, "show", data["sessionId"], "--tree")
    assert branch["header"]["cwd"] == "/elsewhere"
    assert branch["leafCount"] == 1
    assert branch["labels"] == {"a1000005": "two-options"}
    assert "a1000008" not in {row["id"] for row in branch["tree"]}

    out = run(loaded, "fork", COMPACTION).stdout
    assert out.startswith(f"Forked {COMPACTION} into ")
    assert len(run_json(loaded, "list")) == 6
    assert run(loaded, "export", BRANCHING).stdout_bytes == (EXAMPLES / "branching.jsonl").read_bytes()


def test_delete_asks_unless_yes(loaded):
    result = run(loaded, "delete", INTERRUPTED[:8], input="n\n")  # declining is not an error
    assert "Nothing deleted." in result.stderr
    assert len(run_json(loaded, "list")) == 3
    run(loaded, "delete", INTERRUPTED[:8], input="y\n")
    assert len(run_json(loaded, "list")) == 2
    assert run_json(loaded, "delete", COMPACTION, "--yes") == {"deleted": [COMPACTION], "failed": []}
    assert run(loaded, "delete", BRANCHING, "-y").stdout.strip() == f"Deleted {BRANCHING}"
    assert run_json(loaded, "list") == []
    run(loaded, "delete", BRANCHING, "-y", code=1)


def test_delete_takes_several_sessions_and_resolves_all_first(loaded):
    # One unknown prefix: nothing is deleted, not even the ones that resolve.
    result = run(loaded, "delete", BRANCHING[:8], "ffffffff", "-y", code=1)
    assert "no session matches 'ffffffff'" in result.stderr
    assert len(run_json(loaded, "list")) == 3
    result = run(loaded, "delete", BRANCHING[:8], COMPACTION[:8], BRANCHING, input="y\n")
    assert f"Delete 2 sessions ({BRANCHING}, {COMPACTION})?" in result.stderr  # duplicates folded
    assert result.stdout.splitlines() == [f"Deleted {BRANCHING}", f"Deleted {COMPACTION}"]
    assert [row["id"] for row in run_json(loaded, "list")] == [INTERRUPTED]


def test_name_and_label(loaded):
    assert run(loaded, "name", COMPACTION, "Units flag").stdout.strip() == f"Named {COMPACTION}: Units flag"
    assert run_json(loaded, "show", COMPACTION)["info"]["name"] == "Units flag"
    data = run_json(loaded, "name", COMPACTION, "")
    assert data["name"] is None
    info = run_json(loaded, "show", COMPACTION)["info"]
    assert info["name"] is None and info["hasName"] is True

    assert run(loaded, "label", COMPACTION, "b1000007", "env-default").stdout.strip() == "Labelled b1000007: env-default"
    assert run_json(loaded, "show", COMPACTION)["labels"] == {"b1000007": "env-default"}
    assert "[label: env-default]" in run(loaded, "show", COMPACTION, "--tree").stdout
    data = run_json(loaded, "label", COMPACTION, "b1000007")
    assert data["label"] is None and data["targetId"] == "b1000007"
    assert run_json(loaded, "show", COMPACTION)["labels"] == {}
    run(loaded, "label", COMPACTION, "b10000", "x", code=1)
    run(loaded, "label", COMPACTION, "nope", "x", code=1)
    run(loaded, "name", "nope", "x", code=1)


# --------------------------------------------------------------------------- migrate


@corpus.needs_shared
def test_migrate_upgrades_in_place_with_backup(tmp_path):
    old = tmp_path / "old.jsonl"
    shutil.copy(CORPUS_FILES[0], old)
    os.chmod(old, 0o644)
    original = old.read_bytes()
    current = tmp_path / "current.jsonl"
    shutil.copy(EXAMPLES / "branching.jsonl", current)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type":"session","id":"x"}\n{oops\n')
    expected = read_session_file(old).to_bytes()

    data = run_json(None, "migrate", str(old), str(current), str(bad), code=1)
    statuses = {Path(r["path"]).name: r for r in data["files"]}
    assert statuses["old.jsonl"]["status"] == "upgraded" and statuses["old.jsonl"]["fromVersion"] == 1
    assert statuses["current.jsonl"]["status"] == "current"
    assert statuses["bad.jsonl"]["status"] == "rejected" and statuses["bad.jsonl"]["reason"].startswith("line 2:")
    assert old.read_bytes() == expected
    assert read_session_file(old).source_version == 4 and not read_session_file(old).upgraded
    assert (tmp_path / "old.jsonl.bak").read_bytes() == original
    assert current.read_bytes() == (EXAMPLES / "branching.jsonl").read_bytes()
    assert not (tmp_path / "current.jsonl.bak").exists()
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]

    out = run(None, "migrate", str(old)).stdout
    assert out.strip() == f"skipped   {old} (already format 4)"


def test_migrate_no_backup_and_human_output(tmp_path):
    old = tmp_path / "v3.jsonl"
    old.write_text(
        '{"type":"session","version":3,"id":"s-v3","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/p"}\n'
        '{"type":"message","id":"e1000001","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z",'
        '"message":{"role":"user","content":"hi","timestamp":1735689601000}}\n')
    out = run(None, "migrate", "--no-backup", str(old)).stdout
    assert out.strip() == f"upgraded  {old} (format 3 -> 4)"
    assert not (tmp_path / "v3.jsonl.bak").exists()
    header = json.loads(old.read_text().splitlines()[0])
    assert header["version"] == 4 and header["createdAt"] == "2025-01-01T00:00:00.000Z"
    result = run(None, "migrate", str(tmp_path / "missing.jsonl"), code=1)
    assert "No such file or directory" in result.stdout


# --------------------------------------------------------------------------- errors and entry point


def test_usage_errors_exit_2(loaded):
    run(loaded, "frobnicate", code=2)
    run(loaded, "show", code=2)
    run(loaded, "import", code=2)
    run(loaded, "export", BRANCHING, "--format", "pdf", code=2)
    run(loaded, "context", BRANCHING, "--bogus-option", code=2)
    result = run(loaded, "frobnicate", code=2)
    assert "No such command 'frobnicate'" in result.stderr


def test_user_errors_are_one_line_without_traceback(tmp_path):
    result = run("postgresql://u:secret@127.0.0.1:1/db", "list", code=1)  # nothing listens on port 1
    assert "cannot open postgresql://u@127.0.0.1:1/db" in result.stderr and "secret" not in result.stderr
    assert "Traceback" not in result.stderr
    result = run("bogus://x", "list", code=1)
    assert "unknown store URL scheme" in result.stderr
    blocker = tmp_path / "file"
    blocker.write_text("")
    run(f"sqlite:///{blocker}/sub/s.db", "list", code=1)


def test_help_documents_the_listing_choice():
    out = run(None, "list", "--help").stdout
    assert "--cwd" in out and "--internal" in out and "--all" in out
    top = run(None, "--help").stdout
    for command in ("import", "list", "show", "context", "export", "fork", "delete", "name", "label", "migrate"):
        assert command in top


@pytest.mark.slow
@corpus.needs_shared
def test_corpus_through_the_installed_script(tmp_path):
    """The README's flow: import the corpus, list, show --tree, context, via the console script."""
    script = Path(sys.executable).with_name("sessiontree")
    if not script.exists():
        pytest.skip("console script not installed next to the interpreter")
    env = {**os.environ, "SESSIONTREE_STORE": f"sqlite:///{tmp_path / 'corpus.db'}",
           "XDG_DATA_HOME": str(tmp_path / "xdg")}

    def sh(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(script), *args], capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == code, (args, done.stdout, done.stderr)
        return done

    sh("import", str(CORPUS))
    assert "0 imported, 2 already present" in sh("import", str(CORPUS)).stdout
    listing = sh("list").stdout
    assert [line.split()[0] for line in listing.splitlines()[1:]] == [BEFORE_COMPACTION[:8], LARGE[:8]]
    assert LARGE in sh("list", "--full-ids").stdout
    tree = sh("show", "d703", "--tree").stdout
    assert "1018 (1 leaf; active branch 1018 entries)" in tree and "← active leaf" in tree
    assert "messages 914" in sh("context", "d703").stdout
    data = json.loads(sh("context", "ffae", "--json").stdout)
    assert len(data["messages"]) == 991  # 990 stored + 1 synthetic result (seed:interrupted-tool-calls)
    failed = sh("show", "no-such-session", code=1)
    assert failed.stderr == "sessiontree: error: no session matches 'no-such-session'\n"
    assert sh("frobnicate", code=2).stderr.startswith("Usage:")


def test_main_is_the_console_entry_point():
    from importlib.metadata import entry_points

    scripts = {ep.name: ep.value for ep in entry_points(group="console_scripts")}
    assert scripts.get("sessiontree") == "sessiontree._launch:main"
    assert isinstance(cli, click.Group)


# --------------------------------------------------------------------------- check


def _damaged(tmp_path: Path) -> Path:
    path = tmp_path / "damaged.jsonl"
    glued = (b'{"type":"message","id":"zz000001","parentId":"c1000003","timestamp":"2026-03-02T09:30:00.000Z",'
             b'"message":{"role":"user","content":"x"}}'
             b'{"type":"message","id":"zz000002","parentId":"zz000001","timestamp":"2026-03-02T09:30:01.000Z",'
             b'"message":{"role":"user","content":"y"}}\n')
    path.write_bytes((EXAMPLES / "interrupted.jsonl").read_bytes() + glued + b'{"type":"mess')
    return path


def test_check_reports_every_problem_with_file_and_line(tmp_path):
    damaged = _damaged(tmp_path)
    before = damaged.read_bytes()
    result = run(None, "check", str(EXAMPLES), str(damaged), code=1)
    out = result.stdout
    assert f"{EXAMPLES / 'branching.jsonl'}: ok" in out
    assert f"{damaged}:5: error: " in out and "[glued-records]" in out
    assert f"{damaged}:6: error: " in out and "[torn-final-record]" in out
    assert f"{damaged}:4: warning: " in out and "[tool-call-without-result]" in out
    assert "4 files checked: 2 errors, 2 warnings" in out
    assert result.stderr.strip() == "sessiontree: error: errors found"
    assert damaged.read_bytes() == before  # check only reads

    data = run_json(None, "check", str(damaged), code=1)
    assert [(p["line"], p["code"]) for p in data[0]["problems"] if p["severity"] == "error"] == [
        (5, "glued-records"), (6, "torn-final-record")]
    assert run(None, "check", str(EXAMPLES / "compaction.jsonl")).stdout.endswith("0 errors, 0 warnings\n")


def test_check_repair_writes_a_fixed_copy(tmp_path, db):
    damaged = _damaged(tmp_path)
    before = damaged.read_bytes()
    out = run(None, "check", "--repair", str(damaged)).stdout
    copy = tmp_path / "damaged.repaired.jsonl"
    assert f"repaired copy written to {copy} (2 changes)" in out
    assert "0 errors left after repair" in out
    assert damaged.read_bytes() == before
    run(db, "import", str(copy))
    assert len(run_json(db, "context", INTERRUPTED)["messages"]) == 5

    target = tmp_path / "fixed.jsonl"
    data = run_json(None, "check", "--repair", "-o", str(target), str(damaged))
    assert data[0]["outPath"] == str(target) and target.exists()
    assert [c["code"] for c in data[0]["changes"]] == ["glued-records", "torn-final-record"]
    run(None, "check", "-o", str(target), str(damaged), code=2)
    run(None, "check", "--repair", "-o", str(damaged), str(damaged), code=1)
    result = run(None, "check", str(tmp_path / "missing.jsonl"), code=1)
    assert "cannot check: no such file or directory" in result.stdout


# --------------------------------------------------------------------------- hostile session text


def test_session_text_is_data_not_markup_or_terminal_codes(db, tmp_path):
    manager = SessionManager.create(str(tmp_path / "[/x] project"), store=open_store(db))
    first = manager.append_message({"role": "user", "timestamp": 1700000000000,
                                    "content": 'Why does re.split(r"[/\\]", p) fail? \x1b[31mred\x1b[0m'})
    manager.append_session_info("[/bold] oops")
    manager.append_label_change(first, "[/x]")
    session_id = manager.get_session_id()
    manager.get_session_store().close()
    listing = run(db, "list").stdout
    assert "[/bold] oops" in listing
    shown = run(db, "show", session_id, "--tree").stdout
    assert "[/bold] oops" in shown and "[label: [/x]]" in shown and "[/x] project" in shown
    context = run(db, "context", session_id).stdout
    assert 're.split(r"[/\\]", p)' in context
    assert "\x1b" not in context and "\\x1b[31mred\\x1b[0m" in context


def test_name_and_label_repeat_appends_nothing(loaded):
    before = run_json(loaded, "show", COMPACTION)["entryCount"]
    assert run_json(loaded, "name", COMPACTION, "Same")["changed"] is True
    data = run_json(loaded, "name", COMPACTION, " Same ")
    assert data["changed"] is False and data["entryId"] is None
    assert run(loaded, "name", COMPACTION, "Same").stdout.strip() == f"Unchanged: {COMPACTION} is named Same"
    assert run_json(loaded, "label", COMPACTION, "b1000007")["changed"] is False  # no label to clear
    assert run_json(loaded, "label", COMPACTION, "b1000007", "x")["changed"] is True
    assert run_json(loaded, "label", COMPACTION, "b1000007", "x")["changed"] is False
    assert run_json(loaded, "show", COMPACTION)["entryCount"] == before + 2


def test_unanswered_confirmation_is_a_one_line_error(loaded):
    result = run(loaded, "delete", COMPACTION, input="", code=1)
    assert "aborted" in result.stderr
    assert COMPACTION in [row["id"] for row in run_json(loaded, "list")]


def test_list_times_are_utc(loaded, monkeypatch):
    monkeypatch.setenv("TZ", "America/New_York")
    row = next(r for r in run_json(loaded, "list") if r["id"] == COMPACTION)
    shown = row["modified"][:16].replace("T", " ") + "Z"  # ISO UTC from --json, to the minute
    assert shown in run(loaded, "list").stdout


def test_read_only_commands_never_create_a_store(tmp_path):
    missing_db = tmp_path / "nodir" / "typo.db"
    result = run(f"sqlite:///{missing_db}", "list", code=1)
    assert "no session store at" in result.stderr
    assert not missing_db.exists() and not missing_db.parent.exists()
    missing_dir = tmp_path / "nosuchdir"
    run(f"jsonl:///{missing_dir}", "list", code=1)
    assert not missing_dir.exists()
    run(f"sqlite:///{missing_db}", "import", str(EXAMPLES))  # import may start a store
    assert missing_db.exists()


def test_check_of_a_missing_path_says_so(tmp_path):
    result = run(None, "check", str(tmp_path / "missing.jsonl"), code=1)
    assert "0 files checked" in result.stdout and "1 path could not be checked" in result.stdout
    assert result.stderr.strip() == "sessiontree: error: some paths could not be checked"


def _interrupt_read(monkeypatch, nth: int):
    """Make the importer's ``read_file`` raise ``KeyboardInterrupt`` (Ctrl-C) on its
    ``nth`` call; the real ``read_file``, to put back."""
    import sessiontree.session.importing as importing_module

    real = importing_module.read_file
    calls = []

    def interrupt_on_nth(path):
        calls.append(path)
        if len(calls) == nth:
            raise KeyboardInterrupt
        return real(path)

    monkeypatch.setattr(importing_module, "read_file", interrupt_on_nth)
    return real


def test_ctrl_c_during_import_reports_what_was_done_and_exits_130(db, tmp_path, monkeypatch):
    import sessiontree.session.importing as importing_module

    # Groups of one file: the first file's group commits before the second is read.
    monkeypatch.setattr(importing_module, "IMPORT_BATCH_SESSIONS", 1)
    real = _interrupt_read(monkeypatch, 2)
    result = _runner().invoke(cli, ["--store", db, "import", str(EXAMPLES)])
    assert result.exit_code == 130
    # The three examples in name order: branching imported, compaction interrupted, interrupted.jsonl not reached.
    assert "1 imported, 0 already present, 0 rejected, 2 not done (interrupted)" in result.stdout
    assert "interrupted: 1 imported, 2 files left; run the same import again to finish" in result.stderr
    assert [row["id"] for row in run_json(db, "list")] == [BRANCHING]
    monkeypatch.setattr(importing_module, "read_file", real)
    assert run_json(db, "import", str(EXAMPLES))["imported"] == 2


def test_ctrl_c_inside_a_group_reports_none_of_it_and_rerunning_imports_all(db, monkeypatch):
    import sessiontree.session.importing as importing_module

    # One group of up to 100 files: two were read, none written, so none is reported.
    real = _interrupt_read(monkeypatch, 3)
    result = _runner().invoke(cli, ["--store", db, "import", str(EXAMPLES)])
    assert result.exit_code == 130
    assert "0 imported, 0 already present, 0 rejected, 3 not done (interrupted)" in result.stdout
    assert run_json(db, "list") == []
    monkeypatch.setattr(importing_module, "read_file", real)
    assert run_json(db, "import", str(EXAMPLES))["imported"] == 3


def test_list_at_80_columns_keeps_the_project_and_a_readable_title(loaded, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    lines = run(loaded, "list").stdout.splitlines()
    assert lines[0].split() == ["id", "modified", "msgs", "project", "title"]
    assert all(len(line) <= 80 for line in lines)
    row = next(line for line in lines if line.startswith(BRANCHING[:8]))
    # 80 - 8 (id) - 17 - 4 - 4 gaps of 2 = 43 cells for project and title. The whole project
    # (30 cells) would leave the title 13 (< 20), so the project gets a third, 14 cells, cut
    # at the left and at a "/": "…/weather-app"; the title gets 43 - 14 = 29 cells.
    assert row.split()[:4] == [BRANCHING[:8], "2026-03-02", "09:03Z", "10"]
    assert row.split()[4] == "…/weather-app"
    assert row.endswith("Fix 500 on city names with s…")  # 28 characters and the ellipsis


def test_path_of_a_missing_store_says_so_on_a_line_of_its_own(tmp_path, monkeypatch):
    """Issue 41: the note read as a tail of the path ("sessions.db(does not exist yet") when
    a capture joined the streams; stdout is the path alone, stderr a whole sentence."""
    monkeypatch.delenv("SESSIONTREE_STORE")
    result = run(None, "path")
    assert result.stdout.count("\n") == 1 and "exist" not in result.stdout
    assert result.stderr.startswith("sessiontree: note: the store does not exist yet; fill it with:")


def test_path_says_where_the_store_is_without_opening_it(tmp_path, monkeypatch):
    monkeypatch.delenv("SESSIONTREE_STORE")
    default = tmp_path / "xdg-data" / "sessiontree" / "sessions.db"
    result = run(None, "path")
    assert result.stdout == f"{default}\n"
    assert "does not exist yet; fill it with: sessiontree sync" in result.stderr
    assert not default.exists()  # path opens nothing
    assert run_json(None, "path") == {"kind": "sqlite", "path": str(default), "url": f"sqlite:///{default}",
                                      "source": "default", "exists": False}
    folder = tmp_path / "dir"
    folder.mkdir()
    assert run_json(str(folder), "path") == {"kind": "jsonl", "path": str(folder), "url": str(folder),
                                             "source": "argument", "exists": True}
    monkeypatch.setenv("SESSIONTREE_STORE", "memory:")
    assert run_json(None, "path")["source"] == "environment"


def test_a_missing_store_error_says_how_to_fill_it(tmp_path):
    result = run(f"sqlite:///{tmp_path / 'none.db'}", "list", code=1)
    assert "fill it with: sessiontree sync (the agents' own session folders)" in result.stderr
    assert "sessiontree import PATH..." in result.stderr


def test_reindex_rebuilds_derived_data(loaded):
    import sqlite3

    path = loaded[len("sqlite:///"):]
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE sessions SET message_count = 0, name = NULL")
    assert {row["messageCount"] for row in run_json(loaded, "list")} == {0}
    assert run_json(loaded, "reindex") == {"reindexed": 3}
    rows = {row["id"]: row for row in run_json(loaded, "list")}
    assert rows[BRANCHING]["messageCount"] == 10 and rows[BRANCHING]["name"] == "Fix 500 on city names with spaces"
    assert run(loaded, "reindex", BRANCHING[:8]).stdout == "Reindexed 1 session\n"


# --------------------------------------------------------------------------- files over the size limit


def _two_mib_session(path: Path) -> Path:
    """A valid format-4 session of a little over 2 MiB (20 messages of 110,000 characters)."""
    lines = [json.dumps({"type": "session", "version": 4, "id": "0190f000-0000-7000-8000-0000000000aa",
                         "createdAt": "2026-02-01T09:00:00.000Z", "cwd": "/w"})]
    parent = None
    for n in range(20):
        lines.append(json.dumps({"type": "message", "id": f"e{n}", "parentId": parent,
                                 "timestamp": "2026-02-01T09:00:01.000Z",
                                 "message": {"role": "user", "content": "x" * 110_000, "timestamp": n}}))
        parent = f"e{n}"
    path.write_text("\n".join(lines) + "\n")
    assert 2 * 2**20 < path.stat().st_size < 3 * 2**20
    return path


def test_files_over_the_size_limit_are_refused_before_they_are_read(tmp_path, monkeypatch):
    """With SESSIONTREE_MAX_FILE_MB=1 a 2 MiB file is refused, in one line naming its size
    and the limit, by import, sync, check and migrate; nothing is written, the file is
    untouched. With the limit raised (or 0, off) the same file goes through."""
    source = _two_mib_session(tmp_path / "big.jsonl")
    before = source.read_bytes()
    db = f"sqlite:///{tmp_path / 's.db'}"
    reason = "too large: 2 MiB, over the 1 MiB limit on one session file"
    monkeypatch.setenv("SESSIONTREE_MAX_FILE_MB", "1")
    rows = run_json(db, "import", str(source), code=1)["files"]
    assert [row["status"] for row in rows] == ["rejected"] and reason in rows[0]["reason"]
    report = run_json(db, "sync", str(source), code=1)
    assert [r["status"] for r in report["files"]] == ["rejected"] and reason in report["files"][0]["reason"]
    [checked] = run_json(None, "check", str(source), code=1)
    assert reason in checked["error"]
    [migrated] = run_json(None, "migrate", str(source), code=1)["files"]
    assert migrated["status"] == "rejected" and reason in migrated["reason"]
    assert source.read_bytes() == before
    with open_store(db, readonly=True) as store:
        assert store.session_ids() == []
    for value in ("3", "0"):
        monkeypatch.setenv("SESSIONTREE_MAX_FILE_MB", value)
        assert run_json(None, "check", str(source))[0]["problems"] == []
    run(db, "import", str(source))
    with open_store(db, readonly=True) as store:
        assert len(store.read("0190f000-0000-7000-8000-0000000000aa").entries) == 20


def test_emoji_codes_in_session_text_stay_text(tmp_path):
    """Rich turns ``:x:`` into an emoji unless told not to; a session's name and text are data
    (docs/terminal-output.md), so ``show`` and ``list`` print them as written."""
    from builders import header, jsonl_line, session_info, user_entry

    sid = "5e55f1a0-0000-4000-8000-00000000e0e0"
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(jsonl_line(r) for r in (
        header(sid), user_entry("e1", None, "ship it :rocket:"), session_info("e2", "e1", "fix :x:"))))
    db = str(tmp_path / "s.db")
    run_cli(db, "import", str(path))
    shown = run_cli(db, "show", sid[:8]).output
    listed = run_cli(db, "list").output
    assert "fix :x:" in shown and "❌" not in shown
    assert ":x:" in listed and "❌" not in listed and "🚀" not in listed
