"""The listing query: one function for the listing filters of every edge (docs/listing.md,
"One listing query"; issue 40 item 3).

``sessiontree list``, the viewer's list page and MCP ``list_sessions`` parse their own
inputs (flags, query parameters, tool arguments) into a :class:`ListingFilter` and ask
:func:`list_sessions`; each filter has one meaning everywhere:

* ``cwd``: the project directory; a session matches when its header ``cwd`` resolves to
  the same absolute path (docs/rules/listing.md L.18, the rule ``search --cwd`` follows).
  Not a prefix: a session started in a subfolder is that subfolder's.
* ``since`` / ``until``: bounds on ``modified`` (the session's last activity,
  ``SessionInfo.modified``), inclusive, as instants; an edge that takes a day gives its
  first instant for ``since`` and its last for ``until`` (UTC). Never on ``created``: a
  session started last month and continued today is today's work.
* ``named_only``: sessions with a current name; ``agent``: the agent that wrote it;
  ``hosts`` / ``users``: the origin recorded at sync or import (docs/sync.md, "Provenance");
  ``include_internal``: internal workflow sessions too.

The order is the store's listing order, newest ``modified`` first (L.17).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sessiontree.stores.base import SessionListing

if TYPE_CHECKING:
    from sessiontree.core.listing import SessionInfo
    from sessiontree.stores.base import CancelEvent, ProgressCallback, SessionStore

__all__ = ["ListingFilter", "list_sessions"]


@dataclass(frozen=True)
class ListingFilter:
    """The filters of a listing, each with the one meaning of the module docstring.

    Attributes:
        cwd: project directory (``None``: every project).
        since, until: inclusive bounds on ``modified`` (aware datetimes; ``None``: open).
        named_only: only sessions with a current name.
        agent: only sessions of this agent (``SessionInfo.agent``); ``""``/``None``: any.
        hosts, users: only sessions whose recorded origin matches (empty: any).
        include_internal: internal workflow sessions too.
    """

    cwd: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    named_only: bool = False
    agent: str | None = None
    hosts: Sequence[str] = ()
    users: Sequence[str] = ()
    include_internal: bool = False


def list_sessions(store: SessionStore, wanted: ListingFilter = ListingFilter(), *,
                  infos: Sequence[SessionInfo] | None = None, on_progress: ProgressCallback | None = None,
                  cancel: CancelEvent | None = None) -> SessionListing:
    """The sessions of ``store`` that ``wanted`` keeps, newest first (module docstring).

    Args:
        store: the store to list (read only).
        wanted: the filters.
        infos: a listing already read (``SessionManager.list_all(store, include_internal=True)``,
            the viewer's cache); filtered instead of asking the store again.
        on_progress, cancel: as for ``SessionManager.list_all``.

    Returns:
        A :class:`SessionListing` whose ``skipped`` counts the sessions that could not be loaded.

    Raises:
        ListingCancelledError: ``cancel`` was set.
        StorageError: the store could not be read.
    """
    if infos is None:
        # The store's own listing (what SessionManager.list and list_all ask), without
        # importing the session manager: `sessiontree list` never opens a session (start-up).
        infos = store.list_sessions(cwd=os.path.abspath(wanted.cwd) if wanted.cwd is not None else None,
                                    include_internal=wanted.include_internal, on_progress=on_progress,
                                    cancel=cancel)
    skipped = infos.skipped if isinstance(infos, SessionListing) else 0
    rows = list(infos)
    if not wanted.include_internal:
        rows = [i for i in rows if not i.internal]
    if wanted.cwd is not None:
        from sessiontree.stores.listing import cwd_matches, resolve_cwd

        resolved = resolve_cwd(wanted.cwd)
        rows = [i for i in rows if cwd_matches(i.cwd, resolved)]
    if wanted.since is not None:
        rows = [i for i in rows if i.modified >= wanted.since]
    if wanted.until is not None:
        rows = [i for i in rows if i.modified <= wanted.until]
    if wanted.named_only:
        rows = [i for i in rows if i.name]
    if wanted.agent:
        rows = [i for i in rows if i.agent == wanted.agent]
    if wanted.hosts or wanted.users:
        from sessiontree.stores.origin import matching_sessions

        keep = matching_sessions(store.provenances(), wanted.hosts, wanted.users)
        rows = [i for i in rows if i.id in keep]
    return SessionListing(rows, skipped)
