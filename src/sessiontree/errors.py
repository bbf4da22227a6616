"""The exception hierarchy of sessiontree (docs/rules/manager.md spec:python-api, docs/rules/errors.md §3.9).

Every error the library raises on purpose derives from :class:`SessionError`.
Each class carries the data a caller needs as attributes, and a message a
user can act on. The CLI maps them to one stderr line and exit status 1.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "INVALID_SESSION_ID_MESSAGE",
    "AmbiguousEntryPrefixError",
    "AmbiguousSessionPrefixError",
    "CorruptEntryError",
    "EntryNotFoundError",
    "InvalidSessionError",
    "InvalidSessionIdError",
    "ListingCancelledError",
    "SearchCursorError",
    "SearchQueryError",
    "SessionChangedError",
    "SessionError",
    "SessionExistsError",
    "SessionInUseError",
    "SessionNotFoundError",
    "StorageError",
    "StoreOpenError",
    "SyncConflictError",
    "ToolPairingError",
    "UnknownEntryPrefixError",
    "UnknownSessionPrefixError",
    "UnsupportedVersionError",
]

#: docs/rules/format.md B.5: the exact text for a rejected caller-supplied session id.
INVALID_SESSION_ID_MESSAGE = (
    "Session id must be non-empty, contain only alphanumeric characters, "
    "'-', '_', and '.', and start and end with an alphanumeric character"
)


class SessionError(Exception):
    """Base class of every error sessiontree raises on purpose."""


class SessionNotFoundError(SessionError, LookupError):
    """No session with this id exists in the store.

    Attributes:
        session_id: the id that was looked up.
    """

    def __init__(self, session_id: str, where: str | None = None) -> None:
        self.session_id = session_id
        suffix = f" in {where}" if where else ""
        super().__init__(f"Session {session_id} not found{suffix}")


class UnknownSessionPrefixError(SessionNotFoundError):
    """No stored session matches a session id or prefix a person typed (docs/listing.md, "Ids").

    Attributes:
        session_id: what was typed (a prefix, or ``<parent prefix>/<agent prefix>``).
    """

    def __init__(self, prefix: str) -> None:
        super().__init__(prefix)
        self.args = (f"no session matches {prefix!r}",)

    def __str__(self) -> str:
        return str(self.args[0])


class AmbiguousSessionPrefixError(SessionError, LookupError):
    """A typed session prefix matches several sessions (docs/listing.md, "Ids").

    Attributes:
        prefix: what was typed.
        candidates: the matching sessions, sorted: whole ids, a subagent session as
            ``<parent>/<agent>`` in the short forms lists print; at most the first five
            are named in the message.
    """

    def __init__(self, prefix: str, candidates: list[str]) -> None:
        self.prefix = prefix
        self.candidates = candidates
        shown = ", ".join(candidates[:5]) + (f" (and {len(candidates) - 5} more)" if len(candidates) > 5 else "")
        super().__init__(f"session prefix {prefix!r} is ambiguous: it matches {shown}")


def _named(candidates: list[str]) -> str:
    """The first five candidates, and how many more."""
    return ", ".join(candidates[:5]) + (f" (and {len(candidates) - 5} more)" if len(candidates) > 5 else "")


class UnknownEntryPrefixError(SessionError, LookupError):
    """No entry of a session matches an entry id or prefix a person typed (docs/listing.md,
    "Ids"; the rule of :func:`sessiontree.format.idprefix.resolve_entry_prefix`).

    Attributes:
        prefix: what was typed.
        what: how the message names the entry (``"entry"``, ``"entry of session ID"``).
    """

    def __init__(self, prefix: str, what: str = "entry") -> None:
        self.prefix = prefix
        self.what = what
        super().__init__(f"no {what} matches {prefix!r}")


class AmbiguousEntryPrefixError(SessionError, LookupError):
    """A typed entry prefix matches several entries of a session (docs/listing.md, "Ids").

    Attributes:
        prefix: what was typed.
        candidates: the matching entry ids, sorted; the first five are named in the message.
        what: how the message names the entry (``"entry"``, ``"entry of session ID"``).
    """

    def __init__(self, prefix: str, candidates: list[str], what: str = "entry") -> None:
        self.prefix = prefix
        self.candidates = candidates
        self.what = what
        super().__init__(f"{what} prefix {prefix!r} is ambiguous: it matches {_named(candidates)}")


class SessionExistsError(SessionError):
    """A session with this id already exists in the target store.

    Attributes:
        session_id: the conflicting id.
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"Session {session_id} already exists")


class EntryNotFoundError(SessionError, KeyError):
    """An entry id is not in this session's index.

    ``str()`` is exactly ``Entry <id> not found`` (docs/rules/errors.md).

    Attributes:
        entry_id: the missing id.
    """

    def __init__(self, entry_id: str) -> None:
        self.entry_id = entry_id
        super().__init__(entry_id)

    def __str__(self) -> str:  # KeyError would quote the argument
        return f"Entry {self.entry_id} not found"


class InvalidSessionIdError(SessionError, ValueError):
    """A caller-supplied session id does not match the allowed pattern (docs/rules/format.md B.4/B.5).

    Attributes:
        session_id: the rejected value.
    """

    def __init__(self, session_id: Any) -> None:
        self.session_id = session_id
        super().__init__(INVALID_SESSION_ID_MESSAGE)


class StoreOpenError(SessionError):
    """A store could not be opened (bad URL, unwritable directory, corrupt database).

    Never followed by a silent fallback to memory (docs/rules/manager.md seed:api).
    """


class StorageError(SessionError):
    """A write failed; nothing was published. The OS or database error is ``__cause__``.

    Attributes:
        rollback_error: when undoing the failed write failed too (the file or
            database may then hold part of it), that second error; else ``None``.
    """

    rollback_error: BaseException | None = None


class SessionChangedError(StorageError):
    """The stored session no longer holds the records a lazily opened manager was built from.

    :meth:`SessionManager.open <sessiontree.session.manager.SessionManager.open>` of a
    SQLite session reads only what the context needs and the rest of the
    session when something first asks for it (docs/stores.md, "Lazy open").
    If another process replaced or deleted the session in between (``sync
    --replace``, ``delete``), the records read then are not those of the
    session as it was opened, and this is raised instead of mixing the two.
    Entries appended by other writers are not a change: they are after the
    opened snapshot, which a manager never sees (as with a full open).

    Attributes:
        session_id: the session concerned.
    """

    def __init__(self, session_id: str, detail: str) -> None:
        self.session_id = session_id
        super().__init__(f"session {session_id} changed after it was opened ({detail}): open it again")


class InvalidSessionError(SessionError):
    """A session file or record is structurally invalid and was rejected.

    Attributes:
        path: the file (or a description of the source), or ``None``.
        line: 1-based physical line number, or ``None`` when not line-specific.
        reason: what is wrong, naming the field where one is at fault.
    """

    def __init__(self, reason: str, path: str | None = None, line: int | None = None) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        where = ""
        if path is not None and line is not None:
            where = f"{path}:{line}: "
        elif path is not None:
            where = f"{path}: "
        elif line is not None:
            where = f"line {line}: "
        super().__init__(f"{where}{reason}")


class CorruptEntryError(InvalidSessionError):
    """A stored record no longer matches the checksum recorded when it was written.

    The store's bytes were damaged after the write (disk or filesystem fault,
    a page of the database overwritten, an edit behind the store's back), so
    the record is not exported or loaded as if it were the original
    (docs/stores.md). ``sessiontree check --store`` lists every such record.

    Attributes:
        session_id: the session holding the record.
        entry_id: the entry's id as the damaged row's ``id`` column gives it,
            or ``None`` for the header.
        line: 1-based line of the record in the session's JSONL form (the
            header is line 1, the first entry line 2).
        path, reason: as :class:`InvalidSessionError` (``path`` is ``<store url>#<session id>``).
    """

    def __init__(self, session_id: str, entry_id: str | None, line: int, path: str | None = None) -> None:
        self.session_id = session_id
        self.entry_id = entry_id
        what = "header" if entry_id is None else f"entry {entry_id}"
        super().__init__(
            f"stored {what} of session {session_id} does not match the checksum recorded when it was "
            "written: the store is damaged (run sessiontree check --store)", path, line)


class UnsupportedVersionError(InvalidSessionError):
    """The header's ``version`` is a future or unrecognized value (docs/rules/versions.md C.12/C.13).

    Attributes:
        version: the value found in the header (any JSON value).
    """

    def __init__(self, version: Any, path: str | None = None, line: int | None = None) -> None:
        self.version = version
        super().__init__(f"unsupported session version {version!r}", path, line)


class SessionInUseError(SessionError):
    """The session is open in this manager and cannot be deleted through it.

    Attributes:
        session_id: the id of the open session.
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"Session {session_id} is open in this manager and cannot be deleted")


class ListingCancelledError(SessionError):
    """A listing was cancelled through its ``cancel`` event; no partial list is returned."""

    def __init__(self) -> None:
        super().__init__("Session listing was cancelled")


class ToolPairingError(SessionError, ValueError):
    """Provider-bound context reuses a tool call id across assistant messages (docs/rules/projection.md P.9).

    Not repaired: the request must not be sent.

    Attributes:
        call_ids: the offending tool call ids, in first-seen order.
    """

    def __init__(self, call_ids: list[str]) -> None:
        self.call_ids = call_ids
        plural = len(call_ids) != 1
        super().__init__(
            "Context is structurally invalid for the provider: tool call id"
            f"{'s' if plural else ''} {', '.join(call_ids)} appear{'' if plural else 's'} in more than one "
            "assistant message. The request was not sent."
        )


class SyncConflictError(SessionError):
    """A sync write found the per-file sync state changed since it was read: another
    ``sync`` (or a crash-recovered one) committed this file first. Nothing was written;
    the caller reads the state again and decides anew (docs/sync.md).

    Attributes:
        path: the source file whose state changed.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"the sync state of {path} changed while it was being synced")


class SearchQueryError(SessionError, ValueError):
    """A search query that cannot be run: empty (no term once quotes and
    whitespace are removed), or over the limits of :mod:`sessiontree.core.search`
    (``MAX_QUERY_CHARS`` characters, ``MAX_TERMS`` terms).

    Attributes:
        query: the query as given.
        reason: what is wrong, in words.
    """

    def __init__(self, query: str, reason: str) -> None:
        self.query = query
        self.reason = reason
        super().__init__(f"invalid search query: {reason}")


class SearchCursorError(SessionError, ValueError):
    """A search cursor that cannot continue this search (docs/search.md, "Paging"): not one
    :func:`sessiontree.search.query.search_request` made (damaged, cut or edited), or made
    for another query or other filters. Every edge reports it with this message: the CLI as
    a usage error of ``--cursor``, the viewer as a 400 page, MCP as a tool input error.

    Attributes:
        cursor: the cursor as given.
        reason: what is wrong, in words.
    """

    def __init__(self, cursor: str, reason: str) -> None:
        self.cursor = cursor
        self.reason = reason
        super().__init__(f"invalid search cursor: {reason}")
