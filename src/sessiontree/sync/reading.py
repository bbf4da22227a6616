"""Reading a source file for ``sessiontree sync``: opening it (counted), its complete
prefix, byte ranges, hashes and shape, which agent wrote it (sniffed once), and the
:class:`~sessiontree.stores.base.SyncState` that records it, built by name
(docs/sync.md). Used by :mod:`.syncer`, :mod:`.gemini`, :mod:`.omp` and :mod:`.restore`."""

from __future__ import annotations

import hashlib
import os
import threading

from sessiontree.errors import SessionError
from sessiontree.format import jsonio
from sessiontree.format.codec import ParsedSession
from sessiontree.format.files import O_CLOEXEC, sha256_prefix
from sessiontree.format.foreign import sniff_agent
from sessiontree.format.shape import ShapeError, shape_of
from sessiontree.stores.base import SyncState

__all__ = [
    "JSON_WS",
    "O_CLOEXEC",
    "SNIFF_LINES",
    "SUFFIX",
    "TAIL_CHECK",
    "complete_prefix",
    "file_state",
    "foreign_agent",
    "lines_in",
    "open_source",
    "opened_files",
    "pread_range",
    "prefix_sha",
    "sha",
    "whole_shape",
]

#: Bytes before the consumed offset whose hash must still match before appended bytes are trusted.
TAIL_CHECK = 4096
JSON_WS = b" \t\r\n"
SUFFIX = ".jsonl"
_opened = 0
_opened_lock = threading.Lock()


def opened_files() -> int:
    """How many source files this process's sync engine has opened so far (for the
    benchmark and the tests: an unchanged file must not be opened)."""
    return _opened


def open_source(path: str) -> int:
    """Open a source file for reading, counted by :func:`opened_files`."""
    global _opened
    fd = os.open(path, os.O_RDONLY | O_CLOEXEC)
    with _opened_lock:
        _opened += 1
    return fd


def sha(data: bytes) -> bytes:
    """SHA-256 digest of ``data`` (the hashes a :class:`SyncState` records)."""
    return hashlib.sha256(data).digest()


def prefix_sha(fd: int, size: int) -> bytes:
    """SHA-256 of the file's first ``size`` bytes (the whole-file hash a grown file's
    shape records: docs/agent-loop.md)."""
    return sha256_prefix(fd, size)[0]


def whole_shape(body: bytes, parsed: ParsedSession, header_line: int | None = None) -> bytes | None:
    """The encoded shape of a whole file's complete bytes, against the header the store
    will hold (its own serialization of the parsed header) and the entries' texts
    (``header_line``: the header's line when malformed lines come before it);
    ``None`` when the shape cannot follow the lines (never expected; restore then says
    the file cannot be given back byte for byte)."""
    try:
        return shape_of(body, jsonio.dumps(parsed.header), parsed.lines, parsed.entry_bytes,
                        header_line=header_line).encode()
    except ShapeError:
        return None



def complete_prefix(data: bytes) -> tuple[int, int]:
    """How many leading bytes of ``data`` are complete records, and how many follow.

    Complete: up to the last ``\\n``, plus a last line without one when it
    already parses as a JSON object (docs/rules/versions.md seed:session-version
    accepts a complete final record without its newline). A last line that does not parse yet is an
    agent still writing it: not consumed, not an error.
    """
    cut = data.rfind(b"\n") + 1
    rest = data[cut:]
    if not rest:
        return cut, 0
    text = rest.strip(JSON_WS)
    if text:
        try:
            if isinstance(jsonio.loads(text), dict):
                return len(data), 0
        except ValueError:
            pass
    return cut, len(rest)


def pread_range(fd: int, start: int, end: int) -> bytes:
    """Bytes ``[start, end)`` of the open file (fewer if it was truncated meanwhile)."""
    chunks = []
    offset = start
    while offset < end:
        chunk = os.pread(fd, end - offset, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def lines_in(data: bytes) -> int:
    """Physical lines in ``data`` (a last line without newline counts)."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


#: Damaged lines looked past before the first readable record decides what wrote a file.
SNIFF_LINES = 64


def foreign_agent(body: bytes) -> str | None:
    """The foreign agent that wrote ``body`` (``"claude-code"``, ``"codex"``), from its first
    readable record (a line that is a JSON object; up to :data:`SNIFF_LINES` damaged
    lines before it are looked past, as :func:`~sessiontree.format.foreign.map_foreign`
    does), or ``None`` (a pi/Atomic file, recognised from its header's first bytes
    without parsing the line, or not a session). The syncer sniffs a file once with
    this and maps it with :func:`~sessiontree.format.foreign.map_records`."""
    start = 0
    size = len(body)
    looked = 0
    while start < size and looked < SNIFF_LINES:
        end = body.find(b"\n", start)
        stop = size if end < 0 else end
        line = body[start:stop].strip(JSON_WS + b"\x0b\x0c")
        start = stop + 1
        if not line:
            continue
        looked += 1
        if line.startswith(b'{"type":"session"'):
            return None
        try:
            value = jsonio.loads(line)
        except (ValueError, SessionError):
            continue
        if isinstance(value, dict):
            return sniff_agent(value)
    return None


def file_state(path: str, fst: os.stat_result, *, session_id: str, consumed: int, lines: int, entries: int,
               version: int, header_hash: bytes, tail_hash: bytes, shape: bytes | None = None) -> SyncState:
    """The :class:`~sessiontree.stores.base.SyncState` of ``path`` as ``fst`` (its ``fstat``)
    finds it, every other field by name (docs/sync.md, "Per-file state"): ``consumed`` bytes holding
    ``lines`` physical lines and ``entries`` entries, the format ``version`` (0: read
    through a mapping), the hashes of the header line and of the last :data:`TAIL_CHECK`
    consumed bytes, and the encoded shape (``None``: none recorded)."""
    return SyncState(path=path, session_id=session_id, size=fst.st_size, mtime_ns=fst.st_mtime_ns,
                     inode=fst.st_ino, dev=fst.st_dev, consumed=consumed, lines=lines, entries=entries,
                     version=version, header_hash=header_hash, tail_hash=tail_hash, shape=shape)
