"""What a store may write: a storable header and entry (format 4, docs/rules/format.md A.3,
D.18, D.19), how an entry becomes its stored JSON text, and the errors every store gives
for a taken id or a replacement header of another session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sessiontree.errors import InvalidSessionError, SessionExistsError
from sessiontree.format import jsonio
from sessiontree.format.codec import CURRENT_VERSION, CheckedTexts, validate_entry, validate_header
from sessiontree.stores.blobref import resolve_blobs

__all__ = ["PreparedCreate", "check_header", "check_replacement_header", "encode_entries", "file_rule_problems", "id_in_use_error", "prepare_creates", "stored_header", "validated"]


def check_header(header: Any) -> str:
    """Validate a header a store is asked to write; return its session id.

    Stores only ever write format 4, so older or early-4 headers are refused
    here rather than written and silently upgraded on the next read.

    Raises:
        InvalidSessionError: not a valid header (docs/rules/format.md D.18), or not version 4.
        UnsupportedVersionError: an unrecognized version.
    """
    version = validate_header(header)
    if version != CURRENT_VERSION:  # 4.0 is 4: JSON has one number type
        raise InvalidSessionError(f"a store writes format {CURRENT_VERSION} headers only (got version {version})")
    if "timestamp" in header or "parentSession" in header:
        raise InvalidSessionError('an early version-4 header ("timestamp"/"parentSession") must be upgraded first')
    session_id: str = header["id"]  # validate_header: a string
    return session_id


def stored_header(header: dict[str, Any], session_id: str, where: str) -> dict[str, Any]:
    """``header``, a header row a database store read back (the record before the
    entries, JSONL line 1), after checking it is still a valid format-4 header of
    ``session_id``: its bytes may match their checksum and still have been rewritten
    by hand (``{}``, another session's header), and every reader takes ``type``, ``id``
    and the rest for granted (docs/stores.md, "Record checksums").

    Raises:
        InvalidSessionError: not a valid header (docs/rules/format.md D.18), not
            version 4, or its ``id`` is not the key it is stored under; located at
            ``where``, line 1.
    """
    try:
        version = validate_header(header)
    except InvalidSessionError as exc:
        raise InvalidSessionError(f"stored header: {exc.reason}", where, 1) from None
    if version != CURRENT_VERSION:
        raise InvalidSessionError(f"stored header: version {version}, not {CURRENT_VERSION}", where, 1)
    if header["id"] != session_id:
        raise InvalidSessionError(f"stored header: its id {header['id']!r} is not the session's {session_id!r}",
                                  where, 1)
    return header


def validated(entry: dict[str, Any], where: str, line: int) -> dict[str, Any]:
    """``entry`` after :func:`~sessiontree.format.validate_entry` (docs/rules/format.md:
    every stored record is a valid entry), its error located where the store holds
    the record: ``where`` (``<store url>#<session id>``) and the record's 1-based
    line in the session's JSONL form.

    Raises:
        InvalidSessionError: not a valid entry (reason from ``validate_entry``).
    """
    try:
        validate_entry(entry)
    except InvalidSessionError as exc:
        raise InvalidSessionError(exc.reason, where, line) from None
    return entry


def encode_entries(entries: Sequence[dict[str, Any]], raw: Sequence[bytes | None] | None = None) -> list[bytes]:
    """Validate entries and return the JSON text to store for each.

    Args:
        entries: entry objects in order.
        raw: optional stored JSON text per entry; ``None`` items (or no
            ``raw`` at all) are serialized with :func:`sessiontree.format.jsonio.dumps`.

    Returns:
        One ``bytes`` per entry, without newline.

    An entry holding :class:`~sessiontree.stores.blobref.BlobRef` values (read with
    image references) is written with their strings, loaded from their store.

    When ``raw`` is a :class:`~sessiontree.format.codec.CheckedTexts` for this very
    ``entries`` list, the entries the reader checked as they are (all but
    ``raw.unchecked``) are not checked again and their texts are taken as they are;
    the duplicate-id check runs for every entry (docs/stores.md, "Import").

    Raises:
        InvalidSessionError: an entry fails docs/rules/format.md D.19, two entries of the
            batch share an id, ``raw`` has the wrong length, or a raw text is
            not a single line.
        ValueError: an entry holds values that are not JSON data.
        CorruptEntryError, StorageError: a referenced image could not be loaded.
    """
    if raw is not None and len(raw) != len(entries):
        raise InvalidSessionError(f"raw has {len(raw)} items for {len(entries)} entries")
    seen: set[str] = set()
    out: list[bytes] = []
    # Entries the reader checked as they are now (docs/stores.md, "Import"): each rule once.
    unchecked = raw.unchecked if isinstance(raw, CheckedTexts) and raw.entries is entries else None
    for index, entry in enumerate(entries):
        text = raw[index] if raw is not None else None
        if unchecked is None or index in unchecked:
            validate_entry(entry)
        elif text is not None:
            # Read from one line of a file: a valid entry's text, no newline in it.
            entry_id = entry["id"]
            if entry_id in seen:
                raise InvalidSessionError(f'duplicate entry id "{entry_id}"')
            seen.add(entry_id)
            out.append(text)
            continue
        entry_id = entry["id"]
        if entry_id in seen:
            raise InvalidSessionError(f'duplicate entry id "{entry_id}"')
        seen.add(entry_id)
        if text is None:
            try:
                text = jsonio.dumps(entry)
            except ValueError:
                # An entry read with image references (docs/blobs.md), e.g. copied into a
                # branched session: written with its images' strings, loaded now.
                resolved = resolve_blobs(entry)
                if resolved is entry:
                    raise
                text = jsonio.dumps(resolved)
        else:
            text = bytes(text)
            # A newline inside a record would split it into two JSONL lines.
            if b"\n" in text:
                raise InvalidSessionError(f'raw text of entry "{entry_id}" contains a newline')
        out.append(text)
    return out


PreparedCreate = tuple[str, dict[str, Any], bytes, Sequence[dict[str, Any]], list[bytes]]
"""One session of a database store's ``create_many``, checked and encoded before its
transaction opens: ``(session_id, header, header_json, entries, entry_texts)``."""


def prepare_creates(sessions: Iterable[tuple[dict[str, Any], Sequence[dict[str, Any]],
                                             Sequence[bytes | None] | None]],
                    check_id: Callable[[str, str], object] | None = None) -> list[PreparedCreate]:
    """Check and encode the ``(header, entries, raw)`` triples of ``create_many`` before
    any write, so a bad batch stores nothing (docs/stores.md).

    Args:
        sessions: the triples, as for ``create``.
        check_id: called as ``check_id(id, "session id")`` / ``check_id(id, "entry id")``
            for a store whose ids must pass a further check; it raises to refuse one.

    Returns:
        One :data:`PreparedCreate` per session, in order.

    Raises:
        InvalidSessionError: a header or entry is invalid (or ``check_id`` refuses an id).
        SessionExistsError: the batch holds one session id twice.
    """
    prepared: list[PreparedCreate] = []
    seen: set[str] = set()
    for header, entries, raw in sessions:
        session_id = check_header(header)
        if check_id is not None:
            check_id(session_id, "session id")
        if session_id in seen:
            raise SessionExistsError(session_id)
        seen.add(session_id)
        texts = encode_entries(entries, raw)
        if check_id is not None:
            for entry in entries:
                check_id(entry["id"], "entry id")
        prepared.append((session_id, header, jsonio.dumps(header), entries, texts))
    return prepared


def check_replacement_header(session_id: str, header: Any) -> str:
    """Validate a header given to ``replace_header(session_id, header)``; return its id.

    Raises:
        InvalidSessionError: invalid (see :func:`check_header`) or its id is not ``session_id``.
    """
    new_id = check_header(header)
    if new_id != session_id:
        raise InvalidSessionError(f"header id {new_id!r} does not match session {session_id!r}")
    return new_id


def id_in_use_error(session_id: str, entry_id: str | None = None, path: str | None = None) -> InvalidSessionError:
    """The error every store raises when an appended entry reuses an id of its session
    (docs/rules/format.md D.15/D.19); ``entry_id`` when the store knows which one."""
    which = f'entry id "{entry_id}"' if entry_id is not None else "an entry id"
    return InvalidSessionError(f"{which} is already used in session {session_id}", path)


def file_rule_problems(data: bytes, session_id: str | None, where: str) -> list[Any]:
    """Every problem the file checker (:func:`sessiontree.check.check_bytes`) reports
    for a session in its JSONL form, as :class:`~sessiontree.stores.base.StoreProblem`
    rows: the one set of rules ``check --store`` applies on every store, so a session
    gets the same verdict whichever store holds it (docs/check.md).

    Args:
        data: the session's bytes (header line, then one line per entry).
        session_id: the session, for the rows.
        where: the file path, or ``<store url>#<session id>``.
    """
    from sessiontree.check import checker  # imported on use: the checker is large
    from sessiontree.stores.base import StoreProblem

    return [StoreProblem(found.code, found.message, found.severity, session_id, found.line, found.entry_id, where)
            for found in checker.check_bytes(data, where)]
