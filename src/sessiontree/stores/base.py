"""The ``SessionStore`` protocol: the contract between the session layer and storage.

It is composed of capability protocols, each documented where it is defined:
:class:`StoreCore` (sessions created, read, appended, replaced, deleted, listed,
verified), :class:`PartialReads` (the tree's shape and chosen records),
:class:`DerivedData` (search, usage and their upkeep) and :class:`SyncLedger`
(what ``sync`` took from each file). The value types they exchange are defined in
:mod:`sessiontree.stores.records` and importable from here.

Every store keeps sessions as a format-4 header plus entries in insertion
order, each entry with its JSON text verbatim (docs/rules/format.md spec:data-model,
docs/rules/stores.md spec:stores). Invariants every
implementation upholds, checked by one conformance suite:

* A mutating call returns only after it committed; when it raises
  :class:`~sessiontree.errors.StorageError` nothing of it is visible.
* ``append`` is all-or-nothing for the entries of one call, and appends from
  several processes never lose or interleave entries.
* ``create`` refuses an existing id with ``SessionExistsError``; ``load`` of a
  missing id raises ``SessionNotFoundError``; ``delete`` of a missing id does
  nothing.
* Listing answers from per-session metadata where the store has it and never
  modifies a session. Sessions that cannot be loaded are left out, and the
  returned :class:`SessionListing` says how many (``skipped``).
* A store opened read-only (``readonly=True``) never creates, initialises,
  migrates or otherwise changes anything; its writes raise ``StorageError``.
* ``verify()`` reads everything and changes nothing (``check --store``).

Optional capabilities sit beside them, each a small runtime-checkable protocol that
callers test with ``isinstance`` (never ``getattr`` or ``store.kind``):
:class:`RawTexts` (a session's stored texts without parsing its entries),
:class:`SessionFiles`, :class:`Retention` and :class:`TeamAccess` here, and
``HeldLoads``, ``RecentEntryTypes``, ``SessionAgents``, ``CreateMany`` and ``OwnRunLock`` in
:mod:`sessiontree.stores.traits`, beside the facts a store states about itself that
are not methods (``StoreTraits``: does it do I/O, may a load write, ...;
docs/decisions/store-traits.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from sessiontree.core.search import SearchHit
from sessiontree.core.usage import UsageQuery, UsageRows
from sessiontree.format.codec import ParsedSession
from sessiontree.stores.records import (
    ArchivedFile,
    AuditRecord,
    Provenance,
    PruneRecord,
    SessionListing,
    SessionOutline,
    SessionTexts,
    StoreProblem,
    SyncChange,
    SyncState,
    TeamMember,
)

__all__ = [
    "ArchivedFile",
    "AuditRecord",
    "CancelEvent",
    "DerivedData",
    "PartialReads",
    "ProgressCallback",
    "Provenance",
    "PruneRecord",
    "RawTexts",
    "Retention",
    "SessionFiles",
    "SessionListing",
    "SessionOutline",
    "SessionStore",
    "SessionTexts",
    "StoreCore",
    "StoreProblem",
    "SyncChange",
    "SyncLedger",
    "SyncState",
    "TeamAccess",
    "TeamMember",
    "TimeBound",
]

#: A time bound of a search (``since``, ``until``): a :class:`~datetime.datetime` (naive =
#: UTC), an ISO-8601 string (``"2026-01-31"`` is midnight UTC) or milliseconds since the epoch
#: (:func:`sessiontree.core.search.make_filters` reads it).
TimeBound = datetime | str | float

#: ``on_progress(loaded, total)``, called once per session examined.
ProgressCallback = Callable[[int, int], None]
#: Anything with ``is_set()``, e.g. :class:`threading.Event`.
CancelEvent = threading.Event


@runtime_checkable
class RawTexts(Protocol):
    """Optional capability: a session's stored texts without parsing its entries
    (docs/stores.md, "Raw texts"). For callers that only copy the stored bytes
    (``restore`` and ``archive`` give agent files back: docs/agent-loop.md); a caller
    tests ``isinstance(store, RawTexts)`` and falls back to :meth:`StoreCore.read`.
    """

    def read_texts(self, session_id: str) -> SessionTexts:
        """The session's header and each entry's stored text and type (:class:`SessionTexts`),
        never writing.

        Each record gets the checksum check :meth:`StoreCore.read` gives it, with the
        same error for the same damage (the header's first, then the first record in
        file order); entries are not parsed or validated: a record whose bytes match
        their checksum is the text that was validated when it was written. SQLite and
        PostgreSQL read the texts and the copied ``type`` column in one snapshot;
        other stores (and an older SQLite schema without checksums) read the session
        whole and give its texts (``StoreBase.read_texts``).

        Raises:
            SessionNotFoundError: no such id.
            CorruptEntryError: a record's bytes differ from the checksum recorded when
                it was written (the header included).
            InvalidSessionError: the header is not a valid header; on stores that read
                the session whole, also a record that is not a valid entry.
            StorageError: the store could not be read.
        """
        ...


@runtime_checkable
class StoreCore(Protocol):
    """The core of every store: sessions created, read whole, appended to, replaced,
    deleted, listed and verified (the conformance suite's contract, module docstring).

    Attributes:
        url: the store's URL (``sqlite:///...``, ``jsonl:///...``, ``memory:``,
            ``postgresql://...`` without its password).
        kind: ``"sqlite"``, ``"jsonl"``, ``"memory"`` or ``"postgres"``.
    """

    url: str
    kind: str

    def create(self, header: dict[str, Any], entries: Sequence[dict[str, Any]] = (),
               raw: Sequence[bytes | None] | None = None, *, path: str | None = None) -> None:
        """Store a new session: its header and initial entries, atomically.

        Args:
            header: a format-4 header; ``header["id"]`` is the session id.
            entries: initial entries in order (may be empty).
            raw: optional stored JSON text per entry (``None`` items are serialized).
            path: JSONL stores only: the exact file to write (``open_file``);
                other stores ignore it.

        Raises:
            SessionExistsError: the id is already in the store.
            StorageError: the write failed; nothing was stored.
        """
        ...

    def load(self, session_id: str, *, keep_raw: bool = True) -> ParsedSession:
        """The session's header and entries (format 4).

        A JSONL store that finds an older format persists the format-4 upgrade
        atomically under the file lock before returning (docs/rules/decisions.md D-9).

        With ``keep_raw=False`` :attr:`ParsedSession.raw` holds ``None`` for every
        entry (:meth:`ParsedSession.entry_bytes` then serializes on demand), for a
        caller that keeps only the entries (``SessionManager.open``): the stored
        texts are not held, and SQLite frees each as soon as it is parsed.

        Raises:
            SessionNotFoundError: no such id.
            InvalidSessionError: the stored session is invalid.
            StorageError: persisting an upgrade failed.
        """
        ...

    def read(self, session_id: str) -> ParsedSession:
        """Like :meth:`load`, but never writes: for read-only paths (show,
        context, export, check), which must leave the stored session exactly as
        it is (docs/rules/decisions.md D-9). An older JSONL file is upgraded in memory only.

        Raises:
            SessionNotFoundError, InvalidSessionError: as :meth:`load`.
            StorageError: the session could not be read.
        """
        ...

    def append(self, session_id: str, entries: Sequence[dict[str, Any]],
               raw: Sequence[bytes | None] | None = None) -> None:
        """Append entries to an existing session, all or nothing.

        Args:
            raw: optional stored JSON text per entry (``None`` items are
                serialized), so entries read from a file keep their bytes.

        Raises:
            SessionNotFoundError: no such id.
            StorageError: the write failed; nothing was appended.
        """
        ...

    def replace_session(self, header: dict[str, Any], entries: Sequence[dict[str, Any]],
                        raw: Sequence[bytes | None] | None = None) -> None:
        """Replace an existing session's header and all its entries, atomically: a
        reader sees the old session or the new one, never a mix (``sync --replace``).

        Raises:
            SessionNotFoundError: no session has ``header["id"]``.
            InvalidSessionError: the header or an entry is invalid, or two entries share an id.
            StorageError: the write failed; the session is as it was.
        """
        ...

    def replace_header(self, session_id: str, header: dict[str, Any]) -> None:
        """Replace the session's header (same id), atomically.

        Raises:
            SessionNotFoundError, StorageError.
        """
        ...

    def delete(self, session_id: str) -> None:
        """Remove the session and its entries; a missing id does nothing.

        Raises:
            StorageError: the removal failed.
        """
        ...

    def exists(self, session_id: str) -> bool:
        """Whether the id is in the store."""
        ...

    def session_ids(self) -> list[str]:
        """Every session id in the store (any order), internal ones included."""
        ...

    def location(self, session_id: str) -> str | None:
        """The JSONL file of the session, or ``None`` for stores without files."""
        ...

    def list_sessions(self, *, cwd: str | None = None, include_internal: bool = False,
                      on_progress: ProgressCallback | None = None,
                      cancel: CancelEvent | None = None) -> SessionListing:
        """Listing rows, newest ``modified`` first (docs/rules/listing.md).

        Returns:
            A :class:`SessionListing`: the rows, and in ``skipped`` how many
            sessions were left out because they cannot be loaded.

        Args:
            cwd: keep only sessions whose header cwd resolves to this absolute path.
            include_internal: include classified workflow sessions.
            on_progress: called ``(loaded, total)`` once per session examined.
            cancel: when set (before or during), the listing stops.

        Raises:
            ListingCancelledError: ``cancel`` was set; no partial list.
        """
        ...

    def find_most_recent(self, cwd: str | None = None, include_internal: bool = False) -> str | None:
        """Id of the most recently written session (optionally for ``cwd``), or ``None``."""
        ...

    def verify(self, on_progress: ProgressCallback | None = None) -> list[StoreProblem]:
        """Check everything stored without changing anything (``sessiontree check --store``).

        Args:
            on_progress: called ``(checked, total)`` once per session (or file).

        Returns:
            Every problem found, in store order; ``[]`` for a healthy store.

        Raises:
            StorageError: the store could not be read at all.
        """
        ...

    def close(self) -> None:
        """Release connections and handles. Idempotent."""
        ...


@runtime_checkable
class PartialReads(Protocol):
    """Reads of part of a session: the shape of its tree without the content, and
    chosen records (docs/stores.md, "Partial reads"). Every store answers them;
    ``StoreBase`` gives the generic fallbacks that read the whole session.

    Attributes:
        partial_reads: whether :meth:`read_skeleton` and :meth:`read_entries`
            cost less than a whole read (SQLite, PostgreSQL: indexed columns
            and lookups; :meth:`read_outline` and :meth:`read_entries_at` are
            cheap on SQLite only, and the lazy open uses them there only).
            ``False`` where they fall back to reading the whole session
            (JSONL, memory): a caller that needs many windows of one session
            then reads it once instead (the web viewer does).
    """

    partial_reads: bool

    def read_skeleton(self, session_id: str) -> ParsedSession:
        """The session's header and its entries reduced to skeletons, never writing.

        One of the two partial reads of a session (see :meth:`read_outline` for
        how they relate): the one for displaying a whole tree, with
        :meth:`read_entries` for the records of a window.

        Each entry is :func:`sessiontree.core.tree.skeleton_entry` of the stored
        entry (type, id, parent, timestamp, a message's role, label/leaf
        targets, names): enough to lay out the tree, find the loaded leaf,
        walk branches and read labels and the name, without the content. For
        viewers of large sessions (docs/viewer.md): SQLite and PostgreSQL
        answer from indexed columns plus the few fields they extract, without
        parsing each record; other stores fall back to :meth:`read` and strip
        (``StoreBase.read_skeleton``). ``raw`` holds ``None`` per entry.

        Raises:
            SessionNotFoundError: no such id.
            InvalidSessionError, StorageError: as :meth:`read`.
        """
        ...

    def read_outline(self, session_id: str) -> SessionOutline:
        """The session's header and the ids, parent ids and types of its entries, in
        file order, parsing no entry record where the store can (never writes).

        The two partial reads of a session, and when to use which:

        * :meth:`read_outline` with :meth:`read_entries_at` (the lazy
          ``SessionManager.open``): the least a store can read (no timestamp, role
          or label; the SQLite outline costs about half a skeleton), plus each
          record's key and stamp, so that the records read later are checked to
          be the ones the outline saw (``SessionChangedError`` otherwise).
          For code that builds state from a snapshot of the session.
        * :meth:`read_skeleton` with :meth:`read_entries` (the web viewer): the
          fields a tree display needs, and records looked up by id in the
          session as it is at each call, unknown ids skipped; for a reader that
          tracks changes itself (the viewer compares file stamps and entry counts).

        Neither pair stands in for the other at no cost (a skeleton needs record
        heads an outline does not read; ``read_entries`` through
        ``read_entries_at`` would need a fresh outline, every row, per window),
        so both stay; they share the code instead. Both record reads check each
        record the way :meth:`load` does (one code path in the SQLite store:
        checksum, parse, validation, which error wins); the generic
        ``read_entries`` is ``read_entries_at`` of a fresh outline
        (docs/stores.md, "Partial reads").

        The SQLite store answers from its ``entries`` columns in one read
        snapshot (the header's CRC checked, no entry's: only
        :meth:`read_entries_at` returns records). Other stores fall back to
        :meth:`read` (``StoreBase.read_outline``) and keep the parsed entries in
        the outline, so reading from it later costs nothing.

        Raises:
            SessionNotFoundError: no such id.
            CorruptEntryError: the header's bytes fail their checksum.
            InvalidSessionError, StorageError: as :meth:`read`.
        """
        ...

    def read_entries(self, session_id: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        """The full stored entries with the given ids, in the order of ``ids``, never writing.

        Unknown ids are skipped. For reading a window of a branch whose ids
        came from :meth:`read_skeleton`; SQLite and PostgreSQL look the ids up
        by index, other stores fall back to :meth:`read`. The by-id form of
        :meth:`read_entries_at` on the session as it is now (no snapshot: see
        :meth:`read_outline` for when to use which); the generic fallback is
        exactly that, SQLite shares its record checks.

        Raises:
            SessionNotFoundError: no such id.
            CorruptEntryError: a returned record's checksum fails (SQLite,
                PostgreSQL: this wins over a parse error, and the first failing
                record in file order is reported, as :meth:`read_entries_at`).
            InvalidSessionError, StorageError: as :meth:`read` (SQLite and
                PostgreSQL validate each returned record as :meth:`load` does;
                other stores the whole session).
        """
        ...

    def read_entries_at(self, outline: SessionOutline, positions: Sequence[int]) -> list[dict[str, Any]]:
        """The full entries at ``positions`` (indexes into ``outline``) of the session as
        the outline saw it, in the order of ``positions``; never writes.

        Each record gets the checks :meth:`load` gives it: its checksum
        (``CorruptEntryError``), then parsing and entry validation
        (``InvalidSessionError`` with the record's line, ``position + 2``).
        Among the records of one call a checksum failure wins over a parse
        error, and the first failing position in file order is reported.
        Entries appended after the outline was read are not part of it and
        never returned.

        The snapshot form of :meth:`read_entries` (see :meth:`read_outline` for
        when to use which).

        Raises:
            SessionChangedError: a record at one of ``positions`` is no longer
                the one the outline saw (the session was replaced or deleted
                since; detected by id, parent, type and ``stamps``).
            CorruptEntryError, InvalidSessionError: as above.
            IndexError: a position outside ``outline``.
            StorageError: the store could not be read.
        """
        ...


@runtime_checkable
class DerivedData(Protocol):
    """What a store computes from its entries: search, usage, and their upkeep
    (docs/stores.md, "Derived data"). Results never depend on whether deferred
    work was done: queries see it pending.
    """

    def search(self, query: str, *, cwd: str | None = None, roles: Iterable[str] | None = None,
               since: TimeBound | None = None, until: TimeBound | None = None, session: str | None = None,
               limit: int | None = 50) -> list[SearchHit]:
        """Full-text search over every stored session, internal ones included (docs/search.md).

        Matching is :mod:`sessiontree.core.search`'s rule on every store: each
        term of the query (whitespace-separated; ``"a phrase"`` is one term)
        must occur in an entry's indexed text as a case-folded substring. The
        same query gives the same set of hits on every store; the order
        (``rank``) is bm25 on SQLite, ``ts_rank`` on PostgreSQL and
        :func:`~sessiontree.core.search.scan_score` on the scanning stores.

        Args:
            query: the query text.
            cwd: only sessions whose header cwd resolves to this directory.
            roles: keep entries whose role or entry type is one of these.
            since, until: entry timestamps in ``[since, until)``; a
                ``datetime`` (naive = UTC), an ISO-8601 string or ms.
            session: only this exact session id.
            limit: at most this many hits (``None``: all).

        Returns:
            :class:`~sessiontree.core.search.SearchHit` objects, best first.

        Raises:
            SearchQueryError: an empty or over-long query.
            ValueError: a bad ``limit``, ``since`` or ``until``.
            StorageError: the store could not be read.
        """
        ...

    def settle_derived(self, *, on_progress: Callable[[int, int], None] | None = None) -> int:
        """Finish derived work the store's writes deferred to stay cheap (SQLite leaves
        written entries' search text pending and merges it in bulk, in short
        transactions; docs/search.md, "When the index is merged"). Bulk writers
        (``sessiontree import``, sync) call it when they are done, so no search pays
        for their backlog. Results never depend on it: queries see pending work.
        ``on_progress(done, total)``, when given, is called after each transaction
        with the entries settled so far and the entries pending at the start.

        Returns:
            The number of entries processed (0 when nothing was deferred).

        Raises:
            StorageError: the store is read-only or the write failed; nothing changed.
        """
        ...

    def settle_search_tail(self, on_merge: Callable[[int], None] | None = None) -> int:
        """Before a search by a front end (``sessiontree search``, the viewer): merge
        the search text the store's writes left pending when there is so much of it
        that every search would scan it (SQLite: more than
        :data:`~sessiontree.stores.sqlite.search.MAX_PENDING` records), so this search
        and the next ones read the index (docs/search.md, "When the index is merged").

        Opportunistic and bounded: a store opened read-only merges through a second,
        writable handle when it can, never migrating a schema; when it cannot write
        (permissions, another writer holding the lock past a short wait) nothing
        happens and the search scans the tail, with the same hits. Stores that
        defer nothing (JSONL, memory, PostgreSQL) return 0.

        Args:
            on_merge: called with the number of pending records just before a merge
                (to tell the user why the search pauses).

        Returns:
            The number of records merged (0: nothing was due, or it could not be done).
        """
        ...

    def reindex(self, session_id: str | None = None) -> int:
        """Recompute the store's derived data (listing metadata, search index,
        usage ledger) from the stored entries alone (docs/stores.md, "Derived data").

        Args:
            session_id: one session, or ``None`` for every session.

        Returns:
            The number of sessions rebuilt (0 for an unknown id).

        Raises:
            InvalidSessionError: a stored record cannot be parsed.
            StorageError: the rebuild could not be written; nothing changed.
        """
        ...

    def usage(self, query: UsageQuery | None = None) -> UsageRows:
        """Billed usage summed over de-duplicated records (docs/usage.md), the input of
        :mod:`sessiontree.usage` and ``sessiontree stats``.

        Every store follows the rules of :mod:`sessiontree.core.usage` (what a
        billed record is, its content key, one bill per key across the store,
        the earliest session owning it); the SQLite store answers from its usage
        ledger without reading entries, the others compute the same rows from
        the entries (:func:`~sessiontree.core.usage.aggregate`).

        Args:
            query: time range, project, per-session or one-session mode
                (:class:`~sessiontree.core.usage.UsageQuery`); ``None``: everything.

        Returns:
            :class:`~sessiontree.core.usage.UsageRows`: sums per group (tokens,
            calls, recorded cost in nano-dollars), and in ``skipped`` how many
            sessions could not be read (their usage is missing).

        Raises:
            StorageError: the store could not be read.
        """
        ...


@runtime_checkable
class SyncLedger(Protocol):
    """What ``sessiontree sync`` records per source file (docs/sync.md), with its file
    shape, and what ``sessiontree archive`` did with agent files (docs/agent-loop.md):
    not derived data; a sync state is written in the same atomic step as the entries
    it accounts for.
    """

    def sync_states(self) -> dict[str, SyncState]:
        """Every recorded :class:`SyncState`, by source path (``{}`` when none or read-only
        on a store that has none yet)."""
        ...

    def sync_commit(self, expect: SyncState | None, state: SyncState, change: SyncChange) -> None:
        """Apply ``change`` and record ``state`` for ``state.path`` in one atomic step,
        only if the recorded state of that path is still ``expect``.

        The compare-and-set is what keeps two ``sync`` processes from both
        appending the same entries: the second finds the state moved on.

        Raises:
            SyncConflictError: the recorded state is not ``expect`` (compared with
                :meth:`SyncState.same_file`; ``None`` = no state); nothing written.
            SessionExistsError: ``create`` of an id already stored.
            SessionNotFoundError: ``append``/``replace`` of a missing session.
            InvalidSessionError: an invalid entry, or an entry id already in the session.
            StorageError: the write failed; nothing was written.
        """
        ...

    def sync_shape(self, path: str) -> bytes | None:
        """The encoded file shape recorded for ``path`` (:attr:`SyncState.shape`), or ``None``
        when the path has no state or its state has no shape.

        Raises:
            StorageError: the store could not be read.
        """
        ...

    def archived_files(self) -> list[ArchivedFile]:
        """Every archive record (:class:`ArchivedFile`), oldest first; one per
        ``(path, sha256)``, the latest write of it. ``[]`` when none (or on a read-only
        store that has no such table yet).

        Raises:
            StorageError: the store could not be read.
        """
        ...

    def record_archived(self, record: ArchivedFile) -> None:
        """Write ``record``, replacing the record of the same ``(path, sha256)`` if any
        (``archive`` writes ``pending`` before the move and ``done`` after it).

        Raises:
            StorageError: the write failed (a read-only store included); nothing was written.
        """
        ...

    def provenances(self) -> dict[str, Provenance]:
        """Every recorded :class:`Provenance`, by session id (``{}`` when none, or on a
        read-only store that has no such table yet). May hold ids of deleted sessions.

        Raises:
            StorageError: the store could not be read.
        """
        ...

    def record_provenance(self, records: Sequence[Provenance]) -> None:
        """Record each origin whose session id has none yet, in one atomic step; an id
        that already has one keeps it (first wins: docs/sync.md, "Provenance").

        Raises:
            StorageError: the write failed (a read-only store included); nothing was written.
        """
        ...


@runtime_checkable
class SessionStore(StoreCore, PartialReads, DerivedData, SyncLedger, Protocol):
    """Persistent (or in-memory) home of sessions: the contract between the
    session layer and storage, composed of :class:`StoreCore`,
    :class:`PartialReads`, :class:`DerivedData` and :class:`SyncLedger`. Every
    store implements all of them; code that needs only one capability may ask
    for that protocol instead.
    """

@runtime_checkable
class SessionFiles(Protocol):
    """Optional part of the protocol: a store that keeps each session in a file of one directory (JSONL).

    The manager asks for it (``isinstance(store, SessionFiles)``) to answer
    ``get_session_dir`` and ``get_session_file``; a store without files
    (SQLite, PostgreSQL, memory) does not have these members.

    Attributes:
        directory: the absolute session directory.
    """

    directory: str

    def path_for(self, header: dict[str, Any]) -> str:
        """The file :meth:`SessionStore.create` would write for a new session with this header."""
        ...


# -- retention and teams (docs/team.md) -------------------------------------------------------


@runtime_checkable
class Retention(Protocol):
    """Optional capability: deleting old sessions with a record (``sessiontree prune``,
    ``hold``, ``unhold``; docs/team.md, "Retention"). Every store of this package has it.

    Age is the session's last activity (``SessionInfo.modified``); the agent is the one
    its provenance names (``""`` when none); held sessions are never pruned. Each prune
    that deletes appends one line per session to the store's deletion log: ids, counts,
    sizes, when, by whom, never content.
    """

    def prune(self, older_than_ms: float, *, agent: str | None = None, dry_run: bool = False,
              everyone: bool = False) -> list[PruneRecord]:
        """Delete whole sessions (and their derived rows) last active before ``older_than_ms``
        (Unix ms), of ``agent`` when given, sparing held ones; log each deletion. ``dry_run``:
        only say which. ``everyone``: a team store's admin prunes every owner's (elsewhere
        every session is the caller's and it changes nothing). Returns the sessions by id."""
        ...

    def set_hold(self, session_id: str, held: bool) -> bool:
        """Hold the session (prune spares it) or let it go; whether the session exists."""
        ...

    def holds(self) -> list[str]:
        """The held sessions' ids, sorted."""
        ...

    def deletion_log(self) -> list[dict[str, Any]]:
        """The deletion log, oldest first: ``{deleted_at (Unix ms), deleted_by, owner,
        session_id, entries, bytes, reason}``."""
        ...


@runtime_checkable
class TeamAccess(Protocol):
    """Optional capability: a store private by construction, with people in roles
    (docs/team.md). The PostgreSQL store has it; commands ask ``isinstance(store,
    TeamAccess)``."""

    def team_add(self, name: str, role: str, password: str | None = None) -> None:
        """Create (or take) login role ``name`` in the group of ``role``."""
        ...

    def team_list(self) -> list[TeamMember]:
        """The people of the team, by name."""
        ...

    def team_remove(self, name: str) -> None:
        """Take ``name`` out of the team (its sessions stay, readable by no one else)."""
        ...

    def team_usage(self, *, by_user: bool = False) -> list[dict[str, Any]]:
        """Usage aggregates without content (``by_user``: leads and admins)."""
        ...

    def team_sessions(self, *, by_user: bool = False) -> list[dict[str, Any]]:
        """Session counts without content (``by_user``: leads and admins)."""
        ...

    def team_open(self, session_id: str, reason: str) -> tuple[int, ParsedSession]:
        """Read one session through the audited door: ``(audit record id, session)``."""
        ...

    def team_audit(self) -> list[AuditRecord]:
        """The accesses to the caller's sessions (and the caller's own), oldest first."""
        ...

