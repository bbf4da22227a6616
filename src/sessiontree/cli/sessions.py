"""Read-only commands: ``list``, ``show``, ``context``, ``export``."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from sessiontree.cli.common import (
    App,
    DateBound,
    UserError,
    busy_spinner,
    cli,
    cut_left,
    cut_right,
    describe_error,
    echo_line,
    open_session_readonly,
    pass_app,
    plural,
    print_json,
    print_rich,
    progress_bar,
    read_parsed,
    resolve_entry_id,
    resolve_session_id,
    session_title,
    stdout_console,
    utc_minutes,
)
from sessiontree.core.textsafe import safe_block, safe_json_text, safe_line

if TYPE_CHECKING:
    from datetime import datetime

    from sessiontree.core.listing import SessionInfo
    from sessiontree.diff.branches import BranchComparison
    from sessiontree.session.reading import ReadOnlySession

# --------------------------------------------------------------------------- list


@cli.command("list", short_help='List sessions, newest first.')
@click.option("--cwd", "cwd", metavar="DIR", type=click.Path(file_okay=False, path_type=str),
              help="Only sessions of this project directory.")
@click.option("--internal", is_flag=True,
              help="Include internal sessions: workflow stages and Claude Code subagents (as PARENT/AGENT).")
@click.option("--all", "all_", is_flag=True, help="Every session in the store (same as --internal; not with --cwd).")
@click.option("--host", "hosts", metavar="HOST", multiple=True,
              help="Only sessions first synced or imported on this host (its name or machine id). Repeatable.")
@click.option("--user", "users", metavar="USER", multiple=True,
              help="Only sessions first synced or imported by this user. Repeatable.")
@click.option("--since", type=DateBound(end=False, times=True), metavar="DATE|Nd", help="Only sessions active on or after DATE (last activity; "
                                                 "YYYY-MM-DD, UTC, or 7d for the last seven days).")
@click.option("--until", type=DateBound(end=True, times=True), metavar="DATE", help="Only sessions last active on or before DATE (UTC, the whole day).")
@click.option("--named", is_flag=True, help="Only sessions with a name.")
@click.option("-n", "--limit", type=click.IntRange(min=1), default=None, help="Show at most N sessions.")
@click.option("--full-ids", is_flag=True, help="Show whole session ids (default: the shortest unique prefix, "
                                               "at least 8 characters; a subagent session as PARENT/AGENT).")
@click.option("--cost", "with_cost", is_flag=True,
              help="Add a cost column: what each session billed (history copied from an earlier session "
                   "counts there, as in stats --by session; ~ marks estimates).")
@click.option("--json", "as_json", is_flag=True, help="Print the sessions as JSON (always whole ids).")
@pass_app
def list_cmd(app: App, cwd: str | None, internal: bool, all_: bool, hosts: tuple[str, ...], users: tuple[str, ...],
             since: datetime | None, until: datetime | None, named: bool, limit: int | None, full_ids: bool,
             with_cost: bool, as_json: bool) -> None:
    """List sessions, newest first.

    By default every regular session of every project; --cwd DIR keeps one
    project. Internal sessions (headers marked internal with a complete
    workflow link: workflow stages, and Claude Code subagent transcripts)
    are hidden unless --internal or --all is given.
    Ids are shown as the shortest prefix that is unique in the store (at
    least 8 characters, like git), which every command accepts; a subagent
    session (a Claude Code Task's transcript) as PARENT/AGENT, on the rows
    right after its parent's. --host and
    --user keep the sessions first stored from there (docs/sync.md,
    "Provenance"); an origin column (user@host) appears once the listed
    sessions come from more than one. --since/--until bound the last
    activity (modified), as the viewer's and MCP's filters do (docs/listing.md).
    """
    # Start-up (docs/architecture.md): rich's table only for a table, the --since/--until
    # parser only when given, no progress bar unless stderr is a terminal.
    from sessiontree.session.listing import ListingFilter, list_sessions

    if all_ and cwd is not None:
        raise click.UsageError("--all lists every session; it cannot be combined with --cwd")
    include_internal = internal or all_
    with progress_bar() as progress:
        task = progress.add_task("Listing sessions", total=None)

        def on_progress(loaded: int, total: int) -> None:
            progress.update(task, completed=loaded, total=total)

        listing = list_sessions(app.store, ListingFilter(
            cwd=cwd, since=since, until=until, named_only=named, hosts=hosts, users=users,
            include_internal=include_internal), on_progress=on_progress)
    if listing.skipped:
        click.echo(f"{plural(listing.skipped, 'session', 'sessions')} could not be loaded; "
                   "run sessiontree check --store", err=True)
    origins = app.store.provenances()
    infos: list[SessionInfo] = list(listing)
    if limit is not None:
        infos = infos[:limit]
    costs = _session_costs(app) if with_cost else None
    if as_json:
        rows_json = [info.to_dict() for info in infos]
        for item in rows_json:
            origin = origins.get(item["id"])
            item["origin"] = origin.to_dict() if origin is not None else None
        if costs is not None:
            for item in rows_json:
                item["usage"] = _cost_json(costs.get(item["id"]))
        print_json(rows_json)
        return
    from rich.cells import cell_len
    from rich.table import Table
    from rich.text import Text

    from sessiontree.format.idprefix import short_session_ids

    console = stdout_console()
    if not infos:
        print_rich(console, "No sessions." if cwd is None else safe_line(f"No sessions for {os.path.abspath(cwd)}."))
        return
    home = os.path.expanduser("~")
    short = {} if full_ids else short_session_ids(app.store.session_ids())
    infos = _under_parents(infos)
    rows = []
    for info in infos:
        title = " ".join(session_title(info.name, info.summary, info.first_message).split())
        if info.internal and info.workflow:
            title = f"[workflow {info.workflow.get('stageName')}] {title}"
        inside_home = home not in ("", "/") and (info.cwd + "/").startswith(home + "/")
        project = "~" + info.cwd[len(home):] if inside_home else info.cwd
        # Sanitised before the widths are measured and cells cut: no cut splits a sequence.
        origin = origins.get(info.id)
        where = f"{origin.user}@{origin.host}" if origin is not None else "?"
        rows.append((safe_line(short.get(info.id, info.id)), utc_minutes(info.modified), str(info.message_count),
                     safe_line(info.agent), safe_line(project), safe_line(title), safe_line(where)))
    cost_cells = [_cost_text(costs.get(info.id)) for info in infos] if costs is not None else None
    # The id is never cut. The project takes what the title (at least 20 cells)
    # leaves, at most 40 cells and, when space is short, a third of the line;
    # it is cut at the left ("…/app"): a path's end tells projects apart.
    id_w = max(cell_len(r[0]) for r in rows)
    cost_w = max(4, *(cell_len(c) for c in cost_cells)) if cost_cells is not None else 0
    # The agent column appears once another agent's sessions are listed: a pi-only listing keeps its width.
    show_agent = any(info.agent != "pi" for info in infos)
    agent_w = max(5, *(cell_len(r[3]) for r in rows)) if show_agent else 0
    # The origin column appears once the listed sessions come from more than one place.
    show_origin = len({r[6] for r in rows}) > 1
    origin_w = min(30, max(6, *(cell_len(r[6]) for r in rows))) if show_origin else 0
    avail = console.width - id_w - 17 - 4 - 8 - (agent_w + 2 if show_agent else 0) - (
        cost_w + 2 if cost_cells is not None else 0) - (origin_w + 2 if show_origin else 0)
    longest = max(cell_len(r[4]) for r in rows)
    proj_w = min(longest, 40)
    if avail - proj_w < 20:
        proj_w = min(longest, max(8, avail // 3))
    show_project = longest > 0 and avail - proj_w >= 10
    title_w = max(10, avail - (proj_w if show_project else -2))
    table = Table(box=None, pad_edge=False, header_style="bold")
    # A long id (--full-ids) cut by a narrow terminal says so with "…".
    table.add_column("id", no_wrap=True, overflow="ellipsis", style="cyan", width=id_w)
    table.add_column("modified", no_wrap=True, width=17)
    table.add_column("msgs", justify="right", no_wrap=True, width=4)
    if cost_cells is not None:
        table.add_column("cost", justify="right", no_wrap=True, width=cost_w)
    if show_agent:
        table.add_column("agent", no_wrap=True, width=agent_w)
    if show_origin:
        table.add_column("origin", no_wrap=True, overflow="ellipsis", width=origin_w)
    if show_project:
        table.add_column("project", no_wrap=True, width=proj_w)
    table.add_column("title", no_wrap=True, overflow="ellipsis", max_width=title_w)
    for index, row in enumerate(rows):
        # Cut here, not by rich: a cut never falls inside an escape ("\u20…").
        agent_cells = (*(row[3:4] if show_agent else ()), *((cut_right(row[6], origin_w),) if show_origin else ()))
        cells = (*row[:3], *agent_cells, *((cut_left(row[4], proj_w),) if show_project else ()), row[5])
        if cost_cells is not None:
            cells = (*cells[:3], cost_cells[index], *cells[3:])
        table.add_row(*cells[:-1], Text(cut_right(cells[-1], title_w)))
    print_rich(console, table)


def _under_parents(infos: list[Any]) -> list[Any]:
    """The listing with each subagent session (``<parent>-agent-<id>``) right after its parent
    when the parent is listed too (newest first among its siblings), so a session's
    ``PARENT/AGENT`` rows follow it; every other row keeps its place."""
    from sessiontree.format.idprefix import split_subagent

    listed = {info.id for info in infos}
    children: dict[str, list[Any]] = {}
    rest = []
    for info in infos:
        parts = split_subagent(info.id)
        if parts is not None and parts[0] in listed:
            children.setdefault(parts[0], []).append(info)
        else:
            rest.append(info)
    out = []
    for info in rest:
        out.append(info)
        out.extend(children.get(info.id, ()))
    return out


def _session_costs(app: App) -> dict[str, Any]:
    from sessiontree.usage.report import session_costs

    with busy_spinner("Summing usage…"):
        return session_costs(app.store)


def _cost_text(totals: Any) -> str:
    """A cost cell: ``$1.23``, ``~$1.23`` with estimates, ``+?`` with unpriced calls, ``-`` for none."""
    from sessiontree.usage.totals import cost_text

    if totals is None or not totals.calls:
        return "-"
    return cost_text(totals)


def _cost_json(totals: Any) -> dict[str, Any]:
    from sessiontree.usage.report import Totals

    return (totals or Totals()).to_dict()


# --------------------------------------------------------------------------- show


@cli.command("show", short_help='Show a session; --tree draws its entry tree.')
@click.argument("session")
@click.option("--tree", is_flag=True, help="Draw every entry as a tree: labels, branch points, the active branch (*) and leaf.")
@click.option("--entry", "entry", metavar="ENTRY", help="Show this one entry (an id as sessiontree search prints "
                                                       "it, or a unique prefix): its place and its searchable text.")
@click.option("--json", "as_json", is_flag=True, help="Print header, info (and tree) as JSON.")
@pass_app
def show_cmd(app: App, session: str, tree: bool, entry: str | None, as_json: bool) -> None:
    """Show a session's header and listing info; --tree draws the whole entry tree."""
    from rich.table import Table
    from rich.text import Text

    from sessiontree.core import render, styled

    session_id = resolve_session_id(app, session)
    manager = open_session_readonly(app, session_id)
    if entry is not None:
        _show_entry(manager, session_id, resolve_entry_id(manager, entry), as_json)
        return
    header = manager.get_header()
    location = app.store.location(session_id)
    info = _session_info(manager, location or session_id)
    entries = manager.get_entries()
    leaf_id = manager.get_leaf_id()
    branch_ids = [e["id"] for e in manager.get_branch()]
    rows = render.tree_rows(manager.get_tree(), leaf_id, branch_ids) if tree else []
    # Tips of the tree; a persisted leaf move (a ``leaf`` entry) is bookkeeping, not a branch.
    nodes = [e for e in entries if e.get("type") != "leaf"]
    parents = {e.get("parentId") for e in nodes}
    leaves = sum(1 for e in nodes if e["id"] not in parents)
    labels = {e["targetId"]: manager.get_label(e["targetId"]) for e in entries
              if e.get("type") == "label" and manager.get_label(e["targetId"])}
    usage = _usage_of(app, session_id)
    if as_json:
        data: dict[str, Any] = {"header": header, "info": info.to_dict(), "location": location,
                                "entryCount": len(entries), "leafId": leaf_id,
                                "activeBranchLength": len(branch_ids), "leafCount": leaves, "labels": labels,
                                "usage": usage.to_dict()}
        if tree:
            data["tree"] = [render.tree_row_dict(row) for row in rows]
        print_json(data)
        return
    console = stdout_console()
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    # Every value is one line of session text: safe_line before rich folds it.
    grid.add_row("id", Text(safe_line(header["id"]), style="cyan"))
    grid.add_row("name", safe_line(info.name) if info.name else ("(cleared)" if info.has_name else "(none)"))
    grid.add_row("project", safe_line(info.cwd) if info.cwd else "(none)")
    grid.add_row("created", safe_line(header.get("createdAt")))
    grid.add_row("modified", info.to_dict()["modified"])
    if info.parent_session_id:
        grid.add_row("forked from", safe_line(info.parent_session_id))
    if info.internal and info.workflow:
        wf = info.workflow
        grid.add_row("workflow", safe_line(f"run {wf.get('runId')}, stage {wf.get('stageId')} ({wf.get('stageName')})"))
    grid.add_row("messages", str(info.message_count))
    grid.add_row("entries", f"{len(entries)} ({plural(leaves, 'leaf', 'leaves')}; "
                            f"active branch {plural(len(branch_ids), 'entry', 'entries')})")
    grid.add_row("active leaf", safe_line(leaf_id) if leaf_id else "(none: no entries)")
    if labels:
        grid.add_row("labels", ", ".join(f"{safe_line(target)}={safe_line(text)}" for target, text in labels.items()))
    grid.add_row("first message", render.entry_summary({"type": "message", "message": {"role": "user", "content": info.first_message}}))
    if info.summary:
        grid.add_row("summary", safe_line(info.summary))
    for name, value in _usage_rows(usage):
        grid.add_row(name, safe_line(value))
    if location:
        grid.add_row("file", safe_line(location))
    print_rich(console, grid)
    if tree:
        print_rich(console)
        lines = Text("\n").join(styled.tree_row_text(row, console.width) for row in rows)
        print_rich(console, lines, no_wrap=True, overflow="ellipsis")


def _show_entry(manager: ReadOnlySession, session_id: str, entry_id: str, as_json: bool) -> None:
    """``show SESSION --entry ENTRY``: where the entry is, and the text search indexes for it."""
    from rich.table import Table
    from rich.text import Text

    from sessiontree.core import render
    from sessiontree.core.search import entry_text

    entry = manager.get_entry(entry_id)
    on_branch = entry_id in {e["id"] for e in manager.get_branch()}
    found = entry_text(entry) if entry is not None else None
    if as_json:
        print_json({"sessionId": session_id, "onActiveBranch": on_branch, "role": found.role if found else None,
                    "text": found.text if found else None, "entry": entry})
        return
    assert entry is not None  # resolve_entry_id resolved entry_id among this session's entries
    raw_message = entry.get("message")
    message = raw_message if isinstance(raw_message, dict) else {}
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row("session", Text(safe_line(session_id), style="cyan"))
    grid.add_row("entry", Text(safe_line(entry_id), style="cyan"))
    grid.add_row("type", safe_line(entry.get("type")))
    if (found is not None and found.role) or message.get("role"):
        grid.add_row("role", safe_line(found.role if found is not None and found.role else message.get("role")))
    grid.add_row("timestamp", safe_line(entry.get("timestamp")))
    grid.add_row("parent", safe_line(entry.get("parentId")) if entry.get("parentId") else "(none: a root)")
    grid.add_row("active branch", "yes" if on_branch else "no (an abandoned branch)")
    console = stdout_console()
    print_rich(console, grid)
    print_rich(console)
    print_rich(console, found.text if found is not None else render.entry_summary(entry))
def _usage_of(app: App, session_id: str) -> Any:
    from sessiontree.usage.report import session_usage

    return session_usage(app.store, session_id)


def _usage_rows(usage: Any) -> list[tuple[str, str]]:
    """``show``'s usage lines: models, tokens, cost (and what was copied from an earlier session)."""
    from sessiontree.usage.money import format_usd

    t = usage.totals
    if not t.calls:
        return [("usage", "(no billed calls recorded)")]
    models = ", ".join(f"{name} ({m.calls})" for name, m in sorted(usage.by_model.items(),
                                                                     key=lambda kv: -kv[1].calls))
    cost = ("~" if t.estimated_calls else "") + format_usd(t.cost_nanos, 4)
    notes = []
    if t.estimated_calls:
        notes.append(f"{format_usd(t.estimated_nanos, 4)} of it estimated from {usage.catalog}")
    if t.unpriced_calls:
        notes.append(f"{plural(t.unpriced_calls, 'call', 'calls')} not priced: {', '.join(sorted(t.unpriced_models))}")
    if usage.copied.calls:
        notes.append(f"{plural(usage.copied.calls, 'call', 'calls')}, {format_usd(usage.copied.cost_nanos, 4)}, "
                     "copied from an earlier session and billed there")
    rows = [("models", models),
            ("tokens", f"{t.total_tokens:,} in {plural(t.calls, 'call', 'calls')} (input {t.input:,}, "
                       f"output {t.output:,}, cache read {t.cache_read:,}, cache write {t.cache_write:,})"),
            ("cost", cost + (f" ({'; '.join(notes)})" if notes else ""))]
    return rows


def _session_info(manager: ReadOnlySession, path: str) -> Any:
    from sessiontree.core.listing import session_info_from_entries

    return session_info_from_entries(manager.get_header(), manager.get_entries(), path)


# --------------------------------------------------------------------------- context


@cli.command("context", short_help='Show the model context of a branch.')
@click.argument("session")
@click.option("--leaf", "leaf", metavar="ENTRY", help="Build the context as if this entry were the leaf.")
@click.option("--full", is_flag=True, help="Do not shorten long blocks.")
@click.option("--historical", is_flag=True,
              help="Archival view: the context as the agent that wrote the branch's latest retired "
                   "(summary) compaction rebuilt it (its summary, then the entries kept from "
                   "firstKeptEntryId). Not what a current agent sends.")
@click.option("--current", is_flag=True,
              help="The format-4 rule even for a session an older agent (pi, format 1-3) wrote: its own "
                   "summary compactions are archival and the whole history is shown.")
@click.option("--json", "as_json", is_flag=True, help="Print the projection as JSON (always complete).")
@pass_app
def context_cmd(app: App, session: str, leaf: str | None, full: bool, historical: bool, current: bool,
                as_json: bool) -> None:
    """Show the model context rebuilt from the active branch (or from --leaf ENTRY).

    This is the projection a provider request is built from: compaction
    boundaries applied, context edits applied, interrupted tool calls closed
    with synthetic error results. With --historical, retired summary
    compactions of older agents are applied as those agents applied them,
    and the output is labelled as historical. A session synced from a file
    pi wrote in format 1-3 is shown that way by default (what pi sent),
    labelled, and so is a Claude Code session (its summary message after a
    compaction, then what follows); --current shows the format-4 rule instead.
    """
    from rich.text import Text

    from sessiontree.core import render, styled
    from sessiontree.format.foreign import agent_of_header
    from sessiontree.sync.provenance import agent_format

    if historical and current:
        raise click.UsageError("--historical and --current are two different views: give one")
    session_id = resolve_session_id(app, session)
    # The active branch's context: the lazy open where the store has one (docs/stores.md,
    # "Lazy open"); another leaf is looked up among every entry.
    manager = open_session_readonly(app, session_id, "context" if leaf is None else "whole")
    leaf_id = resolve_entry_id(manager, leaf) if leaf is not None else manager.get_leaf_id()
    written_in = None if historical or current else agent_format(app.store, session_id)
    # A session mapped from another agent's file (Claude Code) is shown as that agent continued
    # after its own compactions (docs/agents/claude-code.md), unless --current.
    foreign = None if historical or current else agent_of_header(manager.get_header())
    foreign = foreign if foreign == "claude-code" else None
    past = None
    if historical or foreign is not None or (written_in is not None and written_in < 4):
        past = manager.build_historical_projection(leaf_id)
        if not historical and past.compaction is None:
            past = None  # no compaction of the agent's on this branch: the two rules agree
    if past is not None:
        projection = past.projection
        if as_json:
            data = render.historical_context_dict(past, session_id, leaf_id)
            data["historical"]["agentFormat"] = written_in
            if foreign is not None:
                data["historical"]["agent"] = foreign
            print_json(data)
            return
    else:
        projection = manager.build_session_projection(leaf_id)
        if as_json:
            print_json(render.context_dict(projection, session_id, leaf_id))
            return
    console = stdout_console()
    if past is not None:
        if foreign is not None:
            note = render.foreign_view_note(past, foreign)
        else:
            note = render.historical_note(past) if historical or written_in is None else \
                render.agent_view_note(past, written_in)
        if console.is_terminal:
            # The note quotes entry ids (the compaction, the first kept entry): session text.
            console.print(Text(safe_line(note), style="bold yellow"))
        else:
            echo_line(note)
    limit = None if full else render.CONTEXT_BLOCK_CHARS
    if console.is_terminal:
        console.print(*styled.context_renderables(projection, session_id, leaf_id, limit=limit))
    else:
        click.echo(styled.context_text(projection, session_id, leaf_id, limit=limit), nl=False)


# --------------------------------------------------------------------------- export


def _pi_source(app: App, session_id: str, redact: bool) -> bytes:
    """The pi or Atomic file a session was synced from, byte for byte as ``restore`` rebuilds
    it from the recorded shape (lines readers skip included: docs/sync.md, "Malformed
    lines"); a one-line error when there is none or it is not exact."""
    from sessiontree.sync.restore import agent_file

    if redact:
        raise UserError("--redact with --format source: a pi or Atomic file is given back as the agent "
                        "wrote it; use --format jsonl --redact")
    file = agent_file(app.store, session_id)
    if file.source_path is None or not file.byte_exact:
        raise UserError(f"session {session_id} has no agent file to give back byte for byte (not synced from "
                        "one, or entries were added in the store since); use --format jsonl")
    return file.data


@cli.command("export", short_help='Export as JSONL, a Markdown transcript or an HTML page.')
@click.argument("session")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True, path_type=Path),
              help="Write to FILE instead of stdout.")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "markdown", "html", "source"]), default="jsonl",
              show_default=True,
              help="jsonl: the format-4 session file (stored entries byte for byte; on a terminal, control "
                   "characters in strings as JSON escapes); markdown: a readable transcript of the active "
                   "branch, control characters shown as escapes; html: the viewer's session page as one "
                   "self-contained file (opens from disk, no network); source: the agent's own file byte for "
                   "byte (a Claude Code or Codex file's records; a synced pi or Atomic file as restore "
                   "gives it back, damaged lines included).")
@click.option("--redact/--no-redact", "redact", default=None,
              help="Replace secrets (API keys, tokens, passwords) by [REDACTED:kind:N] placeholders "
                   "(docs/secrets.md). Default: on for markdown and html, off for jsonl and source.")
@click.option("--compare", "compare_leaf", metavar="LEAF",
              help="With --format html: also include a comparison of the active branch (A) with the branch "
                   "ending at LEAF (B: an entry id of the session or a unique prefix), its summary and aligned "
                   "rows, raw and model's view, as the viewer's compare page shows them (docs/diff.md).")
@click.option("--raw", "raw", is_flag=True,
              help="With --format html or markdown: also show each entry's verbatim source record (the line "
                   "of a Claude Code, Codex or Gemini CLI file it was read from); left out by default, as "
                   "it is the bulk of such a file (docs/viewer.md, \"Export\").")
@pass_app
def export_cmd(app: App, session: str, output: Path | None, fmt: str, redact: bool | None,
               compare_leaf: str | None, raw: bool = False) -> None:
    """Export a session as a format-4 JSONL file, a Markdown transcript or an HTML page.

    The Markdown transcript shows control, bidi and invisible characters of
    the session as escapes (\\x1b, \\u202e), wherever it goes. JSONL is the
    stored bytes, except on a terminal, where such characters inside its
    strings are written as JSON escapes (the same values).

    Markdown and HTML are redacted unless --no-redact is given; JSONL only
    with --redact (a valid session file, its header marked "redacted"). The
    stored session is never changed.
    """
    from sessiontree.core import render
    from sessiontree.format.outfile import write_atomic
    from sessiontree.session.reading import readonly_of_parsed

    if compare_leaf is not None and fmt != "html":
        raise click.UsageError("--compare needs --format html")
    if raw and fmt not in ("html", "markdown"):
        raise click.UsageError("--raw needs --format html or markdown (jsonl and source carry the records already)")
    if compare_leaf is not None and ":" in compare_leaf:
        raise click.UsageError("--compare takes an entry of the exported session "
                               "(SESSION:LEAF is for sessiontree diff)")
    session_id = resolve_session_id(app, session)
    if redact is None:
        redact = fmt in ("markdown", "html")  # jsonl and source are the stored bytes unless asked
    elif not redact and fmt in ("markdown", "html"):
        echo_line(f"Not redacted (--no-redact): secrets in {session_id} are exported as stored", err=True)
    with busy_spinner("Loading session…"):
        parsed = read_parsed(app, session_id)
    if redact:
        from sessiontree.core.secrets import redact_parsed

        with busy_spinner("Redacting secrets…"):
            parsed, redactor = redact_parsed(parsed)
        echo_line(f"Redacted {plural(redactor.secrets, 'secret', 'secrets')} "
                  f"({plural(redactor.replaced, 'occurrence', 'occurrences')})", err=True)
        if redactor.dropped:
            # Not scanned, so not exported: said, never reported as a clean redaction.
            echo_line(f"Dropped {plural(redactor.dropped, 'source record', 'source records')} that could not be "
                      "decoded to be scanned (docs/secrets.md)", err=True)
    if fmt == "jsonl":
        data = parsed.to_bytes()
    elif fmt == "source":
        from sessiontree.format.foreign import source_bytes

        source = source_bytes(parsed.entries)
        if source is None:
            source = _pi_source(app, session_id, redact)
        data = source
    elif fmt == "html":
        from sessiontree.web.page import render_session_document

        manager = readonly_of_parsed(parsed)
        # Compared from the exported (redacted unless --no-redact) entries: the comparison
        # shows nothing the page does not.
        comparison = None if compare_leaf is None else _export_comparison(manager, session_id, compare_leaf)
        with busy_spinner("Rendering…"):
            data = render_session_document(manager, comparison, raw=raw).encode("utf-8")
    else:
        manager = readonly_of_parsed(parsed)
        title = manager.get_session_name()
        from sessiontree.usage.totals import turn_cost  # not the viewer's package: 0.08 s of imports

        data = render.markdown_transcript(manager.get_header(), manager.get_branch(), title, raw=raw,
                                          cost=turn_cost).encode("utf-8")
    if output is None:
        if fmt in ("jsonl", "source") and stdout_console().is_terminal:
            # On a terminal the JSONL is for reading: unsafe characters inside its strings are
            # shown as JSON escapes (same values). Pipes and files get the stored bytes.
            data = safe_json_text(data.decode("utf-8", errors="backslashreplace")).encode("utf-8")
        elif fmt == "html" and stdout_console().is_terminal:
            # Session text inside the page may hold escape sequences: shown, not obeyed.
            data = safe_block(data.decode("utf-8")).encode("utf-8")
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    write_atomic(output, data)  # never a truncated FILE (docs/output-files.md)
    echo_line(f"Exported {session_id} to {output}", err=True)


def _export_comparison(manager: ReadOnlySession, session_id: str, leaf: str) -> BranchComparison:
    """``export --compare``: the active branch (A) compared with the branch ending at ``leaf``
    (B), or a one-line error, exit status 2, when there is nothing to compare with."""
    from sessiontree.diff.branches import diff_branches
    from sessiontree.errors import SessionError

    active = manager.get_leaf_id()
    if active is None:
        raise BadCompareLeaf(f"session {session_id} has no branch to compare")
    try:
        with busy_spinner("Comparing branches…"):
            return diff_branches(manager, session_id, active, leaf)
    except (SessionError, ValueError) as exc:
        raise BadCompareLeaf(f"--compare: {describe_error(exc)}") from exc


class BadCompareLeaf(UserError):
    """``export --compare LEAF`` names no entry of the session: exit status 2, as ``diff``."""

    exit_code = 2
