"""Budget alerts as ``sync --watch`` raises them (docs/budgets.md, "Alerts").

:func:`alert_crossings` reads the budgets of the config file (again on every
call, so an edit applies to a running watch), sums each one's spend
(:func:`sessiontree.usage.budgets.check_crossings`), POSTs each new crossing to
its webhook, and keeps the memory of alerts beside the config file, so that one
crossing is alerted once, across restarts of the watch. A POST that fails is
not remembered: the next check alerts that crossing again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sessiontree.stores.base import SessionStore
from sessiontree.usage.budgets import Crossing, check_crossings
from sessiontree.usage.config import load_alerted, load_budgets, save_alerted
from sessiontree.usage.webhook import post_json

__all__ = ["Alert", "alert_crossings"]


@dataclass
class Alert:
    """One crossing alerted.

    Attributes:
        crossing: the budget and its status.
        posted: whether the webhook answered 2xx (``False`` without a webhook).
        problem: why the POST failed, or ``None``.
    """

    crossing: Crossing
    posted: bool = False
    problem: str | None = None


def alert_crossings(store: SessionStore, *, path: str | None = None, tz: str | None = None,
                    now_ms: int | None = None, post: Callable[[str, dict[str, Any]], str | None] = post_json,
                    catalog: Any = None) -> list[Alert]:
    """Check every budget of the config file and alert the new crossings.

    Args:
        store: the store synced into.
        path: the config file (default: :func:`sessiontree.usage.config.config_path`).
        tz: the zone of the budgets' days (``None``: local).
        now_ms: "now" (tests).
        post: sends one payload to one URL, returning ``None`` or a problem (tests replace it).

    Returns:
        One :class:`Alert` per new crossing (an empty list when none, or no budget).

    Raises:
        ConfigError: the config file is invalid.
        StorageError: the store could not be read.
    """
    budgets = load_budgets(path)
    if not budgets:
        return []
    alerted = load_alerted(path)
    check = check_crossings(store, budgets, alerted, tz=tz, now_ms=now_ms, catalog=catalog)
    alerts = []
    for crossing in check.crossings:
        alert = Alert(crossing)
        url = crossing.status.budget.webhook
        if url:
            alert.problem = post(url, crossing.payload(at_ms=now_ms, store=store.url))
            alert.posted = alert.problem is None
            if alert.problem is not None:
                # Not delivered: not remembered, so the next check tries again.
                name = crossing.status.budget.name
                if name in alerted:
                    check.alerted[name] = alerted[name]
                else:
                    check.alerted.pop(name, None)
        alerts.append(alert)
    if check.alerted != alerted:
        save_alerted(check.alerted, path)
    return alerts
