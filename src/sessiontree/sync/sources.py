"""Where coding agents keep their own session files (``sessiontree sources``, ``sync``).

Found the way the agents find them (docs/sync.md):

* **pi**: the agent directory is ``$PI_CODING_AGENT_DIR`` when set, else
  ``~/.pi/agent``; sessions live in its ``sessions`` folder.
* **Atomic**: ``$ATOMIC_CODING_AGENT_DIR``, else ``$PI_CODING_AGENT_DIR`` (its
  compatibility alias), else ``~/.atomic/agent``; sessions in ``sessions``.

Both keep one subfolder per project, ``--<cwd with / as ->--``, holding
``<timestamp>_<uuid>.jsonl`` files.

Agents of another format, read through a mapping (docs/agents/README.md):

* **Claude Code**: ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``; project logs in
  ``projects/<encoded cwd>/<session id>.jsonl`` (subagent transcripts below them);
* **Codex**: ``$CODEX_HOME``, else ``~/.codex``; rollouts in
  ``sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``;
* **Gemini CLI**: ``$GEMINI_CLI_HOME/.gemini`` (the variable names the *home*
  Gemini CLI uses instead of ``~``), else ``~/.gemini``; chats in
  ``tmp/<project hash>/chats/session-<time>-<id>.json``;
* **oh-my-pi**: ``$PI_CODING_AGENT_DIR`` (pi's variable, which omp reads), else
  ``~/.omp/agent``; sessions in ``sessions``, laid out as pi's.

Nothing here reads a session file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["AGENTS", "FOREIGN_AGENTS", "SESSION_AGENTS", "AgentSource", "agent_choice_text", "agent_sources"]

#: ``(agent, environment variables in order of precedence, default agent directory under home)``.
AGENTS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("pi", ("PI_CODING_AGENT_DIR",), os.path.join(".pi", "agent")),
    ("atomic", ("ATOMIC_CODING_AGENT_DIR", "PI_CODING_AGENT_DIR"), os.path.join(".atomic", "agent")),
)

#: Agents of another format (read through a mapping, given back with ``export --format source``,
#: never restored): ``(agent, environment variables, default agent directory, sessions subfolder)``.
FOREIGN_AGENTS: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    ("claude-code", ("CLAUDE_CONFIG_DIR",), ".claude", "projects"),
    ("codex", ("CODEX_HOME",), ".codex", "sessions"),
    ("gemini", ("GEMINI_CLI_HOME",), ".gemini", "tmp"),
    # oh-my-pi honours pi's variable (so with it set, its folder is pi's, listed once, under pi).
    ("omp", ("PI_CODING_AGENT_DIR",), os.path.join(".omp", "agent"), "sessions"),
)

#: Every agent a session can be of (the values of ``format.foreign.agent_of_header``, which
#: ``stats --agent``, ``budget set --agent`` and ``stats --by agent`` use): ``pi`` (pi and Atomic
#: write one format and cannot be told apart) and each agent of :data:`FOREIGN_AGENTS`.
SESSION_AGENTS: tuple[str, ...] = ("pi", *(name for name, *_ in FOREIGN_AGENTS))


def agent_choice_text() -> str:
    """``"pi, claude-code, codex, gemini, omp"``: :data:`SESSION_AGENTS` for help texts and messages."""
    return ", ".join(SESSION_AGENTS)


#: Variables that name a home folder holding the agent directory rather than the agent
#: directory itself: ``{variable: agent directory inside it}``.
_HOME_VARIABLES: dict[str, str] = {"GEMINI_CLI_HOME": ".gemini"}


@dataclass(frozen=True)
class AgentSource:
    """One agent's session folder.

    Attributes:
        agent: ``"pi"``, ``"atomic"``, ``"claude-code"``, ``"codex"``, ``"gemini"`` or ``"omp"``.
        path: the sessions folder, absolute (``<agent dir>/sessions``; Claude Code:
            ``<config dir>/projects``).
        origin: how the agent directory was chosen: the environment variable
            that set it, or ``"default"``.
        exists: whether the folder is there (a directory).
    """

    agent: str
    path: str
    origin: str
    exists: bool

    def to_dict(self) -> dict[str, object]:
        """JSON data for ``--json``."""
        return {"agent": self.agent, "path": self.path, "origin": self.origin, "exists": self.exists}


def agent_sources(environ: Mapping[str, str] | None = None, home: str | None = None) -> list[AgentSource]:
    """Every agent's session folder, existing or not, one per distinct folder.

    Args:
        environ: the environment to read (default ``os.environ``).
        home: the home directory (default ``~`` expanded, i.e. ``$HOME``).

    Returns:
        Sources in the order of :data:`AGENTS`, then :data:`FOREIGN_AGENTS`; a folder two agents share (an
        Atomic falling back to ``$PI_CODING_AGENT_DIR``) is listed once, under
        the first agent. ``~`` at the start of a variable's value is expanded.
    """
    env = os.environ if environ is None else environ
    base = home if home is not None else os.path.expanduser("~")
    found: list[AgentSource] = []
    seen: set[str] = set()
    every = [(agent, variables, default, "sessions") for agent, variables, default in AGENTS]
    for agent, variables, default, sub in [*every, *FOREIGN_AGENTS]:
        origin = "default"
        agent_dir = os.path.join(base, default)
        for name in variables:
            value = env.get(name, "").strip()
            if value:
                origin = name
                # "~" means the given home (not the process's), so tests can fake it.
                agent_dir = base if value == "~" else os.path.join(base, value[2:]) if value.startswith("~/") else value
                if name in _HOME_VARIABLES:
                    agent_dir = os.path.join(agent_dir, _HOME_VARIABLES[name])
                break
        path = os.path.abspath(os.path.join(agent_dir, sub))
        key = os.path.realpath(path)
        if key in seen:
            continue
        seen.add(key)
        found.append(AgentSource(agent, path, origin, os.path.isdir(path)))
    return found
