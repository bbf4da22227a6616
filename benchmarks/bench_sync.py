"""``sessiontree sync`` speed and scale (docs/sync.md), ratios measured in one run.

Two cases, each against what a user would otherwise do:

1. **Re-sync of N unchanged files** (default 10,000, in the agents' layout:
   ``<sessions>/--<cwd>--/<timestamp>_<uuid>.jsonl``, 20 projects) against a
   full ``import`` of the same files into a new store (what ``import`` does
   per file: read, parse, one durable transaction). The re-sync must open no
   session file (counted by the engine, :func:`sessiontree.sync.opened_files`)
   and be at least 20x faster.
2. **A 100,000-entry session that grew by 100 entries**: the sync of the
   grown file against (a) appending the same 100 entries through the API
   (``store.append`` in one call: one transaction, the cheapest way; and 100
   single-entry appends, what a live manager does) and (b) re-importing the
   grown file (delete, then ``import``). Targets: sync <= 2x (a, one call),
   re-import >= 50x sync. The bytes the engine reads are counted: only the
   new bytes and a 4 KiB tail check.

Repetitions are interleaved (sync, then the other side, then again); medians
are printed. Usage::

    python benchmarks/bench_sync.py                       # 10,000 files, 100,000 entries
    python benchmarks/bench_sync.py --files 1000 --entries 20000 --reps 3   # quick
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

from sessiontree.format import jsonio
from sessiontree.format.codec import read_session_file
from sessiontree.session.manager import SessionManager
from sessiontree.stores.sqlite.store import SqliteStore
from sessiontree.sync import engine as sync_module
from sessiontree.sync.engine import Syncer, discover


def _entry(n: int, parent: str | None) -> dict[str, Any]:
    role = "user" if n % 2 else "assistant"
    message: dict[str, Any] = {"role": role, "content": f"message {n}: " + "lorem ipsum dolor sit amet " * 6,
                               "timestamp": 1_772_000_000_000 + n}
    if role == "assistant":
        message = {"role": role, "content": [{"type": "text", "text": message["content"]}],
                   "provider": "anthropic", "model": "claude-sonnet-4-5", "stopReason": "stop",
                   "usage": {"input": 10, "output": 20, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 30},
                   "timestamp": message["timestamp"]}
    return {"type": "message", "id": f"{n:08x}", "parentId": parent,
            "timestamp": f"2026-03-01T10:{(n // 60) % 60:02d}:{n % 60:02d}.000Z", "message": message}


def _lines(start: int, count: int) -> bytes:
    parent = f"{start - 1:08x}" if start > 1 else None
    out = []
    for n in range(start, start + count):
        out.append(jsonio.dumps(_entry(n, parent)))
        parent = f"{n:08x}"
    return b"\n".join(out) + b"\n"


def _header(session_id: str, cwd: str) -> bytes:
    return jsonio.dumps({"type": "session", "version": 3, "id": session_id,
                         "timestamp": "2026-03-01T10:00:00.000Z", "cwd": cwd}) + b"\n"


def _write_agent_tree(root: str, files: int, entries: int) -> list[str]:
    paths = []
    for n in range(files):
        project = f"--home-me-project{n % 20}--"
        os.makedirs(os.path.join(root, project), exist_ok=True)
        session_id = f"0199{n:04x}-0000-7000-8000-{n:012x}"
        path = os.path.join(root, project, f"2026-03-01T10-00-00-000Z_{session_id}.jsonl")
        with open(path, "wb") as handle:
            handle.write(_header(session_id, f"/home/me/project{n % 20}") + _lines(1, entries))
        paths.append(path)
    return paths


def _import(paths: list[str], db: str) -> float:
    store = SqliteStore(db)
    started = time.perf_counter()
    for path in paths:
        SessionManager.import_session(read_session_file(path), None, store)
    elapsed = time.perf_counter() - started
    store.close()
    return elapsed


def case_unchanged(work: str, files: int, reps: int) -> dict[str, Any]:
    root = os.path.join(work, "sessions")
    print(f"writing {files:,} session files ...", file=sys.stderr)
    _write_agent_tree(root, files, 20)
    db = os.path.join(work, "synced.db")
    store = SqliteStore(db)
    started = time.perf_counter()
    found, _ = discover([root])
    report = Syncer(store).sync_files(found)
    first = time.perf_counter() - started
    assert report.counts()["new"] == files, report.counts()
    store.close()
    resync, imports, opened = [], [], []
    for rep in range(reps):
        print(f"  rep {rep + 1}/{reps}", file=sys.stderr)
        store = SqliteStore(db)  # opened inside the timing: what a `sessiontree sync` run pays
        before = sync_module.opened_files()
        started = time.perf_counter()
        found, _ = discover([root])
        report = Syncer(store).sync_files(found)
        resync.append(time.perf_counter() - started)
        opened.append(sync_module.opened_files() - before)
        store.close()
        assert report.counts()["unchanged"] == files, report.counts()
        target = os.path.join(work, f"import-{rep}.db")
        imports.append(_import(sorted(found), target))
        os.unlink(target)
    return {"files": files, "first_sync_s": first, "resync_s": statistics.median(resync),
            "import_s": statistics.median(imports), "opened": max(opened),
            "ratio": statistics.median(imports) / statistics.median(resync)}


def case_grown(work: str, entries: int, grow: int, reps: int) -> dict[str, Any]:
    folder = os.path.join(work, "big", "--home-me-big--")
    os.makedirs(folder)
    session_id = "0199ffff-0000-7000-8000-000000000001"
    path = os.path.join(folder, f"2026-03-01T10-00-00-000Z_{session_id}.jsonl")
    print(f"writing a {entries:,}-entry session ...", file=sys.stderr)
    with open(path, "wb") as handle:
        handle.write(_header(session_id, "/home/me/big") + _lines(1, entries))
    synced = SqliteStore(os.path.join(work, "big-synced.db"))
    Syncer(synced).sync_file(path)
    api = SqliteStore(os.path.join(work, "big-api.db"))
    api_single = SqliteStore(os.path.join(work, "big-api1.db"))
    for store in (api, api_single):
        SessionManager.import_session(read_session_file(path), None, store)
    read_bytes: list[int] = []
    real = sync_module._pread_range

    def counting(fd: int, start: int, end: int) -> bytes:
        data = real(fd, start, end)
        read_bytes[-1] += len(data)
        return data

    sync_module._pread_range = counting
    syncs, batch, singles, reimports, grown_bytes = [], [], [], [], []
    next_n = entries + 1
    try:
        for rep in range(reps):
            print(f"  rep {rep + 1}/{reps}", file=sys.stderr)
            chunk = _lines(next_n, grow)
            new_entries = [jsonio.loads(text) for text in chunk.splitlines()]
            with open(path, "ab") as handle:
                handle.write(chunk)
            grown_bytes.append(len(chunk))
            read_bytes.append(0)
            started = time.perf_counter()
            result = Syncer(synced).sync_file(path)
            syncs.append(time.perf_counter() - started)
            assert (result.status, result.added) == ("grown", grow), result
            started = time.perf_counter()
            api.append(session_id, new_entries, [text for text in chunk.splitlines()])
            batch.append(time.perf_counter() - started)
            started = time.perf_counter()
            for entry in new_entries:
                api_single.append(session_id, [entry])
            singles.append(time.perf_counter() - started)
            next_n += grow
            if rep < 3:  # re-importing costs seconds: three samples are enough for its median
                target = SqliteStore(os.path.join(work, f"reimport-{rep}.db"))
                SessionManager.import_session(read_session_file(path), None, target)  # the earlier import
                started = time.perf_counter()
                target.delete(session_id)
                SessionManager.import_session(read_session_file(path), None, target)
                reimports.append(time.perf_counter() - started)
                target.close()
    finally:
        sync_module._pread_range = real
    for store in (synced, api, api_single):
        store.close()
    sync_s = statistics.median(syncs)
    return {"entries": entries, "grow": grow, "sync_s": sync_s, "append_batch_s": statistics.median(batch),
            "append_single_s": statistics.median(singles), "reimport_s": statistics.median(reimports),
            "bytes_read": max(read_bytes), "bytes_grown": max(grown_bytes),
            "file_bytes": os.path.getsize(path),
            "ratio_api": sync_s / statistics.median(batch), "ratio_api_single": sync_s / statistics.median(singles),
            "ratio_reimport": statistics.median(reimports) / sync_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--grow", type=int, default=100)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--dir", default=None, help="work directory (default: a temporary one, removed)")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    work = args.dir or tempfile.mkdtemp(prefix="bench-sync-")
    os.makedirs(work, exist_ok=True)
    try:
        started = time.perf_counter()
        unchanged = case_unchanged(work, args.files, max(1, min(args.reps, 3)))
        grown = case_grown(work, args.entries, args.grow, args.reps)
        print(f"sessiontree sync benchmarks (medians; {os.cpu_count()} CPUs; Python "
              f"{sys.version.split()[0]}; {time.perf_counter() - started:.0f} s)")
        print(f"re-sync of {unchanged['files']:,} unchanged files     {unchanged['resync_s'] * 1000:9.1f} ms"
              f"   (first sync {unchanged['first_sync_s']:.1f} s; files opened: {unchanged['opened']})")
        print(f"full import of the same files         {unchanged['import_s'] * 1000:9.1f} ms")
        print(f"sync of a {grown['entries']:,}-entry session grown by {grown['grow']}"
              f"  {grown['sync_s'] * 1000:7.1f} ms   (read {grown['bytes_read']:,} bytes: "
              f"{grown['bytes_grown']:,} new + tail check, of a {grown['file_bytes']:,}-byte file)")
        print(f"append of those entries, one call      {grown['append_batch_s'] * 1000:9.1f} ms")
        print(f"append of those entries, one by one    {grown['append_single_s'] * 1000:9.1f} ms")
        print(f"re-import of the grown file            {grown['reimport_s'] * 1000:9.1f} ms")
        print("targets")
        checks = [
            ("re-sync opens no file", unchanged["opened"] == 0, f"{unchanged['opened']} opened"),
            ("import / re-sync >= 20", unchanged["ratio"] >= 20, f"{unchanged['ratio']:.1f}"),
            ("grown sync / API append (one call) <= 2", grown["ratio_api"] <= 2, f"{grown['ratio_api']:.2f}"),
            ("re-import / grown sync >= 50", grown["ratio_reimport"] >= 50, f"{grown['ratio_reimport']:.1f}"),
            ("grown sync reads only new bytes + 4 KiB", grown["bytes_read"] <= grown["bytes_grown"] + 4096,
             f"{grown['bytes_read']:,}"),
        ]
        print(f"  [  info] grown sync / API append (one by one): {grown['ratio_api_single']:.2f}")
        for name, ok, value in checks:
            print(f"  [{'    OK' if ok else 'MISSED'}] {name}: {value}")
        return 0 if all(ok for _, ok, _ in checks) else 1
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
