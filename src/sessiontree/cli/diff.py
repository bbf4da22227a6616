"""``sessiontree diff``: two branches of a session (or a fork and its source) compared
(docs/diff.md).

A thin edge over :func:`sessiontree.diff.diff_branches`: parse flags, call it,
print the summary table and the aligned paths (or the model-context delta), or the
JSON form. Exit status (docs/diff.md): 0 a difference was shown, 1 the branches are
identical, 2 bad input (one line on stderr).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from sessiontree.cli.common import (
    App,
    UserError,
    bulk_read,
    busy_spinner,
    cli,
    cost_cell,
    describe_error,
    echo_line,
    pass_app,
    print_json,
    print_rich,
    stdout_console,
)
from sessiontree.core.textsafe import safe_line
from sessiontree.errors import SessionError
from sessiontree.usage.choices import COST_MODES

if TYPE_CHECKING:
    from rich.table import Table

    from sessiontree.diff.branches import BranchComparison

#: The narrowest terminal that gets the side-by-side layout by default.
SIDE_BY_SIDE_WIDTH = 110

#: How each status is marked in the unified layout and the side-by-side gutter.
MARKS = {"same": " ", "onlyA": "-", "onlyB": "+", "changed": "~"}
_STYLES = {"same": "dim", "onlyA": "red", "onlyB": "green", "changed": "yellow"}


class DiffInputError(UserError):
    """Bad input to ``diff``: one line on stderr, exit status 2 (docs/diff.md)."""

    exit_code = 2


@cli.command("diff", short_help="Compare two branches of a session, or a fork with its source.")
@click.argument("session_id", metavar="ID")
@click.option("--a", "leaf_a", metavar="LEAF", help="Side A: an entry id (or unique prefix) of the session, or "
                                                    "SESSION:LEAF for another session (SESSION: alone: its leaf).")
@click.option("--b", "leaf_b", metavar="LEAF", help="Side B, as --a. Default: the active leaf, or with neither "
                                                    "given, the two most recent leaves (the older is A).")
@click.option("--context", "show_context", is_flag=True,
              help="Show the model-context delta (what each side's next request carries) instead of the paths.")
@click.option("--side-by-side", "layout", flag_value="side", help="Two columns (default on wide terminals).")
@click.option("--unified", "layout", flag_value="unified", help="One column: - only in A, + only in B, ~ changed.")
@click.option("--cost", "cost", type=click.Choice(COST_MODES), default="auto", show_default=True,
              help="How calls are priced, as in stats.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON (docs/diff.md; schemaVersion 1).")
@pass_app
def diff_cmd(app: App, session_id: str, leaf_a: str | None, leaf_b: str | None,
             show_context: bool, layout: str | None, cost: str, as_json: bool) -> None:
    """Compare two branches: where they fork, the entries each one adds or changes,
    what each one's next request to the model would carry, and what each one cost
    (calls both hold counted once, in the common row).

    Exit status: 0 when a difference is shown, 1 when the branches are identical,
    2 on bad input.
    """
    from sessiontree.diff.branches import diff_branches

    try:
        with busy_spinner("Comparing branches…"), bulk_read():
            result = diff_branches(app.store, session_id, leaf_a, leaf_b, cost=cost)
    except (SessionError, ValueError, OSError) as exc:
        raise DiffInputError(describe_error(exc)) from exc
    if as_json:
        print_json(result.to_dict())
    else:
        _print(result, show_context, layout)
    if result.identical:
        click.get_current_context().exit(1)


def _print(result: BranchComparison, show_context: bool, layout: str | None) -> None:
    console = stdout_console()
    d = result.diff
    where = (f"fork point {d.fork_a}" + (f" (B: {d.fork_b})" if d.fork_b != d.fork_a else "")
             + f" after {d.common} common entries") if d.common else "no common entries"
    echo_line(safe_line(f"A: {result.session_a} @ {d.leaf_a}   B: {result.session_b} @ {d.leaf_b}   {where}"))
    print_rich(console, _summary(result))
    for name, label in (("a", "A"), ("b", "B")):
        files = d.stats[name].files
        if files:
            echo_line(safe_line(f"Files touched on {label} below the fork point: "
                                + ", ".join(f"{path} ({'/'.join(tools)})" for path, tools in files.items())))
    echo_line()
    if result.identical:
        echo_line("The branches are identical.")
        return
    side = layout == "side" or (layout is None and console.width >= SIDE_BY_SIDE_WIDTH)
    if show_context:
        _print_context(result, side)
        return
    rows = [(row.status, _entry_line(row.a), _entry_line(row.b)) for row in d.rows]
    _print_rows(rows, side, "entries below the fork point")


def _entry_line(entry: dict[str, Any] | None) -> str:
    from sessiontree.core.render import entry_summary

    if entry is None:
        return ""
    return safe_line(f"{entry.get('id')} {entry_summary(entry, 160)}")


def _message_line(item: tuple[dict[str, Any], str | None] | None) -> str:
    from sessiontree.core.render import entry_summary

    if item is None:
        return ""
    message, entry_id = item
    return safe_line(f"{entry_id or '-'} {message.get('role')}: "
                     f"{entry_summary({'type': 'message', 'message': message}, 160)}")


def _print_rows(rows: list[tuple[str, str, str]], side: bool, what: str) -> None:
    from rich.table import Table
    from rich.text import Text

    console = stdout_console()
    if not rows:
        echo_line(f"No {what}.")
        return
    if side:
        table = Table(box=None, pad_edge=False, header_style="bold", expand=True)
        table.add_column("", no_wrap=True, width=1)
        table.add_column("A", ratio=1, overflow="ellipsis", no_wrap=True)
        table.add_column("B", ratio=1, overflow="ellipsis", no_wrap=True)
        for status, a, b in rows:
            style = _STYLES[status]
            table.add_row(Text(MARKS[status], style=style), Text(a, style=style), Text(b, style=style))
        print_rich(console, table)
        return
    for status, a, b in rows:
        style = _STYLES[status]
        if status == "changed":
            print_rich(console, Text(f"~ A {a}", style=style))
            print_rich(console, Text(f"~ B {b}", style=style))
        else:
            print_rich(console, Text(f"{MARKS[status]} {a or b}", style=style))


def _print_context(result: BranchComparison, side: bool) -> None:
    context = result.diff.context
    if context is None:  # diff_branches always builds it for the command
        return
    for label, s in (("A", context.a), ("B", context.b)):
        parts = [f"{s.messages} messages"]
        if s.boundary_id:
            parts.append(f"compaction boundary {s.boundary_id} (kept tail: {s.kept_tail} entries)")
        if s.edits:
            parts.append(f"context edits on {', '.join(s.edits)}")
        if s.synthetic_results:
            parts.append(f"{s.synthetic_results} synthetic result(s) for interrupted tool calls")
        echo_line(safe_line(f"Context {label}: " + "; ".join(parts)))
    for name, (va, vb) in context.settings.items():
        echo_line(safe_line(f"Setting {name}: A {_setting(va)}  B {_setting(vb)}"))
    echo_line(f"{context.common:,} message(s) from the start are the same in both contexts.")
    echo_line()
    rows = [(row.status, _message_line(row.a), _message_line(row.b)) for row in context.rows]
    _print_rows(rows, side, "other messages in either context")


def _setting(value: Any) -> str:
    if isinstance(value, dict) and "modelId" in value:
        return f"{value.get('provider')}/{value.get('modelId')}"
    if isinstance(value, dict):
        return "(system message " + str(len(str(value.get("content", "")))) + " chars)"
    return "(none)" if value is None else str(value)


def _summary(result: BranchComparison) -> Table:
    from rich.table import Table

    table = Table(box=None, pad_edge=False, header_style="bold")
    for title in ("branch", "entries", "messages", "tool calls", "files", "tokens", "cost"):
        table.add_column(title, justify="left" if title == "branch" else "right", no_wrap=True)
    timed = stdout_console().width >= 100  # the time span needs room: left out on narrow terminals
    if timed:
        table.add_column("from", no_wrap=True)
        table.add_column("to", no_wrap=True)
    for name, label in (("common", "common"), ("a", "A only"), ("b", "B only")):
        stats = result.diff.stats[name]
        usage = result.usage[name]
        table.add_row(label, f"{stats.entries:,}", f"{stats.messages:,}", f"{stats.tool_call_count:,}",
                      f"{len(stats.files):,}", f"{usage.total_tokens:,}", cost_cell(usage),
                      *((_time(stats.first_ms), _time(stats.last_ms)) if timed else ()))
    return table


def _time(ms: float | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
