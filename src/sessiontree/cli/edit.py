"""Commands that change a session or the store: ``fork``, ``delete``, ``name``, ``label``."""

from __future__ import annotations

import click

from sessiontree.cli.common import (
    App,
    UserError,
    cli,
    describe_error,
    echo_line,
    open_session,
    pass_app,
    plural,
    print_json,
    resolve_entry_id,
    resolve_session_id,
)
from sessiontree.core.textsafe import safe_line
from sessiontree.errors import SessionError

# --------------------------------------------------------------------------- fork, delete, name, label


@cli.command("fork", short_help='Copy a session (or one branch) into a new one.')
@click.argument("session")
@click.option("--at", "at", metavar="ENTRY",
              help="Fork only the branch ending at this entry (labels on it are kept).")
@click.option("--cwd", "cwd", metavar="DIR", help="Project directory of the new session (default: the source's).")
@click.option("--json", "as_json", is_flag=True, help="Print the new session as JSON.")
@pass_app
def fork_cmd(app: App, session: str, at: str | None, cwd: str | None, as_json: bool) -> None:
    """Copy a session into a new one (new id, parentSessionId = the source); the source is unchanged.

    Without --at every entry of every branch is copied; with --at ENTRY only
    the path from the root to ENTRY.
    """
    session_id = resolve_session_id(app, session)
    source = open_session(app, session_id, cwd)
    target_cwd = cwd if cwd is not None else source.get_cwd()
    if at is not None:
        entry_id = resolve_entry_id(source, at)
        source.create_branched_session(entry_id)
        fork = source
    else:
        fork = source.fork_to(target_cwd)
    new_id = fork.get_session_id()
    if as_json:
        print_json({"sessionId": new_id, "parentSessionId": session_id, "entries": len(fork.get_entries()),
                    "cwd": fork.get_cwd()})
        return
    echo_line(f"Forked {session_id} into {new_id} ({plural(len(fork.get_entries()), 'entry', 'entries')})")


@cli.command("delete", short_help='Delete sessions from the store.')
@click.argument("sessions", nargs=-1, required=True, metavar="SESSION...")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--json", "as_json", is_flag=True, help="Print the deleted ids as JSON.")
@pass_app
def delete_cmd(app: App, sessions: tuple[str, ...], yes: bool, as_json: bool) -> None:
    """Delete sessions and their entries from the store (a JSONL file goes to the trash).

    Every SESSION prefix is resolved before anything is deleted: one unknown or
    ambiguous prefix deletes nothing. Declining the question is not an error:
    "Nothing deleted." and exit status 0. A session that cannot be deleted is
    reported and the others are still deleted; exit status 1 then.
    """
    ids = list(dict.fromkeys(resolve_session_id(app, prefix) for prefix in sessions))
    if not yes:
        question = (f"Delete session {ids[0]}?" if len(ids) == 1
                    else f"Delete {len(ids)} sessions ({', '.join(ids)})?")
        question = safe_line(question)
        if not click.confirm(question, err=True):
            click.echo("Nothing deleted.", err=True)
            if as_json:
                print_json({"deleted": [], "failed": []})
            return
    deleted: list[str] = []
    failed: list[dict[str, str]] = []
    for session_id in ids:
        try:
            app.store.delete(session_id)
        except (SessionError, OSError) as exc:
            failed.append({"sessionId": session_id, "reason": describe_error(exc)})
        else:
            deleted.append(session_id)
    if as_json:
        print_json({"deleted": deleted, "failed": failed})
    else:
        for session_id in deleted:
            echo_line(f"Deleted {session_id}")
        for row in failed:
            echo_line(f"Not deleted {row['sessionId']}: {row['reason']}", err=True)
    if failed:
        raise UserError(f"{len(failed)} of {len(ids)} sessions not deleted")


@cli.command("name", short_help="Set or clear a session's display name.")
@click.argument("session")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_app
def name_cmd(app: App, session: str, name: str, as_json: bool) -> None:
    """Set a session's display name; an empty NAME ("") clears it."""
    session_id = resolve_session_id(app, session)
    manager = open_session(app, session_id)
    state = manager.get_session_name_state()
    # An entry only when the state changes: the log is append-only, repeats would pile up.
    unchanged = state.name == (name.strip() or None) and (state.has_name or not name.strip())
    entry_id = None if unchanged else manager.append_session_info(name)
    current = manager.get_session_name()
    if as_json:
        print_json({"sessionId": session_id, "entryId": entry_id, "name": current, "changed": not unchanged})
        return
    if unchanged:
        echo_line(f"Unchanged: {session_id} is named {current}" if current else f"Unchanged: {session_id} has no name")
    else:
        echo_line(f"Named {session_id}: {current}" if current else f"Cleared the name of {session_id}")


@cli.command("label", short_help='Set or clear the label of an entry.')
@click.argument("session")
@click.argument("entry")
@click.argument("label", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_app
def label_cmd(app: App, session: str, entry: str, label: str | None, as_json: bool) -> None:
    """Set the label of ENTRY to LABEL; without LABEL (or with "") clear it."""
    session_id = resolve_session_id(app, session)
    manager = open_session(app, session_id)
    target = resolve_entry_id(manager, entry)
    unchanged = manager.get_label(target) == (label or None)
    entry_id = None if unchanged else manager.append_label_change(target, label or None)
    current = manager.get_label(target)
    if as_json:
        print_json({"sessionId": session_id, "targetId": target, "entryId": entry_id, "label": current,
                    "changed": not unchanged})
        return
    if unchanged:
        echo_line(f"Unchanged: {target} is labelled {current}" if current else f"Unchanged: {target} has no label")
    else:
        echo_line(f"Labelled {target}: {current}" if current else f"Cleared the label of {target}")


