"""The viewer's audited door: ``/team/open/{session_id}`` (docs/team.md, "The audited door";
docs/viewer.md). The viewer's equivalent of ``sessiontree team open SESSION --reason TEXT``.

* Without a reason (or without the door's stamp) the page is a form asking why: no
  content is read and nothing is recorded.
* With a reason and the stamp, :meth:`~sessiontree.stores.base.TeamAccess.team_open`
  writes and commits the audit record (who, when, which session, why) first, and only
  then reads the session; the page shows the record's number, then the header and the
  entries as JSON, escaped, as ``team open`` prints them. A refusal (not an admin, no
  such session) shows the store's message and no content.

The viewer is read-only (``GET``/``HEAD``): the form submits with ``GET``, as the
search does. An audit record is not a change to any session, and a record too many is
the safe side of a door. Two things keep another site from making an admin's browser
write records with a reason it chose: the form carries a stamp (an HMAC of the session
id under a key made when the routes are), which a page of another origin cannot read,
and a request the browser marks as coming from another site (``Sec-Fetch-Site``) is
refused before anything is written.

A store without people in roles (SQLite, JSONL, memory) has no door: 404.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from sessiontree.errors import StorageError
from sessiontree.stores.base import SessionStore, TeamAccess
from sessiontree.web import page as pages
from sessiontree.web.views.common import scrub_surrogates

__all__ = ["PATH", "team_door_routes"]

#: The door's route (one session per page).
PATH = "/team/open/{session_id}"

#: ``Sec-Fetch-Site`` values of a request the door answers (absent: an older browser
#: or a script, which the stamp still guards).
_SAME_SITE = ("same-origin", "none")


def team_door_routes(store: SessionStore) -> list[Route]:
    """The door's route over ``store`` (register it in the viewer's routes table).

    Returns:
        ``[Route(PATH, ...)]``; the handler answers 404 on a store that is not a
        :class:`~sessiontree.stores.base.TeamAccess`.
    """
    key = secrets.token_bytes(32)

    def stamp(session_id: str) -> str:
        return hmac.new(key, session_id.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()

    def door(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        if not isinstance(store, TeamAccess):
            return _page({"state": "none", "session_id": session_id}, 404)
        reason = request.query_params.get("reason", "")
        given = request.query_params.get("door", "")
        if not reason.strip() or not hmac.compare_digest(given.encode(), stamp(session_id).encode()):
            return _page({"state": "form", "session_id": session_id, "door": stamp(session_id), "reason": reason,
                          "missing": bool(given) and not reason.strip()}, 200)
        if request.headers.get("sec-fetch-site", "none") not in _SAME_SITE:
            return _page({"state": "refused", "session_id": session_id,
                          "message": "team open from another site is refused"}, 403)
        try:
            audit_id, parsed = store.team_open(session_id, reason)
        except (ValueError, StorageError) as exc:
            return _page({"state": "refused", "session_id": session_id, "message": str(exc)}, 403)
        content = json.dumps({"audit": audit_id, "header": parsed.header, "entries": parsed.entries},
                             ensure_ascii=False, indent=1)
        return _page({"state": "open", "session_id": session_id, "audit": audit_id, "reason": reason,
                      "content": content}, 200)

    return [Route(PATH, door)]


def _page(values: dict[str, Any], status: int) -> Response:
    html = pages.environment().get_template("teamdoor.html").render(inline=False, **values)
    return HTMLResponse(scrub_surrogates(html), status_code=status, headers={"Cache-Control": "no-store"})
