"""The reads of a SQLite store: whole sessions, the listing, and the partial reads.

:class:`SqliteReads` holds the ``StoreCore`` reads (``load``/``read``, ``exists``,
``session_ids``, ``location``, ``list_sessions``, ``find_most_recent``) and the
``PartialReads`` (``read_skeleton``, ``read_outline``, ``read_entries``,
``read_entries_at``, and ``recent_entry_types`` for the lazy open), ``read_texts``
(``RawTexts``), with what they
share: parsing a stored record (``parse_record``); :mod:`.parsing` has ``SessionParser``
(a whole session, a chunk at a time), ``RecordCheck`` (single records checked as ``load``
checks them) and ``rows_in`` (some records looked up by an indexed column). Records whose large
images are stored apart (docs/blobs.md) are checked as stored, then completed or given
references by the part of :mod:`.blobreads`: ``load`` through ``_expand_chunk`` /
``_apply_fixups``, the single-record reads through ``RecordCheck``'s swap.
"""

from __future__ import annotations

import bisect
import functools
import sqlite3
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sessiontree.core.usage import UsageQuery, UsageRow
from sessiontree.errors import CorruptEntryError, InvalidSessionError, SessionChangedError, SessionNotFoundError
from sessiontree.format import jsonio
from sessiontree.format.codec import ParsedSession
from sessiontree.format.foreign.common import agent_of_header
from sessiontree.format.gcpause import gc_paused
from sessiontree.stores.base import CancelEvent, ProgressCallback, SessionListing, SessionOutline, SessionTexts
from sessiontree.stores.listing import Progress, cwd_matches, resolve_cwd, sort_listing
from sessiontree.stores.records import SessionSummaries
from sessiontree.stores.skeleton import ROLE_HEAD_BYTES, skeletons_from_rows
from sessiontree.stores.sqlite import blobs, toolcalls
from sessiontree.stores.sqlite import summaries as summaries_sql
from sessiontree.stores.sqlite.blobreads import SplicedTexts, SqliteBlobReads
from sessiontree.stores.sqlite.connection import SqliteDatabase
from sessiontree.stores.sqlite.derived import (
    LISTING_STATE_SELECT,
    from_db,
    record_crc,
    state_from_row,
    tail_texts,
    to_db,
)
from sessiontree.stores.sqlite.parsing import HeldSession, RecordCheck, SessionParser, held_records_check, rows_in
from sessiontree.stores.storable import stored_header

__all__ = ["HeldSession", "SqliteReads"]


class SqliteReads:
    """The ``StoreCore`` reads and the ``PartialReads`` of
    :class:`~sessiontree.stores.sqlite.store.SqliteStore` (documented there and in
    :mod:`sessiontree.stores.base`), each in one read snapshot, over the store's
    :class:`~.connection.SqliteDatabase` (its public members only); records stored cut
    are completed by the :class:`~.blobreads.SqliteBlobReads` part it holds."""

    def __init__(self, db: SqliteDatabase) -> None:
        self.db = db
        self.blobs = SqliteBlobReads(db)

    def parse_record(self, text: Any, key: Any, line: int) -> dict[str, Any]:
        """A stored record's JSON object (``line``: its 1-based line, the header's is 1).

        Raises:
            InvalidSessionError: not valid JSON, or not an object."""
        if isinstance(text, str):
            text = text.encode("utf-8", "surrogatepass")
        try:
            record = jsonio.loads(text)
        except ValueError as exc:
            raise InvalidSessionError(f"stored record is not valid JSON ({exc})", f"{self.db.url}#{from_db(key)}",
                                      line) from exc
        if not isinstance(record, dict):
            raise InvalidSessionError("stored record is not a JSON object", f"{self.db.url}#{from_db(key)}", line)
        return record

    def parse_header(self, text: Any, key: Any) -> dict[str, Any]:
        """A stored header row parsed and checked (:func:`~sessiontree.stores.storable.stored_header`):
        the header of every read, never of ``verify`` or ``reindex``, which must go on past it."""
        session_id = from_db(key)
        return stored_header(self.parse_record(text, key, 1), session_id, f"{self.db.url}#{session_id}")

    def read(self, session_id: str) -> ParsedSession:
        """Same as :meth:`load`: stored sessions are always format 4, loading writes nothing."""
        return self.load(session_id)

    def read_texts(self, session_id: str) -> SessionTexts:
        """The session's header and each entry's stored text and ``type`` column (see
        ``RawTexts.read_texts``) in one read snapshot, no entry parsed: each record's
        bytes are checked against their CRC-32 as :meth:`load` checks them
        (``_check_crcs``: the header's first, then the first record in file order),
        then the header is parsed and checked. An older schema without CRCs (opened
        read-only) is read whole instead, so nothing unchecked is given out.

        Raises:
            SessionNotFoundError, CorruptEntryError, StorageError: as :meth:`load`.
            InvalidSessionError: the header is not a valid header.
        """
        if not self.db.has_crc:
            return SessionTexts.of(session_id, self.load(session_id))
        key = to_db(session_id)
        # gc_paused: a row tuple per entry and no cycle (see sessiontree.format.gcpause)
        with self.db.read_transaction() as conn, gc_paused():
            if not self.db.has_schema(conn):
                raise SessionNotFoundError(session_id, self.db.url)
            row = conn.execute("SELECT header_json, header_crc FROM sessions WHERE id = ?", (key,)).fetchone()
            if row is None:
                raise SessionNotFoundError(session_id, self.db.url)
            rows = conn.execute("SELECT json, crc, type FROM entries WHERE session_id = ? ORDER BY seq",
                                (key,)).fetchall()
            texts, crcs, types = zip(*rows, strict=False) if rows else ((), (), ())  # split in C
            del rows
            self._check_crcs(conn, session_id, row, texts, crcs)
            plan = self.blobs.plan(conn, key)
            if plan:  # records stored cut: their bytes put back as each is taken (docs/blobs.md)
                for position, splices in plan.items():
                    for _, digest, length in splices:
                        found = conn.execute("SELECT size FROM blobs WHERE sha256 = ?", (digest,)).fetchone()
                        if found is None or found[0] != length:
                            raise self.blobs.fail(conn, session_id, key, position)()
        header = self.parse_header(row[0] if isinstance(row[0], bytes)
                                    else row[0].encode("utf-8", "surrogatepass"), key)
        if {*map(type, texts)} - {bytes}:  # a str stored by hand: its bytes, as load gives them
            texts = tuple(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
                          for text in texts)
        if {*map(type, types)} - {str}:  # a type with a lone surrogate is stored as a BLOB
            types = tuple(from_db(kind) for kind in types)
        return SessionTexts(session_id, header, SplicedTexts(self.blobs, session_id, key, texts, plan) if plan else texts,
                            types)

    def _scan(self, conn: sqlite3.Connection, session_id: str, entry_columns: str,
              params: Sequence[Any] = ()) -> tuple[dict[str, Any], bytes, list[Any]]:
        """The session's header (parsed, and its stored bytes), checked against its CRC-32 (where the schema records
        it) and parsed, and one row of ``entry_columns`` per entry in file order, by
        one ordered scan of the primary key: the reading path of the reads that take
        a few columns of every entry (:meth:`read_skeleton`, :meth:`read_outline`).
        ``params`` fill the ``?`` of ``entry_columns``.

        Raises:
            SessionNotFoundError: no such id.
            CorruptEntryError: the header's bytes fail their checksum.
            InvalidSessionError: the header is not a JSON object.
        """
        if not self.db.has_schema(conn):
            raise SessionNotFoundError(session_id, self.db.url)
        key = to_db(session_id)
        crc = self.db.has_crc
        row = conn.execute(f"SELECT header_json, {'header_crc' if crc else 'NULL'} FROM sessions WHERE id = ?",
                           (key,)).fetchone()
        if row is None:
            raise SessionNotFoundError(session_id, self.db.url)
        header_raw = row[0] if isinstance(row[0], bytes) else row[0].encode("utf-8", "surrogatepass")
        if crc and (row[1] is None or record_crc(header_raw) != row[1]):
            raise CorruptEntryError(session_id, None, 1, f"{self.db.url}#{session_id}")
        header = self.parse_header(header_raw, key)
        return header, header_raw, conn.execute(
            f"SELECT {entry_columns} FROM entries WHERE session_id = ? ORDER BY seq", (*params, key)).fetchall()

    def read_skeleton(self, session_id: str) -> ParsedSession:
        """The session's header and skeleton entries (see ``SessionStore.read_skeleton``),
        from the ``entries`` columns plus the first bytes of each message (its role,
        ``shared.ROLE_HEAD``); only the rare label, leaf, session-info and compaction
        records, and messages whose first bytes do not show the role plainly, are
        parsed whole. The header's CRC is checked (``_scan``); the entries' are not
        (``read_entries`` and ``load`` check the records they return). The same skeletons as the generic fallback. One ordered scan
        (``_scan``), the one :meth:`read_outline` makes for its own columns.
        """
        from sessiontree.core.tree import SKELETON_FIELDS

        key = to_db(session_id)
        kinds = ("compaction", *SKELETON_FIELDS)
        with self.db.read_transaction() as conn:
            header, header_raw, rows = self._scan(
                conn, session_id,
                "id, parent_id, type, timestamp, CASE WHEN type = 'message'"
                f" THEN CAST(substr(json, 1, {ROLE_HEAD_BYTES}) AS BLOB) END,"
                f" CASE WHEN type IN ({', '.join('?' * len(kinds))}) THEN json END, seq", kinds)

            def fetch_whole(seqs: list[Any]) -> dict[Any, Any]:
                return {seq: text for batch in rows_in(conn, "seq, json", key, "seq", seqs) for seq, text in batch}

            with gc_paused():  # see sessiontree.format.gcpause
                entries = skeletons_from_rows(
                    rows, lambda text, line: self.parse_record(text, key, line), fetch_whole, from_db)
        return ParsedSession(header, entries, [None] * len(entries), header_raw, 4,
                             lines=list(range(2, len(entries) + 2)))

    def read_entries(self, session_id: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        """The stored entries of ``ids`` (see ``SessionStore.read_entries``), looked up by
        the ``(session_id, id)`` index (``rows_in``, as :meth:`read_entries_at` looks
        up by ``seq``), each given the checks :meth:`load` gives it by the same code
        as :meth:`read_entries_at` (``RecordCheck``); the line reported is ``seq + 2``.

        Raises:
            SessionNotFoundError: no such session.
            CorruptEntryError: a returned record's bytes fail their checksum (this
                wins over a parse error; the first record in file order).
            InvalidSessionError: a returned record is not a valid entry.
        """
        key = to_db(session_id)
        with self.db.read_transaction() as conn:
            if not self.db.has_schema(conn) or conn.execute(
                    "SELECT 1 FROM sessions WHERE id = ?", (key,)).fetchone() is None:
                raise SessionNotFoundError(session_id, self.db.url)
            wanted = [to_db(i) for i in dict.fromkeys(ids)]
            rows = [row for batch in rows_in(conn, f"seq, id, json, {'crc' if self.db.has_crc else 'NULL'}", key,
                                              "id", wanted) for row in batch]
            rows.sort(key=lambda row: row[0])  # the checks take the records in file order
            swaps = self.blobs.swaps(conn, session_id, key, [(row[0], row[0], row[2]) for row in rows])
        check = RecordCheck(self, session_id, key, self.db.has_crc)
        found: dict[str, dict[str, Any]] = {}
        with gc_paused():  # see sessiontree.format.gcpause
            for seq, entry_id, text, crc in rows:
                entry = check(entry_id, seq + 2, text, crc, swaps.get(seq))
                if entry is not None:
                    found[from_db(entry_id)] = entry
        check.finish()
        return [found[i] for i in ids if i in found]

    def load(self, session_id: str, *, keep_raw: bool = True) -> ParsedSession:
        """The session's header and entries, read in one snapshot.

        Args:
            session_id: the exact session id.
            keep_raw: keep each entry's stored JSON text in
                :attr:`ParsedSession.raw` (default). ``False`` gives ``None``
                for every entry instead (:meth:`ParsedSession.entry_bytes` then
                serializes the entry), so that the texts are freed as the
                entries are parsed: a caller that only wants the entries
                (``SessionManager.open``) then holds less memory after
                loading. Header, entries, errors and
                their order are the same either way.

        Returns:
            A :class:`ParsedSession` (format 4, ``upgraded`` false, ``path``
            ``None``, ``lines`` 2, 3, ...).

        Raises:
            SessionNotFoundError: no such id.
            CorruptEntryError: a stored record's bytes differ from the CRC-32
                recorded when it was written (the first such record; this wins
                over any other error).
            InvalidSessionError: a stored record is not a valid entry (the
                header's error first, then the first entry's in order).
            StorageError: the database could not be read.

        In WAL mode the rows are read and parsed a chunk at a time inside the
        read transaction (WAL readers never block writers), so the stored
        texts of a chunk are freed before the next is fetched; in any other
        journal mode they are fetched first and parsed after the transaction,
        as a reader there holds a lock that writers wait for.
        """
        key = to_db(session_id)
        plan: dict[int, list[blobs.Splice]] = {}
        fixups: list[tuple[int, bytes | None, bool]] = []
        with self.db.read_transaction() as conn:
            if not self.db.has_schema(conn):
                raise SessionNotFoundError(session_id, self.db.url)
            texts: Sequence[Any]
            if self.db.has_crc:
                row = conn.execute("SELECT header_json, header_crc FROM sessions WHERE id = ?", (key,)).fetchone()
                if row is None:
                    raise SessionNotFoundError(session_id, self.db.url)
                plan = self.blobs.plan(conn, key)
                cursor = conn.execute("SELECT json, crc FROM entries WHERE session_id = ? ORDER BY seq", (key,))
                if self.db.journal_mode == "wal":
                    return self._stream(conn, session_id, key, row, cursor, keep_raw, plan)
                rows = cursor.fetchall()
                texts, crcs = zip(*rows, strict=False) if rows else ((), ())  # two tuples, split in C
                del rows
                self._check_crcs(conn, session_id, row, texts, crcs)
                if plan:
                    texts, fixups = self._expand_chunk(conn, session_id, key, texts, 0, plan, keep_raw)
            else:  # an older schema opened read-only: nothing to check against
                row = conn.execute("SELECT header_json FROM sessions WHERE id = ?", (key,)).fetchone()
                if row is None:
                    raise SessionNotFoundError(session_id, self.db.url)
                texts = [text for (text,) in conn.execute(
                    "SELECT json FROM entries WHERE session_id = ? ORDER BY seq", (key,))]
        with gc_paused():  # see sessiontree.format.gcpause: the collector would rescan every parsed entry
            parser = SessionParser(self, session_id, key, row[0], keep_raw)
            parser.feed(texts, 0)
            del texts
            if self.db.has_crc and plan:
                self._apply_fixups(session_id, parser, fixups, plan)
            return parser.result()

    def load_held(self, session_id: str) -> HeldSession | None:
        """The session checked in full as :meth:`load` checks it, its records kept as their
        stored bytes rather than parsed (docs/decisions/held-records.md): what
        ``SessionManager.open(..., lazy=False)`` holds.

        In one read snapshot, one ordered scan of every entry's copied columns
        (``id``, ``parent_id``, ``type``), stored bytes and CRC. Then each record's
        bytes are checked against their CRC, parsed, validated as :meth:`load`
        validates them and checked against the copied columns, and the parsed
        object is dropped at once: what stays is one ``bytes`` per entry (no
        container for the cyclic collector to walk) and the columns, from which
        the caller builds the tree. A record is parsed again, by the same code,
        when it is first used (:meth:`HeldSession.read_entries_at`).

        Records stored cut (docs/blobs.md) are held whole, their blobs put
        back as ``load`` puts them back.

        Returns:
            The held session, or ``None`` when this form cannot answer as a
            load would: any record, blob or the header fails a check (the
            caller's :meth:`load` then reports the first failure exactly as
            always), a record's JSON disagrees with its copied columns, a column
            holds a BLOB, two entries share an id, the last record is a ``leaf``
            record, the schema has no CRCs, or the store gives references
            (``blob_refs``) and the session has records stored cut.

        Raises:
            SessionNotFoundError: no such id.
            StorageError: the database could not be read.
        """
        if not self.db.has_crc:
            return None
        key = to_db(session_id)
        ids: list[Any] = []
        parents: list[Any] = []
        types: list[Any] = []
        texts: list[Any] = []
        position_of: dict[str, int] = {}
        kinds: dict[str, str] = {}
        position = position_of.get  # None for a root's parent: no id is None
        crc32 = zlib.crc32
        with self.db.read_transaction() as conn:
            if not self.db.has_schema(conn):
                raise SessionNotFoundError(session_id, self.db.url)
            row = conn.execute("SELECT header_json, header_crc FROM sessions WHERE id = ?", (key,)).fetchone()
            if row is None:
                raise SessionNotFoundError(session_id, self.db.url)
            # The records stored cut, by seq; their positions are taken from the scan
            # itself (one statement fewer than _blob_plan's position look-up).
            cut = blobs.splices_of(conn, key) if self.db.has_blobs else {}
            if cut and self.db.blob_refs:
                return None  # records stored cut, read with references: the plain load gives them
            plan: dict[int, list[blobs.Splice]] = {}
            cursor = conn.execute(f"SELECT id, parent_id, type, json, crc{', seq' if cut else ''} FROM entries"
                                  " WHERE session_id = ? ORDER BY seq", (key,))
            # A chunk at a time, split into columns in C, its CRCs checked there and then:
            # neither the row tuples nor the CRCs pile up. Only what the tree keeps stays:
            # one object per distinct type, and a parent id is its parent's id object
            # (parents come first in file order), as parsed entries share them. In WAL
            # mode (readers never block writers) each chunk's records are also parsed
            # and checked at once, while its bytes are still in the CPU's caches; in
            # any other mode after the transaction, as load does.
            where = f"{self.db.url}#{session_id}"
            now = self.db.journal_mode == "wal"
            for rows in iter(functools.partial(cursor.fetchmany, self._CHUNK), []):
                if cut:
                    chunk_ids, chunk_parents, chunk_types, chunk_texts, chunk_crcs, chunk_seqs = zip(
                        *rows, strict=False)
                    plan.update((len(ids) + index, cut[seq]) for index, seq in enumerate(chunk_seqs)
                                if seq in cut)
                else:
                    chunk_ids, chunk_parents, chunk_types, chunk_texts, chunk_crcs = zip(*rows, strict=False)
                del rows
                try:
                    if tuple(map(crc32, chunk_texts)) != chunk_crcs:
                        return None
                except TypeError:  # a record stored as text by hand
                    return None
                if bytes in {*map(type, chunk_ids), *map(type, chunk_parents), *map(type, chunk_types)}:
                    return None  # a value with a lone surrogate (see derived.to_db): rare, the plain load
                if plan:  # records stored cut (docs/blobs.md): held whole, their blobs put back
                    try:
                        chunk_texts = tuple(self._expand_chunk(conn, session_id, key, chunk_texts, len(ids), plan,
                                                               False)[0])
                    except CorruptEntryError:
                        return None  # a blob missing or damaged: the plain load reports it
                if now and not held_records_check(self, chunk_texts, chunk_ids, chunk_parents, chunk_types,
                                                   key, where, len(ids)):
                    return None
                position_of.update(zip(chunk_ids, range(len(ids), len(ids) + len(chunk_ids)), strict=False))
                ids += chunk_ids
                parents += [parent if (at := position(parent)) is None else ids[at] for parent in chunk_parents]
                types += map(kinds.setdefault, chunk_types, chunk_types)
                texts += chunk_texts
                del chunk_ids, chunk_parents, chunk_types, chunk_texts, chunk_crcs
        header_raw = row[0]
        if header_raw.__class__ is not bytes or row[1] is None or crc32(header_raw) != row[1]:
            return None
        try:
            header = self.parse_header(header_raw, key)
        except InvalidSessionError:
            return None
        count = len(ids)
        if len(position_of) != count:
            return None  # two entries share an id: the plain load reports it
        if count and types[-1] == "leaf":
            return None  # the loaded leaf is its target (docs/rules/tree.md F.1): the plain load decides
        if not now and not held_records_check(self, texts, ids, parents, types, key, where, 0):
            return None
        outline = SessionOutline(session_id, header, ids, parents, types, range(count), None)
        return HeldSession(outline, position_of, texts, self, key)

    def _expand_chunk(self, conn: sqlite3.Connection, session_id: str, key: Any, texts: Sequence[Any], start: int,
                      plan: dict[int, list[blobs.Splice]],
                      keep_raw: bool) -> tuple[Sequence[Any], list[tuple[int, bytes | None, bool]]]:
        """The records ``texts`` (from position ``start``) with those stored cut made
        readable (:meth:`SqliteBlobReads.expand`), and per such record ``(position, full bytes, refs)``
        for :meth:`_apply_fixups` once they are parsed."""
        fixups = []
        whole: list[Any] | None = None
        for position in range(start, start + len(texts)):
            splices = plan.get(position)
            if splices is None:
                continue
            if whole is None:
                whole = list(texts)
            parse_text, full, refs = self.blobs.expand(conn, session_id, key, position, whole[position - start],
                                                  splices, keep_raw)
            whole[position - start] = parse_text
            fixups.append((position, full, refs))
        return (texts if whole is None else whole), fixups

    def _apply_fixups(self, session_id: str, parser: SessionParser, fixups: list[tuple[int, bytes | None, bool]],
                      plan: dict[int, list[blobs.Splice]]) -> None:
        """After :meth:`_expand_chunk`'s records are parsed: references in place of the
        markers, and the full bytes as the raw text where the parser kept the parsed one."""
        for position, full, refs in fixups:
            if position >= len(parser.entries):
                break  # a parse error stopped the parser: it is raised, nothing is returned
            if refs:
                self.blobs.finish_refs(session_id, parser.entries[position], position + 2, plan[position])
                if parser.keep_raw:
                    parser.raw[position] = full

    #: Rows fetched and parsed at a time by a streaming :meth:`load`.
    _CHUNK = 512

    def _stream(self, conn: sqlite3.Connection, session_id: str, key: Any, header_row: Sequence[Any],
                cursor: sqlite3.Cursor, keep_raw: bool, plan: dict[int, list[blobs.Splice]]) -> ParsedSession:
        """:meth:`load`'s WAL path: fetch, CRC-check and parse the rows a chunk at a time.

        The result and the errors are exactly those of checking every CRC
        first and parsing afterwards: a parse error is held back while the
        remaining rows' CRCs are checked, and a mismatch anywhere wins.
        """
        where = f"{self.db.url}#{session_id}"
        if header_row[1] is None or record_crc(header_row[0]) != header_row[1]:
            raise CorruptEntryError(session_id, None, 1, where)
        crc32, fetch, size = zlib.crc32, cursor.fetchmany, self._CHUNK
        pending: InvalidSessionError | None = None
        start = 0
        with gc_paused():  # see sessiontree.format.gcpause
            try:
                parser = SessionParser(self, session_id, key, header_row[0], keep_raw)
            except InvalidSessionError as exc:
                pending, parser = exc, None
            while True:
                rows = fetch(size)
                if not rows:
                    break
                texts, crcs = zip(*rows, strict=False)
                del rows
                try:
                    computed = tuple(map(crc32, texts))
                except TypeError:  # a str stored by hand
                    computed = tuple(record_crc(text) for text in texts)
                if computed != crcs:
                    self._check_crcs(conn, session_id, header_row, texts, crcs, offset=start)
                if parser is not None and pending is None:
                    fixups: list[tuple[int, bytes | None, bool]] = []
                    readable: Sequence[Any] = texts
                    if plan:
                        readable, fixups = self._expand_chunk(conn, session_id, key, texts, start, plan, keep_raw)
                    try:
                        parser.feed(readable, start)
                    except InvalidSessionError as exc:
                        pending = exc  # raised once every CRC is known to match
                    if fixups and pending is None:
                        self._apply_fixups(session_id, parser, fixups, plan)
                start += len(texts)
                del texts
            if pending is not None:
                raise pending
            assert parser is not None
            return parser.result()

    def _check_crcs(self, conn: sqlite3.Connection, session_id: str, header_row: Sequence[Any],
                    texts: Sequence[Any], crcs: Sequence[Any], offset: int = 0) -> None:
        """Raise :class:`CorruptEntryError` for the first record whose bytes differ from
        the CRC-32 recorded when it was written (a missing CRC counts as different).
        ``texts`` and ``crcs`` are the rows from position ``offset`` of the session on."""
        where = f"{self.db.url}#{session_id}"
        if header_row[1] is None or record_crc(header_row[0]) != header_row[1]:
            raise CorruptEntryError(session_id, None, 1, where)
        try:
            computed = tuple(map(zlib.crc32, texts))  # the hot path: one C call per record
        except TypeError:  # a str stored by hand
            computed = tuple(record_crc(text) for text in texts)
        if computed == crcs:
            return
        index = offset + next(i for i, (a, b) in enumerate(zip(computed, crcs, strict=False)) if a != b)
        found = conn.execute("SELECT id FROM entries WHERE session_id = ? ORDER BY seq LIMIT 1 OFFSET ?",
                             (to_db(session_id), index)).fetchone()
        raise CorruptEntryError(session_id, from_db(found[0]) if found else None, index + 2, where)

    def recent_entry_types(self, session_id: str, count: int) -> set[str]:
        """The entry types among the session's last ``count`` records (file order), read
        from the ``type`` column through the primary key: ``count`` row look-ups, no
        record parsed. Empty for a missing session or one without entries. The lazy
        open asks it whether a compaction is near the end before reading an outline
        (docs/stores.md, "Lazy open").

        Raises:
            StorageError: the database could not be read.
        """
        with self.db.read_transaction() as conn:
            if not self.db.has_schema(conn):
                return set()
            rows = conn.execute("SELECT DISTINCT type FROM (SELECT type FROM entries WHERE session_id = ?"
                                " ORDER BY seq DESC LIMIT ?)", (to_db(session_id), count)).fetchall()
        return {from_db(kind) for (kind,) in rows}

    def read_outline(self, session_id: str) -> SessionOutline:
        """The session's header and its entries' ids, parent ids and types (see
        ``SessionStore.read_outline``), from the ``entries`` columns in one read
        snapshot: no record is parsed or checksummed (only the header's), so it
        costs a fraction of a :meth:`load` of the same session (benchmarks/README.md,
        "Resume and cold projection").
        ``stamps`` are the CRC-32s recorded at write time (``None`` on an
        older schema without them).

        Raises:
            SessionNotFoundError: no such id.
            CorruptEntryError: the header's bytes fail their checksum.
            InvalidSessionError: the header is not a JSON object.
            StorageError: the database could not be read.
        """
        crc = self.db.has_crc
        with self.db.read_transaction() as conn:
            header, _, rows = self._scan(conn, session_id, f"seq, id, parent_id, type{', crc' if crc else ''}")
        return _outline(session_id, header, rows, crc)[0]

    def read_summaries(self, session_id: str) -> SessionSummaries | None:
        """The session's outline with each entry's timestamp (the ``entries`` column) and
        tool calls (``tool_calls``, :mod:`.toolcalls`), and how far the usage ledger is
        settled, in one read snapshot; no record is parsed. ``None`` on a schema without
        ``tool_calls`` or checksums (an older one opened read-only). See
        ``EntrySummaries.read_summaries``.

        Raises:
            SessionNotFoundError, CorruptEntryError, InvalidSessionError, StorageError:
                as :meth:`read_outline`.
        """
        if not (self.db.has_tool_calls and self.db.has_crc):
            return None
        with self.db.read_transaction() as conn:
            header, _, rows = self._scan(conn, session_id, "seq, id, parent_id, type, crc, timestamp")
            key = to_db(session_id)
            calls = toolcalls.read_rows(conn, key)
            mark = conn.execute("SELECT seq FROM usage_merged WHERE session_id = ?", (key,)).fetchone()
        outline, stamps = _outline(session_id, header, rows, True)
        del rows
        keys = outline.keys
        settled = bisect.bisect_right(keys, -1 if mark is None else mark[0])
        if keys and keys[-1] - keys[0] == len(keys) - 1:  # seq = position + first (no row removed by hand)
            first = keys[0]
            placed = [(seq - first, name, path) for seq, name, path in calls if seq - first < len(keys)]
        else:
            position_of = dict(zip(keys, range(len(keys)), strict=False))
            placed = [(position_of[seq], name, path) for seq, name, path in calls if seq in position_of]
        return SessionSummaries(outline, stamps, placed, settled)

    def sum_usage(self, summaries: SessionSummaries, positions: Sequence[int], query: UsageQuery) -> list[UsageRow]:
        """The usage rows of the ledger's records of ``positions`` (each below
        ``summaries.settled``), grouped as ``rows_from_records`` groups them for ``query``,
        in the order of each row's first record in file order (:mod:`.summaries`). See
        ``EntrySummaries.sum_usage``.

        Raises:
            SessionChangedError: the session's records are no longer those of the outline.
            StorageError: the store could not be read.
        """
        keys = summaries.outline.keys
        seqs = [keys[p] for p in positions]
        with self.db.read_transaction() as conn:
            return summaries_sql.sum_usage(conn, summaries, seqs, query, self.db.url)

    def read_entries_at(self, outline: SessionOutline, positions: Sequence[int]) -> list[dict[str, Any]]:
        """The full entries at ``positions`` of ``outline`` (see
        ``SessionStore.read_entries_at``), in one read snapshot.

        Few positions are looked up by ``seq``; many (a quarter of the session
        or more) are read in one ordered range scan, a chunk of rows at a time,
        so the stored texts of a chunk are freed before the next. Each row must
        still have the outline's id, parent id, type and CRC
        (``SessionChangedError`` otherwise); then its bytes are checked against
        the CRC, parsed and validated as :meth:`load` does (``RecordCheck``, shared
        with :meth:`read_entries`).

        Raises:
            SessionChangedError, CorruptEntryError, InvalidSessionError,
            IndexError, StorageError: see ``SessionStore.read_entries_at``.
        """
        size = len(outline.ids)
        for position in positions:
            if not 0 <= position < size:
                raise IndexError(f"position {position} outside a session of {size} entries")
        if not positions:
            return []
        session_id, keys, stamps = outline.session_id, outline.keys, outline.stamps
        key = to_db(session_id)
        wanted = sorted(set(positions))
        # seq -> position: the keys are ascending; contiguous ones (the usual case) need no map.
        first: int = keys[0]
        position_of: Callable[[int], int]
        if keys[-1] - first == size - 1:
            def contiguous(seq: int) -> int:
                return seq - first
            position_of = contiguous
        else:
            position_of = dict(zip(keys, range(size), strict=False)).__getitem__
        columns = f"seq, id, parent_id, type, json, {'crc' if stamps is not None else 'NULL'}"
        found: dict[int, dict[str, Any]] = {}
        matched = 0
        check = RecordCheck(self, session_id, key, stamps is not None)
        with self.db.read_transaction() as conn, gc_paused():
            if not self.db.has_schema(conn) or conn.execute(
                    "SELECT 1 FROM sessions WHERE id = ?", (key,)).fetchone() is None:
                raise SessionChangedError(session_id, "it was deleted")
            spliced = blobs.splices_of(conn, key) if self.db.has_blobs else {}
            if len(wanted) * 4 >= size:
                cursor = conn.execute(f"SELECT {columns} FROM entries WHERE session_id = ? AND seq BETWEEN ? AND ?"
                                      " ORDER BY seq", (key, keys[wanted[0]], keys[wanted[-1]]))
                take = set(wanted) if len(wanted) != wanted[-1] - wanted[0] + 1 else None
                batches: Iterable[list[Any]] = iter(functools.partial(cursor.fetchmany, self._CHUNK), [])
            else:
                take = None
                batches = rows_in(conn, columns, key, "seq", [keys[p] for p in wanted])
            for batch in batches:
                for seq, entry_id, parent_id, kind, text, crc in batch:
                    try:
                        position = position_of(seq)
                    except KeyError:  # a row the outline did not see: another replaced the session
                        raise SessionChangedError(session_id, f"a record at seq {seq} is new") from None
                    if take is not None and position not in take:
                        continue
                    if (from_db(entry_id), from_db(parent_id), from_db(kind)) != (
                            outline.ids[position], outline.parent_ids[position], outline.types[position]) or (
                            stamps is not None and crc != stamps[position]):
                        raise SessionChangedError(session_id, f"entry {position + 1} differs")
                    matched += 1
                    swap = None
                    if spliced and seq in spliced:
                        swap = self.blobs.swaps(conn, session_id, key, [(seq, position, text)], spliced)[seq]
                    entry = check(entry_id, position + 2, text, crc, swap)
                    if entry is not None:
                        found[position] = entry
                del batch
            if matched != len(wanted):
                raise SessionChangedError(session_id, f"{len(wanted) - matched} of its entries are gone")
        check.finish()
        return [found[p] for p in positions]

    def exists(self, session_id: str) -> bool:
        """Whether the id is stored."""
        with self.db.read_transaction() as conn:
            if not self.db.has_schema(conn):
                return False
            return conn.execute("SELECT 1 FROM sessions WHERE id = ?", (to_db(session_id),)).fetchone() is not None

    def session_ids(self) -> list[str]:
        """Every stored id, oldest row first."""
        with self.db.read_transaction() as conn:
            if not self.db.has_schema(conn):
                return []
            return [from_db(row[0]) for row in conn.execute("SELECT id FROM sessions ORDER BY rowid")]

    def location(self, session_id: str) -> str | None:
        """Always ``None``: sessions live in the database, not in files."""
        return None

    def list_sessions(self, *, cwd: str | None = None, include_internal: bool = False,
                      on_progress: ProgressCallback | None = None,
                      cancel: CancelEvent | None = None) -> SessionListing:
        """Listing rows from the ``sessions`` table alone, newest ``modified`` first.

        ``all_messages_text`` of a row is read from ``message_texts`` on first access.
        A row whose header does not parse is left out and counted in ``skipped``
        (damage to entries is found by :meth:`load` and :meth:`verify`, not here:
        listing never reads entries).

        Raises:
            ListingCancelledError: ``cancel`` was set before or during the listing.
            StorageError: the database could not be read.
        """
        wanted = resolve_cwd(cwd) if cwd is not None else None
        if cancel is not None:
            Progress(0, None, cancel)  # cancelled before starting: do not even query
        with self.db.read_transaction() as conn:
            if not self.db.has_schema(conn):
                return SessionListing()
            rows = conn.execute(
                f"SELECT id, header_json, classified, cwd, updated_at, entry_count, {LISTING_STATE_SELECT} FROM sessions"
                " ORDER BY rowid").fetchall()
        progress = Progress(len(rows), on_progress, cancel)
        infos = []
        skipped = 0
        loads = jsonio.loads
        for row in rows:
            if (include_internal or not row[2]) and cwd_matches(from_db(row[3]), wanted):
                session_id = from_db(row[0])
                try:
                    header = loads(row[1])
                except ValueError:
                    header = None  # damaged by hand: the session cannot be loaded, so it is not listed
                if isinstance(header, dict) and isinstance(header.get("id"), str):
                    infos.append(state_from_row(row[6:]).to_info(
                        header, session_id, fallback_mtime=row[4] / 1e6,
                        text_loader=functools.partial(self._load_text, session_id), entry_count=row[5]))
                else:
                    skipped += 1
            progress.step()
        return sort_listing(infos, skipped)

    def session_agents(self) -> dict[str, str]:
        """``{session id: agent}`` of the sessions :meth:`list_sessions` lists with
        ``include_internal=True`` (a header that parses to an object with a string ``id``),
        from the ``header_json`` column alone: no listing row is built (``stats --by agent``
        on 1,000 sessions: 11 -> 1.5 ms).

        Raises:
            StorageError: the database could not be read.
        """
        with self.db.read_transaction() as conn:
            if not self.db.has_schema(conn):
                return {}
            rows = conn.execute("SELECT header_json FROM sessions ORDER BY rowid").fetchall()
        agents: dict[str, str] = {}
        loads = jsonio.loads
        for (raw,) in rows:
            try:
                header = loads(raw)
            except ValueError:
                continue  # not listed either
            if isinstance(header, dict) and isinstance(header.get("id"), str):
                agents[header["id"]] = agent_of_header(header)
        return agents

    def _load_text(self, session_id: str) -> str:
        """A listing row's ``all_messages_text``: the ``message_texts`` rows, then the
        texts of the pending tail (``sessions.texts_from`` on) derived from the
        entries, in one snapshot: the same text whichever of them holds it."""
        with self.db.read_transaction() as conn:
            if not self.db.has_schema(conn):
                return ""
            key = to_db(session_id)
            start = None
            if self.db.has_texts_tail:
                row = conn.execute("SELECT texts_from FROM sessions WHERE id = ?", (key,)).fetchone()
                start = None if row is None else row[0]
            if start is None:
                return " ".join(from_db(text) for (text,) in conn.execute(
                    "SELECT text FROM message_texts WHERE session_id = ? ORDER BY seq", (key,)))
            texts = [from_db(text) for (text,) in conn.execute(
                "SELECT text FROM message_texts WHERE session_id = ? AND seq < ? ORDER BY seq", (key, start))]
            texts.extend(text for _, text in tail_texts(conn, key, start))
            return " ".join(texts)

    def find_most_recent(self, cwd: str | None = None, include_internal: bool = False) -> str | None:
        """Id of the session written last (``updated_at``), optionally only for ``cwd``."""
        wanted = resolve_cwd(cwd) if cwd is not None else None
        with self.db.read_transaction() as conn:
            if not self.db.has_schema(conn):
                return None
            cursor = conn.execute("SELECT id, classified, cwd FROM sessions ORDER BY updated_at DESC")
            try:
                for session_id, classified, session_cwd in cursor:
                    if classified and not include_internal:
                        continue
                    if cwd_matches(from_db(session_cwd), wanted):
                        found: str = from_db(session_id)
                        return found
            finally:
                cursor.close()
        return None


def _outline(session_id: str, header: dict[str, Any], rows: list[Any], crc: bool,
             ) -> tuple[SessionOutline, Sequence[Any]]:
    """The :class:`SessionOutline` of scanned rows ``(seq, id, parent_id, type[, crc[, x]])``,
    and the column after them (``()`` when there is none), values as stored decoded."""
    width = len(rows[0]) if rows else (5 if crc else 4)
    columns: list[Sequence[Any]] = list(zip(*rows, strict=False)) if rows else [()] * width
    for index in (1, 2, 3, *range(5, width)):
        # Values holding lone surrogates are stored as BLOBs (see derived.to_db); rare, so
        # the column is converted only when its set of value types says so.
        if bytes in set(map(type, columns[index])):
            columns[index] = tuple(map(from_db, columns[index]))
    outline = SessionOutline(session_id, header, columns[1], columns[2], columns[3], columns[0],
                             columns[4] if crc else None)
    return outline, columns[5] if width > 5 else ()
