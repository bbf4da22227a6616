"""The compare page: two branches side by side (docs/diff.md, docs/viewer.md).

Builds what ``compare.html`` shows from a
:class:`~sessiontree.diff.branches.BranchComparison`: the summary table, the
aligned rows (entries, or the messages of the model's view) with their status,
what shaped each context, and the branch tips the two pickers offer. Every
string reaches the page through Jinja2 autoescaping.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sessiontree.core.diff import leaf_ids
from sessiontree.core.render import entry_kind, entry_summary
from sessiontree.diff.branches import BranchComparison
from sessiontree.format.types import Entry
from sessiontree.usage.totals import cost_text

__all__ = ["ComparePage", "CompareRow", "SummaryRow", "build_compare_page"]

#: Characters of one side of a row.
ROW_CHARS = 300
#: Leaves offered by each picker, most recent first.
PICKER_LEAVES = 300


@dataclass(frozen=True)
class CompareRow:
    """One aligned row: ``status`` (``same``, ``onlyA``, ``onlyB``, ``changed``) and per side
    ``(entry id, kind, one-line text)`` or ``None``."""

    status: str
    a: tuple[str, str, str] | None
    b: tuple[str, str, str] | None


@dataclass(frozen=True)
class SummaryRow:
    """One row of the summary table (``common``, ``A only``, ``B only``)."""

    label: str
    entries: int
    messages: int
    tool_calls: str
    files: list[str]
    tokens: int
    cost: str
    first: str
    last: str


@dataclass
class ComparePage:
    """Everything ``compare.html`` shows.

    Attributes:
        session_id: the page's session.
        view: ``raw`` (entries) or ``model`` (the two contexts).
        a, b: ``(session id, leaf id)`` of each side.
        fork: the fork point line.
        summary: the summary rows.
        notes: what shaped the contexts, and settings that differ (model view).
        common_note: how many rows are left out because both sides share them.
        rows: the aligned rows.
        identical: the branches hold the same content and context.
        leaves: ``(leaf id, summary)`` tips of the session for the pickers.
    """

    session_id: str
    view: str
    a: tuple[str, str]
    b: tuple[str, str]
    fork: str
    summary: list[SummaryRow]
    notes: list[str]
    common_note: str
    rows: list[CompareRow]
    identical: bool
    leaves: list[tuple[str, str]] = field(default_factory=list)


def _stamp(ms: float | None) -> str:
    return "" if ms is None else datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _entry_cell(entry: Entry | None) -> tuple[str, str, str] | None:
    if entry is None:
        return None
    return (str(entry.get("id")), entry_kind(entry), entry_summary(entry, ROW_CHARS))


def _message_cell(item: tuple[dict[str, Any], str | None] | None) -> tuple[str, str, str] | None:
    if item is None:
        return None
    message, entry_id = item
    return (entry_id or "", str(message.get("role")), entry_summary({"type": "message", "message": message},
                                                                     ROW_CHARS))


def _setting(value: Any) -> str:
    if isinstance(value, dict) and "modelId" in value:
        return f"{value.get('provider')}/{value.get('modelId')}"
    if isinstance(value, dict):
        return "a system message"
    return "(none)" if value is None else str(value)


def build_compare_page(result: BranchComparison, session_id: str, view: str,
                       entries: list[Entry]) -> ComparePage:
    """The compare page of ``result`` (``view``: ``raw`` or ``model``); ``entries`` are the
    page session's, for the pickers."""
    d = result.diff
    summary = []
    for name, label in (("common", "common"), ("a", "A only"), ("b", "B only")):
        stats, usage = d.stats[name], result.usage[name]
        cost = cost_text(usage, 4)
        calls = ", ".join(f"{tool}: {n}" for tool, n in sorted(stats.tool_calls.items()))
        summary.append(SummaryRow(label, stats.entries, stats.messages, calls or "—",
                                  [f"{path} ({'/'.join(tools)})" for path, tools in stats.files.items()],
                                  usage.total_tokens, cost, _stamp(stats.first_ms), _stamp(stats.last_ms)))
    fork = (f"Fork point {d.fork_a}" + (f" (B: {d.fork_b})" if d.fork_b != d.fork_a else "")
            + f" after {d.common} common entries" if d.common else "No common entries: the roots differ")
    notes: list[str] = []
    if view == "model" and d.context is not None:
        c = d.context
        for label, side in (("A", c.a), ("B", c.b)):
            parts = [f"{side.messages} messages"]
            if side.boundary_id:
                parts.append(f"compaction boundary {side.boundary_id} (kept tail: {side.kept_tail} entries)")
            if side.edits:
                parts.append("context edits on " + ", ".join(side.edits))
            if side.synthetic_results:
                parts.append(f"{side.synthetic_results} synthetic result(s) for interrupted tool calls")
            notes.append(f"Context {label}: " + "; ".join(parts))
        notes += [f"{name}: A {_setting(va)}, B {_setting(vb)}" for name, (va, vb) in c.settings.items()]
        rows = [CompareRow(r.status, _message_cell(r.a), _message_cell(r.b)) for r in c.rows]
        common_note = f"{c.common} message(s) from the start are the same in both contexts (not shown)."
    else:
        rows = [CompareRow(r.status, _entry_cell(r.a), _entry_cell(r.b)) for r in d.rows]
        common_note = f"{d.common} common entries above the fork point (not shown)."
    by_id = {e.get("id"): e for e in entries}
    leaves = [(leaf, entry_summary(by_id[leaf], 60)) for leaf in leaf_ids(entries)[:PICKER_LEAVES]]
    return ComparePage(session_id, view, (result.session_a, d.leaf_a), (result.session_b, d.leaf_b), fork,
                       summary, notes, common_note, rows, result.identical, leaves)
