"""The viewer's session list for every agent (issue 41 item 2; docs/viewer.md, "Session list"):
an agent column, badge and filter; ``~`` on estimated costs as the command line marks them; a
fork that bills nothing marked as a copy of its source; a subagent session under its parent.

The store holds real files of ``../shared/corpus``: the seven Codex rollouts, the pi file
``pi-mono-large-session.jsonl`` and Claude Code's subagent transcript ``agent-0c4c3cf8.jsonl``
(its parent ``7f2abd2d-...`` is the session named in its records).
"""

from __future__ import annotations

import json
import re
import shutil
from html import unescape

import pytest

import corpus
from cli_support import cli_runner, run_cli
from sessiontree.cli import cli
from sessiontree.stores import open_store

pytest.importorskip("starlette")
from starlette.testclient import TestClient

from sessiontree.web.app import create_app

SHARED = corpus.shared()
PI = SHARED / "pi-v1" / "pi-mono-large-session.jsonl"
SUBAGENT = SHARED / "claude-code" / "projects" / "-Users-test-user-agent-sample" / "agent-0c4c3cf8.jsonl"
CODEX_FILES = 7  # rollouts under codex/sessions (FOREIGN.md)


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    if not PI.is_file():
        pytest.skip("the shared corpus is not beside the checkout")
    folder = tmp_path_factory.mktemp("home")
    shutil.copytree(SHARED / "codex", folder / "codex")
    shutil.copy(SUBAGENT, folder / SUBAGENT.name)
    path = str(tmp_path_factory.mktemp("store") / "s.db")
    result = cli_runner().invoke(cli, ["--store", path, "sync", str(folder)], catch_exceptions=False)
    assert result.exit_code == 0, result.stdout + result.stderr
    run_cli(path, "import", str(PI))
    return path


def _page(db: str, query: str = "") -> str:
    store = open_store(db, create=False, readonly=True)
    try:
        return TestClient(create_app(store), base_url="http://127.0.0.1:8765").get(f"/{query}").text
    finally:
        store.close()


def _rows(html: str) -> list[str]:
    return re.findall(r'<tr class="session-row[^"]*">(.*?)</tr>', html, re.S)


def test_the_agent_column_badge_and_filter(db):
    html = _page(db)
    assert "<th>Agent</th>" in html and 'name="agent"' in html
    agents = [unescape(a) for row in _rows(html) for a in re.findall(r'<td class="agent"><span class="badge '
                                                                       r'agent-[\w-]+">([\w-]+)</span>', row)]
    assert agents.count("codex") == CODEX_FILES and agents.count("pi") == 1
    only = _rows(_page(db, "?agent=codex"))
    assert len(only) == CODEX_FILES and all("agent-codex" in row for row in only)


def test_estimated_costs_carry_a_tilde_as_on_the_command_line(db):
    listed = json.loads(run_cli(db, "list", "--cost", "--json").stdout)
    estimated = {row["id"] for row in listed if row["usage"]["estimatedCalls"]}
    assert estimated  # Codex rollouts record tokens, not prices: priced from the catalogue
    for row in _rows(_page(db)):
        session = re.search(r'href="/s/([^"]+)"', row).group(1)
        cost = re.findall(r'<td class="num"[^>]*>([^<]*)</td>', row)[-1]
        if session in estimated:
            assert cost.startswith("~$"), (session, cost)
        elif cost:
            assert not cost.startswith("~"), (session, cost)


def test_a_fork_that_bills_nothing_is_marked_a_copy(db, tmp_path):
    copy = tmp_path / "s.db"
    shutil.copy(db, copy)
    source = json.loads(run_cli(str(copy), "list", "--json").stdout)
    pi = next(row["id"] for row in source if row["agent"] == "pi")
    run_cli(str(copy), "fork", pi[:8])
    rows = _rows(_page(str(copy)))
    marked = [row for row in rows if "copy of" in row]
    assert len(marked) == 1 and f'href="/s/{pi}"' in marked[0] and "(at source)" in marked[0]


def test_a_subagent_session_is_listed_under_its_parent(db):
    rows = _rows(_page(db, "?internal=1"))
    (row,) = [r for r in rows if "subagent of" in r]
    assert 'href="/s/7f2abd2d-7cfc-4447-9ddd-3ca8d14e02e9"' in row and ">7f2abd2d</a>" in row
    assert 'title="7f2abd2d/0c4c3cf8"' in row
