"""Usage and cost accounting across sessions: what ``sessiontree stats`` prints
(docs/usage.md).

Layering: stores answer :meth:`~sessiontree.stores.base.SessionStore.usage`
with de-duplicated sums (the rule is :mod:`sessiontree.core.usage`); this
module groups them by day, week, month (in a time zone), session, model, provider,
project, agent, host or user, and builds the report and its JSON form. Split by
concern (issue 40), each re-exported here: :mod:`.totals` (the sums and how a row is
priced), :mod:`.prices` (the catalogue and its cache), :mod:`.days` (zones and date
bounds), :mod:`.money` (nano-dollars shown), :mod:`.sessions` (one session's usage).

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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta, tzinfo
from typing import Any, Literal

from sessiontree.core.usage import UsageQuery, UsageRow
from sessiontree.stores.base import SessionStore
from sessiontree.stores.traits import SessionAgents
from sessiontree.usage.choices import COST_MODES, GROUPINGS
from sessiontree.usage.days import local_time, parse_date_bound, resolve_timezone
from sessiontree.usage.money import format_usd, nanos_to_decimal
from sessiontree.usage.prices import GenaiPricesCatalog, PriceCatalog
from sessiontree.usage.sessions import SessionUsage, session_usage
from sessiontree.usage.totals import (
    SCHEMA_VERSION,
    UNKNOWN,
    LazyCatalog,
    Totals,
    check_mode,
    model_name,
    price_records,
    price_rows,
    row_totals,
    rows_query,
)

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


CostMode = Literal["auto", "recorded", "catalog"]
Grouping = Literal["day", "week", "month", "session", "model", "provider", "project", "agent", "host", "user"]


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
    _check_views(views)
    check_mode(cost)
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
    rows, maps = _owner_maps(store, rows, dims, by_origin, hosts, users, wanted_agents, agent_of)
    lazy = LazyCatalog(catalog)
    sums = _Sums(views, zone, maps)
    for row in rows:
        # One pricing per row, added to every view: the views agree with each other to the nano-dollar.
        priced = row_totals(row, cost, lazy)
        assert priced is not None
        sums.add(row, priced)
    built = sums.finish()
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


def _check_views(views: Sequence[tuple[str, str | None]]) -> None:
    for by, stack in views:
        if by not in VIEW_GROUPINGS:
            raise ValueError(f"unknown grouping {by!r}: expected one of {', '.join(VIEW_GROUPINGS)}")
        if stack is not None and stack not in STACKINGS:
            raise ValueError(f"unknown stacking {stack!r}: expected one of {', '.join(STACKINGS)}")


def _owner_maps(store: SessionStore, rows: Iterable[UsageRow], dims: set[str], by_origin: bool,
                hosts: tuple[str, ...], users: tuple[str, ...], wanted_agents: frozenset[str],
                agent_of: Mapping[str, str] | None) -> tuple[Iterable[UsageRow], dict[str, dict[str, str]]]:
    """The rows kept by the agent, host and user filters, and ``{"agent" | "host" | "user":
    {session id: value}}`` for the groupings and filters that need them."""
    maps: dict[str, dict[str, str]] = {}
    if "agent" in dims or wanted_agents:
        # The agent is a header field: the store's map of it (SQLite), else one listing
        # (headers only, no entries) maps each owner.
        if agent_of is None and isinstance(store, SessionAgents):
            agent_of = store.session_agents()
        elif agent_of is None:
            agent_of = {info.id: info.agent for info in store.list_sessions(include_internal=True)}
        if wanted_agents:
            rows = [row for row in rows if agent_of.get(row.session_id or "", "pi") in wanted_agents]
        maps["agent"] = dict(agent_of)
    if by_origin:
        # Origins are kept beside the sessions: one read maps each owner.
        origins = store.provenances()
        maps["host"] = {sid: origin.host or UNKNOWN for sid, origin in origins.items()}
        maps["user"] = {sid: origin.user or UNKNOWN for sid, origin in origins.items()}
        if hosts or users:
            from sessiontree.stores.origin import matching_sessions

            keep = matching_sessions(origins, hosts, users)
            rows = [row for row in rows if row.session_id in keep]
    return rows, maps


class _Sums:
    """The groups of every view of :func:`usage_reports`, summed row by row.

    Each row is priced once and added once per view; every sum that can be taken from sums
    is (the totals, a stacked group from its parts, a per-session view from the sessions'
    sums): the dashboard sums ~19,000 rows of 10,000 sessions several ways (docs/viewer.md,
    "Usage dashboard").
    """

    def __init__(self, views: Sequence[tuple[str, str | None]], zone: tzinfo | None,
                 maps: dict[str, dict[str, str]]) -> None:
        self.views, self.zone, self.maps = views, zone, maps
        self.day_cache: dict[Any, Any] = {}
        self.built: list[dict[str, Group]] = [{} for _ in views]
        #: Views summed from each session's sums (project, agent, host, user) ...
        self.derived = [i for i, (by, stack) in enumerate(views) if stack is None and by in _PER_SESSION_VIEWS]
        #: ... and the others, summed from the rows.
        self.direct = [(views[i][0], views[i][1], self.built[i]) for i in range(len(views)) if i not in self.derived]
        self.sessions_view = next((groups for by, stack, groups in self.direct if by == "session" and stack is None),
                                  None)
        self.per_session: dict[str | None, tuple[Totals, UsageRow]] = {}

    def key(self, by: str, row: UsageRow) -> str:
        """The group of ``row`` in a ``by`` view."""
        return _view_key(by, row, self.zone, self.day_cache, self.maps)

    def add(self, row: UsageRow, priced: Totals) -> None:
        """Add one priced row to every view."""
        if self.derived:
            held = self.per_session.get(row.session_id)
            if held is None:
                held = self.per_session[row.session_id] = (
                    Totals() if self.sessions_view is None else _NO_TOTALS, row)
            if self.sessions_view is None:
                held[0].merge(priced)
        for by, stack, groups in self.direct:
            key = self.key(by, row)
            group = groups.get(key)
            if group is None:
                group = groups[key] = Group(key, Totals(), row.cwd if by == "session" else None)
            if stack is None:
                group.totals.merge(priced)
                continue
            if group.parts is None:
                group.parts = {}
            part = self.key(stack, row)
            totals_of_part = group.parts.get(part)
            if totals_of_part is None:
                totals_of_part = group.parts[part] = Totals()
            totals_of_part.merge(priced)

    def finish(self) -> list[dict[str, Group]]:
        """Every view's groups, by key, in the order of the views (stacked groups summed from
        their parts, per-session views from the sessions' sums)."""
        for _by, stack, groups in self.direct:
            if stack is not None:
                for group in groups.values():
                    for part_totals in (group.parts or {}).values():
                        group.totals.merge(part_totals)
        for summed, row in self.per_session.values():
            if self.sessions_view is not None:
                summed = self.sessions_view[row.session_id or ""].totals
            for i in self.derived:
                key = self.key(self.views[i][0], row)
                found = self.built[i].get(key)
                if found is None:
                    found = self.built[i][key] = Group(key, Totals())
                found.totals.merge(summed)
        return self.built


def _view_key(by: str, row: UsageRow, zone: tzinfo | None, day_cache: dict[Any, Any],
              maps: dict[str, dict[str, str]]) -> str:
    if by in ("agent", "host", "user"):
        return maps[by].get(row.session_id or "", "pi" if by == "agent" else UNKNOWN)
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
                local = local_time(row.bucket, zone)
                key = f"{local.weekday()} {local.hour:02d}"
            except (OverflowError, ValueError, OSError):
                key = UNKNOWN
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
                day = local_time(row.bucket, zone).date()
            except (OverflowError, ValueError, OSError):
                day = None  # a day outside years 1-9999 in this zone: shown as unknown
            day_cache[row.bucket] = day
        if day is None:
            return UNKNOWN
        if by == "day":
            return day.isoformat()
        if by == "week":
            return (day - timedelta(days=day.weekday())).isoformat()  # ISO weeks start on Monday
        return f"{day.year:04d}-{day.month:02d}"
    if by == "session":
        return row.session_id or ""
    if by == "model":
        return model_name(row.provider, row.model)
    if by == "provider":
        return row.provider or UNKNOWN
    return row.cwd or ""


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
