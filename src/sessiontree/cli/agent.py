"""Commands that give sessions back to the agents: ``restore``, ``resume``, ``archive``, ``archived``.

Thin edge over :mod:`sessiontree.sync.restore` and :mod:`sessiontree.sync.archive`;
docs/agent-loop.md describes what is verified and the remaining race window.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

import click

from sessiontree.cli.common import (
    Age,
    App,
    UserError,
    cli,
    echo_line,
    pass_app,
    plural,
    print_json,
    resolve_session_id,
)
from sessiontree.core.textsafe import safe_line, shell_join, shell_quote
from sessiontree.errors import EntryNotFoundError
from sessiontree.sync.sources import AGENTS

if TYPE_CHECKING:
    from sessiontree.sync.restore import RestoreResult

_AGENT_NAMES = [name for name, _, _ in AGENTS]


def _resolve_entry(app: App, session_id: str, prefix: str) -> str:
    """The session's one entry id equal to or starting with ``prefix``, from its outline
    (ids only: no record is parsed before ``restore`` reads the session)."""
    from sessiontree.format.idprefix import resolve_entry_prefix

    return resolve_entry_prefix(prefix, app.store.read_outline(session_id).ids)


def _restore(app: App, session: str, agent: str | None, directory: str | None,
             at: str | None) -> tuple[str, RestoreResult]:
    """Restore as asked: ``(agent, result)``. With no ``agent``, the session's own: a Claude Code,
    Codex or Gemini CLI session gets its agent's own file back (verbatim), a pi session a pi file;
    a pi file of a foreign session is written only with ``--as pi``, and an oh-my-pi session
    without it is refused (docs/agent-loop.md, "Each agent's own file")."""
    from sessiontree.sync.restore import SOURCE_AGENTS, RestoreError, restore, restore_source, session_agent

    session_id = resolve_session_id(app, session)
    own = session_agent(app.store, session_id)
    if agent is None and own not in (*SOURCE_AGENTS, "pi"):
        # oh-my-pi keeps its own file (a title slot before pi-lineage records): no pi file by default.
        raise UserError(f"session {session_id} is {own}'s, whose own file sessiontree does not write back; "
                        "add --as pi to write it as a pi file")
    if agent is None and own in SOURCE_AGENTS and at is not None:
        raise UserError(f"--at writes a new pi or Atomic session; add --as pi (session {session_id} is {own}'s)")
    entry = _resolve_entry(app, session_id, at) if at is not None else None
    try:
        if agent is None and own in SOURCE_AGENTS:
            return own, restore_source(app.store, session_id, directory=directory)
        return agent or "pi", restore(app.store, session_id, agent=agent or "pi", directory=directory, at=entry)
    except RestoreError as exc:
        raise UserError(str(exc)) from exc
    except EntryNotFoundError as exc:
        raise UserError(str(exc)) from exc


def _report_restore(result: RestoreResult) -> None:
    """The human lines of a restore: what was written, how it was verified, what the agent will not see."""
    file = result.file
    where = safe_line(result.path)
    if result.status == "present":
        echo_line(f"Already there: {where} holds these bytes; nothing was written.")
    else:
        echo_line(f"Restored {file.session_id} to {where} ({plural(len(file.data), 'byte', 'bytes')})")
    if file.byte_exact:
        echo_line(f"  byte for byte: sha256 {file.sha256.hex()} equals the file synced from "
                  f"{safe_line(file.source_path or '')}")
    else:
        echo_line(f"  written in the agent's format (sha256 {file.sha256.hex()})")
    for note in file.notes:
        echo_line(f"  note: {safe_line(note)}")


@cli.command("restore", short_help="Write a stored session into the agent's session folder.")
@click.argument("session")
@click.option("--as", "--agent", "agent", type=click.Choice(_AGENT_NAMES), default=None,
              help="Write a pi or Atomic file into that agent's folder. Default: the session's own agent "
                   "(a Claude Code, Codex or Gemini CLI session gets its original file back; an oh-my-pi "
                   "session needs --as pi).")
@click.option("--dir", "directory", metavar="DIR", help="A sessions folder to write into instead of the agent's.")
@click.option("--at", "at", metavar="ENTRY", help="Only the path root -> ENTRY, as a new session (fork from here).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_app
def restore_cmd(app: App, session: str, agent: str | None, directory: str | None, at: str | None,
                as_json: bool) -> None:
    """Write SESSION into the agent's session folder, where its picker and --session find it.

    A session synced from an agent's folder comes back byte for byte (its
    sha256 equals the file's when it was synced), at the path it came from
    (or under --dir); any other session is written the way the agent writes
    (format 3). A Claude Code, Codex or Gemini CLI session gets its original
    file back in that agent's folder (a Gemini chat under
    ~/.gemini/tmp/<project hash>/chats); --as pi writes it as a pi file instead. An
    existing file is never overwritten: with the same bytes the command does
    nothing, with other bytes it refuses.
    """
    _, result = _restore(app, session, agent, directory, at)
    if as_json:
        print_json(result.to_dict())
        return
    _report_restore(result)


def agent_command(agent: str, path: str, fork: bool) -> list[str]:
    """The agent's own command that opens ``path``: ``pi --session PATH`` or ``pi --fork PATH``
    (Atomic takes the same options: ``atomic --session PATH``)."""
    return [agent, "--fork" if fork else "--session", path]


@cli.command("resume", short_help="Print (or run) the agent command that continues a session.")
@click.argument("session")
@click.option("--as", "--agent", "agent", type=click.Choice(_AGENT_NAMES), default=None,
              help="Continue it in pi or Atomic. Default: the session's own agent (claude --resume ID, "
                   "codex resume ID, pi --session PATH).")
@click.option("--fork", is_flag=True, help="Continue in a new session forked from it (the agent's --fork).")
@click.option("--exec", "run", is_flag=True, help="Run the command in the session's working directory.")
@click.option("--json", "as_json", is_flag=True, help="Print the file and the command as JSON.")
@pass_app
def resume_cmd(app: App, session: str, agent: str | None, fork: bool, run: bool, as_json: bool) -> None:
    """Restore SESSION when its file is not in the agent's folder, then print the agent's
    command that continues it, or run it in the session's directory with --exec: `pi
    --session PATH` (Atomic: `atomic --session PATH`), `claude --resume ID`, `codex resume ID`.
    A Claude Code or Codex file that was archived or removed is written back first, byte for
    byte from the records the store kept. A Gemini CLI session prints `gemini --resume ID`, an
    oh-my-pi session `omp --resume ID` (in its cwd); both write nothing while the agent's own
    file is in place; a Gemini chat file that is gone is written back first, and an oh-my-pi
    file that is gone is reported (docs/agents/gemini.md, "resume" and "omp")."""
    from sessiontree.format.foreign.common import agent_of_header
    from sessiontree.sync.restore import FOREIGN, agent_resume_command

    session_id = resolve_session_id(app, session)
    header = app.store.read_outline(session_id).header
    own = agent_of_header(header)
    if agent is None and own in ("gemini", "omp"):
        _resume_in_place(app, session_id, own, str(header.get("cwd") or "") if own == "omp" else "", run, as_json)
        return
    agent, result = _restore(app, session, agent, None, None)
    if agent in FOREIGN:
        try:
            command = agent_resume_command(agent, result.file.session_id, fork=fork)
        except ValueError as exc:
            raise UserError(str(exc)) from exc
    else:
        command = agent_command(agent, result.path, fork)
    cwd = result.file.cwd
    if "\x00" in cwd:
        raise UserError(f"session {result.file.session_id}: header field \"cwd\" holds a NUL byte, so no "
                        f"command can enter it; the file is at {safe_line(result.path)}")
    if as_json and not run:
        print_json({**result.to_dict(), "agent": agent, "command": command, "cwd": cwd})
        return
    if result.status == "written":
        _report_restore(result)
        click.echo("", err=True)
    # Quoted so that the printed line is safe on a terminal and still names the same bytes
    # (a control character is written $'\xHH'; docs/agent-loop.md, "resume").
    line = f"cd {shell_quote(cwd)} && {shell_join(command)}" if cwd else shell_join(command)
    if not run:
        click.echo(line)
        return
    app.close()
    if cwd:
        try:
            os.chdir(cwd)
        except OSError as exc:
            raise UserError(f"cannot enter the session's directory {cwd}: {exc.strerror}") from exc
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        raise UserError(f"cannot run {command[0]}: {exc.strerror} (is {command[0]} installed and on PATH?)") from exc


def _resume_in_place(app: App, session_id: str, own: str, cwd: str, run: bool, as_json: bool) -> None:
    """Print (or run) the agent's own command for a session whose file stays in the agent's
    folder (Gemini CLI: ``gemini --resume ID``; oh-my-pi: ``omp --resume ID`` in its cwd).

    Nothing is written while a file synced for the session is still where it was synced from.
    When none is (the chat was deleted, or the session was never synced here): a Gemini chat is
    written back first, byte for byte (:func:`~sessiontree.sync.restore.restore_source`, reported
    on stderr); for oh-my-pi, whose file sessiontree does not write back, the command refuses,
    naming ``--as pi``.

    Raises:
        UserError: as above, or the Gemini chat cannot be given back.
    """
    from sessiontree.format.foreign import gemini, omp
    from sessiontree.sync.restore import RestoreError, restore_source

    states = [state for state in app.store.sync_states().values() if state.session_id == session_id]
    if not any(os.path.isfile(state.path) for state in states):
        gone = f" ({safe_line(states[0].path)} is gone)" if states else ""
        if own == "omp":
            raise UserError(f"session {session_id}: its oh-my-pi file is not in place{gone}, and sessiontree does "
                            f"not write oh-my-pi files back; continue it in pi with `sessiontree resume "
                            f"{session_id} --as pi`")
        try:
            restored = restore_source(app.store, session_id)
        except RestoreError as exc:
            raise UserError(f"session {session_id}: its Gemini CLI chat file is not in place{gone} and cannot be "
                            f"written back: {exc}; continue it in pi with `sessiontree resume {session_id} "
                            "--as pi`") from exc
        if not as_json:
            echo_line(f"The Gemini CLI chat file of {session_id} was not in place{gone}.", err=True)
            _report_restore(restored)
            click.echo("", err=True)
    command = gemini.resume_command(session_id) if own == "gemini" else omp.resume_command(session_id)
    if "\x00" in cwd:
        raise UserError(f"session {session_id}: header field \"cwd\" holds a NUL byte, so no command can enter it")
    if as_json and not run:
        print_json({"sessionId": session_id, "agent": own, "command": command, "cwd": cwd})
        return
    if not run:
        click.echo(f"cd {shell_quote(cwd)} && {shell_join(command)}" if cwd else shell_join(command))
        return
    if cwd:
        try:
            os.chdir(cwd)
        except OSError as exc:
            raise UserError(f"cannot enter {safe_line(cwd)}: {exc.strerror}") from exc
    app.close()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        raise UserError(f"cannot run {command[0]}: {exc.strerror} (is {command[0]} installed and on PATH?)") from exc


_STATUS_WORDS = {"archived": "archived", "would archive": "would archive", "kept": "kept", "skipped": "skipped"}


@cli.command("archive", short_help="Move old synced agent files out of the agents' folders.")
@click.option("--older-than", "older_than", type=Age(), metavar="AGE",
              help="Only files last modified longer ago than AGE (30d, 12h, 2w). Default: 30d unless "
                   "--keep-newest is given.")
@click.option("--keep-newest", "keep_newest", type=click.IntRange(min=0), metavar="N",
              help="Keep the N newest files of each agent folder.")
@click.option("--agent", "agents", type=click.Choice(_AGENT_NAMES), multiple=True,
              help="Only this agent's folder (repeatable; default: every agent's).")
@click.option("--dry-run", is_flag=True, help="Decide and verify, move nothing.")
@click.option("--delete", is_flag=True, help="Delete the files instead of moving them to the trash.")
@click.option("--json", "as_json", is_flag=True, help="Print the per-file report as JSON.")
@pass_app
def archive_cmd(app: App, older_than: float | None, keep_newest: int | None, agents: tuple[str, ...],
                dry_run: bool, delete: bool, as_json: bool) -> None:
    """Archive agent files the store can give back byte for byte.

    A file is moved only when it is synced, unchanged since, complete, older
    than the bound, and the store rebuilds its exact bytes (same sha256). An
    audit record in the store lets `sessiontree restore` put it back where it
    was; `sessiontree archived` lists them. Exit status 1 when a file could not
    be archived for a problem (diverged, not reproducible, move failed).
    """
    from sessiontree.sync.archive import ArchivedResult, archive

    age = older_than if older_than is not None else (None if keep_newest is not None else 30 * 86400.0)

    def show(result: ArchivedResult) -> None:
        if as_json or result.status == "kept":
            return
        reason = f": {result.reason}" if result.reason else ""
        echo_line(f"{_STATUS_WORDS[result.status]:>13}  {safe_line(result.path)}{safe_line(reason)}",
                  err=result.problem)

    report = archive(app.store, older_than=age, keep_newest=keep_newest, agents=list(agents) or None,
                     dry_run=dry_run, delete=delete, on_file=show)
    if as_json:
        print_json(report.to_dict())
    else:
        echo_line(report.summary())
    if not report.ok:
        raise SystemExit(1)


@cli.command("archived", short_help="List the agent files archive moved away.")
@click.option("--session", "session", metavar="SESSION", help="Only this session's files.")
@click.option("--all", "all_", is_flag=True, help="Also the files restore has put back ([restored]).")
@click.option("--json", "as_json", is_flag=True, help="Print the records as JSON.")
@pass_app
def archived_cmd(app: App, session: str | None, all_: bool, as_json: bool) -> None:
    """The audit records of `sessiontree archive`: which file, when, its sha256, where it went.

    A file that is back at its path with the archived bytes (restore, resume, or
    taken out of the trash) is no longer away: it is listed only with --all,
    marked [restored] (docs/agent-loop.md, "The audit records").
    """
    from dataclasses import replace

    from sessiontree.sync.archive import archived_state

    session_id = resolve_session_id(app, session) if session is not None else None
    records = [replace(r, state=archived_state(r)) for r in app.store.archived_files()
               if session_id is None or r.session_id == session_id]
    records = [r for r in records if all_ or r.state != "restored"]
    if as_json:
        print_json({"archived": [record.to_dict() for record in records]})
        return
    if not records:
        echo_line("No archived files.")
        return
    for record in records:
        when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(record.archived_at / 1000))
        state = "" if record.state == "done" else f" [{record.state}]"
        echo_line(f"{when}  {record.session_id}  {record.destination:<7}  {record.sha256.hex()[:12]}  "
                  f"{safe_line(record.path)}{state}")
