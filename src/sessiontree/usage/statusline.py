"""What ``sessiontree statusline`` shows in an agent's status bar (docs/statusline.md).

Three numbers, from the store as it is (read-only; nothing is synced): the
session's cost so far (what it billed itself: :attr:`SessionUsage.billed`, as
``list --cost``), today's total of the whole store (``stats --since 1d``), and
what is left of a budget (:func:`sessiontree.usage.budgets.budget_status`).

The session is named by the JSON the agent writes on the command's stdin:
Claude Code's ``statusLine`` command gets ``{"session_id": ..., "transcript_path":
..., "cwd": ..., "model": {...}, ...}``; ``sessionId`` and ``id`` are taken too.
:func:`session_id_from_input` reads it and never raises: a status bar shows a short
line, not a traceback.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from sessiontree.stores.base import SessionStore
from sessiontree.usage.budgets import Budget, BudgetStatus, budget_status
from sessiontree.usage.report import Totals, session_usage, usage_report

__all__ = ["StatusLine", "session_id_from_input", "status_line"]

#: The most of stdin read (Claude Code's JSON is about 1 KB).
MAX_INPUT_BYTES = 1 << 20


def session_id_from_input(text: str | bytes) -> str | None:
    """The session id in an agent's status-line JSON: ``session_id`` (Claude Code),
    ``sessionId`` or ``id``; else the file name of ``transcript_path`` without
    ``.jsonl``; ``None`` when there is none or the text is not a JSON object."""
    if isinstance(text, bytes):
        text = text[:MAX_INPUT_BYTES].decode("utf-8", "replace")
    try:
        data = json.loads(text) if text.strip() else None
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    for key in ("session_id", "sessionId", "id"):
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    path = data.get("transcript_path")
    if isinstance(path, str) and path.endswith(".jsonl"):
        return os.path.basename(path)[: -len(".jsonl")] or None
    return None


@dataclass
class StatusLine:
    """The numbers of one status line.

    Attributes:
        session_id: the session asked for (``None``: none was given).
        found: whether the store holds it (``False``: not synced yet).
        session: what the session billed itself, or ``None`` when not found.
        today: every call of the store today (the zone's day).
        budget: the budget's status, or ``None`` without one.
    """

    session_id: str | None
    found: bool
    session: Totals | None
    today: Totals
    budget: BudgetStatus | None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``statusline --json``)."""
        return {"sessionId": self.session_id, "found": self.found,
                "session": self.session.to_dict() if self.session is not None else None,
                "today": self.today.to_dict(),
                "budget": self.budget.to_dict() if self.budget is not None else None}


def status_line(store: SessionStore, session_id: str | None, *, budget: Budget | None = None,
                tz: str | None = None, now_ms: int | None = None, catalog: Any = None) -> StatusLine:
    """The numbers of a status line (read-only: the store is only read).

    Raises:
        ValueError: an unknown zone.
        StorageError: the store could not be read.
    """
    found = session_id is not None and store.exists(session_id)
    session = session_usage(store, session_id, catalog=catalog).billed if found and session_id else None
    today = usage_report(store, by="day", since="1d", tz=tz, now_ms=now_ms, catalog=catalog).totals
    status = budget_status(store, budget, tz=tz, now_ms=now_ms, catalog=catalog)[0] if budget is not None else None
    return StatusLine(session_id, found, session, today, status)
