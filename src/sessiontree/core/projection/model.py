"""The projection's vocabulary: entry and message aliases, the default leaf, the
interrupted-call text, the result shapes (:class:`SessionProjection`,
:class:`SessionContext`, :class:`HistoricalProjection`) and the predicates that
classify compaction records (docs/rules/format.md seed:compaction-entry)."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final

from sessiontree.format.types import Entry as Entry  # the projection modules import it from here

__all__ = [
    "INTERRUPTED_TEXT",
    "LAST_ENTRY",
    "HistoricalProjection",
    "ProjectedEntry",
    "SessionContext",
    "SessionProjection",
    "is_active_compaction",
    "is_retired_record",
]


#: An agent message (a JSON object with a ``role``).
Message = dict[str, Any]


#: Text of the synthetic error result given to a tool call that never got a
#: result (docs/rules/projection.md seed:interrupted-tool-calls; P.5). It must not claim that the
#: call had no effect: the process may have stopped after the tool ran.
INTERRUPTED_TEXT: Final = (
    "Tool execution was interrupted before its result was recorded, so the "
    "result is unavailable. The tool may have run partly or completely; its "
    "effects are unknown and should be checked before retrying."
)


class _Leaf(enum.Enum):
    LAST = "last entry"


#: Default ``leaf_id``: the leaf as loaded, i.e. the last entry of the list
#: (docs/rules/projection.md Q.1, Q.13), or the target of a final upstream ``leaf`` record
#: (:func:`sessiontree.core.tree.loaded_leaf_id`), so that a projection of stored
#: entries and a manager that loaded them agree.
LAST_ENTRY: Final = _Leaf.LAST

#: What a builder's ``leaf_id`` takes: an entry id, ``None`` (no leaf) or :data:`LAST_ENTRY`.
LeafArg = str | None | _Leaf


#: Sentinel for a key that is absent, as opposed to present with the value None
#: (``mapping.get(key, ABSENT)``); compared by identity.
ABSENT: Final = object()


@dataclass(frozen=True)
class ProjectedEntry:
    """One entry of a projection and the model-visible messages it contributes.

    Attributes:
        source_entry: the (P.1-normalized) entry on the active branch; shared
            with the raw entries unless its content had to be normalized.
        messages: its messages in context order. ``[]`` for state entries,
            omitted edit targets and kept-tail entries (whose text lives in
            the boundary message).
    """

    source_entry: dict[str, Any]
    messages: list[dict[str, Any]]


@dataclass(frozen=True)
class SessionProjection:
    """The context-edited projection of one branch (docs/rules/projection.md seed:context-building, Q.17).

    Attributes:
        messages: the model-visible messages in context order (agent
            messages, not provider-converted).
        thinking_level: the last ``thinking_level_change`` on the path, ``"off"``
            by default.
        model: ``{"provider", "modelId"}`` of the last model change or
            assistant message on the path, ``None`` by default.
        context_window: the last ``context_window_change`` value, ``None`` by
            default (docs/rules/projection.md §3.8).
        system_message: the replayed system state of ``messages``
            (:func:`get_current_system_message`), ``None`` without one.
        sources: the context entries, exactly :func:`build_context_entries`
            for the same leaf (P.1-normalized).
        ends: per source, the offset in ``messages`` just past the messages
            it contributes (non-decreasing; the last is ``len(messages)``).
        entries: (property) one :class:`ProjectedEntry` per source with its
            slice of ``messages``; ``messages`` is their concatenation.

    Built by :func:`build_session_projection`. ``entries`` is materialized
    on first access from the source entries and, per source entry, the
    offset in ``messages`` where its messages end: most callers (building a
    request) only read ``messages``, and one object per entry of a long
    branch costs more than the rest of the projection.
    """

    messages: list[dict[str, Any]]
    thinking_level: str = "off"
    model: dict[str, Any] | None = None
    context_window: int | None = None
    system_message: dict[str, Any] | None = None
    #: The context entries, in order (``build_context_entries``).
    sources: Sequence[dict[str, Any]] = field(default=(), repr=False)
    #: ``ends[i]``: the offset in ``messages`` just past ``sources[i]``'s
    #: messages (non-decreasing; the last one is ``len(messages)``).
    ends: Sequence[int] = field(default=(), repr=False)

    @cached_property
    def entries(self) -> list[ProjectedEntry]:
        """One :class:`ProjectedEntry` per context entry, built once on first access."""
        messages, start, out = self.messages, 0, []
        for source, end in zip(self.sources, self.ends, strict=False):
            out.append(ProjectedEntry(source, messages[start:end]))
            start = end
        return out


@dataclass(frozen=True)
class SessionContext:
    """What :func:`build_session_context` returns (docs/rules/projection.md Q.1, Q.17).

    Attributes:
        messages: the projection's messages.
        thinking_level: as in :class:`SessionProjection`.
        model: as in :class:`SessionProjection`.
    """

    messages: list[dict[str, Any]] = field(default_factory=list)
    thinking_level: str = "off"
    model: dict[str, Any] | None = None


@dataclass(frozen=True)
class HistoricalProjection:
    """What :func:`build_historical_projection` returns.

    Attributes:
        projection: the rebuilt context, with the same shape and rules as a
            :class:`SessionProjection` (``sources``/``entries`` name the entry
            each message came from; the summary message belongs to the
            compaction entry).
        compaction: the retired ``compaction`` entry that shaped it, or
            ``None`` when the branch has no retired compaction after its
            latest active boundary; ``projection`` is then exactly the
            format's projection (:func:`build_session_projection`).
        first_kept_entry_id: the id where the kept entries start (the
            compaction's ``firstKeptEntryId`` found on the path before it), or
            ``None`` when nothing before the compaction was kept.
        kept_entries: how many path entries (of any type) lie between the
            first kept entry and the compaction, the first one included.
    """

    projection: SessionProjection
    compaction: dict[str, Any] | None = None
    first_kept_entry_id: str | None = None
    kept_entries: int = 0

    @property
    def is_historical(self) -> bool:
        """Whether a retired compaction shaped the result (``compaction`` is set)."""
        return self.compaction is not None


def message_role(message: Mapping[str, Any]) -> str | None:
    """The message's role when it is a string, else ``None``: a list or object
    role must not reach a set lookup (unhashable), whatever the input."""
    role = message.get("role")
    return role if isinstance(role, str) else None


def is_active_compaction(entry: Mapping[str, Any]) -> bool:
    """Whether ``entry`` is an active verbatim compaction boundary
    (docs/rules/format.md seed:compaction-entry).

    True only for ``type == "compaction"`` with ``details.strategy`` exactly
    ``"verbatim-lines"``; retired summary compactions are inert.
    """
    if entry.get("type") != "compaction":
        return False
    details = entry.get("details")
    return isinstance(details, Mapping) and details.get("strategy") == "verbatim-lines"


def is_retired_record(entry: Mapping[str, Any]) -> bool:
    """Whether ``entry`` is a retired, archival record (docs/rules/format.md seed:compaction-entry,
    "ContextCompactionEntry (Retired)", "Extended Message Types"; docs/rules/versions.md C.14).

    True for a ``compaction`` without ``details.strategy == "verbatim-lines"``
    (a summary compaction of older agents), a ``context_compaction`` (logical
    deletions of older agents) and a ``message`` whose role is
    ``compactionSummary``. Such records are kept, parsed and shown by audit
    and export tools, and contribute nothing to the model context of
    :func:`build_session_projection` (the format's projection). Only
    :func:`build_historical_projection` gives a retired ``compaction`` its
    old meaning back, for a historical view.
    """
    kind = entry.get("type")
    if kind == "compaction":
        return not is_active_compaction(entry)
    if kind == "context_compaction":
        return True
    if kind == "message":
        message = entry.get("message")
        return isinstance(message, Mapping) and message.get("role") == "compactionSummary"
    return False
