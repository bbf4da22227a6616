"""Listing information per session (``SessionInfo``), computed incrementally.

Rules: docs/rules/manager.md seed:api (listing) and docs/rules/listing.md.

:class:`InfoAccumulator` consumes entries one at a time and keeps only small
state (counts, the first message, the newest activity time, name and
summary state), so a store can update a session's metadata on every append
without re-reading its transcript, and list 10,000 sessions from those
columns alone. The text of all messages, which grows with the transcript, is
kept apart and fetched only when asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sessiontree.core.tree import parse_timestamp_ms, time_in_range, utc_from_ms
from sessiontree.format.foreign.common import agent_of_header
from sessiontree.format.types import Entry

__all__ = [
    "FIRST_MESSAGE_CHARS",
    "NO_MESSAGES",
    "UNKNOWN_TIME",
    "InfoAccumulator",
    "SessionInfo",
    "first_message_prefix",
    "is_classified",
    "is_unknown_time",
    "message_text",
    "session_info_from_entries",
]

#: ``firstMessage`` when no user message has text (docs/rules/listing.md L.15).
NO_MESSAGES = "(no messages)"
#: ``created``/``modified`` of a session none of whose timestamps gives a date
#: (absent, unparsable, or outside years 1-9999): the Unix epoch, so it sorts
#: oldest; front ends show it as ``unknown`` (docs/listing.md, "Unknown times").
UNKNOWN_TIME = datetime(1970, 1, 1, tzinfo=UTC)
#: The most characters of the first message a listing keeps and shows
#: (``SessionInfo.first_message``, docs/listing.md "First message"): wider than any
#: terminal line or viewer title, so every title shows the same as with the whole text.
FIRST_MESSAGE_CHARS = 1000


def first_message_prefix(text: str) -> str:
    """What a listing keeps of a first message ``text`` (docs/listing.md, "First message").

    A text of at most :data:`FIRST_MESSAGE_CHARS` characters is itself. A longer one
    is cut to fewer characters and ends with ``…``, so the cut is never silent: at
    the last whitespace of its first ``FIRST_MESSAGE_CHARS - 1`` characters when that
    lies in their second half (a secret or a word is not cut in two), else exactly
    there. The result has at most ``FIRST_MESSAGE_CHARS`` characters and depends only on
    the first ``FIRST_MESSAGE_CHARS + 1``, so a store may read just those and cut
    again (the function is idempotent).
    """
    if len(text) <= FIRST_MESSAGE_CHARS:
        return text
    head = text[:FIRST_MESSAGE_CHARS - 1]
    cut = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
    if cut >= len(head) // 2:
        head = head[:cut]
    return head + "…"


def is_classified(header: Mapping[str, Any]) -> bool:
    """Whether a header marks a workflow-owned session (docs/rules/format.md seed:header,
    docs/rules/listing.md O.1).

    ``internal`` must be exactly ``True`` and ``workflow`` an object whose
    ``runId``, ``stageId`` and ``stageName`` are strings non-empty after trimming.
    """
    if header.get("internal") is not True:
        return False
    workflow = header.get("workflow")
    if not isinstance(workflow, dict):
        return False
    return all(isinstance(workflow.get(k), str) and workflow[k].strip() for k in ("runId", "stageId", "stageName"))


def message_text(message: dict[str, Any]) -> str:
    """Listing text of a user/assistant message (docs/rules/listing.md L.15, L.19).

    A string content is taken verbatim; an array gives its ``text`` blocks
    joined by one space; ``null`` or a missing content gives ``""``.
    """
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    # A loop rather than a generator: this runs for every appended message.
    parts = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            if isinstance(text, str):
                parts.append(text)
    return " ".join(parts)


@dataclass
class SessionInfo:
    """One listed session.

    Attributes:
        id: the session id.
        path: the JSONL file path when the store has one, otherwise the id
            (never treat it as a path blindly; docs/rules/listing.md seed:listing).
        cwd: header ``cwd`` (``""`` when absent).
        name: the current name, ``None`` when never named or cleared.
        has_name: True when any ``session_info`` entry exists (cleared included).
        parent_session_id: header ``parentSessionId``.
        internal: True only for classified workflow sessions.
        workflow: the workflow object of a classified session, else ``None``.
        created: header ``createdAt`` as an aware UTC datetime.
        modified: newest user/assistant activity, never earlier than ``created``
            (docs/rules/listing.md L.16), aware UTC. Either is
            :data:`UNKNOWN_TIME` when no timestamp gives a date in years 1-9999.
        message_count: ``message`` entries over all roles and branches (docs/rules/listing.md L.14).
        first_message: text of the first user message with text, at most
            :data:`FIRST_MESSAGE_CHARS` characters (:func:`first_message_prefix`), or
            ``(no messages)``.
        summary: the session summary while fresh (docs/rules/listing.md K.4), else ``None``.
        entry_count: entries stored (every type and branch, header excluded),
            as the store keeps it (SQLite and PostgreSQL: their ``entry_count``
            column, kept on every write and rebuilt by ``reindex``; JSONL: the
            entries parsed for the row; memory: the entries held); ``None``
            when the row was built without it.
        agent: the agent that wrote the session: ``"claude-code"`` or ``"codex"``
            for a mapped foreign file (header ``foreign.agent``), else ``"pi"`` (pi
            and Atomic share the format; docs/agents/README.md).
    """

    id: str
    path: str
    cwd: str
    name: str | None
    has_name: bool
    parent_session_id: str | None
    internal: bool
    workflow: dict[str, Any] | None
    created: datetime
    modified: datetime
    message_count: int
    first_message: str
    summary: str | None
    entry_count: int | None = None
    agent: str = "pi"
    _all_messages_text: str | None = field(default=None, repr=False)
    _text_loader: Callable[[], str] | None = field(default=None, repr=False, compare=False)

    @property
    def all_messages_text(self) -> str:
        """Every non-empty user/assistant text in file order, joined by one space
        (docs/rules/listing.md L.15).

        Loaded on first access when the store keeps it apart from listing data.
        """
        if self._all_messages_text is None:
            self._all_messages_text = self._text_loader() if self._text_loader else ""
        return self._all_messages_text

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (ISO-8601 times); excludes the potentially large message text."""
        return {
            "id": self.id,
            "path": self.path,
            "cwd": self.cwd,
            "name": self.name,
            "hasName": self.has_name,
            "parentSessionId": self.parent_session_id,
            "internal": self.internal,
            "workflow": self.workflow,
            "created": _iso(self.created),
            "modified": _iso(self.modified),
            "messageCount": self.message_count,
            "firstMessage": self.first_message,
            "summary": self.summary,
            "agent": self.agent,
        }


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _datetime_from_ms(ms: float) -> datetime:
    # Out of range (a file's mtime can be anything) -> unknown, never an error.
    return utc_from_ms(ms) or UNKNOWN_TIME


def is_unknown_time(value: datetime) -> bool:
    """Whether a :class:`SessionInfo` time is :data:`UNKNOWN_TIME` (front ends show
    ``unknown`` instead of the date)."""
    return value == UNKNOWN_TIME


@dataclass
class InfoAccumulator:
    """Incremental listing state of one session; feed entries in file order.

    ``to_state()``/``from_state()`` give a JSON-ready dict, which the stores
    keep as per-session metadata. ``texts`` are the non-empty message texts,
    which callers may keep elsewhere (they grow with the transcript).
    """

    message_count: int = 0
    first_message: str | None = None
    modified_ms: float = 0.0
    has_name: bool = False
    name: str | None = None
    anchor_id: str | None = None
    summary_through: str | None = None
    summary_text: str | None = None
    texts: list[str] = field(default_factory=list)

    def add(self, entry: Entry) -> str | None:
        """Account for one entry (docs/rules/listing.md L.14-L.16, J.2, K.2-K.4).

        Returns:
            The listing text the entry added to :attr:`texts` (a user or
            assistant message's non-empty text), else ``None``.
        """
        entry_type = entry.get("type")
        if entry_type == "message":
            self.message_count += 1
            message = entry.get("message")
            if not isinstance(message, dict):
                return None
            role = message.get("role")
            if role not in ("user", "assistant"):
                return None
            self.anchor_id = entry.get("id")
            if "content" not in message:
                return None  # docs/rules/listing.md L.15/L.16 filter: no content key, no text and no activity
            stamp = message.get("timestamp")
            if not time_in_range(stamp):
                # Not a number, or no date (past year 9999, before year 1): the entry's
                # own timestamp, else this message adds no activity (docs/listing.md).
                stamp = parse_timestamp_ms(entry.get("timestamp"))
                if not time_in_range(stamp):
                    stamp = None
            if stamp is not None and stamp > self.modified_ms:
                self.modified_ms = float(stamp)
            text = message_text(message)
            if text:
                self.texts.append(text)
                if role == "user" and self.first_message is None:
                    # Only what a listing shows is kept (docs/listing.md, "First message").
                    self.first_message = first_message_prefix(text)
                return text
        elif entry_type == "session_info":
            name = entry.get("name")
            name = name.strip() if isinstance(name, str) else ""
            self.has_name = True
            self.name = name or None
        elif entry_type == "session_summary":
            through = entry.get("summarizedThroughId")
            summary = entry.get("summary")
            self.summary_through = through if isinstance(through, str) else None
            self.summary_text = summary if isinstance(summary, str) else None
        elif entry_type == "branch_summary":
            self.summary_through = None
            self.summary_text = None
        return None

    def extend(self, entries: Iterable[Entry]) -> InfoAccumulator:
        """Account for several entries; returns ``self``."""
        for entry in entries:
            self.add(entry)
        return self

    @property
    def summary(self) -> str | None:
        """The fresh summary text (docs/rules/listing.md K.4), else ``None``."""
        if self.summary_through is not None and self.summary_through == self.anchor_id:
            return self.summary_text
        return None

    def to_state(self) -> dict[str, Any]:
        """Metadata without ``texts``, as a JSON-ready dict."""
        return {
            "messageCount": self.message_count,
            "firstMessage": self.first_message,
            "modifiedMs": self.modified_ms,
            "hasName": self.has_name,
            "name": self.name,
            "anchorId": self.anchor_id,
            "summaryThrough": self.summary_through,
            "summaryText": self.summary_text,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> InfoAccumulator:
        """Rebuild from :meth:`to_state` output (``texts`` left empty)."""
        return cls(
            message_count=state["messageCount"],
            first_message=state["firstMessage"],
            modified_ms=state["modifiedMs"],
            has_name=state["hasName"],
            name=state["name"],
            anchor_id=state["anchorId"],
            summary_through=state["summaryThrough"],
            summary_text=state["summaryText"],
        )

    def to_info(self, header: Mapping[str, Any], path: str, *, fallback_mtime: float | None = None,
                text_loader: Callable[[], str] | None = None, entry_count: int | None = None) -> SessionInfo:
        """The :class:`SessionInfo` of a session with this state and ``header``.

        Args:
            header: the format-4 header.
            path: the JSONL path or, for stores without files, the session id.
            fallback_mtime: file modification time in seconds, used for
                ``modified`` when neither messages nor header give one (docs/rules/listing.md L.16).
            text_loader: called on first access of ``all_messages_text`` when
                ``texts`` is not held in memory.
            entry_count: the session's number of entries, when the caller knows it.
        """
        classified = is_classified(header)
        created_ms = parse_timestamp_ms(header.get("createdAt"))
        if not time_in_range(created_ms):
            created_ms = None
        # State kept by an older version may hold a time out of range: unknown, as above.
        activity_ms = self.modified_ms if time_in_range(self.modified_ms) else 0.0
        if activity_ms > 0:
            # A session cannot be modified before it was created: a fork or a
            # branched session copies older messages, and its creation is its
            # latest activity (docs/rules/listing.md L.16).
            modified_ms: float | None = max(activity_ms, created_ms or 0.0)
        elif created_ms is not None:
            modified_ms = created_ms
        elif fallback_mtime is not None:
            modified_ms = fallback_mtime * 1000.0
        else:
            modified_ms = 0.0
        cwd = header.get("cwd")
        parent = header.get("parentSessionId")
        info = SessionInfo(
            id=header["id"],
            path=path,
            cwd=cwd if isinstance(cwd, str) else "",
            name=self.name,
            has_name=self.has_name,
            parent_session_id=parent if isinstance(parent, str) else None,
            internal=classified,
            workflow=header.get("workflow") if classified else None,
            created=_datetime_from_ms(created_ms if created_ms is not None else modified_ms or 0.0),
            modified=_datetime_from_ms(modified_ms or 0.0),
            message_count=self.message_count,
            # State written before 0.2.0 may hold the whole text: cut it the same way.
            first_message=first_message_prefix(self.first_message) if self.first_message is not None
            else NO_MESSAGES,
            summary=self.summary,
            entry_count=entry_count,
            agent=agent_of_header(header),
            _text_loader=text_loader,
        )
        if text_loader is None:
            info._all_messages_text = " ".join(self.texts)
        return info


def session_info_from_entries(header: Mapping[str, Any], entries: Iterable[Entry], path: str,
                              fallback_mtime: float | None = None) -> SessionInfo:
    """The :class:`SessionInfo` of a loaded session (docs/rules/listing.md), with its entry count."""
    accumulator = InfoAccumulator()
    count = 0
    for entry in entries:
        accumulator.add(entry)
        count += 1
    return accumulator.to_info(header, path, fallback_mtime=fallback_mtime, entry_count=count)
