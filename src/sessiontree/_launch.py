"""The ``sessiontree`` console script: ``statusline`` without loading the command line.

A status bar runs its command every few seconds, so ``sessiontree statusline``
must start fast (docs/statusline.md). Loading :mod:`sessiontree.cli` imports
click and the command table (each command's module only when it runs:
docs/architecture.md, "Start-up"); this launcher skips even that for the plain
form of the status-line call,

``sessiontree [--store URL|PATH] statusline [--session ID] [--budget NAME]
[--timezone TZ] [--json]``,

and answers it with :mod:`sessiontree._statusline` (the store and the usage modules
only). Any other command line (``--help``, a typo, another command) goes to
:func:`sessiontree.cli.main`, whose ``statusline`` command does the same.

Outside the layers of docs/architecture.md (like ``sessiontree/__init__``):
it is an entry point.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from sessiontree._statusline import parse_statusline_args, run_statusline

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> None:
    """The console script: the fast ``statusline``, else the full command line."""
    args = list(sys.argv[1:] if argv is None else argv)
    options = parse_statusline_args(args)
    if options is not None:
        store = options.pop("store")
        sys.exit(run_statusline(store, **options))
    from sessiontree.cli import main as cli_main

    cli_main(args)
