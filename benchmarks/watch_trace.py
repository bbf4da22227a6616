"""Where a watched append's time goes, from the write to the commit (issue 45: write-to-
searchable p99 <= 2 s; docs/postgres.md, "The watcher under CPU contention").

``--hosts`` watchers (``sessiontree sync --watch``, each its own member role and ``$HOME``,
as ``team.py`` starts them) on a database ``team.py --team`` (or ``team_report.py
--make``) made, while one writer appends at ``--rate`` entries a second round-robin over
their session files and ``--busy`` processes spin on the CPU beside them (the machine's
other work: load 20 on 2 cores is about 8 of them over a run's own 12). Each watcher loads
``watch_trace_hook/sitecustomize.py``, which times its steps into one file; each append is
matched to the batch that committed it (the first ``sync_files`` of its file that began
after the write) and its latency split into: write -> watchfiles' batch (``event``: the
debounce, and any batch still running), batch -> sync start (``lock``: the run lock),
the sync itself (read, write, commit; wall and CPU), and what follows it in the same batch
(the budgets' check) before the next batch can begin.

    python benchmarks/watch_trace.py --url postgresql://postgres@127.0.0.1:PORT/DB --busy 8 --round 7
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "src")
HOOK = os.path.join(HERE, "watch_trace_hook")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _cpu(pid: int, children: bool = False) -> float:
    """CPU seconds (user + system) of process ``pid``, with its reaped children's too."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rpartition(")")[2].split()
    ticks = sum(int(x) for x in fields[11:15 if children else 13])
    return ticks / os.sysconf("SC_CLK_TCK")


def _server_cpu(pgdata: str) -> float:
    """CPU seconds of a PostgreSQL server so far: the postmaster, its exited server
    processes (reaped by it) and its live ones."""
    with open(os.path.join(pgdata, "postmaster.pid")) as handle:
        master = int(handle.readline())
    total = _cpu(master, children=True)
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as handle:
                    if int(handle.read().rpartition(")")[2].split()[1]) == master:
                        total += _cpu(int(name))
            except (OSError, ValueError, IndexError):
                pass
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the owner's URL (members h00.. exist: team.py --team)")
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--duration", type=float, default=40.0)
    parser.add_argument("--busy", type=int, default=8, help="processes spinning on the CPU meanwhile")
    parser.add_argument("--debounce", type=int, default=100)
    parser.add_argument("--round", type=int, default=1, help="a number no earlier run on the database used")
    parser.add_argument("--pgdata", help="the server's data folder: its CPU time over the appends is reported")
    parser.add_argument("--src", default=SRC, help="the watchers' sessiontree (another tree's src: before/after)")
    args = parser.parse_args()
    os.environ["SESSIONTREE_BENCH_ROUND"] = str(args.round)
    sys.path[:0] = [SRC, HERE]
    import team
    from sessiontree.format import jsonio
    from sessiontree.stores.postgres.store import PostgresStore

    tmp = tempfile.mkdtemp(prefix="sessiontree-watch-trace-")
    trace = os.path.join(tmp, "trace.txt")
    homes = [os.path.join(tmp, f"home{h:02d}") for h in range(args.hosts)]
    files = []
    for h, home in enumerate(homes):
        for s in range(team.SESSIONS_PER_HOST):
            path = team._path(home, team._sid(h, s))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as handle:
                handle.write(jsonio.dumps(team._header(team._sid(h, s))) + b"\n"
                             + jsonio.dumps(team._entry(1, "first", path)) + b"\n")
            files.append((h, path))
    watchers = []
    for h, home in enumerate(homes):
        env = team._env(home, h)
        env.update(PYTHONPATH=os.pathsep.join([HOOK, os.path.abspath(args.src)]), SESSIONTREE_WATCH_TRACE=trace)
        watchers.append(subprocess.Popen(
            [sys.executable, "-m", "sessiontree", "--store", team._as_role(args.url, f"h{h:02d}"), "sync", "--watch",
             "--debounce", str(args.debounce)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    busy: list[subprocess.Popen[bytes]] = []
    store = PostgresStore(args.url)
    ids = [team._sid(h, s) for h in range(args.hosts) for s in range(team.SESSIONS_PER_HOST)]
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not all(store.exists(sid) for sid in ids):
            time.sleep(0.2)
        time.sleep(2)
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
        time.sleep(1)
        writes: list[tuple[str, float]] = []
        server_before = _server_cpu(args.pgdata) if args.pgdata else 0.0
        watchers_before = sum(_cpu(proc.pid) for proc in watchers)
        counters = {path: 1 for _, path in files}
        loads = [os.getloadavg()[0]]
        start = time.time()
        index = 0
        while time.time() - start < args.duration:
            due = start + len(writes) / args.rate
            if due > time.time():
                time.sleep(due - time.time())
            _host, path = files[index % len(files)]
            index += 1
            counters[path] += 1
            with open(path, "ab") as handle:
                handle.write(jsonio.dumps(team._entry(counters[path], f"t{index}x", path)) + b"\n")
            writes.append((path, time.time()))
            if index % 100 == 0:
                loads.append(os.getloadavg()[0])
        deadline = time.time() + 90
        while time.time() < deadline:
            with store.read_snapshot("count") as conn:
                stored = conn.execute("SELECT count(*) FROM entries WHERE session_id = ANY(%s)", (ids,)).fetchone()[0]
            if stored >= sum(counters.values()):
                break
            time.sleep(1)
        server_cpu = _server_cpu(args.pgdata) - server_before if args.pgdata else float("nan")
        watchers_cpu = sum(_cpu(proc.pid) for proc in watchers) - watchers_before
    finally:
        for proc in busy:
            proc.kill()
        for proc in watchers:
            proc.send_signal(signal.SIGINT)
        for proc in watchers:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        store.close()
    pid_host = {proc.pid: h for h, proc in enumerate(watchers)}
    steps: dict[int, list[tuple[str, float, float, float, list[str]]]] = collections.defaultdict(list)
    with open(trace) as handle:
        for line in handle:
            wall, pid, step, seconds, cpu, *rest = line.split()
            paths = rest[0].split(",") if rest else []
            steps[pid_host[int(pid)]].append((step, float(wall), float(seconds), float(cpu), paths))
    rows = []
    for path, written in writes:
        host = next(h for h, p in files if p == path)
        events = steps[host]
        for i, (step, end, seconds, cpu, paths) in enumerate(events):
            if step == "sync" and path in paths and end - seconds > written:
                batch = max((e for e in events[:i] if e[0] == "yield"), key=lambda e: e[1])
                after = next((e for e in events[i + 1:] if e[0] == "alerts"), None)
                rows.append({"total": end - written, "event": batch[1] - written, "lock": end - seconds - batch[1],
                             "sync": seconds, "sync_cpu": cpu,
                             "after": (after[1] - end) if after and after[1] - end < 60 else 0.0})
                break
    print(f"hosts {args.hosts}, {args.rate:g} entries/s for {args.duration:g} s, debounce {args.debounce} ms,"
          f" {args.busy} busy processes, watchers' src {args.src}; load average (1 min) {min(loads):.1f}-{max(loads):.1f} on"
          f" {os.cpu_count()} cores; {len(writes)} appends, {len(rows)} matched to their batch")
    for key in ("total", "event", "lock", "sync", "sync_cpu", "after"):
        values = [r[key] for r in rows]
        print(f"  {key:9s} p50 {_pct(values, .5) * 1000:7.0f} ms  p99 {_pct(values, .99) * 1000:7.0f} ms"
              f"  max {max(values) * 1000:7.0f} ms")
    syncs = [e for ev in steps.values() for e in ev if e[0] == "sync"]
    print(f"batches: {len(syncs)}, files per batch median {statistics.median(len(e[4]) for e in syncs):.0f};"
          f" sync wall p50 {_pct([e[2] for e in syncs], .5) * 1000:.0f} ms, p99 {_pct([e[2] for e in syncs], .99) * 1000:.0f} ms,"
          f" CPU p50 {_pct([e[3] for e in syncs], .5) * 1000:.0f} ms, p99 {_pct([e[3] for e in syncs], .99) * 1000:.0f} ms")
    connects = [e for ev in steps.values() for e in ev if e[0] == "connect"]
    if connects:
        print(f"new connections: {len(connects)}, wall p50 {_pct([e[2] for e in connects], .5) * 1000:.0f} ms,"
              f" p99 {_pct([e[2] for e in connects], .99) * 1000:.0f} ms, max {max(e[2] for e in connects) * 1000:.0f} ms,"
              f" CPU p50 {_pct([e[3] for e in connects], .5) * 1000:.0f} ms")
    alerts = [e for ev in steps.values() for e in ev if e[0] == "alerts"]
    if alerts:
        print(f"alerts: {len(alerts)}, wall p50 {_pct([e[2] for e in alerts], .5) * 1000:.0f} ms,"
              f" p99 {_pct([e[2] for e in alerts], .99) * 1000:.0f} ms, CPU p50 {_pct([e[3] for e in alerts], .5) * 1000:.0f} ms")
    print(f"CPU from the first append until all were stored: watchers {watchers_cpu:.1f} s in all,"
          f" PostgreSQL server {server_cpu:.1f} s")
    print("slowest 5 (ms): " + "; ".join(
        " ".join(f"{k} {r[k] * 1000:.0f}" for k in ("total", "event", "lock", "sync", "sync_cpu"))
        for r in sorted(rows, key=lambda r: -r["total"])[:5]))
    print(f"trace: {trace}")


if __name__ == "__main__":
    main()
