"""Commands about the store itself: ``path`` (where it is) and ``reindex`` (rebuild derived data)."""

from __future__ import annotations

import sys

import click

from sessiontree.cli.common import (
    FILL_HINT,
    App,
    busy_spinner,
    cli,
    echo_line,
    pass_app,
    plural,
    print_json,
    resolve_session_id,
)


@cli.command("path", short_help="Print where the store is.")
@click.option("--json", "as_json", is_flag=True, help="Print kind, path, URL, where it came from, and whether it exists.")
@pass_app
def path_cmd(app: App, as_json: bool) -> None:
    """Print the store's file (SQLite) or directory (JSONL); opens nothing.

    The store is --store, else $SESSIONTREE_STORE, else the default SQLite
    database in the user data directory. A store that does not exist yet is
    still printed, with how to fill it on a line of its own (on stderr when
    stdout is not a terminal, so stdout stays the path alone).
    """
    from sessiontree.stores import resolve_store

    where = resolve_store(app.store_arg)
    shown = where.path if where.path is not None else where.url
    if as_json:
        print_json({"kind": where.kind, "path": where.path, "url": where.url, "source": where.source,
                    "exists": where.exists})
        return
    echo_line(shown)
    if not where.exists:
        # Its own line, never a tail of the path: stdout stays the path alone for
        # scripts ($(sessiontree path)); a terminal reads both in order.
        note = f"the store does not exist yet; {FILL_HINT}"
        if sys.stdout.isatty():
            echo_line(f"({note})")
        else:
            echo_line(f"sessiontree: note: {note}", err=True)


@cli.command("reindex", short_help="Rebuild derived data (listing, search, usage) from the entries.")
@click.argument("session", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the number of sessions rebuilt as JSON.")
@pass_app
def reindex_cmd(app: App, session: str | None, as_json: bool) -> None:
    """Recompute everything the store derives from the entries: listing columns,
    the search index and the usage ledger, for SESSION or every session.

    Entries are the only truth; this is the one path that rebuilds the rest
    (after an upgrade, or when `check --store` reports drift). One transaction:
    an interrupted reindex changes nothing.
    """
    session_id = resolve_session_id(app, session) if session is not None else None
    with busy_spinner("Reindexing…"):
        count = app.store.reindex(session_id)
    if as_json:
        print_json({"reindexed": count})
        return
    echo_line(f"Reindexed {plural(count, 'session', 'sessions')}")
