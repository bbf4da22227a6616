"""The writes of a SQLite store: sessions created, appended to, replaced and deleted.

:class:`SqliteWrites` holds the ``StoreCore`` writes (``create``/``create_many``,
``append``, ``replace_header``, ``replace_session``, ``delete``), each one
``BEGIN IMMEDIATE`` transaction; the bodies that run inside a caller's transaction
(``create_in``, ``append_in``, ``replace_in``, which the sync ledger of
:mod:`.ledger` shares); the append memo that spares an append re-reading its
session's row; and the row inserts (``_insert_entry_rows``, ``_insert_text_rows``).
"""

from __future__ import annotations

import sqlite3
import time
import zlib
from collections.abc import Iterable, Sequence
from typing import Any

from sessiontree.core.listing import InfoAccumulator
from sessiontree.errors import SessionExistsError, SessionNotFoundError
from sessiontree.format import jsonio
from sessiontree.stores.sqlite import blobs, toolcalls
from sessiontree.stores.sqlite.connection import SqliteDatabase
from sessiontree.stores.sqlite.derived import (
    STATE_ASSIGN,
    STATE_COLUMNS,
    STATE_SELECT,
    TEXTS_TAIL,
    header_columns,
    record_crc,
    state_from_row,
    state_values,
    tail_texts,
    to_db,
)
from sessiontree.stores.sqlite.schema import DERIVED_INDEXES
from sessiontree.stores.storable import (
    check_header,
    check_replacement_header,
    encode_entries,
    id_in_use_error,
    prepare_creates,
)

__all__ = ["SqliteWrites"]

#: What :meth:`SqliteWrites._entry_rows` builds: ``entries`` rows, ``message_texts`` rows,
#: the large images cut out of records (``(seq, cut)``) and ``tool_calls`` rows.
_EntryRows = tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[int, blobs.Cut]], list[tuple[Any, ...]]]


class SqliteWrites:
    """The ``StoreCore`` writes of :class:`~sessiontree.stores.sqlite.store.SqliteStore`
    (documented there and in :mod:`sessiontree.stores.base`), over the store's
    :class:`~.connection.SqliteDatabase` (its public members only). It owns the append
    memo, and gives the database the two hooks a write transaction needs from it:
    dropping the memo when a write rolls back, and settling the sessions a batch created."""

    def __init__(self, db: SqliteDatabase) -> None:
        self.db = db
        #: Per session this store appended to: (entry_count, next seq, listing state,
        #: texts_from, the pending message_texts rows) as its last write left them, trusted
        #: only while memo_mark still holds (see _memo_fresh); saves an append re-reading them.
        self._memo: dict[Any, tuple[int, int, InfoAccumulator, int | None, list[tuple[Any, int, Any]]]] = {}
        self._memo_mark: tuple[Any, int, int] | None = None
        #: The store's max(sessions.updated_at) as our last append left it (same validity).
        self._memo_updated_at: int | None = None
        #: (connection, the derived indexes whose add() writes rows on it): see _index_adders.
        self._adders: tuple[sqlite3.Connection, tuple[Any, ...]] | None = None
        db.on_rollback = self.forget
        db.settle_created = self.settle_created_in

    def forget(self) -> None:
        """Drop the append memo (a write failed, or the database changed under it)."""
        self._memo.clear()
        self._memo_mark = None
        self._memo_updated_at = None

    def _memo_fresh(self, conn: sqlite3.Connection) -> int:
        """Inside a write transaction: forget the memo unless nothing changed the database
        since this connection's last append, and return ``PRAGMA data_version`` for the
        mark :meth:`append_in` leaves.

        The memo holds while the mark ``(connection, data_version, total_changes)`` is the
        one the last append left: ``data_version`` moves when any other connection (any
        process) commits, and ``total_changes`` when this connection changes any row
        (another kind of write, or a statement issued by hand); a failed write forgets it
        in :meth:`write_transaction`. So a trusted value is what re-reading it would give.
        """
        version: int = conn.execute("PRAGMA data_version").fetchone()[0]
        if self._memo_mark != (conn, version, conn.total_changes):
            self.forget()
        return version

    @staticmethod
    def _next_updated_at(conn: sqlite3.Connection, last: int | None = None) -> int:
        """The ``updated_at`` of a write now: microseconds since the epoch, above every
        stored one (``last``: that maximum when already known, else it is read)."""
        # Strictly increasing even within one microsecond or after a clock step
        # back, so "most recent" is never a tie.
        if last is None:
            last = conn.execute("SELECT max(updated_at) FROM sessions").fetchone()[0]
        now = time.time_ns() // 1000
        return now if last is None or now > last else last + 1

    def create(self, header: dict[str, Any], entries: Sequence[dict[str, Any]] = (),
               raw: Sequence[bytes | None] | None = None, *, path: str | None = None) -> None:
        """Store a new session in one transaction (``path`` is ignored).

        Raises:
            SessionExistsError: the id is already stored.
            InvalidSessionError: the header or an entry is not valid format 4.
            StorageError: the write failed; nothing was stored.
        """
        self.create_many([(header, entries, raw)])

    def create_many(self, sessions: Iterable[tuple[dict[str, Any], Sequence[dict[str, Any]],
                                                   Sequence[bytes | None] | None]], *, settle: bool = False) -> int:
        """Store several new sessions in a single transaction (bulk import).

        Args:
            sessions: ``(header, entries, raw)`` triples as for :meth:`create`.
            settle: also settle their derived data (search index, usage ledger) in
                the same transaction, from the entries in hand, so no settle has to
                read and parse them again (``sessiontree import``: docs/decisions/contentless-search.md);
                ``False``: they stay pending, as every write leaves them.

        Returns:
            The number of sessions stored.

        Raises:
            SessionExistsError: one of the ids is already stored (nothing is stored).
            InvalidSessionError: a header or entry is invalid (nothing is stored).
            StorageError: the write failed; nothing was stored.
        """
        prepared = prepare_creates(sessions)
        with self.db.write_transaction("create") as conn:
            last: int | None = None  # the store's newest updated_at, read once per transaction
            for session_id, header, header_raw, entries, texts in prepared:
                last = self.create_in(conn, session_id, header, header_raw, entries, texts, last)
            if settle:
                settle_created_in(conn, [(to_db(session_id), entries) for session_id, _, _, entries, _ in prepared])
        return len(prepared)

    def settle_created_in(self, conn: sqlite3.Connection, created: list[tuple[Any, Any]]) -> None:
        """The batch's new sessions settled (the :attr:`SqliteDatabase.settle_created` hook)."""
        settle_created_in(conn, created)
        self.db.settled_in_hand += sum(len(entries) for _, entries in created)

    def create_in(self, conn: sqlite3.Connection, session_id: str, header: dict[str, Any], header_raw: bytes,
                   entries: Sequence[dict[str, Any]], texts: list[bytes], last: int | None = None) -> int:
        """Store one new session inside the caller's transaction: its row (listing state
        included, computed from the entries first: one statement), then its entries.

        Args:
            last: the store's newest ``updated_at`` when known (the previous session of
                the same transaction), else read.

        Returns:
            The session's ``updated_at`` (the newest now).

        Raises:
            SessionExistsError: the id is already stored.
        """
        key = to_db(session_id)
        info = InfoAccumulator()
        rows = self._entry_rows(key, 0, entries, texts, info)
        updated_at = self._next_updated_at(conn, last)
        try:
            conn.execute(
                f"INSERT INTO sessions (id, header_json, header_crc, created_at, cwd, parent_session_id,"
                f" classified, updated_at, entry_count, {STATE_SELECT})"
                f" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?{', ?' * len(STATE_COLUMNS)})",
                (key, header_raw, record_crc(header_raw), *header_columns(header), updated_at, len(texts),
                 *state_values(info)))
        except sqlite3.IntegrityError as exc:
            # The primary key refuses a stored id: no statement of its own to look it up first.
            if "sessions.id" in str(exc):
                raise SessionExistsError(session_id) from None
            raise
        self._write_entry_rows(conn, session_id, key, 0, entries, texts, rows)
        return updated_at

    def append(self, session_id: str, entries: Sequence[dict[str, Any]],
               raw: Sequence[bytes | None] | None = None) -> None:
        """Append entries in one transaction, updating the listing state from them only.

        Raises:
            SessionNotFoundError: no such id.
            InvalidSessionError: an entry is invalid or reuses an id of the session.
            StorageError: the write failed; nothing was appended.
        """
        texts = encode_entries(entries, raw)
        self.db.run_write("append", self.append_in, session_id, entries, texts)

    def append_in(self, conn: sqlite3.Connection, session_id: str, entries: Sequence[dict[str, Any]],
                   texts: list[bytes]) -> None:
        """The body of :meth:`append`, inside the caller's transaction.

        The session's count, next ``seq``, listing state and pending listing texts,
        and the store's latest ``updated_at``, come from the memo when nothing
        changed since this connection's last append (:meth:`_memo_fresh`), else
        from the database.

        Listing texts (``message_texts`` rows) are left pending while the memo
        holds them and the pending tail (``sessions.texts_from`` on) is shorter than
        :data:`TEXTS_TAIL` entries, then written together: most appends write
        the entry and the session's row only (docs/decisions/append-texts-tail.md).
        An append without the memo first writes the tail a former one left (its
        texts derived from the stored entries), so no tail outlives the connection
        that knows it.
        """
        key = to_db(session_id)
        version = self._memo_fresh(conn)
        memo = self._memo.get(key)
        pending: list[tuple[Any, int, Any]]
        if memo is None:
            row = conn.execute(f"SELECT entry_count, texts_from, {STATE_SELECT} FROM sessions WHERE id = ?",
                               (key,)).fetchone()
            if row is None:
                raise SessionNotFoundError(session_id, self.db.url)
            if not texts:
                return
            count, texts_from, info = row[0], row[1], state_from_row(row[2:])
            # max(seq) + 1 rather than entry_count: robust even if rows were removed by hand.
            start = conn.execute("SELECT coalesce(max(seq) + 1, 0) FROM entries WHERE session_id = ?",
                                 (key,)).fetchone()[0]
            pending = [] if texts_from is None else [
                (key, seq, to_db(text)) for seq, text in tail_texts(conn, key, texts_from)]
        else:
            # A failed write forgets the memo (_abort_write): extending its list is safe.
            count, start, info, texts_from, pending = memo
            if not texts:
                return
        self._insert_entries(conn, session_id, start, entries, texts, info, pending)
        end = start + len(texts)
        if memo is None or end - (start if texts_from is None else texts_from) >= TEXTS_TAIL:
            _insert_text_rows(conn, pending)
            pending, texts_from = [], None
        elif texts_from is None:
            texts_from = start
        updated_at = self._next_updated_at(conn, self._memo_updated_at)
        conn.execute(_UPDATE_APPENDED, (count + len(texts), updated_at, texts_from, *state_values(info), key))
        if len(self._memo) >= 256:
            self._memo.clear()  # bounded: one store may append to many sessions (sync)
        self._memo[key] = (count + len(texts), end, info, texts_from, pending)
        self._memo_updated_at = updated_at
        self._memo_mark = (conn, version, conn.total_changes)

    def _index_adders(self, conn: sqlite3.Connection) -> tuple[Any, ...]:
        """The :data:`DERIVED_INDEXES` whose ``add`` writes rows on this connection's
        database, asked once per connection (``writes_on_add``): since
        ``m011_bulk_settle`` none does, and an append skips them and their probe of
        the schema (a ``sqlite_master`` read costing as much as an entry insert)."""
        adders = self._adders
        if adders is None or adders[0] is not conn:
            adders = (conn, tuple(index for index in DERIVED_INDEXES if index.writes_on_add(conn)))
            self._adders = adders
        return adders[1]

    def _insert_entries(self, conn: sqlite3.Connection, session_id: str, start: int,
                        entries: Sequence[dict[str, Any]], texts: list[bytes], info: InfoAccumulator,
                        pending: list[tuple[Any, int, Any]] | None = None) -> None:
        """Insert the entry rows (and, unless ``pending`` is given, their ``message_texts``
        rows; with it, the text rows are added to it for the caller to write) and
        feed ``info``; the derived indexes that write on add get the entries.

        Raises:
            InvalidSessionError: an entry id is already used in the session.
        """
        key = to_db(session_id)
        self._write_entry_rows(conn, session_id, key, start, entries, texts,
                               self._entry_rows(key, start, entries, texts, info), pending)

    @staticmethod
    def _entry_rows(key: Any, start: int, entries: Sequence[dict[str, Any]], texts: list[bytes],
                    info: InfoAccumulator) -> _EntryRows:
        """The ``entries`` and ``message_texts`` rows of entries stored from ``seq`` =
        ``start`` on, their large images cut out (docs/blobs.md) and their ``tool_calls``
        rows (:mod:`.toolcalls`, from the parsed entry in hand); ``info`` takes the
        entries in order."""
        rows = []
        text_rows = []
        call_rows: list[tuple[Any, ...]] = []
        cuts: list[tuple[int, blobs.Cut]] = []
        threshold = blobs.THRESHOLD
        add = info.add
        crc32 = zlib.crc32
        seq = start
        for entry, text in zip(entries, texts, strict=False):
            listed = add(entry)
            if listed is not None:
                text_rows.append((key, seq, listed if listed.isascii() else to_db(listed)))
            stored = text
            if len(text) >= threshold:  # large images out of line (docs/blobs.md)
                cut = blobs.cut_record(text, entry)
                if cut is not None:
                    cuts.append((seq, cut))
                    stored = cut.text
            entry_id, parent, entry_type, stamp = entry["id"], entry["parentId"], entry["type"], entry["timestamp"]
            if entry_type == "message":
                message = entry.get("message")
                if message.__class__ is dict and message.get("role") == "assistant":
                    call_rows.extend(toolcalls.rows_of(key, seq, message))
            # to_db only changes non-ASCII strings: most ids, types and times skip the call.
            if not (entry_id.isascii() and entry_type.isascii() and stamp.isascii()
                    and (parent is None or parent.isascii())):
                entry_id, parent, entry_type, stamp = to_db(entry_id), to_db(parent), to_db(entry_type), to_db(stamp)
            rows.append((key, seq, entry_id, parent, entry_type, stamp, stored, crc32(stored)))
            seq += 1
        info.texts.clear()  # they are in message_texts rows; the accumulator need not hold them
        return rows, text_rows, cuts, call_rows

    def _write_entry_rows(self, conn: sqlite3.Connection, session_id: str, key: Any, start: int,
                          entries: Sequence[dict[str, Any]], texts: list[bytes], built: _EntryRows,
                          pending: list[tuple[Any, int, Any]] | None = None) -> None:
        """Insert the rows of :meth:`_entry_rows` (the ``message_texts`` rows added to
        ``pending`` instead when given, for the caller to write) and give the entries
        to the derived indexes that write on add.

        Raises:
            InvalidSessionError: an entry id is already used in the session.
        """
        rows, text_rows, cuts, call_rows = built
        try:
            _insert_entry_rows(conn, rows)
        except sqlite3.IntegrityError as exc:
            if "entries.session_id, entries.id" in str(exc):
                raise id_in_use_error(session_id) from exc
            raise
        if pending is None:
            _insert_text_rows(conn, text_rows)
        else:
            pending.extend(text_rows)
        if cuts:
            blobs.insert_cuts(conn, key, cuts)
        if call_rows:
            toolcalls.insert_rows(conn, call_rows)
        adders = self._index_adders(conn)
        if adders:
            indexed = [(start + offset, entry, text)
                       for offset, (entry, text) in enumerate(zip(entries, texts, strict=True))]
            for index in adders:
                index.add(conn, key, indexed)

    def replace_header(self, session_id: str, header: dict[str, Any]) -> None:
        """Replace the header (same id) and its derived columns in one transaction.

        Raises:
            SessionNotFoundError: no such id.
            InvalidSessionError: the header is invalid or has another id.
            StorageError: the write failed; nothing changed.
        """
        check_replacement_header(session_id, header)
        header_raw = jsonio.dumps(header)
        with self.db.write_transaction("replace header") as conn:
            updated_at = self._next_updated_at(conn)
            cursor = conn.execute(
                "UPDATE sessions SET header_json = ?, header_crc = ?, created_at = ?, cwd = ?,"
                " parent_session_id = ?, classified = ?, updated_at = ? WHERE id = ?",
                (header_raw, record_crc(header_raw), *header_columns(header), updated_at, to_db(session_id)))
            if cursor.rowcount == 0:
                raise SessionNotFoundError(session_id, self.db.url)

    def replace_session(self, header: dict[str, Any], entries: Sequence[dict[str, Any]],
                        raw: Sequence[bytes | None] | None = None) -> None:
        """Replace a session's header and entries in one transaction (``sync --replace``).

        Its ``updated_at`` moves on (it was written); derived data is rebuilt from
        the new entries in the same transaction.

        Raises:
            SessionNotFoundError: no session has the header's id.
            InvalidSessionError: the header or an entry is invalid.
            StorageError: the write failed; the session is as it was.
        """
        session_id = check_header(header)
        texts = encode_entries(entries, raw)
        with self.db.write_transaction("replace session") as conn:
            self.replace_in(conn, session_id, header, entries, texts)

    def replace_in(self, conn: sqlite3.Connection, session_id: str, header: dict[str, Any],
                    entries: Sequence[dict[str, Any]], texts: list[bytes]) -> None:
        """The body of :meth:`replace_session`, inside the caller's transaction.

        Raises:
            SessionNotFoundError: no such session."""
        key = to_db(session_id)
        if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (key,)).fetchone() is None:
            raise SessionNotFoundError(session_id, self.db.url)
        for index in DERIVED_INDEXES:
            index.remove(conn, key)
        conn.execute("DELETE FROM message_texts WHERE session_id = ?", (key,))
        conn.execute("DELETE FROM tool_calls WHERE session_id = ?", (key,))
        conn.execute("DELETE FROM entries WHERE session_id = ?", (key,))
        conn.execute("DELETE FROM sessions WHERE id = ?", (key,))
        # The old rows' splices go first; blobs the new entries share are kept, not rewritten.
        old = [row[0] for row in conn.execute("SELECT DISTINCT sha256 FROM entry_blobs WHERE session_id = ?", (key,))]
        conn.execute("DELETE FROM entry_blobs WHERE session_id = ?", (key,))
        self.create_in(conn, session_id, header, jsonio.dumps(header), entries, texts)
        blobs.drop_unused(conn, old)

    def delete(self, session_id: str) -> None:
        """Delete the session's rows in one transaction; a missing id does nothing.

        Raises:
            StorageError: the delete failed; nothing changed.
        """
        key = to_db(session_id)
        with self.db.write_transaction("delete") as conn:
            # Explicit rather than relying on ON DELETE CASCADE, which only works
            # on connections that enabled foreign keys.
            for index in DERIVED_INDEXES:
                index.remove(conn, key)
            conn.execute("DELETE FROM message_texts WHERE session_id = ?", (key,))
            conn.execute("DELETE FROM tool_calls WHERE session_id = ?", (key,))
            blobs.drop_refs(conn, key)
            conn.execute("DELETE FROM entries WHERE session_id = ?", (key,))
            conn.execute("DELETE FROM sessions WHERE id = ?", (key,))


#: What an append sets in its session's row (values: count, updated_at, texts_from, state..., id).
_UPDATE_APPENDED = (f"UPDATE sessions SET entry_count = ?, updated_at = ?, texts_from = ?, {STATE_ASSIGN}"
                    " WHERE id = ?")
_INSERT_ENTRY = ("INSERT INTO entries (session_id, seq, id, parent_id, type, timestamp, json, crc)"
                 " VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
_INSERT_TEXT = "INSERT INTO message_texts (session_id, seq, text) VALUES (?, ?, ?)"


# Module-level so tests can inject a failure in the middle of a write. One row (the
# per-call append) goes through execute: executemany's iteration costs more than it.
def _insert_entry_rows(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    if len(rows) == 1:
        conn.execute(_INSERT_ENTRY, rows[0])
    else:
        conn.executemany(_INSERT_ENTRY, rows)


def _insert_text_rows(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    if len(rows) == 1:
        conn.execute(_INSERT_TEXT, rows[0])
    elif rows:
        conn.executemany(_INSERT_TEXT, rows)


def settle_created_in(conn: sqlite3.Connection, created: Sequence[tuple[Any, Sequence[dict[str, Any]]]]) -> None:
    """Settle the derived data of sessions created in the caller's transaction from their
    entries in hand (``[(sessions.id key, every entry)]``): each index's ``created`` hook
    (``DerivedIndex``), so no settle reads and parses them again; an index without one
    leaves them pending (docs/decisions/bulk-settle.md)."""
    for index in DERIVED_INDEXES:
        hook = getattr(index, "created", None)
        if hook is not None:
            hook(conn, created)
