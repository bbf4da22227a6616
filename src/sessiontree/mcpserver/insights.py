"""The MCP tool ``session_insights`` as plain data (docs/mcp.md, docs/insights.md).

One session's insights (:func:`sessiontree.usage.insights.session_insights`), or, with
no session, the store's (:func:`sessiontree.usage.insights.store_insights`), fitted to
the answer's size budget: the longest lists are cut from their ends (most useful items
first) until the answer fits, and ``truncated`` names the lists that were cut with their
full lengths. With ``redact``, the text an answer quotes from the session (the
arguments of repeated calls, edited file paths) has its secrets replaced.
"""

from __future__ import annotations

from typing import Any

from sessiontree.mcpserver.paging import check_budget, json_size
from sessiontree.mcpserver.redaction import Scrubber
from sessiontree.mcpserver.tools import SessionReader, ToolInputError
from sessiontree.usage.insights import session_insights, store_insights

__all__ = ["insights_answer"]

#: Lists an answer may cut to fit, in the order they are cut.
_CUTTABLE = ("repeatedGroups", "interruptedCallList", "filesEditedList", "longestWaits", "abandonedBranches",
             "errorLoopList", "tools", "expensiveAbandonedBranches", "errorLoopSessions")


def insights_answer(reader: SessionReader, session: str | None = None, *, limit: int = 10,
                    max_chars: int | None = None, redact: bool = False) -> dict[str, Any]:
    """The ``session_insights`` answer.

    Raises:
        ToolInputError: an unknown session, a limit out of range.
        ValueError: ``max_chars`` out of range.
    """
    budget = check_budget(max_chars)
    if not 1 <= limit <= 100:
        raise ToolInputError(f"limit must be between 1 and 100, not {limit}")
    if session is None:
        data = store_insights(reader.store, limit=limit).to_dict()
    else:
        data = session_insights(reader.store, reader.resolve_session(session)).to_dict()
    if redact:
        scrub = Scrubber()
        for group in data.get("repeatedGroups", []):
            group["arguments"] = scrub.text(group["arguments"])
        if "filesEditedList" in data:  # one session's; the store's answer has the count only
            data["filesEditedList"] = [scrub.text(path) for path in data["filesEditedList"]]
        data["redactedSecrets"] = scrub.secrets
    truncated: dict[str, int] = {}
    for name in _CUTTABLE:
        items = data.get(name)
        if not isinstance(items, list):
            continue
        while items and json_size(data) > budget:
            truncated.setdefault(name, len(items))
            del items[len(items) // 2:]  # halve (one item: none left)
    if truncated:
        data["truncated"] = truncated
    return data
