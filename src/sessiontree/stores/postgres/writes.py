"""The writes of a PostgreSQL store: sessions created, appended to, replaced and deleted.

:class:`PostgresWrites` holds the ``StoreCore`` writes (``create``/``create_many``,
``append``, ``replace_header``, ``replace_session``, ``delete``), each one transaction;
the bodies that run inside a caller's transaction (``create_in``, ``append_in``,
``replace_in``, which the sync ledger of :mod:`.ledger` shares); the row inserts
(``_insert_entries``, ``_insert_entry_rows``); and ``exact_id``, the check that an id can be
stored exactly.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterable, Sequence
from typing import Any

from sessiontree.core.listing import InfoAccumulator
from sessiontree.errors import InvalidSessionError, SessionExistsError, SessionNotFoundError
from sessiontree.format import jsonio
from sessiontree.stores.postgres.connection import PostgresDatabase
from sessiontree.stores.postgres.derived import (
    header_columns,
    info_from_listing,
    is_exact_text,
    listing_values,
    record_crc,
    text_copy,
)
from sessiontree.stores.postgres.schema import DERIVED_INDEXES
from sessiontree.stores.storable import check_header, check_replacement_header, encode_entries, prepare_creates

__all__ = ["PostgresWrites", "exact_id"]


def exact_id(value: str, what: str) -> str:
    """``value`` (a session or entry id; ``what`` names it in the error) unchanged, once
    checked that PostgreSQL text holds it exactly: ids must be exact since the
    database compares them.

    Raises:
        InvalidSessionError: the id holds NUL or a lone surrogate."""
    if not is_exact_text(value):
        raise InvalidSessionError(f"{what} {value!r} cannot be stored in PostgreSQL "
                                  "(it holds NUL or a lone surrogate)")
    return value


class PostgresWrites:
    """The ``StoreCore`` writes of :class:`~sessiontree.stores.postgres.store.PostgresStore`
    (documented there and in :mod:`sessiontree.stores.base`)."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db


    def create(self, header: dict[str, Any], entries: Sequence[dict[str, Any]] = (),
               raw: Sequence[bytes | None] | None = None, *, path: str | None = None) -> None:
        """Store a new session in one transaction (``path`` is ignored).

        Raises:
            SessionExistsError: the id is already stored.
            InvalidSessionError: the header or an entry is not valid format 4,
                or an id PostgreSQL text cannot hold exactly.
            StorageError: the write failed; nothing was stored.
        """
        self.create_many([(header, entries, raw)])

    def create_many(self, sessions: Iterable[tuple[dict[str, Any], Sequence[dict[str, Any]],
                                                   Sequence[bytes | None] | None]]) -> int:
        """Store several new sessions in a single transaction (bulk import, sync).

        Args:
            sessions: ``(header, entries, raw)`` triples as for :meth:`create`.

        Returns:
            The number of sessions stored.

        Raises:
            SessionExistsError, InvalidSessionError, StorageError: as :meth:`create`;
                nothing is stored.
        """
        prepared = prepare_creates(sessions, exact_id)
        with self.db.transaction("create", write=True, session_id=prepared[0][0] if prepared else None) as conn:
            for session_id, header, header_raw, entries, texts in prepared:
                self.create_in(conn, session_id, header, header_raw, entries, texts)
        return len(prepared)

    def create_in(self, conn: Any, session_id: str, header: dict[str, Any], header_raw: bytes,
                   entries: Sequence[dict[str, Any]], texts: list[bytes]) -> None:
        """The body of :meth:`create`, inside the caller's transaction.

        Raises:
            SessionExistsError: the id is already stored (also when another host
                created it a moment ago)."""
        info = InfoAccumulator()
        inserted = conn.execute(
            "INSERT INTO sessions (id, header_json, header_crc, created_at, cwd, parent_session_id,"
            " classified, updated_at, write_seq, listing)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, nextval('sessions_write_seq_counter'), %s)"
            " ON CONFLICT (id) DO NOTHING RETURNING 1",
            (session_id, header_raw, record_crc(header_raw), *header_columns(header),
             time.time_ns() // 1000, listing_values(info)[0])).fetchone()
        if inserted is None:
            raise SessionExistsError(session_id)
        self._insert_entries(conn, session_id, 0, entries, texts, info)
        conn.execute("UPDATE sessions SET entry_count = %s, listing = %s, message_count = %s,"
                     " modified_ms = %s, name = %s WHERE id = %s",
                     (len(texts), *listing_values(info), session_id))

    def append(self, session_id: str, entries: Sequence[dict[str, Any]],
               raw: Sequence[bytes | None] | None = None) -> None:
        """Append entries in one transaction, holding the session's row lock.

        Args:
            session_id: the session.
            entries: entries in order.
            raw: optional stored JSON text per entry (``None`` items are serialized),
                so entries read from a file keep their exact bytes (``sync``).

        Raises:
            SessionNotFoundError: no such id.
            InvalidSessionError: an entry is invalid, reuses an id of the session, or
                has an id PostgreSQL text cannot hold exactly.
            StorageError: the write failed (or the connection was lost); nothing was appended.
        """
        texts = encode_entries(entries, raw)
        if not is_exact_text(session_id):
            raise SessionNotFoundError(session_id, self.db.url)
        for entry in entries:
            exact_id(entry["id"], "entry id")
        with self.db.transaction("append", write=True, session_id=session_id) as conn:
            self.append_in(conn, session_id, entries, texts)

    def append_in(self, conn: Any, session_id: str, entries: Sequence[dict[str, Any]], texts: list[bytes]) -> None:
        """The body of :meth:`append`, inside the caller's transaction."""
        # FOR UPDATE: appends to one session take turns (across hosts), so seq is
        # computed from a count nobody else is changing; other sessions are not blocked.
        row = conn.execute("SELECT entry_count, listing FROM sessions WHERE id = %s FOR UPDATE",
                           (session_id,)).fetchone()
        if row is None:
            raise SessionNotFoundError(session_id, self.db.url)
        if not texts:
            return
        info = info_from_listing(row[1])
        self._insert_entries(conn, session_id, row[0], entries, texts, info)
        conn.execute(
            "UPDATE sessions SET entry_count = %s, updated_at = %s,"
            " write_seq = nextval('sessions_write_seq_counter'), listing = %s, message_count = %s,"
            " modified_ms = %s, name = %s WHERE id = %s",
            (row[0] + len(texts), time.time_ns() // 1000, *listing_values(info), session_id))

    def replace_session(self, header: dict[str, Any], entries: Sequence[dict[str, Any]],
                        raw: Sequence[bytes | None] | None = None) -> None:
        """Replace a session's header and all its entries in one transaction (``sync --replace``):
        a reader sees the old session or the new one, never a mix.

        The session keeps its place in insertion order (its ``sessions`` row is
        updated, not recreated); ``updated_at`` and ``write_seq`` move on, and its
        derived data is rebuilt from the new entries in the same transaction.

        Raises:
            SessionNotFoundError: no session has ``header["id"]``.
            InvalidSessionError: the header or an entry is invalid, two entries share an
                id, or an id PostgreSQL text cannot hold exactly.
            StorageError: the write failed; the session is as it was.
        """
        session_id = check_header(header)
        texts = encode_entries(entries, raw)
        for entry in entries:
            exact_id(entry["id"], "entry id")
        if not is_exact_text(session_id):
            raise SessionNotFoundError(session_id, self.db.url)
        with self.db.transaction("replace session", write=True, session_id=session_id) as conn:
            self.replace_in(conn, session_id, header, entries, texts)

    def replace_in(self, conn: Any, session_id: str, header: dict[str, Any], entries: Sequence[dict[str, Any]],
                    texts: list[bytes]) -> None:
        """The body of :meth:`replace_session`, inside the caller's transaction (row-locked)."""
        if conn.execute("SELECT 1 FROM sessions WHERE id = %s FOR UPDATE", (session_id,)).fetchone() is None:
            raise SessionNotFoundError(session_id, self.db.url)
        for index in DERIVED_INDEXES:
            index.remove(conn, session_id)
        conn.execute("DELETE FROM message_texts WHERE session_id = %s", (session_id,))
        conn.execute("DELETE FROM entries WHERE session_id = %s", (session_id,))
        info = InfoAccumulator()
        self._insert_entries(conn, session_id, 0, entries, texts, info)
        header_raw = jsonio.dumps(header)
        conn.execute(
            "UPDATE sessions SET header_json = %s, header_crc = %s, created_at = %s, cwd = %s,"
            " parent_session_id = %s, classified = %s, updated_at = %s,"
            " write_seq = nextval('sessions_write_seq_counter'), entry_count = %s, listing = %s,"
            " message_count = %s, modified_ms = %s, name = %s WHERE id = %s",
            (header_raw, record_crc(header_raw), *header_columns(header), time.time_ns() // 1000, len(texts),
             *listing_values(info), session_id))

    def _insert_entries(self, conn: Any, session_id: str, start: int, entries: Sequence[dict[str, Any]],
                        texts: list[bytes], info: InfoAccumulator) -> None:
        rows = []
        text_rows = []
        for offset, (entry, text) in enumerate(zip(entries, texts, strict=False)):
            seq = start + offset
            listed = info.add(entry)
            if listed is not None:
                text_rows.append((session_id, seq, listed.encode("utf-8", "surrogatepass")))
            rows.append((session_id, seq, entry["id"], text_copy(entry["parentId"]), text_copy(entry["type"]),
                         text_copy(entry["timestamp"]), text, zlib.crc32(text)))
        info.texts.clear()  # they are in message_texts rows
        # A duplicate id violates UNIQUE (session_id, id); the error arrives at the next
        # sync and PostgresDatabase.transaction names it. No savepoint: the whole write rolls back anyway.
        _insert_entry_rows(conn, rows)
        if text_rows:
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO message_texts (session_id, seq, text) VALUES (%s, %s, %s)", text_rows)
        if DERIVED_INDEXES:
            indexed = [(start + offset, entry, text)
                       for offset, (entry, text) in enumerate(zip(entries, texts, strict=True))]
            for index in DERIVED_INDEXES:
                index.add(conn, session_id, indexed)

    def replace_header(self, session_id: str, header: dict[str, Any]) -> None:
        """Replace the header (same id) and its copied columns in one transaction.

        Raises:
            SessionNotFoundError: no such id.
            InvalidSessionError: the header is invalid or has another id.
            StorageError: the write failed; nothing changed.
        """
        check_replacement_header(session_id, header)
        if not is_exact_text(session_id):
            raise SessionNotFoundError(session_id, self.db.url)
        header_raw = jsonio.dumps(header)
        with self.db.transaction("replace header", write=True) as conn:
            # RETURNING, not rowcount: in pipeline mode the count is known only after a sync.
            found = conn.execute(
                "UPDATE sessions SET header_json = %s, header_crc = %s, created_at = %s, cwd = %s,"
                " parent_session_id = %s, classified = %s, updated_at = %s,"
                " write_seq = nextval('sessions_write_seq_counter') WHERE id = %s RETURNING 1",
                (header_raw, record_crc(header_raw), *header_columns(header), time.time_ns() // 1000,
                 session_id)).fetchone()
            if found is None:
                raise SessionNotFoundError(session_id, self.db.url)

    def delete(self, session_id: str) -> None:
        """Delete the session's rows in one transaction; a missing id does nothing.

        Raises:
            StorageError: the delete failed; nothing changed.
        """
        if not is_exact_text(session_id):
            return
        with self.db.transaction("delete", write=True) as conn:
            for index in DERIVED_INDEXES:
                index.remove(conn, session_id)
            conn.execute("DELETE FROM message_texts WHERE session_id = %s", (session_id,))
            conn.execute("DELETE FROM entries WHERE session_id = %s", (session_id,))
            conn.execute("DELETE FROM sessions WHERE id = %s", (session_id,))


# Module-level so tests can inject a failure in the middle of a write.
def _insert_entry_rows(conn: Any, rows: list[tuple[Any, ...]]) -> None:
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO entries (session_id, seq, id, parent_id, type, timestamp, json, crc)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", rows)
