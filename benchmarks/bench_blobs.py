"""A session made of inline images: store it, open it and build its context, export it.

Generates (once, cached) a pi format-3 session file of about ``--size-gb`` GB whose
turns carry screenshots as base64 image blocks (a user paste and a ``read`` tool
result per turn, distinct random bytes; every tenth turn pastes the same logo
again), then measures, each step in its own process (wall and CPU seconds, peak
RSS ``VmHWM``):

* **store**: the file streamed into a new SQLite store, header then appends of
  64 records with their exact line bytes (``import`` reads a file whole, 4-6x
  its size in memory: docs/stores.md "Large files");
* **open + context**: ``SessionManager.open`` then ``build_session_context`` on
  ``SqliteStore(..., blob_refs=True)`` (image data as references), and with
  ``--inline-open`` the default store too (image data read whole);
* **export**: ``read_texts`` written as JSONL, a SHA-256 of the entry lines
  compared with the source file's (the header differs on purpose: format 4);
* **pi**: the original agent's ``SessionManager.open`` + ``buildSessionContext``
  of the same file (``node/driver.mjs`` op ``resume``), with its heap limit;
* ``--before SRC``: the same store / open steps with another source tree (the
  code before blobs: every record inline).

Data goes under ``benchmarks/.work/blobs`` (git-ignored); ``--clean`` removes it
afterwards. Results: benchmarks/README.md, "Current numbers: large payloads out
of line".

    python benchmarks/bench_blobs.py --size-gb 2.6 --before /tmp/base-blobs/src --clean
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
WORK = HERE / ".work" / "blobs"
SESSION_ID = "0b10b5e5-0000-4000-8000-00000000b10b"


def _status(field: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


# -- the session file ------------------------------------------------------------------------------


def generate(path: Path, size_bytes: int, seed: int = 7) -> dict[str, int]:
    """Write the pi format-3 session; returns its counts."""
    rng = random.Random(seed)
    logo = base64.b64encode(rng.randbytes(96 * 1024)).decode()
    counts = {"turns": 0, "entries": 0, "images": 0, "bytes": 0}
    stamp = 1767225600000
    parent = None
    serial = 0

    def entry_id() -> str:
        nonlocal serial
        serial += 1
        return f"{serial:08x}"

    with open(path, "w", encoding="utf-8") as out:
        def write(record: dict[str, Any]) -> None:
            line = json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n"
            out.write(line)
            counts["bytes"] += len(line)

        write({"type": "session", "version": 3, "id": SESSION_ID, "timestamp": "2026-01-01T00:00:00.000Z",
               "cwd": "/home/dev/work/project"})
        usage = {"input": 1500, "output": 60, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1560,
                 "cost": {"input": 0.0045, "output": 0.0009, "cacheRead": 0, "cacheWrite": 0, "total": 0.0054}}
        common = {"api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5", "usage": usage}
        while counts["bytes"] < size_bytes:
            turn = counts["turns"]
            paste = logo if turn % 10 == 9 else base64.b64encode(rng.randbytes(rng.randint(600, 900) * 1024)).decode()
            shot = base64.b64encode(rng.randbytes(rng.randint(400, 700) * 1024)).decode()
            call = f"toolu_{turn:06d}"
            messages = [
                {"role": "user", "content": [{"type": "text", "text": f"Turn {turn}: the page looks wrong here."},
                                             {"type": "image", "data": paste, "mimeType": "image/png"}],
                 "timestamp": stamp},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Let me take a screenshot of the current state."},
                    {"type": "toolCall", "id": call, "name": "read", "arguments": {"path": f"shots/{turn}.png"}}],
                 "stopReason": "toolUse", "timestamp": stamp + 1, **common},
                {"role": "toolResult", "toolCallId": call, "toolName": "read",
                 "content": [{"type": "text", "text": f"Read image file [image/png] shots/{turn}.png"},
                             {"type": "image", "data": shot, "mimeType": "image/png"}],
                 "isError": False, "timestamp": stamp + 2},
                {"role": "assistant", "content": [{"type": "text", "text": f"The header overlaps the menu (turn {turn})."}],
                 "stopReason": "stop", "timestamp": stamp + 3, **common},
            ]
            for offset, message in enumerate(messages):
                own = entry_id()
                write({"type": "message", "id": own, "parentId": parent,
                       "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((stamp + offset) / 1000)) + ".000Z",
                       "message": message})
                parent = own
                counts["entries"] += 1
            counts["images"] += 2
            counts["turns"] += 1
            stamp += 60_000
    return counts


# -- the measured steps (run in a child process) --------------------------------------------------


def child_store(source: str, db: str) -> dict[str, Any]:
    from sessiontree.format import jsonio
    from sessiontree.format.upgrade import upgrade_header
    from sessiontree.stores.sqlite.store import SqliteStore

    store = SqliteStore(db)
    with open(source, "rb") as handle:
        header = upgrade_header(jsonio.loads(handle.readline()))
        store.create(header)
        batch: list[dict[str, Any]] = []
        raw: list[bytes] = []
        for line in handle:
            text = line.rstrip(b"\n")
            batch.append(jsonio.loads(text))
            raw.append(text)
            if len(batch) == 64:
                store.append(header["id"], batch, raw)
                batch, raw = [], []
        if batch:
            store.append(header["id"], batch, raw)
    conn = store._connection()
    has_blobs = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'blobs'").fetchone() is not None
    blob_rows = conn.execute("SELECT count(*), coalesce(sum(size), 0) FROM blobs").fetchone() if has_blobs else (0, 0)
    refs = conn.execute("SELECT count(*) FROM entry_blobs").fetchone()[0] if has_blobs else 0
    store.close()
    return {"blobs": blob_rows[0], "blob_bytes": blob_rows[1], "refs": refs, "db_bytes": os.path.getsize(db)}


def child_open(db: str, refs: bool) -> dict[str, Any]:
    from sessiontree.session.manager import SessionManager
    from sessiontree.stores.sqlite.store import SqliteStore

    store = SqliteStore(db, blob_refs=True) if refs else SqliteStore(db)
    manager = SessionManager.open(store, SESSION_ID)
    context = manager.build_session_context()
    return {"messages": len(context.messages)}


def child_export(db: str, out: str) -> dict[str, Any]:
    from sessiontree.stores.sqlite.store import SqliteStore

    store = SqliteStore(db, readonly=True)
    texts = store.read_texts(SESSION_ID)
    digest = hashlib.sha256()
    with open(out, "wb") as handle:
        for text in texts.texts:
            handle.write(text + b"\n")
            digest.update(text + b"\n")
    return {"entries_sha256": digest.hexdigest(), "entries": len(texts.texts)}


def child_main(op: str, args: list[str]) -> None:
    rss0 = _status("VmRSS")
    wall, cpu = time.perf_counter(), time.process_time()
    if op == "store":
        result = child_store(*args)
    elif op == "open":
        result = child_open(args[0], args[1] == "refs")
    else:
        result = child_export(*args)
    result.update(wall=time.perf_counter() - wall, cpu=time.process_time() - cpu, rss0=rss0,
                  hwm=_status("VmHWM"))
    print(json.dumps(result))


def run_child(src: Path, op: str, *args: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", op, *args], env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def run_pi(source: Path) -> dict[str, Any]:
    reference = HERE / ".work" / "reference"
    modules = sorted(reference.glob("*/node_modules/@earendil-works/pi-coding-agent/dist/core/session-manager.js"))
    if not modules:
        return {"error": "the reference package is not installed (benchmarks/run.py installs it)"}
    limit = subprocess.run(["node", "-e", "console.log(require('v8').getHeapStatistics().heap_size_limit)"],
                           capture_output=True, text=True).stdout.strip()
    tmp = WORK / "pi-tmp"
    tmp.mkdir(exist_ok=True)
    command = {"op": "resume", "module": str(modules[-1]), "file": str(source), "tmp": str(tmp),
               "warmup": 0, "iters": 1, "first_timed": True}
    start = time.perf_counter()
    proc = subprocess.Popen(["node", "--expose-gc", str(HERE / "node" / "driver.mjs"), json.dumps(command)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    shutil.rmtree(tmp, ignore_errors=True)
    heap = f"heap limit {int(limit) / 2**20:.0f} MiB" if limit.isdigit() else "heap limit unknown"
    if proc.returncode != 0:
        lines = [line for line in err.strip().splitlines() if line.strip()]
        reason = next((line for line in lines if "heap" in line.lower() or "memory" in line.lower()
                       or "RangeError" in line or "string longer" in line), lines[-1] if lines else "")
        return {"error": reason.strip()[:200], "exit": proc.returncode, "wall": wall, "heap": heap}
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result.update(wall=wall, heap=heap)
    return result


def entries_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        handle.readline()
        for line in handle:
            digest.update(line)
    return digest.hexdigest()


def _fmt(result: dict[str, Any]) -> str:
    if "error" in result:
        return f"FAILED: {result['error']}"
    return (f"{result['wall']:.2f} s wall, {result['cpu']:.2f} s CPU, peak RSS {result['hwm'] / 2**20:.0f} MiB"
            f" (at start {result['rss0'] / 2**20:.0f} MiB)")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        child_main(argv[1], argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gb", type=float, default=2.6)
    parser.add_argument("--before", help="a source tree (its src directory) to measure as 'before'")
    parser.add_argument("--inline-open", action="store_true", help="also open with image data read whole")
    parser.add_argument("--no-pi", action="store_true")
    parser.add_argument("--clean", action="store_true", help="remove the data afterwards")
    args = parser.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    size = int(args.size_gb * 1e9)
    source = WORK / f"images-{args.size_gb:g}gb.jsonl"
    if not source.exists() or source.stat().st_size < size:
        start = time.perf_counter()
        counts = generate(source.with_suffix(".tmp"), size)
        source.with_suffix(".tmp").rename(source)
        print(f"generated {source.name}: {counts} in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    print(f"session file: {source.stat().st_size / 1e9:.2f} GB ({source.stat().st_size} bytes); "
          f"load {os.getloadavg()[0]:.1f}")
    sides = [("after", SRC)] + ([("before", Path(args.before))] if args.before else [])
    want = entries_sha256(source)
    for name, src in sides:
        db = WORK / f"{name}.db"
        for suffix in ("", "-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
        stored = run_child(src, "store", str(source), str(db))
        print(f"[{name}] store (streamed appends): {_fmt(stored)}; db {stored.get('db_bytes', 0) / 1e9:.2f} GB,"
              f" {stored.get('blobs')} blobs ({stored.get('blob_bytes', 0) / 1e9:.2f} GB) for"
              f" {stored.get('refs')} image strings; load {os.getloadavg()[0]:.1f}")
        modes = ([("refs", "refs")] if name == "after" else []) + (
            [("inline", "inline")] if args.inline_open or name == "before" else [])
        for label, mode in modes:
            for _ in range(2):  # the second run is the one a user resuming later sees (warm page cache)
                opened = run_child(src, "open", str(db), mode)
            print(f"[{name}] open + context ({label}): {_fmt(opened)}; {opened.get('messages')} messages;"
                  f" load {os.getloadavg()[0]:.1f}")
        if name == "after":
            out = WORK / "export.jsonl"
            exported = run_child(src, "export", str(db), str(out))
            same = exported.get("entries_sha256") == want
            print(f"[{name}] export (read_texts): {_fmt(exported)}; entry lines byte for byte: {same}")
            out.unlink(missing_ok=True)
    if not args.no_pi:
        pi = run_pi(source)
        if "error" in pi:
            print(f"[pi 1.6.0] open + buildSessionContext: FAILED after {pi['wall']:.1f} s ({pi['heap']}):"
                  f" {pi['error']}")
        else:
            print(f"[pi 1.6.0] open + buildSessionContext: {pi['times'][0]:.2f} s, peak RSS"
                  f" {pi['hwm'] / 2**20:.0f} MiB ({pi['heap']})")
    if args.clean:
        shutil.rmtree(WORK, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
