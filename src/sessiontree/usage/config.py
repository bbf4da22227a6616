"""The user's config file and what it keeps: budgets (docs/budgets.md).

The file is TOML, at ``$SESSIONTREE_CONFIG`` when set, else ``config.toml`` in the
user's config folder (``platformdirs``: ``~/.config/sessiontree`` on Linux). Budgets
live in tables ``[budgets.NAME]``::

    [budgets.daily]
    amount = "25"            # USD, a string so no float rounds it
    period = "day"           # day | week | month; absent: every call counts
    agents = ["claude-code"] # optional filters, as `stats` takes them
    cwd = "/home/me/app"
    hosts = ["laptop"]
    users = ["me"]
    webhook = "https://example.com/hook"

Rules:

* Reading never changes the file; a file that is not TOML, or a budget that is
  not valid, is a :class:`ConfigError` naming the file and the key.
* Writing keeps everything it does not manage (other tables and keys, in their
  order) and replaces the file atomically (:func:`sessiontree.format.outfile.write_atomic`);
  a config file that is a symbolic link (dotfiles) is written at its target.
  Comments are not kept: the file is written by the command from its data.
* The memory of alerts (which budget alerted for which period) is kept beside
  the file in ``budget-alerts.json``, so a restarted ``sync --watch`` does not
  alert twice for one crossing.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from typing import Any

from sessiontree.errors import SessionError
from sessiontree.format.outfile import write_atomic
from sessiontree.usage.budgets import Budget, parse_amount

__all__ = [
    "CONFIG_ENV",
    "ConfigError",
    "alerts_path",
    "config_path",
    "load_alerted",
    "load_budgets",
    "load_config",
    "remove_budget",
    "save_alerted",
    "set_budget",
]

#: Environment variable naming the config file.
CONFIG_ENV = "SESSIONTREE_CONFIG"

_BUDGET_KEYS = frozenset({"amount", "period", "agents", "cwd", "hosts", "users", "webhook"})
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


class ConfigError(SessionError, ValueError):
    """The config file cannot be read or holds an invalid value (the message names the file and key)."""


def config_path() -> str:
    """``$SESSIONTREE_CONFIG``, else ``config.toml`` in the user's config folder."""
    given = os.environ.get(CONFIG_ENV, "").strip()
    if given:
        return os.path.abspath(os.path.expanduser(given))
    import platformdirs

    return os.path.join(platformdirs.user_config_dir("sessiontree"), "config.toml")


def alerts_path(path: str | None = None) -> str:
    """Where the memory of budget alerts is kept: ``budget-alerts.json`` beside the config file."""
    return os.path.join(os.path.dirname(path or config_path()), "budget-alerts.json")


def load_config(path: str | None = None) -> dict[str, Any]:
    """The config file as a dict (``{}`` when there is none).

    Raises:
        ConfigError: the file is not valid TOML or cannot be read.
    """
    path = path or config_path()
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read: {getattr(exc, 'strerror', None) or exc}") from None


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ConfigError(f"{where}: expected a string or a list of strings")


def budget_from_table(name: str, table: Any, where: str) -> Budget:
    """One ``[budgets.NAME]`` table as a :class:`Budget`.

    Raises:
        ConfigError: a missing or invalid value (``where`` names the file).
    """
    key = f"{where}: budgets.{name}"
    if not isinstance(table, dict):
        raise ConfigError(f"{key}: expected a table")
    unknown = sorted(set(table) - _BUDGET_KEYS)
    if unknown:
        raise ConfigError(f"{key}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_BUDGET_KEYS))})")
    amount = table.get("amount")
    if isinstance(amount, bool) or not isinstance(amount, (str, int, float)):
        raise ConfigError(f"{key}.amount: expected an amount of USD such as \"25\"")
    try:
        nanos = parse_amount(str(amount))
    except ValueError as exc:
        raise ConfigError(f"{key}.amount: {exc}") from None
    for field_name in ("period", "cwd", "webhook"):
        if field_name in table and not isinstance(table[field_name], str):
            raise ConfigError(f"{key}.{field_name}: expected a string")
    try:
        return Budget(name, nanos, table.get("period"),
                      agents=_strings(table.get("agents", []), f"{key}.agents"),
                      cwd=table.get("cwd"),
                      hosts=_strings(table.get("hosts", []), f"{key}.hosts"),
                      users=_strings(table.get("users", []), f"{key}.users"),
                      webhook=table.get("webhook"))
    except ValueError as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{key}: {exc}") from None


def load_budgets(path: str | None = None) -> list[Budget]:
    """Every budget of the config file, in file order.

    Raises:
        ConfigError: the file or one budget is invalid.
    """
    path = path or config_path()
    budgets = load_config(path).get("budgets", {})
    if not isinstance(budgets, dict):
        raise ConfigError(f"{path}: budgets: expected tables [budgets.NAME]")
    return [budget_from_table(name, table, path) for name, table in budgets.items()]


def _budget_table(budget: Budget) -> dict[str, Any]:
    from sessiontree.usage.money import nanos_to_decimal

    table: dict[str, Any] = {"amount": str(nanos_to_decimal(budget.amount_nanos))}
    if budget.period:
        table["period"] = budget.period
    for name, value in (("agents", list(budget.agents)), ("cwd", budget.cwd), ("hosts", list(budget.hosts)),
                        ("users", list(budget.users)), ("webhook", budget.webhook)):
        if value:
            table[name] = value
    return table


def set_budget(budget: Budget, path: str | None = None) -> bool:
    """Add ``budget`` to the config file, or replace the budget of that name.

    Returns:
        Whether a budget of that name was replaced.

    Raises:
        ConfigError: the file is invalid (nothing is written).
        OSError: the file cannot be written.
    """
    path = path or config_path()
    data = load_config(path)
    budgets = data.setdefault("budgets", {})
    if not isinstance(budgets, dict):
        raise ConfigError(f"{path}: budgets: expected tables [budgets.NAME]")
    replaced = budget.name in budgets
    budgets[budget.name] = _budget_table(budget)
    _write(path, data)
    return replaced


def remove_budget(name: str, path: str | None = None) -> bool:
    """Remove the budget ``name`` from the config file.

    Returns:
        Whether it was there (nothing is written otherwise).

    Raises:
        ConfigError: the file is invalid.
        OSError: the file cannot be written.
    """
    path = path or config_path()
    data = load_config(path)
    budgets = data.get("budgets")
    if not isinstance(budgets, dict) or name not in budgets:
        return False
    del budgets[name]
    if not budgets:
        del data["budgets"]
    _write(path, data)
    return True


def _write(path: str, data: Mapping[str, Any]) -> None:
    target = os.path.realpath(path)  # a linked config (dotfiles) is written where it lives
    os.makedirs(os.path.dirname(target), exist_ok=True)
    text = "# sessiontree configuration (docs/budgets.md); written by `sessiontree budget`.\n" + dumps_toml(data)
    write_atomic(target, text.encode("utf-8"))


def load_alerted(path: str | None = None) -> dict[str, str]:
    """The memory of alerts: budget name -> period key last alerted (``{}`` when none or unreadable:
    at worst one alert is repeated)."""
    try:
        with open(alerts_path(path), "rb") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): str(v) for k, v in data.items() if isinstance(v, str)}


def save_alerted(alerted: Mapping[str, str], path: str | None = None) -> None:
    """Keep the memory of alerts beside the config file.

    Raises:
        OSError: it cannot be written.
    """
    target = os.path.realpath(alerts_path(path))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    write_atomic(target, json.dumps(dict(alerted), sort_keys=True).encode("utf-8") + b"\n")


# --------------------------------------------------------------------------- TOML writing


def _key(name: str) -> str:
    return name if _BARE_KEY.fullmatch(name) else json.dumps(name, ensure_ascii=False)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        # A TOML basic string takes JSON's escapes (\", \\, \n, \uXXXX for control characters).
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    # Dates and times that tomllib read: TOML writes them as Python's isoformat.
    return str(value.isoformat())


def dumps_toml(data: Mapping[str, Any], prefix: str = "") -> str:
    """``data`` (as :mod:`tomllib` reads it) as TOML text: plain keys first, then one
    ``[table]`` per nested dict; arrays of tables stay inline."""
    lines = [f"{_key(k)} = {_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    out = "\n".join(lines) + ("\n" if lines else "")
    for name, value in data.items():
        if isinstance(value, dict):
            full = f"{prefix}.{_key(name)}" if prefix else _key(name)
            body = dumps_toml(value, full)
            plain = any(not isinstance(v, dict) for v in value.values())
            if plain or not value:
                out += f"\n[{full}]\n"
            out += body
    return out
