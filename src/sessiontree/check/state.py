"""What the checker's passes share: the file's records and lines, and what was found.

The passes (:mod:`~sessiontree.check.reader`, :mod:`~sessiontree.check.structure`,
:mod:`~sessiontree.check.pairing`, :mod:`~sessiontree.check.repair`) run in
that order over one :class:`FileState`; each reads what the earlier ones
filled in and adds its own problems and changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sessiontree.check.codes import CODES, Change, Problem

__all__ = ["BLANK", "BOM", "UNKNOWN", "FileState", "Kept", "Rec", "id_of"]

BOM = b"\xef\xbb\xbf"
# Blank as the strict reader sees it: JSON whitespace plus \v and \f (docs/rules/format.md D.3).
BLANK = b" \t\r\n\x0b\x0c"
#: The ``parentId`` of a damaged record when it could not be read.
UNKNOWN: Any = object()


@dataclass
class Rec:
    """A readable record (header or entry) of the file.

    Attributes:
        line: 1-based physical line.
        raw: the record's text as written (no newline, no CR).
        obj: the parsed record; repairs edit it in place.
        dropped: left out of the repaired copy.
        changed: re-serialized in the repaired copy.
        position: record index in the file, header = 0 (the format-1 upgrade numbers by it).
        oid: the entry id as written.
        key: the entry's unique id in the model (differs from ``oid`` for a renamed duplicate).
        refs: reference field -> model key of the entry it names (``None``: names none).
        parent: model key of the parent; ``None`` for roots and missing parents.
        parent_missing: ``parentId`` is a string that names no entry.
    """

    line: int
    raw: bytes
    obj: dict[str, Any]
    dropped: bool = False
    changed: bool = False
    position: int = 0
    oid: str | None = None
    key: str | None = None
    refs: dict[str, str | None] = field(default_factory=dict)
    parent: str | None = None
    parent_missing: bool = False


@dataclass
class Kept:
    """An unreadable line, kept as written in the repaired copy (``line`` 1-based)."""

    line: int
    data: bytes


def id_of(obj: dict[str, Any]) -> str | None:
    """The record's ``id`` when it is a non-empty string, else ``None``."""
    entry_id = obj.get("id")
    return entry_id if isinstance(entry_id, str) and entry_id else None


@dataclass
class FileState:
    """One file under check: its records, what the passes learnt, problems and changes.

    Attributes:
        data: the whole file as stored.
        path: the file as the caller named it (problems carry it).
        problems: in the order found (:meth:`sorted_problems` orders them by line).
        changes: the repairs made, in the order made.
        items: the file's records and kept malformed lines, in file order.
        salvaged: id -> ``(line, parentId or UNKNOWN, kept in the copy)`` of the
            first damaged record with that id (for messages).
        kept_ids: id -> line of the first malformed line kept in the copy that shows it.
        lost: id -> ``(line, parentId or UNKNOWN)`` of the first dropped torn record.
        header: the header record, when the first record is one.
        header_obj: the header as the copy will hold it (upgraded).
        header_changed: whether the upgrade changed the header.
        version: the header's format version, when readable.
        header_valid: whether the header passed ``validate_header``.
        entries: the entry records (extra headers and legacy duplicates left out).
        model: entries with an id that the copy keeps, in file order.
        by_key: model key -> record.
        first_def: id as written -> its first record.
    """

    data: bytes
    path: str
    problems: list[Problem] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    items: list[Rec | Kept] = field(default_factory=list)
    salvaged: dict[str, tuple[int, Any, bool]] = field(default_factory=dict)
    kept_ids: dict[str, int] = field(default_factory=dict)
    lost: dict[str, tuple[int, Any]] = field(default_factory=dict)
    header: Rec | None = None
    header_obj: dict[str, Any] | None = None
    header_changed: bool = False
    version: int | None = None
    header_valid: bool = False
    entries: list[Rec] = field(default_factory=list)
    model: list[Rec] = field(default_factory=list)
    by_key: dict[str, Rec] = field(default_factory=dict)
    first_def: dict[str, Rec] = field(default_factory=dict)

    def problem(self, code: str, line: int | None, message: str, entry_id: str | None = None) -> None:
        """Record a problem ``code`` (a key of ``CODES``, which gives its severity) at file ``line``."""
        self.problems.append(Problem(code, CODES[code].severity, self.path, line, message, entry_id))

    def change(self, code: str, line: int | None, description: str, entry_id: str | None = None,
               dropped: bytes | None = None) -> None:
        """Record a repair ``code`` made at file ``line`` (``dropped``: the bytes it removed, if any)."""
        self.changes.append(Change(code, line, description, entry_id, dropped))

    def drop(self, rec: Rec, code: str, description: str, entry_id: Any = ...) -> None:
        """Leave ``rec`` out of the copy, listed as a change that keeps its bytes
        (``entry_id`` defaults to the record's own id)."""
        rec.dropped = True
        self.change(code, rec.line, description, id_of(rec.obj) if entry_id is ... else entry_id, rec.raw)

    def records(self) -> list[Rec]:
        """The readable records, in file order."""
        return [item for item in self.items if isinstance(item, Rec)]

    def sorted_problems(self) -> list[Problem]:
        """The problems by file line (file-level ones, line ``None``, first)."""
        # Stable: within a line, problems keep the order in which they were found.
        return sorted(self.problems, key=lambda p: p.line or 0)
