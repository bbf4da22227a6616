"""The JSONL codec: read session files of format 1-4 into format 4, write format 4.

Reading rules (docs/rules/versions.md seed:session-version; docs/rules/format.md D.17-D.22,
docs/rules/decisions.md D-2,
D-3, D-15), each enforced here and pinned by a test:

* One leading UTF-8 BOM is stripped; lines are split on ``\\n`` only; a
  trailing ``\\r`` is JSON whitespace, so CRLF files read fine.
* Whitespace-only lines are skipped wherever they are.
* Every other line must be one JSON object, or the session is rejected with
  :class:`InvalidSessionError` naming file and 1-based line. So is a record
  nested deeper than :data:`sessiontree.format.jsonio.MAX_DEPTH` (512) levels. A last line that
  fails to parse and has no newline after it is a *torn final record* and is
  rejected too (never silently dropped); a last line that parses is accepted
  with or without its newline.
* The first record is the header: ``type == "session"``, a non-empty string
  ``id``, a recognized ``version`` (absent = 1, or the integers 1-4).
  Future and unrecognized versions raise :class:`UnsupportedVersionError`.
* Entries need a valid base (``type``, ``id``, ``parentId``, ``timestamp``)
  and the per-type fields of docs/rules/format.md D.19. Format-4 files with a duplicate id or a
  second header are rejected; while upgrading formats 1-3, byte-identical
  duplicate records and extra headers are dropped (old writers produced
  them) and a duplicate id with different content is rejected.
* Orphans, self-parents and parent cycles are tolerated here; the tree
  handles them.
* Entries of unknown ``type`` with a valid base are kept verbatim (docs/rules/decisions.md D-10).

Every entry's JSON text is kept next to its parsed form
(:attr:`ParsedSession.raw`) so that writing a session back reproduces stored
entries byte for byte; only entries an upgrade changed are re-serialized.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from sessiontree.errors import InvalidSessionError, UnsupportedVersionError
from sessiontree.format import jsonio
from sessiontree.format.gcpause import gc_paused
from sessiontree.format.others import named_header, named_record
from sessiontree.format.types import Entry
from sessiontree.format.upgrade import Records, upgrade

__all__ = [
    "CURRENT_VERSION",
    "CheckedTexts",
    "ParsedSession",
    "parse_session",
    "parse_version",
    "read_header_file",
    "read_session_file",
    "serialize_session",
    "split_lines",
    "validate_entry",
    "validate_header",
]

CURRENT_VERSION = 4
_BOM = b"\xef\xbb\xbf"
_JSON_WS = b" \t\r\n"
_BLANK_START = _JSON_WS + b"\x0b\x0c"  # b"" is "in" it too: an empty line is blank


@dataclass
class ParsedSession:
    """A session read into format 4, in memory.

    Attributes:
        header: the format-4 header object.
        entries: entry objects in file order (header excluded).
        raw: for each entry, its JSON text as stored (no newline), or ``None``
            when an upgrade changed the entry (use :meth:`entry_bytes`).
        header_raw: the header's JSON text as written in format 4.
        source_version: the version the file declared (1 when absent).
        upgraded: whether the file differs from its format-4 form (older
            version, early-4 header, dropped duplicates, missing final newline,
            BOM or CRLF), i.e. whether opening it for writing must persist an
            upgrade first.
        steps: names of the migration steps that ran.
        lines: 1-based physical line of each entry in the source.
        path: the source path, if any.
        unchecked: set by :func:`parse_session` only: the indexes of entries whose
            final (upgraded) form its entry check (docs/rules/format.md D.19) did not
            see, i.e. those an upgrade of a format-2/3 file changed; every other entry
            passed it as it is now. ``None`` (any other maker): no entry is vouched for.
    """

    header: dict[str, Any]
    entries: list[Entry]
    raw: list[bytes | None]
    header_raw: bytes
    source_version: int
    upgraded: bool = False
    steps: list[str] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    path: str | None = None
    unchecked: frozenset[int] | None = None

    def entry_bytes(self, index: int) -> bytes:
        """The JSON text of entry ``index``: as stored, or serialized if an upgrade changed it."""
        text = self.raw[index]
        if text is None:
            # Serialized lazily: most readers never write an upgraded entry back.
            text = self.raw[index] = jsonio.dumps(self.entries[index])
        return text

    def checked_texts(self) -> list[bytes | None]:
        """Each entry's JSON text, for a store's ``create``: a :class:`CheckedTexts`
        when :func:`parse_session` made this session (its checks vouch for the
        entries), else a plain list. Texts an upgrade changed are serialised now."""
        texts: list[bytes | None] = [self.entry_bytes(i) for i in range(len(self.entries))] \
            if None in self.raw else list(self.raw)
        if self.unchecked is None:
            return texts
        return CheckedTexts(texts, self.entries, self.unchecked)

    def to_bytes(self) -> bytes:
        """The session as a format-4 JSONL file (header line, one line per entry)."""
        return b"\n".join([self.header_raw, *(self.entry_bytes(i) for i in range(len(self.raw)))]) + b"\n"


class CheckedTexts(list[bytes | None]):
    """The stored JSON text of each entry of a :class:`ParsedSession` that
    :func:`parse_session` read, as the ``raw`` of a store's ``create``: a store then
    skips its own entry check (docs/rules/format.md D.19) and its newline check for
    the entries the parser already checked in their present form, so each rule runs
    once per entry (docs/stores.md, "Import"). Made only by :meth:`ParsedSession.checked_texts`.

    Attributes:
        entries: the entry list vouched for; a store honours the vouch only for this
            very list (``raw.entries is entries``).
        unchecked: indexes the store must still check (entries an upgrade changed).
    """

    __slots__ = ("entries", "unchecked")

    def __init__(self, texts: list[bytes | None], entries: list[Entry], unchecked: frozenset[int]) -> None:
        super().__init__(texts)
        self.entries = entries
        self.unchecked = unchecked


def split_lines(data: bytes) -> tuple[list[bytes], bool]:
    """Split file bytes into physical lines.

    Returns:
        ``(lines, terminated)``: the lines without their ``\\n`` (one leading
        BOM removed), and whether the last line ended with ``\\n``.
    """
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    lines = data.split(b"\n")
    terminated = lines[-1] == b""
    if terminated:
        lines.pop()
    return lines, terminated


def parse_version(header: dict[str, Any]) -> int:
    """The header's format version (docs/rules/versions.md C.1, C.13).

    Absent means 1; accepted are the integers 1-4 (an integral float too,
    since JSON and JavaScript cannot tell ``4.0`` from ``4``: one rule for
    check, readers, import into every store and migrate). ``bool`` is not a number.

    Raises:
        UnsupportedVersionError: any other value (future versions included).
    """
    if "version" not in header:
        return 1
    version = header["version"]
    if isinstance(version, bool) or not isinstance(version, (int, float)):
        raise UnsupportedVersionError(version)
    if isinstance(version, float) and not version.is_integer():
        raise UnsupportedVersionError(version)
    if not 1 <= version <= CURRENT_VERSION:
        raise UnsupportedVersionError(version)
    return int(version)


def _integral_version(header: dict[str, Any], version: int) -> dict[str, Any]:
    """The header with an integral float ``version`` (``4.0``) as the int it
    equals (``4``), so every consumer (stores included) sees one value.

    JSON has one number type: ``4.0`` *is* version 4, and such a file is
    canonical format 4 (it is not upgraded or rewritten for it; its header
    line is kept as written). Modifies and returns ``header``.
    """
    if isinstance(header.get("version"), float):
        header["version"] = version
    return header


def validate_header(header: Any) -> int:
    """Check a header object (docs/rules/format.md D.18) and return its version.

    Raises:
        InvalidSessionError: not an object, wrong ``type``, missing/empty ``id``,
            non-string ``cwd``/``createdAt``/``timestamp`` (reason names the field);
            another agent's header (DeepSeek Harness, gajae-code 5, a Gemini CLI JSONL
            chat), named (:mod:`sessiontree.format.others`).
        UnsupportedVersionError: unrecognized ``version``.
    """
    if not isinstance(header, dict):
        raise InvalidSessionError("header is not a JSON object")
    named = named_header(header)  # another agent's file, named (docs/agents/README.md)
    if named is not None:
        raise InvalidSessionError(named)
    if header.get("type") != "session":
        raise InvalidSessionError('missing header: first record must have "type": "session"')
    if not isinstance(header.get("id"), str) or not header["id"]:
        raise InvalidSessionError('header field "id" must be a non-empty string')
    for key in ("cwd", "createdAt", "timestamp"):
        if key in header and not isinstance(header[key], str):
            raise InvalidSessionError(f'header field "{key}" must be a string')
    return parse_version(header)


def _field_error(entry_type: str, name: str, expected: str) -> InvalidSessionError:
    return InvalidSessionError(f'{entry_type} entry field "{name}" must be {expected}')


def validate_entry(entry: Any) -> None:
    """Check one entry's structure (docs/rules/format.md D.19).

    Raises:
        InvalidSessionError: with a reason naming the offending field (no path/line;
            callers add them).
    """
    if not isinstance(entry, dict):
        raise InvalidSessionError("record is not a JSON object")
    entry_type = entry.get("type")
    if not isinstance(entry_type, str) or not entry_type:
        raise InvalidSessionError('entry field "type" must be a non-empty string')
    if entry_type == "session":
        raise InvalidSessionError("second session header")
    entry_id = entry.get("id")
    if not isinstance(entry_id, str) or not entry_id:
        raise _field_error(entry_type, "id", "a non-empty string")
    if "parentId" not in entry:
        raise _field_error(entry_type, "parentId", "present (null or a string)")
    parent = entry["parentId"]
    if parent is not None and not isinstance(parent, str):
        raise _field_error(entry_type, "parentId", "null or a string")
    if not isinstance(entry.get("timestamp"), str):
        raise _field_error(entry_type, "timestamp", "a string")
    if entry_type == "message":
        message = entry.get("message")
        if not isinstance(message, dict):
            raise _field_error(entry_type, "message", "an object")
        if not isinstance(message.get("role"), str):
            raise _field_error(entry_type, "message.role", "a string")
    elif entry_type == "label":
        if not isinstance(entry.get("targetId"), str):
            raise _field_error(entry_type, "targetId", "a string")
        if "label" in entry and not isinstance(entry["label"], str):
            raise _field_error(entry_type, "label", "a string when present")
    elif entry_type == "context_edit":
        if not isinstance(entry.get("targetId"), str):
            raise _field_error(entry_type, "targetId", "a string")
        replacement = entry.get("replacement", ...)
        if replacement is ...:
            raise _field_error(entry_type, "replacement", "null or an object")
        if replacement is not None and not (
            isinstance(replacement, dict) and isinstance(replacement.get("content"), (str, list))
        ):
            raise _field_error(entry_type, "replacement", "null or an object with string or array content")
    elif entry_type == "compaction":
        if not isinstance(entry.get("summary"), str):
            raise _field_error(entry_type, "summary", "a string")
        first_kept = entry.get("firstKeptEntryId")
        if first_kept is not None and not isinstance(first_kept, str):
            raise _field_error(entry_type, "firstKeptEntryId", "a string, null or absent")


def _located(exc: InvalidSessionError, path: str | None, line: int) -> InvalidSessionError:
    """The same error with the file and 1-based line where it was found."""
    if isinstance(exc, UnsupportedVersionError):
        return UnsupportedVersionError(exc.version, path, line)
    return InvalidSessionError(exc.reason, path, line)


def _too_deep(path: str | None, line: int) -> InvalidSessionError:
    """The error for a record deeper than :data:`sessiontree.format.jsonio.MAX_DEPTH`."""
    return InvalidSessionError(
        f"record nested more than {jsonio.MAX_DEPTH} levels deep (the limit sessiontree reads and writes)",
        path, line)


def _is_blank(line: bytes) -> bool:
    return not line.strip(_BLANK_START)


def parse_session(data: bytes | str, path: str | None = None) -> ParsedSession:
    """Read the bytes of a session file (any supported format) into format 4.

    Args:
        data: the whole file (``str`` is accepted and encoded as UTF-8).
        path: used in error messages and to resolve a relative ``parentSession``.

    Returns:
        A :class:`ParsedSession` in format 4. Nothing is written anywhere.

    Raises:
        InvalidSessionError: empty or whitespace-only data, a malformed or torn
            line, a record nested deeper than ``jsonio.MAX_DEPTH``, a missing or
            invalid header, an invalid entry, a duplicate id or
            second header (``path`` and 1-based ``line`` set).
        UnsupportedVersionError: a future or unrecognized version.
    """
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    with gc_paused():  # a load makes no cycles (docs/decisions/gc-pause.md)
        return _parse_session(data, path)


def _parse_session(data: bytes, path: str | None) -> ParsedSession:
    lines, terminated = split_lines(data)
    had_bom = data.startswith(_BOM)
    last_content = len(lines) - 1
    while last_content >= 0 and _is_blank(lines[last_content]):
        last_content -= 1
    if last_content < 0:
        raise InvalidSessionError("no session header: the file is empty or blank", path)

    header: dict[str, Any] | None = None
    header_line = 0
    version = 0
    entries: list[Entry] = []
    raw: list[bytes | None] = []
    line_numbers: list[int] = []
    positions: list[int] = []  # record index in the file (header = 0), for v1 upgrades
    seen: dict[str, bytes] = {}
    v1_seen: dict[str | None, list[bytes]] = {}
    dropped = False
    crlf = False
    loads = jsonio.loads
    record_index = 0

    for index in range(last_content + 1):
        line = lines[index]
        # Records start with "{": only lines starting with whitespace need the (copying) strip.
        head = line[:1]
        if head in _BLANK_START and _is_blank(line):
            continue
        text = line
        if line[-1:] in _JSON_WS or head in _JSON_WS:
            # Rare: avoid copying every line just to strip nothing.
            text = line.strip(_JSON_WS)
            crlf = crlf or line.endswith(b"\r")
        number = index + 1
        try:
            obj = loads(text)
        except jsonio.NestingError as exc:
            raise _too_deep(path, number) from exc
        except ValueError as exc:
            if index == len(lines) - 1 and not terminated:  # no newline follows this very line
                raise InvalidSessionError(
                    "torn final record: the last line is incomplete JSON with no newline", path, number
                ) from exc
            raise InvalidSessionError(f"malformed line: not valid JSON ({exc})", path, number) from exc
        if not isinstance(obj, dict):
            raise InvalidSessionError("malformed line: not a JSON object", path, number)
        if header is None:
            try:
                version = validate_header(obj)
            except InvalidSessionError as exc:
                raise _located(exc, path, number) from None
            header = _integral_version(obj, version)
            header_line = number
            continue
        record_index += 1
        if version < 4 and obj.get("type") == "session":
            dropped = True  # extra headers of old buggy writers (docs/rules/format.md E.3/E.4,
                            # docs/rules/decisions.md D-15)
            continue
        if version > 1:
            named = named_record(obj, version)
            if named is not None:
                raise InvalidSessionError(named, path, number)
            try:
                validate_entry(obj)
            except InvalidSessionError as exc:
                raise _located(exc, path, number) from None
            entry_id = obj["id"]
            if entry_id in seen:
                if version < 4 and seen[entry_id] == text:
                    dropped = True  # byte-identical duplicate record of an old writer
                                    # (docs/rules/decisions.md D-15)
                    continue
                raise InvalidSessionError(f'duplicate entry id "{entry_id}"', path, number)
            seen[entry_id] = text
        else:
            # Format 1 has no ids: compare bytes only among records sharing a timestamp.
            stamp = obj.get("timestamp")
            key = stamp if isinstance(stamp, str) else None
            same = v1_seen.get(key)
            if same is not None and text in same:
                dropped = True
                continue
            v1_seen.setdefault(key, []).append(text)
        entries.append(obj)
        raw.append(text)
        line_numbers.append(number)
        positions.append(record_index)

    assert header is not None  # last_content >= 0 guarantees one record
    records = Records(header=header, entries=entries,
                      base_dir=os.path.dirname(os.path.abspath(path)) if path else None)
    steps = upgrade(records, version, positions)
    if version == 1:
        for i, entry in enumerate(records.entries):
            try:
                validate_entry(entry)
            except InvalidSessionError as exc:
                raise _located(exc, path, line_numbers[i]) from None
    for i in records.changed:
        raw[i] = None
    header_raw = jsonio.dumps(records.header) if records.header_changed else lines[header_line - 1].strip(_JSON_WS)
    upgraded = bool(steps) or dropped or had_bom or crlf or not terminated
    return ParsedSession(
        header=records.header,
        entries=records.entries,
        raw=raw,
        header_raw=header_raw,
        source_version=version,
        upgraded=upgraded,
        steps=steps,
        lines=line_numbers,
        path=path,
        # Format 1 entries were checked after their upgrade (above); others before it.
        unchecked=frozenset() if version == 1 else frozenset(records.changed),
    )


def read_session_file(path: str | os.PathLike[str]) -> ParsedSession:
    """Read and upgrade a session file in memory; the file is never modified.

    Raises:
        OSError: the file cannot be read.
        InvalidSessionError, UnsupportedVersionError: see :func:`parse_session`.
    """
    path = os.fspath(path)
    with open(path, "rb") as handle:
        data = handle.read()
    return parse_session(data, path)


def read_header_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read just the header of a session file, upgraded to format 4 in memory.

    Reads up to the first non-blank line only (a header longer than any
    buffer works). The file is never modified.

    Raises:
        OSError: the file cannot be read.
        InvalidSessionError, UnsupportedVersionError: no valid header.
    """
    path = os.fspath(path)
    number = 0
    with open(path, "rb") as handle:
        for line in handle:
            number += 1
            if number == 1:
                line = line.removeprefix(_BOM)
            if _is_blank(line):
                continue
            try:
                obj = jsonio.loads(line.strip(_JSON_WS))
            except jsonio.NestingError as exc:
                raise _too_deep(path, number) from exc
            except ValueError as exc:
                raise InvalidSessionError(f"malformed header line ({exc})", path, number) from exc
            try:
                version = validate_header(obj)
            except InvalidSessionError as exc:
                raise _located(exc, path, number) from None
            records = Records(header=_integral_version(obj, version), entries=[], base_dir=os.path.dirname(os.path.abspath(path)))
            upgrade(records, version)
            return records.header
    raise InvalidSessionError("no session header: the file is empty or blank", path)


def serialize_session(header: dict[str, Any], entries: list[Entry],
                      raw: list[bytes | None] | None = None) -> bytes:
    """A whole format-4 JSONL file: the header line, then one line per entry.

    Args:
        header: a format-4 header.
        entries: entries in order.
        raw: optional stored JSON text per entry (``None`` items are serialized),
            so unchanged entries are written back byte for byte.

    Returns:
        UTF-8 bytes, every line ending in ``\n``; records as compact JSON
        (:func:`sessiontree.format.jsonio.dumps`, docs/rules/format.md E.1, §2.6).

    Raises:
        ValueError: a record holds values that are not JSON data.
    """
    out = [jsonio.dumps(header)]
    for i, entry in enumerate(entries):
        text = raw[i] if raw is not None else None
        out.append(text if text is not None else jsonio.dumps(entry))
    return b"\n".join(out) + b"\n"
