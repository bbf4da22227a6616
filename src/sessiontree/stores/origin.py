"""Who and where "here" is, for the :class:`~sessiontree.stores.base.Provenance` a sync or
import records (docs/sync.md, "Provenance").

* the host name: ``$SESSIONTREE_SYNC_HOST``, else :func:`socket.gethostname` (the same
  name a PostgreSQL store keys its sync states by);
* the machine id: ``$SESSIONTREE_MACHINE_ID`` when set (simulations, containers that
  share a machine id); else ``/etc/machine-id`` (or ``/var/lib/dbus/machine-id``) hashed,
  so the raw id, which systemd asks not to expose, never leaves the machine; else an id
  generated once and kept in the user's config folder (platformdirs);
* the user name: :func:`getpass.getuser`, ``""`` when it cannot be told.

Every value is made storable text: NUL and lone surrogates become U+FFFD (PostgreSQL
``text`` holds neither).
"""

from __future__ import annotations

import getpass
import hashlib
import os
import socket
import time
import uuid
from collections.abc import Iterable, Mapping

import platformdirs

from sessiontree.stores.base import Provenance

__all__ = ["Here", "here", "host_name", "machine_id", "matching_sessions", "origin_here", "storable"]

_MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")


def storable(value: str) -> str:
    """``value`` with NUL and lone surrogates replaced by U+FFFD."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return value.replace("\x00", "\ufffd")


def host_name() -> str:
    """This host's name for provenance and PostgreSQL sync states (never empty)."""
    return storable(os.environ.get("SESSIONTREE_SYNC_HOST") or socket.gethostname()) or "localhost"


def _hashed(raw: str) -> str:
    # Namespaced, as systemd's sd_id128_get_machine_app_specific does: the id stays stable
    # for us and cannot be matched against the raw machine id.
    return hashlib.sha256(b"sessiontree-machine:" + raw.encode("utf-8", "replace")).hexdigest()[:16]


def machine_id() -> str:
    """A stable id of this machine: 16 hex digits (or ``$SESSIONTREE_MACHINE_ID`` as given).

    Never raises: when no id can be read or kept, the host name is hashed instead.
    """
    given = os.environ.get("SESSIONTREE_MACHINE_ID")
    if given:
        return storable(given)
    for name in _MACHINE_ID_FILES:
        try:
            with open(name, encoding="ascii", errors="replace") as handle:
                raw = handle.read().strip()
        except OSError:
            continue
        if raw:
            return _hashed(raw)
    kept = os.path.join(platformdirs.user_config_dir("sessiontree"), "machine-id")
    try:
        with open(kept, encoding="ascii", errors="replace") as handle:
            raw = handle.read().strip()
        if raw:
            return _hashed(raw)
    except OSError:
        pass
    raw = uuid.uuid4().hex
    try:
        os.makedirs(os.path.dirname(kept), exist_ok=True)
        # O_EXCL: of two processes generating at once, the first file wins and both read it.
        fd = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(raw + "\n")
    except FileExistsError:
        try:
            with open(kept, encoding="ascii", errors="replace") as handle:
                raw = handle.read().strip() or raw
        except OSError:
            pass
    except OSError:
        raw = "host:" + host_name()
    return _hashed(raw)


def _user() -> str:
    try:
        return storable(getpass.getuser())
    except (OSError, KeyError, ImportError):
        return ""


#: ``(host, machine id, user)`` of this process, as :func:`here` reads them.
Here = tuple[str, str, str]


def here() -> Here:
    """``(host name, machine id, user name)`` now: what :func:`origin_here` records. A
    caller recording many origins in one run (a sync) reads them once: each read is a
    system call, a file read and a hash (about 17 µs an origin, 1% of a first sync)."""
    return host_name(), machine_id(), _user()


def origin_here(session_id: str, *, agent: str = "", source: str = "", where: Here | None = None) -> Provenance:
    """A :class:`Provenance` for ``session_id`` stored now from this host.

    Args:
        session_id: the session.
        agent: the agent whose file it is (``pi``, ``atomic``, ``claude``, ``codex``) or ``""``.
        source: the file (absolute) or ``<store url>#<id>``.
        where: :func:`here` read once by the caller (``None``: read now).
    """
    host, machine, user = here() if where is None else where
    return Provenance(session_id, host, machine, user, storable(agent), storable(source), int(time.time() * 1000))


def matching_sessions(origins: Mapping[str, Provenance], hosts: Iterable[str] = (),
                      users: Iterable[str] = ()) -> set[str]:
    """The ids whose origin matches: its host is one of ``hosts`` (host names compare
    without regard to case, as DNS does; a machine id matches too) and its user one of
    ``users`` (exactly); an empty filter matches everything. A session without an
    origin never matches a non-empty filter."""
    host_set = {host.casefold() for host in hosts}
    user_set = set(users)
    return {session_id for session_id, origin in origins.items()
            if (not host_set or origin.host.casefold() in host_set or origin.machine_id in host_set)
            and (not user_set or origin.user in user_set)}
