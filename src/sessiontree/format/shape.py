"""The shape of a session file: what it takes to give an agent's file back byte for byte.

A store keeps a session as its format-4 header and each entry's JSON text.
An agent's file can differ from that rendering: pi and Atomic write a
version-3 header, an older file was upgraded in memory (ids added, records
rewritten), a file may hold blank lines, CRLF line ends, a byte order mark,
duplicates dropped on upgrade, or no final newline. A :class:`FileShape`
records exactly those differences, line by line, so that
:func:`render_shape` rebuilds the file's bytes from the stored header and
entries (docs/agent-loop.md, "Byte for byte").

The shape is a list of operations over the file's physical lines, in order:

* ``("h", end)``: the line is the stored header's JSON text, then ``end``;
* ``("e", n, end)``: the next ``n`` entries of the file, each its stored
  JSON text followed by ``end``;
* ``("H", raw)``: the header line, verbatim (``raw`` includes its line end);
* ``("L", raw)``: the next entry's line, verbatim (an upgraded entry);
* ``("l", raw)``: a line that is no entry (blank, a duplicate dropped on
  upgrade), verbatim;
* ``("G", raw, n)``: a line holding the next ``n`` entries glued together
  (two or more records with no newline between them, read apart by sync and
  import: docs/sync.md, "Glued records"), verbatim.

Encoding version 1 has no ``G`` operation; a shape with one is written as
version 2. Both versions decode.

``end`` is ``b"\\n"``, ``b"\\r\\n"`` or ``b""`` (a last line without newline).
A file written the way pi writes (one ``JSON.stringify`` line per record)
costs one literal header line and one ``e`` operation, whatever its size.

The shape also records the SHA-256 and size of the bytes it describes, so a
rebuild is checked before anyone relies on it.
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sessiontree.format import jsonio

__all__ = ["FileShape", "ShapeError", "render_shape", "shape_of"]

_ENDS = (b"\n", b"\r\n", b"")
_FORMAT = 1
#: The encoding version of a shape with a glued line (``G``); :data:`_FORMAT` otherwise.
_FORMAT_GLUED = 2


class ShapeError(ValueError):
    """A shape that cannot be decoded, or that does not fit the entries it is rendered with."""


@dataclass
class FileShape:
    """How a file's bytes map onto a stored header and entries.

    Attributes:
        ops: the operations, in file order (module docstring).
        size: bytes described (the file's consumed bytes).
        sha256: SHA-256 of those bytes (32 raw bytes).
    """

    ops: list[tuple[Any, ...]] = field(default_factory=list)
    size: int = 0
    sha256: bytes = b""

    @property
    def entries(self) -> int:
        """How many of the file's entries the shape consumes (``e`` and ``G`` counts plus ``L`` lines)."""
        return sum(op[1] if op[0] == "e" else op[2] if op[0] == "G" else 1
                   for op in self.ops if op[0] in ("e", "L", "G"))

    @property
    def canonical(self) -> bool:
        """Whether the file is the store's own rendering except for the header line (no
        literal entry or extra line)."""
        return all(op[0] in ("h", "H", "e") and (op[0] != "e" or op[2] == b"\n") for op in self.ops)

    def encode(self) -> bytes:
        """A compact, compressed encoding for the store (:meth:`decode` reverses it)."""
        ops: list[list[Any]] = []
        for op in self.ops:
            kind = op[0]
            if kind in ("h",):
                ops.append([kind, _ENDS.index(op[1])])
            elif kind == "e":
                ops.append([kind, op[1], _ENDS.index(op[2])])
            elif kind == "G":
                ops.append([kind, base64.b64encode(op[1]).decode("ascii"), op[2]])
            else:
                ops.append([kind, base64.b64encode(op[1]).decode("ascii")])
        # Version 1 readers know no "G": a shape without one stays version 1.
        version = _FORMAT_GLUED if any(op[0] == "G" for op in self.ops) else _FORMAT
        data = {"v": version, "size": self.size, "sha256": self.sha256.hex(), "ops": ops}
        return zlib.compress(jsonio.dumps(data), 6)

    @classmethod
    def decode(cls, blob: bytes) -> FileShape:
        """Inverse of :meth:`encode`.

        Raises:
            ShapeError: the blob is not an encoded shape of a known version.
        """
        try:
            data = jsonio.loads(zlib.decompress(blob))
            if data.get("v") not in (_FORMAT, _FORMAT_GLUED):
                raise ShapeError(f"unknown file shape version {data.get('v')!r}")
            ops: list[tuple[Any, ...]] = []
            for op in data["ops"]:
                kind = op[0]
                if kind == "h":
                    ops.append(("h", _ENDS[op[1]]))
                elif kind == "e":
                    ops.append(("e", int(op[1]), _ENDS[op[2]]))
                elif kind in ("H", "L", "l"):
                    ops.append((kind, base64.b64decode(op[1])))
                elif kind == "G" and data["v"] == _FORMAT_GLUED:
                    count = int(op[2])
                    if count < 2:
                        raise ShapeError(f"a glued line of {count} entries")
                    ops.append(("G", base64.b64decode(op[1]), count))
                else:
                    raise ShapeError(f"unknown file shape operation {kind!r}")
            return cls(ops, int(data["size"]), bytes.fromhex(data["sha256"]))
        except ShapeError:
            raise
        except (zlib.error, ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ShapeError(f"not an encoded file shape: {exc}") from exc

    def extended(self, more: FileShape, combined_sha256: bytes) -> FileShape:
        """This shape followed by ``more`` (the operations of bytes appended to the file),
        with runs of entries merged; ``combined_sha256`` is the hash of all the bytes."""
        ops = list(self.ops)
        for op in more.ops:
            _push(ops, op)
        return FileShape(ops, self.size + more.size, combined_sha256)


def _push(ops: list[tuple[Any, ...]], op: tuple[Any, ...]) -> None:
    """Append ``op``, merging it into the previous ``e`` run when both have the same line end."""
    if op[0] == "e" and ops and ops[-1][0] == "e" and ops[-1][2] == op[2]:
        ops[-1] = ("e", ops[-1][1] + op[1], op[2])
    else:
        ops.append(op)


def _physical_lines(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    """``(content, end)`` per physical line: content without its line end."""
    start = 0
    size = len(data)
    while start < size:
        cut = data.find(b"\n", start)
        if cut < 0:
            yield data[start:], b""
            return
        if cut > start and data[cut - 1:cut] == b"\r":
            yield data[start:cut - 1], b"\r\n"
        else:
            yield data[start:cut], b"\n"
        start = cut + 1


def shape_of(data: bytes, header_raw: bytes | None, entry_lines: Sequence[int],
             entry_bytes: Callable[[int], bytes], *, first_line: int = 1,
             header_line: int | None = None) -> FileShape:
    """The shape of ``data`` against the parsed header and entries it holds.

    Args:
        data: the file's bytes (or the bytes appended after a consumed prefix).
        header_raw: the stored header's JSON text when ``data`` starts with the
            header line; ``None`` when ``data`` holds entry lines only (appended bytes).
        entry_lines: the 1-based physical line of each entry, as the codec reports
            (``ParsedSession.lines``), counted from ``first_line``; consecutive
            entries on the same line are glued records (a ``G`` operation).
        entry_bytes: the stored JSON text of entry ``i`` (``ParsedSession.entry_bytes``).
        first_line: the line number the codec gave the first line of ``data``.
        header_line: the header's line when it is not the first (malformed lines
            skipped before it, kept verbatim as ``l`` operations); default ``first_line``.

    Returns:
        A :class:`FileShape` whose :func:`render_shape` over the same header and
        entries gives ``data`` back exactly (checked: this function renders and
        compares before returning).

    Raises:
        ShapeError: the lines do not match the entries (the codec and this
            function disagree on line numbers): never expected, reported, not guessed.
    """
    ops: list[tuple[Any, ...]] = []
    where: dict[int, list[int]] = {}
    for index, line in enumerate(entry_lines):
        where.setdefault(line, []).append(index)
    number = first_line
    expected = 0
    header_at = first_line if header_line is None else header_line
    for content, end in _physical_lines(data):
        raw = content + end
        if header_raw is not None and number < header_at:
            ops.append(("l", raw))  # a malformed line before the header, skipped by readers
        elif header_raw is not None and number == header_at:
            ops.append(("h", end) if content == header_raw else ("H", raw))
        else:
            found = where.get(number)
            if found is None:
                ops.append(("l", raw))
            elif len(found) > 1:
                if found != list(range(expected, expected + len(found))):
                    raise ShapeError(f"the glued entries on line {number} are not consecutive")
                expected += len(found)
                ops.append(("G", raw, len(found)))
            else:
                index = found[0]
                if index != expected:
                    raise ShapeError(f"entry {index} is on line {number}, after entry {expected - 1}")
                expected += 1
                if content == entry_bytes(index):
                    _push(ops, ("e", 1, end))
                else:
                    ops.append(("L", raw))
        number += 1
    if expected != len(entry_lines):
        raise ShapeError(f"{len(entry_lines) - expected} entries were not found on their lines")
    shape = FileShape(ops, len(data), hashlib.sha256(data).digest())
    rebuilt = render_shape(shape, header_raw, [entry_bytes(i) for i in range(len(entry_lines))])
    if rebuilt != data:
        raise ShapeError("the shape does not rebuild the bytes it was taken from")
    return shape


def render_shape(shape: FileShape, header_raw: bytes | None, entries: Sequence[bytes]) -> bytes:
    """The bytes ``shape`` describes, from the stored header and the file's entries.

    Args:
        shape: from :func:`shape_of` (or extended).
        header_raw: the stored header's JSON text (needed by an ``h`` operation).
        entries: the stored JSON text of the file's entries, in file order; at
            least :attr:`FileShape.entries` of them (the rest are ignored).

    Returns:
        The bytes; the caller compares their SHA-256 with :attr:`FileShape.sha256`.

    Raises:
        ShapeError: fewer entries than the shape consumes, or an ``h`` without a header.
    """
    if len(entries) < shape.entries:
        raise ShapeError(f"the shape needs {shape.entries} entries, the store has {len(entries)}")
    out: list[bytes] = []
    position = 0
    for op in shape.ops:
        kind = op[0]
        if kind == "h":
            if header_raw is None:
                raise ShapeError("the shape starts with the header line but no header was given")
            out += (header_raw, op[1])
        elif kind == "e":
            end = op[2]
            for text in entries[position:position + op[1]]:
                out += (text, end)
            position += op[1]
        elif kind == "L":
            out.append(op[1])
            position += 1
        elif kind == "G":
            out.append(op[1])
            position += op[2]
        else:
            out.append(op[1])
    return b"".join(out)
