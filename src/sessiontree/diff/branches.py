"""``diff_branches``: two branches compared from a store or an open manager (docs/diff.md).

This module owns the comparison's entry point and result: what to compare is resolved
by :mod:`sessiontree.diff.sides` (leaf ids, unique prefixes, ``session:leaf`` for
another session such as a fork and its source, the defaults), the sessions are read
through the store protocol (from the store's summaries where it has them,
:mod:`sessiontree.diff.summarised`, else whole), and the cost columns are the tokens
and cost of each side, with the calls both sides hold counted once in a ``common``
column (:mod:`sessiontree.diff.cost` below the shared entries). The comparison itself
is :func:`sessiontree.core.diff.compare_paths`.

Cost rule (docs/diff.md, the rules of docs/usage.md): the billed records of each
path (:func:`sessiontree.core.usage.records_from_entries`) are matched by
their de-duplication key, so a call copied into a fork is recognised by its content;
a key held ``n`` times on A and ``m`` times on B puts ``min(n, m)`` calls in
``common`` and the rest in ``a`` or ``b``. Each column is priced as
:func:`sessiontree.usage.report.price_records` prices (recorded cost, catalogue
estimate where missing, unpriced calls named).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sessiontree.core.diff import BranchDiff, ColumnStats, ContextRow, SideContext, compare_paths
from sessiontree.core.render import entry_kind, entry_summary
from sessiontree.core.usage import (
    UsageRow,
    rows_from_entries,
)
from sessiontree.diff.cost import split_rest
from sessiontree.diff.sides import DiffInputError, OpenSession, _defaults, _EntryLeaves, _Sessions
from sessiontree.diff.summarised import summarised_diff
from sessiontree.format.gcpause import gc_paused
from sessiontree.format.types import Entry
from sessiontree.stores.base import SessionStore
from sessiontree.usage.report import PriceCatalog, Totals, price_rows, rows_query

__all__ = ["SCHEMA_VERSION", "BranchComparison", "DiffInputError", "OpenSession", "diff_branches"]

#: Version of the JSON shape of :meth:`BranchComparison.to_dict` (docs/diff.md).
SCHEMA_VERSION = 1

#: Characters of an entry or message summary in the JSON rows.
SUMMARY_CHARS = 200


@dataclass(frozen=True)
class BranchComparison:
    """Two branches compared, with their cost (docs/diff.md).

    Attributes:
        session_a, session_b: the session of each side (equal for two branches of one session).
        diff: the comparison of the paths (:class:`~sessiontree.core.diff.BranchDiff`).
        usage: ``{"common", "a", "b"}`` -> :class:`~sessiontree.usage.report.Totals`.
        cost_mode: as ``stats --cost``.
        catalog: the price catalogue used, or ``None``.
    """

    session_a: str
    session_b: str
    diff: BranchDiff
    usage: dict[str, Totals]
    cost_mode: str
    catalog: str | None

    @property
    def identical(self) -> bool:
        """Whether the two branches hold the same content and the same context."""
        return self.diff.identical

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of docs/diff.md (``schemaVersion`` 1). Text fields are as
        recorded; a terminal or HTML consumer must make them safe."""
        d = self.diff
        out: dict[str, Any] = {
            "schemaVersion": SCHEMA_VERSION,
            "a": {"sessionId": self.session_a, "leafId": d.leaf_a, "pathEntries": len(d.path_a)},
            "b": {"sessionId": self.session_b, "leafId": d.leaf_b, "pathEntries": len(d.path_b)},
            "forkPoint": {"a": d.fork_a, "b": d.fork_b} if d.common else None,
            "commonEntries": d.common,
            "identical": self.identical,
            "costMode": self.cost_mode,
            "currency": "USD",
            "catalog": self.catalog,
            "summary": {name: _column_dict(d.stats[name], self.usage[name]) for name in ("common", "a", "b")},
            "rows": [{"status": row.status, "a": _entry_dict(row.a), "b": _entry_dict(row.b)} for row in d.rows],
        }
        if d.context is not None:
            c = d.context
            out["context"] = {
                "identical": c.identical,
                "commonMessages": c.common,
                "a": _side_dict(c.a), "b": _side_dict(c.b),
                "settings": {name: {"a": va, "b": vb} for name, (va, vb) in c.settings.items()},
                "rows": [_context_row(row) for row in c.rows],
            }
        return out


def _iso(ms: float | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _column_dict(stats: ColumnStats, usage: Totals) -> dict[str, Any]:
    return {"entries": stats.entries, "messages": stats.messages, "toolCalls": dict(sorted(stats.tool_calls.items())),
            "toolCallCount": stats.tool_call_count,
            "files": [{"path": path, "tools": tools} for path, tools in stats.files.items()],
            "firstTimestamp": _iso(stats.first_ms), "lastTimestamp": _iso(stats.last_ms),
            "usage": usage.to_dict()}


def _entry_dict(entry: Entry | None) -> dict[str, Any] | None:
    if entry is None:
        return None
    return {"id": entry.get("id"), "kind": entry_kind(entry), "summary": entry_summary(entry, SUMMARY_CHARS)}


def _message_dict(item: tuple[dict[str, Any], str | None] | None) -> dict[str, Any] | None:
    if item is None:
        return None
    message, entry_id = item
    return {"entryId": entry_id, "role": message.get("role"),
            "summary": entry_summary({"type": "message", "message": message}, SUMMARY_CHARS)}


def _context_row(row: ContextRow) -> dict[str, Any]:
    return {"status": row.status, "a": _message_dict(row.a), "b": _message_dict(row.b)}


def _side_dict(side: SideContext) -> dict[str, Any]:
    return {"messages": side.messages, "boundaryId": side.boundary_id, "keptTailEntries": side.kept_tail,
            "contextEdits": side.edits, "syntheticResults": side.synthetic_results, "model": side.model,
            "thinkingLevel": side.thinking_level, "contextWindow": side.context_window,
            "systemMessage": side.system_message}


# --------------------------------------------------------------------------- cost columns


def _split_usage(diff: BranchDiff, cost: str) -> dict[str, list[UsageRow]]:
    """The billed usage of the two paths split into ``common`` / ``a`` / ``b`` rows, grouped
    for pricing in ``cost`` mode (module docstring). Entries both paths hold as the very
    same entry (one session's shared history) carry the same records, so they are all
    common (``min(c + x, c + y) = c + min(x, y)``): they are summed in one pass, with no
    key to hash and no record object. Only the rest is matched by key; copies (a fork's
    entries) are matched by key like the rest."""
    same = 0
    for ea, eb in zip(diff.path_a[:diff.common], diff.path_b[:diff.common], strict=True):
        if ea is not eb:
            break
        same += 1
    query = rows_query(cost)
    return split_rest(rows_from_entries(diff.path_a[:same], query), diff.path_a[same:], diff.path_b[same:], query)


def diff_branches(source: OpenSession | SessionStore, session_id: str, a: str | None = None,
                  b: str | None = None, *, context: bool = True, cost: str = "auto",
                  catalog: PriceCatalog | None = None) -> BranchComparison:
    """Compare two branches (docs/diff.md).

    Args:
        source: an open manager (its session is read from memory, others from its
            store; for its active leaf its kept projection is used, so calls this
            process appended and that are still running get no synthetic result)
            or any store (read-only: nothing is written).
        session_id: the session (a unique prefix is accepted).
        a, b: ``LEAF`` (an entry id of the session, or a unique prefix; any entry,
            not only a leaf: its branch ends there) or ``SESSION:LEAF`` for an
            entry of another session (``SESSION:`` alone: that session's leaf as
            loaded). Neither: the two most recent leaves (the older is A). One:
            compared with the session's active leaf (or, when it is that leaf,
            with the most recent other leaf).
        context: also compare the model contexts (two projections).
        cost: ``auto``, ``recorded`` or ``catalog``, as ``stats --cost``.
        catalog: prices for estimates (default: the offline catalogue).

    Returns:
        A :class:`BranchComparison`.

    Raises:
        DiffInputError: what to compare cannot be resolved (one line naming it).
        ValueError: an unknown cost mode.
        StorageError, InvalidSessionError: a session could not be read.
    """
    if cost not in ("auto", "recorded", "catalog"):
        raise ValueError(f"unknown cost mode {cost!r}: expected one of auto, recorded, catalog")
    # Comparing allocates per entry and makes no reference cycles: the cyclic collector's
    # passes over a large loaded session would find nothing (docs/decisions/gc-pause.md).
    with gc_paused():
        return _diff(source, session_id, a, b, context, cost, catalog)


def _diff(source: OpenSession | SessionStore, session_id: str, a: str | None, b: str | None, context: bool,
          cost: str, catalog: PriceCatalog | None) -> BranchComparison:
    sessions = _Sessions(source)
    sid = sessions.resolve(session_id)
    summarised = None
    if sessions.manager is None:
        # The shared history counted from the store's summaries where it has them (docs/diff.md, "Speed").
        summarised = summarised_diff(sessions, sid, a, b, context, cost)
    if summarised is not None:
        diff, split, side_a, side_b = summarised
    else:
        side_a, side_b = _defaults(sessions, _EntryLeaves(sessions, sid), sid, a, b)
        same_session = side_a.session_id == side_b.session_id
        projections = (sessions.projection(side_a), sessions.projection(side_b)) if context else (None, None)
        diff = compare_paths(sessions.entries(side_a.session_id), side_a.leaf, sessions.entries(side_b.session_id),
                             side_b.leaf, same_session=same_session, with_context=context, projections=projections,
                             indexes=(sessions.index(side_a.session_id), sessions.index(side_b.session_id)))
        split = _split_usage(diff, cost)
    usage: dict[str, Totals] = {}
    used: str | None = None
    for name, rows in split.items():
        usage[name], name_used = price_rows(rows, cost=cost, catalog=catalog)
        used = used or name_used
    return BranchComparison(side_a.session_id, side_b.session_id, diff, usage, cost, used)
