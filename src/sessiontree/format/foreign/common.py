"""What the foreign-agent mappings share: the result type, the verbatim record store,
line splitting and sniffing which agent wrote a file (docs/agents/README.md).

A foreign session file (Claude Code, Codex) is never rewritten: it is read into a
format-4 :class:`~sessiontree.format.codec.ParsedSession` whose entries each carry
the exact bytes of the source record they came from, in the entry's top-level
``foreign`` object:

* ``{"agent", "line", "raw"}`` on the first (usually only) entry of a record:
  ``raw`` is the record's bytes from the end of the previous record through its own
  line end (blank lines before it and the ``\\n`` included), as text; a record that
  is not UTF-8 keeps ``rawBase64`` instead;
* ``{"agent", "line", "part"}`` on further entries made from the same record
  (``part`` counts from 2);
* ``"billed": false`` on an assistant message whose call is counted elsewhere (a
  continuation of a Claude Code call, every Codex assistant item: docs/usage.md);
* ``"unmapped": "<why>"`` where the mapping did not understand the record (kept as
  an inert ``custom`` entry, reported by ``check``).

Every mapped entry then passes the format-4 entry validator the stores apply
(:func:`settle`, run by :func:`~sessiontree.format.foreign.map_foreign`): an entry
it refuses becomes an inert ``custom`` entry with the validator's reason, so a
record is never the reason a whole file is refused, and ``sync`` and ``check``
judge a file from the same entries (docs/agents/README.md, "Every file comes in").

Joining the ``raw`` texts in entry order gives back the complete records of the
source file byte for byte (:func:`source_bytes`).
"""

from __future__ import annotations

import base64
import functools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from sessiontree.errors import InvalidSessionError
from sessiontree.format import jsonio
from sessiontree.format.codec import ParsedSession, validate_entry
from sessiontree.format.ids import is_valid_session_id
from sessiontree.format.times import iso_datetime
from sessiontree.format.types import Entry

__all__ = [
    "AGENT_NAMES",
    "MAX_COUNT",
    "BadValue",
    "ForeignSession",
    "Record",
    "agent_of_header",
    "bad_values_note",
    "count_problem",
    "foreign_info",
    "iso_to_ms",
    "iter_records",
    "loads_record",
    "settle",
    "sniff_agent",
    "source_bytes",
    "text_blocks",
    "time_problem",
    "token_count",
]

#: Agents with a mapping, as the header's ``foreign.agent`` names them.
AGENT_NAMES: tuple[str, ...] = ("claude-code", "codex", "gemini", "omp")

_CLAUDE_KEYS = ("parentUuid", "sessionId", "leafUuid")
_CLAUDE_TYPES = frozenset({"user", "assistant", "system", "summary", "file-history-snapshot", "custom-title",
                           "queue-operation", "progress"})
_CODEX_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})


#: The largest token count taken: JavaScript's ``Number.MAX_SAFE_INTEGER`` (Claude Code and
#: Gemini CLI read and write these files in JavaScript, where a larger integer is not exact).
MAX_COUNT = 2**53 - 1
#: Unix milliseconds of 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z: a time outside
#: them names no date (docs/listing.md, "Unknown times").
_FIRST_MS, _LAST_MS = -62_135_596_800_000, 253_402_300_799_999


@dataclass(frozen=True)
class BadValue:
    """A value of a source record the mapping could not take as it is: kept verbatim in the
    record's ``raw``, accounted as ``taken`` says, and reported (``sync``'s note, ``check``'s
    ``foreign-bad-value``; docs/usage.md, "Bad values in agent files").

    Attributes:
        line: the record's 1-based line in the file.
        field: the value's place in the record (``message.usage.input_tokens``, ``timestamp``).
        value: the value as JSON text, cut to 40 characters.
        problem: what is wrong (``not a number``, ``negative``, ``not an ISO-8601 time``, ...).
        taken: what was accounted instead (``0``, ``no time``, ``priced from its tokens``).
    """

    line: int
    field: str
    value: str
    problem: str
    taken: str

    def describe(self) -> str:
        """``line 12: message.usage.input_tokens "12" is not a number (taken as 0)``."""
        return f"line {self.line}: {self.field} {self.value} is {self.problem} (taken as {self.taken})"


def bad_values_note(values: Sequence[BadValue], shown: int = 3) -> str:
    """One line for ``sync``'s report on the values of a file taken otherwise: how many, the
    first ``shown`` with line, field, value and what was taken, and where to read the rest."""
    many = len(values) > 1
    text = (f"{len(values)} value{'s' if many else ''} not taken as written (docs/usage.md, \"Bad values in "
            f"agent files\"): " + "; ".join(value.describe() for value in values[:shown]))
    if len(values) > shown:
        text += f"; {len(values) - shown} more"
    return text + " (`sessiontree check FILE` lists each)"


def _json_text(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "Infinity" if value > 0 else "-Infinity"  # JavaScript's name (orjson writes null)
    try:
        text = orjson.dumps(value).decode("utf-8")
    except (TypeError, orjson.JSONEncodeError):
        text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def count_problem(value: Any) -> str | None:
    """Why ``value`` is not a token count, or ``None`` when it is one or is absent (``None``).

    A count is a whole number from 0 to :data:`MAX_COUNT`; ``12.0`` is 12, as JavaScript
    reads it (docs/usage.md, "Bad values in agent files")."""
    if value is None or (type(value) is int and 0 <= value <= MAX_COUNT):
        return None  # the common case first: every count of every call passes here
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "not a number"
    if isinstance(value, float) and not value.is_integer() and not math.isinf(value):
        return "not a whole number"
    if value < 0:
        return "negative"
    if value > MAX_COUNT:
        return "above 2^53-1"
    return None


def token_count(value: Any) -> int:
    """``value`` as a token count: itself when :func:`count_problem` finds nothing wrong
    (``12.0`` is 12), else 0 (absent included)."""
    if type(value) is int and 0 <= value <= MAX_COUNT:
        return value
    if value is None or count_problem(value) is not None:
        return 0
    return int(value)


@functools.lru_cache(maxsize=64)
def _time_ms(value: str) -> float | str:
    """Unix ms of an ISO-8601 text, or why it names no instant in years 1-9999. Cached: a
    record's time is read for its entry and again for its message (first-sync speed)."""
    parsed = iso_datetime(value)  # no offset: UTC, not the machine's zone
    try:
        ms = None if parsed is None else parsed.timestamp() * 1000
    except OverflowError:
        ms = None
    if ms is None:
        return "not an ISO-8601 time"
    return ms if _FIRST_MS <= ms <= _LAST_MS else "outside years 1-9999"


def time_problem(value: Any) -> str | None:
    """Why a record's ``timestamp`` names no instant, or ``None`` when it does or is absent:
    it must be an ISO-8601 text within years 1-9999 (docs/listing.md, "Unknown times")."""
    if value is None:
        return None
    if not isinstance(value, str):
        return "not a text"
    ms = _time_ms(value)
    return ms if isinstance(ms, str) else None


@dataclass
class Record:
    """One source record: its 1-based line, its bytes (blank lines before it and its
    line end included) and its JSON value (``None`` when the line is not a JSON object)."""

    line: int
    raw: bytes
    value: dict[str, Any] | None


@dataclass
class ForeignSession:
    """The mapping of one foreign file.

    Attributes:
        agent: one of :data:`AGENT_NAMES`.
        header: the format-4 header (``foreign.agent`` set).
        entries: format-4 entries, each with its ``foreign`` object.
        lines: the source line of each entry.
        unmapped: ``(line, reason)`` of every record the mapping did not understand.
        header_known: whether a record gave the header its fields (session id, cwd,
            creation time); until one does, the header is a guess that may change as
            the file grows, so sync waits (a Claude Code file can start with title
            summaries, and some hold nothing else).
        settled: how many leading entries no later record of the file can change
            (``None``: all of them). A Claude Code call written as several records is
            billed on its newest record, so the records of a call that may still be
            streaming can lose their ``billed`` flag when the file grows
            (docs/agents/README.md, "Prefix-stable").
        moves: ``(earlier, newer)`` entry indexes of every bill a later record of the
            same call took over (the earlier entry became ``billed: false``), in file
            order; :meth:`prefix_stable` reads them.
    """

    agent: str
    header: dict[str, Any]
    entries: list[Entry] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    unmapped: list[tuple[int, str]] = field(default_factory=list)
    header_known: bool = True
    settled: int | None = None
    moves: list[tuple[int, int]] = field(default_factory=list)
    bad_values: list[BadValue] = field(default_factory=list)

    def bad_value(self, line: int, place: str, value: Any, problem: str, taken: str) -> None:
        """Report a value the mapping did not take as it is (:class:`BadValue`)."""
        self.bad_values.append(BadValue(line, place, _json_text(value), problem, taken))

    def check_counts(self, line: int, usage: Any, place: str, keys: Sequence[str]) -> None:
        """Report each of ``keys`` in the usage object ``usage`` (at ``place`` in the record)
        that is present and not a token count (:func:`count_problem`); it is accounted as 0."""
        if not isinstance(usage, dict):
            return
        for key in keys:
            value = usage.get(key)
            if value is None or (type(value) is int and 0 <= value <= MAX_COUNT):
                continue  # the common case, without a call (first-sync speed)
            problem = count_problem(value)
            if problem is not None:
                self.bad_value(line, f"{place}.{key}", value, problem, "0")

    def check_time(self, line: int, value: Any, place: str = "timestamp") -> None:
        """Report a time that is present and names no instant (:func:`time_problem`): the
        entry keeps the text, and its time is unknown (0, as for no time)."""
        problem = time_problem(value)
        if problem is not None:
            self.bad_value(line, place, value, problem, "no time")

    def prefix_stable(self, count: int) -> bool:
        """Whether this mapping's first ``count`` entries are exactly what the mapping of
        the records they came from gave (docs/agents/README.md, "Prefix-stable"): false
        when a call's bill moved from one of them to a later entry (a file synced while
        the call was being written, then grown by another record of it), so the entries
        stored from the shorter file must be replaced, not appended to."""
        return not any(earlier < count <= newer for earlier, newer in self.moves)

    def add_entry(self, record: Record, entry: dict[str, Any], entry_id: str, parent: str | None, *,
                  part: int = 1, extra: dict[str, Any] | None = None) -> None:
        """Append the format-4 entry made from ``record``: ``entry`` (its ``type`` and body;
        the ``type`` key is taken out of it) with ``id``, ``parentId``, the record's
        ``timestamp`` (else the header's ``createdAt``, else the epoch) and its ``foreign``
        object (:func:`foreign_info` plus ``extra``), at ``record``'s line."""
        info = foreign_info(self.agent, record, part=part)
        if extra:
            info.update(extra)
        value = record.value or {}
        stamp = value.get("timestamp")
        if part == 1 and stamp is not None and (type(stamp) is not str or isinstance(_time_ms(stamp), str)):
            self.check_time(record.line, stamp)
        full: dict[str, Any] = {"type": entry.pop("type"), "id": entry_id, "parentId": parent,
                                "timestamp": stamp if isinstance(stamp, str) else
                                (self.header.get("createdAt") or "1970-01-01T00:00:00.000Z")}
        full.update(entry)
        full["foreign"] = info
        self.entries.append(full)
        self.lines.append(record.line)

    def refusal(self) -> str | None:
        """Why no store can take this session whole, or ``None``: its header id is not a
        valid session id (the one reason left once :func:`settle` made every record an
        entry). ``sync`` rejects the file with it and ``check`` reports it as
        ``invalid-session-id``: one decision for both (docs/agents/README.md)."""
        session_id = self.header.get("id")
        if not is_valid_session_id(session_id):
            return f"invalid session id {session_id!r}"
        return None

    def parsed(self, path: str | None = None) -> ParsedSession:
        """As a :class:`ParsedSession` (what stores and sync take): the entries' bytes are
        their byte-exact serialization (docs/format-bytes.md), made on first use
        (:meth:`ParsedSession.entry_bytes`)."""
        raw: list[bytes | None] = [None] * len(self.entries)
        return ParsedSession(self.header, self.entries, raw, jsonio.dumps(self.header), 4, upgraded=True,
                             lines=list(self.lines), path=path)


def settle(result: ForeignSession) -> ForeignSession:
    """Pass every mapped entry through the stores' entry validator
    (:func:`~sessiontree.format.codec.validate_entry`) and give each entry a distinct id.

    An entry the validator refuses (a mapping bug, or a record shaped in a way the
    mapping did not foresee) is replaced by an inert ``custom`` entry in its place
    (same id and parent, the record's ISO ``timestamp`` else the header's
    ``createdAt``, its ``foreign`` object with ``"unmapped"`` set to the reason), and
    ``(line, reason)`` is added to :attr:`ForeignSession.unmapped`; an id used twice
    gets ``~<line>`` appended on its later entries. The verbatim ``raw`` bytes are
    untouched, so ``export --format source`` still gives the file back byte for byte.

    Returns:
        ``result``, changed in place.
    """
    seen: set[str] = set()
    fallback = result.header.get("createdAt") or "1970-01-01T00:00:00.000Z"
    for index, entry in enumerate(result.entries):
        line = result.lines[index] if index < len(result.lines) else 0
        entry_id = entry.get("id")
        if isinstance(entry_id, str) and entry_id in seen:
            while entry_id in seen:
                entry_id = f"{entry_id}~{line}"
            entry["id"] = entry_id
        try:
            validate_entry(entry)
        except InvalidSessionError as exc:
            reason = f"mapped {entry.get('type')!r} entry refused by the format-4 validator: {exc.reason}"
            found = entry.get("foreign")
            info: dict[str, Any] = found if isinstance(found, dict) else {}
            stamp = entry.get("timestamp")
            data: dict[str, Any] = {"recordType": "invalid-entry"}
            if isinstance(entry.get("type"), str):
                data["entryType"] = entry["type"]
            inert: dict[str, Any] = {
                "type": "custom", "customType": result.agent, "data": data,
                "id": entry_id if isinstance(entry_id, str) and entry_id else f"L{line}~{index}",
                "parentId": entry.get("parentId") if isinstance(entry.get("parentId"), str) else None,
                "timestamp": stamp if isinstance(stamp, str) else fallback,
                "foreign": {**info, "unmapped": reason}}
            result.entries[index] = entry = inert
            result.unmapped.append((line, reason))
        seen.add(entry["id"])
    return result


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads_record(text: bytes) -> Any:
    """The JSON value of a source record or document, as the agents (JavaScript) read it.

    ``orjson`` refuses a number beyond a double (``1e309``, an integer of 400 digits),
    which JSON allows and JavaScript reads as ``Infinity``: such a text is read again,
    that number an infinite float, so the record stays a record and its mapping notes
    the value (docs/usage.md, "Bad values in agent files") instead of losing the whole
    call. ``NaN`` and ``Infinity`` written as words are not JSON and stay refused.

    Raises:
        ValueError: ``text`` is not JSON (``orjson.JSONDecodeError`` is one).
    """
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return _beyond_double(text, exc)


def _beyond_double(text: bytes, exc: orjson.JSONDecodeError) -> Any:
    """:func:`loads_record` once ``orjson`` refused ``text`` with ``exc``."""
    if "infinity" not in str(exc):
        raise exc
    try:
        return json.loads(text, parse_constant=_constant, parse_int=jsonio.parse_int)
    except RecursionError:  # deeper than Python's parser goes: not taken, as orjson's own limit
        raise exc from None


def iter_records(data: bytes) -> Iterable[Record]:
    """The records of complete JSONL bytes: one per non-blank line, each keeping the
    blank lines before it. A last line without ``\\n`` is a record too (callers pass
    only complete bytes: sync leaves an unfinished last line for later)."""
    start = 0
    line = 0
    size = len(data)
    pending_from = 0
    loads = orjson.loads
    while start < size:
        end = data.find(b"\n", start)
        stop = size if end < 0 else end + 1
        line += 1
        text = data[start:stop]
        if text.strip():
            value: Any
            try:
                value = loads(text)
            except orjson.JSONDecodeError as exc:
                try:  # the first-sync loop calls orjson itself; the rare refusal is looked at here
                    value = _beyond_double(text, exc)
                except ValueError:
                    value = None
            yield Record(line, data[pending_from:stop], value if isinstance(value, dict) else None)
            pending_from = stop
        start = stop


def sniff_agent(first: dict[str, Any] | None) -> str | None:
    """Which foreign agent wrote a file whose first record is ``first`` (``None``: not a
    foreign file, e.g. a pi/Atomic header ``{"type": "session"}``)."""
    if not isinstance(first, dict):
        return None
    kind = first.get("type")
    if kind == "session" or not isinstance(kind, (str, type(None))):
        return None
    if kind in _CODEX_TYPES and "payload" in first:
        return "codex"
    if "instructions" in first and "id" in first and kind is None:
        return "codex"  # the meta line of rollouts before records were wrapped
    if kind is None and "projectHash" in first:
        return None  # a Gemini CLI JSONL chat's metadata line (it has a sessionId too)
    if kind in _CLAUDE_TYPES or any(key in first for key in _CLAUDE_KEYS):
        return "claude-code"
    return None


def foreign_info(agent: str, record: Record, *, part: int = 1) -> dict[str, Any]:
    """The ``foreign`` object of an entry made from ``record`` (module docstring)."""
    if part > 1:
        return {"agent": agent, "line": record.line, "part": part}
    try:
        return {"agent": agent, "line": record.line, "raw": record.raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {"agent": agent, "line": record.line, "rawBase64": base64.b64encode(record.raw).decode("ascii")}


def agent_of_header(header: Mapping[str, Any]) -> str:
    """The agent that wrote a session: the header's ``foreign.agent`` for a mapped
    file, else ``"pi"`` (pi and Atomic write the same format and cannot be told apart
    from the file)."""
    foreign = header.get("foreign")
    agent = foreign.get("agent") if isinstance(foreign, dict) else None
    return agent if isinstance(agent, str) else "pi"


def source_bytes(entries: Sequence[Entry]) -> bytes | None:
    """The source file's bytes rebuilt from mapped entries (their ``raw`` texts joined in
    entry order), or ``None`` when an entry is not a foreign record's (a name set with
    sessiontree is skipped: it has no ``foreign`` object and is not part of the file)."""
    out: list[bytes] = []
    found = False
    for entry in entries:
        info = entry.get("foreign")
        if not isinstance(info, dict):
            continue
        found = True
        if isinstance(info.get("raw"), str):
            out.append(info["raw"].encode("utf-8"))
        elif isinstance(info.get("rawBase64"), str):
            out.append(base64.b64decode(info["rawBase64"]))
    return b"".join(out) if found else None


def text_blocks(content: Any) -> list[dict[str, Any]]:
    """A string or a list of text-like blocks as format-4 text blocks (other blocks dropped)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks: list[dict[str, Any]] = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                blocks.append({"type": "text", "text": block["text"]})
            elif isinstance(block, str):
                blocks.append({"type": "text", "text": block})
    return blocks


def iso_to_ms(value: Any) -> int:
    """An ISO timestamp as Unix ms: 0 (no time) when :func:`time_problem` finds it names no
    instant in years 1-9999, or it is absent."""
    if not isinstance(value, str):
        return 0
    ms = _time_ms(value)
    return 0 if isinstance(ms, str) else int(ms)
