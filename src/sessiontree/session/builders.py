"""Entry builders: the entry each ``append_*`` of a session manager appends, built and checked in memory.

A builder takes the manager's committed state (:class:`EntryState`: its tree,
and the system message of the active branch for a compaction) and the
method's arguments, checks the arguments against that state and returns the
new entry: ``parentId`` is the leaf (``branch_summary``: the branch point),
the id is new in the tree, the timestamp is now. A builder does no I/O and
changes nothing: the caller commits the entry through its store and only then
publishes it (:class:`~sessiontree.session.manager.SessionManager` on the
calling thread, :class:`~sessiontree.session.aio.AsyncSessionManager` on the
store's writer thread). Both managers build here, so an entry's fields, key
order and argument rules live in one place.

Invariants:

* Key order is the format's (docs/rules/format.md A.3-A.13): base fields
  first, except ``custom`` and ``custom_message`` (base fields last, A.11/A.12).
* Optional arguments use :data:`UNSET` for "not provided" (no key written),
  distinct from ``None`` (written as ``null``; docs/rules/format.md A.19).
* Ids come from :func:`~sessiontree.format.ids.new_entry_id` and stamps from
  :func:`now_iso`, both looked up in this module at call time.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sessiontree.core.tree import Entry, SessionTree
from sessiontree.errors import EntryNotFoundError
from sessiontree.format.bounds import normalize_nested_calls, normalize_summary
from sessiontree.format.ids import new_entry_id

__all__ = [
    "UNSET",
    "EntryState",
    "branch_summary_entry",
    "branched_session_entries",
    "compaction_entry",
    "context_edit_entry",
    "context_window_change_entry",
    "custom_entry",
    "custom_message_entry",
    "label_entry",
    "message_entry",
    "model_change_entry",
    "now_iso",
    "session_info_entry",
    "session_summary_entry",
    "thinking_level_change_entry",
]


class _Unset:
    """Marker for "argument not provided", distinct from ``None`` (docs/rules/format.md A.19)."""

    def __repr__(self) -> str:
        return "UNSET"


#: "Argument not provided": the entry gets no key for it.
UNSET: Any = _Unset()

_EDITABLE_ROLES = ("user", "assistant", "toolResult")

_second_prefix: tuple[int, str] = (-1, "")


def now_iso() -> str:
    """The current UTC time as ISO-8601 with milliseconds, e.g. ``2026-02-01T09:05:00.000Z``."""
    global _second_prefix
    ms = time.time_ns() // 1_000_000
    second, millis = divmod(ms, 1000)
    cached_second, prefix = _second_prefix
    if second != cached_second:
        # Formatting is the costly part of a stamp; appends come many per second.
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _second_prefix = (second, prefix)
    return f"{prefix}.{millis:03d}Z"


@dataclass(slots=True)
class EntryState:
    """What a builder reads of a manager: its committed state, in memory.

    Attributes:
        tree: the session's entries, id index and leaf. Builders read it
            (``leaf_id``, ``require``, ``get_branch``, ``labels``, ``in``) and
            never change it.
        system_message: returns the system-message state of the active branch
            (``None`` when there is none); called only by
            :func:`compaction_entry`, after its arguments were checked.
    """

    tree: SessionTree
    system_message: Callable[[], dict[str, Any] | None]


def _base(state: EntryState, entry_type: str, parent_id: str | None) -> Entry:
    return {"type": entry_type, "id": new_entry_id(state.tree), "parentId": parent_id, "timestamp": now_iso()}


def message_entry(state: EntryState, message: Mapping[str, Any]) -> Entry:
    """A ``message`` entry (docs/rules/format.md seed:message-entry).

    Tool results have their ``nestedCalls`` bounded (docs/rules/projection.md §3.10).

    Raises:
        ValueError: ``message`` is not an object with a string ``role``, or is an
            assistant message with ``stopReason == "pending"`` (docs/rules/projection.md §3.11).
    """
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise ValueError("A message must be an object with a string role")
    if message["role"] == "assistant" and message.get("stopReason") == "pending":
        raise ValueError('An assistant message with stopReason "pending" is still streaming and cannot be stored')
    if message["role"] == "toolResult" and isinstance(message.get("nestedCalls"), dict):
        message = {**message, "nestedCalls": normalize_nested_calls(message["nestedCalls"])}
    entry = _base(state, "message", state.tree.leaf_id)
    entry["message"] = message
    return entry


def thinking_level_change_entry(state: EntryState, level: str) -> Entry:
    """A ``thinking_level_change``; the level is stored as given (docs/rules/format.md A.7)."""
    entry = _base(state, "thinking_level_change", state.tree.leaf_id)
    entry["thinkingLevel"] = level
    return entry


def context_window_change_entry(state: EntryState, context_window: int) -> Entry:
    """A ``context_window_change`` of ``context_window`` tokens (docs/rules/projection.md §3.8).

    Raises:
        ValueError: not a positive ``int`` (``bool`` excluded).
    """
    if isinstance(context_window, bool) or not isinstance(context_window, int) or context_window <= 0:
        raise ValueError("Context window must be a positive integer")
    entry = _base(state, "context_window_change", state.tree.leaf_id)
    entry["contextWindow"] = context_window
    return entry


def model_change_entry(state: EntryState, provider: str, model_id: str) -> Entry:
    """A ``model_change`` (docs/rules/format.md A.8)."""
    entry = _base(state, "model_change", state.tree.leaf_id)
    entry["provider"] = provider
    entry["modelId"] = model_id
    return entry


def compaction_entry(state: EntryState, compacted_text: str, first_kept_entry_id: str | None,
                     tokens_before: int, details: Any) -> Entry:
    """A verbatim-line compaction boundary (docs/rules/format.md seed:compaction-entry;
    docs/rules/projection.md Q.14, §3.6).

    ``fromHook: true`` is written when ``details["rung"] == "extension"``; the
    active branch's system-message state, if any, is stored as the
    ``systemMessage`` checkpoint, stamped with the entry's time in epoch milliseconds.

    Raises:
        EntryNotFoundError: a non-null ``first_kept_entry_id`` is unknown.
    """
    if first_kept_entry_id is not None:
        state.tree.require(first_kept_entry_id)
    system = state.system_message()
    entry = _base(state, "compaction", state.tree.leaf_id)
    entry["summary"] = compacted_text
    entry["firstKeptEntryId"] = first_kept_entry_id
    entry["tokensBefore"] = tokens_before
    entry["details"] = details
    if isinstance(details, dict) and details.get("rung") == "extension":
        entry["fromHook"] = True
    if system is not None:
        stamp = datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00"))
        entry["systemMessage"] = {**system, "timestamp": int(stamp.timestamp() * 1000)}
    return entry


def custom_entry(state: EntryState, custom_type: str, data: Any = UNSET) -> Entry:
    """Extension state, not in context (docs/rules/format.md seed:custom-entry; A.11:
    base fields last; no ``data`` key when not provided, ``null`` when ``None``)."""
    base = _base(state, "custom", state.tree.leaf_id)
    entry: Entry = {"type": "custom", "customType": custom_type}
    if data is not UNSET:
        entry["data"] = data
    entry.update(id=base["id"], parentId=base["parentId"], timestamp=base["timestamp"])
    return entry


def session_info_entry(state: EntryState, name: str) -> Entry:
    """A display name, trimmed; ``""`` clears it (docs/rules/format.md seed:session-info-entry)."""
    entry = _base(state, "session_info", state.tree.leaf_id)
    entry["name"] = name.strip()
    return entry


def session_summary_entry(state: EntryState, summary: str, summarized_through_id: str,
                          usage: Any = UNSET) -> Entry:
    """A resume-picker summary anchored to a message (docs/rules/format.md
    seed:session-summary-entry, docs/rules/decisions.md D-13); the text is bounded.

    Raises:
        EntryNotFoundError: ``summarized_through_id`` is unknown.
    """
    state.tree.require(summarized_through_id)
    entry = _base(state, "session_summary", state.tree.leaf_id)
    entry["summary"] = normalize_summary(summary)
    entry["summarizedThroughId"] = summarized_through_id
    if usage is not UNSET:
        entry["usage"] = usage
    return entry


def custom_message_entry(state: EntryState, custom_type: str, content: Any, display: bool,
                         details: Any = UNSET) -> Entry:
    """An extension message that is in context (docs/rules/format.md
    seed:custom-message-entry; A.12: base fields last)."""
    base = _base(state, "custom_message", state.tree.leaf_id)
    entry: Entry = {"type": "custom_message", "customType": custom_type, "content": content, "display": display}
    if details is not UNSET:
        entry["details"] = details
    entry.update(id=base["id"], parentId=base["parentId"], timestamp=base["timestamp"])
    return entry


def label_entry(state: EntryState, target_id: str, label: str | None = None) -> Entry:
    """Set (non-empty ``label``) or clear (``""`` or ``None``: no ``label`` key for
    ``None``) a label (docs/rules/tree.md I.1, docs/rules/format.md A.13).

    Raises:
        EntryNotFoundError: ``target_id`` is unknown.
    """
    state.tree.require(target_id)
    entry = _base(state, "label", state.tree.leaf_id)
    entry["targetId"] = target_id
    if label is not None:
        entry["label"] = label
    return entry


def context_edit_entry(state: EntryState, target_id: str, replacement: dict[str, Any] | None) -> Entry:
    """A branch-local context edit (docs/rules/format.md seed:context-edit-entry,
    docs/rules/projection.md R.1/R.2).

    ``replacement``: ``None`` omits the target from model context;
    ``{"content": str | blocks}`` replaces only its content. A string for an
    assistant or tool-result target is stored as one text block.

    Raises (in this order):
        ValueError: a malformed replacement.
        EntryNotFoundError: unknown target.
        ValueError: the target is not on the active branch, or does not
            contribute editable model content.
    """
    if replacement is not None and not (
        isinstance(replacement, dict) and isinstance(replacement.get("content"), (str, builtins.list))
    ):
        raise ValueError("Context edit replacement must be null or contain string/array content")
    tree = state.tree
    target = tree.require(target_id)
    if not any(e["id"] == target_id for e in tree.get_branch()):
        raise ValueError(f"Entry {target_id} is not on the active branch")
    role = target.get("message", {}).get("role") if target.get("type") == "message" else None
    if not (target.get("type") == "custom_message" or role in _EDITABLE_ROLES):
        raise ValueError(f"Entry {target_id} does not contribute editable model content")
    if replacement is not None and role in ("assistant", "toolResult") and isinstance(replacement["content"], str):
        replacement = {**replacement, "content": [{"type": "text", "text": replacement["content"]}]}
    entry = _base(state, "context_edit", tree.leaf_id)
    entry["targetId"] = target_id
    entry["replacement"] = replacement
    return entry


def branch_summary_entry(state: EntryState, branch_from_id: str | None, summary: str, details: Any = UNSET,
                         from_hook: Any = UNSET, usage: Any = UNSET) -> Entry:
    """A ``branch_summary`` whose parent is ``branch_from_id`` (docs/rules/format.md
    seed:branch-summary-entry; docs/rules/tree.md G.2, docs/rules/decisions.md D-4).

    ``fromId`` is the leaf being left (``"root"`` when there is none); the
    summary is stored as given. Publishing the entry makes it the leaf, which
    is the leaf move.

    Raises:
        EntryNotFoundError: a non-null ``branch_from_id`` is unknown.
    """
    tree = state.tree
    if branch_from_id is not None:
        tree.require(branch_from_id)
    left = tree.leaf_id
    entry = _base(state, "branch_summary", branch_from_id)
    entry["fromId"] = left if left is not None else "root"
    entry["summary"] = summary
    for key, value in (("details", details), ("usage", usage), ("fromHook", from_hook)):
        if value is not UNSET:
            entry[key] = value
    return entry


def branched_session_entries(tree: SessionTree, leaf_id: str) -> builtins.list[Entry]:
    """The entries of a new session holding the branch that ends at ``leaf_id``
    (docs/rules/manager.md seed:create-branched; N.1-N.6, docs/rules/decisions.md D-5).

    Label entries on the path are dropped and the kept entries re-chained
    around them; a ``firstKeptEntryId`` on a dropped label moves to the next
    kept entry. The labels of path entries are recreated (original text and
    timestamp, new ids) after the last path entry. Entries that need no change
    are the tree's own dicts (so they keep their stored JSON text).

    Raises:
        EntryNotFoundError: ``leaf_id`` is unknown.
    """
    path = tree.get_branch(leaf_id)
    if not path:
        raise EntryNotFoundError(leaf_id)
    kept: builtins.list[Entry] = []
    dropped_labels: set[str] = set()
    previous_kept: str | None = None
    for entry in path:
        if entry.get("type") == "label":
            dropped_labels.add(entry["id"])
            continue
        if entry.get("parentId") != previous_kept:
            entry = {**entry, "parentId": previous_kept}
        kept.append(entry)
        previous_kept = entry["id"]
    position = {e["id"]: i for i, e in enumerate(path)}
    for i, entry in enumerate(kept):
        first_kept = entry.get("firstKeptEntryId") if entry.get("type") == "compaction" else None
        if isinstance(first_kept, str) and first_kept in dropped_labels:
            later = [e["id"] for e in path[position[first_kept] + 1:] if e["id"] not in dropped_labels]
            kept[i] = {**entry, "firstKeptEntryId": later[0] if later else None}
    on_path = {e["id"] for e in kept}
    used = set(on_path)
    parent = previous_kept
    for target, (text, stamp) in tree.labels.items():
        if target not in on_path:
            continue
        label_id = new_entry_id(used)
        used.add(label_id)
        kept.append({"type": "label", "id": label_id, "parentId": parent, "timestamp": stamp,
                     "targetId": target, "label": text})
        parent = label_id
    return kept
