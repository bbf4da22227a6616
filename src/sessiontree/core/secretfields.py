"""Which strings of an entry the secret scan reads, and under which path (docs/secrets.md).

Every string value of an entry is scanned except the structural fields of
:data:`STRUCTURAL_KEYS` (ids, types, roles, timestamps, model names) and the base64
``data`` of image blocks; a string is named by a path such as ``message.content[2].text``
(:func:`iter_text_fields`). The verbatim source record a Claude Code or Codex entry keeps
(``foreign.raw``, or ``foreign.rawBase64`` when it is not UTF-8: decoded with replacement)
is read value by value when it is JSON, its :data:`PROTOCOL_KEYS` left out
(:func:`iter_raw_fields`). :func:`_entry_hits` scans an entry's strings with
:mod:`sessiontree.core.secretscan`, building paths only for the strings with a secret.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import orjson

from sessiontree.core.secretscan import Hit, _prepare, _scan_prepared
from sessiontree.format.types import Entry

__all__ = [
    "FOREIGN_META",
    "PROTOCOL_KEYS",
    "STRUCTURAL_KEYS",
    "iter_raw_fields",
    "iter_text_fields",
    "unscannable",
]

#: Keys never scanned, at the entry, message and content-block level: structure the
#: file needs intact (ids, references, types, roles, timestamps) and provider metadata.
STRUCTURAL_KEYS = frozenset({
    "type", "id", "parentId", "timestamp", "targetId", "fromId", "firstKeptEntryId",
    "summarizedThroughId", "role", "api", "provider", "model", "modelId", "stopReason",
    "toolCallId", "thinkingSignature", "mimeType", "customType", "thinkingLevel",
})

#: Keys of a Claude Code or Codex record (at any depth of its verbatim JSON) that hold the
#: agent's protocol data, not text: ids (request ``req_…``, message ``msg_…``, tool call
#: ``toolu_…``/``call_…``, UUIDs), references, times, types, thinking signatures and
#: encrypted reasoning. Never scanned in ``foreign.raw`` (docs/secrets.md).
PROTOCOL_KEYS = frozenset({
    "type", "id", "uuid", "parentUuid", "logicalParentUuid", "leafUuid", "sessionId", "session_id", "requestId",
    "messageId", "promptId", "agentId", "tool_use_id", "toolUseID", "toolUseId", "parentToolUseID",
    "sourceToolUseID", "sourceToolAssistantUUID", "call_id", "turn_id", "response_id", "item_id", "timestamp",
    "signature", "encrypted_content", "role", "model", "stop_reason", "stop_sequence", "version", "userType",
    "gitBranch", "slug", "mimeType", "media_type", "status", "subtype", "level", "hookEvent", "hookName",
    "projectHash", "startTime", "lastUpdated", "thoughtSignature",
})

def _path(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def iter_text_fields(entry: Entry) -> Iterator[tuple[str, str]]:
    """Every scanned string of ``entry``'s mapped text as ``(path, text)``, in document order.

    Paths join keys with ``.`` and list positions as ``[i]``
    (``message.content[2].text``). Structural keys (:data:`STRUCTURAL_KEYS`) of the
    entry, its message and its content blocks are skipped, and so is the ``data``
    of an image block; everything inside ``arguments``, ``details``, ``data`` and
    other free-form values is scanned, at any depth. Of the entry's ``foreign`` object
    only what is not the mapping's bookkeeping (:data:`FOREIGN_META`) is; its verbatim
    record is scanned by :func:`iter_raw_fields`.
    """
    yield from _walk(entry, "", True)


#: Keys of an entry's ``foreign`` object that are the mapping's own bookkeeping (and the
#: verbatim record, scanned by :func:`iter_raw_fields`); any other value in it is scanned
#: as mapped text (path ``foreign.<key>``).
FOREIGN_META = frozenset({"agent", "line", "part", "billed", "unmapped", "raw", "rawBase64", "rawDecoded",
                          "rawDropped"})


#: Keys whose values are still structure (entry, message, content blocks), not free-form payloads.
_STRUCTURAL_CONTAINERS = frozenset({"message", "content", "systemMessage", "replacement"})


def _walk(value: Any, path: str, structural: bool) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        image = value.get("type") == "image"
        for key, item in value.items():
            if not path and key == "foreign" and isinstance(item, dict):
                for name, inner in item.items():
                    if name not in FOREIGN_META:
                        yield from _walk(inner, f"foreign.{name}", False)
                continue
            if structural and (key in STRUCTURAL_KEYS or (image and key == "data")):
                continue
            # Entry, message and content blocks are structural; free-form payloads are not.
            inner = structural and key in _STRUCTURAL_CONTAINERS
            yield from _walk(item, _path(path, key), inner)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, f"{path}[{i}]", structural)


def _collect(value: Any, top: bool, structural: bool, out: list[str]) -> None:
    """The strings :func:`_walk` yields, without their paths, appended to ``out`` (``top``: the
    path so far is empty). Leaves are handled in the loop: most values are leaves."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        image = structural and value.get("type") == "image"
        for key, item in value.items():
            if structural and (key in STRUCTURAL_KEYS or (image and key == "data")):
                continue
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, dict):
                if top and key == "foreign":
                    for name, inner in item.items():
                        if name not in FOREIGN_META:
                            _collect(inner, False, False, out)
                    continue
                _collect(item, top and key == "", structural and key in _STRUCTURAL_CONTAINERS, out)
            elif isinstance(item, list):
                _collect(item, False, structural and key in _STRUCTURAL_CONTAINERS, out)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, (dict, list)):
                _collect(item, False, structural, out)


def _collect_raw(value: Any, out: list[str]) -> None:
    """The strings :func:`_walk_raw` yields, without their paths, appended to ``out``."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in PROTOCOL_KEYS:
                continue
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, (dict, list)):
                _collect_raw(item, out)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, (dict, list)):
                _collect_raw(item, out)
    elif isinstance(value, str):
        out.append(value)


#: ``(path, text, hits)`` of one scanned string with a secret.
FieldHits = list[tuple[str, str, list[Hit]]]


def _entry_hits(entry: Mapping[str, Any], record: tuple[str, object, Any] | None) -> tuple[FieldHits, FieldHits]:
    """The strings with a secret of ``entry``'s mapped text (:func:`iter_text_fields`) and of
    its verbatim ``record`` (:func:`_record`; :func:`iter_raw_fields`), as ``(path, text, hits)``.

    Each string gets the multi-pattern pass once, and paths are built only when one holds a
    secret (most entries hold none). A string of the record equal to one of the mapped text
    (a Claude Code record repeats its message's text) takes that string's hits, as
    :func:`scan_text` would give them again (docs/secrets.md, "Speed")."""
    texts: list[str] = []
    _collect(entry, True, True, texts)
    found = [None if (ready := _prepare(text)) is None else _scan_prepared(*ready) for text in texts]
    mapped: FieldHits = []
    if any(found):
        mapped = [(path, text, hits) for (path, text), hits in zip(_walk(entry, "", True), found, strict=True) if hits]
    if record is None:
        return mapped, []
    raw_texts: list[str] = []
    _record_texts(record, raw_texts)
    known = dict(zip(texts, found, strict=True))
    raw_found = [known[text] if text in known else
                 None if (ready := _prepare(text)) is None else _scan_prepared(*ready) for text in raw_texts]
    if not any(raw_found):
        return mapped, []
    return mapped, [(path, text, hits) for (path, text), hits in zip(_raw_fields(*record), raw_found, strict=True)
                    if hits]


#: The verbatim record of an entry could not be read to be scanned (``rawBase64`` that is not base64).
_UNREADABLE = object()


def _raw_text(entry: Mapping[str, Any]) -> tuple[str | None, object]:
    """The verbatim source record an entry keeps, as text: ``(text, how)``.

    ``how`` is ``"raw"`` (``foreign.raw``), ``"rawBase64"`` (bytes that are not UTF-8,
    decoded with U+FFFD for each invalid byte), :data:`_UNREADABLE` (``rawBase64`` that
    does not decode: nothing can be scanned) or ``None`` (no verbatim record)."""
    info = entry.get("foreign")
    if not isinstance(info, dict):
        return None, None
    raw = info.get("raw")
    if isinstance(raw, str):
        return raw, "raw"
    encoded = info.get("rawBase64")
    if encoded is None:
        return None, None
    if not isinstance(encoded, str):
        return None, _UNREADABLE
    try:
        return base64.b64decode(encoded, validate=True).decode("utf-8", errors="replace"), "rawBase64"
    except (binascii.Error, ValueError):
        return None, _UNREADABLE


def _raw_json(text: str) -> Any:
    """The record's JSON value (an object or a list), or ``None`` when the text is not one."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, (dict, list)) else None


#: A ``"key": "value"`` pair inside a record kept as a JSON fragment (a Gemini CLI chat is one
#: document, kept cut at its messages: docs/agents/gemini.md), for :func:`_mask_protocol`.
_PAIR = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _mask_protocol(text: str) -> str:
    """``text`` with the string values of :data:`PROTOCOL_KEYS` blanked (spaces of the same
    length, so a finding's offsets still point into the kept bytes): a record kept as a
    fragment of a JSON document is scanned as text, its protocol ids and hashes left out as
    in a parsed record."""
    def blank(match: re.Match[str]) -> str:
        if match.group(1) not in PROTOCOL_KEYS:
            return match.group(0)
        start, end = match.span(2)
        whole = match.group(0)
        offset = match.start()
        return whole[:start - offset] + " " * (end - start) + whole[end - offset:]
    return _PAIR.sub(blank, text)


def _walk_raw(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in PROTOCOL_KEYS:
                yield from _walk_raw(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk_raw(item, f"{path}[{i}]")


def iter_raw_fields(entry: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """Every scanned string of the verbatim source record ``entry`` keeps, as ``(path, text)``.

    A JSON record is scanned value by value (what the agent wrote, decoded: its
    escapes undone, so lines and quotes are as in the mapped text), its
    :data:`PROTOCOL_KEYS` left out, with paths under ``foreign.raw``
    (``foreign.raw.toolUseResult.stdout``); a record that is not JSON (a line that is
    not, or a fragment of a JSON document: a Gemini CLI chat) is scanned as one text
    (path ``foreign.raw``), the string values of its :data:`PROTOCOL_KEYS` blanked. ``rawBase64`` is decoded with replacement first
    (path ``foreign.rawBase64``...). Nothing when the entry keeps no record or it
    cannot be decoded (:func:`unscannable`).
    """
    text, how = _raw_text(entry)
    if text is None:
        return
    yield from _raw_fields(text, how, _raw_json(text))


def _raw_fields(text: str, how: object, value: Any) -> Iterator[tuple[str, str]]:
    """:func:`iter_raw_fields` of a record already read (``value``: its JSON, or ``None``)."""
    root = f"foreign.{how}"
    if value is None:
        yield root, _mask_protocol(text)
    else:
        yield from _walk_raw(value, root)


def _record(entry: Mapping[str, Any]) -> tuple[str, object, Any] | None:
    """``(text, how, JSON value or None)`` of the verbatim record ``entry`` keeps, or ``None``."""
    text, how = _raw_text(entry)
    return None if text is None else (text, how, _raw_json(text))


def _record_texts(record: tuple[str, object, Any] | None, out: list[str]) -> None:
    if record is not None:
        if record[2] is None:
            out.append(_mask_protocol(record[0]))
        else:
            _collect_raw(record[2], out)


def unscannable(entries: Iterable[Entry]) -> list[tuple[int, str | None, str]]:
    """``(index, entry id, path)`` of every kept record that cannot be decoded to be scanned
    (a ``foreign.rawBase64`` that is not base64): redaction drops it (docs/secrets.md)."""
    out = []
    for index, entry in enumerate(entries):
        if _raw_text(entry)[1] is _UNREADABLE:
            out.append((index, _entry_id(entry), "foreign.rawBase64"))
    return out


def _entry_id(entry: Mapping[str, Any]) -> str | None:
    value = entry.get("id")
    return value if isinstance(value, str) else None

