"""Skeleton reads of the database stores: a message record's role read from its first bytes
without parsing it (:data:`ROLE_HEAD`), and the skeleton built from stored rows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["ROLE_HEAD", "ROLE_HEAD_BYTES", "skeletons_from_rows"]


#: Bytes of a message record that a skeleton read takes to find its role without parsing it.
ROLE_HEAD_BYTES = 256
#: A record whose text starts with top-level string (or null) members among type, id,
#: parentId and timestamp, then ``"message":{"role":"ROLE"``: the role is exactly ROLE
#: (no key before it can be nested, and ROLE has no escapes). Writers put these keys first.
ROLE_HEAD = re.compile(rb'\{(?:"(?:type|id|parentId|timestamp)":(?:"[^"\\]*"|null),)*"message":\{"role":"([^"\\]*)"')


def skeletons_from_rows(rows: Sequence[Sequence[Any]], parse: Callable[[Any, int], dict[str, Any]],
                        fetch_whole: Callable[[list[Any]], Mapping[Any, Any]],
                        text: Callable[[Any], Any] = lambda v: v,
                        lossy: Callable[[Sequence[Any]], bool] | None = None) -> list[dict[str, Any]]:
    """Skeleton entries (:func:`sessiontree.core.tree.skeleton_entry`) of a skeleton query's rows.

    Args:
        rows: ``(id, parent id, type, timestamp, head, whole, seq)`` per entry in
            order: ``head`` (bytes) the first :data:`ROLE_HEAD_BYTES` of a
            message's text, else ``None``; ``whole`` the record's text for the
            records always parsed whole (label, leaf, session-info, compaction),
            else ``None``.
        parse: ``(record text, line) -> record``.
        fetch_whole: ``[seq, ...] -> {seq: record text}``, called once, for the rows
            that must be parsed whole after all: a message whose head does not show
            its role plainly (:data:`ROLE_HEAD`), or a row ``lossy`` says its copied
            columns may not hold the exact values.
        text: a column value as ``str`` (a store that keeps lone surrogates as bytes
            decodes them).

    Returns the same skeletons as ``skeleton_entry`` of the parsed records. One pass
    (the regular expression runs once per message).
    """
    from sessiontree.core.tree import skeleton_entry

    out: list[dict[str, Any]] = []
    push, match = out.append, ROLE_HEAD.match
    roles: dict[bytes, str] = {}  # a handful of distinct roles: decode each once
    later: list[tuple[int, Any]] = []
    for line, row in enumerate(rows, 2):
        entry_id, parent_id, kind, timestamp, head, own, seq = row
        if own is not None:
            push(skeleton_entry(parse(own, line)))
            continue
        role = None
        if head is not None:
            found = match(head)
            if found is not None:
                raw = found.group(1)
                role = roles.get(raw)
                if role is None:
                    # As the full read decodes what is not UTF-8 (jsonio): replaced, never an error.
                    role = roles[raw] = raw.decode("utf-8", "replace")
        if (head is not None and role is None) or (lossy is not None and lossy(row)):
            later.append((len(out), seq))
            push({})
            continue
        if entry_id.__class__ is not str or parent_id.__class__ not in (str, type(None)) \
                or kind.__class__ is not str or timestamp.__class__ is not str:
            entry_id, parent_id, kind, timestamp = text(entry_id), text(parent_id), text(kind), text(timestamp)
        entry: dict[str, Any] = {"type": kind, "id": entry_id, "parentId": parent_id, "timestamp": timestamp}
        if role is not None:
            entry["message"] = {"role": role}
        push(entry)
    if later:
        whole = fetch_whole([seq for _, seq in later])
        for position, seq in later:
            out[position] = skeleton_entry(parse(whole[seq], position + 2))
    return out
