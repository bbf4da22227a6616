"""Commands that work on session files: ``import``, ``migrate``, ``check``."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from sessiontree.cli.common import (
    App,
    UserError,
    cli,
    echo_line,
    failure_reason,
    pass_app,
    plural,
    print_json,
    print_rich,
    progress_bar,
    stderr_console,
    stdout_console,
)
from sessiontree.core.textsafe import safe_line
from sessiontree.errors import SessionError, SessionExistsError

if TYPE_CHECKING:
    from sessiontree.format.codec import ParsedSession
    from sessiontree.session.importing import ImportOutcome
    from sessiontree.stores.base import SessionStore

# --------------------------------------------------------------------------- import


def _collect(paths: Sequence[str]) -> tuple[list[Path], list[dict[str, Any]]]:
    """Files to read (directories searched recursively for ``*.jsonl``) and paths rejected outright.

    Nothing found is skipped silently: a ``*.jsonl`` that is a dangling or
    looping symbolic link, or not a regular file, is rejected with a reason.
    Directories named ``*.jsonl`` are searched, not rejected.
    """
    files: list[Path] = []
    rejected: list[dict[str, Any]] = []
    seen: set[Path] = set()

    def reject(path: str, reason: str) -> None:
        rejected.append({"path": path, "status": "rejected", "sessionId": None, "reason": reason})

    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = []
            unreadable = 0
            for item in sorted(path.rglob("*.jsonl")):
                problem = _not_a_file(item)
                if problem is None:
                    found.append(item)
                elif problem:
                    unreadable += 1
                    reject(str(item), problem)
            if not found and not unreadable:
                reject(raw, "directory contains no *.jsonl files" + _other_agent_hint(path))
        elif (problem := _not_a_file(path)) is None:
            found = [path]
        else:
            reject(raw, problem or "is a directory")
            continue
        for item in found:
            key = item.resolve()
            if key not in seen:
                seen.add(key)
                files.append(item)
    return files, rejected


#: How many ``*.json`` files of a folder without ``*.jsonl`` files are sniffed for Gemini CLI chats
#: (session content is hostile: a folder of many JSON files is not read whole to word a hint).
_SNIFFED_JSON_FILES = 50


def _other_agent_hint(folder: Path) -> str:
    """``"; it holds Gemini CLI chat files (*.json): bring them in with `sessiontree sync PATH`"``
    when one of the first :data:`_SNIFFED_JSON_FILES` ``*.json`` files under ``folder`` is a
    Gemini CLI chat (Gemini keeps its sessions as JSON documents, docs/agents/gemini.md), else
    ``""``. The same pointer ``import`` gives for a Claude Code or Codex file."""
    from sessiontree.session.importing import foreign_agent  # imported on use: start-up stays light

    for index, item in enumerate(sorted(folder.rglob("*.json"))):
        if index >= _SNIFFED_JSON_FILES:
            break
        if _not_a_file(item) is None and foreign_agent(item) == "gemini":
            return "; it holds Gemini CLI chat files (*.json): bring them in with `sessiontree sync PATH`"
    return ""


def _not_a_file(path: Path) -> str | None:
    """``None`` for a readable regular file (or a link to one), ``""`` for a
    directory, else why the path cannot be read as a session file."""
    try:
        st = path.stat()
    except OSError as exc:
        if path.is_symlink():
            if exc.errno == errno.ELOOP:
                return "symbolic link loop"
            return f"dangling symbolic link (target {os.readlink(path)!r} missing)" \
                if exc.errno == errno.ENOENT else f"symbolic link: {exc.strerror}"
        return "no such file or directory" if exc.errno == errno.ENOENT else (exc.strerror or str(exc))
    if stat.S_ISDIR(st.st_mode):
        return ""
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    return None


def _same_session(a: ParsedSession, b: ParsedSession) -> bool:
    """Whether two sessions hold the same header and entries (compared as JSON values)."""
    return a.header == b.header and a.entries == b.entries


def _import_row(store: SessionStore, outcome: ImportOutcome) -> dict[str, Any]:
    """The result row of one file of :meth:`SessionManager.import_files`; an id already
    stored is "present" when the stored session equals the file, else a rejection."""
    row: dict[str, Any] = {"path": outcome.path, "status": "rejected", "sessionId": outcome.session_id,
                           "reason": None}
    exc = outcome.error
    if outcome.note is not None:
        row["note"] = outcome.note
    if exc is None:
        row.update(status="imported", entries=outcome.entries)
        return row
    if isinstance(exc, SessionExistsError) and outcome.parsed is not None:
        try:
            same = _same_session(outcome.parsed, store.read(exc.session_id))
        except (SessionError, OSError, ValueError) as inner:
            row["reason"] = f"session id already present; comparing failed: {failure_reason(inner)}"
            return row
        if same:
            row.update(status="present", reason="already present")
        else:
            row["reason"] = "session id already present with different content"
        return row
    row["reason"] = failure_reason(exc)
    return row


@cli.command("import", short_help='Import session files or directories (idempotent).')
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--json", "as_json", is_flag=True, help="Print the per-file results as JSON.")
@pass_app
@click.pass_context
def import_cmd(ctx: click.Context, app: App, paths: tuple[str, ...], as_json: bool) -> None:
    """Import session files, keeping their ids; directories are searched recursively for *.jsonl.

    Older formats (1-3, early 4) are upgraded on the way in; the files are never
    modified. Re-importing a session that is already stored changes nothing and
    is reported as "already present". Every rejected file gets a reason and the
    other files are still imported. Exit status 1 when any file was rejected;
    130 when interrupted (Ctrl-C), after the summary of what was done: files are
    imported in groups of up to 100, one transaction each, and a file is reported
    only once its group committed, so running the same import again finishes it.
    """
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    from sessiontree.session.manager import SessionManager

    files, results = _collect(paths)
    app.create_store = True  # the one command that may start a new store
    store = app.store
    err = stderr_console()
    interrupted = False
    with progress_bar(err) as progress:
        task = progress.add_task("Importing", total=len(files))
        def reading() -> Any:
            for path in files:
                # the description is rich markup: the file name is sanitised, then escaped as markup
                progress.update(task, description=escape(f"Importing {safe_line(path.name)}"))
                yield path

        try:
            # Each group's search text and usage rows are settled as it is written
            # (from the entries in hand), so the settle below has almost nothing left.
            for outcome in SessionManager.import_files(reading(), None, store, settle=True):
                results.append(_import_row(store, outcome))
                progress.advance(task)
        except KeyboardInterrupt:
            interrupted = True
    ready = None
    if not interrupted and any(r["status"] == "imported" for r in results):
        ready = _settle(store, err)
    counts = {s: sum(1 for r in results if r["status"] == s) for s in ("imported", "present", "rejected")}
    left = max(0, len(files) - _files_done(results, files))
    if as_json:
        data: dict[str, Any] = {"files": results, **counts}
        if interrupted:
            data.update(interrupted=True, left=left)
        print_json(data)
    else:
        table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
        table.add_column("result", no_wrap=True)
        table.add_column("session", no_wrap=True, style="cyan")
        table.add_column("file", overflow="fold")
        table.add_column("detail", overflow="fold")
        styles = {"imported": "green", "present": "dim", "rejected": "red"}
        for row in results:
            detail = f"{row['entries']} entries" if row["status"] == "imported" else row["reason"]
            if row.get("note"):
                detail = f"{detail}; {row['note']}"
            table.add_row(Text(row["status"], style=styles[row["status"]]), safe_line(row["sessionId"] or ""),
                          safe_line(row["path"]), safe_line(detail))
        console = stdout_console()
        print_rich(console, table)
        summary = (f"{counts['imported']} imported, {counts['present']} already present, "
                   f"{counts['rejected']} rejected")
        print_rich(console, summary + (f", {left} not done (interrupted)" if interrupted else ""))
        if ready:
            # Every imported entry is indexed now (settled with its group, or by the settle).
            indexed = sum(r["entries"] for r in results if r["status"] == "imported")
            print_rich(console, f"search ready ({indexed} {'entry' if indexed == 1 else 'entries'} indexed)")
    if interrupted:
        echo_line(f"sessiontree: interrupted: {counts['imported']} imported, {left} "
                   f"{'file' if left == 1 else 'files'} left; run the same import again to finish", err=True)
        ctx.exit(130)
    if counts["rejected"]:
        raise UserError(f"{counts['rejected']} of {len(results)} files rejected")


def _settle(store: SessionStore, err: Any) -> bool:
    """Finish the derived work the imports deferred (SQLite's search index merges the
    new entries; docs/search.md, "When the index is merged"), so the first search
    after an import reads the index. Ctrl-C stops it between short transactions:
    what is left stays pending, and searches still find it. Returns whether
    everything is settled (the index complete: "search ready")."""
    with progress_bar(err) as progress:
        task = progress.add_task("Indexing for search", total=None)

        def on_progress(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        try:
            store.settle_derived(on_progress=on_progress)
        except KeyboardInterrupt:
            echo_line("sessiontree: search indexing interrupted (the imports are kept, and searches"
                      " still find every entry)", err=True)
            return False
        except SessionError as exc:
            # The imports are committed; only the merge of derived data failed (a lock held
            # past the busy timeout, a full disk). Searches still find every entry.
            echo_line(f"sessiontree: warning: search indexing left for later: {failure_reason(exc)}", err=True)
            return False
    return True


def _files_done(results: list[dict[str, Any]], files: list[Path]) -> int:
    """How many of ``files`` have a result (rows for paths rejected before reading are not files)."""
    wanted = {str(path) for path in files}
    return sum(1 for row in results if row["path"] in wanted)


# --------------------------------------------------------------------------- migrate


def _migrate_one(path: Path, backup: bool) -> dict[str, Any]:
    from sessiontree.format.migrate import migrate_file

    row: dict[str, Any] = {"path": str(path), "status": "rejected", "fromVersion": None, "backup": None,
                           "reason": None}
    try:
        outcome = migrate_file(path, backup=backup)
    except (SessionError, OSError, ValueError) as exc:
        row["reason"] = failure_reason(exc)
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
    err = stderr_console()
    with progress_bar(err) as progress:
        task = progress.add_task("Migrating", total=len(files))
        for name in files:
            results.append(_migrate_one(Path(name), not no_backup))
            progress.advance(task)
    rejected = [r for r in results if r["status"] == "rejected"]
    if as_json:
        print_json({"files": results, "upgraded": sum(r["status"] == "upgraded" for r in results),
                    "current": sum(r["status"] == "current" for r in results), "rejected": len(rejected)})
    else:
        for row in results:
            if row["status"] == "upgraded":
                note = f", backup {row['backup']}" if row["backup"] else ""
                echo_line(f"upgraded  {row['path']} (format {row['fromVersion']} -> 4{note})")
            elif row["status"] == "current":
                echo_line(f"skipped   {row['path']} (already format 4)")
            else:
                echo_line(f"rejected  {row['path']}: {row['reason']}")
    if rejected:
        raise UserError(f"{len(rejected)} of {len(results)} files not migrated")


# --------------------------------------------------------------------------- check


def _repaired_name(name: str) -> str:
    stem = name[: -len(".jsonl")] if name.endswith(".jsonl") else name
    return stem + ".repaired.jsonl"


def _agent_folder_of(path: Path) -> tuple[str, str] | None:
    """``(agent, sessions folder)`` when ``path`` is inside an agent's session folder
    (docs/sync.md, "Where the agents keep their files"), else ``None``."""
    from sessiontree.sync.sources import agent_sources

    real = os.path.realpath(path)
    for source in agent_sources():
        folder = os.path.realpath(source.path)
        if real == folder or real.startswith(folder.rstrip(os.sep) + os.sep):
            return source.agent, folder
    return None


def _repaired_path(path: Path, store_arg: str | None) -> Path:
    """Where ``check --repair`` writes the copy of ``path`` (docs/check.md, "Where the
    repaired copy goes"): beside the file, except for a file in an agent's session
    folder, which is never written into (the agent and ``sync`` would read the copy as
    another session): ``<store>.repaired/<agent>/<path under the folder>`` beside the
    selected store.

    Raises:
        UserError: the file is in an agent's folder and the store has no place on
            disk (memory, PostgreSQL): ``-o`` is needed.
    """
    from sessiontree.stores import resolve_store

    found = _agent_folder_of(path)
    if found is None:
        return path.with_name(_repaired_name(path.name))
    agent, folder = found
    try:
        location = resolve_store(store_arg)
    except SessionError as exc:
        raise UserError(f"{path} is in {agent}'s session folder, where no copy is written, and the store "
                        f"cannot tell where else: {failure_reason(exc)}; give -o FILE") from exc
    if location.path is None:  # only a SQLite file or a JSONL folder has a path (StoreLocation)
        raise UserError(f"{path} is in {agent}'s session folder, where no copy is written, and the "
                        f"{location.kind} store has no folder beside it: give -o FILE")
    relative = Path(os.path.relpath(os.path.realpath(path), folder))
    base = Path(os.path.abspath(location.path.rstrip(os.sep) + ".repaired"))
    return base / agent / relative.parent / _repaired_name(relative.name)


@cli.command("check", short_help='Report problems in session files; --repair fixes a copy.')
@click.argument("paths", nargs=-1, metavar="FILE...")
@click.option("--repair", is_flag=True,
              help="Also write a repaired copy of each damaged file (FILE.repaired.jsonl beside it; for a "
                   "file in an agent's folder, beside the store; or -o).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="With --repair and a single FILE: where to write the repaired copy.")
@click.option("--json", "as_json", is_flag=True, help="Print problems (and repairs) as JSON.")
@click.option("--store", "store_url", is_flag=False, flag_value="", default=None, metavar="[URL]",
              help="Verify a whole store instead of files: the selected store, or URL (read-only).")
@click.pass_context
def check_cmd(ctx: click.Context, paths: tuple[str, ...], repair: bool, output: Path | None, as_json: bool,
              store_url: str | None = None) -> None:
    """Report every problem of session files, with file and line; directories are searched for *.jsonl.

    Files are only read. --repair writes a fixed copy next to each file that
    needs one and lists every change; what cannot be repaired is reported
    again for the copy. A file in an agent's session folder is never written
    beside: its copy goes beside the store (STORE.repaired/AGENT/...), or to -o.
    Exit status 1 when an error remains (warnings alone exit 0).
    Does not open the store.
    """
    from sessiontree.format.inputlimit import check_input_size

    if store_url is not None:
        from sessiontree.cli.check_store import verify_store_cmd

        verify_store_cmd(store_url, paths, repair, output, as_json)
        return
    if not paths:
        raise click.UsageError("give FILE... to check, or --store [URL] to verify a store")
    from sessiontree.check import checker  # imported on use: the other commands do not need it

    if output is not None and (not repair or len(paths) != 1):
        raise click.UsageError("-o/--output needs --repair and exactly one FILE")
    if output is not None and (found := _agent_folder_of(output.parent)) is not None:
        raise UserError(f"-o {output} is in {found[0]}'s session folder: the agent and sync would read the "
                        "copy as another session; write it elsewhere")
    app = ctx.find_object(App)
    store_arg = app.store_arg if app is not None else None
    files, rejected = _collect(paths)
    reports: list[dict[str, Any]] = []
    for row in rejected:
        reports.append({"path": row["path"], "error": row["reason"], "problems": []})
    errors = bool(rejected)
    with progress_bar() as progress:
        task = progress.add_task("Checking", total=len(files))
        for path in files:
            report: dict[str, Any] = {"path": str(path)}
            try:
                with open(path, "rb") as handle:
                    # Refused before it is read: checking holds the file several times over.
                    check_input_size(os.fstat(handle.fileno()).st_size, str(path))
                    data = handle.read()  # read once, checked and (maybe) repaired from memory
                problems = checker.check_bytes(data, str(path))
                report["problems"] = [p.to_dict() for p in problems]
            except (SessionError, OSError, ValueError) as exc:
                report.update(error=failure_reason(exc), problems=[])
                errors = True
                reports.append(report)
                progress.advance(task)
                continue
            if repair:
                if any(p.code in checker.REPAIRABLE_CODES for p in problems):
                    target = output or _repaired_path(path, store_arg)
                    try:
                        target.parent.mkdir(parents=True, exist_ok=True)
                        # The Path reaches the "remaining" problems of the --json report (str() there would
                        # change that output's bytes: orjson instead of the json fallback); kept as it is.
                        result = checker.write_repaired(
                            checker.repair_bytes(data, str(path), target), target)  # type: ignore[arg-type]
                    except (SessionError, OSError, ValueError) as exc:
                        # The input was checked; only the copy failed: say so, not "cannot check".
                        report["repairError"] = f"could not write the repaired copy to {target}: {failure_reason(exc)}"
                    else:
                        report.update(result.to_dict())
                        problems = result.remaining
                report["remaining"] = [p.to_dict() for p in problems]
            errors = errors or checker.has_errors(problems) or "repairError" in report
            reports.append(report)
            progress.advance(task)
    if as_json:
        print_json(reports)
    else:
        for report in reports:
            _echo_check_report(report, repair)
        problems_all = [p for r in reports for p in r.get("problems", [])]
        n_err = sum(p["severity"] == "error" for p in problems_all)
        n_warn = len(problems_all) - n_err
        unreadable = sum("error" in r for r in reports)
        checked = len(reports) - unreadable
        summary = (f"{plural(checked, 'file', 'files')} checked: "
                   f"{plural(n_err, 'error', 'errors')}, {plural(n_warn, 'warning', 'warnings')}")
        if unreadable:
            summary += f"; {plural(unreadable, 'path', 'paths')} could not be checked"
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
        echo_line(f"{path}: cannot check: {report['error']}")
        return
    for problem in report["problems"]:
        where = f"{path}:{problem['line']}" if problem["line"] is not None else path
        echo_line(f"{where}: {problem['severity']}: {problem['message']} [{problem['code']}]")
    if not repair:
        if not report["problems"]:
            echo_line(f"{path}: ok")
        return
    if report.get("repairError"):
        echo_line(f"{path}: {report['repairError']}")
    elif report.get("outPath"):
        echo_line(f"{path}: repaired copy written to {report['outPath']} ({plural(len(report['changes']), 'change', 'changes')})")
        for change in report["changes"]:
            line = f"line {change['line']}: " if change["line"] is not None else ""
            echo_line(f"  {line}{change['description']} [{change['code']}]")
        for problem in report["remaining"]:
            where = f"{report['outPath']}:{problem['line']}" if problem["line"] is not None else report["outPath"]
            echo_line(f"  remaining: {where}: {problem['severity']}: {problem['message']} [{problem['code']}]")
    elif not report["problems"]:
        echo_line(f"{path}: ok")
    else:
        echo_line(f"{path}: nothing --repair can fix")


