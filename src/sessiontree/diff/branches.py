"""``diff_branches``: two branches compared from a store or an open manager (docs/diff.md).

This module owns resolving what to compare (leaf ids, unique prefixes, ``session:leaf``
for another session such as a fork and its source, the defaults), loading the
sessions through the store protocol, and the cost columns: the tokens and cost of
each side, with the calls both sides hold counted once in a ``common`` column. The
comparison itself is :func:`sessiontree.core.diff.compare_paths`.

Cost rule (docs/diff.md, the rules of docs/usage.md): the billed records of each
path (:func:`sessiontree.core.usage.records_from_entries`) are matched by
their de-duplication key, so a call copied into a fork is recognised by its content;
a key held ``n`` times on A and ``m`` times on B puts ``min(n, m)`` calls in
``common`` and the rest in ``a`` or ``b``. Each column is priced as
:func:`sessiontree.usage.report.price_records` prices (recorded cost, catalogue
estimate where missing, unpriced calls named).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from sessiontree.core.diff import BranchDiff, ColumnStats, ContextRow, SideContext, compare_paths, leaf_ids
from sessiontree.core.projection import SessionProjection
from sessiontree.core.render import entry_kind, entry_summary
from sessiontree.core.tree import loaded_leaf_id
from sessiontree.core.usage import (
    UsageQuery,
    UsageRecord,
    UsageRow,
    records_from_entries,
    rows_from_entries,
    rows_from_records,
)
from sessiontree.errors import (
    AmbiguousEntryPrefixError,
    AmbiguousSessionPrefixError,
    SessionError,
    UnknownEntryPrefixError,
    UnknownSessionPrefixError,
)
from sessiontree.format.gcpause import gc_paused
from sessiontree.format.idprefix import resolve_entry_prefix, resolve_session_prefix
from sessiontree.format.types import Entry
from sessiontree.stores.base import SessionStore
from sessiontree.usage.report import PriceCatalog, Totals, price_rows, rows_query

__all__ = ["SCHEMA_VERSION", "BranchComparison", "DiffInputError", "OpenSession", "diff_branches"]

#: Version of the JSON shape of :meth:`BranchComparison.to_dict` (docs/diff.md).
SCHEMA_VERSION = 1

#: Characters of an entry or message summary in the JSON rows.
SUMMARY_CHARS = 200


@runtime_checkable
class OpenSession(Protocol):
    """What :func:`diff_branches` uses of an open manager (a
    :class:`~sessiontree.session.manager.SessionManager` is one; naming the protocol
    keeps this module off the concrete stores the manager module imports)."""

    def get_session_id(self) -> str:
        """The open session's id."""
        ...

    def get_entries(self) -> list[Entry]:
        """Its entries in file order."""
        ...

    def get_session_store(self) -> SessionStore:
        """The store it belongs to."""
        ...

    def get_leaf_id(self) -> str | None:
        """Its active leaf."""
        ...

    def get_entry_index(self) -> Mapping[str, Entry]:
        """Its ``{entry id: entry}`` index as kept (no copy)."""
        ...

    def build_session_projection(self) -> SessionProjection:
        """The projection of its active leaf (kept between calls)."""
        ...


class DiffInputError(SessionError, ValueError):
    """What to compare cannot be resolved: an unknown or ambiguous session or entry
    id, a malformed ``session:leaf``, or a session with fewer than two branches when
    no leaf is given. The message is one line naming the value."""


@dataclass
class _Side:
    session_id: str
    leaf: str


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


# --------------------------------------------------------------------------- resolving


class _Sessions:
    """Sessions loaded once each, from the manager when it holds them, else read from the store
    (read-only, docs/rules/decisions.md D-9)."""

    def __init__(self, source: OpenSession | SessionStore) -> None:
        if isinstance(source, OpenSession):
            self.manager: OpenSession | None = source
            self.store: SessionStore = source.get_session_store()
        else:
            self.manager = None
            self.store = source
        self.loaded: dict[str, Sequence[Entry]] = {}
        self.indexes: dict[str, Mapping[str, Entry]] = {}

    def resolve(self, text: str) -> str:
        """The one session id equal to or starting with ``text``."""
        if self.manager is not None and text == self.manager.get_session_id():
            return text
        if self.store.exists(text) if text else False:
            return text
        ids = self.store.session_ids()
        if self.manager is not None:
            ids = [*ids, self.manager.get_session_id()]
        try:
            # The one session-prefix rule of every edge (format/idprefix.py: subagents under their parent).
            return resolve_session_prefix(text, dict.fromkeys(ids))
        except (UnknownSessionPrefixError, AmbiguousSessionPrefixError) as exc:
            raise DiffInputError(str(exc)) from exc

    def projection(self, side: _Side) -> SessionProjection | None:
        """The manager's kept projection when ``side`` is its session's active leaf, else ``None``."""
        if (self.manager is not None and side.session_id == self.manager.get_session_id()
                and side.leaf == self.manager.get_leaf_id()):
            return self.manager.build_session_projection()
        return None

    def entries(self, session_id: str) -> Sequence[Entry]:
        found = self.loaded.get(session_id)
        if found is None:
            if self.manager is not None and session_id == self.manager.get_session_id():
                found = self.manager.get_entries()
            else:
                found = self.store.read(session_id).entries
            self.loaded[session_id] = found
        return found

    def index(self, session_id: str) -> Mapping[str, Entry]:
        """``{id: entry}`` of a loaded session's entries: the manager's own index for its
        session (:meth:`OpenSession.get_entry_index`), else built once."""
        found = self.indexes.get(session_id)
        if found is None:
            if self.manager is not None and session_id == self.manager.get_session_id():
                found = self.manager.get_entry_index()
            else:
                found = {e["id"]: e for e in self.entries(session_id) if isinstance(e.get("id"), str)}
            self.indexes[session_id] = found
        return found


def _unique(prefix: str, candidates: Sequence[str], what: str) -> str:
    """The one entry id ``prefix`` names: the rule of every edge (format/idprefix.py)."""
    try:
        return resolve_entry_prefix(prefix, candidates, what=what)
    except (UnknownEntryPrefixError, AmbiguousEntryPrefixError) as exc:
        raise DiffInputError(str(exc)) from None


def _entry_ids(entries: Sequence[Entry]) -> list[str]:
    return [e["id"] for e in entries if isinstance(e.get("id"), str) and e.get("type") != "leaf"]


class _Leaves(Protocol):
    """What resolving a side asks of one session: its loaded leaf, its leaves most recent
    first (:func:`~sessiontree.core.diff.leaf_ids`), whether an id is a whole entry id
    (not a ``leaf`` record), and its entry ids for a prefix."""

    def loaded(self) -> str | None: ...
    def recent(self) -> list[str]: ...
    def has(self, entry_id: str) -> bool: ...
    def ids(self) -> list[str]: ...


class _EntryLeaves:
    """:class:`_Leaves` of a session's loaded entries."""

    def __init__(self, sessions: _Sessions, session_id: str) -> None:
        self.sessions, self.session_id = sessions, session_id

    def loaded(self) -> str | None:
        return loaded_leaf_id(self.sessions.entries(self.session_id))

    def recent(self) -> list[str]:
        return leaf_ids(self.sessions.entries(self.session_id))

    def has(self, entry_id: str) -> bool:
        whole = self.sessions.index(self.session_id).get(entry_id)
        return whole is not None and whole.get("type") != "leaf"

    def ids(self) -> list[str]:
        return _entry_ids(self.sessions.entries(self.session_id))


def _side(sessions: _Sessions, leaves: _Leaves, session_id: str, spec: str) -> _Side:
    """``LEAF`` (an entry of ``session_id``) or ``SESSION:LEAF`` (``SESSION:`` alone: that
    session's leaf as loaded); ids may be unique prefixes."""
    sid = session_id
    leaf_text = spec
    if ":" in spec:
        other, _, leaf_text = spec.partition(":")
        if not other:
            raise DiffInputError(f"{spec!r}: expected SESSION:LEAF")
        sid = sessions.resolve(other)
        leaves = _EntryLeaves(sessions, sid)
    if not leaf_text:
        leaf = leaves.loaded()
        if leaf is None:
            raise DiffInputError(f"session {sid} has no leaf to compare")
        return _Side(sid, leaf)
    if leaves.has(leaf_text):  # a whole id: no need to list them all
        return _Side(sid, leaf_text)
    return _Side(sid, _unique(leaf_text, leaves.ids(), f"entry of session {sid}"))


def _defaults(sessions: _Sessions, leaves: _Leaves, session_id: str, a: str | None,
              b: str | None) -> tuple[_Side, _Side]:
    """The sides to compare; a missing side is the session's active leaf, or its most recent
    other leaf when the given side is the active one; with neither given, the two most
    recent leaves (the older is A)."""
    if a is not None and b is not None:
        return _side(sessions, leaves, session_id, a), _side(sessions, leaves, session_id, b)
    recent = leaves.recent()
    if a is None and b is None:
        if len(recent) < 2:
            raise DiffInputError(f"session {session_id} has {len(recent)} branch(es): give the leaves to compare")
        return _Side(session_id, recent[1]), _Side(session_id, recent[0])
    given = _side(sessions, leaves, session_id, a if a is not None else b)  # type: ignore[arg-type]
    active = leaves.loaded()
    other = active if active is not None and (active != given.leaf or given.session_id != session_id) else None
    if other is None:
        rest = [leaf for leaf in recent if leaf != given.leaf]
        if not rest:
            raise DiffInputError(f"session {session_id} has no other branch to compare {given.leaf} with")
        other = rest[0]
    second = _Side(session_id, other)
    return (given, second) if a is not None else (second, given)


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
    return _split_rest(rows_from_entries(diff.path_a[:same], query), diff.path_a[same:], diff.path_b[same:], query)


def _split_rest(same: list[UsageRow], rest_a: Sequence[Entry], rest_b: Sequence[Entry],
                query: UsageQuery) -> dict[str, list[UsageRow]]:
    """:func:`_split_usage` given the rows of the shared entries (``same``) and the entries
    after them on each side."""
    records_a = list(records_from_entries(rest_a))
    records_b = list(records_from_entries(rest_b))
    shared = Counter(r.key for r in records_a) & Counter(r.key for r in records_b)
    common: list[UsageRecord] = []
    only_a: list[UsageRecord] = []
    only_b: list[UsageRecord] = []
    left = Counter(shared)
    for record in records_a:
        if left[record.key] > 0:
            left[record.key] -= 1
            common.append(record)
        else:
            only_a.append(record)
    left = Counter(shared)
    for record in records_b:
        if left[record.key] > 0:
            left[record.key] -= 1
        else:
            only_b.append(record)
    return {"common": same + rows_from_records(common, query),
            "a": rows_from_records(only_a, query), "b": rows_from_records(only_b, query)}


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
        from sessiontree.diff.summarised import summarised_diff

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
