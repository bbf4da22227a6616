"""Cuts to a width never fall inside a visible escape (docs/terminal-output.md).

``list`` used to let rich cut a sanitised title, which could leave ``\\u202eevil\\u20…``:
half an escape, which reads as something else. The cut is now made on escape boundaries.
"""

from __future__ import annotations

import re

import pytest

from cli_support import cli_runner
from sessiontree.cli import cli
from sessiontree.cli.common import cut_left, cut_right
from sessiontree.core.textsafe import safe_line
from sessiontree.session.manager import SessionManager
from sessiontree.stores import open_store

#: A backslash and an escape letter not followed by its full count of hex digits.
HALF_ESCAPE = re.compile(r"\\x(?![0-9a-f]{2})|\\u(?![0-9a-f]{4})|\\U(?![0-9a-f]{8})")


def test_cut_right_keeps_escapes_whole():
    text = safe_line("\u202eevil\u202e\u202e\u202e")  # \u202eevil\u202e\u202e\u202e: 28 characters
    assert len(text) == 28
    for width in range(2, 30):
        cut = cut_right(text, width)
        assert len(cut) <= width and not HALF_ESCAPE.search(cut), (width, cut)
    assert cut_right(text, 12) == "\\u202eevil…"  # 6 + 4 + 1: the next escape does not fit
    assert cut_right(text, 17) == "\\u202eevil\\u202e…"
    assert cut_right(text, 28) == text


def test_cut_left_keeps_escapes_whole():
    text = safe_line("/proj/\x1b\x1b\x1bx")  # /proj/\x1b\x1b\x1bx
    for width in range(2, len(text) + 1):
        cut = cut_left(text, width)
        assert len(cut) <= width and not HALF_ESCAPE.search(cut), (width, cut)
    assert cut_left(text, 6) == "…\\x1bx"


@pytest.mark.parametrize("columns", range(60, 95, 5))
def test_list_cuts_titles_on_escape_boundaries(tmp_path, columns):
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = open_store(url)
    m = SessionManager.create("/p", store=store)
    m.append_message({"role": "user", "content": "hi", "timestamp": 1})
    m.append_session_info("\u202eevil" + "\u202e" * 40)
    store.close()
    result = cli_runner().invoke(cli, ["--store", url, "list", "--all"], env={"COLUMNS": str(columns)},
                                 catch_exceptions=False)
    assert result.exit_code == 0, result.output
    row = [line for line in result.output.splitlines() if "evil" in line]
    assert len(row) == 1 and row[0].rstrip().endswith("…"), result.output
    assert not HALF_ESCAPE.search(row[0]), row[0]
