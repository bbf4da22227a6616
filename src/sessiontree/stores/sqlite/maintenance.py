"""The derived data of a SQLite store and its checks: settling, rebuilding, verifying,
and the search and usage queries.

:class:`SqliteMaintenance` holds the ``DerivedData`` capability: ``settle_derived``
(deferred work finished in bounded transactions), ``settle_search_tail``,
``reindex`` (every derived column and table rebuilt from the entries), ``search``
(answered by :mod:`.search`) and ``usage`` (answered by :mod:`.usage`, or from whole
sessions on a database without the ledger); and ``verify``, the check of the whole
store (``sessiontree check --store``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from sessiontree.core.listing import InfoAccumulator, first_message_prefix
from sessiontree.core.usage import UsageQuery, UsageRows, aggregate
from sessiontree.errors import SessionError
from sessiontree.stores.base import ProgressCallback, StoreProblem, TimeBound
from sessiontree.stores.listing import cwd_matches, resolve_cwd
from sessiontree.stores.sqlite import blobs, searchquery, toolcalls
from sessiontree.stores.sqlite import search as search_index
from sessiontree.stores.sqlite.connection import SqliteDatabase, step_names
from sessiontree.stores.sqlite.derived import (
    STATE_ASSIGN,
    STATE_COLUMNS,
    STATE_SELECT,
    SqliteTransactions,
    from_db,
    header_columns,
    record_bytes,
    record_crc,
    state_values,
    tail_texts,
    to_db,
)
from sessiontree.stores.sqlite.reads import SqliteReads
from sessiontree.stores.sqlite.schema import DERIVED_INDEXES
from sessiontree.stores.sqlite.usage import merge_usage, pending_usage, query_usage
from sessiontree.stores.sqlite.writes import _insert_text_rows
from sessiontree.stores.verify import StoredRecord, StoredSession, verify_stored_session

__all__ = ["SETTLE_BUDGET", "SqliteMaintenance"]

#: Entries an index settles per write transaction in :meth:`SqliteMaintenance.settle_derived`
#: (for the search index a fraction of a second of FTS5 work: the longest a settle
#: holds the store's write lock, which other writers wait for within their busy timeout).
SETTLE_BUDGET = 2048



#: The tables whose rows belong to a session by their ``session_id`` column (``check --store``
#: reports rows of a session that is not stored).
_SESSION_TABLES = ("entries", "message_texts", "search_entries", "search_merged", "usage_ledger", "usage_merged",
                   "entry_blobs", "tool_calls")

class SqliteTwin(SqliteTransactions, Protocol):
    """What :class:`SqliteMaintenance` asks of a second, writable store on the same file."""

    @property
    def db(self) -> SqliteDatabase:
        """Its open database."""
        ...

    def close(self) -> None:
        """Close it."""
        ...


class _Answered(Exception):  # a control-flow signal, not an error
    """Carries a usage answer out of a write transaction that must roll back."""

    def __init__(self, rows: UsageRows) -> None:
        super().__init__("usage answered")
        self.rows = rows


class SqliteMaintenance:
    """The ``DerivedData`` of :class:`~sessiontree.stores.sqlite.store.SqliteStore`
    (:class:`sessiontree.stores.base.DerivedData`) and its ``verify``, over the store's
    :class:`~.connection.SqliteDatabase`. It holds the store's
    :class:`~sessiontree.stores.sqlite.reads.SqliteReads` part (a rebuild and a check parse
    stored records, and ``usage`` without a ledger reads whole sessions), the store's
    public face as the index modules' :class:`~.derived.SqliteTransactions` (a search scans
    through its public reads), and ``twin``: a second, writable store on the same file,
    busy the given seconds (:meth:`settle_search_tail` of a read-only store; it raises
    ``StoreOpenError`` when the file cannot be opened for writing)."""

    def __init__(self, db: SqliteDatabase, reads: SqliteReads, store: searchquery.SearchedStore,
                 twin: Callable[[float], SqliteTwin]) -> None:
        self.db = db
        self.reads = reads
        self.store = store
        self.twin = twin

    def settle_derived(self, *, lock_timeout: float | None = None, pending: int | None = None,
                       on_progress: Callable[[int, int], None] | None = None) -> int:
        """Finish the derived work writes deferred (the search text left pending, see
        :mod:`.search`), in write transactions of about :data:`SETTLE_BUDGET`
        entries each, so that no transaction holds the write lock for long and an
        interruption keeps what was done. Bounded by the work pending when it
        starts: entries other writers add meanwhile may stay pending (a settle
        must not chase a concurrent import). See :meth:`SessionStore.settle_derived`.

        Args:
            lock_timeout: seconds each transaction waits for another writer's
                lock; ``None``: the store's busy timeout.
            pending: the entries the indexes have left to do, when the caller has
                just counted them (``DerivedIndex.pending``); ``None``: counted here.
            on_progress: called after each transaction with ``(entries settled so
                far, entries pending at the start)`` (a progress bar's counts).

        Returns:
            The number of entries processed.

        Raises:
            StorageError: the store is read-only, a write failed or the lock
                stayed held (the transactions before it are kept; what is left
                stays pending).
        """
        if pending is None:
            with self.db.read_transaction() as conn:
                # Each transaction settles every index by a budget: the longest tail sets the rounds.
                pending = max(index.pending(conn) for index in DERIVED_INDEXES) if self.db.has_schema(conn) else 0
        total = 0
        for _ in range(pending // SETTLE_BUDGET + 1):
            with self.db.busy_timeout(lock_timeout), self.db.write_transaction("settle derived data") as conn:
                done = [index.settle(conn, SETTLE_BUDGET) for index in DERIVED_INDEXES]
            total += max(done)  # the indexes settle the same entries, each for itself
            if on_progress is not None:
                on_progress(min(total, pending), pending)
            if all(count < SETTLE_BUDGET for count in done):
                break
        return total

    def reindex(self, session_id: str | None = None) -> int:
        """Recompute all derived data from the entries: the listing columns,
        ``message_texts``, ``tool_calls`` and every :data:`DERIVED_INDEXES` table.

        The one rebuild path (docs/stores.md, "Derived data"): proves that entries
        and headers are the only truth, and repairs drift. ``updated_at`` is kept:
        a repair is not activity. One transaction: a failure changes nothing.

        Args:
            session_id: one session, or ``None`` for all.

        Returns:
            The number of sessions rebuilt.

        Raises:
            InvalidSessionError: a stored record is not valid JSON.
            StorageError: the write failed; nothing changed.
        """
        with self.db.write_transaction("reindex") as conn:
            if session_id is None:
                keys = [row[0] for row in conn.execute("SELECT id FROM sessions")]
            else:
                keys = [row[0] for row in conn.execute("SELECT id FROM sessions WHERE id = ?", (to_db(session_id),))]
            for key in keys:
                header_raw = conn.execute("SELECT header_json FROM sessions WHERE id = ?", (key,)).fetchone()[0]
                header = self.reads.parse_record(header_raw, key, 1)
                info = InfoAccumulator()
                text_rows = []
                call_rows: list[tuple[Any, ...]] = []
                rows: list[tuple[int, dict[str, Any], bytes]] = []
                for seq, text in conn.execute("SELECT seq, json FROM entries WHERE session_id = ? ORDER BY seq",
                                              (key,)).fetchall():
                    entry = self.reads.parse_record(text, key, seq + 2)
                    listed = info.add(entry)
                    if listed is not None:
                        text_rows.append((key, seq, to_db(listed)))
                    if entry.get("type") == "message":
                        call_rows.extend(toolcalls.rows_of(key, seq, entry.get("message")))
                    rows.append((seq, entry, record_bytes(text)))
                conn.execute("DELETE FROM message_texts WHERE session_id = ?", (key,))
                _insert_text_rows(conn, text_rows)
                conn.execute("DELETE FROM tool_calls WHERE session_id = ?", (key,))
                toolcalls.insert_rows(conn, call_rows)
                conn.execute(
                    "UPDATE sessions SET created_at = ?, cwd = ?, parent_session_id = ?, classified = ?,"
                    f" entry_count = ?, texts_from = NULL, {STATE_ASSIGN} WHERE id = ?",
                    (*header_columns(header), len(rows), *state_values(info), key))
                for index in DERIVED_INDEXES:
                    index.remove(conn, key)
                    index.add(conn, key, rows)
            if session_id is None and self.db.has_blobs:
                # Blobs no entry names (only a hand edit leaves any: deletes collect theirs).
                conn.execute("DELETE FROM blobs WHERE sha256 NOT IN (SELECT sha256 FROM entry_blobs)")
            for index in DERIVED_INDEXES:
                # Optional hook: an index with store-wide sums rebuilds them after a full reindex.
                reindexed = getattr(index, "reindexed", None)
                if reindexed is not None:
                    reindexed(conn, session_id is None)
            return len(keys)

    def usage(self, query: UsageQuery | None = None) -> UsageRows:
        """Billed usage from the usage ledger alone (:mod:`.usage`): no
        entry is read. A database without the ledger (an older schema opened
        read-only) is answered from its entries instead. See :meth:`SessionStore.usage`.

        The ledger's pending tail (docs/decisions/bulk-settle.md) is never left
        out: a writable store settles it first; a read-only one answers from the
        ledger as a settle would leave it, computed in a write transaction of a
        second handle that is rolled back (the file is unchanged), or settles it
        for good when it is longer than the search's ``MAX_PENDING``, as a
        search does. When neither can write (permissions, another writer holding
        the lock past ``SETTLE_TIMEOUT``), the entries answer.

        Raises:
            StorageError: the database could not be read.
        """
        query = query or UsageQuery()
        wanted = resolve_cwd(query.cwd) if query.cwd is not None else None

        def answer(conn: Any) -> UsageRows:
            return UsageRows(query_usage(conn, query, lambda cwd: cwd_matches(cwd, wanted)))

        with self.db.read_transaction() as conn:
            if not self.db.has_schema(conn):
                return UsageRows()
            has_ledger = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'usage_calls'").fetchone()
            pending = pending_usage(conn) if has_ledger else 0
            if has_ledger and not pending:
                return answer(conn)
        if has_ledger:
            settled = self._usage_with_tail(pending, answer)
            if settled is not None:
                return settled
            with self.db.read_transaction() as conn:
                # Settled for good above, unless another writer appended since: then the entries.
                if pending_usage(conn) == 0:
                    return answer(conn)
        sessions = ((parsed.header, parsed.entries) for parsed in map(self.reads.read, self.reads.session_ids()))
        return UsageRows(aggregate(sessions, query, lambda cwd: cwd_matches(cwd, wanted)))

    def _usage_with_tail(self, pending: int, answer: Callable[[Any], UsageRows]) -> UsageRows | None:
        """:meth:`usage` with ``pending`` ledger records left: settle them and commit (a
        writable store; a read-only one whose tail is longer than ``MAX_PENDING``) and
        return ``None`` (the caller reads the settled ledger), or settle them in a
        transaction rolled back once ``answer`` ran on it and return that answer. Only
        on a current schema, so a reading command never migrates a store; ``None``
        without writing anything when it cannot write."""
        if self.db.readonly and self.db.path == ":memory:":
            return None
        try:
            if self.db.applied_migrations() != step_names():
                return None
            twin = None if not self.db.readonly else self.twin(min(self.db.timeout, search_index.SETTLE_TIMEOUT))
        except (SessionError, OSError):
            return None
        writer = self.db if twin is None else twin.db
        try:
            # A writable store waits its own busy timeout; a twin opened for a read, briefly.
            wait = None if twin is None else min(self.db.timeout, search_index.SETTLE_TIMEOUT)
            keep = twin is None or pending > search_index.MAX_PENDING
            with writer.busy_timeout(wait), writer.write_transaction("settle usage") as conn:
                merge_usage(conn)
                if not keep:
                    raise _Answered(answer(conn))  # rolls the settle back: the file is unchanged
            return None
        except _Answered as done:
            return done.rows
        except (SessionError, OSError):
            return None
        finally:
            if twin is not None:
                twin.close()

    def search(self, query: str, *, cwd: str | None = None, roles: Iterable[str] | None = None,
               since: TimeBound | None = None, until: TimeBound | None = None, session: str | None = None,
               limit: int | None = 50) -> list[Any]:
        """Full-text search through the FTS5 index (:mod:`.search`). See
        :meth:`SessionStore.search` for arguments, results and errors."""
        return searchquery.search_store(self.store, query, cwd=cwd, roles=roles, since=since, until=until,
                                         session=session, limit=limit)

    def settle_search_tail(self, on_merge: Callable[[int], None] | None = None) -> int:
        """Before a search by a front end: merge the search index's pending tail when it
        holds more than :data:`~sessiontree.stores.sqlite.search.MAX_PENDING` records
        (see :meth:`SessionStore.settle_search_tail`), so this search and the next
        ones read the index instead of scanning the tail.

        A store opened read-only (as reading commands open it) is merged through a
        second, writable handle on the same file; only when the file's schema is
        current, so a reading command never migrates a store. Derived data only:
        when the file cannot be written (permissions, another writer holding the
        lock) nothing happens and the search scans the tail, with the same hits.
        The merge waits at most :data:`~sessiontree.stores.sqlite.search.SETTLE_TIMEOUT`
        seconds for another writer's lock. A ``:memory:`` database has no other
        handle and merges nothing here.

        Args:
            on_merge: called with the number of pending records just before a merge.

        Returns:
            The number of records merged.
        """
        if self.db.path == ":memory:":
            return 0
        try:
            if self.db.applied_migrations() != step_names():
                return 0  # an older schema: a writable open would migrate it
            with self.db.read_transaction() as conn:
                pending = search_index.pending_records(conn) if self.db.has_schema(conn) else 0
            if pending <= search_index.MAX_PENDING:
                return 0
            if on_merge is not None:
                on_merge(pending)
            if not self.db.readonly:
                return search_index.settle_if_due(self.store, pending)
            # A short busy timeout for opening it too: the search must not wait out another
            # writer's long transaction (settle_if_due gives up as quickly).
            writer = self.twin(min(self.db.timeout, search_index.SETTLE_TIMEOUT))
            try:
                return search_index.settle_if_due(writer, pending)
            finally:
                writer.close()
        except (SessionError, OSError):
            return 0  # the search scans the tail instead: same hits

    # -- verification ---------------------------------------------------------------------

    def verify(self, on_progress: ProgressCallback | None = None) -> list[StoreProblem]:
        """Check the whole database without changing it (``sessiontree check --store``).

        In one read snapshot: SQLite's ``PRAGMA integrity_check``; then for every
        session, each record's CRC-32 against the one recorded at write time,
        that each record parses and is a valid header or entry, that an entry's
        copied columns (id, parentId, type, timestamp) match its JSON, and that
        the listing columns, ``entry_count``, header columns,
        ``message_texts`` and ``tool_calls`` equal a rebuild from the records
        (:meth:`reindex` repairs drift; a hash mismatch can only be
        repaired by re-importing the session from its original file).

        Args:
            on_progress: called ``(checked, total)`` once per session.

        Returns:
            The problems, integrity first, then by session in store order.

        Raises:
            StorageError: the database cannot be read at all (e.g. closed).
        """
        problems: list[StoreProblem] = []
        with self.db.lock:
            conn = self.db.connection()
            conn.execute("BEGIN")
            try:
                try:
                    messages = [row[0] for row in conn.execute("PRAGMA integrity_check")]
                except sqlite3.DatabaseError as exc:
                    messages = [str(exc)]
                if messages != ["ok"]:
                    problems.extend(StoreProblem("integrity", f"SQLite integrity check: {message}")
                                    for message in messages)
                if not self.db.has_schema(conn):
                    return problems
                try:
                    keys = [row[0] for row in conn.execute("SELECT id FROM sessions ORDER BY rowid")]
                except sqlite3.DatabaseError as exc:
                    problems.append(StoreProblem("integrity", f"the sessions table cannot be read: {exc}"))
                    return problems
                for done, key in enumerate(keys, 1):
                    try:
                        problems.extend(self._verify_session(conn, key))
                    except sqlite3.DatabaseError as exc:
                        problems.append(StoreProblem("integrity", f"reading the session failed: {exc}",
                                                     session_id=from_db(key), path=f"{self.db.url}#{from_db(key)}"))
                    if on_progress is not None:
                        on_progress(done, len(keys))
                problems.extend(self._verify_store_wide(conn))
            finally:
                if conn.in_transaction:
                    try:
                        conn.execute("COMMIT")  # a read transaction: nothing to keep
                    except sqlite3.Error:
                        if conn.in_transaction:
                            conn.execute("ROLLBACK")
        return problems

    def _verify_store_wide(self, conn: sqlite3.Connection) -> list[StoreProblem]:
        """What no single session shows: rows of a session that does not exist
        (``orphan-rows``), and the store-wide sums of the derived indexes against a
        recount (``metadata-drift``; :meth:`reindex` repairs it)."""
        problems = []
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for table in _SESSION_TABLES:
            if table not in tables:
                continue  # an older schema opened read-only
            count, example = conn.execute(
                f"SELECT count(*), min(session_id) FROM {table} WHERE session_id NOT IN (SELECT id FROM sessions)"
            ).fetchone()
            if count:
                problems.append(StoreProblem(
                    "orphan-rows", f"{table}: {count} rows belong to no stored session (such as "
                    f"{from_db(example)!r}); reindex does not remove them"))
        if self.db.has_blobs:
            count, size = conn.execute("SELECT count(*), coalesce(sum(size), 0) FROM blobs WHERE sha256 NOT IN"
                                       " (SELECT sha256 FROM entry_blobs)").fetchone()
            if count:
                problems.append(StoreProblem(
                    "orphan-rows", f"blobs: {count} blobs ({size} bytes) are named by no entry; a full"
                    " sessiontree reindex removes them", severity="warning"))
        drift = []
        for index in DERIVED_INDEXES:
            store_drift = getattr(index, "store_drift", None)
            if store_drift is not None:
                drift.extend(store_drift(conn))
        if drift:
            problems.append(StoreProblem("metadata-drift", "derived data differs from a rebuild: " + "; ".join(drift)
                                         + " (sessiontree reindex repairs it)"))
        return problems

    def _verify_session(self, conn: sqlite3.Connection, key: Any) -> list[StoreProblem]:
        """The problems of the session stored under ``key`` (:func:`~sessiontree.stores.verify.verify_stored_session`
        on its rows, read in the caller's snapshot)."""
        session_id = from_db(key)
        has_crc = self.db.has_crc
        row = conn.execute(
            f"SELECT header_json, {'header_crc' if has_crc else 'NULL'}, created_at, cwd, parent_session_id,"
            f" classified, entry_count, {STATE_SELECT} FROM sessions WHERE id = ?", (key,)).fetchone()

        def state_drift(info: InfoAccumulator) -> list[str]:
            stored = [from_db(value) for value in row[7:]]
            # A row written before 0.2.0 keeps the whole first message; the listing
            # shows the same prefix of it (docs/listing.md, "First message"): no drift.
            first = STATE_COLUMNS.index(("firstMessage", "first_message"))
            if isinstance(stored[first], str):
                stored[first] = first_message_prefix(stored[first])
            return [f"{column} {value!r} (rebuilt: {from_db(rebuilt)!r})"
                    for (_, column), value, rebuilt in zip(STATE_COLUMNS, stored, state_values(info), strict=True)
                    if value != from_db(rebuilt)]

        def stored_texts() -> list[tuple[int, str]]:
            # The pending tail's texts are derived from the entries, as a listing reads
            # them; a stored row in the tail would appear twice, so it is drift.
            texts = [(seq, from_db(text)) for seq, text in conn.execute(
                "SELECT seq, text FROM message_texts WHERE session_id = ? ORDER BY seq", (key,))]
            if self.db.has_texts_tail:
                start = conn.execute("SELECT texts_from FROM sessions WHERE id = ?", (key,)).fetchone()[0]
                if start is not None:
                    texts = sorted(texts + tail_texts(conn, key, start), key=lambda item: item[0])
            return texts

        stored = StoredSession(
            header_text=record_bytes(row[0]),
            header_intact=not has_crc or (row[1] is not None and record_crc(row[0]) == row[1]),
            entry_count=row[6],
            header_columns=[from_db(value) for value in row[2:6]],
            parse=lambda text, line: self.reads.parse_record(text, key, line),
            copied_columns=lambda entry: (entry.get("id"), entry.get("parentId"), entry.get("type"),
                                          entry.get("timestamp")),
            rebuilt_header_columns=lambda header: [from_db(value) for value in header_columns(header)],
            state_drift=state_drift,
            stored_texts=stored_texts,
            derived=[*(index.checker(conn, key) for index in DERIVED_INDEXES if hasattr(index, "checker")),
                     *([toolcalls.ToolCallsCheck(conn, key)] if self.db.has_tool_calls else [])])
        records = (
            StoredRecord(seq, from_db(entry_key), (from_db(entry_key), from_db(parent), from_db(kind), from_db(stamp)),
                         record_bytes(text), not has_crc or (crc is not None and record_crc(text) == crc))
            for seq, entry_key, parent, kind, stamp, text, crc in conn.execute(
                f"SELECT seq, id, parent_id, type, timestamp, json, {'crc' if has_crc else 'NULL'} FROM entries"
                " WHERE session_id = ? ORDER BY seq", (key,)))
        problems = verify_stored_session(session_id, f"{self.db.url}#{session_id}", stored, records)
        return problems + self._verify_blobs(conn, key)

    def _verify_blobs(self, conn: sqlite3.Connection, key: Any) -> list[StoreProblem]:
        """``hash-mismatch`` for each record of the session stored cut whose blob is
        missing, fails its CRC-32 or has another length than its splice, and for a
        splice naming no stored entry or an offset past the cut text's end."""
        if not self.db.has_blobs:
            return []
        session_id = from_db(key)
        where = f"{self.db.url}#{session_id}"
        splices = blobs.splices_of(conn, key)
        if not splices:
            return []
        lines = {seq: (line, from_db(entry_id), size) for line, (seq, entry_id, size) in enumerate(conn.execute(
            "SELECT seq, id, length(json) FROM entries WHERE session_id = ? ORDER BY seq", (key,)), 2)}
        problems = []
        for seq, cuts in splices.items():
            line, entry_id, size = lines.get(seq, (None, None, 0))
            if line is None:
                problems.append(StoreProblem("orphan-rows", f"entry_blobs: splices of seq {seq}, which holds no"
                                             " entry", session_id=session_id, path=where))
                continue
            for offset, digest, length in cuts:
                if offset > size:
                    reason = f"its splice at offset {offset} lies past the stored text ({size} bytes)"
                elif blobs.read_blob(conn, digest, length) is None:
                    reason = f"its blob {digest.hex()} is missing or fails its checksum"
                else:
                    continue
                problems.append(StoreProblem("hash-mismatch", f"entry {entry_id}: {reason}; re-import the session"
                                             " from its original file", session_id=session_id, line=line,
                                             entry_id=entry_id, path=where))
        return problems
