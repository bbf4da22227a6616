"""Taking damaged lines apart: complete records, torn records, junk, salvaged fields.

A line that does not parse is taken apart with ``json.JSONDecoder.raw_decode``
(:func:`decompose`): two or more complete objects are *glued records*; an
incomplete record followed by a complete one (a crash, then an append after
it) is a *torn record*; an incomplete tail at the very end of the file with
no newline is a *torn final record*; anything else is *malformed*. Several
records can be torn in a row (each crash leaves one). From the start of a
damaged record, :func:`salvage` reads the top-level string fields it can
(``id``, ``parentId``), so problems and repairs can name the entry.

The decoder here only finds where pieces begin and end; the pieces
themselves are parsed with :func:`sessiontree.format.jsonio.loads`
(:func:`loads`), exactly as the strict reader does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sessiontree.format import jsonio

__all__ = ["Piece", "decompose", "loads", "salvage"]

_JSON_WS = " \t\r\n"
# Every writer starts a record with its "type" key (docs/rules/format.md A.3-A.17).
_RECORD_START = re.compile(r'\{\s*"type"\s*:')


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON constant {name}")


# Only used to find where pieces of a damaged line begin and end; the pieces
# themselves are parsed with jsonio.loads, exactly as the strict reader does.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _JSON_WS:
        pos += 1
    return pos


def loads(data: bytes) -> tuple[Any, str | None]:
    """``(value, None)``, or ``(None, reason)`` when ``data`` is not JSON."""
    try:
        return jsonio.loads(data), None
    except ValueError as exc:  # jsonio.loads reports absurd nesting as a ValueError too
        return None, str(exc)


@dataclass
class Piece:
    """A part of a damaged line: a complete JSON ``value``, a ``fragment``
    (incomplete text followed by a later record) or trailing ``junk``.

    Attributes:
        kind: ``"value"``, ``"fragment"`` or ``"junk"``.
        start: byte offset in the line as stored (NUL runs included).
        data: the piece's bytes, without surrounding JSON whitespace.
        error: why a fragment or junk does not parse (the decoder's message).
    """

    kind: str
    start: int
    data: bytes
    error: str = ""


def _looks_like_record(value: Any) -> bool:
    # Content blocks also start with "type"; records are told apart by their
    # string timestamp (every entry) or by being a header.
    return isinstance(value, dict) and (value.get("type") == "session" or isinstance(value.get("timestamp"), str))


def _records_until(text: str, pos: int) -> int:
    """How far ``text[pos:]`` reads as complete records: ``len(text)`` when it
    is one or more records and nothing else, else the offset where it fails."""
    start = pos
    while pos < len(text):
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):
            return pos
        if not _looks_like_record(value):
            return pos
        pos = _skip_ws(text, end)
    return pos if pos > start else start


def _resume_point(text: str, pos: int) -> int | None:
    """The first record start after ``pos`` from which the rest of the text
    reads as complete records, or ``None``."""
    failed_at = pos
    for match in _RECORD_START.finditer(text, pos + 1):
        start = match.start()
        if start < failed_at:
            # Inside a run of records already read from an earlier start; it
            # fails at the same place, so do not read it again (keeps this linear).
            continue
        reached = _records_until(text, start)
        if reached == len(text) and reached > start:
            return start
        failed_at = max(failed_at, reached)
    return None


def decompose(line: bytes, in_line: Callable[[int], int]) -> list[Piece]:
    """Split a line that does not parse into pieces.

    ``in_line`` maps a byte offset of ``line`` to the offset reported to the
    user (the line as stored, before NUL runs were cut out).
    """
    # surrogateescape maps every byte to one character and back, so slices
    # of the text re-encode to exactly the original bytes.
    text = line.decode("utf-8", "surrogateescape")
    one_byte_chars = len(text) == len(line)

    def offset(index: int) -> int:
        if one_byte_chars:
            return in_line(index)
        return in_line(len(text[:index].encode("utf-8", "surrogateescape")))

    def raw(start: int, end: int) -> bytes:
        return text[start:end].strip(_JSON_WS).encode("utf-8", "surrogateescape")

    pieces: list[Piece] = []
    pos = _skip_ws(text, 0)
    while pos < len(text):
        try:
            _, end = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            error = f"{exc.msg} at byte {offset(exc.pos)} of the line"
        except (ValueError, RecursionError) as exc:
            error = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        else:
            pieces.append(Piece("value", offset(pos), raw(pos, end)))
            pos = _skip_ws(text, end)
            continue
        resume = _resume_point(text, pos)
        end = len(text) if resume is None else resume
        starts = _torn_starts(text, pos, end)
        for first, last in zip(starts, [*starts[1:], end], strict=True):
            kind = "junk" if resume is None and last == end else "fragment"
            pieces.append(Piece(kind, offset(first), raw(first, last), error))
        if resume is None:
            break
        pos = resume
    return pieces


def _torn_starts(text: str, start: int, end: int) -> list[int]:
    """Where the torn records in ``text[start:end]`` begin.

    Several records can be torn in a row (each crash leaves one). A later
    start is recognized by a readable top-level ``parentId``, which content
    blocks never have.
    """
    starts = [start]
    window = text if end == len(text) else text[:end]  # one copy, not one per candidate
    for match in _RECORD_START.finditer(window, start + 1):
        if "parentId" in _salvage_text(window, match.start()):
            starts.append(match.start())
    return starts


def salvage(data: bytes) -> dict[str, Any]:
    """Top-level string/null fields readable from the start of a damaged record.

    Walks ``{"key": value, ...}`` and stops at the first thing it cannot
    read, so the base fields of a truncated entry (written first by every
    writer of ``message`` entries) are recovered.
    """
    return _salvage_text(data.decode("utf-8", "replace"))


def _salvage_text(text: str, pos: int = 0) -> dict[str, Any]:
    """:func:`salvage` on ``text[pos:]``, without copying it."""
    pos = _skip_ws(text, pos)
    if not text.startswith("{", pos):
        return {}
    pos += 1
    out: dict[str, Any] = {}
    while True:
        pos = _skip_ws(text, pos)
        if text.startswith(",", pos):
            pos += 1
            continue
        if not text.startswith('"', pos):
            return out
        try:
            key, pos = _DECODER.raw_decode(text, pos)
            pos = _skip_ws(text, pos)
            if not text.startswith(":", pos):
                return out
            value, pos = _DECODER.raw_decode(text, _skip_ws(text, pos + 1))
        except (ValueError, RecursionError):
            return out
        if (value is None or isinstance(value, str)) and key not in out:
            out[key] = value

