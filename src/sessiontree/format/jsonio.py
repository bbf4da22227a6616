"""JSON encoding and decoding, as the format needs it.

Invariants:

* Records are written exactly as the original agent's ``JSON.stringify``
  writes them (docs/rules/format.md E.1, §2.6; the rules in ``docs/format-bytes.md``):
  compact, non-ASCII and U+2028/U+2029 raw, JavaScript number text
  (``0.000009``, ``1e+21``, ``1`` for ``1.0``), canonical array-index keys
  (``"0"`` .. ``"4294967294"``) first in ascending order, then the others in
  insertion order, lone UTF-16 surrogates as lowercase ``\\udxxx`` escapes.
  :func:`dumps` is the one serialiser every JSONL write path uses.
* ``orjson`` is the fast path both ways. Its string escaping is
  ``JSON.stringify``'s; its number text is not, so :func:`dumps` rewrites the
  few number tokens that differ (found by one walk over the containers, which
  never looks into strings) and re-serialises objects with integer-like keys. orjson refuses strings
  holding lone surrogates (left by truncations that counted UTF-16 units),
  integers beyond 64 bits and nesting beyond 255 levels; those values go
  through :func:`js_stringify`, the exact (slower, iterative) serialiser.
* :func:`loads` falls back to the standard library for lone-surrogate escapes
  and invalid UTF-8, which orjson refuses, so nothing is lost either way.
* One nesting limit, :data:`MAX_DEPTH` (512 levels), for reading and
  writing alike: :func:`loads` and :func:`dumps` refuse deeper values with
  :class:`NestingError` (a ``ValueError``) instead of running into
  ``RecursionError`` in a fallback, and every walk here is iterative.
  512 is below what orjson reads (1024) and what JavaScript's ``JSON.parse``
  handles, so any file we accept the original agent reads too.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from json.encoder import encode_basestring as _encode_basestring
from typing import Any

import orjson

__all__ = [
    "MAX_DEPTH",
    "NestingError",
    "depth",
    "dumps",
    "dumps_str",
    "js_key_order",
    "js_number",
    "js_stringify",
    "loads",
    "orjson_text_is_exact",
    "parse_int",
    "sorted_keys",
    "utf16_len",
]

_SURROGATE = re.compile("[\ud800-\udbff][\udc00-\udfff]|[\ud800-\udfff]")


def parse_int(text: str) -> int | float:
    """An integer literal as orjson reads it: an ``int`` within 64 bits (signed or
    unsigned), a ``float`` beyond, so that both parsers give the same value."""
    value = int(text)
    # float of the text, not of the int: past 1.8e308 it is infinity (as orjson and JavaScript
    # read it), where float(int) raises OverflowError.
    return value if -(2 ** 63) <= value < 2 ** 64 else float(text)

_MAX_SAFE_INTEGER = 2**53 - 1  # Number.MAX_SAFE_INTEGER

#: The deepest JSON value sessiontree reads or writes, in levels of arrays and
#: objects: ``0`` is 0 deep, ``{}`` 1, ``{"a":[1]}`` 2; a record's own object
#: counts as level 1. Deeper records are refused when read (a file error
#: naming the line; ``check`` code ``nesting-too-deep``) and when appended.
MAX_DEPTH = 512


class NestingError(ValueError):
    """A JSON value is nested deeper than :data:`MAX_DEPTH` levels.

    A ``ValueError``, like every other "not valid JSON data" error of this
    module; readers turn it into an ``InvalidSessionError`` with file and line.
    """

    def __init__(self, limit: int = MAX_DEPTH) -> None:
        self.limit = limit
        super().__init__(f"JSON nested more than {limit} levels deep")


def depth(value: Any, limit: int | None = None) -> int:
    """How many levels of arrays and objects ``value`` nests (0 for a scalar).

    Iterative, so any depth is measured without recursion. With ``limit``,
    the walk stops at the first level beyond it and returns ``limit + 1``.
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if level > deepest:
            deepest = level
            if limit is not None and deepest > limit:
                return deepest
        stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list, tuple)))
    return deepest


def _may_exceed(data: bytes | str) -> bool:
    """Cheap pre-test: a value deeper than MAX_DEPTH needs more than MAX_DEPTH
    opening brackets, so almost every line skips the walk of :func:`depth`."""
    if len(data) <= 2 * MAX_DEPTH:
        return False
    if isinstance(data, bytes):
        return data.count(b"[") + data.count(b"{") > MAX_DEPTH
    return data.count("[") + data.count("{") > MAX_DEPTH


def loads(data: bytes | str) -> Any:
    """Parse one JSON document.

    Args:
        data: UTF-8 bytes or text of exactly one JSON value (surrounding JSON
            whitespace, including a trailing ``\\r``, is allowed).

    Returns:
        The parsed value (dict, list, str, int, float, bool or None). Strings
        may contain lone surrogates when the text escaped them.

    Raises:
        NestingError: the value nests more than :data:`MAX_DEPTH` levels.
        ValueError: the text is not one valid JSON value.
    """
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if str(exc).startswith("depth limit exceeded"):  # orjson stops at 1024 levels
            raise NestingError() from None
        value = _loads_fallback(data)
    if _may_exceed(data) and depth(value, MAX_DEPTH) > MAX_DEPTH:
        raise NestingError()
    return value


def _loads_fallback(data: bytes | str) -> Any:
    """The standard library's parse, for what orjson refuses (lone surrogates, invalid UTF-8)."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    # json.loads accepts NaN/Infinity, which JSON forbids; refuse them.
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_int=parse_int)
    except RecursionError:  # its recursive parser gave up: deeper than we accept anyway
        raise NestingError() from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON constant {name}")


def _escape_surrogates(text: str) -> str:
    """``text`` with lone surrogates as ``\\udxxx`` escapes and adjacent high+low
    surrogate code points joined into the one character they encode (a JavaScript
    string cannot tell the two apart; ``JSON.stringify`` writes the character raw)."""
    return _SURROGATE.sub(_surrogate_text, text)


def _surrogate_text(match: re.Match[str]) -> str:
    found = match.group()
    if len(found) == 2:
        return chr(0x10000 + ((ord(found[0]) - 0xD800) << 10) + (ord(found[1]) - 0xDC00))
    return f"\\u{ord(found):04x}"


# orjson's number text differs from JavaScript's for exponent forms (orjson: 9e-6, 1e+16;
# JS: fixed notation for 1e-7 <= |x| < 1e21), integer-valued floats (orjson: 1.0, -0.0;
# JS: 1, 0) and integers beyond 2**53 - 1 in magnitude (a JS number is a double: it prints
# the double the integer rounds to). orjson writes fixed notation only for
# 1e-5 <= |x| < 1e16, with the shortest round-trip digits, which is what JS writes too.
# So a float needs rewriting unless 1e-5 <= |x| < 1e16 and x is not integral.
_BEFORE_VALUE = frozenset(b":,[")
_AFTER_VALUE = frozenset(b",}]")
_str_isdigit = str.isdigit
# Small caches (cleared when full): the same few numbers recur across records
# (per-token costs such as 0.000009), and formatting one is the costly step.
_CACHE_SIZE = 4096
_ORJSON_TEXT: dict[float, bytes] = {}  # nonzero finite float -> orjson's text
_JS_TEXT: dict[bytes, bytes] = {}  # orjson's number text -> JavaScript's


def _orjson_text(number: float) -> bytes:
    text = _ORJSON_TEXT.get(number)
    if text is None:
        text = orjson.dumps(number)
        if len(_ORJSON_TEXT) >= _CACHE_SIZE:
            _ORJSON_TEXT.clear()
        _ORJSON_TEXT[number] = text
    return text


def dumps(value: Any) -> bytes:
    """Serialize ``value`` as one compact JSON record, exactly as ``JSON.stringify`` would.

    Args:
        value: JSON data: dict (str keys), list or tuple, str, int, float, bool,
            None. (The fast path also accepts what ``orjson`` serialises natively.)

    Returns:
        UTF-8 bytes, no trailing newline, byte-identical to what
        ``JSON.stringify(value)`` gives in JavaScript for the same data
        (``docs/format-bytes.md``): JavaScript number text (``0.000009``,
        ``1e+21``, ``1e-7``, ``1`` for ``1.0``, ``0`` for ``-0.0``, NaN and
        infinities as ``null``; integers beyond 2**53 as the double they round to,
        which is what ``JSON.stringify(JSON.parse(text))`` writes); canonical
        array-index keys first in ascending order, then the others in insertion
        order; only ``"``, ``\\`` and control characters escaped; lone surrogates
        as ``\\udxxx``; non-ASCII, U+2028 and U+2029 raw.

    Raises:
        NestingError: ``value`` nests more than :data:`MAX_DEPTH` levels.
        ValueError: values that are not JSON data (e.g. a set or an object).

    Rule: ``orjson.dumps`` first (its string escaping is JavaScript's). One walk over
    the containers (strings are not looked into) collects the numbers whose orjson
    text JavaScript writes differently and notes digit-only keys; most records have
    neither and are returned as orjson wrote them. Otherwise objects with array-index
    keys are rebuilt in JavaScript order and serialised again, and each collected
    number's orjson text is replaced where it stands as a value (not inside a string).
    Values orjson refuses (lone surrogates, integers beyond 64 bits, nesting beyond
    255 levels, non-string keys) are serialised by :func:`js_stringify`.
    """
    try:
        out = orjson.dumps(value)
    except TypeError:
        return _js_stringify_bytes(value)
    first = out[0]
    if first != 123 and first != 91:  # not "{" or "[": a scalar
        if first == 45 or 48 <= first <= 57:  # "-" or a digit: a number
            return js_number(float(out) if b"." in out or b"e" in out else int(out)).encode("ascii")
        return out
    tokens: dict[bytes, int] = {}
    if _audit(value, tokens):
        ordered = _js_ordered(value)
        if ordered is not value:
            out = orjson.dumps(ordered)
    if tokens:
        return _fix_numbers(out, tokens)
    return out


def sorted_keys(value: Any) -> Any:
    """``value`` with the keys of every object (dict) sorted by code point, lists walked, other
    values as they are: :func:`dumps` of it is a canonical text, so key order never makes
    two equal values differ (the same order as ``orjson.OPT_SORT_KEYS``)."""
    if isinstance(value, dict):
        return {key: sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sorted_keys(item) for item in value]
    return value


def orjson_text_is_exact(value: Any) -> bool:
    """Whether ``orjson.dumps`` of ``value`` (a dict, list or tuple orjson serialised, with
    or without ``OPT_SORT_KEYS``) is already what :func:`dumps` writes for it (and for the
    same value with its keys reordered): no number whose text JavaScript writes
    differently and no all-digit key. One walk over the containers; strings are not
    looked into."""
    tokens: dict[bytes, int] = {}
    return not _audit(value, tokens) and not tokens


def _audit(value: Any, tokens: dict[bytes, int]) -> bool:
    """Walk a dict/list/tuple orjson has serialised: count in ``tokens`` orjson's text
    of every number JavaScript writes differently (text -> occurrences as a value);
    return whether a key is all digits. Strings are never looked into. (Recursion is
    bounded: orjson refuses nesting beyond 255 levels.)"""
    if isinstance(value, dict):
        digit_key = any(map(_str_isdigit, value))  # orjson refused non-string keys
        items: Any = value.values()
    else:
        digit_key = False
        items = value
    for item in items:
        kind = type(item)
        if kind is str:
            continue
        if kind is int:
            if not -_MAX_SAFE_INTEGER <= item <= _MAX_SAFE_INTEGER:
                text = orjson.dumps(item)
                tokens[text] = tokens.get(text, 0) + 1
        elif kind is float:
            if (1e-5 <= item < 1e16 or -1e16 < item <= -1e-5) and not item.is_integer():
                continue
            if item - item == 0:  # finite (orjson and JS both write NaN and infinities as null)
                # 0.0 and -0.0 are equal as dict keys but differ in text
                text = (b"-0.0" if math.copysign(1.0, item) < 0 else b"0.0") if item == 0 else _orjson_text(item)
                tokens[text] = tokens.get(text, 0) + 1
        elif kind is dict or kind is list or kind is tuple:
            digit_key = _audit(item, tokens) or digit_key
        elif item is None or kind is bool:
            continue
        elif isinstance(item, (dict, list, tuple)):
            digit_key = _audit(item, tokens) or digit_key
        elif isinstance(item, (int, float)):
            # int and float subclasses (IntEnum, ...): orjson writes the number
            text = orjson.dumps(item)
            if text != js_number(item).encode("ascii"):
                tokens[text] = tokens.get(text, 0) + 1
    return digit_key


def _js_stringify_bytes(value: Any) -> bytes:
    # orjson refused the value (it may be nested past its 255 levels): the one
    # nesting limit applies to writing too. Lone surrogates are escaped by
    # js_stringify, so the text encodes as UTF-8.
    if depth(value, MAX_DEPTH) > MAX_DEPTH:
        raise NestingError()
    return js_stringify(value).encode("utf-8")


def _fix_numbers(out: bytes, tokens: dict[bytes, int]) -> bytes:
    """orjson output (an object or array) with each orjson number text in ``tokens``
    replaced by JavaScript's text wherever it stands as a value.

    ``tokens`` maps each text to how often it occurs as a value. Candidates are the
    occurrences after ``:`` ``,`` ``[`` and before ``,`` ``}`` ``]``: every real
    value is one, and when there are exactly as many as expected they are exactly the
    values. Only otherwise (the same text inside a string, e.g. ``"a:9e-6,"``) are
    strings told apart, by quote parity.
    """
    size = len(out)
    spans: list[tuple[int, int, bytes]] = []
    ambiguous: list[tuple[int, int, bytes]] = []
    for token, expected in tokens.items():
        replacement = _JS_TEXT.get(token)
        if replacement is None:
            replacement = js_number(float(token) if b"." in token or b"e" in token else int(token)).encode("ascii")
            if len(_JS_TEXT) >= _CACHE_SIZE:
                _JS_TEXT.clear()
            _JS_TEXT[token] = replacement
        length = len(token)
        found = []
        at = out.find(token)
        while at >= 0:
            end = at + length
            if out[at - 1] in _BEFORE_VALUE and end < size and out[end] in _AFTER_VALUE:
                found.append((at, end, replacement))
            at = out.find(token, end)
        (spans if len(found) == expected else ambiguous).extend(found)
    if ambiguous:
        # A '"' is real (not part of a string's content) unless escaped; blank out
        # escaped backslashes, then escaped quotes (same length), and count the rest:
        # a candidate is outside every string when an even number of real quotes precede it.
        plain = out.replace(b"\\\\", b"__").replace(b'\\"', b"__") if b"\\" in out else out
        counted = quotes = 0
        for start, end, replacement in sorted(ambiguous):
            quotes += plain.count(b'"', counted, start)
            counted = start
            if not quotes & 1:
                spans.append((start, end, replacement))
    if not spans:
        return out
    parts: list[bytes] = []
    last = 0
    for start, end, replacement in sorted(spans):
        parts.append(out[last:start])
        parts.append(replacement)
        last = end
    parts.append(out[last:])
    return b"".join(parts)


def _js_ordered(value: Any) -> Any:
    """``value`` with every dict that has array-index keys rebuilt in JavaScript key
    order; the same object when nothing changes (recursion bounded by orjson's 255)."""
    if isinstance(value, dict):
        changed = False
        items = []
        for key, item in value.items():
            new = _js_ordered(item)
            changed = changed or new is not item
            items.append((key, new))
        order = js_key_order(value)
        if order != list(value):
            lookup = dict(items)
            return {key: lookup[key] for key in order}
        return dict(items) if changed else value
    if isinstance(value, (list, tuple)):
        new_items = [_js_ordered(item) for item in value]
        if any(new is not old for new, old in zip(new_items, value, strict=False)):
            return new_items
        return value
    return value


def dumps_str(value: Any) -> str:
    """Like :func:`dumps`, returning text (same rules; raises ``ValueError`` likewise)."""
    return dumps(value).decode("utf-8")


def utf16_len(text: str) -> int:
    """Length of ``text`` in UTF-16 code units (JavaScript's ``String.length``).

    Characters beyond U+FFFF count 2, everything else (lone surrogates too) 1.
    """
    return len(text.encode("utf-16-le", errors="surrogatepass")) // 2


def js_number(value: float | int) -> str:
    """Format a number as JavaScript's ``Number.prototype.toString`` does.

    Args:
        value: an int or float (bool is an int: ``True`` gives ``"1"``).

    Returns:
        ASCII text. Rule: the shortest digits that read back as the same double;
        fixed notation for 1e-7 <= |x| < 1e21, else ``d[.ddd]e+N`` / ``e-N``;
        no ``.0`` on integer values; ``-0.0`` gives ``"0"``. ``1.0`` -> ``"1"``,
        ``1e21`` -> ``"1e+21"``, ``1e-7`` -> ``"1e-7"``, ``0.000009`` ->
        ``"0.000009"``. Integers beyond 2**53 - 1 in magnitude print as the double
        they round to (``2**64`` -> ``"18446744073709552000"``), as a JavaScript
        number holding them would; NaN, infinities and integers too large for a
        double give ``"null"``, as ``JSON.stringify`` writes them. Never raises.
    """
    if isinstance(value, int):
        if -_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER:
            return str(int(value))
        # A JS number is a double: larger integers print as the double they round to.
        try:
            value = float(value)
        except OverflowError:
            return "null"  # Infinity in JS
    if not math.isfinite(value):
        return "null"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    text = repr(abs(value))  # shortest round-trip digits
    mantissa, _, exp_text = text.partition("e")
    exponent = int(exp_text) if exp_text else 0
    int_part, _, frac_part = mantissa.partition(".")
    all_digits = int_part + frac_part
    stripped = all_digits.lstrip("0")
    leading_zeros = len(all_digits) - len(stripped)
    digits = stripped.rstrip("0") or "0"
    k = len(digits)
    n = len(int_part) - leading_zeros + exponent  # value = 0.digits * 10**n
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        e_text = ("+" if e >= 0 else "-") + str(abs(e))
        body = digits + "e" + e_text if k == 1 else digits[0] + "." + digits[1:] + "e" + e_text
    return sign + body


def _is_array_index(key: str) -> bool:
    # JavaScript orders "array index" keys (canonical 0..2**32-2) first, ascending.
    return key.isdigit() and key.isascii() and (key == "0" or key[0] != "0") and int(key) < 4294967295


def js_key_order(obj: Mapping[str, Any]) -> list[str]:
    """The keys of a JSON object in the order JavaScript enumerates them: canonical
    array-index keys (``"0"`` .. ``"4294967294"``) first, ascending, then the others
    in insertion order (ECMA-262 OrdinaryOwnPropertyKeys; docs/rules/format.md §2.6 item 3)."""
    keys = list(obj)
    index_keys = [k for k in keys if _is_array_index(k)]
    if not index_keys:
        return keys
    index_keys.sort(key=int)
    return index_keys + [k for k in keys if not _is_array_index(k)]


def _js_string(text: str) -> str:
    # encode_basestring is what json.dumps(text, ensure_ascii=False) calls for a str (C),
    # without building an encoder per call; an ASCII text has no surrogate to escape.
    quoted = _encode_basestring(text)
    return quoted if text.isascii() else _escape_surrogates(quoted)


def _js_key(key: Any) -> str:
    # Keys that are not strings are written as json.dumps writes them (JavaScript
    # object keys are always strings; this only serves Python callers).
    if isinstance(key, str):
        return key
    if key is True or key is False or key is None:
        return "true" if key is True else "false" if key is False else "null"
    if isinstance(key, (int, float)):
        return js_number(key)
    raise ValueError(f"not a JSON object key: {type(key).__name__}")


def js_stringify(value: Any) -> str:
    """Serialize ``value`` exactly as JavaScript's ``JSON.stringify`` would.

    Args:
        value: JSON data (dict, list, tuple, str, int, float, bool, None);
            dict keys should be strings (others are written as ``json.dumps``
            would name them).

    Returns:
        Text with the rules of :func:`dumps` (``docs/format-bytes.md``). Differences
        from ``json.dumps`` that matter here (docs/rules/format.md §2.6): JS number
        formatting (:func:`js_number`), array-index keys first in ascending order
        (:func:`js_key_order`), lone surrogates escaped as ``\\udxxx``,
        NaN/Infinity as ``null``. Iterative, so deeply nested values cannot
        exhaust the recursion limit. Pure Python: :func:`dumps` is the fast way
        to the same bytes.

    Raises:
        ValueError: a value that is not JSON data.
    """
    if value.__class__ is str:
        return _js_string(value)  # the usual tool argument: no work stack for one string
    out: list[str] = []
    # Work stack of either ("v", value) to render or ("s", literal) to emit.
    stack: list[tuple[str, Any]] = [("v", value)]
    while stack:
        kind, item = stack.pop()
        if kind == "s":
            out.append(item)
            continue
        if item is None:
            out.append("null")
        elif item is True:
            out.append("true")
        elif item is False:
            out.append("false")
        elif isinstance(item, str):
            out.append(_js_string(item))
        elif isinstance(item, (int, float)):
            out.append(js_number(item))
        elif isinstance(item, dict):
            parts: list[tuple[str, Any]] = [("s", "{")]
            if not all(isinstance(key, str) for key in item):
                item = {_js_key(key): element for key, element in item.items()}
            for i, key in enumerate(js_key_order(item)):
                prefix = "," if i else ""
                parts.append(("s", prefix + _js_string(key) + ":"))
                parts.append(("v", item[key]))
            parts.append(("s", "}"))
            stack.extend(reversed(parts))
        elif isinstance(item, (list, tuple)):
            parts = [("s", "[")]
            for i, element in enumerate(item):
                if i:
                    parts.append(("s", ","))
                parts.append(("v", element))
            parts.append(("s", "]"))
            stack.extend(reversed(parts))
        else:
            raise ValueError(f"not JSON data: {type(item).__name__}")
    return "".join(out)
