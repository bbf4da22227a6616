"""``sessiontree budget set|list|remove``: spending budgets kept in the config file (docs/budgets.md).

Thin edge over :mod:`sessiontree.usage.config` (the file) and
:mod:`sessiontree.usage.budgets` (the spend); :func:`watch_alerts` is what
``sync --watch`` calls after each batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from sessiontree.cli.common import App, cli, cost_cell, echo_line, pass_app, print_json, print_rich, stdout_console
from sessiontree.cli.stats import budget_line
from sessiontree.core.textsafe import safe_line
from sessiontree.sync.sources import SESSION_AGENTS, agent_choice_text

if TYPE_CHECKING:
    from sessiontree.stores.base import SessionStore


@cli.group("budget", short_help="Spending budgets: set, list, remove (checked by stats --budget and sync --watch).")
def budget_group() -> None:
    """Spending budgets kept in the config file ($SESSIONTREE_CONFIG, else config.toml in the
    user's config folder). `sync --watch` checks them after each change and warns (and POSTs
    to the budget's webhook) once when a budget is crossed."""


@budget_group.command("set")
@click.argument("name")
@click.argument("amount", metavar="AMOUNT[/day|/week|/month]")
@click.option("--agent", "agents", metavar="AGENT", multiple=True, type=click.Choice(SESSION_AGENTS),
              help=f"Only calls of sessions of this agent ({agent_choice_text()}). Repeatable.")
@click.option("--cwd", "cwd", metavar="DIR", type=click.Path(file_okay=False, path_type=str),
              help="Only calls of sessions of this project directory.")
@click.option("--host", "hosts", metavar="HOST", multiple=True, help="Only calls of sessions from this host.")
@click.option("--user", "users", metavar="USER", multiple=True, help="Only calls of sessions from this user.")
@click.option("--webhook", metavar="URL", help="POST a small JSON here when sync --watch sees the budget crossed.")
def budget_set(name: str, amount: str, agents: tuple[str, ...], cwd: str | None, hosts: tuple[str, ...],
               users: tuple[str, ...], webhook: str | None) -> None:
    """Add the budget NAME (or replace it): AMOUNT USD, per day, week or month when given."""
    import os

    from sessiontree.usage.budgets import Budget, parse_budget
    from sessiontree.usage.config import config_path, set_budget

    try:
        nanos, period = parse_budget(amount)
        budget = Budget(name, nanos, period, agents=agents, cwd=os.path.abspath(cwd) if cwd else None,
                        hosts=hosts, users=users, webhook=webhook)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    replaced = set_budget(budget)
    echo_line(f"{'Replaced' if replaced else 'Added'} budget {name}: {budget.label} in {config_path()}")


@budget_group.command("remove")
@click.argument("name")
def budget_remove(name: str) -> None:
    """Remove the budget NAME from the config file."""
    from sessiontree.usage.config import config_path, remove_budget

    if not remove_budget(name):
        from sessiontree.cli.common import UserError

        raise UserError(f"no budget named {name!r} in {config_path()}")
    echo_line(f"Removed budget {name}")


@budget_group.command("list")
@click.option("--timezone", "-z", "tz", metavar="TZ", help="Time zone of the periods' days (default: local).")
@click.option("--json", "as_json", is_flag=True, help="Print the budgets and their spend as JSON.")
@pass_app
def budget_list(app: App, tz: str | None, as_json: bool) -> None:
    """Every budget with its spend in the current period (exit status 0 even when one is over)."""
    from rich.table import Table
    from rich.text import Text

    from sessiontree.usage.budgets import budget_status
    from sessiontree.usage.config import config_path, load_budgets
    from sessiontree.usage.money import format_usd

    budgets = load_budgets()
    statuses = [budget_status(app.store, budget, tz=tz)[0] for budget in budgets] if budgets else []
    if as_json:
        print_json({"config": config_path(), "budgets": [s.to_dict() for s in statuses]})
        return
    if not statuses:
        echo_line(f"No budgets in {config_path()}; add one with: sessiontree budget set NAME AMOUNT[/day]")
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    for title in ("name", "budget", "period", "spent", "left", "filters"):
        table.add_column(title, no_wrap=title != "filters", justify="right" if title in ("spent", "left") else "left")
    for s in statuses:
        filters = ", ".join(f"{k}={','.join(v) if isinstance(v, list) else v}" for k, v in s.budget.filters().items())
        days = "" if s.since is None else s.since + ("" if s.until == s.since else f"..{s.until}")
        left = Text(format_usd(s.left_nanos) if not s.over else f"over {format_usd(-s.left_nanos)}",
                    style="red" if s.over else "green")
        table.add_row(safe_line(s.budget.name), s.budget.label, days, cost_cell(s.totals), left, safe_line(filters))
    print_rich(stdout_console(), table)


def watch_alerts(store: SessionStore) -> None:
    """Check the budgets after a watched batch: one warning line on stderr per new crossing
    (and the webhook's problem, if its POST failed). A broken config file is one warning,
    never the end of the watch."""
    from sessiontree.errors import SessionError
    from sessiontree.usage.alerts import alert_crossings

    try:
        alerts = alert_crossings(store)
    except (SessionError, OSError, ValueError) as exc:
        echo_line(f"sessiontree: warning: budgets not checked: {exc}", err=True)
        return
    for alert in alerts:
        line = "sessiontree: warning: " + budget_line(alert.crossing.status)
        if alert.posted:
            line += " (webhook notified)"
        elif alert.problem:
            line += f" (webhook not notified: {alert.problem}; tried again on the next change)"
        echo_line(line, err=True)
