"""``stats --agent`` and ``budget set --agent`` take the agents of the one agent table (issue 44 item 4;
docs/usage.md): their help lists them, an unknown one is a usage error (exit 2) naming them, and a
Gemini CLI session's calls are counted under ``gemini``."""

from __future__ import annotations

import json
import shutil

import corpus
from cli_support import cli_runner, run_cli
from sessiontree.cli import cli
from sessiontree.format.foreign import AGENT_NAMES
from sessiontree.sync.sources import FOREIGN_AGENTS, SESSION_AGENTS

GEMINI = (corpus.shared() / "gemini" / "tmp" / "9126eddec7f67e038794657b4d517dd9cb5226468f30b5ee7296c27d65e84fde"
          / "chats" / "session-2025-12-09T19-51-f0a689a6.json")


def test_the_session_agents_are_pi_and_every_mapped_agent():
    # One table: the mappings' names (format.foreign) and the sync sources' agents agree.
    assert SESSION_AGENTS == ("pi", *(name for name, *_ in FOREIGN_AGENTS))
    assert set(SESSION_AGENTS) == {"pi", *AGENT_NAMES}
    assert {"gemini", "omp"} <= set(SESSION_AGENTS)


def test_help_lists_every_agent():
    for argv in (["stats", "--help"], ["budget", "set", "--help"]):
        text = " ".join(run_cli(None, *argv).stdout.split())
        for agent in SESSION_AGENTS:
            assert agent in text, (argv, agent)


def test_an_unknown_agent_is_a_usage_error_naming_the_known_ones(tmp_path):
    db = str(tmp_path / "s.db")
    for argv in (["stats", "--agent", "nonsense"], ["budget", "set", "b", "5/day", "--agent", "nonsense"]):
        result = cli_runner().invoke(cli, ["--store", db, *argv], catch_exceptions=False)
        assert result.exit_code == 2, (argv, result.stdout, result.stderr)
        assert "nonsense" in result.stderr
        for agent in SESSION_AGENTS:
            assert f"'{agent}'" in result.stderr
        assert "No usage recorded" not in result.stdout


@corpus.needs_shared
def test_gemini_calls_are_counted_under_gemini(tmp_path):
    # The raw chat file: 7 "gemini" messages carry "tokens" (counted here).
    raw = json.loads(GEMINI.read_text(encoding="utf-8"))
    billed = sum(1 for m in raw["messages"] if m.get("type") == "gemini" and m.get("tokens"))
    assert billed == 7
    copy = tmp_path / GEMINI.name
    shutil.copy(GEMINI, copy)
    db = str(tmp_path / "s.db")
    run_cli(db, "sync", str(copy))
    report = json.loads(run_cli(db, "stats", "--agent", "gemini", "--json").stdout)
    assert report["totals"]["calls"] == billed
    other = json.loads(run_cli(db, "stats", "--agent", "codex", "--json").stdout)
    assert other["totals"]["calls"] == 0
