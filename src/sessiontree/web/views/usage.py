"""The usage dashboard (``/usage``): what it shows, built from the usage ledger (docs/viewer.md,
"Usage dashboard").

Every number comes from :func:`sessiontree.usage.report.usage_reports` (one read of
the store's usage rows, grouped several ways), so each table equals ``sessiontree stats
--json`` for the same filters, group for group, to the nano-dollar. Charts are SVG
drawn here, on the server: no script, no network, no library. Each chart has its
numbers as a table (for screen readers and anyone who wants them) and as CSV
(:func:`csv_text`).

Filters (the query string, as the session list takes them): ``since`` and ``until``
(``YYYY-MM-DD``, or ``since`` as ``Nd``; default the last 30 days), ``project`` (a
cwd), ``host``, ``user``, ``agent``, ``tz`` (IANA name or offset; default the
server's local zone); the views: ``period`` (day, week, month), ``stack`` (model,
agent, project), ``metric`` (cost, tokens), ``theme`` (auto, light, dark).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from sessiontree.stores.base import SessionStore
from sessiontree.usage.report import Group, Totals, UsageReport, format_usd, nanos_to_decimal, usage_reports
from sessiontree.usage.totals import cost_text

__all__ = [
    "CSV_TABLES",
    "UsagePage",
    "UsageParams",
    "agents_of",
    "build_usage_page",
    "csv_text",
    "money",
    "parse_usage_params",
]

PERIODS = ("day", "week", "month")
STACKS = ("model", "agent", "project")
METRICS = ("cost", "tokens")
THEMES = ("auto", "light", "dark")
#: Series of a stacked chart: the largest ones, the rest summed as "other".
MAX_SERIES = 8
#: Rows of the top-sessions and top-projects tables.
TOP_ROWS = 10
#: The tables a CSV can be downloaded of (``/usage.csv?table=NAME``).
CSV_TABLES = ("period", "weekhour", "session", "project", "agent", "model", "host", "user")
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


@dataclass
class UsageParams:
    """The dashboard's query string, checked (unknown values fall back to the defaults)."""

    since: str | None = "30d"
    until: str | None = None
    project: str = ""
    host: str = ""
    user: str = ""
    agent: str = ""
    tz: str | None = None
    period: str = "day"
    stack: str = "model"
    metric: str = "cost"
    theme: str = "auto"
    insights: bool = False

    def filters(self) -> dict[str, Any]:
        """The keyword filters of :func:`~sessiontree.usage.report.usage_reports` (as ``stats`` takes them)."""
        return {"since": self.since, "until": self.until, "cwd": self.project or None, "tz": self.tz,
                "hosts": (self.host,) if self.host else (), "users": (self.user,) if self.user else (),
                "agents": (self.agent,) if self.agent else ()}

    def query(self, **changes: Any) -> str:
        """The query string of these parameters with ``changes`` (defaults left out)."""
        values = {"since": self.since or "", "until": self.until or "", "project": self.project, "host": self.host,
                  "user": self.user, "agent": self.agent, "tz": self.tz or "", "period": self.period,
                  "stack": self.stack, "metric": self.metric, "theme": self.theme}
        values.update(changes)
        defaults = {"period": "day", "stack": "model", "metric": "cost", "theme": "auto"}
        return urlencode({k: v for k, v in values.items() if v and defaults.get(k) != v})


def parse_usage_params(get: Callable[[str], str | None]) -> UsageParams:
    """The parameters of a request (``get``: the query string's lookup)."""

    def choice(name: str, options: Sequence[str], default: str) -> str:
        value = get(name)
        return value if value is not None and value in options else default

    since = get("since")
    return UsageParams(since=(since if since is not None else "30d") or None, until=get("until") or None,
                       project=get("project") or "", host=get("host") or "", user=get("user") or "",
                       agent=get("agent") or "", tz=get("tz") or None, period=choice("period", PERIODS, "day"),
                       stack=choice("stack", STACKS, "model"), metric=choice("metric", METRICS, "cost"),
                       theme=choice("theme", THEMES, "auto"), insights=get("insights") in ("1", "true", "on"))


def money(totals: Totals) -> str:
    """A cost as the CLI shows it: ``$42.60``, ``~`` when any part is estimated, ``+?`` when
    unpriced calls are left out (docs/usage.md)."""
    return cost_text(totals)


@dataclass
class Bar:
    """One bar of the stacked chart: its segments from the bottom up."""

    key: str
    label: str
    x: float
    width: float
    segments: list[tuple[int, float, float, str]]  # (series index, y, height, title)
    title: str


@dataclass
class StackedChart:
    """The per-period chart, laid out in SVG units (:data:`CHART_W` by :data:`CHART_H`)."""

    series: list[str]
    bars: list[Bar]
    ticks: list[tuple[float, str]]  # (y, label)
    width: int = 0
    height: int = 0


@dataclass
class Cell:
    """One cell of the weekday-by-hour heatmap."""

    day: int
    hour: int
    level: int  # 0 (nothing) .. 9
    title: str


@dataclass
class UsagePage:
    """Everything the dashboard shows."""

    params: UsageParams
    message: str | None = None
    totals: Totals = field(default_factory=Totals)
    reports: dict[str, UsageReport] = field(default_factory=dict)
    chart: StackedChart | None = None
    heatmap: list[Cell] = field(default_factory=list)
    budgets: list[Any] = field(default_factory=list)
    budget_problem: str | None = None
    projects: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    users: list[str] = field(default_factory=list)
    agents: list[str] = field(default_factory=list)
    has_origins: bool = False
    catalog: str | None = None
    skipped: int = 0
    insights: dict[str, Any] | None = None


CHART_W, CHART_H, CHART_LEFT, CHART_BOTTOM = 900, 260, 70, 40


def _value(totals: Totals, metric: str) -> int:
    return totals.cost_nanos if metric == "cost" else totals.total_tokens


def _label(value: int, metric: str) -> str:
    if metric == "cost":
        return format_usd(value)
    return f"{value:,}"


def _nice_top(top: int) -> int:
    """The smallest 1, 2 or 5 times a power of ten at or above ``top`` (at least 1)."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            if step * factor >= top:
                return step * factor
        step *= 10


def _stacked(report: UsageReport, metric: str) -> StackedChart:
    size: dict[str, int] = {}
    for group in report.groups:
        for key, part in (group.parts or {}).items():
            size[key] = size.get(key, 0) + _value(part, metric)
    ranked = sorted(size, key=lambda k: (-size[k], k))
    series = ranked[:MAX_SERIES] + (["other"] if len(ranked) > MAX_SERIES else [])
    index = {key: (i if i < MAX_SERIES else MAX_SERIES) for i, key in enumerate(ranked)}
    top = _nice_top(max((_value(g.totals, metric) for g in report.groups), default=1) or 1)
    inner_w, inner_h = CHART_W - CHART_LEFT - 10, CHART_H - CHART_BOTTOM - 10
    count = max(1, len(report.groups))
    slot = inner_w / count
    bars = []
    for n, group in enumerate(report.groups):
        per_series: dict[int, int] = {}
        for key, part in (group.parts or {}).items():
            per_series[index[key]] = per_series.get(index[key], 0) + _value(part, metric)
        y = 10.0 + inner_h
        segments = []
        for s in sorted(per_series):
            height = inner_h * per_series[s] / top
            y -= height
            name = series[s] if s < len(series) else "other"
            segments.append((s, round(y, 2), round(height, 2), f"{group.key} · {name}: {_label(per_series[s], metric)}"))
        label = group.key[5:] if len(group.key) == 10 else group.key  # 2026-12-06 -> 12-06
        bars.append(Bar(group.key, label, round(CHART_LEFT + n * slot + slot * 0.1, 2), round(slot * 0.8, 2),
                        segments, f"{group.key}: {money(group.totals) if metric == 'cost' else _label(_value(group.totals, metric), metric)}"))
    ticks = [(round(10 + inner_h - inner_h * i / 4, 2), _label(top * i // 4, metric)) for i in range(5)]
    return StackedChart(series, bars, ticks, CHART_W, CHART_H)


def _heatmap(report: UsageReport) -> list[Cell]:
    by_key = {g.key: g.totals for g in report.groups}
    top = max((t.cost_nanos for t in by_key.values()), default=0)
    calls_top = max((t.calls for t in by_key.values()), default=0)
    cells = []
    for day in range(7):
        for hour in range(24):
            totals = by_key.get(f"{day} {hour:02d}")
            if totals is None or not totals.calls:
                cells.append(Cell(day, hour, 0, f"{WEEKDAYS[day]} {hour:02d}:00: no calls"))
                continue
            # By cost; a store without prices still shows where the calls were.
            share = totals.cost_nanos / top if top else totals.calls / calls_top
            cells.append(Cell(day, hour, max(1, min(9, round(share * 9))),
                              f"{WEEKDAYS[day]} {hour:02d}:00: {money(totals)}, {totals.calls:,} calls"))
    return cells


def build_usage_page(store: SessionStore, params: UsageParams, infos: Sequence[Any] = (),
                     budgets: Callable[[], list[Any]] | None = None) -> UsagePage:
    """The dashboard for ``params`` (a bad date or zone gives a page with ``message`` set).

    Args:
        store: any store.
        params: the checked query string.
        infos: the listing rows (for the project and agent filters).
        budgets: returns the budgets' statuses for the page (the config file's), or ``None``.
    """
    page = UsagePage(params)
    page.projects = sorted({i.cwd for i in infos if getattr(i, "cwd", None)})
    page.agents = sorted({i.agent for i in infos if getattr(i, "agent", None)})
    origins = store.provenances()
    page.has_origins = bool(origins)
    page.hosts = sorted({o.host for o in origins.values() if o.host})
    page.users = sorted({o.user for o in origins.values() if o.user})
    views: list[tuple[str, str | None]] = [(params.period, params.stack), ("weekhour", None), ("session", None),
                                           ("project", None), ("agent", None), ("model", None)]
    if page.has_origins:
        views += [("host", None), ("user", None)]
    try:
        reports = usage_reports(store, views, **params.filters(), agent_of=agents_of(infos))
    except ValueError as exc:
        page.message = str(exc)
        return page
    names = ["period", "weekhour", "session", "project", "agent", "model", "host", "user"]
    page.reports = dict(zip(names, reports, strict=False))
    first = reports[0]
    page.totals, page.catalog, page.skipped = first.totals, first.catalog, first.skipped_sessions
    page.chart = _stacked(first, params.metric)
    page.heatmap = _heatmap(page.reports["weekhour"])
    if budgets is not None:
        try:
            page.budgets = budgets()
        except ValueError as exc:  # an invalid config file: said on the page, the rest still shown
            page.budget_problem = str(exc)
    return page


def agents_of(infos: Sequence[Any]) -> dict[str, str]:
    """Session id -> agent of the listing rows (what ``usage_reports`` groups ``agent`` by)."""
    return {info.id: info.agent for info in infos}


_CSV_HEAD = ["calls", "inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "totalTokens", "cost",
             "estimatedCalls", "unpricedCalls"]


def _csv_cells(totals: Totals) -> list[Any]:
    return [totals.calls, totals.input, totals.output, totals.cache_read, totals.cache_write, totals.total_tokens,
            str(nanos_to_decimal(totals.cost_nanos)), totals.estimated_calls, totals.unpriced_calls]


def csv_text(report: UsageReport, *, stacked: bool = False) -> str:
    """One table as CSV: ``key`` (and ``part`` when ``stacked``), then the totals' columns;
    costs as exact USD decimals (the JSON's ``cost``), with a ``total`` row last.

    Cells that a spreadsheet would run as a formula (``=``, ``+``, ``-``, ``@`` first) are
    prefixed with ``'``: keys come from sessions (project paths, model names)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(["key", *(["part"] if stacked else []), *_CSV_HEAD])
    for group in report.groups:
        if stacked and group.parts:
            for part, totals in sorted(group.parts.items()):
                writer.writerow([_cell(group.key), _cell(part), *_csv_cells(totals)])
        else:
            writer.writerow([_cell(group.key), *([""] if stacked else []), *_csv_cells(group.totals)])
    writer.writerow(["total", *([""] if stacked else []), *_csv_cells(report.totals)])
    return out.getvalue()


def _cell(text: str) -> str:
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def group_rows(report: UsageReport | None, limit: int | None = None) -> list[Group]:
    """The groups of a report, at most ``limit``."""
    if report is None:
        return []
    return report.groups[:limit] if limit is not None else report.groups


def part_rows(report: UsageReport | None, series: Sequence[str]) -> list[tuple[str, Mapping[str, Totals]]]:
    """Each group's parts keyed by series (the parts beyond the shown series summed as ``other``)."""
    rows: list[tuple[str, Mapping[str, Totals]]] = []
    if report is None:
        return rows
    shown = set(series)
    for group in report.groups:
        parts: dict[str, Totals] = {}
        for key, totals in (group.parts or {}).items():
            parts.setdefault(key if key in shown else "other", Totals()).merge(totals)
        rows.append((group.key, parts))
    return rows
