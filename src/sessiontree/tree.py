"""The entry tree: leaf, branches, children, labels, names, summary freshness.

Placeholder: the full module is being written; get_branch is final.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Entry = dict[str, Any]


def get_branch(by_id: Mapping[str, Entry], leaf_id: str | None) -> list[Entry]:
    """Entries from a root down to ``leaf_id``, root first (REFERENCE F.6).

    Follows ``parentId`` links upwards. An unknown or ``None`` start gives
    ``[]``; a missing parent ends the walk silently; a self-parent or a parent
    cycle ends it when an id repeats (the old code looped forever).
    """
    path: list[Entry] = []
    seen: set[str] = set()
    current = leaf_id
    while current is not None and current not in seen:
        entry = by_id.get(current)
        if entry is None:
            break
        seen.add(current)
        path.append(entry)
        current = entry.get("parentId")
    path.reverse()
    return path
