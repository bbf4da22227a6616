"""The structural passes of the checker: header, entries, ids, parents and references.

They run after :mod:`~sessiontree.check.reader` over the records it read.
The strict reader's rules are not restated here: header and entry shapes
are judged by :func:`~sessiontree.format.codec.validate_header`,
:func:`~sessiontree.format.codec.validate_entry` and
:func:`~sessiontree.format.codec.parse_version`, whose messages become the
problem messages; upgrades run through :func:`~sessiontree.format.upgrade.upgrade`.

Ids are resolved as an appending writer sees them: a reference names the
nearest earlier entry with that id (the first one for a forward reference).
Dangling label, edit and summary targets are tolerated and inert
(docs/rules/tree.md I.5, docs/rules/projection.md R.4,
docs/rules/listing.md K.4), and file names are never parsed for identity
(docs/rules/decisions.md D-7), so those are warnings.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

from sessiontree.check.state import BLANK, BOM, FileState, Rec, id_of
from sessiontree.core.projection import is_active_compaction
from sessiontree.errors import INVALID_SESSION_ID_MESSAGE, InvalidSessionError, UnsupportedVersionError
from sessiontree.format.codec import parse_version, validate_entry, validate_header
from sessiontree.format.ids import derived_entry_id, is_valid_session_id, session_id_hash
from sessiontree.format.types import ENTRY_TYPES, MAPPED_ENTRY_TYPES, MESSAGE_ROLES
from sessiontree.format.upgrade import Records, upgrade

__all__ = [
    "build_model",
    "check_entries",
    "check_header",
    "check_references",
    "collect_entries",
    "find_cycles",
    "report_cycles",
]

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_TIMESTAMP_NAME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z_(.+)\.jsonl")


def check_header(state: FileState) -> None:
    """The header pass: the first record must be a valid ``session`` header
    (``missing-header``, ``invalid-header``, ``unsupported-version``,
    ``invalid-session-id``) and the file name, when it has the ``<ts>_<id>``
    shape, must carry its id or hash (``header-id-mismatch``). Sets
    ``state.header``, ``header_obj``, ``version`` and ``header_valid``."""
    records = state.records()
    if not records:
        blank = not state.data.replace(BOM, b"", 1).strip(BLANK)
        reason = "the file is empty or blank" if blank else "the file has no readable record"
        state.problem("missing-header", None, f"no session header: {reason}")
        return
    first = records[0]
    if first.obj.get("type") != "session":
        try:
            validate_header(first.obj)
        except InvalidSessionError as exc:
            state.problem("missing-header", first.line, exc.reason)
        return
    state.header = first
    state.header_obj = first.obj
    valid = True
    try:
        state.version = validate_header(first.obj)
    except UnsupportedVersionError as exc:
        state.problem("unsupported-version", first.line, exc.reason)
        valid = False
    except InvalidSessionError as exc:
        state.problem("invalid-header", first.line, exc.reason)
        valid = False
        try:
            state.version = parse_version(first.obj)
        except UnsupportedVersionError as exc2:
            state.problem("unsupported-version", first.line, exc2.reason)
    if valid:
        _check_file_name(state, first)
        session_id = first.obj["id"]
        if not is_valid_session_id(session_id):
            # Readers open such a file; import refuses it (docs/rules/format.md B.4/B.5).
            state.problem("invalid-session-id", first.line,
                          f'header id "{session_id}" is not a valid session id (import refuses it: '
                          f"{INVALID_SESSION_ID_MESSAGE})")
    state.header_valid = valid


def _check_file_name(state: FileState, header: Rec) -> None:
    """docs/rules/decisions.md D-7: files are named ``<ts>_<id>`` (old) or ``<ts>_<16 hex of
    sha256(id)>``."""
    match = _TIMESTAMP_NAME.fullmatch(os.path.basename(state.path))
    if match is None:
        return
    named = match.group(1)
    session_id = header.obj["id"]
    expected = session_id_hash(session_id)
    if named not in (session_id, expected):
        state.problem("header-id-mismatch", header.line,
                      f'file name carries "{named}", which is neither the header id "{session_id}" '
                      f'nor its hash "{expected}"')


def collect_entries(state: FileState) -> None:
    """The entries pass: ``state.entries`` from the records after the header.

    An extra header is an ``extra-header`` error in a format-4 file and a
    ``legacy-duplicate`` to drop in an older one, as is a byte-identical
    repeated record there; a readable legacy header is then upgraded exactly
    as the reader does (``legacy-version``)."""
    records = state.records()
    if state.header is not None:
        records = records[1:]
    legacy = state.version is not None and state.version < 4
    seen: dict[bytes, int] = {}
    position = 0
    for rec in records:
        position += 1  # counted before dropping, as the strict reader does (v1 indexes)
        rec.position = position
        if rec.obj.get("type") == "session":
            if legacy:
                state.problem("legacy-duplicate", rec.line,
                              "extra session header (dropped when the file is upgraded)")
                state.drop(rec, "legacy-duplicate", "dropped the extra session header", entry_id=None)
            else:
                try:
                    validate_entry(rec.obj)
                except InvalidSessionError as exc:
                    state.problem("extra-header", rec.line, exc.reason)
            continue
        if legacy:
            text = rec.raw.strip(BLANK)
            if text in seen:
                # Old buggy writers repeated records (docs/rules/format.md E.3/E.4,
                # docs/rules/decisions.md D-15).
                state.problem("legacy-duplicate", rec.line,
                              f"byte-identical copy of line {seen[text]} (dropped when the file is upgraded)",
                              id_of(rec.obj))
                state.drop(rec, "legacy-duplicate", f"dropped the byte-identical copy of line {seen[text]}")
                continue
            seen[text] = rec.line
        state.entries.append(rec)
    if state.header_valid and state.version is not None:
        _upgrade(state)


def _upgrade(state: FileState) -> None:
    assert state.header is not None and state.version is not None
    records = Records(header=state.header.obj, entries=[rec.obj for rec in state.entries],
                      base_dir=os.path.dirname(os.path.abspath(state.path)))
    steps = upgrade(records, state.version, [rec.position for rec in state.entries])
    if not steps:
        return
    for index in records.changed:
        state.entries[index].changed = True
    state.header_obj = records.header
    state.header_changed = records.header_changed
    names = ", ".join(steps)
    if state.version < 4:
        state.problem("legacy-version", state.header.line,
                      f"format {state.version} session; readers upgrade it to format 4 in memory ({names})")
        state.change("legacy-version", state.header.line, f"upgraded from format {state.version} to 4 ({names})")
    else:
        state.problem("legacy-version", state.header.line,
                      "early format-4 header (timestamp/parentSession); readers upgrade it in memory "
                      f"({names})")
        state.change("legacy-version", state.header.line, f"upgraded the early format-4 header ({names})")


def check_entries(state: FileState) -> None:
    """Each entry on its own: ``validate_entry`` (``invalid-entry``), unknown
    types and roles, retired compaction records, tool-call arguments, lone
    surrogates (the header's too)."""
    if state.header is not None:
        _check_surrogates(state, state.header)
    for rec in state.entries:
        obj = rec.obj
        entry_id = id_of(obj)
        try:
            validate_entry(obj)
        except InvalidSessionError as exc:
            state.problem("invalid-entry", rec.line, exc.reason, entry_id)
        kind = obj.get("type")
        if isinstance(kind, str) and kind and kind not in ENTRY_TYPES and kind not in MAPPED_ENTRY_TYPES:
            state.problem("unknown-entry-type", rec.line, f'unknown entry type "{kind}" (kept verbatim, inert)',
                          entry_id)
        elif kind == "context_compaction":
            state.problem("retired-compaction", rec.line, "retired context_compaction record (inert)", entry_id)
        elif kind == "compaction" and not is_active_compaction(obj) and not isinstance(obj.get("foreign"), dict):
            # A compaction mapped from another agent's record (docs/agents/claude-code.md) is
            # archival by design, not a retired record of an older writer.
            state.problem("retired-compaction", rec.line,
                          'retired summary-compaction record (details.strategy is not "verbatim-lines"; inert)',
                          entry_id)
        message = obj.get("message") if kind == "message" else None
        if isinstance(message, dict):
            _check_message(state, rec, message, entry_id)
        _check_surrogates(state, rec)


def _check_message(state: FileState, rec: Rec, message: dict[str, Any], entry_id: str | None) -> None:
    role = message.get("role")
    if role == "compactionSummary":
        state.problem("retired-compaction", rec.line, "retired compactionSummary message (inert)", entry_id)
    elif isinstance(role, str) and role not in MESSAGE_ROLES:
        state.problem("unknown-message-role", rec.line,
                      f'unknown message role "{role}" (kept, not sent to the model)', entry_id)
    if role != "assistant" or not isinstance(message.get("content"), list):
        return
    for block in message["content"]:
        if not isinstance(block, dict) or block.get("type") != "toolCall":
            continue
        label = f'tool call "{block.get("id")}" ({block.get("name")})'
        if "arguments" not in block:
            state.problem("tool-arguments-not-object", rec.line, f"{label} has no arguments", entry_id)
        elif not isinstance(block["arguments"], dict):
            state.problem("tool-arguments-not-object", rec.line,
                          f"{label} has arguments of type {_json_type(block['arguments'])}, not an object",
                          entry_id)


def _check_surrogates(state: FileState, rec: Rec) -> None:
    if not _SURROGATE_ESCAPE.search(rec.raw):
        return  # a lone surrogate can only come from a \\udxxx escape
    found = list(_lone_surrogates(rec.obj))
    if not found:
        return
    where, char = found[0]
    more = f" and {len(found) - 1} more" if len(found) > 1 else ""
    state.problem("lone-surrogate", rec.line,
                  f"lone UTF-16 surrogate \\u{ord(char):04x} in {where}{more} (providers reject it)",
                  id_of(rec.obj))


def build_model(state: FileState) -> None:
    """The tree pass: the entries the copy keeps, keyed by unique id.

    A byte-identical duplicate id is dropped; a differing one gets a
    deterministic new key (renamed only by the repair). References resolve
    as an appending writer saw them: the nearest earlier entry with that id,
    the first one for a forward reference. Sets ``state.model``,
    ``by_key``, ``first_def`` and each record's ``refs``, ``parent`` and
    ``parent_missing``."""
    keyed = [rec for rec in state.entries if id_of(rec.obj) is not None]
    used: set[str] = {rec_id for rec in keyed if (rec_id := id_of(rec.obj)) is not None} | set(state.salvaged)
    session_id = state.header_obj.get("id") if state.header_obj else None
    defs: dict[str, list[Rec]] = {}
    for rec in keyed:
        oid = id_of(rec.obj)
        assert oid is not None
        rec.oid = oid
        earlier = defs.get(oid)
        if earlier is None:
            rec.key = oid
            defs[oid] = [rec]
            continue
        twin = next((d for d in earlier if d.raw.strip(BLANK) == rec.raw.strip(BLANK)), None)
        if twin is not None:
            state.problem("duplicate-id", rec.line,
                          f'duplicate entry id "{oid}" (byte-identical copy of line {twin.line})', oid)
            state.drop(rec, "duplicate-id", f"dropped the byte-identical copy of line {twin.line}")
            continue
        state.problem("duplicate-id", rec.line, f'duplicate entry id "{oid}" (first on line {earlier[0].line})',
                      oid)
        # Deterministic, so repairing the same file twice gives the same copy.
        rec.key = derived_entry_id(f"repair:{session_id}:{rec.line}:{oid}", used)
        used.add(rec.key)
        earlier.append(rec)
    state.model = [rec for rec in keyed if not rec.dropped]
    state.first_def = {oid: recs[0] for oid, recs in defs.items()}
    # Resolve references as an appending writer saw them: the nearest
    # earlier definition, else (a forward reference) the first one.
    current: dict[str, str] = {}
    for rec in state.model:
        for name in _ref_fields(rec.obj):
            ref = rec.obj.get(name)
            if isinstance(ref, str):
                key = current.get(ref)
                if key is None and ref in state.first_def:
                    key = state.first_def[ref].key
                rec.refs[name] = key
        assert rec.oid is not None and rec.key is not None
        current[rec.oid] = rec.key
        parent = rec.obj.get("parentId")
        rec.parent = rec.refs.get("parentId")
        rec.parent_missing = isinstance(parent, str) and rec.parent is None
    state.by_key = {rec.key: rec for rec in state.model if rec.key is not None}


def check_references(state: FileState) -> None:
    """References that name no entry: dangling parents (errors), label, edit
    and summary targets (warnings, inert), and an active compaction's
    ``firstKeptEntryId`` that is not before it on its branch."""
    for rec in state.model:
        obj = rec.obj
        kind = obj.get("type")
        if rec.parent_missing:
            parent = obj["parentId"]
            state.problem("dangling-parent", rec.line, f'parentId "{parent}" names no entry{_damaged(state, parent)}',
                          rec.oid)
        target = obj.get("targetId")
        if isinstance(target, str) and rec.refs.get("targetId") is None:
            if kind == "label":
                state.problem("label-target-missing", rec.line,
                              f'label targets "{target}", which names no entry{_damaged(state, target)}', rec.oid)
            elif kind == "context_edit":
                state.problem("edit-target-missing", rec.line,
                              f'context edit targets "{target}", which names no entry{_damaged(state, target)}',
                              rec.oid)
        anchor = obj.get("summarizedThroughId")
        if kind == "session_summary" and isinstance(anchor, str) and rec.refs.get("summarizedThroughId") is None:
            state.problem("summary-target-missing", rec.line,
                          f'summarizedThroughId "{anchor}" names no entry{_damaged(state, anchor)} '
                          "(the summary is never shown)", rec.oid)
        if kind == "compaction" and is_active_compaction(obj) and isinstance(obj.get("firstKeptEntryId"), str):
            _check_kept(state, rec)


def _damaged(state: FileState, entry_id: str) -> str:
    found = state.salvaged.get(entry_id)
    return f" (its record on line {found[0]} is damaged)" if found else ""


def _check_kept(state: FileState, rec: Rec) -> None:
    """docs/rules/projection.md Q.7: the kept entry must precede the boundary on its path."""
    kept = rec.obj["firstKeptEntryId"]
    key = rec.refs.get("firstKeptEntryId")
    lost = "(the kept tail is lost from the rebuilt context)"
    if key is None:
        reason = f'firstKeptEntryId "{kept}" names no entry {lost}'
    elif key == rec.key:
        reason = f'firstKeptEntryId "{kept}" is the compaction itself {lost}'
    elif key in _ancestors(state, rec):
        return
    else:
        reason = f'firstKeptEntryId "{kept}" is not before the compaction on its branch {lost}'
    state.problem("compaction-kept-off-branch", rec.line, reason, rec.oid)


def _ancestors(state: FileState, rec: Rec) -> set[str]:
    seen: set[str] = set()
    current = rec.parent
    while current is not None and current not in seen and current != rec.key:
        seen.add(current)
        current = state.by_key[current].parent
    return seen


def find_cycles(state: FileState) -> list[list[Rec]]:
    """Parent cycles of ``state.model`` (no root reaches them), each a list of
    records starting at its first entry in file order, sorted by that line."""
    finished: dict[str, bool] = {}  # key -> walk finished
    order = {id(rec): index for index, rec in enumerate(state.model)}
    cycles: list[list[Rec]] = []
    for start in state.model:
        walk: dict[str, int] = {}
        path: list[str] = []
        key = start.key
        while key is not None and key not in finished:
            finished[key] = False
            walk[key] = len(path)
            path.append(key)
            key = state.by_key[key].parent
        if key is not None and key in walk:
            members = [state.by_key[k] for k in path[walk[key]:]]
            first = min(range(len(members)), key=lambda i: order[id(members[i])])
            cycles.append(members[first:] + members[:first])
        for k in path:
            finished[k] = True
    cycles.sort(key=lambda c: c[0].line)
    return cycles


def report_cycles(state: FileState, cycles: list[list[Rec]]) -> None:
    """A ``parent-cycle`` problem for each of ``cycles`` (from :func:`find_cycles`),
    at its first entry in file order."""
    for cycle in cycles:
        chain = " -> ".join(str(rec.oid) for rec in [*cycle, cycle[0]])
        state.problem("parent-cycle", cycle[0].line, f"parent cycle {chain}: no root reaches these entries",
                      cycle[0].oid)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _lone_surrogates(value: Any) -> Iterator[tuple[str, str]]:
    """``(json path, surrogate)`` for every string or key holding a lone surrogate."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            match = _LONE_SURROGATE.search(item)
            if match:
                yield path or "(value)", match.group()
        elif isinstance(item, dict):
            for key in reversed(list(item)):
                sub = f"{path}.{key}" if path else str(key)
                match = _LONE_SURROGATE.search(key) if isinstance(key, str) else None
                if match:
                    yield sub, match.group()
                stack.append((item[key], sub))
        elif isinstance(item, list):
            for i in range(len(item) - 1, -1, -1):
                stack.append((item[i], f"{path}[{i}]"))


def _ref_fields(obj: dict[str, Any]) -> list[str]:
    """Fields of an entry that name another entry."""
    kind = obj.get("type")
    fields = ["parentId", "targetId"]
    if kind == "compaction":
        fields.append("firstKeptEntryId")
    elif kind == "session_summary":
        fields.append("summarizedThroughId")
    elif kind == "branch_summary":
        fields.append("fromId")
    return fields
