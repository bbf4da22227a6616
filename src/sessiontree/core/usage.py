"""Billed usage recorded in a session: the per-entry rule, the de-duplication key, and
the aggregation every store shares (docs/usage.md).

This module sits in the core layer, below the stores (it reads entries, nothing
else), so that stores can use it: the SQLite store writes one ledger row per
:class:`UsageRecord` (``stores/sqlite/usage.py``), the JSONL and memory stores
compute the same rows from their entries with :func:`aggregate`. Pricing,
time zones and presentation live above the stores, in :mod:`sessiontree.usage`.

Invariants:

* **What is a billed record.** Exactly these, read from raw entries (never from
  the context projection, so a ``context_edit`` changes nothing:
  docs/rules/projection.md R.3, accounting sees the original):

  - every assistant message (its ``usage``; a call even when all zeros),
    except one a foreign-agent mapping marks ``foreign.billed: false`` (a
    Claude Code record repeating a call already counted, a Codex item whose
    calls are counted from ``token_count`` events: docs/agents/README.md);
  - a tool result's ``usage`` (the tool's own and nested billed usage);
  - ``session_summary.usage`` (counted toward session totals, docs/rules/README.md);
  - ``usage`` on ``compaction`` and ``branch_summary`` entries, where present;
  - the upstream agent's ``usage`` entries (``kind``, ``provider``, ``model``,
    ``usage``; docs/rules/format.md spec:data-model).

* **Tokens.** ``input``, ``output``, ``cacheRead``, ``cacheWrite`` as
  recorded (a value that is not a non-negative integer counts as 0). Total
  tokens are always derived as their sum: the recorded ``totalTokens`` is
  ignored, because older agents wrote 0 there (or nothing).

* **Cost.** ``cost.total`` in integer nano-dollars (1e-9 USD), converted from
  the JSON number's shortest decimal form, so sums are exact. The recorded
  cost is *unusable* (``cost_nanos is None``) when it is missing, not a
  finite number, negative, or 0 while tokens are not. Unusable costs are
  priced from a catalogue above this layer, or reported as unpriced.

* **One bill, many copies.** Forks, branched sessions and imports copy
  entries verbatim, so a copy is recognised by its content, not by lineage:
  the key (:func:`dedup_key`) hashes the source kind, the entry timestamp, the
  message timestamp, provider, model, tool call id or usage kind, and the
  usage object itself. Entry ids are *not* in the key: format-1 files carry no
  ids, and the upgrade derives them from the session id, so two copies of an
  old forked file get different ids for the same call. Across the store a key
  counts ``max`` over sessions of its number of records *in one session*: a
  session never holds a copy of its own entry, so equal records inside one
  session are distinct calls, while equal records in different sessions are
  copies. Each key is owned by the earliest session holding it (``createdAt``,
  then id), which is where per-session and per-project totals put it.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

from sessiontree.core.tree import time_in_range
from sessiontree.format import jsonio
from sessiontree.format.times import iso_datetime
from sessiontree.format.types import Entry

__all__ = [
    "BILLED_TYPES",
    "BUCKET_MS",
    "NANOS_PER_USD",
    "SOURCES",
    "TokenCounts",
    "UsageQuery",
    "UsageRecord",
    "UsageRow",
    "UsageRows",
    "aggregate",
    "cost_to_nanos",
    "dedup_key",
    "extend_rows",
    "records_from_entries",
    "records_from_entry",
    "rows_from_entries",
    "rows_from_records",
    "timestamp_ms",
]

#: Source kinds of billed records, in the order the rule lists them.
SOURCES: tuple[str, ...] = ("assistant", "toolResult", "session_summary", "compaction", "branch_summary", "usage")

#: Money unit of every stored and summed cost: nano-dollars. Recorded costs are
#: products of token counts and per-million prices, exact at 1e-9 USD in practice
#: (the corpus totals, $42.5959075 and $30.3301977, need 7 decimals).
NANOS_PER_USD = 1_000_000_000

#: Rows are summed per 15-minute bucket (UTC milliseconds): every time zone in
#: use today is a whole number of quarter hours from UTC, so a local day, week
#: or month is a union of buckets and the store never needs the time zone.
BUCKET_MS = 15 * 60 * 1000

_TOKEN_FIELDS = ("input", "output", "cacheRead", "cacheWrite")


class TokenCounts:
    """The one rule for total tokens, shared by records, store rows and report totals:
    ``input + output + cache_read + cache_write``. A recorded ``totalTokens`` is never
    used (the old agent wrote 0 or nothing there; docs/usage.md). Subclasses are
    dataclasses with those four integer fields."""

    __slots__ = ()
    input: int
    output: int
    cache_read: int
    cache_write: int

    @property
    def total_tokens(self) -> int:
        """The four token counts summed."""
        return self.input + self.output + self.cache_read + self.cache_write


@dataclass(frozen=True, slots=True)
class UsageRecord(TokenCounts):
    """One billed usage record of one entry.

    Attributes:
        source: one of :data:`SOURCES`.
        provider: the provider id as recorded (``"anthropic"``), or ``None`` when the
            record names none (a session summary usually does not).
        model: the model id as recorded, or ``None``.
        input, output, cache_read, cache_write: tokens (non-negative integers).
        cost_nanos: the recorded ``cost.total`` in nano-dollars, or ``None`` when it is
            unusable (missing, not finite, negative, or 0 with non-zero tokens).
        timestamp_ms: when the call was recorded, Unix milliseconds (UTC): the
            entry's ``timestamp``, else the message's numeric ``timestamp``, else 0.
        key: the 16-byte de-duplication key (:func:`dedup_key`).
        cache_write_1h: the part of ``cache_write`` written to the 1-hour cache
            (``usage.cacheWrite1h``: Claude Code's ``ephemeral_1h_input_tokens``), priced
            at its own rate; the rest are 5-minute writes (docs/usage.md, "Claude Code").
    """

    source: str
    provider: str | None
    model: str | None
    input: int
    output: int
    cache_read: int
    cache_write: int
    cost_nanos: int | None
    timestamp_ms: int
    key: bytes
    cache_write_1h: int = 0


#: The largest token count taken as recorded: JavaScript's largest exact integer
#: (``Number.MAX_SAFE_INTEGER``). A larger one cannot have been counted by an agent;
#: it is treated as unusable (0), like a negative one, so no ledger overflows.
MAX_COUNT = 2**53 - 1
#: The largest recorded cost taken, in nano-dollars (about 4.6 billion USD); a larger
#: one is unusable (priced from the catalogue when estimates are on).
MAX_COST_NANOS = 2**62


def _tokens(value: Any) -> int:
    """A token count as recorded, or 0 when it is not an integer in 0..:data:`MAX_COUNT`
    (floats with an integral value are accepted: JavaScript writes ``3`` and ``3.0`` alike)."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value if 0 <= value <= MAX_COUNT else 0
    if isinstance(value, float) and math.isfinite(value) and 0 <= value <= MAX_COUNT and value.is_integer():
        return int(value)
    return 0


def cost_to_nanos(value: Any) -> int | None:
    """A recorded cost in USD as integer nano-dollars (half-even rounding of the
    number's shortest decimal form), or ``None`` when it is not a finite,
    non-negative number of at most :data:`MAX_COST_NANOS` nano-dollars."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value < 0:
        return None
    try:
        nanos = int((Decimal(repr(value)) * NANOS_PER_USD).to_integral_value())
    except (InvalidOperation, ValueError):
        return None
    return nanos if nanos <= MAX_COST_NANOS else None


def timestamp_ms(entry: Entry, message: dict[str, Any] | None = None) -> int:
    """Unix milliseconds of an entry: its ISO ``timestamp`` (without an offset: UTC, as
    :func:`sessiontree.format.times.iso_datetime` reads it), else the message's
    numeric ``timestamp``, else 0. A time outside years 1-9999 (:func:`time_in_range`)
    counts as absent, so a report never meets a day it cannot show."""
    stamp = entry.get("timestamp")
    if isinstance(stamp, str):
        parsed = iso_datetime(stamp)
        try:
            ms = None if parsed is None else parsed.timestamp() * 1000
        except OverflowError:
            ms = None
        if ms is not None and time_in_range(ms):
            return int(ms)
    if message is not None:
        value = message.get("timestamp")
        if time_in_range(value):
            return int(value)
    return 0


def dedup_key(source: str, entry: Entry, message: dict[str, Any] | None, usage: Any,
              provider: Any, model: Any, extra: Any) -> bytes:
    """The content key of a billed record: 16 bytes of BLAKE2b over the source kind,
    the entry ``timestamp``, the message ``timestamp``, provider, model, ``extra``
    (a tool call id or a usage entry's ``kind``) and the usage object with sorted
    keys. Entry ids are left out on purpose (see the module docstring)."""
    parts = [source, entry.get("timestamp"), message.get("timestamp") if message is not None else None,
             provider, model, extra, usage]
    # Fast path, the same bytes: orjson sorts keys by code point, as sorted() does in
    # jsonio.sorted_keys, and when no number or key needs JavaScript's form its text is what
    # jsonio.dumps writes (values orjson refuses, e.g. lone surrogates, take the rule).
    try:
        text = orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        text = None
    if text is None or not jsonio.orjson_text_is_exact(parts):
        parts[6] = jsonio.sorted_keys(usage)  # key order never splits one record in two
        text = jsonio.dumps(parts)
    return hashlib.blake2b(text, digest_size=16).digest()


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _record(source: str, entry: Entry, message: dict[str, Any] | None, usage: Any,
            provider: Any, model: Any, extra: Any = None, keyed: bool = True) -> UsageRecord:
    u = usage if isinstance(usage, dict) else {}
    tokens = [_tokens(u.get(name)) for name in _TOKEN_FIELDS]
    cost = u.get("cost")
    nanos = cost_to_nanos(cost.get("total")) if isinstance(cost, dict) else cost_to_nanos(cost)
    if nanos == 0 and any(tokens):
        nanos = None  # a 0 beside real tokens is "not recorded", not "free"
    if nanos is None and not any(tokens):
        nanos = 0  # nothing was used: nothing to price
    return UsageRecord(source, _string(provider), _string(model), tokens[0], tokens[1], tokens[2], tokens[3], nanos,
                       timestamp_ms(entry, message),
                       dedup_key(source, entry, message, usage, provider, model, extra) if keyed else b"",
                       min(_tokens(u.get("cacheWrite1h")), tokens[3]))


def records_from_entry(entry: Entry, *, keyed: bool = True) -> list[UsageRecord]:
    """The billed usage records of one raw entry (the rule of the module docstring).

    Args:
        entry: a stored entry (any type; unknown types yield nothing unless they
            are the upstream agent's ``usage`` entries).
        keyed: compute each record's de-duplication key; ``False`` leaves ``key``
            empty (``b""``) for a caller that only sums records it has already
            matched, and saves the hashing.

    Returns:
        Zero or one record (a list, so a future entry kind may carry several).
    """
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        if not isinstance(message, dict):
            return []
        role = message.get("role")
        if role == "assistant":
            foreign = entry.get("foreign")
            if isinstance(foreign, dict) and foreign.get("billed") is False:
                return []  # counted on another entry (docs/agents/README.md)
            usage = message.get("usage")
            return [_record("assistant", entry, message, usage, message.get("provider"), message.get("model"),
                            None, keyed)]
        if role == "toolResult":
            usage = message.get("usage")
            if not isinstance(usage, dict):
                return []
            return [_record("toolResult", entry, message, usage, usage.get("provider"), usage.get("model"),
                            message.get("toolCallId"), keyed)]
        return []
    if kind in ("session_summary", "compaction", "branch_summary"):
        usage = entry.get("usage")
        if not isinstance(usage, dict):
            return []
        return [_record(kind, entry, None, usage, entry.get("provider", usage.get("provider")),
                        entry.get("model", usage.get("model")), None, keyed)]
    if kind == "usage":
        usage = entry.get("usage")
        if not isinstance(usage, dict):
            return []
        foreign = entry.get("foreign")
        if isinstance(foreign, dict) and foreign.get("billed") is False:
            return []  # counted on another entry (docs/agents/README.md)
        call = entry.get("call")
        if isinstance(call, dict) and isinstance(call.get("timestamp"), str):
            # A call that its own transcript records as an assistant message (a Claude Code
            # subagent's call seen in the parent's file): keyed as that message is, so the
            # two copies count once (docs/usage.md, "Claude Code").
            as_entry = {"timestamp": call["timestamp"]}
            as_message = {"timestamp": call.get("messageTimestamp")}
            record = _record("assistant", as_entry, as_message, usage, entry.get("provider"), entry.get("model"),
                             None, keyed)
            return [replace(record, timestamp_ms=timestamp_ms(entry))]
        return [_record("usage", entry, None, usage, entry.get("provider"), entry.get("model"), entry.get("kind"),
                        keyed)]
    return []


#: Entry types that can carry a billed record (:func:`records_from_entry`): an entry of
#: another type yields none, so a reader may skip it unread.
BILLED_TYPES = frozenset({"message", "session_summary", "compaction", "branch_summary", "usage"})


def records_from_entries(entries: Iterable[Entry], *, keyed: bool = True) -> Iterator[UsageRecord]:
    """Every billed record of ``entries``, in entry order (all branches: calls on an
    abandoned branch were billed too); ``keyed`` as in :func:`records_from_entry`."""
    for entry in entries:
        kind = entry.get("type")
        if kind in BILLED_TYPES:
            yield from records_from_entry(entry, keyed=keyed)


# --------------------------------------------------------------------------- aggregation


@dataclass(frozen=True, slots=True)
class UsageQuery:
    """What a store's ``usage()`` sums (every field optional).

    Attributes:
        since_ms: keep records at or after this Unix millisecond (UTC).
        until_ms: keep records before this Unix millisecond.
        cwd: store-wide mode: keep records owned by sessions of this project
            directory (absolute; compared as ``list --cwd`` compares).
        per_session: store-wide mode: one row per owning session (with its cwd);
            otherwise rows carry no session.
        session_id: session mode: the records *of this session*, each row
            flagged ``copied`` when an earlier session holds the same record.
            ``cwd`` and ``per_session`` are ignored.
        price_all: keep records apart by their token counts even when their
            recorded cost is usable (``--cost catalog`` prices each of them).
        by_time: keep rows apart by 15-minute bucket. When ``False`` (a report
            by model, session...), rows with a usable recorded cost get bucket
            0; rows to be priced keep theirs (prices change over time).
    """

    since_ms: int | None = None
    until_ms: int | None = None
    cwd: str | None = None
    per_session: bool = False
    session_id: str | None = None
    price_all: bool = False
    by_time: bool = True


@dataclass(slots=True)
class UsageRow(TokenCounts):
    """Sums over de-duplicated records sharing one group, as a store returns them.

    Records are grouped by ``(session_id, cwd, provider, model, bucket, recorded,
    copied)`` and, when they must be priced from a catalogue (no usable recorded
    cost, or :attr:`UsageQuery.price_all`), also by their four token counts, so a
    catalogue can price each such row exactly (tiered prices depend on a call's
    own input size).

    Attributes:
        session_id: the owning session (``per_session``) or the queried one, else ``None``.
        cwd: that session's header cwd, or ``None``.
        provider, model: as recorded (``None``: not recorded).
        bucket: start of the 15-minute bucket, Unix ms (UTC), see :data:`BUCKET_MS`.
        recorded: whether every record here has a usable recorded cost.
        copied: session mode: the records are also held by an earlier session.
        per_call: whether the token counts are one call's (``calls`` equal calls
            of identical counts): true for every row that may need a catalogue price.
        calls: number of billed calls.
        input, output, cache_read, cache_write: token sums.
        cost_nanos: sum of the recorded costs (0 where unusable), nano-dollars.
        cache_write_1h: the part of ``cache_write`` written to the 1-hour cache (a
            per-call row keeps it apart, so a catalogue prices it at its own rate).
    """

    session_id: str | None
    cwd: str | None
    provider: str | None
    model: str | None
    bucket: int
    recorded: bool
    copied: bool = False
    per_call: bool = False
    calls: int = 0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost_nanos: int = 0
    cache_write_1h: int = 0


@dataclass(slots=True)
class _SessionRecords:
    session_id: str
    created_at: str
    cwd: str | None
    records: list[UsageRecord] = field(default_factory=list)


def _row_key(session_id: str | None, cwd: str | None, record: UsageRecord, copied: bool,
             query: UsageQuery) -> tuple[Any, ...]:
    recorded = record.cost_nanos is not None
    per_call = query.price_all or not recorded
    bucket = record.timestamp_ms - record.timestamp_ms % BUCKET_MS if query.by_time or per_call else 0
    tokens = ((record.input, record.output, record.cache_read, record.cache_write, record.cache_write_1h)
              if per_call else None)
    return (session_id, cwd, record.provider, record.model, bucket, recorded, copied, per_call, tokens)


def _add(rows: dict[tuple[Any, ...], UsageRow], key: tuple[Any, ...], record: UsageRecord, times: int) -> None:
    row = rows.get(key)
    if row is None:
        row = rows[key] = UsageRow(key[0], key[1], key[2], key[3], key[4], key[5], key[6], key[7])
    row.calls += times
    row.input += record.input * times
    row.output += record.output * times
    row.cache_read += record.cache_read * times
    row.cache_write += record.cache_write * times
    row.cost_nanos += (record.cost_nanos or 0) * times
    row.cache_write_1h += record.cache_write_1h * times


def aggregate(sessions: Iterable[tuple[dict[str, Any], Sequence[dict[str, Any]]]], query: UsageQuery,
              cwd_filter: Any = None) -> list[UsageRow]:
    """The rows a store's ``usage(query)`` returns, computed from whole sessions (the
    JSONL and memory stores; the SQLite store answers the same from its ledger).

    Args:
        sessions: ``(header, entries)`` of every session in the store.
        query: what to sum (:class:`UsageQuery`).
        cwd_filter: ``(header_cwd) -> bool`` deciding :attr:`UsageQuery.cwd`
            (the stores' ``cwd_matches``), or ``None`` to keep every session.

    Returns:
        Rows in no particular order (the caller groups and sorts).
    """
    since, until = query.since_ms, query.until_ms
    held: list[_SessionRecords] = []
    for header, entries in sessions:
        sid = header.get("id")
        if not isinstance(sid, str):
            continue
        created = header.get("createdAt")
        cwd = header.get("cwd")
        item = _SessionRecords(sid, created if isinstance(created, str) else "", cwd if isinstance(cwd, str) else None)
        for record in records_from_entries(entries):
            if (since is None or record.timestamp_ms >= since) and (until is None or record.timestamp_ms < until):
                item.records.append(record)
        if item.records:
            held.append(item)
    # Ownership order: the earliest session (createdAt, then id) holding a key owns it.
    held.sort(key=lambda s: (s.created_at, s.session_id))
    rows: dict[tuple[Any, ...], UsageRow] = {}
    if query.session_id is not None:
        earlier: set[bytes] = set()
        for item in held:
            if item.session_id == query.session_id:
                for record in item.records:
                    _add(rows, _row_key(item.session_id, item.cwd, record, record.key in earlier, query),
                         record, 1)
                break
            earlier.update(record.key for record in item.records)
        return list(rows.values())
    # Store-wide: each key counts max over sessions of its count within one session.
    most: dict[bytes, int] = {}
    owner: dict[bytes, tuple[_SessionRecords, UsageRecord]] = {}
    for item in held:
        counts: dict[bytes, int] = {}
        for record in item.records:
            counts[record.key] = counts.get(record.key, 0) + 1
            owner.setdefault(record.key, (item, record))
        for key, count in counts.items():
            if count > most.get(key, 0):
                most[key] = count
    for key, (item, record) in owner.items():
        if cwd_filter is not None and not cwd_filter(item.cwd):
            continue
        sid, cwd = (item.session_id, item.cwd) if query.per_session else (None, None)
        _add(rows, _row_key(sid, cwd, record, False, query), record, most[key])
    return list(rows.values())


def rows_from_records(records: Iterable[UsageRecord], query: UsageQuery | None = None) -> list[UsageRow]:
    """Rows summing ``records`` as given (no de-duplication: the caller chose them), grouped
    as :func:`aggregate` groups one session's records, so that the pricing above the stores
    treats them alike (a branch diff prices each of its columns this way).

    Args:
        records: billed records.
        query: ``price_all`` and ``by_time`` are honoured (default: neither).
    """
    query = query or UsageQuery(by_time=False)
    rows: dict[tuple[Any, ...], UsageRow] = {}
    for record in records:
        _add(rows, _row_key(None, None, record, False, query), record, 1)
    return list(rows.values())


def extend_rows(rows: Iterable[UsageRow], records: Iterable[UsageRecord],
                query: UsageQuery | None = None) -> list[UsageRow]:
    """``rows`` (what :func:`rows_from_records` gave for some records, same ``query``) with
    ``records`` added after them: the rows :func:`rows_from_records` gives for all of them
    in that order. A per-call row's token counts are those of each of its calls."""
    query = query or UsageQuery(by_time=False)
    held: dict[tuple[Any, ...], UsageRow] = {}
    for row in rows:
        calls = row.calls or 1
        tokens = ((row.input // calls, row.output // calls, row.cache_read // calls, row.cache_write // calls,
                   row.cache_write_1h // calls) if row.per_call else None)
        held[(row.session_id, row.cwd, row.provider, row.model, row.bucket, row.recorded, row.copied,
              row.per_call, tokens)] = row
    for record in records:
        _add(held, _row_key(None, None, record, False, query), record, 1)
    return list(held.values())


def rows_from_entries(entries: Iterable[Entry], query: UsageQuery | None = None) -> list[UsageRow]:
    """``rows_from_records(records_from_entries(entries, keyed=False), query)``, the same
    rows, without a :class:`UsageRecord` per call: the sum of a long history (the part
    two branches share) in one pass.

    The common call (an assistant message whose ``usage`` holds four integer token
    counts in range and a recorded cost that is used as recorded: not
    :attr:`UsageQuery.price_all`, not :attr:`UsageQuery.by_time`) is added to its row
    where it stands, each distinct recorded cost converted once; every other record
    takes the rule of :func:`records_from_entry`.
    """
    query = query or UsageQuery(by_time=False)
    rows: dict[tuple[Any, ...], UsageRow] = {}
    fast = not query.price_all and not query.by_time
    nanos_of: dict[tuple[type, Any], int | None] = {}
    for entry in entries:
        kind = entry.get("type")
        if kind not in BILLED_TYPES:
            continue
        if kind == "message":
            message = entry.get("message")
            if not isinstance(message, dict):
                continue  # no record (records_from_entry)
            role = message.get("role")
            if role != "assistant":
                if role != "toolResult" or message.get("usage").__class__ is not dict:
                    continue  # no record (a tool result bills only its own usage object)
            elif fast and "foreign" not in entry:
                usage = message.get("usage")
                if usage.__class__ is dict:
                    i, o, r, w = usage.get("input"), usage.get("output"), usage.get("cacheRead"), usage.get("cacheWrite")
                    if (i.__class__ is int and o.__class__ is int and r.__class__ is int and w.__class__ is int
                            and 0 <= i <= MAX_COUNT and 0 <= o <= MAX_COUNT and 0 <= r <= MAX_COUNT
                            and 0 <= w <= MAX_COUNT):
                        cost = usage.get("cost")
                        total = cost.get("total") if isinstance(cost, dict) else cost
                        # (class, value): 1, 1.0 and True are equal keys but not equal costs.
                        cache_key = (total.__class__, total)
                        try:
                            nanos = nanos_of[cache_key]
                        except KeyError:
                            nanos = nanos_of[cache_key] = cost_to_nanos(total)
                        except TypeError:  # an unhashable value: not a usable cost
                            nanos = None
                        if nanos == 0 and (i or o or r or w):
                            nanos = None
                        elif nanos is None and not (i or o or r or w):
                            nanos = 0
                        if nanos is not None:
                            key = (None, None, _string(message.get("provider")), _string(message.get("model")), 0,
                                   True, False, False, None)
                            row = rows.get(key)
                            if row is None:
                                row = rows[key] = UsageRow(None, None, key[2], key[3], 0, True, False, False)
                            row.calls += 1
                            row.input += i
                            row.output += o
                            row.cache_read += r
                            row.cache_write += w
                            row.cost_nanos += nanos
                            continue
        for record in records_from_entry(entry, keyed=False):
            _add(rows, _row_key(None, None, record, False, query), record, 1)
    return list(rows.values())


class UsageRows(list[UsageRow]):
    """The rows of a store's ``usage()`` (a plain ``list`` of :class:`UsageRow`) plus
    how many sessions were left out because they cannot be read.

    Attributes:
        skipped: sessions left out (a JSONL file that fails to load); their usage
            is missing from the rows, so a caller must say the total is partial.
    """

    def __init__(self, rows: Iterable[UsageRow] = (), skipped: int = 0) -> None:
        super().__init__(rows)
        self.skipped = skipped
