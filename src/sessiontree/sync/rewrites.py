"""What the syncs of files an agent rewrites in place share (Gemini CLI chats, omp title
slots: docs/agents/gemini.md, docs/agents/README.md): the part of the engine they use
and the outcome they hand back, without importing the engine (it imports them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from sessiontree.errors import InvalidSessionError, SessionNotFoundError, StorageError
from sessiontree.format.codec import ParsedSession
from sessiontree.stores.base import Provenance, SessionStore, SyncChange, SyncState

__all__ = ["Outcome", "SyncerView", "merged_with_store", "stored_to_compare"]


class SyncerView(Protocol):
    """The :class:`~sessiontree.sync.engine.Syncer` as these syncs use it."""

    @property
    def store(self) -> SessionStore:
        """The target store."""
        ...

    @property
    def states(self) -> Mapping[str, SyncState]:
        """The recorded per-file states, by path."""
        ...

    @property
    def stored_ids(self) -> set[str]:
        """Session ids known to be stored."""
        ...

    @property
    def replace(self) -> bool:
        """Whether ``diverged`` files are replaced (``sync --replace``)."""
        ...

    def origin(self, session_id: str, source: str, agent: str | None = None) -> Provenance:
        """The provenance of a session created from ``source``."""
        ...

    def _commit(self, expect: SyncState | None, state: SyncState, change: SyncChange) -> None:
        ...


@dataclass
class Outcome:
    """A file's outcome, turned into the engine's ``FileResult`` by the engine (same fields)."""

    status: str
    session_id: str | None = None
    added: int = 0
    reason: str | None = None
    line: int | None = None
    pending: int = 0
    note: str | None = None


def stored_to_compare(syncer: SyncerView, session_id: str) -> ParsedSession | Outcome | None:
    """The stored session a rewritten file is compared with: ``None`` when there is none,
    an ``Outcome`` ("rejected", naming why) when it cannot be read, else the session."""
    if session_id not in syncer.stored_ids and not syncer.store.exists(session_id):
        return None
    try:
        return syncer.store.read(session_id)
    except SessionNotFoundError:
        return None
    except (InvalidSessionError, StorageError) as exc:
        return Outcome("rejected", session_id, reason=f"the stored session cannot be read to compare: {exc}")


def merged_with_store(stored: ParsedSession, parsed: ParsedSession) -> tuple[list[dict[str, Any]], list[bytes | None]]:
    """The new version's entries, then the stored entries set with sessiontree (no
    ``foreign`` object: a name, a label), re-parented to the last entry when their
    parent is gone, dropped only when they target an entry that is gone."""
    entries: list[dict[str, Any]] = list(parsed.entries)
    texts: list[bytes | None] = [parsed.entry_bytes(i) for i in range(len(entries))]
    ids = {entry["id"] for entry in entries}
    leaf = entries[-1]["id"] if entries else None
    for j, entry in enumerate(stored.entries):
        if isinstance(entry.get("foreign"), dict) or entry["id"] in ids:
            continue
        target = entry.get("targetId")
        if isinstance(target, str) and target not in ids:
            continue
        text: bytes | None = stored.entry_bytes(j)
        if entry.get("parentId") is not None and entry.get("parentId") not in ids:
            entry = {**entry, "parentId": leaf}
            text = None
        entries.append(entry)
        texts.append(text)
        ids.add(entry["id"])
    return entries, texts
