"""Reading a damaged session file the way ``check`` reads it, without changing the file.

The strict reader (:func:`~sessiontree.format.codec.parse_session`) refuses a
file whole at its first damaged line. ``sync`` and ``import`` read through
:func:`parse_unglued` instead, which, only when the strict reader refuses,
takes every line exactly as the checker's line pass does
(:mod:`sessiontree.check.reader`), so ``check``, ``sync`` and ``import`` agree
on every file (docs/check.md, column "import"), then parses the result with
the strict reader, so every other format rule still applies:

* **Glued records** (docs/sync.md, "Glued records"): an agent that loses a
  newline writes two or more complete records on one line (``{...}{...}``);
  they are read apart, each reporting that line, which is how the file's
  shape keeps the line verbatim (:mod:`sessiontree.format.shape`, ``G``). A
  header followed by entries on its line is read apart too.
* **Torn records and NUL runs** left by a crash: an incomplete record
  followed on its line by complete ones, or NUL bytes in a line, are dropped
  and the complete records read (as ``check --repair`` keeps them); the line
  stays verbatim in the shape (``L`` or ``G``).
* **Malformed lines** (docs/sync.md, "Malformed lines"): a complete line,
  newline included, that is not JSON or not a JSON object is skipped the way
  pi skips it (pi's session loader parses each line and drops the ones
  ``JSON.parse`` refuses), also before the header; the skipped lines are
  listed (:attr:`GlueSplit.skipped`) and, having no entry, stay in the
  file's shape verbatim (an ``l`` operation), so ``restore`` and ``archive``
  give the file back byte for byte.

Left to the strict reader's error: a last line without its newline (a torn
final record: an agent may still be writing it), a record nested too deep,
a piece that is no entry, and a file in which no line is a header (then the
first error the strict reader found is raised, with its line).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sessiontree.check.salvage import decompose, loads
from sessiontree.errors import InvalidSessionError
from sessiontree.format import jsonio
from sessiontree.format.codec import ParsedSession, parse_session

__all__ = ["GlueSplit", "parse_unglued", "split_glued"]

_NUL_RUN = re.compile(rb"\x00+")
_JSON_WS = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"


@dataclass
class GlueSplit:
    """Glued lines read apart.

    Attributes:
        data: the bytes with each glued line's records on lines of their own.
        origin: for each line of ``data`` (0-based), the 1-based line of the
            original bytes it came from (counted from ``first_line``).
        glued: ``(line, records)`` for each glued line, in file order.
        skipped: ``(line, reason)`` for each malformed line left out of :attr:`data`.
        header_line: the line of the header (the first line that is neither blank nor
            malformed), when ``data`` starts with one; malformed lines before it are
            skipped too, as pi's loader skips them.
        torn: lines where an incomplete record or a NUL run (a crash mid-write) was
            dropped before or around the complete records on the same line, which are
            read (as ``check --repair`` keeps them).
    """

    data: bytes
    origin: list[int] = field(default_factory=list)
    glued: list[tuple[int, int]] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)
    header_line: int | None = None
    torn: list[int] = field(default_factory=list)

    def line_of(self, line: int | None, first_line: int = 1) -> int | None:
        """The original line of ``line`` of :attr:`data` (both counted from ``first_line``)."""
        if line is None:
            return None
        index = line - first_line
        return self.origin[index] if 0 <= index < len(self.origin) else line

    def note(self, offset: int = 0) -> str:
        """One line for the user: which lines held glued records and which malformed lines
        were skipped (each line plus ``offset``: the lines before the bytes that were
        split); the file is not changed."""
        parts: list[str] = []
        if self.glued:
            records = sum(count for _, count in self.glued)
            lines = "line" if len(self.glued) == 1 else "lines"
            parts.append(f"read {records} glued records apart ({lines} "
                         f"{_where([line for line, _ in self.glued], offset)}: no newline between records)")
        if self.torn:
            lines = "line" if len(self.torn) == 1 else "lines"
            parts.append(f"read the records of {lines} {_where(self.torn, offset)} without the torn record "
                         "or NUL bytes a crash left there")
        if self.skipped:
            count = len(self.skipped)
            lines = "line" if count == 1 else "lines"
            parts.append(f"skipped {count} malformed {lines} as pi does "
                         f"({lines} {_where([line for line, _ in self.skipped], offset)}: "
                         f"{self.skipped[0][1]}), kept verbatim for restore")
        return "; ".join(parts) + ("; the agent's file is left as it is (`sessiontree check FILE` shows the "
                                   "lines)")


def _where(lines: list[int], offset: int) -> str:
    """Up to five line numbers (each plus ``offset``), then how many more."""
    where = ", ".join(str(line + offset) for line in lines[:5])
    if len(lines) > 5:
        where += f" and {len(lines) - 5} more"
    return where


def _is_header(record: bytes) -> bool:
    """Whether a record's bytes are a JSON object with ``"type": "session"``."""
    value, _ = loads(record)
    return isinstance(value, dict) and value.get("type") == "session"


def _reading(content: bytes, final: bool) -> tuple[str, list[bytes], str | None] | None:
    """How readers take a non-blank line other than the header, exactly as the checker's
    line pass does (:mod:`sessiontree.check.reader`), so ``sync``/``import`` and ``check``
    agree on every line:

    * ``None``: leave the line to the strict reader (one JSON object, a record nested
      too deep, or a torn last line without newline: refused, or left pending by sync);
    * ``("skip", [], reason)``: a malformed line, skipped as pi skips it;
    * ``("split", records, torn)``: complete records glued on the line, read apart
      (``torn`` says when incomplete records before them were dropped)."""
    try:
        value = jsonio.loads(content)
    except jsonio.NestingError:
        return None
    except ValueError:
        pass
    else:
        return None if isinstance(value, dict) else ("skip", [], "not a JSON object")
    pieces = decompose(content, lambda offset: offset)
    records: list[bytes] = []
    reason: str | None = None
    torn = 0
    for piece in pieces:
        if piece.kind == "value":
            found, error = loads(piece.data)
            if error is not None:
                reason = reason or f"not valid JSON ({error})"
            elif not isinstance(found, dict):
                reason = reason or "not a JSON object"
            else:
                records.append(piece.data)
        elif piece.kind == "junk" and not (final and piece is pieces[-1]):
            reason = reason or f"not valid JSON ({piece.error})"
        else:
            torn += 1
    if reason is not None:
        return "skip", [], reason
    if final and pieces and pieces[-1].kind == "junk":
        return None  # a torn final record: the strict reader's error stands
    if not records:
        return "skip", [], "a torn record"
    return "split", records, f"{torn} torn record{'s' if torn > 1 else ''} dropped" if torn else None


def split_glued(data: bytes, *, first_line: int = 1, has_header: bool = True) -> GlueSplit | None:
    """Put each record of every glued line on a line of its own, and leave out every
    malformed line (module docstring).

    Args:
        data: a file's bytes (or bytes appended after a consumed prefix).
        first_line: the line number of the first line of ``data``.
        has_header: ``data`` starts with the header line (after any malformed
            lines, which are skipped); entries glued after the header on its line
            are read apart, as the checker reads them.

    Returns:
        The split bytes and where each line came from, or ``None`` when no line
        is glued records or malformed.
    """
    out: list[bytes] = []
    origin: list[int] = []
    glued: list[tuple[int, int]] = []
    skipped: list[tuple[int, str]] = []
    torn: list[int] = []
    rewritten = False  # a header line read past its byte order marks
    header_line: int | None = None
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
        reason = None
        final = not ending and end == size
        cleaned = content
        if b"\x00" in content:
            # NUL runs never belong to JSON text: cut out first, as the checker does.
            cleaned = _NUL_RUN.sub(b"", content).rstrip(b"\r")
        if content.strip() and has_header and header_line is None:
            # The header is never split; malformed lines before it are skipped, as pi does.
            # Byte order marks before it are read past, as the checker reads them.
            while cleaned.startswith(_BOM):
                cleaned = cleaned[len(_BOM):]
            found = _reading(cleaned, final) if cleaned.strip() else ("skip", [], "NUL bytes only")
            if found is not None and found[0] == "skip" and not final:
                reason = found[2]
            elif found is not None and found[0] == "split" and not _is_header(found[1][0]):
                header_line = number  # records glued with no header first: the strict reader refuses
            elif found is not None and found[0] == "split":
                # The header with entries glued after it, as the checker reads the line.
                header_line = number
                pieces = found[1]
                if found[2]:
                    torn.append(number)
            else:
                header_line = number
                if cleaned is not content:
                    pieces = [cleaned.strip(_JSON_WS)]
                    rewritten = True
                    if b"\x00" in content:
                        torn.append(number)
        elif content.strip():
            found = _reading(cleaned, final) if cleaned.strip() else ("skip", [], "NUL bytes only")
            if found is not None and found[0] == "skip":
                reason = found[2]
            elif found is not None:
                pieces = found[1]
                if found[2]:
                    torn.append(number)
            elif cleaned is not content:
                pieces = [cleaned.strip(_JSON_WS)]
                torn.append(number)
        if reason is not None:
            skipped.append((number, reason))
        elif pieces is None:
            out.append(line)
            origin.append(number)
        else:
            if len(pieces) > 1:
                glued.append((number, len(pieces)))
            for i, piece in enumerate(pieces):
                out.append(piece + (ending if i == len(pieces) - 1 else (ending or b"\n")))
                origin.append(number)
        number += 1
        start = end
    if not glued and not skipped and not torn and not rewritten:
        return None
    return GlueSplit(b"".join(out), origin, glued, skipped, header_line if has_header else None, torn)


def parse_unglued(data: bytes, path: str | None = None) -> tuple[ParsedSession, GlueSplit | None]:
    """:func:`parse_session`, reading glued records apart and skipping malformed lines
    (as pi does) when that is what stops it.

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
        if split.skipped and (again.line is None or split.header_line is None
                              or split.line_of(again.line) == split.header_line):
            # Nothing left reads as a session (no header once malformed lines are skipped):
            # the file is refused with what first stopped the strict reader.
            raise failure from None
        raise InvalidSessionError(again.reason, path, split.line_of(again.line)) from failure
    parsed.lines = [split.line_of(line) or line for line in parsed.lines]
    return parsed, split
