"""``sessiontree statusline`` (docs/statusline.md): the line Claude Code's ``statusLine`` command
shows, from the JSON it writes on stdin; read-only, never syncing, and started without the
command line's heavy imports.

The sessions are synthetic (calls made "today" cannot come from a real file); the amounts
are the recorded costs written below, summed by hand.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from builders import billed_assistant as _assistant
from builders import header as _header
from builders import usage as _usage
from cli_support import run_cli
from sessiontree._statusline import parse_statusline_args
from sessiontree.stores.sqlite.store import SqliteStore
from sessiontree.usage.budgets import Budget
from sessiontree.usage.config import set_budget
from sessiontree.usage.statusline import session_id_from_input

ROOT = Path(__file__).resolve().parents[2]
SID = "5c3b2a1e-7f4d-4c2b-9a8e-1d2c3b4a5f60"

#: The JSON Claude Code writes on the statusLine command's stdin (its documented shape,
#: https://docs.claude.com/en/docs/claude-code/statusline), for the session SID.
CLAUDE_INPUT = {
    "hook_event_name": "Status",
    "session_id": SID,
    "transcript_path": f"/home/me/.claude/projects/-home-me-app/{SID}.jsonl",
    "cwd": "/home/me/app",
    "model": {"id": "claude-opus-4-1", "display_name": "Opus"},
    "workspace": {"current_dir": "/home/me/app", "project_dir": "/home/me/app"},
    "version": "1.0.80",
    "output_style": {"name": "default"},
    "cost": {"total_cost_usd": 0.01234, "total_duration_ms": 45000, "total_api_duration_ms": 2300,
             "total_lines_added": 156, "total_lines_removed": 23},
    "exceeds_200k_tokens": False,
}


def _store(path):
    """Today (UTC): the Claude Code session SID billed $0.50 + $0.25; another session $1.00.
    Yesterday or earlier: SID's first call, $2.00 (in the session's cost, not in today's)."""
    today = datetime.now(UTC).date().isoformat()
    store = SqliteStore(str(path))
    store.create(_header(SID, created="2026-01-01T00:00:00.000Z", foreign={"agent": "claude-code"}), [
        _assistant("c0", None, "2026-01-01T10:00:00.000Z", _usage(10, cost=2.0)),
        _assistant("c1", "c0", f"{today}T00:00:00.500Z", _usage(10, cost=0.5)),
        _assistant("c2", "c1", f"{today}T00:00:01.000Z", _usage(10, cost=0.25))])
    store.create(_header("other", created="2026-01-02T00:00:00.000Z"), [
        _assistant("o1", None, f"{today}T00:00:00.700Z", _usage(10, cost=1.0))])
    store.close()


def _digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_the_line_for_the_json_claude_code_sends(tmp_path):
    db = str(tmp_path / "s.db")
    _store(db)
    set_budget(Budget("daily", 5_000_000_000, "day"))  # $5/day; today's spend $1.75
    before = _digest(db)
    out = run_cli(db, "statusline", "-z", "UTC", input=json.dumps(CLAUDE_INPUT)).stdout
    # Session: 2.00 + 0.50 + 0.25; today: 0.50 + 0.25 + 1.00; left: 5.00 - 1.75.
    assert out == "$2.75 session · $1.75 today · $3.25 left of daily\n"
    assert _digest(db) == before  # read-only
    data = json.loads(run_cli(db, "statusline", "-z", "UTC", "--json", input=json.dumps(CLAUDE_INPUT)).stdout)
    assert (data["sessionId"], data["session"]["costNanos"], data["today"]["costNanos"],
            data["budget"]["leftNanos"]) == (SID, 2_750_000_000, 1_750_000_000, 3_250_000_000)


def test_over_budget_unknown_session_and_problems_are_one_line_and_exit_0(tmp_path):
    db = str(tmp_path / "s.db")
    _store(db)
    set_budget(Budget("tight", 1_000_000_000, "day"))
    unknown = {**CLAUDE_INPUT, "session_id": "not-synced-yet"}
    out = run_cli(db, "statusline", "-z", "UTC", input=json.dumps(unknown)).stdout
    assert out == "session not synced · $1.75 today · tight over by $0.75\n"
    assert run_cli(db, "statusline", input="not json").stdout.startswith("no session id · ")
    missing = run_cli(str(tmp_path / "missing.db"), "statusline", input=json.dumps(CLAUDE_INPUT)).stdout
    assert missing.startswith("sessiontree: no session store at ") and missing.count("\n") == 1
    assert not (tmp_path / "missing.db").exists()  # never created
    assert run_cli(db, "statusline", "--budget", "nope", input="{}").stdout == "sessiontree: no budget named 'nope'\n"


def test_it_never_syncs(tmp_path, monkeypatch):
    # A session file waiting in Claude Code's folder stays out of the store.
    db = str(tmp_path / "s.db")
    _store(db)
    projects = tmp_path / "claude" / "projects" / "-home-me-app"
    projects.mkdir(parents=True)
    (projects / "aaaaaaaa-0000-4000-8000-000000000000.jsonl").write_text("{}\n")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    before = _digest(db)
    run_cli(db, "statusline", input=json.dumps({**CLAUDE_INPUT,
                                                "session_id": "aaaaaaaa-0000-4000-8000-000000000000"}))
    assert _digest(db) == before
    with SqliteStore(db, readonly=True) as store:
        assert sorted(store.session_ids()) == sorted([SID, "other"])


def test_session_id_from_the_input():
    assert session_id_from_input(json.dumps(CLAUDE_INPUT)) == SID
    assert session_id_from_input(json.dumps({"transcript_path": f"/x/{SID}.jsonl"})) == SID
    assert session_id_from_input(b'{"sessionId": "p1"}') == "p1"
    for bad in ("", "[]", "{", '{"session_id": 3}'):
        assert session_id_from_input(bad) is None


def test_the_launcher_takes_the_plain_form_only():
    assert parse_statusline_args(["statusline"])["store"] is None
    assert parse_statusline_args(["--store", "x.db", "statusline", "--json", "-z", "UTC", "--budget=daily"]) == {
        "store": "x.db", "session": None, "budget": "daily", "tz": "UTC", "as_json": True}
    for other in (["stats"], ["statusline", "--help"], ["statusline", "--budget"], [], ["--version"]):
        assert parse_statusline_args(other) is None


def test_the_console_script_path_loads_no_heavy_module(tmp_path):
    db = str(tmp_path / "s.db")
    _store(db)
    code = ("import sys, io\n"
            "from sessiontree._statusline import parse_statusline_args, run_statusline\n"
            f"options = parse_statusline_args(['--store', {db!r}, 'statusline', '-z', 'UTC'])\n"
            "store = options.pop('store')\n"
            f"run_statusline(store, stdin=io.BytesIO({json.dumps(CLAUDE_INPUT).encode()!r}), **options)\n"
            "heavy = ('click', 'rich', 'starlette', 'jinja2', 'detect_secrets', 'genai_prices', 'sessiontree.cli',\n"
            "         'sessiontree.session.manager', 'importlib.metadata', 'sessiontree.stores.jsonl',\n"
            "         'sessiontree.stores.memory')\n"
            "print(sorted(name for name in heavy if name in sys.modules))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "SESSIONTREE_CONFIG": str(tmp_path / "none.toml")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["$2.75 session · $1.75 today", "[]"]
