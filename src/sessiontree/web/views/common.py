"""What every page of the viewer shares: text safe to send, JSON safe inside a page."""

from __future__ import annotations

import json as jsonlib
import re
from typing import Any

import orjson
from markupsafe import Markup

from sessiontree.core.textsafe import safe_json_text

__all__ = [
    "script_json",
    "scrub_surrogates",
]

_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_surrogates(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD.

    JSON may carry ``"\\ud800"`` alone (an agent that cut a string inside a
    UTF-16 pair writes exactly that); Python keeps it in a ``str``, and
    encoding a page that contains it as UTF-8 raises. Every page and JSON
    body the viewer sends goes through this once, at the end.
    """
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def script_json(value: Any) -> Markup:
    """``value`` as JSON safe inside a ``<script>`` element: ``<``, ``>``, ``&`` and ``'``
    written as ``\\u`` escapes (as Jinja2's ``tojson``), lone surrogates as U+FFFD, and the
    characters docs/terminal-output.md keeps off a screen as ``\\u`` escapes too
    (:func:`~sessiontree.core.textsafe.safe_json_text`: the values parse back the same)."""
    try:
        text = orjson.dumps(value).decode("utf-8")
    except orjson.JSONEncodeError:
        # A lone surrogate (a string cut inside a UTF-16 pair): orjson refuses it.
        text = scrub_surrogates(jsonlib.dumps(value, ensure_ascii=False))
    # Control characters and bidi overrides as JSON escapes (the same values, none raw in the page).
    text = safe_json_text(text)
    return Markup(text.replace("&", "\\u0026").replace("<", "\\u003c")
                  .replace(">", "\\u003e").replace("'", "\\u0027"))
