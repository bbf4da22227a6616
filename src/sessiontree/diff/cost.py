"""The cost columns of a diff below the shared entries (docs/diff.md, "Columns and cost"):
the calls of the two sides' remaining entries matched by their de-duplication key."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from sessiontree.core.usage import UsageQuery, UsageRecord, UsageRow, records_from_entries, rows_from_records
from sessiontree.format.types import Entry

__all__ = ["split_rest"]


def split_rest(same: list[UsageRow], rest_a: Sequence[Entry], rest_b: Sequence[Entry],
                query: UsageQuery) -> dict[str, list[UsageRow]]:
    """:func:`sessiontree.diff.branches._split_usage` given the rows of the shared entries (``same``) and the entries
    after them on each side."""
    records_a = list(records_from_entries(rest_a))
    records_b = list(records_from_entries(rest_b))
    shared = Counter(r.key for r in records_a) & Counter(r.key for r in records_b)
    common: list[UsageRecord] = []
    only_a: list[UsageRecord] = []
    only_b: list[UsageRecord] = []
    left = Counter(shared)
    for record in records_a:
        if left[record.key] > 0:
            left[record.key] -= 1
            common.append(record)
        else:
            only_a.append(record)
    left = Counter(shared)
    for record in records_b:
        if left[record.key] > 0:
            left[record.key] -= 1
        else:
            only_b.append(record)
    return {"common": same + rows_from_records(common, query),
            "a": rows_from_records(only_a, query), "b": rows_from_records(only_b, query)}
