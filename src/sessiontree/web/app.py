"""The viewer's web application (Starlette), read-only over any store.

Routes (all ``GET``/``HEAD``; every other method is refused with 405, so no
request can change a session):

* ``/``: the session list (search, filters, sort, pages);
* ``/s/{id}``: the session page (``?leaf=ENTRY&view=raw|model#ENTRY``);
* ``/s/{id}/compare?a=LEAF&b=LEAF&view=raw|model``: two branches aligned
  (docs/diff.md; ``SESSION:LEAF`` for another session, a missing side as
  ``sessiontree diff`` chooses it);
* ``/s/{id}/conversation``: the conversation pane's HTML for one window
  (``leaf``, ``view``, ``start`` or ``around``);
* ``/s/{id}/tree.json``: all tree rows (:class:`sessiontree.web.views.TreeData`);
* ``/s/{id}/rows.json?filter=&folded=I,J&leaf=&offset=&limit=&find=``: one
  window of the visible tree rows (:meth:`sessiontree.web.views.TreeData.window`),
  what the page's tree pane fetches as it scrolls;
* ``/s/{id}/summaries.json?rows=I,J,...``: one-line summaries of tree rows
  (large sessions send the tree without them);
* ``/s/{id}/state.json``: ``{"version", "entries", "leaf"}``, polled every
  second by the page for live updates;
* ``/usage``, ``/usage.csv``: the usage dashboard and its tables as CSV
  (:mod:`sessiontree.web.usagepage`);
* ``/static/...``: the package's stylesheet and script.

Safety (docs/viewer.md): the ``Host`` header must name the address the
server was started for (or ``localhost``/``127.0.0.1``/``[::1]`` on
loopback), which defeats DNS rebinding; when a token is set (any
non-loopback bind), a request must carry it once as ``?token=`` (it is then
kept in an ``HttpOnly``, ``SameSite=Strict`` cookie) or be refused with 403;
every response carries a strict Content-Security-Policy and
``X-Content-Type-Options: nosniff``.

Structure: the routes table (:data:`sessiontree.web.routes.ROUTES`, where a new page
registers) maps each path to a handler of :mod:`sessiontree.web.handlers` (one module
per page) over the typed :class:`sessiontree.web.state.ViewerState`.

Caching: sessions come from the read service
(:class:`sessiontree.session.reading.ReadOnlySessions`): each is read once per change,
its skeleton where the store reads that cheaply (``partial_reads``), else whole; tree
summaries and conversation windows then read their entries by id
(``store.read_entries``), and the model's view reads the whole session once
(docs/viewer.md, "What is sent when"). The store's change token (the JSONL file's or
the SQLite database's size and mtime) decides whether a session must be read again;
stores without files are re-read at most once per :data:`MIN_REREAD_SECONDS`.
"""

from __future__ import annotations

import hmac
import re
from typing import Any
from urllib.parse import quote, urlencode

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from sessiontree.errors import SessionError
from sessiontree.stores.base import SessionStore
from sessiontree.web import page
from sessiontree.web import views as view
from sessiontree.web.routes import build_routes
from sessiontree.web.state import LOOPBACK_HOSTS, MIN_REREAD_SECONDS, ViewerConfig, ViewerState

__all__ = ["LOOPBACK_HOSTS", "MIN_REREAD_SECONDS", "ViewerConfig", "ViewerState", "create_app"]

_TOKEN_COOKIE = "sessiontree_token"
#: A ``Host`` header: a name or a bracketed IPv6 address, then an optional numeric port.
_HOST_HEADER = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9._-]+)(?::[0-9]{1,5})?")


# --------------------------------------------------------------------------- middleware


#: Headers of every response (docs/viewer.md, "Content-Security-Policy").
_SECURITY_HEADERS = (
    (b"content-security-policy", page.SERVER_CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
)


class _Guard:
    """Host check, token check, read-only methods and security headers, for every request."""

    def __init__(self, app: ASGIApp, config: ViewerConfig) -> None:
        self.app = app
        self.config = config
        self.hosts = config.allowed_hosts()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        set_cookie = False
        cookie = f"{_TOKEN_COOKIE}_{self.config.port}"  # two viewers on one host keep their own
        started = False

        # Every answer carries the security headers: pages, JSON, static files and the
        # guard's own refusals and errors (docs/viewer.md, "Content-Security-Policy").
        async def send_with_headers(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = message.setdefault("headers", [])
                headers.extend(_SECURITY_HEADERS)
                if set_cookie and self.config.token is not None:
                    headers.append((b"set-cookie", f"{cookie}={self.config.token}; Path=/; HttpOnly; "
                                                   "SameSite=Strict".encode()))
            await send(message)

        host = _HOST_HEADER.fullmatch((request.headers.get("host") or "").lower())
        if host is None or (self.hosts is not None and host.group(1) not in self.hosts):
            # DNS rebinding: a page of another site resolved to our address.
            await PlainTextResponse("Invalid Host header", status_code=400)(scope, receive, send_with_headers)
            return
        if request.method not in ("GET", "HEAD"):
            await PlainTextResponse("This viewer is read-only", status_code=405,
                                    headers={"Allow": "GET, HEAD"})(scope, receive, send_with_headers)
            return
        if self.config.token is not None:
            in_url = request.query_params.get("token")
            given = in_url or request.cookies.get(cookie) or ""
            if not hmac.compare_digest(given.encode(), self.config.token.encode()):
                await PlainTextResponse("A valid token is required (see the URL sessiontree serve printed)",
                                        status_code=403)(scope, receive, send_with_headers)
                return
            set_cookie = in_url is not None

        if set_cookie:
            # The token now lives in the cookie: send the browser to the same URL
            # without it, so it stays out of the address bar, history and bookmarks.
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            path = "/" + quote(request.url.path).lstrip("/")  # never "//host": same origin only
            location = path + (f"?{urlencode(rest)}" if rest else "")
            await RedirectResponse(location, status_code=303)(scope, receive, send_with_headers)
            return
        try:
            await self.app(scope, receive, send_with_headers)
        except Exception:
            # An unexpected error: Starlette's own 500 is sent outside this middleware,
            # without the headers. Send ours, then re-raise so the server logs it.
            if not started:
                await PlainTextResponse("Internal Server Error", status_code=500)(scope, receive,
                                                                                  send_with_headers)
            raise


# --------------------------------------------------------------------------- the app


def _on_error(request: Request, exc: Exception) -> Response:
    """A session that cannot be shown (damaged, unreadable): 500 with the reason, as text."""
    return PlainTextResponse(view.scrub_surrogates(f"Cannot show this session: {exc}"), status_code=500)


def create_app(store: SessionStore, config: ViewerConfig | None = None) -> Starlette:
    """The viewer over ``store`` (read-only; the store stays open and owned by the caller).

    Args:
        store: any :class:`SessionStore`.
        config: host, port and token (see :class:`ViewerConfig`); default:
            loopback, no token.

    Returns:
        The Starlette app: the routes of :func:`sessiontree.web.routes.build_routes` over one
        :class:`ViewerState` (also at ``app.state.viewer``), behind the guard.
    """
    state = ViewerState(store, config or ViewerConfig())
    app = Starlette(routes=build_routes(state), middleware=[Middleware(_Guard, config=state.config)],
                    exception_handlers={SessionError: _on_error})
    app.state.viewer = state
    return app
