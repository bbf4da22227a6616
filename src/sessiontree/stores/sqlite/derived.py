"""What the SQLite store shares with its derived indexes (:mod:`.search`, :mod:`.usage`)
and its schema steps (:mod:`.schema`), so none of them imports :mod:`.store` or its mixins.

* how values travel between Python and SQLite columns (:func:`to_db`,
  :func:`from_db`, :func:`record_bytes`) and a record's checksum (:func:`record_crc`);
* the listing state kept in ``sessions`` columns (:data:`STATE_COLUMNS`,
  :func:`state_values`, :func:`state_from_row`) and the header copies
  (:func:`header_columns`);
* the contracts: :class:`DerivedIndex` (what a derived index implements) and
  :class:`SqliteTransactions` (what an index module may ask of the store).
"""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from sessiontree.core.listing import FIRST_MESSAGE_CHARS, InfoAccumulator, is_classified
from sessiontree.format import jsonio

__all__ = [
    "LISTING_STATE_SELECT",
    "STATE_ASSIGN",
    "STATE_COLUMNS",
    "STATE_SELECT",
    "DerivedIndex",
    "IndexedRow",
    "Migration",
    "SqliteTransactions",
    "from_db",
    "header_columns",
    "record_bytes",
    "record_crc",
    "state_from_row",
    "state_values",
    "to_db",
]

#: A schema step: runs inside the migrating transaction (``BEGIN IMMEDIATE``).
Migration = Callable[[sqlite3.Connection], None]

#: An entry as a derived index receives it: ``(seq, parsed entry, stored JSON bytes)``.
IndexedRow = tuple[int, dict[str, Any], bytes]


# -- values ------------------------------------------------------------------------------------


def to_db(value: Any) -> Any:
    """A Python value as SQLite can store it: a ``str`` holding lone UTF-16 surrogates
    (JSON ``"\\ud83d"`` escapes) becomes the BLOB of its ``surrogatepass`` UTF-8
    encoding, since SQLite text must be valid UTF-8; anything else is unchanged."""
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "surrogatepass")
    return value


def from_db(value: Any) -> Any:
    """A text column read back: the inverse of :func:`to_db` (a BLOB becomes the
    ``str`` it encodes, surrogates included); anything else is unchanged."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogatepass")
    return value


def record_bytes(value: bytes | str) -> bytes:
    """A stored record (``entries.json``, ``sessions.header_json``) as bytes: a record
    written as text (by hand, or before records were BLOBs) as its UTF-8 bytes."""
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")


def record_crc(data: bytes | str) -> int:
    """CRC-32 of a stored record's bytes (a ``str`` record, stored by hand, as UTF-8):
    the checksum ``entries.crc`` and ``sessions.header_crc`` hold."""
    return zlib.crc32(record_bytes(data))


# -- the listing state and the header copies in ``sessions`` ----------------------------------

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
#: The state columns as a ``SELECT`` list (``message_count, first_message, ...``).
STATE_SELECT = ", ".join(column for _, column in STATE_COLUMNS)
#: :data:`STATE_SELECT` for a listing, which shows only a prefix of the first message
#: (docs/listing.md, "First message"): its first ``FIRST_MESSAGE_CHARS + 1`` characters
#: (a BLOB, text with lone surrogates, counts bytes: four a character at most), all that
#: :func:`~sessiontree.core.listing.first_message_prefix` looks at. A row written before
#: 0.2.0 holds the whole text; this keeps listing it from reading megabytes into Python.
#: A text holding a NUL character is cut as a BLOB too: SQLite's ``substr`` of a TEXT
#: value stops at its first NUL (a first message "\x1b[31m\x00..." was listed as "\x1b[31m").
LISTING_STATE_SELECT = STATE_SELECT.replace(
    "first_message",
    f"CASE WHEN typeof(first_message) = 'blob' OR instr(CAST(first_message AS BLOB), x'00')"
    f" THEN substr(CAST(first_message AS BLOB), 1, {4 * (FIRST_MESSAGE_CHARS + 1)})"
    f" ELSE substr(first_message, 1, {FIRST_MESSAGE_CHARS + 1}) END", 1)
#: The state columns as an ``UPDATE ... SET`` list with one ``?`` each.
STATE_ASSIGN = ", ".join(f"{column} = ?" for _, column in STATE_COLUMNS)


def state_values(info: InfoAccumulator) -> list[Any]:
    """The values of :data:`STATE_COLUMNS` for ``info``, in that order, as stored
    (``to_state()``'s values, read from the attributes in :data:`STATE_COLUMNS` order:
    tests/stores/test_sqlite_append_path.py keeps the two in step)."""
    return [info.message_count, to_db(info.first_message), info.modified_ms, int(info.has_name),
            to_db(info.name), to_db(info.anchor_id), to_db(info.summary_through), to_db(info.summary_text)]



def state_from_row(values: Sequence[Any]) -> InfoAccumulator:
    """The listing accumulator stored in a row's :data:`STATE_COLUMNS` (``values`` in
    that order, :data:`STATE_SELECT` or :data:`LISTING_STATE_SELECT`): the inverse of
    :func:`state_values`."""
    state = {key: _prefix_from_db(value) if key == "firstMessage" else from_db(value)
             for (key, _), value in zip(STATE_COLUMNS, values, strict=False)}
    state["hasName"] = bool(state["hasName"])
    state["modifiedMs"] = float(state["modifiedMs"] or 0.0)
    return InfoAccumulator.from_state(state)


def _prefix_from_db(value: Any) -> Any:
    """:func:`from_db` of a text column that may have been cut by bytes
    (:data:`LISTING_STATE_SELECT`): a character cut in two at the end is dropped."""
    if isinstance(value, bytes):
        for end in range(len(value), max(len(value) - 4, -1), -1):
            try:
                return value[:end].decode("utf-8", "surrogatepass")
            except UnicodeDecodeError:
                continue
    return from_db(value)


# -- the listing texts' pending tail (``sessions.texts_from``) --------------------------------

#: Entries an append may leave with their listing text unstored (``sessions.texts_from``):
#: the tail a reader derives from the entries is at most this long.
TEXTS_TAIL = 32


def listing_text(entry: Any) -> str | None:
    """The listing text ``entry`` adds to ``message_texts`` (docs/rules/listing.md L.15),
    else ``None``: what :meth:`InfoAccumulator.add` returns for it, which depends on
    the entry alone."""
    return InfoAccumulator().add(entry) if isinstance(entry, dict) else None


def tail_texts(conn: sqlite3.Connection, key: Any, start: int) -> list[tuple[int, str]]:
    """``(seq, text)`` of the listing texts of session ``key``'s entries from ``seq``
    ``start`` on, derived from their stored records (the pending tail of
    ``message_texts``). A record that does not parse adds nothing: listing never
    reports damage (``load`` and ``check --store`` do). A record stored with its
    images out of line (docs/blobs.md) gives the same text: only image data is cut."""
    texts = []
    for seq, record in conn.execute("SELECT seq, json FROM entries WHERE session_id = ? AND seq >= ? ORDER BY seq",
                                    (key, start)):
        try:
            text = listing_text(jsonio.loads(record))
        except ValueError:
            continue
        if text is not None:
            texts.append((seq, text))
    return texts


def header_columns(header: dict[str, Any]) -> tuple[Any, Any, Any, int]:
    """The header copies ``(created_at, cwd, parent_session_id, classified)`` of a
    ``sessions`` row, as stored (a value that is not a string is ``NULL``)."""
    created = header.get("createdAt")
    cwd = header.get("cwd")
    parent = header.get("parentSessionId")
    return (to_db(created) if isinstance(created, str) else None,
            to_db(cwd) if isinstance(cwd, str) else None,
            to_db(parent) if isinstance(parent, str) else None,
            int(is_classified(header)))


# -- contracts ---------------------------------------------------------------------------------


class DerivedIndex(Protocol):
    """Derived data kept in its own tables beside the entries (the search index, the
    usage ledger; sync state is *not* one: it is not derivable from entries).

    Kept by the writes or, for work deferred off the write path (both indexes since
    ``m011_bulk_settle``: docs/decisions/bulk-settle.md), left as a pending tail that
    :meth:`settle` finishes and every query accounts for; removed with
    their session, and rebuilt from the entries alone by ``SqliteStore.reindex``
    (docs/stores.md, "Derived data"). Its tables are created by schema steps
    (:mod:`.schema`, which also lists every index in ``DERIVED_INDEXES``).
    Optionally it defines ``reindexed(conn, everything: bool)``, which
    ``SqliteStore.reindex`` calls once after rebuilding the sessions
    (``everything``: all of them), inside the same transaction, for store-wide
    sums (the usage rollup). Optionally it defines ``created(conn, sessions)``:
    settle sessions created in the current transaction from their entries in hand
    (``[(key, entries)]``, every entry of each, ``seq`` = position), which a bulk
    import asks for (``SqliteWrites.create_many(..., settle=True)``) so that no
    settle reads and parses them again; an index without it leaves them pending.
    """

    #: Short name, for messages (``"search"``, ``"usage"``).
    name: str

    def add(self, conn: sqlite3.Connection, key: Any, rows: Sequence[IndexedRow]) -> None:
        """Index new entries of the session whose ``sessions.id`` column is ``key``.

        ``rows`` are ``(seq, entry, text)``: the entry's position in file order,
        the parsed entry, and its stored JSON bytes, in ``seq`` order. Runs
        inside the writing transaction; raising rolls the whole write back."""

    def writes_on_add(self, conn: sqlite3.Connection) -> bool:
        """Whether :meth:`add` writes anything on this database (``False``: new entries
        stay pending, and the writes skip the call). Asked once per connection by
        ``SqliteWrites``: a schema only gains tables, so the answer holds for it."""

    def remove(self, conn: sqlite3.Connection, key: Any) -> None:
        """Drop everything derived from the session ``key`` (inside the transaction)."""

    def pending(self, conn: sqlite3.Connection) -> int:
        """How many entries :meth:`settle` has left to do (0: nothing deferred)."""

    def settle(self, conn: sqlite3.Connection, budget: int | None = None) -> int:
        """Finish work this index deferred to keep writes cheap (inside a writing
        transaction): all of it, or about ``budget`` entries. Returns how many
        entries it processed; fewer than ``budget`` means nothing is left (0:
        nothing was deferred)."""


class SqliteTransactions(Protocol):
    """What an index module may ask of a ``SqliteStore``: its transactions, whether
    the database holds the schema, and the bounded settle of deferred work."""

    #: Whether the store was opened read-only (writes raise ``StorageError``).
    readonly: bool
    #: Seconds a connection waits for another writer's lock.
    timeout: float

    def read_transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """A read transaction: one consistent snapshot across several statements.

        Raises:
            StorageError: the database could not be read."""
        ...

    def write_transaction(self, what: str) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``); any error rolls it back.

        Raises:
            StorageError: read-only, not initialised, or the write failed (``what`` names it)."""
        ...

    def has_schema(self, conn: sqlite3.Connection) -> bool:
        """Whether the database holds the sessiontree schema (an empty database opened
        without initialising it holds none)."""
        ...

    def settle_derived(self, *, lock_timeout: float | None = None, pending: int | None = None,
                       on_progress: Callable[[int, int], None] | None = None) -> int:
        """Finish the work the derived indexes deferred, in short write transactions
        (``SqliteStore.settle_derived``). Returns the entries processed.

        Raises:
            StorageError: read-only, a write failed or the lock stayed held."""
        ...
