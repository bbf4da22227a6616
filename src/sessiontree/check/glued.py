"""Reading a session file whose records are glued, without changing the file.

An agent that loses a newline writes two (or more) complete records on one
line: ``{...}{...}\\n``. The strict reader (:func:`~sessiontree.format.codec.parse_session`)
rejects such a file whole; the checker reports the line as ``glued-records``
(:mod:`sessiontree.check.reader`). ``sync`` and ``import`` read it anyway
(docs/sync.md, "Glued records"): :func:`parse_unglued` splits exactly the
lines the checker recognises as glued (every piece a complete JSON object
that looks like a record, nothing else on the line) and parses the result
with the strict reader, so every other format rule still applies. A line
with anything else on it (a torn record, junk, a value that is not a record)
is left as it is, and the strict reader's error stands: ambiguous lines are
refused, never guessed.

The entries' line numbers (:attr:`ParsedSession.lines`) are the file's own:
the records of a glued line all report that line, which is how the file's
shape keeps the line verbatim (:mod:`sessiontree.format.shape`, ``G``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sessiontree.check.salvage import _looks_like_record, decompose, loads
from sessiontree.errors import InvalidSessionError
from sessiontree.format import jsonio
from sessiontree.format.codec import ParsedSession, parse_session

__all__ = ["GlueSplit", "parse_unglued", "split_glued"]


@dataclass
class GlueSplit:
    """Glued lines read apart.

    Attributes:
        data: the bytes with each glued line's records on lines of their own.
        origin: for each line of ``data`` (0-based), the 1-based line of the
            original bytes it came from (counted from ``first_line``).
        glued: ``(line, records)`` for each glued line, in file order.
    """

    data: bytes
    origin: list[int] = field(default_factory=list)
    glued: list[tuple[int, int]] = field(default_factory=list)

    def line_of(self, line: int | None, first_line: int = 1) -> int | None:
        """The original line of ``line`` of :attr:`data` (both counted from ``first_line``)."""
        if line is None:
            return None
        index = line - first_line
        return self.origin[index] if 0 <= index < len(self.origin) else line

    def note(self, offset: int = 0) -> str:
        """One line for the user: which lines held glued records (each plus ``offset``: the
        lines before the bytes that were split); the file is not changed."""
        records = sum(count for _, count in self.glued)
        where = ", ".join(str(line + offset) for line, _ in self.glued[:5])
        if len(self.glued) > 5:
            where += f" and {len(self.glued) - 5} more"
        lines = "line" if len(self.glued) == 1 else "lines"
        return (f"read {records} glued records apart ({lines} {where}: no newline between records); "
                "the agent's file is left as it is (`sessiontree check FILE` shows the lines)")


def _glued_pieces(content: bytes) -> list[bytes] | None:
    """The records of a glued line, or ``None`` when the line is not exactly glued records."""
    try:
        jsonio.loads(content)
        return None  # one value: not glued (whatever else is wrong, the strict reader says)
    except ValueError:
        pass
    pieces = decompose(content, lambda offset: offset)
    if len(pieces) < 2 or any(piece.kind != "value" for piece in pieces):
        return None
    for piece in pieces:
        value, error = loads(piece.data)
        if error is not None or not _looks_like_record(value):
            return None
    return [piece.data for piece in pieces]


def split_glued(data: bytes, *, first_line: int = 1, has_header: bool = True) -> GlueSplit | None:
    """Put each record of every glued line on a line of its own.

    Args:
        data: a file's bytes (or bytes appended after a consumed prefix).
        first_line: the line number of the first line of ``data``.
        has_header: ``data`` starts with the header line, which is never split
            (a header glued to an entry is refused: which line is the header
            would be a guess).

    Returns:
        The split bytes and where each line came from, or ``None`` when no line
        is glued records.
    """
    out: list[bytes] = []
    origin: list[int] = []
    glued: list[tuple[int, int]] = []
    start = 0
    number = first_line
    size = len(data)
    while start < size:
        cut = data.find(b"\n", start)
        end = size if cut < 0 else cut + 1
        line = data[start:end]
        ending = b"\r\n" if line.endswith(b"\r\n") else b"\n" if line.endswith(b"\n") else b""
        content = line[:len(line) - len(ending)]
        pieces = None
        if content.strip() and not (has_header and number == first_line):
            pieces = _glued_pieces(content)
        if pieces is None:
            out.append(line)
            origin.append(number)
        else:
            glued.append((number, len(pieces)))
            for i, piece in enumerate(pieces):
                out.append(piece + (ending if i == len(pieces) - 1 else (ending or b"\n")))
                origin.append(number)
        number += 1
        start = end
    if not glued:
        return None
    return GlueSplit(b"".join(out), origin, glued)


def parse_unglued(data: bytes, path: str | None = None) -> tuple[ParsedSession, GlueSplit | None]:
    """:func:`parse_session`, reading glued records apart when that is what stops it.

    Args:
        data: the bytes to parse (a whole file, or a header line plus appended lines).
        path: for error messages.

    Returns:
        ``(parsed, split)``: ``split`` is ``None`` when the file needed nothing;
        else the entries' :attr:`~ParsedSession.lines` are the original lines.

    Raises:
        InvalidSessionError: the file is invalid even with glued lines read apart
            (its ``line`` is a line of the original bytes).
    """
    try:
        return parse_session(data, path), None
    except InvalidSessionError as exc:
        split = split_glued(data)
        if split is None:
            raise
        failure = exc
    try:
        parsed = parse_session(split.data, path)
    except InvalidSessionError as again:
        raise InvalidSessionError(again.reason, path, split.line_of(again.line)) from failure
    parsed.lines = [split.line_of(line) or line for line in parsed.lines]
    return parsed, split
