"""Running the ``sessiontree`` command in-process for tests (click's ``CliRunner``)."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner, Result

from sessiontree.cli import cli


def cli_runner() -> CliRunner:
    """A ``CliRunner`` keeping stderr apart from stdout on every click version."""
    try:
        return CliRunner(mix_stderr=False)  # click 8.1
    except TypeError:
        return CliRunner()  # click >= 8.2 keeps stderr apart


def run_cli(store: str | None, *args: str, input: str | None = None, code: int = 0,
            one_error_line: bool = False) -> Result:
    """Invoke ``sessiontree [--store STORE] ARGS`` and check how it ended.

    The exit status must be ``code`` and stderr must hold no traceback. For a user
    error (``code == 1``) the last line on stderr is ``sessiontree: error: ...``; with
    ``one_error_line`` it is the only non-blank line.
    """
    argv = (["--store", store] if store else []) + list(args)
    result = cli_runner().invoke(cli, argv, input=input, catch_exceptions=False)
    assert result.exit_code == code, (argv, result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    if code == 1:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert lines and lines[-1].startswith("sessiontree: error: "), result.stderr
        if one_error_line:
            assert len(lines) == 1, result.stderr
    return result


def run_cli_json(store: str | None, *args: str, code: int = 0) -> Any:
    """:func:`run_cli` with ``--json`` appended; returns the parsed stdout."""
    return json.loads(run_cli(store, *args, "--json", code=code).stdout)
