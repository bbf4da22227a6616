"""Search on SQLite against the agent's picker on any corpus: wall and CPU time, interleaved.

The ``search`` rows of ``run.py`` for one database and directory that need not be one of
its cached corpora (e.g. a part of the 10,000-session corpus while it is being built):
ours every hit and ``-n 50`` (and their "(before)" rows with ``--before SRC``, on a copy of
the database without the schema steps that tree lacks, as ``run.py --before`` makes), and
the reference's ``listAll`` + ``allMessagesText.includes``. The same ``worker.py`` and
``node/driver.mjs`` commands as ``run.py`` (one process per sample, warm-up untimed, then 2
timed iterations); repetitions alternate the order; medians of wall and process CPU time.

    PYTHONPATH=src python benchmarks/bench_search_picker.py --db D.db --dir D [--before SRC] [--reps 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="SQLite store holding the sessions of --dir")
    parser.add_argument("--dir", required=True, help="the same sessions as JSONL files (the reference reads them)")
    parser.add_argument("--before", help="another checkout's src for '(before)' rows")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    db, directory = os.path.abspath(args.db), os.path.abspath(args.dir)
    module, _ = run.ensure_reference(run.WORK, None, log=run.log)
    n = sum(1 for name in os.listdir(directory) if name.endswith(".jsonl"))
    it = {"warmup": 1, "iters": 2, "first_timed": True}
    query = {"query": run.QUERY, **it}
    cases = [run.Case("search", n, "ours sqlite", "ours", "py", {"op": "search_sqlite", "db": db, **query}),
             run.Case("search", n, "ours sqlite, -n 50", "ours", "py",
                      {"op": "search_sqlite", "db": db, "limit": 50, **query})]
    if args.before:
        before = os.path.abspath(args.before)
        old = run.before_db(db, before)
        cases += [run.Case("search", n, "ours sqlite (before)", "ours", "py",
                           {"op": "search_sqlite", "db": old, **query}, pythonpath=before),
                  run.Case("search", n, "ours sqlite, -n 50 (before)", "ours", "py",
                           {"op": "search_sqlite", "db": old, "limit": 50, **query}, pythonpath=before)]
    cases.append(run.Case("search", n, "ref", "ref", "node", {"op": "search", "dir": directory, **query}))
    for rep in range(args.reps):
        for case in cases if rep % 2 == 0 else cases[::-1]:
            run.run_case(case, module, 1800)
            if case.errors:
                print(f"{case.name}: {case.errors[-1]}", file=sys.stderr)
                return 1
        run.log(f"  rep {rep + 1}/{args.reps} done")
    ref = cases[-1]
    ref_wall, ref_cpu = statistics.median(ref.samples), statistics.median(ref.cpu)
    print(f"search on {n:,} sessions ({args.reps} interleaved repetitions, medians)")
    for case in cases:
        wall, cpu = statistics.median(case.samples), statistics.median(case.cpu)
        print(f"  {case.name:30s} wall {wall * 1e3:10.1f} ms  cpu {cpu * 1e3:10.1f} ms  / ref: wall 1/{ref_wall / wall:,.0f}"
              f"  cpu 1/{ref_cpu / cpu:,.0f}  (result {case.results[0]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
