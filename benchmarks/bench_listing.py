"""Listing cost of SqliteStore does not grow with transcript length (``spec:stores``: listing
reads the per-session metadata, never a transcript).

Builds two SQLite stores side by side with the same number of sessions, one
with long transcripts (default 1,000 entries each) and one with short ones
(default 10), then times ``list_sessions()`` on each: several interleaved
repetitions, medians reported. Listing reads only the ``sessions`` table, so
the ratio big/small should stay close to 1 (target: <= 1.5).

Usage::

    python benchmarks/bench_listing.py                 # 10,000 sessions (a few minutes, several GB)
    python benchmarks/bench_listing.py --sessions 500  # quick check
    python benchmarks/bench_listing.py --dir /tmp/bench --keep

Sessions are written through the store's own API (``create_many``, a batch
of sessions per transaction), so the metadata columns are exactly what real
appends produce. Transcripts mix user, assistant (text, thinking, tool
calls) and tool-result messages with a name and a summary, like real ones.
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
from sessiontree.stores.sqlite.store import SqliteStore

BASE_MS = 1_769_936_400_000  # 2026-02-01T09:00:00Z


def _iso(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


def _entry(index: int, parent: str | None) -> dict[str, Any]:
    """One realistic entry; the kind cycles user -> assistant(tool call) -> tool result -> assistant."""
    entry_id = f"{index:08x}"
    stamp = BASE_MS + index * 1000
    base = {"type": "message", "id": entry_id, "parentId": parent, "timestamp": _iso(stamp)}
    kind = index % 4
    if kind == 0:
        message: dict[str, Any] = {
            "role": "user",
            "content": f"Step {index}: please look at src/module_{index % 17}.py and fix the failing test "
                       "in tests/test_module.py; keep the public API unchanged.",
            "timestamp": stamp}
    elif kind == 1:
        message = {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "The test fails because the parser drops the last line."},
                        {"type": "text", "text": "Let me read the file first."},
                        {"type": "toolCall", "id": f"call_{index}", "name": "read",
                         "arguments": {"path": f"src/module_{index % 17}.py", "offset": 1, "limit": 200}}],
            "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
            "usage": {"input": 1200, "output": 85, "cacheRead": 30000, "cacheWrite": 0, "totalTokens": 31285,
                      "cost": {"input": 0.0036, "output": 0.0013, "cacheRead": 0.009, "cacheWrite": 0,
                               "total": 0.0139}},
            "stopReason": "toolUse", "timestamp": stamp}
    elif kind == 2:
        message = {
            "role": "toolResult", "toolCallId": f"call_{index - 1}", "toolName": "read",
            "content": [{"type": "text", "text": "def parse(lines):\n    out = []\n    for line in lines[:-1]:\n"
                                                 "        out.append(line.strip())\n    return out\n" * 3}],
            "isError": False, "timestamp": stamp}
    else:
        message = {
            "role": "assistant",
            "content": [{"type": "text", "text": "Fixed: the loop now includes the last line. Tests pass."}],
            "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
            "usage": {"input": 1500, "output": 40, "cacheRead": 31000, "cacheWrite": 0, "totalTokens": 32540,
                      "cost": {"input": 0.0045, "output": 0.0006, "cacheRead": 0.0093, "cacheWrite": 0,
                               "total": 0.0144}},
            "stopReason": "stop", "timestamp": stamp}
    base["message"] = message
    return base


def build_template(count: int) -> tuple[list[dict[str, Any]], list[bytes | None]]:
    """``count`` entries in one chain, ending with a name and a fresh summary."""
    entries: list[dict[str, Any]] = []
    parent: str | None = None
    body = max(count - 2, 1)
    for index in range(body):
        entry = _entry(index, parent)
        entries.append(entry)
        parent = entry["id"]
    last_message = parent
    if count >= 3:
        entries.append({"type": "session_info", "id": "name0001", "parentId": parent,
                        "timestamp": _iso(BASE_MS + count * 1000), "name": "Fix the parser"})
        entries.append({"type": "session_summary", "id": "summ0001", "parentId": "name0001",
                        "timestamp": _iso(BASE_MS + count * 1000 + 1),
                        "summary": "Fixed the parser dropping the last line", "summarizedThroughId": last_message})
    entries = entries[:count]
    return entries, [jsonio.dumps(entry) for entry in entries]


def build_store(path: str, sessions: int, entries_per_session: int, batch: int) -> float:
    """Create ``sessions`` sessions of ``entries_per_session`` entries; return seconds taken."""
    template, raw = build_template(entries_per_session)
    store = SqliteStore(path)
    started = time.perf_counter()
    pending = []
    for number in range(sessions):
        header = {"type": "session", "version": 4, "id": f"bench-{number:06d}",
                  "createdAt": _iso(BASE_MS - number * 60_000), "cwd": f"/work/project-{number % 25}"}
        pending.append((header, template, raw))
        if len(pending) == batch:
            store.create_many(pending)
            pending = []
    if pending:
        store.create_many(pending)
    store.close()
    return time.perf_counter() - started


def time_listing(path: str) -> tuple[float, int]:
    store = SqliteStore(path)
    try:
        started = time.perf_counter()
        rows = store.list_sessions()
        elapsed = time.perf_counter() - started
    finally:
        store.close()
    return elapsed, len(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000, help="sessions per store (default 10000)")
    parser.add_argument("--big", type=int, default=1_000, help="entries per session in the big store")
    parser.add_argument("--small", type=int, default=10, help="entries per session in the small store")
    parser.add_argument("--repeat", type=int, default=9, help="timed listings per store (interleaved)")
    parser.add_argument("--batch", type=int, default=20, help="sessions per create_many transaction")
    parser.add_argument("--dir", help="where to build the databases (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the databases afterwards")
    args = parser.parse_args(argv)

    directory = args.dir or tempfile.mkdtemp(prefix="bench-listing-")
    os.makedirs(directory, exist_ok=True)
    big_path = os.path.join(directory, f"big-{args.sessions}x{args.big}.db")
    small_path = os.path.join(directory, f"small-{args.sessions}x{args.small}.db")
    try:
        for path, per in ((small_path, args.small), (big_path, args.big)):
            if os.path.exists(path):
                print(f"reusing {path}")
                continue
            seconds = build_store(path, args.sessions, per, args.batch)
            size = os.path.getsize(path) / 1e6
            print(f"built {args.sessions:,} sessions x {per:,} entries in {seconds:.1f} s ({size:,.0f} MB)")

        # One untimed listing each first, so both are measured with a warm page cache.
        for path in (small_path, big_path):
            _, count = time_listing(path)
            assert count == args.sessions, (path, count)
        small_times: list[float] = []
        big_times: list[float] = []
        for repetition in range(args.repeat):
            # Alternate which store goes first so drift affects both alike.
            order = ((small_path, small_times), (big_path, big_times))
            for path, times in (order if repetition % 2 == 0 else order[::-1]):
                times.append(time_listing(path)[0])
        small = statistics.median(small_times)
        big = statistics.median(big_times)
        print(f"list_sessions() over {args.sessions:,} sessions, median of {args.repeat}:")
        print(f"  {args.small:>6,} entries/session: {small * 1000:8.1f} ms")
        print(f"  {args.big:>6,} entries/session: {big * 1000:8.1f} ms")
        ratio = big / small
        print(f"  ratio big/small: {ratio:.2f} (target <= 1.5) {'OK' if ratio <= 1.5 else 'OVER TARGET'}")
        return 0 if ratio <= 1.5 else 1
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
