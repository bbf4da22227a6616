"""The ``sessiontree`` command line (SPEC §7).

``sessiontree [--store URL|PATH] COMMAND ...``. Each command parses its
input, calls the library (:class:`~sessiontree.manager.SessionManager`, the
store, :mod:`sessiontree.format`), and formats the result with ``rich``
(:mod:`sessiontree.render` holds the renderings). No rule of the format
lives here.

Conventions:

* Store: ``--store`` (a URL such as ``sqlite:////abs/sessions.db``,
  ``jsonl:///dir``, ``memory:``, or a plain path: a directory means JSONL,
  anything else a SQLite file) > ``$SESSIONTREE_STORE`` > the default SQLite
  database in the platform data directory.
* Session ids and entry ids may be abbreviated to a unique prefix.
* ``--json`` prints data as JSON on stdout for every command whose output is data.
* Exit status: 0 success; 1 user error, reported as one line on stderr with
  no traceback (every :class:`~sessiontree.errors.SessionError`, ``OSError``
  and ``ValueError`` is mapped in one place, :class:`_Group`); 2 usage error.
* Progress bars and spinners go to stderr, only when it is a terminal.
* Read-only commands (``list``, ``show``, ``context``, ``export``) never write
  to the session they read (REFERENCE D-9): a session of a JSONL store is read
  from its file directly instead of being opened for writing.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timezone
from pathlib import Path
from typing import Any, NoReturn

import click
import orjson
from rich.cells import cell_len
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from . import render
from .errors import InvalidSessionError, SessionError, SessionExistsError
from .format import ParsedSession, read_session_file
from .manager import SessionManager
from .stores import open_store
from .stores.base import SessionStore
from .stores.jsonl import migrate_file

__all__ = ["cli", "main"]

_CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


# --------------------------------------------------------------------------- errors


class UserError(click.ClickException):
    """A problem the user can fix: one line on stderr, exit status 1."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))

    def show(self, file: Any = None) -> None:
        """Print ``sessiontree: error: <message>`` on stderr."""
        click.echo(f"sessiontree: error: {self.format_message()}", err=True)


def _reason(exc: BaseException) -> str:
    """Why one file of a batch failed, without repeating its path."""
    if isinstance(exc, InvalidSessionError):
        return f"line {exc.line}: {exc.reason}" if exc.line is not None else exc.reason
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return _describe(exc)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        where = exc.filename if exc.filename is not None else ""
        return f"{exc.strerror}: {where}" if where else exc.strerror
    return str(exc) or type(exc).__name__


class _Group(click.Group):
    """The command group; maps library errors to :class:`UserError` in one place."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise  # click handles a closed pipe (``| head``) quietly
        except click.Abort:
            # A confirmation got no answer (closed stdin) or Ctrl-C; end the prompt's line first.
            click.echo(err=True)
            raise UserError("aborted; nothing was changed") from None
        except (SessionError, OSError, ValueError) as exc:
            raise UserError(_describe(exc)) from exc


# --------------------------------------------------------------------------- state and helpers


@dataclass
class _App:
    """Per-invocation state: the store option and the store, opened on first use."""

    store_arg: str | None
    _store: SessionStore | None = field(default=None, repr=False)
    #: Only ``import`` may create a missing store: elsewhere a mistyped
    #: ``--store`` path would look like an empty store.
    create_store: bool = False

    @property
    def store(self) -> SessionStore:
        """The selected store (``--store`` > ``$SESSIONTREE_STORE`` > default)."""
        if self._store is None:
            self._store = open_store(self.store_arg, create=self.create_store)
        return self._store

    def close(self) -> None:
        """Close the store if it was opened."""
        if self._store is not None:
            self._store.close()
            self._store = None


pass_app = click.make_pass_decorator(_App)


#: Output width when stdout is not a terminal (``$COLUMNS`` overrides it).
PIPE_WIDTH = 160


def _out() -> Console:
    # markup=False: session text such as "[/x]" is data, never rich markup.
    console = Console(highlight=False, markup=False)
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        console.width = PIPE_WIDTH
    return console


def _err() -> Console:
    return Console(stderr=True, highlight=False, markup=False)


def _show(console: Console, *renderables: Any, **options: Any) -> None:
    """Print to stdout; when it is not a terminal, without the padding rich adds at line ends."""
    if console.is_terminal:
        console.print(*renderables, **options)
        return
    with console.capture() as capture:
        console.print(*renderables, **options)
    text = "\n".join(line.rstrip() for line in capture.get().split("\n"))
    click.echo(text, nl=False)


def _print_json(data: Any) -> None:
    try:
        text = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode("utf-8")
    except TypeError:  # lone surrogates, huge integers: the standard library escapes them
        text = json.dumps(data, indent=2, ensure_ascii=True, default=str)
    click.echo(text)


@contextlib.contextmanager
def _busy(message: str) -> Iterator[None]:
    """A spinner on stderr while something slow runs (nothing when stderr is not a terminal)."""
    console = _err()
    if not console.is_terminal:
        yield
        return
    with console.status(message):
        yield


def _progress(console: Console) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console, transient=True,
                    disable=not console.is_terminal)


def _unique(prefix: str, candidates: Sequence[str], what: str) -> str:
    """The one candidate equal to ``prefix`` or starting with it."""
    if prefix in candidates:
        return prefix
    matches = sorted(c for c in candidates if c.startswith(prefix)) if prefix else []
    if not matches:
        raise UserError(f"no {what} matches {prefix!r}")
    if len(matches) > 1:
        shown = ", ".join(matches[:5]) + (f" (and {len(matches) - 5} more)" if len(matches) > 5 else "")
        raise UserError(f"{what} prefix {prefix!r} is ambiguous: it matches {shown}")
    return matches[0]


def _session_id(app: _App, prefix: str) -> str:
    return _unique(prefix, app.store.session_ids(), "session")


def _entry_id(manager: SessionManager, prefix: str) -> str:
    return _unique(prefix, [e["id"] for e in manager.get_entries()], "entry")


def _read_parsed(app: _App, session_id: str) -> ParsedSession:
    """The stored session, read without writing to it (D-9)."""
    return app.store.read(session_id)


def _open_readonly(app: _App, session_id: str) -> SessionManager:
    """A private in-memory manager over the stored session, for navigation and
    projection: nothing a read-only command does can write to the store."""
    with _busy("Loading session…"):
        parsed = app.store.read(session_id)
        return SessionManager.in_memory(parsed.header.get("cwd") or None,
                                        entries=[parsed.header, *parsed.entries])


def _open(app: _App, session_id: str, cwd: str | None = None) -> SessionManager:
    with _busy("Loading session…"):
        return SessionManager.open(app.store, session_id, cwd)


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def _title(info_name: str | None, summary: str | None, first: str) -> str:
    return info_name or summary or first


def _utc(dt: Any) -> str:
    """Minutes in UTC, marked ``Z`` (``show`` and ``--json`` print full UTC ISO-8601 too)."""
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%MZ")


# --------------------------------------------------------------------------- the group


@click.group(cls=_Group, context_settings=_CONTEXT_SETTINGS)
@click.option("--store", "store_arg", metavar="URL|PATH", default=None,
              help="Session store: sqlite:///FILE, jsonl:///DIR, memory:, or a path (a directory "
                   "means JSONL, anything else a SQLite file). Default: $SESSIONTREE_STORE, else the "
                   "shared SQLite database in the user data directory.")
@click.version_option(package_name="sessiontree", prog_name="sessiontree")
@click.pass_context
def cli(ctx: click.Context, store_arg: str | None) -> None:
    """Store AI coding-agent sessions (format-4 JSONL) and rebuild what the model sees.

    Session and entry ids may be abbreviated to any unique prefix.
    """
    app = _App(store_arg)
    ctx.obj = app
    ctx.call_on_close(app.close)


# --------------------------------------------------------------------------- import


def _collect(paths: Sequence[str]) -> tuple[list[Path], list[dict[str, Any]]]:
    """Files to import (directories searched recursively for ``*.jsonl``) and paths rejected outright."""
    files: list[Path] = []
    rejected: list[dict[str, Any]] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.jsonl") if p.is_file())
            if not found:
                rejected.append({"path": raw, "status": "rejected", "sessionId": None,
                                 "reason": "directory contains no *.jsonl files"})
        elif path.exists():
            found = [path]
        else:
            rejected.append({"path": raw, "status": "rejected", "sessionId": None,
                             "reason": "no such file or directory"})
            continue
        for item in found:
            key = item.resolve()
            if key not in seen:
                seen.add(key)
                files.append(item)
    return files, rejected


def _same_session(a: ParsedSession, b: ParsedSession) -> bool:
    """Whether two sessions hold the same header and entries (compared as JSON values)."""
    return a.header == b.header and a.entries == b.entries


def _import_one(store: SessionStore, path: Path) -> dict[str, Any]:
    """Import one file, reading it once; an id already stored is "present" when
    the stored session equals the file, else a rejection."""
    row: dict[str, Any] = {"path": str(path), "status": "rejected", "sessionId": None, "reason": None}
    try:
        parsed = read_session_file(path)
        row["sessionId"] = parsed.header["id"]
        manager = SessionManager.import_session(parsed, None, store)
    except SessionExistsError as exc:
        try:
            same = _same_session(parsed, store.read(exc.session_id))
        except (SessionError, OSError, ValueError) as inner:
            row["reason"] = f"session id already present; comparing failed: {_reason(inner)}"
            return row
        if same:
            row.update(status="present", reason="already present")
        else:
            row["reason"] = "session id already present with different content"
        return row
    except (SessionError, OSError, ValueError) as exc:
        row["reason"] = _reason(exc)
        return row
    row.update(status="imported", entries=len(manager.get_entries()))
    return row


@cli.command("import", short_help='Import session files or directories (idempotent).')
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--json", "as_json", is_flag=True, help="Print the per-file results as JSON.")
@pass_app
def import_cmd(app: _App, paths: tuple[str, ...], as_json: bool) -> None:
    """Import session files, keeping their ids; directories are searched recursively for *.jsonl.

    Older formats (1-3, early 4) are upgraded on the way in; the files are never
    modified. Re-importing a session that is already stored changes nothing and
    is reported as "already present". Every rejected file gets a reason and the
    other files are still imported. Exit status 1 when any file was rejected.
    """
    files, results = _collect(paths)
    app.create_store = True  # the one command that may start a new store
    store = app.store
    err = _err()
    with _progress(err) as progress:
        task = progress.add_task("Importing", total=len(files))
        for path in files:
            progress.update(task, description=f"Importing {path.name}")
            results.append(_import_one(store, path))
            progress.advance(task)
    counts = {s: sum(1 for r in results if r["status"] == s) for s in ("imported", "present", "rejected")}
    if as_json:
        _print_json({"files": results, **counts})
    else:
        table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
        table.add_column("result", no_wrap=True)
        table.add_column("session", no_wrap=True, style="cyan")
        table.add_column("file", overflow="fold")
        table.add_column("detail", overflow="fold")
        styles = {"imported": "green", "present": "dim", "rejected": "red"}
        for row in results:
            detail = f"{row['entries']} entries" if row["status"] == "imported" else row["reason"]
            table.add_row(Text(row["status"], style=styles[row["status"]]), row["sessionId"] or "", row["path"], detail)
        console = _out()
        _show(console, table)
        _show(console, f"{counts['imported']} imported, {counts['present']} already present, "
                      f"{counts['rejected']} rejected")
    if counts["rejected"]:
        raise UserError(f"{counts['rejected']} of {len(results)} files rejected")


# --------------------------------------------------------------------------- list


@cli.command("list", short_help='List sessions, newest first.')
@click.option("--cwd", "cwd", metavar="DIR", type=click.Path(file_okay=False, path_type=str),
              help="Only sessions of this project directory.")
@click.option("--internal", is_flag=True, help="Include internal workflow sessions.")
@click.option("--all", "all_", is_flag=True, help="Every session in the store (same as --internal; not with --cwd).")
@click.option("-n", "--limit", type=click.IntRange(min=1), default=None, help="Show at most N sessions.")
@click.option("--json", "as_json", is_flag=True, help="Print the sessions as JSON.")
@pass_app
def list_cmd(app: _App, cwd: str | None, internal: bool, all_: bool, limit: int | None, as_json: bool) -> None:
    """List sessions, newest first.

    By default every regular session of every project; --cwd DIR keeps one
    project. Internal workflow sessions (headers marked internal with a
    complete workflow link) are hidden unless --internal or --all is given.
    """
    if all_ and cwd is not None:
        raise click.UsageError("--all lists every session; it cannot be combined with --cwd")
    include_internal = internal or all_
    err = _err()
    with _progress(err) as progress:
        task = progress.add_task("Listing sessions", total=None)

        def on_progress(loaded: int, total: int) -> None:
            progress.update(task, completed=loaded, total=total)

        if cwd is not None:
            infos = SessionManager.list(cwd, app.store, on_progress, include_internal=include_internal)
        else:
            infos = SessionManager.list_all(app.store, on_progress, include_internal=include_internal)
    if limit is not None:
        infos = infos[:limit]
    if as_json:
        _print_json([info.to_dict() for info in infos])
        return
    console = _out()
    if not infos:
        _show(console, "No sessions." if cwd is None else f"No sessions for {os.path.abspath(cwd)}.")
        return
    home = os.path.expanduser("~")
    rows = []
    for info in infos:
        title = " ".join(_title(info.name, info.summary, info.first_message).split())
        if info.internal and info.workflow:
            title = f"[workflow {info.workflow.get('stageName')}] {title}"
        inside_home = home not in ("", "/") and (info.cwd + "/").startswith(home + "/")
        project = "~" + info.cwd[len(home):] if inside_home else info.cwd
        rows.append((info.id, _utc(info.modified), str(info.message_count), project, title))
    # Fixed widths: the id is never cut; the title keeps at least 20 cells;
    # the project column shrinks first and is dropped on narrow terminals.
    id_w = max(len(r[0]) for r in rows)
    avail = console.width - id_w - 17 - 4 - 8
    longest = max(cell_len(r[3]) for r in rows)
    proj_w = min(longest or 1, 40)
    if avail - proj_w < 20:
        proj_w = max(0, avail - 20)
    show_project = longest > 0 and proj_w >= min(8, longest)
    title_w = max(10, avail - (proj_w if show_project else -2))
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("id", no_wrap=True, style="cyan", width=id_w)
    table.add_column("modified", no_wrap=True, width=17)
    table.add_column("msgs", justify="right", no_wrap=True, width=4)
    if show_project:
        table.add_column("project", no_wrap=True, overflow="ellipsis", max_width=proj_w)
    table.add_column("title", no_wrap=True, overflow="ellipsis", max_width=title_w)
    for row in rows:
        cells = row if show_project else row[:3] + row[4:]
        table.add_row(*cells[:-1], Text(cells[-1]))
    _show(console, table)


# --------------------------------------------------------------------------- show


@cli.command("show", short_help='Show a session; --tree draws its entry tree.')
@click.argument("session")
@click.option("--tree", is_flag=True, help="Draw every entry as a tree: labels, branch points, the active branch (*) and leaf.")
@click.option("--json", "as_json", is_flag=True, help="Print header, info (and tree) as JSON.")
@pass_app
def show_cmd(app: _App, session: str, tree: bool, as_json: bool) -> None:
    """Show a session's header and listing info; --tree draws the whole entry tree."""
    session_id = _session_id(app, session)
    manager = _open_readonly(app, session_id)
    header = manager.get_header()
    location = app.store.location(session_id)
    info = _session_info(manager, location or session_id)
    entries = manager.get_entries()
    leaf_id = manager.get_leaf_id()
    branch_ids = [e["id"] for e in manager.get_branch()]
    rows = render.tree_rows(manager.get_tree(), leaf_id, branch_ids) if tree else []
    parents = {e.get("parentId") for e in entries}
    leaves = sum(1 for e in entries if e["id"] not in parents)
    labels = {e["targetId"]: manager.get_label(e["targetId"]) for e in entries
              if e.get("type") == "label" and manager.get_label(e["targetId"])}
    if as_json:
        data: dict[str, Any] = {"header": header, "info": info.to_dict(), "location": location,
                                "entryCount": len(entries), "leafId": leaf_id,
                                "activeBranchLength": len(branch_ids), "leafCount": leaves, "labels": labels}
        if tree:
            data["tree"] = [render.tree_row_dict(row) for row in rows]
        _print_json(data)
        return
    console = _out()
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row("id", Text(header["id"], style="cyan"))
    grid.add_row("name", info.name or ("(cleared)" if info.has_name else "(none)"))
    grid.add_row("project", info.cwd or "(none)")
    grid.add_row("created", str(header.get("createdAt")))
    grid.add_row("modified", info.to_dict()["modified"])
    if info.parent_session_id:
        grid.add_row("forked from", info.parent_session_id)
    if info.internal and info.workflow:
        wf = info.workflow
        grid.add_row("workflow", f"run {wf.get('runId')}, stage {wf.get('stageId')} ({wf.get('stageName')})")
    grid.add_row("messages", str(info.message_count))
    grid.add_row("entries", f"{len(entries)} ({_plural(leaves, 'leaf', 'leaves')}; "
                            f"active branch {_plural(len(branch_ids), 'entry', 'entries')})")
    grid.add_row("active leaf", leaf_id or "(none: no entries)")
    if labels:
        grid.add_row("labels", ", ".join(f"{target}={text}" for target, text in labels.items()))
    grid.add_row("first message", render.entry_summary({"type": "message", "message": {"role": "user", "content": info.first_message}}))
    if info.summary:
        grid.add_row("summary", info.summary)
    if location:
        grid.add_row("file", location)
    _show(console, grid)
    if tree:
        _show(console)
        lines = Text("\n").join(render.tree_row_text(row, console.width) for row in rows)
        _show(console, lines, no_wrap=True, overflow="ellipsis")


def _session_info(manager: SessionManager, path: str) -> Any:
    from .info import session_info_from_entries

    return session_info_from_entries(manager.get_header(), manager.get_entries(), path)


# --------------------------------------------------------------------------- context


@cli.command("context", short_help='Show the model context of a branch.')
@click.argument("session")
@click.option("--leaf", "leaf", metavar="ENTRY", help="Build the context as if this entry were the leaf.")
@click.option("--full", is_flag=True, help="Do not shorten long blocks.")
@click.option("--json", "as_json", is_flag=True, help="Print the projection as JSON (always complete).")
@pass_app
def context_cmd(app: _App, session: str, leaf: str | None, full: bool, as_json: bool) -> None:
    """Show the model context rebuilt from the active branch (or from --leaf ENTRY).

    This is the projection a provider request is built from: compaction
    boundaries applied, context edits applied, interrupted tool calls closed
    with synthetic error results.
    """
    session_id = _session_id(app, session)
    manager = _open_readonly(app, session_id)
    if leaf is not None:
        manager.branch(_entry_id(manager, leaf))
    projection = manager.build_session_projection()
    leaf_id = manager.get_leaf_id()
    if as_json:
        _print_json(render.context_dict(projection, session_id, leaf_id))
        return
    console = _out()
    limit = None if full else render.CONTEXT_BLOCK_CHARS
    if console.is_terminal:
        console.print(*render.context_renderables(projection, session_id, leaf_id, limit=limit))
    else:
        click.echo(render.context_text(projection, session_id, leaf_id, limit=limit), nl=False)


# --------------------------------------------------------------------------- export


@cli.command("export", short_help='Export as JSONL or a Markdown transcript.')
@click.argument("session")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True, path_type=Path),
              help="Write to FILE instead of stdout.")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "markdown"]), default="jsonl", show_default=True,
              help="jsonl: the format-4 session file (stored entries byte for byte); markdown: a readable "
                   "transcript of the active branch.")
@pass_app
def export_cmd(app: _App, session: str, output: Path | None, fmt: str) -> None:
    """Export a session as a format-4 JSONL file or a Markdown transcript."""
    session_id = _session_id(app, session)
    if fmt == "jsonl":
        with _busy("Loading session…"):
            data = _read_parsed(app, session_id).to_bytes()
    else:
        manager = _open_readonly(app, session_id)
        title = manager.get_session_name()
        data = render.markdown_transcript(manager.get_header(), manager.get_branch(), title).encode("utf-8")
    if output is None:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    output.write_bytes(data)
    click.echo(f"Exported {session_id} to {output}", err=True)


# --------------------------------------------------------------------------- fork, delete, name, label


@cli.command("fork", short_help='Copy a session (or one branch) into a new one.')
@click.argument("session")
@click.option("--at", "at", metavar="ENTRY",
              help="Fork only the branch ending at this entry (labels on it are kept).")
@click.option("--cwd", "cwd", metavar="DIR", help="Project directory of the new session (default: the source's).")
@click.option("--json", "as_json", is_flag=True, help="Print the new session as JSON.")
@pass_app
def fork_cmd(app: _App, session: str, at: str | None, cwd: str | None, as_json: bool) -> None:
    """Copy a session into a new one (new id, parentSessionId = the source); the source is unchanged.

    Without --at every entry of every branch is copied; with --at ENTRY only
    the path from the root to ENTRY.
    """
    session_id = _session_id(app, session)
    source = _open(app, session_id, cwd)
    target_cwd = cwd if cwd is not None else source.get_cwd()
    if at is not None:
        entry_id = _entry_id(source, at)
        source.create_branched_session(entry_id)
        fork = source
    else:
        fork = source.fork_to(target_cwd)
    new_id = fork.get_session_id()
    if as_json:
        _print_json({"sessionId": new_id, "parentSessionId": session_id, "entries": len(fork.get_entries()),
                     "cwd": fork.get_cwd()})
        return
    click.echo(f"Forked {session_id} into {new_id} ({len(fork.get_entries())} entries)")


@cli.command("delete", short_help='Delete a session from the store.')
@click.argument("session")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--json", "as_json", is_flag=True, help="Print the deleted id as JSON.")
@pass_app
def delete_cmd(app: _App, session: str, yes: bool, as_json: bool) -> None:
    """Delete a session and its entries from the store (a JSONL file goes to the trash)."""
    session_id = _session_id(app, session)
    if not yes and not click.confirm(f"Delete session {session_id}?", err=True):
        raise UserError("cancelled; nothing was deleted")
    app.store.delete(session_id)
    if as_json:
        _print_json({"deleted": session_id})
        return
    click.echo(f"Deleted {session_id}")


@cli.command("name", short_help="Set or clear a session's display name.")
@click.argument("session")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_app
def name_cmd(app: _App, session: str, name: str, as_json: bool) -> None:
    """Set a session's display name; an empty NAME ("") clears it."""
    session_id = _session_id(app, session)
    manager = _open(app, session_id)
    state = manager.get_session_name_state()
    # An entry only when the state changes: the log is append-only, repeats would pile up.
    unchanged = state.name == (name.strip() or None) and (state.has_name or not name.strip())
    entry_id = None if unchanged else manager.append_session_info(name)
    current = manager.get_session_name()
    if as_json:
        _print_json({"sessionId": session_id, "entryId": entry_id, "name": current, "changed": not unchanged})
        return
    if unchanged:
        click.echo(f"Unchanged: {session_id} is named {current}" if current else f"Unchanged: {session_id} has no name")
    else:
        click.echo(f"Named {session_id}: {current}" if current else f"Cleared the name of {session_id}")


@cli.command("label", short_help='Set or clear the label of an entry.')
@click.argument("session")
@click.argument("entry")
@click.argument("label", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_app
def label_cmd(app: _App, session: str, entry: str, label: str | None, as_json: bool) -> None:
    """Set the label of ENTRY to LABEL; without LABEL (or with "") clear it."""
    session_id = _session_id(app, session)
    manager = _open(app, session_id)
    target = _entry_id(manager, entry)
    unchanged = manager.get_label(target) == (label or None)
    entry_id = None if unchanged else manager.append_label_change(target, label or None)
    current = manager.get_label(target)
    if as_json:
        _print_json({"sessionId": session_id, "targetId": target, "entryId": entry_id, "label": current,
                     "changed": not unchanged})
        return
    if unchanged:
        click.echo(f"Unchanged: {target} is labelled {current}" if current else f"Unchanged: {target} has no label")
    else:
        click.echo(f"Labelled {target}: {current}" if current else f"Cleared the label of {target}")


# --------------------------------------------------------------------------- migrate


def _migrate_one(path: Path, backup: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"path": str(path), "status": "rejected", "fromVersion": None, "backup": None,
                           "reason": None}
    try:
        outcome = migrate_file(path, backup=backup)
    except (SessionError, OSError, ValueError) as exc:
        row["reason"] = _reason(exc)
        return row
    if outcome.upgraded:
        row.update(status="upgraded", fromVersion=outcome.from_version, backup=outcome.backup)
    else:
        row.update(status="current", fromVersion=outcome.from_version, reason="already format 4")
    return row


@cli.command("migrate", short_help='Upgrade files to format 4 in place.')
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option("--no-backup", is_flag=True, help="Do not keep the original as FILE.bak.")
@click.option("--json", "as_json", is_flag=True, help="Print the per-file results as JSON.")
def migrate_cmd(files: tuple[str, ...], no_backup: bool, as_json: bool) -> None:
    """Upgrade session files to format 4 in place, atomically, keeping FILE.bak.

    Files already in format 4 are left alone. Does not use the store.
    Exit status 1 when any file could not be upgraded.
    """
    results = []
    err = _err()
    with _progress(err) as progress:
        task = progress.add_task("Migrating", total=len(files))
        for name in files:
            results.append(_migrate_one(Path(name), not no_backup))
            progress.advance(task)
    rejected = [r for r in results if r["status"] == "rejected"]
    if as_json:
        _print_json({"files": results, "upgraded": sum(r["status"] == "upgraded" for r in results),
                     "current": sum(r["status"] == "current" for r in results), "rejected": len(rejected)})
    else:
        for row in results:
            if row["status"] == "upgraded":
                note = f", backup {row['backup']}" if row["backup"] else ""
                click.echo(f"upgraded  {row['path']} (format {row['fromVersion']} -> 4{note})")
            elif row["status"] == "current":
                click.echo(f"skipped   {row['path']} (already format 4)")
            else:
                click.echo(f"rejected  {row['path']}: {row['reason']}")
    if rejected:
        raise UserError(f"{len(rejected)} of {len(results)} files not migrated")


# --------------------------------------------------------------------------- check


def _repaired_path(path: Path) -> Path:
    stem = path.name[: -len(".jsonl")] if path.name.endswith(".jsonl") else path.name
    return path.with_name(stem + ".repaired.jsonl")


@cli.command("check", short_help='Report problems in session files; --repair fixes a copy.')
@click.argument("paths", nargs=-1, required=True, metavar="FILE...")
@click.option("--repair", is_flag=True,
              help="Also write a repaired copy of each damaged file (FILE.repaired.jsonl beside it, or -o).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="With --repair and a single FILE: where to write the repaired copy.")
@click.option("--json", "as_json", is_flag=True, help="Print problems (and repairs) as JSON.")
def check_cmd(paths: tuple[str, ...], repair: bool, output: Path | None, as_json: bool) -> None:
    """Report every problem of session files, with file and line; directories are searched for *.jsonl.

    Files are only read. --repair writes a fixed copy next to each file that
    needs one and lists every change; what cannot be repaired is reported
    again for the copy. Exit status 1 when an error remains (warnings alone exit 0).
    Does not use the store.
    """
    from . import check as checker  # imported on use: the other commands do not need it

    if output is not None and (not repair or len(paths) != 1):
        raise click.UsageError("-o/--output needs --repair and exactly one FILE")
    files, rejected = _collect(paths)
    reports: list[dict[str, Any]] = []
    for row in rejected:
        reports.append({"path": row["path"], "error": row["reason"], "problems": []})
    errors = bool(rejected)
    with _progress(_err()) as progress:
        task = progress.add_task("Checking", total=len(files))
        for path in files:
            report: dict[str, Any] = {"path": str(path)}
            try:
                with open(path, "rb") as handle:
                    data = handle.read()  # read once, checked and (maybe) repaired from memory
                problems = checker.check_bytes(data, str(path))
                report["problems"] = [p.to_dict() for p in problems]
                if repair:
                    if any(p.code in checker.REPAIRABLE_CODES for p in problems):
                        target = output or _repaired_path(path)
                        result = checker.write_repaired(checker.repair_bytes(data, str(path), target), target)
                        report.update(result.to_dict())
                        problems = result.remaining
                    report["remaining"] = [p.to_dict() for p in problems]
                errors = errors or checker.has_errors(problems)
            except (SessionError, OSError, ValueError) as exc:
                report.update(error=_reason(exc), problems=[])
                errors = True
            reports.append(report)
            progress.advance(task)
    if as_json:
        _print_json(reports)
    else:
        for report in reports:
            _echo_check_report(report, repair)
        problems_all = [p for r in reports for p in r.get("problems", [])]
        n_err = sum(p["severity"] == "error" for p in problems_all)
        n_warn = len(problems_all) - n_err
        unreadable = sum("error" in r for r in reports)
        checked = len(reports) - unreadable
        summary = (f"{_plural(checked, 'file', 'files')} checked: "
                   f"{_plural(n_err, 'error', 'errors')}, {_plural(n_warn, 'warning', 'warnings')}")
        if unreadable:
            summary += f"; {_plural(unreadable, 'path', 'paths')} could not be checked"
        if repair:
            left = sum(p["severity"] == "error" for r in reports for p in r.get("remaining", []))
            summary += f"; {left} error{'s' if left != 1 else ''} left after repair"
        click.echo(summary)
    if errors:
        if not any(p["severity"] == "error" for r in reports for p in r.get("problems", [])) and not repair:
            raise UserError("some paths could not be checked")
        raise UserError("errors remain" if repair else "errors found")


def _echo_check_report(report: dict[str, Any], repair: bool) -> None:
    path = report["path"]
    if report.get("error"):
        click.echo(f"{path}: cannot check: {report['error']}")
        return
    for problem in report["problems"]:
        where = f"{path}:{problem['line']}" if problem["line"] is not None else path
        click.echo(f"{where}: {problem['severity']}: {problem['message']} [{problem['code']}]")
    if not repair:
        if not report["problems"]:
            click.echo(f"{path}: ok")
        return
    if report.get("outPath"):
        click.echo(f"{path}: repaired copy written to {report['outPath']} ({len(report['changes'])} changes)")
        for change in report["changes"]:
            line = f"line {change['line']}: " if change["line"] is not None else ""
            click.echo(f"  {line}{change['description']} [{change['code']}]")
        for problem in report["remaining"]:
            where = f"{report['outPath']}:{problem['line']}" if problem["line"] is not None else report["outPath"]
            click.echo(f"  remaining: {where}: {problem['severity']}: {problem['message']} [{problem['code']}]")
    elif not report["problems"]:
        click.echo(f"{path}: ok")
    else:
        click.echo(f"{path}: nothing --repair can fix")


# --------------------------------------------------------------------------- entry point


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run the command line (the ``sessiontree`` console script)."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="sessiontree")
    sys.exit(0)  # pragma: no cover - cli.main exits itself in standalone mode
