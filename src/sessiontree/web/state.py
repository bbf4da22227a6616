"""The viewer's typed state: how it was started, the store, its sessions and its listing.

One :class:`ViewerState` per app (:func:`sessiontree.web.app.create_app`); every page's
handler (:mod:`sessiontree.web.routes`) takes it as its first argument. Sessions come from
the read service (:class:`sessiontree.session.reading.ReadOnlySessions`), one for plain
pages and one that reads each session whole and redacted (docs/secrets.md); both answer
with the leaf as an argument, so handlers running at once on Starlette's thread pool
share them without a lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from starlette.requests import Request

from sessiontree.core.listing import SessionInfo
from sessiontree.session.manager import SessionManager
from sessiontree.session.reading import ReadOnlySessions
from sessiontree.stores.base import SessionStore

__all__ = ["LIST_TTL_SECONDS", "LOOPBACK_HOSTS", "MIN_REREAD_SECONDS", "WILDCARD_HOSTS", "ListingCache",
           "ViewerConfig", "ViewerState"]

#: Host names a loopback server answers to.
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
#: Addresses that bind every interface: the server cannot know the names it is reached by.
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})
#: Stores without a change token are read again at most this often (seconds).
MIN_REREAD_SECONDS = 0.5
#: Listing rows are reused this long (seconds) between list requests.
LIST_TTL_SECONDS = 2.0
#: The reader's choice of the ``redacted`` toggle ("1"/"0"), suffixed ``_PORT`` like the token
#: cookie; absent: :attr:`ViewerConfig.redact`.
REDACT_COOKIE = "sessiontree_redacted"
#: Sessions each read service keeps parsed.
CACHED_SESSIONS = 4


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


class ListingCache:
    """The store's listing rows (internal sessions included), reused for
    :data:`LIST_TTL_SECONDS` between list requests. Thread-safe."""

    def __init__(self, store: SessionStore, ttl: float = LIST_TTL_SECONDS) -> None:
        self.store = store
        self.ttl = ttl
        self._rows: Sequence[SessionInfo] | None = None
        self._at = -1e9
        self._lock = threading.Lock()

    def rows(self) -> Sequence[SessionInfo]:
        """The listing, read again when older than the time to live.

        Raises:
            StorageError: the store could not be read.
        """
        with self._lock:
            now = time.monotonic()
            if self._rows is None or now - self._at > self.ttl:
                self._rows = SessionManager.list_all(self.store, include_internal=True)
                self._at = now
            return self._rows


@dataclass
class ViewerState:
    """What every handler of the viewer reads: built once by ``create_app``.

    Attributes:
        store: the store shown (read-only; owned by the caller).
        config: how the app was started.
        plain: the read service for plain pages (skeletons where the store reads them
            cheaply: docs/viewer.md, "What is sent when").
        redacting: the read service for redacted pages (each session read whole and
            redacted once, so placeholders are the same in every window).
        listing: the listing rows of the list page and the usage dashboard.
    """

    store: SessionStore
    config: ViewerConfig
    plain: ReadOnlySessions = field(init=False)
    redacting: ReadOnlySessions = field(init=False)
    listing: ListingCache = field(init=False)

    def __post_init__(self) -> None:
        self.plain = ReadOnlySessions(self.store, "outline", size=CACHED_SESSIONS, min_reread=MIN_REREAD_SECONDS)
        self.redacting = ReadOnlySessions(self.store, "outline", size=CACHED_SESSIONS, redact=True,
                                          min_reread=MIN_REREAD_SECONDS)
        self.listing = ListingCache(self.store)

    @property
    def redact_cookie(self) -> str:
        """The ``redacted`` toggle's cookie name (per port: two viewers on one host keep their own)."""
        return f"{REDACT_COOKIE}_{self.config.port}"

    def redacted(self, request: Request) -> bool:
        """Whether ``request`` is shown redacted: the reader's toggle, else the config's default."""
        value = request.cookies.get(self.redact_cookie)
        return self.config.redact if value not in ("0", "1") else value == "1"

    def sessions(self, request: Request) -> ReadOnlySessions:
        """The read service ``request`` is answered from (:meth:`redacted` or not)."""
        return self.redacting if self.redacted(request) else self.plain
