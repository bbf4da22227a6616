"""Start-up of the command line, beside ccusage's and the interpreter's (issue 42, target 2:
any command within 150 ms).

    .venv/bin/python benchmarks/bench_startup.py                      # 10 reps, interleaved
    .venv/bin/python benchmarks/bench_startup.py --all-help           # every command's --help
    .venv/bin/python benchmarks/bench_startup.py --before /tmp/old/src  # another tree beside this one

Every row is a whole process, and every repetition runs every row once, in turn (the order
reversed every other repetition), so all rows meet the same load:

* the floor: ``python -c pass`` and ``python -c 'import click'``;
* **ccusage 20.0.24** (installed by :func:`peers.install`): ``--version``, ``claude daily
  --json --offline`` and ``statusline --offline`` (the JSON Claude Code sends on stdin);
* **sessiontree** (``python -m sessiontree``, the console script's path): ``--version``,
  ``--help``, commands' ``--help``, and real small runs: ``list``, ``list --json``, ``stats``,
  ``stats --json``, ``stats --by agent --json``, ``statusline`` (the same JSON on stdin),
  ``show`` of the first session and ``search`` of a common word.

The real runs read a small generated Claude Code home (``--sessions``, :mod:`home`) synced
into a SQLite store once before timing, with a warm price cache (one untimed run each):
the status bar's case. ``PYTHONDONTWRITEBYTECODE`` is removed from every child's
environment (the bytecode cache kept, as a user has it). Printed per row, medians: wall
time, the child's user + system CPU time (steadier than wall on a shared machine), and for
sessiontree the number of modules loaded and the ``-X importtime`` total of the top-level
imports (one extra run). The load average is printed before and after: read the CPU
column when it is high.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from home import build_home
from peers import _AGENT_VARIABLES, install

WORK = Path(__file__).resolve().parent / ".work" / "startup"

#: The commands whose ``--help`` is timed by default (``--all-help``: every command).
HELPS = ("list", "stats", "statusline", "sync", "diff", "export")

#: Prints the number of loaded modules after the command (the command exits through SystemExit).
_COUNT = ("import sys, atexit; atexit.register(lambda: print('MODULES', len(sys.modules), file=sys.stderr)); "
          "from sessiontree._launch import main; main(sys.argv[1:])")


def _env(home: Path, src: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _AGENT_VARIABLES and k != "PYTHONPATH"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(HOME=str(home), XDG_CACHE_HOME=str(WORK / "cache"), XDG_CONFIG_HOME=str(WORK / "config"),
               SESSIONTREE_STORE=f"sqlite:///{WORK / 'store.db'}")
    if src:
        env["PYTHONPATH"] = src
    return env


def _run(argv: list[str], env: dict[str, str], stdin: str | None) -> tuple[float, float]:
    """Wall and user + system CPU seconds of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, env=env, input=stdin, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _importtime(args: list[str], env: dict[str, str], stdin: str | None) -> tuple[float, int]:
    """The ``-X importtime`` total of top-level imports (ms) and the module count."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", _COUNT, *args], env=env, input=stdin,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True)
    total = 0
    modules = 0
    for line in proc.stderr.splitlines():
        if line.startswith("MODULES"):
            modules = int(line.split()[1])
        elif line.startswith("import time:") and "|" in line:
            _self, cumulative, name = line[len("import time:"):].split("|")
            if cumulative.strip().isdigit() and not name.startswith("  "):  # top level: one leading space
                total += int(cumulative)
    return total / 1000, modules


def _setup(sessions: int) -> tuple[Path, str, str]:
    """The small home synced into the store; returns the home, the status line's stdin and
    the first session's id."""
    home = WORK / "home"
    if WORK.exists():
        shutil.rmtree(WORK)
    paths = build_home(home, "claude-code", sessions)
    env = _env(home)
    subprocess.run([sys.executable, "-m", "sessiontree", "sync"], env=env, check=True, capture_output=True)
    path = Path(paths[0])
    stdin = json.dumps({"session_id": path.stem, "transcript_path": str(path), "cwd": str(home),
                        "model": {"id": "claude-opus-4-5", "display_name": "Opus"},
                        "workspace": {"current_dir": str(home), "project_dir": str(home)}, "version": "1.0.80",
                        "cost": {"total_cost_usd": 0.01}})
    return home, stdin, path.stem


def main() -> None:
    """Print one row per command, medians of ``--reps`` interleaved repetitions."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=20, help="sessions of the small home")
    parser.add_argument("--before", metavar="SRC", help="another tree's src/, timed interleaved (PYTHONPATH)")
    parser.add_argument("--all-help", action="store_true", help="every command's --help")
    parser.add_argument("--no-ccusage", action="store_true")
    args = parser.parse_args()
    ccusage = None if args.no_ccusage else install()[0]
    home, stdin, first = _setup(args.sessions)
    if args.all_help:
        from sessiontree.cli import COMMANDS

        helps = tuple(sorted(COMMANDS))
    else:
        helps = HELPS
    ours = [["--version"], ["--help"], *([name, "--help"] for name in helps),
            ["list"], ["list", "--json"], ["stats"], ["stats", "--json"], ["stats", "--by", "agent", "--json"],
            ["statusline"], ["show", first], ["search", "the"]]
    trees: list[tuple[str, str | None]] = [("", None)]
    if args.before:
        trees = [("before: ", args.before), ("after: ", None)]
    #: (label, argv, env, stdin, ours?)
    rows: list[tuple[str, list[str], dict[str, str], str | None, bool]] = [
        ("python -c pass", [sys.executable, "-c", "pass"], _env(home), None, False),
        ("python -c 'import click'", [sys.executable, "-c", "import click"], _env(home), None, False)]
    if ccusage is not None:
        rows += [("ccusage --version", [str(ccusage), "--version"], _env(home), None, False),
                 ("ccusage claude daily --json", [str(ccusage), "claude", "daily", "--json", "--offline"],
                  _env(home), None, False),
                 ("ccusage statusline", [str(ccusage), "statusline", "--offline"], _env(home), stdin, False)]
    for command in ours:
        for label, src in trees:
            rows.append((label + " ".join(command), [sys.executable, "-m", "sessiontree", *command],
                         _env(home, src), stdin if command == ["statusline"] else None, True))
    for _label, argv, env, given, _ in rows:
        _run(argv, env, given)  # warm the bytecode, page and price caches
    load0 = os.getloadavg()
    times: dict[str, list[tuple[float, float]]] = {label: [] for label, *_ in rows}
    for rep in range(args.reps):
        for label, argv, env, given, _ in (rows if rep % 2 == 0 else rows[::-1]):
            times[label].append(_run(argv, env, given))
    load1 = os.getloadavg()
    print(f"start-up: {args.reps} reps interleaved, medians; {os.cpu_count()} CPUs; python "
          f"{sys.version.split()[0]}; load average {load0[0]:.2f} before, {load1[0]:.2f} after; "
          f"small home of {args.sessions} Claude Code sessions")
    print(f"| {'command':<34} | wall ms | CPU ms | importtime ms | modules |")
    print(f"|{'-' * 36}|--------:|-------:|--------------:|--------:|")
    for label, argv, env, given, mine in rows:
        walls, cpus = zip(*times[label], strict=True)
        extra = "| |"
        if mine:
            imported, modules = _importtime(argv[3:], env, given)
            extra = f"| {imported:13.1f} | {modules:7d} |"
        print(f"| {label:<34} | {statistics.median(walls) * 1000:7.1f} | {statistics.median(cpus) * 1000:6.1f} "
              f"{extra}")


if __name__ == "__main__":
    main()
