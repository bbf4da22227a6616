"""Cursors and size budgets of the MCP tools (docs/mcp.md, "Paging and budgets").

Every list a tool returns is cut twice: at most ``limit`` items, and at most
``max_chars`` characters of JSON. A page that stops early says so with
``truncated`` and a ``nextCursor``; calling the same tool with the same
arguments and that cursor continues with the first item left out.

A cursor is opaque to the client: URL-safe base64 of a small JSON object
holding the tool's name, a fingerprint of the arguments that shape the list,
and the offset of the next item. A cursor given to another tool, or with
other arguments, is refused with a clear message (it would skip the wrong
items), never silently reused.

An item larger than the whole budget is never dropped and never sent whole:
its long strings are clipped, each clip ending with ``CLIP_MARK`` and the
number of characters left out, and the item gets ``"clipped": true``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sessiontree.core.textsafe import safe_json_text

#: Default size budget of one tool answer, in characters of JSON.
DEFAULT_MAX_CHARS = 20_000
#: The smallest and largest budgets a caller may ask for.
MIN_MAX_CHARS = 1_000
MAX_MAX_CHARS = 1_000_000
#: What ends a clipped string, before the count of characters left out.
CLIP_MARK = "…[clipped "


#: What a lone surrogate becomes in an answer: no UTF-8 JSON text can carry one (docs/mcp.md, "Security").
SURROGATE_STANDIN = "\ufffd"


_SURROGATE = re.compile("[\ud800-\udfff]")


def replace_lone_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by :data:`SURROGATE_STANDIN`."""
    return _SURROGATE.sub(SURROGATE_STANDIN, text)


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def without_lone_surrogates(value: Any) -> Any:
    """``value`` itself when its strings (keys included) are valid Unicode, else a copy in which
    every lone surrogate is U+FFFD. Surrogate pairs written as two escapes were joined when the
    JSON was parsed; what is left cannot be encoded as UTF-8, and the protocol's framing is UTF-8."""
    if not _has_surrogate(json.dumps(value, ensure_ascii=False, default=str)):
        return value
    return _scrub(value)


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return replace_lone_surrogates(value)
    if isinstance(value, Mapping):
        return {replace_lone_surrogates(str(key)): _scrub(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(item) for item in value]
    return value


def same_text(stored: str, given: str) -> bool:
    """Whether ``given`` names ``stored``: equal, or equal once lone surrogates are U+FFFD
    (an id a previous answer gave back with its surrogates replaced)."""
    return stored == given or (_has_surrogate(stored) and replace_lone_surrogates(stored) == given)


class CursorError(ValueError):
    """A cursor that is not one of ours, or belongs to another tool or other arguments."""


def json_size(value: Any) -> int:
    """Characters of ``value`` as compact JSON (non-ASCII kept as is, but the characters
    docs/terminal-output.md keeps off a screen spelled ``\\uXXXX``, as the text block writes
    them: :func:`~sessiontree.core.textsafe.safe_json_text`): what a page is measured in."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return len(text) if text.isascii() else len(safe_json_text(text))


def fingerprint(arguments: Mapping[str, Any]) -> str:
    """A short hash of the arguments that decide which items a list holds, in order."""
    text = json.dumps(dict(arguments), sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def encode_cursor(tool: str, arguments: Mapping[str, Any], offset: int) -> str:
    """The cursor that continues ``tool`` (called with ``arguments``) at item ``offset``."""
    raw = json.dumps({"t": tool, "f": fingerprint(arguments), "o": offset}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode("ascii")).decode("ascii").rstrip("=")


def decode_cursor(cursor: str | None, tool: str, arguments: Mapping[str, Any]) -> int:
    """The offset a cursor continues at (0 without one).

    Raises:
        CursorError: not a cursor of this server, or made by another tool or other arguments.
    """
    if cursor is None or cursor == "":
        return 0
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")).decode("ascii"))
    except (ValueError, UnicodeError, binascii.Error):
        raise CursorError("cursor is not valid: pass nextCursor exactly as a previous answer gave it") from None
    if not isinstance(data, dict) or not isinstance(data.get("o"), int) or data["o"] < 0:
        raise CursorError("cursor is not valid: pass nextCursor exactly as a previous answer gave it")
    if data.get("t") != tool:
        raise CursorError(f"cursor belongs to another tool ({data.get('t')!r}), not {tool}")
    if data.get("f") != fingerprint(arguments):
        raise CursorError("cursor was made with other arguments (or the session's active leaf moved): "
                          "repeat the call that returned it, changing only the cursor")
    return int(data["o"])


def cursor_tool(cursor: str | None) -> str | None:
    """The tool an offset cursor of :func:`encode_cursor` names, or ``None`` when ``cursor`` is
    not one (``search_sessions``'s cursors are the search's own, docs/search.md "Paging": this
    tells a cursor of another tool apart from a damaged one)."""
    if not cursor:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode((cursor + "=" * (-len(cursor) % 4)).encode("ascii")))
    except (ValueError, UnicodeError, binascii.Error):
        return None
    tool = data.get("t") if isinstance(data, dict) else None
    return tool if isinstance(tool, str) and "o" in data else None


def check_budget(max_chars: int | None) -> int:
    """``max_chars`` or the default, checked against the allowed range.

    Raises:
        ValueError: outside ``MIN_MAX_CHARS..MAX_MAX_CHARS``.
    """
    if max_chars is None:
        return DEFAULT_MAX_CHARS
    if not MIN_MAX_CHARS <= max_chars <= MAX_MAX_CHARS:
        raise ValueError(f"max_chars must be between {MIN_MAX_CHARS} and {MAX_MAX_CHARS}, not {max_chars}")
    return max_chars


def clip_strings(value: Any, limit: int, items: int | None = None) -> Any:
    """A copy of ``value`` whose strings longer than ``limit`` end in :data:`CLIP_MARK`
    and the count of characters removed (``"…[clipped 812 chars]"``); with ``items``, lists
    longer than that keep their first ``items`` elements and a last string
    ``"…[clipped N more items]"``, and objects their first ``items`` fields and a field
    ``"clipped": "…[clipped N more fields]"``."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        return f"{value[:limit]}{CLIP_MARK}{len(value) - limit} chars]"
    if isinstance(value, Mapping):
        pairs = list(value.items())
        out = {key: clip_strings(item, limit, items) for key, item in (pairs if items is None else pairs[:items])}
        if items is not None and len(pairs) > items:
            out[CLIP_MARK.strip("…[ ")] = f"{CLIP_MARK}{len(pairs) - items} more fields]"
        return out
    if isinstance(value, list | tuple):
        head = value if items is None else value[:items]
        kept = [clip_strings(item, limit, items) for item in head]
        if items is not None and len(value) > items:
            kept.append(f"{CLIP_MARK}{len(value) - items} more items]")
        return kept
    return value


def fit_item(item: dict[str, Any], budget: int) -> dict[str, Any]:
    """``item`` itself when its JSON fits ``budget``; else a copy marked ``"clipped": true``
    that fits. Cut in this order, each step only as far as needed: long strings (never below
    64 characters, so ids and times stay whole), then long lists and objects (their first
    elements kept), then strings down to 16 characters, and as a last resort the last fields
    left out (``"omittedFields"``, their count). Each cut says how much it left out. The
    answer is never over ``budget`` (for a budget of at least 64)."""
    if json_size(item) <= budget:
        return item
    clipped: dict[str, Any] = {}
    steps: list[tuple[int, int | None]] = []
    limit = max(budget // 2, 64)
    while limit > 64:
        steps.append((limit, None))
        limit //= 2
    steps += [(64, None), *((64, cap) for cap in (64, 32, 16, 8, 4, 2, 1)), (16, 1)]
    for limit, cap in steps:
        # The item's own fields are all kept here; caps apply to the lists and objects inside.
        clipped = {key: clip_strings(value, limit, cap) for key, value in item.items()}
        clipped["clipped"] = True
        if json_size(clipped) <= budget:
            return clipped
    # Too many fields for the budget: keep the first ones (ids and kinds come first).
    fields = [key for key in clipped if key != "clipped"]
    kept: dict[str, Any] = {"clipped": True, "omittedFields": len(fields)}
    for key in fields:
        trial = {**kept, key: clipped[key], "omittedFields": kept["omittedFields"] - 1}
        if json_size(trial) > budget:
            break
        kept = trial
    return kept


@dataclass(frozen=True)
class Page:
    """One page of a list.

    Attributes:
        items: the items on this page, in list order.
        next_offset: where the next page starts, or ``None`` when this page ends the list.
        cut_by_budget: whether the page stopped early because of ``max_chars``
            (rather than ``limit`` or the list's end).
    """

    items: list[dict[str, Any]]
    next_offset: int | None
    cut_by_budget: bool


def take_page(items: Iterable[dict[str, Any]], offset: int, limit: int | None, budget: int,
              *, has_more: Callable[[], bool] | None = None) -> Page:
    """Items from ``offset`` on, at most ``limit`` of them, within ``budget`` characters.

    The first item of a page is always included (clipped by :func:`fit_item`
    if it alone exceeds the budget), so paging always advances.

    Args:
        items: the whole list from its start (only what the page needs is consumed).
        offset: the index of the page's first item.
        limit: at most this many items (``None``: no count limit).
        budget: at most this many characters of JSON for the items.
        has_more: when ``items`` ends, whether the list really ends there
            (``search`` asks for one hit more than it shows).
    """
    taken: list[dict[str, Any]] = []
    used = 2  # the list's brackets
    index = -1
    iterator = iter(items)
    for index, item in enumerate(iterator):
        if index < offset:
            continue
        if limit is not None and len(taken) >= limit:
            return Page(taken, offset + len(taken), False)
        size = json_size(item) + 1
        if taken and used + size > budget:
            return Page(taken, offset + len(taken), True)
        if not taken and size > budget:
            item = fit_item(item, budget - 2)
            size = json_size(item) + 1
        taken.append(item)
        used += size
    more = has_more() if has_more is not None else False
    return Page(taken, offset + len(taken) if more and taken else None, False)


def page_fields(page: Page, tool: str, arguments: Mapping[str, Any], budget: int,
                what: str, total: int | None = None, *,
                cursor_at: Callable[[int], str] | None = None) -> dict[str, Any]:
    """The paging fields of an answer: ``returned``, ``total`` (when known),
    ``nextCursor``, ``truncated`` and a ``note`` telling how to continue. ``cursor_at``:
    the list's own cursor after ``next_offset`` items of this page (``search_sessions`` pages
    by the search's key cursor, docs/search.md), instead of :func:`encode_cursor`'s offset."""
    if page.next_offset is None:
        cursor = None
    elif cursor_at is not None:
        cursor = cursor_at(page.next_offset)
    else:
        cursor = encode_cursor(tool, arguments, page.next_offset)
    fields: dict[str, Any] = {"returned": len(page.items)}
    if total is not None:
        fields["total"] = total
    fields["nextCursor"] = cursor
    fields["truncated"] = cursor is not None
    if cursor is not None:
        why = f"max_chars={budget}" if page.cut_by_budget else "limit"
        fields["note"] = (f"truncated at {why}: {len(page.items)} {what} shown; continue with "
                          f'cursor "{cursor}" (same arguments)')
    return fields

