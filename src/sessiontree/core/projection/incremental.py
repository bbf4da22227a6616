"""The incremental projection engine: :class:`ProjectionBuilder`, which projects a
branch (docs/rules/projection.md seed:context-building) and extends it entry by
entry; a rebuild of a plain branch replays its steps
(:mod:`sessiontree.core.projection.steps`) without reading its entries again."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sessiontree.core.projection.context import (
    FAR_KINDS,
    SETTING_KINDS,
    context_order,
    edited_message,
    entry_setting,
    get_current_system_message,
    index_by_id,
    kept_tail_length,
    layout_at,
    resolve_leaf,
    scan_up,
)
from sessiontree.core.projection.convert import (
    CONTENT_ROLES,
    boundary_messages,
    context_message,
    is_content_visible,
    normalize_entry,
)
from sessiontree.core.projection.model import ABSENT, Entry, LeafArg, Message, SessionProjection, is_active_compaction
from sessiontree.core.projection.pairing import (
    ToolWindow,
    convert_to_llm,
    is_pairing_transparent,
    synthetic_tool_result,
)
from sessiontree.core.projection.steps import (
    OP_ASSISTANT,
    OP_CALLS,
    OP_CALLS_KEPT,
    OP_CLOSE,
    OP_MADE,
    OP_RESULT,
    OP_SETTING,
    OP_SKIP,
    OP_SYSTEM,
    OP_TRANSPARENT,
    SKIP_OP,
    PlainSteps,
    plain_step,
)
from sessiontree.core.transcript import serialize_messages
from sessiontree.core.tree import AncestorLinks

__all__ = ["PlainSteps", "ProjectionBuilder"]

class ProjectionBuilder:
    """A branch's projection that can grow with the branch (docs/rules/projection.md seed:context-building).

    :meth:`build` projects a branch from scratch, exactly as
    :func:`build_session_projection`; :meth:`advance` extends it by one entry
    appended below its leaf, in time proportional to that entry;
    :meth:`result` gives the :class:`SessionProjection`.
    :class:`~sessiontree.session.manager.SessionManager` keeps one between calls, so
    an agent that appends a turn and rebuilds its context does work in
    proportion to the turn, not to the session. What cannot be applied
    incrementally (a new active compaction boundary, a context edit) makes
    :meth:`advance` refuse; the caller then builds afresh.

    Attributes:
        leaf_id: the leaf projected so far (``None`` for an empty branch).
        plain_branch: when the branch is plain (see :meth:`build_plain`), the
            raw branch of :attr:`leaf_id` root first, which a caller may keep and
            give to a later :meth:`build` of the same leaf (it is the
            :attr:`sources` list itself: a copy must be kept); else ``None``.
        plain_ops: with :attr:`plain_branch`, one step per entry of it
            (:func:`plain_step`: what the build derives from each entry), which
            a caller may keep with the branch and give to that later build, so
            that it replays the steps instead of reading the entries; else
            ``None``. Like :attr:`plain_branch`, :meth:`advance` appends to it.

    The synthetic results of a tool window still open at the leaf are not
    part of the state: whether they are wanted depends on the caller (docs/rules/decisions.md D-11),
    so :meth:`result` adds them.
    """

    __slots__ = (
        "context_window",
        "copies",
        "edits",
        "ends",
        "leaf_id",
        "messages",
        "model",
        "owned",
        "owned_sources",
        "plain_branch",
        "plain_ops",
        "sources",
        "system_messages",
        "thinking_level",
        "window",
    )

    def __init__(self, leaf_id: str | None, thinking_level: str, model: dict[str, Any] | None,
                 context_window: int | None, edits: dict[str, Entry]) -> None:
        self.leaf_id = leaf_id
        self.sources: list[Entry] = []  # the context entries (build_context_entries)
        self.messages: list[Message] = []
        self.ends: list[int] = []  # per source: offset in messages just past its own
        self.window = ToolWindow()
        self.system_messages: list[Message] = []
        self.edits = edits
        self.thinking_level = thinking_level
        self.model = model
        self.context_window = context_window
        # What the projection made itself (not stored data), so that result()
        # can hand out fresh copies as a fresh build would: entry ids of the
        # sources that are docs/rules/projection.md P.1 copies; positions in messages of dicts it made;
        # (source position, message position or -1) of the docs/rules/projection.md P.1 copies.
        self.copies: set[str] = set()
        self.owned: list[int] = []
        self.owned_sources: list[tuple[int, int]] = []
        # The raw branch root first when the build was the one-pass one (a plain
        # branch: the sources are that branch), else None. advance() appends to it.
        self.plain_branch: list[Entry] | None = None
        self.plain_ops: PlainSteps | None = None  # plain_step of each plain_branch entry

    @classmethod
    def build(cls, entries: Sequence[Entry], leaf_id: LeafArg,
              by_id: Mapping[str, Entry] | None, *, branch: list[Entry] | None = None,
              ops: PlainSteps | None = None,
              links: Callable[[], AncestorLinks | None] | None = None) -> ProjectionBuilder:
        """Project the branch of ``leaf_id`` from scratch (see :func:`build_session_projection`).

        Args:
            branch: the raw branch of ``leaf_id`` root first, when the caller kept
                it from an earlier build (:attr:`plain_branch`): a plain branch is
                then projected without walking it again. It must be exactly what
                that earlier build walked (entries are only ever appended, so
                the branch of a given leaf never changes).
            ops: with ``branch``, that earlier build's :attr:`plain_ops` for it
                (the first ``len(branch)`` steps): the build then replays them
                rather than reading the entries (see :func:`plain_step`).
            links: the tree's ancestor links of ``entries``, on demand (see
                :func:`~sessiontree.core.projection.context.scan_up`).
        """
        if by_id is None and leaf_id is not None:
            by_id = index_by_id(entries)  # once, for both ways of building
        fast = cls.build_plain(entries, leaf_id, by_id, branch, ops)
        if fast is not None:
            return fast
        # Pass 1, walking up from the leaf: the path (P.1-normalized), settings
        # replay (docs/rules/projection.md Q.3, S), the latest active boundary
        # (docs/rules/projection.md Q.4), the latest valid
        # edit per target (docs/rules/projection.md R.4).
        scan = scan_up(entries, leaf_id, by_id, context_only=True, links=links)  # only context_order(path) is used
        path, edits = scan.path, scan.edits
        self = cls(path[-1]["id"] if path else None, scan.thinking_level, scan.model,
                   scan.context_window, edits)
        self.copies = {entry["id"] for entry in scan.copies}
        layout = layout_at(path, scan.boundary)
        context_entries = context_order(path, layout)
        self.sources = context_entries
        if layout.boundary is None:
            self.extend(context_entries)
            return self
        tail_entries = context_entries[1 : 1 + kept_tail_length(layout)]
        tail_messages = [m for e in tail_entries if (m := edited_message(e, edits)) is not None]
        # docs/rules/transcript.md §2.1: convert (pairing repaired, no trailing repair),
        # then serialize in retained mode.
        tail_chunks = serialize_messages(convert_to_llm(tail_messages), "retained")
        # The boundary's messages go through the same pairing steps as
        # everything else, as stand-in entries without ids (no edit applies).
        stand_ins = [{"type": "message", "message": m}
                     for m in boundary_messages(context_entries[0], tail_chunks)]
        after = context_entries[1 + len(tail_entries):]
        self.extend(stand_ins)
        boundary_message = stand_ins[-1]["message"]
        self.owned += [i for i, m in enumerate(self.messages) if m is boundary_message]
        # The boundary entry owns what its stand-ins produced; the kept-tail
        # entries own nothing (their text is in the boundary message).
        self.ends[:] = [len(self.messages)] * (1 + len(tail_entries))
        self.owned_sources += [(1 + k, -1) for k, entry in enumerate(tail_entries) if entry["id"] in self.copies]
        self.extend(after)
        return self

    @classmethod
    def build_partial(cls, ids: Sequence[str], parent_ids: Sequence[str | None], types: Sequence[str],
                      fetch: Callable[[list[int]], Sequence[Entry]]) -> tuple[ProjectionBuilder, dict[int, Entry]] | None:
        """:meth:`build` for a branch of which only an outline is at hand, reading as few
        entries as the result depends on; ``None`` when that would be the whole branch.

        What a projection of a branch with an active compaction boundary
        depends on, and so what is read (``fetch``), walking up from the leaf:

        * every entry after the latest active boundary, the boundary itself and
          its kept tail (docs/rules/projection.md Q.4, Q.7, seed:context-building);
        * wherever they sit on the branch, the entries that act from afar: every
          ``compaction`` (to find the latest active one), ``context_edit``
          (docs/rules/projection.md R.4: an edit may target a kept-tail entry)
          and setting change (docs/rules/projection.md Q.3, S);
        * the model (docs/rules/projection.md S.2) is the first model change or
          assistant message naming its model met walking up: message records
          above the boundary are read only until one decides it.

        Nothing else above the boundary reaches the result: those entries are
        outside the context, and each is passed to :meth:`build` as a stand-in
        (a run of them as one stand-in that links the run's ends), so the
        build is exactly the full one (checked by a Hypothesis property in
        ``tests/session/test_lazy_open.py``).

        Args:
            ids, parent_ids, types: the branch root first (leaf last), each
                entry's ``id``, ``parentId`` and ``type``; every ``parent_ids[i]``
                is ``ids[i - 1]`` (a walk that met no cycle and no duplicate id,
                as :func:`sessiontree.core.tree.get_branch` gives it).
            fetch: the full entries at the given branch positions, in that
                order; their ``id``, ``parentId`` and ``type`` must be those of
                the outline (the caller checks).

        Returns:
            ``(builder, read)``: the builder for the leaf ``ids[-1]``, and every
            entry read, by branch position; or ``None`` when the branch has no
            active boundary (the caller builds from all its entries).
        """
        count = len(ids)
        read: dict[int, Entry] = {}

        def load(positions: Iterable[int]) -> None:
            """Read the entries at ``positions`` that are not read yet."""
            wanted = [p for p in positions if p not in read]
            if wanted:
                read.update(zip(wanted, fetch(wanted), strict=False))

        load(itertools.compress(range(count), map(FAR_KINDS.__contains__, types)))  # in C: no loop per entry
        boundary = next((i for i in range(count - 1, -1, -1)
                         if types[i] == "compaction" and is_active_compaction(read[i])), None)
        if boundary is None:
            return None
        load(range(boundary + 1, count))
        first_kept = read[boundary].get("firstKeptEntryId")
        if isinstance(first_kept, str):
            start = next((i for i in range(boundary) if ids[i] == first_kept), None)
            if start is not None:
                load(range(start, boundary))
        # The model (S.2): what scan_up takes is the first model change, or assistant
        # naming its model, met walking up. Messages above the boundary are read in
        # batches only while none has decided it.
        position = count - 1
        while position >= 0:
            entry = read.get(position)
            if entry is None:
                if types[position] != "message":
                    position -= 1  # unread and not a message: sets no model (model changes are read)
                    continue
                load([p for p in range(position, max(position - 256, -1), -1) if types[p] == "message"])
                entry = read[position]
            kind = entry.get("type")
            if kind == "model_change" or (kind == "message" and entry_setting(entry) is not None):
                break
            position -= 1
        # The branch as build() walks it: the entries read, and one stand-in per run
        # of unread entries (id of the run's last, parent of its first), which
        # scan_up passes over (no message, no setting, no edit, no boundary).
        view: dict[str, Entry] = {}
        after = 0  # the first position not yet in the view
        for i in sorted(read):
            if i > after:  # positions after..i-1 were not read: one stand-in
                view[ids[i - 1]] = {"type": types[i - 1], "id": ids[i - 1], "parentId": parent_ids[after]}
            view[ids[i]] = read[i]
            after = i + 1
        # (the leaf, count - 1, is always read: it is after the boundary or is the boundary)
        return cls.build((), ids[-1], view), read

    @classmethod
    def build_plain(cls, entries: Sequence[Entry], leaf_id: LeafArg,
                    by_id: Mapping[str, Entry] | None,
                    branch: list[Entry] | None = None,
                    ops: PlainSteps | None = None) -> ProjectionBuilder | None:
        """:meth:`build` in one pass over the branch, for a plain one; ``None`` otherwise.

        A branch is plain when it has no ``compaction`` (active or retired), no
        ``context_edit``, no message needing a docs/rules/projection.md P.1 copy (null content of a
        user-like role) or stored as anything but a dict, and no parent cycle: then the context
        entries are the path itself, nothing is edited, and the projection is
        one pass over the path (:meth:`_extend_plain`), which also notes the
        settings (docs/rules/projection.md Q.3, S) and records each entry's
        step (:func:`plain_step`) for a later rebuild of the same leaf to
        replay (:meth:`_replay`). The walk up collects only the path. On
        anything else the caller builds the general way; the result is the
        same either way.
        """
        leaf, index = resolve_leaf(entries, leaf_id, by_id)
        if leaf is None:
            return None
        if branch is not None:
            return cls._plain_from(leaf, branch, ops)
        path: list[Entry] = []
        append, get = path.append, index.get
        current: Any = leaf
        # At most one step per indexed entry (the count kept by the loop, in C): a
        # walk still going after that has met an id twice.
        for _ in itertools.repeat(None, len(index)):
            entry = get(current)
            if entry is None:
                break
            kind = entry.get("type")
            if kind == "compaction" or kind == "context_edit":
                # Met walking up, so a session with compactions gives up after
                # the entries since its latest boundary, not after the whole path.
                return None
            append(entry)
            current = entry.get("parentId")
        else:
            if get(current) is not None:
                return None  # a parent cycle: the general build stops where an id repeats
        path.reverse()
        return cls._plain_from(leaf, path)

    @classmethod
    def _plain_from(cls, leaf: str, path: list[Entry], ops: PlainSteps | None = None) -> ProjectionBuilder | None:
        """The one-pass build over ``path``, the raw branch of ``leaf`` root first (see
        :meth:`build_plain`); ``None`` when it is not plain after all. ``ops``:
        the :func:`plain_step` of each entry of ``path`` when the caller has them
        (they are replayed), else they are recorded by the pass."""
        self = cls(leaf, "off", None, None, {})
        self.sources = path
        self.plain_branch = path
        if ops is not None and len(ops) == len(path):
            self.plain_ops = ops
            settings = self._replay(ops)
        else:
            self.plain_ops = PlainSteps()
            found = self._extend_plain(path, self.plain_ops)
            if found is None:
                return None
            settings = found
        if "thinking_level" in settings:
            self.thinking_level = settings["thinking_level"][1]
        if "context_window" in settings:
            self.context_window = settings["context_window"][1]
        # The model: the last model_change, unless a later assistant message names one
        # (docs/rules/projection.md S.2).
        position, model = settings.get("model", (-1, None))
        for i in range(len(path) - 1, position, -1):
            entry = path[i]
            if entry.get("type") == "message" and entry["message"].get("role") == "assistant":
                setting = entry_setting(entry)
                if setting is not None:
                    model = setting[1]
                    break
        self.model = model
        return self

    def _extend_plain(self, path: Iterable[Entry], steps: PlainSteps) -> dict[str, tuple[int, Any]] | None:
        """The first build of a plain branch: :meth:`extend` over the raw path (no edit,
        no copy applies), recording each entry's :func:`plain_step` in ``steps``
        as it goes. Returns what :meth:`_replay` returns, or ``None`` (the builder
        is then spent) at an entry a plain branch cannot have."""
        # Hot path (a cold build): one pass reading each entry once, with an inlined
        # copy of pairing.ToolWindow (accept, close, open) on the window's own
        # sets, for speed. The Hypothesis tests
        # tests/core/test_fast_path_equivalence.py::test_the_one_pass_build_equals_the_general_build
        # (against the general build) and
        # tests/core/test_plain_replay.py::test_a_rebuild_from_the_kept_steps_equals_the_general_build
        # (the recorded steps against plain_step) check it.
        message: Any
        call_id: Any
        name: Any
        extra: Any
        messages, window, ends = self.messages, self.window, self.ends
        push, mark, own = messages.append, ends.append, self.owned.append
        allowed, answered, pending = window.allowed, window.answered, window.pending
        add_code, add_item, add_extra = steps.codes.append, steps.items.append, steps.extras.append
        content_visible, is_transparent = is_content_visible, is_pairing_transparent
        stamp = window.timestamp
        settings: dict[str, tuple[int, Any]] = {}
        for entry in path:
            kind = entry.get("type")
            if kind == "message":
                item = message = entry.get("message")
                if message.__class__ is not dict:
                    return None  # the general build gives it no message (or a P.1 copy of a dict subclass)
                role = message.get("role")
                content = message.get("content")
                if role == "toolResult":
                    if content is None:
                        return None  # needs a docs/rules/projection.md P.1 copy: the general build makes it
                    call_id = message.get("toolCallId")
                    if not isinstance(call_id, str):
                        call_id = None
                    add_code(OP_RESULT)
                    add_item(message)
                    add_extra(call_id)
                    # accept: an orphan or a duplicate is dropped
                    if call_id in allowed and call_id not in answered:
                        answered.add(call_id)
                        push(message)
                    mark(len(messages))
                    continue
                if role == "assistant":
                    if content is None or "responseId" in message:
                        return None  # a response in parts: the general build pairs it
                    op = OP_ASSISTANT
                elif content is None and isinstance(role, str) and role in CONTENT_ROLES:
                    return None
                # a user message is transparent exactly when its content is invisible
                elif content_visible(content) if role == "user" else not is_transparent(message):
                    op = OP_CLOSE
                else:
                    op = OP_SYSTEM if role == "system" else OP_TRANSPARENT
            elif kind == "custom_message" or kind == "branch_summary":
                message = context_message(entry)
                if message is None:
                    add_code(OP_SKIP)
                    add_item(None)
                    add_extra(None)
                    mark(len(messages))
                    continue
                item, op = entry, OP_MADE
            elif kind == "compaction" or kind == "context_edit":
                return None
            else:
                _other_step(entry, kind, steps, settings, len(ends))
                mark(len(messages))
                continue
            extra = None
            if op == OP_MADE:
                extra = not is_transparent(message)
            if op <= OP_CLOSE or extra:
                # close
                if pending:
                    for call_id, name in pending:
                        if call_id not in answered:
                            own(len(messages))
                            push(synthetic_tool_result(call_id, name, stamp))
                    pending.clear()
                if allowed:
                    allowed.clear()
                    answered.clear()
            elif op == OP_SYSTEM:
                self.system_messages.append(message)
            if op == OP_MADE:
                own(len(messages))
            push(message)
            if op == OP_ASSISTANT:
                # open (the window was just closed): the first call of each id
                extra = stamp = message.get("timestamp", ABSENT)
                if isinstance(content, list):
                    op, extra = _open_plain(content, message.get("stopReason") == "toolUse", stamp, allowed, pending)
            add_code(op)
            add_item(item)
            add_extra(extra)
            mark(len(messages))
        window.timestamp = stamp
        return settings

    def _replay(self, ops: PlainSteps) -> dict[str, tuple[int, Any]]:
        """:meth:`extend` over a plain branch from its :func:`plain_step` steps: the same
        messages, ends, owned positions, system messages and tool pairing
        (docs/rules/decisions.md D-11), without reading the entries. Returns
        the position and value of the last thinking-level, context-window and
        model-change setting (docs/rules/projection.md Q.3, S) on the branch,
        by name (``"thinking_level"``, ``"model"``, ``"context_window"``)."""
        # Hot path (a rebuild): one iteration per step, with an inlined copy of
        # pairing.ToolWindow (accept, close, open) on the window's own sets, for
        # speed; the ops are local names, most frequent first. The Hypothesis tests
        # tests/core/test_plain_replay.py::test_a_rebuild_from_the_kept_steps_equals_the_general_build
        # and ::test_steps_grown_by_advance_rebuild_what_the_general_build_gives check it.
        messages, window, ends = self.messages, self.window, self.ends
        push, mark, own = messages.append, ends.append, self.owned.append
        allowed, answered, pending = window.allowed, window.answered, window.pending
        stamp = window.timestamp
        result_op, assistant_op, calls_op, close_op, last_closing, made_op = (
            OP_RESULT, OP_ASSISTANT, OP_CALLS, OP_CLOSE, OP_MADE, OP_MADE)
        transparent_op, system_op, setting_op = OP_TRANSPARENT, OP_SYSTEM, OP_SETTING
        settings: dict[str, tuple[int, Any]] = {}
        for op, item, extra in zip(ops.codes, ops.items, ops.extras, strict=False):
            if op == result_op:
                # accept: an orphan or a duplicate is dropped (allowed holds strings only)
                if extra in allowed and extra not in answered:
                    answered.add(extra)
                    push(item)
            elif op <= last_closing and (op != made_op or extra):
                if op == made_op:
                    item = context_message(item)  # made afresh on every build, as extend does
                # close
                if pending:
                    for call_id, name in pending:
                        if call_id not in answered:
                            own(len(messages))
                            push(synthetic_tool_result(call_id, name, stamp))
                    pending.clear()
                if allowed:
                    allowed.clear()
                    answered.clear()
                if op == made_op:
                    own(len(messages))
                push(item)
                # open, on the window just emptied
                if op == assistant_op:
                    stamp = extra
                elif op < close_op:  # calls: (timestamp, id, name, id, name, ...)
                    stamp = extra[0]
                    for k in range(1, len(extra), 2):
                        allowed.add(extra[k])
                        if op == calls_op:
                            pending.append((extra[k], extra[k + 1]))
            elif op == transparent_op:
                push(item)
            elif op == system_op:
                self.system_messages.append(item)
                push(item)
            elif op == made_op:  # a made message transparent to pairing
                own(len(messages))
                push(context_message(item))  # type: ignore[arg-type]  # a recorded made step has a message
            elif op == setting_op:
                setting = entry_setting(item)
                if setting is not None:
                    settings[setting[0]] = (len(ends), setting[1])
            mark(len(messages))
        window.timestamp = stamp
        return settings

    def extend(self, body: Iterable[Entry]) -> None:
        """Pass 2 over context entries (P.1-normalized): their messages, edits
        applied, and tool pairing (docs/rules/decisions.md D-11). Records one end offset per entry.
        (A plain branch is built by :meth:`_extend_plain` or :meth:`_replay` instead.)"""
        # Hot path (the general build), one iteration per entry of the branch,
        # with an inlined copy of pairing.ToolWindow (accept, close, open) on the
        # window's own sets and list, mutated in place (never rebound) so that the
        # window stays the state, for speed. The Hypothesis test
        # tests/core/test_projection.py::test_property_projection_never_mutates_input
        # checks that ToolWindow (repair_orphan_tool_results) changes nothing in
        # its result. A synthetic result belongs to the entry whose message closes
        # its window.
        message: Any
        call_id: Any
        name: Any
        messages, edits, window, copies = self.messages, self.edits, self.window, self.copies
        push, mark, own = messages.append, self.ends.append, self.owned.append
        allowed, answered, pending = window.allowed, window.answered, window.pending
        content_visible, is_transparent = is_content_visible, is_pairing_transparent
        for entry in body:
            kind = entry.get("type")
            made = False  # whether the message is a dict made here, not stored data
            if kind == "message":
                message = entry.get("message")
                if message.__class__ is not dict and not isinstance(message, dict):
                    mark(len(messages))
                    continue
                if copies and entry.get("id") in copies:
                    made = True
                    self.owned_sources.append((len(self.ends), -1))
            elif kind == "custom_message" or kind == "branch_summary":
                message = context_message(entry)
                if message is None:
                    mark(len(messages))
                    continue
                made = True
            else:
                mark(len(messages))
                continue
            if edits:
                entry_id = entry.get("id")
                if isinstance(entry_id, str) and entry_id in edits:
                    edited = edited_message(entry, edits)
                    if edited is None:
                        mark(len(messages))
                        continue
                    made = made or edited is not message
                    message = edited
            role = message.get("role")
            if role == "toolResult":
                # accept
                call_id = message.get("toolCallId")
                if not (isinstance(call_id, str) and call_id in allowed and call_id not in answered):
                    mark(len(messages))
                    continue  # an orphan or a duplicate, dropped
                answered.add(call_id)
            elif role == "assistant" and window.response is not None and message.get("responseId") == window.response:
                pass  # a further part of the open window's response: its calls join the window
            elif (role == "assistant"
                  # a user message is transparent exactly when its content is invisible
                  or (content_visible(message.get("content")) if role == "user" else not is_transparent(message))):
                # close
                window.response = None
                if pending:
                    timestamp = window.timestamp
                    for call_id, name in pending:
                        if call_id not in answered:
                            own(len(messages))
                            push(synthetic_tool_result(call_id, name, timestamp))
                    pending.clear()
                if allowed:
                    allowed.clear()
                    answered.clear()
            elif role == "system":
                self.system_messages.append(message)
            if made:
                own(len(messages))
                if copies and entry.get("id") in copies and message is entry.get("message"):
                    self.owned_sources[-1] = (len(self.ends), len(messages))
            push(message)
            if role == "assistant":
                # open (the window was just closed)
                content = message.get("content")
                if isinstance(content, list):
                    _open(content, message.get("stopReason") == "toolUse", allowed, pending)
                window.timestamp = message.get("timestamp", ABSENT)
                response = message.get("responseId")
                window.response = response if isinstance(response, str) and response else None
            mark(len(messages))

    def advance(self, entry: Entry) -> bool:
        """Extend the projection by ``entry``, a new child of :attr:`leaf_id`.

        Returns:
            ``False``, changing nothing, when ``entry`` is not a child of the
            leaf or changes earlier context (an active compaction boundary, a
            context edit): the projection must then be built afresh.
        """
        entry_id = entry.get("id")
        if (not isinstance(entry_id, str) or self.leaf_id is None
                or entry.get("parentId") != self.leaf_id or entry_id in self.edits):
            return False
        kind = entry.get("type")
        if kind == "context_edit" or is_active_compaction(entry):
            return False
        setting = entry_setting(entry)
        if setting is not None:
            name, value = setting
            setattr(self, name, value)
        normalized = normalize_entry(entry)
        if normalized is not entry:
            self.copies.add(entry_id)
        if self.plain_branch is not None:
            step = None if normalized is not entry else plain_step(entry)
            if step is None:
                # No longer a branch the one-pass build takes (see build_plain): forget it,
                # before appending, since it is the sources list itself.
                self.plain_branch = self.plain_ops = None
                self.sources = list(self.sources)
            elif self.plain_ops is not None:
                self.plain_ops.append(step)
        self.sources.append(normalized)
        self.extend((normalized,))
        self.leaf_id = entry_id
        return True

    def result(self, repair_trailing: bool, *, copy: bool = True) -> SessionProjection:
        """The projection. ``copy=False`` hands over the lists (the projector is then spent).

        ``repair_trailing``: close tool calls still open at the end with
        synthetic results, owned by the last entry (docs/rules/decisions.md D-11).
        """
        messages, ends, sources, model = self.messages, self.ends, self.sources, self.model
        window = self.window
        trailing = window.is_open and repair_trailing and ends
        if copy or trailing:
            messages, ends = list(messages), list(ends)
        if copy:
            # Fresh top-level dicts for everything the projection made, as a
            # fresh build gives: a caller annotating a returned message in
            # place must not change the next projection.
            for index in self.owned:
                messages[index] = dict(messages[index])
            sources = list(sources)
            for position, index in self.owned_sources:
                source = sources[position] = dict(sources[position])
                source["message"] = messages[index] if index >= 0 else dict(source["message"])
            model = None if model is None else dict(model)
        if trailing:
            # Synthetic results of the still-open window, without closing it:
            # the next appended message may still answer the calls.
            messages.extend(window.synthetic())
            ends[-1] = len(messages)
        return SessionProjection(
            messages=messages,
            thinking_level=self.thinking_level,
            model=model,
            context_window=self.context_window,
            system_message=get_current_system_message(self.system_messages) if self.system_messages else None,
            sources=sources,
            ends=ends,
        )


# The opening half of the tool-window rule (pairing.ToolWindow.open), on the window's
# own set and list, for the hot loops of ProjectionBuilder (see the table of
# sessiontree.core.projection.pairing): one call per assistant message with content blocks.


def _other_step(entry: Entry, kind: Any, steps: PlainSteps, settings: dict[str, tuple[int, Any]],
                position: int) -> None:
    """The step of an entry of a plain branch that is neither a message nor a made one:
    a setting (recorded in ``settings`` at ``position``, by name) or nothing."""
    setting = entry_setting(entry) if isinstance(kind, str) and kind in SETTING_KINDS else None
    if setting is None:
        steps.append(SKIP_OP)
    else:
        settings[setting[0]] = (position, setting[1])
        steps.append((OP_SETTING, entry, None))


def _open(content: list[Any], to_use: bool, allowed: set[str], pending: list[tuple[str, str]]) -> None:
    """Open the window (just emptied) on the tool calls of ``content``: each string id is
    allowed; with ``to_use`` (stopReason ``toolUse``) the first call of each id awaits its result."""
    for block in content:
        if (block.__class__ is dict or isinstance(block, Mapping)) and block.get("type") == "toolCall":
            call_id, name = block.get("id"), block.get("name")
            if isinstance(call_id, str) and isinstance(name, str):
                if to_use and call_id not in allowed:
                    pending.append((call_id, name))
                allowed.add(call_id)


def _open_plain(content: list[Any], to_use: bool, stamp: Any, allowed: set[str],
                pending: list[tuple[str, str]]) -> tuple[int, Any]:
    """:func:`_open`, and the step of the assistant message it opens on: ``(OP_ASSISTANT,
    stamp)`` without a call, else ``(OP_CALLS or OP_CALLS_KEPT, (stamp, id, name, ...))``
    with the first call of each id (the ``extra`` of :func:`~sessiontree.core.projection.steps.plain_step`)."""
    op: int = OP_ASSISTANT
    extra: Any = stamp
    for block in content:
        if (block.__class__ is dict or isinstance(block, Mapping)) and block.get("type") == "toolCall":
            call_id, name = block.get("id"), block.get("name")
            if isinstance(call_id, str) and isinstance(name, str):
                if call_id not in allowed:
                    if to_use:
                        pending.append((call_id, name))
                    if op == OP_ASSISTANT:
                        op, extra = (OP_CALLS if to_use else OP_CALLS_KEPT), (stamp, call_id, name)
                    else:
                        extra += (call_id, name)
                allowed.add(call_id)
    return op, extra
