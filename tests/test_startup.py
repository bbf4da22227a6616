"""Start-up of the command line stays light (issue 42; docs/architecture.md, "Start-up").

``sessiontree --version``, ``--help`` and every command's ``--help`` run in a fresh
interpreter, and the modules loaded are checked: none of the heavy ones (rich, the web
viewer's starlette and jinja2, detect-secrets and RE2, the price catalogue and pydantic,
psycopg, the MCP SDK, hypothesis, the SQLite store, the session manager) may be imported
before a command starts its own work. Real small runs are checked too: ``stats --json``
(the report, no rich, and with a warm price cache no catalogue) and ``statusline`` (no
click, no rich, no catalogue), from the import closure ``python -X importtime`` prints.
Deterministic: module names are compared, never a clock.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import subprocess
import sys

import click
import pytest

from sessiontree import __version__
from sessiontree.cli import COMMANDS, cli

#: Modules no start-up path may load: each costs tens of milliseconds or more.
HEAVY = (
    "rich",
    "rich.console",
    "rich.progress",
    "rich.table",
    "starlette",
    "jinja2",
    "uvicorn",
    "detect_secrets",
    "re2",
    "genai_prices",
    "pydantic",
    "psycopg",
    "psycopg_pool",
    "mcp",
    "hypothesis",
    "importlib.metadata",  # the version is read from the metadata file directly
    "sessiontree.stores.sqlite",
    "sessiontree.stores.jsonl",
    "sessiontree.session.manager",
    "sessiontree.sync.engine",
    "sessiontree.usage.report",
)

#: Runs each argv in turn in one interpreter and prints, per argv, the heavy modules it loaded.
_PROBE = """
import contextlib, io, json, sys
from sessiontree.cli import cli
heavy, runs, out = json.loads(sys.argv[1]), json.loads(sys.argv[2]), {}
for argv in runs:
    with contextlib.redirect_stdout(io.StringIO()) as text:
        try:
            cli.main(args=argv, prog_name="sessiontree", standalone_mode=False)
        except SystemExit:
            pass
    out[" ".join(argv)] = {"loaded": [m for m in heavy if m in sys.modules], "stdout": text.getvalue()}
print(json.dumps(out))
"""


def _probe(runs: list[list[str]]) -> dict[str, dict[str, object]]:
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(HEAVY), json.dumps(runs)],
                          capture_output=True, text=True, check=True)
    result: dict[str, dict[str, object]] = json.loads(proc.stdout)
    return result


def test_version_loads_nothing_heavy():
    out = _probe([["--version"]])["--version"]
    assert out["loaded"] == []
    assert out["stdout"] == f"sessiontree, version {__version__}\n"


def test_help_of_the_group_and_of_every_command_loads_nothing_heavy():
    # One interpreter for all (a module loaded by an earlier help stays loaded).
    runs = [["--help"], *([name, "--help"] for name in sorted(COMMANDS))]
    out = _probe(runs)
    assert {argv: result["loaded"] for argv, result in out.items() if result["loaded"]} == {}
    assert "Commands:" in str(out["--help"]["stdout"]) and "sync" in str(out["--help"]["stdout"])


@pytest.mark.parametrize("name", ["list", "diff", "stats", "sync", "restore"])
def test_one_command_loads_only_its_own_module(name):
    probe = ("import sys; from sessiontree.cli import main; "
             "import atexit, json; atexit.register(lambda: print(json.dumps(sorted(m for m in sys.modules "
             "if m.startswith('sessiontree.cli.'))), file=sys.stderr)); main(sys.argv[1:])")
    proc = subprocess.run([sys.executable, "-c", probe, name, "--help"], capture_output=True, text=True, check=True)
    loaded = json.loads(proc.stderr.strip().splitlines()[-1])
    assert loaded == sorted({"sessiontree.cli.common", f"sessiontree.cli.{COMMANDS[name]}"})


def test_the_command_table_names_what_each_module_registers():
    # A command missing from sessiontree.cli.COMMANDS would never be loaded by name.
    for module in sorted(set(COMMANDS.values())):
        importlib.import_module(f"sessiontree.cli.{module}")
    assert sorted(cli.commands) == sorted(COMMANDS)
    ctx = click.Context(cli)
    for name, module in COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None and command.callback is not None
        assert command.callback.__module__ == f"sessiontree.cli.{module}", name


def test_an_unknown_command_is_still_a_usage_error():
    proc = subprocess.run([sys.executable, "-m", "sessiontree", "nosuchcommand"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "No such command 'nosuchcommand'" in proc.stderr


#: What a real run must not load: the heavy modules above but our own (a run opens its store).
RUN_HEAVY = tuple(m for m in HEAVY if not m.startswith("sessiontree."))

#: The session of the real runs: a Claude Code call without a recorded cost (priced from the
#: catalogue) and a pi call with one.
_SID = "3f0c2a1e-7f4d-4c2b-9a8e-1d2c3b4a5f60"


def _imported(argv: list[str], env: dict[str, str], stdin: str = "") -> tuple[set[str], str]:
    """The modules a fresh ``python -X importtime -m sessiontree ARGV`` imported (its import
    closure, from the ``-X importtime`` lines on stderr) and its stdout."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "sessiontree", *argv], input=stdin,
                          env=env, capture_output=True, text=True, check=True)
    names = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
             if line.startswith("import time:") and line.count("|") == 2}
    return names, proc.stdout


@pytest.fixture
def small_store(tmp_path, monkeypatch):
    """A SQLite store of two sessions and the environment of a real run on it."""
    from builders import billed_assistant, header, usage
    from sessiontree.stores.sqlite.store import SqliteStore

    db = tmp_path / "s.db"
    store = SqliteStore(str(db))
    store.create(header(_SID, foreign={"agent": "claude-code"}), [
        billed_assistant("c1", None, "2026-01-01T10:00:00.000Z", usage(1000, 100, 1000, 2000),
                         model="claude-opus-4-5", provider="anthropic")])
    store.create(header("pi-one"), [billed_assistant("p1", None, "2026-01-01T11:00:00.000Z", usage(10, cost=1.0))])
    store.close()
    env = {**os.environ, "SESSIONTREE_STORE": f"sqlite:///{db}", "SESSIONTREE_CONFIG": str(tmp_path / "none.toml")}
    for name in ("PYTHONDONTWRITEBYTECODE", "FORCE_COLOR", "TTY_COMPATIBLE"):
        env.pop(name, None)
    return env


def test_real_runs_of_stats_and_statusline_load_nothing_heavy(small_store):
    # The first report prices the Claude Code call from the catalogue and keeps the price
    # (usage/prices.py); every later run reads it from the cache file.
    cold, out = _imported(["stats", "--json"], small_store)
    assert "genai_prices" in cold
    # claude-opus-4-5: 1,000 x $5 + 100 x $25 + 1,000 x $0.50 + 2,000 x $6.25 per million = $0.0205, + $1.00
    assert json.loads(out)["totals"]["cost"] == "1.0205"
    warm, out_again = _imported(["stats", "--json"], small_store)
    assert out_again == out
    assert sorted(m for m in RUN_HEAVY if m in warm) == []
    table, text = _imported(["stats", "--by", "model"], small_store)
    assert "anthropic/claude-opus-4-5" in text and "~$0.02" in text
    assert sorted(m for m in RUN_HEAVY if m in table and not m.startswith("rich")) == []
    line, text = _imported(["statusline"], small_store, stdin=json.dumps({"session_id": _SID}))
    assert text == "~$0.02 session · $0.00 today\n"
    assert sorted(m for m in (*RUN_HEAVY, "click", "sessiontree.cli") if m in line) == []


def test_list_loads_neither_the_catalogue_nor_the_viewer(small_store):
    loaded, out = _imported(["list", "--json"], small_store)
    assert {item["id"] for item in json.loads(out)} == {_SID, "pi-one"}
    heavy = ("starlette", "jinja2", "detect_secrets", "re2", "genai_prices", "pydantic", "psycopg", "mcp")
    assert sorted(m for m in heavy if m in loaded) == []


def _rich_table(rows: list[list[str]], right: list[bool], max_widths: list[int | None]) -> str:
    """What rich prints for the table on a 160-column console that is not a terminal, line
    ends stripped as ``print_rich`` strips them: the oracle ``plain_table`` must equal."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=io.StringIO(), width=160, highlight=False, markup=False, force_terminal=False)
    table = Table(box=None, pad_edge=False, header_style="bold", show_footer=True, footer_style="bold")
    for index, (flush_right, limit) in enumerate(zip(right, max_widths, strict=True)):
        table.add_column(rows[0][index], rows[-1][index], justify="right" if flush_right else "left",
                         no_wrap=True, overflow="ellipsis", max_width=limit)
    for row in rows[1:-1]:
        table.add_row(*(Text(cell) for cell in row))
    with console.capture() as capture:
        console.print(table)
    text = "\n".join(line.rstrip() for line in capture.get().split("\n"))
    assert text.endswith("\n")
    return text[:-1]  # the newline click.echo adds after plain_table's text


def test_the_plain_table_is_the_text_rich_prints_or_declines(monkeypatch):
    # The piped table stats prints without rich (cli/common.py plain_table) must be rich's text, byte for byte.
    import random

    from sessiontree.cli.common import plain_table

    for name in ("TTY_COMPATIBLE", "FORCE_COLOR", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    rng = random.Random(42)
    alphabet = "abcxyz-/_.~$,0123456789" * 4 + " :\u2588"
    taken = declined = 0
    for _ in range(600):
        columns = rng.randint(1, 8)
        right = [rng.random() < 0.6 for _ in range(columns)]
        limits: list[int | None] = [rng.choice([None, None, 5, 20, 80]) for _ in range(columns)]
        rows = [[" " * rng.choice([1, 4, 40]) if rng.random() < 0.1 else
                 "".join(rng.choice(alphabet) for _ in range(rng.choice([0, 1, 4, 12, 30])))
                 for _ in range(columns)] for _ in range(rng.randint(2, 6))]
        text = plain_table(rows, right, limits)
        if text is None:
            declined += 1
            continue
        taken += 1
        assert text == _rich_table(rows, right, limits), (rows, right, limits)
    assert taken > 50 and declined > 10
    # Outside ASCII, over a column's limit, or wider than the pipe: rich decides.
    assert plain_table([["é"]], [False]) is None
    assert plain_table([["abcdef"]], [False], [5]) is None
    assert plain_table([["x" * 100, "y" * 60]], [False, False]) is None
    monkeypatch.setenv("COLUMNS", "100")
    assert plain_table([["a"]], [False]) is None


def test_plain_lines_are_the_text_rich_prints_or_decline(monkeypatch):
    # The piped search hits printed without rich (cli/common.py plain_lines) must be what
    # print_rich prints for the same lines with no_wrap and an ellipsis, byte for byte.
    import random

    from rich.console import Console
    from rich.text import Text

    from sessiontree.cli.common import PIPE_WIDTH, plain_lines

    for name in ("TTY_COMPATIBLE", "FORCE_COLOR", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    rng = random.Random(7)
    alphabet = "abcxyz-/_.~$,:[]()0123456789" * 4 + "  " * 20 + "\u2026\t"
    taken = declined = 0
    for _ in range(400):
        lines = ["".join(rng.choice(alphabet) for _ in range(rng.choice([0, 5, 80, 159, 160, 161, 300])))
                 for _ in range(rng.randint(1, 5))]
        text = plain_lines(lines)
        if text is None:
            declined += 1
            continue
        taken += 1
        console = Console(file=io.StringIO(), width=PIPE_WIDTH, highlight=False, markup=False, emoji=False,
                          force_terminal=False)
        with console.capture() as capture:
            console.print(Text("\n").join(Text(line) for line in lines), no_wrap=True, overflow="ellipsis")
        assert text + "\n" == "\n".join(line.rstrip() for line in capture.get().split("\n")), lines
    assert taken > 50 and declined > 50
    assert plain_lines(["x" * 161]) == "x" * 159 + "\u2026"
    monkeypatch.setenv("COLUMNS", "100")
    assert plain_lines(["a"]) is None


#: What the session-reading commands must not load unless they need it: the session manager
#: and what it brings (import, check, the JSONL store), rich's progress bar.
_NOT_FOR_READS = ("sessiontree.session.manager", "sessiontree.session.importing", "sessiontree.check",
                  "sessiontree.stores.jsonl", "sessiontree.stores.jsonl.store", "rich.progress")


def test_list_show_and_stats_load_only_what_they_print(small_store):
    # list --json: the store's listing and JSON, nothing of rich (no terminal, so no progress bar).
    loaded, out = _imported(["list", "--json"], small_store)
    assert {item["id"] for item in json.loads(out)} == {_SID, "pi-one"}
    assert sorted(m for m in (*_NOT_FOR_READS, *RUN_HEAVY) if m in loaded) == []
    # list (the table, piped): rich's table, but no progress bar, session manager or JSONL store.
    loaded, out = _imported(["list"], small_store)
    assert _SID[:8] in out and "pi-one" in out
    assert "rich.table" in loaded
    assert sorted(m for m in _NOT_FOR_READS if m in loaded) == []
    # stats (the table, piped): printed without rich (cli/common.py plain_table); the first
    # run fills the price cache (which loads the catalogue), the second is measured.
    _imported(["stats", "--json"], small_store)
    loaded, out = _imported(["stats", "--by", "agent"], small_store)
    lines = out.splitlines()
    # Two calls: claude-code's priced at $0.0205, pi's recorded $1.00 (see the test above).
    assert lines[0].split() == ["agent", "calls", "input", "output", "cache", "read", "cache", "write", "total",
                                "tokens", "cost"]
    assert lines[-2].split()[:2] == ["total", "2"]
    assert sorted(m for m in (*_NOT_FOR_READS, *RUN_HEAVY) if m in loaded) == []
    # show of a small session: read whole, without the session manager.
    loaded, out = _imported(["show", "pi-one"], small_store)
    assert out.startswith("id ") and "pi-one" in out
    assert sorted(m for m in _NOT_FOR_READS if m in loaded) == []


def test_a_markdown_export_loads_nothing_of_the_viewer(small_store, tmp_path):
    # The turn lines' cost rule lives beside price_records (usage/totals.py), so the export
    # prices them without importing the viewer's view models (0.08 s of imports).
    out = tmp_path / "out.md"
    loaded, _ = _imported(["export", "pi-one", "--format", "markdown", "--no-redact", "-o", str(out)], small_store)
    assert out.read_text().startswith("# pi-one\n")
    assert sorted(m for m in loaded if m.startswith("sessiontree.web")) == []


def test_a_piped_search_loads_no_rich_and_prints_what_rich_did(tmp_path):
    # search, piped: the hits as plain lines (cli/common.py plain_lines), no rich; the filters'
    # and the suggestions' modules (stores.origin, difflib) only when asked for.
    from builders import header, user_entry
    from sessiontree.stores.sqlite.store import SqliteStore

    db = tmp_path / "s.db"
    store = SqliteStore(str(db))
    store.create(header("one"), [user_entry("e1", None, "the flaky retry " + "word " * 60)])
    store.create(header("two"), [user_entry("e2", None, "a flaky parser")])
    store.close()
    env = {**os.environ, "SESSIONTREE_STORE": f"sqlite:///{db}", "SESSIONTREE_CONFIG": str(tmp_path / "none.toml")}
    for name in ("PYTHONDONTWRITEBYTECODE", "FORCE_COLOR", "TTY_COMPATIBLE", "COLUMNS"):
        env.pop(name, None)
    loaded, out = _imported(["search", "flaky"], env)
    lines = out.splitlines()
    assert sorted(line.split()[:3] for line in lines if not line.startswith(" ")) == [["one", "(1", "hit)"],
                                                                                      ["two", "(1", "hit)"]]
    cut = [line for line in lines if line.endswith("\u2026")]
    assert len(lines) == 4 and [len(line) for line in cut] == [160, 160]  # title and hit, cut as rich cuts them
    assert sorted(m for m in ("rich", "rich.console", "rich.text", "sessiontree.stores.origin", "difflib")
                  if m in loaded) == []
    loaded, out = _imported(["search", "flakx"], env)
    assert out == "No matches. Did you mean flaky?\n" and "difflib" in loaded
