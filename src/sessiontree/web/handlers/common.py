"""What the viewer's handlers share: query parameters as values, JSON answers, the
session a path names, and the redirect from a typed id prefix (the rule of every edge)."""

from __future__ import annotations

import json
from datetime import date
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from sessiontree.errors import AmbiguousSessionPrefixError, SessionNotFoundError, UnknownSessionPrefixError
from sessiontree.format.idprefix import resolve_session_prefix
from sessiontree.session.reading import ReadOnlySession
from sessiontree.web import views as view
from sessiontree.web.state import ViewerState

__all__ = ["as_date", "as_int", "flag", "json_response", "requested_session", "to_full_id", "where"]


def flag(value: str | None) -> bool:
    """A query flag: anything but absent, empty, ``0``, ``false`` or ``off`` is on."""
    return value not in (None, "", "0", "false", "off")


def as_date(value: str | None) -> date | None:
    """A ``YYYY-MM-DD`` parameter, ``None`` when absent or not a date."""
    try:
        return date.fromisoformat(value) if value else None
    except ValueError:
        return None


def as_int(value: str | None, default: int) -> int:
    """An integer parameter, ``default`` when absent or not a number."""
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def where(request: Request) -> str:
    """The request's path and query, as a page links back to itself."""
    return str(request.url.path) + (f"?{request.url.query}" if request.url.query else "")


def json_response(value: Any) -> Response:
    """A JSON response of session data (lone surrogates replaced: they cannot be sent as UTF-8)."""
    return Response(view.scrub_surrogates(json.dumps(value, ensure_ascii=False, separators=(",", ":"))),
                    media_type="application/json")


def requested_session(state: ViewerState, request: Request) -> ReadOnlySession | None:
    """The session the path's ``session_id`` names whole, from the request's read service
    (plain or redacted); ``None`` when the store has no such session.

    Raises:
        InvalidSessionError, StorageError: the stored session cannot be read.
    """
    try:
        return state.sessions(request).get(request.path_params["session_id"])
    except SessionNotFoundError:
        return None


def to_full_id(state: ViewerState, request: Request, typed: str, page_suffix: str = "") -> Response:
    """A redirect from what a person typed (a prefix, or PARENT/AGENT for a subagent session)
    to the page under the session's whole id: the rule of every edge (format/idprefix.py);
    404 with the candidates when it names none or several."""
    try:
        found = resolve_session_prefix(typed, state.store.session_ids())
    except UnknownSessionPrefixError:
        return PlainTextResponse("No such session", status_code=404)
    except AmbiguousSessionPrefixError as exc:
        return PlainTextResponse(view.scrub_surrogates(
            f"Ambiguous session id prefix: it matches {', '.join(exc.candidates[:5])}"), status_code=404)
    query = f"?{request.url.query}" if request.url.query else ""
    return RedirectResponse(f"/s/{quote(found)}{page_suffix}{query}", status_code=302)
