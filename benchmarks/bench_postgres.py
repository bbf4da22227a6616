"""PostgresStore beside SqliteStore, in one run (docs/postgres.md).

Times, on each store, with the same data:

* appends per second, one entry per call (what an agent does) and batched
  (100 entries per call);
* listing 10,000 sessions (``list_sessions()``, medians of 5);
* loading one 2,000-entry session;
* search (:data:`SEARCHES`: many candidates, few, and a term too short for
  trigrams; medians of 5);
* stats (``store.usage``) where the store offers it (skipped, and said so,
  on a branch without the usage ledger).

PostgreSQL is a throwaway cluster started for the run (tests/pg.py: ``fsync=off``,
``synchronous_commit=off``, so appends are not bound by the disk; SQLite is timed
both with ``synchronous=full``, its default, and ``normal``). Or pass ``--url`` to
time an existing server.

Usage::

    python benchmarks/bench_postgres.py                  # 10,000 sessions
    python benchmarks/bench_postgres.py --sessions 1000  # quick
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "src"), os.path.join(HERE, "..", "tests")]

# After the path insert: the script runs from a checkout without an installed package, and
# its PostgreSQL cluster helper (tests/pg.py) is on the path only from the line above.
from sessiontree.stores.postgres.store import PostgresStore  # noqa: E402
from sessiontree.stores.sqlite.store import SqliteStore  # noqa: E402

STAMP = "2026-02-01T09:00:00.000Z"


def _header(session_id: str) -> dict[str, Any]:
    return {"type": "session", "version": 4, "id": session_id, "createdAt": STAMP, "cwd": f"/work/p{hash(session_id) % 20}"}


def _entry(i: int, parent: str | None) -> dict[str, Any]:
    if i % 2:
        message = {"role": "assistant", "content": [{"type": "text", "text": f"answer {i}: the pool recovers " * 4}],
                   "provider": "p", "model": "m", "stopReason": "stop", "timestamp": 1,
                   "usage": {"input": 1000 + i, "output": 200, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1200 + i,
                             "cost": {"input": 0.003, "output": 0.003, "cacheRead": 0, "cacheWrite": 0, "total": 0.006}}}
    else:
        message = {"role": "user", "content": f"question {i} about advisory locks and trigram indexes", "timestamp": 1}
    return {"type": "message", "id": f"e{i:06d}", "parentId": parent, "timestamp": STAMP, "message": message}


def _chain(n: int) -> list[dict[str, Any]]:
    out, parent = [], None
    for i in range(n):
        out.append(_entry(i, parent))
        parent = out[-1]["id"]
    return out


#: (row label, query, limit): a term in every user message (many candidates, best 50), a
#: rare one (the trigram index narrows to a few rows), a two-character one (no trigram:
#: a scan of the folded text on PostgreSQL, of search_entries on SQLite).
SEARCHES = (
    ("search: common words, best 50", "advisory locks", 50),
    ("search: rare term, all hits", "answer 1999:", None),
    ("search: 2-character term, best 50", "42", 50),
)


def _rate(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f}/s"


def measure(store: Any, sessions: int) -> dict[str, str]:
    results: dict[str, str] = {}
    entries = _chain(2000)
    store.create(_header("per-call"))
    started = time.perf_counter()
    for entry in entries[:1000]:
        store.append("per-call", [entry])
    results["append, 1 entry per call"] = _rate(1000, time.perf_counter() - started)
    store.create(_header("batched"))
    started = time.perf_counter()
    for k in range(0, 2000, 100):
        store.append("batched", entries[k:k + 100])
    results["append, 100 per call"] = _rate(2000, time.perf_counter() - started)
    started = time.perf_counter()
    batch = []
    for n in range(sessions):
        batch.append((_header(f"s{n:06d}"), _chain(10), None))
        if len(batch) == 500:
            store.create_many(batch)
            batch = []
    if batch:
        store.create_many(batch)
    results[f"create {sessions:,} sessions x 10 entries"] = f"{time.perf_counter() - started:.1f} s"
    times = []
    for _ in range(5):
        started = time.perf_counter()
        rows = store.list_sessions()
        times.append(time.perf_counter() - started)
    assert len(rows) == sessions + 2
    results[f"list {len(rows):,} sessions (median of 5)"] = f"{statistics.median(times) * 1000:.0f} ms"
    times = []
    for _ in range(5):
        started = time.perf_counter()
        store.load("batched")
        times.append(time.perf_counter() - started)
    results["load a 2,000-entry session"] = f"{statistics.median(times) * 1000:.0f} ms"
    for label, query, limit in SEARCHES:
        times = []
        for _ in range(5):
            started = time.perf_counter()
            hits = store.search(query, limit=limit)
            times.append(time.perf_counter() - started)
        results[f"{label} ({len(hits):,} hits)"] = f"{statistics.median(times) * 1000:.0f} ms"
    usage = getattr(store, "usage", None)
    if usage is None:
        results["stats: usage(), whole store"] = "n/a (not on this branch)"
        results["stats: usage(), per session"] = "n/a (not on this branch)"
    else:
        from sessiontree.core.usage import UsageQuery

        for label, query in (("stats: usage(), whole store", UsageQuery(by_time=False)),
                             ("stats: usage(), per session", UsageQuery(per_session=True, by_time=False))):
            times = []
            for _ in range(5):
                started = time.perf_counter()
                usage(query)
                times.append(time.perf_counter() - started)
            results[label] = f"{statistics.median(times) * 1000:.0f} ms"
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--url", help="an existing PostgreSQL database (default: a throwaway cluster)")
    args = parser.parse_args()
    cluster = None
    if args.url is None:
        import pg

        cluster = pg.start_cluster()
        url = cluster.url(cluster.new_database("bench"))
    else:
        url = args.url
    columns: dict[str, dict[str, str]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for label, make in (
                ("sqlite (full)", lambda: SqliteStore(os.path.join(tmp, "full.db"))),
                ("sqlite (normal)", lambda: SqliteStore(os.path.join(tmp, "normal.db"), synchronous="normal")),
                ("postgres (tcp)", lambda: PostgresStore(url)),
            ):
                store = make()
                try:
                    columns[label] = measure(store, args.sessions)
                finally:
                    store.close()
                print(f"{label}: done", file=sys.stderr)
    finally:
        if cluster is not None:
            cluster.destroy()
    labels = list(columns)
    rows = list(next(iter(columns.values())))
    print("| operation | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for row in rows:
        print(f"| {row} | " + " | ".join(columns[label].get(row, "") for label in labels) + " |")


if __name__ == "__main__":
    main()
