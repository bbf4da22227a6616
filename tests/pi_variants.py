"""Variants of the real pi session files, built the way a real pi home gets them: a copy
under another session id at another time (so its calls are other calls, not copies),
with two records glued on one line (a lost newline), or rewritten by an upgrade."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

from sessiontree.format import jsonio

NANO = Decimal("0.000000001")


def shifted_copy(source: Path, session_id: str) -> list[bytes]:
    """The lines (without newlines) of ``source`` under ``session_id``, every entry's
    timestamp a year earlier (a session of its own: no call is a copy of the source's)."""
    lines = source.read_bytes().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for number, text in enumerate(lines):
        text = text.replace(b'"timestamp":"2025-', b'"timestamp":"2024-')
        if number == 0:
            header = jsonio.loads(text)
            header["id"] = session_id
            text = jsonio.dumps(header)
        out.append(text)
    return out


def first_billed(lines: list[bytes]) -> int:
    """The index of the first assistant line with a non-zero cost (after the first few)."""
    for index in range(2, len(lines)):
        record = jsonio.loads(lines[index])
        message = record.get("message") or {}
        if message.get("role") == "assistant" and message.get("usage", {}).get("cost", {}).get("total"):
            return index
    raise AssertionError("no billed assistant line")


def glue(lines: list[bytes], index: int) -> list[bytes]:
    """``lines`` with line ``index`` glued to the one before it (the newline between them lost)."""
    return [*lines[:index - 1], lines[index - 1] + lines[index], *lines[index + 1:]]


def write(path: Path, lines: list[bytes]) -> Path:
    """Write ``lines`` as a JSONL file (each with its newline)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(text + b"\n" for text in lines))
    return path


def hand_count(*paths: Path) -> tuple[Decimal, int]:
    """The billed cost and calls of pi files, counted from their raw records without the
    library: every record on every line (glued ones too, read with ``raw_decode``), the
    ``usage.cost.total`` of each assistant message, in nano-dollars; a call found in several files (same
    entry timestamp, message timestamp and usage) counted once."""
    decoder = json.JSONDecoder()
    best: dict[tuple[object, ...], list[Decimal]] = {}
    for path in paths:
        here: dict[tuple[object, ...], list[Decimal]] = {}
        for text in path.read_text(encoding="utf-8").splitlines():
            pos = 0
            while pos < len(text):
                record, end = decoder.raw_decode(text, pos)
                pos = end
                message = record.get("message") if record.get("type") == "message" else None
                if not message or message.get("role") != "assistant":
                    continue
                usage = message.get("usage") or {}
                key = (record.get("timestamp"), message.get("timestamp"), json.dumps(usage, sort_keys=True))
                cost = Decimal(repr(usage.get("cost", {}).get("total", 0)))
                # Costs are counted in whole nano-dollars (docs/usage.md): some recorded
                # values carry float noise below that (0.0043949999999999996).
                here.setdefault(key, []).append(cost.quantize(NANO))
        for key, costs in here.items():
            if len(costs) > len(best.get(key, [])):
                best[key] = costs
    return sum((sum(costs, Decimal(0)) for costs in best.values()), Decimal(0)), sum(map(len, best.values()))


def upgraded_in_place(path: Path, *, new_header: bool = True) -> dict[str, str]:
    """Rewrite a format-1 file the way pi upgrades an old file in place: the same records,
    a version-3 header, each entry under a new id (``parentId`` and the compaction's
    first kept entry following); returns ``{old id: new id}`` (old: the ids the library
    derives for the format-1 file). ``new_header``: the header rewritten to pi's version-3
    fields only; else the file's header kept, with ``version`` 3 added."""
    from sessiontree.format.codec import parse_session

    parsed = parse_session(path.read_bytes(), str(path))
    mapping = {entry["id"]: f"{index + 1:08x}" for index, entry in enumerate(parsed.entries)}
    header = {"type": "session", "version": 3, "id": parsed.header["id"],
              "timestamp": parsed.header["createdAt"], "cwd": parsed.header["cwd"]}
    if not new_header:
        header = {**jsonio.loads(path.read_bytes().split(b"\n", 1)[0]), "version": 3}
    lines = [jsonio.dumps(header)]
    for entry in parsed.entries:
        moved = {key: mapping.get(value, value) if key in ("id", "parentId", "firstKeptEntryId") else value
                 for key, value in entry.items()}
        lines.append(jsonio.dumps(moved))
    write(path, lines)
    return mapping
