"""The reads of a PostgreSQL store: whole sessions, the listing, and the partial reads.

:class:`PostgresStoreReads` holds the ``StoreCore`` reads (``load``/``read``, ``exists``,
``session_ids``, ``location``, ``list_sessions`` with its lazily read listing text,
``find_most_recent``), the ``PartialReads`` (``read_skeleton``, ``read_entries``) and
``read_texts`` (``RawTexts``),
with what they share: parsing a stored record (``_parse_record``), the snapshot cursor
that has already read and checked a session's header (``_session_cursor``), and the
record check of ``load`` and ``read_entries`` (``_entry``). (Not to be confused with
:class:`~sessiontree.stores.postgres.derived.PostgresReads`, the protocol an index
module reads the store through.)
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sessiontree.errors import CorruptEntryError, InvalidSessionError, SessionNotFoundError
from sessiontree.format import jsonio
from sessiontree.format.codec import CURRENT_VERSION, ParsedSession
from sessiontree.format.gcpause import gc_paused
from sessiontree.stores.base import CancelEvent, ProgressCallback, SessionListing, SessionTexts
from sessiontree.stores.listing import Progress, cwd_matches, resolve_cwd, sort_listing
from sessiontree.stores.postgres.connection import PostgresDatabase
from sessiontree.stores.postgres.derived import info_from_listing, is_exact_text, record_crc
from sessiontree.stores.skeleton import ROLE_HEAD_BYTES, skeletons_from_rows
from sessiontree.stores.storable import stored_header, validated

__all__ = ["PostgresStoreReads"]


class PostgresStoreReads:
    """The ``StoreCore`` reads and the ``PartialReads`` of
    :class:`~sessiontree.stores.postgres.store.PostgresStore` (documented there and in
    :mod:`sessiontree.stores.base`), each in one transaction of ``db`` (a snapshot where
    it takes several statements). It offers the other parts :meth:`parse_record` and
    :meth:`parsed`."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    def parse_record(self, text: Any, session_id: str, line: int) -> dict[str, Any]:
        """A stored record's bytes parsed as a JSON object (no entry check).

        Raises:
            InvalidSessionError: not JSON, or not an object (``line`` is the record's JSONL line).
        """
        try:
            record = jsonio.loads(bytes(text))
        except ValueError as exc:
            raise InvalidSessionError(f"stored record is not valid JSON ({exc})", f"{self.db.url}#{session_id}",
                                      line) from exc
        if not isinstance(record, dict):
            raise InvalidSessionError("stored record is not a JSON object", f"{self.db.url}#{session_id}", line)
        return record

    def _parse_header(self, text: Any, session_id: str) -> dict[str, Any]:
        """A stored header row parsed and checked (:func:`~sessiontree.stores.storable.stored_header`):
        the header of every read, never of ``verify`` or ``reindex``, which must go on past it."""
        return stored_header(self.parse_record(text, session_id, 1), session_id, f"{self.db.url}#{session_id}")

    def read_skeleton(self, session_id: str) -> ParsedSession:
        """The session's header and skeleton entries (see ``SessionStore.read_skeleton``),
        from the ``entries`` columns plus the first bytes of each message (its role);
        label, leaf, session-info and compaction records, messages whose first bytes
        do not show the role plainly, and rows whose copied ``text`` columns may be
        lossy (U+FFFD, see :func:`~sessiontree.stores.postgres.derived.text_copy`) are parsed whole. The header's CRC is
        checked; entries' CRCs are checked by ``read_entries`` and ``load``.
        """
        from sessiontree.core.tree import SKELETON_FIELDS

        kinds = ["compaction", *SKELETON_FIELDS]
        with self._session_cursor(session_id, "reading a skeleton") as (cur, header_raw):
            rows = cur.execute(
                "SELECT id, parent_id, type, timestamp, CASE WHEN type = 'message'"
                f" THEN substring(json from 1 for {ROLE_HEAD_BYTES}) END,"
                " CASE WHEN type = ANY(%s) THEN json END, seq"
                " FROM entries WHERE session_id = %s ORDER BY seq", (kinds, session_id)).fetchall()
            header = self._parse_header(header_raw, session_id)
            rows = [(*r[:4], None if r[4] is None else bytes(r[4]), r[5], r[6]) for r in rows]

            def fetch_whole(seqs: list[Any]) -> dict[Any, Any]:
                return dict(cur.execute("SELECT seq, json FROM entries WHERE session_id = %s AND seq = ANY(%s)",
                                        (session_id, seqs)).fetchall())

            with gc_paused():
                entries = skeletons_from_rows(
                    rows, lambda text, line: self.parse_record(text, session_id, line), fetch_whole,
                    lossy=lambda r: any(isinstance(v, str) and "\ufffd" in v for v in r[:4]))
        return ParsedSession(header=header, entries=entries, raw=[None] * len(entries), header_raw=header_raw,
                             source_version=CURRENT_VERSION, upgraded=False,
                             lines=list(range(2, len(entries) + 2)), path=None)

    def read_entries(self, session_id: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        """The stored entries of ``ids`` (see ``SessionStore.read_entries``), looked up by
        the ``(session_id, id)`` index, each given the checks :meth:`load` gives it
        (its CRC-32, then parsing and validation, :meth:`_entry`); the line reported
        is ``seq + 2``.

        Raises:
            SessionNotFoundError: no such session.
            CorruptEntryError: a returned record's bytes fail their checksum (this
                wins over a parse error; the first record in file order).
            InvalidSessionError: a returned record is not a valid entry (the first
                in file order).
        """
        if not is_exact_text(session_id):
            raise SessionNotFoundError(session_id, self.db.url)
        wanted = [i for i in dict.fromkeys(ids) if isinstance(i, str) and is_exact_text(i)]
        with self.db.transaction("reading entries", write=False) as conn:
            if not self.db.has_schema(conn) or conn.execute(
                    "SELECT 1 FROM sessions WHERE id = %s", (session_id,)).fetchone() is None:
                raise SessionNotFoundError(session_id, self.db.url)
            with conn.cursor(binary=True) as cur:
                rows = cur.execute("SELECT id, seq, json, crc FROM entries WHERE session_id = %s AND id = ANY(%s)",
                                   (session_id, wanted)).fetchall() if wanted else []
        # The checks load gives these records, in file order: every CRC first, then parsing
        # and validation (the same errors as load and SQLite's read_entries).
        rows = sorted((seq, entry_id, bytes(text), crc) for entry_id, seq, text, crc in rows)
        where = f"{self.db.url}#{session_id}"
        for seq, entry_id, text, crc in rows:
            if record_crc(text) != crc:
                raise CorruptEntryError(session_id, entry_id, seq + 2, where)
        with gc_paused():
            found = {entry_id: self._entry(text, session_id, seq + 2, where) for seq, entry_id, text, _ in rows}
        return [found[i] for i in ids if i in found]

    def read(self, session_id: str) -> ParsedSession:
        """Same as :meth:`load`: stored sessions are always format 4, loading writes nothing."""
        return self.load(session_id)

    @contextmanager
    def _session_cursor(self, session_id: str, what: str) -> Iterator[tuple[Any, bytes]]:
        """A binary cursor in a read-only snapshot transaction, with the session's
        header bytes already read and checked against their CRC: header and entries
        come from one snapshot, even across statements (the reading path of
        :meth:`load` and :meth:`read_skeleton`).

        Raises:
            SessionNotFoundError: no such id (or no schema yet).
            CorruptEntryError: the header's bytes fail their checksum.
            StorageError: the database could not be read.
        """
        if not is_exact_text(session_id):
            raise SessionNotFoundError(session_id, self.db.url)
        with self.db.transaction(what, write=False, snapshot=True) as conn:
            if not self.db.has_schema(conn):
                raise SessionNotFoundError(session_id, self.db.url)
            with conn.cursor(binary=True) as cur:
                row = cur.execute("SELECT header_json, header_crc FROM sessions WHERE id = %s",
                                  (session_id,)).fetchone()
                if row is None:
                    raise SessionNotFoundError(session_id, self.db.url)
                header_raw = bytes(row[0])
                if record_crc(header_raw) != row[1]:
                    raise CorruptEntryError(session_id, None, 1, f"{self.db.url}#{session_id}")
                yield cur, header_raw

    def load(self, session_id: str, *, keep_raw: bool = True) -> ParsedSession:
        """The session's header and entries, read in one snapshot, each record's CRC-32 checked
        (``keep_raw``: see ``SessionStore.load``).

        Raises:
            SessionNotFoundError: no such id.
            CorruptEntryError: a record's bytes differ from its recorded checksum.
            InvalidSessionError: a stored record is not a valid entry.
            StorageError: the database could not be read.
        """
        with self._session_cursor(session_id, "load") as (cur, header_raw):
            rows = cur.execute("SELECT json, crc, id FROM entries WHERE session_id = %s ORDER BY seq",
                               (session_id,)).fetchall()
        where = f"{self.db.url}#{session_id}"
        texts = [bytes(text) for text, _, _ in rows]
        computed = list(map(zlib.crc32, texts))
        for index, (value, (_, crc, entry_id)) in enumerate(zip(computed, rows, strict=False)):
            if value != crc:
                raise CorruptEntryError(session_id, entry_id, index + 2, where)
        with gc_paused():
            return self.parsed(session_id, header_raw, texts, keep_raw)

    def read_texts(self, session_id: str) -> SessionTexts:
        """The session's header and each entry's stored text and ``type`` column (see
        ``RawTexts.read_texts``) in one snapshot, no entry parsed: the header's and
        each record's CRC-32 checked as :meth:`load` checks them (the header's first,
        then the first record in file order), then the header parsed and checked. A
        ``type`` column that may be a lossy copy (U+FFFD) is taken from its record.

        Raises:
            SessionNotFoundError, CorruptEntryError, StorageError: as :meth:`load`.
            InvalidSessionError: the header is not a valid header.
        """
        with self._session_cursor(session_id, "reading texts") as (cur, header_raw):
            rows = cur.execute("SELECT json, crc, id, type FROM entries WHERE session_id = %s ORDER BY seq",
                               (session_id,)).fetchall()
        where = f"{self.db.url}#{session_id}"
        texts = [bytes(text) for text, _, _, _ in rows]
        for index, (value, (_, crc, entry_id, _)) in enumerate(zip(map(zlib.crc32, texts), rows, strict=False)):
            if value != crc:
                raise CorruptEntryError(session_id, entry_id, index + 2, where)
        header = self._parse_header(header_raw, session_id)
        types = [row[3] if "\ufffd" not in row[3] else str(self.parse_record(text, session_id, index).get("type"))
                 for index, (row, text) in enumerate(zip(rows, texts, strict=False), 2)]
        return SessionTexts(session_id, header, texts, types)

    def parsed(self, session_id: str, header_raw: bytes, texts: list[bytes],
               keep_raw: bool = True) -> ParsedSession:
        """A session from its stored header and entry bytes (CRCs already checked): the
        header checked, each entry parsed and validated (:meth:`_entry`).

        Raises:
            InvalidSessionError: the header or an entry is not valid.
        """
        header = self._parse_header(header_raw, session_id)
        entries = []
        where = f"{self.db.url}#{session_id}"
        for index, text in enumerate(texts):
            entries.append(self._entry(text, session_id, index + 2, where))
        raw: list[bytes | None] = list(texts) if keep_raw else [None] * len(texts)
        return ParsedSession(header=header, entries=entries, raw=raw, header_raw=header_raw,
                             source_version=CURRENT_VERSION, upgraded=False,
                             lines=list(range(2, len(raw) + 2)), path=None)

    def _entry(self, text: bytes, session_id: str, line: int, where: str) -> dict[str, Any]:
        """One stored record (JSONL ``line``) parsed and validated as an entry: the
        record check of :meth:`load` and :meth:`read_entries`.

        Raises:
            InvalidSessionError: not a JSON object, or not a valid entry.
        """
        return validated(self.parse_record(text, session_id, line), where, line)

    def exists(self, session_id: str) -> bool:
        """Whether the id is stored."""
        if not is_exact_text(session_id):
            return False
        with self.db.transaction("exists", write=False) as conn:
            if not self.db.has_schema(conn):
                return False
            return conn.execute("SELECT 1 FROM sessions WHERE id = %s", (session_id,)).fetchone() is not None

    def session_ids(self) -> list[str]:
        """Every stored id, oldest first."""
        with self.db.transaction("session ids", write=False) as conn:
            if not self.db.has_schema(conn):
                return []
            return [row[0] for row in conn.execute("SELECT id FROM sessions ORDER BY rowno")]

    def location(self, session_id: str) -> str | None:
        """Always ``None``: sessions live in the database, not in files."""
        return None

    def list_sessions(self, *, cwd: str | None = None, include_internal: bool = False,
                      on_progress: ProgressCallback | None = None,
                      cancel: CancelEvent | None = None) -> SessionListing:
        """Listing rows from the ``sessions`` table alone, newest ``modified`` first.

        ``all_messages_text`` of a row is read from ``message_texts`` on first
        access. A row whose header does not parse is left out and counted in
        ``skipped``.

        Raises:
            ListingCancelledError: ``cancel`` was set before or during the listing.
            StorageError: the database could not be read.
        """
        wanted = resolve_cwd(cwd) if cwd is not None else None
        if cancel is not None:
            Progress(0, None, cancel)
        with self.db.transaction("listing", write=False) as conn:
            if not self.db.has_schema(conn):
                return SessionListing()
            with conn.cursor(binary=True) as cur:
                rows = cur.execute("SELECT id, header_json, classified, cwd, updated_at, listing, entry_count"
                                   " FROM sessions ORDER BY rowno").fetchall()
        progress = Progress(len(rows), on_progress, cancel)
        infos = []
        skipped = 0
        loads = jsonio.loads
        for session_id, header_json, classified, session_cwd, updated_at, listing, count in rows:
            lossy = session_cwd is not None and "\ufffd" in session_cwd
            if (include_internal or not classified) and (lossy or cwd_matches(session_cwd, wanted)):
                try:
                    header = loads(bytes(header_json))
                except ValueError:
                    header = None  # damaged by hand: the session cannot be loaded, so it is not listed
                if not (isinstance(header, dict) and isinstance(header.get("id"), str)):
                    skipped += 1
                elif not lossy or cwd_matches(header.get("cwd"), wanted):  # the header has the exact cwd
                    infos.append(info_from_listing(bytes(listing)).to_info(
                        header, session_id, fallback_mtime=updated_at / 1e6,
                        text_loader=functools.partial(self._load_text, session_id), entry_count=count))
            progress.step()
        return sort_listing(infos, skipped)

    def _load_text(self, session_id: str) -> str:
        with self.db.transaction("reading listing text", write=False) as conn:
            with conn.cursor(binary=True) as cur:
                return " ".join(bytes(text).decode("utf-8", "surrogatepass") for (text,) in cur.execute(
                    "SELECT text FROM message_texts WHERE session_id = %s ORDER BY seq", (session_id,)))

    def find_most_recent(self, cwd: str | None = None, include_internal: bool = False) -> str | None:
        """Id of the session written last (``write_seq``), optionally only for ``cwd``."""
        wanted = resolve_cwd(cwd) if cwd is not None else None
        with self.db.transaction("find most recent", write=False) as conn:
            if not self.db.has_schema(conn):
                return None
            sql = ("SELECT id, cwd FROM sessions" + ("" if include_internal else " WHERE NOT classified")
                   + " ORDER BY write_seq DESC")
            with conn.cursor() as cur:
                cur.execute(sql)
                while batch := cur.fetchmany(256):
                    for session_id, session_cwd in batch:
                        if session_cwd is not None and "\ufffd" in session_cwd:
                            # The copy is lossy; the header has the exact value.
                            header = jsonio.loads(bytes(conn.execute(
                                "SELECT header_json FROM sessions WHERE id = %s", (session_id,)).fetchone()[0]))
                            session_cwd = header.get("cwd")
                        if cwd_matches(session_cwd, wanted):
                            found: str = session_id
                            return found
        return None
