"""Declared store traits and the optional capability protocols, and the one place a
store's traits are read (docs/decisions/store-traits.md).

Layers above ``stores/`` never test ``store.kind`` nor probe a store's attributes
(``getattr``/``hasattr``; a test over ``src/`` keeps it so): they ask
:func:`store_traits` for the facts of :class:`StoreTraits`, and ``isinstance``
against an optional capability protocol for methods: :class:`HeldLoads`,
:class:`RecentEntryTypes`, :class:`SessionAgents`, :class:`CreateMany`, :class:`OwnRunLock`, :class:`BulkWrites`,
:class:`EntrySummaries` here, and
``SessionFiles``, ``RawTexts``, ``Retention``, ``TeamAccess`` of
:mod:`sessiontree.stores.base`.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from sessiontree.core.usage import UsageQuery, UsageRow
from sessiontree.stores.base import SessionOutline
from sessiontree.stores.records import SessionSummaries

__all__ = [
    "UNDECLARED",
    "BulkWrites",
    "CreateMany",
    "DeclaresTraits",
    "EntrySummaries",
    "HeldLoads",
    "HeldRecords",
    "OwnRunLock",
    "RecentEntryTypes",
    "SessionAgents",
    "StoreTraits",
    "store_traits",
]


@dataclass(frozen=True)
class StoreTraits:
    """What a store states about itself that is not a method: read by the layers above
    ``stores/`` through :func:`sessiontree.stores.traits.store_traits`, never by testing
    ``store.kind`` (docs/architecture.md, "Store traits"). The defaults are the
    conservative answers for a store that declares nothing.

    Attributes:
        does_io: calls touch files, a database or the network (``False``: the memory
            store; the async driver then calls it inline instead of on a thread).
        loads_may_write: ``load`` may write (a JSONL load persists a format upgrade,
            docs/rules/decisions.md D-9); the async driver runs such loads on the
            store's one writer thread. ``False`` only where a load is a plain read that
            may run on a reader thread beside the writer (SQLite).
        opens_lazily: ``SessionManager.open`` reads only the active branch's context
            and the rest on first use (docs/stores.md, "Lazy open"): its partial reads
            (``read_outline``, ``read_entries_at``) are cheap and it never writes.
        settles_on_create: ``create_many`` takes ``settle=`` and writes the derived data
            of the group in its own transaction (:class:`CreateMany`).
        partial_reads: the store's :attr:`PartialReads.partial_reads`.
        persisted: sessions outlive the process (``False``: the memory store).
        run_lock_path: the file whose ``flock`` is the store's sync run lock (beside a
            SQLite file, inside a JSONL folder); ``None`` for a store without one (memory,
            an in-memory SQLite database) or that holds its own (:class:`OwnRunLock`).
        change_files: files whose (size, mtime) change whenever any stored session
            changes (a SQLite database and its ``-wal``); empty where a store has one
            file per session (``location``) or no files at all.
        own_folder: the folder holding the store's own session files (JSONL); ``sync``
            leaves it out of the folders it reads.
    """

    does_io: bool = True
    loads_may_write: bool = True
    opens_lazily: bool = False
    settles_on_create: bool = False
    partial_reads: bool = False
    persisted: bool = True
    run_lock_path: str | None = None
    change_files: tuple[str, ...] = ()
    own_folder: str | None = None


@runtime_checkable
class DeclaresTraits(Protocol):
    """A store that states its :class:`StoreTraits` (every store of this package does,
    through ``StoreBase``); :func:`sessiontree.stores.traits.store_traits` asks it."""

    def traits(self) -> StoreTraits:
        """The store's traits (cheap; may depend on where the store is, e.g. its path)."""
        ...


class HeldRecords(Protocol):
    """A session checked in full and held as its records' stored bytes (what
    :meth:`HeldLoads.load_held` returns; docs/decisions/held-records.md). ``url`` is the
    store's, for error messages."""

    url: str
    outline: SessionOutline
    position_of: dict[str, int]

    def read_entries_at(self, outline: SessionOutline, positions: Sequence[int]) -> list[dict[str, Any]]:
        """The entries at ``positions`` of ``outline``, parsed from the held bytes."""
        ...


@runtime_checkable
class HeldLoads(Protocol):
    """Optional capability: a whole load checked in full but kept as stored bytes,
    parsed per record on demand (SQLite; ``SessionManager.open(..., lazy=False)``)."""

    def load_held(self, session_id: str) -> HeldRecords | None:
        """The session held (:class:`HeldRecords`), or ``None`` when the store declines
        (the caller then loads the plain way).

        Raises:
            SessionNotFoundError: no such session.
            StorageError: the store could not be read.
        """
        ...


@runtime_checkable
class RecentEntryTypes(Protocol):
    """Optional capability: the entry types among a session's last records without
    reading them (SQLite); the lazy open asks whether a compaction is near the end."""

    def recent_entry_types(self, session_id: str, count: int) -> set[str]:
        """The entry types among the session's last ``count`` records (empty when none)."""
        ...


@runtime_checkable
class SessionAgents(Protocol):
    """Optional capability: which agent wrote each session, without building the listing
    (SQLite: one query of the stored headers); ``stats --by agent`` and ``--agent`` map
    each call's owner with it (docs/usage.md)."""

    def session_agents(self) -> dict[str, str]:
        """``{session id: agent}`` for exactly the sessions ``list_sessions(include_internal=True)``
        lists, each agent as the listing's ``agent`` (the header's ``foreign.agent``, else ``pi``)."""
        ...


@runtime_checkable
class CreateMany(Protocol):
    """Optional capability: several new sessions stored in one transaction (bulk import,
    sync). Whether it takes ``settle=`` is :attr:`StoreTraits.settles_on_create`."""

    def create_many(self, sessions: Iterable[tuple[dict[str, Any], Sequence[dict[str, Any]],
                                                   Sequence[bytes | None] | None]]) -> int:
        """Store the ``(header, entries, raw)`` triples; how many were stored.

        Raises:
            SessionExistsError: one of the ids is stored already; nothing was stored.
            StorageError: the write failed; nothing was stored.
        """
        ...


@runtime_checkable
class OwnRunLock(Protocol):
    """Optional capability: a store that holds its own sync run lock instead of a file's
    ``flock`` (PostgreSQL: an advisory lock per host, docs/postgres.md)."""

    def run_lock(self, on_busy: Callable[[], None] | None = None) -> AbstractContextManager[None]:
        """Hold the run lock for the ``with`` block; ``on_busy()`` once before waiting."""
        ...

@runtime_checkable
class BulkWrites(Protocol):
    """Optional capability: a run of writes committed in batches, each write still atomic
    in its own savepoint (SQLite; docs/sync.md, "Durability"), and the count of new
    sessions' entries it indexed from the entries in hand as it wrote them."""

    settled_in_hand: int

    def bulk_writes(self, *, seconds: float = 1.0, writes: int = 1000) -> AbstractContextManager[None]:
        """Batch the writes of the ``with`` block: a commit every ``writes`` writes or
        ``seconds`` seconds, and at its end.

        Raises:
            StorageError: a commit failed.
        """
        ...


@runtime_checkable
class EntrySummaries(Protocol):
    """Optional capability: a session's outline with each entry's timestamp and tool
    calls, and the sums of its billed usage records, read from derived data without
    parsing a record (SQLite from schema step ``m018_tool_calls``;
    docs/decisions/diff-summaries.md). ``diff`` counts a long shared history from it and
    reads in full only where the branches differ; a store without it is read whole and
    gives the same answer."""

    def read_summaries(self, session_id: str) -> SessionSummaries | None:
        """The session's :class:`~sessiontree.stores.records.SessionSummaries` (one
        snapshot), or ``None`` when this store cannot give them (an older schema opened
        read-only): the caller then reads the session whole.

        Raises:
            SessionNotFoundError: no such session.
            CorruptEntryError, InvalidSessionError: the header fails its checks.
            StorageError: the store could not be read.
        """
        ...

    def sum_usage(self, summaries: SessionSummaries, positions: Sequence[int], query: UsageQuery) -> list[UsageRow]:
        """``rows_from_records`` of the billed records of the entries at ``positions`` (in
        ascending order, each below ``summaries.settled``), for ``query``, from the usage
        ledger: the same rows in the same order.

        Raises:
            SessionChangedError: the session is no longer the one ``summaries`` saw.
            StorageError: the store could not be read (or a sum overflowed).
        """
        ...


#: The traits of a store that declares none: the conservative answers (it does I/O, a
#: load may write, nothing lazy, no run lock, no change signal).
UNDECLARED = StoreTraits()


#: Each store's traits once asked (a store's traits do not change while it is open): the
#: async driver asks on every call, and a protocol ``isinstance`` costs microseconds.
_DECLARED: weakref.WeakKeyDictionary[Any, StoreTraits] = weakref.WeakKeyDictionary()


def store_traits(store: object) -> StoreTraits:
    """The traits ``store`` declares (:meth:`DeclaresTraits.traits`), or :data:`UNDECLARED`
    for an object that declares none (a caller's own store class). Asked once per store."""
    try:
        return _DECLARED[store]
    except (KeyError, TypeError):  # not asked yet; or not weak-referenceable or hashable
        pass
    traits = store.traits() if isinstance(store, DeclaresTraits) else UNDECLARED
    try:
        _DECLARED[store] = traits
    except TypeError:
        pass
    return traits
