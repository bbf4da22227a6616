"""Usage and cost accounting across sessions: what ``sessiontree stats`` prints
(docs/usage.md).

Layering: stores answer :meth:`~sessiontree.stores.base.SessionStore.usage`
with de-duplicated sums (the rule is :mod:`sessiontree.core.usagerecords`); this
module prices what has no usable recorded cost, groups by day, week, month
(in a time zone), session, model, provider or project, and builds the report
and its JSON form.

Invariants:

* **Money is exact.** Every amount is an integer number of nano-dollars
  (1e-9 USD) until it is printed; JSON carries it twice, as a decimal string
  in USD (``"42.5959075"``) and as integer nano-dollars. No float is summed.
* **A partial total never looks complete.** Each total says how many calls
  were priced from recorded costs, how many were estimated from the price
  catalogue, how many could not be priced (and which models those were), and
  whether sessions could not be read. ``pricing.complete`` is true only when
  nothing is missing.
* **Cost modes.** ``auto`` (default): the recorded ``cost.total`` where it is
  usable, a catalogue estimate where a record has tokens but no usable cost;
  ``recorded``: recorded costs only (the rest is unpriced); ``catalog``: every
  record priced from the catalogue (a cross-check of recorded costs).
* **Day boundaries** are those of the user's local zone (the C library's
  rules, daylight saving included), or of ``tz``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from decimal import Decimal
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sessiontree.core.usagerecords import (
    TokenCounts,
    UsageQuery,
    UsageRecord,
    UsageRow,
    rows_from_records,
)
from sessiontree.stores.base import SessionStore
from sessiontree.stores.origin import matching_sessions
from sessiontree.usage.choices import COST_MODES, GROUPINGS
from sessiontree.usage.prices import GenaiPricesCatalog, PriceCatalog, default_catalog

__all__ = [
    "COST_MODES",
    "GROUPINGS",
    "SCHEMA_VERSION",
    "GenaiPricesCatalog",
    "Group",
    "PriceCatalog",
    "SessionUsage",
    "Totals",
    "UsageReport",
    "format_usd",
    "nanos_to_decimal",
    "parse_date_bound",
    "price_records",
    "price_rows",
    "resolve_timezone",
    "rows_query",
    "session_costs",
    "session_stats",
    "session_usage",
    "usage_report",
    "usage_reports",
]

#: Version of the JSON shape of :meth:`UsageReport.to_dict` (docs/usage.md). Raised
#: only when a field changes meaning or disappears; new fields may appear.
SCHEMA_VERSION = 1


CostMode = Literal["auto", "recorded", "catalog"]
Grouping = Literal["day", "week", "month", "session", "model", "provider", "project", "agent", "host", "user"]

_UNKNOWN = "unknown"


def nanos_to_decimal(nanos: int) -> Decimal:
    """Nano-dollars as an exact :class:`~decimal.Decimal` of USD, without trailing zeros
    (``42595907500`` -> ``Decimal("42.5959075")``)."""
    value = Decimal(nanos).scaleb(-9)
    normal = value.normalize()
    # normalize() writes 100 as 1E+2; keep a plain exponent of at most 0.
    exponent = normal.as_tuple().exponent
    # A finite Decimal's exponent is an int (the str forms are NaN and infinity).
    return normal if isinstance(exponent, int) and exponent <= 0 else value.quantize(Decimal(1))


def format_usd(nanos: int, places: int = 2) -> str:
    """``"$42.60"``: nano-dollars rounded half-even to ``places`` decimals, for display."""
    value = Decimal(nanos).scaleb(-9).quantize(Decimal(1).scaleb(-places))
    return f"${value:,}"


# --------------------------------------------------------------------------- pricing


# --------------------------------------------------------------------------- totals


@dataclass(slots=True)
class Totals(TokenCounts):
    """Sums of one group (or of everything).

    Attributes:
        calls: billed calls (records) counted once each.
        input, output, cache_read, cache_write: tokens.
        cost_nanos: the cost shown: recorded plus estimated, nano-dollars.
        recorded_nanos: the part taken from recorded costs.
        estimated_nanos: the part priced from the catalogue.
        recorded_calls, estimated_calls, unpriced_calls: how each call was priced
            (a call with no tokens and no cost counts as recorded, at 0).
        unpriced_tokens: tokens of the unpriced calls (not in ``cost_nanos``).
        models: ``provider/model`` names seen.
        unpriced_models: ``provider/model`` names of unpriced calls.
    """

    calls: int = 0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost_nanos: int = 0
    recorded_nanos: int = 0
    estimated_nanos: int = 0
    recorded_calls: int = 0
    estimated_calls: int = 0
    unpriced_calls: int = 0
    unpriced_tokens: int = 0
    models: set[str] = field(default_factory=set)
    unpriced_models: set[str] = field(default_factory=set)

    def merge(self, other: Totals) -> None:
        """Add ``other`` into this total."""
        # Written out (not a loop over names): the dashboard merges every row into several views.
        self.calls += other.calls
        self.input += other.input
        self.output += other.output
        self.cache_read += other.cache_read
        self.cache_write += other.cache_write
        self.cost_nanos += other.cost_nanos
        self.recorded_nanos += other.recorded_nanos
        self.estimated_nanos += other.estimated_nanos
        self.recorded_calls += other.recorded_calls
        self.estimated_calls += other.estimated_calls
        self.unpriced_calls += other.unpriced_calls
        self.unpriced_tokens += other.unpriced_tokens
        self.models |= other.models
        self.unpriced_models |= other.unpriced_models

    def to_dict(self) -> dict[str, Any]:
        """JSON form (docs/usage.md): token counts as integers, money as a USD decimal
        string plus integer nano-dollars."""
        return {
            "calls": self.calls,
            "inputTokens": self.input,
            "outputTokens": self.output,
            "cacheReadTokens": self.cache_read,
            "cacheWriteTokens": self.cache_write,
            "totalTokens": self.total_tokens,
            "cost": str(nanos_to_decimal(self.cost_nanos)),
            "costNanos": self.cost_nanos,
            "recordedCost": str(nanos_to_decimal(self.recorded_nanos)),
            "estimatedCost": str(nanos_to_decimal(self.estimated_nanos)),
            "recordedCalls": self.recorded_calls,
            "estimatedCalls": self.estimated_calls,
            "unpricedCalls": self.unpriced_calls,
            "unpricedTokens": self.unpriced_tokens,
            "models": sorted(self.models),
            "unpricedModels": sorted(self.unpriced_models),
        }


def _model_name(provider: str | None, model: str | None) -> str:
    return f"{provider or _UNKNOWN}/{model or _UNKNOWN}"


def _row_totals(row: UsageRow, mode: str, catalog: Callable[[], PriceCatalog],
                into: Iterable[Totals] = ()) -> Totals | None:
    """Price one store row by the cost mode; add it to each of ``into`` (returns ``None``)
    or, with no ``into``, return it as a new :class:`Totals`."""
    targets = list(into) or [Totals()]
    name = _model_name(row.provider, row.model)
    if row.total_tokens == 0 or (row.recorded and mode != "catalog"):
        # Recorded (a row without tokens is free in every mode: its 0 is true, not missing).
        for t in targets:
            t.calls += row.calls
            t.input += row.input
            t.output += row.output
            t.cache_read += row.cache_read
            t.cache_write += row.cache_write
            t.recorded_calls += row.calls
            t.recorded_nanos += row.cost_nanos
            t.cost_nanos += row.cost_nanos
            t.models.add(name)
        return None if into else targets[0]
    t = Totals(calls=row.calls, input=row.input, output=row.output, cache_read=row.cache_read,
               cache_write=row.cache_write)
    t.models.add(name)
    price = None
    if mode != "recorded" and row.per_call and row.calls:
        n = row.calls
        hour = {"cache_write_1h": row.cache_write_1h // n} if row.cache_write_1h else {}
        one = catalog().price(row.provider, row.model, row.input // n, row.output // n, row.cache_read // n,
                              row.cache_write // n, row.bucket, **hour)
        price = None if one is None else one * n
    if price is None:
        t.unpriced_calls = row.calls
        t.unpriced_tokens = row.total_tokens
        t.unpriced_models.add(name)
    else:
        t.estimated_calls = row.calls
        t.estimated_nanos = t.cost_nanos = price
    if into:
        for target in targets:
            target.merge(t)
        return None
    return t


# --------------------------------------------------------------------------- time


def resolve_timezone(name: str | None) -> tzinfo | None:
    """``None`` for the local zone, else the IANA zone ``name`` (``"UTC"``, ``"Europe/Berlin"``)
    or a fixed offset ``"+01:00"`` / ``"-0530"``.

    Raises:
        ValueError: an unknown zone name.
    """
    if name is None or name == "":
        return None
    match = re.fullmatch(r"([+-])(\d{2}):?(\d{2})", name)
    if match:
        sign = 1 if match.group(1) == "+" else -1
        return timezone(sign * timedelta(hours=int(match.group(2)), minutes=int(match.group(3))))
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {name!r} (use an IANA name such as Europe/Berlin, UTC, "
                         "or an offset such as +01:00)") from exc


def _local(ms: int, tz: tzinfo | None) -> datetime:
    if tz is None:
        return datetime.fromtimestamp(ms / 1000)  # naive local time: the C library applies DST
    return datetime.fromtimestamp(ms / 1000, tz)


def _start_of_day_ms(day: date, tz: tzinfo | None) -> int:
    midnight = datetime(day.year, day.month, day.day)
    if tz is not None:
        midnight = midnight.replace(tzinfo=tz)
    return int(midnight.timestamp() * 1000)  # naive: local time, as mktime reads it


def parse_date_bound(text: str, tz: tzinfo | None, *, end: bool, now_ms: int | None = None) -> int:
    """A ``--since`` / ``--until`` value as Unix milliseconds.

    Accepts ``YYYY-MM-DD``, ``YYYYMMDD`` (ccusage's form) and, for ``--since``,
    ``Nd`` / ``Nw`` (the last N days or weeks including today: ``7d`` starts at
    midnight six days ago). Dates are days of ``tz`` (local when ``None``).

    Args:
        end: ``True`` for ``--until``: the day is included, so the bound is the
            next midnight (exclusive).
        now_ms: "today" for relative values (default: now).

    Raises:
        ValueError: anything else.
    """
    text = text.strip()
    relative = re.fullmatch(r"(\d+)([dw])", text)
    if relative:
        if end:
            raise ValueError(f"--until takes a date (YYYY-MM-DD), not {text!r}")
        count = int(relative.group(1)) * (7 if relative.group(2) == "w" else 1)
        if count < 1:
            raise ValueError(f"{text!r}: the count must be at least 1")
        now = now_ms if now_ms is not None else int(datetime.now(UTC).timestamp() * 1000)
        today = _local(now, tz).date()
        return _start_of_day_ms(today - timedelta(days=count - 1), tz)
    for pattern in ("%Y-%m-%d", "%Y%m%d"):
        try:
            day = datetime.strptime(text, pattern).date()
            break
        except ValueError:
            continue
    else:
        raise ValueError(f"invalid date {text!r}: use YYYY-MM-DD, YYYYMMDD or a count of days such as 7d")
    return _start_of_day_ms(day + timedelta(days=1) if end else day, tz)


# --------------------------------------------------------------------------- reports


@dataclass
class Group:
    """One row of a report.

    Attributes:
        key: the group's value: ``YYYY-MM-DD`` (day; week: its Monday), ``YYYY-MM``
            (month), a session id, ``provider/model``, a provider, or a cwd
            (``"unknown"`` / ``""`` when not recorded).
        totals: its sums.
        cwd: the session's project (``--by session`` only).
        parts: a stacked view's split of ``totals`` (:func:`usage_reports`), else ``None``.
    """

    key: str
    totals: Totals
    cwd: str | None = None
    parts: dict[str, Totals] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{"key": ..., ("cwd": ...,) **totals}`` (and ``"parts": {key: totals}``
        for a stacked view of :func:`usage_reports`)."""
        data: dict[str, Any] = {"key": self.key}
        if self.cwd is not None:
            data["cwd"] = self.cwd
        data.update(self.totals.to_dict())
        if self.parts is not None:
            data["parts"] = {key: totals.to_dict() for key, totals in sorted(self.parts.items())}
        return data


@dataclass
class UsageReport:
    """The result of :func:`usage_report`.

    Attributes:
        by: the grouping (one of :data:`GROUPINGS`).
        groups: rows in order (time ascending; otherwise cost descending, then key).
        totals: everything (equal to the sum of the groups).
        timezone: the zone's name (``"local"`` when none was given).
        since, until: the bounds as given (``None``: open).
        cwd: the project filter, absolute, or ``None``.
        cost_mode: one of :data:`COST_MODES`.
        catalog: the catalogue's name, or ``None`` when none was consulted.
        skipped_sessions: sessions the store could not read (their usage is missing).
    """

    by: str
    groups: list[Group]
    totals: Totals
    timezone: str
    since: str | None
    until: str | None
    cwd: str | None
    cost_mode: str
    catalog: str | None
    skipped_sessions: int = 0

    @property
    def complete(self) -> bool:
        """Whether every call has a price and every session was read."""
        return self.totals.unpriced_calls == 0 and self.skipped_sessions == 0

    def to_dict(self) -> dict[str, Any]:
        """The documented JSON shape (docs/usage.md), ``schemaVersion`` :data:`SCHEMA_VERSION`."""
        t = self.totals
        return {
            "schemaVersion": SCHEMA_VERSION,
            "by": self.by,
            "timezone": self.timezone,
            "since": self.since,
            "until": self.until,
            "cwd": self.cwd,
            "costMode": self.cost_mode,
            "currency": "USD",
            "groups": [group.to_dict() for group in self.groups],
            "totals": t.to_dict(),
            "pricing": {
                "complete": self.complete,
                "recordedCalls": t.recorded_calls,
                "estimatedCalls": t.estimated_calls,
                "unpricedCalls": t.unpriced_calls,
                "unpricedTokens": t.unpriced_tokens,
                "unpricedModels": sorted(t.unpriced_models),
                "skippedSessions": self.skipped_sessions,
                "catalog": self.catalog,
            },
        }


class _LazyCatalog:
    """Creates the catalogue only when a row needs one, and remembers whether it did."""

    def __init__(self, given: PriceCatalog | None) -> None:
        self.given = given
        self.used: PriceCatalog | None = None

    def __call__(self) -> PriceCatalog:
        if self.used is None:
            self.used = self.given if self.given is not None else default_catalog()
        return self.used

    def finish(self) -> None:
        """Keep what the default catalogue worked out in its cache file (usage/prices.py)."""
        if isinstance(self.used, GenaiPricesCatalog):
            self.used.flush()


def _check_mode(cost: str) -> None:
    if cost not in COST_MODES:
        raise ValueError(f"unknown cost mode {cost!r}: expected one of {', '.join(COST_MODES)}")


def usage_report(store: SessionStore, *, by: str = "day", since: str | None = None, until: str | None = None,
                 cwd: str | None = None, tz: str | None = None, cost: str = "auto",
                 catalog: PriceCatalog | None = None, now_ms: int | None = None,
                 hosts: Iterable[str] = (), users: Iterable[str] = (),
                 agents: Iterable[str] = ()) -> UsageReport:
    """Tokens and cost of every billed call in ``store``, each counted once, grouped.

    ``by="host"``/``"user"`` groups each call by the origin of the session that owns it
    (docs/sync.md, "Provenance"; ``unknown`` for a session without one); ``hosts`` and
    ``users`` keep only the calls owned by sessions first stored from there
    (:func:`sessiontree.stores.origin.matching_sessions`); ``agents`` keeps only the
    calls owned by sessions those agents wrote (``pi``, ``claude-code``, ``codex``: the
    listing's ``agent``, as ``--by agent`` groups them).

    Args:
        store: any store.
        by: one of :data:`GROUPINGS`.
        since, until: ``YYYY-MM-DD`` / ``YYYYMMDD`` (``until`` inclusive), ``since`` also ``Nd``/``Nw``.
        cwd: only calls owned by sessions of this project directory.
        tz: day boundaries' zone (IANA name or ``+HH:MM``); ``None``: local.
        cost: one of :data:`COST_MODES`.
        catalog: prices for estimates (default :class:`GenaiPricesCatalog`).
        now_ms: "now" for relative ``since`` values (tests).

    Raises:
        ValueError: an unknown grouping, cost mode, zone or date.
        StorageError: the store could not be read.
    """
    if by not in GROUPINGS:
        raise ValueError(f"unknown grouping {by!r}: expected one of {', '.join(GROUPINGS)}")
    return usage_reports(store, [(by, None)], since=since, until=until, cwd=cwd, tz=tz, cost=cost,
                         catalog=catalog, now_ms=now_ms, hosts=hosts, users=users, agents=agents)[0]


#: Groupings of :func:`usage_reports` beyond :data:`GROUPINGS`: ``weekhour`` is the day of the
#: week and the hour (``"0 09"``: Monday 09:00-10:00 in the report's zone), the viewer's heatmap.
VIEW_GROUPINGS = (*GROUPINGS, "weekhour")
#: What a view's groups may be split by (:attr:`Group.parts`).
STACKINGS = ("model", "provider", "project", "agent", "host", "user", "session")

_TIME_GROUPINGS = frozenset({"day", "week", "month", "weekhour"})
_SESSION_GROUPINGS = frozenset({"session", "project", "agent", "host", "user"})
_PER_SESSION_VIEWS = frozenset({"project", "agent", "host", "user"})
#: Stands in for a session's sums when the session view holds them.
_NO_TOTALS = Totals()


def usage_reports(store: SessionStore, views: Sequence[tuple[str, str | None]], *, since: str | None = None,
                  until: str | None = None, cwd: str | None = None, tz: str | None = None, cost: str = "auto",
                  catalog: PriceCatalog | None = None, now_ms: int | None = None, hosts: Iterable[str] = (),
                  users: Iterable[str] = (), agents: Iterable[str] = (),
                  agent_of: Mapping[str, str] | None = None) -> list[UsageReport]:
    """Several groupings of the same calls from one read of the store: one
    :class:`UsageReport` per ``(by, stack)`` of ``views``, in order, each exactly what
    :func:`usage_report` gives for ``by`` and the same filters (the rows are read once,
    at the finest grouping any view needs, and every row is priced the same way in every
    view, so each view's totals are the same sums; docs/usage.md).

    Args:
        views: ``(by, stack)``: ``by`` one of :data:`VIEW_GROUPINGS`; ``stack`` ``None`` or
            one of :data:`STACKINGS`: each group's :attr:`Group.parts` then splits it by that.
        agent_of: session id -> agent (the listing's ``agent``) when the caller has it (the
            viewer keeps it while the store is unchanged); else the store is listed for it.
        The rest: as :func:`usage_report`.

    Raises:
        ValueError: an unknown grouping, stacking, cost mode, zone or date.
        StorageError: the store could not be read.
    """
    for by, stack in views:
        if by not in VIEW_GROUPINGS:
            raise ValueError(f"unknown grouping {by!r}: expected one of {', '.join(VIEW_GROUPINGS)}")
        if stack is not None and stack not in STACKINGS:
            raise ValueError(f"unknown stacking {stack!r}: expected one of {', '.join(STACKINGS)}")
    _check_mode(cost)
    zone = resolve_timezone(tz)
    since_ms = parse_date_bound(since, zone, end=False, now_ms=now_ms) if since else None
    until_ms = parse_date_bound(until, zone, end=True) if until else None
    resolved_cwd = os.path.abspath(cwd) if cwd is not None else None
    hosts, users, wanted_agents = tuple(hosts), tuple(users), frozenset(agents)
    dims = {by for by, _ in views} | {stack for _, stack in views if stack is not None}
    by_origin = bool(dims & {"host", "user"}) or bool(hosts or users)
    query = UsageQuery(since_ms=since_ms, until_ms=until_ms, cwd=resolved_cwd,
                       per_session=bool(dims & _SESSION_GROUPINGS) or by_origin or bool(wanted_agents),
                       price_all=cost == "catalog", by_time=bool(dims & _TIME_GROUPINGS))
    rows: Iterable[UsageRow] = store.usage(query)
    skipped = getattr(rows, "skipped", 0)
    maps: dict[str, dict[str, str]] = {}
    if "agent" in dims or wanted_agents:
        # The agent is a header field: one listing (headers only, no entries) maps each owner.
        if agent_of is None:
            agent_of = {info.id: info.agent for info in store.list_sessions(include_internal=True)}
        if wanted_agents:
            rows = [row for row in rows if agent_of.get(row.session_id or "", "pi") in wanted_agents]
        maps["agent"] = dict(agent_of)
    if by_origin:
        # Origins are kept beside the sessions: one read maps each owner.
        origins = store.provenances()
        maps["host"] = {sid: origin.host or _UNKNOWN for sid, origin in origins.items()}
        maps["user"] = {sid: origin.user or _UNKNOWN for sid, origin in origins.items()}
        if hosts or users:
            keep = matching_sessions(origins, hosts, users)
            rows = [row for row in rows if row.session_id in keep]
    lazy = _LazyCatalog(catalog)
    day_cache: dict[int, Any] = {}
    built: list[dict[str, Group]] = [{} for _ in views]
    # Each row is priced once and added once per view; every sum that can be taken from sums is
    # (the totals, a stacked group from its parts, a per-session view from the sessions' sums):
    # the page sums ~19,000 rows of 10,000 sessions several ways (docs/viewer.md, "Usage dashboard").
    derived = [i for i, (by, stack) in enumerate(views) if stack is None and by in _PER_SESSION_VIEWS]
    direct = [(i, views[i][0], views[i][1], built[i]) for i in range(len(views)) if i not in derived]
    sessions_view = next((groups for _i, by, stack, groups in direct if by == "session" and stack is None), None)
    per_session: dict[str | None, tuple[Totals, UsageRow]] = {}
    for row in rows:
        # One pricing per row, added to every view: the views agree with each other to the nano-dollar.
        priced = _row_totals(row, cost, lazy)
        assert priced is not None
        if derived:
            held = per_session.get(row.session_id)
            if held is None:
                held = per_session[row.session_id] = (
                    Totals() if sessions_view is None else _NO_TOTALS, row)
            if sessions_view is None:
                held[0].merge(priced)
        for _i, by, stack, groups in direct:
            key = _view_key(by, row, zone, day_cache, maps)
            group = groups.get(key)
            if group is None:
                group = groups[key] = Group(key, Totals(), row.cwd if by == "session" else None)
            if stack is None:
                group.totals.merge(priced)
                continue
            if group.parts is None:
                group.parts = {}
            part = _view_key(stack, row, zone, day_cache, maps)
            totals_of_part = group.parts.get(part)
            if totals_of_part is None:
                totals_of_part = group.parts[part] = Totals()
            totals_of_part.merge(priced)
    for _i, _by, stack, groups in direct:
        if stack is not None:
            for group in groups.values():
                for part_totals in (group.parts or {}).values():
                    group.totals.merge(part_totals)
    for summed, row in per_session.values():
        if sessions_view is not None:
            summed = sessions_view[row.session_id or ""].totals
        for i in derived:
            key = _view_key(views[i][0], row, zone, day_cache, maps)
            group = built[i].get(key)
            if group is None:
                group = built[i][key] = Group(key, Totals())
            group.totals.merge(summed)
    # Every view partitions the same rows: the totals are the sum of the smallest one's groups.
    grand = Totals()
    for group in min(built, key=len).values():
        grand.merge(group.totals)
    lazy.finish()
    name = lazy.used.name if lazy.used is not None else None
    reports = []
    for (by, _stack), groups in zip(views, built, strict=True):
        totals = Totals()
        totals.merge(grand)  # each report its own copy
        ordered = list(groups.values())
        if by in _TIME_GROUPINGS:
            ordered.sort(key=lambda g: g.key)
        else:
            ordered.sort(key=lambda g: (-g.totals.cost_nanos, -g.totals.total_tokens, g.key))
        reports.append(UsageReport(by, ordered, totals, tz or "local", since, until, resolved_cwd, cost, name,
                                   skipped))
    return reports


def _view_key(by: str, row: UsageRow, zone: tzinfo | None, day_cache: dict[Any, Any],
              maps: dict[str, dict[str, str]]) -> str:
    if by in ("agent", "host", "user"):
        return maps[by].get(row.session_id or "", "pi" if by == "agent" else _UNKNOWN)
    if by == "session":
        return row.session_id or ""
    if by == "project":
        return row.cwd or ""
    # Time and model keys repeat across rows: each is worked out once per bucket or model.
    memo = (by, row.bucket) if by in _TIME_GROUPINGS else (by, row.provider, row.model)
    key = day_cache.get(memo)
    if key is None:
        if by == "weekhour":
            try:
                local = _local(row.bucket, zone)
                key = f"{local.weekday()} {local.hour:02d}"
            except (OverflowError, ValueError, OSError):
                key = _UNKNOWN
        else:
            key = _group_key(by, row, zone, day_cache)
        day_cache[memo] = key
    return str(key)


def _group_key(by: str, row: UsageRow, zone: tzinfo | None, day_cache: dict[int, date | None]) -> str:
    if by in ("day", "week", "month"):
        if row.bucket in day_cache:
            day = day_cache[row.bucket]
        else:
            try:
                day = _local(row.bucket, zone).date()
            except (OverflowError, ValueError, OSError):
                day = None  # a day outside years 1-9999 in this zone: shown as unknown
            day_cache[row.bucket] = day
        if day is None:
            return _UNKNOWN
        if by == "day":
            return day.isoformat()
        if by == "week":
            return (day - timedelta(days=day.weekday())).isoformat()  # ISO weeks start on Monday
        return f"{day.year:04d}-{day.month:02d}"
    if by == "session":
        return row.session_id or ""
    if by == "model":
        return _model_name(row.provider, row.model)
    if by == "provider":
        return row.provider or _UNKNOWN
    return row.cwd or ""


@dataclass
class SessionUsage:
    """Usage of one session (``show``): every billed record the session holds.

    Attributes:
        session_id: the session.
        totals: all its records (what its transcript records).
        copied: the part also held by an earlier session (a fork's or import's
            copied history): not billed again, so ``stats`` counts it there.
        by_model: ``provider/model`` -> totals of all its records.
        cost_mode, catalog: as in :class:`UsageReport`.
    """

    session_id: str
    totals: Totals
    copied: Totals
    by_model: dict[str, Totals]
    cost_mode: str
    catalog: str | None

    @property
    def billed(self) -> Totals:
        """``totals`` minus ``copied``: what this session itself adds to the store's bill."""
        t = Totals()
        t.merge(self.totals)
        for name in ("calls", "input", "output", "cache_read", "cache_write", "cost_nanos", "recorded_nanos",
                     "estimated_nanos", "recorded_calls", "estimated_calls", "unpriced_calls", "unpriced_tokens"):
            setattr(t, name, getattr(t, name) - getattr(self.copied, name))
        return t

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{"schemaVersion", "sessionId", "costMode", "catalog", "totals",
        "copied", "billed", "models": {name: totals}}``."""
        return {"schemaVersion": SCHEMA_VERSION, "sessionId": self.session_id, "costMode": self.cost_mode,
                "currency": "USD", "catalog": self.catalog, "totals": self.totals.to_dict(),
                "copied": self.copied.to_dict(), "billed": self.billed.to_dict(),
                "models": {name: t.to_dict() for name, t in sorted(self.by_model.items())}}


def session_usage(store: SessionStore, session_id: str, *, cost: str = "auto",
                  catalog: PriceCatalog | None = None) -> SessionUsage:
    """Tokens and cost of one session's records (``sessiontree show``).

    Raises:
        ValueError: an unknown cost mode.
        StorageError: the store could not be read.
    """
    _check_mode(cost)
    rows = store.usage(UsageQuery(session_id=session_id, price_all=cost == "catalog", by_time=False))
    lazy = _LazyCatalog(catalog)
    totals, copied = Totals(), Totals()
    by_model: dict[str, Totals] = {}
    for row in rows:
        into = [totals, by_model.setdefault(_model_name(row.provider, row.model), Totals())]
        if row.copied:
            into.append(copied)
        _row_totals(row, cost, lazy, into)
    lazy.finish()
    return SessionUsage(session_id, totals, copied, by_model, cost,
                        lazy.used.name if lazy.used is not None else None)


def price_records(records: Iterable[UsageRecord], *, cost: str = "auto",
                  catalog: PriceCatalog | None = None) -> tuple[Totals, str | None]:
    """Tokens and cost of ``records`` as given, each counted once, priced by the same
    rules as :func:`usage_report` (the caller has already decided which records belong).

    Returns:
        The totals and the name of the catalogue used (``None`` when none was needed).

    Raises:
        ValueError: an unknown cost mode.
    """
    _check_mode(cost)
    return price_rows(rows_from_records(records, rows_query(cost)), cost=cost, catalog=catalog)


def rows_query(cost: str) -> UsageQuery:
    """The grouping :func:`price_rows` prices by for a cost mode: no time buckets where a
    recorded cost is used, every call apart by its tokens for ``catalog``."""
    return UsageQuery(price_all=cost == "catalog", by_time=False)


def price_rows(rows: Iterable[UsageRow], *, cost: str = "auto",
               catalog: PriceCatalog | None = None) -> tuple[Totals, str | None]:
    """:func:`price_records` for records already summed into rows grouped by
    :func:`rows_query` of the same ``cost`` (e.g.
    :func:`~sessiontree.core.usagerecords.rows_from_entries`).

    Returns:
        The totals and the name of the catalogue used (``None`` when none was needed).

    Raises:
        ValueError: an unknown cost mode.
    """
    _check_mode(cost)
    lazy = _LazyCatalog(catalog)
    totals = Totals()
    for row in rows:
        _row_totals(row, cost, lazy, (totals,))
    lazy.finish()
    return totals, lazy.used.name if lazy.used is not None else None


def session_costs(store: SessionStore, *, cost: str = "auto",
                  catalog: PriceCatalog | None = None) -> dict[str, Totals]:
    """Per-session totals of the calls each session owns (``list --cost``), the same
    numbers as ``stats --by session``: a fork's copied history stays with its source.

    Returns:
        ``{session_id: totals}`` for sessions owning at least one call.

    Raises:
        ValueError, StorageError: as :func:`usage_report`.
    """
    report = usage_report(store, by="session", cost=cost, catalog=catalog)
    return {group.key: group.totals for group in report.groups}


def session_stats(store: SessionStore, session_ids: Sequence[str], *,
                  marks: bool = False) -> dict[str, dict[str, Any]]:
    """Per-session models, tokens and cost for the web viewer's session list: the
    numbers of :func:`session_costs` (calls each session owns; a fork's copied history
    stays with its source), for the sessions in ``session_ids``.

    Args:
        marks: also say how the cost is to be shown: ``"estimated"`` (some cost is from
            the catalogue: ``~``) and ``"unpriced"`` (some calls have no price: ``+?``),
            as the command line marks costs (docs/usage.md).

    Returns:
        ``{session id: {"models": [provider/model, ...], "tokens": int, "cost": Decimal
        (USD)[, "estimated": bool, "unpriced": bool]}}`` for the given sessions owning at
        least one call.

    Raises:
        StorageError: the store could not be read.
    """
    wanted = set(session_ids)
    out: dict[str, dict[str, Any]] = {}
    for sid, totals in session_costs(store).items():
        if sid in wanted:
            out[sid] = {"models": sorted(totals.models), "tokens": totals.total_tokens,
                        "cost": nanos_to_decimal(totals.cost_nanos)}
            if marks:
                out[sid].update(estimated=bool(totals.estimated_calls), unpriced=bool(totals.unpriced_calls))
    return out
