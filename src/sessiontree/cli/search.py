"""``sessiontree search``: full-text search across every session (docs/search.md).

A thin edge: it parses the options, calls :func:`sessiontree.search.query.search`,
and prints the hits grouped by session. Snippets are session text: each piece
passes through :func:`~sessiontree.core.textsafe.safe_line` before it is
highlighted, so the highlight never splits an escape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from sessiontree.cli.common import (
    App,
    DateBound,
    cli,
    echo_line,
    pass_app,
    plain_lines,
    plural,
    print_json,
    print_rich,
    resolve_session_id,
    stderr_console,
    stdout_console,
)
from sessiontree.core.textsafe import safe_line
from sessiontree.errors import SearchCursorError, SearchQueryError
from sessiontree.format.types import ENTRY_TYPES, MESSAGE_ROLES

if TYPE_CHECKING:
    from datetime import datetime

    from sessiontree.core.search import SearchHit


def _query(words: tuple[str, ...]) -> str:
    """The query from the command-line words: one argument holding whitespace and no
    quote (``sessiontree search "a phrase"``) is a phrase; the rest are joined by spaces."""
    parts = []
    for word in words:
        if any(c.isspace() for c in word) and '"' not in word and word.strip():
            parts.append(f'"{word}"')
        else:
            parts.append(word)
    return " ".join(parts)


def _time(hit: SearchHit) -> str:
    from sessiontree.core.tree import parse_timestamp_ms, utc_from_ms

    when = utc_from_ms(parse_timestamp_ms(hit.timestamp))  # None: unparsable or outside years 1-9999
    if when is None:
        return "-".ljust(17)
    return when.strftime("%Y-%m-%d %H:%MZ")


def _snippet(hit: SearchHit) -> list[tuple[str, str | None]]:
    """The snippet as ``(text, style)`` pieces, its matches in bold yellow; every piece sanitised first."""
    pieces: list[tuple[str, str | None]] = []
    at = 0
    for start, end in hit.highlights:
        pieces.append((safe_line(hit.snippet[at:start]), None))
        pieces.append((safe_line(hit.snippet[start:end]), "bold yellow"))
        at = end
    pieces.append((safe_line(hit.snippet[at:]), None))
    return pieces


#: What --role accepts: message roles (and the roles summaries and custom messages
#: are searched under), and entry types.
SEARCH_ROLES = tuple(dict.fromkeys([*sorted(MESSAGE_ROLES), *sorted(ENTRY_TYPES)]))
_ROLE_WIDTH = len("branchSummary")  # the longest common one; "compactionSummary" is cut


def _merging(pending: int) -> None:
    """Say why this search pauses (only on a terminal: scripts read stdout alone)."""
    if stderr_console().is_terminal:
        echo_line(f"Merging {pending:,} new entries into the search index...", err=True)


def _known_roles(roles: tuple[str, ...]) -> tuple[str, ...]:
    """``--role`` values in their canonical spelling (case-insensitive); an unknown
    one is a usage error that lists the valid values, never a silent "No matches"."""
    canonical = {role.lower(): role for role in SEARCH_ROLES}
    out = []
    for role in roles:
        known = canonical.get(role.lower())
        if known is None:
            raise click.BadParameter(f"unknown role {role!r}; one of: {', '.join(SEARCH_ROLES)}",
                                     param_hint="--role")
        out.append(known)
    return tuple(out)


def _alternatives(items: list[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


@cli.command("search", short_help="Full-text search across every session.")
@click.argument("words", nargs=-1, metavar="QUERY")
@click.option("--cwd", metavar="DIR", type=click.Path(file_okay=False, path_type=str),
              help="Only sessions of this project directory.")
@click.option("--role", "roles", metavar="ROLE", multiple=True,
              help="Only entries of this role (user, assistant, toolResult, bashExecution, custom, "
                   "branchSummary, compactionSummary) or entry type (session_info, session_summary, ...). "
                   "Repeatable.")
@click.option("--since", type=DateBound(end=False, times=True), metavar="DATE|Nd", help="Only entries from DATE on (YYYY-MM-DD or YYYYMMDD, UTC; "
                                                 "an ISO-8601 time; or the last N days including today: 7d, also Nw).")
@click.option("--until", type=DateBound(end=True, times=True), metavar="DATE", help="Only entries up to DATE, that day included (or before an "
                                              "ISO-8601 time).")
@click.option("--session", "session", metavar="ID", help="Only this session (a unique id prefix).")
@click.option("--host", "hosts", metavar="HOST", multiple=True,
              help="Only sessions first synced or imported on this host (its name or machine id). Repeatable.")
@click.option("--user", "users", metavar="USER", multiple=True,
              help="Only sessions first synced or imported by this user. Repeatable.")
@click.option("-n", "--limit", type=click.IntRange(min=1), default=50, show_default=True,
              help="Show at most N hits.")
@click.option("--cursor", metavar="CURSOR", help="Continue after the last hit of a previous page: its "
                                                  "\"nextCursor\" (--json) or the cursor it named, with the same "
                                                  "query and filters.")
@click.option("--json", "as_json", is_flag=True, help="Print the hits as JSON (whole ids, highlight offsets).")
@pass_app
def search_cmd(app: App, words: tuple[str, ...], cwd: str | None, roles: tuple[str, ...], since: datetime | None,
               until: datetime | None, session: str | None, hosts: tuple[str, ...], users: tuple[str, ...], limit: int,
               cursor: str | None, as_json: bool) -> None:
    """Find entries whose text holds every term of QUERY, best first, grouped by session.

    Terms are separated by spaces; "a phrase" in quotes is one term (quote it
    for the shell too: '"a phrase"'). Matching ignores case and finds any
    substring, so code, paths and identifiers match exactly; nothing else is
    syntax (-, *, NEAR, OR are plain text). Searched: user and assistant text,
    thinking, tool calls and results, bash commands and output, custom
    messages, branch and compaction summaries, session names and summaries;
    abandoned branches and entries hidden by context edits too.

    Each hit names its entry: see it with sessiontree show SESSION --entry ENTRY,
    or the context up to it with sessiontree context SESSION --leaf ENTRY.
    No hits: up to three close queries made of words the sessions hold
    ("Did you mean compaction?"; --json: "suggestions").

    More hits than -n: the next page is --cursor with the cursor printed
    (--json: "nextCursor"), the same query and filters; it continues after the
    last hit shown even when entries were added since.
    """
    from sessiontree.search.query import search_request

    roles = _known_roles(roles)
    query = _query(words)
    if not query.strip():
        raise click.UsageError("give a search query, e.g. sessiontree search 'flaky test'")
    session_id = resolve_session_id(app, session) if session is not None else None
    sessions = None
    if hosts or users:
        from sessiontree.stores.origin import matching_sessions  # socket, getpass: only for these filters

        sessions = matching_sessions(app.store.provenances(), hosts, users)
    try:
        result = search_request(app.store, query, cwd=cwd, roles=roles or None, since=since,
                                until=until, session=session_id, limit=limit,
                                sessions=sessions, cursor=cursor, on_merge=_merging)
    except SearchQueryError as exc:
        raise click.UsageError(str(exc)) from None
    except SearchCursorError as exc:
        raise click.BadParameter(str(exc), param_hint="--cursor") from None
    # No hits: up to three close queries from the stored words (search/suggest.py).
    suggestions: list[str] = []
    if not result.hits and not cursor:
        from sessiontree.search.suggest import suggest  # difflib: only when nothing was found

        suggestions = suggest(app.store, query, cwd=cwd, roles=roles or None, since=since,
                              until=until, session=session_id)
    if as_json:
        data = result.to_dict()
        if not result.hits:
            data["suggestions"] = suggestions
        print_json(data)
        return
    if not result.hits:
        print_rich(stdout_console(), ("No more matches." if cursor else "No matches.")
                   + (f" Did you mean {_alternatives(suggestions)}?" if suggestions else ""))
        return
    from sessiontree.format.idprefix import short_session_ids
    from sessiontree.search.query import group_by_session

    short = short_session_ids(app.store.session_ids())
    # Each line as (text, style) pieces: printed as plain text on a pipe where that is
    # certainly what rich prints (cli/common.py plain_lines), else through rich.
    lines: list[list[tuple[str, str | None]]] = []
    for sid, hits in group_by_session(result.hits):
        first = hits[0]
        title = " ".join(first.title.split())
        # The count before the title: a long title is cut at the line's end, never the count.
        lines.append([(safe_line(short.get(sid, sid)), "bold cyan"),
                      (f"  ({plural(len(hits), 'hit', 'hits')})  ", "dim"), (safe_line(title), "bold")])
        for hit in hits:
            row: list[tuple[str, str | None]] = [
                ("  ", None), (safe_line(hit.entry_id), "cyan"), ("  ", None),
                (safe_line(hit.role or hit.entry_type).ljust(_ROLE_WIDTH)[:_ROLE_WIDTH], None), ("  ", None),
                (_time(hit), "dim"), ("  ", None)]
            if not hit.on_active_branch:
                row.append(("[off branch] ", "magenta"))
            row.extend(_snippet(hit))
            lines.append(row)
    plain = plain_lines(["".join(text for text, _ in pieces) for pieces in lines])
    if plain is not None:
        click.echo(plain)
    else:
        from rich.text import Text

        texts = []
        for pieces in lines:
            text = Text()
            for piece, style in pieces:
                text.append(piece, style=style)
            texts.append(text)
        print_rich(stdout_console(), Text("\n").join(texts), no_wrap=True, overflow="ellipsis")
    if result.more:
        echo_line(f"showing {'the best ' if not cursor else ''}{plural(len(result.hits), 'hit', 'hits')}; "
                  f"more with --cursor {result.next_cursor} (or -n {limit * 4})", err=True)
