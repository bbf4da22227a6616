"""Session and entry identifiers (docs/rules/format.md).

* Entry ids are 8 lowercase hex digits, unique within a session; a
  candidate that collides is drawn again, and after 100 collisions a full
  UUID is used (docs/rules/format.md B.1).
* Generated session ids are UUIDv7 (docs/rules/format.md B.3); caller-supplied ones must match
  :data:`SESSION_ID_PATTERN` with ``re.fullmatch`` and ASCII classes only
  (docs/rules/format.md B.4, B.7): ``re.match(...$)`` would accept a trailing newline and ``\\w``
  would accept non-ASCII letters.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
import uuid
from collections.abc import Container, Iterable, Iterator
from typing import Any, TypeGuard

from sessiontree.errors import InvalidSessionIdError

__all__ = [
    "SESSION_ID_PATTERN",
    "derived_entry_id",
    "is_valid_session_id",
    "new_entry_id",
    "new_session_id",
    "session_id_hash",
    "shortest_unique_prefixes",
    "validate_session_id",
]

SESSION_ID_PATTERN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


def is_valid_session_id(value: Any) -> TypeGuard[str]:
    """Whether ``value`` is a string accepted as a caller-supplied session id (docs/rules/format.md B.4)."""
    return isinstance(value, str) and SESSION_ID_PATTERN.fullmatch(value) is not None


def validate_session_id(value: Any) -> str:
    """Return ``value`` if it is a valid session id.

    Raises:
        InvalidSessionIdError: with the exact message of docs/rules/format.md B.5.
    """
    if not is_valid_session_id(value):
        raise InvalidSessionIdError(value)
    return value


def new_session_id() -> str:
    """A new UUIDv7 string: 48-bit Unix milliseconds, version 7, RFC 4122 variant
    (docs/rules/format.md B.3)."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= ((rand >> 62) & 0xFFF) << 64  # 12 random bits
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    return str(uuid.UUID(int=value))


#: Random 8-hex candidates drawn 256 at a time from ``os.urandom`` (one system call
#: instead of one per id); ``next`` on a list iterator is atomic, so two threads never
#: get the same one, and a forked child starts with its own (``register_at_fork``).
_candidates: Iterator[str] = iter(())


def _refill() -> Iterator[str]:
    global _candidates
    text = os.urandom(1024).hex()
    _candidates = iter([text[i:i + 8] for i in range(0, 2048, 8)])
    return _candidates


def _forget_candidates() -> None:
    global _candidates
    _candidates = iter(())


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_forget_candidates)


def new_entry_id(existing: Container[str]) -> str:
    """A random 8-hex entry id not in ``existing`` (docs/rules/format.md B.1)."""
    for _ in range(100):
        # 32 random bits: the same distribution as the first 8 hex digits of a
        # UUIDv4, without building one.
        candidate = next(_candidates, None) or next(_refill())
        if candidate not in existing:
            return candidate
    return str(uuid.uuid4())


def derived_entry_id(seed: str, existing: Container[str]) -> str:
    """A deterministic 8-hex entry id derived from ``seed``, not in ``existing``.

    Used by the format-1 upgrade so that reading the same old file twice gives
    the same ids (the original agent drew random ones on every open, docs/rules/versions.md C.7).
    """
    counter = 0
    while True:
        digest = hashlib.sha256(f"{seed}#{counter}".encode("utf-8", "surrogatepass")).hexdigest()
        if digest[:8] not in existing:
            return digest[:8]
        counter += 1


def session_id_hash(session_id: str) -> str:
    """First 16 hex digits of SHA-256 over the UTF-8 id: the JSONL file-name hash
    (docs/rules/decisions.md D-7)."""
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def shortest_unique_prefixes(ids: Iterable[str], minimum: int = 8) -> dict[str, str]:
    """The shortest prefix of each id that no other id starts with, like git's short hashes.

    Args:
        ids: every id the prefix must tell apart (all ids of a store, not just
            the ones shown, so a printed prefix always resolves to one session).
        minimum: shortest prefix given, in characters (shorter ids are whole).

    Returns:
        ``{id: prefix}``. An id that is itself a prefix of another id gets
        the whole id (it resolves exactly, see the CLI's prefix rule).
    """
    ordered = sorted(set(ids))
    result: dict[str, str] = {}
    for i, current in enumerate(ordered):
        # In sorted order, the ids sharing the longest prefix with this one are its neighbours.
        shared = 0
        for j in (i - 1, i + 1):
            if 0 <= j < len(ordered):
                other = ordered[j]
                n = 0
                limit = min(len(current), len(other))
                while n < limit and current[n] == other[n]:
                    n += 1
                shared = max(shared, n)
        result[current] = current[:max(minimum, shared + 1)]
    return result
