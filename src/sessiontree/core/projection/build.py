"""The public builders of a branch's context (docs/rules/projection.md
seed:context-building): its context entries, its projection and the plain
context (messages, thinking level, model), each a thin entry point over
:class:`~sessiontree.core.projection.incremental.ProjectionBuilder`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sessiontree.core.projection.context import context_order, index_by_id, last_entry_id, layout_at, scan_up
from sessiontree.core.projection.incremental import ProjectionBuilder
from sessiontree.core.projection.model import LAST_ENTRY, Entry, LeafArg, SessionContext, SessionProjection
from sessiontree.format.gcpause import gc_paused

__all__ = [
    "build_context_entries",
    "build_session_context",
    "build_session_projection",
]


def build_context_entries(
    entries: Sequence[dict[str, Any]],
    leaf_id: LeafArg = LAST_ENTRY,
    *,
    by_id: Mapping[str, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Active-branch entries that shape the context (docs/rules/projection.md Q.13).

    Args:
        entries: all entries of the session, header excluded, in file order.
        leaf_id: the leaf. ``None`` gives ``[]``; an unknown id gives ``[]``;
            :data:`LAST_ENTRY` (default) uses the leaf as loaded: the last
            entry of ``entries``, or the target of a final ``leaf`` record.
        by_id: optional index ``{entry id: entry}`` of ``entries`` that the
            caller already keeps (e.g. a :class:`~sessiontree.core.tree.SessionTree`'s),
            saving one pass over all entries; it must equal
            ``{e["id"]: e for e in entries}``.

    Returns:
        The P.1-normalized path root first when there is no active boundary;
        otherwise ``[boundary, *kept-tail entries (all types), *entries after
        the boundary]``. Entries before the boundary and outside the tail are
        left out.
    """
    scan = scan_up(entries, leaf_id, by_id, context_only=True)
    return context_order(scan.path, layout_at(scan.path, scan.boundary))


def build_session_projection(
    entries: Sequence[dict[str, Any]],
    leaf_id: LeafArg = LAST_ENTRY,
    *,
    by_id: Mapping[str, dict[str, Any]] | None = None,
    repair_trailing: bool = True,
) -> SessionProjection:
    """The context-edited projection of one branch
    (docs/rules/projection.md seed:context-building; Q.17, R, S, docs/rules/decisions.md D-11).

    Args:
        entries: all entries of the session, header excluded, in file order.
            Never modified.
        leaf_id: the leaf, resolved as in :func:`build_context_entries`
            (``None`` or an unknown id: an empty projection; default
            :data:`LAST_ENTRY`), so that ``entries`` of the result are exactly
            that function's output.
        by_id: optional index ``{entry id: entry}`` of ``entries`` (see
            :func:`build_context_entries`).
        repair_trailing: close tool calls still open at the end of the branch
            with synthetic results. ``True`` for sessions loaded from a store
            or file; ``False`` for entries this process appended (their tools
            may still be running).

    Returns:
        A :class:`SessionProjection`:

        * no active boundary: every path entry contributes its context
          message (docs/rules/projection.md Q.6) with the latest context edit applied;
        * with the latest verbatim boundary: the boundary entry contributes
          ``[systemMessage checkpoint (if stored), boundary message]`` whose
          text is ``BOUNDARY_PREFIX + summary`` plus the kept tail (edited,
          converted, pair-repaired and serialized in retained mode); kept-tail
          entries contribute ``[]``; entries after the boundary contribute as
          above;
        * tool pairing (docs/rules/decisions.md D-11) is applied across the result; synthetic results
          belong to the entry whose message closes the window, or to the last
          entry for trailing ones;
        * settings are replayed from the raw entries of the whole path.

    Cost: one walk up from the leaf and two passes over the path (settings,
    boundary and edits; then messages with tool pairing inline), so it is
    linear in the branch length. The cyclic garbage collector is paused
    meanwhile: the projection allocates one container per entry and no
    reference cycles, so collector passes over a large loaded session would
    be spent for nothing.
    """
    with gc_paused():
        return project_branch(entries, leaf_id, by_id, repair_trailing)


# The projection with the collector left as it is (build_historical_projection pauses it itself).
def project_branch(
    entries: Sequence[Entry],
    leaf_id: LeafArg,
    by_id: Mapping[str, Entry] | None,
    repair_trailing: bool,
) -> SessionProjection:
    """:func:`build_session_projection`'s result without pausing the garbage collector
    (the caller does, or does not need to)."""
    return ProjectionBuilder.build(entries, leaf_id, by_id).result(repair_trailing, copy=False)


def build_session_context(
    entries: Sequence[dict[str, Any]],
    leaf_id: LeafArg = LAST_ENTRY,
    *,
    repair_trailing: bool = True,
) -> SessionContext:
    """Messages, thinking level and model of one branch
    (docs/rules/projection.md seed:context-building; Q.1, Q.17).

    The leaf is resolved as in the original ``buildSessionContext`` (docs/rules/projection.md Q.1):
    ``None`` gives the empty context; an unknown id and :data:`LAST_ENTRY`
    both use the leaf as loaded (the last entry of ``entries``, or the target
    of a final ``leaf`` record); no entries give the empty context.
    Everything else is :func:`build_session_projection` for that leaf.
    """
    if leaf_id is None:
        return SessionContext()
    by_id = index_by_id(entries)
    leaf = leaf_id if isinstance(leaf_id, str) and leaf_id in by_id else last_entry_id(entries, by_id)
    projection = build_session_projection(entries, leaf, by_id=by_id, repair_trailing=repair_trailing)
    return SessionContext(
        messages=projection.messages,
        thinking_level=projection.thinking_level,
        model=projection.model,
    )
