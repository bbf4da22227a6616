"""The values a store exchanges with its callers (re-exported by :mod:`sessiontree.stores.base`,
where the protocols that use them are): a listing with its skipped count, a problem found by
``verify``, the sync ledger's records (:class:`SyncState`, :class:`ArchivedFile`,
:class:`Provenance`, :class:`SyncChange`), a session's outline and stored texts for the
partial reads, and retention's and team access's rows. Plain data: no I/O.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sessiontree.core.listing import SessionInfo
from sessiontree.format.codec import ParsedSession

__all__ = ["ArchivedFile", "AuditRecord", "Provenance", "PruneRecord", "SessionListing", "SessionOutline", "SessionSummaries", "SessionTexts", "StoreProblem", "SyncChange", "SyncState", "TeamMember"]


class SessionListing(list[SessionInfo]):
    """The rows of a listing (a plain ``list`` of :class:`SessionInfo`) plus how
    many stored sessions were left out because they cannot be loaded.

    Attributes:
        skipped: sessions examined and left out because their stored form is
            damaged or invalid (a header that does not parse, a JSONL file that
            fails to load). Sessions left out by the ``cwd`` or internal filters
            are not counted; with a ``cwd`` filter a session whose header still
            names another cwd is filtered before its body is read, so it is not
            counted even if its body is damaged. ``sessiontree check --store``
            names each one.
    """

    def __init__(self, rows: Iterable[SessionInfo] = (), skipped: int = 0) -> None:
        super().__init__(rows)
        self.skipped = skipped


@dataclass(frozen=True)
class StoreProblem:
    """One problem :meth:`SessionStore.verify` found.

    Attributes:
        code: a stable identifier: ``integrity`` (SQLite's ``integrity_check``
            failed), ``hash-mismatch`` (a record differs from the checksum
            recorded at write time), ``invalid-record`` (a record does not
            parse or is not a valid entry), ``metadata-drift`` (listing columns
            or derived tables differ from a rebuild from the entries),
            ``column-drift`` (an entry's copied columns differ from its JSON),
            ``orphan-rows`` (rows of a session that is not stored),
            or a :mod:`sessiontree.check` code for JSONL files.
        message: what is wrong, in one line.
        severity: ``"error"`` or ``"warning"``.
        session_id: the session concerned, or ``None`` for the whole store.
        line: 1-based line of the record in the session's JSONL form (header =
            1), or ``None``.
        entry_id: the entry concerned, when known.
        path: the file (JSONL stores) or ``<store url>#<session id>``, or ``None``.
    """

    code: str
    message: str
    severity: str = "error"
    session_id: str | None = None
    line: int | None = None
    entry_id: str | None = None
    path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The problem as JSON data (camelCase keys, as the CLI prints it)."""
        return {"code": self.code, "severity": self.severity, "message": self.message,
                "sessionId": self.session_id, "line": self.line, "entryId": self.entry_id, "path": self.path}


@dataclass(frozen=True, kw_only=True)
class SyncState:
    """What ``sessiontree sync`` last took from one source file (docs/sync.md).

    Built by name only (keyword-only fields): twelve fields of which eight are integers
    cannot be told apart by position (issue 40).

    Not derived data: it records what was read from a file outside the store,
    so it cannot be rebuilt from the entries and ``reindex`` leaves it alone.

    Attributes:
        path: the source file, absolute (the key).
        session_id: the header id the file holds.
        size: the file's size in bytes when it was last looked at.
        mtime_ns: its modification time then, in nanoseconds.
        inode: its inode number then.
        dev: the device of that inode.
        consumed: bytes of the file taken into the store, from offset 0; an
            unfinished last line (an agent still writing it) is not consumed.
        lines: physical lines in those bytes (the header line included), so a
            problem in the bytes after them is reported with its file line.
        entries: entries taken from the file (after the format upgrade).
        version: the format version the file declares (1-4); 0 for a Claude Code or
            Codex file read through its mapping (docs/agents/README.md).
        header_hash: SHA-256 of the file's header line, as it was read.
        tail_hash: SHA-256 of the last (up to 4,096) consumed bytes: bytes
            appended after them are trusted only while these still match.
        shape: the encoded :class:`~sessiontree.format.shape.FileShape` of the
            consumed bytes (how to give the file back byte for byte, with their
            SHA-256), or ``None`` when none was recorded (a state written before
            shapes were kept, or a file whose lines the shape could not follow).
            :meth:`SyncLedger.sync_states` may leave it out (``None``) to stay
            cheap; :meth:`SyncLedger.sync_shape` reads it. Not part of
            :meth:`same_file`.
    """

    path: str
    session_id: str
    size: int
    mtime_ns: int
    inode: int
    dev: int
    consumed: int
    lines: int
    entries: int
    version: int
    header_hash: bytes
    tail_hash: bytes
    shape: bytes | None = field(default=None, compare=False, repr=False)

    def same_file(self, other: SyncState | None) -> bool:
        """Whether ``other`` records the same session, file identity and consumed bytes
        (the compare-and-set test of :meth:`SessionStore.sync_commit`)."""
        return other is not None and (self.session_id, self.size, self.mtime_ns, self.inode, self.dev,
                                      self.consumed, self.entries) == (
            other.session_id, other.size, other.mtime_ns, other.inode, other.dev, other.consumed,
            other.entries)

    def to_dict(self) -> dict[str, Any]:
        """The state as JSON data (hashes as hex), for files and ``--json``."""
        data = dict(self.__dict__)
        data["header_hash"] = self.header_hash.hex()
        data["tail_hash"] = self.tail_hash.hex()
        data["shape"] = None if self.shape is None else base64.b64encode(self.shape).decode("ascii")
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SyncState:
        """Inverse of :meth:`to_dict`.

        Raises:
            KeyError, TypeError, ValueError: ``data`` is not a state written by :meth:`to_dict`.
        """
        values = dict(data)
        values["header_hash"] = bytes.fromhex(values["header_hash"])
        values["tail_hash"] = bytes.fromhex(values["tail_hash"])
        shape = values.get("shape")
        values["shape"] = None if shape is None else base64.b64decode(shape)
        return cls(**{name: values[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class ArchivedFile:
    """One agent file that ``sessiontree archive`` moved out of an agent's folder
    (docs/agent-loop.md): the audit record that lets ``restore`` put it back.

    Not derived data: it records what happened to a file outside the store.

    Attributes:
        path: where the file was, absolute (``restore`` puts it back there).
        session_id: the session it held.
        sha256: SHA-256 of its bytes, proved equal to the store's rebuild before the move.
        size: its size in bytes.
        agent: the agent whose folder it was in (``pi``, ``atomic``), or ``""``.
        archived_at: when the record was written, milliseconds since the epoch (UTC).
        destination: ``"trash"`` (moved with the desktop trash) or ``"deleted"``.
        state: ``"pending"`` (written before the move: the file may still be beside
            its old name, renamed), ``"done"`` (the move finished) or ``"undone"``
            (the move failed and the file was put back).
    """

    path: str
    session_id: str
    sha256: bytes
    size: int
    agent: str
    archived_at: int
    destination: str
    state: str = "done"

    def to_dict(self) -> dict[str, Any]:
        """JSON data (camelCase keys, the hash as hex), as ``archived --json`` prints it."""
        return {"path": self.path, "sessionId": self.session_id, "sha256": self.sha256.hex(), "size": self.size,
                "agent": self.agent, "archivedAt": self.archived_at, "destination": self.destination,
                "state": self.state}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ArchivedFile:
        """Inverse of :meth:`to_dict`.

        Raises:
            KeyError, TypeError, ValueError: ``data`` is not a record written by :meth:`to_dict`.
        """
        return cls(str(data["path"]), str(data["sessionId"]), bytes.fromhex(data["sha256"]), int(data["size"]),
                   str(data["agent"]), int(data["archivedAt"]), str(data["destination"]), str(data["state"]))


@dataclass(frozen=True)
class Provenance:
    """Where a session came from: recorded once, when ``sync`` or ``import`` first stored
    it, and never overwritten (docs/sync.md, "Provenance").

    Not derived data and not the agent's bytes: it lives beside the session (a
    ``provenance`` table, or a file beside a JSONL store), never in its header or
    entries, and ``reindex`` leaves it alone. It is kept when the session is
    deleted, so a session that comes back keeps its first origin.

    Attributes:
        session_id: the session (the key).
        host: the host name of the machine that first stored it
            (``$SESSIONTREE_SYNC_HOST``, else the host name).
        machine_id: a stable id of that machine (16 hex digits; see
            :func:`sessiontree.stores.origin.machine_id`).
        user: the user name there (``""`` when it cannot be told).
        agent: ``pi``, ``atomic``, ``claude``, ``codex``, or ``""`` (a plain file or another store).
        source: the file it was read from (absolute, on that host), or
            ``<store url>#<session id>`` for a copy from another store.
        recorded_at: when it was recorded, milliseconds since the epoch (UTC).
    """

    session_id: str
    host: str
    machine_id: str
    user: str
    agent: str
    source: str
    recorded_at: int

    def to_dict(self) -> dict[str, Any]:
        """JSON data (camelCase keys), as ``list --json`` and the JSONL store write it."""
        return {"sessionId": self.session_id, "host": self.host, "machineId": self.machine_id, "user": self.user,
                "agent": self.agent, "source": self.source, "recordedAt": self.recorded_at}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Provenance:
        """Inverse of :meth:`to_dict`.

        Raises:
            KeyError, TypeError, ValueError: ``data`` is not a record written by :meth:`to_dict`.
        """
        values = (data["sessionId"], data["host"], data["machineId"], data["user"], data["agent"], data["source"])
        if not all(isinstance(value, str) for value in values):
            raise TypeError("provenance fields must be strings")
        return cls(*values, int(data["recordedAt"]))


@dataclass(frozen=True)
class SyncChange:
    """The change to a session that goes with a new :class:`SyncState`, in one commit.

    Attributes:
        kind: ``"none"`` (the state alone), ``"create"`` (a new session:
            ``header``, ``entries``, ``raw``), ``"append"`` (``entries`` and
            their ``raw`` texts added to ``session_id``) or ``"replace"`` (the
            session's header and entries become ``header``/``entries``/``raw``).
        session_id: the session written.
        header: the format-4 header (``create``, ``replace``).
        entries: entries in order.
        raw: each entry's stored JSON text (``None`` items are serialized).
        provenance: where the session comes from; written with a ``create`` in the
            same commit, unless the session id already has one (never overwritten).
    """

    kind: str
    session_id: str
    header: dict[str, Any] | None = None
    entries: Sequence[dict[str, Any]] = ()
    raw: Sequence[bytes | None] | None = None
    provenance: Provenance | None = None


@dataclass(frozen=True)
class SessionOutline:
    """A session's shape without its records: what :meth:`SessionStore.read_outline` returns.

    One item per entry in file order (position ``i`` is the entry on JSONL
    line ``i + 2``), taken from the store's copied columns where it has them,
    so no record is parsed. Enough to find the loaded leaf, walk any branch by
    parent links, and pick which records to read in full with
    :meth:`SessionStore.read_entries_at` (the lazy ``SessionManager.open``
    reads only what the context needs; docs/stores.md, "Lazy open").

    Attributes:
        session_id: the session.
        header: the parsed format-4 header.
        ids: each entry's ``id``.
        parent_ids: each entry's ``parentId`` (``None`` for a root).
        types: each entry's ``type``.
        keys: the store's own key of each record (SQLite: ``seq``), opaque to
            callers; :meth:`SessionStore.read_entries_at` uses it.
        stamps: a fingerprint of each stored record (SQLite: the CRC-32
            recorded at write time), equal while the record is unchanged; or
            ``None`` when the store has none. Opaque to callers.
        entries: the parsed entries when producing the outline required reading
            them anyway (the generic fallback), so that
            :meth:`SessionStore.read_entries_at` answers from this snapshot;
            ``None`` otherwise.
    """

    session_id: str
    header: dict[str, Any]
    ids: Sequence[str]
    parent_ids: Sequence[str | None]
    types: Sequence[str]
    keys: Sequence[int]
    stamps: Sequence[int] | None = None
    entries: Sequence[dict[str, Any]] | None = None

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class SessionSummaries:
    """A session's outline with what ``diff`` counts per entry, from derived data only
    (no record parsed): what :meth:`sessiontree.stores.traits.EntrySummaries.read_summaries`
    returns, all read in one snapshot (docs/decisions/diff-summaries.md).

    Attributes:
        outline: the session's :class:`SessionOutline`.
        timestamps: each entry's ``timestamp`` (a string: every stored entry has one), by position.
        tool_calls: ``(position, name, path)`` of every tool call, in position and call
            order: :func:`sessiontree.core.toolcalls.tool_calls` of each entry.
        settled: how many positions from the first have their billed records in the
            store's usage ledger (``EntrySummaries.sum_usage`` sums them); the records of
            the others (the ledger's pending tail) are the caller's to derive from the
            entries.
    """

    outline: SessionOutline
    timestamps: Sequence[str]
    tool_calls: Sequence[tuple[int, str, str | None]]
    settled: int


@dataclass(frozen=True)
class SessionTexts:
    """A session as its stored texts: what :meth:`RawTexts.read_texts` returns.

    Exactly what :meth:`StoreCore.read` gives of the session, without parsing its
    entries: ``header`` is ``read(...).header``, ``texts[i]`` is
    ``read(...).entry_bytes(i)`` and ``types[i]`` is ``read(...).entries[i]["type"]``.

    Attributes:
        session_id: the session.
        header: the parsed format-4 header.
        texts: each entry's stored JSON text, in file order (position ``i`` is the
            entry on JSONL line ``i + 2``).
        types: each entry's ``type``, in the same order.
    """

    session_id: str
    header: dict[str, Any]
    texts: Sequence[bytes]
    types: Sequence[str]

    def __len__(self) -> int:
        return len(self.texts)

    @classmethod
    def of(cls, session_id: str, parsed: ParsedSession) -> SessionTexts:
        """The texts of a session already read whole (the generic :meth:`RawTexts.read_texts`)."""
        entries = parsed.entries
        return cls(session_id, parsed.header, [parsed.entry_bytes(i) for i in range(len(entries))],
                   [entry["type"] for entry in entries])


@dataclass
class PruneRecord:
    """A session a prune deleted (or, in a dry run, would delete): ids, counts and sizes,
    never content (docs/team.md, "Retention").

    Attributes:
        session_id: the session.
        owner: whose it was (the PostgreSQL role; ``""`` where a store has no owners).
        entries: its stored entries.
        bytes: bytes of its stored records (the header's and every entry's JSON text).
    """

    session_id: str
    owner: str
    entries: int
    bytes: int

    def to_dict(self) -> dict[str, Any]:
        """``{sessionId, owner, entries, bytes}`` (``prune --json``)."""
        return {"sessionId": self.session_id, "owner": self.owner, "entries": self.entries, "bytes": self.bytes}


@dataclass
class TeamMember:
    """A person of a team store (``team list``).

    Attributes:
        name: the login role.
        role: ``member``, ``lead`` or ``admin``.
        can_login: whether the role may log in.
        sessions: sessions it owns in the store.
    """

    name: str
    role: str
    can_login: bool
    sessions: int


@dataclass
class AuditRecord:
    """One access through the audited door (``team audit``).

    Attributes:
        id: the record's number.
        at: when, ISO 8601 UTC with milliseconds.
        reader: the login role that opened the session.
        session_id: the session opened.
        session_owner: its owner.
        reason: the reason given.
    """

    id: int
    at: str
    reader: str
    session_id: str
    session_owner: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON (``team audit --json``)."""
        return {"id": self.id, "at": self.at, "reader": self.reader, "sessionId": self.session_id,
                "owner": self.session_owner, "reason": self.reason}
