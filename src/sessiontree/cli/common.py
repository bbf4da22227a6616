"""Shared state and helpers of the command line: the group, errors, output, id prefixes.

Output rule (docs/terminal-output.md): every human-readable line or cell that
holds text from a session, a file name or an error message passes through
:mod:`sessiontree.core.textsafe` (``safe_line`` for one-line fields, ``safe_block``
for text blocks) before it is printed; :class:`UserError` sanitises its
message, :func:`echo_line` its line, :func:`print_json` escapes its JSON text.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import import_module
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, cast

import click

from sessiontree.core.textsafe import CUT_UNITS, safe_block, safe_json_text, safe_line
from sessiontree.errors import InvalidSessionError, SessionError, StoreOpenError

if TYPE_CHECKING:
    # Start-up (docs/architecture.md, "Start-up"): rich, the stores, the session manager and
    # the usage report are imported where they are used, never when a command is only named.
    from rich.console import Console
    from rich.progress import Progress

    from sessiontree.format.codec import ParsedSession
    from sessiontree.session.manager import SessionManager
    from sessiontree.session.reading import Need, ReadOnlySession
    from sessiontree.stores.base import SessionStore
    from sessiontree.usage.report import Totals

_CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


# --------------------------------------------------------------------------- errors


class UserError(click.ClickException):
    """A problem the user can fix: one line on stderr, exit status 1."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        # One line, and nothing from a session (ids, types, paths in reasons) raw.
        super().__init__(safe_line(" ".join(str(message).split())))

    def show(self, file: Any = None) -> None:
        """Print ``sessiontree: error: <message>`` on stderr."""
        click.echo(f"sessiontree: error: {self.format_message()}", err=True)


class DateBound(click.ParamType[Any]):
    """The one parser of every date option (``--since``, ``--until``): a bad value is the
    option's usage error, exit 2, as click reports any bad option value (docs/usage.md,
    "Dates on the command line").

    ``times=True`` (``list``, ``search``): ``search.query.parse_when``'s forms, UTC days,
    ``Nd``/``Nw`` for a start, or an ISO-8601 instant; the value becomes an aware
    ``datetime`` (a day's first instant, or with ``end=True`` the next day's).
    ``times=False`` (``stats``): ``usage.days.parse_date_bound``'s forms, days only
    (``YYYY-MM-DD``, ``YYYYMMDD``, ``Nd``/``Nw`` for a start); the value stays the checked
    text, since its days are those of the ``--timezone`` the command resolves later.
    The parsers are imported on first use (start-up, docs/architecture.md).
    """

    name = "date"

    def __init__(self, *, end: bool, times: bool) -> None:
        self.end = end
        self.times = times

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The checked value (class docstring); ``self.fail`` (exit 2) when it is not a date."""
        if not isinstance(value, str):
            return value  # already converted (a default, or a value passed twice through click)
        try:
            if self.times:
                from sessiontree.search.query import parse_when

                return parse_when(value, end=self.end)
            from sessiontree.usage.days import parse_date_bound

            parse_date_bound(value, UTC, end=self.end)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        return value


class Age(click.ParamType[Any]):
    """An age option (``archive --older-than``, ``team prune --older-than``): one number and one
    unit, ``30d``, ``12h``, ``2w``, ``90m``, ``45s``, as seconds (a float). A bad value is the
    option's usage error, exit 2, as for a bad date (:class:`DateBound`)."""

    name = "age"
    _PATTERN = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
    _UNIT_SECONDS: ClassVar[dict[str, int]] = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Seconds of ``value``; ``self.fail`` (exit 2) when it is not one number and one unit."""
        if not isinstance(value, str):
            return value
        match = self._PATTERN.fullmatch(value.strip().lower())
        if match is None:
            self.fail(f"invalid duration {value!r}: use a number and a unit, such as 30d, 12h, 2w", param, ctx)
        return float(match.group(1)) * self._UNIT_SECONDS[match.group(2)]


def failure_reason(exc: BaseException) -> str:
    """Why one file of a batch failed, without repeating its path."""
    if isinstance(exc, InvalidSessionError):
        return f"line {exc.line}: {exc.reason}" if exc.line is not None else exc.reason
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return describe_error(exc)


def describe_error(exc: BaseException) -> str:
    """One line for a library error: an ``OSError``'s reason and file name, else the
    exception's text (its type name when it has none)."""
    if isinstance(exc, OSError) and exc.strerror:
        where = exc.filename if exc.filename is not None else ""
        return f"{exc.strerror}: {where}" if where else exc.strerror
    return str(exc) or type(exc).__name__


class _Group(click.Group):
    """The command group; maps library errors to :class:`UserError` in one place, and
    imports a command's module only when the command is run or listed.

    :attr:`lazy_commands` maps a command name to the module of :mod:`sessiontree.cli`
    that registers it on :data:`cli` (``sessiontree.cli.COMMANDS`` fills it): naming one
    command loads its module alone, so start-up does not pay for every command's imports.
    A command registered by importing its module directly is listed too.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands: dict[str, str] = {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command name, loaded or not, sorted."""
        return sorted({*self.commands, *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command, its module imported first when it is not loaded yet; ``None`` for an unknown name."""
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            import_module(f"sessiontree.cli.{self.lazy_commands[cmd_name]}")
        return self.commands.get(cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command, turning library errors into one ``sessiontree: error:`` line."""
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise  # click handles a closed pipe (``| head``) quietly
        except click.Abort:
            # A confirmation got no answer (closed stdin) or Ctrl-C; end the prompt's line first.
            click.echo(err=True)
            raise UserError("aborted; nothing was changed") from None
        except (SessionError, OSError, ValueError) as exc:
            raise UserError(describe_error(exc)) from exc


# --------------------------------------------------------------------------- state and helpers


#: How a command opens the store. ``create``: may create a missing store or
#: initialise an empty database, and refuses a damaged one (``quick_check``);
#: ``write``: an existing store only. Every command not named here opens the
#: store read-only, so it works on a store the user can only read and can
#: never create or change one (docs/stores.md); a new writing command must be added.
#: How to put sessions into a store that does not exist yet, for messages.
FILL_HINT = ("fill it with: sessiontree sync (the agents' own session folders) or "
             "sessiontree import PATH... (files or folders of *.jsonl sessions)")

STORE_MODES: dict[str, str] = {
    "import": "create",
    "sync": "create",
    "sources": "read",
    "fork": "write",
    "delete": "write",
    "name": "write",
    "label": "write",
    "reindex": "write",
    "archive": "write",
    "team": "write",
    "prune": "write",
    "hold": "write",
    "unhold": "write",
}

#: Commands of mode ``create`` that do not run ``PRAGMA quick_check`` on open: ``sync`` runs
#: from hooks and ``--watch``, mostly with nothing to write, and the check reads the whole
#: database each time (0.17-0.22 s wall, 0.05 s CPU on a 93 MB store; it grows with the store);
#: it relies on SQLite's own detection as the other writers do (docs/stores.md, "quick_check policy").
UNCHECKED_CREATE = frozenset({"sync"})


@dataclass
class App:
    """Per-invocation state: the store option and the store, opened on first use.

    Attributes:
        store_arg: ``--store`` as given, or ``None`` (``$SESSIONTREE_STORE``, else the default).
        command: the subcommand being run; its entry in :data:`STORE_MODES`
            (default ``read``) decides how the store is opened.
        create_store: set by a command that may start a new store (same as mode ``create``).
    """

    store_arg: str | None
    _store: SessionStore | None = field(default=None, repr=False)
    command: str | None = None
    #: Only ``import`` may create a missing store: elsewhere a mistyped
    #: ``--store`` path would look like an empty store.
    create_store: bool = False

    @property
    def store_mode(self) -> str:
        """``"create"``, ``"write"`` or ``"read"`` for this invocation."""
        if self.create_store:
            return "create"
        return STORE_MODES.get(self.command or "", "read")

    @property
    def store(self) -> SessionStore:
        """The selected store (``--store`` > ``$SESSIONTREE_STORE`` > default), opened
        read-only, for writing, or for creating as :attr:`store_mode` says.

        Raises:
            StoreOpenError: the store cannot be opened in that mode (missing,
                another program's database, damaged, or not writable for a writer).
        """
        if self._store is None:
            from sessiontree.stores import open_store, resolve_store

            mode = self.store_mode
            try:
                if mode == "read":
                    self._store = open_store(self.store_arg, create=False, readonly=True)
                elif mode == "write":
                    self._store = open_store(self.store_arg, create=False)
                else:
                    self._store = open_store(self.store_arg, create=True,
                                             quick_check=self.create_store or self.command not in UNCHECKED_CREATE)
            except StoreOpenError as exc:
                where = resolve_store(self.store_arg)
                if where.exists:
                    raise
                # A new user's first command: say how to fill the store, not just that it is missing.
                raise StoreOpenError(f"{exc}; {FILL_HINT}") from exc
        return self._store

    def close(self) -> None:
        """Close the store if it was opened."""
        if self._store is not None:
            self._store.close()
            self._store = None


pass_app = click.make_pass_decorator(App)


#: Output width when stdout is not a terminal (``$COLUMNS`` overrides it).
PIPE_WIDTH = 160


def stdout_console() -> Console:
    """A rich console on stdout, without markup or highlighting; :data:`PIPE_WIDTH` columns
    when stdout is not a terminal and ``$COLUMNS`` is unset."""
    from rich.console import Console

    # markup=False, emoji=False: session text such as "[/x]" or ":x:" is data, never rich markup or an emoji code.
    console = Console(highlight=False, markup=False, emoji=False)
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        console.width = PIPE_WIDTH
    return console


def stderr_console() -> Console:
    """A rich console on stderr, without markup or highlighting (progress, spinners)."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, markup=False, emoji=False)


def echo_line(line: str = "", *, err: bool = False) -> None:
    """``click.echo`` of one line built from session text or file names, sanitised with
    :func:`~sessiontree.core.textsafe.safe_line` (a stray newline is shown, not obeyed)."""
    click.echo(safe_line(line), err=err)


def echo_fields(*fields: Any, err: bool = False) -> None:
    """``click.echo`` of one tab-separated line: each field sanitised with
    :func:`~sessiontree.core.textsafe.safe_line` (a tab or newline inside a field is
    shown as ``\\x09``/``\\x0a``), the tabs between fields written as tabs, so the
    columns stay columns for ``cut -f`` (docs/terminal-output.md)."""
    click.echo("\t".join(safe_line(field) for field in fields), err=err)


def print_rich(console: Console, *renderables: Any, **options: Any) -> None:
    """Print to stdout; when it is not a terminal, without the padding rich adds at line ends.

    Plain ``str`` renderables are sanitised (:func:`~sessiontree.core.textsafe.safe_block`);
    rich objects must be built from sanitised text (tables, ``Text``, renderings
    of :mod:`sessiontree.core.render`).
    """
    renderables = tuple(safe_block(r) if isinstance(r, str) else r for r in renderables)
    if console.is_terminal:
        console.print(*renderables, **options)
        return
    with console.capture() as capture:
        console.print(*renderables, **options)
    text = "\n".join(line.rstrip() for line in capture.get().split("\n"))
    click.echo(text, nl=False)


#: Characters a plain table may hold besides printable ASCII: one cell each, in rich too
#: (the day chart's bars).
_PLAIN_EXTRA = frozenset("\u2588\u258f")


def _plain_pipe() -> bool:
    """Whether rich would print plainly at :data:`PIPE_WIDTH`: stdout is not a terminal (or
    cannot say) and none of ``TTY_COMPATIBLE``, ``FORCE_COLOR``, ``COLUMNS`` (which change
    rich's choice) is set. The first check of :func:`plain_table` and :func:`plain_lines`."""
    if any(name in os.environ for name in ("TTY_COMPATIBLE", "FORCE_COLOR", "COLUMNS")):
        return False
    try:
        return not sys.stdout.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def plain_table(rows: Sequence[Sequence[str]], right: Sequence[bool],
                max_widths: Sequence[int | None] | None = None) -> str | None:
    """The text rich prints for a borderless table (``box=None, pad_edge=False``) of ``rows``
    on stdout that is not a terminal, built without importing rich (start-up,
    docs/architecture.md), one line per row without the last newline; ``None`` where the
    caller must use rich instead.

    The layout is rich's when the table fits: each column as wide as its widest cell (the
    header and footer rows are rows here), cells joined by two spaces, right-aligned where
    ``right`` says, line ends stripped as :func:`print_rich` strips them. Used only when that
    is certain: stdout not a terminal and nothing that changes rich's choice
    (``TTY_COMPATIBLE``, ``FORCE_COLOR``, ``COLUMNS``), every cell printable ASCII (or a
    bar character) and no colon, none starting with a space (but a blank one flush left) or,
    flush right, ending with one, no cell over its column's ``max_widths`` (rich would cut
    it), and the table within :data:`PIPE_WIDTH` columns (rich would shrink columns).
    """
    if not _plain_pipe():
        return None
    for row in rows:
        for flush_right, cell in zip(right, row, strict=True):
            if cell.startswith(" ") if cell.strip(" ") else (cell and flush_right):
                return None  # rich may strip such spaces when it justifies a cell (blank, flush left: kept)
            if flush_right and cell.endswith(" "):
                return None
            if ":" in cell or not ((cell.isascii() and cell.isprintable())  # printable ASCII, at C speed
                                   or all(" " <= ch <= "~" or ch in _PLAIN_EXTRA for ch in cell)):
                return None  # rich reads ":name:" in a plain string as an emoji code
    count = len(right)
    widths = [max(len(row[i]) for row in rows) for i in range(count)]
    if count == 1:
        widths[0] = max(1, widths[0])  # rich gives an empty column one cell when it has no padding
    if max_widths is not None and any(limit is not None and width > limit
                                      for width, limit in zip(widths, max_widths, strict=True)):
        return None
    if sum(widths) + 2 * (count - 1) > PIPE_WIDTH:
        return None
    return "\n".join("  ".join(cell.rjust(widths[i]) if right[i] else cell.ljust(widths[i])
                               for i, cell in enumerate(row)).rstrip() for row in rows)


def plain_lines(lines: Sequence[str]) -> str | None:
    """The text rich prints for ``lines`` (one ``Text`` each, joined by newlines) with
    ``no_wrap=True, overflow="ellipsis"`` on stdout that is not a terminal, built without
    importing rich (start-up, docs/architecture.md), without the last newline; ``None``
    where the caller must use rich instead.

    Rich cuts a line longer than the console's width to one cell less plus "…" and
    :func:`print_rich` strips line ends. Used only when that is certain, as for
    :func:`plain_table`: stdout not a terminal, none of ``TTY_COMPATIBLE``, ``FORCE_COLOR``,
    ``COLUMNS`` set (the width is then :data:`PIPE_WIDTH`), every character printable ASCII
    or "…" (a snippet's cut ends; one cell each; no tab, which rich expands).
    """
    if not _plain_pipe():
        return None
    out = []
    for line in lines:
        if not (line.isascii() and line.isprintable()) and not all(" " <= ch <= "~" or ch == "\u2026"
                                                                    for ch in line):
            return None
        out.append((line if len(line) <= PIPE_WIDTH else line[:PIPE_WIDTH - 1] + "\u2026").rstrip())
    return "\n".join(out)


def print_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout. Control, bidi and invisible
    characters inside strings are written as ``\\uXXXX`` escapes
    (:func:`~sessiontree.core.textsafe.safe_json_text`): the values parse back unchanged."""
    import orjson

    try:
        text = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode("utf-8")
    except TypeError:  # lone surrogates, huge integers: the standard library escapes them
        text = json.dumps(data, indent=2, ensure_ascii=True, default=str)
    click.echo(safe_json_text(text))


def _stderr_may_be_terminal() -> bool:
    """``False`` only where rich's ``Console.is_terminal`` is ``False`` too: stderr is not a
    TTY and neither ``TTY_COMPATIBLE`` nor ``FORCE_COLOR`` (https://force-color.org/) says otherwise."""
    if "TTY_COMPATIBLE" in os.environ or "FORCE_COLOR" in os.environ:
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError, OSError):
        return True  # let rich decide


@contextlib.contextmanager
def busy_spinner(message: str) -> Iterator[None]:
    """A spinner on stderr while something slow runs (nothing when stderr is not a terminal)."""
    if not _stderr_may_be_terminal():
        yield  # piped or run by a script: rich is not even imported (docs/architecture.md, "Start-up")
        return
    console = stderr_console()
    if not console.is_terminal:
        yield
        return
    with console.status(message):
        yield


@contextlib.contextmanager
def bulk_read() -> Iterator[None]:
    """Around reading a whole session (or two) into memory in a command that then ends:
    Python's cyclic garbage collector is paused while the entries are built, and what
    exists afterwards is frozen out of its later passes (:func:`gc.freeze`).

    Why: a 100,000-entry session is some 600,000 dicts and lists; the collector's full
    passes, triggered again and again as they accumulate, rescan all of them and cost a
    third of the load (benchmarks/README.md, "Round four"). Parsed JSON holds no reference
    cycles, so nothing collectable is missed; frozen objects are simply never freed before
    the process exits. Only for one-shot commands (``context``, ``export``, ``show``,
    ``diff``), never the long-running ones (``serve``, ``mcp``, ``sync --watch``).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


class _NoProgress:
    """What :func:`progress_bar` gives when stderr is not a terminal: rich's ``Progress``
    calls the commands make (``add_task``, ``update``, ``advance``, ``disable``), doing nothing,
    so a piped or scripted run never imports rich (docs/architecture.md, "Start-up")."""

    disable = True

    def __enter__(self) -> _NoProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, *args: Any, **kwargs: Any) -> int:
        """A task id (always 0)."""
        return 0

    def update(self, task: int, **kwargs: Any) -> None:
        """Nothing."""

    def advance(self, task: int, advance: float = 1) -> None:
        """Nothing."""


def progress_bar(console: Console | None = None) -> Progress:
    """A transient progress bar (description, bar, done/total, elapsed) on ``console``
    (default: :func:`stderr_console`), disabled when it is not a terminal. Without a console
    and with stderr not a terminal, a stand-in that draws nothing (:class:`_NoProgress`):
    rich is not imported."""
    if console is None:
        if not _stderr_may_be_terminal():
            return cast("Progress", _NoProgress())
        console = stderr_console()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console, transient=True,
                    disable=not console.is_terminal)


def resolve_session_id(app: App, prefix: str) -> str:
    """The store's one session that ``prefix`` names: a whole id, a unique prefix (a session's
    own subagent sessions never make it ambiguous), or ``<parent>/<agent>`` for a subagent
    session; the rule every edge follows (:mod:`sessiontree.format.idprefix`).

    Raises:
        UnknownSessionPrefixError: no session matches.
        AmbiguousSessionPrefixError: several do (both reported as one ``sessiontree: error:`` line).
    """
    from sessiontree.format.idprefix import resolve_session_prefix

    return resolve_session_prefix(prefix, app.store.session_ids())


def resolve_entry_id(session: ReadOnlySession | SessionManager, prefix: str) -> str:
    """The session's one entry id equal to or starting with ``prefix``: the rule of every
    edge (:func:`sessiontree.format.idprefix.resolve_entry_prefix`).

    Raises:
        UnknownEntryPrefixError: no entry matches.
        AmbiguousEntryPrefixError: several do (both reported as one ``sessiontree: error:`` line).
    """
    from sessiontree.format.idprefix import resolve_entry_prefix

    return resolve_entry_prefix(prefix, (e["id"] for e in session.get_entries()))


def read_parsed(app: App, session_id: str) -> ParsedSession:
    """The stored session's records, read without writing to it (docs/rules/decisions.md D-9):
    for a command that writes them out (``export``, ``secrets``), not one that reads the tree."""
    with bulk_read():
        return app.store.read(session_id)


def open_session_readonly(app: App, session_id: str, need: Need = "whole") -> ReadOnlySession:
    """The stored session opened for reading by the read service
    (:func:`sessiontree.session.reading.open_readonly`: the store's traits choose how for
    ``need``), with a spinner: nothing a read-only command does can write to the store."""
    from sessiontree.session.reading import open_readonly

    with busy_spinner("Loading session…"), bulk_read():
        return open_readonly(app.store, session_id, need)


def open_session(app: App, session_id: str, cwd: str | None = None) -> SessionManager:
    """The stored session opened for writing (:meth:`SessionManager.open`), with a spinner."""
    from sessiontree.session.manager import SessionManager

    with busy_spinner("Loading session…"):
        return SessionManager.open(app.store, session_id, cwd)


def plural(count: int, one: str, many: str) -> str:
    """``count`` and the noun: ``one`` when ``count == 1``, else ``many`` ("2 entries")."""
    return f"{count} {one if count == 1 else many}"


def session_title(info_name: str | None, summary: str | None, first: str) -> str:
    """What a listing shows for a session: its name, else its summary, else ``first`` (its first message)."""
    return info_name or summary or first


def utc_minutes(dt: datetime) -> str:
    """Minutes in UTC, marked ``Z`` (``show`` and ``--json`` print full UTC ISO-8601 too);
    ``unknown`` for a listing's :data:`~sessiontree.core.listing.UNKNOWN_TIME`
    (docs/listing.md, "Unknown times")."""
    from sessiontree.core.listing import is_unknown_time

    if is_unknown_time(dt):
        return "unknown"
    return dt.astimezone(UTC).strftime("%Y-%m-%d %H:%MZ")


# --------------------------------------------------------------------------- the group


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: print ``sessiontree, version X`` (as click's own option does) and exit.
    The version is read from the installed metadata only here: ``importlib.metadata`` is
    not cheap to import, and no other command needs it."""
    if not value or ctx.resilient_parsing:
        return
    from sessiontree import __version__

    click.echo(f"sessiontree, version {__version__}")
    ctx.exit()


@click.group(cls=_Group, context_settings=_CONTEXT_SETTINGS)
@click.option("--store", "store_arg", metavar="URL|PATH", default=None,
              help="Session store: sqlite:///FILE, jsonl:///DIR, postgresql://..., memory:, or a path (a directory "
                   "means JSONL, anything else a SQLite file). Default: $SESSIONTREE_STORE, else the "
                   "shared SQLite database in the user data directory.")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version and exit.")
@click.pass_context
def cli(ctx: click.Context, store_arg: str | None) -> None:
    """Store AI coding-agent sessions (format-4 JSONL) and rebuild what the model sees.

    Session and entry ids may be abbreviated to any unique prefix.
    """
    app = App(store_arg, command=ctx.invoked_subcommand)
    ctx.obj = app
    ctx.call_on_close(app.close)


# --------------------------------------------------------------------------- entry point


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run the command line (the ``sessiontree`` console script)."""

    cli.main(args=list(argv) if argv is not None else None, prog_name="sessiontree")
    sys.exit(0)  # pragma: no cover - cli.main exits itself in standalone mode


def _fitting_units(units: Iterable[str], width: int) -> list[str]:
    from rich.cells import cell_len

    kept: list[str] = []
    used = 1  # the ellipsis
    for unit in units:
        used += cell_len(unit)
        if used > width:
            break
        kept.append(unit)
    return kept


def cut_right(text: str, width: int) -> str:
    """``text`` (already sanitised) in at most ``width`` terminal cells, cut at the right
    with "…" when longer, never inside a visible escape (``\\u202e`` is kept whole or
    left out: docs/terminal-output.md, "Where it is applied")."""
    from rich.cells import cell_len

    if cell_len(text) <= width:
        return text
    return "".join(_fitting_units(CUT_UNITS.findall(text), width)) + "…"


def cut_left(text: str, width: int) -> str:
    """``text`` in at most ``width`` terminal cells, cut at the left with "…" when longer;
    a path is cut at a ``/`` when one is in what remains ("…/weather-app"). Like
    :func:`cut_right`, never inside a visible escape."""
    from rich.cells import cell_len

    if cell_len(text) <= width:
        return text
    tail = "".join(reversed(_fitting_units(reversed(CUT_UNITS.findall(text)), width)))
    slash = tail.find("/")
    return "…" + (tail[slash:] if slash > 0 else tail)


def cost_cell(totals: Totals) -> str:
    """A cost for a table cell, as ``stats`` and ``diff`` show it: ``$42.60``; a leading ``~``
    marks a cost with estimated parts, a trailing ``+?`` one missing unpriced calls (docs/usage.md)."""
    from sessiontree.usage.totals import cost_text

    return cost_text(totals)
