"""A heavy user's home, generated from the real corpus (issue 42's homes).

``build_home(home, agent, sessions)`` writes ``sessions`` Claude Code project logs
(``<home>/.claude/projects/<encoded cwd>/<uuid>.jsonl``) or Codex rollouts
(``<home>/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``) by replaying the
real files of ``../shared/corpus`` with new ids: session ``n`` is a real file (taken in
turn), cut after a whole line at a size drawn around the target mean (a session the
agent was still writing, as a real home holds many), every UUID and every API message
and request id (``msg_...``, ``req_...``) replaced by one derived from ``n`` and the old
id, so every session and every API call is distinct (the peers de-duplicate calls by
these ids) and each file keeps the real records' shapes, byte for byte otherwise.
Every ISO timestamp (and a rollout's name and date folder) moves ``n`` hours later.

Deterministic: the same arguments give the same bytes. Usage::

    python benchmarks/home.py HOME claude-code 1000     # about 37 MB
    python benchmarks/home.py HOME codex 1000
"""

from __future__ import annotations

import datetime
import hashlib
import os
import random
import re
import sys
import uuid
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"
#: The mean size of a generated session, bytes: issue 42's 1,000 Claude Code sessions in 37 MB.
MEAN_BYTES = 34_500

_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_API_ID = re.compile(rb"\b(msg|req)_([0-9A-Za-z]{8,})")
_ISO = re.compile(rb'"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z"')
_NAME_TIME = re.compile(r"rollout-(\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d)-")
#: Session ``n`` is moved ``n`` times this later: replays of one file are distinct calls
#: for every tool (sessiontree recognises a copied call by its timestamps and usage,
#: docs/usage.md), and 1,000 sessions span six weeks, as a heavy user's do.
SHIFT = datetime.timedelta(hours=1)


def sources(agent: str, corpus: Path = CORPUS) -> list[Path]:
    """The real files replayed for ``agent`` (``claude-code`` or ``codex``), sorted; Claude
    Code's sub-agent logs (``agent-*.jsonl``, a parent session's side files) are left out."""
    if agent == "claude-code":
        files = [p for p in (corpus / "claude-code" / "projects").rglob("*.jsonl") if not p.name.startswith("agent-")]
    elif agent == "codex":
        files = list((corpus / "codex" / "sessions").rglob("rollout-*.jsonl"))
    else:
        raise ValueError(f"unknown agent {agent!r}")
    return sorted(files)


def _replay(data: bytes, n: int) -> bytes:
    """``data`` with every UUID and API id replaced by one derived from ``(n, old id)``."""
    def new_uuid(match: re.Match[bytes]) -> bytes:
        digest = hashlib.md5(b"%d:" % n + match.group(0)).digest()
        return str(uuid.UUID(bytes=digest, version=4)).encode()

    def new_api_id(match: re.Match[bytes]) -> bytes:
        tail = hashlib.md5(b"%d:" % n + match.group(0)).hexdigest()[:len(match.group(2))]
        return match.group(1) + b"_" + tail.encode()

    def later(match: re.Match[bytes]) -> bytes:
        moved = datetime.datetime.fromisoformat(match.group(1).decode()) + n * SHIFT
        return b'"' + moved.isoformat().encode() + (match.group(2) or b"") + b'Z"'

    return _ISO.sub(later, _API_ID.sub(new_api_id, _UUID.sub(new_uuid, data)))


def _cut(data: bytes, size: int) -> bytes:
    """``data`` up to the end of the first line that reaches ``size`` bytes (whole lines)."""
    if size >= len(data):
        return data
    end = data.find(b"\n", size)
    return data if end < 0 else data[:end + 1]


def build_home(home: str | os.PathLike[str], agent: str, sessions: int, *, seed: int = 42,
               mean: int = MEAN_BYTES, corpus: Path = CORPUS) -> list[str]:
    """Write ``sessions`` replayed sessions of ``agent`` under ``home`` (its agent folder
    created); returns their paths. Sizes are exponential around ``mean`` (at least 8 KB,
    at most the real file)."""
    rng = random.Random(seed)
    files = sources(agent, corpus)
    contents = [path.read_bytes() for path in files]
    paths = []
    for n in range(sessions):
        k = n % len(files)
        data = _replay(_cut(contents[k], max(8_000, int(rng.expovariate(1 / mean)))), n)
        if agent == "claude-code":
            folder = Path(home) / ".claude" / "projects" / f"-home-me-project{n % 20}"
            name = _UUID.search(_replay(files[k].stem.encode(), n)) or _UUID.search(data)
            target = folder / f"{name.group(0).decode() if name else f'{n:08d}-0000-4000-8000-000000000000'}.jsonl"
        else:
            name = _UUID.sub(lambda m, n=n: _replay(b'"%s"' % m.group(0), n)[1:-1], files[k].name.encode()).decode()
            found = _NAME_TIME.search(name)
            when = datetime.datetime.strptime(found.group(1), "%Y-%m-%dT%H-%M-%S") + n * SHIFT if found else None
            if when is not None and found is not None:
                name = name.replace(found.group(1), when.strftime("%Y-%m-%dT%H-%M-%S"))
                folder = Path(home) / ".codex" / "sessions" / when.strftime("%Y/%m/%d")
            else:
                folder = Path(home) / ".codex" / "sessions" / files[k].parent.relative_to(
                    corpus / "codex" / "sessions")
            target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        paths.append(str(target))
    return paths


def main(argv: list[str] | None = None) -> int:
    """``home.py HOME AGENT SESSIONS``: build the home, print its file count and size."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    paths = build_home(args[0], args[1], int(args[2]))
    total = sum(os.path.getsize(p) for p in paths)
    print(f"{len(paths):,} {args[1]} sessions, {total / 1e6:.1f} MB under {args[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
