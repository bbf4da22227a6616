"""A team on one PostgreSQL database, simulated on one machine (docs/postgres.md, "A team on
one database").

N simulated hosts, each a separate ``sessiontree --store postgresql://... sync --watch``
process with its own fake ``$HOME`` (its own pi agent folder, ``$SESSIONTREE_SYNC_HOST``
and machine id), while one agent process appends entries to the hosts' session files at
a configurable total rate, and reader processes run ``search`` and ``stats`` against the
same database. The database can be pre-filled first (``--prefill``), so searches and
stats run over a realistic number of stored entries.

Reported:

* write-to-searchable latency, p50 and p99: from the agent's append (after its
  ``write`` returned) to the entry being found by a search from another process (a
  prober polling ``search`` for the unique word each sampled entry holds);
* search latency (p50, p95) and stats latency (each grouping) in the readers, under load;
* the database size per million stored entries;
* exactness: entries the agent wrote vs entries stored for the hosts' sessions (lost,
  duplicated), and usage totals by host equal to the same files synced into SQLite;
* the load average while it ran, and each watcher's CPU time.

PostgreSQL is a throwaway cluster (tests/pg.py: ``fsync=off``), on loopback TCP; or
``--url`` for an existing database (it must be empty).

With ``--team`` (docs/team.md) each host syncs as its own member role (``h00``, ``h01``,
...), the members write the pre-filled sessions (in turns, under row-level security), and the readers run as a
member (``h00``: its own search and ``stats``, under row-level security) and as a lead
(``lead00``: its own search, and the team aggregates by user, ``team_usage_by_user``),
so the policies' cost shows beside the owner's numbers of a run without ``--team``.

Usage::

    python benchmarks/team.py --hosts 20 --rate 50 --duration 60 --prefill 1000000
    python benchmarks/team.py --hosts 4 --rate 20 --duration 20 --prefill 0     # quick
    python benchmarks/team.py --hosts 4 --rate 20 --duration 20 --prefill 20000 --team
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing as mp
import os
import queue
import random
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "src")
sys.path[:0] = [SRC, os.path.join(HERE, "..", "tests")]

from sessiontree.format import jsonio  # noqa: E402

STAMP = "2026-02-01T09:00:00.000Z"
PROJECT = "--work-team--"
SESSIONS_PER_HOST = 3
#: Words the readers search for: common in the pre-filled data, rare, and none.
SEARCHES = ("advisory locks", "trigram", "pool recovers", "zzqx-not-there")
#: With ``--filtered``, the readers also search with filters (label, words, search keyword
#: arguments): a role, a time window, and both (step m013's walk for a member). Only
#: ``until``: a bulk copy's search rows are up to a year later than its entries' own
#: times (:func:`prefill_bulk`), so a row before ``until`` is an entry before it too,
#: while a ``since`` would find rows whose entries the exact check then drops.
FILTERED = (
    ("advisory locks --role user", "advisory locks", {"roles": ["user"]}),
    ("pool recovers --until 2026-04-01", "pool recovers", {"until": "2026-04-01"}),
    ("trigram --role user --until 2026-06-01", "trigram", {"roles": ["user"], "until": "2026-06-01"}),
)
STATS_GROUPINGS = ("model", "host", "day")


def _message(i: int, word: str) -> dict[str, Any]:
    if i % 2:
        return {"role": "assistant", "content": [{"type": "text", "text": f"answer {i} {word}: the pool recovers"}],
                "api": "x", "provider": "anthropic", "model": f"m{i % 3}", "stopReason": "stop", "timestamp": 1,
                "usage": {"input": 1000 + i % 97, "output": 200 + i % 13, "cacheRead": 0, "cacheWrite": 0,
                          "totalTokens": 1200 + i % 97 + i % 13,
                          "cost": {"input": 0.003, "output": 0.003, "cacheRead": 0, "cacheWrite": 0,
                                   "total": 0.006}}}
    return {"role": "user", "content": f"question {i} {word} about advisory locks and trigram indexes",
            "timestamp": 1}


def _entry(i: int, word: str, session: str = "") -> dict[str, Any]:
    """Entry ``i`` of ``session``: two seconds after the one before, from a start that is
    the session's own (its CRC-32 in seconds after ``STAMP``), so each session's billed
    calls are its own, as real agents' are (same time and usage would make them one
    call copied into every session, the case usage rollups leave to the query)."""
    start = datetime.datetime(2026, 2, 1, 9, tzinfo=datetime.UTC)
    when = start + datetime.timedelta(seconds=zlib.crc32(session.encode()) % 10_000_000 + 2 * i)
    return {"type": "message", "id": f"{i:08x}", "parentId": f"{i - 1:08x}" if i > 1 else None,
            "timestamp": when.strftime("%Y-%m-%dT%H:%M:%S.000Z"), "message": _message(i, word)}


def _header(session_id: str) -> dict[str, Any]:
    return {"type": "session", "version": 4, "id": session_id, "createdAt": STAMP, "cwd": "/work/team"}


#: Added to the hosts' session numbers (``--round``): a later run on the same database
#: (``--url``, ``--reuse``) writes new sessions. An environment variable, so the spawned
#: processes see it.
ROUND = int(os.environ.get("SESSIONTREE_BENCH_ROUND", "0"))


def _sid(host: int, n: int) -> str:
    return f"019cadb4-0000-7000-8000-{host:04x}{n + ROUND * SESSIONS_PER_HOST:08x}"


def _path(home: str, session_id: str) -> str:
    return os.path.join(home, ".pi", "agent", "sessions", PROJECT, f"2026-02-01T09-00-00-000Z_{session_id}.jsonl")


# -- pre-fill ------------------------------------------------------------------------------

def prefill(url: str, entries: int, per_session: int = 1000, roles: list[str] | None = None) -> float:
    """Store ``entries`` entries (sessions of ``per_session``) without provenance; seconds
    taken. ``roles``: each batch written as the next of these roles (their sessions)."""
    from sessiontree.stores.postgres.store import PostgresStore

    writers = [PostgresStore(_as_role(url, role)) for role in roles] if roles else [PostgresStore(url)]
    start = time.perf_counter()
    made = 0
    n = 0
    try:
        while made < entries:
            batch = []
            for _ in range(20):
                if made >= entries:
                    break
                count = min(per_session, entries - made)
                sid = f"019cadb4-ffff-7000-8000-{n:012x}"
                batch.append((_header(sid), [_entry(i, f"fill{n}", sid) for i in range(1, count + 1)], None))
                made += count
                n += 1
            writers[(n // 20) % len(writers)].create_many(batch)
            if n % 200 == 0:
                print(f"  prefill {made:,} entries, {time.perf_counter() - start:.0f} s", file=sys.stderr)
    finally:
        for store in writers:
            store.close()
    return time.perf_counter() - start


def prefill_bulk(url: str, entries: int, roles: list[str | None], per_session: int = 1000) -> float:
    """Store ``entries`` entries fast, for runs of millions (seconds taken).

    Each role first writes one session of ``per_session`` entries through the store
    (``create_many``: every derived row written by the code under test, under row-level
    security). The rest are copies of those sessions made by the server as the tables'
    owner, ``INSERT ... SELECT`` from them with triggers off
    (``session_replication_role = replica``) and the search indexes built once at the
    end instead of row by row. Copy ``c`` of template session ``n`` is session
    ``c * len(roles) + n`` (the id scheme of :func:`prefill`), owned by the template's
    owner, with its header's id rewritten (and its CRC-32), its derived times
    (``search_entries.ts_ms``, ``usage_ledger.ts_ms``, ``usage_rollup.bucket``) ``c mod
    365`` days later, so stats see a year of days, and its billed calls' keys made its
    own (``md5(key || session id)``), as distinct calls are. The entries' JSON is the
    template's: a since/until filter on a copy would see the template's times (the
    benchmark uses none)."""
    import psycopg

    from sessiontree.stores.postgres.store import PostgresStore

    start = time.perf_counter()
    templates = []
    for n, role in enumerate(roles):
        sid = f"019cadb4-ffff-7000-8000-{n:012x}"
        templates.append(sid)
        with PostgresStore(_as_role(url, role)) as store:
            store.create_many([(_header(sid), [_entry(i, f"fill{n}", sid) for i in range(1, per_session + 1)],
                                None)])
    copies = max(0, entries // (per_session * len(roles)) - 1)
    print(f"  bulk: {len(roles)} template sessions written by their roles, {time.perf_counter() - start:.0f} s;"
          f" {copies} copies of each to make", file=sys.stderr)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute("SET maintenance_work_mem = '1GB'")
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'search_entries'"
            " AND indexname IN ('search_entries_trgm', 'search_entries_tsv', 'search_entries_recent',"
            " 'search_entries_owner_recent')").fetchall()
        for name, _sql in indexes:
            conn.execute(f"DROP INDEX {name}")
        heads = {row[0]: row[1:] for row in conn.execute(
            "SELECT id, header_json, created_at, cwd, parent_session_id, classified, updated_at, entry_count,"
            " listing, message_count, modified_ms, name, owner FROM sessions WHERE id = ANY(%s)",
            (templates,)).fetchall()}
        step = 50
        done = 0
        for lo in range(1, copies + 1, step):
            hi = min(copies, lo + step - 1)
            rows = []
            for c in range(lo, hi + 1):
                for n, tsid in enumerate(templates):
                    sid = f"019cadb4-ffff-7000-8000-{c * len(templates) + n:012x}"
                    head = heads[tsid]
                    header = bytes(head[0]).replace(tsid.encode(), sid.encode())
                    rows.append((sid, header, zlib.crc32(header), *head[1:]))
            with conn.transaction():
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO sessions (id, header_json, header_crc, created_at, cwd, parent_session_id,"
                        " classified, updated_at, entry_count, listing, message_count, modified_ms, name, owner,"
                        " write_seq) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,"
                        " nextval('sessions_write_seq_counter'))", rows)
                copy_sid = ("'019cadb4-ffff-7000-8000-' || lpad(to_hex(c * %(t)s::int +"
                            " ('x' || right(t.session_id, 8))::bit(32)::int), 12, '0')")
                shift = "((c %% 365)::bigint * 86400000)"
                common = "FROM generate_series(%(lo)s::int, %(hi)s::int) AS c, {table} AS t WHERE t.session_id = ANY(%(ids)s)"
                params = {"t": len(templates), "lo": lo, "hi": hi, "ids": templates}
                conn.execute(f"INSERT INTO entries (session_id, seq, id, parent_id, type, timestamp, json, crc, owner)"
                             f" SELECT {copy_sid}, seq, id, parent_id, type, timestamp, json, crc, owner "
                             + common.format(table="entries"), params)
                conn.execute(f"INSERT INTO message_texts (session_id, seq, text, owner)"
                             f" SELECT {copy_sid}, seq, text, owner " + common.format(table="message_texts"), params)
                conn.execute(f"INSERT INTO search_entries (session_id, seq, type, role, ts_ms, folded, owner)"
                             f" SELECT {copy_sid}, seq, type, role, ts_ms + {shift}, folded, owner "
                             + common.format(table="search_entries"), params)
                conn.execute(f"INSERT INTO usage_ledger (session_id, seq, n, dedup_key, source, provider, model,"
                             " ts_ms, input, output, cache_read, cache_write, cost_nanos, cache_write_1h, shared,"
                             f" owner) SELECT {copy_sid}, seq, n, decode(md5(encode(dedup_key, 'hex') || {copy_sid}),"
                             f" 'hex'), source, provider, model, ts_ms + {shift}, input, output, cache_read,"
                             " cache_write, cost_nanos, cache_write_1h, shared, owner "
                             + common.format(table="usage_ledger"), params)
                conn.execute(f"INSERT INTO usage_rollup (session_id, provider, model, bucket, shape, calls, input,"
                             " output, cache_read, cache_write, cost_nanos, cache_write_1h, owner)"
                             f" SELECT {copy_sid}, provider, model, bucket + {shift}, shape, calls, input, output,"
                             " cache_read, cache_write, cost_nanos, cache_write_1h, owner "
                             + common.format(table="usage_rollup"), params)
            done = hi
            made = (done + 1) * len(templates) * per_session
            print(f"  bulk: {made:,} entries, {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
        if conn.execute("SELECT to_regclass('usage_daily') IS NOT NULL").fetchone()[0]:
            from sessiontree.stores.postgres.daily import rebuild_daily

            began = time.perf_counter()
            rebuild_daily(conn)  # the rollup rows were copied with triggers off (step m012_usage_daily)
            print(f"  bulk: usage_daily rebuilt in {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
        for name, sql in indexes:
            began = time.perf_counter()
            conn.execute(sql)
            print(f"  bulk: {name} built in {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
        began = time.perf_counter()
        conn.execute("VACUUM ANALYZE")
        print(f"  bulk: VACUUM ANALYZE {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
    return time.perf_counter() - start


# -- the processes -------------------------------------------------------------------------

def agent(homes: list[str], rate: float, duration: float, probes: Any, sample: int, done: Any) -> None:
    """Append one entry at a time, round-robin over every host's sessions, at ``rate`` per
    second in total; every ``sample``-th entry's unique word goes to the prober."""
    files = [(h, _path(home, _sid(h, s))) for h, home in enumerate(homes) for s in range(SESSIONS_PER_HOST)]
    counters = {path: 1 for _h, path in files}  # entry 1 was written before the watchers started
    start = time.time()
    written = 0
    index = 0
    while True:
        due = start + written / rate
        now = time.time()
        if now - start >= duration:
            break
        if due > now:
            time.sleep(due - now)
        host, path = files[index % len(files)]
        index += 1
        counters[path] += 1
        n = counters[path]
        word = f"w{host}q{index}x"
        with open(path, "ab") as handle:
            handle.write(jsonio.dumps(_entry(n, word, path)) + b"\n")
        written += 1
        if written % sample == 0:
            probes.put((word, time.time()))
    probes.put(None)
    done.put({path: count for path, count in counters.items()})


#: ``--index-probe``: the prober asks the search index for every pending word at once
#: (an environment variable, so the spawned prober sees it).
INDEX_PROBE = os.environ.get("SESSIONTREE_BENCH_INDEX_PROBE") == "1"
#: ``--filtered``: the readers' searches include :data:`FILTERED` (set from the environment).
FILTERED_SEARCHES = os.environ.get("SESSIONTREE_BENCH_FILTERED") == "1"
#: The hosts' session ids the index probe looks in (set from the environment too).
PROBE_SESSIONS = os.environ.get("SESSIONTREE_BENCH_SESSIONS", "").split()


def prober(url: str, probes: Any, results: Any) -> None:
    """Search for each sampled word until found (or, with :data:`INDEX_PROBE`, until its
    row is in the search index); the latency from its append."""
    from sessiontree.search.query import search
    from sessiontree.stores.postgres.store import PostgresStore

    store = PostgresStore(url, readonly=True)
    pending: list[tuple[str, float]] = []
    latencies: list[float] = []
    checked = False
    finished = False
    deadline = None
    while not finished or pending:
        try:
            while True:
                item = probes.get_nowait()
                if item is None:
                    finished, deadline = True, time.time() + 120
                else:
                    pending.append(item)
        except queue.Empty:
            pass
        still = []
        if INDEX_PROBE and pending:
            # One query per poll for every pending word: is its row in the search index
            # (committed, so the next search finds it)? The search's own time is the
            # readers' to measure; polling search() word by word measured the prober's
            # backlog once a search took longer than the probes' spacing (10,000,000
            # entries on a loaded machine). The first word found is checked by search().
            with store.read_snapshot("probe") as conn:
                found = {row[0] for row in conn.execute(
                    "SELECT w FROM unnest(%s::text[]) AS w WHERE EXISTS (SELECT 1 FROM search_entries AS s"
                    " WHERE s.session_id = ANY(%s) AND strpos(s.folded, w) > 0)",
                    ([word for word, _ in pending], PROBE_SESSIONS)).fetchall()}
            now = time.time()
            for word, written in pending:
                if word in found:
                    latencies.append(now - written)
                    if not checked and not search(store, word, limit=1).hits:
                        raise AssertionError(f"{word} is in the index but search() does not find it")
                    checked = True
                else:
                    still.append((word, written))
        for word, written in pending if not INDEX_PROBE else []:
            if search(store, word, limit=1).hits:
                latencies.append(time.time() - written)
            else:
                still.append((word, written))
        pending = still
        if deadline is not None and time.time() > deadline:
            break
        time.sleep(0.02)
    results.put(("probe", latencies, len(pending)))
    store.close()


def reader(url: str, stop: Any, results: Any, seed: int, role: str = "owner") -> None:
    """Search and stats in a loop until ``stop`` is set; their latencies. ``role``:
    ``owner`` (the URL's), ``member`` (``h00``), ``member-old`` (``h00`` searching without
    step m011's walk) or ``lead`` (``lead00``, whose stats are the team aggregates by user)."""
    from sessiontree.search.query import search
    from sessiontree.stores.postgres.store import PostgresStore
    from sessiontree.usage.report import usage_report

    rng = random.Random(seed)
    choices: list[tuple[str, str, dict[str, Any]]] = [(words, words, {}) for words in SEARCHES]
    if FILTERED_SEARCHES:
        choices += list(FILTERED)
    if role == "member-old":
        # The same member without the walk of their newest rows (before step m011's
        # search path): the trigram lookup, or the read of all their rows.
        from sessiontree.stores.postgres import recent

        recent.walk_level = lambda conn: 0  # type: ignore[assignment]
    store = PostgresStore(_as_role(url, {"member": "h00", "member-old": "h00", "lead": "lead00"}.get(role)),
                          readonly=True)
    searches: list[tuple[str, float]] = []
    stats: dict[str, list[float]] = {by: [] for by in STATS_GROUPINGS}
    turn = 0
    while not stop.is_set():
        turn += 1
        if turn % 5 == 0:
            by = STATS_GROUPINGS[(turn // 5) % len(STATS_GROUPINGS)]
            start = time.perf_counter()
            if role == "lead":
                store.team_usage(by_user=True)
            else:
                usage_report(store, by=by, tz="UTC")
            stats[by].append(time.perf_counter() - start)
        else:
            label, words, kwargs = rng.choice(choices)
            start = time.perf_counter()
            search(store, words, limit=50, **kwargs)
            searches.append((label, time.perf_counter() - start))
        time.sleep(0.05)
    results.put(("reader", role, searches, stats))
    store.close()


def _as_role(url: str, role: str | None) -> str:
    """``url`` with its user replaced by ``role`` (``None``: unchanged)."""
    if role is None:
        return url
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{role}@{host}"))


def make_team(url: str, hosts: int) -> list[str]:
    """A member role per host and a lead (docs/team.md); the members' names."""
    from sessiontree.stores.postgres.store import PostgresStore

    members = [f"h{h:02d}" for h in range(hosts)]
    with PostgresStore(url) as store:
        for name in members:
            store.team_add(name, "member")
        store.team_add("lead00", "lead")
    return members


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _env(home: str, host: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PI_CODING_AGENT_DIR", "ATOMIC_CODING_AGENT_DIR", "CLAUDE_CONFIG_DIR", "CODEX_HOME",
                        "SESSIONTREE_STORE")}
    env.update(HOME=home, SESSIONTREE_SYNC_HOST=f"host-{host:02d}", SESSIONTREE_MACHINE_ID=f"machine-{host:02d}",
               USER=f"user{host % 5}", LOGNAME=f"user{host % 5}", PYTHONPATH=SRC)
    return env


def run(url: str, args: argparse.Namespace, tmp: str) -> dict[str, Any]:
    """One simulation against ``url``; the measured numbers."""
    from sessiontree.stores.postgres.store import PostgresStore

    homes = [os.path.join(tmp, f"home{h:02d}") for h in range(args.hosts)]
    for h, home in enumerate(homes):
        for s in range(SESSIONS_PER_HOST):
            path = _path(home, _sid(h, s))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as handle:
                handle.write(jsonio.dumps(_header(_sid(h, s))) + b"\n" + jsonio.dumps(_entry(1, "first", path)) + b"\n")
    watchers = [subprocess.Popen([sys.executable, "-m", "sessiontree", "--store",
                                  _as_role(url, f"h{h:02d}" if args.team else None), "sync", "--watch",
                                  "--debounce", str(args.debounce)], env=_env(home, h), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True) for h, home in enumerate(homes)]
    store = PostgresStore(url)
    expected_ids = [_sid(h, s) for h in range(args.hosts) for s in range(SESSIONS_PER_HOST)]
    deadline = time.time() + 120
    while time.time() < deadline and not all(store.exists(sid) for sid in expected_ids):
        time.sleep(0.2)
    ready = sum(store.exists(sid) for sid in expected_ids)
    print(f"  {args.hosts} watchers up, {ready}/{len(expected_ids)} sessions stored", file=sys.stderr)
    ctx = mp.get_context("spawn")
    probes, results, done, stop = ctx.Queue(), ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=prober, args=(url, probes, results))]
    roles = (["member", "lead", "member-old"] if args.compare else ["member", "lead"]) if args.team else ["owner"]
    procs += [ctx.Process(target=reader, args=(url, stop, results, seed, roles[seed % len(roles)]))
              for seed in range(args.readers)]
    for proc in procs:
        proc.start()
    loads = []
    writer = ctx.Process(target=agent, args=(homes, args.rate, args.duration, probes, args.sample, done))
    writer.start()
    while writer.is_alive():
        loads.append(os.getloadavg()[0])
        writer.join(5)
    counts = done.get(timeout=30)
    # Wait for the watchers to catch up (at most 60 s), then stop everything.
    want = {sid: counts[_path(homes[h], sid)] for h in range(args.hosts)
            for sid in (_sid(h, s) for s in range(SESSIONS_PER_HOST))}
    deadline = time.time() + 60
    stored: dict[str, int] = {}
    while time.time() < deadline:
        with store.read_snapshot("count") as conn:
            rows = conn.execute("SELECT session_id, count(*), count(DISTINCT id) FROM entries"
                                " WHERE session_id = ANY(%s) GROUP BY session_id", (expected_ids,)).fetchall()
        stored = {row[0]: row[1] for row in rows}
        distinct = {row[0]: row[2] for row in rows}
        if stored == want:
            break
        time.sleep(1)
    stop.set()
    outcome: dict[str, Any] = {"probe": ([], 0), "searches": [], "stats": {}}
    for _ in procs:
        kind, *values = results.get(timeout=300)
        if kind == "probe":
            outcome["probe"] = values
        else:
            role = values[0]
            outcome["searches"] += [(words if role == "owner" else f"{words} [{role}]", t) for words, t in values[1]]
            for by, times in values[2].items():
                key = by if role == "owner" else ("team_usage_by_user [lead]" if role == "lead" else f"{by} [{role}]")
                outcome["stats"].setdefault(key, []).extend(times)
    for proc in procs:
        proc.join(30)
    for proc in watchers:
        proc.send_signal(signal.SIGINT)
    errors = []
    for proc in watchers:
        try:
            _out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _out, err = proc.communicate()
        if proc.returncode != 0:
            errors.append(f"exit {proc.returncode}: {err.strip().splitlines()[-1:] if err else ''}")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    with store.read_snapshot("size") as conn:
        size = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
        total = conn.execute("SELECT count(*) FROM entries").fetchone()[0]
    pg_by_host = {g.key: (g.totals.calls, g.totals.total_tokens, g.totals.cost_nanos)
                  for g in __import__("sessiontree.usage.report", fromlist=["usage_report"]).usage_report(
                      store, by="host", tz="UTC").groups if g.key.startswith("host-")}
    store.close()
    sqlite_by_host = _sqlite_totals(homes, tmp)
    written = sum(want.values())
    got = sum(stored.values())
    latencies, unresolved = outcome["probe"]
    return {
        "hosts": args.hosts, "rate": args.rate, "duration": args.duration, "written": written, "stored": got,
        "lost": sum(max(0, want[s] - stored.get(s, 0)) for s in want),
        "duplicated": sum(stored.get(s, 0) - distinct.get(s, 0) for s in want) + sum(
            max(0, stored.get(s, 0) - want[s]) for s in want),
        "latency_p50": _pct(latencies, 0.5), "latency_p99": _pct(latencies, 0.99), "latency_max": max(latencies,
                                                                                                     default=0),
        "probes": len(latencies), "unresolved": unresolved,
        "search_p50": _pct([t for _w, t in outcome["searches"]], 0.5),
        "search_p95": _pct([t for _w, t in outcome["searches"]], 0.95),
        "searches": len(outcome["searches"]),
        "search_by_query": {words: (_pct([t for w, t in outcome["searches"] if w == words], 0.5),
                                    _pct([t for w, t in outcome["searches"] if w == words], 0.95))
                            for words in sorted({w for w, _t in outcome["searches"]})},
        "stats": {by: (statistics.median(t) if t else float("nan"), max(t, default=float("nan")), len(t))
                  for by, t in outcome["stats"].items()},
        "db_bytes": size, "entries_total": total, "bytes_per_million": size / max(total, 1) * 1_000_000,
        "load_max": max(loads, default=0), "load_mean": statistics.mean(loads) if loads else 0,
        "watcher_cpu_s": usage.ru_utime + usage.ru_stime, "watcher_errors": errors,
        "usage_equal": pg_by_host == sqlite_by_host, "usage_pg": pg_by_host,
    }


def _sqlite_totals(homes: list[str], tmp: str) -> dict[str, tuple[int, int, int]]:
    """The hosts' files synced into one SQLite store (each as its host): stats by host."""
    from sessiontree.stores.sqlite.store import SqliteStore
    from sessiontree.sync.engine import Syncer, discover
    from sessiontree.usage.report import usage_report

    store = SqliteStore(os.path.join(tmp, "same.db"))
    saved = os.environ.get("SESSIONTREE_SYNC_HOST")
    try:
        for h, home in enumerate(homes):
            os.environ["SESSIONTREE_SYNC_HOST"] = f"host-{h:02d}"
            files, _ = discover([os.path.join(home, ".pi", "agent", "sessions")])
            Syncer(store).sync_files(files)
        return {g.key: (g.totals.calls, g.totals.total_tokens, g.totals.cost_nanos)
                for g in usage_report(store, by="host", tz="UTC").groups}
    finally:
        if saved is None:
            os.environ.pop("SESSIONTREE_SYNC_HOST", None)
        else:
            os.environ["SESSIONTREE_SYNC_HOST"] = saved
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--rate", type=float, default=50.0, help="appended entries per second, all hosts together")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds the agents append")
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--sample", type=int, default=5, help="probe every Nth entry's write-to-searchable latency")
    parser.add_argument("--debounce", type=int, default=100, help="the watchers' --debounce (ms)")
    parser.add_argument("--prefill", type=int, default=0, help="entries stored before the run")
    parser.add_argument("--bulk", action="store_true",
                        help="pre-fill by copying one session per role on the server (prefill_bulk): millions")
    parser.add_argument("--shared-buffers", help="the throwaway cluster's shared_buffers (default: tests/pg.py's)")
    parser.add_argument("--index-probe", action="store_true",
                        help="write-to-searchable: one index query per poll for all pending words (see prober)")
    parser.add_argument("--compare", action="store_true",
                        help="with --team: a third reader, the member without the walk of step m011 (use --readers 3)")
    parser.add_argument("--filtered", action="store_true",
                        help="the readers also search with filters (role, time window: FILTERED)")
    parser.add_argument("--keep", action="store_true", help="leave the throwaway cluster running; print its URL")
    parser.add_argument("--reuse", action="store_true",
                        help="with --url: a database of an earlier run (--keep): its roles, its entries")
    parser.add_argument("--round", type=int, default=0, help="with --reuse: a number no earlier run used")
    parser.add_argument("--url", help="an existing, empty PostgreSQL database (default: a throwaway cluster)")
    parser.add_argument("--team", action="store_true",
                        help="hosts sync as member roles; readers run as a member and a lead (docs/team.md)")
    args = parser.parse_args()
    global ROUND
    ROUND = args.round
    os.environ["SESSIONTREE_BENCH_ROUND"] = str(args.round)
    if args.filtered:
        os.environ["SESSIONTREE_BENCH_FILTERED"] = "1"
    if args.index_probe:
        os.environ["SESSIONTREE_BENCH_INDEX_PROBE"] = "1"
        os.environ["SESSIONTREE_BENCH_SESSIONS"] = " ".join(
            _sid(h, n) for h in range(args.hosts) for n in range(SESSIONS_PER_HOST))
    cluster = None
    if args.url is None:
        import pg

        cluster = pg.start_cluster()
        if args.shared_buffers:
            cluster.extra_options = f"-c shared_buffers={args.shared_buffers} -c max_wal_size=8GB"
            cluster.restart()
        url = cluster.url(cluster.new_database("team"))
    else:
        url = args.url
    tmp = tempfile.mkdtemp(prefix="sessiontree-team-")
    try:
        if args.reuse:
            members = None
        else:
            members = make_team(url, args.hosts) if args.team else None
        if args.prefill and not args.reuse:
            seconds = (prefill_bulk(url, args.prefill, roles=list(members or [None])) if args.bulk
                       else prefill(url, args.prefill, roles=members))
            print(f"prefill: {args.prefill:,} entries in {seconds:.0f} s"
                  + (" (written by the members)" if members else ""), file=sys.stderr)
        result = run(url, args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if cluster is not None and args.keep:
            print(f"cluster kept: {url} (data in {cluster.base})", file=sys.stderr)
        elif cluster is not None:
            cluster.destroy()
    ms = 1000
    print(f"hosts {result['hosts']}, {result['rate']:g} entries/s for {result['duration']:g} s; "
          f"{result['entries_total']:,} entries stored in all; load average max {result['load_max']:.1f}, "
          f"mean {result['load_mean']:.1f} on {os.cpu_count()} cores")
    print(f"written {result['written']:,}, stored {result['stored']:,}: lost {result['lost']}, "
          f"duplicated {result['duplicated']}; watcher errors: {result['watcher_errors'] or 'none'}")
    print(f"write-to-searchable: p50 {result['latency_p50'] * ms:.0f} ms, p99 {result['latency_p99'] * ms:.0f} ms, "
          f"max {result['latency_max'] * ms:.0f} ms ({result['probes']} probes, {result['unresolved']} never found)")
    print(f"search under load: p50 {result['search_p50'] * ms:.0f} ms, p95 {result['search_p95'] * ms:.0f} ms "
          f"({result['searches']} searches)")
    for words, (p50, p95) in result["search_by_query"].items():
        print(f"  search {words!r}: p50 {p50 * ms:.0f} ms, p95 {p95 * ms:.0f} ms")
    for by, (median, worst, n) in result["stats"].items():
        print(f"stats {by}: median {median * ms:.0f} ms, max {worst * ms:.0f} ms ({n} runs)")
    print(f"database {result['db_bytes'] / 2**20:,.0f} MiB: {result['bytes_per_million'] / 2**30:.2f} GiB "
          "per million entries")
    print(f"usage by host equal to the same files synced into SQLite: {result['usage_equal']}")
    print(f"watchers' CPU: {result['watcher_cpu_s']:.1f} s in all")


if __name__ == "__main__":
    main()
