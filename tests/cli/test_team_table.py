"""``team stats``'s table (cli/team.py ``_table``): piped, it is printed without rich where
``plain_table`` can, and must be byte for byte what rich prints (rich is what a terminal
or ``$COLUMNS`` gets). No database: the rows are made here, as the views return them."""

from __future__ import annotations

import pytest

from sessiontree.cli import team as team_cli

COLUMNS = ["user_name", "day", "provider", "model", "agent", "project", "calls", "input", "output",
           "cache_read", "cache_write", "cost_nanos"]


def _row(user: str, day: str, model: str, agent: str, project: str, calls: int, cost: int) -> dict[str, object]:
    return {"user_name": user, "day": day, "provider": "anthropic", "model": model, "agent": agent,
            "project": project, "calls": calls, "input": 1000 * calls + 54, "output": 200 * calls,
            "cache_read": 0, "cache_write": 12_345_678_901 if calls == 7 else 0, "cost_nanos": cost}


ROWS = [_row("alice", "2026-03-01", "m0", "", "team", 6, 36_000_000),
        _row("alice", "2026-03-02", "claude-sonnet-4-5", "claude-code", "web", 7, 1_234_567_890_123),
        _row("bob-the-builder", "2026-03-01", "m1", "pi", "team", 1, 0)]


def _printed(capsys, monkeypatch, rows, *, rich: bool) -> tuple[str, bool]:
    """What ``_table`` prints, and whether the plain table printed it. ``rich``: as a
    terminal 160 cells wide would get it ($COLUMNS sends every table through rich)."""
    used = []

    def spy(*args, **kwargs):
        text = real(*args, **kwargs)
        used.append(text is not None)
        return text

    real = team_cli.plain_table
    monkeypatch.setattr(team_cli, "plain_table", spy)
    for var in ("TTY_COMPATIBLE", "FORCE_COLOR", "COLUMNS"):
        monkeypatch.delenv(var, raising=False)
    if rich:
        monkeypatch.setenv("COLUMNS", "160")
    team_cli._table(rows, COLUMNS)
    return capsys.readouterr().out, used == [True]


def test_the_plain_table_is_the_bytes_rich_prints(capsys, monkeypatch):
    plain, was_plain = _printed(capsys, monkeypatch, ROWS, rich=False)
    through_rich, rich_plain = _printed(capsys, monkeypatch, ROWS, rich=True)
    assert was_plain and not rich_plain
    assert plain == through_rich
    # Counted by hand: columns as wide as their widest cell, two spaces apart, text flush
    # left, numbers flush right, line ends stripped.
    lines = plain.split("\n")
    assert lines[0].startswith("user_name        day         provider   model              agent        project")
    # Widths: 15 (bob-the-builder), 10, 9, 17 (claude-sonnet-4-5), 11 (claude-code), 7
    # (the title "project"), 5, 5, 6, 10, 11 (both titles), 13 (1234567890123).
    assert lines[1] == "  ".join(["alice" + " " * 10, "2026-03-01", "anthropic", "m0" + " " * 15, " " * 11,
                                  "team   ", "    6", " 6054", "  1200", " " * 9 + "0", " " * 10 + "0",
                                  " " * 5 + "36000000"])
    assert lines[3].startswith("bob-the-builder  2026-03-01  anthropic  m1                 pi           team")
    assert plain.endswith("0\n") and len(lines) == 5


@pytest.mark.parametrize(("project", "declined"), [("a:b", True), ("caf\u00e9", True), (" lead", True),
                                                   ("x\x1b[2Jy", False)])
def test_cells_the_plain_table_declines_go_through_rich(capsys, monkeypatch, project, declined):
    rows = [*ROWS, _row("carol", "2026-03-03", "m2", "codex", project, 2, 5)]
    plain, was_plain = _printed(capsys, monkeypatch, rows, rich=False)
    through_rich, _ = _printed(capsys, monkeypatch, rows, rich=True)
    assert was_plain is not declined
    assert plain == through_rich
    assert "\x1b" not in plain  # escaped (safe_line) into printable text, never obeyed
