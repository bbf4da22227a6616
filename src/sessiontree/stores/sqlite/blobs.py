"""Large payloads of a SQLite store kept out of line, in a content-addressed blob table.

The rule (docs/blobs.md, docs/decisions/blobs.md): a record of at least
:data:`THRESHOLD` bytes whose image blocks (``{"type": "image", "data": ...}``
anywhere in it) carry a ``data`` string of at least :data:`THRESHOLD` bytes is
stored *cut*: ``entries.json`` holds the record's exact text with the bytes
between that string's quotes removed (the string reads as ``""``), and one
``entry_blobs`` row per cut names where the bytes go back (``offset`` in the cut
text), their SHA-256 and length. ``blobs`` holds each distinct content once,
keyed by its SHA-256, whichever sessions or forks use it, with its CRC-32.

* **Byte exact.** The full record is the cut text with each blob's bytes put back
  at its offset (:func:`splice`): nothing is re-serialised. The splice list lives
  in its own table, never in the record, so no session content can forge one.
* **Only what is unambiguous is cut.** A ``data`` value is cut when it is plain
  (ASCII, no character JSON escapes) and the pattern ``"data":"<value>"`` occurs in
  the text exactly as many times as image blocks carry it; otherwise the record
  stays inline. So the cut text parses to the record with exactly those image
  ``data`` values empty, which is what search (never image data), the usage ledger
  and the skeleton read from it.
* **Checksums.** ``entries.crc`` stays the CRC-32 of what ``entries.json`` holds
  (the cut text); ``blobs.crc`` covers each blob, checked with its length whenever
  the blob is read. Together they cover every byte of the record.
* **No orphans.** Deleting or replacing a session drops its ``entry_blobs`` rows and
  then the blobs no row names any more, in the same transaction
  (:func:`drop_refs`); ``check --store`` reports missing and unreferenced blobs.
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from sessiontree.errors import CorruptEntryError
from sessiontree.stores.blobref import BlobRef

__all__ = [
    "THRESHOLD",
    "Cut",
    "create_tables",
    "cut_record",
    "drop_refs",
    "drop_unused",
    "insert_cuts",
    "mark",
    "read_blob",
    "splice",
    "splices_of",
    "unmark",
]

#: Bytes: a record shorter than this is never cut, and only image ``data`` strings of at
#: least this many bytes are cut out of longer ones (64 KiB: well above any text block
#: of an ordinary turn, well below a screenshot's base64).
THRESHOLD = 64 * 1024

#: One splice: (offset in the cut text, SHA-256 digest, length in bytes).
Splice = tuple[int, bytes, int]


class Cut:
    """A record cut for storage: the text to store, its splices, and the bytes of each
    distinct blob (``{sha256 digest: bytes}``)."""

    __slots__ = ("blobs", "splices", "text")

    def __init__(self, text: bytes, splices: list[Splice], blobs: dict[bytes, bytes]) -> None:
        self.text, self.splices, self.blobs = text, splices, blobs


def _image_data(entry: Any) -> Counter[str]:
    """How many image blocks anywhere in ``entry`` carry each ``data`` string of at
    least :data:`THRESHOLD` characters (a :class:`BlobRef` counts as its string)."""
    found: Counter[str] = Counter()
    stack = [entry]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            if value.get("type") == "image":
                data = value.get("data")
                if isinstance(data, BlobRef) and data.length >= THRESHOLD:
                    data = data.load()  # an entry read with references, written again (a branched session)
                if isinstance(data, str) and len(data) >= THRESHOLD:
                    found[data] += 1
            stack.extend(item for item in value.values() if isinstance(item, (dict, list)))
        elif isinstance(value, list):
            stack.extend(item for item in value if isinstance(item, (dict, list)))
    return found


def cut_record(text: bytes, entry: dict[str, Any]) -> Cut | None:
    """The stored form of the record ``text`` (parsed: ``entry``) with its large image
    ``data`` strings out of line, or ``None`` when nothing is cut (the record is stored
    inline, as before). The rule is in the module docstring."""
    if len(text) < THRESHOLD:
        return None
    # Candidates by length: values that read as their characters (a raw control character
    # cannot stand inside a string of valid JSON, so only '"' and '\\' are written otherwise).
    candidates: dict[int, list[tuple[bytes, int, list[int]]]] = {}  # length -> (bytes, count, starts)
    for value, count in _image_data(entry).items():
        if value.isascii() and '"' not in value and "\\" not in value:
            candidates.setdefault(len(value), []).append((value.encode("ascii"), count, []))
    if not candidates:
        return None
    # Every '"data":"' of valid JSON opens a string token after a key ending in "data"; the
    # token ends at the next '"' (a candidate holds no '"' or '\\', so a token equal to one
    # is exactly that value). One short-needle scan of the text, one compare per token.
    find = text.find
    at = find(b'"data":"')
    while at >= 0:
        start = at + 8
        end = find(b'"', start)
        if end < 0:
            break
        for data, _, starts in candidates.get(end - start, ()):
            if text.startswith(data, start):
                starts.append(start)
                break
        at = find(b'"data":"', end + 1)
    spans: list[tuple[int, int, bytes]] = []
    blobs: dict[bytes, bytes] = {}
    for group in candidates.values():
        for data, count, starts in group:
            if len(starts) != count:
                continue  # the same bytes stand elsewhere too: keep the record's reading exact
            digest = hashlib.sha256(data).digest()
            blobs[digest] = data
            spans.extend((start, len(data), digest) for start in starts)
    if not spans:
        return None
    spans.sort()
    pieces: list[bytes] = []
    splices: list[Splice] = []
    last = removed = 0
    for start, length, digest in spans:
        pieces.append(text[last:start])
        splices.append((start - removed, digest, length))
        removed += length
        last = start + length
    pieces.append(text[last:])
    return Cut(b"".join(pieces), splices, blobs)


def create_tables(conn: sqlite3.Connection) -> None:
    """The ``blobs`` and ``entry_blobs`` tables (schema step ``m013_blobs``)."""
    # IF NOT EXISTS: a database whose record of this step was lost keeps its blobs.
    conn.execute("""
        CREATE TABLE IF NOT EXISTS blobs (
            -- SHA-256 digest (32 bytes) of the content: one row per distinct content, shared
            -- by every session and fork that holds it.
            sha256 BLOB PRIMARY KEY,
            -- Byte count and CRC-32 of data, checked whenever the blob is read.
            size INTEGER NOT NULL,
            crc INTEGER NOT NULL,
            -- The bytes between the string's quotes in the record, exactly as written.
            data BLOB NOT NULL
        )""")
    conn.execute("""
        CREATE TABLE IF NOT EXISTS entry_blobs (
            session_id TEXT NOT NULL,
            -- entries.seq of the cut record.
            seq INTEGER NOT NULL,
            -- Where the blob's bytes go back in entries.json (the cut text).
            offset INTEGER NOT NULL,
            sha256 BLOB NOT NULL,
            length INTEGER NOT NULL,
            PRIMARY KEY (session_id, seq, offset)
        ) WITHOUT ROWID""")
    # Deleting a session asks which of its blobs another row still names.
    conn.execute("CREATE INDEX IF NOT EXISTS entry_blobs_sha256 ON entry_blobs (sha256)")


def insert_cuts(conn: sqlite3.Connection, key: Any, cuts: Sequence[tuple[int, Cut]]) -> None:
    """Inside the caller's write transaction: the ``entry_blobs`` rows of ``cuts``
    (``(seq, cut)`` pairs of the session stored under ``key``) and each blob not
    stored yet."""
    blobs: dict[bytes, bytes] = {}
    rows: list[tuple[Any, ...]] = []
    for seq, cut in cuts:
        blobs.update(cut.blobs)
        rows.extend((key, seq, offset, digest, length) for offset, digest, length in cut.splices)
    conn.executemany("INSERT OR IGNORE INTO blobs (sha256, size, crc, data) VALUES (?, ?, ?, ?)",
                     [(digest, len(data), zlib.crc32(data), data) for digest, data in blobs.items()])
    conn.executemany("INSERT INTO entry_blobs (session_id, seq, offset, sha256, length) VALUES (?, ?, ?, ?, ?)",
                     rows)


def drop_refs(conn: sqlite3.Connection, key: Any) -> int:
    """Inside the caller's write transaction: remove the ``entry_blobs`` rows of the
    session stored under ``key``, then the blobs they named that no other row names.
    Returns the number of blobs removed."""
    digests = [row[0] for row in conn.execute("SELECT DISTINCT sha256 FROM entry_blobs WHERE session_id = ?", (key,))]
    if not digests:
        return 0
    conn.execute("DELETE FROM entry_blobs WHERE session_id = ?", (key,))
    return drop_unused(conn, digests)


def drop_unused(conn: sqlite3.Connection, digests: Sequence[bytes]) -> int:
    """Inside the caller's write transaction: remove the blobs among ``digests`` that no
    ``entry_blobs`` row names. Returns how many were removed."""
    removed = 0
    for digest in digests:
        if conn.execute("SELECT 1 FROM entry_blobs WHERE sha256 = ? LIMIT 1", (digest,)).fetchone() is None:
            removed += conn.execute("DELETE FROM blobs WHERE sha256 = ?", (digest,)).rowcount
    return removed


def splices_of(conn: sqlite3.Connection, key: Any) -> dict[int, list[Splice]]:
    """The splices of every cut record of the session stored under ``key``, by ``seq``,
    each list in offset order (an empty dict for a session stored inline)."""
    found: dict[int, list[Splice]] = {}
    for seq, offset, digest, length in conn.execute(
            "SELECT seq, offset, sha256, length FROM entry_blobs WHERE session_id = ? ORDER BY seq, offset", (key,)):
        found.setdefault(seq, []).append((offset, digest, length))
    return found


def read_blob(conn: sqlite3.Connection, digest: bytes, length: int | None = None) -> bytes | None:
    """The bytes of blob ``digest``, or ``None`` when it is missing or fails its CRC-32
    (or ``length``, when given)."""
    row = conn.execute("SELECT size, crc, data FROM blobs WHERE sha256 = ?", (digest,)).fetchone()
    if row is None:
        return None
    size, crc, data = row
    if not isinstance(data, bytes) or len(data) != size or zlib.crc32(data) != crc or (
            length is not None and size != length):
        return None
    return data


def splice(conn: sqlite3.Connection, text: bytes, splices: Sequence[Splice],
           fail: Callable[[], CorruptEntryError]) -> bytes:
    """The full record: the cut ``text`` with each blob's bytes put back at its offset.

    Raises:
        CorruptEntryError: ``fail()``, when a blob is missing or fails its checks.
    """
    pieces, last = [], 0
    for offset, digest, length in splices:
        data = read_blob(conn, digest, length)
        if data is None:
            raise fail()
        pieces.append(text[last:offset])
        pieces.append(data)
        last = offset
    pieces.append(text[last:])
    return b"".join(pieces)


#: Per process, never stored: the marker a deferred value stands under while the cut
#: text is parsed (:func:`mark`); a session cannot forge what it cannot know.
_NONCE = secrets.token_hex(16)
_PREFIX = "\x00sessiontree-blob:" + _NONCE + ":"


def mark(text: bytes, splices: Sequence[Splice]) -> bytes:
    """The cut ``text`` with a private marker string (``"\\u0000sessiontree-blob:<nonce>:<i>"``)
    in place of splice ``i``, for parsing into an entry whose markers :func:`unmark`
    turns into references."""
    pieces, last = [], 0
    for number, (offset, _, _) in enumerate(splices):
        pieces.append(text[last:offset])
        pieces.append(b"\\u0000sessiontree-blob:" + _NONCE.encode() + b":" + str(number).encode())
        last = offset
    pieces.append(text[last:])
    return b"".join(pieces)


def unmark(entry: dict[str, Any], splices: Sequence[Splice], loader: Callable[[str], bytes]) -> dict[str, Any]:
    """``entry`` (parsed from :func:`mark`'s text) with each marker string replaced, in
    place, by a :class:`~sessiontree.stores.blobref.BlobRef` of its splice."""
    refs = [BlobRef(digest.hex(), length, loader) for _, digest, length in splices]
    stack: list[Any] = [entry]
    while stack:
        value = stack.pop()
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for name, item in items:
            if isinstance(item, str):
                if item.startswith(_PREFIX):
                    value[name] = refs[int(item[len(_PREFIX):])]
            elif isinstance(item, (dict, list)):
                stack.append(item)
    return entry

