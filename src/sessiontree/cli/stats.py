"""``sessiontree stats``: tokens and cost of every billed call, counted once (docs/usage.md).

A thin edge over :func:`sessiontree.usage.report.usage_report`: parse flags, call
it, print a table (and, by day, a bar chart) or its JSON form.
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING

import click

from sessiontree.cli.common import (
    PIPE_WIDTH,
    App,
    DateBound,
    busy_spinner,
    cli,
    cost_cell,
    echo_line,
    pass_app,
    plain_table,
    plural,
    print_json,
    print_rich,
    stdout_console,
)
from sessiontree.core.textsafe import safe_line
from sessiontree.sync.sources import SESSION_AGENTS, agent_choice_text
from sessiontree.usage.choices import COST_MODES, GROUPINGS

if TYPE_CHECKING:
    from sessiontree.usage.budgets import Budget, BudgetStatus
    from sessiontree.usage.report import UsageReport

#: Width of the longest bar of the per-day chart, in cells.
BAR_WIDTH = 40

_GROUP_TITLES = {"day": "day", "week": "week of", "month": "month", "session": "session", "model": "model",
                 "provider": "provider", "project": "project",
                 "agent": "agent", "host": "host", "user": "user"}


@cli.command("stats", short_help="Tokens and cost by day, week, month, session, model, provider, project, agent, "
                                 "host or user.")
@click.option("--by", "by", type=click.Choice(GROUPINGS), default="day", show_default=True,
              help="How to group the calls (week: weeks starting on Monday).")
@click.option("--since", type=DateBound(end=False, times=False), metavar="DATE|Nd", help="From this day on (YYYY-MM-DD or YYYYMMDD), or the last N "
                                                 "days including today (7d; also Nw).")
@click.option("--until", type=DateBound(end=True, times=False), metavar="DATE", help="Up to and including this day (YYYY-MM-DD or YYYYMMDD).")
@click.option("--cwd", "cwd", metavar="DIR", type=click.Path(file_okay=False, path_type=str),
              help="Only calls first made in sessions of this project directory.")
@click.option("--host", "hosts", metavar="HOST", multiple=True,
              help="Only calls first made in sessions first synced or imported on this host (its name or machine "
                   "id). Repeatable.")
@click.option("--user", "users", metavar="USER", multiple=True,
              help="Only calls first made in sessions first synced or imported by this user. Repeatable.")
@click.option("--timezone", "-z", "tz", metavar="TZ",
              help="Time zone of day boundaries and dates (IANA name such as Europe/Berlin, UTC, or +01:00). "
                   "Default: the local zone.")
@click.option("--cost", "cost", type=click.Choice(COST_MODES), default="auto", show_default=True,
              help="auto: recorded cost, catalogue estimate where a call has tokens but no usable cost; "
                   "recorded: recorded costs only; catalog: every call priced from the offline catalogue.")
@click.option("--agent", "agents", metavar="AGENT", multiple=True, type=click.Choice(SESSION_AGENTS),
              help=f"Only calls first made in sessions of this agent ({agent_choice_text()}). Repeatable.")
@click.option("--budget", "budget_text", metavar="AMOUNT[/day|/week|/month]",
              help="Print the spend against this budget (USD; per day, week or month of --timezone: the current "
                   "one) and exit 1 when over it (docs/budgets.md).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (docs/usage.md; schemaVersion 1).")
@pass_app
@click.pass_context
def stats_cmd(ctx: click.Context, app: App, by: str, since: str | None, until: str | None, cwd: str | None,
              hosts: tuple[str, ...], users: tuple[str, ...], tz: str | None, cost: str, agents: tuple[str, ...],
              budget_text: str | None, as_json: bool) -> None:
    """Tokens and cost of every billed call in the store, each counted once.

    Counted: assistant messages, usage recorded on tool results, session
    summaries, compactions and branch summaries, and the agent's own usage
    entries. A call copied into another session (fork, branch, re-import)
    is one bill, counted where it first appears. Costs are the recorded ones;
    a call with tokens but no usable recorded cost is priced from the offline
    catalogue and marked estimated, and calls that cannot be priced are named,
    so a partial total never looks complete.

    With --budget, the report covers the budget's current day, week or month
    (or --since/--until without a period) and ends with the spend against it;
    the exit status is 1 when the spend is over the budget, 0 at or under it.
    """
    from sessiontree.usage.report import usage_report

    status: BudgetStatus | None = None
    budget: Budget | None = None
    if budget_text is not None:
        from sessiontree.usage.budgets import Budget, parse_budget

        # Exit status 2 for a bad budget: 1 means "over" (and other errors).
        try:
            amount, period = parse_budget(budget_text)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--budget") from None
        if cost != "auto":
            raise click.UsageError("--budget compares the cost stats shows by default; leave out --cost")
        if period is not None and (since or until):
            raise click.UsageError(f"--budget per {period} sets its own days; leave out --since and --until")
        budget = Budget("", amount, period, agents=agents, cwd=cwd, hosts=hosts, users=users)
    with busy_spinner("Summing usage…"):
        if budget is not None:
            from sessiontree.usage.budgets import budget_status

            status, report = budget_status(app.store, budget, tz=tz, since=since, until=until, by=by)
        else:
            report = usage_report(app.store, by=by, since=since, until=until, cwd=cwd, tz=tz, cost=cost,
                                  hosts=hosts, users=users, agents=agents)
    if as_json:
        data = report.to_dict()
        if status is not None:
            data["budget"] = status.to_dict()
        print_json(data)
        if status is not None and status.over:
            ctx.exit(1)
        return
    _print_table(report, by, bool(since or until or cwd or hosts or users or agents or status))
    if status is not None:
        echo_line(budget_line(status))
        if status.over:
            ctx.exit(1)


def budget_line(status: BudgetStatus) -> str:
    """``Budget $25.00/day (2026-12-06): spent ~$12.34, $12.66 left (49%).`` or ``... over by $1.20.``;
    ``~`` marks a spend with estimated parts, ``+?`` one that leaves unpriced calls out."""
    from sessiontree.usage.money import format_usd

    budget = status.budget
    days = ("" if status.since is None and status.until is None
            else f" ({status.since}" + (f" to {status.until}" if status.until != status.since else "") + ")")
    spent = cost_cell(status.totals)
    name = f" {budget.name}" if budget.name else ""
    if status.over:
        tail = f"over by {format_usd(-status.left_nanos)}"
    else:
        share = (f" ({status.spent_nanos * 100 // budget.amount_nanos}% used)" if budget.amount_nanos else "")
        tail = f"{format_usd(status.left_nanos)} left{share}"
    return f"Budget{name} {budget.label}{days}: spent {spent}, {tail}."


def _print_table(report: UsageReport, by: str, filtered: bool) -> None:
    """The report as ``stats`` prints it: the table, the day chart, the notes. Piped, the
    tables are printed without rich where :func:`print_plain_table` can (start-up), the same
    bytes either way."""
    if not report.groups:
        print_rich(stdout_console(), "No usage recorded" + (" in that range." if filtered else "."))
        _notes(report)
        return
    columns = (("calls", attrgetter("calls")), ("input", attrgetter("input")), ("output", attrgetter("output")),
               ("cache read", attrgetter("cache_read")), ("cache write", attrgetter("cache_write")),
               ("total tokens", attrgetter("total_tokens")))
    header = [_GROUP_TITLES[by], *(title for title, _ in columns), "cost"]
    footer = ["total", *(f"{getter(report.totals):,}" for _, getter in columns), cost_cell(report.totals)]
    body = []
    for group in report.groups:
        label = group.key or "(none)"
        if by == "session" and group.cwd:
            label = f"{label}  {group.cwd}"
        body.append([safe_line(label), *(f"{getter(group.totals):,}" for _, getter in columns),
                     cost_cell(group.totals)])
    chart = _day_chart(report) if by == "day" and len(report.groups) > 1 else None
    right = [False] + [True] * (len(header) - 1)
    # The label column's limit is rich's below at the pipe width (160 - 80 = 80 cells).
    text = plain_table([header, *body, footer], right, [max(20, PIPE_WIDTH - 80)] + [None] * (len(header) - 1))
    if text is not None:
        click.echo(text)
    else:
        _print_rich_table(header, body, footer)
    if chart is not None:
        text = plain_table(chart, [False, False, True])
        if text is not None:
            click.echo("\n" + text)
        else:
            _print_rich_chart(chart)
    _notes(report)


def _print_rich_table(header: list[str], body: list[list[str]], footer: list[str]) -> None:
    """The usage table through rich (a terminal, or what :func:`print_plain_table` declines)."""
    from rich.table import Table
    from rich.text import Text

    console = stdout_console()
    table = Table(box=None, pad_edge=False, header_style="bold", show_footer=True, footer_style="bold")
    table.add_column(header[0], footer[0], no_wrap=True, overflow="ellipsis", max_width=max(20, console.width - 80))
    for title, total in zip(header[1:], footer[1:], strict=True):
        table.add_column(title, total, justify="right", no_wrap=True)
    for row in body:
        table.add_row(Text(row[0]), *row[1:])
    print_rich(console, table)


def _print_rich_chart(chart: list[list[str]]) -> None:
    """The day chart through rich, after a blank line (a terminal, or what :func:`print_plain_table` declines)."""
    from rich.table import Table

    table = Table(box=None, pad_edge=False, show_header=False)
    table.add_column(no_wrap=True)
    table.add_column(no_wrap=True, style="green")
    table.add_column(justify="right", no_wrap=True)
    for row in chart:
        table.add_row(*row)
    console = stdout_console()
    print_rich(console)
    print_rich(console, table)


def _day_chart(report: UsageReport) -> list[list[str]]:
    """Cost per day as horizontal bars (``█`` scaled to the most expensive day): rows of
    day, bar, cost."""
    from sessiontree.usage.money import format_usd

    top = max(group.totals.cost_nanos for group in report.groups) or 1
    rows = []
    for group in report.groups:
        cells = group.totals.cost_nanos * BAR_WIDTH / top
        whole = int(cells)
        bar = "█" * whole + ("▏" if cells - whole >= 0.5 or (whole == 0 and group.totals.cost_nanos) else "")
        rows.append([group.key, bar.ljust(BAR_WIDTH), format_usd(group.totals.cost_nanos)])
    return rows


def _notes(report: UsageReport) -> None:
    """What the total leaves out or estimates, under the table."""
    from sessiontree.usage.money import format_usd

    t = report.totals
    lines = [f"Costs: {report.cost_mode} ({plural(t.recorded_calls, 'call', 'calls')} at recorded cost"
             + (f", {t.estimated_calls} estimated from {report.catalog}: {format_usd(t.estimated_nanos)}"
                if t.estimated_calls else "") + "). Total tokens = input + output + cache read + cache write."]
    if t.unpriced_calls:
        names = ", ".join(sorted(t.unpriced_models))
        lines.append(f"Not priced: {plural(t.unpriced_calls, 'call', 'calls')} ({t.unpriced_tokens:,} tokens) "
                     f"of {names}; the cost above leaves them out.")
    if report.skipped_sessions:
        lines.append(f"{plural(report.skipped_sessions, 'session', 'sessions')} could not be read and are "
                     "not counted; run sessiontree check --store")
    for line in lines:
        echo_line(line)
