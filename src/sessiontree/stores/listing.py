"""The listing rules every store shares: the cwd filter (docs/rules/listing.md L.18), progress
reporting and cancellation (L.21, docs/rules/manager.md §3.5) and the order, newest
``modified`` first, stable (L.17).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from sessiontree.core.listing import SessionInfo
from sessiontree.errors import ListingCancelledError
from sessiontree.stores.base import (
    CancelEvent,
    ProgressCallback,
    SessionListing,
)

__all__ = ["Progress", "cwd_matches", "resolve_cwd", "sort_listing"]


def resolve_cwd(cwd: str) -> str:
    """The absolute, normalized form of ``cwd`` (like Node's ``path.resolve``; no symlinks)."""
    return os.path.abspath(cwd)


def cwd_matches(header_cwd: Any, resolved_cwd: str | None) -> bool:
    """The cwd filter of docs/rules/listing.md L.18.

    Args:
        header_cwd: the header's ``cwd`` value (any JSON value).
        resolved_cwd: the wanted cwd, already passed through :func:`resolve_cwd`,
            or ``None`` for no filter.

    Returns:
        True when there is no filter, or the header cwd is a non-empty string
        resolving to the same absolute path.
    """
    if resolved_cwd is None:
        return True
    return isinstance(header_cwd, str) and bool(header_cwd) and os.path.abspath(header_cwd) == resolved_cwd


class Progress:
    """Progress reporting and cancellation for one listing run.

    ``step()`` is called once per session examined (skipped ones included),
    reporting ``(loaded, total)``; the cancel event is checked before the
    first session and after each one, so a callback that sets it stops the
    listing at once.
    """

    def __init__(self, total: int, on_progress: ProgressCallback | None, cancel: CancelEvent | None) -> None:
        self.total = total
        self.loaded = 0
        self._on_progress = on_progress
        self._cancel = cancel
        self.check()

    def check(self) -> None:
        """Raise :class:`ListingCancelledError` if the cancel event is set."""
        if self._cancel is not None and self._cancel.is_set():
            raise ListingCancelledError()

    def step(self) -> None:
        """Count one examined session, report it, then check for cancellation."""
        self.loaded += 1
        if self._on_progress is not None:
            self._on_progress(self.loaded, self.total)
        self.check()


def sort_listing(infos: Iterable[SessionInfo], skipped: int = 0) -> SessionListing:
    """Rows newest ``modified`` first; ties keep their input order (docs/rules/listing.md L.17).

    ``skipped`` (sessions left out because they cannot be loaded) is carried
    on the returned :class:`~sessiontree.stores.base.SessionListing`.
    """
    return SessionListing(sorted(infos, key=lambda info: info.modified, reverse=True), skipped)
