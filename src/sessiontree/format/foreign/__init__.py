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
    settle,
    sniff_agent,
    source_bytes,
)

__all__ = ["AGENT_NAMES", "ForeignSession", "agent_of_header", "iter_records", "map_claude", "map_codex",
           "map_foreign", "settle", "sniff_agent", "source_bytes"]


def map_foreign(data: bytes, path: str | None = None) -> ForeignSession | None:
    """The mapping of a foreign file's complete bytes, every entry passed through the
    stores' validator (:func:`~sessiontree.format.foreign.common.settle`), or ``None``
    when its first readable record (a line that is a JSON object; damaged lines before
    it are skipped) is not one a supported agent writes (a pi/Atomic file, or not a
    session). ``sync`` and ``check`` both read a foreign file through this one function,
    so they judge it alike (docs/agents/README.md, "Every file comes in")."""
    for record in iter_records(data):
        if record.value is None:
            continue
        agent = sniff_agent(record.value)
        if agent == "claude-code":
            return settle(map_claude(data, path))
        if agent == "codex":
            return settle(map_codex(data, path))
        return None
    return None
