"""The reads of a SQLite store's records stored cut (docs/blobs.md): putting their blobs
back, or giving references to them.

:class:`SqliteBlobReads` is a part held by :class:`~.reads.SqliteReads`: the splices of a
session by position (``plan``), a cut record made readable (``expand``, ``swaps``),
the loader of :class:`~sessiontree.stores.blobref.BlobRef` values (``load_blob``) and
``read_blob``. :class:`SplicedTexts` is ``read_texts``' sequence of a session holding cut
records; :class:`Swap` what a single-record read parses in place of a cut record. The
storage rule itself is in :mod:`.blobs`.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, overload

from sessiontree.errors import CorruptEntryError, SessionChangedError
from sessiontree.stores.sqlite import blobs
from sessiontree.stores.sqlite.connection import SqliteDatabase
from sessiontree.stores.sqlite.derived import from_db, record_bytes

__all__ = ["SplicedTexts", "SqliteBlobReads", "Swap"]


class SqliteBlobReads:
    """The part of :class:`~sessiontree.stores.sqlite.store.SqliteStore`'s reads for
    records stored cut (module docstring), and :meth:`read_blob`, over the store's
    :class:`~.connection.SqliteDatabase` (its public members only)."""

    def __init__(self, db: SqliteDatabase) -> None:
        self.db = db

    def plan(self, conn: sqlite3.Connection, key: Any) -> dict[int, list[blobs.Splice]]:
        """The splices of the session's records stored cut (:mod:`.blobs`), by *position*
        in file order; empty (one index probe) for a session stored inline."""
        if not self.db.has_blobs:
            return {}
        by_seq = blobs.splices_of(conn, key)
        if not by_seq:
            return {}
        seqs = [seq for (seq,) in conn.execute("SELECT seq FROM entries WHERE session_id = ? ORDER BY seq", (key,))]
        return {position: by_seq[seq] for position, seq in enumerate(seqs) if seq in by_seq}

    def fail(self, conn: sqlite3.Connection, session_id: str, key: Any,
                   position: int) -> Callable[[], CorruptEntryError]:
        """The error of a record at ``position`` whose blob is missing or damaged."""
        def fail() -> CorruptEntryError:
            found = conn.execute("SELECT id FROM entries WHERE session_id = ? ORDER BY seq LIMIT 1 OFFSET ?",
                                 (key, position)).fetchone()
            return CorruptEntryError(session_id, from_db(found[0]) if found else None, position + 2,
                                     f"{self.db.url}#{session_id}")
        return fail

    def load_blob(self, session_id: str, entry_id: str | None, line: int, sha256: str) -> bytes:
        """The checked bytes of blob ``sha256`` (hex): the loader of the
        :class:`~sessiontree.stores.blobref.BlobRef` values of the entry ``entry_id``
        at JSONL ``line`` (named in the error).

        Raises:
            CorruptEntryError: the blob is missing or fails its CRC-32.
            StorageError: the database could not be read.
        """
        with self.reader() as conn:
            data = blobs.read_blob(conn, bytes.fromhex(sha256))
        if data is None:
            raise CorruptEntryError(session_id, entry_id, line, f"{self.db.url}#{session_id}")
        return data

    @contextmanager
    def reader(self) -> Iterator[sqlite3.Connection]:
        """A connection to read blobs on: a read transaction, or the transaction this
        thread already holds (a write writing entries it read with references)."""
        with self.db.lock:
            conn = self.db.connection()
            if conn.in_transaction:
                yield conn
                return
            with self.db.read_transaction() as conn:
                yield conn

    def read_blob(self, sha256: str) -> bytes | None:
        """The stored bytes of the blob ``sha256`` (64 hex digits): an image's base64 text
        as it stands between the quotes in its records (docs/blobs.md), e.g. for a
        viewer serving the image by URL. ``None`` when no such blob is stored, or the
        name is not 64 hex digits.

        Raises:
            CorruptEntryError: the blob fails its CRC-32 (``session_id`` names the blob).
            StorageError: the database could not be read.
        """
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            return None
        digest = bytes.fromhex(sha256)
        with self.db.read_transaction() as conn:
            if not self.db.has_blobs or not self.db.has_schema(conn) or conn.execute(
                    "SELECT 1 FROM blobs WHERE sha256 = ?", (digest,)).fetchone() is None:
                return None
            data = blobs.read_blob(conn, digest)
        if data is None:
            raise CorruptEntryError(f"blob {sha256}", None, 1, self.db.url)
        return data

    def expand(self, conn: sqlite3.Connection, session_id: str, key: Any, position: int, text: Any,
                splices: list[blobs.Splice], want_raw: bool) -> tuple[bytes, bytes | None, bool]:
        """A cut record made readable: ``(text to parse, full bytes or None, refs)``.
        With :attr:`blob_refs` the text to parse holds markers (``refs`` true: the parsed
        entry goes through :func:`.blobs.unmark`) and the full bytes are read only when
        ``want_raw``; else the text to parse is the full record.

        Raises:
            CorruptEntryError: a blob it reads is missing or damaged.
        """
        text = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
        fail = self.fail(conn, session_id, key, position)
        if self.db.blob_refs:
            full = blobs.splice(conn, text, splices, fail) if want_raw else None
            return blobs.mark(text, splices), full, True
        full = blobs.splice(conn, text, splices, fail)
        return full, full, False

    def swaps(self, conn: sqlite3.Connection, session_id: str, key: Any, rows: Sequence[tuple[int, int, Any]],
               by_seq: dict[int, list[blobs.Splice]] | None = None) -> dict[int, Swap]:
        """For the rows ``(seq, position, stored text)`` of records stored cut: by ``seq``,
        what :class:`~.parsing.RecordCheck` parses in their place (:meth:`expand`; never the raw
        bytes). ``by_seq``: the session's splices when already read."""
        if by_seq is None:
            by_seq = blobs.splices_of(conn, key) if self.db.has_blobs else {}
        if not by_seq:
            return {}
        swaps = {}
        for seq, position, text in rows:
            splices = by_seq.get(seq)
            if splices is not None:
                parse_text, _, refs = self.expand(conn, session_id, key, position, text, splices, False)
                swaps[seq] = Swap(parse_text, splices if refs else None,
                                   functools.partial(self.load_blob, session_id, None, position + 2))
        return swaps

    def finish_refs(self, session_id: str, entry: dict[str, Any], line: int, splices: list[blobs.Splice]) -> None:
        """Turn the markers of an entry (at JSONL ``line``) parsed from :meth:`expand`'s
        text into references."""
        entry_id = entry.get("id")
        blobs.unmark(entry, splices, functools.partial(
            self.load_blob, session_id, entry_id if isinstance(entry_id, str) else None, line))


class SplicedTexts(Sequence[bytes]):
    """The stored texts of a session with records stored cut (``read_texts``): a record
    stored inline is given as read; a cut one has its blobs' bytes put back when it is
    taken, so a caller writing the texts one by one (an export) holds one record at a
    time, never the whole session.

    Each blob was found with its length when the texts were read; its CRC-32 is checked
    when it is taken (``CorruptEntryError``). Blobs are immutable (content-addressed), so
    the bytes are those of the snapshot read, unless the session was deleted since and
    its blobs with it (``SessionChangedError``).
    """

    __slots__ = ("_key", "_plan", "_session_id", "_store", "_texts")

    def __init__(self, store: SqliteBlobReads, session_id: str, key: Any, texts: Sequence[Any],
                 plan: dict[int, list[blobs.Splice]]) -> None:
        self._store, self._session_id, self._key, self._texts, self._plan = store, session_id, key, texts, plan

    def __len__(self) -> int:
        return len(self._texts)

    def _take(self, position: int) -> bytes:
        text = record_bytes(self._texts[position])
        splices = self._plan.get(position)
        if splices is None:
            return text
        store = self._store
        with store.reader() as conn:
            for _, digest, _ in splices:
                if conn.execute("SELECT 1 FROM blobs WHERE sha256 = ?", (digest,)).fetchone() is None:
                    raise SessionChangedError(self._session_id, "it was deleted or replaced")
            return blobs.splice(conn, text, splices, store.fail(conn, self._session_id, self._key, position))

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> list[bytes]: ...

    def __getitem__(self, index: int | slice) -> bytes | list[bytes]:
        if isinstance(index, slice):
            return [self._take(position) for position in range(len(self._texts))[index]]
        return self._take(range(len(self._texts))[index])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]


class Swap:
    """What :class:`~.parsing.RecordCheck` parses for a record stored cut: ``text`` (the full
    record, or the marked one), and the ``splices`` whose markers become references
    loaded by ``loader`` (``None``: no markers)."""

    __slots__ = ("loader", "splices", "text")

    def __init__(self, text: bytes, splices: list[blobs.Splice] | None, loader: Callable[[str], bytes]) -> None:
        self.text, self.splices, self.loader = text, splices, loader
