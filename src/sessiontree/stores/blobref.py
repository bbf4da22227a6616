"""``BlobRef``: a large string value of an entry that stays in the store until asked for.

A store that keeps large payloads out of line (the SQLite store, docs/blobs.md)
can give an entry whose image ``data`` is a :class:`BlobRef` instead of the
string, when its caller asked for references (``SqliteStore(..., blob_refs=True)``).
Such an entry is the stored record with that one value deferred: everything else
is parsed as usual. The reference knows the value's SHA-256 and length; its
bytes come from the store on :meth:`BlobRef.load_bytes` (and are checked there).

References are opt-in: every read of a store opened without ``blob_refs`` gives
plain strings, exactly as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

__all__ = ["BlobRef", "resolve_blobs"]


class BlobRef:
    """A JSON string value kept out of line: its content's SHA-256 and length, and a
    loader of its bytes.

    Attributes:
        sha256: the lowercase hex SHA-256 of the string's stored bytes (the UTF-8 text
            between its quotes in the record, escapes as written).
        length: that byte count (for base64 image data, the number of characters).
    """

    __slots__ = ("_loader", "length", "sha256")

    def __init__(self, sha256: str, length: int, loader: Callable[[str], bytes]) -> None:
        """``loader(sha256) -> bytes`` fetches and checks the stored bytes (it raises
        the store's error when they are missing or damaged)."""
        self.sha256 = sha256
        self.length = length
        self._loader = loader

    def load_bytes(self) -> bytes:
        """The string's stored bytes, as they stand between the quotes in the record.

        Raises:
            CorruptEntryError: the stored bytes fail their checksum or are missing.
            StorageError: the store could not be read (e.g. it was closed).
        """
        return self._loader(self.sha256)

    def load(self) -> str:
        """The string value itself (the stored bytes read as a JSON string).

        Raises:
            CorruptEntryError, StorageError: as :meth:`load_bytes`.
        """
        data = self.load_bytes()
        if b"\\" not in data:
            return data.decode("utf-8", "surrogatepass")
        value: str = orjson.loads(b'"' + data + b'"')
        return value

    def __repr__(self) -> str:
        return f"BlobRef(sha256={self.sha256[:12]}..., length={self.length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BlobRef) and other.sha256 == self.sha256 and other.length == self.length

    def __hash__(self) -> int:
        return hash((self.sha256, self.length))


def _holds_ref(value: Any) -> bool:
    """Whether a :class:`BlobRef` stands anywhere inside ``value`` (an iterative walk:
    any nesting depth)."""
    stack = [value]
    while stack:
        node = stack.pop()
        for item in (node.values() if isinstance(node, dict) else node):
            if isinstance(item, BlobRef):
                return True
            if isinstance(item, (dict, list)):
                stack.append(item)
    return False


def resolve_blobs(value: Any) -> Any:
    """``value`` (an entry, a message, a context's message list) with every
    :class:`BlobRef` inside replaced by its string, loaded from the store. Holding
    none, ``value`` itself is returned; else a copy (dicts and lists copied, other
    values shared), so the original keeps its references.

    Raises:
        CorruptEntryError, StorageError: as :meth:`BlobRef.load_bytes`.
    """
    if isinstance(value, BlobRef):
        return value.load()
    if not isinstance(value, (dict, list)) or not _holds_ref(value):
        return value
    root: Any = dict(value) if isinstance(value, dict) else list(value)
    stack = [root]
    while stack:  # iterative: entries may nest hundreds of levels (docs/format-bytes.md)
        node = stack.pop()
        for key, item in list(node.items() if isinstance(node, dict) else enumerate(node)):
            if isinstance(item, BlobRef):
                node[key] = item.load()
            elif isinstance(item, (dict, list)):
                node[key] = dict(item) if isinstance(item, dict) else list(item)
                stack.append(node[key])
    return root
