"""Other agents' session files read as format-4 sessions, each record kept verbatim
(docs/agents/README.md): Claude Code (:mod:`.claude`), Codex (:mod:`.codex`) and Gemini CLI
(:mod:`.gemini`, one JSON document per chat, not JSONL)."""

from __future__ import annotations

from sessiontree.format.foreign.claude import map_claude
from sessiontree.format.foreign.codex import map_codex
from sessiontree.format.foreign.common import (
    AGENT_NAMES,
    ForeignSession,
    agent_of_header,
    iter_records,
    sniff_agent,
    source_bytes,
)
from sessiontree.format.foreign.gemini import map_gemini
from sessiontree.format.foreign.omp import map_omp

__all__ = ["AGENT_NAMES", "ForeignSession", "agent_of_header", "iter_records", "map_claude", "map_codex",
           "map_foreign", "map_gemini", "map_omp", "sniff_agent", "source_bytes"]


def map_foreign(data: bytes, path: str | None = None) -> ForeignSession | None:
    """The mapping of a foreign file's complete bytes, or ``None`` when its first record
    is not one a supported agent writes (a pi/Atomic file, or not a session). A
    document whose first line is not a record (a lone ``{``) is tried as a Gemini CLI
    chat."""
    head = data.lstrip()
    if head.startswith(b"{") and head[1:].lstrip(b" \t\r").startswith(b"\n"):
        return map_gemini(data, path)
    if data.startswith(b'{"type":"title"'):
        omp = map_omp(data[:data.rfind(b"\n") + 1], path)
        if omp is not None:
            return omp
    for record in iter_records(data):
        agent = sniff_agent(record.value)
        if agent == "claude-code":
            return map_claude(data, path)
        if agent == "codex":
            return map_codex(data, path)
        return None
    return None
