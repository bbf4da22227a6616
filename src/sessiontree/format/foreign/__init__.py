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
    settle,
    sniff_agent,
    source_bytes,
)
from sessiontree.format.foreign.gemini import map_gemini
from sessiontree.format.foreign.omp import map_omp

__all__ = ["AGENT_NAMES", "ForeignSession", "agent_of_header", "iter_records", "map_claude", "map_codex",
           "map_foreign", "map_gemini", "map_omp", "map_records", "settle", "sniff_agent", "source_bytes"]


def map_foreign(data: bytes, path: str | None = None) -> ForeignSession | None:
    """The mapping of a foreign file's complete bytes, every entry passed through the
    stores' validator (:func:`~sessiontree.format.foreign.common.settle`), or ``None``
    when its first readable record (a line that is a JSON object; damaged lines before
    it are skipped) is not one a supported agent writes (a pi/Atomic file, or not a
    session). A document whose first line is not a record (a lone ``{``) is tried as a
    Gemini CLI chat, a file starting with oh-my-pi's title slot as an omp session.
    ``sync`` and ``check`` both read a foreign file through this one function, so they
    judge it alike (docs/agents/README.md, "Every file comes in")."""
    head = data.lstrip()
    if head.startswith(b"{") and head[1:].lstrip(b" \t\r").startswith(b"\n"):
        gemini = map_gemini(data, path)
        return None if gemini is None else settle(gemini)
    if data.startswith(b'{"type":"title"'):
        omp = map_omp(data[:data.rfind(b"\n") + 1], path)
        if omp is not None:
            return omp
    for record in iter_records(data):
        if record.value is None:
            continue
        agent = sniff_agent(record.value)
        return None if agent is None else map_records(agent, data, path)
    return None


def map_records(agent: str, data: bytes, path: str | None = None) -> ForeignSession | None:
    """The mapping of a JSONL file already known to be ``agent``'s (``"claude-code"`` or
    ``"codex"``: the :func:`~sessiontree.format.foreign.common.sniff_agent` of its first
    readable record), settled as :func:`map_foreign` settles it; ``None`` for any other
    agent. For a caller that has sniffed the file itself (``sync``), so that a file is
    sniffed once."""
    if agent == "claude-code":
        return settle(map_claude(data, path))
    if agent == "codex":
        return settle(map_codex(data, path))
    return None
