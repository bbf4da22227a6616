"""oh-my-pi (omp) session files as format-4 sessions (docs/agents/README.md, "oh-my-pi").

omp writes pi-lineage sessions (format 3: ``{"type": "session", "version": 3, ...}``
then pi's entries) with one addition: a fixed-width **title slot** before the header,
``{"type": "title", "v": 1, "title", "source"?, "updatedAt", "pad"}`` padded with
spaces to exactly 256 bytes with its newline, which omp rewrites in place when the
session's title changes (``@oh-my-pi/pi-coding-agent`` 18.3.4,
``src/session/session-title-slot.ts``; the title overrides the header's own).

The mapping, a pure function of the file's complete lines (:func:`map_omp`):

* the title slot becomes the root entry, a ``session_info`` whose ``name`` is the
  title (id ``title-slot``, ``timestamp`` = ``updatedAt``); its ``foreign.raw`` holds
  the slot line and the header line;
* the rest is read by the library's own reader as the pi-lineage file it is
  (format 3 upgraded as pi files are); each entry keeps its line in ``foreign.raw``,
  and an entry without a parent hangs off the title entry (one tree);
* the header is the upgraded header plus ``"foreign": {"agent": "omp"}``.

A title rewrite changes only the first entry: sync takes it as the same session
(:mod:`sessiontree.sync.omp`).
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

from sessiontree.format.codec import parse_session
from sessiontree.format.foreign.common import ForeignSession

__all__ = ["AGENT", "TITLE_ID", "is_title_slot", "map_omp", "resume_command"]

AGENT = "omp"
TITLE_ID = "title-slot"


def resume_command(session_id: str) -> list[str]:
    """oh-my-pi's own command that continues a session: ``omp --resume ID``, the form omp
    itself prints (its ``resumeCommand``, 18.3.4; ``--session`` is an alias). Run in the
    session's cwd: omp looks the id up among its own sessions (docs/agents/gemini.md, "omp")."""
    return ["omp", "--resume", session_id]


def is_title_slot(value: Any) -> bool:
    """Whether a parsed first record is omp's title slot (``type`` ``"title"``, ``v`` 1,
    string ``title``, ``updatedAt`` and ``pad``), the rule omp's own reader applies."""
    return (isinstance(value, dict) and value.get("type") == "title" and value.get("v") == 1
            and isinstance(value.get("title"), str) and isinstance(value.get("updatedAt"), str)
            and isinstance(value.get("pad"), str))


def _raw(chunk: bytes) -> dict[str, str]:
    """``{"raw": text}``, or ``{"rawBase64": ...}`` for bytes that are not UTF-8 (as every mapping keeps them)."""
    try:
        return {"raw": chunk.decode("utf-8")}
    except UnicodeDecodeError:
        return {"rawBase64": base64.b64encode(chunk).decode("ascii")}


def map_omp(data: bytes, path: str | None = None) -> ForeignSession | None:
    """Map an omp session file (complete lines) to a format-4 session.

    Args:
        data: the file's bytes up to its last newline.
        path: the file path, for messages.

    Returns:
        A :class:`ForeignSession` (``agent`` ``"omp"``), or ``None`` when the first line
        is not a title slot.

    Raises:
        InvalidSessionError: the lines after the slot are not a pi-lineage session (the
            library's reader says where).
    """
    cut = data.find(b"\n") + 1
    if cut <= 0:
        return None
    try:
        slot = orjson.loads(data[:cut])
    except orjson.JSONDecodeError:
        return None
    if not is_title_slot(slot):
        return None
    body = data[cut:]
    parsed = parse_session(body, path)
    # Where each physical line of the body ends (line n ends at ends[n - 1]).
    ends: list[int] = []
    start = 0
    while start < len(body):
        stop = body.find(b"\n", start)
        stop = len(body) if stop < 0 else stop + 1
        ends.append(stop)
        start = stop
    header = {**parsed.header, "foreign": {"agent": AGENT}}
    result = ForeignSession(AGENT, header)
    header_end = ends[0] if ends else len(body)
    title = slot["title"].strip()
    result.entries.append({"type": "session_info", "id": TITLE_ID, "parentId": None,
                           "timestamp": slot["updatedAt"], "name": title,
                           "foreign": {"agent": AGENT, "line": 1,
                                       **_raw(data[:cut] + body[:header_end])}})
    result.lines.append(1)
    done = header_end
    for i, entry in enumerate(parsed.entries):
        line = parsed.lines[i] if i < len(parsed.lines) else len(ends)
        stop = ends[line - 1] if line - 1 < len(ends) else len(body)
        if i == len(parsed.entries) - 1:
            stop = len(body)  # lines the reader dropped after the last entry stay in the bytes
        mapped = dict(entry)
        if mapped.get("parentId") is None:
            mapped["parentId"] = TITLE_ID
        mapped["foreign"] = {"agent": AGENT, "line": line + 1, **_raw(body[done:stop])}
        done = stop
        result.entries.append(mapped)
        result.lines.append(line + 1)
    return result
