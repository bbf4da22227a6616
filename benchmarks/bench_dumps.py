"""What JavaScript-exact serialisation costs (docs/format-bytes.md).

Focused timings of the paths that call :func:`sessiontree.format.jsonio.dumps`, on the
real corpus (``../shared/corpus/pi-v1``, format 1: assistant usage costs are
small floats such as ``0.000009``):

All figures are the best of several rounds (the machine may be shared).

* ``dumps``: every upgraded corpus entry serialised once;
  also plain ``orjson.dumps`` of the same values as the floor.
* ``upgrade``: ``read_session_file(path).to_bytes()`` of each corpus file
  (parse, migrate 1 -> 4, serialise every entry).
* ``load``: ``read_session_file`` alone (no serialisation of entries).
* ``append``: ``append_message`` of 10,000 corpus messages into a new session,
  ``JsonlStore(fsync=False)`` and ``SqliteStore(synchronous="normal")`` (the
  no-fsync variants, so the serialiser is not hidden behind disk flushes).

Run: ``.venv/bin/python benchmarks/bench_dumps.py [--rounds N] [--appends N]``
"""

from __future__ import annotations

import argparse
import gc
import itertools
import shutil
import sys
import tempfile
import time
from pathlib import Path

import orjson

from sessiontree.format import jsonio
from sessiontree.format.codec import read_session_file
from sessiontree.session.manager import SessionManager
from sessiontree.stores.jsonl.store import JsonlStore
from sessiontree.stores.sqlite.store import SqliteStore

CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus" / "pi-v1"


def _best_ms(func, rounds: int) -> float:
    """Best of ``rounds`` timings, in ms: on a shared machine the minimum is the
    least disturbed estimate of the cost itself."""
    times = []
    for _ in range(rounds):
        gc.collect()
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--appends", type=int, default=10_000)
    args = parser.parse_args(argv)
    files = sorted(CORPUS.glob("*.jsonl"))
    if not files:
        print(f"missing corpus: {CORPUS}", file=sys.stderr)
        return 1
    entries = [e for f in files for e in read_session_file(f).entries]
    messages = [e["message"] for e in entries if e["type"] == "message"]
    size = sum(len(jsonio.dumps(e)) for e in entries)
    print(f"corpus: {len(files)} files, {len(entries)} entries, {size / 1e6:.2f} MB serialised")

    floor = _best_ms(lambda: [orjson.dumps(e) for e in entries], args.rounds)
    ours = _best_ms(lambda: [jsonio.dumps(e) for e in entries], args.rounds)
    print(f"dumps   all entries: jsonio.dumps {ours:8.2f} ms ({ours * 1000 / len(entries):.2f} us/entry); "
          f"orjson.dumps {floor:.2f} ms")
    for f in files:
        load = _best_ms(lambda f=f: read_session_file(f), args.rounds)
        upgrade = _best_ms(lambda f=f: read_session_file(f).to_bytes(), args.rounds)
        print(f"load    {f.name}: {load:8.2f} ms; upgrade (load + to_bytes) {upgrade:8.2f} ms")

    stream = list(itertools.islice(itertools.cycle(messages), args.appends))
    for name, make in (("jsonl (fsync=False)", lambda d: JsonlStore(d, fsync=False)),
                       ("sqlite (synchronous=normal)", lambda d: SqliteStore(f"{d}/s.db", synchronous="normal"))):
        times = []
        for _ in range(3):
            tmp = tempfile.mkdtemp()
            try:
                store = make(tmp)
                manager = SessionManager.create("/home/dev/work/project", store=store)
                start = time.perf_counter()
                for message in stream:
                    manager.append_message(message)
                times.append(time.perf_counter() - start)
                if hasattr(store, "close"):
                    store.close()
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        best = min(times)
        print(f"append  {args.appends} x {name}: {best:8.3f} s ({best * 1e6 / args.appends:.1f} us/append)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
