"""What shapes a branch's context besides its messages: the replayed system
message (docs/rules/projection.md §3.6), the path from the leaf and where its
active boundary and kept tail sit (Q.4, Q.7, Q.13), context edits (R) and
settings such as model and thinking level (Q.3, S), all taken in by one walk up
from the leaf (:func:`scan_up`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sessiontree.core.projection.convert import CONTENT_ROLES, context_message, normalize_entry
from sessiontree.core.projection.model import (
    ABSENT,
    LAST_ENTRY,
    Entry,
    LeafArg,
    Message,
    is_active_compaction,
    message_role,
)
from sessiontree.core.tree import AncestorLinks, get_branch, loaded_leaf_id

__all__ = ["get_current_system_message", "latest_edits"]

#: An entry type, kept by :func:`latest_edits` (a stored dict or a read-only mapping).
_EntryT = TypeVar("_EntryT", bound=Mapping[str, Any])


def _system_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b["text"]
            for b in content
            if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return ""


def get_current_system_message(messages: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Replay the ``system`` messages of ``messages`` in order
    (docs/rules/projection.md §3.6, seed:system-messages).

    * content: each message's text (strings as they are, text blocks joined
      with ``"\\n"``) is collected when non-empty; the collection is joined
      with ``"\\n\\n"``;
    * ``sections``: a name -> value map; ``None`` deletes, a new name goes to
      the end, an existing name keeps its place;
    * tools: per message ``toolsRemoved`` (by name) first, then ``toolsAdded``
      (set by name).

    Returns:
        ``{"role": "system", "content": str, "sections"?: {...}, "toolsAdded"?:
        [current tools], "timestamp": <first system message's timestamp or
        0>}`` (``sections``/``toolsAdded`` only when non-empty), or ``None``
        when there is no system message. Inputs are not modified.
    """
    texts: list[str] = []
    sections: dict[str, Any] = {}
    tools: dict[Any, Any] = {}
    timestamp: Any = ABSENT
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") != "system":
            continue
        if timestamp is ABSENT:
            timestamp = message.get("timestamp")
        text = _system_text(message.get("content"))
        if text:
            texts.append(text)
        patch = message.get("sections")
        if isinstance(patch, Mapping):
            for name, value in patch.items():
                if value is None:
                    sections.pop(name, None)
                else:
                    sections[name] = value
        removed = message.get("toolsRemoved")
        for tool in removed if isinstance(removed, list) else []:
            if isinstance(tool, Mapping):
                tools.pop(tool.get("name"), None)
        added = message.get("toolsAdded")
        for tool in added if isinstance(added, list) else []:
            if isinstance(tool, Mapping):
                tools[tool.get("name")] = tool
    if timestamp is ABSENT:  # no system message (hence no tools either)
        return None
    result: dict[str, Any] = {"role": "system", "content": "\n\n".join(texts)}
    if sections:
        result["sections"] = sections
    if tools:
        result["toolsAdded"] = list(tools.values())
    result["timestamp"] = 0 if timestamp is None else timestamp
    return result


def index_by_id(entries: Iterable[Entry]) -> dict[str, Entry]:
    """The entries that have a string ``id``, by that id (a later duplicate wins)."""
    return {e["id"]: e for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)}


def last_entry_id(entries: Sequence[Entry], by_id: Mapping[str, Entry] | None = None) -> str | None:
    """The leaf as loaded (:data:`LAST_ENTRY`): one rule with the manager's."""
    return loaded_leaf_id(entries, by_id)


def resolve_leaf(entries: Sequence[Entry], leaf_id: LeafArg,
                 by_id: Mapping[str, Entry] | None) -> tuple[str | None, Mapping[str, Entry]]:
    """The leaf to walk from and the id index (docs/rules/projection.md Q.13 leaf rules):
    ``None`` when ``leaf_id`` is ``None`` or unknown; the last entry for
    :data:`LAST_ENTRY`."""
    if leaf_id is None:
        return None, by_id or {}
    if by_id is None:
        by_id = index_by_id(entries)
    if leaf_id is LAST_ENTRY:
        return last_entry_id(entries, by_id), by_id
    if isinstance(leaf_id, str) and leaf_id in by_id:
        return leaf_id, by_id
    return None, by_id


@dataclass(frozen=True)
class _Layout:
    """Where the active boundary and its kept tail sit on a path (docs/rules/projection.md Q.4, Q.7)."""

    boundary: int | None  # index of the latest verbatim compaction
    first_kept: int | None  # index where the kept tail starts, if any


def _layout(path: Sequence[Entry]) -> _Layout:
    boundary: int | None = None
    for index in range(len(path) - 1, -1, -1):
        if is_active_compaction(path[index]):
            boundary = index
            break
    return layout_at(path, boundary)


def layout_at(path: Sequence[Entry], boundary: int | None) -> _Layout:
    """The boundary at ``boundary`` (or none) and where its kept tail starts."""
    if boundary is None:
        return _Layout(None, None)
    first_kept_id = path[boundary].get("firstKeptEntryId")
    if not isinstance(first_kept_id, str):
        return _Layout(boundary, None)
    # Backwards from the boundary: the tail is usually short and close to it. A path
    # holds each id once (a walk by parent links stops where an id repeats), so the
    # entry found is the one a forward search finds.
    for index in range(boundary - 1, -1, -1):
        if path[index].get("id") == first_kept_id:
            return _Layout(boundary, index)
    # Unknown, after the boundary, on another branch or the boundary itself:
    # no tail, never a resurrection of older content (docs/rules/projection.md seed:context-building).
    return _Layout(boundary, None)


def context_order(path: list[Entry], layout: _Layout) -> list[Entry]:
    """The context entries of a root-first ``path``, in context order:
    the active boundary, its kept tail, then what follows it; ``path`` itself when there is no boundary."""
    if layout.boundary is None:
        return path
    tail = path[layout.first_kept : layout.boundary] if layout.first_kept is not None else []
    return [path[layout.boundary], *tail, *path[layout.boundary + 1 :]]


def kept_tail_length(layout: _Layout) -> int:
    """How many entries the active boundary keeps before it (0 without a boundary or a kept tail)."""
    if layout.boundary is None or layout.first_kept is None:
        return 0
    return layout.boundary - layout.first_kept


# Roles a context edit may target inside a `message` entry (docs/rules/projection.md R.1).
_EDITABLE_ROLES = frozenset({"user", "assistant", "toolResult"})
# Roles whose string replacement becomes one text block (docs/rules/projection.md R.2).
_ARRAY_CONTENT_ROLES = frozenset({"assistant", "toolResult"})


def _valid_replacement(edit: Mapping[str, Any]) -> bool:
    if "replacement" not in edit:
        return False
    replacement = edit["replacement"]
    return replacement is None or (
        isinstance(replacement, Mapping) and isinstance(replacement.get("content"), (str, list))
    )


def latest_edits(path: Iterable[_EntryT]) -> dict[str, _EntryT]:
    """The context edit in force per target on a path (docs/rules/projection.md R.4).

    Args:
        path: entries root first (e.g. a branch); never modified.

    Returns:
        ``{targetId: context_edit entry}``: for each target, the latest
        ``context_edit`` on the path whose ``targetId`` is a string and whose
        ``replacement`` is ``null`` or ``{"content": str | list}``. Malformed
        edits are inert: they neither apply nor hide an earlier valid edit.
        Whether the target is editable is not checked here (R.1).
    """
    edits: dict[str, _EntryT] = {}
    for entry in path:
        if entry.get("type") == "context_edit":
            target = entry.get("targetId")
            # A malformed edit is rejected on load and append; if one slips
            # through it is inert rather than hiding an earlier valid edit.
            if isinstance(target, str) and _valid_replacement(entry):
                edits[target] = entry
    return edits


def _is_editable(entry: Mapping[str, Any]) -> bool:
    if entry.get("type") == "custom_message":
        return True
    message = entry.get("message")
    return (
        entry.get("type") == "message"
        and isinstance(message, Mapping)
        and message_role(message) in _EDITABLE_ROLES
    )


def edited_message(entry: Entry, edits: Mapping[str, Entry]) -> Message | None:
    """The entry's context message with the latest edit applied (docs/rules/projection.md R.5)."""
    message = context_message(entry)
    if message is None:
        return None
    entry_id = entry.get("id")
    edit = edits.get(entry_id) if isinstance(entry_id, str) else None
    if edit is None or not _is_editable(entry):
        return message
    replacement = edit["replacement"]
    if replacement is None:
        return None
    content = replacement["content"]
    if isinstance(content, str) and message_role(message) in _ARRAY_CONTENT_ROLES:
        content = [{"type": "text", "text": content}]
    return {**message, "content": content}


#: Entry types that only set a setting (assistant messages set the model too).
SETTING_KINDS = frozenset({"thinking_level_change", "model_change", "context_window_change"})
#: Entry types that act on the context from anywhere on the branch: boundaries
#: (docs/rules/projection.md Q.4), edits (R.4) and settings (Q.3, S).
FAR_KINDS = SETTING_KINDS | {"compaction", "context_edit"}
#: What can still act on the context above an active boundary's kept tail once
#: the model is known: settings changes and edits (:func:`scan_up`'s ``links``).
REMOTE_KINDS = SETTING_KINDS | {"context_edit"}


def entry_setting(entry: Entry) -> tuple[str, Any] | None:
    """The setting one path entry sets (docs/rules/projection.md Q.3, S), as ``(attribute, value)``
    with attribute ``"thinking_level"``, ``"model"`` or ``"context_window"``;
    ``None`` when it sets none."""
    kind = entry.get("type")
    if kind == "thinking_level_change":
        level = entry.get("thinkingLevel")
        return ("thinking_level", level) if isinstance(level, str) else None
    if kind == "model_change":
        return "model", {"provider": entry.get("provider"), "modelId": entry.get("modelId")}
    if kind == "context_window_change":
        value = entry.get("contextWindow")
        return ("context_window", value) if isinstance(value, int) and not isinstance(value, bool) else None
    if kind == "message":
        message = entry.get("message")
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            provider, model_id = message.get("provider"), message.get("model")
            # docs/rules/projection.md S.2 [P]: an assistant without provider/model says nothing
            # about the model; the original set a half-undefined object.
            if isinstance(provider, str) and isinstance(model_id, str):
                return "model", {"provider": provider, "modelId": model_id}
    return None


def _replay_settings(path: Iterable[Entry]) -> tuple[str, dict[str, Any] | None, int | None]:
    """docs/rules/projection.md Q.3, S: thinking level, model and context window of the whole path."""
    settings: dict[str, Any] = {"thinking_level": "off", "model": None, "context_window": None}
    for entry in path:
        setting = entry_setting(entry)
        if setting is not None:
            settings[setting[0]] = setting[1]
    return settings["thinking_level"], settings["model"], settings["context_window"]


@dataclass
class _Scan:
    """What the first pass over a branch finds (docs/rules/projection.md P.1, Q.3, Q.4, R.4, S)."""

    path: list[Entry]  # root first, P.1-normalized
    thinking_level: str
    model: dict[str, Any] | None
    context_window: int | None
    boundary: int | None  # index in path of the latest active compaction
    edits: dict[str, Entry]  # the latest valid context_edit per target
    copies: list[Entry] = field(default_factory=list)  # path entries that are
                                                       # docs/rules/projection.md P.1 copies


def _first_setting(setting: tuple[str, Any], thinking_level: Any, model: Any,
                   context_window: Any) -> tuple[Any, Any, Any]:
    """``(thinking_level, model, context_window)`` after meeting ``setting`` walking up
    from the leaf: the first setting met of a kind is the one in force, so a kind
    already found (not ``ABSENT``) keeps its value (docs/rules/projection.md S.2)."""
    kind, value = setting
    if kind == "thinking_level" and thinking_level is ABSENT:
        return value, model, context_window
    if kind == "model" and model is ABSENT:
        return thinking_level, value, context_window
    if kind == "context_window" and context_window is ABSENT:
        return thinking_level, model, value
    return thinking_level, model, context_window


def _take_edit(entry: Entry, edits: dict[str, Entry]) -> None:
    """Record ``entry`` (a ``context_edit`` met walking up) in ``edits`` unless a later
    edit of its target was met first. A malformed edit is rejected on load and
    append; if one slips through it is inert rather than hiding an earlier valid edit."""
    target = entry.get("targetId")
    if isinstance(target, str) and target not in edits and _valid_replacement(entry):
        edits[target] = entry


@dataclass(slots=True)
class _Found:
    """What a walk up from the leaf has met so far: the settings in force (``ABSENT`` until
    met; walking up, the first met of a kind is the latest on the path, docs/rules/projection.md
    S.2) and the latest valid edit per target (R.4). Its methods are :func:`scan_up`'s finders."""

    thinking_level: Any = ABSENT
    model: Any = ABSENT
    context_window: Any = ABSENT
    edits: dict[str, Entry] = field(default_factory=dict)

    def setting(self, entry: Entry) -> None:
        """A settings change (or, once the model is known, any entry): its setting, if its kind is not met yet."""
        setting = entry_setting(entry)
        if setting is not None:
            self.thinking_level, self.model, self.context_window = _first_setting(
                setting, self.thinking_level, self.model, self.context_window)

    def assistant(self, entry: Entry) -> None:
        """An assistant message while the model is unknown: its model, when it names one (S.2)."""
        setting = entry_setting(entry)  # the one settings rule (S.2: may say nothing)
        if setting is not None:
            self.model = setting[1]

    def far(self, entry: Entry, kind: str) -> None:
        """Any other entry of a string ``kind``: a settings change or a context edit act from afar."""
        if kind in SETTING_KINDS:
            self.setting(entry)
        elif kind == "context_edit":
            _take_edit(entry, self.edits)


@dataclass(slots=True)
class _Walked:
    """The context part of a walk up (:func:`_walk_context`): the entries met, leaf first; the
    positions (in that order) of messages to P.1-normalize; where the active boundary was met;
    and where the walk stopped (``current``, the steps left, the kept tail's first id)."""

    path: list[Entry]
    normalize_up: list[int]
    boundary_up: int | None
    current: Any
    budget: int
    tail_start: Any


def _walk_context(get: Callable[[Any], Entry | None], leaf: str, budget: int, found: _Found,
                  context_only: bool) -> _Walked | None:
    """Walk up from ``leaf`` taking every entry into the path, to the root, or (``context_only``)
    to the kept tail's first entry (or the active boundary without one). ``None``: the walk
    took more steps than ``budget`` (the session's size), so it met a parent cycle."""
    path: list[Entry] = []
    append = path.append
    normalize_up: list[int] = []
    content_roles = CONTENT_ROLES
    boundary_up: int | None = None
    # context_only, once the active boundary is met: the id of its first kept entry
    # (ABSENT: no tail), whose passing ends the context part of the walk.
    tail_start: Any = None
    current: Any = leaf
    while current is not None:
        entry = get(current)
        if entry is None:
            break
        budget -= 1
        if budget < 0:
            return None
        kind = entry.get("type")
        if kind == "message":  # the common case, inline (see the table of scan_up)
            message: Any = entry.get("message")
            is_dict = message.__class__ is dict
            if is_dict or isinstance(message, Mapping):
                role = message.get("role")
                if (message.get("content") is None and isinstance(role, str) and role in content_roles
                        and (is_dict or isinstance(message, dict))):
                    normalize_up.append(len(path))
                if role == "assistant" and found.model is ABSENT:
                    found.assistant(entry)
        elif kind == "compaction":
            if boundary_up is None and is_active_compaction(entry):
                boundary_up = len(path)
                if context_only:
                    first_kept = entry.get("firstKeptEntryId")
                    tail_start = first_kept if isinstance(first_kept, str) else ABSENT
        elif isinstance(kind, str):
            found.far(entry, kind)
        append(entry)
        current = entry.get("parentId")
        if tail_start is not None and (tail_start is ABSENT or entry.get("id") == tail_start):
            break  # past the kept tail: the rest of the way up is outside the context
    return _Walked(path, normalize_up, boundary_up, current, budget, tail_start)


def _walk_above(entries: Sequence[Entry], get: Callable[[Any], Entry | None], current: Any, budget: int,
                found: _Found, links: Callable[[], AncestorLinks | None] | None) -> bool:
    """Above the kept tail (``context_only``): what acts from afar, and the model until found;
    these entries are not kept. Once the model is known, the walk jumps along the ancestor
    ``links`` when given (:func:`_jump`). ``False``: a parent cycle (more steps than ``budget``)."""
    far = found.far
    for _ in range(budget):
        entry = get(current)
        if entry is None:
            return True
        kind = entry.get("type")
        if kind == "message":
            if found.model is ABSENT:
                message = entry.get("message")
                if (message.__class__ is dict or isinstance(message, Mapping)) and message.get("role") == "assistant":
                    found.assistant(entry)
        elif kind.__class__ is str or isinstance(kind, str):
            far(entry, kind)
        current = entry.get("parentId")
        if current is None:
            return True
        if links is not None and found.model is not ABSENT:
            linked, links = links(), None
            if linked is not None:
                _jump(entries, linked, current, found)
                return True
    return get(current) is None  # one entry more than the session holds: a parent cycle


def _jump(entries: Sequence[Entry], linked: AncestorLinks, current: Any, found: _Found) -> None:
    """From ``current`` up, only settings changes and edits can matter once the model is known:
    jump from one to the next along ``linked`` (the same entries, in the same order)."""
    parent, nearest = linked.parent, linked.nearest
    at = linked.position.get(current, -1)
    at = nearest[at] if at >= 0 else -1
    while at >= 0:
        entry = entries[at]
        if entry.get("type") == "context_edit":
            _take_edit(entry, found.edits)
        else:
            found.setting(entry)  # the model is known by now: only the others can change
        up = parent[at]
        at = nearest[up] if up >= 0 else -1


def scan_up(entries: Sequence[Entry], leaf_id: LeafArg, by_id: Mapping[str, Entry] | None, *,
            context_only: bool = False, links: Callable[[], AncestorLinks | None] | None = None) -> _Scan:
    """Walk from the leaf to the root and take in the path's state on the way.

    Walking upwards, the *latest* item of a kind on the path is the *first*
    one met, so each kind is looked at only until it is found. A walk longer
    than the number of entries has met a parent cycle: it is redone by
    :func:`_scan_down` on :func:`sessiontree.core.tree.get_branch`'s path (which
    stops where an id repeats), so the result never depends on the route.

    ``context_only``: the caller uses only the context part of the path (the
    active boundary, its kept tail and what follows: :func:`context_order`).
    The entries above the kept tail are then left out of ``path`` (which
    starts at the tail's first entry, or at the boundary without a tail;
    ``boundary`` indexes that path) and are not P.1-normalized: only what acts
    from afar is looked at in them (settings, edits, the model until found),
    a few look-ups each, the cost of walking a long compacted session.

    ``links`` (with ``context_only``): gives the tree's
    :class:`~sessiontree.core.tree.AncestorLinks` of ``entries`` for
    :data:`REMOTE_KINDS` (``entries[p]`` is the entry at link position ``p``,
    ``by_id`` its id index), or ``None``; called at most once, only when
    the walk gets above a kept tail (building them costs a pass over the
    session's columns, once per tree). Above the kept tail, once the
    model is known, the walk then jumps from one settings change or context
    edit to the next instead of visiting every entry: the same entries are
    taken in, in the same order, so the result is the same.

    The walk is one loop per stretch (:func:`_walk_context`, :func:`_walk_above`,
    :func:`_jump`) calling the finders of :class:`_Found`; a ``message`` entry,
    nearly every entry of a session, is looked at inline. Each inline check copies a
    rule kept elsewhere, and each copy is pinned against the rule by tests comparing
    the walk with :func:`_scan_down`, which applies the rules themselves
    (``tests/session/test_scan_context_only.py``; ``tests/core/test_projection.py`` and
    ``tests/core/test_fast_path_equivalence.py`` through the builds):

    ==========================================  ======================  ==========================================
    inline check                                the rule it copies      pinned by (test_scan_context_only.py)
    ==========================================  ======================  ==========================================
    ``message.__class__ is dict``, then Mapping ``isinstance(Mapping)`` every walk over parsed (dict) entries
    content ``None``, role in ``CONTENT_ROLES`` ``normalize_entry``     ``test_null_content_above_the_tail_is_``
    and a dict                                  (P.1)                   ``left_as_stored_and_in_the_tail_normalized``
    role ``assistant`` while the model is       ``entry_setting`` (S.2) ``test_the_context_part_of_the_walk_is_``
    ``ABSENT``                                                          ``the_whole_scans`` (hypothesis)
    the first active compaction met             ``_layout`` (Q.4)       the same
    stop at ``firstKeptEntryId`` (or at the     ``layout_at`` (Q.7)     the same
    boundary without one)
    jump along ``links`` once the model is      visiting every entry    ``test_the_walk_with_ancestor_links_is_``
    known                                       above the kept tail     ``the_walk_without`` (hypothesis)
    ==========================================  ======================  ==========================================
    """
    leaf, by_id = resolve_leaf(entries, leaf_id, by_id)
    if leaf is None:
        return _Scan([], "off", None, None, None, {})
    get = by_id.get
    found = _Found()
    walked = _walk_context(get, leaf, len(by_id), found, context_only)
    if walked is None or (walked.tail_start is not None and walked.current is not None
                          and not _walk_above(entries, get, walked.current, walked.budget, found, links)):
        return _scan_down(get_branch(by_id, leaf))
    path = walked.path
    path.reverse()
    last = len(path) - 1
    copies: list[Entry] = []
    for index in walked.normalize_up:
        path[last - index] = normalize_entry(path[last - index])
        copies.append(path[last - index])
    return _Scan(
        path,
        "off" if found.thinking_level is ABSENT else found.thinking_level,
        None if found.model is ABSENT else found.model,
        None if found.context_window is ABSENT else found.context_window,
        None if walked.boundary_up is None else last - walked.boundary_up,
        found.edits,
        copies,
    )


def _scan_down(raw_path: list[Entry]) -> _Scan:
    """:func:`scan_up`'s result from a root-first path (the slow, obviously right way)."""
    path = [normalize_entry(e) for e in raw_path]
    thinking_level, model, context_window = _replay_settings(path)
    copies = [entry for entry, raw in zip(path, raw_path, strict=False) if entry is not raw]
    return _Scan(path, thinking_level, model, context_window, _layout(path).boundary, latest_edits(path),
                 copies)
