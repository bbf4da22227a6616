"""Two branches of one stored session compared from the store's summaries: the shared
history counted, not read (docs/diff.md, "Speed"; docs/decisions/diff-summaries.md).

A store with :class:`~sessiontree.stores.traits.EntrySummaries` (SQLite) gives, in one
snapshot and without parsing a record, the session's outline (ids, parents, types)
and each entry's timestamp, tool calls and billed usage records. From that alone this
module resolves the sides and walks both paths; it reads in full only the two tails
below the shared history (to find the fork point and align them), the records the two
projections depend on (``ProjectionBuilder.build_partial``), the shared history's
context edits and any records the usage ledger has not settled yet. The common
column is counted from the summaries by the rules the whole comparison applies to
entries (:func:`sessiontree.core.diff.stats_of`, ``rows_from_records``), so the result
is the one :func:`~sessiontree.diff.branches.diff_branches` gives from a whole read,
field for field (a conformance test compares the JSON on every store).

**Falls back** (returns ``None``; the caller reads the session whole) wherever the
summaries could give another answer or another error: a store without them, a side
in another session (``SESSION:LEAF``), an empty session, ``leaf`` records, duplicate
ids, a parent cycle, a branch without an active compaction boundary (its projection
would read the whole branch anyway), a record that disagrees with the outline or
fails its checks, a session changed meanwhile. As with the lazy open (docs/stores.md,
"Lazy open"), records never read are never checked: a damaged record in the shared
history is reported by the commands that read it (``show``, ``export``, ``check
--store``), not by ``diff``.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterator, Sequence
from typing import Protocol, overload

from sessiontree.core.diff import (
    BranchDiff,
    align_tails,
    column_stats,
    common_length,
    context_delta,
    leaves_by_recency,
    stats_of,
    tool_calls,
)
from sessiontree.core.projection import ProjectionBuilder, SessionProjection, latest_edits
from sessiontree.core.tree import LEAF_ENTRY_TYPE
from sessiontree.core.usage import BILLED_TYPES, UsageQuery, UsageRow, extend_rows, records_from_entry
from sessiontree.diff.cost import split_rest
from sessiontree.diff.sides import _defaults, _Sessions, _Side
from sessiontree.errors import InvalidSessionError, SessionChangedError, StorageError
from sessiontree.format.types import Entry
from sessiontree.stores.base import SessionOutline, SessionStore
from sessiontree.stores.records import SessionSummaries
from sessiontree.stores.traits import EntrySummaries
from sessiontree.usage.report import rows_query

__all__ = ["summarised_diff"]


class _SummaryStore(SessionStore, EntrySummaries, Protocol):
    """A store with summaries."""


class _Fallback(Exception):  # a control-flow signal, not an error
    """The summaries cannot give the whole read's answer: read the session whole."""


class _Records:
    """The full entries at outline positions, read once each and checked against the
    outline's columns (a record that disagrees: :class:`_Fallback`)."""

    def __init__(self, store: SessionStore, outline: SessionOutline) -> None:
        self.store, self.outline = store, outline
        self.read: dict[int, Entry] = {}

    def at(self, positions: Sequence[int]) -> list[Entry]:
        missing = [p for p in positions if p not in self.read]
        if missing:
            try:
                entries = self.store.read_entries_at(self.outline, missing)
            except (InvalidSessionError, SessionChangedError):
                raise _Fallback from None  # the whole read reports it, in file order
            ids, parents, types = self.outline.ids, self.outline.parent_ids, self.outline.types
            for position, entry in zip(missing, entries, strict=True):
                if (entry.get("id"), entry.get("parentId"), entry.get("type")) != (
                        ids[position], parents[position], types[position]):
                    raise _Fallback
                self.read[position] = entry
        return [self.read[p] for p in positions]


class StoredPath(Sequence[Entry]):
    """A root-to-leaf path as outline positions, its entries read from the store on first
    use (each read once): what :attr:`BranchDiff.path_a` holds when compared from
    summaries. Indexing and slicing give entries (a slice, a list)."""

    def __init__(self, records: _Records, positions: list[int]) -> None:
        self._records, self._positions = records, positions

    def __len__(self) -> int:
        return len(self._positions)

    @overload
    def __getitem__(self, index: int) -> Entry: ...
    @overload
    def __getitem__(self, index: slice) -> list[Entry]: ...

    def __getitem__(self, index: int | slice) -> Entry | list[Entry]:
        if isinstance(index, slice):
            return self._records.at(self._positions[index])
        return self._records.at([self._positions[index]])[0]

    def __iter__(self) -> Iterator[Entry]:
        return iter(self._records.at(self._positions))


class _OutlineLeaves:
    """The resolving answers (``_Leaves``) of an outline without ``leaf`` records: the last
    entry is the loaded leaf (docs/rules/tree.md F.1), leaves are ordered by their
    timestamps from the summaries."""

    def __init__(self, summaries: SessionSummaries, position_of: dict[str, int]) -> None:
        self.summaries, self.position_of = summaries, position_of

    def loaded(self) -> str | None:
        return self.summaries.outline.ids[-1]

    def recent(self) -> list[str]:
        outline = self.summaries.outline
        return leaves_by_recency(outline.ids, outline.parent_ids, self.summaries.timestamps)

    def has(self, entry_id: str) -> bool:
        return entry_id in self.position_of

    def ids(self) -> list[str]:
        return list(self.summaries.outline.ids)


def _walk(outline: SessionOutline, position_of: dict[str, int], leaf: str,
          stop: dict[int, int] | None = None) -> tuple[list[int], int]:
    """Positions from the root down to ``leaf``; with ``stop`` (position -> index on another
    path), the walk ends at the first position it holds: ``(that path's first index + 1
    entries, then this walk's own positions)`` as ``(own positions, shared count)``."""
    parents, get = outline.parent_ids, position_of.get
    path: list[int] = []
    current = get(leaf)
    steps = len(outline)
    while current is not None:
        if stop is not None:
            at = stop.get(current)
            if at is not None:
                path.reverse()
                return path, at + 1
        path.append(current)
        steps -= 1
        if steps < 0:
            raise _Fallback  # a parent cycle: get_branch stops where an id repeats
        parent = parents[current]
        current = get(parent) if parent is not None else None
    path.reverse()
    return path, 0


def _projection(records: _Records, outline: SessionOutline, path: list[int]) -> SessionProjection:
    ids, parents, types = outline.ids, outline.parent_ids, outline.types

    def fetch(branch_positions: list[int]) -> Sequence[Entry]:
        return records.at([path[i] for i in branch_positions])

    built = ProjectionBuilder.build_partial([ids[p] for p in path], [parents[p] for p in path],
                                            [types[p] for p in path], fetch)
    if built is None:
        raise _Fallback  # no active boundary: the projection needs the whole branch
    return built[0].result(True, copy=False)


def summarised_diff(sessions: _Sessions, session_id: str, a: str | None, b: str | None, context: bool,
                    cost: str) -> tuple[BranchDiff, dict[str, list[UsageRow]], _Side, _Side] | None:
    """The comparison of :func:`~sessiontree.diff.branches.diff_branches` from the store's
    summaries (module docstring), or ``None`` where it falls back (the caller then reads
    the session whole and gives the same answer).

    Args:
        sessions: the opened store (:class:`~sessiontree.diff.sides._Sessions`).
        session_id: the session compared, already resolved.
        a, b: the sides as ``--a``/``--b`` take them (an entry id or unique prefix), or
            ``None`` for the defaults of docs/diff.md ("What is compared"); a
            ``SESSION:LEAF`` side falls back.
        context: whether the context delta (the seed's "Context Building" on each side's
            projection, docs/diff.md "What the model saw") is computed.
        cost: the cost mode (``auto``, ``recorded``, ``catalog``; docs/diff.md "Columns and cost", docs/usage.md "Costs").

    Returns:
        ``(diff, usage rows by column, side A, side B)``.

    Raises:
        DiffInputError: what to compare cannot be resolved (as the whole comparison).
        StorageError: the store could not be read.
    """
    store = sessions.store
    if not isinstance(store, EntrySummaries) or any(spec is not None and ":" in spec for spec in (a, b)):
        return None
    try:
        summaries = store.read_summaries(session_id)
    except InvalidSessionError:
        return None  # the whole read reports it
    if summaries is None:
        return None
    try:
        return _compare(sessions, store, summaries, session_id, a, b, context, cost)
    except _Fallback:
        return None


def _compare(sessions: _Sessions, store: _SummaryStore, summaries: SessionSummaries, session_id: str,
             a: str | None, b: str | None, context: bool,
             cost: str) -> tuple[BranchDiff, dict[str, list[UsageRow]], _Side, _Side]:
    outline = summaries.outline
    count = len(outline)
    types = outline.types
    if count == 0 or LEAF_ENTRY_TYPE in types:
        raise _Fallback
    position_of = dict(zip(outline.ids, range(count), strict=False))
    if len(position_of) != count:
        raise _Fallback  # duplicate ids
    side_a, side_b = _defaults(sessions, _OutlineLeaves(summaries, position_of), session_id, a, b)
    if side_a.session_id != session_id or side_b.session_id != session_id:
        raise _Fallback
    records = _Records(store, outline)
    path_b, _ = _walk(outline, position_of, side_b.leaf)
    own_a, known = _walk(outline, position_of, side_a.leaf, {p: i for i, p in enumerate(path_b)})
    path_a = path_b[:known] + own_a
    tail_a, tail_b = records.at(path_a[known:]), records.at(path_b[known:])
    extra = common_length(tail_a, tail_b, True)
    common = known + extra
    shared = path_b[:known]
    if any(p >= q for p, q in itertools.pairwise(shared)):
        raise _Fallback  # a parent after its child in the file: the ledger's order is not the path's
    ids = outline.ids
    # The common column: the shared history from the summaries, then the matching tail entries.
    calls_at: dict[int, list[tuple[str, str | None]]] = {}
    for position, name, path in summaries.tool_calls:
        calls_at.setdefault(position, []).append((name, path))
    matched = tail_a[:extra]
    stamps = summaries.timestamps
    common_stats = stats_of(
        common, sum(1 for p in shared if types[p] == "message") + sum(1 for e in matched if e.get("type") == "message"),
        [stamps[p] for p in shared] + [e.get("timestamp") for e in matched],
        [call for p in shared for call in calls_at.get(p, ())]
        + [call for e in matched if e.get("type") == "message" for call in tool_calls(e.get("message"))])
    stats = {"common": common_stats, "a": column_stats(tail_a[extra:]), "b": column_stats(tail_b[extra:])}
    rows = align_tails(tail_a[extra:], tail_b[extra:])
    stored_a, stored_b = StoredPath(records, path_a), StoredPath(records, path_b)
    delta = None
    if context:
        edits = latest_edits(records.at([p for p in shared if types[p] == "context_edit"]))
        delta = context_delta((), side_a.leaf, stored_a, (), side_b.leaf, stored_b, by_a={}, by_b={},
                              projections=(_projection(records, outline, path_a), _projection(records, outline, path_b)),
                              shared=known, shared_edits=edits,
                              path_ids=([ids[p] for p in path_a], [ids[p] for p in path_b]))
    fork_a = ids[path_a[common - 1]] if common else None
    fork_b = ids[path_b[common - 1]] if common else None
    diff = BranchDiff(side_a.leaf, side_b.leaf, stored_a, stored_b, common, fork_a, fork_b, rows, stats, delta)
    query = rows_query(cost)
    return diff, split_rest(_shared_rows(store, summaries, records, shared, query), tail_a, tail_b,
                             query), side_a, side_b


def _shared_rows(store: EntrySummaries, summaries: SessionSummaries, records: _Records, shared: list[int],
                 query: UsageQuery) -> list[UsageRow]:
    """``rows_from_entries`` of the shared positions (ascending): the ledger's sums of the
    settled ones (``sum_usage``), then ``records_from_entry`` of the entries the ledger
    has not settled yet, read."""
    settled, types = summaries.settled, summaries.outline.types
    cut = bisect.bisect_left(shared, settled)
    try:
        rows = store.sum_usage(summaries, shared[:cut], query)
    except StorageError:
        raise _Fallback from None  # changed meanwhile, or a sum beyond 64 bits: the whole read sums it
    pending = [p for p in shared[cut:] if types[p] in BILLED_TYPES]
    if pending:
        rows = extend_rows(rows, [record for entry in records.at(pending)
                                  for record in records_from_entry(entry, keyed=False)], query)
    return rows
