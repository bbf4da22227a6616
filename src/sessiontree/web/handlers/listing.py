"""The session list page (``/``) and the ``redacted`` toggle (``/redacted``)."""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from sessiontree.web import page
from sessiontree.web import views as view
from sessiontree.web.handlers.common import as_date, as_int, flag, where
from sessiontree.web.state import ViewerState

__all__ = ["session_list", "toggle_redacted"]


def toggle_redacted(state: ViewerState, request: Request) -> Response:
    """``GET /redacted?on=0|1&next=/s/ID``: remember the choice in a cookie, back to the page
    (same site only)."""
    target = request.query_params.get("next", "/")
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        target = "/"
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(state.redact_cookie, "1" if flag(request.query_params.get("on")) else "0",
                        httponly=True, samesite="strict")
    return response


def _query(request: Request) -> view.ListQuery:
    """The list page's query parameters (docs/viewer.md, "The session list")."""
    p = request.query_params
    return view.ListQuery(q=p.get("q", ""), project=p.get("project", ""), agent=p.get("agent", ""),
                          host=p.get("host", ""), user=p.get("user", ""), named=flag(p.get("named")),
                          since=as_date(p.get("since")), until=as_date(p.get("until")),
                          internal=flag(p.get("internal")),
                          sort="created" if p.get("sort") == "created" else "modified",
                          page=as_int(p.get("page"), 1),
                          per_page=min(200, max(1, as_int(p.get("per_page"), 50))), cursor=p.get("cursor", ""))


def session_list(state: ViewerState, request: Request) -> Response:
    """``GET /``: the session list (search, filters, sort, pages); 400 with the page's
    message for a search the search refuses."""
    query = _query(request)
    result = view.build_list_page(state.store, query, state.listing.rows())
    hide = state.redacted(request)
    if hide:
        from sessiontree.core.secrets import redact_text

        for row in result.rows:
            row.title = redact_text(row.title)
            row.snippet = ""  # a cut-off snippet may hold a secret the scanner cannot recognise
    base = {k: v for k, v in request.query_params.items() if k not in ("page", "cursor", "token")}

    def page_query(number: int) -> str:
        return urlencode({**base, "page": number})

    def cursor_query(cursor: str | None) -> str:
        """The search's next page (``cursor``), or its first (``None``)."""
        return urlencode({**base, "cursor": cursor} if cursor else base)

    def suggest_query(text: str) -> str:
        return urlencode({**base, "q": text})

    html = page.environment().get_template("list.html").render(
        page=result, q=query, inline=False, token_query="", page_query=page_query, cursor_query=cursor_query, redacted=hide,
        suggest_query=suggest_query, here=where(request))
    return HTMLResponse(view.scrub_surrogates(html), status_code=400 if result.message else 200)
