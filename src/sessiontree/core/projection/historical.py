"""The historical view: the context as an older agent rebuilt it around a retired
summary compaction (docs/rules/format.md seed:compaction-entry), an archival view
that current agents never send."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sessiontree.core.projection.build import project_branch
from sessiontree.core.projection.context import layout_at, scan_up
from sessiontree.core.projection.convert import iso_to_ms
from sessiontree.core.projection.incremental import ProjectionBuilder
from sessiontree.core.projection.model import (
    LAST_ENTRY,
    HistoricalProjection,
    LeafArg,
    Message,
    is_active_compaction,
)
from sessiontree.format.gcpause import gc_paused

__all__ = [
    "HISTORICAL_SUMMARY_PREFIX",
    "HISTORICAL_SUMMARY_SUFFIX",
    "build_historical_projection",
]


#: Wraps the summary of a retired compaction in the historical view
#: (:func:`build_historical_projection`). Older agents handed the model their
#: summary as one user turn wrapped in fixed sentences; this is our own
#: wording for it, so the historical view reproduces which records the model
#: saw and the summary text itself, not the old wrapper byte for byte.
HISTORICAL_SUMMARY_PREFIX = (
    "The earlier part of this conversation was compacted. A summary of it "
    "follows; the turns kept after the summary are shown as they were.\n\n<summary>\n"
)
HISTORICAL_SUMMARY_SUFFIX = "\n</summary>"


def _historical_summary_message(compaction: Mapping[str, Any]) -> Message:
    summary = compaction.get("summary")
    text = summary if isinstance(summary, str) else ""
    if not isinstance(compaction.get("foreign"), Mapping):
        text = HISTORICAL_SUMMARY_PREFIX + text + HISTORICAL_SUMMARY_SUFFIX
    # else: mapped from another agent's own record (a Claude Code isCompactSummary user
    # message, docs/agents/claude-code.md): its text is what that agent sent, as it is.
    return {
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "timestamp": iso_to_ms(compaction.get("timestamp")),
    }


def build_historical_projection(
    entries: Sequence[dict[str, Any]],
    leaf_id: LeafArg = LAST_ENTRY,
    *,
    by_id: Mapping[str, dict[str, Any]] | None = None,
    repair_trailing: bool = True,
) -> HistoricalProjection:
    """The context as the agent that wrote a retired summary compaction rebuilt it.

    This is an archival view, never the context a current agent sends: under
    format 4 a ``compaction`` without ``details.strategy == "verbatim-lines"``
    is inert (docs/rules/format.md seed:compaction-entry), so :func:`build_session_projection`
    shows every older turn again. Older agents treated every compaction as a
    boundary; this function answers "what did the model see back then?" with
    their rule (docs/rules/projection.md Q.4-Q.8 applied to any compaction, with the kept
    entries emitted as ordinary messages rather than serialized):

    * the path is the branch root to leaf, the leaf resolved as in
      :func:`build_context_entries`;
    * the *latest* ``compaction`` on the path wins, whatever its strategy.
      When it is an active verbatim boundary (or there is none), the result
      is the format's projection and :attr:`HistoricalProjection.compaction`
      is ``None``; older compactions never count;
    * that compaction contributes one ``user`` message,
      ``HISTORICAL_SUMMARY_PREFIX + summary + HISTORICAL_SUMMARY_SUFFIX``
      as one text block, timestamped with the compaction's time (ms); a
      compaction mapped from another agent's record (it has a ``foreign``
      object: Claude Code's summary message) gives its ``summary`` as it is,
      the text that agent sent;
    * the kept entries are those from the first path entry before the
      compaction whose id is its ``firstKeptEntryId`` up to the compaction
      (docs/rules/projection.md Q.7: ``null``, absent, unknown, off-branch or later ids keep nothing);
      each contributes its ordinary context message (docs/rules/projection.md Q.6), then every entry
      after the compaction does. Entries before the kept ones contribute
      nothing;
    * otherwise the format's rules apply unchanged: settings replayed over the
      whole path (docs/rules/projection.md Q.3, S), the latest context edit per target (R), tool
      pairing with synthetic interrupted results (docs/rules/decisions.md D-11; ``repair_trailing``
      as in :func:`build_session_projection`). Retired ``context_compaction``
      records and stored ``compactionSummary`` messages stay inert: their
      old effect is not reconstructed.

    Args:
        entries: all entries of the session, header excluded, in file order.
            Never modified.
        leaf_id: the leaf (``None`` or an unknown id: an empty result;
            default :data:`LAST_ENTRY`, the leaf as loaded).
        by_id: optional id index of ``entries`` (see :func:`build_context_entries`).
        repair_trailing: see :func:`build_session_projection`.

    Returns:
        A :class:`HistoricalProjection`. Raises nothing for malformed
        entries: they contribute what :func:`build_session_projection` would.
    """
    with gc_paused():
        scan = scan_up(entries, leaf_id, by_id)
        path = scan.path
        latest: int | None = None
        for index in range(len(path) - 1, -1, -1):
            if path[index].get("type") == "compaction":
                latest = index
                break
        if latest is None or is_active_compaction(path[latest]):
            return HistoricalProjection(project_branch(entries, leaf_id, by_id, repair_trailing))
        compaction = path[latest]
        first_kept = layout_at(path, latest).first_kept
        kept = path[first_kept:latest] if first_kept is not None else []
        builder = ProjectionBuilder(path[-1]["id"], scan.thinking_level, scan.model, scan.context_window,
                                    scan.edits)
        builder.copies = {entry["id"] for entry in scan.copies}
        builder.sources = [compaction, *kept, *path[latest + 1:]]
        # The summary goes through the same pairing step as everything else,
        # as a stand-in entry without an id (no edit applies to it).
        builder.extend(({"type": "message", "message": _historical_summary_message(compaction)},))
        builder.extend(builder.sources[1:])
        return HistoricalProjection(
            builder.result(repair_trailing, copy=False),
            compaction,
            kept[0]["id"] if kept else None,
            len(kept),
        )
