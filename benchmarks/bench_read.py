"""Reading a real session file, against the physical limit (``spec:quality``).

Measures ``read_session_file`` (read, validate, upgrade format 1 -> 4 in
memory) on ``pi-mono-before-compaction.jsonl`` (2.4 MB, 1,003 lines) and, as
the limit, "read the bytes + ``orjson.loads`` of every line". The two are run
interleaved (limit, candidate, limit, candidate, ...) so that drift in machine
load hits both alike; medians are reported with their ratio. Target: < 2.0.

Run: ``.venv/bin/python benchmarks/bench_read.py [--repeat N] [FILE]``
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

import orjson

from sessiontree.format.codec import read_session_file

DEFAULT = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus" / "pi-v1" / "pi-mono-before-compaction.jsonl"
TARGET = 2.0


def limit(path: Path) -> int:
    """The floor: read the bytes and parse every non-empty line with orjson."""
    with open(path, "rb") as handle:
        data = handle.read()
    count = 0
    for line in data.split(b"\n"):
        if line:
            orjson.loads(line)
            count += 1
    return count


def candidate(path: Path) -> int:
    parsed = read_session_file(path)
    return len(parsed.entries) + 1


def timed(func, path: Path) -> float:
    start = time.perf_counter()
    func(path)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--repeat", type=int, default=60, help="interleaved rounds (default 60)")
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args(argv)
    path = args.file.resolve()
    if not path.is_file():
        print(f"missing input file: {path}", file=sys.stderr)
        return 1

    records_limit, records_read = limit(path), candidate(path)
    if records_limit != records_read:
        print(f"record count differs: limit {records_limit}, read_session_file {records_read}", file=sys.stderr)
        return 1
    for _ in range(args.warmup):
        limit(path)
        candidate(path)

    base: list[float] = []
    ours: list[float] = []
    gc_was_enabled = gc.isenabled()
    for _ in range(args.repeat):
        gc.collect()
        base.append(timed(limit, path))
        gc.collect()
        ours.append(timed(candidate, path))
    if gc_was_enabled:
        gc.enable()

    size_mb = path.stat().st_size / 1e6
    base_ms = statistics.median(base) * 1000
    ours_ms = statistics.median(ours) * 1000
    ratio = ours_ms / base_ms
    print(f"file: {path.name} ({size_mb:.2f} MB, {records_read} records), {args.repeat} interleaved rounds")
    print(f"limit  (read + orjson.loads per line): median {base_ms:8.2f} ms  (min {min(base) * 1000:.2f})")
    print(f"read_session_file                    : median {ours_ms:8.2f} ms  (min {min(ours) * 1000:.2f})")
    print(f"ratio: {ratio:.2f}  (target < {TARGET})  {'OK' if ratio < TARGET else 'OVER TARGET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
