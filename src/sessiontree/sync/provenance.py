"""What the store knows of how an agent wrote a session: the format of the file it was
synced from (docs/sync.md, "What pi sent").

Sessions are stored in format 4 whatever file they came from; ``sync`` records, per
source file, the format the agent wrote it in (:attr:`SyncState.version`). pi and
Atomic before format 4 applied their own (non-verbatim) summary compactions; format 4
keeps those as archival records. So the views that show "what the model was sent"
(``context``, the viewer's model's view) need the agent's format, which this module
reads from the store's sync states. A session only imported (``sessiontree import``)
has none: it keeps the format-4 rule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sessiontree.errors import SessionError
from sessiontree.stores.base import SessionStore, SyncState

__all__ = ["agent_format"]


def agent_format(store: SessionStore, session_id: str, *,
                 read_states: Callable[[], Mapping[str, SyncState]] | None = None) -> int | None:
    """The lowest format of the agent files ``session_id`` was synced from (1-4), or
    ``None`` when it was never synced from a pi or Atomic file (or the store cannot say: a store
    without sync states, a failing read; the views then keep the format-4 rule).

    ``read_states`` reads the store's sync states (default ``store.sync_states``): a
    caller that needs them twice passes one memoised read."""
    try:
        states = (read_states or store.sync_states)()
    except (SessionError, AttributeError, NotImplementedError):
        return None
    # Version 0 marks a file mapped from another agent (Claude Code, Codex; docs/agents/):
    # no pi compaction to replay, so it is not a pi format.
    versions = [state.version for state in states.values()
                if state.session_id == session_id and 1 <= state.version <= 4]
    return min(versions) if versions else None
