"""The lead's aggregates by user before and after the per-user daily rollup (step
``m012_usage_daily``, docs/postgres.md "Per-user daily rollup"), side by side on one
database (issue 45: "any stats report <= 1 s ... for a lead").

Run against a database loaded by ``benchmarks/team.py --team ... --keep`` (its lead is
``lead00``)::

    python benchmarks/team_daily.py --url postgresql://postgres@127.0.0.1:PORT/DB [--rounds 7]

As the database owner it opens the store (applying any pending schema step, timed) and
creates ``bench_usage_by_user_m011``: step m011's ``team_usage_by_user`` (every session's
rollup rows summed per session and day, then joined), granted to the leads. Then, as the
lead, interleaved round by round: that view and today's ``team_usage_by_user`` through the
same Python path (:meth:`PostgresTeam.team_usage`'s read), wall and CPU time per call, and
the rows of both compared. Prints medians and maxima with the load average (the machine
is shared: give ratios).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

OLD_VIEW = "bench_usage_by_user_m011"


def _as_role(url: str, role: str) -> str:
    return url.replace("postgres@", f"{role}@", 1)


def main() -> None:
    import psycopg

    from sessiontree.stores.postgres import recent
    from sessiontree.stores.postgres.store import PostgresStore

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the database owner's URL of a team.py --keep database")
    parser.add_argument("--lead", default="lead00")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    began = time.perf_counter()
    with PostgresStore(args.url) as owner:
        steps = owner.applied_migrations()
    print(f"store opened as the owner in {time.perf_counter() - began:.1f} s (steps up to {steps[-1]})")
    with psycopg.connect(args.url) as conn:
        conn.execute(recent.usage_by_user_view().replace("VIEW team_usage_by_user ", f"VIEW {OLD_VIEW} ", 1))
        conn.execute(f"GRANT SELECT ON {OLD_VIEW} TO sessiontree_lead")
        counts = conn.execute("SELECT (SELECT count(*) FROM usage_rollup), (SELECT count(*) FROM usage_daily),"
                              " (SELECT count(*) FROM usage_ledger WHERE shared),"
                              " (SELECT sum(entry_count) FROM sessions)").fetchone()
    print(f"entries {int(counts[3]):,}; usage_rollup rows {counts[0]:,}; usage_daily rows {counts[1]:,};"
          f" shared ledger rows {counts[2]:,}")
    times: dict[str, list[tuple[float, float]]] = {"m011 view (before)": [], "usage_daily (after)": []}
    results: dict[str, list] = {}
    with PostgresStore(_as_role(args.url, args.lead)) as lead:
        for n in range(args.rounds):
            order = list(times) if n % 2 == 0 else list(reversed(times))
            for name in order:
                view = OLD_VIEW if name.startswith("m011") else "team_usage_by_user"
                wall, cpu = time.perf_counter(), time.process_time()
                rows = lead._rows(view, "team usage")  # the path of team_usage(by_user=True)
                times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
                results[name] = rows
    load = os.getloadavg()
    equal = results["m011 view (before)"] == results["usage_daily (after)"]
    print(f"rows: {len(results['usage_daily (after)']):,} each; equal: {equal}")
    medians = {}
    for name, values in times.items():
        walls = [w * 1000 for w, _ in values]
        cpus = [c * 1000 for _, c in values]
        medians[name] = statistics.median(walls)
        print(f"{name}: median {statistics.median(walls):,.0f} ms, max {max(walls):,.0f} ms,"
              f" client CPU median {statistics.median(cpus):,.0f} ms ({len(walls)} calls, interleaved)")
    before, after = medians.values()
    print(f"ratio before/after (median wall): {before / after:.1f}x; load average now {load[0]:.1f} / {load[1]:.1f}")
    if not equal:
        sys.exit("the two views' rows differ")


if __name__ == "__main__":
    main()
