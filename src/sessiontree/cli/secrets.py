"""``sessiontree secrets``: the secrets found in sessions, masked (docs/secrets.md).

A thin edge over :func:`sessiontree.core.secrets.scan_entries`: each finding
is printed with its entry id, field path, kind and masked preview; the secret
itself never reaches any output.
"""

from __future__ import annotations

import click

from sessiontree.cli.common import (
    App,
    busy_spinner,
    cli,
    echo_line,
    pass_app,
    plural,
    print_json,
    print_rich,
    read_parsed,
    resolve_session_id,
    stdout_console,
)
from sessiontree.core.textsafe import safe_line


@cli.command("secrets", short_help="Find secrets (API keys, tokens, passwords) in sessions, masked.")
@click.argument("sessions", nargs=-1, metavar="[ID...]")
@click.option("--all", "all_", is_flag=True, help="Scan every session in the store.")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON (masked previews only).")
@pass_app
def secrets_cmd(app: App, sessions: tuple[str, ...], all_: bool, as_json: bool) -> None:
    """List the secrets found in the given sessions (or every one with --all).

    Each finding names the entry, the field (message.content[2].text), the
    kind of secret and a masked preview such as sk-ant-...a1b2: never the
    secret itself. The header (cwd) and the verbatim records of Claude Code and
    Codex sessions are scanned too. Exit status 0 whether or not anything is
    found; 1 when a kept record could not be decoded to be scanned.
    """
    from rich.table import Table

    if all_ and sessions:
        raise click.UsageError("give session ids or --all, not both")
    if not all_ and not sessions:
        raise click.UsageError("give at least one session id, or --all")
    ids = app.store.session_ids() if all_ else [resolve_session_id(app, s) for s in sessions]
    # Imported here: the scanner loads detect-secrets (and requests), which no other
    # command needs at start.
    from sessiontree.core.secrets import Finding, scan_entries, unscannable

    results: list[tuple[str, list[Finding]]] = []
    unread: list[tuple[str, int, str | None, str]] = []
    with busy_spinner("Scanning for secrets…"):
        for session_id in ids:
            parsed = read_parsed(app, session_id)
            results.append((session_id, scan_entries(parsed.entries, parsed.header)))
            unread.extend((session_id, *where) for where in unscannable(parsed.entries))
    total = sum(len(found) for _, found in results)
    if as_json:
        print_json({"sessions": [{"id": sid, "count": len(found), "findings": [f.as_dict() for f in found],
                                  "unscanned": [{"index": i, "entryId": e, "path": p}
                                                for s, i, e, p in unread if s == sid]}
                                 for sid, found in results],
                    "total": total, "unscanned": len(unread)})
        _fail_unscanned(unread)
        return
    console = stdout_console()
    for session_id, found in results:
        if not found:
            if not all_:
                echo_line(f"{session_id}: no secrets found")
            continue
        echo_line(f"{session_id}: {plural(len(found), 'finding', 'findings')}")
        table = Table(box=None, pad_edge=False, header_style="bold")
        for title in ("entry", "field", "kind", "preview"):
            table.add_column(title, overflow="fold")
        for f in found:
            table.add_row(safe_line(f.entry_id or f"#{f.index}"), safe_line(f.path), f.kind, safe_line(f.preview))
        print_rich(console, table)
    sessions_with = sum(1 for _, found in results if found)
    echo_line(f"{plural(total, 'finding', 'findings')} in {plural(sessions_with, 'session', 'sessions')} "
              f"of {len(results)} scanned", err=True)
    _fail_unscanned(unread)


def _fail_unscanned(unread: list[tuple[str, int, str | None, str]]) -> None:
    """Name each kept record that could not be decoded to be scanned, and exit 1: a scan
    that could not read everything never looks like a clean one (docs/secrets.md)."""
    if not unread:
        return
    for session_id, index, entry_id, path in unread:
        echo_line(f"{session_id}: entry {safe_line(entry_id or f'#{index}')}: {path} could not be decoded, "
                  "not scanned", err=True)
    raise SystemExit(1)
