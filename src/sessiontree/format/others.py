"""Other agents' files that look like pi-lineage sessions but are not, named instead of
misread (docs/agents/README.md, "Named, not read").

Several formats start with ``{"type": "session", ...}`` and some call themselves
version 4 as pi's format does. Read as pi/Atomic files they would fail on some
field deep inside (a numeric ``createdAt``) or be taken for pi's own early
format-4 header (``version: 4`` with ``timestamp``) until a record the pi format
does not have. :func:`named_header` and :func:`named_record` recognise them from
the header or from a record and give the refusal's reason, naming the agent; the
codec raises it (:mod:`sessiontree.format.codec`) before any pi rule is applied.

Each rule is taken from the agent's own code (sources in docs/agents/README.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["named_header", "named_record"]

#: gajae-code's records that change an earlier record in place (its formats 4 and 5).
_GAJAE_PATCHES = frozenset({"entry_patch", "header_patch"})
_NOT_MAPPED = "not a pi/Atomic session; sessiontree does not map this format (docs/agents/README.md)"


def named_header(header: Mapping[str, Any]) -> str | None:
    """The refusal for a first record another agent wrote, or ``None``.

    * **DeepSeek Harness** (``dsh``): ``{"type": "session", "version": 3|4, "id",
      "createdAt": <Unix ms>, "delegationDepth", "isSeeded", ...}``; its events are
      ``{"type": "turn/start", "seq", "time", "data"}``.
    * **gajae-code format 5**: ``{"type": "session", "version": 5, "id",
      "timestamp", "cwd"}`` (its format 4 has a header pi's early format 4 also
      has: it is told by its patch records, :func:`named_record`).
    * **Gemini CLI JSONL chats** (newer Gemini CLI): a first record with
      ``sessionId``, ``projectHash`` and ``startTime`` and no ``type``.
    """
    kind = header.get("type")
    if kind == "session":
        created = header.get("createdAt")
        if (isinstance(created, (int, float)) and not isinstance(created, bool)) or (
                "delegationDepth" in header and "isSeeded" in header):
            return (f"a DeepSeek Harness (dsh) session file (its own format {header.get('version')!r}: "
                    f"createdAt in Unix ms, events of type/seq/time/data), {_NOT_MAPPED}")
        if header.get("version") == 5 and isinstance(header.get("timestamp"), str):
            return f"a gajae-code session file (its format 5), {_NOT_MAPPED}"
        return None
    if kind is None and isinstance(header.get("sessionId"), str) and "projectHash" in header \
            and "startTime" in header:
        return (f"a Gemini CLI chat in its newer JSONL layout (one record a line), {_NOT_MAPPED}; "
                "the JSON chats of earlier versions are mapped")
    return None


def named_record(record: Mapping[str, Any], version: int) -> str | None:
    """The refusal for a record after the header that only another agent writes, or ``None``:
    gajae-code's ``entry_patch`` / ``header_patch`` records (no ``id``: they patch an
    earlier record in place), in a file whose header says ``version`` 4 (the header pi's
    early format 4 has too)."""
    kind = record.get("type")
    if kind in _GAJAE_PATCHES and "id" not in record:
        return f"a gajae-code session file (its format {version}: {kind} records), {_NOT_MAPPED}"
    return None
