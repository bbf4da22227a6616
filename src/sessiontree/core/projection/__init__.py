"""The projection: the model context a session branch rebuilds to
(docs/rules/projection.md seed:context-building).

The projection walks the active branch root to leaf and returns the
model-visible messages together with the entries they come from
(docs/rules/projection.md §3.6-§3.8, docs/rules/decisions.md D-11).
Importing the package gives the public API; the modules, lowest first (each
imports only those before it):

* :mod:`.model`: entry/message aliases, result shapes, compaction predicates;
* :mod:`.convert`: what one entry or one message becomes (P.1, P.2, Q.6);
* :mod:`.pairing`: the tool-window rule and :func:`convert_to_llm`;
* :mod:`.context`: system message, path and boundary, context edits, settings;
* :mod:`.incremental`: :class:`ProjectionBuilder`, the engine that builds and extends;
* :mod:`.build`: the public builders over it;
* :mod:`.historical`: the archival view of retired summary compactions.

Invariants:

* Raw entries and their messages are never mutated. Where something must
  change (null content, a context edit, a converted block) a shallow copy is
  made; unchanged messages are shared with the raw entries, as the original
  agent shares them.
* Nothing here recurses on the length of a branch: paths are walked with
  loops (:func:`sessiontree.core.tree.get_branch` is iterative too), so a
  very long chain projects like a short one.
* Projection messages are *agent* messages (docs/rules/projection.md Q.9, Q.17): ``custom``,
  ``bashExecution``, ``branchSummary`` and ``system`` keep their stored roles,
  and the active compaction boundary is a ``custom`` message with
  ``customType: "compaction"``. Provider-bound conversion is a separate step,
  :func:`convert_to_llm`.
* Tool pairing is applied by the projection itself (docs/rules/decisions.md D-11): orphaned and
  duplicate tool results are dropped; each unanswered call of a
  ``stopReason == "toolUse"`` turn gets a synthetic error result, owned by the
  entry whose message closes the window (or by the last entry, for calls still
  open at the end of a reopened session). Applying :func:`convert_to_llm` to
  the projection's messages gives exactly what converting first and repairing
  afterwards (the original order) gives: messages that conversion would drop
  are transparent to pairing, like ``system`` messages.
* Settings (thinking level, model, context window) are replayed from the raw
  entries of the whole path, including the compacted part; context edits
  never change them (docs/rules/projection.md Q.3, R.7, S).
"""

from sessiontree.core.projection.build import build_context_entries, build_session_context, build_session_projection
from sessiontree.core.projection.context import get_current_system_message, latest_edits
from sessiontree.core.projection.convert import entry_to_context_messages
from sessiontree.core.projection.historical import (
    HISTORICAL_SUMMARY_PREFIX,
    HISTORICAL_SUMMARY_SUFFIX,
    build_historical_projection,
)
from sessiontree.core.projection.incremental import PlainSteps, ProjectionBuilder
from sessiontree.core.projection.model import (
    INTERRUPTED_TEXT,
    LAST_ENTRY,
    HistoricalProjection,
    ProjectedEntry,
    SessionContext,
    SessionProjection,
    is_active_compaction,
    is_retired_record,
)
from sessiontree.core.projection.pairing import (
    assert_tool_pairing_invariant,
    closes_tool_window,
    convert_to_llm,
    repair_orphan_tool_results,
)

__all__ = [
    "HISTORICAL_SUMMARY_PREFIX",
    "HISTORICAL_SUMMARY_SUFFIX",
    "INTERRUPTED_TEXT",
    "LAST_ENTRY",
    "HistoricalProjection",
    "PlainSteps",
    "ProjectedEntry",
    "ProjectionBuilder",
    "SessionContext",
    "SessionProjection",
    "assert_tool_pairing_invariant",
    "build_context_entries",
    "build_historical_projection",
    "build_session_context",
    "build_session_projection",
    "closes_tool_window",
    "convert_to_llm",
    "entry_to_context_messages",
    "get_current_system_message",
    "is_active_compaction",
    "is_retired_record",
    "latest_edits",
    "repair_orphan_tool_results",
]
