"""First sync of Claude Code sessions against reading and parsing the same files, and the
re-sync of the unchanged files (docs/agents/README.md).

N Claude Code project logs (default 1,000, each a conversation of ``--turns`` tool
round trips: user prompt, assistant thinking + tool call as two records of one API
call, tool result, assistant answer; about 5 records a turn) in the agent's layout
(``<home>/.claude/projects/<encoded cwd>/<session id>.jsonl``, 20 projects) are:

1. **limit**: read and parsed with ``orjson`` (every line), what any reader of the
   files must do at least;
2. **mapping**: read, parsed and mapped to format-4 entries with their byte-exact
   serialization (:func:`~sessiontree.format.foreign.map_claude`), no store;
3. **first sync, memory**: ``Syncer.sync_files`` into a ``MemoryStore``;
4. **first sync, SQLite**: into a new SQLite store (one durable transaction per file,
   usage ledger, search index settled at the end), target <= 3x the limit;
5. **pi baseline**: the same sessions written as pi files (the mapped entries without
   their ``foreign`` objects), first sync into a new SQLite store: what the store's
   writes cost for this content whatever the agent;
6. **re-sync**: the Claude Code files again, unchanged: must open none.

Repetitions are interleaved; medians are printed. Usage::

    python benchmarks/bench_foreign.py                  # 1,000 sessions, 10 turns
    python benchmarks/bench_foreign.py --files 200 --reps 1
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from typing import Any

import orjson

from sessiontree.format import jsonio
from sessiontree.format.foreign import map_claude
from sessiontree.stores.memory import MemoryStore
from sessiontree.stores.sqlite.store import SqliteStore
from sessiontree.sync import engine as sync_module
from sessiontree.sync.engine import Syncer, discover


def _session(n: int, turns: int) -> bytes:
    sid = f"5e55{n:04x}-0000-4000-8000-{n:012x}"
    cwd = f"/home/me/project{n % 20}"
    base: dict[str, Any] = {"isSidechain": False, "userType": "external", "cwd": cwd, "sessionId": sid,
                            "version": "1.0.80", "gitBranch": "main"}
    out: list[dict[str, Any]] = [{"type": "summary", "summary": f"Session {n}", "leafUuid": f"{n}-a-{turns - 1}"}]
    parent = None
    second = n * 100  # every session at its own times: their calls are distinct calls

    def rec(kind: str, uuid: str, message: dict[str, Any], **extra: Any) -> None:
        nonlocal parent, second
        second += 1
        out.append({"parentUuid": parent, **base, "type": kind, "message": message, "uuid": uuid,
                    "timestamp": f"2026-03-{2 + second // 86400:02d}T{(second // 3600) % 24:02d}:"
                                 f"{(second // 60) % 60:02d}:{second % 60:02d}.000Z",
                    **extra})
        parent = uuid

    text = "lorem ipsum dolor sit amet " * 8
    for t in range(turns):
        usage = {"input_tokens": 10 + t, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 2000 + t,
                 "output_tokens": 50, "service_tier": "standard"}
        rec("user", f"{n}-u-{t}", {"role": "user", "content": f"turn {t}: {text}"})
        call = {"id": f"msg_{n}_{t}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                "stop_reason": None, "stop_sequence": None, "usage": usage}
        rec("assistant", f"{n}-t-{t}", {**call, "content": [{"type": "thinking", "thinking": text,
                                                             "signature": "x" * 40}]}, requestId=f"req_{n}_{t}")
        rec("assistant", f"{n}-c-{t}", {**call, "stop_reason": "tool_use", "content": [
            {"type": "tool_use", "id": f"toolu_{n}_{t}", "name": "Bash", "input": {"command": f"ls {t}"}}]},
            requestId=f"req_{n}_{t}")
        rec("user", f"{n}-r-{t}", {"role": "user", "content": [
            {"tool_use_id": f"toolu_{n}_{t}", "type": "tool_result", "content": text, "is_error": False}]},
            toolUseResult={"stdout": text, "stderr": "", "interrupted": False})
        rec("assistant", f"{n}-a-{t}", {**call, "id": f"msg_{n}_{t}b", "stop_reason": "end_turn",
                                        "content": [{"type": "text", "text": text}]}, requestId=f"req_{n}_{t}b")
    return b"".join(orjson.dumps(r) + b"\n" for r in out)


def _write(root: str, files: int, turns: int) -> list[str]:
    paths = []
    for n in range(files):
        folder = os.path.join(root, f"-home-me-project{n % 20}")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"5e55{n:04x}-0000-4000-8000-{n:012x}.jsonl")
        with open(path, "wb") as handle:
            handle.write(_session(n, turns))
        paths.append(path)
    return paths


def _limit(paths: list[str]) -> float:
    start = time.perf_counter()
    loads = orjson.loads
    for path in paths:
        with open(path, "rb") as handle:
            for line in handle.read().split(b"\n"):
                if line:
                    loads(line)
    return time.perf_counter() - start


def _mapping(paths: list[str]) -> float:
    start = time.perf_counter()
    for path in paths:
        with open(path, "rb") as handle:
            mapped = map_claude(handle.read(), path)
        mapped.parsed(path).to_bytes()
    return time.perf_counter() - start


def _write_pi(paths: list[str], root: str) -> None:
    """The mapped sessions as pi files (no ``foreign`` objects), one per Claude Code file."""
    os.makedirs(root, exist_ok=True)
    for path in paths:
        with open(path, "rb") as handle:
            mapped = map_claude(handle.read(), path)
        lines = [jsonio.dumps({k: v for k, v in mapped.header.items() if k != "foreign"})]
        lines += [jsonio.dumps({k: v for k, v in e.items() if k != "foreign"}) for e in mapped.entries]
        with open(os.path.join(root, f"2026-03-02T00-00-00-000Z_{mapped.header['id']}.jsonl"), "wb") as handle:
            handle.write(b"\n".join(lines) + b"\n")


def _memory_sync(root: str) -> float:
    store = MemoryStore()
    files, _ = discover([root])
    start = time.perf_counter()
    report = Syncer(store).sync_files(files)
    elapsed = time.perf_counter() - start
    assert report.counts()["new"] == len(files), report.summary()
    return elapsed


def _first_sync(root: str, work: str, name: str = "s.db") -> float:
    db = os.path.join(work, name)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    store = SqliteStore(db)
    try:
        files, _ = discover([root])
        start = time.perf_counter()
        report = Syncer(store).sync_files(files)
        elapsed = time.perf_counter() - start
        assert report.counts()["new"] == len(files), report.summary()
    finally:
        store.close()
    return elapsed


def _resync(root: str, work: str) -> tuple[float, int]:
    store = SqliteStore(os.path.join(work, "s.db"))
    try:
        files, _ = discover([root])
        opened = sync_module.opened_files()
        start = time.perf_counter()
        report = Syncer(store).sync_files(files)
        elapsed = time.perf_counter() - start
        assert report.counts()["unchanged"] == len(files), report.summary()
        return elapsed, sync_module.opened_files() - opened
    finally:
        store.close()


def main() -> None:
    """Run the benchmark and print the medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench-foreign-")
    try:
        root = os.path.join(work, "projects")
        paths = _write(root, args.files, args.turns)
        size = sum(os.path.getsize(p) for p in paths)
        print(f"{args.files} Claude Code sessions, {args.turns} turns each, {size / 1e6:.1f} MB")
        pi_root = os.path.join(work, "pi")
        _write_pi(paths, pi_root)
        limits, maps, mems, syncs, pis, resyncs, opened = [], [], [], [], [], [], []
        for _ in range(args.reps):
            limits.append(_limit(paths))
            maps.append(_mapping(paths))
            mems.append(_memory_sync(root))
            syncs.append(_first_sync(root, work))
            pis.append(_first_sync(pi_root, work, "pi.db"))
            elapsed, count = _resync(root, work)
            resyncs.append(elapsed)
            opened.append(count)
        limit, mapping, memory, sync, pi, resync = (statistics.median(v) for v in
                                                    (limits, maps, mems, syncs, pis, resyncs))
        print(f"limit (read + orjson parse): {limit * 1000:.1f} ms")
        print(f"mapping (read + parse + map + serialize): {mapping * 1000:.1f} ms  ratio {mapping / limit:.2f}")
        print(f"first sync, memory store: {memory * 1000:.1f} ms  ratio {memory / limit:.2f}")
        print(f"first sync, sqlite (durable): {sync * 1000:.1f} ms  ratio {sync / limit:.2f} (target <= 3)")
        print(f"pi baseline, same sessions as pi files, sqlite: {pi * 1000:.1f} ms  ratio {pi / limit:.2f}; "
              f"claude-code / pi {sync / pi:.2f}")
        print(f"re-sync unchanged: {resync * 1000:.1f} ms, files opened {max(opened)} (target 0)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
