"""Search pages by cursor (docs/search.md, "Paging") against the first page: CPU time, interleaved.

A SQLite store of ``--sessions`` synthetic sessions of 6 entries, every entry saying "retry"
(the worst case for paging: every entry a hit), its index merged. Timed in one process,
cases interleaved and their order alternated per repetition, process CPU time, medians:

* ``-n 50``: the first page as ``sessiontree search -n 50`` asks it (no cursor);
* ``page 2`` / ``page 5`` / ``page 20``: the same search continued by the cursor of the page
  before (the store knows no cursor: it is asked for the hits up to and past it);
* ``viewer page 1``: the list page's search (``per_session``, 50 sessions) against the
  ``viewer before`` row, the sessions of the first 50 hits (what the list page did).

    PYTHONPATH=src python benchmarks/bench_search_cursor.py [--sessions 2000] [--reps 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from sessiontree.search.query import search
from sessiontree.stores import open_store


def _fill(path: str, sessions: int) -> None:
    store = open_store(path)
    for n in range(sessions):
        sid = f"019cadb4-6e80-7a3c-9b1d-{n:012x}"
        header = {"type": "session", "version": 4, "id": sid, "createdAt": "2026-03-01T09:00:00.000Z",
                  "cwd": f"/w/{n % 20}"}
        entries, parent = [], None
        for k in range(6):
            eid = f"e{n:05d}{k}"
            entries.append({"type": "message", "id": eid, "parentId": parent,
                            "timestamp": f"2026-03-01T09:{k:02d}:{n % 60:02d}.000Z",
                            "message": {"role": "user", "content": "retry " + "word " * ((n * 7 + k) % 40)}})
            parent = eid
        store.create(header, entries)
    store.settle_derived()
    store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "s.db")
        _fill(path, args.sessions)
        store = open_store(path, readonly=True)
        cursors = {1: None}
        result = search(store, "retry", limit=50)
        for page in range(2, 21):
            cursors[page] = result.next_cursor
            result = search(store, "retry", limit=50, cursor=result.next_cursor)
        cases = {
            "-n 50": lambda: search(store, "retry", limit=50),
            "page 2": lambda: search(store, "retry", limit=50, cursor=cursors[2]),
            "page 5": lambda: search(store, "retry", limit=50, cursor=cursors[5]),
            "page 20": lambda: search(store, "retry", limit=50, cursor=cursors[20]),
            "viewer page 1": lambda: search(store, "retry", limit=50, per_session=True),
            "viewer before": lambda: search(store, "retry").by_session(),
        }
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for rep in range(args.reps):
            for name in (list(cases) if rep % 2 == 0 else list(cases)[::-1]):
                started = time.process_time()
                cases[name]()
                samples[name].append(time.process_time() - started)
        store.close()
    base = statistics.median(samples["-n 50"])
    print(f"{args.sessions:,} sessions x 6 hits, {args.reps} interleaved reps, load {os.getloadavg()[0]:.1f}")
    for name, values in samples.items():
        cpu = statistics.median(values)
        print(f"  {name:15} {cpu * 1000:8.1f} ms CPU  {cpu / base:5.2f}x of -n 50")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
