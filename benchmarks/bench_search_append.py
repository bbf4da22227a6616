"""Append cost of the SQLite search index: with vs without, interleaved in one process.

The target ("appends stay within 10% of their speed before the
index") measured on a loaded, shared machine: each repetition runs every row
once with the index and once without (``DERIVED_INDEXES`` minus the search
index), alternating which goes first, and the ratio is taken per repetition,
then the median of the ratios is printed (so slow phases of the machine hit
both sides of a ratio). Wall time and process CPU time are both reported; CPU
time is steadier under load, wall time includes the fsyncs.

Rows (1,000 realistic messages, the same generator and seed as ``run.py``):

* ``call full``: ``SessionManager.append_message`` per message, ``synchronous=FULL``
* ``call normal``: the same with ``synchronous="normal"``
* ``batch 100``: ``SqliteStore.append`` of 100 entries per transaction
* ``batch all``: one ``SqliteStore.append`` of every entry

Also ``--merge``: the cost of merging N pending entries into FTS5 (what the
pending tail defers), and of scanning them as the query does.

    PYTHONPATH=src python benchmarks/bench_search_append.py [--count 1000] [--reps 5] [--rows call,batch]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import generate
from sessiontree.format.ids import new_entry_id
from sessiontree.session.manager import SessionManager
from sessiontree.stores.sqlite import search as sqlite_search
from sessiontree.stores.sqlite.store import DERIVED_INDEXES, SqliteStore


def messages(count: int) -> list[dict[str, Any]]:
    """``count`` message objects, as ``run.py``'s ``messages(count)``."""
    records = generate.generate_records(generate.SessionSpec(entries=int(count * 1.15) + 50, seed=99))
    found = [r["message"] for r in records[1:] if r["type"] == "message"][:count]
    first_user = next(i for i, m in enumerate(found) if m["role"] == "user")
    return found[first_user:] + found[:first_user]


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


def run_call(path: str, msgs: list[dict[str, Any]], synchronous: str) -> None:
    """``append_message`` per message: one transaction each."""
    store = SqliteStore(path, synchronous=synchronous)
    manager = SessionManager.create("/home/dev/work/project", store=store)
    for message in msgs:
        manager.append_message(message)
    store.close()


def run_batch(path: str, msgs: list[dict[str, Any]], batch: int) -> None:
    """``SqliteStore.append`` of ``batch`` entries per transaction."""
    store = SqliteStore(path)
    manager = SessionManager.create("/home/dev/work/project", store=store)
    header = manager.get_header()
    store.create(header, [])
    used: set[str] = set()
    parent = None
    stamp = 1_767_225_600_000
    pending: list[dict[str, Any]] = []
    for message in msgs:
        entry_id = new_entry_id(used)
        used.add(entry_id)
        stamp += 1
        pending.append({"type": "message", "id": entry_id, "parentId": parent, "timestamp": _iso(stamp),
                        "message": message})
        parent = entry_id
        if len(pending) == batch:
            store.append(header["id"], pending)
            pending = []
    if pending:
        store.append(header["id"], pending)
    store.close()


def timed(fn: Any, *args: Any) -> tuple[float, float]:
    """(wall, cpu) seconds of ``fn(*args)``."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn(*args)
    return time.perf_counter() - wall, time.process_time() - cpu


def set_index(on: bool) -> None:
    """Register or unregister the search index (the "before the index" state)."""
    if on and sqlite_search.INDEX not in DERIVED_INDEXES:
        DERIVED_INDEXES.append(sqlite_search.INDEX)
    elif not on and sqlite_search.INDEX in DERIVED_INDEXES:
        DERIVED_INDEXES.remove(sqlite_search.INDEX)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--rows", default="call full,call normal,batch 100,batch all")
    args = parser.parse_args()
    msgs = messages(args.count)
    rows = {
        "call full": (run_call, "full"),
        "call normal": (run_call, "normal"),
        "batch 100": (run_batch, 100),
        "batch all": (run_batch, args.count),
    }
    chosen = [name.strip() for name in args.rows.split(",")]
    base = tempfile.mkdtemp(prefix="bench-search-append-")
    results: dict[str, dict[bool, list[tuple[float, float]]]] = {name: {True: [], False: []} for name in chosen}
    try:
        for rep in range(args.reps + 1):  # the first repetition warms up and is dropped
            for name in chosen:
                fn, arg = rows[name]
                for on in ((True, False) if rep % 2 else (False, True)):
                    set_index(on)
                    path = os.path.join(base, f"{rep}-{name.replace(' ', '-')}-{on}.db")
                    took = timed(fn, path, msgs, arg)
                    for suffix in ("", "-wal", "-shm"):
                        if os.path.exists(path + suffix):
                            os.remove(path + suffix)
                    if rep:
                        results[name][on].append(took)
        set_index(True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"{args.count:,} appends, {args.reps} interleaved repetitions; medians")
    print(f"{'row':<12} {'with wall':>10} {'without':>10} {'ratio':>6}   {'with cpu':>10} {'without':>10} {'ratio':>6}")
    for name in chosen:
        on, off = results[name][True], results[name][False]
        wall = statistics.median(a[0] / b[0] for a, b in zip(on, off, strict=True))
        cpu = statistics.median(a[1] / b[1] for a, b in zip(on, off, strict=True))
        print(f"{name:<12} {statistics.median(a[0] for a in on):>9.3f}s {statistics.median(b[0] for b in off):>9.3f}s"
              f" {wall:>6.2f}   {statistics.median(a[1] for a in on):>9.3f}s"
              f" {statistics.median(b[1] for b in off):>9.3f}s {cpu:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
