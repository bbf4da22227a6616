"""Sums of the usage ledger over chosen entries of one session, grouped as
:func:`sessiontree.core.usage.rows_from_records` groups records: what ``diff`` prices
the shared history of two branches by, without parsing it
(``EntrySummaries.sum_usage``; docs/decisions/diff-summaries.md).

The grouping is :func:`sessiontree.core.usage._row_key`'s rule in SQL, over the ledger's
columns (which hold each record's fields as ``records_from_entry`` gives them): a row per
provider, model, whether the recorded cost is usable, and, for calls to be priced per
call (no usable cost, or ``price_all``), their 15-minute bucket and their token counts;
the bucket also when ``by_time``. Rows come in the order of their first record in file
order (``seq``, then the record's index ``n``), the order ``rows_from_records`` gives
for records in that order.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from sessiontree.core.usage import BUCKET_MS, UsageQuery, UsageRow
from sessiontree.errors import SessionChangedError, StorageError
from sessiontree.stores.records import SessionSummaries
from sessiontree.stores.sqlite.derived import from_db, to_db

__all__ = ["sum_usage"]

_BUCKET = f"(ts_ms - ((ts_ms % {BUCKET_MS}) + {BUCKET_MS}) % {BUCKET_MS})"


def _statement(query: UsageQuery, include: bool) -> str:
    per_call = "1" if query.price_all else "(cost_nanos IS NULL)"
    bucket = _BUCKET if query.by_time else f"CASE WHEN {per_call} THEN {_BUCKET} ELSE 0 END"
    tokens = ", ".join(f"CASE WHEN {per_call} THEN {column} END"
                       for column in ("input", "output", "cache_read", "cache_write", "cache_write_1h"))
    return (f"SELECT provider, model, {bucket}, cost_nanos IS NOT NULL, {per_call}, count(*), sum(input),"
            f" sum(output), sum(cache_read), sum(cache_write), sum(coalesce(cost_nanos, 0)), sum(cache_write_1h)"
            f" FROM usage_ledger WHERE session_id = ? AND seq <= ? AND seq {'IN' if include else 'NOT IN'}"
            f" (SELECT value FROM json_each(?)) GROUP BY 1, 2, 3, 4, 5, {tokens} ORDER BY min(seq * 65536 + n)")


def sum_usage(conn: sqlite3.Connection, summaries: SessionSummaries, seqs: Sequence[int], query: UsageQuery,
              url: str) -> list[UsageRow]:
    """The rows of the ledger records of the entries ``seqs`` (all among the first
    ``summaries.settled`` of its outline) of the session (module docstring), inside the
    caller's read transaction.

    Raises:
        SessionChangedError: the session's records are not those of the outline (their
            count or the sum of their CRC-32s differ: it was replaced since).
        StorageError: a sum does not fit in 64 bits.
    """
    outline = summaries.outline
    if not seqs or not summaries.settled:
        return []
    key = to_db(outline.session_id)
    last = outline.keys[-1]
    count, total = conn.execute("SELECT count(*), coalesce(sum(crc), 0) FROM entries WHERE session_id = ?"
                                " AND seq <= ?", (key, last)).fetchone()
    if count != len(outline) or outline.stamps is None or total != sum(outline.stamps):
        raise SessionChangedError(outline.session_id, f"{url}: its records differ from the outline's")
    settled = outline.keys[:summaries.settled]
    chosen = set(seqs)
    include = len(chosen) <= len(settled) // 2
    given = sorted(chosen) if include else [seq for seq in settled if seq not in chosen]
    try:
        found = conn.execute(_statement(query, include), (key, settled[-1], json.dumps(given))).fetchall()
    except (sqlite3.OperationalError, OverflowError) as exc:  # SQLite's "integer overflow"
        raise StorageError(f"summing the usage of {outline.session_id} failed: {exc}") from exc
    return [UsageRow(None, None, from_db(provider), from_db(model), bucket, bool(recorded), False, bool(per_call),
                     calls, tokens_in, tokens_out, read, write, cost, hour)
            for provider, model, bucket, recorded, per_call, calls, tokens_in, tokens_out, read, write, cost, hour
            in found]
