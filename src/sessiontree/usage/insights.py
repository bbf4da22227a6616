"""Insights of sessions, priced: what ``sessiontree insights``, the viewer and the MCP tool
``session_insights`` show (docs/insights.md).

The counting is :func:`sessiontree.core.insights.session_facts` (pure, per session);
this module reads sessions through the store protocol, prices the billed records
of a session and of its abandoned branches by the rules of ``stats``
(:func:`sessiontree.usage.report.price_records`: recorded cost, else a catalogue
estimate marked as such, else unpriced), and sums across sessions.

Costs here are what each session *records*: a fork holds a copy of its source's
history and its abandoned branches, so store-wide sums of abandoned cost may count
a copied branch once per session holding it (``stats`` counts each call once;
docs/usage.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sessiontree.core.insights import SessionFacts, session_facts
from sessiontree.errors import SessionError
from sessiontree.stores.base import SessionStore
from sessiontree.usage.report import Totals, nanos_to_decimal, price_records

__all__ = [
    "SCHEMA_VERSION",
    "BranchCost",
    "SessionInsights",
    "StoreInsights",
    "insights_of_entries",
    "session_insights",
    "store_insights",
]

#: Version of the JSON shapes below (docs/insights.md).
SCHEMA_VERSION = 1


def _money(totals: Totals) -> dict[str, Any]:
    return {"cost": str(nanos_to_decimal(totals.cost_nanos)), "costNanos": totals.cost_nanos,
            "calls": totals.calls, "estimatedCalls": totals.estimated_calls, "unpricedCalls": totals.unpriced_calls}


@dataclass
class BranchCost:
    """One abandoned branch with its priced calls."""

    session_id: str
    leaf_id: str
    fork_id: str | None
    entries: int
    totals: Totals

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{"sessionId", "leafId", "forkId", "entries", "cost", "costNanos", "calls",
        "estimatedCalls", "unpricedCalls"}``."""
        return {"sessionId": self.session_id, "leafId": self.leaf_id, "forkId": self.fork_id,
                "entries": self.entries, **_money(self.totals)}


@dataclass
class SessionInsights:
    """The insights of one session (docs/insights.md).

    Attributes:
        session_id: the session.
        facts: the counts (:class:`~sessiontree.core.insights.SessionFacts`).
        totals: every billed record of the session, priced.
        branches: its abandoned branches, priced, most expensive first.
        cost_mode, catalog: as in ``stats``.
    """

    session_id: str
    facts: SessionFacts
    totals: Totals
    branches: list[BranchCost]
    cost_mode: str
    catalog: str | None

    @property
    def abandoned_nanos(self) -> int:
        """The cost of every abandoned branch, nano-dollars."""
        return sum(b.totals.cost_nanos for b in self.branches)

    @property
    def cost_per_file_nanos(self) -> int | None:
        """The session's cost divided by the files it edited (rounded down), ``None`` without any."""
        files = len(self.facts.files_edited)
        return self.totals.cost_nanos // files if files else None

    @property
    def tokens_cut(self) -> int:
        """Tokens cut by the compactions whose cut is known."""
        return sum(c.tokens_cut or 0 for c in self.facts.compactions)

    def to_dict(self) -> dict[str, Any]:
        """The documented JSON shape (docs/insights.md)."""
        f = self.facts
        per_file = self.cost_per_file_nanos
        return {
            "schemaVersion": SCHEMA_VERSION,
            "sessionId": self.session_id,
            "costMode": self.cost_mode,
            "catalog": self.catalog,
            "currency": "USD",
            "toolCalls": f.tool_calls,
            "toolErrors": f.tool_errors,
            "tools": [{"name": t.name, "calls": t.calls, "errors": t.errors}
                      for t in sorted(f.tools.values(), key=lambda t: (-t.calls, -t.errors, t.name))],
            # A name holds one shape in both objects (docs/insights.md, "JSON"): the counts the
            # store's object has too, and each count's items in ``<name>List``.
            "errorLoops": len(f.error_loops),
            "errorLoopList": [{"tool": loop.tool, "length": loop.length, "firstEntryId": loop.first_entry_id,
                               "lastEntryId": loop.last_entry_id} for loop in f.error_loops],
            "repeatedCalls": f.repeats,
            "repeatedGroups": [{"tool": r.tool, "arguments": r.arguments, "count": r.count, "entryIds": r.entry_ids}
                               for r in sorted(f.repeated_calls, key=lambda r: -r.count)],
            "interruptedCalls": len(f.interrupted_calls),
            "interruptedCallList": [{"tool": c.tool, "callId": c.call_id, "entryId": c.entry_id}
                                    for c in f.interrupted_calls],
            "compactions": len(f.compactions),
            "compactionList": [{"entryId": c.entry_id, "tokensBefore": c.tokens_before,
                                "tokensAfter": c.tokens_after, "tokensCut": c.tokens_cut} for c in f.compactions],
            "tokensCut": self.tokens_cut,
            "abandonedBranches": [b.to_dict() for b in self.branches],
            "abandonedCost": str(nanos_to_decimal(self.abandoned_nanos)),
            "abandonedCostNanos": self.abandoned_nanos,
            "filesEdited": len(f.files_edited),
            "filesEditedList": f.files_edited,
            "costPerFileEdited": str(nanos_to_decimal(per_file)) if per_file is not None else None,
            "costPerFileEditedNanos": per_file,
            "longestWaits": [{"tool": w.tool, "callId": w.call_id, "callEntryId": w.call_entry_id,
                              "resultEntryId": w.result_entry_id, "ms": w.ms} for w in f.waits],
            "totals": self.totals.to_dict(),
        }


def insights_of_entries(session_id: str, entries: Any, *, cost: str = "auto",
                        catalog: Any = None) -> SessionInsights:
    """:func:`session_insights` of entries already read (the viewer holds them).

    Raises:
        ValueError: an unknown cost mode.
    """
    facts = session_facts(entries)
    totals, used = price_records(facts.records, cost=cost, catalog=catalog)
    branches = []
    for branch in facts.abandoned_branches:
        branch_totals, branch_catalog = price_records(branch.records, cost=cost, catalog=catalog)
        used = used or branch_catalog
        branches.append(BranchCost(session_id, branch.leaf_id, branch.fork_id, branch.entries, branch_totals))
    branches.sort(key=lambda b: (-b.totals.cost_nanos, -b.entries))
    return SessionInsights(session_id, facts, totals, branches, cost, used)


def session_insights(store: SessionStore, session_id: str, *, cost: str = "auto",
                     catalog: Any = None) -> SessionInsights:
    """The insights of one stored session.

    Raises:
        SessionNotFoundError: no such session.
        InvalidSessionError, StorageError: it cannot be read.
        ValueError: an unknown cost mode.
    """
    return insights_of_entries(session_id, store.read(session_id).entries, cost=cost, catalog=catalog)


@dataclass
class StoreInsights:
    """Insights across the sessions of a store (docs/insights.md, "Across sessions").

    Attributes:
        sessions: sessions read.
        skipped: sessions that could not be read.
        tools: name -> [calls, errors] over every session.
        error_loops, repeated_calls, interrupted_calls, compactions, tokens_cut, files_edited:
            sums over every session.
        abandoned_nanos: the cost of every abandoned branch (as each session records it).
        loop_sessions: ``(session id, loops, longest)`` of the sessions with error loops,
            most loops first (at most ``limit``).
        top_branches: the most expensive abandoned branches (at most ``limit``).
    """

    sessions: int = 0
    skipped: int = 0
    tools: dict[str, list[int]] = field(default_factory=dict)
    error_loops: int = 0
    repeated_calls: int = 0
    interrupted_calls: int = 0
    compactions: int = 0
    tokens_cut: int = 0
    files_edited: int = 0
    abandoned_nanos: int = 0
    loop_sessions: list[tuple[str, int, int]] = field(default_factory=list)
    top_branches: list[BranchCost] = field(default_factory=list)
    cost_mode: str = "auto"

    @property
    def tool_calls(self) -> int:
        """Every tool call."""
        return sum(v[0] for v in self.tools.values())

    @property
    def tool_errors(self) -> int:
        """Every error result."""
        return sum(v[1] for v in self.tools.values())

    def to_dict(self) -> dict[str, Any]:
        """The documented JSON shape (docs/insights.md)."""
        return {
            "schemaVersion": SCHEMA_VERSION,
            "costMode": self.cost_mode,
            "currency": "USD",
            "sessions": self.sessions,
            "skippedSessions": self.skipped,
            "toolCalls": self.tool_calls,
            "toolErrors": self.tool_errors,
            "tools": [{"name": name, "calls": v[0], "errors": v[1]}
                      for name, v in sorted(self.tools.items(), key=lambda item: (-item[1][0], item[0]))],
            "errorLoops": self.error_loops,
            "repeatedCalls": self.repeated_calls,
            "interruptedCalls": self.interrupted_calls,
            "compactions": self.compactions,
            "tokensCut": self.tokens_cut,
            "filesEdited": self.files_edited,
            "abandonedCost": str(nanos_to_decimal(self.abandoned_nanos)),
            "abandonedCostNanos": self.abandoned_nanos,
            "errorLoopSessions": [{"sessionId": sid, "errorLoops": loops, "longest": longest}
                                  for sid, loops, longest in self.loop_sessions],
            "expensiveAbandonedBranches": [b.to_dict() for b in self.top_branches],
        }


def store_insights(store: SessionStore, *, session_ids: Iterable[str] | None = None, limit: int = 10,
                   cost: str = "auto", catalog: Any = None) -> StoreInsights:
    """Insights summed over ``session_ids`` (default: every session of the store, internal
    ones included), reading each session once.

    A session that cannot be read is counted in ``skipped`` and left out.

    Raises:
        ValueError: an unknown cost mode.
        StorageError: the store could not be listed.
    """
    result = StoreInsights(cost_mode=cost)
    loops: list[tuple[str, int, int]] = []
    branches: list[BranchCost] = []
    for session_id in (store.session_ids() if session_ids is None else session_ids):
        try:
            entries = store.read(session_id).entries
        except SessionError:
            result.skipped += 1
            continue
        one = insights_of_entries(session_id, entries, cost=cost, catalog=catalog)
        f = one.facts
        result.sessions += 1
        for tool in f.tools.values():
            counts = result.tools.setdefault(tool.name, [0, 0])
            counts[0] += tool.calls
            counts[1] += tool.errors
        result.error_loops += len(f.error_loops)
        result.repeated_calls += f.repeats
        result.interrupted_calls += len(f.interrupted_calls)
        result.compactions += len(f.compactions)
        result.tokens_cut += one.tokens_cut
        result.files_edited += len(f.files_edited)
        result.abandoned_nanos += one.abandoned_nanos
        if f.error_loops:
            loops.append((session_id, len(f.error_loops), max(loop.length for loop in f.error_loops)))
        branches.extend(b for b in one.branches if b.totals.cost_nanos > 0)
        if len(branches) > 4 * limit:  # keep memory flat over a large store
            branches.sort(key=lambda b: -b.totals.cost_nanos)
            del branches[limit:]
    loops.sort(key=lambda item: (-item[1], -item[2], item[0]))
    branches.sort(key=lambda b: (-b.totals.cost_nanos, b.session_id, b.leaf_id))
    result.loop_sessions = loops[:limit]
    result.top_branches = branches[:limit]
    return result
