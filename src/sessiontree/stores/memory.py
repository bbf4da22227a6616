"""``MemoryStore``: sessions held in process memory, no I/O at all (docs/rules/stores.md §3.1, spec:stores).

Invariants:

* Each entry is kept as its stored JSON text (``bytes``), exactly as the
  other stores keep it, so exporting a session gives the same bytes from
  every store. ``load`` parses that text again, so callers get fresh objects
  and can never alter what is stored by mutating them.
* Listing metadata is an :class:`~sessiontree.core.listing.InfoAccumulator` per
  session, updated from the appended entries only.
* One lock serializes every call, so a store may be shared between threads.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

from sessiontree.core.listing import InfoAccumulator, SessionInfo, is_classified
from sessiontree.core.search import SearchHit, make_filters, parse_query
from sessiontree.core.usage import UsageQuery, UsageRows, aggregate
from sessiontree.errors import InvalidSessionError, SessionExistsError, SessionNotFoundError, SyncConflictError
from sessiontree.format import jsonio
from sessiontree.format.codec import CURRENT_VERSION, ParsedSession
from sessiontree.stores import retention
from sessiontree.stores.base import (
    ArchivedFile,
    CancelEvent,
    ProgressCallback,
    Provenance,
    PruneRecord,
    SessionListing,
    StoreProblem,
    SyncChange,
    SyncState,
    TimeBound,
)
from sessiontree.stores.fallbacks import StoreBase
from sessiontree.stores.listing import Progress, cwd_matches, resolve_cwd, sort_listing
from sessiontree.stores.search import check_limit, scan
from sessiontree.stores.storable import (
    check_header,
    check_replacement_header,
    encode_entries,
    file_rule_problems,
    id_in_use_error,
)
from sessiontree.stores.syncing import apply_sync_change, sync_expected
from sessiontree.stores.traits import StoreTraits

__all__ = ["MemoryStore"]


@dataclass
class _Session:
    header_raw: bytes
    header: dict[str, Any]
    raw: list[bytes]
    ids: set[str]
    info: InfoAccumulator
    #: Store-wide write counter at the last mutation: recency for find_most_recent.
    write_seq: int
    #: Wall-clock seconds of the last mutation: ``modified`` when nothing else gives one.
    written_at: float


class MemoryStore(StoreBase):
    """A :class:`~sessiontree.stores.base.SessionStore` that never touches the filesystem.

    ``url`` is ``"memory:"`` and ``kind`` ``"memory"``. Listing rows use the
    session id as ``path`` (docs/rules/listing.md seed:listing).
    """

    url = "memory:"
    kind = "memory"

    def traits(self) -> StoreTraits:
        """No I/O, nothing outlives the process, a load never writes (docs/decisions/store-traits.md)."""
        return StoreTraits(does_io=False, loads_may_write=False, persisted=False, partial_reads=self.partial_reads)

    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.RLock()
        self._counter = itertools.count(1)
        #: ``sessiontree sync`` per-file state, by source path (docs/sync.md).
        self._sync: dict[str, SyncState] = {}
        #: ``sessiontree archive`` records, by (path, sha256), in first-write order (docs/agent-loop.md).
        self._archived: dict[tuple[str, bytes], ArchivedFile] = {}
        self._provenance: dict[str, Provenance] = {}
        #: Held session ids and the deletion log (docs/team.md, "Retention").
        self._holds = _MemoryHolds()

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._sessions)} sessions)"

    # -- writes ---------------------------------------------------------------------------

    def create(self, header: dict[str, Any], entries: Sequence[dict[str, Any]] = (),
               raw: Sequence[bytes | None] | None = None, *, path: str | None = None) -> None:
        """Store a new session (``path`` is ignored). See :meth:`SessionStore.create`.

        Raises:
            SessionExistsError: the id is already stored.
            InvalidSessionError: the header or an entry is not valid format 4.
        """
        session_id = check_header(header)
        texts = encode_entries(entries, raw)
        header_raw = jsonio.dumps(header)
        with self._lock:
            if session_id in self._sessions:
                raise SessionExistsError(session_id)
            session = _Session(header_raw=header_raw, header=jsonio.loads(header_raw), raw=[], ids=set(),
                               info=InfoAccumulator(), write_seq=0, written_at=0.0)
            self._add(session, entries, texts)
            self._sessions[session_id] = session

    def append(self, session_id: str, entries: Sequence[dict[str, Any]],
               raw: Sequence[bytes | None] | None = None) -> None:
        """Append entries, all or nothing. See :meth:`SessionStore.append`.

        Raises:
            SessionNotFoundError: no such id.
            InvalidSessionError: an entry is invalid or reuses an id of the session.
        """
        texts = encode_entries(entries, raw)
        with self._lock:
            session = self._require(session_id)
            for entry in entries:
                if entry["id"] in session.ids:
                    raise id_in_use_error(session_id, entry["id"])
            if texts:
                self._add(session, entries, texts)

    def _add(self, session: _Session, entries: Sequence[dict[str, Any]], texts: list[bytes]) -> None:
        # Account from the stored text, not the caller's objects: what is listed
        # must be what load() returns, even if the caller mutates its dicts later.
        # Everything is parsed before anything changes, so a bad text changes nothing.
        try:
            parsed = [jsonio.loads(text) for text in texts]
        except ValueError as exc:
            raise InvalidSessionError(f"stored entry text is not valid JSON ({exc})") from exc
        if not all(isinstance(entry, dict) for entry in parsed):
            raise InvalidSessionError("stored entry text is not a JSON object")
        for text, entry, given in zip(texts, parsed, entries, strict=True):  # one text per entry
            session.raw.append(text)
            session.ids.add(given["id"])
            session.info.add(entry)
        self._touch(session)

    def _touch(self, session: _Session) -> None:
        session.write_seq = next(self._counter)
        session.written_at = time.time()

    def replace_header(self, session_id: str, header: dict[str, Any]) -> None:
        """Replace the header (same id). See :meth:`SessionStore.replace_header`.

        Raises:
            SessionNotFoundError: no such id.
            InvalidSessionError: the header is invalid or has another id.
        """
        check_replacement_header(session_id, header)
        header_raw = jsonio.dumps(header)
        with self._lock:
            session = self._require(session_id)
            session.header_raw = header_raw
            session.header = jsonio.loads(header_raw)
            self._touch(session)

    def replace_session(self, header: dict[str, Any], entries: Sequence[dict[str, Any]],
                        raw: Sequence[bytes | None] | None = None) -> None:
        """Replace a session's header and entries at once. See :meth:`SessionStore.replace_session`.

        Raises:
            SessionNotFoundError: no session has the header's id.
            InvalidSessionError: the header or an entry is invalid.
        """
        session_id = check_header(header)
        texts = encode_entries(entries, raw)
        header_raw = jsonio.dumps(header)
        with self._lock:
            self._require(session_id)
            session = _Session(header_raw=header_raw, header=jsonio.loads(header_raw), raw=[], ids=set(),
                               info=InfoAccumulator(), write_seq=0, written_at=0.0)
            self._add(session, entries, texts)  # built aside: a bad text leaves the old session
            self._sessions[session_id] = session

    def sync_states(self) -> dict[str, SyncState]:
        """The recorded sync states by source path. See :meth:`SessionStore.sync_states`."""
        with self._lock:
            return dict(self._sync)

    def sync_commit(self, expect: SyncState | None, state: SyncState, change: SyncChange) -> None:
        """Apply ``change`` and record ``state`` under one lock, if the state is still ``expect``.
        See :meth:`SessionStore.sync_commit`.

        Raises:
            SyncConflictError, SessionExistsError, SessionNotFoundError, InvalidSessionError.
        """
        with self._lock:
            current = self._sync.get(state.path)
            if not sync_expected(expect, current):
                raise SyncConflictError(state.path)
            apply_sync_change(self, change, self.record_provenance)
            self._sync[state.path] = state

    def sync_shape(self, path: str) -> bytes | None:
        """The recorded file shape of ``path``. See :meth:`SessionStore.sync_shape`."""
        with self._lock:
            state = self._sync.get(path)
            return None if state is None else state.shape

    def archived_files(self) -> list[ArchivedFile]:
        """Every archive record, oldest first. See :meth:`SessionStore.archived_files`."""
        with self._lock:
            return list(self._archived.values())

    def record_archived(self, record: ArchivedFile) -> None:
        """Write an archive record. See :meth:`SessionStore.record_archived`."""
        with self._lock:
            self._archived[(record.path, record.sha256)] = record

    def provenances(self) -> dict[str, Provenance]:
        """Every recorded origin by session id. See :meth:`SessionStore.provenances`."""
        with self._lock:
            return dict(self._provenance)

    def record_provenance(self, records: Sequence[Provenance]) -> None:
        """Record each origin whose id has none yet (first wins).
        See :meth:`SessionStore.record_provenance`."""
        with self._lock:
            for record in records:
                self._provenance.setdefault(record.session_id, record)

    def delete(self, session_id: str) -> None:
        """Forget the session; a missing id does nothing."""
        with self._lock:
            self._sessions.pop(session_id, None)

    # -- retention (sessiontree.stores.retention over this store and its holds) -----------

    def prune(self, older_than_ms: float, *, agent: str | None = None, dry_run: bool = False,
              everyone: bool = False) -> list[PruneRecord]:
        """See :func:`sessiontree.stores.retention.prune` (``everyone`` changes nothing here)."""
        return retention.prune(self, self._holds, older_than_ms, agent=agent, dry_run=dry_run)

    def set_hold(self, session_id: str, held: bool) -> bool:
        """See :func:`sessiontree.stores.retention.set_hold`."""
        return retention.set_hold(self, self._holds, session_id, held)

    def holds(self) -> list[str]:
        """See :func:`sessiontree.stores.retention.holds`."""
        return retention.holds(self, self._holds)

    def deletion_log(self) -> list[dict[str, Any]]:
        """The deletion log, oldest first. See :meth:`Retention.deletion_log`."""
        return self._holds.deletion_log()

    # -- reads ----------------------------------------------------------------------------

    def _require(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionNotFoundError(session_id, self.url)
        return session

    def read(self, session_id: str) -> ParsedSession:
        """Same as :meth:`load`: a memory store never has anything to upgrade."""
        return self.load(session_id)

    def load(self, session_id: str, *, keep_raw: bool = True) -> ParsedSession:
        """The session as fresh objects parsed from the stored text (``keep_raw``: see
        ``SessionStore.load``).

        Raises:
            SessionNotFoundError: no such id.
        """
        with self._lock:
            session = self._require(session_id)
            header_raw = session.header_raw
            stored = list(session.raw)
        # ``stored`` is this call's own copy, so it can be the result's ``raw`` as it is
        # (the cast only widens the item type for ParsedSession; nothing is copied again).
        raw: list[bytes | None] = cast("list[bytes | None]", stored) if keep_raw else [None] * len(stored)
        loads = jsonio.loads
        return ParsedSession(
            header=loads(header_raw),
            entries=[loads(text) for text in stored],
            raw=raw,
            header_raw=header_raw,
            source_version=CURRENT_VERSION,
            upgraded=False,
            lines=list(range(2, len(raw) + 2)),
            path=None,
        )

    def exists(self, session_id: str) -> bool:
        """Whether the id is stored."""
        with self._lock:
            return session_id in self._sessions

    def session_ids(self) -> list[str]:
        """Every stored id, in creation order."""
        with self._lock:
            return list(self._sessions)

    def location(self, session_id: str) -> str | None:
        """Always ``None``: memory sessions have no file."""
        return None

    def list_sessions(self, *, cwd: str | None = None, include_internal: bool = False,
                      on_progress: ProgressCallback | None = None,
                      cancel: CancelEvent | None = None) -> SessionListing:
        """Listing rows, newest ``modified`` first. See :meth:`SessionStore.list_sessions`.

        Nothing here can become unloadable behind the store's back, so
        ``skipped`` is always 0.

        Raises:
            ListingCancelledError: ``cancel`` was set before or during the listing.
        """
        wanted = resolve_cwd(cwd) if cwd is not None else None
        with self._lock:
            snapshot = [(s.header, InfoAccumulator.from_state(s.info.to_state()), tuple(s.info.texts), s.written_at,
                         len(s.raw)) for s in self._sessions.values()]
        progress = Progress(len(snapshot), on_progress, cancel)
        rows: list[SessionInfo] = []
        for header, info, texts, written_at, count in snapshot:
            if (include_internal or not is_classified(header)) and cwd_matches(header.get("cwd"), wanted):
                rows.append(info.to_info(header, header["id"], fallback_mtime=written_at,
                                         text_loader=partial(" ".join, texts), entry_count=count))
            progress.step()
        return sort_listing(rows)

    def find_most_recent(self, cwd: str | None = None, include_internal: bool = False) -> str | None:
        """Id of the session written last (optionally only for ``cwd``), or ``None``."""
        wanted = resolve_cwd(cwd) if cwd is not None else None
        with self._lock:
            best: _Session | None = None
            for session in self._sessions.values():
                if not include_internal and is_classified(session.header):
                    continue
                if not cwd_matches(session.header.get("cwd"), wanted):
                    continue
                if best is None or session.write_seq > best.write_seq:
                    best = session
            return best.header["id"] if best is not None else None

    def search(self, query: str, *, cwd: str | None = None, roles: Iterable[str] | None = None,
               since: TimeBound | None = None, until: TimeBound | None = None, session: str | None = None,
               limit: int | None = 50) -> list[SearchHit]:
        """Search by scanning every session's entries. See :meth:`SessionStore.search`.

        Raises:
            SearchQueryError, ValueError: see :meth:`SessionStore.search`.
        """
        parsed = parse_query(query)
        filters = make_filters(cwd=cwd, roles=roles, since=since, until=until, session=session)
        limit = check_limit(limit)
        with self._lock:
            snapshot = [(s.header_raw, list(s.raw)) for sid, s in self._sessions.items()
                        if filters.session is None or sid == filters.session]

        def sessions() -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
            for header_raw, raw in snapshot:
                yield jsonio.loads(header_raw), [jsonio.loads(text) for text in raw]

        return scan(sessions(), parsed, filters, limit)

    def reindex(self, session_id: str | None = None) -> int:
        """Recompute each session's listing state from its stored records. See
        :meth:`SessionStore.reindex`. Other derived data of this store (search,
        usage) is computed on demand from the entries, so there is nothing else to rebuild.

        Raises:
            InvalidSessionError: a stored record cannot be parsed.
        """
        with self._lock:
            ids = list(self._sessions) if session_id is None else [i for i in (session_id,) if i in self._sessions]
            for sid in ids:
                session = self._sessions[sid]
                info = InfoAccumulator()
                for text in session.raw:
                    info.add(jsonio.loads(text))
                session.info = info
            return len(ids)

    def usage(self, query: UsageQuery | None = None) -> UsageRows:
        """Billed usage computed from the stored entries (no ledger is kept). See
        :meth:`SessionStore.usage`."""
        query = query or UsageQuery()
        with self._lock:
            snapshot = [(s.header, list(s.raw)) for s in self._sessions.values()]
        wanted = resolve_cwd(query.cwd) if query.cwd is not None else None
        sessions = ((header, [jsonio.loads(text) for text in raw]) for header, raw in snapshot)
        return UsageRows(aggregate(sessions, query, lambda cwd: cwd_matches(cwd, wanted)))

    def verify(self, on_progress: ProgressCallback | None = None) -> list[StoreProblem]:
        """Re-parse every stored record and apply the file checker's rules to each
        session (:func:`~sessiontree.stores.storable.file_rule_problems`); returns the problems."""
        problems: list[StoreProblem] = []
        with self._lock:
            sessions = list(self._sessions.items())
        for done, (session_id, session) in enumerate(sessions, 1):
            damaged = False
            for index, text in enumerate([session.header_raw, *session.raw]):
                try:
                    record = jsonio.loads(text)
                except ValueError as exc:
                    problems.append(StoreProblem("invalid-record", f"stored record is not valid JSON ({exc})",
                                                 session_id=session_id, line=index + 1))
                    damaged = True
                    continue
                if not isinstance(record, dict):
                    problems.append(StoreProblem("invalid-record", "stored record is not a JSON object",
                                                 session_id=session_id, line=index + 1))
                    damaged = True
            if not damaged:  # the file rules, as every store applies them (docs/check.md)
                data = b"\n".join([session.header_raw, *session.raw]) + b"\n"
                problems.extend(file_rule_problems(data, session_id, session_id))
            if on_progress is not None:
                on_progress(done, len(sessions))
        return problems

    def close(self) -> None:
        """Nothing to release; the sessions stay available."""


class _MemoryHolds:
    """Holds and the deletion log of a :class:`MemoryStore`, in memory (its
    :class:`~sessiontree.stores.retention.HoldRecords`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: set[str] = set()
        self._deletions: list[dict[str, Any]] = []

    def write_hold(self, session_id: str, held: bool) -> None:
        """Record or drop a hold."""
        with self._lock:
            (self._held.add if held else self._held.discard)(session_id)

    def stored_holds(self) -> set[str]:
        """The held session ids."""
        with self._lock:
            return set(self._held)

    def append_deletions(self, rows: list[dict[str, Any]]) -> None:
        """Append copies of ``rows`` to the log."""
        with self._lock:
            self._deletions.extend(dict(row) for row in rows)

    def deletion_log(self) -> list[dict[str, Any]]:
        """Copies of the log's lines, oldest first."""
        with self._lock:
            return [dict(row) for row in self._deletions]
