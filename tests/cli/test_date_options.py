"""Every date option is read by one parser, and a bad value is a usage error (exit 2) on
every command (docs/usage.md, "Dates on the command line"; click's convention for a bad
option value). Before 0.2.0 ``stats --since bad`` and ``archive --older-than soon`` exited 1
where ``list`` and ``search`` exited 2."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from sessiontree.cli import cli
from sessiontree.stores import SqliteStore


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    found = []
    for name in group.list_commands(click.Context(group)):
        command = group.get_command(click.Context(group), name)
        if isinstance(command, click.Group):
            found += _commands(command, (*prefix, name))
        elif command is not None:
            found.append(((*prefix, name), command))
    return found


def test_every_since_and_until_option_is_read_by_the_one_date_parser():
    from sessiontree.cli.common import Age, DateBound

    dated = {(path, param.name): param for path, command in _commands(cli) for param in command.params
             if param.name in ("since", "until")}
    assert {path for path, _ in dated} >= {("list",), ("search",), ("stats",)}
    assert all(isinstance(param.type, DateBound) for param in dated.values()), \
        [key for key, param in dated.items() if not isinstance(param.type, DateBound)]
    # Every --older-than takes an age through the one Age type.
    aged = {path: param for path, command in _commands(cli) for param in command.params
            if "--older-than" in getattr(param, "opts", ())}
    assert set(aged) == {("archive",), ("prune",)}
    assert all(isinstance(param.type, Age) for param in aged.values())


@pytest.mark.parametrize(("args", "option"), [
    (["list", "--since", "last tuesday"], "--since"),
    (["list", "--until", "2026-13-01"], "--until"),
    (["search", "x", "--since", "yesterday"], "--since"),
    (["search", "x", "--until", "2026-02-30"], "--until"),
    (["stats", "--since", "last tuesday"], "--since"),
    (["stats", "--until", "2026-13-01"], "--until"),
    (["stats", "--until", "7d"], "--until"),
    (["archive", "--older-than", "soon"], "--older-than"),
    (["prune", "--older-than", "a while"], "--older-than"),
])
def test_a_bad_date_is_a_usage_error_with_exit_status_2(tmp_path, args, option):
    SqliteStore(str(tmp_path / "s.db")).close()
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), *args])
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in result.output
    assert result.output.startswith("Usage: ")


def test_good_dates_still_pass(tmp_path):
    SqliteStore(str(tmp_path / "s.db")).close()
    runner = CliRunner()
    for args in (["list", "--since", "7d"], ["list", "--until", "20260131"], ["stats", "--since", "2026-01-01"],
                 ["stats", "--since", "2w"], ["search", "x", "--since", "2026-01-31T12:00Z"]):
        result = runner.invoke(cli, ["--store", str(tmp_path / "s.db"), *args])
        assert result.exit_code == 0, (args, result.output)
