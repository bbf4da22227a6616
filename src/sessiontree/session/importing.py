"""Importing JSONL session files into a store, many at a time, keeping their ids.

What ``sessiontree import`` and :meth:`SessionManager.import_files
<sessiontree.session.manager.SessionManager.import_files>` run
(docs/rules/manager.md seed:import, docs/rules/decisions.md D-16).

Invariants:

* Files are read in order and written in groups (at most
  :data:`IMPORT_BATCH_SESSIONS` sessions or :data:`IMPORT_BATCH_BYTES` bytes
  of entry text), each group in one transaction of the store's
  ``create_many`` (stores without it: one ``create`` per session).
* A group that fails as a whole is written again one session per
  transaction, so every file gets its own outcome.
* A group's outcomes are yielded only after it committed: an interruption or
  a crash loses only the group in progress, none of whose files was reported.
* Input files are never modified; entries keep their stored JSON text.
* Each imported session's origin (:class:`~sessiontree.stores.base.Provenance`: this
  host, the file) is recorded right after its group commits, in one more
  transaction, unless the id already has one (docs/sync.md, "Provenance"). A crash
  between the two leaves a session without an origin, shown as unknown.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson

from sessiontree.check.glued import parse_unglued
from sessiontree.errors import InvalidSessionError, SessionError, StorageError
from sessiontree.format import bounds
from sessiontree.format.codec import ParsedSession
from sessiontree.format.foreign import sniff_agent
from sessiontree.format.foreign.gemini import looks_like_gemini
from sessiontree.format.foreign.omp import is_title_slot
from sessiontree.format.gcpause import gc_paused
from sessiontree.format.ids import validate_session_id
from sessiontree.format.inputlimit import check_input_size
from sessiontree.stores.base import SessionStore
from sessiontree.stores.origin import origin_here, storable
from sessiontree.stores.traits import CreateMany, store_traits

__all__ = ["IMPORT_BATCH_BYTES", "IMPORT_BATCH_SESSIONS", "ImportOutcome", "check_record_sizes", "foreign_agent",
           "import_files", "import_record", "read_file"]

#: :func:`import_files` writes at most this many sessions per transaction ...
IMPORT_BATCH_SESSIONS = 100
#: ... and at most this many bytes of entry text (one larger session is a batch of its own):
#: what a batch holds in memory, and what an interruption or a crash makes the next run redo.
IMPORT_BATCH_BYTES = 16 * 1024 * 1024

#: One session as ``create`` takes it: header, entries, each entry's stored JSON text.
Record = tuple[dict[str, Any], Sequence[dict[str, Any]], list[bytes | None]]


@dataclass(frozen=True, slots=True)
class ImportOutcome:
    """What :func:`import_files` did with one file.

    Attributes:
        path: the file, as given.
        session_id: the id read from the file (``None`` when it could not be read).
        entries: how many entries were imported (0 unless imported).
        error: ``None`` when the session was imported; else why not: a
            :class:`SessionExistsError` (the id is already stored; compare with
            ``parsed`` to tell a re-import from a clash), another
            :class:`SessionError` (invalid file or id, storage failure), an
            ``OSError`` or a ``ValueError``.
        parsed: the session as read (``None`` when it could not be read).
        note: one line about a flaw read past (glued records read apart:
            docs/sync.md, "Glued records"), or ``None``.
    """

    path: str
    session_id: str | None
    entries: int
    error: Exception | None
    parsed: ParsedSession | None
    note: str | None = None


def foreign_agent(path: str | os.PathLike[str]) -> str | None:
    """``"claude-code"``, ``"codex"``, ``"gemini"`` or ``"omp"`` when the file's first line
    is such an agent's record (a lone ``{``: a Gemini CLI chat document), else ``None``
    (also for a file that cannot be read or parsed: never raises for those)."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline(1 << 20)
            rest = handle.read() if first.strip() == b"{" else b""
        if rest:
            return "gemini" if looks_like_gemini(orjson.loads(first + rest)) else None
        value = orjson.loads(first)
    except (OSError, orjson.JSONDecodeError):
        return None
    if is_title_slot(value):
        return "omp"
    return sniff_agent(value if isinstance(value, dict) else None)


def import_record(parsed: ParsedSession, cwd: str | None) -> Record:
    """The ``(header, entries, raw)`` that imports ``parsed``: a copy of its header
    (``cwd`` made absolute replaces the header's when given), its entries and
    their stored JSON text (:meth:`ParsedSession.checked_texts`: the store does not
    check again what the reader checked)."""
    header = dict(parsed.header)
    if cwd is not None:
        header["cwd"] = os.path.abspath(cwd)
    return header, parsed.entries, parsed.checked_texts()


def check_record_sizes(parsed: ParsedSession, path: str | None = None) -> None:
    """Refuse a session holding a record over :data:`~sessiontree.format.bounds.MAX_RECORD_BYTES`
    bytes (the largest value SQLite stores; the same limit on every store, and the one
    ``check`` reports as ``record-too-large``, docs/check.md).

    Raises:
        InvalidSessionError: the first such record, with its size and line.
    """
    limit = bounds.MAX_RECORD_BYTES
    if None not in parsed.raw and len(parsed.header_raw) <= limit and max(map(len, parsed.raw), default=0) <= limit:  # type: ignore[arg-type]
        return  # the common case: every text at hand and within the limit
    records: list[tuple[int, int | None]] = [(len(parsed.header_raw), None)]
    records += [(len(parsed.entry_bytes(i)), parsed.lines[i] if i < len(parsed.lines) else None)
                for i in range(len(parsed.entries))]
    for size, line in records:
        if size > limit:
            raise InvalidSessionError(f"a record of {size:,} bytes is over the {limit:,} bytes one stored "
                                      "record may hold (SQLite's string and BLOB limit)",
                                      path if path is not None else parsed.path, line)


_Pending = tuple[str, ParsedSession | None, Exception | None, str | None]


def read_file(path: str | os.PathLike[str]) -> tuple[ParsedSession, str | None]:
    """Read and upgrade a session file in memory (never modifying it), glued records
    read apart; the note says so.

    Raises:
        OSError, InvalidSessionError, UnsupportedVersionError: as ``read_session_file``.
    """
    name = os.fspath(path)
    with open(name, "rb") as handle:
        data = handle.read()
    parsed, split = parse_unglued(data, name)
    return parsed, split.note() if split is not None else None


def import_files(paths: Iterable[str | os.PathLike[str]], store: SessionStore, cwd: str | None = None, *,
                 batch_sessions: int | None = None, batch_bytes: int | None = None,
                 settle: bool = False) -> Iterator[ImportOutcome]:
    """Import many JSONL files into ``store`` keeping their ids, in groups (see the module's invariants).

    Args:
        paths: the files, in order.
        store: where they are written.
        cwd: the project the imports land in (each header's ``cwd``); ``None`` keeps the files'.
        batch_sessions, batch_bytes: the group bounds (default :data:`IMPORT_BATCH_SESSIONS`,
            :data:`IMPORT_BATCH_BYTES`, read at call time).
        settle: settle each group's derived data (search index, usage ledger) in the
            group's transaction, from the entries in hand, on a store whose ``create_many``
            takes ``settle`` (SQLite); groups written one session at a time stay
            pending. The caller still runs ``store.settle_derived()`` at the end, which
            then has little or nothing left (docs/decisions/contentless-search.md).

    Returns:
        An iterator of one :class:`ImportOutcome` per path, in order. Errors of single
        files (``SessionError``, ``OSError``, ``ValueError``) are in the outcomes;
        nothing is raised for them.
    """
    batch_sessions = batch_sessions or IMPORT_BATCH_SESSIONS
    batch_bytes = batch_bytes or IMPORT_BATCH_BYTES
    many: Callable[..., Any] | None = store.create_many if isinstance(store, CreateMany) else None
    pending: list[_Pending] = []
    size = 0
    for path in paths:
        # The reading and the writing make no cycles: the collector's passes over the
        # group held in memory would free nothing (docs/decisions/gc-pause.md).
        with gc_paused():
            item, item_size = _read_one(path)
        pending.append(item)
        size += item_size
        if len(pending) >= batch_sessions or size >= batch_bytes:
            yield from _import_group(store, many, pending, cwd, settle)
            pending, size = [], 0
    if pending:
        yield from _import_group(store, many, pending, cwd, settle)


def _read_one(path: str | os.PathLike[str]) -> tuple[_Pending, int]:
    """Read, upgrade and check one file: its pending item and its bytes of entry text
    (0 when refused). Errors of the file are in the item."""
    parsed = None
    note = None
    try:
        # Refused before it is read: a file is held several times over in memory.
        check_input_size(os.stat(path).st_size, str(path))
        parsed, note = read_file(path)
        validate_session_id(parsed.header["id"])
        check_record_sizes(parsed, str(path))
    except InvalidSessionError as exc:
        agent = foreign_agent(path)
        if agent is not None:
            # Another agent's file: sync maps it (docs/agents/README.md); import takes format 1-4.
            exc = InvalidSessionError(f"a {agent} session file, not pi/Atomic: bring it in with "
                                      "`sessiontree sync PATH`", exc.path, exc.line)
        return (str(path), parsed, exc, note), 0
    except (SessionError, OSError, ValueError) as exc:
        return (str(path), parsed, exc, note), 0
    raw = parsed.raw
    size = sum(map(len, raw)) if None not in raw else sum(len(parsed.entry_bytes(i)) for i in range(len(raw)))  # type: ignore[arg-type]
    return (str(path), parsed, None, note), size


def _settles(store: SessionStore) -> bool:
    """Whether ``store.create_many`` takes ``settle`` (SQLite's: the derived data of a
    group written in its transaction)."""
    return store_traits(store).settles_on_create


def _import_group(store: SessionStore, many: Callable[..., Any] | None,
                  pending: Sequence[_Pending], cwd: str | None, settle: bool = False) -> Iterator[ImportOutcome]:
    """Write one group of :func:`import_files`; its outcomes in order, after the commit."""
    with gc_paused():  # cycle-free work (docs/decisions/gc-pause.md); paused only until the first yield
        errors = _write_group(store, many, pending, cwd, settle)
    for index, (path, parsed, error, note) in enumerate(pending):
        error = error or errors.get(index)
        session_id = parsed.header.get("id") if parsed is not None else None
        yield ImportOutcome(path, session_id, 0 if error or parsed is None else len(parsed.entries), error, parsed,
                            note)


def _write_group(store: SessionStore, many: Callable[..., Any] | None, pending: Sequence[_Pending],
                 cwd: str | None, settle: bool) -> dict[int, Exception]:
    """Store one group (its provenance too): the errors of the files that failed, by
    index in ``pending``."""
    items: list[tuple[int, Record]] = []
    for index, (_path, parsed, error, _note) in enumerate(pending):
        if parsed is None or error is not None:
            continue
        items.append((index, import_record(parsed, cwd)))
    errors: dict[int, Exception] = {}
    written = False
    if many is not None and len(items) > 1:
        try:
            records = [record for _index, record in items]
            if settle and _settles(store):
                many(records, settle=True)
            else:
                many(records)
            written = True
        except (SessionError, ValueError):
            pass  # nothing was stored: write them one by one, so each gets its own outcome
    if not written:
        for index, (header, entries, raw) in items:
            try:
                store.create(header, entries, raw)
            except (SessionError, ValueError) as exc:
                errors[index] = exc
    done = [(pending[index][0], record[0]["id"]) for index, record in items if index not in errors]
    if done:
        here = origin_here("")
        try:
            store.record_provenance([replace(here, session_id=session_id, source=storable(os.path.abspath(path)))
                                     for path, session_id in done])
        except (StorageError, AttributeError, NotImplementedError):
            pass  # the sessions are stored; an origin that cannot be recorded is shown as unknown
    return errors
