"""The viewer's usage dashboard routes: ``/usage`` and ``/usage.csv`` (docs/viewer.md, "Usage
dashboard"). The page is built by :mod:`sessiontree.web.views.usage`; this module parses the
request, renders ``usage.html`` and answers CSV downloads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from sessiontree.stores.base import SessionStore
from sessiontree.stores.changes import change_hint
from sessiontree.stores.traits import store_traits
from sessiontree.usage.report import usage_reports
from sessiontree.web import page as pages
from sessiontree.web.views import usage as usage_view
from sessiontree.web.views.common import scrub_surrogates

__all__ = ["usage_routes"]

_CSV_VIEWS = {"weekhour": "weekhour", "session": "session", "project": "project", "agent": "agent",
              "model": "model", "host": "host", "user": "user"}


def _budgets(store: SessionStore, tz: str | None) -> Callable[[], list[Any]]:
    def statuses() -> list[Any]:
        from sessiontree.usage.budgets import budget_status
        from sessiontree.usage.config import load_budgets

        return [budget_status(store, budget, tz=tz)[0] for budget in load_budgets()]

    return statuses


#: Without a change hint (stores without files), the listing is reused this long (seconds).
LISTING_TTL_SECONDS = 2.0


def usage_routes(store: SessionStore, infos: Callable[[], Sequence[Any]]) -> list[Route]:
    """The dashboard's routes over ``store``; ``infos`` gives the listing rows (cached by the app).

    The dashboard needs the listing for two things only, each session's agent and the
    projects of the filter, so it keeps them while the store shows no change (the SQLite
    database's and its WAL's size and time, :func:`sessiontree.stores.changes.change_hint`),
    or for :data:`LISTING_TTL_SECONDS` on a store without files."""
    held: dict[str, Any] = {"hint": None, "at": -1e9, "rows": None}
    lock = threading.Lock()

    def listing() -> Sequence[Any]:
        with lock:
            hint = change_hint(store, "") if store_traits(store).change_files else None
            now = time.monotonic()
            fresh = held["rows"] is not None and (hint == held["hint"] if hint is not None
                                                   else now - held["at"] < LISTING_TTL_SECONDS)
            if not fresh:
                held["rows"], held["hint"], held["at"] = infos(), hint, now
            rows: Sequence[Any] = held["rows"]
            return rows

    def usage_page(request: Request) -> Response:
        params = usage_view.parse_usage_params(request.query_params.get)
        built = usage_view.build_usage_page(store, params, listing(), budgets=_budgets(store, params.tz))
        if params.insights and built.message is None:
            from sessiontree.usage.insights import store_insights

            built.insights = store_insights(store).to_dict()
        env = pages.environment()
        env.globals["money"] = usage_view.money
        html = env.get_template("usage.html").render(
            page=built, p=params, WEEKDAYS=usage_view.WEEKDAYS, CSV_TABLES=usage_view.CSV_TABLES,
            groups=usage_view.group_rows, parts=usage_view.part_rows, inline=False, TOP=usage_view.TOP_ROWS)
        return HTMLResponse(scrub_surrogates(html), status_code=400 if built.message else 200)

    def usage_csv(request: Request) -> Response:
        params = usage_view.parse_usage_params(request.query_params.get)
        table = request.query_params.get("table", "period")
        if table != "period" and table not in _CSV_VIEWS:
            return PlainTextResponse(f"unknown table; one of {', '.join(usage_view.CSV_TABLES)}", status_code=404)
        view = (params.period, params.stack) if table == "period" else (_CSV_VIEWS[table], None)
        try:
            (report,) = usage_reports(store, [view], **params.filters(),
                                      agent_of=usage_view.agents_of(listing()))
        except ValueError as exc:
            return PlainTextResponse(scrub_surrogates(str(exc)), status_code=400)
        name = f"usage-{params.period if table == 'period' else table}.csv"
        text = usage_view.csv_text(report, stacked=table == "period")
        return Response(scrub_surrogates(text), media_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})

    return [Route("/usage", usage_page), Route("/usage.csv", usage_csv)]
