"""JSON encoding and decoding, as the format needs it.

Invariants:

* Records are compact JSON (no spaces, non-ASCII raw, insertion key order),
  one per line, as the original agent's ``JSON.stringify`` writes them
  (REFERENCE E.1).
* ``orjson`` is the fast path both ways. It refuses two things the original
  agent can write: strings holding lone UTF-16 surrogate escapes such as
  ``"\\ud83d"`` (left by truncations that counted UTF-16 units) and invalid
  UTF-8. For those lines we fall back to the standard library, which accepts
  lone surrogates, and we write them back as ``\\udxxx`` escapes, exactly as
  JavaScript does (REFERENCE §2.6 item 4), so nothing is lost either way.
* One nesting limit, :data:`MAX_DEPTH` (512 levels), for reading and
  writing alike: :func:`loads` and :func:`dumps` refuse deeper values with
  :class:`NestingError` (a ``ValueError``) instead of running into
  ``RecursionError`` in a fallback, and every walk here is iterative.
  512 is below what orjson reads (1024) and what JavaScript's ``JSON.parse``
  handles, so any file we accept the original agent reads too.
* :func:`js_stringify` reproduces ``JSON.stringify`` byte for byte (numbers,
  integer-like key order, escapes); the transcript grammar renders tool-call
  arguments with it (REFERENCE §2.3, §2.6).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

import orjson

__all__ = ["MAX_DEPTH", "NestingError", "depth", "loads", "dumps", "dumps_str", "js_stringify", "js_number", "js_key_order", "utf16_len"]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_decoder = json.JSONDecoder()
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
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:  # its recursive parser gave up: deeper than we accept anyway
        raise NestingError() from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON constant {name}")


def _escape_surrogates(text: str) -> str:
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def dumps(value: Any) -> bytes:
    """Serialize ``value`` as one compact JSON record (no trailing newline).

    Args:
        value: JSON-compatible data (dict, list, str, int, float, bool, None).

    Returns:
        UTF-8 bytes. Lone surrogates in strings are written as ``\\udxxx``;
        NaN and infinite floats as ``null``, as JavaScript's ``JSON.stringify``
        writes them (REFERENCE §2.6 item 4).

    Raises:
        NestingError: ``value`` nests more than :data:`MAX_DEPTH` levels.
        ValueError: values that are not JSON data.
    """
    try:
        return orjson.dumps(value)
    except TypeError:
        pass
    # orjson refuses lone surrogates, integers beyond 64 bits and values
    # nested more than 255 levels; _finite also enforces MAX_DEPTH.
    try:
        text = json.dumps(_finite(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except TypeError as exc:
        raise ValueError(str(exc)) from exc
    return _escape_surrogates(text).encode("utf-8")


def _finite(value: Any) -> Any:
    """A copy of ``value`` with NaN and infinite floats replaced by ``None``
    (orjson's and JavaScript's ``null``), tuples as lists.

    Iterative (a recursive copy hit ``RecursionError`` a few hundred levels
    down, before ``json.dumps`` could say anything).

    Raises:
        NestingError: ``value`` nests more than :data:`MAX_DEPTH` levels.
    """
    holder: list[Any] = [None]
    # (container of the copy, key or index in it, original item, its level)
    stack: list[tuple[Any, Any, Any, int]] = [(holder, 0, value, 1)]
    while stack:
        out, key, item, level = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            out[key] = None
        elif isinstance(item, dict):
            if level > MAX_DEPTH:
                raise NestingError()
            # Keys first, values later: the copy keeps the key order.
            copy: Any = dict.fromkeys(item)
            out[key] = copy
            stack.extend((copy, k, v, level + 1) for k, v in item.items())
        elif isinstance(item, (list, tuple)):
            if level > MAX_DEPTH:
                raise NestingError()
            copy = [None] * len(item)
            out[key] = copy
            stack.extend((copy, i, v, level + 1) for i, v in enumerate(item))
        else:
            out[key] = item
    return holder[0]


def dumps_str(value: Any) -> str:
    """Like :func:`dumps`, returning text."""
    return dumps(value).decode("utf-8")


def utf16_len(text: str) -> int:
    """Length of ``text`` in UTF-16 code units (JavaScript's ``String.length``)."""
    return len(text.encode("utf-16-le", errors="surrogatepass")) // 2


def js_number(value: float | int) -> str:
    """Format a number as JavaScript's ``Number.prototype.toString`` does.

    ``1.0`` -> ``"1"``, ``1e21`` -> ``"1e+21"``, ``1e-7`` -> ``"1e-7"``,
    ``0.00001`` -> ``"0.00001"``; NaN and infinities give ``"null"`` as in
    ``JSON.stringify``.
    """
    if isinstance(value, int):
        if -_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER:
            return str(value)
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
    in insertion order (ECMA-262 OrdinaryOwnPropertyKeys; REFERENCE §2.6 item 3)."""
    keys = list(obj)
    index_keys = [k for k in keys if _is_array_index(k)]
    if not index_keys:
        return keys
    index_keys.sort(key=int)
    return index_keys + [k for k in keys if not _is_array_index(k)]


def _js_string(text: str) -> str:
    return _escape_surrogates(json.dumps(text, ensure_ascii=False))


def js_stringify(value: Any) -> str:
    """Serialize ``value`` exactly as JavaScript's ``JSON.stringify`` would.

    Differences from ``json.dumps`` that matter here (REFERENCE §2.6): JS
    number formatting, integer-like keys first in ascending order, lone
    surrogates escaped as ``\\udxxx``, NaN/Infinity as ``null``. Iterative, so
    deeply nested values cannot exhaust the recursion limit.

    Raises:
        ValueError: a value that is not JSON data.
    """
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
            for i, key in enumerate(js_key_order(item)):
                prefix = "," if i else ""
                parts.append(("s", prefix + _js_string(str(key)) + ":"))
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
