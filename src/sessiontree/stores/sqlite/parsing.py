"""Parsing and checking a SQLite store's stored records, as every read does: a whole
session a chunk at a time (:class:`SessionParser`), single records checked as ``load``
checks them (:class:`RecordCheck`), the held session's records (:func:`held_records_check`,
:class:`HeldSession`) and records looked up by an indexed column (:func:`rows_in`). They
work over a :class:`RecordParser` (the reads part of :mod:`.reads`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import orjson

from sessiontree.errors import CorruptEntryError, InvalidSessionError
from sessiontree.format import jsonio
from sessiontree.format.codec import CURRENT_VERSION, ParsedSession
from sessiontree.stores.base import SessionOutline
from sessiontree.stores.sqlite import blobs
from sessiontree.stores.sqlite.blobreads import Swap
from sessiontree.stores.sqlite.connection import SqliteDatabase
from sessiontree.stores.sqlite.derived import from_db, record_crc
from sessiontree.stores.storable import validated

__all__ = ["HeldSession", "RecordCheck", "RecordParser", "SessionParser", "held_records_check", "parse_entry", "rows_in"]

class RecordParser(Protocol):
    """What the parsers here ask of the reads part: its database (for ``url``) and how it
    parses a stored record and header (:class:`~.reads.SqliteReads`)."""

    @property
    def db(self) -> SqliteDatabase:
        """The store's open database."""
        ...

    def parse_record(self, text: Any, key: Any, line: int) -> dict[str, Any]:
        """A stored record's JSON object.

        Raises:
            InvalidSessionError: not valid JSON, or not an object."""
        ...

    def parse_header(self, text: Any, key: Any) -> dict[str, Any]:
        """A stored header row parsed and checked.

        Raises:
            InvalidSessionError: not a valid format-4 header of this session."""
        ...


class SessionParser:
    """Parses a session's stored records into a :class:`ParsedSession`, a chunk at a time.

    The header is parsed on construction; :meth:`feed` parses and validates
    entries in order (raising :class:`InvalidSessionError` with the record's
    line for the first bad one); :meth:`result` gives the session.
    """

    __slots__ = ("entries", "header", "header_raw", "keep_raw", "key", "raw", "store", "where")

    def __init__(self, store: RecordParser, session_id: str, key: Any, header_text: bytes | str,
                 keep_raw: bool) -> None:
        self.store, self.key, self.keep_raw = store, key, keep_raw
        self.where = f"{store.db.url}#{session_id}"
        self.header_raw = (header_text if isinstance(header_text, bytes)
                           else header_text.encode("utf-8", "surrogatepass"))
        self.header = store.parse_header(self.header_raw, key)
        self.entries: list[dict[str, Any]] = []
        self.raw: list[bytes | None] = []

    def feed(self, texts: Sequence[bytes | str], start: int) -> None:
        """Parse ``texts``, the records from entry position ``start`` on."""
        entries, raw, keep_raw = self.entries, self.raw, self.keep_raw
        parse, key, where = self.store.parse_record, self.key, self.where
        loads, decode_error, limit, too_deep = orjson.loads, orjson.JSONDecodeError, 2 * jsonio.MAX_DEPTH, _too_deep
        push = entries.append
        for index, text in enumerate(texts, start + 2):
            # Fast path, the same result as jsonio.loads: bytes that orjson
            # reads into an object and that have too few brackets to nest
            # beyond MAX_DEPTH; anything else takes the full rules.
            entry = None
            if text.__class__ is bytes:
                try:
                    entry = loads(text)
                except decode_error:
                    entry = None
                if entry.__class__ is not dict or (len(text) > limit and too_deep(text, entry)):
                    entry = None
            if entry is None:
                entry = parse(text, key, index)
            push(validated(entry, where, index))
            if keep_raw:
                raw.append(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))

    def result(self) -> ParsedSession:
        """The parsed session (format 4, as stored)."""
        count = len(self.entries)
        return ParsedSession(header=self.header, entries=self.entries,
                             raw=self.raw if self.keep_raw else [None] * count, header_raw=self.header_raw,
                             source_version=CURRENT_VERSION, upgraded=False,
                             lines=list(range(2, count + 2)), path=None)


#: Records longer than this have the nesting of their parsed value walked rather than
#: their brackets counted: a long record is mostly long strings, few containers.
_WALK_ABOVE = 16384


def _too_deep(text: bytes, value: Any) -> bool:
    """Whether ``value``, orjson's parse of ``text``, nests deeper than
    ``jsonio.MAX_DEPTH``: the rule ``jsonio.loads`` applies, at the least cost. A text
    of at most ``2 * MAX_DEPTH`` bytes, or with no more opening brackets than that
    depth, cannot; beyond :data:`_WALK_ABOVE` bytes the value's containers are
    walked instead (``jsonio.depth``), cheaper than counting every byte there."""
    size = len(text)
    if size <= 2 * jsonio.MAX_DEPTH:
        return False
    if size > _WALK_ABOVE:
        return jsonio.depth(value, jsonio.MAX_DEPTH) > jsonio.MAX_DEPTH
    # The opening brackets, counted in one pass (what is left once every other byte
    # is deleted): cheaper than two counts.
    return len(text.translate(None, _NOT_OPENING)) > jsonio.MAX_DEPTH


#: Every byte but ``[`` and ``{`` (see :func:`_too_deep`).
_NOT_OPENING = bytes(b for b in range(256) if b not in b"[{")


def parse_entry(store: RecordParser, text: bytes | str, key: Any, where: str, line: int) -> dict[str, Any]:
    """One stored record parsed and validated as :meth:`SessionParser.feed` does it (the
    same fast path and the same errors), for reads of single records."""
    entry = None
    if text.__class__ is bytes:
        try:
            entry = orjson.loads(text)
        except orjson.JSONDecodeError:
            entry = None
        if entry.__class__ is not dict or _too_deep(text, entry):
            entry = None
    if entry is None:
        entry = store.parse_record(text, key, line)
    return validated(entry, where, line)


def held_records_check(store: RecordParser, texts: Sequence[bytes], ids: Sequence[Any], parents: Sequence[Any],
                        types: Sequence[Any], key: Any, where: str, start: int) -> bool:
    """Whether every record (from entry position ``start`` on) parses and validates as
    :meth:`SqliteReads.load` parses and validates it (:func:`parse_entry`) and agrees
    with its copied columns; each parsed object is dropped at once. ``False`` at the
    first that does not.

    The usual record, a ``message`` entry read by orjson's fast path, is checked
    inline: the same fields ``validate_entry`` checks, by exact type, so it
    accepts only what ``validate_entry`` accepts; anything else goes the whole way.
    """
    loads, decode_error, limit = orjson.loads, orjson.JSONDecodeError, 2 * jsonio.MAX_DEPTH
    str_, dict_, too_deep = str, dict, _too_deep
    line = start + 1
    for text, entry_id, parent_id, kind in zip(texts, ids, parents, types, strict=True):
        line += 1
        try:
            entry = loads(text)
        except decode_error:
            entry = None
        if entry.__class__ is not dict_ or (len(text) > limit and too_deep(text, entry)):
            entry = None
        elif kind == "message" and entry.get("type") == "message":
            found_id, parent, message = entry.get("id"), entry.get("parentId", 0), entry.get("message")
            if (found_id.__class__ is str_ and found_id and (parent is None or parent.__class__ is str_)
                    and entry.get("timestamp").__class__ is str_ and message.__class__ is dict_
                    and message.get("role").__class__ is str_):
                if found_id != entry_id or parent != parent_id:
                    return False  # edited by hand: the JSON is the truth, the plain load reads it
                continue
        try:
            entry = parse_entry(store, text, key, where, line)
        except InvalidSessionError:
            return False
        if entry["id"] != entry_id or entry["parentId"] != parent_id or entry["type"] != kind:
            return False
    return True


#: Values bound per ``IN (...)`` look-up, well under SQLite's bound-parameter limit.
_IN_CHUNK = 500


def rows_in(conn: sqlite3.Connection, columns: str, key: Any, column: str,
             values: Sequence[Any]) -> Iterator[list[Any]]:
    """The rows (``columns``) of the session ``key``'s entries whose ``column``
    (``id`` or ``seq``, both indexed) is one of ``values``: one statement and one
    batch per :data:`_IN_CHUNK` values. The look-up path of every read of some
    records (:meth:`SqliteStore.read_entries`, :meth:`SqliteStore.read_entries_at`,
    the records a skeleton parses whole). A ``seq`` batch comes in file order (the
    primary key's); an ``id`` batch in the index's order, for the caller to sort:
    ``ORDER BY seq`` there makes SQLite scan the whole session by its primary key
    instead, far slower for a few ids of a long session."""
    order = " ORDER BY seq" if column == "seq" else ""
    for at in range(0, len(values), _IN_CHUNK):
        chunk = values[at:at + _IN_CHUNK]
        yield conn.execute(f"SELECT {columns} FROM entries WHERE session_id = ?"
                           f" AND {column} IN ({', '.join('?' * len(chunk))}){order}", (key, *chunk)).fetchall()


class RecordCheck:
    """The checks :meth:`SqliteStore.load` gives each record, for the reads of some
    records (:meth:`SqliteStore.read_entries`, :meth:`SqliteStore.read_entries_at`):
    its bytes against the CRC-32 recorded at write time (``CorruptEntryError`` at
    once; a missing CRC counts as different), then parsing and entry validation
    (:func:`parse_entry`). Fed the records in file order, it reports what ``load``
    would of them: a checksum failure anywhere wins over a parse error, which is
    held back until :meth:`finish`, and the first failure in file order is the
    one raised (docs/stores.md, "Lazy open")."""

    __slots__ = ("crcs", "key", "pending", "session_id", "store", "where")

    def __init__(self, store: RecordParser, session_id: str, key: Any, crcs: bool) -> None:
        """Check records of ``session_id`` (stored under ``key``); ``crcs``: whether
        the rows carry CRCs (``False`` on an older schema: nothing to check against)."""
        self.store, self.session_id, self.key, self.crcs = store, session_id, key, crcs
        self.where = f"{store.db.url}#{session_id}"
        self.pending: InvalidSessionError | None = None

    def __call__(self, entry_id: Any, line: int, text: bytes | str, crc: Any,
                 swap: Swap | None = None) -> dict[str, Any] | None:
        """The record (stored ``text``, its ``crc``) at JSONL ``line``, parsed and
        validated; ``None`` once a parse error is pending (later records only get
        their checksum checked). A record stored cut is checked as stored and
        parsed from ``swap`` (its full text, or the marked one for references).

        Raises:
            CorruptEntryError: the bytes differ from ``crc``.
        """
        if self.crcs and record_crc(text) != crc:
            raise CorruptEntryError(self.session_id, from_db(entry_id), line, self.where)
        if self.pending is None:
            try:
                if swap is None:
                    return parse_entry(self.store, text, self.key, self.where, line)
                entry = parse_entry(self.store, swap.text, self.key, self.where, line)
                if swap.splices is not None:
                    blobs.unmark(entry, swap.splices, swap.loader)
                return entry
            except InvalidSessionError as exc:
                self.pending = exc  # raised once every CRC is known to match
        return None

    def finish(self) -> None:
        """Raise the first parse or validation error met, if any (``InvalidSessionError``)."""
        if self.pending is not None:
            raise self.pending



class HeldSession:
    """A session checked in full and held as its records' stored bytes (what
    :meth:`SqliteReads.load_held` returns): the outline (from the copied columns,
    which every record was checked to agree with), ``{id: position}``, and one
    ``bytes`` per entry. :meth:`read_entries_at` parses records on demand, by the
    code :meth:`SqliteReads.load` parses them with, so every entry is the dict a
    load gives; it reads nothing from the store, so it cannot see later changes
    there, nor fail (every record passed its checks when the session was held).
    """

    __slots__ = ("_key", "_reads", "_texts", "_where", "outline", "position_of", "url")

    def __init__(self, outline: SessionOutline, position_of: dict[str, int], texts: list[bytes | None],
                 reads: RecordParser, key: Any) -> None:
        """Hold ``texts`` (one per outline position) of the session ``outline`` describes,
        read from ``reads`` (its database's ``url`` is :attr:`url`) where it is stored under ``key``."""
        self.url, self.outline, self.position_of = reads.db.url, outline, position_of
        self._texts, self._reads, self._key = texts, reads, key
        self._where = f"{reads.db.url}#{outline.session_id}"

    def read_entries_at(self, outline: SessionOutline, positions: Sequence[int]) -> list[dict[str, Any]]:
        """The entries at ``positions`` (of :attr:`outline`), each parsed from its held bytes.

        Each position is given once: its bytes are let go as it is parsed, since the
        tree keeps the entry (``LazySessionTree`` never asks for a position twice), so
        a session used whole ends up holding its entries, not its entries and its bytes.

        Raises:
            IndexError: a position outside the session.
            RuntimeError: a position asked for a second time (a caller's bug).
        """
        texts, reads, key, where = self._texts, self._reads, self._key, self._where
        entries = []
        for p in positions:
            text = texts[p]
            if text is None:
                raise RuntimeError(f"{where}: held record {p + 2} was already given out")
            entries.append(parse_entry(reads, text, key, where, p + 2))
            texts[p] = None
        return entries
