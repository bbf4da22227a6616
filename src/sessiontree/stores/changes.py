"""Whether a stored session changed: the hint the MCP server's and the viewer's session caches
and the usage page share (:func:`change_hint`), from the store's declared change files.
"""

from __future__ import annotations

import os

from sessiontree.stores.base import SessionStore
from sessiontree.stores.traits import store_traits

__all__ = ["change_hint"]


def change_hint(store: SessionStore, session_id: str) -> tuple[tuple[int, int] | None, ...] | None:
    """A cheap "did the stored session change" signal for a cache of read sessions.

    The (size, mtime in ns) of each file that holds ``session_id`` (``None`` in place of a
    file that cannot be stat-ed): its own file where the store has one per session, else a
    file-backed SQLite database and its ``-wal`` file. ``None`` for a store without files
    (memory, PostgreSQL, in-memory SQLite): the caller then re-reads on a timer instead.
    """
    path = store.location(session_id)
    paths: list[str] = [path] if path else list(store_traits(store).change_files)
    if not paths:
        return None
    stats: list[tuple[int, int] | None] = []
    for name in paths:
        try:
            st = os.stat(name)
            stats.append((st.st_size, st.st_mtime_ns))
        except OSError:
            stats.append(None)
    return tuple(stats)
