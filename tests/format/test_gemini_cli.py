"""Gemini CLI sessions in every command (docs/agents/gemini.md): `sources` finds the real
chats of ``../shared/corpus/gemini`` under ``~/.gemini`` (or ``$GEMINI_CLI_HOME/.gemini``),
`sync` takes them, and list, stats by agent, search, show, context, export and resume
speak of them as Gemini CLI's. Figures: FOREIGN.md, "Gemini CLI" (counted by hand there)."""

from __future__ import annotations

import shutil

from cli_support import run_cli, run_cli_json
from corpus import SHARED


def _home_with_gemini(home):
    shutil.copytree(SHARED / "gemini" / "tmp", home / ".gemini" / "tmp")
    for path in (home / ".gemini").rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)


def test_every_command_speaks_of_gemini_sessions(tmp_path, _fake_home):
    _home_with_gemini(_fake_home)
    sources = {row["agent"]: row for row in run_cli_json(None, "sources")}
    assert sources["gemini"]["path"] == str(_fake_home / ".gemini" / "tmp") and sources["gemini"]["exists"]
    db = f"sqlite:///{tmp_path / 'g.db'}"
    report = run_cli_json(db, "sync")
    assert (report["new"], report["rejected"]) == (3, 0)
    assert {row["agent"] for row in run_cli_json(db, "list")} == {"gemini"}
    stats = run_cli_json(db, "stats", "--by", "agent")["groups"]
    assert [(g["key"], g["calls"], g["inputTokens"], g["outputTokens"], g["cacheReadTokens"], g["totalTokens"])
            for g in stats] == [("gemini", 22, 55_052, 1_087 + 1_704, 192_561, 250_404)]
    hits = run_cli_json(db, "search", "hoge.py")
    assert "f0a689a6-b0ac-407f-afcc-4fafa9e14e8a" in str(hits)
    sid = "f7633853-6663-4dbb-bbf4-6159afa29df8"
    context = run_cli_json(db, "context", sid)
    roles = [m["role"] for m in context["messages"]]
    assert roles.count("toolResult") == 9 and roles[0] == "user"
    assert "docs/blue.md" in run_cli(db, "export", sid, "--format", "markdown").stdout
    out = tmp_path / "back.json"
    run_cli(db, "export", sid, "--format", "source", "-o", str(out))
    original = next((_fake_home / ".gemini").rglob("*f7633853.json"))
    assert out.read_bytes() == original.read_bytes()
    assert run_cli(db, "resume", sid).stdout.strip() == f"gemini --resume {sid}"
    assert not (_fake_home / ".pi").exists()  # nothing restored for another agent
    assert run_cli(None, "check", str(original)).stdout.count("ok") == 1
    assert run_cli_json(db, "sync")["unchanged"] == 3


def test_gemini_cli_home_names_the_home_holding_dot_gemini(tmp_path, _fake_home, monkeypatch):
    other = tmp_path / "elsewhere"
    _home_with_gemini(other)
    monkeypatch.setenv("GEMINI_CLI_HOME", str(other))
    row = next(r for r in run_cli_json(None, "sources") if r["agent"] == "gemini")
    assert (row["path"], row["origin"], row["exists"]) == (str(other / ".gemini" / "tmp"), "GEMINI_CLI_HOME", True)


def test_the_viewer_offers_gemini_clis_own_resume_command(tmp_path, _fake_home):
    from starlette.testclient import TestClient

    from sessiontree.stores import open_store
    from sessiontree.web.app import create_app

    _home_with_gemini(_fake_home)
    db = f"sqlite:///{tmp_path / 'v.db'}"
    run_cli_json(db, "sync")
    sid = "faff42ab-6ea5-4f78-b8c4-f7dd6272af08"
    store = open_store(db, readonly=True)
    try:
        page = TestClient(create_app(store), base_url="http://127.0.0.1:8765").get(f"/s/{sid}").text
    finally:
        store.close()
    assert f"gemini --resume {sid}" in page and "pi --session" not in page
    assert "add new text to test-gemini.txt" in page


def test_import_of_a_gemini_chat_says_to_sync_it(tmp_path, _fake_home):
    _home_with_gemini(_fake_home)
    chat = next((_fake_home / ".gemini").rglob("*faff42ab.json"))
    result = run_cli(f"sqlite:///{tmp_path / 'i.db'}", "import", str(chat), code=1)
    assert "a gemini session file, not pi/Atomic" in result.stdout + result.stderr
