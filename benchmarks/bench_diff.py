"""The cost of ``diff``: two branches of a long session that share most of their entries
(docs/diff.md).

    .venv/bin/python benchmarks/bench_diff.py                 # 100,000 entries, 90,000 shared
    .venv/bin/python benchmarks/bench_diff.py -n 20000 --shared 18000 --reps 5

The session is a chain of alternating user and billed assistant messages (every tenth
assistant turn reads or edits a file); at ``--shared`` entries it forks into two
branches of equal length. Measured, median of ``--reps``: ``diff_branches`` from an open
manager (paths, alignment, both projections, cost columns), and the whole command
``sessiontree --store DB diff ID --json`` in a fresh process against a SQLite store
(Python start-up, store open, reading the session included). The library figure is given
as wall and CPU time: on a shared machine the CPU time is the steadier one; read the load
average beside either.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src")
sys.path.insert(0, SRC)

from sessiontree.diff import diff_branches  # noqa: E402
from sessiontree.session.manager import SessionManager  # noqa: E402
from sessiontree.stores import SqliteStore  # noqa: E402

SESSION = "019cadb4-0000-7000-8000-0000000000be"


def _stamp(i: int) -> str:
    seconds = i  # one entry a second from 2026-01-01
    return f"2026-01-{1 + seconds // 86400:02d}T{seconds // 3600 % 24:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.000Z"


def _entry(i: int, entry_id: str, parent: str | None, tag: str) -> dict:
    if i % 2 == 0:
        message = {"role": "user", "content": f"{tag} step {i}: " + "x" * 120, "timestamp": i}
    else:
        content: list[dict] = [{"type": "text", "text": f"{tag} reply {i} " + "y" * 120}]
        if i % 20 == 1:
            content.append({"type": "toolCall", "id": f"c{entry_id}", "name": "read" if i % 40 == 1 else "edit",
                            "arguments": {"path": f"src/f{i % 97}.py"}})
        message = {"role": "assistant", "content": content, "api": "x", "provider": "p", "model": "m",
                   "usage": {"input": 100, "output": 10, "cacheRead": 0, "cacheWrite": 0,
                             "cost": {"total": 0.0011}},
                   "stopReason": "stop", "timestamp": i}
        # A toolCall with stop "stop" is closed by no result: keep the projection realistic.
        if len(content) > 1:
            message["stopReason"] = "stop"
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": _stamp(i), "message": message}


def build(total: int, shared: int) -> tuple[list[dict], str, str]:
    entries, parent = [], None
    for i in range(shared):
        entry_id = f"{i:08x}"
        entries.append(_entry(i, entry_id, parent, "shared"))
        parent = entry_id
    fork = parent
    side = (total - shared) // 2
    leaves = []
    for tag, base in (("a", 0x10000000), ("b", 0x20000000)):
        parent = fork
        for k in range(side):
            entry_id = f"{base + k:08x}"
            entries.append(_entry(shared + k, entry_id, parent, tag))
            parent = entry_id
        leaves.append(parent)
    return entries, leaves[0], leaves[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=100_000, help="entries in the session")
    parser.add_argument("--shared", type=int, default=90_000, help="entries both branches share")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    entries, leaf_a, leaf_b = build(args.n, args.shared)
    header = {"type": "session", "version": 4, "id": SESSION, "createdAt": "2026-01-01T00:00:00.000Z", "cwd": "/w"}
    with tempfile.TemporaryDirectory() as directory:
        db = os.path.join(directory, "bench.db")
        store = SqliteStore(db)
        store.create(header, entries)
        manager = SessionManager.open(store, SESSION)
        library, cpu = [], []
        for _ in range(args.reps):
            start, start_cpu = time.perf_counter(), time.process_time()
            result = diff_branches(manager, SESSION, leaf_a, leaf_b)
            library.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        store.close()
        command = []
        argv = [sys.executable, "-c", "import sys; from sessiontree.cli import main; main(sys.argv[1:])",
                "--store", db, "diff", SESSION, "--a", leaf_a, "--b", leaf_b, "--json"]
        for _ in range(args.reps):
            start = time.perf_counter()
            done = subprocess.run(argv, env={**os.environ, "PYTHONPATH": SRC}, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, check=False)
            command.append(time.perf_counter() - start)
            if done.returncode != 0:
                raise SystemExit(f"diff exited {done.returncode}: {done.stderr.decode()[:500]}")
    print(f"{args.n:,} entries, {args.shared:,} shared, {len(result.diff.rows):,} aligned rows")
    print(f"diff_branches from an open manager: {statistics.median(library) * 1000:8.1f} ms wall, "
          f"{statistics.median(cpu) * 1000:8.1f} ms CPU (median of {args.reps}; fastest "
          f"{min(library) * 1000:.1f} ms wall, {min(cpu) * 1000:.1f} ms CPU)")
    print(f"sessiontree diff --json (process):  {statistics.median(command) * 1000:8.1f} ms (median of {args.reps}; "
          f"fastest {min(command) * 1000:.1f} ms)")
    print(f"load average {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
