"""The fast paths of issue 42 give exactly what the general rule gives.

Synthetic strings on purpose: the point is every ASCII character and the boundaries of
each fast path (ASCII or not, a backtick run or none, surrogates), which no real
session file shows all together.
"""

from __future__ import annotations

import json
import random
import re

from sessiontree.core import render
from sessiontree.core.textsafe import _UNSAFE_IN_BLOCK, UNSAFE, _visible, safe_block, safe_line
from sessiontree.format.jsonio import _escape_surrogates, _js_string

_ALPHABET = [chr(c) for c in range(0x80)] + ["é", "\u2028", "\u202e", "\ud800", "\udc00", "😀", "\x85", "`"]


def _samples() -> list[str]:
    rnd = random.Random(42)
    texts = ["", "plain text", "a\tb\nc", "x" * 5000, "```", "a ``` b ```` c", "tail`"]
    texts += [chr(c) for c in range(0x80)]
    texts += ["".join(rnd.choice(_ALPHABET) for _ in range(rnd.randrange(1, 40))) for _ in range(3000)]
    return texts


def test_safe_block_and_safe_line_equal_the_expression_on_every_text():
    for text in _samples():
        assert safe_block(text) == _UNSAFE_IN_BLOCK.sub(_visible, text), repr(text)
        assert safe_line(text) == UNSAFE.sub(_visible, text), repr(text)


def test_the_longest_backtick_run_is_the_longest_match():
    for text in _samples():
        expected = max((len(run) for run in re.findall(r"`+", text)), default=0)
        assert render._longest_backticks(text) == expected, repr(text)


def test_js_string_equals_json_dumps_with_surrogates_escaped():
    for text in _samples():
        assert _js_string(text) == _escape_surrogates(json.dumps(text, ensure_ascii=False)), repr(text)
