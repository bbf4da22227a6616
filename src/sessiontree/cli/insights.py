"""``sessiontree insights [ID]``: what went wrong and what it cost, counted from the entries
(docs/insights.md). Thin edge over :mod:`sessiontree.usage.insights`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from sessiontree.cli.common import (
    App,
    busy_spinner,
    cli,
    cost_cell,
    echo_line,
    pass_app,
    plural,
    print_json,
    print_rich,
    resolve_session_id,
    stdout_console,
)
from sessiontree.core.textsafe import safe_line

if TYPE_CHECKING:
    from rich.table import Table

    from sessiontree.usage.insights import SessionInsights, StoreInsights


@cli.command("insights", short_help="Tool errors, error loops, repeats, interruptions, compactions, abandoned "
                                    "branches: per session or across the store.")
@click.argument("session", required=False, metavar="[ID]")
@click.option("--limit", default=10, show_default=True, type=click.IntRange(1, 1000),
              help="Across the store: how many sessions and branches each top list shows.")
@click.option("--json", "as_json", is_flag=True, help="Print the insights as JSON (docs/insights.md).")
@pass_app
def insights_cmd(app: App, session: str | None, limit: int, as_json: bool) -> None:
    """Insights computed from the entries, no model calls: tool calls and errors by tool,
    error loops (one tool failing 3+ times in a row), repeated identical calls, calls
    never answered, compactions and the tokens they cut, abandoned branches and their
    cost, cost per file edited, the longest waits for a result.

    With ID: one session. Without: every session of the store (the sessions with the
    most error loops, the most expensive abandoned branches).
    """
    from sessiontree.usage.insights import session_insights, store_insights

    if session is not None:
        session_id = resolve_session_id(app, session)
        with busy_spinner("Reading the session…"):
            one = session_insights(app.store, session_id)
        if as_json:
            print_json(one.to_dict())
        else:
            _print_session(one)
        return
    with busy_spinner("Reading every session…"):
        every = store_insights(app.store, limit=limit)
    if as_json:
        print_json(every.to_dict())
    else:
        _print_store(every)


def _tools_table(rows: list[tuple[str, int, int]]) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("tool")
    table.add_column("calls", justify="right")
    table.add_column("errors", justify="right")
    for name, calls, errors in rows:
        table.add_row(Text(safe_line(name)), f"{calls:,}", Text(f"{errors:,}", style="red" if errors else ""))
    return table


def _print_session(one: SessionInsights) -> None:
    from rich.text import Text

    from sessiontree.usage.money import format_usd

    f = one.facts
    console = stdout_console()
    print_rich(console, Text(f"Session {one.session_id}: {plural(f.tool_calls, 'tool call', 'tool calls')}, "
                             f"{plural(f.tool_errors, 'error', 'errors')}, cost {cost_cell(one.totals)}", style="bold"))
    if f.tools:
        print_rich(console, _tools_table([(t.name, t.calls, t.errors) for t in
                                          sorted(f.tools.values(), key=lambda t: (-t.calls, t.name))]))
    lines = [f"Error loops: {len(f.error_loops)}" + "".join(
        f"\n  {loop.tool} failed {loop.length} times in a row ({loop.first_entry_id} .. {loop.last_entry_id})"
        for loop in f.error_loops)]
    lines.append(f"Repeated identical calls: {f.repeats}" + "".join(
        f"\n  {r.tool} x{r.count}: {r.arguments[:80]}"
        for r in sorted(f.repeated_calls, key=lambda r: -r.count)[:5]))
    lines.append(f"Interrupted calls (no result recorded): {len(f.interrupted_calls)}" + "".join(
        f"\n  {c.tool} {c.call_id} in {c.entry_id}" for c in f.interrupted_calls[:10]))
    lines.append(f"Compactions: {len(f.compactions)}, tokens cut {one.tokens_cut:,}" + "".join(
        f"\n  {c.entry_id}: {c.tokens_before if c.tokens_before is not None else '?'} -> "
        f"{c.tokens_after if c.tokens_after is not None else '?'} tokens" for c in f.compactions))
    lines.append(f"Abandoned branches: {len(one.branches)}, cost {format_usd(one.abandoned_nanos)}" + "".join(
        f"\n  leaf {b.leaf_id} (from {b.fork_id or 'a root'}): {plural(b.entries, 'entry', 'entries')}, "
        f"{cost_cell(b.totals)}" for b in one.branches[:10]))
    per_file = one.cost_per_file_nanos
    lines.append(f"Files edited: {len(f.files_edited)}"
                 + (f", cost per file {format_usd(per_file)}" if per_file is not None else ""))
    lines.append("Longest waits for a result:" + "".join(
        f"\n  {w.ms / 1000:,.1f} s  {w.tool} ({w.call_entry_id} -> {w.result_entry_id})" for w in f.waits)
                 if f.waits else "Longest waits for a result: none")
    for line in lines:
        for part in line.split("\n"):
            echo_line(part)


def _print_store(every: StoreInsights) -> None:
    from rich.text import Text

    from sessiontree.usage.money import format_usd

    console = stdout_console()
    print_rich(console, Text(f"{plural(every.sessions, 'session', 'sessions')}: "
                             f"{plural(every.tool_calls, 'tool call', 'tool calls')}, "
                             f"{plural(every.tool_errors, 'error', 'errors')}", style="bold"))
    if every.tools:
        print_rich(console, _tools_table([(name, v[0], v[1]) for name, v in
                                          sorted(every.tools.items(), key=lambda item: (-item[1][0], item[0]))]))
    echo_line(f"Error loops: {every.error_loops}; repeated identical calls: {every.repeated_calls}; "
              f"interrupted calls: {every.interrupted_calls}; compactions: {every.compactions} "
              f"({every.tokens_cut:,} tokens cut); files edited: {every.files_edited}; "
              f"abandoned branches cost {format_usd(every.abandoned_nanos)}")
    if every.loop_sessions:
        echo_line("Sessions with the most error loops:")
        for sid, loops, longest in every.loop_sessions:
            echo_line(f"  {sid}  {plural(loops, 'loop', 'loops')}, longest {longest}")
    if every.top_branches:
        echo_line("Most expensive abandoned branches:")
        for b in every.top_branches:
            echo_line(f"  {b.session_id} leaf {b.leaf_id}: {cost_cell(b.totals)} "
                      f"({plural(b.entries, 'entry', 'entries')})")
    if every.skipped:
        echo_line(f"{plural(every.skipped, 'session', 'sessions')} could not be read and are not counted; "
                  "run sessiontree check --store")
