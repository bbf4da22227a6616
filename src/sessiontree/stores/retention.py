"""Retention over any store (docs/team.md, "Retention"): the prune, holds and the deletion
log as functions of two narrow objects, the store's public reads and deletes
(:class:`RetainedStore`) and where it keeps holds and the log (:class:`HoldRecords`).

A prune chooses the sessions last active (``SessionInfo.modified``) before the cutoff, of
the agent its provenance names when ``agent`` is given, not held; counts each one's
entries and stored bytes; then deletes each (its derived rows go with it, as every
``delete`` does) and appends its line to the log right after, so a crash between leaves
at most one deletion unlogged, never a logged session undeleted. PostgreSQL answers the
same protocol in SQL (:mod:`sessiontree.stores.postgres.team`).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from sessiontree.core.listing import SessionInfo
from sessiontree.format.codec import ParsedSession
from sessiontree.stores.base import Provenance, PruneRecord

__all__ = ["HoldRecords", "RetainedStore", "holds", "prune", "set_hold", "user_name_here"]


class RetainedStore(Protocol):
    """What a prune reads and deletes: the store's own public methods
    (:class:`~sessiontree.stores.base.SessionStore`)."""

    def list_sessions(self, *, include_internal: bool = False) -> list[SessionInfo]:
        """Every session (see ``SessionStore.list_sessions``)."""
        ...

    def provenances(self) -> dict[str, Provenance]:
        """Every session's provenance (see ``SyncLedger.provenances``)."""
        ...

    def load(self, session_id: str, *, keep_raw: bool = True) -> ParsedSession:
        """A whole session (see ``SessionStore.load``)."""
        ...

    def delete(self, session_id: str) -> None:
        """Delete a session (see ``SessionStore.delete``)."""
        ...

    def exists(self, session_id: str) -> bool:
        """Whether the session is stored."""
        ...


class HoldRecords(Protocol):
    """Where a store keeps holds and the deletion log (a table, a file)."""

    def write_hold(self, session_id: str, held: bool) -> None:
        """Record (``held``) or drop the hold of a session.

        Raises:
            StorageError: the write failed."""
        ...

    def stored_holds(self) -> set[str]:
        """The held session ids as recorded (sessions deleted since included)."""
        ...

    def append_deletions(self, rows: list[dict[str, Any]]) -> None:
        """Append lines to the deletion log (keys ``deleted_at`` (ms), ``deleted_by``,
        ``owner``, ``session_id``, ``entries``, ``bytes``, ``reason``).

        Raises:
            StorageError: the write failed."""
        ...


def prune(store: RetainedStore, records: HoldRecords, older_than_ms: float, *, agent: str | None = None,
          dry_run: bool = False) -> list[PruneRecord]:
    """See :meth:`sessiontree.stores.base.Retention.prune` (module docstring for the order
    of deletes and log lines); every session of such a store is its user's.

    Raises:
        StorageError: a read, delete or log write failed (what was deleted before is logged).
    """
    held = set(holds(store, records))
    agents = {sid: record.agent for sid, record in store.provenances().items()} if agent else {}
    chosen = []
    for info in store.list_sessions(include_internal=True):
        if info.modified.timestamp() * 1000.0 >= older_than_ms or info.id in held:
            continue
        if agent and agents.get(info.id, "") != agent:
            continue
        chosen.append(info.id)
    pruned = []
    for session_id in sorted(chosen):
        parsed = store.load(session_id, keep_raw=True)
        size = len(parsed.header_raw) + sum(len(parsed.entry_bytes(i)) for i in range(len(parsed.entries)))
        pruned.append(PruneRecord(session_id, "", len(parsed.entries), size))
    if not dry_run:
        by = user_name_here()
        for record in pruned:
            store.delete(record.session_id)
            records.append_deletions([{"deleted_at": int(time.time() * 1000), "deleted_by": by, "owner": "",
                                       "session_id": record.session_id, "entries": record.entries,
                                       "bytes": record.bytes, "reason": "owner"}])
    return pruned


def set_hold(store: RetainedStore, records: HoldRecords, session_id: str, held: bool) -> bool:
    """See :meth:`sessiontree.stores.base.Retention.set_hold`: ``False`` for a session not stored."""
    if not store.exists(session_id):
        return False
    records.write_hold(session_id, held)
    return True


def holds(store: RetainedStore, records: HoldRecords) -> list[str]:
    """See :meth:`sessiontree.stores.base.Retention.holds` (holds of sessions deleted since
    are left out), sorted."""
    stored = records.stored_holds()
    return sorted(sid for sid in stored if store.exists(sid)) if stored else []


def user_name_here() -> str:
    """Who runs this process, for the deletion log (the login name; ``""`` when unknown)."""
    import getpass

    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return ""
