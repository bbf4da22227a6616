"""The viewer's routes table: every page's path and its handler, in one place.

A new page registers here: a handler ``handler(state, request) -> Response`` in a module
of :mod:`sessiontree.web.handlers` (one per page), and one line in :data:`ROUTES`. All
routes answer ``GET``/``HEAD`` only (the guard in :mod:`sessiontree.web.app` refuses
every other method: docs/viewer.md). Order matters where paths overlap: Starlette takes
the first route that matches, so ``/s/{session_id}/{agent}`` comes after the session's
own pages.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from sessiontree.web.handlers import compare, listing, session
from sessiontree.web.state import ViewerState

__all__ = ["ROUTES", "Handler", "build_routes"]

#: A page's handler: the app's typed state and the request in, the response out.
Handler = Callable[[ViewerState, Request], Response]

#: ``(path, handler)`` of every page (docs/viewer.md lists what each shows).
ROUTES: list[tuple[str, Handler]] = [
    ("/", listing.session_list),
    ("/redacted", listing.toggle_redacted),
    ("/s/{session_id}", session.session_page),
    ("/s/{session_id}/conversation", session.conversation),
    ("/s/{session_id}/compare", compare.compare_page),
    ("/s/{session_id}/tree.json", session.tree_json),
    ("/s/{session_id}/rows.json", session.rows_json),
    ("/s/{session_id}/state.json", session.state_json),
    ("/s/{session_id}/summaries.json", session.summaries_json),
    ("/s/{session_id}/{agent}", session.subagent_page),  # after the pages above: PARENT/AGENT
]


def _endpoint(handler: Handler, state: ViewerState) -> Callable[[Request], Response]:
    """A Starlette endpoint (a plain function: run on the thread pool) calling ``handler`` with ``state``."""

    def endpoint(request: Request) -> Response:
        return handler(state, request)

    endpoint.__name__ = getattr(handler, "__name__", "endpoint")
    endpoint.__doc__ = handler.__doc__
    return endpoint


def build_routes(state: ViewerState) -> list[BaseRoute]:
    """Starlette's routes: :data:`ROUTES` bound to ``state``, the usage dashboard's
    (``/usage``, ``/usage.csv``: :mod:`sessiontree.web.usagepage`), the team store's audited
    door (``/team/open/SESSION``: :mod:`sessiontree.web.teamdoor`, docs/team.md), then ``/static``."""
    from sessiontree.web.teamdoor import team_door_routes
    from sessiontree.web.usagepage import usage_routes

    static = StaticFiles(directory=str(resources.files("sessiontree.web").joinpath("static")))
    return [*(Route(path, _endpoint(handler, state)) for path, handler in ROUTES),
            *usage_routes(state.store, state.listing.rows),
            *team_door_routes(state.store),
            Mount("/static", app=static, name="static")]
