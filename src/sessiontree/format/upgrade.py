"""Format upgrades 1 -> 2 -> 3 -> 4, as a list of small named steps.

Each step takes a :class:`Records` (the header and the entries read from a
file, in file order) and returns nothing: it rewrites the records it
touches and marks them changed, so the caller knows which entries keep their
original JSON text. Steps run in memory only; nothing here touches a file
except to *read* the header of a ``parentSession`` file (docs/rules/versions.md §3.3).

Steps (docs/rules/versions.md seed:session-version, C.3-C.9):

* ``v1_to_v2``: assign ids in file order and chain ``parentId``; turn a
  compaction's numeric ``firstKeptEntryIndex`` (header = index 0) into
  ``firstKeptEntryId``. Ids come from a generator seeded with the session
  id, so reading the same file twice gives the same ids (the original agent
  drew new random ones on every open); the collision set is real (docs/rules/format.md B.10 was
  a bug).
* ``v2_to_v3``: message role ``hookMessage`` becomes ``custom``.
* ``v3_to_v4`` (also for early-4 headers): ``timestamp`` -> ``createdAt``,
  ``parentSession`` (a path) -> ``parentSessionId`` (an id, docs/rules/decisions.md D-8).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sessiontree.format import jsonio
from sessiontree.format.ids import is_valid_session_id
from sessiontree.format.types import Entry

__all__ = ["STEPS", "Records", "parent_session_to_id", "upgrade", "upgrade_header"]


@dataclass
class Records:
    """Header plus entries being upgraded.

    Attributes:
        header: the header object (modified in place by steps).
        entries: entry objects in file order.
        changed: indexes into ``entries`` whose JSON text no longer matches the file.
        header_changed: whether the header differs from the file's.
        base_dir: directory of the file, for resolving relative ``parentSession`` paths.
    """

    header: dict[str, Any]
    entries: list[Entry]
    changed: set[int] = field(default_factory=set)
    header_changed: bool = False
    base_dir: str | None = None


def v1_to_v2(records: Records, original_positions: list[int] | None = None) -> None:
    """docs/rules/versions.md C.3/C.4. ``original_positions[i]`` is entry i's index in the file's
    record list (header = 0), used to resolve ``firstKeptEntryIndex``."""
    positions = original_positions or list(range(1, len(records.entries) + 1))
    by_position: dict[int, int] = {pos: i for i, pos in enumerate(positions)}
    used: set[str] = set()
    previous: str | None = None
    # Seeded by the session id: the same file always gets the same ids; one
    # seeded generator rather than a hash per record (docs/decisions/v1-entry-ids.md).
    # Bytes with surrogatepass: a header id may hold a lone surrogate. Same seed as the str for valid ids.
    rng = random.Random(f"sessiontree-v1:{records.header.get('id')}".encode("utf-8", "surrogatepass"))
    for i, entry in enumerate(records.entries):
        entry_id = f"{rng.getrandbits(32):08x}"
        while entry_id in used:
            entry_id = f"{rng.getrandbits(32):08x}"
        used.add(entry_id)
        entry["id"] = entry_id
        entry["parentId"] = previous
        previous = entry_id
        if entry.get("type") == "compaction":
            index = entry.get("firstKeptEntryIndex")
            if isinstance(index, (int, float)) and not isinstance(index, bool):
                target = by_position.get(int(index)) if float(index).is_integer() else None
                # A forward reference finds a record without an id yet (docs/rules/versions.md C.4).
                if target is not None and target <= i:
                    entry["firstKeptEntryId"] = records.entries[target]["id"]
                del entry["firstKeptEntryIndex"]
        records.changed.add(i)
    records.header["version"] = 2
    records.header_changed = True


def v2_to_v3(records: Records) -> None:
    """docs/rules/versions.md C.5: ``hookMessage`` role becomes ``custom``."""
    for i, entry in enumerate(records.entries):
        message = entry.get("message") if entry.get("type") == "message" else None
        if isinstance(message, dict) and message.get("role") == "hookMessage":
            message["role"] = "custom"
            records.changed.add(i)
    records.header["version"] = 3
    records.header_changed = True


def v3_to_v4(records: Records) -> None:
    """docs/rules/versions.md C.9: the version-4 header; entries are unchanged."""
    records.header = upgrade_header(records.header, records.base_dir)
    records.header_changed = True


def upgrade_header(header: dict[str, Any], base_dir: str | None = None) -> dict[str, Any]:
    """Return a version-4 copy of a version 1-4 header (docs/rules/versions.md C.9, docs/rules/format.md A.3).

    Keys are ordered ``type, version, id, createdAt, cwd, parentSessionId,
    internal, workflow``, then any other keys in their original order.
    ``timestamp`` becomes ``createdAt`` (an existing ``createdAt`` wins) and
    ``parentSession`` becomes ``parentSessionId`` by :func:`parent_session_to_id`.
    """
    rest = dict(header)
    for key in ("type", "version", "id", "cwd", "internal", "workflow"):
        rest.pop(key, None)
    created = rest.pop("createdAt", None)
    timestamp = rest.pop("timestamp", None)
    parent_path = rest.pop("parentSession", None)
    parent_id = rest.pop("parentSessionId", None)
    out: dict[str, Any] = {"type": "session", "version": 4, "id": header.get("id")}
    if created is not None or timestamp is not None:
        out["createdAt"] = created if created is not None else timestamp
    if "cwd" in header:
        out["cwd"] = header["cwd"]
    if parent_id is None and parent_path is not None:
        parent_id = parent_session_to_id(parent_path, base_dir)
    if parent_id is not None:
        out["parentSessionId"] = parent_id
    for key in ("internal", "workflow"):
        if key in header:
            out[key] = header[key]
    out.update(rest)
    return out


def parent_session_to_id(value: Any, base_dir: str | None = None) -> str | None:
    """Convert a format-3 ``parentSession`` path to a session id (docs/rules/versions.md §3.3,
    docs/rules/decisions.md D-8).

    First match wins: the header id of an existing readable file; the part of
    a ``*.jsonl`` basename after the first ``_``; the value itself when it is
    already a valid id; otherwise ``None``. Never raises.
    """
    if not isinstance(value, str) or not value:
        return None
    path = value if os.path.isabs(value) or base_dir is None else os.path.join(base_dir, value)
    try:
        with open(path, "rb") as handle:
            first = handle.readline()
        header = jsonio.loads(first.removeprefix(b"\xef\xbb\xbf"))
        header_id = header.get("id") if isinstance(header, dict) else None
        if isinstance(header, dict) and header.get("type") == "session" and isinstance(header_id, str) and header_id:
            return header_id
    except (OSError, ValueError):
        pass
    base = value.replace("\\", "/").rsplit("/", 1)[-1]
    if base.endswith(".jsonl"):
        stem = base[: -len(".jsonl")]
        candidate = stem.split("_", 1)[1] if "_" in stem else stem
        if is_valid_session_id(candidate):
            return candidate
    if "/" not in value and "\\" not in value and is_valid_session_id(value):
        return value
    return None


#: The upgrade steps: (version the step starts from, name, function).
STEPS: list[tuple[int, str, Callable[..., None]]] = [
    (1, "v1_to_v2", v1_to_v2),
    (2, "v2_to_v3", v2_to_v3),
    (3, "v3_to_v4", v3_to_v4),
]


def upgrade(records: Records, version: int, original_positions: list[int] | None = None) -> list[str]:
    """Run every step from ``version`` up to 4; return the names of the steps run.

    A version-4 header that still has ``timestamp``/``parentSession`` (early 4)
    gets the ``v3_to_v4`` step too.
    """
    ran: list[str] = []
    for start, name, step in STEPS:
        if version <= start:
            if start == 1:
                step(records, original_positions)
            else:
                step(records)
            ran.append(name)
    if version == 4 and ("timestamp" in records.header or "parentSession" in records.header):
        v3_to_v4(records)
        ran.append("v3_to_v4")
    return ran
