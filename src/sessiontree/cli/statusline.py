"""``sessiontree statusline``: one short line for an agent's status bar (docs/statusline.md).

The console script answers the plain form of this command without loading the
command line (:mod:`sessiontree._launch`); this click command is the same
command for every other path (``python -m sessiontree``, ``--help``, tests), and
calls the same :func:`~sessiontree._statusline.run_statusline`.
"""

from __future__ import annotations

import sys

import click

from sessiontree._statusline import run_statusline
from sessiontree.cli.common import App, cli, pass_app


@cli.command("statusline", short_help="One line for an agent's status bar: session cost, today, budget left.")
@click.option("--session", metavar="ID", help="The session (default: session_id of the JSON on stdin).")
@click.option("--budget", metavar="NAME", help="The budget of the config file to show (default: its first).")
@click.option("--timezone", "-z", "tz", metavar="TZ", help="Time zone of \"today\" (default: the local zone).")
@click.option("--json", "as_json", is_flag=True, help="Print the numbers as JSON.")
@pass_app
@click.pass_context
def statusline_cmd(ctx: click.Context, app: App, session: str | None, budget: str | None, tz: str | None,
                   as_json: bool) -> None:
    """Print this session's cost so far, today's total and the budget left, on one line.

    For Claude Code's statusLine setting ({"type": "command", "command":
    "sessiontree statusline"}): the session comes from the JSON Claude Code
    writes on stdin (session_id). Reads the store as it is, never syncs (keep
    `sessiontree sync --watch` running), and always exits 0: a problem is
    shown on the line in a few words.
    """
    ctx.exit(run_statusline(app.store_arg, session=session, budget=budget, tz=tz, as_json=as_json,
                            stdin=sys.stdin.buffer, stdout=sys.stdout))
