"""``export --format html --compare LEAF`` (docs/diff.md): the page carries the comparison of
the active branch with LEAF, pre-rendered, escaped and redacted like the rest; bad input is
one line with status 2."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from builders import header
from cli_support import cli_runner
from diff_trees import at, two_approaches, user_at
from sessiontree.cli import cli
from sessiontree.stores.sqlite.store import SqliteStore

SID = "019cadb4-0000-7000-8000-000000000001"
KEY = "ghp" + "_" + "0123456789abcdefghijABCDEFGHIJ01" + "abcd"


@pytest.fixture
def db(tmp_path: Path) -> str:
    """:func:`two_approaches` with, below ``aA2``, a hostile user message holding a secret
    (``uX``); the active leaf stays ``aB1`` (the last entry of the file)."""
    entries = two_approaches()
    hostile = user_at("uX", "aA2", f"<script>alert(1)</script> token {KEY}", at(1, 3))
    entries.insert(6, hostile)
    path = str(tmp_path / "s.db")
    store = SqliteStore(path)
    store.create(header(SID, created="2026-03-02T09:00:00.000Z"), entries)
    store.close()
    return path


def export(db: str, *args: str, code: int) -> str:
    result = cli_runner().invoke(cli, ["--store", db, "export", SID[:8], *args], catch_exceptions=False)
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    return result.stdout if code == 0 else result.stderr


def _section(html: str) -> str:
    match = re.search(r'<details class="export-compare">(.*?)</details>', html, re.S)
    assert match is not None
    return match.group(1)


def test_the_page_carries_the_comparison_raw_and_model(db: str) -> None:
    html = export(db, "--format", "html", "--compare", "uX", code=0)
    section = _section(html)
    # A is the active branch (aB1), B the branch of uX; they fork after u1, a1, r1.
    assert "Comparison of the active branch (A) with uX (B)" in section
    assert section.count("Fork point r1 after 3 common entries") == 2  # raw and model's view
    raw, model = section.split("<h2>Model&#39;s view", 1)
    # Raw rows, by hand: A's tail mB, tB, aB1 against B's aA1, rA1, aA2, uX: no equal content;
    # paired by kind in order: mB and tB have no model/thinking change on B (only in A),
    # aB1 pairs with aA1 (both assistant), then rA1, aA2, uX only in B.
    statuses = re.findall(r'<tr class="cmp-(\w+)">', raw)
    assert statuses == ["onlyA", "onlyA", "changed", "onlyB", "onlyB", "onlyB"]
    # Summary, by hand: common = a1 (100 + 10 tokens); A only = aB1 (400 + 40);
    # B only = aA1 + aA2 (200 + 20 + 300 + 30).
    cells = re.findall(r'<td class="num">([\d,]+)</td>', raw)
    # per row: entries, messages, tokens
    assert cells == ["3", "3", "110", "3", "1", "440", "4", "4", "550"]
    assert "cmp-" in model and "Context A:" in model


def test_session_text_in_the_comparison_is_escaped_and_redacted(db: str) -> None:
    section = _section(export(db, "--format", "html", "--compare", "uX", code=0))
    assert "<script>alert(1)" not in section
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section
    assert KEY not in section and "[REDACTED:" in section


def test_the_comparison_needs_html_and_an_entry_of_the_session(db: str) -> None:
    assert "--compare needs --format html" in export(db, "--compare", "uX", code=2)
    assert "SESSION:LEAF" in export(db, "--format", "html", "--compare", f"{SID}:uX", code=2)
    err = export(db, "--format", "html", "--compare", "zz", code=2)
    errors = [line for line in err.splitlines() if line.startswith("sessiontree: error:")]
    assert len(errors) == 1 and "--compare: no entry of session" in errors[0] and "'zz'" in errors[0]


def test_without_compare_the_page_has_no_comparison(db: str) -> None:
    assert '<details class="export-compare">' not in export(db, "--format", "html", code=0)
