"""Comparing a stored session with a source's entries (docs/sync.md, "Grown: reading only
the new bytes", "Diverged and `--replace`", "An agent rewrote the file"): same, grown or
diverged, and the content a replace stores (the file's entries, then those set with sessiontree)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sessiontree.format import jsonio
from sessiontree.format.codec import ParsedSession
from sessiontree.format.foreign import source_bytes

__all__ = ["Compared", "compare", "mapped_again", "merge_for_replace", "remapped", "rewritten", "upgrade_rewrite"]


@dataclass
class Compared:
    """How a file's entries relate to the stored session."""

    kind: str  # "same", "grown", "diverged"
    common: int = 0  # file entries already stored (a prefix of the file)
    index: int | None = None  # diverged: the first differing file entry (None: the header)
    reason: str = ""


def compare(stored: ParsedSession, parsed: ParsedSession, raw: Sequence[bytes],
             synced_before: int) -> Compared:
    """Compare a stored session with a file's entries (rule in docs/sync.md, "Grown").

    Grown or same when: the headers are equal; the file entries found in the
    store are a prefix of the file, stored in file order with the same bytes;
    every other stored entry hangs off those entries (its parent is one of
    them or another such entry: a name or label set with sessiontree); and
    the file still has at least the ``synced_before`` entries taken from it
    earlier.
    """
    if stored.header != parsed.header:
        return Compared("diverged", index=None, reason="the header differs from the stored one")
    entries = parsed.entries
    where = {entry["id"]: j for j, entry in enumerate(stored.entries)}
    common = 0
    last = -1
    for i, entry in enumerate(entries):
        j = where.get(entry["id"])
        if j is None:
            break
        if stored.entry_bytes(j) != raw[i]:
            return Compared("diverged", index=i, reason="differs from the stored entry with this id")
        if j < last:
            return Compared("diverged", index=i, reason="is stored in another order")
        last = j
        common = i + 1
    for i in range(common, len(entries)):
        if entries[i]["id"] in where:
            return Compared("diverged", index=common,
                             reason=f"is not in the store, though the later entry {entries[i]['id']} is")
    if synced_before > common:
        return Compared("diverged", index=common if common < len(entries) else None,
                         reason=f"the file no longer holds the {synced_before} entries synced from it before "
                                f"(only {common} of them match)")
    from_file = {entry["id"] for entry in entries[:common]}
    attached = set(from_file)
    for entry in stored.entries:
        entry_id = entry["id"]
        if entry_id in from_file:
            continue
        if entry.get("parentId") in attached:
            attached.add(entry_id)
            continue
        return Compared("diverged", index=common if common < len(entries) else None,
                         reason=f"the stored entry {entry_id} ({entry.get('type')}) is not in the file "
                                "and does not hang off its entries")
    return Compared("same" if common == len(entries) else "grown", common=common)


def merge_for_replace(stored: ParsedSession, parsed: ParsedSession,
                       raw: list[bytes]) -> tuple[list[dict[str, Any]], list[bytes | None], int, int,
                                                  list[dict[str, Any]]]:
    """The content ``sync --replace`` stores: the file's entries, then the entries that
    exist only in the store.

    A stored entry whose id the file has is replaced by the file's version. One
    whose type and timestamp equal a file entry's is the same record under an
    old id (an agent's upgrade rewrote the ids): superseded, counted. Any other
    is store-only: re-appended in stored order, its parent moved to the file's
    last entry when its parent is gone; dropped (and reported) only when it
    targets an entry (``targetId``) that is gone.

    Returns:
        ``(entries, raw, kept, superseded, dropped)``.
    """
    entries: list[dict[str, Any]] = list(parsed.entries)
    texts: list[bytes | None] = list(raw)
    from_file = {entry["id"] for entry in entries}
    ids = set(from_file)
    keys = {(entry.get("type"), entry.get("timestamp")) for entry in entries}
    leaf = entries[-1]["id"] if entries else None
    kept = superseded = 0
    dropped: list[dict[str, Any]] = []
    for j, entry in enumerate(stored.entries):
        if entry["id"] in from_file:
            continue  # the file's version wins
        if (entry.get("type"), entry.get("timestamp")) in keys:
            superseded += 1
            continue
        target = entry.get("targetId")
        if isinstance(target, str) and target not in ids:
            dropped.append({"id": entry["id"], "type": entry.get("type"),
                            "reason": f"its target {target} is not in the file"})
            continue
        text: bytes | None = stored.entry_bytes(j)
        parent = entry.get("parentId")
        if parent is not None and parent not in ids:
            entry = {**entry, "parentId": leaf}
            text = None  # re-parented: serialized anew
        entries.append(entry)
        texts.append(text)
        ids.add(entry["id"])
        kept += 1
    return entries, texts, kept, superseded, dropped


#: Fields of an entry that name other entries (docs/rules/format.md): an upgrade that
#: gives entries new ids changes them, nothing else.
_ID_FIELDS = ("id", "parentId", "firstKeptEntryId", "targetId", "fromId")


def mapped_again(stored: ParsedSession, source: bytes) -> bool:
    """Whether a stored foreign session was mapped from records the file still holds
    unchanged (their verbatim bytes, joined, are a non-empty prefix of ``source``): then any
    difference in the entries is the mapping's, never the agent's."""
    before = source_bytes(stored.entries)
    return bool(before) and before is not None and source.startswith(before)


def remapped(stored: ParsedSession, parsed: ParsedSession,
              raw: list[bytes]) -> tuple[list[dict[str, Any]], list[bytes | None], int]:
    """What a foreign session mapped again stores: the file's entries as the current mapping
    makes them, then the stored entries set with sessiontree (those without a ``foreign``
    object: a name, a label), in stored order; one whose parent is gone hangs off the last
    file entry, one whose target is gone is dropped. Returns ``(entries, raw, kept)``."""
    entries: list[dict[str, Any]] = list(parsed.entries)
    texts: list[bytes | None] = list(raw)
    ids = {entry["id"] for entry in entries}
    leaf = entries[-1]["id"] if entries else None
    kept = 0
    for j, entry in enumerate(stored.entries):
        if isinstance(entry.get("foreign"), dict) or entry["id"] in ids:
            continue  # a record of the file: the current mapping's entry stands for it
        target = entry.get("targetId")
        if isinstance(target, str) and target not in ids:
            continue
        text: bytes | None = stored.entry_bytes(j)
        if entry.get("parentId") is not None and entry.get("parentId") not in ids:
            entry, text = {**entry, "parentId": leaf}, None
        entries.append(entry)
        texts.append(text)
        ids.add(entry["id"])
        kept += 1
    return entries, texts, kept


def _sans_ids(entry: dict[str, Any]) -> bytes:
    """An entry's content without its id and the ids it names (canonical JSON)."""
    return jsonio.dumps({key: value for key, value in sorted(entry.items()) if key not in _ID_FIELDS})


def upgrade_rewrite(stored: ParsedSession, parsed: ParsedSession, synced_before: int) -> dict[str, str] | None:
    """``{old id: new id}`` when the file is the stored session's entries rewritten under
    new ids (an agent upgrading its old file in place: docs/sync.md, "An agent rewrote
    the file"), else ``None``.

    The rule: each file entry is paired, in order, with the first unpaired stored entry
    of the same content (type, timestamp and every field but the ids); at least the
    ``synced_before`` entries taken from the file earlier are paired, some under another
    id; each pair's parent is the pair of the other's parent; and every stored entry
    left unpaired hangs off paired ones (an entry set with sessiontree, kept).
    """
    if synced_before <= 0:
        return None
    waiting: dict[bytes, list[int]] = {}
    for j, entry in enumerate(stored.entries):
        waiting.setdefault(_sans_ids(entry), []).append(j)
    mapping: dict[str, str] = {}
    paired: set[int] = set()
    for entry in parsed.entries:
        queue = waiting.get(_sans_ids(entry))
        if not queue:
            continue
        j = queue.pop(0)
        paired.add(j)
        mapping[stored.entries[j]["id"]] = entry["id"]
    if len(paired) < synced_before or all(old == new for old, new in mapping.items()):
        return None
    by_id = {entry["id"]: entry for entry in parsed.entries}
    old_parent = {entry["id"]: entry.get("parentId") for entry in stored.entries}
    for old, new in mapping.items():
        before = old_parent[old]
        moved = mapping.get(before, before) if isinstance(before, str) else before
        if moved != by_id[new].get("parentId"):
            return None
    attached = set(mapping)
    for j, entry in enumerate(stored.entries):
        if j in paired:
            continue
        if entry.get("parentId") not in attached:
            return None
        attached.add(entry["id"])
    return mapping


def rewritten(stored: ParsedSession, parsed: ParsedSession, raw: list[bytes],
               mapping: dict[str, str]) -> tuple[list[dict[str, Any]], list[bytes | None], int]:
    """The file's entries, then the stored entries it does not hold (set with
    sessiontree), their references moved to the new ids; and how many of those."""
    entries: list[dict[str, Any]] = list(parsed.entries)
    texts: list[bytes | None] = list(raw)
    kept = 0
    for j, entry in enumerate(stored.entries):
        if entry["id"] in mapping:
            continue
        moved = {key: mapping.get(value, value) if key in _ID_FIELDS[1:] and isinstance(value, str) else value
                 for key, value in entry.items()}
        entries.append(moved)
        texts.append(stored.entry_bytes(j) if moved == entry else None)
        kept += 1
    return entries, texts, kept


