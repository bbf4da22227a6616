"""What one branch shows before it is drawn: one unit per row, raw or as the model sees it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sessiontree.core.projection import INTERRUPTED_TEXT, is_active_compaction, is_retired_record, latest_edits
from sessiontree.core.render import RETIRED_NOTE, entry_summary
from sessiontree.session.reading import ReadOnlySession

__all__ = [
    "Unit",
    "entry_message",
    "model_units",
    "raw_units",
]

def entry_message(entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The agent message an entry displays as (raw view), or ``None``."""
    kind = entry.get("type")
    message = entry.get("message")
    if kind == "message" and isinstance(message, Mapping):
        return message
    if kind == "custom_message":
        return {"role": "custom", "customType": entry.get("customType"), "content": entry.get("content"),
                "display": entry.get("display")}
    if kind == "branch_summary":
        return {"role": "branchSummary", "summary": entry.get("summary"), "fromId": entry.get("fromId")}
    return None


@dataclass
class Unit:
    """One row of a view before items are built: an entry, maybe with its messages."""

    entry: Mapping[str, Any] | None
    message: Mapping[str, Any] | None = None
    marks: list[tuple[str, str]] = field(default_factory=list)
    kind: str | None = None   # "omitted" / "compacted" placeholders
    title: str = ""
    text: str = ""


def raw_units(branch: Sequence[Mapping[str, Any]]) -> list[Unit]:
    """The raw view's units: one :class:`Unit` per entry of ``branch`` (root first, as
    given), each with the message it displays as (:func:`entry_message`, ``None`` for
    entries that carry none). No marks, no placeholders; raises nothing."""
    return [Unit(entry, entry_message(entry)) for entry in branch]


def model_units(session: ReadOnlySession, leaf_id: str | None, branch: Sequence[dict[str, Any]],
                agent_format: int | None = None) -> tuple[list[Unit], str]:
    """The projection of the branch ending at ``leaf_id`` (``branch``, root first) as units: each projected message with its source entry and marks,
    plus placeholders for entries that send nothing (compacted, kept in the boundary,
    omitted by an edit, dropped by tool pairing) and archival records.

    ``agent_format``: the format the agent wrote the session in (from its sync state),
    ``None`` when unknown. Below 4 (pi), the view is what pi sent: the historical
    projection, pi's own latest summary compaction standing for the turns before its
    kept entries (docs/viewer.md, "What pi sent"); otherwise the format-4 rule.
    """
    projection = session.build_session_projection(leaf_id)
    pi_compaction: Mapping[str, Any] | None = None
    if agent_format is not None and agent_format < 4:
        past = session.build_historical_projection(leaf_id)
        if past.compaction is not None:
            projection, pi_compaction = past.projection, past.compaction
    by_id = {pe.source_entry.get("id"): pe for pe in projection.entries}
    edits = latest_edits(branch)
    boundary = pi_compaction or next(
        (pe.source_entry for pe in projection.entries if is_active_compaction(pe.source_entry)), None)
    units: list[Unit] = []
    compacted: list[Mapping[str, Any]] = []

    def flush_compacted() -> None:
        if compacted:
            first, last = compacted[0].get("id"), compacted[-1].get("id")
            units.append(Unit(compacted[0], kind="compacted", title=f"{len(compacted)} entries not sent",
                              text=f"Entries {first} … {last} lie before the compaction boundary; the model "
                                   f"sees them only through the compaction message."))
            compacted.clear()

    # Branch order; the boundary's kept tail is shown where the boundary is (it is
    # inside the boundary's message), the entries before it are collapsed.
    boundary_id = boundary.get("id") if boundary is not None else None
    boundary_index = next((i for i, e in enumerate(branch) if e.get("id") == boundary_id), None)
    # The kept tail: context entries that lie before the boundary on the branch.
    kept_ids = ({e.get("id") for e in branch[:boundary_index]} & set(by_id)) if boundary_index is not None else set()
    for index, entry in enumerate(branch):
        entry_id = entry.get("id")
        pe = by_id.get(entry_id)
        if is_retired_record(entry) and entry is not pi_compaction:
            units.append(Unit(entry, marks=[("archival", RETIRED_NOTE)]))
            continue
        # pi sent its kept entries as themselves, after the summary: shown as messages below.
        pi_kept = pi_compaction is not None and entry_id in kept_ids
        if boundary_index is not None and index < boundary_index and not pi_kept:
            if entry_id in kept_ids:
                flush_compacted()
                units.append(Unit(entry, kind="omitted", title="kept in the compaction message",
                                  text=entry_summary(entry, 160),
                                  marks=[("kept", f"kept tail of boundary {boundary_id}")]))
            else:
                compacted.append(entry)
            continue
        flush_compacted()
        if pe is None:
            # Not a context entry at all (state, labels, names): shown as a note.
            if entry_message(entry) is None:
                units.append(Unit(entry))
            continue
        edit = edits.get(entry_id) if isinstance(entry_id, str) else None
        own = entry_message(entry)
        own_is_result = own is not None and own.get("role") == "toolResult"
        if not pe.messages:
            if edit is not None and edit.get("replacement") is None:
                units.append(Unit(entry, kind="omitted", title="omitted from the model's context",
                                  text=entry_summary(entry, 160),
                                  marks=[("edit", f"omitted by context edit {edit.get('id')}")]))
            elif own_is_result:
                units.append(Unit(entry, kind="omitted", title="dropped: orphaned or duplicate tool result",
                                  text=entry_summary(entry, 160), marks=[("edit", "dropped by tool pairing")]))
            elif own is None and entry.get("type") not in ("message", "custom_message", "branch_summary"):
                units.append(Unit(entry))
            else:
                units.append(Unit(entry, kind="omitted", title="sends nothing to the model",
                                  text=entry_summary(entry, 160)))
            continue
        for message in pe.messages:
            marks: list[tuple[str, str]] = []
            synthetic = message.get("role") == "toolResult" and (
                not own_is_result or own is None or message.get("toolCallId") != own.get("toolCallId"))
            if synthetic:
                marks.append(("synthetic", "synthetic result: the call was interrupted, none was recorded"))
            elif edit is not None and own is not None and message.get("role") == own.get("role") \
                    and message.get("content") is not own.get("content"):
                marks.append(("edit", f"content replaced by context edit {edit.get('id')}"))
            if entry is boundary and message.get("role") == "system":
                marks.append(("muted", "system checkpoint stored with the boundary"))
            if pi_compaction is not None and entry is pi_compaction:
                marks.append(("boundary", "pi's compaction: its summary stood for the turns before "
                                          f"{pi_compaction.get('firstKeptEntryId') or 'it'}"))
            elif pi_compaction is not None and entry_id in kept_ids:
                marks.append(("kept", f"kept by pi's compaction {pi_compaction.get('id')}: sent after its summary"))
            units.append(Unit(entry, message, marks))
    flush_compacted()
    model = projection.model
    note = (f"what pi sent (the session was written in format {agent_format}; pi's compaction "
            f"{pi_compaction.get('id')} applied as pi applied it; format 4 would send the whole history); "
            if pi_compaction is not None else "")
    note += (f"{len(projection.messages)} messages sent to the model"
            + (f"; model {model.get('provider')}/{model.get('modelId')}" if isinstance(model, Mapping) else "")
            + f"; thinking level {projection.thinking_level}")
    if any(m.get("content") and isinstance(m.get("content"), list) and any(
            isinstance(b, Mapping) and b.get("text") == INTERRUPTED_TEXT for b in m["content"])
           for m in projection.messages if m.get("role") == "toolResult"):
        note += "; includes synthetic results for interrupted tool calls"
    return units, note
