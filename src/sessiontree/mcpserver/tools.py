"""What each MCP tool answers, as plain data (docs/mcp.md): no protocol here.

:class:`SessionReader` holds one store, opened read-only by its caller, and
answers the tools of :mod:`sessiontree.mcpserver.server` with JSON-ready
dicts. Every rule comes from the library: search matching from
:func:`sessiontree.search.query.search`, the listing from
:meth:`SessionManager.list_all`, the model context from the projection
(:meth:`SessionManager.build_session_projection`, docs/rules/projection.md
seed:context-building), usage from :func:`sessiontree.usage.report.usage_report`.
This module only shapes, pages (:mod:`sessiontree.mcpserver.paging`) and checks arguments.

Session text is data: it is returned as JSON strings, unchanged (JSON carries
any character safely); roles and the entry each item came from are always
explicit, so a client can tell transcript text from the server's own words.
Nothing here writes: sessions are opened by the read service
(:class:`sessiontree.session.reading.ReadOnlySessions`), whose answers take the leaf as an
argument, so tools running at once on the SDK's worker threads share them without a lock.

Errors a caller can fix raise :class:`ToolInputError` with one clear line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from sessiontree.core import render
from sessiontree.core.listing import session_info_from_entries
from sessiontree.diff.branches import diff_branches
from sessiontree.errors import (
    AmbiguousEntryPrefixError,
    AmbiguousSessionPrefixError,
    SessionError,
    UnknownEntryPrefixError,
    UnknownSessionPrefixError,
)
from sessiontree.format.idprefix import resolve_entry_prefix, resolve_session_prefix
from sessiontree.format.types import ENTRY_TYPES, MESSAGE_ROLES
from sessiontree.mcpserver.paging import (
    CursorError,
    check_budget,
    cursor_tool,
    decode_cursor,
    fit_item,
    json_size,
    page_fields,
    replace_lone_surrogates,
    same_text,
    take_page,
)
from sessiontree.mcpserver.redaction import Scrubber
from sessiontree.search.query import parse_when, search_request
from sessiontree.search.suggest import suggest
from sessiontree.session.listing import ListingFilter, list_sessions
from sessiontree.session.reading import ReadOnlySession, ReadOnlySessions
from sessiontree.stores.base import SessionStore
from sessiontree.usage.report import COST_MODES, GROUPINGS, session_usage, usage_report

#: What ``role`` accepts in ``search_sessions``: message roles and entry types (as ``sessiontree search --role``).
SEARCH_ROLES = tuple(dict.fromkeys([*sorted(MESSAGE_ROLES), *sorted(ENTRY_TYPES)]))
#: Default and largest ``limit`` of the listing tools.
DEFAULT_LIMIT = 20
MAX_LIMIT = 500
#: Characters kept for the paging fields (counts, cursor, note) beside the items.
PAGING_RESERVE = 400
#: Characters of the text block's summary line (server._text cuts it to this): the text block,
#: summary + note + the JSON, is what ``max_chars`` bounds (docs/mcp.md, "Paging and budgets").
SUMMARY_RESERVE = 200
#: The fixed part of an answer (everything but its paged list) takes at most this share of
#: ``max_chars``; beyond it, it is clipped (:func:`~sessiontree.mcpserver.paging.fit_item`).
FIXED_SHARE = 0.75
#: Entries on each side of ``around`` in ``get_entries`` by default.
DEFAULT_AROUND = 5


#: Sessions kept read and parsed between calls; stores without a change token
#: (memory, PostgreSQL) are read again at most this often (seconds).
CACHED_SESSIONS = 4
MIN_REREAD_SECONDS = 1.0


class ToolInputError(ValueError):
    """An argument the caller must change: unknown session or entry, bad date, role or cursor."""


def _check_limit(limit: int | None, default: int = DEFAULT_LIMIT) -> int:
    if limit is None:
        return default
    if not 1 <= limit <= MAX_LIMIT:
        raise ToolInputError(f"limit must be between 1 and {MAX_LIMIT}, not {limit}")
    return limit


def _when(value: str | None, name: str, *, end: bool) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_when(value, end=end)
    except ValueError as exc:
        raise ToolInputError(f"{name}: {exc}") from None


def _roles(role: str | Sequence[str] | None) -> list[str] | None:
    """``role`` in canonical spelling (case-insensitive), as ``sessiontree search --role``."""
    if role is None:
        return None
    given = [role] if isinstance(role, str) else list(role)
    canonical = {name.lower(): name for name in SEARCH_ROLES}
    out = []
    for name in given:
        known = canonical.get(name.lower())
        if known is None:
            raise ToolInputError(f"unknown role {name!r}; one of: {', '.join(SEARCH_ROLES)}")
        out.append(known)
    return out or None


#: The fields of a listing row (``SessionInfo.to_dict``) that hold session text.
#: Text of a session's listing row that ``redact`` scans: the header's ``cwd`` and the stored
#: file's ``path`` as well as names and messages, as ``header.cwd`` is (docs/mcp.md, "Redaction").
_INFO_TEXT = ("cwd", "path", "name", "firstMessage", "summary")


def answer_size(answer: Mapping[str, Any]) -> int:
    """Characters a client reads at most for ``answer``: the text block (summary line, the
    note, the JSON), which also bounds ``structuredContent`` (the JSON alone)."""
    return json_size(answer) + len(str(answer.get("note") or "")) + SUMMARY_RESERVE + 2


def _fit_answer(head: dict[str, Any], key: str, items: Callable[[], Iterable[dict[str, Any]]], *,
                offset: int, limit: int | None, budget: int, tool: str, shape: Mapping[str, Any], what: str,
                total: int | None = None, has_more: Callable[[], bool] | None = None,
                tail: Callable[[], Mapping[str, Any]] | None = None, note_extra: str = "",
                cursor_at: Callable[[int], str] | None = None) -> dict[str, Any]:
    """An answer never over ``budget`` (:func:`answer_size`): the fixed part ``head`` (clipped
    when it would take more than :data:`FIXED_SHARE` of the budget), then one page of
    ``items()`` under ``key`` with the paging fields, then ``tail``; the page is shortened
    until the whole fits. ``items`` gives a fresh iterator from the list's start on each call;
    ``tail`` the last fields, once the page is taken (a count of what the page's items redacted);
    ``cursor_at`` the list's own cursor after that many items (search's), instead of an offset's."""
    after = dict(tail()) if tail is not None else {}
    cap = int(budget * FIXED_SHARE) - PAGING_RESERVE - SUMMARY_RESERVE - json_size(after)
    head = fit_item(head, max(cap, 64))
    room = budget - json_size(head) - json_size(after) - PAGING_RESERVE - SUMMARY_RESERVE
    while True:
        page = take_page(items(), offset, limit, max(room, 64), has_more=has_more)
        fields = page_fields(page, tool, shape, budget, what, total, cursor_at=cursor_at)
        if "note" in fields and note_extra:
            fields["note"] += note_extra
        if tail is not None:
            after = dict(tail())
        answer = {**head, key: page.items, **fields, **after}
        over = answer_size(answer) - budget
        if over <= 0 or room <= 64:
            return answer
        room -= over


def _redacted(scrub: Scrubber | None) -> dict[str, Any]:
    """``{"redactedSecrets": N}`` for a redacted answer (distinct secrets replaced in it), else nothing."""
    return {} if scrub is None else {"redactedSecrets": scrub.secrets}


def _leaf_rows(entries: Sequence[Mapping[str, Any]]) -> tuple[list[str], dict[str, list[str]]]:
    """The tips of the tree and the branch points (parent id -> child ids), as ``show``
    counts them: a persisted leaf move (a ``leaf`` entry) is bookkeeping, not a branch."""
    nodes = [e for e in entries if e.get("type") != "leaf"]
    children: dict[str, list[str]] = {}
    for entry in nodes:
        parent = entry.get("parentId")
        if isinstance(parent, str):
            children.setdefault(parent, []).append(entry["id"])
    tips = [e["id"] for e in nodes if e["id"] not in children]
    points = {parent: kids for parent, kids in children.items() if len(kids) > 1}
    return tips, points


def without_source_record(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    """``entry`` without the verbatim source record another agent's entry carries
    (``foreign.raw`` / ``foreign.rawBase64``: docs/agents/README.md); the entry itself when
    it has none. ``foreign.rawChars`` says how long the record left out is."""
    foreign = entry.get("foreign")
    if not isinstance(foreign, Mapping) or ("raw" not in foreign and "rawBase64" not in foreign):
        return entry
    kept = {k: v for k, v in foreign.items() if k not in ("raw", "rawBase64")}
    record = foreign.get("raw", foreign.get("rawBase64"))
    kept["rawChars"] = len(record) if isinstance(record, str) else 0
    return {**entry, "foreign": kept}


def folded_kind(entry: Mapping[str, Any]) -> str | None:
    """The kind of an inert record of another agent (a ``custom`` entry carrying ``foreign``:
    a Claude Code hook, progress or system record the mapping keeps but nothing shows as a
    turn): ``recordType[:subtype]`` of its data, else its ``customType``; ``None`` for any
    other entry (pi's own custom entries included)."""
    if entry.get("type") != "custom" or not isinstance(entry.get("foreign"), Mapping):
        return None
    data = entry.get("data")
    if isinstance(data, Mapping) and isinstance(data.get("recordType"), str):
        subtype = data.get("subtype")
        return f"{data['recordType']}:{subtype}" if isinstance(subtype, str) else data["recordType"]
    return str(entry.get("customType") or "custom")


def _fold_rows(entries: Sequence[Mapping[str, Any]],
               keep: frozenset[str] = frozenset()) -> list[tuple[Mapping[str, Any], dict[str, list[str]]]]:
    """``entries`` with the inert records of other agents (:func:`folded_kind`) folded into
    the row before them (kind -> their ids, in order); those before the first other row go
    to the first one; the ids in ``keep`` (the entry asked about) are never folded. A list
    of such records only is kept as it is (nothing to fold into)."""
    rows: list[tuple[Mapping[str, Any], dict[str, list[str]]]] = []
    waiting: dict[str, list[str]] = {}
    for entry in entries:
        kind = folded_kind(entry) if entry.get("id") not in keep else None
        if kind is None:
            rows.append((entry, waiting))
            waiting = {}
        elif rows:
            rows[-1][1].setdefault(kind, []).append(str(entry.get("id")))
        else:
            waiting.setdefault(kind, []).append(str(entry.get("id")))
    if not rows:
        return [(e, {}) for e in entries]
    return rows


class SessionReader:
    """The tools' answers over one store (opened read-only by the caller).

    Sessions come from the read service (:class:`~sessiontree.session.reading.ReadOnlySessions`,
    the ``"context"`` need: the lazy open where the store has one): the last
    :data:`CACHED_SESSIONS` stay parsed, with their projections by leaf, until the
    store's change token (the JSONL file's, or the SQLite database's and its WAL's, size
    and mtime) moves, so an agent paging through a large session's context reads it
    once. Answers take the leaf as an argument: the SDK runs tools at once on worker
    threads, and none of them moves a shared manager.
    """

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.sessions = ReadOnlySessions(store, "context", size=CACHED_SESSIONS, min_reread=MIN_REREAD_SECONDS)

    # ------------------------------------------------------------------ helpers

    def resolve_session(self, prefix: str) -> str:
        """The one session ``prefix`` names: a whole id, a unique prefix (a session's own
        subagent sessions never make it ambiguous), or ``PARENT/AGENT`` for a subagent
        session; the rule of every edge (:mod:`sessiontree.format.idprefix`).

        Raises:
            ToolInputError: none matches, or several do (the candidates named).
        """
        if not isinstance(prefix, str) or not prefix.strip():
            raise ToolInputError("session id must be a non-empty string")
        try:
            return resolve_session_prefix(prefix, self.store.session_ids())
        except UnknownSessionPrefixError:
            raise ToolInputError(f"no session matches {prefix!r} (list_sessions or search_sessions give ids)") from None
        except AmbiguousSessionPrefixError as exc:
            raise ToolInputError(str(exc)) from None

    @staticmethod
    def _resolve_entry(manager: ReadOnlySession, prefix: str, what: str = "entry") -> str:
        if not isinstance(prefix, str) or not prefix:
            raise ToolInputError(f"{what} id must be a non-empty string")
        if manager.get_entry(prefix) is not None:
            return prefix
        # The one entry-prefix rule of every edge (format/idprefix.py); an id holding a lone
        # surrogate was sent as U+FFFD (paging.without_lone_surrogates): that form matches too.
        try:
            return resolve_entry_prefix(prefix, (e["id"] for e in manager.get_entries()),
                                        what="entry of this session", shown=replace_lone_surrogates)
        except (UnknownEntryPrefixError, AmbiguousEntryPrefixError) as exc:
            raise ToolInputError(str(exc)) from None

    def _stored_entry(self, session_id: str, entry_id: str,
                      whole: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any] | None:
        """One stored entry, or ``None`` when it cannot be read now. Looked up by id where the
        store indexes ids (SQLite, PostgreSQL); elsewhere the session is read once per call and
        kept in ``whole`` (session id -> entries by id), the cost of one lookup there anyway."""
        try:
            if self.store.partial_reads:
                found = self.store.read_entries(session_id, [entry_id])
                return found[0] if found else None
            if session_id not in whole:
                whole[session_id] = {e["id"]: e for e in self.store.read(session_id).entries}
        except (SessionError, OSError):
            return None
        return whole[session_id].get(entry_id)

    # ------------------------------------------------------------------ tools

    def search_sessions(self, query: str, *, cwd: str | None = None, role: str | Sequence[str] | None = None,
                        since: str | None = None, until: str | None = None, session: str | None = None,
                        limit: int | None = None, cursor: str | None = None,
                        max_chars: int | None = None, redact: bool = False) -> dict[str, Any]:
        """Hits for ``query``, best first, by the rule of ``sessiontree search`` (docs/search.md).

        ``redact``: titles, names and snippets with secrets replaced (:meth:`Scrubber.snippet`).

        Returns:
            ``{"query"[, "suggestions"], "hits": [SearchHit.to_dict()...], "returned", "nextCursor",
            "truncated"[, "note"][, "redactedSecrets"]}``; ``suggestions`` (up to three close queries
            that find something: :func:`~sessiontree.search.suggest.suggest`) when there is no hit.
        """
        count = _check_limit(limit)
        budget = check_budget(max_chars)
        roles = _roles(role)
        other = cursor_tool(cursor)
        if other is not None:
            raise CursorError(f"cursor belongs to another tool ({other!r}), not search_sessions")
        scrub = Scrubber() if redact else None
        session_id = self.resolve_session(session) if session is not None else None
        # Paged by the search's own cursor (docs/search.md, "Paging"): after the last hit
        # shown, by its sort key, so new entries between calls neither repeat nor skip a hit.
        result = search_request(self.store, query, cwd=cwd, roles=roles, since=_when(since, "since", end=False),
                                until=_when(until, "until", end=True), session=session_id, limit=count,
                                cursor=cursor or None)
        read: dict[str, dict[str, dict[str, Any]]] = {}

        def hits() -> Iterator[dict[str, Any]]:
            for hit in (h.to_dict() for h in result.hits):
                if scrub is not None:
                    hit = scrub.snippet(hit, self._stored_entry(hit["sessionId"], hit["entryId"], read))
                yield hit

        head: dict[str, Any] = {"query": query}
        if not result.hits and not cursor:
            # No hits: close queries made of stored words (search/suggest.py), as the CLI and viewer offer.
            head["suggestions"] = suggest(self.store, query, cwd=cwd, roles=roles,
                                          since=_when(since, "since", end=False),
                                          until=_when(until, "until", end=True), session=session_id)
        return _fit_answer(head, "hits", hits, offset=0, limit=count, budget=budget,
                           tool="search_sessions", shape={}, what="hits", has_more=lambda: result.more,
                           tail=lambda: _redacted(scrub), cursor_at=result.cursor_after)

    def list_sessions(self, *, cwd: str | None = None, since: str | None = None, named_only: bool = False,
                      include_internal: bool = False, limit: int | None = None, cursor: str | None = None,
                      max_chars: int | None = None, redact: bool = False) -> dict[str, Any]:
        """Sessions newest first, as ``sessiontree list`` (docs/rules/listing.md seed:listing).

        ``since`` keeps sessions modified at or after it; ``named_only`` those with a current name;
        ``redact``: names, first messages and summaries with secrets replaced.

        Returns:
            ``{"sessions": [SessionInfo.to_dict() + "entryCount"...], "total", paging fields}``.
        """
        count = _check_limit(limit)
        budget = check_budget(max_chars)
        start = _when(since, "since", end=False)
        shape = {"cwd": cwd, "since": since, "named_only": named_only, "include_internal": include_internal,
                 "limit": count, "max_chars": budget, "redact": redact}
        offset = decode_cursor(cursor, "list_sessions", shape)
        scrub = Scrubber() if redact else None
        kept = list_sessions(self.store, ListingFilter(cwd=cwd, since=start, named_only=named_only,
                                                       include_internal=include_internal))
        rows = []
        for info in kept:
            row = info.to_dict()
            row.pop("path", None)  # a file path of the server's machine, or the id again
            row["entryCount"] = info.entry_count
            rows.append(row)

        def shown() -> Iterator[dict[str, Any]]:
            for n, row in enumerate(rows):
                yield scrub.fields(dict(row), *_INFO_TEXT) if scrub is not None and n >= offset else row

        skipped = kept.skipped
        return _fit_answer({}, "sessions", shown, offset=offset, limit=count, budget=budget,
                           tool="list_sessions", shape=shape, what="sessions", total=len(rows),
                           tail=lambda: {**({"skippedSessions": skipped} if skipped else {}), **_redacted(scrub)})

    def get_session(self, session: str, *, cursor: str | None = None,
                    max_chars: int | None = None, redact: bool = False) -> dict[str, Any]:
        """A session's outline: header, listing info, usage, branch points and leaves (not the entries).

        Leaves are paged (newest first); branch points list each parent with its children.
        ``redact``: the header, names, labels and summaries with secrets replaced.

        Returns:
            ``{"sessionId", "header", "info", "entryCount", "activeLeafId", "activeBranchLength",
            "labels", "usage", "branchPoints": [{"id", "childIds"}...],
            "leaves": [{"id", "type", "timestamp", "depth", "active", "label", "summary"}...], paging fields}``.
        """
        budget = check_budget(max_chars)
        session_id = self.resolve_session(session)
        shape = {"session": session_id, "max_chars": budget, "redact": redact}
        offset = decode_cursor(cursor, "get_session", shape)
        scrub = Scrubber() if redact else None
        manager = self.sessions.get(session_id)
        usage = session_usage(self.store, session_id).to_dict()
        entries = manager.get_entries()
        header = manager.get_header()
        info = session_info_from_entries(header, entries, session_id).to_dict()
        info.pop("path", None)
        leaf_id = manager.get_leaf_id()
        branch = manager.get_branch()
        tips, points = _leaf_rows(entries)
        labels = {e["targetId"]: manager.get_label(e["targetId"]) for e in entries
                  if e.get("type") == "label" and isinstance(e.get("targetId"), str) and manager.get_label(e["targetId"])}

        def leaves() -> Iterator[dict[str, Any]]:
            # The active leaf first, then the others newest first: the branches worth a look.
            ordered = sorted(tips, key=lambda i: (i != leaf_id, -entries_index[i]))
            for tip in ordered:
                entry = manager.get_entry(tip) or {}
                row = {"id": tip, "type": entry.get("type"), "timestamp": entry.get("timestamp"),
                       "depth": len(manager.get_branch(tip)), "active": tip == leaf_id,
                       "label": manager.get_label(tip), "summary": render.entry_summary(entry)}
                yield scrub.fields(row, "label", "summary") if scrub is not None else row

        entries_index = {e["id"]: n for n, e in enumerate(entries)}
        shown_header: Mapping[str, Any] = header
        if scrub is not None:
            shown_header = scrub.entry(header)
            scrub.fields(info, *_INFO_TEXT)
            labels = {target: scrub.text(label) for target, label in labels.items()}
        head = {"sessionId": session_id, "header": shown_header, "info": info, "entryCount": len(entries),
                "activeLeafId": leaf_id, "activeBranchLength": len(branch), "leafCount": len(tips),
                "labels": labels, "usage": usage,
                "branchPoints": [{"id": parent, "childIds": kids} for parent, kids in points.items()]}
        # The outline's fixed part takes what it needs (clipped past FIXED_SHARE); the leaves page the rest.
        return _fit_answer(head, "leaves", leaves, offset=offset, limit=None, budget=budget, tool="get_session",
                           shape=shape, what="leaves", total=len(tips), tail=lambda: _redacted(scrub))

    def get_context(self, session: str, *, leaf: str | None = None, cursor: str | None = None,
                    max_chars: int | None = None, redact: bool = False) -> dict[str, Any]:
        """The model context of the branch ending at ``leaf`` (default: the active leaf), oldest
        first: the projection with compaction boundaries, context edits and synthetic tool results
        applied (docs/rules/projection.md seed:context-building). ``redact``: the messages and
        the system message with secrets replaced.

        Returns:
            ``{"sessionId", "leafId", "thinkingLevel", "model", "contextWindow", "systemMessage",
            "messageCount", "messages": [{"index", "entryId", "entryType", "message"}...], paging fields}``.
        """
        budget = check_budget(max_chars)
        session_id = self.resolve_session(session)
        manager = self.sessions.get(session_id)
        leaf_id = self._resolve_entry(manager, leaf, "leaf") if leaf is not None else manager.get_leaf_id()
        shape = {"session": session_id, "leaf": leaf_id, "max_chars": budget, "redact": redact}
        offset = decode_cursor(cursor, "get_context", shape)
        scrub = Scrubber() if redact else None
        projection = manager.build_session_projection(leaf_id)

        def items() -> Iterator[dict[str, Any]]:
            index = 0
            for projected in projection.entries:
                source = projected.source_entry
                for message in projected.messages:
                    if scrub is not None and index >= offset:
                        message = scrub.message(message)
                    yield {"index": index, "entryId": source.get("id"), "entryType": source.get("type"),
                           "message": message}
                    index += 1

        head = {"sessionId": session_id, "leafId": leaf_id, "thinkingLevel": projection.thinking_level,
                "model": dict(projection.model) if projection.model else None,
                "contextWindow": projection.context_window,
                "systemMessage": scrub.text(projection.system_message) if scrub else projection.system_message,
                "messageCount": len(projection.messages)}
        # The active leaf may move while a client pages: naming it keeps the walk on this branch.
        return _fit_answer(head, "messages", items, offset=offset, limit=None, budget=budget, tool="get_context",
                           shape=shape, what="messages", total=len(projection.messages), tail=lambda: _redacted(scrub),
                           note_extra=f'; pass leaf "{leaf_id}" to stay on this branch' if leaf_id is not None
                           else "")

    def get_entries(self, session: str, *, ids: Sequence[str] | None = None, around: str | None = None,
                    before: int = DEFAULT_AROUND, after: int = DEFAULT_AROUND, cursor: str | None = None,
                    max_chars: int | None = None, redact: bool = False, raw: bool = False,
                    fold: bool = True) -> dict[str, Any]:
        """Stored entries: those of ``ids`` (in the order given), or the path around one
        entry (``before`` ancestors, the entry, ``after`` entries continuing toward the active
        leaf, or along the newest child off the active branch), or every entry in file order.
        ``redact``: entries with secrets replaced, structural fields kept (docs/secrets.md).
        ``raw``: keep the verbatim source record of another agent's entry (``foreign.raw``,
        ``foreign.rawBase64``), left out by default (docs/mcp.md). ``fold`` (default): another
        agent's inert records (Claude Code hook, progress and system records, kept as ``custom``
        entries: :func:`folded_kind`) are not rows of their own but listed on the row before
        them (``folded``: kind -> entry ids); entries named in ``ids`` are never folded.

        Returns:
            ``{"sessionId", "activeLeafId", "entries": [{"onActiveBranch", "entry"[, "folded"]}...],
            paging fields}``.
        """
        if ids is not None and around is not None:
            raise ToolInputError("give ids or around, not both")
        if not 0 <= before <= MAX_LIMIT or not 0 <= after <= MAX_LIMIT:
            raise ToolInputError(f"before and after must be between 0 and {MAX_LIMIT}")
        budget = check_budget(max_chars)
        session_id = self.resolve_session(session)
        manager = self.sessions.get(session_id)
        active = {e["id"] for e in manager.get_branch()}
        chosen: list[Mapping[str, Any]]
        if ids is not None:
            if not ids:
                raise ToolInputError("ids must name at least one entry")
            chosen = [manager.get_entry(self._resolve_entry(manager, i)) or {} for i in ids]
            resolved: Any = [e.get("id") for e in chosen]
        elif around is not None:
            center = self._resolve_entry(manager, around)
            path = manager.get_branch(center)
            chosen = list(path[-(before + 1):])
            at = center
            for _ in range(after):
                kids = [k for k in manager.get_children(at) if k.get("type") != "leaf"]
                if not kids:
                    break
                on_active = [k for k in kids if k["id"] in active]
                nxt = on_active[0] if on_active else kids[-1]
                chosen.append(nxt)
                at = nxt["id"]
            resolved = center
        else:
            chosen = list(manager.get_entries())
            resolved = None
        folding = fold and ids is None
        shape = {"session": session_id, "ids": resolved if ids is not None else None,
                 "around": resolved if around is not None else None, "before": before, "after": after,
                 "max_chars": budget, "redact": redact, "raw": raw, "fold": folding}
        offset = decode_cursor(cursor, "get_entries", shape)
        scrub = Scrubber() if redact else None
        center_id = frozenset([resolved]) if around is not None and isinstance(resolved, str) else frozenset()
        shown = _fold_rows(chosen, center_id) if folding else [(e, {}) for e in chosen]

        def rows() -> Iterator[dict[str, Any]]:
            for n, (e, folded) in enumerate(shown):
                entry = e if raw else without_source_record(e)
                row = {"onActiveBranch": e.get("id") in active,
                       "entry": scrub.entry(entry) if scrub is not None and n >= offset else entry}
                if folded:
                    row["folded"] = folded
                yield row

        return _fit_answer({"sessionId": session_id, "activeLeafId": manager.get_leaf_id()}, "entries", rows,
                           offset=offset, limit=None, budget=budget, tool="get_entries", shape=shape,
                           what="entries", total=len(shown), tail=lambda: _redacted(scrub))

    def usage_stats(self, *, by: str = "day", since: str | None = None, until: str | None = None,
                    cwd: str | None = None, timezone: str | None = None, cost: str = "auto",
                    cursor: str | None = None, max_chars: int | None = None) -> dict[str, Any]:
        """The ``sessiontree stats`` report as data (docs/usage.md): each billed call counted once.

        Returns:
            :meth:`UsageReport.to_dict` with ``groups`` paged (totals always cover every group).
        """
        if by not in GROUPINGS:
            raise ToolInputError(f"unknown grouping {by!r}: one of {', '.join(GROUPINGS)}")
        if cost not in COST_MODES:
            raise ToolInputError(f"unknown cost mode {cost!r}: one of {', '.join(COST_MODES)}")
        budget = check_budget(max_chars)
        shape = {"by": by, "since": since, "until": until, "cwd": cwd, "timezone": timezone, "cost": cost,
                 "max_chars": budget}
        offset = decode_cursor(cursor, "usage_stats", shape)
        report = usage_report(self.store, by=by, since=since, until=until, cwd=cwd, tz=timezone,
                              cost=cost).to_dict()
        groups = report.pop("groups")
        return _fit_answer(report, "groups", lambda: groups, offset=offset, limit=None, budget=budget,
                           tool="usage_stats", shape=shape, what="groups", total=len(groups))

    def diff_branches(self, session: str, *, a: str | None = None, b: str | None = None, context: bool = True,
                      cost: str = "auto", cursor: str | None = None, max_chars: int | None = None) -> dict[str, Any]:
        """Two branches compared, as ``sessiontree diff --json`` (docs/diff.md): the fork point, the
        aligned tails below it, each side's tokens and cost, and (``context``) the model contexts' delta.

        The aligned rows are paged as one list: the entry rows (``"section": "entries"``), then the
        context rows (``"section": "context"``); everything else comes whole on every page.

        Returns:
            :meth:`BranchComparison.to_dict` with ``rows`` paged and ``context.rows`` moved into them.
        """
        if cost not in COST_MODES:
            raise ToolInputError(f"unknown cost mode {cost!r}: one of {', '.join(COST_MODES)}")
        budget = check_budget(max_chars)
        session_id = self.resolve_session(session)
        shape = {"session": session_id, "a": a, "b": b, "context": context, "cost": cost, "max_chars": budget}
        offset = decode_cursor(cursor, "diff_branches", shape)
        if a is not None or b is not None:
            # An entry id of this session given whole (or as an answer gave it, lone surrogates as U+FFFD)
            # is passed as SESSION:ID: an id may itself hold a colon, which the A/B syntax would split at.
            ids = [e["id"] for e in self.sessions.get(session_id).get_entries()]

            def side(spec: str | None) -> str | None:
                if spec is None:
                    return None
                exact = [i for i in ids if same_text(i, spec)]
                return f"{session_id}:{exact[0]}" if exact else spec

            a, b = side(a), side(b)
        data = diff_branches(self.store, session_id, a, b, context=context, cost=cost).to_dict()
        rows = [{"section": "entries", **row} for row in data.pop("rows")]
        if data.get("context") is not None:
            rows += [{"section": "context", **row} for row in data["context"].pop("rows")]
        return _fit_answer(data, "rows", lambda: rows, offset=offset, limit=None, budget=budget,
                           tool="diff_branches", shape=shape, what="rows", total=len(rows))

