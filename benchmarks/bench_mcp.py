"""``sessiontree mcp`` latency over stdio, as an agent sees it (docs/mcp.md).

Starts ``python -m sessiontree --store DB mcp`` as a subprocess and drives it
with the MCP SDK's own client:

* start: from spawning the process to the answer of the first ``tools/list``
  (process start, imports, store open, the protocol handshake), median of ``--starts``;
* ``search_sessions`` with ``limit`` 20 for the corpus needle, server warm
  (one untimed call first), p50 and p99 of ``--calls`` calls;
* ``get_context`` first page (default budget) of the largest session of
  ``--big-db`` (default: ``--db``): the first call (cold: the session is
  read and projected) and the p50 of ``--calls // 10`` warm calls.

Prints one JSON object with the samples' summaries and the machine's load
average before and after.

    PYTHONPATH=src python benchmarks/bench_mcp.py --db CORPUS.db [--big-db BIG.db] [--calls 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

NEEDLE = "flaky-retry-backoff"


def _params(db: str) -> StdioServerParameters:
    env = dict(os.environ)
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return StdioServerParameters(command=sys.executable, args=["-m", "sessiontree", "--store", db, "mcp"], env=env)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def _start(db: str) -> float:
    began = time.perf_counter()
    async with Client(_params(db)) as client:
        await client.list_tools()
        return time.perf_counter() - began


async def _search(db: str, calls: int) -> list[float]:
    async with Client(_params(db)) as client:
        first = await client.call_tool("search_sessions", {"query": NEEDLE, "limit": 20})
        assert not first.is_error, first.content
        samples = []
        for _ in range(calls):
            began = time.perf_counter()
            result = await client.call_tool("search_sessions", {"query": NEEDLE, "limit": 20})
            samples.append(time.perf_counter() - began)
            assert not result.is_error
        return samples


async def _context(db: str, calls: int) -> dict[str, Any]:
    async with Client(_params(db)) as client:
        listed = await client.call_tool("list_sessions", {"limit": 500, "max_chars": 1_000_000})
        sessions = listed.structured_content["sessions"]
        big = max(sessions, key=lambda s: s.get("entryCount") or 0)
        began = time.perf_counter()
        first = await client.call_tool("get_context", {"session_id": big["id"]})
        cold = time.perf_counter() - began
        assert not first.is_error, first.content
        warm = []
        for _ in range(max(calls, 3)):
            began = time.perf_counter()
            await client.call_tool("get_context", {"session_id": big["id"]})
            warm.append(time.perf_counter() - began)
        return {"session": big["id"], "entries": big.get("entryCount"),
                "messages": first.structured_content["messageCount"],
                "firstPageMessages": first.structured_content["returned"],
                "coldMs": _ms(cold), "warmP50Ms": _ms(statistics.median(warm))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="a store holding the search corpus")
    parser.add_argument("--big-db", help="a store holding a large session (default: --db)")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--starts", type=int, default=5)
    args = parser.parse_args()
    load_before = os.getloadavg()
    starts = [anyio.run(_start, args.db) for _ in range(args.starts)]
    search = anyio.run(_search, args.db, args.calls)
    context = anyio.run(_context, args.big_db or args.db, args.calls // 10)
    print(json.dumps({
        "cpus": os.cpu_count(),
        "loadBefore": [round(x, 2) for x in load_before],
        "loadAfter": [round(x, 2) for x in os.getloadavg()],
        "startToFirstAnswerMedianMs": _ms(statistics.median(starts)),
        "startSamplesMs": [_ms(s) for s in starts],
        "searchLimit20": {"calls": len(search), "p50Ms": _ms(_pct(search, 50)), "p99Ms": _ms(_pct(search, 99)),
                          "maxMs": _ms(max(search))},
        "getContextFirstPage": context,
    }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
