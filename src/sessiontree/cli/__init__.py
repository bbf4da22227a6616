"""The ``sessiontree`` command line (docs/rules/cli.md spec:cli).

``sessiontree [--store URL|PATH] COMMAND ...``. Each command parses its
input, calls the library (:class:`~sessiontree.session.manager.SessionManager`, the
store, :mod:`sessiontree.format`), and formats the result with ``rich``
(:mod:`sessiontree.core.render` holds the renderings). No rule of the format
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
  and ``ValueError`` is mapped in one place, the group of :mod:`sessiontree.cli.common`); 2 usage error.
* Progress bars and spinners go to stderr, only when it is a terminal.
* Read-only commands (``list``, ``show``, ``context``, ``export``) never write
  to the session they read (docs/rules/decisions.md D-9): a session of a JSONL store is read
  from its file directly instead of being opened for writing.
"""

from sessiontree.cli.common import cli, main

#: Every command: its name -> the module of :mod:`sessiontree.cli` that registers it on
#: :data:`cli`. A module is imported only when one of its commands is run or listed, so
#: start-up pays for the one command named (CONTRIBUTING.md, "Adding a command"; a test
#: checks this table against what the modules register). A new command is one line here.
COMMANDS: dict[str, str] = {
    "archive": "agent",
    "archived": "agent",
    "budget": "budget",
    "check": "files",
    "context": "sessions",
    "delete": "edit",
    "diff": "diff",
    "export": "sessions",
    "fork": "edit",
    "hold": "team",
    "import": "files",
    "insights": "insights",
    "label": "edit",
    "list": "sessions",
    "mcp": "mcp",
    "migrate": "files",
    "name": "edit",
    "path": "store",
    "prune": "team",
    "reindex": "store",
    "restore": "agent",
    "resume": "agent",
    "search": "search",
    "secrets": "secrets",
    "serve": "serve",
    "show": "sessions",
    "sources": "sync",
    "stats": "stats",
    "statusline": "statusline",
    "sync": "sync",
    "team": "team",
    "unhold": "team",
}
cli.lazy_commands.update(COMMANDS)

__all__ = ["COMMANDS", "cli", "main"]
