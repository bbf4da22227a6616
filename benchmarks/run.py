"""Run every benchmark: sessiontree against the original agent and the physical limit.

One command, both sides in one run::

    .venv/bin/python benchmarks/run.py            # default: ~15 minutes on 2 cores
    .venv/bin/python benchmarks/run.py --quick    # a minute or two, smaller sizes
    .venv/bin/python benchmarks/run.py --full     # adds 200,000-entry sessions, more repetitions
    .venv/bin/python benchmarks/run.py --only load,list

Three sides per operation:

* **ours**: sessiontree through its public API (``SessionManager`` on the
  default SQLite store; JSONL rows for information);
* **ref**: ``@earendil-works/pi-coding-agent``'s own ``SessionManager``
  (format 3 JSONL), installed from the npm registry into
  ``benchmarks/.work/`` and driven by ``node/driver.mjs``;
* **limit**: the floor on this machine: the bytes read and parsed with
  ``orjson``, or raw SQLite inserts/selects of the same rows.

Every case runs in its own subprocess (``worker.py`` or ``node/driver.mjs``)
so that its peak RSS is its own. Repetitions are interleaved: repetition 1
of every case of an operation and size, then repetition 2 (the order of the
sides alternates), so that drift in machine load hits all sides alike. A
sample is the median of a process's timed iterations (after warm-up); the
table shows the median of the samples, ratios ``ours / ref`` and
``ours / limit``, the peak RSS, the growth class fitted over the sizes, and
the targets with OK / MISSED. Data (generated sessions, stores) is cached in
``benchmarks/.work/data``; results are written to ``benchmarks/.work/results-*.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# After the path insert: generate.py and reference.py sit beside this script, which runs
# as a file (not a package), so its folder is on the path only from the line above.
import generate  # noqa: E402
from reference import ensure_reference  # noqa: E402

WORK = os.path.join(HERE, ".work")
DATA = os.path.join(WORK, "data", f"g{generate.GENERATOR_VERSION}")
TMP = os.path.join(WORK, "tmp")
DRIVER = os.path.join(HERE, "node", "driver.mjs")
WORKER = os.path.join(HERE, "worker.py")
QUERY = generate.NEEDLE

PROFILES: dict[str, dict[str, Any]] = {
    "quick": {"reps": 3, "load": [100, 1_000, 10_000], "resume": [1_000, 10_000], "project": [1_000, 10_000, 30_000],
              "append": [100, 300, 1_000], "list": [100, 300, 1_000], "search": [100, 300, 1_000],
              "import": [30, 100, 300]},
    "default": {"reps": 3, "load": [100, 1_000, 10_000, 100_000], "resume": [10_000, 100_000],
                "project": [1_000, 10_000, 100_000],
                "append": [300, 1_000, 3_000, 10_000], "list": [100, 1_000, 10_000],
                "search": [100, 1_000, 10_000], "import": [100, 300, 1_000]},
    "full": {"reps": 5, "load": [100, 1_000, 10_000, 100_000, 200_000], "resume": [10_000, 100_000, 200_000],
             "project": [1_000, 10_000, 100_000, 200_000], "append": [300, 1_000, 3_000, 10_000],
             "list": [100, 1_000, 10_000], "search": [100, 1_000, 10_000], "import": [100, 300, 1_000]},
}
GROUPS = ("load", "resume", "project", "turn", "append", "batch", "list", "search", "import")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# Data


def real_spec(entries: int) -> generate.SessionSpec:
    """A long realistic session: branches, big outputs, images, compactions."""
    return generate.SessionSpec(entries=entries, seed=entries)


def deep_spec(entries: int) -> generate.SessionSpec:
    """The same without compactions: the whole active branch (~97%) is model-visible."""
    return generate.SessionSpec(entries=entries, seed=entries, compaction_every=0)


class Data:
    """Generated inputs and the stores built from them, cached on disk."""

    def __init__(self) -> None:
        os.makedirs(DATA, exist_ok=True)
        os.makedirs(TMP, exist_ok=True)

    def _done(self, path: str) -> bool:
        return os.path.exists(path + ".ok")

    def _mark(self, path: str) -> None:
        open(path + ".ok", "w").close()

    def session(self, flavor: str, entries: int) -> dict[str, Any]:
        """A session file (format 3) plus the same session in a SQLite store and as format-4 JSONL."""
        spec = real_spec(entries) if flavor == "real" else deep_spec(entries)
        base = os.path.join(DATA, f"{flavor}-{entries}")
        file = base + ".jsonl"
        db = base + ".db"
        v4dir = base + "-v4"
        if not self._done(base):
            from sessiontree import SessionManager
            from sessiontree.stores.jsonl.store import JsonlStore
            from sessiontree.stores.sqlite.store import SqliteStore

            log(f"  generating {flavor} session of {entries:,} entries ...")
            generate.write_session(file, spec)
            for leftover in (db, db + "-wal", db + "-shm"):
                if os.path.exists(leftover):
                    os.unlink(leftover)
            shutil.rmtree(v4dir, ignore_errors=True)
            store = SqliteStore(db)
            manager = SessionManager.import_from_jsonl(file, None, store)
            store.close()
            SessionManager.import_from_jsonl(file, None, JsonlStore(v4dir))
            with open(base + ".json", "w") as handle:
                json.dump({"id": manager.get_session_id()}, handle)
            self._mark(base)
        with open(base + ".json") as handle:
            session_id = json.load(handle)["id"]
        v4file = os.path.join(v4dir, os.listdir(v4dir)[0])
        return {"file": file, "db": db, "id": session_id, "v4file": v4file, "size": os.path.getsize(file)}

    def corpus(self, sessions: int) -> dict[str, Any]:
        """A directory of ``sessions`` format-3 files and a SQLite store holding the same sessions."""
        directory = os.path.join(DATA, f"corpus-{sessions}")
        db = os.path.join(DATA, f"corpus-{sessions}.db")
        if not self._done(directory):
            from sessiontree.format.codec import read_session_file
            from sessiontree.stores.sqlite.store import SqliteStore

            log(f"  generating a corpus of {sessions:,} sessions ...")
            shutil.rmtree(directory, ignore_errors=True)
            pool = os.path.join(DATA, "corpus-pool")
            paths = generate.write_corpus(pool, sessions)
            os.makedirs(directory)
            for path in paths:
                os.link(path, os.path.join(directory, os.path.basename(path)))
            for leftover in (db, db + "-wal", db + "-shm"):
                if os.path.exists(leftover):
                    os.unlink(leftover)
            store = SqliteStore(db)
            batch = []
            for path in paths:
                parsed = read_session_file(path)
                batch.append((parsed.header, parsed.entries, [parsed.entry_bytes(i) for i in range(len(parsed.entries))]))
                if len(batch) == 200:
                    store.create_many(batch)
                    batch = []
            if batch:
                store.create_many(batch)
            # What `sessiontree import` does at its end: the search rows time a settled index.
            store.settle_derived()
            store.close()
            self._mark(directory)
        # A writable open applies pending schema steps (the search index fills itself there),
        # so no timed run pays for a migration.
        from sessiontree.stores.sqlite.store import SqliteStore

        SqliteStore(db).close()
        size = sum(os.path.getsize(os.path.join(directory, name)) for name in os.listdir(directory))
        return {"dir": directory, "db": db, "size": size}

    def messages(self, count: int) -> str:
        """``count`` message objects (one JSON per line) taken from a realistic session."""
        path = os.path.join(DATA, f"messages-{count}.jsonl")
        if not self._done(path):
            import orjson

            records = generate.generate_records(generate.SessionSpec(entries=int(count * 1.15) + 50, seed=99))
            messages = [r["message"] for r in records[1:] if r["type"] == "message"][:count]
            # The original agent writes its session file at the first user message.
            first_user = next(i for i, m in enumerate(messages) if m["role"] == "user")
            messages = messages[first_user:] + messages[:first_user]
            assert len(messages) == count, (len(messages), count)
            with open(path, "wb") as handle:
                handle.write(b"\n".join(orjson.dumps(m) for m in messages) + b"\n")
            self._mark(path)
        return path


# ---------------------------------------------------------------------------------------
# Cases


@dataclass
class Case:
    group: str
    size: int
    name: str  # e.g. "ours sqlite", "ref", "limit"
    side: str  # "ours", "ref", "limit"
    lang: str  # "py" or "node"
    cmd: dict[str, Any]
    primary: bool = False  # the "ours" row the targets and ratios use
    unit: str = ""  # what size counts, for rates
    bytes: int = 0  # input size, for memory ratios
    samples: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # process CPU time, median per process
    memory: list[dict[str, int]] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    pythonpath: str | None = None  # another checkout's src, for "(before)" rows
    before: bool = False  # also gets a "(before)" row with --before (primary rows always do)

    @property
    def key(self) -> str:
        return f"{self.group}/{self.size}/{self.name}"

    @property
    def median(self) -> float | None:
        return statistics.median(self.samples) if self.samples else None


def run_case(case: Case, module: str, timeout: float) -> None:
    cmd = dict(case.cmd, tmp=TMP)
    if case.lang == "node":
        cmd["module"] = module
        argv = ["node", "--expose-gc", "--max-old-space-size=16384", DRIVER, json.dumps(cmd)]
    else:
        argv = [sys.executable, WORKER, json.dumps(cmd)]
    env = None if case.pythonpath is None else dict(os.environ, PYTHONPATH=case.pythonpath)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, env=env)
    except subprocess.TimeoutExpired:
        case.errors.append(f"timeout after {timeout:.0f} s")
        return
    if done.returncode != 0:
        case.errors.append((done.stderr.strip() or f"exit {done.returncode}")[-600:])
        return
    out = json.loads(done.stdout.strip().splitlines()[-1])
    case.samples.append(statistics.median(out["times"]))
    if out.get("cpu"):
        case.cpu.append(statistics.median(out["cpu"]))
    case.memory.append({"rss0": out["rss0"], "rss1": out["rss1"], "hwm": out["hwm"]})
    case.results.append(out["result"])


def build_cases(profile: dict[str, Any], only: set[str], data: Data) -> list[Case]:
    cases: list[Case] = []

    def add(group: str, size: int, name: str, side: str, lang: str, cmd: dict[str, Any], **extra: Any) -> None:
        cases.append(Case(group, size, name, side, lang, cmd, **extra))

    if "load" in only:
        for n in profile["load"]:
            s = data.session("real", n)
            # Large sizes: the first (memory-measuring) run is timed too, to stay within the budget.
            it = {"warmup": 1, "iters": 3} if n <= 10_000 else {"warmup": 1, "iters": 2, "first_timed": True}
            common = {"unit": "entries", "bytes": s["size"]}
            add("load", n, "ours sqlite", "ours", "py", {"op": "load_sqlite", "db": s["db"], "id": s["id"], **it},
                primary=True, **common)
            add("load", n, "ours sqlite, what-if no GC", "ours", "py",
                {"op": "load_sqlite", "db": s["db"], "id": s["id"], "pause_gc": True, **it}, **common)
            add("load", n, "ours jsonl", "ours", "py", {"op": "load_jsonl", "file": s["v4file"], **it}, **common)
            add("load", n, "ours read_session_file", "ours", "py", {"op": "read_file", "file": s["file"], **it}, **common)
            add("load", n, "ref", "ref", "node", {"op": "load", "file": s["file"], "copy": True, **it}, **common)
            add("load", n, "limit read+orjson", "limit", "py", {"op": "limit_parse", "file": s["file"], **it}, **common)
    if "resume" in only:
        for n in profile["resume"]:
            s = data.session("real", n)
            it = {"warmup": 1, "iters": 3} if n <= 10_000 else {"warmup": 1, "iters": 2, "first_timed": True}
            add("resume", n, "ours sqlite", "ours", "py", {"op": "resume", "db": s["db"], "id": s["id"], **it},
                primary=True, unit="entries", bytes=s["size"])
            add("resume", n, "ref", "ref", "node", {"op": "resume", "file": s["file"], **it}, unit="entries",
                bytes=s["size"])
    if "project" in only:
        for n in profile["project"]:
            s = data.session("deep", n)
            it = {"warmup": 2, "iters": 5 if n <= 10_000 else 3}
            add("project", n, "ours", "ours", "py", {"op": "project", "db": s["db"], "id": s["id"], **it},
                primary=True, unit="entries", bytes=s["size"])
            add("project", n, "ours, manager warm", "ours", "py",
                {"op": "project_warm", "db": s["db"], "id": s["id"], **it}, unit="entries", bytes=s["size"])
            add("project", n, "ref", "ref", "node", {"op": "project", "file": s["file"], **it},
                unit="entries", bytes=s["size"])
    if "turn" in only or "project" in only:
        for n in profile["project"]:
            s = data.session("deep", n)
            turn = {"warmup": 2, "iters": 7}
            # Durable (synchronous=full: an fsync per append) is the default; the agent never
            # fsyncs. Compare at equal durability: normal vs ref, durable vs ref + fsync.
            add("turn", n, "ours", "ours", "py", {"op": "turn", "db": s["db"], "id": s["id"], **turn},
                primary=True, unit="")
            add("turn", n, "ours, synchronous=normal", "ours", "py",
                {"op": "turn", "db": s["db"], "id": s["id"], "synchronous": "normal", **turn}, unit="", before=True)
            add("turn", n, "ref", "ref", "node", {"op": "turn", "file": s["file"], **turn}, unit="")
            add("turn", n, "ref + fsync", "ref", "node", {"op": "turn", "file": s["file"], "fsync": True, **turn},
                unit="")
    if "project" in only:
        n = max(profile["project"])
        s = data.session("real", n)
        it = {"warmup": 2, "iters": 3}
        add("project+compactions", n, "ours", "ours", "py", {"op": "project", "db": s["db"], "id": s["id"], **it},
            primary=True, unit="entries")
        add("project+compactions", n, "ref", "ref", "node", {"op": "project", "file": s["file"], **it}, unit="entries")
    if "append" in only:
        for n in profile["append"]:
            m = data.messages(n)
            it = {"warmup": 1, "iters": 1, "first_timed": True}
            base = {"messages": m, "count": n, **it}
            add("append", n, "ours sqlite", "ours", "py", {"op": "append_sqlite", **base}, primary=True, unit="appends")
            add("append", n, "ours sqlite, no search index", "ours", "py", {"op": "append_sqlite", "index": False,
                                                                            **base}, unit="appends")
            add("append", n, "ours sqlite, normal, no search index", "ours", "py",
                {"op": "append_sqlite", "synchronous": "normal", "index": False, **base}, unit="appends")
            # Every call of these fsyncs once: the largest size costs minutes when the disk is slow,
            # so the JSONL rows stop at the second largest (they are for information).
            small = n < max(profile["append"])
            if small:
                add("append", n, "ours jsonl", "ours", "py", {"op": "append_jsonl", **base}, unit="appends")
            add("append", n, "ours sqlite, synchronous=normal", "ours", "py",
                {"op": "append_sqlite", "synchronous": "normal", **base}, unit="appends", before=True)
            add("append", n, "ours jsonl, fsync=False", "ours", "py",
                {"op": "append_jsonl", "fsync": False, **base}, unit="appends")
            add("append", n, "ref", "ref", "node", {"op": "append", **base}, unit="appends")
            add("append", n, "ref + fsync", "ref", "node", {"op": "append", "fsync": True, **base}, unit="appends")
            if small:
                add("append", n, "limit write+fsync", "limit", "py", {"op": "limit_file_append", **base},
                    unit="appends")
            add("append", n, "limit sqlite txn/row", "limit", "py", {"op": "limit_sqlite_insert", "batch": 1, **base},
                unit="appends")
            add("append", n, "limit sqlite txn/row, normal", "limit", "py",
                {"op": "limit_sqlite_insert", "batch": 1, "synchronous": "normal", **base}, unit="appends")
    if "batch" in only:
        for n in profile["append"]:
            m = data.messages(n)
            it = {"warmup": 1, "iters": 3}
            base = {"messages": m, "count": n, **it}
            add("batch", n, "ours sqlite, 100/txn", "ours", "py", {"op": "append_sqlite_batch", "batch": 100, **base},
                primary=True, unit="appends")
            add("batch", n, "ours sqlite, 1 txn", "ours", "py", {"op": "append_sqlite_batch", "batch": n, **base},
                unit="appends")
            add("batch", n, "ours sqlite, 100/txn, no search index", "ours", "py",
                {"op": "append_sqlite_batch", "batch": 100, "index": False, **base}, unit="appends", before=True)
            add("batch", n, "ours sqlite, 1 txn, no search index", "ours", "py",
                {"op": "append_sqlite_batch", "batch": n, "index": False, **base}, unit="appends", before=True)
            add("batch", n, "limit sqlite, 100/txn", "limit", "py", {"op": "limit_sqlite_insert", "batch": 100, **base},
                unit="appends")
            add("batch", n, "limit sqlite, 1 txn", "limit", "py", {"op": "limit_sqlite_insert", "batch": n, **base},
                unit="appends")
    for group in ("list", "search"):
        if group not in only:
            continue
        for n in profile[group]:
            c = data.corpus(n)
            it = {"warmup": 1, "iters": 3} if n <= 1_000 else {"warmup": 1, "iters": 2, "first_timed": True}
            if group == "list":
                add("list", n, "ours sqlite", "ours", "py", {"op": "list_sqlite", "db": c["db"], **it}, primary=True,
                    unit="sessions", bytes=c["size"])
                add("list", n, "ours jsonl", "ours", "py", {"op": "list_jsonl", "dir": c["dir"], **it},
                    unit="sessions", bytes=c["size"])
                add("list", n, "ref", "ref", "node", {"op": "list", "dir": c["dir"], **it}, unit="sessions",
                    bytes=c["size"])
                add("list", n, "limit sqlite select", "limit", "py", {"op": "limit_list", "db": c["db"], **it},
                    unit="sessions", bytes=c["size"])
            else:
                add("search", n, "ours sqlite", "ours", "py", {"op": "search_sqlite", "db": c["db"], "query": QUERY, **it},
                    primary=True, unit="sessions", bytes=c["size"])
                add("search", n, "ours sqlite, -n 50", "ours", "py",
                    {"op": "search_sqlite", "db": c["db"], "query": QUERY, "limit": 50, **it},
                    unit="sessions", bytes=c["size"], before=True)
                add("search", n, "ours jsonl scan", "ours", "py",
                    {"op": "search_jsonl", "dir": c["dir"], "query": QUERY,
                     **({"warmup": 0, "iters": 1, "first_timed": True} if n > 1_000 else it)},
                    unit="sessions", bytes=c["size"])
                add("search", n, "ours list_all + in (no index)", "ours", "py",
                    {"op": "search_listing", "db": c["db"], "query": QUERY, **it}, unit="sessions", bytes=c["size"])
                add("search", n, "ref", "ref", "node", {"op": "search", "dir": c["dir"], "query": QUERY, **it},
                    unit="sessions", bytes=c["size"])
                add("search", n, "limit sqlite instr", "limit", "py",
                    {"op": "limit_search", "db": c["db"], "query": QUERY, **it}, unit="sessions", bytes=c["size"])
    if "import" in only:
        for n in profile["import"]:
            c = data.corpus(n)
            it = {"warmup": 1, "iters": 1, "first_timed": True}
            add("import", n, "ours sqlite", "ours", "py", {"op": "import_sqlite", "dir": c["dir"], **it}, primary=True,
                unit="sessions", bytes=c["size"])
            add("import", n, "ours sqlite, no search index", "ours", "py",
                {"op": "import_sqlite", "dir": c["dir"], "index": False, **it}, unit="sessions", bytes=c["size"],
                before=True)
            add("import", n, "ours sqlite + search settle (the command)", "ours", "py",
                {"op": "import_sqlite", "dir": c["dir"], "settle": True, **it}, unit="sessions", bytes=c["size"],
                before=True)
            add("import", n, "ours sqlite, per file, no search index", "ours", "py",
                {"op": "import_sqlite", "dir": c["dir"], "index": False, "per_file": True, **it}, unit="sessions",
                bytes=c["size"])
            add("import", n, "ref forkFrom", "ref", "node", {"op": "import", "dir": c["dir"], **it}, unit="sessions",
                bytes=c["size"])
            add("import", n, "limit read+orjson+insert", "limit", "py", {"op": "limit_import", "dir": c["dir"], **it},
                unit="sessions", bytes=c["size"])
            add("import", n, "limit read+orjson+insert, 100/txn", "limit", "py",
                {"op": "limit_import", "dir": c["dir"], "group": 100, **it}, unit="sessions", bytes=c["size"])
    return cases


# ---------------------------------------------------------------------------------------
# Analysis


def index_sizes(db: str) -> dict[str, int]:
    """Bytes of the search index (FTS5 tables, ``search_entries`` and its index), the
    entries, and the whole database file (SQLite's ``dbstat``; read-only)."""
    import sqlite3

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        pages = dict(conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall())
    finally:
        conn.close()
    fts = sum(v for k, v in pages.items() if k.startswith("search_fts"))
    text = sum(v for k, v in pages.items() if k == "search_entries" or k.startswith("sqlite_autoindex_search_entries"))
    entries = sum(v for k, v in pages.items() if k == "entries" or k.startswith("sqlite_autoindex_entries"))
    return {"fts": fts, "text": text, "index": fts + text, "entries": entries, "db": sum(pages.values())}


def growth(points: list[tuple[int, float]]) -> tuple[float | None, str]:
    """Least-squares slope of log(time) over log(size) on the largest three sizes, and its class."""
    points = sorted(p for p in points if p[1] and p[1] > 0)[-3:]
    if len(points) < 2:
        return None, "n/a"
    xs = [math.log(p[0]) for p in points]
    ys = [math.log(p[1]) for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    if slope < 0.25:
        label = "constant"
    elif slope < 0.8:
        label = "sublinear"
    elif slope < 1.12:
        label = "linear"
    elif slope < 1.35:
        label = "n log n"
    elif slope < 1.75:
        label = "superlinear"
    else:
        label = "quadratic"
    return slope, label


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "error"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def mb(value: float) -> str:
    return f"{value / 1e6:.0f}"


@dataclass
class Target:
    name: str
    measured: str
    ok: bool | None


def analyse(cases: list[Case]) -> tuple[list[str], list[Target], dict[str, Any]]:
    by_key = {case.key: case for case in cases}
    groups: dict[str, list[Case]] = {}
    for case in cases:
        groups.setdefault(case.group, []).append(case)
    lines: list[str] = []
    fits: dict[str, Any] = {}
    header = (f"{'operation':<20} {'size':>8} {'side':<26} {'median':>9} {'rate':>13} "
              f"{'ours/ref':>8} {'ours/lim':>8} {'peak RSS MB':>11}")
    for group, members in groups.items():
        lines.append("")
        lines.append(header)
        lines.append("-" * len(header))
        sizes = sorted({c.size for c in members})
        for size in sizes:
            row_cases = [c for c in members if c.size == size]
            ref = next((c for c in row_cases if c.side == "ref" and "fsync" not in c.name), None)
            limit = next((c for c in row_cases if c.side == "limit"), None)
            for case in row_cases:
                t = case.median
                rate = f"{case.size / t:,.0f} {case.unit[:4]}/s" if t and case.unit else ""
                vs_ref = vs_lim = None
                if case.side == "ours" and t:
                    if ref is not None and ref.median:
                        vs_ref = t / ref.median
                    if limit is not None and limit.median:
                        vs_lim = t / limit.median
                peak = statistics.median(m["hwm"] for m in case.memory) if case.memory else 0
                err = f"  ERROR: {case.errors[0].splitlines()[-1][:80]}" if case.errors else ""
                lines.append(f"{group:<20} {size:>8,} {case.name:<26} {fmt_time(t):>9} {rate:>13} "
                             f"{fmt_ratio(vs_ref):>8} {fmt_ratio(vs_lim):>8} {mb(peak):>11}{err}")
        # Growth of each side over the sizes.
        if len(sizes) >= 2:
            for name in dict.fromkeys(c.name for c in members):
                points = [(c.size, c.median) for c in members if c.name == name and c.median]
                slope, label = growth(points)
                fits[f"{group}/{name}"] = {"slope": slope, "class": label}
                if slope is not None:
                    lines.append(f"{'':<20} {'growth':>8} {name:<26} {label} (log-log slope {slope:.2f} "
                                 f"over {', '.join(f'{p[0]:,}' for p in sorted(points)[-3:])})")

    targets: list[Target] = []

    def med(key: str) -> float | None:
        case = by_key.get(key)
        return case.median if case else None

    def cpu_med(key: str) -> float | None:
        case = by_key.get(key)
        return statistics.median(case.cpu) if case and case.cpu else None

    if "load" in groups:
        n = max(c.size for c in groups["load"])
        ours, ref, lim = med(f"load/{n}/ours sqlite"), med(f"load/{n}/ref"), med(f"load/{n}/limit read+orjson")
        if ours and ref:
            targets.append(Target(f"load {n:,} entries: ours sqlite / ref <= 1.0", f"{ours / ref:.2f}", ours / ref <= 1.0))
        if ours and lim:
            targets.append(Target(f"load {n:,} entries: ours sqlite / orjson limit <= 2.0", f"{ours / lim:.2f}",
                                  ours / lim <= 2.0))
        worst = max((((med(f"load/{c.size}/ours sqlite") or 0) / (med(f"load/{c.size}/ref") or 1), c.size)
                     for c in groups["load"] if c.name == "ref" and c.median), default=None)
        if worst is not None:  # no ref side with --no-ref
            targets.append(Target("load, every size: max ours sqlite / ref <= 1.0",
                                  f"{worst[0]:.2f} (at {worst[1]:,})", worst[0] <= 1.0))
        for name in ("ours sqlite, what-if no GC", "ours jsonl", "ours read_session_file"):
            value = med(f"load/{n}/{name}")
            if value and ref and name.startswith("ours sqlite"):
                targets.append(Target(f"load {n:,}: {name} / ref (info)", f"{value / ref:.2f}", None))
            value, lim_n = med(f"load/{n}/{name}"), lim
            if value and lim_n:
                targets.append(Target(f"load {n:,}: {name} / orjson limit <= 2.0 (info)", f"{value / lim_n:.2f}",
                                      value / lim_n <= 2.0))
        case = by_key.get(f"load/{n}/ours sqlite")
        if case and case.memory and case.bytes:
            retained = statistics.median(m["rss1"] - m["rss0"] for m in case.memory)
            peak = statistics.median(m["hwm"] - m["rss0"] for m in case.memory)
            targets.append(Target(f"memory: loaded {n:,}-entry session RSS / file size <= 2.0",
                                  f"{retained / case.bytes:.2f} retained ({mb(retained)} MB for a {mb(case.bytes)} MB file; "
                                  f"peak during load {peak / case.bytes:.2f})", retained / case.bytes <= 2.0))
        refcase = by_key.get(f"load/{n}/ref")
        if refcase and refcase.memory and refcase.bytes:
            retained = statistics.median(m["rss1"] - m["rss0"] for m in refcase.memory)
            targets.append(Target(f"memory (info): ref loaded {n:,}-entry session RSS / file size",
                                  f"{retained / refcase.bytes:.2f}", None))
    if "resume" in groups:
        for size in sorted({c.size for c in groups["resume"]}):
            ours, ref = med(f"resume/{size}/ours sqlite"), med(f"resume/{size}/ref")
            if ours and ref:
                targets.append(Target(f"resume a {size:,}-entry session (open by id + context): ours / ref <= 0.7",
                                      f"{ours / ref:.2f}", ours / ref <= 0.7))
    if "project" in groups:
        n = max(c.size for c in groups["project"])
        ours, ref = med(f"project/{n}/ours"), med(f"project/{n}/ref")
        if ours and ref:
            targets.append(Target(f"projection of a {n:,}-entry branch: ours / ref <= 1.0", f"{ours / ref:.2f}",
                                  ours / ref <= 1.0))
        warm = med(f"project/{n}/ours, manager warm")
        if warm and ref:
            targets.append(Target(f"projection {n:,} (info): manager's kept projection, unchanged session / ref",
                                  f"{warm / ref:.3f}", None))
        fit = fits.get("project/ours")
        if fit and fit["slope"] is not None:
            targets.append(Target("projection growth: linear", f"{fit['class']} (slope {fit['slope']:.2f})",
                                  fit["slope"] < 1.12))
    if "turn" in groups:
        for n in sorted({c.size for c in groups["turn"]}):
            ours, normal = med(f"turn/{n}/ours"), med(f"turn/{n}/ours, synchronous=normal")
            ref, ref_fsync = med(f"turn/{n}/ref"), med(f"turn/{n}/ref + fsync")
            if ours and ref:
                targets.append(Target(f"agent turn on a {n:,}-entry session (4 appends + context): ours durable "
                                      "/ ref (no fsync) <= 1.0", f"{ours / ref:.3f}", ours / ref <= 1.0))
            if normal and ref:
                targets.append(Target(f"agent turn, {n:,}, equal durability (no fsync on either side): ours "
                                      "synchronous=normal / ref <= 1.0", f"{normal / ref:.3f}", normal / ref <= 1.0))
            if ours and ref_fsync:
                targets.append(Target(f"agent turn, {n:,}, equal durability (an fsync per append on either side):"
                                      " ours durable / ref + fsync <= 1.0", f"{ours / ref_fsync:.3f}",
                                      ours / ref_fsync <= 1.0))
    if "list" in groups:
        n = max(c.size for c in groups["list"])
        ours, ref = med(f"list/{n}/ours sqlite"), med(f"list/{n}/ref")
        if ours and ref:
            targets.append(Target(f"list {n:,} sessions: ref / ours >= 20", f"{ref / ours:.1f}x faster", ref / ours >= 20))
    if "batch" in groups:
        n = max(c.size for c in groups["batch"])
        for name in ("ours sqlite, 100/txn", "ours sqlite, 1 txn"):
            t = med(f"batch/{n}/{name}")
            if t:
                targets.append(Target(f"batched durable appends ({name}) >= 10,000/s", f"{n / t:,.0f}/s",
                                      n / t >= 10_000))
        for name, limit in (("ours sqlite, 100/txn", "limit sqlite, 100/txn"),
                            ("ours sqlite, 1 txn", "limit sqlite, 1 txn"),
                            ("ours sqlite, 100/txn, no search index", "limit sqlite, 100/txn"),
                            ("ours sqlite, 1 txn, no search index", "limit sqlite, 1 txn")):
            t, lim = med(f"batch/{n}/{name}"), med(f"batch/{n}/{limit}")
            if t and lim:
                targets.append(Target(f"batched durable appends: {name} / {limit} <= 1.2"
                                      + (" (info)" if "no search" in name else ""), f"{t / lim:.2f}",
                                      None if "no search" in name else t / lim <= 1.2))
    if "append" in groups:
        n = max(c.size for c in groups["append"])
        ours = med(f"append/{n}/ours sqlite")
        for name in ("ref", "ref + fsync"):
            ref = med(f"append/{n}/{name}")
            if ours and ref:
                targets.append(Target(f"per-call appends: ours sqlite / {name} <= 1.0", f"{ours / ref:.2f}",
                                      ours / ref <= 1.0))
        # Same durability class as the reference (no fsync): the opt-in settings.
        for side in ("ours sqlite, synchronous=normal", "ours jsonl, fsync=False"):
            ours_nf, ref = med(f"append/{n}/{side}"), med(f"append/{n}/ref")
            if ours_nf and ref:
                targets.append(Target(f"per-call appends, no fsync on either side: {side} / ref <= 1.0",
                                      f"{ours_nf / ref:.2f}", ours_nf / ref <= 1.0))
        lim_n, ref = med(f"append/{n}/limit sqlite txn/row, normal"), med(f"append/{n}/ref")
        for side in ("ours sqlite, synchronous=normal", "ours sqlite, normal, no search index"):
            ours_nf = med(f"append/{n}/{side}")
            if ours_nf and lim_n and ref:
                targets.append(Target(f"per-call appends (info): {side} / raw SQLite txn/row, normal; that limit / ref",
                                      f"{ours_nf / lim_n:.2f}; {lim_n / ref:.2f}", None))
        lim = med(f"append/{n}/limit sqlite txn/row")
        if ours and lim:
            targets.append(Target("per-call appends: ours sqlite / raw SQLite txn/row limit <= 1.3",
                                  f"{ours / lim:.2f}", ours / lim <= 1.3))
        # Durable on both sides: the JSONL store (fsync per call) against the reference plus
        # an fsync per call, at the largest size that has the (slow) durable JSONL row.
        sizes = [c.size for c in groups["append"] if c.name == "ours jsonl" and c.median]
        if sizes:
            m = max(sizes)
            jsonl, ref = med(f"append/{m}/ours jsonl"), med(f"append/{m}/ref + fsync")
            if jsonl and ref:
                targets.append(Target(f"per-call appends, durable on both sides ({m:,}): ours jsonl / ref + fsync"
                                      " <= 1.0", f"{jsonl / ref:.2f}", jsonl / ref <= 1.0))
    if "import" in groups:
        n = max(c.size for c in groups["import"])
        ours, ref, lim = (med(f"import/{n}/ours sqlite"), med(f"import/{n}/ref forkFrom"),
                          med(f"import/{n}/limit read+orjson+insert"))
        if ours and ref:
            targets.append(Target(f"import {n:,} sessions (info): ours / ref", f"{ours / ref:.2f}", None))
        if ours and lim:
            targets.append(Target(f"import {n:,} sessions (info): ours / limit", f"{ours / lim:.2f}", None))
        bare = med(f"import/{n}/ours sqlite, no search index")
        if bare and ref and lim:
            targets.append(Target(f"import {n:,} sessions (info): ours without the search index / ref, / limit",
                                  f"{bare / ref:.2f}, {bare / lim:.2f}", None))
        grouped = med(f"import/{n}/limit read+orjson+insert, 100/txn")
        if bare and grouped:
            targets.append(Target(f"import {n:,} sessions (info): ours without the search index"
                                  " / limit with the same grouping (100/txn)", f"{bare / grouped:.2f}", None))
    if "search" in groups:
        # Issue 13: at most 1/20 of the JSONL scan and 1/50 of the agent's picker search.
        for n in sorted({c.size for c in groups["search"]}):
            if n < 1_000:
                continue
            for side in ("ours sqlite", "ours sqlite, -n 50"):
                ours = med(f"search/{n}/{side}")
                scan, ref = med(f"search/{n}/ours jsonl scan"), med(f"search/{n}/ref")
                if ours and scan:
                    targets.append(Target(f"search {n:,} sessions: {side} / jsonl scan <= 1/20 (0.05)",
                                          f"{ours / scan:.4f} (1/{scan / ours:,.0f})", ours / scan <= 0.05))
                if ours and ref:
                    targets.append(Target(f"search {n:,} sessions: {side} / ref picker <= 1/50 (0.02)",
                                          f"{ours / ref:.4f} (1/{ref / ours:,.0f})", ours / ref <= 0.02))
                # The same ratio in process CPU time: on a loaded machine wall time of a
                # ~10 ms query is mostly waiting for a core (info; the verdict is wall time's).
                ours_cpu, ref_cpu = cpu_med(f"search/{n}/{side}"), cpu_med(f"search/{n}/ref")
                if ours_cpu and ref_cpu:
                    targets.append(Target(f"search {n:,} sessions: {side} / ref picker, CPU time (info)",
                                          f"{ours_cpu / ref_cpu:.4f} (1/{ref_cpu / ours_cpu:,.0f}; "
                                          f"{ours_cpu * 1e3:,.1f} / {ref_cpu * 1e3:,.1f} ms)", None))
                before_cpu = cpu_med(f"search/{n}/{side} (before)")
                if ours_cpu and before_cpu:
                    targets.append(Target(f"search {n:,} sessions: {side} / (before), CPU time (info)",
                                          f"{ours_cpu / before_cpu:.3f} ({ours_cpu * 1e3:,.1f} / "
                                          f"{before_cpu * 1e3:,.1f} ms)", None))
        for n in sorted({c.size for c in groups["search"]}):
            c = next(c for c in groups["search"] if c.size == n)
            db = c.cmd.get("db")
            if db and os.path.exists(db):
                sizes = index_sizes(db)
                targets.append(Target(f"search index size, corpus of {n:,} sessions (info)",
                                      f"index {sizes['index'] / 1e6:,.1f} MB (FTS5 {sizes['fts'] / 1e6:,.1f} MB + "
                                      f"text {sizes['text'] / 1e6:,.1f} MB) of a {sizes['db'] / 1e6:,.1f} MB database "
                                      f"({sizes['index'] / sizes['db']:.0%}); entries {sizes['entries'] / 1e6:,.1f} MB",
                                      None))
    # Issue 13: appends stay within 10% of their speed before the search index.
    for group, pairs in (("append", [("ours sqlite", "ours sqlite, no search index"),
                                     ("ours sqlite, synchronous=normal", "ours sqlite, normal, no search index")]),
                         ("batch", [("ours sqlite, 100/txn", "ours sqlite, 100/txn, no search index"),
                                    ("ours sqlite, 1 txn", "ours sqlite, 1 txn, no search index")])):
        if group not in groups:
            continue
        n = max(c.size for c in groups[group])
        for with_index, without in pairs:
            a, b = med(f"{group}/{n}/{with_index}"), med(f"{group}/{n}/{without}")
            if a and b:
                targets.append(Target(f"{group} {n:,}: {with_index} with / without search index <= 1.10",
                                      f"{a / b:.2f}", a / b <= 1.10))
    # Both sides must agree on what they counted.
    for group in ("list", "search"):
        for case in groups.get(group, []):
            if case.side == "ref" and case.results:
                ours_case = next((c for c in groups[group] if c.size == case.size and c.primary), None)
                if ours_case and ours_case.results and ours_case.results[0] != case.results[0]:
                    targets.append(Target(f"{group} {case.size:,}: same count on both sides",
                                          f"ours {ours_case.results[0]} vs ref {case.results[0]}", False))
    return lines, targets, fits


# ---------------------------------------------------------------------------------------


def before_db(db: str, src: str) -> str:
    """``db`` as the "(before)" tree can open it: unchanged when its schema knows every
    step the database has applied, else a copy (``<db>.before.db``, made once) from
    which the newer steps are removed: their rows in ``schema_migrations`` and the
    tables and indexes an empty store of the before tree does not have. (Enough for
    steps that only add tables, as derived-data steps do.)"""
    import sqlite3

    # The current tree's steps first (a writable open), so that the copy below is made
    # from the database as the "ours" rows will see it, not migrated under the
    # before rows by the first "ours" case.
    subprocess.run([sys.executable, "-c", "import sys; from sessiontree.stores.sqlite import SqliteStore;"
                    " SqliteStore(sys.argv[1]).close()", db], check=True)
    probe = ("import json, os, sys, tempfile; from sessiontree.stores.sqlite import MIGRATIONS, SqliteStore;"
             "d = tempfile.mkdtemp(); s = SqliteStore(os.path.join(d, 'x.db')); s.close();"
             "import sqlite3; c = sqlite3.connect(os.path.join(d, 'x.db'));"
             "print(json.dumps([[n for n, _ in MIGRATIONS],"
             " [r[0] for r in c.execute('SELECT name FROM sqlite_master')]]))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                          env=dict(os.environ, PYTHONPATH=src))
    known, names = json.loads(done.stdout.strip().splitlines()[-1])
    conn = sqlite3.connect(db)
    try:
        applied = [row[0] for row in conn.execute("SELECT name FROM schema_migrations")]
    finally:
        conn.close()
    if all(name in known for name in applied):
        return db
    copy = db + ".before.db"
    if not os.path.exists(copy + ".ok"):
        log(f"  copying {os.path.basename(db)} without the schema steps the before tree lacks ...")
        source, target = sqlite3.connect(db), sqlite3.connect(copy)
        source.backup(target)
        source.close()
        if "m013_blobs" in applied and "m013_blobs" not in known:
            # That step rewrote large records cut (their images in `blobs`): the before
            # tree reads `entries.json` whole, so each cut record gets its bytes back.
            from sessiontree.stores.sqlite import blobs
            from sessiontree.stores.sqlite.derived import record_crc

            keys = [row[0] for row in target.execute("SELECT DISTINCT session_id FROM entry_blobs")]
            for key in keys:
                for seq, splices in blobs.splices_of(target, key).items():
                    text = target.execute("SELECT json FROM entries WHERE session_id = ? AND seq = ?",
                                          (key, seq)).fetchone()[0]
                    whole = blobs.splice(target, bytes(text), splices, lambda k=key, s=seq: RuntimeError(f"blob of {k}:{s}"))
                    target.execute("UPDATE entries SET json = ?, crc = ? WHERE session_id = ? AND seq = ?",
                                   (whole, record_crc(whole), key, seq))
        for kind, name in target.execute("SELECT type, name FROM sqlite_master WHERE type IN ('table', 'index')"
                                         " AND name NOT LIKE 'sqlite_%'").fetchall():
            if name not in names and not name.startswith(tuple(n + "_" for n in names)):
                target.execute(f"DROP {kind.upper()} IF EXISTS \"{name}\"")
        target.executemany("DELETE FROM schema_migrations WHERE name = ?", [(n,) for n in applied if n not in known])
        rebuild = "m014_contentless_search" in applied and "m014_contentless_search" not in known
        if rebuild:
            # That step changed the search tables in place (no text column, contentless
            # FTS5): the before tree rebuilds its own layout by running m004 again.
            target.execute("DROP TABLE IF EXISTS search_fts")
            target.execute("DROP TABLE IF EXISTS search_entries")
            target.execute("DELETE FROM schema_migrations WHERE name = 'm004_search_index'")
        target.commit()
        target.close()
        if rebuild:
            subprocess.run([sys.executable, "-c", "import sys; from sessiontree.stores.sqlite import SqliteStore;"
                            " SqliteStore(sys.argv[1]).close()", copy], check=True, env=dict(os.environ, PYTHONPATH=src))
        open(copy + ".ok", "w").close()
    return copy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="smaller sizes, a minute or two")
    mode.add_argument("--full", action="store_true", help="adds 200,000-entry sessions and more repetitions")
    parser.add_argument("--only", help=f"comma-separated operations among {', '.join(GROUPS)}")
    parser.add_argument("--reps", type=int, help="interleaved repetitions (default: by profile)")
    parser.add_argument("--ref-version", help="reference package version (default: cached, else latest)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per subprocess")
    parser.add_argument("--no-ref", action="store_true", help="skip the reference side")
    parser.add_argument("--before", metavar="SRC",
                        help="also run each primary 'ours' row with PYTHONPATH=SRC (another checkout's src "
                             "directory, e.g. from `git archive`), interleaved, as '<row> (before)'")
    args = parser.parse_args(argv)
    profile_name = "quick" if args.quick else "full" if args.full else "default"
    profile = dict(PROFILES[profile_name])
    reps = args.reps or profile["reps"]
    only = set(GROUPS) if not args.only else {g.strip() for g in args.only.split(",")}
    unknown = only - set(GROUPS)
    if unknown:
        parser.error(f"unknown operations: {', '.join(sorted(unknown))}")

    started = time.time()
    module, version = ("", "") if args.no_ref else ensure_reference(WORK, args.ref_version, log=log)
    node_version = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False).stdout.strip()
    log(f"profile {profile_name}, {reps} repetitions; reference @earendil-works/pi-coding-agent {version or '-'} "
        f"on Node {node_version}")
    log("preparing data (cached in benchmarks/.work/data) ...")
    data = Data()
    cases = build_cases(profile, only, data)
    if args.no_ref:
        cases = [c for c in cases if c.side != "ref"]
    if args.before:
        before = os.path.abspath(args.before)
        with_before: list[Case] = []
        for case in cases:
            with_before.append(case)
            if (case.primary or case.before) and case.lang == "py":
                cmd = dict(case.cmd)
                if "db" in cmd:
                    cmd["db"] = before_db(cmd["db"], before)
                with_before.append(Case(case.group, case.size, f"{case.name} (before)", case.side, case.lang,
                                        cmd, unit=case.unit, bytes=case.bytes, pythonpath=before))
        cases = with_before
    log(f"data ready after {time.time() - started:.0f} s; {len(cases)} cases x {reps} repetitions")

    # Interleave: for each repetition, every (operation, size) runs all its sides, order alternating.
    blocks: dict[tuple[str, int], list[Case]] = {}
    for case in cases:
        blocks.setdefault((case.group, case.size), []).append(case)
    for rep in range(reps):
        for (group, size), members in blocks.items():
            order = members if rep % 2 == 0 else members[::-1]
            for case in order:
                run_case(case, module, args.timeout)
            log(f"  rep {rep + 1}/{reps} {group} {size:,}: " + ", ".join(
                f"{c.name} {fmt_time(c.samples[-1]) if c.samples and not c.errors else 'ERR'}" for c in order))

    lines, targets, fits = analyse(cases)
    elapsed = time.time() - started
    print(f"sessiontree benchmarks ({profile_name}, {reps} interleaved repetitions, medians; "
          f"reference @earendil-works/pi-coding-agent {version} on Node {node_version}; "
          f"Python {sys.version.split()[0]}; {os.cpu_count()} CPUs; {elapsed / 60:.1f} min)")
    print("ratios: time of ours / time of the reference (ref) or of the physical limit (lim); < 1 is faster")
    for line in lines:
        print(line)
    print()
    print("targets")
    for target in targets:
        verdict = "info" if target.ok is None else "OK" if target.ok else "MISSED"
        print(f"  [{verdict:>6}] {target.name}: {target.measured}")
    out = os.path.join(WORK, f"results-{time.strftime('%Y%m%d-%H%M%S')}-{profile_name}.json")
    with open(out, "w") as handle:
        json.dump({"profile": profile_name, "reps": reps, "reference": version, "node": node_version,
                   "python": sys.version, "elapsed_s": elapsed,
                   "cases": [{"key": c.key, "side": c.side, "samples": c.samples, "cpu": c.cpu, "memory": c.memory,
                              "results": c.results, "errors": c.errors, "bytes": c.bytes} for c in cases],
                   "growth": fits,
                   "targets": [{"name": t.name, "measured": t.measured, "ok": t.ok} for t in targets]},
                  handle, indent=1)
    log(f"results written to {out}")
    return 0 if not any(c.errors for c in cases) else 1


if __name__ == "__main__":
    sys.exit(main())
