"""What the PostgreSQL store shares with its derived indexes (:mod:`.search`,
:mod:`.usage`) and its schema steps (:mod:`.schema`), so none of them imports :mod:`.store`.

* how values become ``text`` columns: ids must be exact (:func:`is_exact_text`),
  copied values may be lossy (:func:`text_copy`);
* the listing state kept in ``sessions.listing`` (:func:`listing_values`,
  :func:`info_from_listing`) and the header copies (:func:`header_columns`);
* a record's checksum (:func:`record_crc`);
* the contracts: :class:`DerivedIndex` (what a derived index implements) and
  :class:`PostgresReads` (what an index module may ask of the store).

Nothing here imports ``psycopg``: it is an optional extra, and connections are
typed ``Any``.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from sessiontree.core.listing import InfoAccumulator, is_classified
from sessiontree.format import jsonio
from sessiontree.stores.search import ScannedStore

__all__ = [
    "DerivedIndex",
    "IndexedRow",
    "Migration",
    "PostgresReads",
    "header_columns",
    "info_from_listing",
    "is_exact_text",
    "listing_values",
    "record_crc",
    "text_copy",
]

#: A schema step: runs inside the migrating transaction, under the schema lock.
Migration = Callable[[Any], None]

#: An entry as a derived index receives it: ``(seq, parsed entry, stored JSON bytes)``.
IndexedRow = tuple[int, dict[str, Any], bytes]


def record_crc(data: bytes) -> int:
    """CRC-32 of a stored record's bytes: what ``entries.crc`` and ``sessions.header_crc`` hold."""
    return zlib.crc32(data)


def is_exact_text(value: str) -> bool:
    """Whether PostgreSQL ``text`` holds ``value`` exactly (no NUL, no lone surrogate)."""
    if "\x00" in value:
        return False
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def text_copy(value: Any) -> str | None:
    """A value for a copied ``text`` column: a string with NUL and lone surrogates
    replaced by U+FFFD (the exact value stays in the stored record); ``None`` for
    anything that is not a string."""
    if not isinstance(value, str):
        return None
    if is_exact_text(value):
        return value
    fixed = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return fixed.replace("\x00", "\ufffd")


def header_columns(header: dict[str, Any]) -> tuple[str | None, str | None, str | None, bool]:
    """The header copies ``(created_at, cwd, parent_session_id, classified)`` of a
    ``sessions`` row, as written."""
    return (text_copy(header.get("createdAt")), text_copy(header.get("cwd")),
            text_copy(header.get("parentSessionId")), is_classified(header))


def listing_values(info: InfoAccumulator) -> tuple[bytes, int, float, str | None]:
    """``sessions.listing`` (the accumulator's state as exact JSON bytes) and its SQL
    copies ``message_count``, ``modified_ms``, ``name`` for an accumulator."""
    state = info.to_state()
    return (jsonio.dumps(state), int(state["messageCount"]), float(state["modifiedMs"] or 0.0),
            text_copy(state["name"]))


def info_from_listing(listing: bytes) -> InfoAccumulator:
    """The listing accumulator stored in ``sessions.listing``: the inverse of
    :func:`listing_values`."""
    return InfoAccumulator.from_state(jsonio.loads(listing))


class DerivedIndex(Protocol):
    """Derived data kept in its own tables (search index, usage ledger): the
    PostgreSQL form of :class:`sessiontree.stores.sqlite.derived.DerivedIndex`.

    Written in the same transaction as the entries it derives from, removed with
    their session, rebuilt from the entries alone by ``PostgresStore.reindex``.
    Its tables are created by a schema step (:mod:`.schema`, which also lists
    every index in ``DERIVED_INDEXES``). Optionally it defines
    ``prepare(conn)``, run before a full reindex in its own transaction under
    the schema lock (the search index creates its trigram index there).
    """

    #: Short name, for messages (``"search"``, ``"usage"``).
    name: str

    def add(self, conn: Any, session_id: str, rows: Sequence[IndexedRow]) -> None:
        """Index new entries of ``session_id``: ``(seq, entry, stored bytes)`` in ``seq``
        order, inside the writing transaction; raising rolls the whole write back."""

    def remove(self, conn: Any, session_id: str) -> None:
        """Drop everything derived from ``session_id`` (inside the transaction)."""


class PostgresReads(ScannedStore, Protocol):
    """What an index module may ask of a ``PostgresStore``: a read snapshot, whether
    the database holds the schema, and which schema steps it has."""

    @property
    def applied_steps(self) -> frozenset[str]:
        """Schema steps present in the database (an older schema opened read-only lacks some)."""
        ...

    def read_snapshot(self, what: str) -> AbstractContextManager[Any]:
        """A ``REPEATABLE READ``, read-only transaction on a pooled connection.

        Raises:
            StorageError: the database could not be read (``what`` names the read)."""
        ...

    def has_schema(self, conn: Any) -> bool:
        """Whether the database holds the sessiontree schema."""
        ...
