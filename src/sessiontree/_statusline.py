"""``sessiontree statusline`` without the command line: its arguments, its one line, its run
(docs/statusline.md).

Used by the console script's launcher (:mod:`sessiontree._launch`), which answers the plain
form of the call with this module and the store and usage modules only, and by the click
command (:mod:`sessiontree.cli.statusline`) for every other path. It imports neither click
nor rich, and the layers it needs lazily. Outside the layers of docs/architecture.md, like
the launcher.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import IO, Any

__all__ = ["parse_statusline_args", "render_statusline", "run_statusline"]

_VALUE_OPTIONS = {"--session": "session", "--budget": "budget", "--timezone": "tz", "-z": "tz"}


def parse_statusline_args(argv: Sequence[str]) -> dict[str, Any] | None:
    """The options of a plain ``[--store X] statusline ...`` call, or ``None`` when ``argv``
    is anything else (then the full command line handles it)."""
    args = list(argv)
    options: dict[str, Any] = {"store": None, "session": None, "budget": None, "tz": None, "as_json": False}
    if args[:1] == ["--store"] and len(args) >= 2:
        options["store"] = args[1]
        args = args[2:]
    elif args[:1] and args[0].startswith("--store="):
        options["store"] = args[0].split("=", 1)[1]
        args = args[1:]
    if args[:1] != ["statusline"]:
        return None
    rest = args[1:]
    while rest:
        name = rest.pop(0)
        if name == "--json":
            options["as_json"] = True
            continue
        key, equals, value = name.partition("=")
        if key not in _VALUE_OPTIONS:
            return None
        if not equals:
            if not rest:
                return None
            value = rest.pop(0)
        options[_VALUE_OPTIONS[key]] = value
    return options


def render_statusline(line: Any) -> str:
    """One short line: ``$1.23 session · $12.34 today · $12.66 left of daily``; ``~`` marks
    an amount with estimated parts and ``+?`` one leaving unpriced calls out (docs/usage.md)."""
    from sessiontree.usage.money import format_usd

    def cost(totals: Any) -> str:
        text = format_usd(totals.cost_nanos)
        return ("~" if totals.estimated_calls else "") + text + (" +?" if totals.unpriced_calls else "")

    parts = []
    if line.session_id is None:
        parts.append("no session id")
    elif not line.found:
        parts.append("session not synced")
    else:
        parts.append(f"{cost(line.session)} session")
    parts.append(f"{cost(line.today)} today")
    status = line.budget
    if status is not None:
        name = status.budget.name or "budget"
        if status.over:
            parts.append(f"{name} over by {format_usd(-status.left_nanos)}")
        else:
            parts.append(f"{format_usd(status.left_nanos)} left of {name}")
    return " · ".join(parts)


def run_statusline(store_arg: str | None, *, session: str | None = None, budget: str | None = None,
                   tz: str | None = None, as_json: bool = False, stdin: IO[bytes] | None = None,
                   stdout: IO[str] | None = None) -> int:
    """Print the status line; the exit status is always 0 (a status bar shows the line,
    problems included, in a few words).

    The session is ``session``, else the one named by the JSON on ``stdin`` (when it is
    not a terminal). The budget is the config file's budget ``budget``, else its first one.
    """
    from sessiontree.usage.statusline import session_id_from_input

    out = stdout if stdout is not None else sys.stdout
    if session is None:
        source = stdin if stdin is not None else sys.stdin.buffer
        if not (hasattr(source, "isatty") and source.isatty()):
            session = session_id_from_input(source.read(1 << 20))
    try:
        text = _line(store_arg, session, budget, tz, as_json)
    except Exception as exc:  # a status bar gets one line, never a traceback
        from sessiontree.core.textsafe import safe_line

        text = safe_line(f"sessiontree: {' '.join(str(exc).split()) or type(exc).__name__}")[:200]
    out.write(text + "\n")
    out.flush()
    return 0


def _line(store_arg: str | None, session: str | None, budget_name: str | None, tz: str | None,
          as_json: bool) -> str:
    from sessiontree.stores import open_store
    from sessiontree.usage.config import ConfigError, load_budgets
    from sessiontree.usage.statusline import status_line

    budget = None
    note = ""
    try:
        budgets = load_budgets()
    except ConfigError:
        budgets, note = [], " · budgets: config error"
    if budget_name is not None:
        chosen = [b for b in budgets if b.name == budget_name]
        if not chosen:
            raise ValueError(f"no budget named {budget_name!r}")
        budget = chosen[0]
    elif budgets:
        budget = budgets[0]
    store = open_store(store_arg, create=False, readonly=True)
    try:
        line = status_line(store, session, budget=budget, tz=tz)
    finally:
        store.close()
    if as_json:
        import json

        return json.dumps(line.to_dict(), separators=(",", ":"))
    return render_statusline(line) + note


