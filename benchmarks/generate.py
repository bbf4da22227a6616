"""Deterministic generator of realistic coding-agent sessions (format 3 JSONL).

Both sides of the benchmarks read these files: the original agent writes and
reads format 3 natively, and sessiontree upgrades 3 -> 4 in memory. Nothing
here depends on either implementation; the shapes follow the seed's
"Session File Format" page and what real sessions in ``shared/corpus`` look
like (sizes calibrated on them: median message line ~0.7-1 KB, tool results
with a long tail up to hundreds of KB, a few images, thinking blocks).

What a generated session holds, in the order an agent writes it:

* a version-3 header (``timestamp``, ``cwd``);
* turns: a user message, then 0-6 tool rounds (assistant ``toolUse`` message
  with thinking + text + 1-2 tool calls, then one ``toolResult`` per call),
  then a closing assistant ``stop`` message; a few turns end ``aborted`` with
  an unanswered call;
* tool outputs drawn from a log-normal size distribution (median ~600 B,
  capped at 256 KB), some of them code, some logs; occasional ``bashExecution``
  messages;
* images (base64 PNG-like bytes, 20-160 KB) in a few user messages and tool
  results;
* model and thinking-level changes, labels, a session name, custom entries
  and custom messages now and then;
* branches: every ``branch_every`` entries the leaf moves back 5-30 entries
  along the active path and a ``branch_summary`` starts a new branch there,
  leaving the old entries as an abandoned side branch;
* verbatim-line compactions every ``compaction_every`` entries (``details``
  with ``strategy: "verbatim-lines"``, a kept tail of ~20 entries), unless
  disabled.

The number of entries (header excluded) is exactly ``entries``. The output
is a pure function of the arguments (seeded ``random.Random``).

Command line::

    python benchmarks/generate.py OUT.jsonl --entries 10000 [--seed 1] [--no-compactions]
    python benchmarks/generate.py --corpus DIR --sessions 1000 [--seed 1]
"""

from __future__ import annotations

import argparse
import base64
import math
import os
import random
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

__all__ = [
    "GENERATOR_VERSION",
    "NEEDLE",
    "SessionSpec",
    "corpus_spec",
    "generate_records",
    "write_corpus",
    "write_session",
]

#: Bump when the output changes, so cached files are rebuilt.
GENERATOR_VERSION = 3
BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
#: Planted in the user messages of every 7th corpus session, for the search benchmark.
NEEDLE = "flaky-retry-backoff"

_WORDS = [
    "the", "test", "fails", "because", "parser", "drops", "last", "line", "when", "input", "has",
    "trailing", "whitespace", "so", "we", "need", "to", "check", "module", "config", "loader", "cache",
    "request", "response", "handler", "retry", "timeout", "error", "value", "list", "map", "function",
    "class", "method", "return", "import", "build", "deploy", "branch", "commit", "diff", "patch",
    "review", "refactor", "rename", "variable", "type", "annotation", "schema", "migration", "database",
    "index", "query", "transaction", "lock", "file", "directory", "path", "encoding", "unicode",
    "bytes", "string", "number", "integer", "float", "boolean", "null", "undefined", "async", "await",
    "promise", "callback", "event", "stream", "buffer", "chunk", "line", "column", "offset", "range",
    "slice", "token", "session", "entry", "tree", "leaf", "parent", "child", "label", "summary",
    "compaction", "context", "model", "provider", "usage", "cost", "tool", "call", "result", "output",
    "exit", "code", "stderr", "stdout", "shell", "command", "workspace", "project", "package",
    "dependency",
]

_CODE_LINES = [
    "def parse(lines: list[str]) -> list[str]:",
    "    out = []",
    "    for index, line in enumerate(lines):",
    "        if not line.strip():",
    "            continue",
    "        out.append(line.rstrip())",
    "    return out",
    "class SessionLoader:",
    "    def __init__(self, path: str) -> None:",
    "        self.path = path",
    "        self._cache: dict[str, bytes] = {}",
    "export async function loadConfig(dir: string): Promise<Config> {",
    "  const text = await readFile(join(dir, 'config.json'), 'utf8');",
    "  return JSON.parse(text) as Config;",
    "}",
    "import { describe, it, expect } from 'vitest';",
    "  it('keeps the last line', () => {",
    "    expect(parse(['a', 'b'])).toEqual(['a', 'b']);",
    "  });",
    "fn main() -> Result<(), Box<dyn Error>> {",
    "    let args: Vec<String> = env::args().collect();",
    "    Ok(())",
    "SELECT id, name FROM sessions WHERE cwd = ? ORDER BY modified DESC;",
]

_LOG_LINES = [
    "PASS  tests/test_parser.py::test_trailing_whitespace (0.01s)",
    "FAIL  tests/test_parser.py::test_last_line - AssertionError: assert ['a'] == ['a', 'b']",
    "warning: unused variable `index` at src/parser.rs:42:13",
    "npm WARN deprecated glob@7.2.3: Glob versions prior to v9 are no longer supported",
    "[INFO] Building module core 2.14.0 ... done in 1.82s",
    "error[E0308]: mismatched types: expected `&str`, found `String`",
    "  File \"/work/project/src/loader.py\", line 88, in load",
    "    raise ValueError(f\"bad record at line {number}\")",
    "ValueError: bad record at line 1203",
    "Compiling sessiontree v0.1.0 (/work/project)",
    "   Finished dev [unoptimized + debuginfo] target(s) in 3.21s",
]

_TOOLS = ("read", "bash", "edit", "write", "grep", "find", "ls")
_MODELS = (("anthropic", "claude-sonnet-4-5", "anthropic-messages"),
           ("anthropic", "claude-opus-4-1", "anthropic-messages"),
           ("openai", "gpt-5", "openai-responses"))
_LEVELS = ("off", "minimal", "low", "medium", "high")


@dataclass(frozen=True)
class SessionSpec:
    """Parameters of one generated session.

    Attributes:
        entries: number of entries (header excluded).
        seed: random seed; the output is a pure function of the spec.
        session_id: header id (default: a UUID derived from the seed).
        cwd: header cwd.
        branch_every: entries between branch points (0: a single chain).
        compaction_every: entries between verbatim compactions (0: none).
        images: include images (user screenshots, tool-result images).
        big_outputs: allow tool outputs up to 256 KB (else capped at 8 KB).
        output_scale: multiplies tool-output sizes (corpus sessions use < 1).
        needle: a word planted in one user message of the session, if any.
        start_ms: time of the first entry (ms since the epoch).
    """

    entries: int
    seed: int = 1
    session_id: str | None = None
    cwd: str = "/home/dev/work/project"
    branch_every: int = 400
    compaction_every: int = 1500
    images: bool = True
    big_outputs: bool = True
    output_scale: float = 1.0
    needle: str | None = None
    start_ms: int = BASE_MS


def _iso(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


class _Pools:
    """Pre-built text pools (built once per variant and shared)."""

    _cache: ClassVar[dict[int, _Pools]] = {}

    def __init__(self, variant: int) -> None:
        rng = random.Random(f"sessiontree-bench-text:{variant}")
        self.prose = " ".join(rng.choice(_WORDS) for _ in range(40_000))
        self.code = "\n".join(rng.choice(_CODE_LINES) for _ in range(6_000))
        self.logs = "\n".join(rng.choice(_LOG_LINES) for _ in range(6_000))
        self.image_b64 = base64.b64encode(rng.randbytes(160_000)).decode("ascii")

    @classmethod
    def get(cls, variant: int) -> _Pools:
        pools = cls._cache.get(variant)
        if pools is None:
            pools = cls._cache[variant] = cls(variant)
        return pools


class _Text:
    """Cheap realistic text: slices of the shared pools at random offsets."""

    def __init__(self, rng: random.Random, pools: _Pools) -> None:
        self.rng = rng
        self.prose = pools.prose
        self.code = pools.code
        self.logs = pools.logs
        self.image_b64 = pools.image_b64

    def _slice(self, pool: str, size: int) -> str:
        size = max(1, size)
        if size >= len(pool):
            reps = size // len(pool) + 1
            return (pool * reps)[:size]
        start = self.rng.randrange(0, len(pool) - size)
        return pool[start:start + size]

    def prose_text(self, size: int) -> str:
        return self._slice(self.prose, size).strip() or "ok"

    def code_text(self, size: int) -> str:
        return self._slice(self.code, size)

    def log_text(self, size: int) -> str:
        return self._slice(self.logs, size)

    def image(self) -> dict[str, str]:
        size = self.rng.randrange(20_000, 160_000) // 4 * 4
        start = self.rng.randrange(0, len(self.image_b64) - size) // 4 * 4
        return {"type": "image", "data": self.image_b64[start:start + size], "mimeType": "image/png"}


def _usage(rng: random.Random, model: str) -> dict[str, Any]:
    cache_read = rng.randrange(5_000, 120_000)
    output = rng.randrange(20, 2_000)
    fresh = rng.randrange(50, 4_000)
    price_in, price_out = (3e-6, 15e-6) if "sonnet" in model else (15e-6, 75e-6) if "opus" in model else (1.25e-6, 10e-6)
    cost_in, cost_out, cost_cache = fresh * price_in, output * price_out, cache_read * price_in / 10
    return {"input": fresh, "output": output, "cacheRead": cache_read, "cacheWrite": 0,
            "totalTokens": fresh + output + cache_read,
            "cost": {"input": round(cost_in, 6), "output": round(cost_out, 6), "cacheRead": round(cost_cache, 6),
                     "cacheWrite": 0, "total": round(cost_in + cost_out + cost_cache, 6)}}


class _Builder:
    """Appends entries like an agent would: every entry is a child of the leaf."""

    def __init__(self, spec: SessionSpec) -> None:
        self.spec = spec
        self.rng = random.Random(f"sessiontree-bench:{spec.seed}")
        self.text = _Text(self.rng, _Pools.get(spec.seed % 4))
        self.entries: list[dict[str, Any]] = []
        self.path: list[str] = []  # ids of the active branch, root first
        self.ids: set[str] = set()
        self.clock = spec.start_ms
        self.model = _MODELS[0]
        self.calls = 0
        self.needle_planted = spec.needle is None
        self.since_branch = 0
        self.since_compaction = 0

    # -- basics ------------------------------------------------------------------------

    def _id(self) -> str:
        while True:
            candidate = f"{self.rng.getrandbits(32):08x}"
            if candidate not in self.ids:
                self.ids.add(candidate)
                return candidate

    def _tick(self, low: int = 300, high: int = 20_000) -> int:
        self.clock += self.rng.randrange(low, high)
        return self.clock

    def full(self) -> bool:
        return len(self.entries) >= self.spec.entries

    def add(self, entry_type: str, **fields: Any) -> str:
        entry_id = self._id()
        entry = {"type": entry_type, "id": entry_id, "parentId": self.path[-1] if self.path else None,
                 "timestamp": _iso(self.clock)}
        entry.update(fields)
        self.entries.append(entry)
        self.path.append(entry_id)
        self.since_branch += 1
        self.since_compaction += 1
        return entry_id

    def message(self, message: dict[str, Any]) -> str:
        message["timestamp"] = self.clock
        return self.add("message", message=message)

    # -- content -----------------------------------------------------------------------

    def _output_size(self) -> int:
        # Log-normal: median ~600 B, p90 ~4 KB; the tail reaches the cap.
        size = int(math.exp(self.rng.gauss(6.4, 1.5)) * self.spec.output_scale)
        cap = 256_000 if self.spec.big_outputs else 8_000
        return max(20, min(size, cap))

    def user(self) -> None:
        self._tick(5_000, 120_000)
        text = self.text.prose_text(self.rng.randrange(40, 600))
        if not self.needle_planted and self.rng.random() < 0.3:
            text = f"{text} ({self.spec.needle})"
            self.needle_planted = True
        if self.spec.images and self.rng.random() < 0.01:
            content: Any = [{"type": "text", "text": text}, self.text.image()]
        elif self.rng.random() < 0.5:
            content = text
        else:
            content = [{"type": "text", "text": text}]
        self.message({"role": "user", "content": content})

    def assistant(self, stop: str, calls: list[tuple[str, str, dict[str, Any]]]) -> None:
        self._tick(1_000, 40_000)
        provider, model, api = self.model
        content: list[dict[str, Any]] = []
        if self.rng.random() < 0.7:
            content.append({"type": "thinking", "thinking": self.text.prose_text(self.rng.randrange(80, 1_500)),
                            "thinkingSignature": self.text.log_text(64)})
        content.append({"type": "text", "text": self.text.prose_text(self.rng.randrange(20, 900))})
        for call_id, name, arguments in calls:
            content.append({"type": "toolCall", "id": call_id, "name": name, "arguments": arguments})
        self.message({"role": "assistant", "content": content, "api": api, "provider": provider, "model": model,
                      "usage": _usage(self.rng, model), "stopReason": stop})

    def _call(self) -> tuple[str, str, dict[str, Any]]:
        self.calls += 1
        name = self.rng.choice(_TOOLS)
        call_id = f"toolu_{self.spec.seed & 0xFFFF:04x}{self.calls:08d}"
        if name == "bash":
            arguments: dict[str, Any] = {"command": f"cd /work && python -m pytest -q tests/test_{self.calls % 37}.py"}
        elif name == "edit":
            arguments = {"path": f"src/module_{self.calls % 23}.py", "oldText": self.text.code_text(120),
                         "newText": self.text.code_text(140)}
        elif name == "write":
            arguments = {"path": f"src/new_{self.calls % 11}.py", "content": self.text.code_text(self.rng.randrange(200, 4_000))}
        else:
            arguments = {"path": f"src/module_{self.calls % 23}.py", "offset": 1, "limit": 400}
        return call_id, name, arguments

    def tool_result(self, call_id: str, name: str) -> None:
        self._tick(100, 30_000)
        size = self._output_size()
        body = self.text.code_text(size) if name in ("read", "grep", "find") else self.text.log_text(size)
        content: list[dict[str, Any]] = [{"type": "text", "text": body}]
        if self.spec.images and self.rng.random() < 0.004:
            content.append(self.text.image())
        message: dict[str, Any] = {"role": "toolResult", "toolCallId": call_id, "toolName": name,
                                   "content": content, "isError": self.rng.random() < 0.05}
        if name == "edit":
            message["details"] = {"diff": self.text.code_text(300)}
        self.message(message)

    # -- rare events ---------------------------------------------------------------------

    def maybe_event(self) -> None:
        roll = self.rng.random()
        if roll < 0.02:
            self.model = self.rng.choice(_MODELS)
            self.add("model_change", provider=self.model[0], modelId=self.model[1])
        elif roll < 0.05:
            self.add("thinking_level_change", thinkingLevel=self.rng.choice(_LEVELS))
        elif roll < 0.06 and len(self.path) > 3:
            self.add("label", targetId=self.path[-self.rng.randrange(1, min(len(self.path), 20))],
                     label=f"checkpoint-{len(self.entries)}")
        elif roll < 0.065:
            self.add("session_info", name=self.text.prose_text(self.rng.randrange(10, 60)))
        elif roll < 0.08:
            self.add("custom", customType="todo-state", data={"items": [self.text.prose_text(40) for _ in range(3)]})
        elif roll < 0.09:
            self.add("custom_message", customType="reminder", content=self.text.prose_text(200), display=False)
        elif roll < 0.10:
            self._tick()
            self.message({"role": "bashExecution", "command": "git status --short", "output": self.text.log_text(self._output_size()),
                          "exitCode": 0, "cancelled": False, "truncated": False})

    def maybe_branch(self) -> None:
        if not self.spec.branch_every or self.since_branch < self.spec.branch_every or len(self.path) < 40:
            return
        back = self.rng.randrange(5, 31)
        left = self.path[-1]
        del self.path[-back:]
        self._tick()
        self.add("branch_summary", fromId=left,
                 summary="Tried another approach first: " + self.text.prose_text(self.rng.randrange(200, 1_200)),
                 details={"readFiles": ["src/a.py", "src/b.py"], "modifiedFiles": ["src/a.py"]})
        self.since_branch = 0

    def maybe_compact(self) -> None:
        if not self.spec.compaction_every or self.since_compaction < self.spec.compaction_every or len(self.path) < 60:
            return
        # The kept tail starts at a user message ~20 entries back on the active path.
        by_id = {e["id"]: e for e in self.entries[-400:]}
        first_kept = None
        for entry_id in reversed(self.path[-40:-15]):
            entry = by_id.get(entry_id)
            if entry is not None and entry["type"] == "message" and entry["message"]["role"] == "user":
                first_kept = entry_id
                break
        if first_kept is None:
            first_kept = self.path[-20]
        self._tick()
        summary = "\n".join(f"[{role}]: {self.text.prose_text(self.rng.randrange(60, 400))}"
                            for role in ("User", "Assistant") * self.rng.randrange(8, 30))
        lines_before = self.rng.randrange(600, 3_000)
        kept = lines_before // 2
        self.add("compaction", summary=summary, firstKeptEntryId=first_kept,
                 tokensBefore=self.rng.randrange(60_000, 180_000),
                 details={"strategy": "verbatim-lines", "promptVersion": 3, "rung": "planned",
                          "parameters": {"compression_ratio": 0.5, "preserve_recent": 2, "query": "continue"},
                          "stats": {"linesBefore": lines_before, "linesDeleted": lines_before - kept, "linesKept": kept,
                                    "rangeCount": 40, "tokensBefore": 100_000, "tokensAfter": 50_000,
                                    "percentReduction": 50.0}})
        self.since_compaction = 0

    # -- turns -------------------------------------------------------------------------

    def turn(self) -> None:
        self.user()
        rounds = min(self.rng.choice((0, 1, 1, 2, 2, 3, 3, 4, 5, 6)), 6)
        for _ in range(rounds):
            if self.full():
                return
            calls = [self._call() for _ in range(1 if self.rng.random() < 0.8 else 2)]
            if self.rng.random() < 0.01:
                self.assistant("aborted", calls)  # interrupted: its calls never get results
                return
            self.assistant("toolUse", calls)
            for call_id, name, _ in calls:
                if self.full():
                    return
                self.tool_result(call_id, name)
        if not self.full():
            self.assistant("stop", [])

    def build(self) -> list[dict[str, Any]]:
        while not self.full():
            self.turn()
            if self.full():
                break
            self.maybe_event()
            if not self.full():
                self.maybe_branch()
            if not self.full():
                self.maybe_compact()
        del self.entries[self.spec.entries:]
        return self.entries


def _session_id(spec: SessionSpec) -> str:
    if spec.session_id is not None:
        return spec.session_id
    # UUIDv7-shaped and deterministic: time prefix from start_ms, rest from the seed.
    rnd = random.Random(f"sessiontree-bench-id:{spec.seed}").getrandbits(80)
    value = (spec.start_ms & ((1 << 48) - 1)) << 80 | (0x7 << 76) | (rnd & ((1 << 76) - 1))
    value = (value & ~(0xC << 60)) | (0x8 << 60)  # RFC 4122 variant bits
    return str(uuid.UUID(int=value))


def generate_records(spec: SessionSpec) -> list[dict[str, Any]]:
    """The header and entries of one session, format 3, in file order."""
    header = {"type": "session", "version": 3, "id": _session_id(spec), "timestamp": _iso(spec.start_ms),
              "cwd": spec.cwd}
    if spec.entries <= 0:
        return [header]
    return [header, *_Builder(spec).build()]


def iter_lines(records: list[dict[str, Any]]) -> Iterator[bytes]:
    for record in records:
        yield orjson.dumps(record)


def write_session(path: str | os.PathLike[str], spec: SessionSpec) -> int:
    """Write the session of ``spec`` to ``path`` (atomically); return the file size."""
    path = os.fspath(path)
    data = b"\n".join(iter_lines(generate_records(spec))) + b"\n"
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)
    return len(data)


def corpus_spec(index: int, seed: int = 1) -> SessionSpec:
    """The spec of session ``index`` of a corpus: mostly short sessions, a few long ones.

    Entry counts are log-normal (median ~33, mean ~50, capped at 1,500);
    outputs are scaled down (corpus files average ~40 KB); 25
    projects; every 7th session mentions :data:`NEEDLE`.
    """
    rng = random.Random(f"sessiontree-bench-corpus:{seed}:{index}")
    entries = max(4, min(1_500, int(math.exp(rng.gauss(3.5, 0.9)))))
    return SessionSpec(entries=entries, seed=seed * 1_000_003 + index, cwd=f"/home/dev/work/project-{index % 25}",
                       branch_every=120, compaction_every=0, images=rng.random() < 0.1, big_outputs=False,
                       output_scale=0.3, needle=NEEDLE if index % 7 == 0 else None,
                       start_ms=BASE_MS + index * 3_600_000)


def corpus_file_name(spec: SessionSpec) -> str:
    """``<timestamp>_<id>.jsonl`` like the original agent names its files."""
    return _iso(spec.start_ms).replace(":", "-").replace(".", "-") + "_" + _session_id(spec) + ".jsonl"


def write_corpus(directory: str | os.PathLike[str], sessions: int, seed: int = 1) -> list[str]:
    """Write ``sessions`` corpus sessions into ``directory``; return their paths in index order."""
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    paths = []
    for index in range(sessions):
        spec = corpus_spec(index, seed)
        path = os.path.join(directory, corpus_file_name(spec))
        if not os.path.exists(path):
            write_session(path, spec)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", help="output JSONL file")
    parser.add_argument("--entries", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-compactions", action="store_true")
    parser.add_argument("--no-branches", action="store_true")
    parser.add_argument("--corpus", help="write a corpus of --sessions files into this directory instead")
    parser.add_argument("--sessions", type=int, default=100)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    if args.corpus:
        paths = write_corpus(args.corpus, args.sessions, args.seed)
        size = sum(os.path.getsize(p) for p in paths)
        print(f"{len(paths)} sessions, {size / 1e6:.1f} MB in {time.perf_counter() - started:.1f} s")
        return 0
    if not args.out:
        parser.error("give an output file or --corpus DIR")
    spec = SessionSpec(entries=args.entries, seed=args.seed,
                       compaction_every=0 if args.no_compactions else SessionSpec.compaction_every,
                       branch_every=0 if args.no_branches else SessionSpec.branch_every)
    size = write_session(args.out, spec)
    print(f"{args.entries} entries, {size / 1e6:.1f} MB in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
