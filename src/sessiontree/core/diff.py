"""What differs between two branches: the pure comparison of two root-to-leaf paths
(docs/diff.md).

This module owns the alignment rule, the model-context delta and the per-column
counts (messages, tool calls, files touched, time span) of a branch diff. It reads
entries only; loading sessions, resolving leaves and pricing usage live above the
stores (:mod:`sessiontree.diff`).

Rules (docs/diff.md):

* **Matching.** Two entries *match* when they are the same entry (the same id in
  the same session) or have the same content key (:func:`content_key`: the entry
  without ``id``, ``parentId`` and timestamps), so a fork copied under new ids
  still matches its source.
* **Fork point.** The longest run of matching entries from the roots down is the
  common part; its last entry is the fork point. Below it, the two tails are
  aligned by the longest common subsequence of content keys: matching entries are
  ``same``; in a run that differs on both sides, entries of the same kind (entry
  type and message role) are paired in order as ``changed``; the rest are
  ``onlyA`` or ``onlyB``.
* **Model-context delta.** The two projections (docs/rules/projection.md
  seed:context-building) are compared message by message by the same rule,
  message keys leaving out the message timestamp; the settings (model, thinking
  level, context window, system message) are compared as wholes. A compaction, a
  context edit or a synthetic result for an interrupted call shows up as the
  messages it changes.
* **Columns.** ``common`` is the shared part; ``a`` and ``b`` are each side's tail
  below the fork point.
"""

from __future__ import annotations

import bisect
import difflib
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from sessiontree.core.projection import INTERRUPTED_TEXT, ProjectionBuilder, SessionProjection, latest_edits
from sessiontree.core.toolcalls import FILE_TOOLS, tool_calls
from sessiontree.core.tree import LEAF_ENTRY_TYPE, get_branch, parse_timestamp_ms, time_in_range
from sessiontree.format import jsonio
from sessiontree.format.gcpause import gc_paused
from sessiontree.format.types import Entry

__all__ = [
    "FILE_TOOLS",
    "STATUSES",
    "AlignedRow",
    "BranchDiff",
    "ColumnStats",
    "ContextDelta",
    "ContextRow",
    "SideContext",
    "align",
    "align_tails",
    "column_stats",
    "common_length",
    "compare_paths",
    "content_key",
    "context_delta",
    "leaf_ids",
    "leaves_by_recency",
    "message_key",
    "stats_of",
    "tool_calls",
]

#: Row statuses, in the order docs/diff.md lists them.
STATUSES: Final = ("same", "onlyA", "onlyB", "changed")


_ENTRY_NOISE: Final = frozenset({"id", "parentId", "timestamp"})


def _dumps(value: Any) -> bytes:
    """Canonical JSON bytes (sorted keys); values orjson refuses take jsonio's rule."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return jsonio.dumps(jsonio.sorted_keys(value))


def message_key(message: Mapping[str, Any]) -> bytes:
    """A message's content key: its JSON with sorted keys, ``timestamp`` left out."""
    return _dumps({k: v for k, v in message.items() if k != "timestamp"})


def content_key(entry: Mapping[str, Any]) -> bytes:
    """An entry's content key: the entry without ``id``, ``parentId`` and ``timestamp``
    (and without its message's ``timestamp``), as canonical JSON bytes. Equal keys mean
    equal content whatever the ids (a fork copied under new ids)."""
    body: dict[str, Any] = {k: v for k, v in entry.items() if k not in _ENTRY_NOISE}
    message = body.get("message")
    if isinstance(message, Mapping):
        body["message"] = {k: v for k, v in message.items() if k != "timestamp"}
    return _dumps(body)


def _kind(entry: Mapping[str, Any]) -> str:
    """Entry type, plus the role for messages: what ``changed`` pairs by."""
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        role = message.get("role") if isinstance(message, Mapping) else None
        return f"message/{role}" if isinstance(role, str) else "message"
    return kind if isinstance(kind, str) else "?"


# --------------------------------------------------------------------------- alignment


@dataclass(frozen=True, slots=True)
class AlignedRow:
    """One row of the aligned tails.

    Attributes:
        status: one of :data:`STATUSES`.
        a: the entry on side A (``None`` for ``onlyB``).
        b: the entry on side B (``None`` for ``onlyA``).
    """

    status: str
    a: Entry | None
    b: Entry | None


def _pair_run(run_a: Sequence[Any], run_b: Sequence[Any], kind_a: Sequence[str], kind_b: Sequence[str],
              make: Any) -> list[Any]:
    """A run that differs on both sides: same-kind items paired in order as ``changed``
    (the greedy rule of docs/diff.md), the others ``onlyA``/``onlyB``, order kept."""
    out: list[Any] = []
    j = 0
    for i, item in enumerate(run_a):
        # The next B item of the same kind, if any: B items skipped on the way are only in B.
        k = j
        while k < len(run_b) and kind_b[k] != kind_a[i]:
            k += 1
        if k == len(run_b):
            out.append(make("onlyA", item, None))
            continue
        out.extend(make("onlyB", None, run_b[m]) for m in range(j, k))
        out.append(make("changed", item, run_b[k]))
        j = k + 1
    out.extend(make("onlyB", None, run_b[m]) for m in range(j, len(run_b)))
    return out


def align(items_a: Sequence[Any], items_b: Sequence[Any], keys_a: Sequence[bytes], keys_b: Sequence[bytes],
          kinds_a: Sequence[str], kinds_b: Sequence[str], make: Any) -> list[Any]:
    """Align two sequences by the longest common subsequence of their keys (docs/diff.md).

    Args:
        items_a, items_b: the items (entries or messages).
        keys_a, keys_b: their content keys, one per item.
        kinds_a, kinds_b: their kinds, one per item (what ``changed`` pairs by).
        make: ``(status, a, b) -> row``.

    Returns:
        Rows in order: matches ``same``, the rest by :func:`_pair_run`.
    """
    matcher = difflib.SequenceMatcher(None, list(keys_a), list(keys_b), autojunk=False)
    rows: list[Any] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows.extend(make("same", items_a[i], items_b[j]) for i, j in zip(range(i1, i2), range(j1, j2),
                                                                          strict=True))
        elif tag == "delete":
            rows.extend(make("onlyA", items_a[i], None) for i in range(i1, i2))
        elif tag == "insert":
            rows.extend(make("onlyB", None, items_b[j]) for j in range(j1, j2))
        else:
            rows.extend(_pair_run(items_a[i1:i2], items_b[j1:j2], kinds_a[i1:i2], kinds_b[j1:j2], make))
    return rows


def align_tails(tail_a: Sequence[Entry], tail_b: Sequence[Entry]) -> list[AlignedRow]:
    """The rows of two tails below the fork point: :func:`align` by content keys, entries of
    the same kind (type and role) paired as ``changed`` (docs/diff.md)."""
    return align(tail_a, tail_b, [content_key(e) for e in tail_a], [content_key(e) for e in tail_b],
                 [_kind(e) for e in tail_a], [_kind(e) for e in tail_b], AlignedRow)


def common_length(tail_a: Sequence[Entry], tail_b: Sequence[Entry], same_session: bool) -> int:
    """How many entries from the start of two tails match (the rule of the fork point,
    module docstring): what a caller that knows the shared history adds to it."""
    return _common_length(tail_a, tail_b, same_session)


def _body(entry: Mapping[str, Any]) -> dict[str, Any]:
    """What :func:`content_key` encodes, as a dict (compared with ``==``: no encoding)."""
    body: dict[str, Any] = {k: v for k, v in entry.items() if k not in _ENTRY_NOISE}
    message = body.get("message")
    if isinstance(message, Mapping):
        body["message"] = {k: v for k, v in message.items() if k != "timestamp"}
    return body


def _common_length(path_a: Sequence[Entry], path_b: Sequence[Entry], same_session: bool, start: int = 0) -> int:
    """How many entries from the roots down match (the same entry, or the same content);
    the first ``start`` are known to be the same entries.

    Content is compared as values (``==`` on the entries without ids and timestamps),
    which is what equal content keys mean, without encoding a long shared history."""
    n = start
    for ea, eb in zip(itertools.islice(path_a, start, None), itertools.islice(path_b, start, None), strict=False):
        if ea is eb or (same_session and ea.get("id") == eb.get("id")) or _body(ea) == _body(eb):
            n += 1
            continue
        break
    return n


def _proper_root(path: Sequence[Entry], by_id: Mapping[str, Entry]) -> bool:
    """Whether the walk that gave ``path`` ended at a root (or a missing parent), not at a
    repeated id (a parent cycle, where walks from different entries stop differently)."""
    parent = path[0].get("parentId") if path else None
    return parent is None or parent not in by_id


def _paths(by_a: Mapping[str, Entry], leaf_a: str, by_b: Mapping[str, Entry], leaf_b: str,
           ) -> tuple[list[Entry], list[Entry], int]:
    """Both root-to-leaf paths (:func:`~sessiontree.core.tree.get_branch`), the shared
    history walked once.

    In one session (one index), B's path is walked whole and A's only up to the first
    entry of B's path it meets: above that entry both paths are the same entries. Any
    other case walks both.

    Returns:
        ``(path_a, path_b, known)``: the first ``known`` entries of both paths are the
        same entries (0 when not worked out this way).
    """
    path_b = get_branch(by_b, leaf_b)
    if by_a is not by_b or not _proper_root(path_b, by_b):
        return get_branch(by_a, leaf_a), path_b, 0
    position = {entry["id"]: index for index, entry in enumerate(path_b)}
    tail: list[Entry] = []
    seen: set[str] = set()
    current: Any = leaf_a
    while current is not None and current not in seen:
        at = position.get(current)
        if at is not None:
            tail.reverse()
            return path_b[:at + 1] + tail, path_b, at + 1
        entry = by_a.get(current)
        if entry is None:
            break
        seen.add(current)
        tail.append(entry)
        current = entry.get("parentId")
    tail.reverse()
    return tail, path_b, 0


def _project(entries: Sequence[Entry], leaf: str, by_id: Mapping[str, Entry], path: list[Entry]) -> SessionProjection:
    """:func:`~sessiontree.core.projection.build_session_projection` of ``leaf`` (trailing
    calls repaired), given its path so that a plain branch is not walked again (the
    builder falls back to the general build when the path is not plain)."""
    branch = list(path) if path and _proper_root(path, by_id) else None
    with gc_paused():
        return ProjectionBuilder.build(entries, leaf, by_id, branch=branch).result(True, copy=False)


# --------------------------------------------------------------------------- per-column counts


@dataclass
class ColumnStats:
    """Counts of one column of the summary (the common part, or one side's tail).

    Attributes:
        entries: entries of every type.
        messages: ``message`` entries.
        tool_calls: ``{tool name: calls}`` from assistant ``toolCall`` blocks.
        files: ``{path: sorted tool names}`` from the ``path`` argument of the
            :data:`FILE_TOOLS` calls, as recorded (never resolved or normalised).
        first_ms, last_ms: the earliest and latest entry timestamp (Unix ms), or ``None``.
    """

    entries: int = 0
    messages: int = 0
    tool_calls: dict[str, int] = field(default_factory=dict)
    files: dict[str, list[str]] = field(default_factory=dict)
    first_ms: float | None = None
    last_ms: float | None = None

    @property
    def tool_call_count(self) -> int:
        """All tool calls of the column."""
        return sum(self.tool_calls.values())


def column_stats(entries: Iterable[Entry]) -> ColumnStats:
    """Entries, messages, tool calls by name, files touched and time span of ``entries``
    (the rule of :class:`ColumnStats`)."""
    entries = entries if isinstance(entries, list) else list(entries)
    # Comprehensions rather than one loop doing everything: each pass runs in C as far as
    # it can, which counts over a long shared history.
    stamps = [entry.get("timestamp") for entry in entries]
    messages = [entry.get("message") for entry in entries if entry.get("type") == "message"]
    calls = [call for message in messages for call in tool_calls(message)]
    return stats_of(len(entries), len(messages), stamps, calls)


def stats_of(entries: int, messages: int, stamps: Sequence[Any],
             calls: Iterable[tuple[str, str | None]]) -> ColumnStats:
    """A :class:`ColumnStats` from its parts: the counts of entries and ``message``
    entries, every entry's ``timestamp`` (any value) and the :func:`tool_calls` pairs of
    the column's messages in path order. :func:`column_stats` is this over entries; a
    caller holding the parts (a stored summary) gets the same column without them."""
    stats = ColumnStats(entries=entries, messages=messages)
    # Format-4 stamps ("2026-03-02T09:00:00.000Z", 24 characters) order as strings, so
    # only the earliest and latest are parsed; any other form is parsed where it stands.
    # Their layout is checked first, all at once: a 24-character string ending in "Z" with
    # another layout ("2026-03-02 10:00:00.000Z") does not order as its time does.
    plain = [raw for raw in stamps if isinstance(raw, str) and len(raw) == 24 and raw[-1] == "Z"]
    if plain and not _plain_layout("".join(plain)):
        plain = [raw for raw in plain if _plain_layout(raw)]
    if len(plain) != len(stamps):
        rest = set(plain)
        for raw in stamps:
            if raw.__class__ is not str or raw not in rest:
                _widen(stats, parse_timestamp_ms(raw))
    if plain:
        low, high = parse_timestamp_ms(min(plain)), parse_timestamp_ms(max(plain))
        if low is None or high is None:  # an impossible date in the layout ("2026-13-45..."): parse each
            for raw in plain:
                _widen(stats, parse_timestamp_ms(raw))
        else:
            _widen(stats, low)
            _widen(stats, high)
    files: dict[str, set[str]] = {}
    counts = stats.tool_calls
    for name, path in calls:
        counts[name] = counts.get(name, 0) + 1
        if path is not None:
            files.setdefault(path, set()).add(name)
    stats.files = {path: sorted(tools) for path, tools in sorted(files.items())}
    return stats


#: Where a format-4 timestamp ("2026-03-02T09:00:00.000Z") holds which separator; every
#: other place but the last ("Z") holds an ASCII digit.
_SEPARATORS: Final = ((4, "-"), (7, "-"), (10, "T"), (13, ":"), (16, ":"), (19, "."))
_DIGITS: Final = tuple(sorted(set(range(23)) - {at for at, _ in _SEPARATORS}))


def _plain_layout(joined: str) -> bool:
    """Whether ``joined``, 24-character strings ending in "Z" put end to end, holds only
    the format-4 layout (which orders as its time does): one slice per place, in C."""
    if not joined.isascii():
        return False
    count = len(joined) // 24
    return (all(joined[at::24] == mark * count for at, mark in _SEPARATORS)
            and all(joined[at::24].isdigit() for at in _DIGITS))


def _widen(stats: ColumnStats, stamp: float | None) -> None:
    # A time outside years 1-9999 is no time (docs/listing.md, "Unknown times"): the JSON
    # could not write it ("0001-01-01T00:00:00+14:00" is in year 0 in UTC).
    if time_in_range(stamp):
        stats.first_ms = stamp if stats.first_ms is None else min(stats.first_ms, stamp)
        stats.last_ms = stamp if stats.last_ms is None else max(stats.last_ms, stamp)


# --------------------------------------------------------------------------- model-context delta


@dataclass(frozen=True, slots=True)
class ContextRow:
    """One row of the aligned projections.

    Attributes:
        status: one of :data:`STATUSES`.
        a, b: ``(message, source entry id)`` on each side, or ``None``.
    """

    status: str
    a: tuple[dict[str, Any], str | None] | None
    b: tuple[dict[str, Any], str | None] | None


@dataclass(frozen=True)
class SideContext:
    """What shaped one side's projection (docs/diff.md "what the model saw").

    Attributes:
        messages: messages in the projection.
        boundary_id: the active compaction boundary the projection starts from, or ``None``.
        kept_tail: entries of that boundary's kept tail (0 without one).
        edits: context edits in force on the path (targets whose content is replaced or omitted).
        synthetic_results: synthetic results given to interrupted tool calls.
        model, thinking_level, context_window, system_message: the replayed settings.
    """

    messages: int
    boundary_id: str | None
    kept_tail: int
    edits: list[str]
    synthetic_results: int
    model: dict[str, Any] | None
    thinking_level: str
    context_window: int | None
    system_message: dict[str, Any] | None


@dataclass(frozen=True)
class ContextDelta:
    """The two projections compared (docs/diff.md).

    Attributes:
        common: how many messages from the start both contexts share (same messages).
        rows: the aligned messages after those.
        a, b: what shaped each side.
        settings: ``{name: (a value, b value)}`` for each setting that differs
            (``model``, ``thinkingLevel``, ``contextWindow``, ``systemMessage``).
    """

    common: int
    rows: list[ContextRow]
    a: SideContext
    b: SideContext
    settings: dict[str, tuple[Any, Any]]

    @property
    def identical(self) -> bool:
        """Whether the next request of both sides would carry the same context."""
        return not self.settings and all(row.status == "same" for row in self.rows)


def _is_synthetic(message: Mapping[str, Any]) -> bool:
    if message.get("role") != "toolResult" or not message.get("isError"):
        return False
    content = message.get("content")
    return (isinstance(content, list) and len(content) == 1 and isinstance(content[0], Mapping)
            and content[0].get("text") == INTERRUPTED_TEXT)


def _owned(projection: SessionProjection, start: int) -> list[tuple[dict[str, Any], str | None]]:
    """The messages from ``start`` on, each with the id of the entry it comes from."""
    out: list[tuple[dict[str, Any], str | None]] = []
    ends, sources, messages = projection.ends, projection.sources, projection.messages
    at = start
    # Message j belongs to the first source whose end lies past j.
    for i in range(bisect.bisect_right(ends, start), len(sources)):
        sid = sources[i].get("id")
        owner = sid if isinstance(sid, str) else None
        out.extend((message, owner) for message in messages[at:ends[i]])
        at = ends[i]
    return out


def _count_synthetic(messages: Iterable[Mapping[str, Any]]) -> int:
    return sum(1 for m in messages if m.get("role") == "toolResult" and _is_synthetic(m))


def _side(projection: SessionProjection, path: Sequence[Entry], edits: Iterable[str], synthetic: int,
          path_ids: Sequence[str] | None = None) -> SideContext:
    boundary: str | None = None
    kept = 0
    sources = projection.sources
    if sources and sources[0].get("type") == "compaction":
        bid = sources[0].get("id")
        boundary = bid if isinstance(bid, str) else None
        # sources = [boundary, *kept tail, *every path entry after the boundary].
        for index in range(len(path) - 1, -1, -1):
            if (path[index] is sources[0] or path[index].get("id") == boundary if path_ids is None
                    else path_ids[index] == boundary):
                kept = len(sources) - 1 - (len(path) - 1 - index)
                break
    return SideContext(len(projection.messages), boundary, kept, sorted(edits), synthetic, projection.model,
                       projection.thinking_level, projection.context_window, projection.system_message)


def _same_message(ma: Mapping[str, Any], mb: Mapping[str, Any]) -> bool:
    """Equal content keys; the projection shares unchanged messages with the raw
    entries, so most shared messages are the very same object."""
    return ma is mb or ma == mb or message_key(ma) == message_key(mb)


def context_delta(entries_a: Sequence[Entry], leaf_a: str, path_a: Sequence[Entry],
                  entries_b: Sequence[Entry], leaf_b: str, path_b: Sequence[Entry], *,
                  by_a: Mapping[str, Entry] | None = None, by_b: Mapping[str, Entry] | None = None,
                  projections: tuple[SessionProjection | None, SessionProjection | None] = (None, None),
                  shared: int = 0, shared_edits: Mapping[str, Entry] | None = None,
                  path_ids: tuple[Sequence[str], Sequence[str]] | None = None) -> ContextDelta:
    """Compare what each side's next request would carry (docs/rules/projection.md
    seed:context-building, via :func:`build_session_projection` with trailing calls
    repaired, as for a stored session).

    Args:
        entries_a, entries_b: all entries of each side's session.
        leaf_a, leaf_b: the leaves.
        path_a, path_b: the root-to-leaf paths (for the edits and the kept tail).
        by_a, by_b: the id index of each side's entries, when the caller has it.
        projections: a side's projection when the caller already holds it (an open
            manager's, for its active leaf); ``None`` builds it.
        shared: how many entries from the roots down both paths hold as the very same
            entries (their context edits are read once).
        shared_edits: :func:`latest_edits` of those ``shared`` entries when the caller
            has it (a diff over a store's outline, whose shared entries are not read).
        path_ids: each path's entry ids when the caller has them (all unique): the
            kept tail is then found by id without reading the path's entries.
    """
    if by_a is None:
        by_a = {e["id"]: e for e in entries_a if isinstance(e.get("id"), str)}
    if by_b is None:
        by_b = by_a if entries_b is entries_a else {e["id"]: e for e in entries_b if isinstance(e.get("id"), str)}
    proj_a = projections[0] or _project(entries_a, leaf_a, by_a, list(path_a))
    proj_b = projections[1] or _project(entries_b, leaf_b, by_b, list(path_b))
    ma, mb = proj_a.messages, proj_b.messages
    common = 0
    for x, y in zip(ma, mb, strict=False):
        if not _same_message(x, y):
            break
        common += 1
    owned_a, owned_b = _owned(proj_a, common), _owned(proj_b, common)
    keys_a = [message_key(m) for m, _ in owned_a]
    keys_b = [message_key(m) for m, _ in owned_b]
    kinds_a = [str(m.get("role")) for m, _ in owned_a]
    kinds_b = [str(m.get("role")) for m, _ in owned_b]
    rows = align(owned_a, owned_b, keys_a, keys_b, kinds_a, kinds_b, ContextRow)
    # What both sides share is looked at once: the edits of the shared entries, the
    # synthetic results among the shared messages.
    edits = dict(shared_edits) if shared_edits is not None else latest_edits(path_a[:shared])
    edits_a = {**edits, **latest_edits(path_a[shared:])}
    edits_b = {**edits, **latest_edits(path_b[shared:])}
    synthetic = _count_synthetic(ma[:common])
    ids_a, ids_b = path_ids if path_ids is not None else (None, None)
    side_a = _side(proj_a, path_a, edits_a, synthetic + _count_synthetic(ma[common:]), ids_a)
    side_b = _side(proj_b, path_b, edits_b, synthetic + _count_synthetic(mb[common:]), ids_b)
    settings: dict[str, tuple[Any, Any]] = {}
    for name, va, vb in (("model", side_a.model, side_b.model),
                         ("thinkingLevel", side_a.thinking_level, side_b.thinking_level),
                         ("contextWindow", side_a.context_window, side_b.context_window),
                         ("systemMessage", side_a.system_message, side_b.system_message)):
        if _dumps(va) != _dumps(vb):
            settings[name] = (va, vb)
    return ContextDelta(common, rows, side_a, side_b, settings)


# --------------------------------------------------------------------------- the whole comparison


@dataclass(frozen=True)
class BranchDiff:
    """Two paths compared (docs/diff.md).

    Attributes:
        leaf_a, leaf_b: the leaves compared.
        path_a, path_b: their root-to-leaf paths (a list, or, compared from a store's
            summaries, a sequence reading the entries above the fork point on first use).
        common: how many entries from the roots down match.
        fork_a, fork_b: the fork point's id on each side (equal unless a copy
            renamed it), or ``None`` when the roots already differ.
        rows: the aligned tails below the fork point.
        stats: ``{"common", "a", "b"}`` -> :class:`ColumnStats`.
        context: the model-context delta, or ``None`` when not asked for.
    """

    leaf_a: str
    leaf_b: str
    path_a: Sequence[Entry]
    path_b: Sequence[Entry]
    common: int
    fork_a: str | None
    fork_b: str | None
    rows: list[AlignedRow]
    stats: dict[str, ColumnStats]
    context: ContextDelta | None

    @property
    def tail_a(self) -> list[Entry]:
        """Side A below the fork point."""
        return list(self.path_a[self.common:])

    @property
    def tail_b(self) -> list[Entry]:
        """Side B below the fork point."""
        return list(self.path_b[self.common:])

    @property
    def identical(self) -> bool:
        """Whether the two paths hold the same content (every row ``same``) and, when the
        context delta was computed, the two contexts are the same."""
        return (all(row.status == "same" for row in self.rows)
                and (self.context is None or self.context.identical))


def compare_paths(entries_a: Sequence[Entry], leaf_a: str, entries_b: Sequence[Entry], leaf_b: str, *,
                  same_session: bool, with_context: bool = True,
                  projections: tuple[SessionProjection | None, SessionProjection | None] = (None, None),
                  indexes: tuple[Mapping[str, Entry] | None, Mapping[str, Entry] | None] = (None, None),
                  ) -> BranchDiff:
    """Compare the branch ending at ``leaf_a`` with the one ending at ``leaf_b``.

    Args:
        entries_a, entries_b: all entries of each side's session (the same list when
            both leaves are in one session).
        leaf_a, leaf_b: leaf entry ids, each present in its list (the caller checks).
        same_session: both sides are one session, so equal ids mean the same entry.
        with_context: also build the model-context delta (two projections).
        projections: projections the caller already holds (see :func:`context_delta`).
        indexes: each side's ``{id: entry}`` index when the caller has it (the same
            object for both sides of one session); ``None`` builds it.

    Returns:
        A :class:`BranchDiff` (rules in the module docstring).
    """
    by_a = indexes[0] if indexes[0] is not None else {e["id"]: e for e in entries_a if isinstance(e.get("id"), str)}
    if indexes[1] is not None:
        by_b = indexes[1]
    else:
        by_b = by_a if entries_b is entries_a else {e["id"]: e for e in entries_b if isinstance(e.get("id"), str)}
    path_a, path_b, known = _paths(by_a, leaf_a, by_b, leaf_b)
    common = _common_length(path_a, path_b, same_session, known)
    tail_a, tail_b = path_a[common:], path_b[common:]
    rows = align_tails(tail_a, tail_b)
    stats = {"common": column_stats(path_a[:common]), "a": column_stats(tail_a), "b": column_stats(tail_b)}
    context = (context_delta(entries_a, leaf_a, path_a, entries_b, leaf_b, path_b, by_a=by_a, by_b=by_b,
                             projections=projections, shared=known) if with_context else None)
    fork_a = path_a[common - 1]["id"] if common else None
    fork_b = path_b[common - 1]["id"] if common else None
    return BranchDiff(leaf_a, leaf_b, path_a, path_b, common, fork_a, fork_b, rows, stats, context)


def leaf_ids(entries: Sequence[Entry]) -> list[str]:
    """The session's leaves (entries with no child; ``leaf`` records are not tree
    entries), most recent first: by entry timestamp, then by file position."""
    tree = [e.get("type") != LEAF_ENTRY_TYPE for e in entries]
    return leaves_by_recency([e.get("id") if keep else None for e, keep in zip(entries, tree, strict=True)],
                             [e.get("parentId") for e, keep in zip(entries, tree, strict=True) if keep],
                             [e.get("timestamp") for e in entries])


def leaves_by_recency(ids: Sequence[Any], parent_ids: Iterable[Any], timestamps: Sequence[Any]) -> list[str]:
    """The ids (text ones; position ``i`` is ``timestamps[i]``'s) that no entry names in
    ``parent_ids``, most recent first: by timestamp (:func:`parse_timestamp_ms`, an
    unparsable one as 0), then by position, later first. The one order of a session's leaves
    (:func:`leaf_ids` over entries, the summarised diff over a store's outline columns)."""
    parents = set(parent_ids)
    found = [(parse_timestamp_ms(timestamps[position]) or 0.0, position, entry_id)
             for position, entry_id in enumerate(ids) if isinstance(entry_id, str) and entry_id not in parents]
    found.sort(reverse=True)
    return [entry_id for _, _, entry_id in found]
