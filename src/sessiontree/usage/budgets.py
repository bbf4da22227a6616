"""Spending budgets: what a budget is, the spend of its current period, and the crossings
``sync --watch`` reports (docs/budgets.md).

A budget is an amount of USD, optionally per calendar period (``day``, ``week``
starting on Monday, ``month``, in the report's time zone), optionally narrowed by
the filters of ``stats`` (agent, project directory, host, user). Its spend is
exactly what ``sessiontree stats`` prints for the same filters over the same
days: this module calls :func:`sessiontree.usage.report.usage_report` and adds
nothing to the accounting.

Rules (docs/budgets.md):

* **Over** means the spend is *greater* than the amount; a spend equal to the
  amount is at the line, with nothing left, and not over.
* The spend is the cost ``stats`` shows: recorded plus estimated costs; calls
  that cannot be priced are left out and named (``unpriced_calls``), so a
  budget never claims to be complete when it is not.
* A **crossing** is the move from not over to over within one period. A
  watcher alerts once per crossing: it remembers the period it alerted for
  (``alerted``: budget name -> period key), forgets it when the budget is no
  longer over (the amount was raised, or a new period began), and so alerts
  again only on a new crossing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from sessiontree.core.usage import NANOS_PER_USD
from sessiontree.stores.base import SessionStore
from sessiontree.usage.report import Totals, nanos_to_decimal, resolve_timezone, usage_report

__all__ = [
    "PERIODS",
    "Budget",
    "BudgetStatus",
    "Crossing",
    "CrossingCheck",
    "budget_status",
    "check_crossings",
    "parse_amount",
    "parse_budget",
    "period_bounds",
]

#: Budget periods: a calendar day, a week starting on Monday, a calendar month.
PERIODS = ("day", "week", "month")

#: Budget names as the config file keeps them (a TOML bare key).
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def parse_amount(text: str) -> int:
    """An amount of USD (``"25"``, ``"25.50"``, ``"$1,000"``) as integer nano-dollars.

    Raises:
        ValueError: not a non-negative number, or finer than a nano-dollar.
    """
    cleaned = text.strip().lstrip("$").replace(",", "").replace("_", "")
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        raise ValueError(f"invalid amount {text!r}: use a number of USD such as 25 or 12.50") from None
    if not value.is_finite() or value < 0:
        raise ValueError(f"invalid amount {text!r}: it must be a number of USD, 0 or more")
    nanos = value * NANOS_PER_USD
    if nanos != nanos.to_integral_value():
        raise ValueError(f"invalid amount {text!r}: at most 9 decimals")
    return int(nanos)


def parse_budget(text: str) -> tuple[int, str | None]:
    """``AMOUNT[/day|/week|/month]`` as ``(nano-dollars, period or None)``.

    Raises:
        ValueError: an invalid amount or an unknown period.
    """
    amount, _, period = text.partition("/")
    if period and period.strip().lower() not in PERIODS:
        raise ValueError(f"invalid budget period {period!r}: use /day, /week or /month")
    return parse_amount(amount), period.strip().lower() or None


def period_bounds(period: str | None, today: date) -> tuple[date | None, date | None]:
    """The first and last day (inclusive) of the period holding ``today``; ``(None, None)``
    for a budget without a period (every call counts)."""
    if period is None:
        return None, None
    if period == "day":
        return today, today
    if period == "week":
        start = today - timedelta(days=today.weekday())
        return start, start + timedelta(days=6)
    if period == "month":
        start = today.replace(day=1)
        following = (start + timedelta(days=32)).replace(day=1)
        return start, following - timedelta(days=1)
    raise ValueError(f"unknown budget period {period!r}: one of {', '.join(PERIODS)}")


@dataclass(frozen=True)
class Budget:
    """One budget.

    Attributes:
        name: its name in the config file (letters, digits, ``-``, ``_``); ``""`` for
            one given on the command line (``stats --budget``).
        amount_nanos: the amount, nano-dollars.
        period: one of :data:`PERIODS`, or ``None`` (all calls of the filters).
        agents, hosts, users: keep only calls owned by sessions of these (as ``stats``).
        cwd: keep only calls owned by sessions of this project directory.
        webhook: an ``http(s)://`` URL to POST a crossing to, or ``None``.
    """

    name: str
    amount_nanos: int
    period: str | None = None
    agents: tuple[str, ...] = ()
    cwd: str | None = None
    hosts: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    webhook: str | None = None

    def __post_init__(self) -> None:
        if self.name and not _NAME.fullmatch(self.name):
            raise ValueError(f"invalid budget name {self.name!r}: use 1-64 letters, digits, '-' or '_'")
        if self.period is not None and self.period not in PERIODS:
            raise ValueError(f"unknown budget period {self.period!r}: one of {', '.join(PERIODS)}")
        if self.amount_nanos < 0:
            raise ValueError("a budget amount must be 0 or more")
        if self.webhook is not None and not re.match(r"https?://", self.webhook, re.IGNORECASE):
            raise ValueError(f"invalid webhook URL {self.webhook!r}: it must start with http:// or https://")

    @property
    def label(self) -> str:
        """``$25.00/day`` (the amount and its period, for messages)."""
        amount = nanos_to_decimal(self.amount_nanos)
        text = f"${amount:,.2f}" if amount == amount.quantize(Decimal("0.01")) else f"${amount:,}"
        return text + (f"/{self.period}" if self.period else "")

    def filters(self) -> dict[str, Any]:
        """The filters as JSON (only those set)."""
        data: dict[str, Any] = {}
        if self.agents:
            data["agents"] = list(self.agents)
        if self.cwd:
            data["cwd"] = self.cwd
        if self.hosts:
            data["hosts"] = list(self.hosts)
        if self.users:
            data["users"] = list(self.users)
        return data

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{"name", "amount", "amountNanos", "period", "filters", "webhook"}``."""
        return {"name": self.name, "amount": str(nanos_to_decimal(self.amount_nanos)),
                "amountNanos": self.amount_nanos, "period": self.period, "filters": self.filters(),
                "webhook": self.webhook}


@dataclass
class BudgetStatus:
    """A budget's spend in its current period.

    Attributes:
        budget: the budget.
        since, until: the period's first and last day (``YYYY-MM-DD``, inclusive), or
            ``None`` for a budget without a period (then the range given, if any).
        totals: the spend, as ``stats`` sums it for the same filters and days.
        timezone: the zone of the days (``"local"`` when none was given).
        skipped_sessions: sessions the store could not read.
    """

    budget: Budget
    since: str | None
    until: str | None
    totals: Totals
    timezone: str
    skipped_sessions: int = 0

    @property
    def spent_nanos(self) -> int:
        """The spend: recorded plus estimated costs, nano-dollars."""
        return self.totals.cost_nanos

    @property
    def left_nanos(self) -> int:
        """What is left (negative when over)."""
        return self.budget.amount_nanos - self.spent_nanos

    @property
    def over(self) -> bool:
        """Whether the spend is greater than the amount (at the line is not over)."""
        return self.spent_nanos > self.budget.amount_nanos

    @property
    def period_key(self) -> str:
        """Which period this is (``2026-12-06`` for a day, the Monday for a week,
        ``2026-12`` for a month, ``all`` without a period): alerts are kept per key."""
        if self.budget.period is None or self.since is None:
            return "all"
        return self.since[:7] if self.budget.period == "month" else self.since

    def to_dict(self) -> dict[str, Any]:
        """JSON form (docs/budgets.md): the budget, the period, spent and left as USD decimal
        strings and integer nano-dollars, ``over``, and how the spend was priced."""
        t = self.totals
        return {
            **self.budget.to_dict(),
            "since": self.since,
            "until": self.until,
            "timezone": self.timezone,
            "spent": str(nanos_to_decimal(self.spent_nanos)),
            "spentNanos": self.spent_nanos,
            "left": str(nanos_to_decimal(self.left_nanos)) if self.left_nanos >= 0
            else "-" + str(nanos_to_decimal(-self.left_nanos)),
            "leftNanos": self.left_nanos,
            "over": self.over,
            "estimatedCalls": t.estimated_calls,
            "estimatedCost": str(nanos_to_decimal(t.estimated_nanos)),
            "unpricedCalls": t.unpriced_calls,
            "unpricedModels": sorted(t.unpriced_models),
            "skippedSessions": self.skipped_sessions,
        }


def _today(tz: str | None, now_ms: int | None) -> date:
    zone = resolve_timezone(tz)
    now = datetime.now(UTC) if now_ms is None else datetime.fromtimestamp(now_ms / 1000, UTC)
    return now.astimezone(zone).date() if zone is not None else now.astimezone().date()


def budget_status(store: SessionStore, budget: Budget, *, tz: str | None = None, now_ms: int | None = None,
                  since: str | None = None, until: str | None = None, by: str = "day",
                  catalog: Any = None) -> tuple[BudgetStatus, Any]:
    """The spend of ``budget`` in the period holding ``now_ms`` (default: now).

    Args:
        store: any store.
        budget: the budget.
        tz: the zone of days (IANA name or ``+HH:MM``; ``None``: local).
        now_ms: "now", Unix milliseconds (tests).
        since, until: the range of a budget without a period (``stats`` syntax); refused
            with a period, which sets the range itself.
        by: the grouping of the report returned beside the status (``stats --budget``
            prints it).
        catalog: prices for estimates (default: the offline catalogue).

    Returns:
        The status and the :class:`~sessiontree.usage.report.UsageReport` it was summed from.

    Raises:
        ValueError: ``since``/``until`` with a period, an unknown zone or date.
        StorageError: the store could not be read.
    """
    if budget.period is not None and (since or until):
        raise ValueError(f"a budget per {budget.period} sets its own days; leave out --since and --until")
    if budget.period is not None:
        first, last = period_bounds(budget.period, _today(tz, now_ms))
        assert first is not None and last is not None
        since, until = first.isoformat(), last.isoformat()
    report = usage_report(store, by=by, since=since, until=until, cwd=budget.cwd, tz=tz, catalog=catalog,
                          now_ms=now_ms, hosts=budget.hosts, users=budget.users, agents=budget.agents)
    status = BudgetStatus(budget, since, until, report.totals, tz or "local", report.skipped_sessions)
    return status, report


@dataclass
class Crossing:
    """A budget that went over in its period, not alerted before (:func:`check_crossings`).

    Attributes:
        status: the budget's status when the crossing was seen.
    """

    status: BudgetStatus

    def payload(self, *, at_ms: int | None = None, store: str | None = None) -> dict[str, Any]:
        """The small JSON POSTed to the budget's webhook (docs/budgets.md)."""
        s = self.status
        when = datetime.now(UTC) if at_ms is None else datetime.fromtimestamp(at_ms / 1000, UTC)
        return {
            "event": "budget.crossed",
            "budget": s.budget.name,
            "amount": str(nanos_to_decimal(s.budget.amount_nanos)),
            "period": s.budget.period,
            "periodKey": s.period_key,
            "since": s.since,
            "until": s.until,
            "timezone": s.timezone,
            "spent": str(nanos_to_decimal(s.spent_nanos)),
            "spentNanos": s.spent_nanos,
            "estimated": s.totals.estimated_calls > 0,
            "unpricedCalls": s.totals.unpriced_calls,
            "filters": s.budget.filters(),
            "store": store,
            "at": when.isoformat(timespec="seconds").replace("+00:00", "Z"),
        }


@dataclass
class CrossingCheck:
    """What :func:`check_crossings` found.

    Attributes:
        statuses: every budget's status.
        crossings: the budgets that crossed since the last alert (alert each once).
        alerted: the new memory of alerts (budget name -> period key) to keep.
    """

    statuses: list[BudgetStatus] = field(default_factory=list)
    crossings: list[Crossing] = field(default_factory=list)
    alerted: dict[str, str] = field(default_factory=dict)


def check_crossings(store: SessionStore, budgets: Iterable[Budget], alerted: Mapping[str, str], *,
                    tz: str | None = None, now_ms: int | None = None, catalog: Any = None) -> CrossingCheck:
    """Each budget's status, and the crossings not yet alerted (the rule in the module docstring).

    Args:
        alerted: budget name -> the period key last alerted (kept by the caller between checks).

    Raises:
        ValueError: an unknown zone.
        StorageError: the store could not be read.
    """
    result = CrossingCheck()
    for budget in budgets:
        status, _report = budget_status(store, budget, tz=tz, now_ms=now_ms, catalog=catalog)
        result.statuses.append(status)
        if status.over:
            if alerted.get(budget.name) != status.period_key:
                result.crossings.append(Crossing(status))
            result.alerted[budget.name] = status.period_key
        # Not over: forgotten, so the next time it goes over is a new crossing.
    return result
