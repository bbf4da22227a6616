"""The derived data of a PostgreSQL store and its checks: rebuilding, verifying, and
the search and usage queries.

:class:`PostgresMaintenance` holds the ``DerivedData`` capability: ``reindex`` (every
derived column and table rebuilt from the entries, after each derived index has fixed
its own schema), ``search`` (answered by :mod:`.search`) and ``usage`` (answered by
:mod:`.usage`, or from whole sessions on a database without the ledger); and ``verify``,
the check of the whole store (``sessiontree check --store``). Writes keep the derived
data current, so there is nothing to settle (``settle_derived`` is
:class:`~sessiontree.stores.fallbacks.StoreBase`'s).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from sessiontree.core.listing import InfoAccumulator, first_message_prefix
from sessiontree.core.usage import UsageQuery, UsageRows, aggregate
from sessiontree.format import jsonio
from sessiontree.stores.base import ProgressCallback, StoreProblem, TimeBound
from sessiontree.stores.listing import cwd_matches, resolve_cwd
from sessiontree.stores.postgres import search as search_index
from sessiontree.stores.postgres.connection import MIGRATION_LOCK, PostgresDatabase
from sessiontree.stores.postgres.derived import (
    PostgresReads,
    header_columns,
    is_exact_text,
    listing_values,
    record_crc,
    text_copy,
)
from sessiontree.stores.postgres.reads import PostgresStoreReads
from sessiontree.stores.postgres.schema import DERIVED_INDEXES
from sessiontree.stores.postgres.usage import ROLLUP_STEP, query_usage, rebuild_rollup
from sessiontree.stores.verify import StoredRecord, StoredSession, verify_stored_session

__all__ = ["PostgresMaintenance"]



#: The tables whose rows belong to a session by their ``session_id`` column (``check --store``
#: reports rows of a session that is not stored).
_SESSION_TABLES = ("entries", "message_texts", "search_entries", "usage_ledger")
#: The table of each derived index (by its ``name``), compared with a rebuild when present.
_INDEX_TABLES = {"search": "search_entries", "usage": "usage_ledger"}

class PostgresMaintenance:
    """The ``DerivedData`` of :class:`~sessiontree.stores.postgres.store.PostgresStore`
    (:class:`sessiontree.stores.base.DerivedData`) and its ``verify``, over ``db``. It
    uses the ``reads`` part (a rebuild and a check parse stored records, and ``usage``
    without a ledger reads whole sessions) and hands ``store``, the store's public face
    (:class:`~sessiontree.stores.postgres.derived.PostgresReads`), to the search module."""

    def __init__(self, db: PostgresDatabase, reads: PostgresStoreReads, store: PostgresReads) -> None:
        self.db = db
        self.reads = reads
        self.store = store

    def reindex(self, session_id: str | None = None) -> int:
        """Recompute all derived data from the entries: the listing state and its SQL
        copies, ``message_texts``, the header copies and every :data:`DERIVED_INDEXES` table.

        ``updated_at`` and ``write_seq`` are kept: a repair is not activity. One
        transaction: a failure changes nothing.

        Args:
            session_id: one session, or ``None`` for all.

        Returns:
            The number of sessions rebuilt.

        Raises:
            InvalidSessionError: a stored record is not valid JSON.
            StorageError: the write failed; nothing changed.
        """
        if session_id is not None and not is_exact_text(session_id):
            return 0
        if session_id is None:
            self._prepare_derived()
        with self.db.transaction("reindex", write=True) as conn:
            if session_id is None:
                ids = [row[0] for row in conn.execute("SELECT id FROM sessions ORDER BY rowno FOR UPDATE")]
            else:
                ids = [row[0] for row in conn.execute("SELECT id FROM sessions WHERE id = %s FOR UPDATE",
                                                      (session_id,))]
            for sid in ids:
                header_raw = conn.execute("SELECT header_json FROM sessions WHERE id = %s", (sid,)).fetchone()[0]
                header = self.reads.parse_record(header_raw, sid, 1)
                info = InfoAccumulator()
                text_rows = []
                rows: list[tuple[int, dict[str, Any], bytes]] = []
                with conn.cursor(binary=True) as cur:
                    for seq, text in cur.execute("SELECT seq, json FROM entries WHERE session_id = %s ORDER BY seq",
                                                 (sid,)).fetchall():
                        entry = self.reads.parse_record(text, sid, seq + 2)
                        listed = info.add(entry)
                        if listed is not None:
                            text_rows.append((sid, seq, listed.encode("utf-8", "surrogatepass")))
                        rows.append((seq, entry, bytes(text)))
                info.texts.clear()
                conn.execute("DELETE FROM message_texts WHERE session_id = %s", (sid,))
                if text_rows:
                    with conn.cursor() as cur:
                        cur.executemany("INSERT INTO message_texts (session_id, seq, text) VALUES (%s, %s, %s)",
                                        text_rows)
                conn.execute(
                    "UPDATE sessions SET created_at = %s, cwd = %s, parent_session_id = %s, classified = %s,"
                    " entry_count = %s, listing = %s, message_count = %s, modified_ms = %s, name = %s"
                    " WHERE id = %s",
                    (*header_columns(header), len(rows), *listing_values(info), sid))
                for index in DERIVED_INDEXES:
                    index.remove(conn, sid)
                    index.add(conn, sid, rows)
            if session_id is None and ROLLUP_STEP in self.db.applied_steps and not conn.execute(
                    "SELECT row_security_active('usage_rollup')").fetchone()[0]:
                # Keys left shared by deleted sessions become rolled again (docs/postgres.md).
                # Only where every row is visible: a member's settles above are already exact.
                rebuild_rollup(conn)
            return len(ids)

    def _prepare_derived(self) -> None:
        """Before a full reindex: let each derived index fix its own schema (the search
        index creates its trigram index if ``pg_trgm`` has become available), each in
        its own transaction under the schema lock."""
        if self.db.readonly:
            return  # the reindex itself refuses
        for index in DERIVED_INDEXES:
            prepare = getattr(index, "prepare", None)
            if prepare is None:
                continue
            with self.db.transaction(f"preparing the {index.name} index", write=False) as conn:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                prepare(conn)

    def search(self, query: str, *, cwd: str | None = None, roles: Iterable[str] | None = None,
               since: TimeBound | None = None, until: TimeBound | None = None, session: str | None = None,
               limit: int | None = 50) -> list[Any]:
        """Full-text search through the ``pg_trgm`` index, ranked by ``ts_rank``
        (:mod:`.search`): the same hits as every store.
        See :meth:`SessionStore.search <sessiontree.stores.base.SessionStore.search>` for
        arguments, results and errors."""
        return search_index.search_store(self.store, query, cwd=cwd, roles=roles, since=since, until=until,
                                         session=session, limit=limit)

    def usage(self, query: UsageQuery | None = None) -> UsageRows:
        """Billed usage summed with SQL aggregates over the usage ledger
        (:mod:`.usage`): no entry is read. A database without
        the ledger (an older schema opened read-only) is answered from its entries by
        :func:`~sessiontree.core.usage.aggregate`, with the same rows. See
        :meth:`SessionStore.usage <sessiontree.stores.base.SessionStore.usage>`.

        Args:
            query: a :class:`~sessiontree.core.usage.UsageQuery`, or ``None`` for everything.

        Returns:
            :class:`~sessiontree.core.usage.UsageRows` (``skipped`` is always 0: every
            stored session can be read).

        Raises:
            StorageError: the database could not be read.
        """
        query = query or UsageQuery()
        wanted = resolve_cwd(query.cwd) if query.cwd is not None else None
        if query.session_id is not None and not is_exact_text(query.session_id):
            return UsageRows()
        with self.db.transaction("usage", write=False, snapshot=True) as conn:
            if not self.db.has_schema(conn):
                return UsageRows()
            if "m004_usage_ledger" in self.db.applied_steps:
                return UsageRows(query_usage(conn, query, functools.partial(self._exact_cwds, conn),
                                             lambda cwd: cwd_matches(cwd, wanted),
                                             rollup=ROLLUP_STEP in self.db.applied_steps))
        sessions = ((parsed.header, parsed.entries) for parsed in map(self.reads.read, self.reads.session_ids()))
        return UsageRows(aggregate(sessions, query, lambda cwd: cwd_matches(cwd, wanted)))

    def _exact_cwds(self, conn: Any, session_ids: list[str]) -> dict[str, str | None]:
        """The header ``cwd`` (``None`` unless a string) of each session, exact: from the
        ``cwd`` column, or from the header where the column's copy is lossy."""
        out: dict[str, str | None] = {}
        for session_id, cwd in conn.execute("SELECT id, cwd FROM sessions WHERE id = ANY(%s)", (session_ids,)):
            if cwd is not None and "\ufffd" in cwd:
                header = jsonio.loads(bytes(conn.execute("SELECT header_json FROM sessions WHERE id = %s",
                                                         (session_id,)).fetchone()[0]))
                cwd = header.get("cwd") if isinstance(header, dict) and isinstance(header.get("cwd"), str) else None
            out[session_id] = cwd
        return out

    # -- verification -------------------------------------------------------------------------

    def verify(self, on_progress: ProgressCallback | None = None) -> list[StoreProblem]:
        """Check every session without changing anything (``sessiontree check --store``).

        In one ``REPEATABLE READ``, read-only snapshot, for every session: each
        record's CRC-32 (``hash-mismatch``), that it parses and is a valid header
        or entry (``invalid-record``), that an entry's copied columns match its
        JSON (``column-drift``), and that ``entry_count``, the header copies,
        the listing state and ``message_texts`` equal a rebuild from the records
        (``metadata-drift``; :meth:`reindex` repairs it), and the file checker's rules
        on the session's JSONL form (:func:`~sessiontree.stores.storable.file_rule_problems`:
        the verdict every store gives). The server keeps its own
        pages' checksums (``data_checksums``), so there is no store-wide integrity step.

        Returns:
            The problems, by session in insertion order.

        Raises:
            StorageError: the database cannot be read.
        """
        problems: list[StoreProblem] = []
        with self.db.transaction("verify", write=False, snapshot=True) as conn:
            if not self.db.has_schema(conn):
                return problems
            ids = [row[0] for row in conn.execute("SELECT id FROM sessions ORDER BY rowno")]
            present = {name for name in _SESSION_TABLES if conn.execute(
                "SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()[0]}
            indexes = [index for index in DERIVED_INDEXES
                       if hasattr(index, "checker") and _INDEX_TABLES[index.name] in present]
            for done, sid in enumerate(ids, 1):
                problems.extend(self._verify_session(conn, sid, indexes))
                if on_progress is not None:
                    on_progress(done, len(ids))
            for table in _SESSION_TABLES:
                if table not in present:
                    continue  # an older schema opened read-only
                count, example = conn.execute(
                    f"SELECT count(*), min(session_id) FROM {table} t"
                    " WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = t.session_id)").fetchone()
                if count:
                    problems.append(StoreProblem(
                        "orphan-rows", f"{table}: {count} rows belong to no stored session (such as "
                        f"{example!r}); reindex does not remove them"))
        return problems

    def _verify_session(self, conn: Any, session_id: str, indexes: Iterable[Any] = ()) -> list[StoreProblem]:
        """The problems of one session (:func:`~sessiontree.stores.verify.verify_stored_session`
        on its rows, read in the caller's snapshot)."""
        with conn.cursor(binary=True) as cur:
            row = cur.execute("SELECT header_json, header_crc, created_at, cwd, parent_session_id, classified,"
                              " entry_count, listing, message_count, modified_ms, name FROM sessions WHERE id = %s",
                              (session_id,)).fetchone()
            rows = cur.execute("SELECT seq, id, parent_id, type, timestamp, json, crc FROM entries"
                               " WHERE session_id = %s ORDER BY seq", (session_id,)).fetchall()
            texts = [(seq, bytes(text).decode("utf-8", "surrogatepass")) for seq, text in cur.execute(
                "SELECT seq, text FROM message_texts WHERE session_id = %s ORDER BY seq", (session_id,))]

        def state_drift(info: InfoAccumulator) -> list[str]:
            rebuilt_listing = listing_values(info)
            stored_listing = jsonio.loads(bytes(row[7]))
            if isinstance(stored_listing, dict) and isinstance(stored_listing.get("firstMessage"), str):
                # A row written before 0.2.0 keeps the whole first message; the listing
                # shows the same prefix of it (docs/listing.md, "First message"): no drift.
                stored_listing["firstMessage"] = first_message_prefix(stored_listing["firstMessage"])
            drift = [] if stored_listing == jsonio.loads(rebuilt_listing[0]) else ["listing state"]
            drift.extend(f"{name} {value!r} (rebuilt: {rebuilt!r})" for name, value, rebuilt in zip(
                ("message_count", "modified_ms", "name"), row[8:11], rebuilt_listing[1:], strict=True)
                if value != rebuilt)
            return drift

        header_text = bytes(row[0])
        stored = StoredSession(
            header_text=header_text,
            header_intact=record_crc(header_text) == row[1],
            entry_count=row[6],
            header_columns=row[2:6],
            parse=lambda text, line: self.reads.parse_record(text, session_id, line),
            copied_columns=lambda entry: (entry.get("id"), text_copy(entry.get("parentId")),
                                          text_copy(entry.get("type")), text_copy(entry.get("timestamp"))),
            rebuilt_header_columns=header_columns,
            state_drift=state_drift,
            stored_texts=lambda: texts,
            derived=[index.checker(conn, session_id) for index in indexes])
        records = (StoredRecord(seq, entry_id, (entry_id, parent, kind, stamp), bytes(text),
                                record_crc(bytes(text)) == crc)
                   for seq, entry_id, parent, kind, stamp, text, crc in rows)
        return verify_stored_session(session_id, f"{self.db.url}#{session_id}", stored, records)
