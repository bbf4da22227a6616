"""Commands that keep the store in step with the agents' folders: ``sync`` and ``sources``.

Thin edge over :mod:`sessiontree.sync` (the engine) and :mod:`sessiontree.sync.sources`
(where the agents keep their files); docs/sync.md describes the outcomes.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from sessiontree.cli.common import (
    App,
    UserError,
    cli,
    cut_left,
    echo_line,
    pass_app,
    print_json,
    print_rich,
    progress_bar,
    stdout_console,
)
from sessiontree.core.textsafe import safe_line
from sessiontree.errors import SessionError

if TYPE_CHECKING:
    from sessiontree.stores.base import SessionStore
    from sessiontree.sync.engine import FileResult, Syncer, SyncReport
    from sessiontree.sync.setaside import SetAsideLedger

_STORE_SCHEMES = ("sqlite:", "jsonl:", "memory:", "postgresql:", "postgres:")
_SQLITE_MAGIC = b"SQLite format 3\x00"
_STYLES = {"new": "green", "grown": "green", "unchanged": "dim", "in-progress": "yellow", "replaced": "yellow",
           "diverged": "red", "rejected": "red"}


def _is_store_source(arg: str) -> bool:
    """Whether a sync argument names another store (a URL, or a SQLite database file)."""
    from sessiontree.stores.sqlite.store import file_header

    if arg.lower().startswith(_STORE_SCHEMES):
        return True
    path = os.path.expanduser(arg)
    if os.path.isfile(path) and not path.endswith(".jsonl"):
        try:
            head = file_header(path, 16)
        except OSError:
            return False
        # None: a store of this process holds it open (so it is a SQLite database), and
        # reading it here would release that store's locks.
        return head is None or head == _SQLITE_MAGIC
    return False


@contextmanager
def _stop_on_interrupt() -> Iterator[threading.Event]:
    """An event set by Ctrl-C (SIGINT) instead of an exception, so the file being synced
    is finished before the run stops; the previous handler is restored afterwards."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop  # signal handlers can only be set from the main thread
        return

    def handler(signum: int, frame: Any) -> None:
        stop.set()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


def _detail(row: FileResult) -> str:
    """The human-readable detail of one result."""
    where = f"line {row.line}: " if row.line is not None else ""
    if row.status == "new":
        text = f"{row.added} entries"
    elif row.status == "grown":
        text = f"+{row.added} {'entry' if row.added == 1 else 'entries'}"
    elif row.status == "unchanged":
        text = ""
    elif row.status == "in-progress":
        text = row.reason or f"{row.pending} bytes of an unfinished last line left for the next run"
        if row.reason and row.pending:
            text += f" ({row.pending} bytes)"
    elif row.status == "replaced":
        text = (f"{where}{row.reason}; now the file's {row.added} entries, {row.kept} store-only re-appended, "
                f"{row.superseded} superseded, {len(row.dropped)} dropped")
        if row.dropped:
            text += " (" + ", ".join(f"{d['id']}: {d['reason']}" for d in row.dropped) + ")"
    else:
        text = f"{where}{row.reason}"
    if row.pending and row.status in ("new", "grown"):
        text += f"; {row.pending} bytes of an unfinished line left for the next run"
    if row.note:
        text = f"{text}; {row.note}" if text else row.note
    return text


def _short_id(session_id: str | None) -> str:
    """A session id in the table: its first 8 characters; a subagent session's as PARENT/AGENT."""
    from sessiontree.format.idprefix import split_subagent

    if not session_id:
        return ""
    parts = split_subagent(session_id)
    return f"{parts[0][:8]}/{parts[1]}" if parts is not None else session_id[:8]


def _shown_path(path: str, width: int, folders: list[tuple[str, str]], home: str) -> str:
    """A file as the sync table shows it in ``width`` cells: under an agent's session
    folder, ``agent: <path in the folder>`` (so pi's and Atomic's copies of a session,
    same names under different folders, never look the same), else the path with ``~``
    for the home folder; cut at the left, the agent label kept."""
    for agent, folder in folders:
        if path.startswith(folder + os.sep):
            label = f"{agent}: "
            return label + cut_left(safe_line(path[len(folder) + 1:]), max(8, width - len(label)))
    if home not in ("", "/") and path.startswith(home + os.sep):
        path = "~" + path[len(home):]
    return cut_left(safe_line(path), width)


def _print_report(report: SyncReport, as_json: bool, *, show_unchanged: bool = False,
                  verbose: bool = False) -> None:
    if as_json:
        print_json(report.to_dict())
        return
    from rich.table import Table
    from rich.text import Text

    from sessiontree.sync.sources import agent_sources

    console = stdout_console()
    # Results set aside (reported by an earlier run, the file unchanged since) only with --verbose.
    rows = [r for r in report.files if (show_unchanged or r.status != "unchanged") and (verbose or not r.set_aside)]
    if rows:
        # One line per file where it fits: short session ids (as list shows them), the
        # file named by its agent and its place in that agent's folder, cut at the left
        # (its name is what tells files apart); the whole paths are in --json.
        home = os.path.expanduser("~")
        folders = sorted(((source.agent, source.path.rstrip(os.sep)) for source in agent_sources()),
                         key=lambda item: -len(item[1]))
        file_w = max(20, (console.width - 11 - 8 - 6) // 2)
        table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
        table.add_column("result", no_wrap=True)
        table.add_column("session", no_wrap=True, style="cyan")
        table.add_column("file", no_wrap=True, max_width=file_w)
        table.add_column("detail", overflow="fold")
        for row in rows:
            detail = _detail(row)
            if row.set_aside:
                detail = f"(set aside: reported before, unchanged since) {detail}"
            table.add_row(Text(row.status, style="dim" if row.set_aside else _STYLES[row.status]),
                          safe_line(_short_id(row.session_id)), _shown_path(row.path, file_w, folders, home),
                          safe_line(detail))
        print_rich(console, table)
    for note in report.notes:
        print_rich(console, safe_line(f"note: {note}"))
    print_rich(console, safe_line(report.summary() + (f", {report.left} not done (interrupted)"
                                                      if report.interrupted else "")))
    index_line = report.index_line()
    if index_line is not None:
        print_rich(console, safe_line(index_line))


def _merge(into: SyncReport, other: SyncReport) -> None:
    into.files.extend(other.files)
    into.notes.extend(other.notes)
    into.indexed += other.indexed
    into.index_left = into.index_left or other.index_left
    if other.interrupted:
        into.interrupted = True
        into.left += other.left


def _default_sources() -> tuple[list[str], list[str]]:
    """The agent folders that exist, and a note for each that does not."""
    from sessiontree.sync.sources import agent_sources

    paths, notes = [], []
    for source in agent_sources():
        if source.exists:
            paths.append(source.path)
        else:
            notes.append(f"{source.agent}: no session folder at {source.path}")
    return paths, notes


@cli.command("sources", short_help="List the agent session folders sync reads.")
@click.option("--json", "as_json", is_flag=True, help="Print the folders as JSON.")
def sources_cmd(as_json: bool) -> None:
    """List every agent session folder `sessiontree sync` reads when given no PATH:
    pi (~/.pi/agent/sessions, or $PI_CODING_AGENT_DIR/sessions) and Atomic
    (~/.atomic/agent/sessions, or $ATOMIC_CODING_AGENT_DIR/sessions, with
    $PI_CODING_AGENT_DIR as its compatibility alias), Claude Code
    (~/.claude/projects, or $CLAUDE_CONFIG_DIR/projects), Codex
    (~/.codex/sessions, or $CODEX_HOME/sessions), Gemini CLI (~/.gemini/tmp, or
    $GEMINI_CLI_HOME/.gemini/tmp) and oh-my-pi (~/.omp/agent/sessions, or pi's
    folder when $PI_CODING_AGENT_DIR is set), whether each exists and
    how many session files it holds. Opens neither the store nor any session file.
    """
    from rich.table import Table

    from sessiontree.sync.engine import discover
    from sessiontree.sync.sources import agent_sources

    rows: list[dict[str, Any]] = []
    for source in agent_sources():
        files, problems = discover([source.path]) if source.exists else ([], [])
        rows.append({**source.to_dict(), "files": len(files), "problems": [p.to_dict() for p in problems]})
    if as_json:
        print_json(rows)
        return
    table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
    for name in ("agent", "folder", "from", "files"):
        table.add_column(name, overflow="fold")
    for row in rows:
        count = str(row["files"]) if row["exists"] else "(missing)"
        if row["problems"]:
            count += f", {len(row['problems'])} unreadable"
        table.add_row(row["agent"], safe_line(row["path"]), row["origin"], count)
    print_rich(stdout_console(), table)


@cli.command("sync", short_help="Keep the store in step with the agents' session folders.")
@click.argument("paths", nargs=-1, metavar="[PATH|STORE]...")
@click.option("--watch", "watching", is_flag=True, help="Keep running and sync each change as it happens.")
@click.option("--replace", is_flag=True,
              help="Make diverged sessions the file's content (store-only entries re-appended or reported).")
@click.option("--dry-run", is_flag=True, help="Say what would be done; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the per-file results as JSON.")
@click.option("--debounce", default=400, show_default=True, metavar="MS",
              help="With --watch: group changes made within this many milliseconds.")
@click.option("-v", "--verbose", is_flag=True,
              help="Also list the files set aside: rejected, diverged or unfinished as an earlier run "
                   "reported, unchanged since.")
@click.option("--strict", is_flag=True,
              help="Report every rejected, diverged and unfinished file on every run and exit 1 on any "
                   "rejected or diverged one; an unterminated last line always waits.")
@click.option("--finished-after", "finished_after", default="1h", show_default=True, metavar="DURATION",
              help="A Claude Code or Codex file whose last line has no newline and that has not changed "
                   "for this long (90s, 30m, 1h, 2d) is taken as finished: that line is read when it is "
                   "a complete record.")
@pass_app
@click.pass_context
def sync_cmd(ctx: click.Context, app: App, paths: tuple[str, ...], watching: bool, replace: bool,
             dry_run: bool, as_json: bool, debounce: int, verbose: bool, strict: bool,
             finished_after: str) -> None:
    """Bring new and grown sessions from the agents' own folders into the store.

    With no PATH: every agent session folder that exists (see `sessiontree
    sources`). A PATH is a session file or a folder (searched recursively),
    or another store (a URL, or a SQLite file): its sessions are copied in.

    Per file: new sessions are imported; grown ones get only their new entries;
    unchanged ones are skipped without being read; a last line an agent is still
    writing is left for the next run; a file that no longer extends the stored
    session is reported as diverged (--replace makes the stored session the
    file's, keeping entries set with sessiontree); files that are not sessions
    are rejected with a reason.

    Quiet repeats, for cron and watch loops: a file reported as rejected,
    diverged or unfinished is not reported again until it changes; the summary
    counts those set aside and --verbose lists them. Exit status 0 when nothing
    new was rejected or diverged, 1 when something was (--strict: when
    anything is, as reported every run); 130 when interrupted (Ctrl-C stops
    after the current file). See docs/sync.md.
    """
    from sessiontree.sync.engine import Syncer, SyncReport, discover, run_lock
    from sessiontree.sync.setaside import SetAsideLedger, ledger_path

    rest = None if strict else _seconds(finished_after)
    stores = [p for p in paths if _is_store_source(p)]
    folders = [p for p in paths if p not in stores]
    notes: list[str] = []
    if not paths:
        folders, missing = _default_sources()
        if not folders:
            raise UserError("no agent session folders found (" + "; ".join(missing) +
                            "); give PATH... or set PI_CODING_AGENT_DIR / ATOMIC_CODING_AGENT_DIR")
        # An agent that is not installed is not news on every run: `sessiontree sources` lists it.
    if watching and not folders:
        raise click.UsageError("--watch needs folders or files to watch, not only stores")
    store = _target(app, dry_run)
    if dry_run:
        ctx.call_on_close(store.close)  # opened here, not through the app
    from sessiontree.stores.traits import store_traits

    exclude = store_traits(store).own_folder
    if exclude is not None and any(os.path.realpath(os.path.abspath(f)) == os.path.realpath(exclude)
                                   for f in folders):
        notes.append(f"{exclude} is the store itself: its files are not synced into it")
    report = SyncReport(notes=list(notes))
    interrupted = False

    def busy() -> None:
        echo_line("sessiontree: another sync is running on this store; waiting for it to finish…", err=True)

    with _stop_on_interrupt() as stop:
        with run_lock(store, busy) if not dry_run else _nothing():
            syncer = Syncer(store, replace=replace, dry_run=dry_run, finished_after=rest)
            # In the agents' own folders a symbolic link to a folder is not followed
            # (docs/agent-loop.md, "What is guaranteed"); a PATH given is read as it leads.
            links: list[str] | None = [] if not paths else None
            files, rejected = discover(folders, exclude=exclude, links=links)
            report.files.extend(rejected)
            # Said once per link (and again when it points elsewhere), then counted quietly;
            # --verbose and --json name every one (docs/sync.md, "Quiet repeats").
            ledger = SetAsideLedger(ledger_path(store))
            noted_before = set(ledger.sort_links(links or [], strict=strict))
            for link in links or []:
                if link not in noted_before or verbose or as_json:
                    report.notes.append(f"not followed: {link} is a symbolic link to a folder (give it as PATH "
                                        "to sync it)" + (" (noted before)" if link in noted_before else ""))
            report.links_noted_before = len(noted_before)
            # No console given: on a pipe or a file the bar is a stand-in and rich is not imported.
            with progress_bar() as progress:
                task = progress.add_task("Syncing", total=len(files))

                def step(path: str) -> None:
                    from rich.markup import escape  # only with a bar on a terminal: rich is loaded

                    name = safe_line(os.path.basename(path))
                    progress.update(task, advance=1, description=escape(f"Syncing {name}"))

                def settling(done: int, total: int) -> None:
                    progress.update(task, description="Indexing for search", completed=done, total=total)

                # Not on a pipe or a file: the bar is off, and 1,000 updates of it cost ~80 ms.
                shown = not progress.disable
                _merge(report, syncer.sync_files(files, on_file=step if shown else None, stop=stop,
                                                 on_settle=settling if shown else None))
                for url in stores:
                    if stop.is_set():
                        report.interrupted = True
                        break
                    _merge(report, _sync_store_source(syncer, store, url, stop))
        interrupted = report.interrupted
        ledger.sort(report.files, strict=strict)
        if not dry_run:
            _save(ledger)
        _print_report(report, as_json, verbose=verbose)
        if watching and not interrupted:
            _watch(store, folders, exclude, replace, as_json, stop, debounce, own_folders=not paths,
                   ledger=ledger, strict=strict, verbose=verbose, rest=rest)
            return
    if interrupted:
        echo_line(f"sessiontree: interrupted: {report.left} left; run the same sync again to finish", err=True)
        ctx.exit(130)
    if not report.ok:
        new = [r for r in report.files if not r.set_aside]
        n_rejected = sum(1 for r in new if r.status == "rejected")
        n_diverged = sum(1 for r in new if r.status == "diverged")
        raise UserError(f"{n_rejected} rejected, {n_diverged} diverged"
                        + ("" if replace else " (--replace makes diverged sessions the file's content)"
                           if n_diverged else ""))


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _seconds(text: str) -> float:
    """``--finished-after``: ``90s``, ``30m``, ``1h``, ``2d`` or plain seconds."""
    value = text.strip().lower()
    unit = _UNITS.get(value[-1:], None)
    number = value[:-1] if unit is not None else value
    try:
        seconds = float(number) * (unit or 1)
    except ValueError:
        raise click.BadParameter(f"{text!r}: expected a duration such as 90s, 30m, 1h or 2d",
                                 param_hint="--finished-after") from None
    if not seconds >= 0 or seconds == float("inf"):
        raise click.BadParameter(f"{text!r}: expected a duration of 0 or more", param_hint="--finished-after")
    return seconds


def _save(ledger: SetAsideLedger) -> None:
    """Write the ledger; a folder that cannot be written costs only the quiet repeats."""
    try:
        ledger.save()
    except OSError as exc:
        echo_line(f"sessiontree: note: cannot keep what this run reported ({ledger.path}: "
                  f"{exc.strerror or exc}); the next run reports it again", err=True)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _target(app: App, dry_run: bool) -> SessionStore:
    """The store to sync into: for ``--dry-run`` opened read-only (a memory store stands
    in for one that does not exist yet, so everything is "new")."""
    if not dry_run:
        return app.store
    from sessiontree.stores import MemoryStore, open_store, resolve_store

    where = resolve_store(app.store_arg)
    if not where.exists:
        return MemoryStore()
    return open_store(app.store_arg, create=False, readonly=True)


def _sync_store_source(syncer: Syncer, target: SessionStore, url: str, stop: threading.Event) -> SyncReport:
    """Copy the sessions of the store ``url`` into the target (read-only on the source)."""
    from sessiontree.stores import open_store
    from sessiontree.sync.engine import FileResult, SyncReport

    try:
        source = open_store(url, create=False, readonly=True)
    except (SessionError, OSError, ValueError) as exc:  # one rejected row; the run goes on
        return SyncReport(files=[FileResult(url, "rejected", reason=str(exc))])
    try:
        if source.url == target.url:
            return SyncReport(notes=[f"{url} is the store itself: nothing to copy"])
        return syncer.sync_store(source, stop=stop)
    finally:
        source.close()


def _inside(roots: list[str], path: str) -> bool:
    """Whether ``path`` lies in one of ``roots`` with no symbolic link to a folder below it (the
    agents' own folders: docs/agent-loop.md, "What is guaranteed")."""
    from sessiontree.sync.safepath import parts_under

    folder = os.path.realpath(os.path.dirname(path))
    for root in roots:
        parts = parts_under(root, path)
        if parts is not None and folder == os.path.join(os.path.realpath(root), *parts[:-1]):
            return True
    return False


def _watch(store: SessionStore, folders: list[str], exclude: str | None, replace: bool, as_json: bool,
           stop: threading.Event, debounce: int, *, ledger: SetAsideLedger, strict: bool, verbose: bool,
           rest: float | None, own_folders: bool = False) -> None:
    """Sync each batch of changed files until Ctrl-C (which ends the watch after the current file).
    In the agents' own folders (``own_folders``), files reached through a symbolic link to a
    folder are left alone, as the first sync left them."""
    from sessiontree.sync.engine import Syncer, discover, run_lock, watch

    roots = [os.path.abspath(os.path.expanduser(f)) for f in folders if os.path.exists(os.path.expanduser(f))]
    if not roots:
        raise UserError("nothing to watch: none of the folders exists")
    echo_line(f"sessiontree: watching {len(roots)} {'folder' if len(roots) == 1 else 'folders'} "
              "(Ctrl-C stops)", err=True)

    def on_change(paths: list[str]) -> None:
        files = [p for p in paths if exclude is None or not os.path.realpath(p).startswith(
            os.path.realpath(exclude) + os.sep)]
        if own_folders:
            files = [p for p in files if _inside(roots, p)]
        with run_lock(store, None):
            syncer = Syncer(store, replace=replace, finished_after=rest)
            batch = syncer.sync_files(files, stop=stop)
            ledger.sort(batch.files, strict=strict)
            _save(ledger)
        shown = [r for r in batch.files if r.status != "unchanged" and (verbose or not r.set_aside)]
        if shown or as_json:
            _print_report(batch, as_json, verbose=verbose)
        if any(r.status in ("new", "grown", "replaced") for r in batch.files):
            # Budgets of the config file, after each change (docs/budgets.md, "Alerts").
            from sessiontree.cli.budget import watch_alerts

            watch_alerts(store)

    def on_ready() -> None:
        # Appends made between the first sync and the start of the watch gave no event.
        files, _rejected = discover(roots, exclude, links=[] if own_folders else None)
        on_change(files)
        from sessiontree.cli.budget import watch_alerts

        watch_alerts(store)  # a budget the first sync crossed is alerted now, not at the next change

    watch(roots, on_change, stop, debounce_ms=debounce, on_ready=on_ready)
    echo_line("sessiontree: watch stopped", err=True)
