"""``check --store [URL]``: verify a whole store (docs/stores.md).

Hooked into ``check`` (see :func:`sessiontree.cli.files.check_cmd`): ``check
--store`` verifies the selected store (``sessiontree --store``,
``$SESSIONTREE_STORE``, else the default), ``check --store URL`` the given one.
The store is opened read-only and nothing is written. What is checked is the
store's :meth:`~sessiontree.stores.base.SessionStore.verify`: for SQLite,
``PRAGMA integrity_check``, every record against the checksum recorded when
it was written, every record parsed, and the listing metadata and derived
tables against a rebuild from the entries; for JSONL, the file checker over
every session file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from sessiontree.cli.common import App, UserError, echo_line, plural, print_json, progress_bar


def _where(problem: dict[str, Any], url: str) -> str:
    where = problem["path"] or url
    return f"{where}:{problem['line']}" if problem["line"] is not None else where


def verify_store_cmd(store_url: str, paths: tuple[str, ...], repair: bool, output: Path | None,
                     as_json: bool) -> None:
    """Run ``check --store [URL]``: print every problem of the store and a summary.

    Args:
        store_url: the URL or path given to ``--store``, or ``""`` for the selected store.
        paths, repair, output: ``check``'s other arguments; none may be given with ``--store``.
        as_json: print ``{"store", "sessions", "problems", "errors", "warnings"}`` instead of text.

    Raises:
        click.UsageError: FILE, ``--repair`` or ``-o`` given with ``--store``.
        UserError: the store has errors (exit status 1), or cannot be opened.
    """
    from sessiontree.stores import open_store
    from sessiontree.stores.base import SessionStore

    if paths or repair or output is not None:
        raise click.UsageError("check --store verifies a store: it takes no FILE, --repair or -o")
    app = click.get_current_context().find_object(App)
    own: SessionStore | None = None
    if store_url:
        own = store = open_store(store_url, create=False, readonly=True)
    elif app is not None:
        store = app.store  # "check" is not a writing command: opened read-only
    else:  # pragma: no cover - check always runs under the group
        own = store = open_store(None, create=False, readonly=True)
    try:
        with progress_bar() as progress:
            task = progress.add_task("Verifying", total=None)

            def on_progress(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total)

            problems = [p.to_dict() for p in store.verify(on_progress)]
        sessions = len(store.session_ids())
    finally:
        if own is not None:
            own.close()
    errors = sum(p["severity"] == "error" for p in problems)
    warnings = len(problems) - errors
    if as_json:
        print_json({"store": store.url, "sessions": sessions, "problems": problems,
                    "errors": errors, "warnings": warnings})
    else:
        # Locations and messages quote session ids, entry ids and paths: hostile text,
        # shown through the one sanitiser (a lone surrogate would also stop the output).
        for problem in problems:
            echo_line(f"{_where(problem, store.url)}: {problem['severity']}: {problem['message']} "
                      f"[{problem['code']}]")
        if not problems:
            echo_line(f"{store.url}: ok ({plural(sessions, 'session', 'sessions')})")
        else:
            echo_line(f"{store.url}: {plural(sessions, 'session', 'sessions')} checked: "
                      f"{plural(errors, 'error', 'errors')}, {plural(warnings, 'warning', 'warnings')}")
    if errors:
        raise UserError("errors found in the store")
