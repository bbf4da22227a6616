"""Keep a store in step with the agents' own session folders (``sessiontree sync``).

Each source file ends in exactly one outcome (docs/sync.md):

* ``new``: its session id is not stored: imported as ``import`` does (id,
  header and every entry's bytes kept, older formats upgraded in memory);
* ``grown``: what is stored from it is a prefix of its entries (same ids,
  same bytes): only the new entries are appended, in one transaction;
* ``unchanged``: size, mtime, inode and device equal the recorded state: the
  file is not even opened;
* ``in-progress``: its last line has no newline and is not a complete record
  yet (an agent is writing it): that line is left for the next run, the
  complete records before it are synced;
* ``diverged``: the file no longer extends what is stored (an agent rewrote
  it with new ids, someone edited it): reported with the first differing
  entry, the stored session untouched; with ``replace`` the stored session
  becomes the file's content atomically (``replaced``), entries that exist
  only in the store re-appended or reported as dropped;
* ``rejected``: not a session, unreadable, invalid, vanished: a reason (with
  the file line where there is one); the other files go on.

Invariants:

* **Per-file state lives in the store** (:class:`~sessiontree.stores.base.SyncState`:
  path, size, mtime_ns, inode, bytes consumed, hashes of the header line and
  of the last consumed bytes) and is written in the same commit as the
  entries it accounts for, with a compare-and-set on the previous state
  (:meth:`~sessiontree.stores.base.SessionStore.sync_commit`): two sync
  processes cannot append the same entries twice.
* **A grown file is read from its consumed offset.** The appended bytes are
  trusted only while the inode is the same, the file is not shorter, and the
  header line and the last consumed bytes hash as recorded; anything else
  (and every format-1 file, whose entry ids depend on the whole file) is
  read whole and compared entry by entry. New lines are parsed by the
  library's own reader (:func:`~sessiontree.format.parse_session` over the
  header line plus the new lines), so every format rule applies to them.
* **Other agents' files** (Claude Code, Codex; docs/agents/README.md) are
  recognised by their first record and read through their mapping
  (:mod:`sessiontree.format.foreign`), always whole (state ``version`` 0),
  with no shape recorded: ``restore`` is for pi and Atomic, such a session
  is given back with ``export --format source``.
* **Nothing is partial.** A session is created, appended to or replaced in
  one atomic store write, or not at all; a file that fails half-way leaves
  the store as it was.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sessiontree.check.glued import parse_unglued
from sessiontree.errors import (
    InvalidSessionError,
    SessionError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
    SyncConflictError,
)
from sessiontree.format import jsonio
from sessiontree.format.codec import ParsedSession
from sessiontree.format.files import first_line, sha256_prefix
from sessiontree.format.foreign import map_foreign, sniff_agent, source_bytes
from sessiontree.format.ids import is_valid_session_id
from sessiontree.format.inputlimit import check_input_size
from sessiontree.format.shape import FileShape, ShapeError, shape_of
from sessiontree.session.importing import check_record_sizes
from sessiontree.stores.base import Provenance, SessionStore, SyncChange, SyncState
from sessiontree.stores.origin import origin_here
from sessiontree.stores.traits import BulkWrites, OwnRunLock, store_traits
from sessiontree.sync.gemini import is_gemini_name, maybe_gemini, sync_gemini
from sessiontree.sync.omp import maybe_omp, sync_omp
from sessiontree.sync.sources import agent_sources

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX platforms
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "STATUSES",
    "TAIL_CHECK",
    "FileResult",
    "SyncReport",
    "Syncer",
    "discover",
    "opened_files",
    "run_lock",
    "run_lock_path",
    "watch",
]

#: Outcomes, in the order summaries list them.
STATUSES = ("new", "grown", "unchanged", "in-progress", "replaced", "diverged", "rejected")
#: Bytes before the consumed offset whose hash must still match before appended bytes are trusted.
TAIL_CHECK = 4096
_JSON_WS = b" \t\r\n"
_SUFFIX = ".jsonl"
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_opened = 0
_opened_lock = threading.Lock()


def opened_files() -> int:
    """How many source files this process's sync engine has opened so far (for the
    benchmark and the tests: an unchanged file must not be opened)."""
    return _opened


def _open_source(path: str) -> int:
    """Open a source file for reading, counted by :func:`opened_files`."""
    global _opened
    fd = os.open(path, os.O_RDONLY | _O_CLOEXEC)
    with _opened_lock:
        _opened += 1
    return fd


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _prefix_sha(fd: int, size: int) -> bytes:
    """SHA-256 of the file's first ``size`` bytes (the whole-file hash a grown file's
    shape records: docs/agent-loop.md)."""
    return sha256_prefix(fd, size)[0]


def _whole_shape(body: bytes, parsed: ParsedSession, header_line: int | None = None) -> bytes | None:
    """The encoded shape of a whole file's complete bytes, against the header the store
    will hold (its own serialization of the parsed header) and the entries' texts
    (``header_line``: the header's line when malformed lines come before it);
    ``None`` when the shape cannot follow the lines (never expected; restore then says
    the file cannot be given back byte for byte)."""
    try:
        return shape_of(body, jsonio.dumps(parsed.header), parsed.lines, parsed.entry_bytes,
                        header_line=header_line).encode()
    except ShapeError:
        return None


# --------------------------------------------------------------------------- results


@dataclass
class FileResult:
    """What sync did with one source file (or one session of a source store).

    Attributes:
        path: the file (or ``<store url>#<session id>``).
        status: one of :data:`STATUSES`.
        session_id: the header id, once known.
        added: entries added to the store (``new``, ``grown``, ``replaced``).
        reason: why it was rejected or diverged, or a note; ``None`` otherwise.
        line: 1-based file line of the problem or of the first differing entry.
        entry_id: the first differing entry (``diverged``, ``replaced``).
        pending: bytes of an unfinished last line left for the next run.
        kept: store-only entries re-appended after the file's (``replaced``).
        superseded: stored entries replaced by the file's version of them (``replaced``).
        dropped: store-only entries that could not be re-appended, each
            ``{"id", "type", "reason"}`` (``replaced``).
        note: one line about a file read despite a flaw (glued records read
            apart, docs/sync.md "Glued records"); ``None`` otherwise.
        set_aside: a ``rejected``, ``diverged`` or ``in-progress`` result reported by an
            earlier run for the same unchanged file (:mod:`sessiontree.sync.setaside`):
            counted in the summary's "set aside", not shown again, not a failure.
    """

    path: str
    status: str
    session_id: str | None = None
    added: int = 0
    reason: str | None = None
    line: int | None = None
    entry_id: str | None = None
    pending: int = 0
    kept: int = 0
    superseded: int = 0
    dropped: list[dict[str, Any]] = field(default_factory=list)
    note: str | None = None
    set_aside: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON data (camelCase keys, as ``--json`` prints them)."""
        return {"path": self.path, "status": self.status, "sessionId": self.session_id, "added": self.added,
                "reason": self.reason, "line": self.line, "entryId": self.entry_id, "pending": self.pending,
                "kept": self.kept, "superseded": self.superseded, "dropped": self.dropped, "note": self.note,
                "setAside": self.set_aside}


@dataclass
class SyncReport:
    """The outcome of one sync run.

    Attributes:
        files: one result per file, in the order they were synced.
        notes: remarks on sources (a source that is the store itself, a missing folder).
        interrupted: the run was stopped before every file was done.
        left: files not done because of the interruption.
        indexed: entries whose derived data (the search index, the usage ledger) the
            run wrote: as it wrote new sessions (from the entries in hand, SQLite) or in
            its final settle; after it, searches read the index alone.
        index_left: that settle stopped early (a lock held too long, a write error):
            what is left stays pending, and searches and reports still see it.
    """

    files: list[FileResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False
    left: int = 0
    indexed: int = 0
    index_left: bool = False

    def counts(self) -> dict[str, int]:
        """``{status: number of files}`` for every status (zeros included)."""
        counts = dict.fromkeys(STATUSES, 0)
        for result in self.files:
            counts[result.status] += 1
        return counts

    @property
    def added(self) -> int:
        """Entries added to the store, all files together."""
        return sum(result.added for result in self.files)

    @property
    def ok(self) -> bool:
        """Nothing new was rejected or left diverged (a result set aside, reported by an
        earlier run for the same unchanged file, is no new failure: docs/sync.md, "Exit status")."""
        return not any(r.status in ("rejected", "diverged") and not r.set_aside for r in self.files)

    @property
    def set_aside(self) -> int:
        """Results set aside: reported before, for the same unchanged file."""
        return sum(1 for r in self.files if r.set_aside)

    def summary(self) -> str:
        """One line: ``3 new, 1 grown (+12 entries), 40 unchanged, 0 in progress, ...``, then
        ``, N set aside (...)`` when results were set aside (they are not in the other counts)."""
        c = dict.fromkeys(STATUSES, 0)
        for result in self.files:
            if not result.set_aside:
                c[result.status] += 1
        grown = sum(result.added for result in self.files if result.status == "grown")
        parts = [f"{c['new']} new", f"{c['grown']} grown (+{grown} {'entry' if grown == 1 else 'entries'})", f"{c['unchanged']} unchanged",
                 f"{c['in-progress']} in progress"]
        if c["replaced"]:
            parts.append(f"{c['replaced']} replaced")
        parts += [f"{c['diverged']} diverged", f"{c['rejected']} rejected"]
        if self.set_aside:
            parts.append(f"{self.set_aside} set aside (reported before; --verbose lists them)")
        return ", ".join(parts)

    def index_line(self) -> str | None:
        """The line after the summary saying what the final settle did (``search ready (12
        entries indexed)``, or that it was left for later); ``None`` when it settled nothing."""
        if self.index_left:
            return "search indexing left for later (searches still find every entry)"
        if self.indexed:
            return f"search ready ({self.indexed} {'entry' if self.indexed == 1 else 'entries'} indexed)"
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON data: per-file results, the counts, entries added, notes."""
        data: dict[str, Any] = {"files": [r.to_dict() for r in self.files], **self.counts(),
                                "setAside": self.set_aside, "entriesAdded": self.added, "notes": list(self.notes)}
        if self.interrupted:
            data.update(interrupted=True, left=self.left)
        if self.indexed or self.index_left:
            data.update(entriesIndexed=self.indexed, indexingLeft=self.index_left)
        return data


# --------------------------------------------------------------------------- discovery


def discover(paths: Iterable[str], exclude: str | None = None,
             links: list[str] | None = None) -> tuple[list[str], list[FileResult]]:
    """The ``*.jsonl`` files under ``paths`` (files or folders, searched recursively).

    Symbolic links are followed; a link back to a folder being searched is a
    ``symbolic link loop`` and is reported, a folder reached twice is read
    once. Dangling links, unreadable folders and non-regular files are
    reported, never raised.

    Args:
        paths: files and folders, as given.
        exclude: a folder whose files are never synced (a JSONL store that is
            itself the target).
        links: when given, a symbolic link to a folder found below ``paths`` is not
            followed but appended here (an agent's own folder: docs/agent-loop.md,
            "What is guaranteed"); the paths themselves are followed.

    Returns:
        ``(files, rejected)``: absolute file paths, sorted within each folder
        and without duplicates (same inode), and one ``rejected`` result per
        problem found.
    """
    files: list[str] = []
    rejected: list[FileResult] = []
    seen_files: set[tuple[int, int]] = set()
    seen_dirs: set[tuple[int, int]] = set()
    excluded = os.path.realpath(exclude) if exclude else None

    def reject(path: str, reason: str) -> None:
        rejected.append(FileResult(path, "rejected", reason=reason))

    def add_file(path: str, st: os.stat_result) -> None:
        key = (st.st_dev, st.st_ino)
        if key not in seen_files:
            seen_files.add(key)
            files.append(path)

    def walk(directory: str, ancestors: frozenset[tuple[int, int]]) -> None:
        try:
            st = os.stat(directory)
        except OSError as exc:
            reject(directory, _os_reason(exc, directory))
            return
        key = (st.st_dev, st.st_ino)
        if key in ancestors:
            reject(directory, "symbolic link loop (it leads back to a folder being read)")
            return
        if key in seen_dirs:
            return
        seen_dirs.add(key)
        if excluded is not None and os.path.realpath(directory) == excluded:
            return
        try:
            with os.scandir(directory) as it:
                items = sorted(it, key=lambda item: item.name)
        except OSError as exc:
            reject(directory, _os_reason(exc, directory))
            return
        inner = ancestors | {key}
        # A folder's own files before its subfolders: a session's own file is met before
        # the same-id copies pi-subagents keeps in a folder named after it (docs/sync.md,
        # "pi-subagents folders").
        items.sort(key=lambda item: (_is_folder(item), item.name))
        for item in items:
            if links is not None and item.is_symlink():
                try:
                    to_folder = item.is_dir()
                except OSError:
                    to_folder = False
                if to_folder:
                    links.append(item.path)
                    continue
            if item.name.endswith(_SUFFIX) or is_gemini_name(item.path):
                try:
                    item_st = os.stat(item.path)
                except OSError as exc:
                    reject(item.path, _os_reason(exc, item.path))
                    continue
                if stat.S_ISREG(item_st.st_mode):
                    add_file(item.path, item_st)
                    continue
                if not stat.S_ISDIR(item_st.st_mode):
                    reject(item.path, "not a regular file")
                    continue
            try:
                is_dir = item.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                walk(item.path, inner)
            elif item.is_symlink() and not os.path.exists(item.path) and item.name.endswith(_SUFFIX):
                reject(item.path, "dangling symbolic link")

    for raw in paths:
        path = os.path.abspath(os.path.expanduser(raw))
        try:
            st = os.stat(path)
        except OSError as exc:
            reject(path, _os_reason(exc, path))
            continue
        if stat.S_ISDIR(st.st_mode):
            walk(path, frozenset())
        elif stat.S_ISREG(st.st_mode):
            add_file(path, st)
        else:
            reject(path, "not a regular file")
    return files, rejected


def _is_header_line(line: bytes) -> bool:
    """Whether a file's first line is a session header (a BOM before it allowed); ``False``
    for a damaged first line that readers skip (docs/sync.md, "Malformed lines")."""
    if line.lstrip(_JSON_WS + b"\xef\xbb\xbf").startswith(b'{"type":"session"'):
        return True  # pi's and Atomic's own header: no need to parse it
    try:
        value = jsonio.loads(line.lstrip(b"\xef\xbb\xbf"))
    except (ValueError, SessionError):
        return False
    return isinstance(value, dict) and value.get("type") == "session"


def _is_folder(item: os.DirEntry[str]) -> bool:
    """Whether a folder entry is a folder (a link to one too); ``False`` when it cannot be told."""
    try:
        return item.is_dir() and not item.name.endswith(_SUFFIX)
    except OSError:
        return False


#: The folder pi-subagents writes its run artifacts to, beside the sessions (docs/sync.md).
_ARTIFACTS_FOLDER = "subagent-artifacts"


def _artifact_note(path: str, first: bytes) -> str | None:
    """The note for a pi-subagents artifact (a subagent run's transcript or event stream in
    a ``subagent-artifacts`` folder, whose first record is no session header), else ``None``."""
    if os.path.basename(os.path.dirname(path)) != _ARTIFACTS_FOLDER:
        return None
    try:
        value = jsonio.loads(first)
    except (ValueError, SessionError):
        value = None
    if isinstance(value, dict) and value.get("type") == "session":
        return None
    return ("a pi-subagents artifact (a subagent run's transcript or events, no session header): skipped; "
            "the run's session is its own file")


def _os_reason(exc: OSError, path: str) -> str:
    """A one-line reason for an OS error on ``path`` (a loop, a dangling link, a permission)."""
    if exc.errno == errno.ELOOP:
        return "symbolic link loop"
    if exc.errno == errno.ENOENT:
        return "dangling symbolic link" if os.path.islink(path) else "vanished (no such file or directory)"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return exc.strerror or str(exc)


# --------------------------------------------------------------------------- reading


def _complete_prefix(data: bytes) -> tuple[int, int]:
    """How many leading bytes of ``data`` are complete records, and how many follow.

    Complete: up to the last ``\\n``, plus a last line without one when it
    already parses as a JSON object (docs/rules/versions.md seed:session-version
    accepts a complete final record without its newline). A last line that does not parse yet is an
    agent still writing it: not consumed, not an error.
    """
    cut = data.rfind(b"\n") + 1
    rest = data[cut:]
    if not rest:
        return cut, 0
    text = rest.strip(_JSON_WS)
    if text:
        try:
            if isinstance(jsonio.loads(text), dict):
                return len(data), 0
        except ValueError:
            pass
    return cut, len(rest)


def _pread_range(fd: int, start: int, end: int) -> bytes:
    """Bytes ``[start, end)`` of the open file (fewer if it was truncated meanwhile)."""
    chunks = []
    offset = start
    while offset < end:
        chunk = os.pread(fd, end - offset, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _lines_in(data: bytes) -> int:
    """Physical lines in ``data`` (a last line without newline counts)."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


#: Damaged lines looked past before the first readable record decides what wrote a file.
_SNIFF_LINES = 64


def _maybe_foreign(body: bytes) -> bool:
    """Whether the first readable record of ``body`` (a line that is a JSON object; up to
    :data:`_SNIFF_LINES` damaged lines before it are looked past, as
    :func:`~sessiontree.format.foreign.map_foreign` does) is one a foreign agent writes.
    A pi/Atomic header is recognised from its first bytes, without parsing the line."""
    start = 0
    size = len(body)
    looked = 0
    while start < size and looked < _SNIFF_LINES:
        end = body.find(b"\n", start)
        stop = size if end < 0 else end
        line = body[start:stop].strip(_JSON_WS + b"\x0b\x0c")
        start = stop + 1
        if not line:
            continue
        looked += 1
        if line.startswith(b'{"type":"session"'):
            return False
        try:
            value = jsonio.loads(line)
        except (ValueError, SessionError):
            continue
        if isinstance(value, dict):
            return sniff_agent(value) is not None
    return False


# --------------------------------------------------------------------------- comparing


@dataclass
class _Compared:
    """How a file's entries relate to the stored session."""

    kind: str  # "same", "grown", "diverged"
    common: int = 0  # file entries already stored (a prefix of the file)
    index: int | None = None  # diverged: the first differing file entry (None: the header)
    reason: str = ""


def _compare(stored: ParsedSession, parsed: ParsedSession, raw: Sequence[bytes],
             synced_before: int) -> _Compared:
    """Compare a stored session with a file's entries (rule in docs/sync.md, "Grown").

    Grown or same when: the headers are equal; the file entries found in the
    store are a prefix of the file, stored in file order with the same bytes;
    every other stored entry hangs off those entries (its parent is one of
    them or another such entry: a name or label set with sessiontree); and
    the file still has at least the ``synced_before`` entries taken from it
    earlier.
    """
    if stored.header != parsed.header:
        return _Compared("diverged", index=None, reason="the header differs from the stored one")
    entries = parsed.entries
    where = {entry["id"]: j for j, entry in enumerate(stored.entries)}
    common = 0
    last = -1
    for i, entry in enumerate(entries):
        j = where.get(entry["id"])
        if j is None:
            break
        if stored.entry_bytes(j) != raw[i]:
            return _Compared("diverged", index=i, reason="differs from the stored entry with this id")
        if j < last:
            return _Compared("diverged", index=i, reason="is stored in another order")
        last = j
        common = i + 1
    for i in range(common, len(entries)):
        if entries[i]["id"] in where:
            return _Compared("diverged", index=common,
                             reason=f"is not in the store, though the later entry {entries[i]['id']} is")
    if synced_before > common:
        return _Compared("diverged", index=common if common < len(entries) else None,
                         reason=f"the file no longer holds the {synced_before} entries synced from it before "
                                f"(only {common} of them match)")
    from_file = {entry["id"] for entry in entries[:common]}
    attached = set(from_file)
    for entry in stored.entries:
        entry_id = entry["id"]
        if entry_id in from_file:
            continue
        if entry.get("parentId") in attached:
            attached.add(entry_id)
            continue
        return _Compared("diverged", index=common if common < len(entries) else None,
                         reason=f"the stored entry {entry_id} ({entry.get('type')}) is not in the file "
                                "and does not hang off its entries")
    return _Compared("same" if common == len(entries) else "grown", common=common)


def _merge_for_replace(stored: ParsedSession, parsed: ParsedSession,
                       raw: list[bytes]) -> tuple[list[dict[str, Any]], list[bytes | None], int, int,
                                                  list[dict[str, Any]]]:
    """The content ``sync --replace`` stores: the file's entries, then the entries that
    exist only in the store.

    A stored entry whose id the file has is replaced by the file's version. One
    whose type and timestamp equal a file entry's is the same record under an
    old id (an agent's upgrade rewrote the ids): superseded, counted. Any other
    is store-only: re-appended in stored order, its parent moved to the file's
    last entry when its parent is gone; dropped (and reported) only when it
    targets an entry (``targetId``) that is gone.

    Returns:
        ``(entries, raw, kept, superseded, dropped)``.
    """
    entries: list[dict[str, Any]] = list(parsed.entries)
    texts: list[bytes | None] = list(raw)
    from_file = {entry["id"] for entry in entries}
    ids = set(from_file)
    keys = {(entry.get("type"), entry.get("timestamp")) for entry in entries}
    leaf = entries[-1]["id"] if entries else None
    kept = superseded = 0
    dropped: list[dict[str, Any]] = []
    for j, entry in enumerate(stored.entries):
        if entry["id"] in from_file:
            continue  # the file's version wins
        if (entry.get("type"), entry.get("timestamp")) in keys:
            superseded += 1
            continue
        target = entry.get("targetId")
        if isinstance(target, str) and target not in ids:
            dropped.append({"id": entry["id"], "type": entry.get("type"),
                            "reason": f"its target {target} is not in the file"})
            continue
        text: bytes | None = stored.entry_bytes(j)
        parent = entry.get("parentId")
        if parent is not None and parent not in ids:
            entry = {**entry, "parentId": leaf}
            text = None  # re-parented: serialized anew
        entries.append(entry)
        texts.append(text)
        ids.add(entry["id"])
        kept += 1
    return entries, texts, kept, superseded, dropped


#: Fields of an entry that name other entries (docs/rules/format.md): an upgrade that
#: gives entries new ids changes them, nothing else.
_ID_FIELDS = ("id", "parentId", "firstKeptEntryId", "targetId", "fromId")


def _mapped_again(stored: ParsedSession, source: bytes) -> bool:
    """Whether a stored foreign session was mapped from records the file still holds
    unchanged (their verbatim bytes, joined, are a non-empty prefix of ``source``): then any
    difference in the entries is the mapping's, never the agent's."""
    before = source_bytes(stored.entries)
    return bool(before) and before is not None and source.startswith(before)


def _remapped(stored: ParsedSession, parsed: ParsedSession,
              raw: list[bytes]) -> tuple[list[dict[str, Any]], list[bytes | None], int]:
    """What a foreign session mapped again stores: the file's entries as the current mapping
    makes them, then the stored entries set with sessiontree (those without a ``foreign``
    object: a name, a label), in stored order; one whose parent is gone hangs off the last
    file entry, one whose target is gone is dropped. Returns ``(entries, raw, kept)``."""
    entries: list[dict[str, Any]] = list(parsed.entries)
    texts: list[bytes | None] = list(raw)
    ids = {entry["id"] for entry in entries}
    leaf = entries[-1]["id"] if entries else None
    kept = 0
    for j, entry in enumerate(stored.entries):
        if isinstance(entry.get("foreign"), dict) or entry["id"] in ids:
            continue  # a record of the file: the current mapping's entry stands for it
        target = entry.get("targetId")
        if isinstance(target, str) and target not in ids:
            continue
        text: bytes | None = stored.entry_bytes(j)
        if entry.get("parentId") is not None and entry.get("parentId") not in ids:
            entry, text = {**entry, "parentId": leaf}, None
        entries.append(entry)
        texts.append(text)
        ids.add(entry["id"])
        kept += 1
    return entries, texts, kept


def _sans_ids(entry: dict[str, Any]) -> bytes:
    """An entry's content without its id and the ids it names (canonical JSON)."""
    return jsonio.dumps({key: value for key, value in sorted(entry.items()) if key not in _ID_FIELDS})


def _upgrade_rewrite(stored: ParsedSession, parsed: ParsedSession, synced_before: int) -> dict[str, str] | None:
    """``{old id: new id}`` when the file is the stored session's entries rewritten under
    new ids (an agent upgrading its old file in place: docs/sync.md, "An agent rewrote
    the file"), else ``None``.

    The rule: each file entry is paired, in order, with the first unpaired stored entry
    of the same content (type, timestamp and every field but the ids); at least the
    ``synced_before`` entries taken from the file earlier are paired, some under another
    id; each pair's parent is the pair of the other's parent; and every stored entry
    left unpaired hangs off paired ones (an entry set with sessiontree, kept).
    """
    if synced_before <= 0:
        return None
    waiting: dict[bytes, list[int]] = {}
    for j, entry in enumerate(stored.entries):
        waiting.setdefault(_sans_ids(entry), []).append(j)
    mapping: dict[str, str] = {}
    paired: set[int] = set()
    for entry in parsed.entries:
        queue = waiting.get(_sans_ids(entry))
        if not queue:
            continue
        j = queue.pop(0)
        paired.add(j)
        mapping[stored.entries[j]["id"]] = entry["id"]
    if len(paired) < synced_before or all(old == new for old, new in mapping.items()):
        return None
    by_id = {entry["id"]: entry for entry in parsed.entries}
    old_parent = {entry["id"]: entry.get("parentId") for entry in stored.entries}
    for old, new in mapping.items():
        before = old_parent[old]
        moved = mapping.get(before, before) if isinstance(before, str) else before
        if moved != by_id[new].get("parentId"):
            return None
    attached = set(mapping)
    for j, entry in enumerate(stored.entries):
        if j in paired:
            continue
        if entry.get("parentId") not in attached:
            return None
        attached.add(entry["id"])
    return mapping


def _rewritten(stored: ParsedSession, parsed: ParsedSession, raw: list[bytes],
               mapping: dict[str, str]) -> tuple[list[dict[str, Any]], list[bytes | None], int]:
    """The file's entries, then the stored entries it does not hold (set with
    sessiontree), their references moved to the new ids; and how many of those."""
    entries: list[dict[str, Any]] = list(parsed.entries)
    texts: list[bytes | None] = list(raw)
    kept = 0
    for j, entry in enumerate(stored.entries):
        if entry["id"] in mapping:
            continue
        moved = {key: mapping.get(value, value) if key in _ID_FIELDS[1:] and isinstance(value, str) else value
                 for key, value in entry.items()}
        entries.append(moved)
        texts.append(stored.entry_bytes(j) if moved == entry else None)
        kept += 1
    return entries, texts, kept


# --------------------------------------------------------------------------- the engine


class Syncer:
    """Sync files (and source stores) into one store.

    Args:
        store: the target store (writable, unless ``dry_run``).
        replace: resolve ``diverged`` files by replacing the stored session
            with the file's content (``replaced``).
        dry_run: decide every outcome, write nothing.
        finished_after: seconds after which a Claude Code or Codex file whose last line
            has no newline, unchanged since, is taken as finished: that line is read
            when it is a complete record (docs/sync.md, "In progress"). ``None``
            (the default, and ``sync --strict``): such a line always waits.

    The recorded states and stored ids are read once at construction (one
    query each), so deciding that 10,000 files are unchanged costs 10,000
    ``stat`` calls and nothing else.
    """

    def __init__(self, store: SessionStore, *, replace: bool = False, dry_run: bool = False,
                 finished_after: float | None = None) -> None:
        self.store = store
        self.replace = replace
        self.dry_run = dry_run
        self.finished_after = finished_after
        # Which agent's folder a file is in, for the provenance of the sessions it creates.
        self._folders = sorted(((source.path.rstrip(os.sep) + os.sep, source.agent) for source in agent_sources()),
                               key=lambda item: -len(item[0]))
        self._refresh()

    def _finished(self, st: os.stat_result) -> bool:
        """Whether a file unchanged since ``st`` has rested longer than ``finished_after``."""
        return self.finished_after is not None and time.time() - st.st_mtime > self.finished_after

    def _refresh(self) -> None:
        self.states: dict[str, SyncState] = self.store.sync_states()
        self.stored_ids: set[str] = set(self.store.session_ids())

    # -- driving -----------------------------------------------------------------------------

    def sync_files(self, files: Sequence[str], *, on_file: Callable[[str], None] | None = None,
                   stop: threading.Event | None = None,
                   on_settle: Callable[[int, int], None] | None = None) -> SyncReport:
        """Sync each file in turn; stop between files when ``stop`` is set.

        Args:
            files: absolute paths (from :func:`discover`).
            on_file: called with each path after it is done (progress).
            stop: checked before each file.
            on_settle: progress of the final settle of derived data, ``(entries
                settled, entries pending)`` after each of its transactions.

        Returns:
            A :class:`SyncReport` (``interrupted`` and ``left`` when stopped).
        """
        report = SyncReport()
        bulk = self.store if isinstance(self.store, BulkWrites) else None
        in_hand = bulk.settled_in_hand if bulk is not None else 0
        with self._batched():
            for index, path in enumerate(files):
                if stop is not None and stop.is_set():
                    report.interrupted = True
                    report.left = len(files) - index
                    break
                report.files.append(self.sync_file(path))
                if on_file is not None:
                    on_file(path)
        if not self.dry_run and not report.interrupted and any(
                r.status in ("new", "grown", "replaced") for r in report.files):
            # Sessions were written: let the store finish the derived work writes defer
            # (SQLite's search tail, docs/search.md), here rather than in a later search.
            # Not when stopped (as an interrupted import): the stop asked to end now, and
            # the CLI catches SIGINT, so a long settle could not be interrupted again;
            # what is left stays pending and is still found.
            try:
                report.indexed = self.store.settle_derived(on_progress=on_settle)
            except StorageError:
                # The files are synced; a lock held too long only leaves the merge for later.
                report.index_left = True
            # New sessions a store indexed as it wrote them (SQLite: from the entries in hand).
            report.indexed += (bulk.settled_in_hand - in_hand) if bulk is not None else 0
        return report

    def _batched(self) -> contextlib.AbstractContextManager[None]:
        """The store's batched writes when it has them (SQLite's ``bulk_writes``), else
        nothing: a sync commits in large batches, each file's change still atomic, because
        the agent's files remain the source (docs/sync.md, "Durability")."""
        if self.dry_run or not isinstance(self.store, BulkWrites):
            return contextlib.nullcontext()
        return self.store.bulk_writes(seconds=1.0, writes=200)

    def sync_file(self, path: str) -> FileResult:
        """Sync one file; never raises for a problem of the file (it becomes ``rejected``).

        A conflict with another sync process (the recorded state moved on) is
        retried with fresh state; a file that keeps changing under that is rejected.

        Raises:
            StorageError: the store itself failed (not the file's fault).
        """
        path = os.path.abspath(path)
        for _ in range(5):
            try:
                return self._sync_file(path)
            except (SyncConflictError, SessionExistsError, SessionNotFoundError):
                # Another process wrote (or deleted) this file's session meanwhile: decide again.
                self._refresh()
        return FileResult(path, "rejected", reason="another sync kept changing this file's session; try again")

    def _sync_file(self, path: str) -> FileResult:
        state = self.states.get(path)
        stored = state is not None and state.session_id in self.stored_ids
        try:
            st = os.stat(path)
        except OSError as exc:
            return FileResult(path, "rejected", reason=_os_reason(exc, path))
        if not stat.S_ISREG(st.st_mode):
            return FileResult(path, "rejected", reason="not a regular file")
        if stored and state is not None and (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev) == (
                state.size, state.mtime_ns, state.inode, state.dev):
            pending = state.size - state.consumed
            # A mapped file's unfinished last line left from a run before it rested long enough:
            # read it once more (it may be a complete record now taken as finished).
            if not (pending and state.version == 0 and self._finished(st)):
                return FileResult(path, "in-progress" if pending else "unchanged", state.session_id,
                                  pending=pending)
        try:
            fd = _open_source(path)
        except OSError as exc:
            return FileResult(path, "rejected", reason=_os_reason(exc, path))
        try:
            fst = os.fstat(fd)
            if (stored and state is not None and state.version >= 2 and fst.st_size >= state.consumed
                    and (fst.st_ino, fst.st_dev) == (state.inode, state.dev)):
                result = self._grow(path, fd, fst, state)
                if result is not None:
                    return result
            return self._whole(path, fd, fst, state)
        except OSError as exc:
            return FileResult(path, "rejected", reason=f"cannot read: {_os_reason(exc, path)}")
        finally:
            os.close(fd)

    def origin(self, session_id: str, source: str, agent: str | None = None) -> Provenance:
        """The :class:`Provenance` of a session this run creates from ``source`` (a file:
        its agent is the agent whose folder holds it, else ``""``; docs/sync.md, "Provenance")."""
        if agent is None:
            agent = next((name for folder, name in self._folders if source.startswith(folder)), "")
        return origin_here(session_id, agent=agent, source=source)

    def _commit(self, expect: SyncState | None, state: SyncState, change: SyncChange) -> None:
        if self.dry_run:
            return
        self.store.sync_commit(expect, state, change)
        self.states[state.path] = state
        if change.kind == "create":
            self.stored_ids.add(change.session_id)

    # -- pi-subagents: a session's own file and its same-id copies -----------------------------

    def _own_file(self, path: str, session_id: str) -> str | None:
        """The session's own file when ``path`` is a same-id copy inside the folder named
        after it (``<ts>_<id>/forks/...``, ``<ts>_<id>/<runId>/run-0/session.jsonl``: the
        folder pi-subagents keeps beside a session file), else ``None``."""
        if session_id not in self.stored_ids:
            return None
        for other, state in self.states.items():
            if (other != path and state.session_id == session_id and state.entries > 0
                    and path.startswith(os.path.splitext(other)[0] + os.sep)):
                return other
        return None

    def _copies_taken_over(self, path: str, session_id: str) -> list[SyncState]:
        """The recorded states of same-id copies inside ``path``'s own folder that hold the
        session (synced before its own file, as an earlier version met them first)."""
        if session_id not in self.stored_ids:
            return []
        root = os.path.splitext(path)[0] + os.sep
        return [state for other, state in self.states.items()
                if state.session_id == session_id and state.entries > 0 and other.startswith(root)]

    # -- a file that only grew: read the new bytes --------------------------------------------

    def _grow(self, path: str, fd: int, fst: os.stat_result, state: SyncState) -> FileResult | None:
        """Sync the bytes after ``state.consumed``, or ``None`` when they cannot be trusted
        (the caller then reads the whole file)."""
        header = first_line(fd)
        if _sha(header) != state.header_hash:
            return None
        if not _is_header_line(header):
            return None  # malformed lines before the header (skipped as pi does): read whole
        low = max(0, state.consumed - TAIL_CHECK)
        try:
            check_input_size(fst.st_size - state.consumed, path)  # only the new bytes are read
        except InvalidSessionError as exc:
            return FileResult(path, "rejected", state.session_id, reason=exc.reason)
        before = _pread_range(fd, low, state.consumed)
        if len(before) != state.consumed - low or _sha(before) != state.tail_hash:
            return None
        new = _pread_range(fd, state.consumed, fst.st_size)
        complete, pending = _complete_prefix(new)
        chunk = new[:complete]
        ended = before.endswith(b"\n")
        if chunk:
            # Newlines in the consumed bytes, plus the chunk's; an unterminated last line counts.
            lines = state.lines - (0 if ended else 1) + chunk.count(b"\n") + (0 if chunk.endswith(b"\n") else 1)
            tail = _sha((before + chunk)[-TAIL_CHECK:])
        else:
            lines, tail = state.lines, state.tail_hash
        moved = SyncState(path, state.session_id, fst.st_size, fst.st_mtime_ns, fst.st_ino, fst.st_dev,
                          state.consumed + complete, lines, state.entries, state.version, state.header_hash, tail)
        if not chunk.strip(_JSON_WS + b"\x0b\x0c"):
            # Nothing new but blank lines or an unfinished one: record where the file is now.
            if chunk:
                previous = self._previous_shape(path)
                if previous is None:
                    return None
                try:
                    more = shape_of(chunk, None, [], lambda i: b"", first_line=2)
                except ShapeError:
                    return None
                moved = replace(moved, shape=previous.extended(more, _prefix_sha(fd, state.consumed + complete)).encode())
            else:
                moved = replace(moved, shape=self._previous_blob(path))
            self._commit(state, moved, SyncChange("none", state.session_id))
            return FileResult(path, "in-progress" if pending else "unchanged", state.session_id, pending=pending)
        try:
            parsed, split = parse_unglued(header + b"\n" + chunk, path)
            check_record_sizes(parsed, path)
        except InvalidSessionError as exc:
            line = exc.line
            if line is not None:
                line = state.lines + (line - 1) - (0 if ended else 1)
            return FileResult(path, "rejected", state.session_id, reason=exc.reason, line=line)
        if parsed.header.get("id") != state.session_id:
            return None
        raw = [parsed.entry_bytes(i) for i in range(len(parsed.entries))]
        shape = self._grown_shape(path, fd, state, chunk, parsed)
        if shape is None:
            return None  # no shape to extend (recorded before shapes were kept): read the file whole once
        moved = replace(moved, entries=state.entries + len(raw), shape=shape)
        try:
            self._commit(state, moved, SyncChange("append", state.session_id, entries=parsed.entries, raw=raw))
        except (InvalidSessionError, SessionNotFoundError):
            return None  # an id already stored, the session gone: compare the whole file instead
        return FileResult(path, "grown" if raw else ("in-progress" if pending else "unchanged"),
                          state.session_id, added=len(raw), pending=pending,
                          note=split.note(state.lines - (1 if ended else 2)) if split is not None else None)

    def _previous_blob(self, path: str) -> bytes | None:
        """The encoded shape recorded for ``path`` (the state objects may not carry it)."""
        state = self.states.get(path)
        if state is not None and state.shape is not None:
            return state.shape
        return self.store.sync_shape(path)

    def _previous_shape(self, path: str) -> FileShape | None:
        """The decoded shape recorded for ``path``, or ``None`` (none recorded, or undecodable)."""
        blob = self._previous_blob(path)
        if blob is None:
            return None
        try:
            return FileShape.decode(blob)
        except ShapeError:
            return None

    def _grown_shape(self, path: str, fd: int, state: SyncState, chunk: bytes,
                     parsed: ParsedSession) -> bytes | None:
        """The recorded shape extended by the appended ``chunk`` (parsed after the header
        line, so its lines count from 2), with the SHA-256 of every consumed byte; ``None``
        when there is no recorded shape to extend or the chunk's lines do not fit it."""
        previous = self._previous_shape(path)
        if previous is None or previous.size != state.consumed:
            return None
        try:
            more = shape_of(chunk, None, parsed.lines, parsed.entry_bytes, first_line=2)
        except ShapeError:
            return None
        return previous.extended(more, _prefix_sha(fd, state.consumed + len(chunk))).encode()

    # -- anything else: read the whole file and compare ---------------------------------------

    def _whole(self, path: str, fd: int, fst: os.stat_result, state: SyncState | None) -> FileResult:
        note = _artifact_note(path, first_line(fd))
        if note is not None:
            return FileResult(path, "unchanged", note=note)
        try:
            check_input_size(fst.st_size, path)  # refused before it is read (docs/stores.md, "Large files")
        except InvalidSessionError as exc:
            return FileResult(path, "rejected", reason=exc.reason)
        data = _pread_range(fd, 0, fst.st_size)
        if maybe_gemini(path, data):  # one JSON document rewritten whole (docs/agents/gemini.md)
            gemini = sync_gemini(self, path, data, fst, state)
            if gemini is not None:
                return FileResult(path, **vars(gemini))
        if maybe_omp(data):  # a title slot rewritten in place (docs/agents/README.md, "oh-my-pi")
            omp = sync_omp(self, path, data, fst, state)
            if omp is not None:
                return FileResult(path, **vars(omp))
        complete, pending = _complete_prefix(data)
        if pending and self._finished(fst) and _maybe_foreign(data[:complete]):
            # A Claude Code or Codex file whose torn last line has rested past
            # ``finished_after``: the agent is gone; the line is its last (inert) record
            # (docs/sync.md, "Quiet repeats"). pi's files keep their own rule.
            complete, pending = len(data), 0
        body = data[:complete]
        if not body.strip(_JSON_WS + b"\x0b\x0c"):
            if pending or not data:
                return FileResult(path, "in-progress", reason="no complete record yet", pending=pending)
            return FileResult(path, "rejected", reason="not a session: the file is blank")
        if _maybe_foreign(body):
            foreign = self._whole_foreign(path, body, fst, state, pending)
            if foreign is not None:
                return foreign
        try:
            parsed, split = parse_unglued(body, path)
            check_record_sizes(parsed, path)
        except InvalidSessionError as exc:
            return FileResult(path, "rejected", reason=exc.reason, line=exc.line)
        session_id = parsed.header["id"]
        if not is_valid_session_id(session_id):
            return FileResult(path, "rejected", session_id, reason=f"invalid session id {session_id!r}", line=1)
        own = self._own_file(path, session_id)
        if own is not None:
            # A same-id copy inside the session's own folder (pi-subagents): recorded, so it is
            # not read again while unchanged, with no entries (never counted, never the
            # session's path for restore or resume), and nothing stored from it.
            copy = SyncState(path, session_id, fst.st_size, fst.st_mtime_ns, fst.st_ino, fst.st_dev, complete,
                             _lines_in(body), 0, 0, _sha(body.split(b"\n", 1)[0]), _sha(body[-TAIL_CHECK:]), None)
            self._commit(self.states.get(path), copy, SyncChange("none", session_id))
            return FileResult(path, "unchanged", session_id, pending=pending,
                              note=f"a copy of session {session_id} in its own file's folder (pi-subagents); "
                                   f"the session is {own}: not counted again")
        taken = self._copies_taken_over(path, session_id)
        raw = [parsed.entry_bytes(i) for i in range(len(parsed.entries))]
        new_state = SyncState(path, session_id, fst.st_size, fst.st_mtime_ns, fst.st_ino, fst.st_dev, complete,
                              _lines_in(body), len(raw), parsed.source_version,
                              _sha(body.split(b"\n", 1)[0]), _sha(body[-TAIL_CHECK:]),
                              _whole_shape(body, parsed, split.header_line if split is not None else None))
        expect = self.states.get(path)
        synced_before = state.entries if state is not None and state.session_id == session_id else 0
        notes = []
        if taken:
            # The session's own file takes the session back from the copies an earlier sync
            # met first: the stored session becomes the file's (the copies' own entries stay in
            # their files), and the copies are recorded as copies.
            try:
                self._commit(expect, new_state, SyncChange("replace", session_id, dict(parsed.header),
                                                           parsed.entries, raw))
            except InvalidSessionError as exc:
                return FileResult(path, "rejected", session_id, reason=f"replacing failed: {exc.reason}")
            for copy in taken:
                self._commit(copy, replace(copy, entries=0, version=0, shape=None),
                             SyncChange("none", session_id))
            many = len(taken) > 1
            result = FileResult(path, "replaced", session_id, added=len(raw), pending=pending,
                                reason=f"the session's own file: it replaces what {len(taken)} same-id "
                                       f"cop{'ies' if many else 'y'} in its folder (pi-subagents) gave "
                                       f"before; they no longer count")
        else:
            result = self._reconcile(path, parsed, raw, pending, synced_before,
                                     lambda change: self._commit(expect, new_state, change))
        if result.status == "new" and state is not None and state.session_id == session_id:
            # Synced before, since deleted from the store: the agent's file is the source,
            # so it comes back, but never silently (docs/sync.md, "A deleted session").
            notes.append("re-imported: this session was deleted from the store after an earlier sync, "
                         "and the agent's file still holds it (remove the file to keep it out)")
        if split is not None and result.status not in ("rejected", "diverged"):
            notes.append(split.note())
        if notes:
            result.note = "; ".join(notes)
        return result

    def _whole_foreign(self, path: str, body: bytes, fst: os.stat_result, state: SyncState | None,
                       pending: int) -> FileResult | None:
        """Sync a Claude Code or Codex file through its mapping (docs/agents/README.md), or
        ``None`` when it is not one. Such a file is always read whole (its state's
        ``version`` is 0, so the grown-file path never trusts an offset into it: a
        mapping needs the earlier records, e.g. to pair tool results and count usage
        once) and records no shape (``restore`` is for pi and Atomic; a foreign session
        is given back with ``export --format source``)."""
        if not body.strip(_JSON_WS + b"\x0b\x0c"):
            return FileResult(path, "in-progress", reason="no complete record yet", pending=pending)
        mapped = map_foreign(body, path)
        if mapped is None:
            return None
        if not mapped.header_known:
            return FileResult(path, "in-progress", reason="no record names the session yet",
                              pending=pending + len(body))
        refusal = mapped.refusal()  # the same decision `check` reports (docs/agents/README.md)
        if refusal is not None:
            return FileResult(path, "rejected", reason=refusal, line=1)
        parsed = mapped.parsed(path)
        session_id = parsed.header["id"]
        count = len(parsed.entries)
        new_state = SyncState(path, session_id, fst.st_size, fst.st_mtime_ns, fst.st_ino, fst.st_dev, len(body),
                              _lines_in(body), count, 0, _sha(body.split(b"\n", 1)[0]),
                              _sha(body[-TAIL_CHECK:]), None)
        expect = self.states.get(path)
        synced_before = state.entries if state is not None and state.session_id == session_id else 0
        appended = (state is not None and expect is state and synced_before and state.version == 0
                    and session_id in self.stored_ids and (fst.st_ino, fst.st_dev) == (state.inode, state.dev)
                    and state.consumed <= len(body) and count >= state.entries
                    # A last record taken as finished without its newline may be continued on its line.
                    and body[state.consumed - 1:state.consumed] in (b"\n", b"")
                    and _sha(body.split(b"\n", 1)[0]) == state.header_hash
                    and _sha(body[max(0, state.consumed - TAIL_CHECK):state.consumed]) == state.tail_hash)
        settled = count if mapped.settled is None else mapped.settled
        if appended and state is not None and state.entries > settled:
            replaced = self._replace_unsettled(path, parsed, state.entries, pending,
                                               lambda change: self._commit(expect, new_state, change))
            if replaced is not None:
                return replaced
        if appended and state is not None:
            # Only appended to (same file, same first line, same bytes before the consumed
            # offset): the mapping is prefix-stable, so the entries already synced are the
            # first ones; append the rest without reading the stored session back.
            added = parsed.entries[state.entries:]
            texts: list[bytes | None] = [parsed.entry_bytes(i) for i in range(state.entries, count)]
            try:
                self._commit(expect, new_state, SyncChange("append", session_id, entries=added, raw=texts)
                             if added
                             else SyncChange("none", session_id))
            except (InvalidSessionError, SessionNotFoundError):
                pass  # an id already stored, the session gone: compare the whole session below
            else:
                return FileResult(path, "grown" if added else ("in-progress" if pending else "unchanged"),
                                  session_id, added=len(added), pending=pending)
        raw = [parsed.entry_bytes(i) for i in range(count)]
        return self._reconcile(path, parsed, raw, pending, synced_before,
                               lambda change: self._commit(expect, new_state, change), source=body)

    def _replace_unsettled(self, path: str, parsed: ParsedSession, stored_count: int, pending: int,
                           commit: Callable[[SyncChange], None]) -> FileResult | None:
        """A foreign file synced while a Claude Code call was still being written: the call's
        billed flag has moved to its newest record (docs/agents/README.md, "Prefix-stable"),
        so the stored session is replaced by the file's entries (entries set with
        sessiontree kept, as ``sync --replace`` keeps them). ``None`` when the stored
        session cannot be read (the caller then compares the whole session)."""
        session_id = parsed.header["id"]
        try:
            stored = self.store.read(session_id)
        except (SessionNotFoundError, InvalidSessionError, StorageError):
            return None
        count = len(parsed.entries)
        raw = [parsed.entry_bytes(i) for i in range(count)]
        entries, texts, _kept, _superseded, _dropped = _merge_for_replace(stored, parsed, raw)
        try:
            commit(SyncChange("replace", session_id, dict(parsed.header), entries, texts))
        except InvalidSessionError as exc:
            return FileResult(path, "rejected", session_id, reason=f"replacing failed: {exc.reason}")
        added = count - stored_count
        return FileResult(path, "grown" if added else ("in-progress" if pending else "unchanged"),
                          session_id, added=added, pending=pending)

    def _reconcile(self, path: str, parsed: ParsedSession, raw: list[bytes], pending: int, synced_before: int,
                   commit: Callable[[SyncChange], None], source: bytes | None = None) -> FileResult:
        """Decide new / unchanged / grown / diverged / replaced for a parsed source and write it.

        ``source``: a foreign file's complete bytes. When its stored session differs from
        the file's mapping although the records it was mapped from are the file's own
        (a prefix of ``source``), the mapping changed, not the file: the session is mapped
        again (``replaced``), as docs/agents/README.md ("Mapped again") says."""
        session_id = parsed.header["id"]
        stored: ParsedSession | None = None
        if session_id in self.stored_ids or self.store.exists(session_id):
            try:
                stored = self.store.read(session_id)
            except SessionNotFoundError:
                stored = None
            except (InvalidSessionError, StorageError) as exc:
                return FileResult(path, "rejected", session_id,
                                  reason=f"the stored session cannot be read to compare: {exc}")
        if stored is None:
            try:
                commit(SyncChange("create", session_id, dict(parsed.header), parsed.entries, raw,
                                  provenance=self.origin(session_id, path)))
            except InvalidSessionError as exc:
                return FileResult(path, "rejected", session_id, reason=exc.reason, line=exc.line)
            return FileResult(path, "new", session_id, added=len(raw), pending=pending)
        compared = _compare(stored, parsed, raw, synced_before)
        if compared.kind == "same":
            commit(SyncChange("none", session_id))
            return FileResult(path, "in-progress" if pending else "unchanged", session_id, pending=pending)
        if compared.kind == "grown":
            added = parsed.entries[compared.common:]
            commit(SyncChange("append", session_id, entries=added, raw=raw[compared.common:]))
            return FileResult(path, "grown", session_id, added=len(added), pending=pending)
        mapping = _upgrade_rewrite(stored, parsed, synced_before) if synced_before else None
        if mapping is not None:
            entries, texts, kept = _rewritten(stored, parsed, raw, mapping)
            try:
                commit(SyncChange("replace", session_id, dict(parsed.header), entries, texts))
            except InvalidSessionError as exc:
                return FileResult(path, "rejected", session_id, reason=f"replacing failed: {exc.reason}")
            reason = (f"the agent rewrote the file (an upgrade): the same {len(mapping)} entries under new ids "
                      "and header; taken as the stored session" +
                      (f", {kept} entries set with sessiontree kept on the new ids" if kept else ""))
            return FileResult(path, "replaced", session_id, added=len(raw), reason=reason,
                              pending=pending, kept=kept, superseded=len(mapping))
        if source is not None and _mapped_again(stored, source):
            entries, texts, kept = _remapped(stored, parsed, raw)
            try:
                commit(SyncChange("replace", session_id, dict(parsed.header), entries, texts))
            except InvalidSessionError as exc:
                return FileResult(path, "rejected", session_id, reason=f"replacing failed: {exc.reason}")
            return FileResult(path, "replaced", session_id, added=len(raw), pending=pending, kept=kept,
                              reason="mapped again: the file's records are the ones stored, read by this "
                                     "version's mapping" + (f" ({kept} entries set with sessiontree kept)"
                                                            if kept else ""))
        index = compared.index
        line: int | None
        if index is None:
            line = 1  # the header
        else:
            line = parsed.lines[index] if index < len(parsed.lines) else None
        entry_id = parsed.entries[index]["id"] if index is not None and index < len(parsed.entries) else None
        what = f"entry {entry_id} " if entry_id is not None else ""
        reason = f"diverged: {what}{compared.reason}"
        if not self.replace:
            return FileResult(path, "diverged", session_id, reason=reason, line=line, entry_id=entry_id,
                              pending=pending)
        entries, texts, kept, superseded, dropped = _merge_for_replace(stored, parsed, raw)
        try:
            commit(SyncChange("replace", session_id, dict(parsed.header), entries, texts))
        except InvalidSessionError as exc:
            return FileResult(path, "rejected", session_id, reason=f"replacing failed: {exc.reason}")
        return FileResult(path, "replaced", session_id, added=len(raw), reason=reason, line=line,
                          entry_id=entry_id, pending=pending, kept=kept, superseded=superseded, dropped=dropped)

    # -- another store as the source ----------------------------------------------------------

    def sync_store(self, source: SessionStore, *, on_session: Callable[[str], None] | None = None,
                   stop: threading.Event | None = None) -> SyncReport:
        """Copy every session of ``source`` into the target: new ones created, grown ones
        appended, diverged ones reported (or replaced). No per-file state is kept: each
        session is compared in full (a store has no files to ``stat``).

        Returns:
            A :class:`SyncReport`; each result's path is ``<source url>#<session id>``.
        """
        report = SyncReport()
        ids = sorted(source.session_ids())
        try:
            # A session the source knows the origin of keeps it: the copy is not its origin.
            origins = source.provenances()
        except (SessionError, AttributeError, NotImplementedError):
            origins = {}
        for index, session_id in enumerate(ids):
            if stop is not None and stop.is_set():
                report.interrupted, report.left = True, len(ids) - index
                break
            where = f"{source.url}#{session_id}"
            try:
                parsed = source.read(session_id)
            except (SessionError, OSError) as exc:
                report.files.append(FileResult(where, "rejected", session_id, reason=str(exc)))
                continue
            raw = [parsed.entry_bytes(i) for i in range(len(parsed.entries))]

            def commit(change: SyncChange, where: str = where) -> None:
                if self.dry_run:
                    return
                if change.kind == "create":
                    self.store.create(change.header or {}, change.entries, change.raw)
                    self.stored_ids.add(change.session_id)
                    known = origins.get(change.session_id)
                    self.store.record_provenance([known if known is not None else self.origin(
                        change.session_id, where, "")])
                elif change.kind == "append":
                    self.store.append(change.session_id, change.entries, change.raw)
                elif change.kind == "replace":
                    self.store.replace_session(change.header or {}, change.entries, change.raw)

            try:
                report.files.append(self._reconcile(where, parsed, raw, 0, 0, commit))
            except SessionExistsError:
                self._refresh()
                report.files.append(self._reconcile(where, parsed, raw, 0, 0, commit))
            if on_session is not None:
                on_session(where)
        return report


# --------------------------------------------------------------------------- locking and watching


def run_lock_path(store: SessionStore) -> str | None:
    """Where the run lock of ``store`` lives: beside a SQLite file, inside a JSONL folder
    (the store's declared ``StoreTraits.run_lock_path``)."""
    return store_traits(store).run_lock_path


@contextlib.contextmanager
def run_lock(store: SessionStore, on_busy: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold the store's sync run lock (an ``flock``): one sync process works on a store at
    a time, the others wait. ``on_busy`` is called once when the lock is held by
    another process, before waiting (the CLI says so: the only "error" two concurrent
    syncs may show). Stores without a file (memory) need no lock.

    A PostgreSQL store holds its own: an advisory lock per host
    (:meth:`~sessiontree.stores.postgres.ledger.PostgresLedger.run_lock`, docs/postgres.md).

    Raises:
        StorageError: the lock file cannot be created (the database cannot be reached).
    """
    if isinstance(store, OwnRunLock):
        with store.run_lock(on_busy):
            yield
        return
    path = run_lock_path(store)
    if path is None or fcntl is None:
        yield
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | _O_CLOEXEC, 0o644)
    except OSError as exc:
        raise StorageError(f"cannot create the sync lock {path}: {exc}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_busy is not None:
                on_busy()
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def watch(roots: Sequence[str], on_change: Callable[[list[str]], None], stop: threading.Event,
          *, debounce_ms: int = 400, on_ready: Callable[[], None] | None = None) -> None:
    """Call ``on_change(paths)`` with the ``*.jsonl`` files that changed under ``roots``,
    debounced, until ``stop`` is set (``watchfiles``). Files removed meanwhile are left out.

    Args:
        roots: existing folders or files to watch.
        on_change: gets the sorted absolute paths of changed files that still exist.
        stop: set it (e.g. from a SIGINT handler) to end the watch after the current batch.
        debounce_ms: changes within this window are grouped into one batch.
        on_ready: called once, when the watch is known to be running (its first
            batch or timeout): a file an agent appended to after the caller's first
            sync but before the watch began gives no event, so the caller syncs
            everything once more then (unchanged files cost a ``stat``).
    """
    import watchfiles  # imported on use: only --watch needs it

    def only_sessions(change: Any, path: str) -> bool:
        return path.endswith(_SUFFIX) or is_gemini_name(path)

    for changes in watchfiles.watch(*roots, watch_filter=only_sessions, debounce=debounce_ms,
                                    stop_event=stop, raise_interrupt=False, rust_timeout=500,
                                    yield_on_timeout=True):
        if on_ready is not None:
            ready, on_ready = on_ready, None
            ready()
        paths = sorted({os.path.abspath(path) for _, path in changes if os.path.isfile(path)})
        if paths:
            on_change(paths)
        if stop.is_set():
            break
