"""Applying a sync change inside a store (docs/sync.md): the header of a change, the
expected-state check of ``sync_commit``, the change applied through a store's own writes
or inside a database transaction, and whose ledger row a team member may read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from sessiontree.format import jsonio
from sessiontree.stores.base import (
    Provenance,
    SyncChange,
    SyncState,
)

__all__ = ["InTransactionWrites", "SessionWrites", "apply_sync_change", "apply_sync_change_in", "header_of", "ledger_row_owner", "sync_expected"]


def header_of(change: SyncChange) -> dict[str, Any]:
    """The header of a ``create``/``replace`` :class:`~sessiontree.stores.base.SyncChange`.

    Raises:
        ValueError: the change carries no header.
    """
    if change.header is None:
        raise ValueError(f"a {change.kind!r} sync change needs a header")
    return change.header


class SessionWrites(Protocol):
    """The public writes :func:`apply_sync_change` applies a change through (a store's, or
    its writes part's): ``SessionStore.create``, ``append`` and ``replace_session``."""

    def create(self, header: dict[str, Any], entries: Sequence[dict[str, Any]] = (),
               raw: Sequence[bytes | None] | None = None) -> None:
        """See ``SessionStore.create``."""
        ...

    def append(self, session_id: str, entries: Sequence[dict[str, Any]],
               raw: Sequence[bytes | None] | None = None) -> None:
        """See ``SessionStore.append``."""
        ...

    def replace_session(self, header: dict[str, Any], entries: Sequence[dict[str, Any]],
                        raw: Sequence[bytes | None] | None = None) -> None:
        """See ``SessionStore.replace_session``."""
        ...


def apply_sync_change(store: SessionWrites, change: SyncChange,
                      record_provenance: Callable[[list[Provenance]], None] | None = None) -> None:
    """Apply ``change`` through ``store``'s own writes: ``create`` and ``replace``
    (``replace_session``) with the change's header, ``append`` to its session; any
    other kind does nothing. A ``create``'s provenance is recorded after the session
    through ``record_provenance`` (``None``: the caller records it). The body of
    ``sync_commit`` for stores whose writes need no shared transaction (memory, JSONL),
    run under the caller's lock once :func:`sync_expected` has passed.

    Raises:
        SessionExistsError, SessionNotFoundError, InvalidSessionError, StorageError:
            as the write raises them; ``ValueError`` from :func:`header_of`.
    """
    if change.kind == "create":
        store.create(header_of(change), change.entries, change.raw)
        if change.provenance is not None and record_provenance is not None:
            record_provenance([change.provenance])
    elif change.kind == "append":
        store.append(change.session_id, change.entries, change.raw)
    elif change.kind == "replace":
        store.replace_session(header_of(change), change.entries, change.raw)


class InTransactionWrites(Protocol):
    """The write bodies a database store runs inside a caller's transaction ``conn`` (its
    writes part: :class:`~sessiontree.stores.sqlite.writes.SqliteWrites`, PostgreSQL's
    writes), which :func:`apply_sync_change_in` applies a sync change through."""

    def create_in(self, conn: Any, session_id: str, header: dict[str, Any], header_raw: bytes,
                  entries: Sequence[dict[str, Any]], texts: list[bytes]) -> Any:
        """Store one new session (its row, then its entries).

        Raises:
            SessionExistsError, InvalidSessionError: the id or an entry id is taken."""
        ...

    def append_in(self, conn: Any, session_id: str, entries: Sequence[dict[str, Any]], texts: list[bytes]) -> None:
        """Append entries to a stored session.

        Raises:
            SessionNotFoundError, InvalidSessionError: no such session, an id taken."""
        ...

    def replace_in(self, conn: Any, session_id: str, header: dict[str, Any], entries: Sequence[dict[str, Any]],
                   texts: list[bytes]) -> None:
        """Replace a stored session's header and entries.

        Raises:
            SessionNotFoundError: no such session."""
        ...


def apply_sync_change_in(writes: InTransactionWrites, conn: Any, change: SyncChange, header: dict[str, Any] | None,
                         texts: list[bytes], insert_provenance: Callable[[Any, list[Provenance]], None]) -> None:
    """Apply ``change`` inside the open transaction ``conn`` of a database store: the
    body of its ``sync_commit`` once :func:`sync_expected` has passed. ``create`` and
    ``replace`` need ``header`` (:func:`header_of`; ``None`` does nothing), ``texts``
    are the change's encoded entries, a ``create``'s provenance goes through
    ``insert_provenance(conn, records)`` in the same transaction; any other kind does nothing.

    ``writes`` is the store's writes part (:class:`InTransactionWrites`).

    Raises:
        SessionExistsError, SessionNotFoundError, InvalidSessionError, StorageError:
            as those writes raise them.
    """
    if change.kind == "create" and header is not None:
        writes.create_in(conn, change.session_id, header, jsonio.dumps(header), change.entries, texts)
        if change.provenance is not None:
            insert_provenance(conn, [change.provenance])
    elif change.kind == "append":
        writes.append_in(conn, change.session_id, change.entries, texts)
    elif change.kind == "replace" and header is not None:
        writes.replace_in(conn, change.session_id, header, change.entries, texts)


def sync_expected(expect: SyncState | None, current: SyncState | None) -> bool:
    """The compare-and-set test of ``sync_commit``: both ``None``, or the same file state."""
    if expect is None:
        return current is None
    return expect.same_file(current)


def ledger_row_owner(query: Any, owner: tuple[str | None, str | None],
                     cwd_filter: Callable[[Any], bool] | None) -> tuple[str | None, str | None] | None:
    """The ``(session_id, cwd)`` a usage-ledger row owned by ``owner`` (its owning
    session's id and cwd) is reported under for ``query`` (a
    :class:`~sessiontree.core.usage.UsageQuery`), or ``None`` when the query's
    ``cwd`` filter (``cwd_filter(cwd) -> bool``) drops it. A store-wide query that
    is not per session reports ``(None, None)``: rows of several owners become
    one, as :func:`~sessiontree.core.usage.aggregate` sums them (docs/usage.md).
    """
    if query.session_id is not None:
        return owner
    if query.cwd is not None and cwd_filter is not None and not cwd_filter(owner[1]):
        return None
    return owner if query.per_session else (None, None)
