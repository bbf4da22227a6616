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

Caching: each session is read from the store once per change: its
skeleton (``store.read_skeleton``) where the store reads that cheaply
(``store.partial_reads``), else the whole session; tree summaries and
conversation windows then read their entries by id (``store.read_entries``),
and the model's view reads the whole session once (docs/viewer.md, "What
is sent when"). A cheap change hint (the JSONL file's or the SQLite
database's size and mtime) decides whether the stored session must be read
again; stores without files are re-read at most once per
:data:`MIN_REREAD_SECONDS`.
"""

from __future__ import annotations

import functools
import hmac
import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date
from importlib import resources
from typing import Any
from urllib.parse import quote, urlencode

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from sessiontree.compare import DiffInputError, diff_branches
from sessiontree.core.textsafe import shell_join, shell_quote
from sessiontree.errors import (
    AmbiguousSessionPrefixError,
    EntryNotFoundError,
    SessionError,
    SessionNotFoundError,
    UnknownSessionPrefixError,
)
from sessiontree.format.foreign import agent_of_header
from sessiontree.format.foreign.gemini import resume_command as gemini_resume_command
from sessiontree.format.foreign.omp import resume_command as omp_resume_command
from sessiontree.format.idprefix import resolve_session_prefix
from sessiontree.session.manager import SessionManager
from sessiontree.stores.base import SessionStore, SyncState
from sessiontree.stores.changes import change_hint
from sessiontree.sync.provenance import agent_format
from sessiontree.sync.restore import resume_command
from sessiontree.web import page
from sessiontree.web import views as view

__all__ = ["LOOPBACK_HOSTS", "MIN_REREAD_SECONDS", "SessionCache", "ViewerConfig", "create_app"]

#: Host names a loopback server answers to.
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
#: Stores without a change hint are read again at most this often (seconds).
MIN_REREAD_SECONDS = 0.5
#: Listing rows are reused this long (seconds) between list requests.
LIST_TTL_SECONDS = 2.0
_TOKEN_COOKIE = "sessiontree_token"
#: The reader's choice of the ``redacted`` toggle ("1"/"0"), suffixed ``_PORT`` like the token
#: cookie; absent: :attr:`ViewerConfig.redact`.
_REDACT_COOKIE = "sessiontree_redacted"
#: Addresses that bind every interface: the server cannot know the names it is reached by.
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})
#: A ``Host`` header: a name or a bracketed IPv6 address, then an optional numeric port.
_HOST_HEADER = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9._-]+)(?::[0-9]{1,5})?")
#: Conversation entries of the first window a session page shows (earlier ones
#: load as the reader scrolls up, :data:`sessiontree.web.views.WINDOW_ITEMS` at a time).
FIRST_WINDOW_ITEMS = 60


@dataclass
class ViewerConfig:
    """How the app was started.

    Attributes:
        host: the address the server binds (used for the ``Host`` check).
        port: its port.
        token: the secret every request must carry (``None``: no token,
            loopback only).
        live: whether pages poll for new entries.
        redact: whether sessions are shown redacted unless the reader turns
            it off (the ``redacted`` toggle, a cookie; docs/secrets.md);
            ``serve --expose`` sets it.
    """

    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    live: bool = True
    redact: bool = False

    def allowed_hosts(self) -> set[str] | None:
        """``Host`` header values (without port) that are accepted; ``None``: any.

        A wildcard bind (``0.0.0.0``, ``::``) is reached by names the server
        cannot list (its LAN address, its DNS name). With a token it accepts
        any name: a page that rebinds its own name to this server has neither
        the token nor the cookie (kept for the name the user opened). Without
        a token (a library caller's choice) it answers loopback names only.
        """
        if self.host.lower() in WILDCARD_HOSTS:
            return None if self.token is not None else set(LOOPBACK_HOSTS)
        hosts = {self.host.lower(), f"[{self.host.lower()}]"}
        if self.host in LOOPBACK_HOSTS or self.host.startswith("127."):
            hosts |= LOOPBACK_HOSTS
        return hosts


# --------------------------------------------------------------------------- session cache


@dataclass
class _Cached:
    """One session as the server holds it: skeletons first, full entries on demand.

    ``manager`` is bound to the session's skeleton entries
    (``store.read_skeleton``): tree layout, branches, labels and the leaf
    come from it; conversation windows read their entries by id
    (``store.read_entries``). ``full`` is the manager over the full session,
    read only when a view needs every entry (the model's view).
    """

    hint: Any
    checked: float
    manager: SessionManager
    version: str
    session_id: str = ""
    tree: view.TreeData | None = None
    memo: dict[Any, Any] | None = None
    full: SessionManager | None = None


class SessionCache:
    """Read-only managers of recently viewed sessions, re-read when the store changed.

    Thread-safe (Starlette runs sync endpoints in a thread pool). Holds at
    most ``size`` sessions.
    """

    def __init__(self, store: SessionStore, size: int = 4, *, redact: bool = False) -> None:
        """Cache sessions of ``store``, at most ``size`` at once; with ``redact``, each
        session is read whole and held redacted (:func:`sessiontree.core.secrets.redact_parsed`)."""
        self.store = store
        self.size = size
        self.redact = redact
        self._items: OrderedDict[str, _Cached] = OrderedDict()
        self._lock = threading.RLock()  # endpoints hold it while they use a manager

    def get(self, session_id: str) -> _Cached:
        """The cached session, read again if the store shows a change.

        Raises:
            SessionNotFoundError: no such session.
            InvalidSessionError, StorageError: the stored session cannot be read.
        """
        with self._lock:
            cached = self._items.get(session_id)
            now = time.monotonic()
            hint = change_hint(self.store, session_id)
            if cached is not None:
                unchanged = hint == cached.hint if hint is not None else now - cached.checked < MIN_REREAD_SECONDS
                if unchanged:
                    self._items.move_to_end(session_id)
                    return cached
            # Skeletons only where the store reads them cheaply: a large session's full
            # read and parse costs far more than its skeleton (docs/viewer.md, "What is
            # sent when"). Elsewhere read_skeleton would read everything anyway, and so
            # would each read_entries: read once, keep it all.
            # Redacted: one whole read, redacted once, so placeholders are the same in every window.
            partial = self.store.partial_reads and not self.redact
            parsed = self.store.read_skeleton(session_id) if partial else self.store.read(session_id)
            if self.redact:
                from sessiontree.core.secrets import redact_parsed

                parsed = redact_parsed(parsed)[0]
            entries = parsed.entries
            version = f"{len(entries)}:{entries[-1].get('id') if entries else ''}"
            if cached is not None and cached.version == version:
                cached.hint, cached.checked = hint, now
                return cached
            # Read-only: nothing is ever appended, so the entries are bound to an
            # empty private store instead of being copied into one (in_memory
            # re-serializes every entry).
            manager = SessionManager.from_parsed(parsed)
            fresh = _Cached(hint, now, manager, version, session_id, full=None if partial else manager)
            self._items[session_id] = fresh
            self._items.move_to_end(session_id)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
            return fresh

    def tree(self, cached: _Cached) -> view.TreeData:
        """The tree rows of a cached session, laid out once per version."""
        with self._lock:
            if cached.tree is None:
                # Viewing branches moves the manager's leaf: lay out from the loaded leaf.
                leaf = _active_leaf(cached)
                if leaf is None:
                    cached.manager.reset_leaf()
                else:
                    cached.manager.branch(leaf)
                cached.tree = view.build_tree_data(cached.manager, summaries=False)
                cached.tree.loader = functools.partial(self.entries, cached)
            return cached.tree

    def full(self, cached: _Cached) -> SessionManager:
        """The manager over the whole session (every entry parsed), read once per version."""
        with self._lock:
            if cached.full is None:  # never for a redacting cache: it holds the session whole
                cached.full = SessionManager.from_parsed(self.store.read(cached.session_id))
            return cached.full

    def entries(self, cached: _Cached, ids: Any) -> list[Any]:
        """Full entries of ``ids``: from the session held in full, else ``store.read_entries``."""
        if cached.full is not None:
            get = cached.full.get_entry
            return [entry for entry in map(get, ids) if entry is not None]
        return self.store.read_entries(cached.session_id, ids)


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


# --------------------------------------------------------------------------- endpoints


def _flag(value: str | None) -> bool:
    return value not in (None, "", "0", "false", "off")


def _date(value: str | None) -> date | None:
    try:
        return date.fromisoformat(value) if value else None
    except ValueError:
        return None


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def create_app(store: SessionStore, config: ViewerConfig | None = None) -> Starlette:
    """The viewer over ``store`` (read-only; the store stays open and owned by the caller).

    Args:
        store: any :class:`SessionStore`.
        config: host, port and token (see :class:`ViewerConfig`); default:
            loopback, no token.
    """
    config = config or ViewerConfig()
    caches = {False: SessionCache(store), True: SessionCache(store, redact=True)}
    redact_cookie = f"{_REDACT_COOKIE}_{config.port}"
    listing: dict[str, Any] = {"at": -1e9, "infos": None}
    listing_lock = threading.Lock()

    def infos() -> list[Any]:
        with listing_lock:
            now = time.monotonic()
            if listing["infos"] is None or now - listing["at"] > LIST_TTL_SECONDS:
                listing["infos"] = SessionManager.list_all(store, include_internal=True)
                listing["at"] = now
            rows: list[Any] = listing["infos"]
            return rows

    def redacted(request: Request) -> bool:
        value = request.cookies.get(redact_cookie)
        return config.redact if value not in ("0", "1") else value == "1"

    def toggle_redacted(request: Request) -> Response:
        # GET /redacted?on=0|1&next=/s/ID: remember the choice, back to the page (same site only).
        target = request.query_params.get("next", "/")
        if not target.startswith("/") or target.startswith("//") or "\\" in target:
            target = "/"
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(redact_cookie, "1" if _flag(request.query_params.get("on")) else "0",
                            httponly=True, samesite="strict")
        return response

    def session_list(request: Request) -> Response:
        p = request.query_params
        query = view.ListQuery(q=p.get("q", ""), project=p.get("project", ""), agent=p.get("agent", ""),
                               host=p.get("host", ""),
                               user=p.get("user", ""), named=_flag(p.get("named")),
                               since=_date(p.get("since")), until=_date(p.get("until")),
                               internal=_flag(p.get("internal")),
                               sort="created" if p.get("sort") == "created" else "modified",
                               page=_int(p.get("page"), 1), per_page=min(200, max(1, _int(p.get("per_page"), 50))))
        result = view.build_list_page(store, query, infos())
        hide = redacted(request)
        if hide:
            from sessiontree.core.secrets import redact_text

            for row in result.rows:
                row.title = redact_text(row.title)
                row.snippet = ""  # a cut-off snippet may hold a secret the scanner cannot recognise
        base = {k: v for k, v in p.items() if k not in ("page", "token")}

        def page_query(number: int) -> str:
            return urlencode({**base, "page": number})

        def suggest_query(text: str) -> str:
            return urlencode({**base, "q": text})

        html = page.environment().get_template("list.html").render(
            page=result, q=query, inline=False, token_query="", page_query=page_query, redacted=hide,
            suggest_query=suggest_query,
            here=str(request.url.path) + (f"?{request.url.query}" if request.url.query else ""))
        return HTMLResponse(view.scrub_surrogates(html), status_code=400 if result.message else 200)

    def _to_full_id(request: Request, typed: str, page_suffix: str = "") -> Response:
        """A redirect from what a person typed (a prefix, or PARENT/AGENT for a subagent session)
        to the session's page under its whole id: the rule of every edge (format/idprefix.py);
        404 with the candidates when it names none or several."""
        try:
            found = resolve_session_prefix(typed, store.session_ids())
        except UnknownSessionPrefixError:
            return PlainTextResponse("No such session", status_code=404)
        except AmbiguousSessionPrefixError as exc:
            return PlainTextResponse(view.scrub_surrogates(
                f"Ambiguous session id prefix: it matches {', '.join(exc.candidates[:5])}"), status_code=404)
        query = f"?{request.url.query}" if request.url.query else ""
        return RedirectResponse(f"/s/{quote(found)}{page_suffix}{query}", status_code=302)

    def subagent_page(request: Request) -> Response:
        """``/s/PARENT/AGENT``: a subagent session addressed under its parent, as lists print it."""
        return _to_full_id(request, f"{request.path_params['session_id']}/{request.path_params['agent']}")

    def _session(request: Request) -> Any:
        session_id = request.path_params["session_id"]
        try:
            return caches[redacted(request)].get(session_id)
        except SessionNotFoundError:
            return None

    def _conversation(cached: Any, request: Request, limit: int = view.WINDOW_ITEMS,
                      read_states: Callable[[], Mapping[str, SyncState]] | None = None) -> view.Conversation | Response:
        conv = _conversation_window(cached, request, limit, read_states)
        if isinstance(conv, view.Conversation):
            # A subagent call links to the subagent's own session when the store holds it
            # (``<parent>-agent-<agent id>``, docs/agents/claude-code.md).
            for part in conv.subagent_calls():
                child = f"{cached.session_id}-agent-{part.agent_id}"
                if store.exists(child):
                    part.subagent_link = child
        return conv

    def _conversation_window(cached: Any, request: Request, limit: int,
                             read_states: Callable[[], Mapping[str, SyncState]] | None) -> view.Conversation | Response:
        cache = caches[redacted(request)]
        p = request.query_params
        leaf = p.get("leaf") or None
        viewname = "model" if p.get("view") == "model" else "raw"
        start = _int(p.get("start"), -1)
        stop = _int(p.get("stop"), -1)
        if start >= 0 and stop > start:
            limit = min(limit, stop - start)  # an earlier window ends where the shown one starts
        around = p.get("around") or None
        try:
            if cached.memo is None:
                cached.memo = {}
            if viewname == "model":
                if "agent-format" not in cached.memo:
                    # What pi sent needs the agent's format (docs/viewer.md): once per session version.
                    cached.memo["agent-format"] = agent_format(store, cached.session_id, read_states=read_states)
                return view.build_conversation(cache.full(cached), leaf or _active_leaf(cached), viewname,
                                               start=start if start >= 0 else None, around=around,
                                               limit=limit, memo=cached.memo,
                                               agent_format=cached.memo["agent-format"])
            # The raw view reads only the window's entries: the branch comes from skeletons.
            manager: SessionManager = cached.manager
            leaf = leaf or _active_leaf(cached)
            if leaf is not None:
                manager.branch(leaf)  # EntryNotFoundError for an unknown leaf
            key = ("path", leaf)
            path = cached.memo.get(key)
            if path is None:
                tree = cache.tree(cached)
                if leaf is not None and leaf == tree.leaf_id and tree.active_path is not None:
                    path = tree.active_path  # the layout walked it already
                else:
                    path = manager.get_branch(leaf) if leaf is not None else []
                cached.memo[key] = path
            return view.build_branch_window(path, functools.partial(cache.entries, cached),
                                            start=start if start >= 0 else None, around=around, limit=limit)
        except EntryNotFoundError:
            return PlainTextResponse("No such entry in this session", status_code=404)

    def session_page(request: Request) -> Response:
        cache = caches[redacted(request)]
        cached = _session(request)
        if cached is None:
            return _to_full_id(request, request.path_params["session_id"])
        with cache._lock:
            tree = cache.tree(cached)
            # One read of the sync states serves the agent's format and the resume command;
            # a failed read is not kept, so each still sees its own error as before.
            read_states = functools.cache(store.sync_states)
            conv = _conversation(cached, request, FIRST_WINDOW_ITEMS, read_states)
            if isinstance(conv, Response):
                return conv
            window = tree.window(leaf=conv.leaf_id, find=conv.leaf_id)
            session_id = str(cached.manager.get_session_id())
            header = cached.manager.get_header()
            if agent_of_header(header) == "gemini":  # Gemini CLI's own command (docs/agents/gemini.md)
                resume = shell_join(gemini_resume_command(session_id))
            elif agent_of_header(header) == "omp":  # oh-my-pi's own, in the session's cwd
                cwd = str(header.get("cwd") or "")
                command = shell_join(omp_resume_command(session_id))
                resume = f"cd {shell_quote(cwd)} && {command}" if cwd else command
            else:
                resume = resume_command(store, session_id, str(header.get("cwd") or ""), read_states=read_states,
                                        own=agent_of_header(header))
            here = str(request.url.path) + (f"?{request.url.query}" if request.url.query else "")
            if cached.memo is None:
                cached.memo = {}
            if "origin" not in cached.memo:
                # Where the session came from (docs/sync.md, "Provenance"): once per session version.
                cached.memo["origin"] = store.provenances().get(session_id)
            if "insights" not in cached.memo:
                # Every entry of every branch (docs/insights.md): once per session version.
                from sessiontree.usage.insights import insights_of_entries

                cached.memo["insights"] = insights_of_entries(
                    session_id, cache.full(cached).get_entries()).to_dict()
            html = page.render_session_page(cached.manager, tree, conv, version=cached.version, window=window,
                                            resume_command=resume, redacted=cache.redact, here=here,
                                            origin=cached.memo["origin"], insights=cached.memo["insights"])
        return HTMLResponse(html)

    def compare_page(request: Request) -> Response:
        cache = caches[redacted(request)]
        if cache.redact:
            # The comparison reads the stored entries as they are: never shown in redacted mode.
            return PlainTextResponse("The compare page is not available while sessions are shown redacted",
                                     status_code=403)
        cached = _session(request)
        if cached is None:
            return _to_full_id(request, request.path_params["session_id"], "/compare")
        p = request.query_params
        viewname = "model" if p.get("view") == "model" else "raw"
        session_id = cached.manager.get_session_id()
        try:
            # Read from the store as the command does: the cached manager's leaf moves as
            # branches are viewed, so it is not handed over.
            result = diff_branches(store, session_id, p.get("a") or None, p.get("b") or None,
                                   context=viewname == "model")
        except DiffInputError as exc:
            return PlainTextResponse(view.scrub_surrogates(f"Cannot compare: {exc}"), status_code=404)
        with cache._lock:
            entries = cache.full(cached).get_entries()  # whole entries: the pickers show summaries
        return HTMLResponse(page.render_compare_page(view.build_compare_page(result, session_id, viewname,
                                                                             entries)))

    def rows_json(request: Request) -> Response:
        cache = caches[redacted(request)]
        cached = _session(request)
        if cached is None:
            return JSONResponse({"error": "no such session"}, status_code=404)
        p = request.query_params
        mode = p.get("filter", "default")
        if mode not in {value for value, _ in view.FILTER_MODES}:
            mode = "default"
        folded = {_int(v, -1) for v in p.get("folded", "").split(",") if v}
        with cache._lock:
            window = cache.tree(cached).window(mode=mode, folded=folded, leaf=p.get("leaf") or None,
                                               offset=_int(p.get("offset"), 0),
                                               limit=_int(p.get("limit"), view.TREE_WINDOW_ROWS),
                                               find=p.get("find") or None)
        return _json({"version": cached.version, **window})

    def conversation(request: Request) -> Response:
        cache = caches[redacted(request)]
        cached = _session(request)
        if cached is None:
            return PlainTextResponse("No such session", status_code=404)
        with cache._lock:
            conv = _conversation(cached, request)
        if isinstance(conv, Response):
            return conv
        return HTMLResponse(page.render_conversation(conv, request.path_params["session_id"]))

    def tree_json(request: Request) -> Response:
        cache = caches[redacted(request)]
        cached = _session(request)
        if cached is None:
            return JSONResponse({"error": "no such session"}, status_code=404)
        with cache._lock:
            text = cache.tree(cached).json_text()
        return Response(text, media_type="application/json")

    def summaries_json(request: Request) -> Response:
        cache = caches[redacted(request)]
        cached = _session(request)
        if cached is None:
            return JSONResponse({"error": "no such session"}, status_code=404)
        wanted = [_int(v, -1) for v in request.query_params.get("rows", "").split(",")[:500]]
        with cache._lock:
            found = cache.tree(cached).summaries(wanted)
        return _json({"version": cached.version, "summaries": {str(k): v for k, v in found.items()}})

    def state_json(request: Request) -> Response:
        cached = _session(request)
        if cached is None:
            return JSONResponse({"error": "no such session"}, status_code=404)
        return _json({"version": cached.version, "entries": int(cached.version.split(":")[0]),
                      "leaf": _active_leaf(cached)})

    static = StaticFiles(directory=str(resources.files("sessiontree.web").joinpath("static")))
    routes = [
        Route("/", session_list),
        Route("/redacted", toggle_redacted),
        Route("/s/{session_id}", session_page),
        Route("/s/{session_id}/conversation", conversation),
        Route("/s/{session_id}/compare", compare_page),
        Route("/s/{session_id}/tree.json", tree_json),
        Route("/s/{session_id}/rows.json", rows_json),
        Route("/s/{session_id}/state.json", state_json),
        Route("/s/{session_id}/summaries.json", summaries_json),
        Route("/s/{session_id}/{agent}", subagent_page),  # after the pages above: PARENT/AGENT
        Mount("/static", app=static, name="static"),
    ]
    # The usage dashboard (docs/viewer.md, "Usage dashboard"): /usage and /usage.csv.
    from sessiontree.web.usagepage import usage_routes

    routes[-1:-1] = usage_routes(store, infos)

    def on_error(request: Request, exc: Exception) -> Response:
        return PlainTextResponse(view.scrub_surrogates(f"Cannot show this session: {exc}"), status_code=500)

    return Starlette(routes=routes, middleware=[Middleware(_Guard, config=config)],
                     exception_handlers={SessionError: on_error})


def _json(value: Any) -> Response:
    """A JSON response of session data (lone surrogates replaced: they cannot be sent as UTF-8)."""
    return Response(view.scrub_surrogates(json.dumps(value, ensure_ascii=False, separators=(",", ":"))),
                    media_type="application/json")


def _active_leaf(cached: Any) -> str | None:
    """The session's leaf as loaded (the cached manager's leaf moves as branches are viewed)."""
    from sessiontree.core.tree import loaded_leaf_id

    return loaded_leaf_id(cached.manager.get_entries())
