"""Peak memory of import, sync, check and migrate on one large session file.

Generates a session of ``--entries`` entries with ``generate.py`` (100,000 entries
is about 213 MB), then runs each command in its own process and reports the
process's peak resident set size (``ru_maxrss`` from ``os.wait4``) and the ratio
to the file's size. ``--limit-mb`` sets ``SESSIONTREE_MAX_FILE_MB`` for the runs
(default: the built-in limit), so a file over it shows the refusal's cost.
Results: docs/stores.md, "Large files".

    python benchmarks/bench_large_input.py --entries 100000 --dir /tmp/large
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"


def _peak(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Run ``argv``; return (peak RSS in MiB, wall seconds, exit status)."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss / 1024, time.monotonic() - start, proc.returncode  # Linux: ru_maxrss is KiB


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--dir", default="/tmp/sessiontree-large")
    parser.add_argument("--limit-mb", help="SESSIONTREE_MAX_FILE_MB for the runs")
    args = parser.parse_args(argv)
    work = Path(args.dir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    source = work / "big.jsonl"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    subprocess.run([sys.executable, str(HERE / "generate.py"), str(source), "--entries", str(args.entries)],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    if args.limit_mb is not None:
        env["SESSIONTREE_MAX_FILE_MB"] = args.limit_mb
    size_mb = source.stat().st_size / 2**20
    cli = [sys.executable, "-c", "from sessiontree.cli import main; main()"]
    shutil.copy(source, work / "migrate.jsonl")
    (work / "jsonl-store").mkdir()
    runs = {
        "python + sessiontree --help": [*cli, "--help"],
        "import (SQLite)": [*cli, "--store", str(work / "import.db"), "import", str(source)],
        "import (JSONL)": [*cli, "--store", str(work / "jsonl-store"), "import", str(source)],
        "sync (SQLite)": [*cli, "--store", str(work / "sync.db"), "sync", str(source)],
        "check FILE": [*cli, "check", str(source)],
        "migrate (already format 4)": [*cli, "migrate", "--no-backup", str(work / "migrate.jsonl")],
        "check --store (SQLite)": [*cli, "--store", str(work / "import.db"), "check", "--store"],
    }
    print(f"file: {size_mb:.0f} MiB ({args.entries} entries)")
    for name, command in runs.items():
        peak, wall, code = _peak(command, env)
        print(f"{name:30} peak {peak:7.0f} MiB  {peak / size_mb:4.1f}x file  {wall:6.1f} s  exit {code}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
