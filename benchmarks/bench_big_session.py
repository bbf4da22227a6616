"""Whole commands on one big session against pi's own open + context (issue 42, "Big sessions").

    .venv/bin/python benchmarks/bench_big_session.py                       # 100,000 entries, 3 repetitions
    .venv/bin/python benchmarks/bench_big_session.py --before /tmp/old/src --redacted
    .venv/bin/python benchmarks/bench_big_session.py --before /tmp/old/src --before-store /tmp/old.db

A generated session (``generate.py``, format 3, cached in ``benchmarks/.work/big/``) is
imported into a SQLite store once. Then, interleaved per repetition, each in a fresh
process: pi's ``SessionManager.open`` + ``buildSessionContext`` of the same file
(``node/driver.mjs`` op ``resume``; the figure is the driver's own timing, without Node's
start-up, and the whole process beside it), and ``sessiontree context``,
``diff --json`` (the two most recent leaves) and ``export --format markdown --no-redact``
as whole commands (Python start-up included), with ``--redacted`` the default redacted
export too. Printed: the median wall time and the median user + system CPU time of each;
with ``--before SRC`` the same commands of another tree (``PYTHONPATH``) in the same
repetitions. The load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, ".work")
BIG = os.path.join(WORK, "big")
DRIVER = os.path.join(HERE, "node", "driver.mjs")
sys.path.insert(0, HERE)

import generate  # noqa: E402
import reference  # noqa: E402


def _timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Wall and user + system CPU seconds of one process, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{argv[:6]} exited {done.returncode}: {done.stderr.decode()[-800:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout.decode()


def _prepare(entries: int) -> tuple[str, str, str]:
    """The session file, the store and the session id (made once, cached)."""
    os.makedirs(BIG, exist_ok=True)
    path = os.path.join(BIG, f"s{entries}.jsonl")
    db = os.path.join(BIG, f"s{entries}.db")
    if not os.path.exists(path):
        generate.write_session(path, generate.SessionSpec(entries=entries))
    with open(path, "rb") as handle:
        session_id = json.loads(handle.readline())["id"]
    if not os.path.exists(db):
        subprocess.run([sys.executable, "-m", "sessiontree", "--store", db, "import", path], check=True,
                       stdout=subprocess.DEVNULL)
    return path, db, session_id


def main() -> None:
    """Print one row per command (and per tree)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--entries", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--before", metavar="SRC", help="another tree's src/, run in the same repetitions")
    parser.add_argument("--before-store", metavar="DB", help="the store the --before tree reads (a copy made before "
                        "a schema step it does not know: it refuses a store carrying one); default: the same store")
    parser.add_argument("--redacted", action="store_true", help="also the default (redacted) Markdown export")
    args = parser.parse_args()
    path, db, sid = _prepare(args.entries)
    module, version = reference.ensure_reference(WORK, log=lambda *_: None)
    tmp = tempfile.mkdtemp(prefix="big-", dir=WORK)
    out = os.path.join(tmp, "out.md")
    commands = {
        "context": ["context", sid],
        "diff --json": ["diff", sid, "--json"],
        "export markdown --no-redact": ["export", sid, "--format", "markdown", "--no-redact", "-o", out],
    }
    if args.redacted:
        commands["export markdown (redacted)"] = ["export", sid, "--format", "markdown", "-o", out]
    trees: list[tuple[str, str | None]] = [("after", None)]
    if args.before:
        trees.insert(0, ("before", args.before))
    stores = {"after": db, "before": args.before_store or db}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    pi_cmd = {"op": "resume", "module": os.path.abspath(module), "file": os.path.abspath(path),
              "tmp": os.path.abspath(tmp), "warmup": 0, "iters": 1, "first_timed": True}
    pi_argv = ["node", "--max-old-space-size=16384", DRIVER, json.dumps(pi_cmd)]
    rows: dict[str, list[tuple[float, float]]] = {}
    pi_inner: list[float] = []
    print(f"{args.entries:,} entries, {os.path.getsize(path) / 1e6:.1f} MB; pi {version}; "
          f"load average {os.getloadavg()[0]:.2f} at the start", flush=True)
    for rep in range(args.reps):
        order = list(commands.items()) if rep % 2 == 0 else list(reversed(commands.items()))
        wall, cpu, text = _timed(pi_argv)
        rows.setdefault("pi open + context (process)", []).append((wall, cpu))
        pi_inner.append(statistics.median(json.loads(text)["times"]))
        for name, command in order:
            for label, src in trees if rep % 2 == 0 else reversed(trees):
                tree_env = dict(env, PYTHONPATH=src) if src else env
                wall, cpu, _ = _timed([sys.executable, "-m", "sessiontree", "--store", stores[label], *command],
                                      tree_env)
                rows.setdefault(f"{label}: {name}", []).append((wall, cpu))
        print(f"repetition {rep + 1} done, load average {os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
    pi = statistics.median(pi_inner)
    print(f"{'what':<42} {'wall s':>8} {'cpu s':>8} {'wall / pi':>10}")
    print(f"{'pi open + context (in the driver)':<42} {pi:8.2f} {'':>8} {1.0:10.2f}")
    for name, samples in rows.items():
        wall = statistics.median(s[0] for s in samples)
        cpu = statistics.median(s[1] for s in samples)
        print(f"{name:<42} {wall:8.2f} {cpu:8.2f} {wall / pi:10.2f}")
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} at the end; {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
