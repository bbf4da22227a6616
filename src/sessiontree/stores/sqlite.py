"""``SqliteStore``: every session in one local SQLite database (SPEC §4, REFERENCE §3.1).

Invariants:

* **Entries are the truth; metadata is a projection.** ``entries.json`` holds
  each record's JSON text byte for byte (a ``BLOB``, so even invalid UTF-8
  read from an old file survives), ``sessions.header_json`` the header's.
  Everything else (listing columns, ``message_texts``) is derived from them
  and can be dropped and recomputed by :meth:`SqliteStore.rebuild_metadata`.
* **One mutation, one transaction.** Each write runs inside ``BEGIN
  IMMEDIATE`` ... ``COMMIT``; on any error it is rolled back and a
  :class:`~sessiontree.errors.StorageError` is raised with the SQLite error
  as ``__cause__``, so nothing of a failed call is ever visible.
* **Appends never re-read the transcript.** The listing state of a session is
  an :class:`~sessiontree.info.InfoAccumulator` stored in ``sessions``
  columns; an append loads that row, feeds it the new entries only and writes
  it back in the same transaction.
* **Listing reads only ``sessions``.** Its cost grows with the number of
  sessions, not with their length. Measured by ``benchmarks/bench_listing.py``
  (warm cache, medians of 9): 10,000 sessions list in 158 ms with 10
  entries each and in 164 ms with 1,000 entries each (an 8.4 GB database),
  a ratio of 1.04. ``message_texts`` is read only when a row's
  ``all_messages_text`` is accessed.
* **Concurrency.** WAL journal, a busy timeout, one connection per store
  object (and per process: a store used after ``fork`` opens its own). The
  write lock taken by ``BEGIN IMMEDIATE`` serializes writers across
  processes, and ``seq`` is computed inside it, so concurrent appends are
  neither lost nor interleaved within a call.
* **Schema changes are named steps** (``m001_initial``, ...), applied in
  order at open and recorded in ``schema_migrations``. A database carrying a
  step this code does not know was written by a newer version and is refused.

Strings from sessions may hold lone UTF-16 surrogates (JSON ``"\\ud83d"``
escapes); SQLite text must be UTF-8, so such values are stored as BLOBs of
their ``surrogatepass`` encoding and decoded back on read.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .. import jsonio
from .._gc import gc_paused
from ..errors import (
    InvalidSessionError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
    StoreOpenError,
)
from ..format import CURRENT_VERSION, ParsedSession, validate_entry
from ..info import InfoAccumulator, SessionInfo, is_classified
from ._shared import Progress, check_header, cwd_matches, encode_entries, resolve_cwd, sort_listing
from .base import CancelEvent, ProgressCallback

__all__ = ["SqliteStore", "MIGRATIONS", "STATE_COLUMNS", "DEFAULT_TIMEOUT"]

#: Seconds a connection waits for another writer's lock before failing.
DEFAULT_TIMEOUT = 30.0

#: ``InfoAccumulator.to_state()`` key -> ``sessions`` column holding it.
STATE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("messageCount", "message_count"),
    ("firstMessage", "first_message"),
    ("modifiedMs", "modified_ms"),
    ("hasName", "has_name"),
    ("name", "name"),
    ("anchorId", "anchor_id"),
    ("summaryThrough", "summary_through"),
    ("summaryText", "summary_text"),
)
_STATE_SQL = ", ".join(column for _, column in STATE_COLUMNS)
_STATE_ASSIGN = ", ".join(f"{column} = ?" for _, column in STATE_COLUMNS)

Migration = Callable[[sqlite3.Connection], None]
#: Ordered schema steps ``(name, function)``; append new steps, never edit applied ones.
MIGRATIONS: list[tuple[str, Migration]] = []


def migration(step: Migration) -> Migration:
    """Register ``step`` as the next schema migration, named after the function."""
    MIGRATIONS.append((step.__name__, step))
    return step


@migration
def m001_initial(conn: sqlite3.Connection) -> None:
    """Sessions, their entries, and the listing text kept apart."""
    conn.execute("""
        CREATE TABLE sessions (
            -- The header id: what load(id), append(id) and delete(id) look up.
            id TEXT PRIMARY KEY,
            -- The header record's exact JSON text: the truth for the header,
            -- written back byte for byte on export.
            header_json BLOB NOT NULL,
            -- Copies of header fields, so listing and filters need not parse
            -- header_json; rewritten with it by replace_header.
            created_at TEXT,
            cwd TEXT,
            parent_session_id TEXT,
            -- 1 when the header is a valid workflow classification (REFERENCE
            -- O.1): listings skip internal sessions without parsing anything.
            classified INTEGER NOT NULL DEFAULT 0,
            -- Microseconds since the Unix epoch of the last write, strictly
            -- increasing across the store: recency for find_most_recent (M.3).
            updated_at INTEGER NOT NULL,
            -- Number of stored entries.
            entry_count INTEGER NOT NULL DEFAULT 0,
            -- The InfoAccumulator state (to_state()), updated from appended
            -- entries only, so listing never reads entries (REFERENCE L.14-L.16,
            -- J, K). Derived data: rebuild_metadata() recomputes it.
            message_count INTEGER NOT NULL DEFAULT 0,
            first_message TEXT,
            modified_ms REAL NOT NULL DEFAULT 0,
            has_name INTEGER NOT NULL DEFAULT 0,
            name TEXT,
            anchor_id TEXT,
            summary_through TEXT,
            summary_text TEXT
        )""")
    # find_most_recent walks sessions newest first; writes read max(updated_at).
    conn.execute("CREATE INDEX sessions_updated_at ON sessions (updated_at)")
    conn.execute("""
        CREATE TABLE entries (
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            -- File order (0-based): JSONL order is insertion order, and export
            -- and the tree (leaf = last entry) depend on it.
            seq INTEGER NOT NULL,
            -- Base fields copied out of json for queries and the uniqueness check.
            id TEXT NOT NULL,
            parent_id TEXT,
            type TEXT NOT NULL,
            timestamp TEXT NOT NULL,
            -- The record's exact JSON text (no newline): the one source of truth.
            json BLOB NOT NULL,
            PRIMARY KEY (session_id, seq),
            -- Entry ids are unique within a session (REFERENCE D.15/D.19).
            UNIQUE (session_id, id)
        )""")
    conn.execute("""
        CREATE TABLE message_texts (
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            -- seq of the entry the text came from: keeps file order.
            seq INTEGER NOT NULL,
            -- Non-empty listing text of a user/assistant message (REFERENCE L.15).
            -- Kept out of sessions because it grows with the transcript; read
            -- only when SessionInfo.all_messages_text is accessed.
            text TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        )""")


def _db(value: Any) -> Any:
    """A Python value as SQLite can store it (lone surrogates -> BLOB)."""
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "surrogatepass")
    return value


def _py(value: Any) -> Any:
    """Inverse of :func:`_db` for text columns."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogatepass")
    return value


def _state_values(info: InfoAccumulator) -> list[Any]:
    state = info.to_state()
    return [_db(int(state[key]) if key == "hasName" else state[key]) for key, _ in STATE_COLUMNS]


def _state_from_row(values: Sequence[Any]) -> InfoAccumulator:
    state = {key: _py(value) for (key, _), value in zip(STATE_COLUMNS, values)}
    state["hasName"] = bool(state["hasName"])
    state["modifiedMs"] = float(state["modifiedMs"] or 0.0)
    return InfoAccumulator.from_state(state)


def _header_columns(header: dict[str, Any]) -> tuple[Any, Any, Any, int]:
    created = header.get("createdAt")
    cwd = header.get("cwd")
    parent = header.get("parentSessionId")
    return (_db(created) if isinstance(created, str) else None,
            _db(cwd) if isinstance(cwd, str) else None,
            _db(parent) if isinstance(parent, str) else None,
            int(is_classified(header)))


class SqliteStore:
    """A :class:`~sessiontree.stores.base.SessionStore` in one SQLite database file.

    Args:
        path: the database file (created with its directory when missing), or
            ``":memory:"`` for a private in-memory database (no WAL).
        timeout: seconds to wait for another connection's write lock.
        create: with ``False``, a missing file raises ``StoreOpenError`` instead
            of being created (read-only tools).
        synchronous: ``"full"`` (default): every committed mutation survives a
            power loss; ``"normal"``: it survives a crash of the process but
            not of the machine, and appends skip the fsync (WAL mode).

    Attributes:
        url: ``sqlite:///`` + the absolute path (four slashes for ``/...``).
        kind: ``"sqlite"``.
        path: the absolute database path.
        journal_mode: what SQLite reports after asking for WAL (``"wal"``
            except on filesystems that cannot share memory maps).

    Raises:
        StoreOpenError: the directory cannot be created, the file is not a
            SQLite database or is corrupt, it is locked past ``timeout`` while
            migrating, or its schema is newer than this code.
    """

    kind = "sqlite"

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = DEFAULT_TIMEOUT,
                 create: bool = True, synchronous: str = "full") -> None:
        raw_path = os.fspath(path)
        if synchronous.lower() not in ("full", "normal"):
            raise ValueError('synchronous must be "full" or "normal"')
        self.synchronous = synchronous.lower()
        self.path = raw_path if raw_path == ":memory:" else os.path.abspath(raw_path)
        self.url = "sqlite:///" + self.path
        self.timeout = timeout
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self._closed = False
        if self.path != ":memory:":
            if not create and not os.path.exists(self.path):
                # Read-only callers: a mistyped path must not look like an empty store.
                raise StoreOpenError(f"no session store at {self.path}")
            directory = os.path.dirname(self.path)
            try:
                os.makedirs(directory, exist_ok=True)
            except OSError as exc:
                raise StoreOpenError(f"cannot create directory {directory} for {self.url}: {exc}") from exc
            if os.path.isdir(self.path):
                raise StoreOpenError(f"cannot open {self.url}: it is a directory")
        conn = self._connect()
        try:
            self._migrate(conn)
        except sqlite3.Error as exc:
            conn.close()
            raise StoreOpenError(f"cannot open {self.url}: {exc}") from exc
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r})"

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- connection and schema --------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        try:
            # isolation_level=None: we issue BEGIN/COMMIT ourselves, one per mutation.
            conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None,
                                   check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreOpenError(f"cannot open {self.url}: {exc}") from exc
        try:
            if self.path != ":memory:":
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                self.journal_mode = str(mode).lower()
            else:
                self.journal_mode = "memory"
            # FULL (default): a returned mutation survives power loss. NORMAL (opt-in):
            # it survives a crash of the process, not of the machine, and an
            # append costs no fsync: the durability of the original agent's
            # JSONL appends, which never fsync (benchmarks/README.md).
            conn.execute(f"PRAGMA synchronous = {self.synchronous.upper()}")
            conn.execute("PRAGMA foreign_keys = ON")
            # Reading the schema detects files that are not databases or are corrupt.
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            conn.close()
            raise StoreOpenError(f"cannot open {self.url}: {exc}") from exc
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        known = [name for name, _ in MIGRATIONS]
        applied = self._applied(conn)
        if applied is not None and applied == known:
            return  # the common case needs no write lock
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations ("
                         " name TEXT PRIMARY KEY,"  # the step's function name, e.g. m001_initial
                         " applied_at TEXT NOT NULL)")  # when it ran (ISO-8601 UTC), for diagnosis
            applied = self._applied(conn) or []
            unknown = [name for name in applied if name not in known]
            if unknown:
                raise StoreOpenError(
                    f"cannot open {self.url}: its schema has steps this version does not know "
                    f"({', '.join(unknown)}); it was written by a newer sessiontree")
            for name, step in MIGRATIONS:
                if name not in applied:
                    step(conn)
                    conn.execute("INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)",
                                 (name, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    @staticmethod
    def _applied(conn: sqlite3.Connection) -> list[str] | None:
        exists = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").fetchone()
        if not exists:
            return None
        return [row[0] for row in conn.execute("SELECT name FROM schema_migrations ORDER BY rowid")]

    def applied_migrations(self) -> list[str]:
        """Names of the schema steps recorded in this database, in order."""
        with self._lock:
            return self._applied(self._connection()) or []

    def _connection(self) -> sqlite3.Connection:
        if self._closed or self._conn is None:
            raise StorageError(f"{self.url} is closed")
        if os.getpid() != self._pid:
            # A connection must not cross fork(): leave the parent's alone and open our own.
            self._conn = self._connect()
            self._pid = os.getpid()
        return self._conn

    @contextmanager
    def _write(self, what: str) -> Iterator[sqlite3.Connection]:
        """One write transaction; sqlite errors become StorageError, everything rolls back."""
        with self._lock:
            conn = self._connection()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StorageError(f"{what}: cannot start a write transaction on {self.url}: {exc}") from exc
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                rollback_error: sqlite3.Error | None = None
                if conn.in_transaction:
                    try:
                        conn.execute("ROLLBACK")
                    except sqlite3.Error as err:
                        rollback_error = err
                if isinstance(exc, (sqlite3.Error, UnicodeError)):
                    message = f"{what} failed on {self.url}: {exc}"
                    if rollback_error is not None:
                        message += f"; the rollback failed too: {rollback_error}"
                    error = StorageError(message)
                    error.rollback_error = rollback_error
                    raise error from exc
                raise

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: one consistent snapshot across several SELECTs."""
        with self._lock:
            conn = self._connection()
            try:
                conn.execute("BEGIN")
                try:
                    yield conn
                finally:
                    if conn.in_transaction:
                        conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StorageError(f"reading {self.url} failed: {exc}") from exc

    @staticmethod
    def _next_updated_at(conn: sqlite3.Connection) -> int:
        # Strictly increasing even within one microsecond or after a clock step
        # back, so "most recent" is never a tie.
        last = conn.execute("SELECT max(updated_at) FROM sessions").fetchone()[0]
        now = time.time_ns() // 1000
        return now if last is None or now > last else last + 1

    # -- writes ---------------------------------------------------------------------------

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
                                                   Sequence[bytes | None] | None]]) -> int:
        """Store several new sessions in a single transaction (bulk import).

        Args:
            sessions: ``(header, entries, raw)`` triples as for :meth:`create`.

        Returns:
            The number of sessions stored.

        Raises:
            SessionExistsError: one of the ids is already stored (nothing is stored).
            InvalidSessionError: a header or entry is invalid (nothing is stored).
            StorageError: the write failed; nothing was stored.
        """
        prepared = []
        for header, entries, raw in sessions:
            session_id = check_header(header)
            prepared.append((session_id, header, jsonio.dumps(header), entries, encode_entries(entries, raw)))
        with self._write("create") as conn:
            seen: set[str] = set()
            for session_id, header, header_raw, entries, texts in prepared:
                key = _db(session_id)
                if session_id in seen or conn.execute("SELECT 1 FROM sessions WHERE id = ?", (key,)).fetchone():
                    raise SessionExistsError(session_id)
                seen.add(session_id)
                info = InfoAccumulator()
                conn.execute(
                    "INSERT INTO sessions (id, header_json, created_at, cwd, parent_session_id, classified,"
                    " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (key, header_raw, *_header_columns(header), self._next_updated_at(conn)))
                self._insert_entries(conn, session_id, 0, entries, texts, info)
                conn.execute(f"UPDATE sessions SET entry_count = ?, {_STATE_ASSIGN} WHERE id = ?",
                             (len(texts), *_state_values(info), key))
        return len(prepared)

    def append(self, session_id: str, entries: Sequence[dict[str, Any]]) -> None:
        """Append entries in one transaction, updating the listing state from them only.

        Raises:
            SessionNotFoundError: no such id.
            InvalidSessionError: an entry is invalid or reuses an id of the session.
            StorageError: the write failed; nothing was appended.
        """
        texts = encode_entries(entries)
        key = _db(session_id)
        with self._write("append") as conn:
            row = conn.execute(f"SELECT entry_count, {_STATE_SQL} FROM sessions WHERE id = ?", (key,)).fetchone()
            if row is None:
                raise SessionNotFoundError(session_id, self.url)
            if not texts:
                return
            info = _state_from_row(row[1:])
            # max(seq) + 1 rather than entry_count: robust even if rows were removed by hand.
            start = conn.execute("SELECT coalesce(max(seq) + 1, 0) FROM entries WHERE session_id = ?",
                                 (key,)).fetchone()[0]
            self._insert_entries(conn, session_id, start, entries, texts, info)
            conn.execute(
                f"UPDATE sessions SET entry_count = ?, updated_at = ?, {_STATE_ASSIGN} WHERE id = ?",
                (row[0] + len(texts), self._next_updated_at(conn), *_state_values(info), key))

    def _insert_entries(self, conn: sqlite3.Connection, session_id: str, start: int,
                        entries: Sequence[dict[str, Any]], texts: list[bytes], info: InfoAccumulator) -> None:
        key = _db(session_id)
        rows = []
        text_rows = []
        for offset, (entry, text) in enumerate(zip(entries, texts)):
            seq = start + offset
            listed = info.add(entry)
            if listed is not None:
                text_rows.append((key, seq, _db(listed)))
            rows.append((key, seq, _db(entry["id"]), _db(entry["parentId"]), _db(entry["type"]),
                         _db(entry["timestamp"]), text))
        info.texts.clear()  # they are in message_texts rows; the accumulator need not hold them
        try:
            _insert_entry_rows(conn, rows)
        except sqlite3.IntegrityError as exc:
            if "entries.session_id, entries.id" in str(exc):
                raise InvalidSessionError(f"an entry id is already used in session {session_id}") from exc
            raise
        _insert_text_rows(conn, text_rows)

    def replace_header(self, session_id: str, header: dict[str, Any]) -> None:
        """Replace the header (same id) and its derived columns in one transaction.

        Raises:
            SessionNotFoundError: no such id.
            InvalidSessionError: the header is invalid or has another id.
            StorageError: the write failed; nothing changed.
        """
        new_id = check_header(header)
        if new_id != session_id:
            raise InvalidSessionError(f"header id {new_id!r} does not match session {session_id!r}")
        header_raw = jsonio.dumps(header)
        with self._write("replace header") as conn:
            updated_at = self._next_updated_at(conn)
            cursor = conn.execute(
                "UPDATE sessions SET header_json = ?, created_at = ?, cwd = ?, parent_session_id = ?,"
                " classified = ?, updated_at = ? WHERE id = ?",
                (header_raw, *_header_columns(header), updated_at, _db(session_id)))
            if cursor.rowcount == 0:
                raise SessionNotFoundError(session_id, self.url)

    def delete(self, session_id: str) -> None:
        """Delete the session's rows in one transaction; a missing id does nothing.

        Raises:
            StorageError: the delete failed; nothing changed.
        """
        key = _db(session_id)
        with self._write("delete") as conn:
            # Explicit rather than relying on ON DELETE CASCADE, which only works
            # on connections that enabled foreign keys.
            conn.execute("DELETE FROM message_texts WHERE session_id = ?", (key,))
            conn.execute("DELETE FROM entries WHERE session_id = ?", (key,))
            conn.execute("DELETE FROM sessions WHERE id = ?", (key,))

    def rebuild_metadata(self, session_id: str | None = None) -> int:
        """Recompute every derived column and ``message_texts`` from the entries.

        Proves that entries (and headers) are the only truth; also repairs
        drift. ``updated_at`` is kept: a repair is not activity.

        Args:
            session_id: one session, or ``None`` for all.

        Returns:
            The number of sessions rebuilt.

        Raises:
            InvalidSessionError: a stored record is not valid JSON.
            StorageError: the write failed; nothing changed.
        """
        with self._write("rebuild metadata") as conn:
            if session_id is None:
                keys = [row[0] for row in conn.execute("SELECT id FROM sessions")]
            else:
                keys = [row[0] for row in conn.execute("SELECT id FROM sessions WHERE id = ?", (_db(session_id),))]
            for key in keys:
                header_raw = conn.execute("SELECT header_json FROM sessions WHERE id = ?", (key,)).fetchone()[0]
                header = self._parse_record(header_raw, key, 1)
                info = InfoAccumulator()
                text_rows = []
                count = 0
                for seq, text in conn.execute("SELECT seq, json FROM entries WHERE session_id = ? ORDER BY seq",
                                              (key,)).fetchall():
                    entry = self._parse_record(text, key, seq + 2)
                    listed = info.add(entry)
                    if listed is not None:
                        text_rows.append((key, seq, _db(listed)))
                    count += 1
                conn.execute("DELETE FROM message_texts WHERE session_id = ?", (key,))
                _insert_text_rows(conn, text_rows)
                conn.execute(
                    "UPDATE sessions SET created_at = ?, cwd = ?, parent_session_id = ?, classified = ?,"
                    f" entry_count = ?, {_STATE_ASSIGN} WHERE id = ?",
                    (*_header_columns(header), count, *_state_values(info), key))
            return len(keys)

    # -- reads ----------------------------------------------------------------------------

    def _parse_record(self, text: Any, key: Any, line: int) -> dict[str, Any]:
        if isinstance(text, str):
            text = text.encode("utf-8", "surrogatepass")
        try:
            record = jsonio.loads(text)
        except ValueError as exc:
            raise InvalidSessionError(f"stored record is not valid JSON ({exc})", f"{self.url}#{_py(key)}",
                                      line) from exc
        if not isinstance(record, dict):
            raise InvalidSessionError("stored record is not a JSON object", f"{self.url}#{_py(key)}", line)
        return record

    def read(self, session_id: str) -> ParsedSession:
        """Same as :meth:`load`: stored sessions are always format 4, loading writes nothing."""
        return self.load(session_id)

    def load(self, session_id: str) -> ParsedSession:
        """The session's header and entries, read in one snapshot.

        Raises:
            SessionNotFoundError: no such id.
            InvalidSessionError: a stored record is not a valid entry.
            StorageError: the database could not be read.
        """
        key = _db(session_id)
        with self._read() as conn:
            row = conn.execute("SELECT header_json FROM sessions WHERE id = ?", (key,)).fetchone()
            if row is None:
                raise SessionNotFoundError(session_id, self.url)
            texts = [text for (text,) in conn.execute(
                "SELECT json FROM entries WHERE session_id = ? ORDER BY seq", (key,))]
        with gc_paused():  # see sessiontree._gc: ~45% of a 100,000-entry load otherwise
            return self._parsed(session_id, key, row[0], texts)

    def _parsed(self, session_id: str, key: Any, header_text: bytes | str,
                texts: list[bytes | str]) -> ParsedSession:
        header_raw = header_text if isinstance(header_text, bytes) else header_text.encode("utf-8", "surrogatepass")
        header = self._parse_record(header_raw, key, 1)
        entries = []
        raw: list[bytes | None] = []
        where = f"{self.url}#{session_id}"
        for index, text in enumerate(texts):
            entry = self._parse_record(text, key, index + 2)
            try:
                validate_entry(entry)
            except InvalidSessionError as exc:
                raise InvalidSessionError(exc.reason, where, index + 2) from None
            entries.append(entry)
            raw.append(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
        return ParsedSession(header=header, entries=entries, raw=raw, header_raw=header_raw,
                             source_version=CURRENT_VERSION, upgraded=False,
                             lines=list(range(2, len(raw) + 2)), path=None)

    def exists(self, session_id: str) -> bool:
        """Whether the id is stored."""
        with self._read() as conn:
            return conn.execute("SELECT 1 FROM sessions WHERE id = ?", (_db(session_id),)).fetchone() is not None

    def session_ids(self) -> list[str]:
        """Every stored id, oldest row first."""
        with self._read() as conn:
            return [_py(row[0]) for row in conn.execute("SELECT id FROM sessions ORDER BY rowid")]

    def location(self, session_id: str) -> str | None:
        """Always ``None``: sessions live in the database, not in files."""
        return None

    def list_sessions(self, *, cwd: str | None = None, include_internal: bool = False,
                      on_progress: ProgressCallback | None = None,
                      cancel: CancelEvent | None = None) -> list[SessionInfo]:
        """Listing rows from the ``sessions`` table alone, newest ``modified`` first.

        ``all_messages_text`` of a row is read from ``message_texts`` on first access.

        Raises:
            ListingCancelledError: ``cancel`` was set before or during the listing.
            StorageError: the database could not be read.
        """
        wanted = resolve_cwd(cwd) if cwd is not None else None
        if cancel is not None:
            Progress(0, None, cancel)  # cancelled before starting: do not even query
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT id, header_json, classified, cwd, updated_at, {_STATE_SQL} FROM sessions"
                " ORDER BY rowid").fetchall()
        progress = Progress(len(rows), on_progress, cancel)
        infos: list[SessionInfo] = []
        loads = jsonio.loads
        for row in rows:
            if (include_internal or not row[2]) and cwd_matches(_py(row[3]), wanted):
                session_id = _py(row[0])
                try:
                    header = loads(row[1])
                except ValueError:
                    header = None  # damaged by hand: the session cannot be loaded, so it is not listed
                if isinstance(header, dict) and isinstance(header.get("id"), str):
                    infos.append(_state_from_row(row[5:]).to_info(
                        header, session_id, fallback_mtime=row[4] / 1e6,
                        text_loader=functools.partial(self._load_text, session_id)))
            progress.step()
        return sort_listing(infos)

    def _load_text(self, session_id: str) -> str:
        with self._read() as conn:
            return " ".join(_py(text) for (text,) in conn.execute(
                "SELECT text FROM message_texts WHERE session_id = ? ORDER BY seq", (_db(session_id),)))

    def find_most_recent(self, cwd: str | None = None, include_internal: bool = False) -> str | None:
        """Id of the session written last (``updated_at``), optionally only for ``cwd``."""
        wanted = resolve_cwd(cwd) if cwd is not None else None
        with self._read() as conn:
            cursor = conn.execute("SELECT id, classified, cwd FROM sessions ORDER BY updated_at DESC")
            try:
                for session_id, classified, session_cwd in cursor:
                    if classified and not include_internal:
                        continue
                    if cwd_matches(_py(session_cwd), wanted):
                        return _py(session_id)
            finally:
                cursor.close()
        return None

    def close(self) -> None:
        """Close the connection. Idempotent; later calls raise StorageError."""
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
            if conn is not None and os.getpid() == self._pid:
                conn.close()


# Module-level so tests can inject a failure in the middle of a write.
def _insert_entry_rows(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    conn.executemany(
        "INSERT INTO entries (session_id, seq, id, parent_id, type, timestamp, json) VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows)


def _insert_text_rows(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    if rows:
        conn.executemany("INSERT INTO message_texts (session_id, seq, text) VALUES (?, ?, ?)", rows)
