"""Reading a file's bytes into lines and records: the checker's first pass.

Lines are split on ``\\n`` only (docs/rules/decisions.md D-3). NUL bytes never
occur in valid JSON text, so runs of them are cut out of a line first; a
line that still does not parse is taken apart by
:func:`~sessiontree.check.salvage.decompose`. Records go to
:attr:`FileState.items <sessiontree.check.state.FileState.items>`. A
malformed line (not JSON, or not a JSON object) is dropped, its bytes in the
change, as readers skip it the way pi does (docs/sync.md, "Malformed
lines"); a record nested too deep, which readers refuse, is kept as written
(:class:`~sessiontree.check.state.Kept`), so it is still reported on the copy.

Line ends and the first line. A run of CRs before the LF (CRLF written
twice, or with NUL runs between the CR and the LF) is one CRLF end, so no CR
is left to make the copy's LF a CRLF again. A BOM at the start of a
malformed line before any record (a second BOM, or one that NUL runs had
split) would be the copy's leading BOM, which readers strip; it is removed
(``bom``) and the rest of the line is read as the line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from sessiontree.check.salvage import Piece, decompose, loads, salvage
from sessiontree.check.state import BLANK, BOM, UNKNOWN, FileState, Kept, Rec
from sessiontree.format import bounds, jsonio
from sessiontree.format.codec import split_lines

__all__ = ["read_lines"]

_NUL_RUN = re.compile(rb"\x00+")


def read_lines(state: FileState) -> None:
    """Fill ``state.items`` (and the salvage maps) from ``state.data``, reporting
    byte- and line-level problems (BOM, CRLF, blank lines, NUL runs, invalid
    UTF-8, glued, torn and malformed lines, the missing final newline) and the
    changes that repair them."""
    _LineReader(state).run()


class _LineReader:
    """The line pass over one file; keeps what only this pass needs."""

    def __init__(self, state: FileState) -> None:
        # The shared state's lists, dicts and reporting methods under short names.
        self.data = state.data
        self.items = state.items
        self.salvaged = state.salvaged
        self.kept_ids = state.kept_ids
        self.lost = state.lost
        self.problem = state.problem
        self.change = state.change
        self._crlf_lines: list[int] = []  # lines whose end was CR(s) + LF
        self.final_output = False  # the last record read ends the file without a newline

    def run(self) -> None:
        """Read every line, then report the file-wide CRLF and final-newline findings."""
        data = self.data
        if data.startswith(BOM):
            self.problem("bom", 1, "UTF-8 byte order mark at the start of the file (readers strip it)")
            self.change("bom", 1, "removed the UTF-8 byte order mark", dropped=BOM)
        lines, terminated = split_lines(data)
        try:
            data.decode("utf-8")
            valid_utf8 = True
        except UnicodeDecodeError:
            valid_utf8 = False
        has_nul = b"\x00" in data
        crlf_lines = self._crlf_lines
        for index, line in enumerate(lines):
            number = index + 1
            if not valid_utf8:
                self._check_utf8(number, line)
            if line.endswith(b"\r"):
                crlf_lines.append(number)
                # A run of CRs before the LF (a CRLF file converted twice) is
                # one line end: a CR left at the end of the line would make the
                # copy's LF a CRLF again.
                line = line.rstrip(b"\r")
            final = index == len(lines) - 1 and not terminated
            self._scan_line(number, line, final, has_nul)
        if crlf_lines:
            count = len(crlf_lines)
            self.problem("crlf", crlf_lines[0],
                         f"{count} line{'s' if count > 1 else ''} end with CRLF "
                         "(readers accept it; a rewrite writes LF)")
            self.change("crlf", crlf_lines[0], f"converted {count} CRLF line end{'s' if count > 1 else ''} to LF")
        if self.final_output:
            self.problem("missing-final-newline", len(lines),
                         "the last record has no newline after it (readers accept it)")
            self.change("missing-final-newline", len(lines), "added the final newline")

    def _check_utf8(self, number: int, line: bytes) -> None:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.problem("invalid-utf8", number,
                         f"invalid UTF-8 byte 0x{line[exc.start]:02x} at byte {exc.start} of the line "
                         "(readers replace invalid bytes with U+FFFD)")

    def _scan_line(self, number: int, line: bytes, final: bool, has_nul: bool) -> None:
        if not line.strip(BLANK):
            self.problem("blank-line", number, "whitespace-only line (readers skip it)")
            self.change("blank-line", number, "removed the whitespace-only line", dropped=line)
            return
        removed: list[tuple[int, int]] = []  # (offset in the line without NULs, run length)
        if has_nul and b"\x00" in line:
            # NUL bytes never belong to JSON text, so cutting them out first
            # also restores a record whose bytes were merely interleaved with them.
            for match in _NUL_RUN.finditer(line):
                size = match.end() - match.start()
                removed.append((match.start() - sum(length for _, length in removed), size))
                self.problem("nul-bytes", number,
                             f"run of {size} NUL byte{'s' if size > 1 else ''} at byte {match.start()} of the line "
                             "(left by a crash)")
                self.change("nul-bytes", number, f"removed {size} NUL byte{'s' if size > 1 else ''}",
                            dropped=match.group())
            line = _NUL_RUN.sub(b"", line)
            if not line.strip(BLANK):
                return  # nothing but NUL bytes (and whitespace)
            if line.endswith(b"\r"):
                # CRs that only NUL bytes kept from the LF ("\r\0\0\n"): a CRLF end too.
                if number not in self._crlf_lines:
                    self._crlf_lines.append(number)
                line = line.rstrip(b"\r")

        def in_line(offset: int) -> int:
            # Offsets in the original line, NUL runs included.
            return offset + sum(length for at, length in removed if at <= offset)

        self._read_line(number, line, final, in_line)

    def _read_line(self, number: int, line: bytes, final: bool, in_line: Callable[[int], int]) -> None:
        """Records, torn records or a kept malformed line from a non-blank line without NULs."""
        try:
            value = jsonio.loads(line)
        except jsonio.NestingError:
            # Readers refuse the record; it is kept as written, like a malformed line.
            self._add_kept(number, line, [Piece("value", 0, line)],
                           f"record nested more than {jsonio.MAX_DEPTH} levels deep (readers reject the file)",
                           final, code="nesting-too-deep")
            return
        except ValueError:
            value = None
        if isinstance(value, dict):  # the common case: one record on its line
            self._add_record(number, line, value, final)
            return
        pieces = decompose(line, in_line)
        values: list[tuple[Piece, dict[str, Any]]] = []
        reason: str | None = None
        for piece in pieces:
            if piece.kind == "value":
                value, error = loads(piece.data)
                if error is not None:
                    reason = reason or f"malformed line: not valid JSON ({error})"
                elif not isinstance(value, dict):
                    reason = reason or "malformed line: not a JSON object"
                else:
                    values.append((piece, value))
            elif piece.kind == "junk" and not (final and piece is pieces[-1]):
                reason = reason or f"malformed line: not valid JSON ({piece.error})"
        if reason is not None:
            if not self.items and line.startswith(BOM):
                self._strip_leading_bom(number, line, final, in_line)
                return
            self._add_kept(number, line, pieces, reason, final)
            return
        if len(values) > 1:
            self.problem("glued-records", number,
                         f"{len(values)} complete records on one line with no newline between them")
            self.change("glued-records", number, f"split {len(values)} glued records onto separate lines")
        for piece in pieces:
            if piece.kind == "value":
                continue
            fields = salvage(piece.data)
            entry_id = fields.get("id") if isinstance(fields.get("id"), str) and fields.get("id") else None
            self._remember_salvage(entry_id, number, fields, kept=False)
            size = len(piece.data)
            if piece.kind == "fragment":
                self.problem("torn-record", number,
                             f"torn record: {size} bytes of incomplete JSON at byte {piece.start} of the line, "
                             "followed on the same line by a record written after it", entry_id)
                self.change("torn-record", number, f"dropped the {size}-byte torn record", entry_id, piece.data)
            else:
                self.problem("torn-final-record", number,
                             f"torn final record: the last line is incomplete JSON with no newline "
                             f"({size} bytes at byte {piece.start} of the line)", entry_id)
                self.change("torn-final-record", number, f"dropped the {size}-byte torn final record",
                            entry_id, piece.data)
        for piece, value in values:
            # A record followed by a dropped torn tail is not "missing" its newline.
            self._add_record(number, piece.data, value, final and piece is pieces[-1])

    def _strip_leading_bom(self, number: int, line: bytes, final: bool, in_line: Callable[[int], int]) -> None:
        """A malformed line the copy would begin with starts with a BOM (a
        second one, or one that NUL runs had split): as the copy's first bytes
        it would be read as the file's BOM, so it is removed now and the rest
        of the line read as the line."""
        rest = line
        while rest.startswith(BOM):
            rest = rest[len(BOM):]
        size = len(line) - len(rest)
        self.problem("bom", number,
                     "UTF-8 byte order mark at the start of a malformed line before any record "
                     "(a copy that begins with this line would read it as the file's byte order mark)")
        self.change("bom", number, "removed the UTF-8 byte order mark from the start of the malformed line",
                    dropped=line[:size])
        if not rest.strip(BLANK):
            self.problem("blank-line", number, "whitespace-only line (readers skip it)")
            self.change("blank-line", number, "removed the whitespace-only line", dropped=rest)
            return
        self._read_line(number, rest, final, lambda offset: in_line(offset + size))

    def _add_record(self, number: int, raw: bytes, obj: dict[str, Any], final: bool) -> None:
        limit = bounds.MAX_RECORD_BYTES  # the one limit import refuses above
        if len(raw) > limit:
            entry_id = obj.get("id")
            self.problem("record-too-large", number,
                         f"a record of {len(raw):,} bytes: over the {limit:,} bytes one stored record may hold "
                         "(SQLite's string and BLOB limit); import refuses it",
                         entry_id if isinstance(entry_id, str) else None)
        self.items.append(Rec(number, raw, obj))
        self.final_output = final

    def _add_kept(self, number: int, line: bytes, pieces: list[Piece], reason: str, final: bool,
                  code: str = "malformed-line") -> None:
        # A malformed line is skipped by readers, as pi skips it (docs/check.md): the copy
        # leaves it out (its bytes are in the change), and an id readable on it is lost, so
        # entries below it are re-parented past it. A record nested too deep is refused,
        # not skipped: kept as written.
        dropped = code == "malformed-line"
        entry_id = None
        for piece in pieces:
            fields = salvage(piece.data)
            found = fields.get("id")
            if isinstance(found, str) and found:
                entry_id = entry_id or found
                self._remember_salvage(found, number, fields, kept=not dropped)
        if dropped:
            self.problem(code, number, f"{reason}; readers skip the line, as pi does", entry_id)
            self.change(code, number, "dropped the malformed line (readers skip it)", entry_id, line)
            return
        self.problem(code, number, reason, entry_id)
        self.items.append(Kept(number, line))
        self.final_output = final

    def _remember_salvage(self, entry_id: str | None, number: int, fields: dict[str, Any], kept: bool) -> None:
        if not entry_id:
            return
        parent = fields.get("parentId", UNKNOWN)
        if entry_id not in self.salvaged:
            self.salvaged[entry_id] = (number, parent, kept)
        if kept:
            self.kept_ids.setdefault(entry_id, number)
        elif entry_id not in self.lost:
            self.lost[entry_id] = (number, parent)
