"""Commands of a team store (docs/team.md): ``team add|list|remove|stats|open|audit``, and
retention on every store: ``prune``, ``hold``, ``unhold``.

The commands ask the store what it can do (:class:`~sessiontree.stores.base.TeamAccess`,
:class:`~sessiontree.stores.base.Retention`), never which kind it is.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

import click

from sessiontree.cli.common import (
    Age,
    App,
    UserError,
    cli,
    echo_fields,
    echo_line,
    pass_app,
    plain_table,
    plural,
    print_json,
    print_rich,
    resolve_session_id,
    stdout_console,
)
from sessiontree.core.textsafe import safe_line
from sessiontree.errors import StorageError
from sessiontree.sync.sources import FOREIGN_AGENTS

if TYPE_CHECKING:
    from sessiontree.stores.base import Retention, TeamAccess

_ROLES = ("member", "lead", "admin")


def _team(app: App) -> TeamAccess:
    from sessiontree.stores.base import TeamAccess

    store = app.store
    if not isinstance(store, TeamAccess):
        raise UserError(f"{store.url} is not a team store: team commands need a PostgreSQL store "
                        "(docs/team.md)")
    return store


def _retention(app: App) -> Retention:
    from sessiontree.stores.base import Retention

    store = app.store
    if not isinstance(store, Retention):  # pragma: no cover - every store of this package has it
        raise UserError(f"{store.url} cannot prune")
    return store


_LEFT = frozenset({"user_name", "day", "provider", "model", "agent", "project"})


def _table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    """``rows`` as a borderless table of ``columns`` (text flush left, numbers flush
    right). Piped, it is printed without rich where :func:`plain_table` can, the same
    bytes: rich took 20 s of CPU for the lead's 21,900 rows by user, the plain table
    0.1 s (benchmarks/README.md, round six)."""
    right = [column not in _LEFT for column in columns]
    # A number's digits need no escaping: safe_line only for the rest (262,800 cells).
    cells = [[str(value) if type(value) is int else safe_line(value) for value in map(row.__getitem__, columns)]
             for row in rows]
    text = plain_table([columns, *cells], right)
    if text is not None:
        click.echo(text)
        return
    from rich.table import Table

    table = Table(show_edge=False, pad_edge=False, box=None)
    for column, flush_right in zip(columns, right, strict=True):
        table.add_column(column, justify="right" if flush_right else "left")
    for line in cells:
        table.add_row(*line)
    print_rich(stdout_console(), table)


@cli.group("team", short_help="People, roles, aggregates and the audited door of a team store.")
def team_group() -> None:
    """A PostgreSQL store shared by a team, private by construction (docs/team.md): each
    person syncs and reads with their own database role and sees only their own
    sessions; the team sees aggregates; an admin reads one session of someone else's
    only through `team open`, which records who, when, which and why first."""


@team_group.command("add", short_help="Create a person's role (run by the database owner).")
@click.argument("name")
@click.option("--role", type=click.Choice(_ROLES), default="member", show_default=True,
              help="member: own sessions and team aggregates; lead: also aggregates by user; "
                   "admin: also the audited door.")
@click.option("--password-stdin", is_flag=True, help="Read the role's password from the first line of stdin.")
@pass_app
def team_add(app: App, name: str, role: str, password_stdin: bool) -> None:
    """Create the login role NAME (or take the existing one) in the group of ROLE; run by
    the database owner (a role with CREATEROLE). Without --password-stdin the role has
    no password: authenticate it as your identity provider says (docs/team.md)."""
    password = sys.stdin.readline().rstrip("\n") if password_stdin else None
    app.create_store = True  # the database owner's first command may initialise the store
    try:
        _team(app).team_add(name, role, password)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    echo_line(f"{name}: {role}")


@team_group.command("list", short_help="The people of the team and their roles.")
@click.option("--json", "as_json", is_flag=True, help="Print the people as JSON.")
@pass_app
def team_list(app: App, as_json: bool) -> None:
    """Every login role in the team's groups: its role, whether it may log in, and how
    many sessions it owns here."""
    members = _team(app).team_list()
    if as_json:
        print_json([{"name": m.name, "role": m.role, "canLogin": m.can_login, "sessions": m.sessions}
                    for m in members])
        return
    for m in members:
        echo_fields(m.name, m.role, plural(m.sessions, 'session', 'sessions'),
                    *(() if m.can_login else ("(no login)",)))


@team_group.command("remove", short_help="Take a person out of the team (their sessions stay).")
@click.argument("name")
@pass_app
def team_remove(app: App, name: str) -> None:
    """Take NAME out of the team's groups and drop the login role. Their sessions stay,
    owned by NAME and readable by no one else; prune them as an admin to delete them."""
    _team(app).team_remove(name)
    echo_line(f"removed {name}")


@team_group.command("stats", short_help="Team aggregates: tokens, cost, calls, sessions (no content).")
@click.option("--by-user", is_flag=True, help="One row per user too (leads and admins).")
@click.option("--sessions", "sessions", is_flag=True, help="Sessions, entries and messages instead of usage.")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
@pass_app
def team_stats(app: App, by_user: bool, sessions: bool, as_json: bool) -> None:
    """The team's aggregates, readable by every member: per day, provider, model, agent
    and project (the last part of the directory, never the path), with no text or
    title. `sessiontree stats` stays your own usage; this is everyone's."""
    team = _team(app)
    rows = team.team_sessions(by_user=by_user) if sessions else team.team_usage(by_user=by_user)
    if as_json:
        print_json(rows)
        return
    if sessions:
        columns = ["day", "agent", "project", "sessions", "entries", "messages"]
    else:
        columns = ["day", "provider", "model", "agent", "project", "calls", "input", "output", "cache_read",
                   "cache_write", "cost_nanos"]
    _table(rows, (["user_name"] if by_user else []) + columns)


@team_group.command("open", short_help="Read someone's session through the audited door (admins).")
@click.argument("session")
@click.option("--reason", required=True, help="Why: recorded with who, when and which before anything is shown.")
@pass_app
def team_open(app: App, session: str, reason: str) -> None:
    """Print SESSION (anyone's) as JSON: header and entries. First an audit record of who,
    when, which session and why is written and committed; the owner sees it with `team
    audit`. Admins only."""
    try:
        audit_id, parsed = _team(app).team_open(session, reason)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    echo_line(f"audit record {audit_id}", err=True)
    print_json({"audit": audit_id, "header": parsed.header, "entries": parsed.entries})


@team_group.command("audit", short_help="Every access to your sessions through the audited door.")
@click.option("--json", "as_json", is_flag=True, help="Print the records as JSON.")
@pass_app
def team_audit(app: App, as_json: bool) -> None:
    """Who opened which of your sessions, when and why (and what you opened yourself)."""
    records = _team(app).team_audit()
    if as_json:
        print_json([r.to_dict() for r in records])
        return
    if not records:
        echo_line("no accesses")
    for r in records:
        echo_fields(r.at, r.reader, r.session_id, r.session_owner, r.reason)


# -- retention, on every store --------------------------------------------------------------


@cli.command("prune", short_help="Delete sessions older than AGE (held ones spared), with a deletion log.")
@click.option("--older-than", "age", type=Age(), required=True, metavar="AGE",
              help="Last activity longer ago than AGE (30d, 12w, 90d...).")
@click.option("--agent", metavar="AGENT",
              help="Only sessions this agent wrote, as their provenance names it (pi, atomic, "
                   + ", ".join(name for name, *_ in FOREIGN_AGENTS) + ").")
@click.option("--dry-run", is_flag=True, help="Only list what would be deleted.")
@click.option("--everyone", is_flag=True, help="A team store's admin: every owner's sessions, by policy.")
@click.option("--json", "as_json", is_flag=True, help="Print the sessions as JSON.")
@pass_app
def prune_cmd(app: App, age: float, agent: str | None, dry_run: bool, everyone: bool, as_json: bool) -> None:
    """Delete whole sessions (and what the store derives from them) whose last activity is
    older than AGE, sparing held sessions (`sessiontree hold`). Each deletion is
    logged with the session id, entry count and size, never content (docs/team.md). On
    a team store a member prunes their own sessions; --everyone is for admins."""
    cutoff_ms = time.time() * 1000.0 - age * 1000.0
    try:
        records = _retention(app).prune(cutoff_ms, agent=agent, dry_run=dry_run, everyone=everyone)
    except StorageError as exc:
        if everyone and "permission denied" in str(exc):
            raise UserError("prune --everyone is for team admins") from exc
        raise
    if as_json:
        print_json({"dryRun": dry_run, "sessions": [r.to_dict() for r in records]})
        return
    for r in records:
        echo_fields(r.session_id, plural(r.entries, 'entry', 'entries'), f"{r.bytes} bytes",
                    *((r.owner,) if r.owner else ()))
    verb = "would delete" if dry_run else "deleted"
    echo_line(f"{verb} {plural(len(records), 'session', 'sessions')}", err=True)


def _hold(app: App, session: str, held: bool) -> None:
    session_id = resolve_session_id(app, session)
    if not _retention(app).set_hold(session_id, held):
        raise UserError(f"no session {session_id}")
    echo_line(f"{'held' if held else 'released'} {session_id}")


@cli.command("hold", short_help="Keep a session from being pruned.")
@click.argument("session")
@pass_app
def hold_cmd(app: App, session: str) -> None:
    """Hold SESSION: `sessiontree prune` never deletes it until `unhold`."""
    _hold(app, session, True)


@cli.command("unhold", short_help="Let a held session be pruned again.")
@click.argument("session")
@pass_app
def unhold_cmd(app: App, session: str) -> None:
    """Release the hold on SESSION."""
    _hold(app, session, False)
