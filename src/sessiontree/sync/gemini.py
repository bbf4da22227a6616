"""Syncing Gemini CLI chats, which the agent rewrites whole (docs/agents/gemini.md, "Rewrites").

A chat document is not appended to: every change rewrites it (a new
``lastUpdated``, the last message completed in place, new messages after
it). So a changed file is mapped whole and compared with what is stored by
its *messages* (:func:`~sessiontree.format.foreign.gemini.compare_messages`):

* ``grown``: the stored messages are its first ones (the last may have been
  completed in place): the stored session becomes the new version, entries
  set with sessiontree kept;
* ``unchanged``: same messages and same bytes (or only the frame rewritten,
  e.g. ``lastUpdated``: the stored frame is brought up to date, so
  ``export --format source`` still gives the file back byte for byte; reported
  ``grown`` with 0 entries added);
* ``diverged``: the chat holds fewer messages than stored (``shorter``) or a
  stored message changed (``different``); the stored session is left as it was
  (``sync --replace`` takes the file's version: ``replaced``).

A document that does not parse while its name and start say it is a Gemini
chat is a rewrite caught half-way: ``in-progress``, read again next run.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence

import orjson

from sessiontree.errors import InvalidSessionError
from sessiontree.format.codec import ParsedSession
from sessiontree.format.foreign.common import BadValue, bad_values_note, loads_record
from sessiontree.format.foreign.gemini import AGENT, compare_messages, map_gemini
from sessiontree.format.ids import is_valid_session_id
from sessiontree.stores.base import SyncChange, SyncState
from sessiontree.sync.reading import file_state, lines_in
from sessiontree.sync.rewrites import Outcome, SyncerView, merged_with_store, stored_to_compare

__all__ = ["is_gemini_name", "maybe_gemini", "stored_messages", "sync_gemini"]

_NAME = re.compile(r"session-.*\.json")
_TAIL = 4096


def is_gemini_name(path: str) -> bool:
    """Whether ``path`` is where and how Gemini CLI names a chat: ``chats/session-*.json``
    (what ``sync`` picks up when it walks a folder; a file given by path is read whatever
    its name)."""
    return (_NAME.fullmatch(os.path.basename(path)) is not None
            and os.path.basename(os.path.dirname(path)) == "chats")


def maybe_gemini(path: str, data: bytes) -> bool:
    """Whether ``data`` may be a Gemini chat document: a ``.json`` file, or one whose
    first line is a lone ``{`` (a pretty-printed document, never a JSONL record)."""
    if path.endswith(".json"):
        return True
    stripped = data.lstrip()
    return stripped.startswith(b"{") and stripped[1:].lstrip(b" \t\r").startswith(b"\n")


def stored_messages(stored: ParsedSession) -> list[tuple[str, bytes]]:
    """``(entry id, canonical JSON)`` of each Gemini message of a stored session, from the
    verbatim slice its first entry keeps (docs/agents/gemini.md, "The bytes")."""
    out: list[tuple[str, bytes]] = []
    for entry in stored.entries:
        info = entry.get("foreign")
        if not isinstance(info, dict) or info.get("agent") != AGENT or not isinstance(info.get("raw"), str):
            continue
        if entry["id"] in ("document", "document-end"):
            continue
        text = info["raw"].lstrip(" \t\r\n,")
        try:
            value = loads_record(text)
        except ValueError:
            value = None
        out.append((entry["id"], orjson.dumps(value, option=orjson.OPT_SORT_KEYS)))
    return out


def _noted(result: Outcome, values: Sequence[BadValue], before: int) -> Outcome:
    """``result`` with the note on the values taken otherwise of the lines past ``before``
    (docs/usage.md, "Bad values in agent files"), said once as for the other agents' files."""
    fresh = [value for value in values if value.line > before]
    if fresh:
        note = bad_values_note(fresh)
        result.note = f"{result.note}; {note}" if result.note else note
    return result


def sync_gemini(syncer: SyncerView, path: str, data: bytes, fst: os.stat_result,
                state: SyncState | None) -> Outcome | None:
    """Sync one Gemini chat document (module docstring), or ``None`` when ``data`` is not one.

    Raises:
        SyncConflictError: another sync moved the file's state on (the caller retries).
    """
    mapped = map_gemini(data, path)
    if mapped is None:
        if b'"sessionId"' in data[:512] and b'"messages"' not in data[-2:]:
            try:
                loads_record(data)
            except ValueError:
                return Outcome("in-progress", reason="the chat document does not parse yet "
                                  "(Gemini CLI rewrites it whole; caught half-way)", pending=len(data))
        return None
    parsed = mapped.parsed(path)
    session_id = parsed.header["id"]
    if not is_valid_session_id(session_id):
        return Outcome("rejected", reason=f"invalid session id {session_id!r}", line=1)
    first = data.split(b"\n", 1)[0]
    new_state = file_state(path, fst, session_id=session_id, consumed=len(data), lines=lines_in(data),
                           entries=len(parsed.entries), version=0, header_hash=hashlib.sha256(first).digest(),
                           tail_hash=hashlib.sha256(data[-_TAIL:]).digest())
    expect = syncer.states.get(path)

    def commit(change: SyncChange) -> None:
        syncer._commit(expect, new_state, change)

    raw = [parsed.entry_bytes(i) for i in range(len(parsed.entries))]
    found = stored_to_compare(syncer, session_id)
    if isinstance(found, Outcome):
        return found
    stored = found
    if stored is None:
        try:
            commit(SyncChange("create", session_id, dict(parsed.header), parsed.entries, raw,
                              provenance=syncer.origin(session_id, path)))
        except InvalidSessionError as exc:
            return Outcome("rejected", session_id, reason=exc.reason, line=exc.line)
        return _noted(Outcome("new", session_id, added=len(raw)), mapped.bad_values, 0)
    kind, why = compare_messages(stored_messages(stored), mapped.messages)
    from_file = sum(1 for entry in stored.entries if isinstance(entry.get("foreign"), dict))
    if kind == "same":
        same = from_file == len(raw) and all(stored.entry_bytes(i) == raw[i] for i in range(from_file))
        if same:
            commit(SyncChange("none", session_id))
            return Outcome("unchanged", session_id)
    if kind in ("same", "grown") or syncer.replace:
        entries, texts = merged_with_store(stored, parsed)
        try:
            commit(SyncChange("replace", session_id, dict(parsed.header), entries, texts))
        except InvalidSessionError as exc:
            return Outcome("rejected", session_id, reason=f"replacing failed: {exc.reason}")
        if kind in ("same", "grown"):
            result = Outcome("grown", session_id, added=max(0, len(raw) - from_file))
            if kind == "same":
                result.note = "rewritten by Gemini CLI with the same messages (the frame, e.g. lastUpdated)"
            # Messages are added at the end: the values of the lines past the stored ones are news.
            before = state.lines if state is not None and state.session_id == session_id else 0
            return _noted(result, mapped.bad_values, before)
        return Outcome("replaced", session_id, added=len(raw), reason=f"diverged ({kind}): {why}")
    return Outcome("diverged", session_id, reason=f"diverged: a {kind} rewrite: {why}", line=1)
