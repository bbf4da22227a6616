"""What every store class repeats, written once: :class:`StoreBase` (the context-manager
methods, ``__repr__``, the default traits, and the generic partial reads and settles over
the store's own public ``load``), so a new store writes only its storage.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Self

from sessiontree.format.codec import ParsedSession
from sessiontree.stores.records import SessionOutline, SessionTexts
from sessiontree.stores.traits import StoreTraits

__all__ = ["StoreBase"]


class StoreBase:
    """Mixin of what every store class shares: ``with store:`` closes it, and
    ``repr()`` names the class and the store's URL. Subclasses set ``url`` and
    ``kind`` and define ``close()`` and ``read()``."""

    url: str
    kind: str
    #: Every store defines ``read`` (``SessionStore.read``); the generic reads below use it.
    read: Callable[[str], ParsedSession]
    #: See ``SessionStore.partial_reads``: the generic read_skeleton/read_entries read everything.
    partial_reads = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    def traits(self) -> StoreTraits:
        """The store's declared traits (``StoreTraits``; docs/decisions/store-traits.md):
        the conservative defaults here, each store class states its own."""
        return StoreTraits(partial_reads=self.partial_reads)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:  # pragma: no cover - every store defines its own
        """Release what the store holds. Idempotent."""

    def read_skeleton(self, session_id: str) -> ParsedSession:
        """Generic ``read_skeleton`` (docs in :class:`~sessiontree.stores.base.SessionStore`):
        :meth:`read`, then :func:`~sessiontree.core.tree.skeleton_entry` of every entry.
        Costs a full read; stores with cheaper access override it."""
        from sessiontree.core.tree import skeleton_entry

        parsed = self.read(session_id)
        entries = [skeleton_entry(e) for e in parsed.entries]
        return ParsedSession(parsed.header, entries, [None] * len(entries), parsed.header_raw,
                             parsed.source_version, False, [], list(parsed.lines), parsed.path)

    def read_entries(self, session_id: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        """Generic ``read_entries`` (docs in :class:`~sessiontree.stores.base.SessionStore`):
        the by-id form of :meth:`read_entries_at`: a fresh :meth:`read_outline` (here a
        full :meth:`read`), then the entries at the positions of ``ids`` in that order
        (unknown ids skipped)."""
        outline = self.read_outline(session_id)
        position = {entry_id: at for at, entry_id in enumerate(outline.ids)}
        return self.read_entries_at(outline, [position[i] for i in ids if i in position])

    def settle_derived(self, *, on_progress: Callable[[int, int], None] | None = None) -> int:
        """Finish derived work that writes deferred; stores that defer none (JSONL,
        memory, PostgreSQL) have nothing to do (``on_progress`` is never called).
        Returns the entries processed: 0."""
        return 0

    def settle_search_tail(self, on_merge: Callable[[int], None] | None = None) -> int:
        """Merge a long pending search tail before a search (see
        ``SessionStore.settle_search_tail``); stores without one (JSONL, memory,
        PostgreSQL) have nothing to merge. Returns the records merged: 0."""
        return 0

    def read_outline(self, session_id: str) -> SessionOutline:
        """Generic ``read_outline`` (docs in :class:`~sessiontree.stores.base.SessionStore`):
        a full :meth:`read`, whose entries the outline keeps, so that
        :meth:`read_entries_at` answers from that snapshot without reading again.
        Stores that can list their entries' ids, parents and types without
        parsing the records (SQLite) override it."""

        parsed = self.read(session_id)
        entries = parsed.entries
        return SessionOutline(session_id, parsed.header, [e["id"] for e in entries],
                              [e.get("parentId") for e in entries], [e["type"] for e in entries],
                              range(len(entries)), None, entries)

    def read_texts(self, session_id: str) -> SessionTexts:
        """Generic ``read_texts`` (docs in :class:`~sessiontree.stores.base.RawTexts`): a full
        :meth:`read` and its texts, so the errors are :meth:`read`'s. Stores that can
        give the stored texts without parsing them (SQLite, PostgreSQL) override it."""

        return SessionTexts.of(session_id, self.read(session_id))

    def read_entries_at(self, outline: SessionOutline, positions: Sequence[int]) -> list[dict[str, Any]]:
        """Generic ``read_entries_at`` (docs in :class:`~sessiontree.stores.base.SessionStore`):
        from the outline's own entries when it holds them, else from a fresh
        :meth:`read` whose records at ``positions`` must still carry the outline's
        ids, parents and types.

        Raises:
            SessionChangedError: they do not (or the session is gone).
            IndexError: a position outside the outline.
        """
        from sessiontree.errors import SessionChangedError, SessionNotFoundError

        size = len(outline.ids)
        for position in positions:
            if not 0 <= position < size:
                raise IndexError(f"position {position} outside a session of {size} entries")
        if outline.entries is not None:
            return [outline.entries[p] for p in positions]
        try:
            entries = self.read(outline.session_id).entries
        except SessionNotFoundError:
            raise SessionChangedError(outline.session_id, "it was deleted") from None
        out = []
        for position in positions:
            entry = entries[position] if position < len(entries) else None
            if entry is None or (entry["id"], entry.get("parentId"), entry["type"]) != (
                    outline.ids[position], outline.parent_ids[position], outline.types[position]):
                raise SessionChangedError(outline.session_id, f"entry {position + 1} differs")
            out.append(entry)
        return out
