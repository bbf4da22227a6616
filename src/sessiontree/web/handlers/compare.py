"""The compare page (``/s/{id}/compare?a=LEAF&b=LEAF&view=raw|model``; docs/diff.md)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from sessiontree.diff import DiffInputError, diff_branches
from sessiontree.web import page
from sessiontree.web import views as view
from sessiontree.web.handlers.common import requested_session, to_full_id
from sessiontree.web.state import ViewerState

__all__ = ["compare_page"]


def compare_page(state: ViewerState, request: Request) -> Response:
    """Two branches aligned (``SESSION:LEAF`` for another session, a missing side as
    ``sessiontree diff`` chooses it); a prefix of the session redirects as the session page
    does; 404 with the reason when there is nothing to compare; 403 while redacted."""
    if state.redacted(request):
        # The comparison reads the stored entries as they are: never shown in redacted mode.
        return PlainTextResponse("The compare page is not available while sessions are shown redacted",
                                 status_code=403)
    session = requested_session(state, request)
    if session is None:
        return to_full_id(state, request, request.path_params["session_id"], "/compare")
    p = request.query_params
    viewname = "model" if p.get("view") == "model" else "raw"
    try:
        # Read from the store as the command does (the same sides, prefixes and errors).
        result = diff_branches(state.store, session.session_id, p.get("a") or None, p.get("b") or None,
                               context=viewname == "model")
    except DiffInputError as exc:
        return PlainTextResponse(view.scrub_surrogates(f"Cannot compare: {exc}"), status_code=404)
    entries = session.whole().get_entries()  # whole entries: the pickers show summaries
    return HTMLResponse(page.render_compare_page(view.build_compare_page(result, session.session_id, viewname,
                                                                         entries)))
