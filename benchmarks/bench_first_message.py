"""``sessiontree list`` beside a session whose first message is 60 MB (docs/listing.md,
"First message"; the new-user test of round five found 7-13 s).

Writes one pi session file whose first user message is ``--mb`` MB of prose (spaces
every few words, like a pasted log) plus the three sample sessions of ``examples/``,
imports them into a SQLite store, a JSONL folder and (when a throwaway cluster can be
had, tests/pg.py) a PostgreSQL database, and times ``list`` and ``list --json`` as
subprocesses: user + system CPU (``RUSAGE_CHILDREN``) and wall, interleaved over
``--reps`` repetitions, medians. The memory store has no process to run the command
in; its ``list_sessions`` plus the table's title is timed in process.

With ``--old SRC`` (another checkout's ``src``, e.g. ``git archive <commit> src | tar -x
-C /tmp/old``) every row runs on both trees in the same loop, and the stores are
written twice: once by the old tree (what an upgraded user has until ``reindex``) and
once by this one. The load average is printed before and after.

Usage::

    python benchmarks/bench_first_message.py --old /tmp/old/src --reps 3
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [os.path.join(ROOT, "src"), os.path.join(ROOT, "tests")]

SESSION_ID = "019cadff-0000-7000-8000-000000000060"


def write_session(path: str, megabytes: int) -> None:
    """A pi session whose first user message is ``megabytes`` MB of words."""
    text = ("All work and no play makes Jack a dull boy. " * (megabytes * 25_000))[:megabytes * 1_000_000]
    records = [
        {"type": "session", "version": 4, "id": SESSION_ID, "createdAt": "2026-03-02T09:00:00.000Z",
         "cwd": "/home/dev/projects/big"},
        {"type": "message", "id": "b0000001", "parentId": None, "timestamp": "2026-03-02T09:00:05.000Z",
         "message": {"role": "user", "content": text, "timestamp": 1772442005000}},
        {"type": "message", "id": "b0000002", "parentId": "b0000001", "timestamp": "2026-03-02T09:00:09.000Z",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "Read it."}],
                     "timestamp": 1772442009000, "api": "anthropic-messages", "provider": "anthropic",
                     "model": "claude-sonnet-4-5", "stopReason": "stop",
                     "usage": {"input": 10, "output": 3, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 13,
                               "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}}},
    ]
    with open(path, "w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")


def command(src: str | None, store: str, *args: str) -> tuple[list[str], dict[str, str]]:
    """The ``sessiontree`` command line on tree ``src`` (``None``: this checkout)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = src or os.path.join(ROOT, "src")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["COLUMNS"] = "120"
    return [sys.executable, "-m", "sessiontree", "--store", store, *args], env


def timed(src: str | None, store: str, *args: str) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, stdout bytes) of one command."""
    argv, env = command(src, store, *args)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, len(done.stdout)


def memory_row(reps: int) -> tuple[float, int]:
    """Median CPU seconds of the memory store's listing plus the table's title, and the
    title's length (this tree only: the store lives in this process)."""
    from sessiontree.cli.common import session_title
    from sessiontree.format.codec import parse_session
    from sessiontree.session.listing import list_sessions
    from sessiontree.stores.memory import MemoryStore

    store = MemoryStore()
    with open(os.path.join(WORK, "in", "big.jsonl"), "rb") as source:
        parsed = parse_session(source.read())
    store.create(parsed.header, parsed.entries)
    times = []
    length = 0
    for _ in range(reps):
        start = time.process_time()
        for info in list_sessions(store):
            title = " ".join(session_title(info.name, info.summary, info.first_message).split())
            length = max(length, len(title))
        times.append(time.process_time() - start)
    return statistics.median(times), length


WORK = ""


def main() -> None:
    global WORK
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=60, help="size of the first message in MB (default 60)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--old", default=None, help="another checkout's src folder, timed beside this one")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}")
    WORK = tempfile.mkdtemp(prefix="bench-first-message-")
    cluster = None
    try:
        os.makedirs(os.path.join(WORK, "in"))
        write_session(os.path.join(WORK, "in", "big.jsonl"), args.mb)
        for name in os.listdir(os.path.join(ROOT, "examples")):
            shutil.copy(os.path.join(ROOT, "examples", name), os.path.join(WORK, "in", name))
        trees = {"after": None} | ({"before": args.old} if args.old else {})
        stores: dict[str, str] = {}
        for writer in trees:
            stores[f"sqlite, written {writer}"] = f"sqlite:///{WORK}/{writer}.db"
            os.makedirs(os.path.join(WORK, f"jsonl-{writer}"))
            stores[f"jsonl, written {writer}"] = f"jsonl:///{WORK}/jsonl-{writer}"
        if not args.no_postgres:
            import pg

            if pg.unavailable() is None:
                cluster = pg.start_cluster()
                for writer in trees:
                    stores[f"postgres, written {writer}"] = cluster.url(cluster.new_database(writer))
        for label, url in stores.items():
            writer = label.rsplit(" ", 1)[1]
            argv, env = command(trees[writer], url, "import", os.path.join(WORK, "in"))
            subprocess.run(argv, env=env, capture_output=True, check=True)
        results: dict[tuple[str, str, str], list[tuple[float, float, int]]] = {}
        for _ in range(args.reps):
            for label, url in stores.items():
                for what in (("list",), ("list", "--json")):
                    for tree, src in trees.items():
                        if tree == "after" or label.endswith("before"):
                            results.setdefault((label, " ".join(what), tree), []).append(timed(src, url, *what))
        print(f"load average at end: {os.getloadavg()}")
        print(f"\nfirst message {args.mb} MB; medians of {args.reps}; CPU = user + system of the command\n")
        print("| store | command | before: CPU / wall | after, store written before (no reindex) | after, store"
              " written after | CPU before / after | output bytes before -> after |")
        print("|---|---|---|---|---|---|---|")

        def median(key: tuple[str, str, str]) -> tuple[float, float, int] | None:
            runs = results.get(key)
            if not runs:
                return None
            return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), runs[0][2]

        kinds = dict.fromkeys(label.split(",")[0] for label in stores)
        for kind in kinds:
            for what in ("list", "list --json"):
                old = median((f"{kind}, written before", what, "before"))
                upgraded = median((f"{kind}, written before", what, "after"))
                fresh = median((f"{kind}, written after", what, "after"))
                assert fresh is not None
                cells = [f"{m[0]:.2f} / {m[1]:.2f} s" if m else "" for m in (old, upgraded, fresh)]
                ratio = f"{old[0] / fresh[0]:.1f}x" if old else ""
                sizes = f"{old[2]:,} -> {fresh[2]:,}" if old else f"{fresh[2]:,}"
                print(f"| {kind} | `{what}` | {' | '.join(cells)} | {ratio} | {sizes} |")
        cpu, length = memory_row(args.reps)
        print(f"\nmemory store, in process (this tree): listing + title {cpu:.3f} s CPU, title {length:,} characters")
    finally:
        if cluster is not None:
            cluster.destroy()
        shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
