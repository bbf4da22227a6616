"""Bounds the format enforces on write (docs/rules/format.md spec:data-model,
docs/rules/projection.md §3.10, docs/rules/listing.md §3.14, docs/rules/decisions.md D-13).

Pure functions over plain data; loading never applies them, so stored
records are never altered after the fact.
"""

from __future__ import annotations

import re
from typing import Any

from sessiontree.format import jsonio

__all__ = [
    "MAX_NESTED_ARGUMENT_BYTES",
    "MAX_NESTED_CALLS",
    "MAX_NESTED_ERROR_CHARS",
    "MAX_NESTED_TOTAL_BYTES",
    "MAX_RECORD_BYTES",
    "SUMMARY_MAX_CHARS",
    "normalize_nested_calls",
    "normalize_summary",
]

MAX_NESTED_CALLS = 256
MAX_NESTED_ARGUMENT_BYTES = 8 * 1024
MAX_NESTED_TOTAL_BYTES = 32 * 1024
MAX_NESTED_ERROR_CHARS = 500
SUMMARY_MAX_CHARS = 160
#: The most bytes one record (a JSONL line without its newline) may hold to be
#: imported: SQLite's default ``SQLITE_MAX_LENGTH``, the largest string or BLOB it
#: stores, and a record is one BLOB there. ``import`` refuses a larger record into
#: every store (so a session can move between store kinds) and ``check`` reports it
#: (``record-too-large``, docs/check.md). Read at call time, so tests can lower it.
MAX_RECORD_BYTES = 1_000_000_000
_WHITESPACE = re.compile(r"\s+")


def normalize_nested_calls(record: dict[str, Any]) -> dict[str, Any]:
    """Bound a tool result's ``nestedCalls`` record (docs/rules/projection.md seed:nested-calls, §3.10).

    Keeps the first 256 calls; omits ``arguments`` (recording ``argumentsBytes``)
    when a call's compact-JSON arguments exceed 8 KiB or would push the running
    total past 32 KiB; truncates ``error`` to 500 characters; sets
    ``complete: false`` when anything was dropped or omitted or any call is
    ``"unfinished"``. Idempotent; returns a new dict and never mutates the input.

    Args:
        record: ``{"calls": [...], "complete": bool}``; other shapes are returned as is.
    """
    calls = record.get("calls") if isinstance(record, dict) else None
    if not isinstance(calls, list):
        return record
    lost = len(calls) > MAX_NESTED_CALLS
    total = 0
    kept: list[Any] = []
    for call in calls[:MAX_NESTED_CALLS]:
        if not isinstance(call, dict):
            kept.append(call)
            continue
        call = dict(call)
        if "arguments" in call:
            size = len(jsonio.dumps(call["arguments"]))
            if size > MAX_NESTED_ARGUMENT_BYTES or total + size > MAX_NESTED_TOTAL_BYTES:
                del call["arguments"]
                call["argumentsBytes"] = size
                lost = True
            else:
                total += size
        elif "argumentsBytes" in call:
            lost = True  # omitted by an earlier pass: stays incomplete (idempotence)
        error = call.get("error")
        if isinstance(error, str) and len(error) > MAX_NESTED_ERROR_CHARS:
            call["error"] = error[:MAX_NESTED_ERROR_CHARS]
            lost = True
        if call.get("status") == "unfinished":
            lost = True
        kept.append(call)
    out = dict(record)
    out["calls"] = kept
    if lost:
        out["complete"] = False
    return out


def normalize_summary(summary: str) -> str:
    """Collapse whitespace runs to one space, trim, clamp to 160 characters (docs/rules/decisions.md D-13).

    A longer text becomes its first 159 characters, trailing whitespace
    removed, followed by ``…`` (U+2026).
    """
    text = _WHITESPACE.sub(" ", summary).strip()
    if len(text) > SUMMARY_MAX_CHARS:
        text = text[: SUMMARY_MAX_CHARS - 1].rstrip() + "\u2026"
    return text
