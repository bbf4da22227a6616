"""``sessiontree diff`` (docs/diff.md): exit status, JSON, both layouts, the context view,
hostile text sanitised, bad input as one line with status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders import header
from cli_support import cli_runner
from diff_trees import at, fork_of_two_approaches, two_approaches, user_at
from sessiontree.cli import cli
from sessiontree.stores.sqlite.store import SqliteStore

SOURCE = "019cadb4-0000-7000-8000-000000000001"
FORK = "019cadb5-0000-7000-8000-000000000002"


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "s.db")
    store = SqliteStore(path)
    store.create(header(SOURCE, created="2026-03-02T09:00:00.000Z"), two_approaches())
    store.create(header(FORK, created="2026-03-02T09:05:00.000Z", parentSessionId=SOURCE), fork_of_two_approaches())
    store.close()
    return path


def run(db: str, *args: str, code: int, columns: int = 100):
    result = cli_runner().invoke(cli, ["--store", db, "diff", *args], env={"COLUMNS": str(columns)},
                                 catch_exceptions=False)
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    return result


def test_json_and_exit_zero(db: str) -> None:
    data = json.loads(run(db, SOURCE[:8], "--json", code=0).stdout)
    assert (data["a"]["leafId"], data["b"]["leafId"], data["commonEntries"]) == ("aA2", "aB1", 3)
    assert data["summary"]["common"]["usage"]["costNanos"] == 1_000_000
    assert data["summary"]["b"]["files"] == [{"path": "src/x.py", "tools": ["read"]},
                                             {"path": "src/y.py", "tools": ["write"]}]


def test_identical_exits_one(db: str) -> None:
    result = run(db, SOURCE[:8], "--a", "aA2", "--b", "aA2", code=1)
    assert "The branches are identical." in result.stdout
    assert json.loads(run(db, SOURCE[:8], "--a", "aA2", "--b", "aA2", "--json", code=1).stdout)["identical"]


def test_unified_layout_marks(db: str) -> None:
    out = run(db, SOURCE[:8], "--unified", code=0).stdout
    lines = out.splitlines()
    # The summary: common 3 entries, A only 3, B only 3; then the rows, marked.
    assert any(line.split()[:2] == ["common", "3"] for line in lines)
    assert "+ mB p/m2" in lines
    assert "~ A aA1 → edit(path=\"src/x.py\")" in lines
    assert "~ B aB1 → write(path=\"src/y.py\") → read(file_path=\"src/x.py\")" in lines
    assert "- aA2 done A" in lines


def test_side_by_side_and_context(db: str) -> None:
    out = run(db, SOURCE[:8], "--side-by-side", "--context", code=0, columns=160).stdout
    assert "Context B: 6 messages; 2 synthetic result(s) for interrupted tool calls" in out
    assert "Setting thinkingLevel: A off  B high" in out
    assert "Setting model: A p/m1  B p/m2" in out


def test_fork_against_source(db: str) -> None:
    data = json.loads(run(db, FORK[:8], "--a", f"{SOURCE[:8]}:aA2", "--b", "f4", "--json", code=0).stdout)
    assert data["forkPoint"] == {"a": "r1", "b": "f3"}
    assert (data["summary"]["common"]["usage"]["calls"], data["summary"]["b"]["usage"]["calls"]) == (1, 0)


@pytest.mark.parametrize("args", [("nosuch",), (SOURCE[:8], "--a", "zz"), (SOURCE[:8], "--a", ":x"),
                                  (FORK[:8],)])
def test_bad_input_one_line_exit_two(db: str, args: tuple[str, ...]) -> None:
    result = run(db, *args, code=2)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("sessiontree: error: "), result.stderr


def test_hostile_text_is_sanitised(tmp_path: Path) -> None:
    path = str(tmp_path / "h.db")
    store = SqliteStore(path)
    evil = "\x1b]8;;http://x\x07click\x1b[2J\rhidden"
    entries = [user_at("u1", None, "start", at(0, 0)), user_at("x1", "u1", evil, at(1, 0)),
               user_at("x2", "u1", "plain", at(2, 0))]
    store.create(header(SOURCE, created="2026-03-02T09:00:00.000Z"), entries)
    store.close()
    for layout in ("--unified", "--side-by-side"):
        out = run(path, SOURCE[:8], layout, code=0, columns=160).stdout
        out_ctx = run(path, SOURCE[:8], layout, "--context", code=0, columns=160).stdout
        for text in (out, out_ctx):
            assert "\x1b" not in text and "\x07" not in text and "\r" not in text
            assert "click" in text
