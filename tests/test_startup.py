"""Start-up of the command line stays light (issue 42; docs/architecture.md, "Start-up").

``sessiontree --version``, ``--help`` and every command's ``--help`` run in a fresh
interpreter, and the modules loaded are checked: none of the heavy ones (rich's
progress and console, the web viewer's starlette and jinja2, detect-secrets, the price
catalogue, psycopg, the SQLite store, the session manager) may be imported before a
command starts its own work. Deterministic: ``sys.modules`` is compared, never a clock.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import click
import pytest

from sessiontree import __version__
from sessiontree.cli import COMMANDS, cli

#: Modules no start-up path may load: each costs tens of milliseconds or more.
HEAVY = (
    "rich.console",
    "rich.progress",
    "rich.table",
    "starlette",
    "jinja2",
    "detect_secrets",
    "genai_prices",
    "psycopg",
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
