"""Shared by the sync suites: agent session files written the way the agents write
them, in a fake home's agent folders, and what a store holds of them."""

from __future__ import annotations

from pathlib import Path

from sessiontree.format import jsonio
from sessiontree.format.codec import read_session_file
from sessiontree.sync.engine import Syncer

SID = "019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01"
OTHER = "019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b02"
PROJECT = "--home-me-project--"


def record(entry_id: str, parent: str | None, text: str = "hi", role: str = "user") -> dict:
    """A message entry as the agent writes it; its second is the hex id modulo 60."""
    stamp = f"2026-03-01T10:00:{int(entry_id, 16) % 60:02d}.000Z"
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": stamp,
            "message": {"role": role, "content": text, "timestamp": 1}}


def line(obj: dict) -> bytes:
    """One JSONL line of ``obj``, as JavaScript writes it."""
    return jsonio.dumps(obj) + b"\n"


def head(session_id: str = SID, version: int = 4, cwd: str = "/home/me/project") -> dict:
    """A header of format ``version`` (before 4: ``timestamp`` instead of ``createdAt``)."""
    out = {"type": "session", "version": version, "id": session_id, "createdAt": "2026-03-01T10:00:00.000Z",
           "cwd": cwd}
    if version < 4:
        out["timestamp"] = out.pop("createdAt")
    return out


def entries(start: int, count: int, parent: str | None) -> list[dict]:
    """``count`` chained messages with ids ``start``, ``start + 1``, ... (8 hex digits), alternating roles."""
    out = []
    for n in range(start, start + count):
        entry_id = f"{n:08x}"
        out.append(record(entry_id, parent, f"message {n}", "user" if n % 2 else "assistant"))
        parent = entry_id
    return out


def agent_file(home: Path, agent: str = "pi", session_id: str = SID, n: int = 3, version: int = 4) -> Path:
    """A session file where the agent keeps it; ``n`` entries."""
    folder = home / f".{agent}" / "agent" / "sessions" / PROJECT
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"2026-03-01T10-00-00-000Z_{session_id}.jsonl"
    path.write_bytes(line(head(session_id, version)) + b"".join(line(e) for e in entries(1, n, None)))
    return path


def append(path: Path, objs: list[dict]) -> None:
    """Append records to a session file, as the agent does."""
    with open(path, "ab") as handle:
        handle.write(b"".join(line(o) for o in objs))


def file_entries(path: Path) -> list[bytes]:
    """The stored text of every entry of a session file."""
    parsed = read_session_file(path)
    return [parsed.entry_bytes(i) for i in range(len(parsed.entries))]


def stored_entries(store, session_id: str = SID) -> list[bytes]:
    """The stored text of every entry of a session in ``store``."""
    parsed = store.read(session_id)
    return [parsed.entry_bytes(i) for i in range(len(parsed.entries))]


def sync_one(store, path: Path, **options):
    """Sync one file into ``store``; returns its outcome."""
    return Syncer(store, **options).sync_file(str(path))
