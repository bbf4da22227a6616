"""Helpers shared by the store implementations (not part of the public API).

What every store must agree on lives here once, so the conformance suite
sees the same behaviour from each backend:

* what a storable header and entry look like (format 4, docs/rules/format.md A.3,
  D.18, D.19) and how an entry becomes its stored JSON text;
* the cwd filter of listings (docs/rules/listing.md L.18);
* progress reporting and cancellation of listings (docs/rules/listing.md L.21, docs/rules/manager.md §3.5);
* listing order: newest ``modified`` first, stable (docs/rules/listing.md L.17);
* the "did the stored session change" hint that the MCP server's and the viewer's
  session caches share (:func:`change_hint`);
* what every store class repeats: the context-manager methods, ``__repr__``,
  the header-id check of ``replace_header``, the "id already used" error
  (:class:`StoreBase`, :func:`check_replacement_header`, :func:`id_in_use_error`),
  so a new store writes only its storage.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from sessiontree.core.listing import SessionInfo
from sessiontree.errors import InvalidSessionError, ListingCancelledError, SessionExistsError, StoreOpenError
from sessiontree.format import jsonio
from sessiontree.format.codec import CURRENT_VERSION, CheckedTexts, validate_entry, validate_header
from sessiontree.stores.base import (
    CancelEvent,
    ProgressCallback,
    Provenance,
    SessionListing,
    SyncChange,
    SyncState,
)
from sessiontree.stores.blobref import resolve_blobs
from sessiontree.stores.traits import StoreTraits, store_traits

__all__ = [
    "InTransactionWrites",
    "Progress",
    "StoreBase",
    "apply_sync_change",
    "apply_sync_change_in",
    "change_hint",
    "check_header",
    "check_known_steps",
    "check_replacement_header",
    "cwd_matches",
    "encode_entries",
    "file_rule_problems",
    "header_of",
    "id_in_use_error",
    "prepare_creates",
    "resolve_cwd",
    "sort_listing",
    "stored_header",
    "sync_expected",
]


def check_header(header: Any) -> str:
    """Validate a header a store is asked to write; return its session id.

    Stores only ever write format 4, so older or early-4 headers are refused
    here rather than written and silently upgraded on the next read.

    Raises:
        InvalidSessionError: not a valid header (docs/rules/format.md D.18), or not version 4.
        UnsupportedVersionError: an unrecognized version.
    """
    version = validate_header(header)
    if version != CURRENT_VERSION:  # 4.0 is 4: JSON has one number type
        raise InvalidSessionError(f"a store writes format {CURRENT_VERSION} headers only (got version {version})")
    if "timestamp" in header or "parentSession" in header:
        raise InvalidSessionError('an early version-4 header ("timestamp"/"parentSession") must be upgraded first')
    session_id: str = header["id"]  # validate_header: a string
    return session_id


def stored_header(header: dict[str, Any], session_id: str, where: str) -> dict[str, Any]:
    """``header``, a header row a database store read back (the record before the
    entries, JSONL line 1), after checking it is still a valid format-4 header of
    ``session_id``: its bytes may match their checksum and still have been rewritten
    by hand (``{}``, another session's header), and every reader takes ``type``, ``id``
    and the rest for granted (docs/stores.md, "Record checksums").

    Raises:
        InvalidSessionError: not a valid header (docs/rules/format.md D.18), not
            version 4, or its ``id`` is not the key it is stored under; located at
            ``where``, line 1.
    """
    try:
        version = validate_header(header)
    except InvalidSessionError as exc:
        raise InvalidSessionError(f"stored header: {exc.reason}", where, 1) from None
    if version != CURRENT_VERSION:
        raise InvalidSessionError(f"stored header: version {version}, not {CURRENT_VERSION}", where, 1)
    if header["id"] != session_id:
        raise InvalidSessionError(f"stored header: its id {header['id']!r} is not the session's {session_id!r}",
                                  where, 1)
    return header


def validated(entry: dict[str, Any], where: str, line: int) -> dict[str, Any]:
    """``entry`` after :func:`~sessiontree.format.validate_entry` (docs/rules/format.md:
    every stored record is a valid entry), its error located where the store holds
    the record: ``where`` (``<store url>#<session id>``) and the record's 1-based
    line in the session's JSONL form.

    Raises:
        InvalidSessionError: not a valid entry (reason from ``validate_entry``).
    """
    try:
        validate_entry(entry)
    except InvalidSessionError as exc:
        raise InvalidSessionError(exc.reason, where, line) from None
    return entry


def encode_entries(entries: Sequence[dict[str, Any]], raw: Sequence[bytes | None] | None = None) -> list[bytes]:
    """Validate entries and return the JSON text to store for each.

    Args:
        entries: entry objects in order.
        raw: optional stored JSON text per entry; ``None`` items (or no
            ``raw`` at all) are serialized with :func:`sessiontree.format.jsonio.dumps`.

    Returns:
        One ``bytes`` per entry, without newline.

    An entry holding :class:`~sessiontree.stores.blobref.BlobRef` values (read with
    image references) is written with their strings, loaded from their store.

    When ``raw`` is a :class:`~sessiontree.format.codec.CheckedTexts` for this very
    ``entries`` list, the entries the reader checked as they are (all but
    ``raw.unchecked``) are not checked again and their texts are taken as they are;
    the duplicate-id check runs for every entry (docs/stores.md, "Import").

    Raises:
        InvalidSessionError: an entry fails docs/rules/format.md D.19, two entries of the
            batch share an id, ``raw`` has the wrong length, or a raw text is
            not a single line.
        ValueError: an entry holds values that are not JSON data.
        CorruptEntryError, StorageError: a referenced image could not be loaded.
    """
    if raw is not None and len(raw) != len(entries):
        raise InvalidSessionError(f"raw has {len(raw)} items for {len(entries)} entries")
    seen: set[str] = set()
    out: list[bytes] = []
    # Entries the reader checked as they are now (docs/stores.md, "Import"): each rule once.
    unchecked = raw.unchecked if isinstance(raw, CheckedTexts) and raw.entries is entries else None
    for index, entry in enumerate(entries):
        text = raw[index] if raw is not None else None
        if unchecked is None or index in unchecked:
            validate_entry(entry)
        elif text is not None:
            # Read from one line of a file: a valid entry's text, no newline in it.
            entry_id = entry["id"]
            if entry_id in seen:
                raise InvalidSessionError(f'duplicate entry id "{entry_id}"')
            seen.add(entry_id)
            out.append(text)
            continue
        entry_id = entry["id"]
        if entry_id in seen:
            raise InvalidSessionError(f'duplicate entry id "{entry_id}"')
        seen.add(entry_id)
        if text is None:
            try:
                text = jsonio.dumps(entry)
            except ValueError:
                # An entry read with image references (docs/blobs.md), e.g. copied into a
                # branched session: written with its images' strings, loaded now.
                resolved = resolve_blobs(entry)
                if resolved is entry:
                    raise
                text = jsonio.dumps(resolved)
        else:
            text = bytes(text)
            # A newline inside a record would split it into two JSONL lines.
            if b"\n" in text:
                raise InvalidSessionError(f'raw text of entry "{entry_id}" contains a newline')
        out.append(text)
    return out


PreparedCreate = tuple[str, dict[str, Any], bytes, Sequence[dict[str, Any]], list[bytes]]
"""One session of a database store's ``create_many``, checked and encoded before its
transaction opens: ``(session_id, header, header_json, entries, entry_texts)``."""


def prepare_creates(sessions: Iterable[tuple[dict[str, Any], Sequence[dict[str, Any]],
                                             Sequence[bytes | None] | None]],
                    check_id: Callable[[str, str], object] | None = None) -> list[PreparedCreate]:
    """Check and encode the ``(header, entries, raw)`` triples of ``create_many`` before
    any write, so a bad batch stores nothing (docs/stores.md).

    Args:
        sessions: the triples, as for ``create``.
        check_id: called as ``check_id(id, "session id")`` / ``check_id(id, "entry id")``
            for a store whose ids must pass a further check; it raises to refuse one.

    Returns:
        One :data:`PreparedCreate` per session, in order.

    Raises:
        InvalidSessionError: a header or entry is invalid (or ``check_id`` refuses an id).
        SessionExistsError: the batch holds one session id twice.
    """
    prepared: list[PreparedCreate] = []
    seen: set[str] = set()
    for header, entries, raw in sessions:
        session_id = check_header(header)
        if check_id is not None:
            check_id(session_id, "session id")
        if session_id in seen:
            raise SessionExistsError(session_id)
        seen.add(session_id)
        texts = encode_entries(entries, raw)
        if check_id is not None:
            for entry in entries:
                check_id(entry["id"], "entry id")
        prepared.append((session_id, header, jsonio.dumps(header), entries, texts))
    return prepared


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


def header_of(change: SyncChange) -> dict[str, Any]:
    """The header of a ``create``/``replace`` :class:`~sessiontree.stores.base.SyncChange`.

    Raises:
        ValueError: the change carries no header.
    """
    if change.header is None:
        raise ValueError(f"a {change.kind!r} sync change needs a header")
    return change.header


def apply_sync_change(store: Any, change: SyncChange) -> None:
    """Apply ``change`` through ``store``'s own writes: ``create`` and ``replace``
    (``replace_session``) with the change's header, ``append`` to its session; any
    other kind does nothing. A ``create``'s provenance is recorded after the session. The body of ``sync_commit`` for stores whose writes
    need no shared transaction (memory, JSONL), run under the caller's lock once
    :func:`sync_expected` has passed.

    Raises:
        SessionExistsError, SessionNotFoundError, InvalidSessionError, StorageError:
            as the write raises them; ``ValueError`` from :func:`header_of`.
    """
    if change.kind == "create":
        store.create(header_of(change), change.entries, change.raw)
        if change.provenance is not None:
            store.record_provenance([change.provenance])
    elif change.kind == "append":
        store.append(change.session_id, change.entries, change.raw)
    elif change.kind == "replace":
        store.replace_session(header_of(change), change.entries, change.raw)


def change_hint(store: Any, session_id: str) -> tuple[tuple[int, int] | None, ...] | None:
    """A cheap "did the stored session change" signal for a cache of read sessions.

    The (size, mtime in ns) of each file that holds ``session_id`` (``None`` in place of a
    file that cannot be stat-ed): its own file where the store has one per session, else a
    file-backed SQLite database and its ``-wal`` file. ``None`` for a store without files
    (memory, PostgreSQL, in-memory SQLite): the caller then re-reads on a timer instead.
    """
    path = store.location(session_id)
    paths: list[str] = [path] if path else list(store_traits(store).change_files)
    if not paths:
        return None
    stats: list[tuple[int, int] | None] = []
    for name in paths:
        try:
            st = os.stat(name)
            stats.append((st.st_size, st.st_mtime_ns))
        except OSError:
            stats.append(None)
    return tuple(stats)


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


#: Bytes of a message record that a skeleton read takes to find its role without parsing it.
ROLE_HEAD_BYTES = 256
#: A record whose text starts with top-level string (or null) members among type, id,
#: parentId and timestamp, then ``"message":{"role":"ROLE"``: the role is exactly ROLE
#: (no key before it can be nested, and ROLE has no escapes). Writers put these keys first.
ROLE_HEAD = re.compile(rb'\{(?:"(?:type|id|parentId|timestamp)":(?:"[^"\\]*"|null),)*"message":\{"role":"([^"\\]*)"')


def skeletons_from_rows(rows: Sequence[Sequence[Any]], parse: Callable[[Any, int], dict[str, Any]],
                        fetch_whole: Callable[[list[Any]], Mapping[Any, Any]],
                        text: Callable[[Any], Any] = lambda v: v,
                        lossy: Callable[[Sequence[Any]], bool] | None = None) -> list[dict[str, Any]]:
    """Skeleton entries (:func:`sessiontree.core.tree.skeleton_entry`) of a skeleton query's rows.

    Args:
        rows: ``(id, parent id, type, timestamp, head, whole, seq)`` per entry in
            order: ``head`` (bytes) the first :data:`ROLE_HEAD_BYTES` of a
            message's text, else ``None``; ``whole`` the record's text for the
            records always parsed whole (label, leaf, session-info, compaction),
            else ``None``.
        parse: ``(record text, line) -> record``.
        fetch_whole: ``[seq, ...] -> {seq: record text}``, called once, for the rows
            that must be parsed whole after all: a message whose head does not show
            its role plainly (:data:`ROLE_HEAD`), or a row ``lossy`` says its copied
            columns may not hold the exact values.
        text: a column value as ``str`` (a store that keeps lone surrogates as bytes
            decodes them).

    Returns the same skeletons as ``skeleton_entry`` of the parsed records. One pass
    (the regular expression runs once per message).
    """
    from sessiontree.core.tree import skeleton_entry

    out: list[dict[str, Any]] = []
    push, match = out.append, ROLE_HEAD.match
    roles: dict[bytes, str] = {}  # a handful of distinct roles: decode each once
    later: list[tuple[int, Any]] = []
    for line, row in enumerate(rows, 2):
        entry_id, parent_id, kind, timestamp, head, own, seq = row
        if own is not None:
            push(skeleton_entry(parse(own, line)))
            continue
        role = None
        if head is not None:
            found = match(head)
            if found is not None:
                raw = found.group(1)
                role = roles.get(raw)
                if role is None:
                    # As the full read decodes what is not UTF-8 (jsonio): replaced, never an error.
                    role = roles[raw] = raw.decode("utf-8", "replace")
        if (head is not None and role is None) or (lossy is not None and lossy(row)):
            later.append((len(out), seq))
            push({})
            continue
        if entry_id.__class__ is not str or parent_id.__class__ not in (str, type(None)) \
                or kind.__class__ is not str or timestamp.__class__ is not str:
            entry_id, parent_id, kind, timestamp = text(entry_id), text(parent_id), text(kind), text(timestamp)
        entry: dict[str, Any] = {"type": kind, "id": entry_id, "parentId": parent_id, "timestamp": timestamp}
        if role is not None:
            entry["message"] = {"role": role}
        push(entry)
    if later:
        whole = fetch_whole([seq for _, seq in later])
        for position, seq in later:
            out[position] = skeleton_entry(parse(whole[seq], position + 2))
    return out


class StoreBase:
    """Mixin of what every store class shares: ``with store:`` closes it, and
    ``repr()`` names the class and the store's URL. Subclasses set ``url`` and
    ``kind`` and define ``close()``."""

    url: str
    kind: str
    #: See ``SessionStore.partial_reads``: the generic read_skeleton/read_entries read everything.
    partial_reads = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    def traits(self) -> StoreTraits:
        """The store's declared traits (``StoreTraits``; docs/decisions/store-traits.md):
        the conservative defaults here, each store class states its own."""
        return StoreTraits(partial_reads=self.partial_reads)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:  # pragma: no cover - every store defines its own
        """Release what the store holds. Idempotent."""

    def read_skeleton(self, session_id: str) -> Any:
        """Generic ``read_skeleton`` (docs in :class:`~sessiontree.stores.base.SessionStore`):
        :meth:`read`, then :func:`~sessiontree.core.tree.skeleton_entry` of every entry.
        Costs a full read; stores with cheaper access override it."""
        from sessiontree.core.tree import skeleton_entry
        from sessiontree.format.codec import ParsedSession

        parsed = self.read(session_id)  # type: ignore[attr-defined]
        entries = [skeleton_entry(e) for e in parsed.entries]
        return ParsedSession(parsed.header, entries, [None] * len(entries), parsed.header_raw,
                             parsed.source_version, False, [], list(parsed.lines), parsed.path)

    def read_entries(self, session_id: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        """Generic ``read_entries`` (docs in :class:`~sessiontree.stores.base.SessionStore`):
        the by-id form of :meth:`read_entries_at`: a fresh :meth:`read_outline` (here a
        full :meth:`read`), then the entries at the positions of ``ids`` in that order
        (unknown ids skipped)."""
        outline = self.read_outline(session_id)
        position = {entry_id: at for at, entry_id in enumerate(outline.ids)}
        return self.read_entries_at(outline, [position[i] for i in ids if i in position])

    def settle_derived(self, *, on_progress: Callable[[int, int], None] | None = None) -> int:
        """Finish derived work that writes deferred; stores that defer none (JSONL,
        memory, PostgreSQL) have nothing to do (``on_progress`` is never called).
        Returns the entries processed: 0."""
        return 0

    def settle_search_tail(self, on_merge: Callable[[int], None] | None = None) -> int:
        """Merge a long pending search tail before a search (see
        ``SessionStore.settle_search_tail``); stores without one (JSONL, memory,
        PostgreSQL) have nothing to merge. Returns the records merged: 0."""
        return 0

    def read_outline(self, session_id: str) -> Any:
        """Generic ``read_outline`` (docs in :class:`~sessiontree.stores.base.SessionStore`):
        a full :meth:`read`, whose entries the outline keeps, so that
        :meth:`read_entries_at` answers from that snapshot without reading again.
        Stores that can list their entries' ids, parents and types without
        parsing the records (SQLite) override it."""
        from sessiontree.stores.base import SessionOutline

        parsed = self.read(session_id)  # type: ignore[attr-defined]
        entries = parsed.entries
        return SessionOutline(session_id, parsed.header, [e["id"] for e in entries],
                              [e.get("parentId") for e in entries], [e["type"] for e in entries],
                              range(len(entries)), None, entries)

    def read_texts(self, session_id: str) -> Any:
        """Generic ``read_texts`` (docs in :class:`~sessiontree.stores.base.RawTexts`): a full
        :meth:`read` and its texts, so the errors are :meth:`read`'s. Stores that can
        give the stored texts without parsing them (SQLite, PostgreSQL) override it."""
        from sessiontree.stores.base import SessionTexts

        return SessionTexts.of(session_id, self.read(session_id))  # type: ignore[attr-defined]

    def read_entries_at(self, outline: Any, positions: Sequence[int]) -> list[dict[str, Any]]:
        """Generic ``read_entries_at`` (docs in :class:`~sessiontree.stores.base.SessionStore`):
        from the outline's own entries when it holds them, else from a fresh
        :meth:`read` whose records at ``positions`` must still carry the outline's
        ids, parents and types.

        Raises:
            SessionChangedError: they do not (or the session is gone).
            IndexError: a position outside the outline.
        """
        from sessiontree.errors import SessionChangedError, SessionNotFoundError

        size = len(outline.ids)
        for position in positions:
            if not 0 <= position < size:
                raise IndexError(f"position {position} outside a session of {size} entries")
        if outline.entries is not None:
            return [outline.entries[p] for p in positions]
        try:
            entries = self.read(outline.session_id).entries  # type: ignore[attr-defined]
        except SessionNotFoundError:
            raise SessionChangedError(outline.session_id, "it was deleted") from None
        out = []
        for position in positions:
            entry = entries[position] if position < len(entries) else None
            if entry is None or (entry["id"], entry.get("parentId"), entry["type"]) != (
                    outline.ids[position], outline.parent_ids[position], outline.types[position]):
                raise SessionChangedError(outline.session_id, f"entry {position + 1} differs")
            out.append(entry)
        return out


_STEP_NAME = re.compile(r"m(\d{3})_[a-z0-9_]+")


_Step = TypeVar("_Step", bound=Callable[..., None])


def register_step(steps: list[tuple[str, _Step]], step: _Step) -> _Step:
    """Register the schema step ``step`` in ``steps`` (a store's ``MIGRATIONS``) and return it.

    A step is named after its function, ``mNNN_what`` (``m004_search_index``).
    ``steps`` is kept ordered by number, so steps run in number order whatever
    the order of registration. Registering the same name again replaces it (a
    module reloaded).

    Raises:
        ValueError: the name is not ``mNNN_what``, or its number is taken by
            another step (two steps written apart with the same number).
    """
    name = step.__name__
    match = _STEP_NAME.fullmatch(name)
    if match is None:
        raise ValueError(f"schema step {name!r}: expected a name like m001_initial")
    for i, (other, _) in enumerate(steps):
        if other == name:
            steps[i] = (name, step)
            return step
        if other[:4] == name[:4]:
            raise ValueError(f"schema steps {other!r} and {name!r} share the number {match.group(1)}")
    steps.append((name, step))
    steps.sort(key=lambda item: item[0])
    return step


def schema_steps(*steps: _Step) -> list[tuple[str, _Step]]:
    """A store's schema steps as ``[(name, function), ...]``, from the functions listed
    in the order they run (a store's ``schema.MIGRATIONS``).

    Raises:
        ValueError: a name is not ``mNNN_what``, two steps share a number, or the
            list is not in number order (the order databases recorded them in).
    """
    ordered: list[tuple[str, _Step]] = []
    for step in steps:
        register_step(ordered, step)
    if [name for name, _ in ordered] != [step.__name__ for step in steps]:
        raise ValueError("schema steps must be listed in number order: "
                         + ", ".join(step.__name__ for step in steps))
    return ordered


def check_known_steps(url: str, applied: Iterable[str], known: Iterable[str]) -> None:
    """Refuse a database whose ``schema_migrations`` (``applied``: step names) records
    a step this version does not have (``known``: the names of its ``MIGRATIONS``): it was
    written by a newer sessiontree, whose schema this one must not read or change.

    Raises:
        StoreOpenError: naming ``url`` and the unknown steps, in ``applied`` order.
    """
    names = set(known)
    unknown = [name for name in applied if name not in names]
    if unknown:
        raise StoreOpenError(
            f"cannot open {url}: its schema has steps this version does not know "
            f"({', '.join(unknown)}); it was written by a newer sessiontree")


def ledger_row_owner(query: Any, owner: tuple[str | None, str | None],
                     cwd_filter: Callable[[Any], bool] | None) -> tuple[str | None, str | None] | None:
    """The ``(session_id, cwd)`` a usage-ledger row owned by ``owner`` (its owning
    session's id and cwd) is reported under for ``query`` (a
    :class:`~sessiontree.core.usagerecords.UsageQuery`), or ``None`` when the query's
    ``cwd`` filter (``cwd_filter(cwd) -> bool``) drops it. A store-wide query that
    is not per session reports ``(None, None)``: rows of several owners become
    one, as :func:`~sessiontree.core.usagerecords.aggregate` sums them (docs/usage.md).
    """
    if query.session_id is not None:
        return owner
    if query.cwd is not None and cwd_filter is not None and not cwd_filter(owner[1]):
        return None
    return owner if query.per_session else (None, None)


def check_replacement_header(session_id: str, header: Any) -> str:
    """Validate a header given to ``replace_header(session_id, header)``; return its id.

    Raises:
        InvalidSessionError: invalid (see :func:`check_header`) or its id is not ``session_id``.
    """
    new_id = check_header(header)
    if new_id != session_id:
        raise InvalidSessionError(f"header id {new_id!r} does not match session {session_id!r}")
    return new_id


def id_in_use_error(session_id: str, entry_id: str | None = None, path: str | None = None) -> InvalidSessionError:
    """The error every store raises when an appended entry reuses an id of its session
    (docs/rules/format.md D.15/D.19); ``entry_id`` when the store knows which one."""
    which = f'entry id "{entry_id}"' if entry_id is not None else "an entry id"
    return InvalidSessionError(f"{which} is already used in session {session_id}", path)


def file_rule_problems(data: bytes, session_id: str | None, where: str) -> list[Any]:
    """Every problem the file checker (:func:`sessiontree.check.check_bytes`) reports
    for a session in its JSONL form, as :class:`~sessiontree.stores.base.StoreProblem`
    rows: the one set of rules ``check --store`` applies on every store, so a session
    gets the same verdict whichever store holds it (docs/check.md).

    Args:
        data: the session's bytes (header line, then one line per entry).
        session_id: the session, for the rows.
        where: the file path, or ``<store url>#<session id>``.
    """
    from sessiontree.check import checker  # imported on use: the checker is large
    from sessiontree.stores.base import StoreProblem

    return [StoreProblem(found.code, found.message, found.severity, session_id, found.line, found.entry_id, where)
            for found in checker.check_bytes(data, where)]
