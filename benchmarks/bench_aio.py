"""The cost of the async layer: N awaited appends against N synchronous ones (docs/aio.md).

    .venv/bin/python benchmarks/bench_aio.py              # 10,000 appends, 3 repetitions
    .venv/bin/python benchmarks/bench_aio.py -n 2000 --reps 5 --stores sqlite

For each store, the same N ``append_message`` calls (one message each, one
after the other) go through ``SessionManager`` and through
``AsyncSessionManager`` awaited from one task; each repetition uses a fresh
temporary directory and runs the two sides in alternating order, and the
table shows the median per side and the ratio async / sync (above 1 is the
overhead). SQLite and JSONL writes are durable (``synchronous = FULL`` /
``fsync``), so their ratio is what an agent sees; the memory store does no
I/O and no thread hop, so its ratio is the bookkeeping alone.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))

from sessiontree.session.aio import AsyncSessionManager  # noqa: E402
from sessiontree.session.manager import SessionManager  # noqa: E402
from sessiontree.stores import JsonlStore, MemoryStore, SqliteStore  # noqa: E402


def make_store(kind: str, directory: str):
    if kind == "sqlite":
        return SqliteStore(os.path.join(directory, "bench.db"))
    if kind == "jsonl":
        return JsonlStore(os.path.join(directory, "sessions"))
    return MemoryStore()


def message(i: int) -> dict:
    return {"role": "user", "content": f"message {i}: " + "x" * 200, "timestamp": 1700000000000 + i}


def run_sync(kind: str, n: int) -> float:
    with tempfile.TemporaryDirectory() as directory:
        store = make_store(kind, directory)
        manager = SessionManager.create(directory, store=store)
        start = time.perf_counter()
        for i in range(n):
            manager.append_message(message(i))
        elapsed = time.perf_counter() - start
        store.close()
        return elapsed


def run_async(kind: str, n: int) -> float:
    async def main() -> float:
        with tempfile.TemporaryDirectory() as directory:
            store = make_store(kind, directory)
            manager = await AsyncSessionManager.create(directory, store=store)
            start = time.perf_counter()
            for i in range(n):
                await manager.append_message(message(i))
            elapsed = time.perf_counter() - start
            await manager.aclose()
            store.close()
            return elapsed
    return asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=10_000, help="appends per run (default 10,000)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions per side (default 3)")
    parser.add_argument("--stores", default="sqlite,jsonl,memory", help="comma-separated: sqlite,jsonl,memory")
    args = parser.parse_args()
    print(f"{args.n:,} appends, median of {args.reps}; ratio = async / sync")
    print(f"{'store':8} {'sync s':>9} {'async s':>9} {'ratio':>7} {'sync us/op':>11} {'async us/op':>12}")
    for kind in args.stores.split(","):
        sync_times: list[float] = []
        async_times: list[float] = []
        for rep in range(args.reps):
            sides = [(run_sync, sync_times), (run_async, async_times)]
            for run, times in (sides if rep % 2 == 0 else sides[::-1]):
                times.append(run(kind, args.n))
                print(f"  {kind} rep {rep + 1} {run.__name__}: {times[-1]:.2f} s", file=sys.stderr)
        s, a = statistics.median(sync_times), statistics.median(async_times)
        print(f"{kind:8} {s:9.2f} {a:9.2f} {a / s:7.2f} {s / args.n * 1e6:11.0f} {a / args.n * 1e6:12.0f}")


if __name__ == "__main__":
    main()
