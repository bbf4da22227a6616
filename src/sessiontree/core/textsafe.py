"""Text from sessions made safe to show: one rule for every human-readable field.

Session content is hostile. A tool result, a project path, an entry type or a
file name may hold terminal escape sequences (hyperlinks, title changes,
colours, cursor moves), characters that reorder what follows (bidi
overrides), or characters that are invisible. Written raw to a terminal they
can disguise or forge output; kept raw in a Markdown file they do the same
when the file is ``cat``-ed. Every front end passes such text through this
module before showing it (docs/terminal-output.md gives the policy).

The characters (:data:`UNSAFE`):

* C0 controls U+0000-U+001F (ESC, BEL, CR, backspace, NUL, ...) and DEL U+007F;
* C1 controls U+0080-U+009F (U+009B is a one-character CSI, U+009D an OSC);
* bidi controls: U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069;
* zero-width and invisible format characters: U+200B-U+200D, U+2060-U+2064
  and U+206A-U+206F, U+FEFF, the interlinear annotation marks U+FFF9-U+FFFB,
  and the tag characters U+E0000-U+E007F (invisible letters that can smuggle
  text past a reader);
* the line and paragraph separators U+2028 and U+2029 (some terminals and
  editors break lines there, so they can forge a line);
* lone surrogates U+D800-U+DFFF (JSON allows them; UTF-8 cannot encode them,
  so they would crash the output instead).

How they are shown: as a visible escape, never dropped, so a reader sees that
something is there: ``\\xNN`` below U+0100, ``\\uNNNN`` in the Basic
Multilingual Plane, ``\\UNNNNNNNN`` above it. Backslashes already in the text
are not doubled: the escaped form is for reading, not for decoding.

Two modes:

* :func:`safe_line` for one-line fields (names, paths, ids, types, headings,
  table cells, error messages): newline and tab are escaped too, so a field
  can never start a new line or jump columns.
* :func:`safe_block` for multi-line text blocks (message text, tool output,
  thinking, summaries): newline and tab are kept, everything else is escaped.
  CR is escaped (``\\r`` returns to the start of the line and can overwrite
  what was printed), so a CRLF file shows ``\\x0d`` at line ends.

JSON output keeps the values and changes only their spelling:
:func:`safe_json_text` rewrites the same characters as JSON ``\\uXXXX``
escapes (a surrogate pair above U+FFFF), which parse back to the same string.

Invariants: the result of :func:`safe_line` matches no :data:`UNSAFE`
character; :func:`safe_block` leaves only ``\\n`` and ``\\t``; escaping is
applied before any cutting to a width, so cutting can never split a
sequence; the functions never raise on any ``str``.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["CUT_UNITS", "UNSAFE", "cut_line", "is_safe", "safe_block", "safe_json_text", "safe_line", "shell_join",
           "shell_quote"]

#: Every character that is never written raw to a terminal or a Markdown file.
UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f"           # C0, DEL, C1
    "\u061c\u200b-\u200f"           # Arabic letter mark; zero-width space/non-joiner/joiner; LRM, RLM
    "\u2028-\u202e"                 # line/paragraph separators; bidi embeddings and overrides
    "\u2060-\u2064\u2066-\u206f"    # word joiner, invisible operators; bidi isolates; deprecated formats
    "\ufeff\ufff9-\ufffb"           # zero-width no-break space (BOM); interlinear annotations
    "\U000e0000-\U000e007f"         # tag characters
    "\ud800-\udfff]"                # lone surrogates
)
# The same minus newline and tab, for multi-line blocks.
_UNSAFE_IN_BLOCK = re.compile(UNSAFE.pattern.replace("\x00-\x1f", "\x00-\x08\x0b-\x1f", 1))


#: The ASCII characters :func:`safe_line` keeps (printable ones), and those :func:`safe_block`
#: keeps (newline and tab too), as bytes to delete: an ASCII text is safe when deleting
#: them leaves nothing. One pass in C instead of the regular expression's scan, and
#: most session text is ASCII; the regular expression still decides every other text.
_ASCII_KEPT_IN_LINE = bytes(range(0x20, 0x7F))
_ASCII_KEPT_IN_BLOCK = b"\t\n" + _ASCII_KEPT_IN_LINE


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _as_str(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def safe_line(value: Any) -> str:
    r"""``value`` (``str()`` of it when not a string) with every :data:`UNSAFE`
    character, newline and tab included, replaced by a visible escape.

    For one-line fields: ``safe_line("a\x1b[31m\nb")`` is the 14 characters
    ``a\x1b[31m\x0ab``. Never raises.
    """
    text = _as_str(value)
    if text.isascii() and not text.encode("ascii").translate(None, _ASCII_KEPT_IN_LINE):
        return text  # nothing to escape (the same result, without the scan)
    return UNSAFE.sub(_visible, text)


def safe_block(value: Any) -> str:
    """Like :func:`safe_line` but newline and tab are kept: for multi-line text
    blocks (message text, tool output). CR is escaped. Never raises."""
    text = _as_str(value)
    if text.isascii() and not text.encode("ascii").translate(None, _ASCII_KEPT_IN_BLOCK):
        return text  # nothing to escape (the same result, without the scan)
    return _UNSAFE_IN_BLOCK.sub(_visible, text)


#: What a cut keeps whole: one visible escape as :func:`safe_line` writes it (``\\x1b``,
#: ``\\u202e``, ``\\U000e0041``) or one character. A cut to a width is made after
#: escaping and on these units, so it never leaves half an escape (``\\u20…``).
CUT_UNITS = re.compile(r"\\x[0-9a-f]{2}|\\u[0-9a-f]{4}|\\U[0-9a-f]{8}|.", re.S)


def cut_line(text: str, limit: int) -> str:
    """``text`` (already escaped) in at most ``limit`` characters, ending in "…" when cut,
    never inside an escape (:data:`CUT_UNITS`). Terminal columns are cells, not characters:
    the command line cuts with ``cli.common.cut_right``, on the same units."""
    if len(text) <= limit:
        return text
    kept: list[str] = []
    used = 1  # the ellipsis
    for unit in CUT_UNITS.findall(text):
        used += len(unit)
        if used > limit:
            break
        kept.append(unit)
    return "".join(kept) + "…"


def is_safe(text: str, *, multiline: bool = False) -> bool:
    """Whether ``text`` may be shown as it is: no :data:`UNSAFE` character
    (with ``multiline``, newline and tab are allowed)."""
    return (_UNSAFE_IN_BLOCK if multiline else UNSAFE).search(text) is None


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def safe_json_text(text: str) -> str:
    """JSON text with every :data:`UNSAFE` character written as a ``\\uXXXX``
    escape (above U+FFFF as a surrogate pair); the result parses to the same value.

    ``text`` is valid JSON, possibly several values one per line (JSONL). In
    valid JSON a raw control character can only be whitespace between tokens
    (newline, tab, CR): newline and tab are kept, CR becomes a space (still
    whitespace, and it can no longer return the cursor over a line). Every
    other unsafe character can only sit inside a string, where the escape
    means the same character. Never raises.
    """
    text = text.replace("\r", " ")
    if text.isascii() and not text.encode("ascii").translate(None, _ASCII_KEPT_IN_BLOCK):
        return text  # the usual case, decided in C (sync --json of 1,000 files: 2.6 -> 0.2 ms)
    return _UNSAFE_IN_BLOCK.sub(_json_escape, text)


def _shell_byte_escapes(match: re.Match[str]) -> str:
    char = match.group()
    try:
        data = char.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        data = char.encode("utf-8", "surrogatepass")
    return "".join(f"\\x{byte:02x}" for byte in data)


def shell_quote(word: str) -> str:
    r"""``word`` as one shell word that is safe to print and means exactly ``word``.

    Without an :data:`UNSAFE` character: :func:`shlex.quote` (``'...'`` when needed). With
    one: ANSI-C quoting, ``$'...'``, each unsafe character written as the ``\xHH`` escapes of
    its UTF-8 bytes (a path's undecodable byte, kept by Python as a lone surrogate, as
    that byte), ``\`` and ``'`` escaped, so the terminal sees no control character and
    bash, zsh, ksh and a POSIX.1-2024 ``sh`` give the command back the same bytes
    (docs/agent-loop.md, "resume"). A NUL cannot be passed to a program at all: the caller
    refuses it first. Never raises.
    """
    import shlex

    if UNSAFE.search(word) is None:
        return shlex.quote(word)
    body = word.replace("\\", "\\\\").replace("'", "\\'")
    return "$'" + UNSAFE.sub(_shell_byte_escapes, body) + "'"


def shell_join(words: list[str]) -> str:
    """The words joined by spaces, each through :func:`shell_quote`."""
    return " ".join(shell_quote(word) for word in words)
