"""The lead's report by user end to end, before and after, side by side (issue 45: "any
stats report <= 1 s ... for a lead"; benchmarks/README.md, round six).

The client's cost grows with the rows of the report (people x days x models x projects),
not with the entries, so a small database with as many report rows as the 10,000,000-entry
run's is enough: ``--make`` starts a throwaway cluster (tests/pg.py) and fills it with
``team.py``'s generator (20 members, one session each copied on the server so the rollup
sees 365 days) at 20 entries a session: 146,400 entries, 21,900 report rows (the 10M run:
1,000 entries a session, the same 20 x 365 x 3 models x 1 project). Or ``--url`` for a
database ``team.py --team --keep`` loaded (its lead is ``lead00``).

Interleaved, round by round, each a fresh process as a user runs it: ``sessiontree team
stats --by-user`` piped (the table) and with ``--json``, and the store's read alone
(``team_usage(by_user=True)`` in a process, after one warm-up call: what ``team.py``'s
reader times), each on this tree's ``src`` and on ``--old`` (another tree's ``src``).
Wall and CPU time (user + system of the child) per call, medians, the load average; the
outputs of both trees compared byte for byte.

    python benchmarks/team_report.py --make --old /tmp/old/src --rounds 5
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "src")

IN_PROCESS = """
import sys, time
from sessiontree.stores.postgres.store import PostgresStore
store = PostgresStore(sys.argv[1], readonly=True)
store.team_usage(by_user=True)
wall, cpu = time.perf_counter(), time.process_time()
rows = store.team_usage(by_user=True)
print(len(rows), time.perf_counter() - wall, time.process_time() - cpu)
"""


def _child(argv: list[str], src: str) -> tuple[float, float, bytes]:
    """Run ``argv`` with ``src`` first on the path: (wall s, CPU s of the child, stdout)."""
    env = dict(os.environ, PYTHONPATH=src)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(argv, env=env, check=True, capture_output=True).stdout
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), out


def make(per_session: int = 20, hosts: int = 20) -> tuple[object, str]:
    """A throwaway cluster with ``hosts`` members and a lead, 366 copies of one session of
    ``per_session`` entries per member (365 days); (cluster, owner URL)."""
    sys.path[:0] = [SRC, HERE, os.path.join(HERE, "..", "tests")]
    import pg
    import team

    cluster = pg.start_cluster()
    url = cluster.url(cluster.new_database("team"))
    members = team.make_team(url, hosts)
    team.prefill_bulk(url, 366 * hosts * per_session, roles=list(members), per_session=per_session)
    return cluster, url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="the owner's URL of a team.py --team --keep database")
    parser.add_argument("--make", action="store_true", help="a throwaway cluster filled as the module says")
    parser.add_argument("--keep", action="store_true", help="with --make: leave the cluster running")
    parser.add_argument("--old", required=True, help="the src folder of the tree to compare with")
    parser.add_argument("--lead", default="lead00")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    cluster = None
    if args.make:
        cluster, url = make()
    elif args.url:
        url = args.url
    else:
        parser.error("--url or --make")
    lead = url.replace("postgres@", f"{args.lead}@", 1)
    python = sys.executable
    cli = [python, "-m", "sessiontree", "--store", lead, "team", "stats", "--by-user"]
    cases = {"team stats --by-user (table, piped)": cli, "team stats --by-user --json": [*cli, "--json"],
             "team_usage(by_user=True), in process": [python, "-c", IN_PROCESS, lead]}
    trees = {"before": os.path.abspath(args.old), "after": os.path.abspath(SRC)}
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    outputs: dict[tuple[str, str], bytes] = {}
    loads = [os.getloadavg()[0]]
    try:
        for _ in range(args.rounds):
            for case, argv in cases.items():
                for tree, src in trees.items():
                    wall, cpu, out = _child(argv, src)
                    if case.endswith("in process"):
                        rows, wall_s, cpu_s = out.split()
                        wall, cpu, out = float(wall_s), float(cpu_s), rows
                    times.setdefault((case, tree), []).append((wall, cpu))
                    previous = outputs.setdefault((case, tree), out)
                    assert previous == out, f"{case} {tree}: the output changed between rounds"
            loads.append(os.getloadavg()[0])
    finally:
        if cluster is not None and not args.keep:
            cluster.destroy()  # type: ignore[attr-defined]
        elif cluster is not None:
            print(f"cluster kept: {url}", file=sys.stderr)
    print(f"load average (1 min) over the rounds: {', '.join(f'{x:.1f}' for x in loads)} on {os.cpu_count()} cores;"
          f" {args.rounds} rounds interleaved; medians")
    for case in cases:
        same = outputs[(case, "before")] == outputs[(case, "after")]
        size = len(outputs[(case, "after")])
        line = [f"{case}: output {'identical' if same else 'DIFFERENT'} ({size:,} bytes)" if not
                case.endswith("in process") else f"{case}: {outputs[(case, 'after')].decode()} rows"]
        for tree in trees:
            walls, cpus = zip(*times[(case, tree)], strict=True)
            line.append(f"{tree} wall {statistics.median(walls):.3f} s (max {max(walls):.3f}),"
                        f" CPU {statistics.median(cpus):.3f} s")
        b = statistics.median(c for _, c in times[(case, "before")])
        a = statistics.median(c for _, c in times[(case, "after")])
        line.append(f"CPU before/after {b / a:.1f}x")
        print("\n  ".join(line))


if __name__ == "__main__":
    main()
