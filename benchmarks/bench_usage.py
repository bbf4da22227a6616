"""The usage dashboard, the status line and insights on the benchmark store (issue 43;
docs/viewer.md "Usage dashboard", docs/statusline.md, docs/insights.md).

Builds (or reuses, ``--dir D --reuse``) the store of ``bench_stats.py``: N sessions
(default 10,000) of ``generate.py``, 10% of them forks. Then measures:

* **/usage first paint**: a fresh viewer app (as ``sessiontree serve`` starts it) answering
  ``GET /usage`` over every day, cold (the first request: listing, provenances, the
  usage rows); then warm; target 1 s;
* **/usage filter changes**: ``period=week``, ``stack=project``, ``agent=pi``,
  ``project=/home/dev/project-3``, ``metric=tokens``, ``since=2026-03-01``, each a full
  request on the warm app; target 300 ms each;
* **statusline**: ``sessiontree statusline`` as a status bar runs it (a new process, the
  JSON Claude Code sends on stdin), warm (the median of ``--reps`` after one unmeasured
  run); target 150 ms; and ``ccusage statusline`` in the same run when ``--ccusage CMD``
  is given or ``ccusage`` is on the PATH (against its own data: it reads Claude Code's
  folder, not this store);
* **insights across the store**: ``store_insights`` (reads every session once).

Wall and CPU (``time.process_time``; for the subprocess, the child's user + system) medians.

Usage::

    python benchmarks/bench_usage.py                          # 10,000 sessions (the build takes a while)
    python benchmarks/bench_usage.py --sessions 1000          # quick check
    python benchmarks/bench_usage.py --dir /tmp/b --reuse     # the store of an earlier bench_stats/bench_usage run
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
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_stats import build
from sessiontree.stores.sqlite.store import SqliteStore

FILTERS = ("period=week", "stack=project", "agent=pi", "project=/home/dev/project-3", "metric=tokens",
           "since=2026-03-01")


def _median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def time_dashboard(db: str, reps: int) -> list[tuple[str, float, float]]:
    """``(what, wall ms, cpu ms)`` rows of the dashboard."""
    from starlette.testclient import TestClient

    from sessiontree.web.app import create_app

    rows = []
    cold_wall, cold_cpu = [], []
    for _ in range(reps):
        store = SqliteStore(db, readonly=True)
        try:
            t0, c0 = time.perf_counter(), time.process_time()
            client = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
            response = client.get("/usage?since=")
            cold_wall.append(time.perf_counter() - t0)
            cold_cpu.append(time.process_time() - c0)
            assert response.status_code == 200, response.text[:200]
        finally:
            store.close()
    rows.append(("/usage first paint (fresh app, every day)", _median_ms(cold_wall), _median_ms(cold_cpu)))
    store = SqliteStore(db, readonly=True)
    try:
        client = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
        client.get("/usage?since=")
        for query in ("since=", *(f"since=&{f}" if not f.startswith("since") else f for f in FILTERS)):
            wall, cpu = [], []
            for _ in range(reps):
                t0, c0 = time.perf_counter(), time.process_time()
                response = client.get(f"/usage?{query}")
                wall.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
                assert response.status_code == 200, response.text[:200]
            rows.append((f"/usage?{query} (warm)", _median_ms(wall), _median_ms(cpu)))
    finally:
        store.close()
    return rows


def _run(command: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, float, bytes]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(command, input=stdin, capture_output=True, env=env, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu, done.stdout


def time_statusline(db: str, reps: int, ccusage: str | None) -> list[tuple[str, float, float]]:
    with SqliteStore(db, readonly=True) as store:
        session_id = sorted(store.session_ids())[len(store.session_ids()) // 2]
    payload = json.dumps({"hook_event_name": "Status", "session_id": session_id, "cwd": "/home/dev/project-1",
                          "transcript_path": f"/tmp/{session_id}.jsonl",
                          "model": {"id": "claude-sonnet-4-5", "display_name": "Sonnet"}}).encode()
    env = {**os.environ, "SESSIONTREE_STORE": f"sqlite:///{db}",
           "SESSIONTREE_CONFIG": os.path.join(os.path.dirname(db), "no-config.toml")}
    script = shutil.which("sessiontree") or os.path.join(os.path.dirname(sys.executable), "sessiontree")
    commands = [("sessiontree statusline (warm)", [script, "statusline"]),
                ("python -c pass (process floor)", [sys.executable, "-c", "pass"])]
    if ccusage:
        # --offline: its bundled prices, no network (as ours).
        commands.append(("ccusage statusline --offline (warm, its own data)", [*ccusage.split(), "statusline",
                                                                              "--offline"]))
    rows = []
    for name, command in commands:
        _run(command, payload, env)  # warm the page cache
        samples = [_run(command, payload, env) for _ in range(reps)]
        rows.append((name, _median_ms([s[0] for s in samples]), _median_ms([s[1] for s in samples])))
        if name.startswith("sessiontree"):
            print(f"statusline says: {samples[-1][2].decode().strip()}", file=sys.stderr)
    return rows


def time_insights(db: str) -> list[tuple[str, float, float]]:
    from sessiontree.usage.insights import store_insights

    with SqliteStore(db, readonly=True) as store:
        t0, c0 = time.perf_counter(), time.process_time()
        result = store_insights(store)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"insights: {result.sessions:,} sessions, {result.tool_calls:,} tool calls, {result.tool_errors:,} errors, "
          f"{result.error_loops:,} loops, {result.interrupted_calls:,} interrupted", file=sys.stderr)
    return [("insights across the store (store_insights)", wall * 1000, cpu * 1000)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--entries", type=int, default=40, help="entries per (non-fork) session")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--reuse", action="store_true", help="time the store already built in --dir")
    parser.add_argument("--ccusage", default=shutil.which("ccusage"),
                        help="the ccusage command to compare the status line with (default: ccusage on the PATH)")
    parser.add_argument("--skip", default="", help="parts to skip, comma-separated: dashboard,statusline,insights")
    args = parser.parse_args(argv)
    directory = args.dir or tempfile.mkdtemp(prefix="bench-usage-")
    os.makedirs(directory, exist_ok=True)
    try:
        db = os.path.join(directory, "stats.db")
        started = time.perf_counter()
        if args.reuse:
            SqliteStore(db).close()
        else:
            db, _export, _total = build(directory, args.sessions, args.entries)
        print(f"{'reused' if args.reuse else 'built'} the store in {time.perf_counter() - started:.1f} s "
              f"({directory})", file=sys.stderr)
        skip = set(args.skip.split(","))
        rows: list[tuple[str, float, float]] = []
        if "dashboard" not in skip:
            rows += time_dashboard(db, args.reps)
        if "statusline" not in skip:
            rows += time_statusline(db, args.reps, args.ccusage)
        if "insights" not in skip:
            rows += time_insights(db)
        print("| what | wall ms | cpu ms |")
        print("|---|---:|---:|")
        for name, wall, cpu in rows:
            print(f"| {name} | {wall:,.0f} | {cpu:,.0f} |")
        if not args.ccusage and "statusline" not in skip:
            print("\nccusage is not installed: no ccusage row (give --ccusage 'npx ccusage' where it is)")
        return 0
    finally:
        if args.dir is None:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
