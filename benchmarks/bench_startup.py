"""Start-up of the command line: ``--version``, ``--help`` and a command's ``--help`` (issue 42).

    .venv/bin/python benchmarks/bench_startup.py                  # 20 runs of each
    .venv/bin/python benchmarks/bench_startup.py --reps 40 -- list --help
    .venv/bin/python benchmarks/bench_startup.py --before /tmp/old/src   # interleaved with another tree

Each command runs in a fresh ``python -m sessiontree`` process (the bytecode cache kept,
as a user has it: ``PYTHONDONTWRITEBYTECODE`` is removed from the child's environment).
Printed per command, median of ``--reps``: wall time, the child's user + system CPU time
(steadier than wall time on a shared machine), the number of modules loaded at exit and
the ``-X importtime`` total of the top-level imports (one extra run). The load average is
printed beside them: read the CPU column when it is high.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

DEFAULT = (("--version",), ("--help",), ("list", "--help"), ("diff", "--help"), ("export", "--help"))

#: Prints the number of loaded modules after the command (the command exits through SystemExit).
_COUNT = ("import sys, atexit; atexit.register(lambda: print('MODULES', len(sys.modules), file=sys.stderr)); "
          "from sessiontree.cli import main; main(sys.argv[1:])")


def _env(src: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if src:
        env["PYTHONPATH"] = src
    return env


def _run(argv: list[str], src: str | None = None) -> tuple[float, float]:
    """Wall and user + system CPU seconds of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, env=_env(src), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _importtime(args: tuple[str, ...], src: str | None = None) -> tuple[float, int]:
    """The ``-X importtime`` total of top-level imports (ms) and the module count."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", _COUNT, *args], env=_env(src),
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


def main() -> None:
    """Print one row per command."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--before", metavar="SRC", help="another tree's src/, timed interleaved (PYTHONPATH)")
    parser.add_argument("command", nargs="*", help="one command to time (default: a fixed set)")
    args = parser.parse_args()
    commands = (tuple(args.command),) if args.command else DEFAULT
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}, python {sys.version.split()[0]}")
    print(f"{'command':<30} {'wall ms':>8} {'cpu ms':>8} {'importtime ms':>14} {'modules':>8}")
    floor = [sys.executable, "-c", "import click"]  # the interpreter and click alone: the floor
    _run(floor)
    walls, cpus = zip(*(_run(floor) for _ in range(args.reps)), strict=True)
    label = "(python -c 'import click')"
    print(f"{label:<30} {statistics.median(walls) * 1000:8.1f} "
          f"{statistics.median(cpus) * 1000:8.1f}")
    trees: list[tuple[str, str | None]] = [("", None)]
    if args.before:
        trees.insert(0, ("before: ", args.before))
        trees[1] = ("after:  ", None)
    for command in commands:
        argv = [sys.executable, "-m", "sessiontree", *command]
        times: dict[str | None, list[tuple[float, float]]] = {src: [] for _, src in trees}
        for _, src in trees:
            _run(argv, src)  # warm the bytecode cache and the page cache
        for _ in range(args.reps):
            for _, src in trees:  # interleaved: the same load for both trees
                times[src].append(_run(argv, src))
        for label, src in trees:
            walls, cpus = zip(*times[src], strict=True)
            imported, modules = _importtime(command, src)
            name = label + " ".join(command)
            print(f"{name:<30} {statistics.median(walls) * 1000:8.1f} {statistics.median(cpus) * 1000:8.1f} "
                  f"{imported:14.1f} {modules:8d}")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
