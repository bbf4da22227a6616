"""Other agents' session files read as format-4 sessions, each record kept verbatim
(docs/agents/README.md): Claude Code (:mod:`.claude`) and Codex (:mod:`.codex`)."""

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

__all__ = ["AGENT_NAMES", "ForeignSession", "agent_of_header", "iter_records", "map_claude", "map_codex",
           "map_foreign", "sniff_agent", "source_bytes"]


def map_foreign(data: bytes, path: str | None = None) -> ForeignSession | None:
    """The mapping of a foreign file's complete bytes, or ``None`` when its first record
    is not one a supported agent writes (a pi/Atomic file, or not a session)."""
    for record in iter_records(data):
        agent = sniff_agent(record.value)
        if agent == "claude-code":
            return map_claude(data, path)
        if agent == "codex":
            return map_codex(data, path)
        return None
    return None
