"""Ids as a person types them: unique prefixes of session and entry ids, and subagent
sessions under their parent.

The one rule every edge follows (the command line, the viewer, the MCP server;
docs/listing.md, "Ids"):

* An id given whole resolves to itself.
* A prefix resolves to the one session whose id starts with it. When several
  do, and they are one session and its own subagent sessions (ids
  ``<session>-agent-<agent>``, as the Claude Code mapping names a subagent's
  transcript: docs/agents/claude-code.md), it resolves to that session: a
  subagent never makes its parent's prefix ambiguous.
* ``<parent prefix>/<agent prefix>`` addresses a subagent session: the parent
  prefix is resolved among the sessions and the parents of subagent sessions,
  the agent prefix among that parent's subagents. ``/`` is never part of a
  session id (docs/rules/format.md B.4), so the form cannot be mistaken.
* Anything else raises :class:`~sessiontree.errors.UnknownSessionPrefixError`
  (nothing matches) or :class:`~sessiontree.errors.AmbiguousSessionPrefixError`
  (the candidates named as lists show them).

:func:`short_session_ids` gives the forms lists print (the shortest prefix that
resolves back to the same session), so every printed id works everywhere.

Entry ids follow the plain part of the same rule, among one session's entries
(:func:`resolve_entry_prefix`; ``show --entry``, ``restore --at``, MCP ``leaf``/``around``,
the compare page's and ``diff``'s leaves): a whole id resolves to itself, a prefix
to the one entry whose id starts with it, anything else raises
:class:`~sessiontree.errors.UnknownEntryPrefixError` or
:class:`~sessiontree.errors.AmbiguousEntryPrefixError` (the candidates sorted).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sessiontree.errors import (
    AmbiguousEntryPrefixError,
    AmbiguousSessionPrefixError,
    UnknownEntryPrefixError,
    UnknownSessionPrefixError,
)
from sessiontree.format.ids import shortest_unique_prefixes

__all__ = ["SUBAGENT_MARK", "resolve_entry_prefix", "resolve_session_prefix", "short_session_ids",
           "split_subagent"]

#: What joins a parent session id and an agent id in a subagent session's id.
SUBAGENT_MARK = "-agent-"
#: Shortest parent part a list prints (as git's short hashes; format.ids).
PARENT_MINIMUM = 8
#: Shortest agent part a list prints (Claude Code's agent ids are 7 or 8 hex digits: whole).
AGENT_MINIMUM = 8


def split_subagent(session_id: str) -> tuple[str, str] | None:
    """``(parent id, agent id)`` for a subagent session's id ``<parent>-agent-<agent>``, else ``None``.

    The last ``-agent-`` splits, so a parent id that itself holds the mark (a
    subagent of a subagent) stays whole; both parts must be non-empty.
    """
    cut = session_id.rfind(SUBAGENT_MARK)
    if cut <= 0:
        return None
    agent = session_id[cut + len(SUBAGENT_MARK):]
    if not agent:
        return None
    return session_id[:cut], agent


def _subagents(ids: Iterable[str]) -> tuple[list[str], dict[str, dict[str, str]]]:
    """The ids as ``(sessions that are not subagents, {parent id: {agent id: session id}})``."""
    plain: list[str] = []
    children: dict[str, dict[str, str]] = {}
    for session_id in ids:
        parts = split_subagent(session_id)
        if parts is None:
            plain.append(session_id)
        else:
            children.setdefault(parts[0], {})[parts[1]] = session_id
    return plain, children


def short_session_ids(ids: Iterable[str]) -> dict[str, str]:
    """How lists print each session id: ``{id: short form}``.

    A session that is not a subagent: its shortest unique prefix (at least
    :data:`PARENT_MINIMUM` characters) among the sessions and the parents of
    subagent sessions. A subagent session: ``<parent's short form>/<agent's
    shortest unique prefix among that parent's subagents>`` (at least
    :data:`AGENT_MINIMUM`). Every form resolves back to its id through
    :func:`resolve_session_prefix`.
    """
    all_ids = list(ids)
    plain, children = _subagents(all_ids)
    parents = shortest_unique_prefixes([*plain, *children], minimum=PARENT_MINIMUM)
    result = {session_id: parents[session_id] for session_id in plain}
    for parent, agents in children.items():
        agent_short = shortest_unique_prefixes(agents, minimum=AGENT_MINIMUM)
        for agent, session_id in agents.items():
            result[session_id] = f"{parents[parent]}/{agent_short[agent]}"
    return result


def _one(prefix: str, matches: list[str], shown: dict[str, str] | None = None) -> str:
    """The one match; the candidates of an ambiguous prefix named whole, a subagent session
    as ``PARENT/AGENT`` (its whole id repeats the parent's)."""
    if not matches:
        raise UnknownSessionPrefixError(prefix)
    if len(matches) > 1:
        named = [shown[m] if shown and m in shown and split_subagent(m) else m for m in matches]
        raise AmbiguousSessionPrefixError(prefix, sorted(named))
    return matches[0]


def resolve_session_prefix(prefix: str, ids: Iterable[str]) -> str:
    """The one session id that ``prefix`` names among ``ids`` (the rule in the module docstring).

    Args:
        prefix: what was typed: a whole id, a prefix, or ``<parent prefix>/<agent prefix>``.
        ids: every session id of the store.

    Raises:
        UnknownSessionPrefixError: nothing matches (an empty prefix never does).
        AmbiguousSessionPrefixError: several sessions match; ``candidates`` are their
            whole ids, a subagent session's as ``PARENT/AGENT`` (:func:`short_session_ids`).
    """
    all_ids = list(ids)
    if prefix in all_ids:
        return prefix
    if not prefix:
        raise UnknownSessionPrefixError(prefix)
    if "/" in prefix:
        _plain, children = _subagents(all_ids)
        parent_part, _, agent_part = prefix.partition("/")
        if not parent_part or not agent_part or "/" in agent_part:
            raise UnknownSessionPrefixError(prefix)
        candidates = [p for p in children if p.startswith(parent_part)]
        exact = [p for p in candidates if p == parent_part]
        parent = _one(prefix, exact or candidates, short_session_ids(candidates))
        agents = children[parent]
        if agent_part in agents:
            return agents[agent_part]
        matches = [agents[a] for a in agents if a.startswith(agent_part)]
        return _one(prefix, matches, short_session_ids(all_ids) if len(matches) > 1 else None)
    matches = [i for i in all_ids if i.startswith(prefix)]
    if len(matches) > 1:
        # One session and its own subagents: the session. Its id is then the shortest match.
        head = min(matches, key=len)
        if all(m == head or m.startswith(head + SUBAGENT_MARK) for m in matches):
            return head
        return _one(prefix, matches, short_session_ids(all_ids))
    return _one(prefix, matches)


def resolve_entry_prefix(prefix: str, ids: Iterable[str], *, what: str = "entry",
                         shown: Callable[[str], str] | None = None) -> str:
    """The one entry id that ``prefix`` names among ``ids`` (one session's entry ids): the id
    itself when given whole, else the one id starting with it (the rule in the module docstring).

    Args:
        prefix: what was typed.
        ids: the session's entry ids (repeats are one id).
        what: how messages name the entry (``"entry"``, ``"entry of session ID"``).
        shown: the form an edge showed an id in, when it may differ from the stored id
            (MCP sends lone surrogates as U+FFFD); a typed id is matched in that form too.

    Raises:
        UnknownEntryPrefixError: nothing matches (an empty prefix never does).
        AmbiguousEntryPrefixError: several entries match; ``candidates`` sorted.
    """
    all_ids = list(dict.fromkeys(ids))
    if prefix in all_ids:
        return prefix
    if not prefix:
        raise UnknownEntryPrefixError(prefix, what)
    if shown is not None:
        exact = [i for i in all_ids if shown(i) == prefix]
        if exact:
            return exact[0]
    matches = sorted(i for i in all_ids
                     if i.startswith(prefix) or (shown is not None and shown(i).startswith(prefix)))
    if not matches:
        raise UnknownEntryPrefixError(prefix, what)
    if len(matches) > 1:
        raise AmbiguousEntryPrefixError(prefix, matches, what)
    return matches[0]
