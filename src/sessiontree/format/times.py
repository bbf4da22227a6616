"""The one rule for reading an entry's ISO-8601 ``timestamp`` text (docs/usage.md, "Bad values
in agent files": "one without an offset is UTC, whatever the machine's zone").

A text without an offset is UTC, never the machine's time zone: format-4 writers always add
``Z``, and a result must not depend on where it is computed (JavaScript's ``Date.parse``
would read it as local time). Every reader of an entry time (the tree's order, usage days,
the agent-file mapping) goes through :func:`iso_datetime`, so the rule lives here alone.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["iso_datetime"]


def iso_datetime(text: str) -> datetime | None:
    """``text`` (ISO 8601, as :meth:`datetime.fromisoformat` reads it, ``Z`` included) as an
    aware datetime, UTC when it names no offset; ``None`` when it is not an ISO-8601 time."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed
