"""Give a stored session back to its agent as a file the agent opens (``sessiontree restore``).

The inverse of :mod:`.engine` (docs/agent-loop.md):

* **A synced file comes back byte for byte.** Sync records each file's shape
  (:mod:`sessiontree.format.shape`): the header line the agent wrote, line
  ends, lines that are no entries, upgraded entries' original text. The file
  is rebuilt from the stored header and entries through it, and its SHA-256
  must equal the one recorded when the file was synced; otherwise it is not
  called byte for byte.
* **A session born elsewhere** (imported, forked, written through the
  library, kept in PostgreSQL) is written the way the agent writes: a
  version-3 header (``timestamp`` and ``parentSession`` instead of
  ``createdAt`` and ``parentSessionId``), then each entry's stored JSON text
  on its own line. What the agent will not see is reported per entry kind
  (:data:`UNSEEN`).
* **``at``** writes only the path root -> entry, as a new session whose
  ``parentSession`` is the source (fork from a message).
* **A Claude Code or Codex session** (:func:`restore_source`) comes back as its agent's own
  file: the verbatim records the store kept, checked against the sync record, in the
  agent's own folder layout; ``resume`` then runs ``claude --resume ID`` or ``codex resume
  ID``. A pi file of such a session is written only when asked (``restore --as pi``).
* **Only inside the folder.** Every target is a root the command owns (the agent's sessions
  folder or ``--dir``) and names validated by :mod:`.safepath`; folders below the root are
  opened without following symbolic links, and a stale temporary file of a killed restore
  is removed (docs/agent-loop.md, "What is guaranteed").
* **Nothing is overwritten.** The file is written to a temporary file beside
  the target, fsynced, then linked to the target name (``link`` fails when
  the name exists, so a file that appears meanwhile is never replaced). A
  target that exists with the same bytes is a no-op; with other bytes, a
  symbolic link, or an unwritable folder, one clear error and nothing left behind.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sessiontree.core.textsafe import shell_join, shell_quote
from sessiontree.core.tree import SessionTree
from sessiontree.format import jsonio
from sessiontree.format.foreign import agent_of_header, source_bytes
from sessiontree.format.ids import new_session_id
from sessiontree.format.shape import FileShape, ShapeError, render_shape
from sessiontree.session.builders import branched_session_entries, now_iso
from sessiontree.stores.base import RawTexts, SessionStore, SessionTexts, SyncState
from sessiontree.stores.skeleton import ROLE_HEAD
from sessiontree.sync.newfile import RestoreError, Target, sweep_stale_temps, write_new
from sessiontree.sync.reading import TAIL_CHECK
from sessiontree.sync.safepath import (
    UnsafePathError,
    cwd_folder,
    encode_cwd,
    local_stamp,
    name_part,
    parts_under,
    session_file_name,
)
from sessiontree.sync.sources import AGENTS, agent_sources

__all__ = [
    "FOREIGN",
    "UNSEEN",
    "AgentFile",
    "RestoreError",
    "RestoreResult",
    "Target",
    "agent_file",
    "agent_file_name",
    "agent_resume_command",
    "claude_project_folder",
    "encode_cwd",
    "restore",
    "restore_source",
    "resume_command",
    "session_agent",
    "sessions_folder",
    "source_file",
    "source_target",
    "sweep_stale_temps",
    "target_of",
    "write_new",
]

#: What each agent does not see, per entry kind (``type``, or ``message:<role>``): pi 1.6
#: and Atomic read format 3, and ignore what they do not know.
UNSEEN: dict[str, dict[str, str]] = {
    "pi": {
        "context_window_change": "pi has no context-window entry: the window it uses is its own setting",
    },
    "atomic": {
        "context_window_change": "Atomic has no context-window entry: the window it uses is its own setting",
        "context_edit": "Atomic does not apply context edits: the model sees the original content",
        "message:system": "Atomic drops system messages from the model's context",
    },
}


@dataclass
class AgentFile:
    """The bytes of a session as an agent's file, and what they are.

    Attributes:
        session_id: the session the file holds (new for ``at``).
        data: the file's bytes.
        sha256: their SHA-256 (raw bytes).
        byte_exact: rebuilt from a recorded file shape and equal to the file synced
            (same SHA-256): the agent gets its own file back.
        source_path: the file it was synced from (or archived from), if any.
        header: the header as written (format 3).
        cwd: the session's working directory.
        notes: what the agent will not see, and anything else the caller should say.
        extra: entries the store holds beyond the synced file (written after it, in
            the agent's format).
    """

    session_id: str
    data: bytes
    sha256: bytes
    byte_exact: bool
    source_path: str | None
    header: dict[str, Any]
    cwd: str
    notes: list[str] = field(default_factory=list)
    extra: int = 0


@dataclass
class RestoreResult:
    """What :func:`restore` did.

    Attributes:
        status: ``"written"`` or ``"present"`` (the target already holds these bytes).
        path: the file, absolute.
        file: the :class:`AgentFile` written (or found).
    """

    status: str
    path: str
    file: AgentFile

    def to_dict(self) -> dict[str, Any]:
        """JSON data (camelCase keys), as ``restore --json`` prints it."""
        return {"status": self.status, "path": self.path, "sessionId": self.file.session_id,
                "sha256": self.file.sha256.hex(), "bytes": len(self.file.data), "byteExact": self.file.byte_exact,
                "sourcePath": self.file.source_path, "extraEntries": self.file.extra, "notes": list(self.file.notes)}


# --------------------------------------------------------------------------- names


def agent_file_name(header: Mapping[str, Any]) -> str:
    """The agent's name for a session file, ``<timestamp>_<id>.jsonl``, made only from validated
    parts (:func:`~sessiontree.sync.safepath.session_file_name`: a header timestamp that does
    not parse gives the current time; an id that is no file name is refused).

    Raises:
        UnsafePathError: the header's id is no file name.
    """
    return session_file_name(dict(header))


def sessions_folder(agent: str, environ: Mapping[str, str] | None = None, home: str | None = None) -> str:
    """The agent's sessions folder (``$PI_CODING_AGENT_DIR/sessions``, ...), as ``sync`` finds it.

    Raises:
        ValueError: an unknown agent.
    """
    if agent not in {name for name, _, _ in AGENTS}:
        raise ValueError(f"unknown agent {agent!r} (known: {', '.join(name for name, _, _ in AGENTS)})")
    env = dict(os.environ if environ is None else environ)
    if agent == "pi":
        # agent_sources() lists a folder two agents share once, under pi: ask for pi alone.
        env.pop("ATOMIC_CODING_AGENT_DIR", None)
    for source in agent_sources(env, home):
        if source.agent == agent:
            return source.path
    # Atomic falling back to pi's folder: the same folder, listed under pi.
    return next(source.path for source in agent_sources(env, home))


# --------------------------------------------------------------------------- building the bytes


def _v3_header(header: Mapping[str, Any], parent_path: str | None = None) -> dict[str, Any]:
    """The format-3 header pi 1.6 and Atomic write, from a format-4 one (docs/agent-loop.md):
    ``createdAt`` becomes ``timestamp``, ``parentSessionId`` becomes ``parentSession`` (the
    parent's file when known, else its id); ``internal`` and ``workflow`` are kept."""
    out: dict[str, Any] = {"type": "session", "version": 3, "id": header["id"],
                           "timestamp": header.get("createdAt") or now_iso(), "cwd": header.get("cwd", "")}
    parent = header.get("parentSessionId")
    if parent:
        out["parentSession"] = parent_path or parent
    for key in ("internal", "workflow", "foreign"):
        if key in header:
            out[key] = header[key]
    return out


def _unseen(agent: str, types: Sequence[str], texts: Sequence[bytes]) -> list[str]:
    """One note per entry kind the agent will not see, with how many entries, in the
    order each kind first occurs.

    ``types[i]`` and ``texts[i]`` are entry ``i``'s type and stored text. Kinds are
    counted from the types; a message's role (``message:<role>``) is looked up only
    when the agent's rules name a role, from the head of its text
    (:data:`~sessiontree.stores.skeleton.ROLE_HEAD`, the skeleton reads' rule) or, when
    the head does not show it plainly, from the parsed record.
    """
    rules = UNSEEN.get(agent, {})
    counts = Counter(types)  # one pass in C: most kinds need no more
    found: dict[str, tuple[int, int]] = {}  # kind -> (first position, count)
    for kind in rules:
        if not kind.startswith("message:") and counts.get(kind):
            found[kind] = (types.index(kind), counts[kind])
    if any(kind.startswith("message:") for kind in rules) and counts.get("message"):
        match = ROLE_HEAD.match
        for position, (kind, text) in enumerate(zip(types, texts, strict=False)):
            if kind != "message":
                continue
            head = match(text)
            if head is not None:
                role: Any = head.group(1).decode("utf-8", "replace")
            else:
                record = jsonio.loads(text)
                message = record.get("message") if isinstance(record, dict) else None
                role = message.get("role") if isinstance(message, dict) else None
            name = f"message:{role}"
            if name in rules:
                first, count = found.get(name, (position, 0))
                found[name] = (first, count + 1)
    notes = []
    for kind, (_, count) in sorted(found.items(), key=lambda item: item[1][0]):
        what = kind.replace("message:", "") + (" message" if kind.startswith("message:") else "")
        notes.append(f"{agent} will not see {count} {what} {'entry' if count == 1 else 'entries'}: {rules[kind]}")
    return notes


def _read_texts(store: SessionStore, session_id: str) -> SessionTexts:
    """The session's header and stored texts: :meth:`RawTexts.read_texts` where the
    store has it (no entry parsed), else from a whole :meth:`read`."""
    if isinstance(store, RawTexts):
        return store.read_texts(session_id)
    return SessionTexts.of(session_id, store.read(session_id))


def _states_of(store: SessionStore, session_id: str,
               read_states: Callable[[], Mapping[str, SyncState]] | None = None) -> list[SyncState]:
    """The sync states of files holding ``session_id``, most entries (then newest) first
    (read with ``read_states``, default ``store.sync_states``)."""
    states = [state for state in (read_states or store.sync_states)().values() if state.session_id == session_id]
    states.sort(key=lambda state: (state.entries, state.mtime_ns), reverse=True)
    return states


def _from_shape(stored: SessionTexts, shape: FileShape) -> bytes | None:
    """The file a shape describes, from the stored session's first entries, or ``None`` when
    they do not give back the recorded bytes (an entry written by sessiontree between
    the file's entries, a store changed since)."""
    try:
        data = render_shape(shape, jsonio.dumps(stored.header), stored.texts)
    except ShapeError:
        return None
    if len(data) != shape.size or hashlib.sha256(data).digest() != shape.sha256:
        return None
    return data


def agent_file(store: SessionStore, session_id: str, *, agent: str = "pi", at: str | None = None,
               state: SyncState | None = None) -> AgentFile:
    """The session as a file ``agent`` opens (rules in the module docstring).

    Args:
        store: where the session is.
        session_id: its full id.
        agent: ``"pi"`` or ``"atomic"``.
        at: an entry id: only the path root -> it, as a new session.
        state: the sync state of the one file to rebuild (``archive`` verifies a given
            file, and already holds every state: reading them all again per file made a
            run quadratic in the number of files); default: every file synced from the
            session, most entries first.

    Only the stored header and texts are read (:meth:`RawTexts.read_texts`, each
    record's checksum checked, no entry parsed; a whole :meth:`read` on a store
    without it); ``at`` reads the session whole, to walk its tree.

    Raises:
        SessionNotFoundError: no such session.
        EntryNotFoundError: ``at`` is not an entry of it.
        StorageError, InvalidSessionError: the store could not give the session.
    """
    if at is not None:
        return _fork_file(store, session_id, at, agent)
    stored = _read_texts(store, session_id)
    header, texts = stored.header, stored.texts
    cwd = str(header.get("cwd", ""))
    for synced in [state] if state is not None else _states_of(store, session_id):
        blob = synced.shape if synced.shape is not None else store.sync_shape(synced.path)
        if blob is None:
            continue
        try:
            shape = FileShape.decode(blob)
        except ShapeError:
            continue
        rebuilt = _from_shape(stored, shape)
        if rebuilt is None:
            continue
        data = rebuilt
        extra = len(texts) - shape.entries
        notes = []
        if extra:
            if data and not data.endswith(b"\n"):
                data += b"\n"  # the file ended without a newline: the agent would glue the next record on
            data += b"".join(text + b"\n" for text in texts[shape.entries:])
            notes.append(f"{extra} {'entry' if extra == 1 else 'entries'} added in the "
                         f"store after the file was synced follow the file's bytes")
        v3 = _file_header(data)
        notes += _unseen(agent, stored.types, texts)
        # Nothing added: the bytes are the shape's, whose SHA-256 the rebuild was checked against.
        sha256 = hashlib.sha256(data).digest() if extra else shape.sha256
        return AgentFile(session_id, data, sha256, not extra, synced.path,
                         v3 if isinstance(v3, dict) else _v3_header(header), cwd, notes, extra)
    v3 = _v3_header(header)
    data = b"".join([jsonio.dumps(v3), b"\n", *(text + b"\n" for text in texts)])
    return AgentFile(session_id, data, hashlib.sha256(data).digest(), False, None, v3, cwd,
                     _unseen(agent, stored.types, texts))


def _file_header(data: bytes) -> Any:
    """The header a rebuilt file starts with: its first line that parses (a BOM before it
    dropped); malformed lines before it are skipped, as pi's loader skips them
    (docs/sync.md, "Malformed lines"). ``None`` when no line parses."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        stop = len(data) if end < 0 else end
        line = data[start:stop].lstrip(b"\xef\xbb\xbf").strip()
        start = stop + 1
        if not line:
            continue
        try:
            return jsonio.loads(line)
        except ValueError:
            continue
    return None


def _fork_file(store: SessionStore, session_id: str, at: str, agent: str) -> AgentFile:
    """:func:`agent_file` with ``at``: the path root -> ``at`` as a new session (needs the
    parsed entries, to walk the tree)."""
    stored = store.read(session_id)
    header = stored.header
    cwd = str(header.get("cwd", ""))
    entries = branched_session_entries(SessionTree(stored.entries), at)
    new_id = new_session_id()
    new_header: dict[str, Any] = {"type": "session", "version": 4, "id": new_id, "createdAt": now_iso(), "cwd": cwd,
                                  "parentSessionId": session_id}
    for key in ("internal", "workflow"):
        if key in header:
            new_header[key] = header[key]
    # Entries the branch keeps unchanged are the stored dicts: they keep their stored text.
    position = {id(entry): i for i, entry in enumerate(stored.entries)}
    texts = [stored.entry_bytes(position[id(e)]) if id(e) in position else jsonio.dumps(e) for e in entries]
    source = _states_of(store, session_id)
    v3 = _v3_header(new_header, source[0].path if source else None)
    data = b"".join([jsonio.dumps(v3), b"\n", *(text + b"\n" for text in texts)])
    return AgentFile(new_id, data, hashlib.sha256(data).digest(), False, None, v3, cwd,
                     _unseen(agent, [str(entry.get("type")) for entry in entries], texts))


# --------------------------------------------------------------------------- writing


def _archived_path(store: SessionStore, session_id: str, sha256: bytes) -> str | None:
    """Where ``archive`` took this exact file from, if it did."""
    for record in reversed(store.archived_files()):
        if record.session_id == session_id and record.sha256 == sha256:
            return record.path
    return None


def _recorded_parts(root: str, original: str) -> tuple[str, ...] | None:
    """The components of a recorded path (a sync state's, an archive record's) below ``root``,
    when it lies there and every component is a name; else ``None``."""
    parts = parts_under(root, original)
    if parts is None:
        return None
    try:
        for part in parts:
            name_part(part, "a recorded name", controls=True)
    except UnsafePathError:
        return None
    return parts


def target_of(store: SessionStore, file: AgentFile, *, agent: str = "pi", directory: str | None = None,
              environ: Mapping[str, str] | None = None, home: str | None = None) -> Target:
    """Where :func:`restore` writes ``file`` (docs/agent-loop.md, "Where restore writes"):

    * a file archived from the agent's folder goes back to its original path, and a synced file
      to the path it was synced from, when that path lies inside the agent's sessions folder;
    * anything else to ``<sessions folder>/--<cwd>--/<timestamp>_<id>.jsonl``, the name of the
      recorded file when there is one, else made from validated parts
      (:func:`~sessiontree.sync.safepath.session_file_name`);

    with ``directory``, the same file name under ``directory/--<cwd>--/``.

    Raises:
        UnsafePathError: the cwd holds a NUL or the id is no file name.
    """
    original = _archived_path(store, file.session_id, file.sha256) if file.byte_exact else None
    original = original or file.source_path
    if directory is not None:
        root = os.path.abspath(os.path.expanduser(directory))
    else:
        root = sessions_folder(agent, environ, home)
        parts = _recorded_parts(root, original) if original else None
        if parts is not None:
            return Target(root, parts)
    name = os.path.basename(original) if original else ""
    try:
        name = name_part(name, "file name", controls=True) if name.endswith(".jsonl") else ""
    except UnsafePathError:
        name = ""
    return Target(root, (cwd_folder(file.cwd, file.session_id), name or session_file_name(file.header)))


def target_path(store: SessionStore, file: AgentFile, *, agent: str = "pi", directory: str | None = None,
                environ: Mapping[str, str] | None = None, home: str | None = None) -> str:
    """The path of :func:`target_of` (kept for callers that only show it).

    Raises:
        UnsafePathError: as :func:`target_of`.
    """
    return target_of(store, file, agent=agent, directory=directory, environ=environ, home=home).path



def restore(store: SessionStore, session_id: str, *, agent: str = "pi", directory: str | None = None,
            at: str | None = None, environ: Mapping[str, str] | None = None,
            home: str | None = None) -> RestoreResult:
    """Write a stored session into the agent's session folder (``sessiontree restore``).

    Args:
        store: where the session is.
        session_id: its full id.
        agent: ``"pi"`` or ``"atomic"`` (the folder and what it will not see).
        directory: a sessions folder to use instead of the agent's.
        at: an entry id: restore only the path root -> it, as a new session.
        environ, home: where to find the agent's folder (tests fake them).

    The file lands inside the agent's sessions folder (or ``directory``), whatever the
    session holds (:func:`target_of`, :func:`write_new`).

    Returns:
        A :class:`RestoreResult`: ``written``, or ``present`` when the target already
        holds these bytes (restoring twice is a no-op).

    Raises:
        RestoreError: the target cannot be written as asked; nothing was written.
        SessionNotFoundError, EntryNotFoundError, StorageError: from :func:`agent_file`.
    """
    file = agent_file(store, session_id, agent=agent, at=at)
    try:
        target = target_of(store, file, agent=agent, directory=directory, environ=environ, home=home)
    except UnsafePathError as exc:
        raise RestoreError(f"{exc}; nothing was written") from exc
    status = write_new(target, file.data)
    return RestoreResult(status, target.path, file)


def resume_command(store: SessionStore, session_id: str, cwd: str, *, agent: str = "pi", fork: bool = False,
                   read_states: Callable[[], Mapping[str, SyncState]] | None = None, own: str = "pi") -> str:
    """The shell command that continues a session, for showing (the viewer): the agent's own
    ``cd CWD && pi --session PATH`` when a file synced from the agent's folder is still
    at its path, else ``sessiontree resume ID`` (which restores the file first). Nothing
    is read but the sync states; nothing is written or started. Each word is quoted by
    :func:`~sessiontree.core.textsafe.shell_quote`: a cwd or path with control characters is
    written ``$'...'``, which the shell gives back byte for byte.

    Args:
        cwd: the session's working directory (its header's ``cwd``).
        read_states: reads the store's sync states (default ``store.sync_states``); the
            viewer passes one memoised read that :func:`agent_format` shares.
        own: the agent that wrote the session (its header's, :func:`session_agent`): for
            ``"claude-code"`` and ``"codex"`` the command is that agent's own
            (:func:`agent_resume_command`, in ``cwd``) when its file is in place.

    Raises:
        StorageError: the store could not be read.
    """
    for state in _states_of(store, session_id, read_states):
        # A cwd with a NUL names no folder: `sessiontree resume` says so, naming the field.
        if "\x00" in cwd + state.path or not os.path.isfile(state.path):
            continue
        if own in FOREIGN:
            if state.version != 0:
                continue
            try:
                command = shell_join(agent_resume_command(own, session_id, fork=fork))
            except ValueError:
                break  # `sessiontree resume` says why
            return f"cd {shell_quote(cwd)} && {command}" if cwd else command
        if state.version != 0:
            command = shell_join([agent, "--fork" if fork else "--session", state.path])
            return f"cd {shell_quote(cwd)} && {command}" if cwd else command
    return shell_join(["sessiontree", "resume", session_id] + (["--fork"] if fork else []))



# --------------------------------------------------------------------------- each agent's own file

#: The agents whose own files ``restore`` and ``resume`` give back verbatim (their recorded
#: records, ``export --format source``), and the folder layout each keeps (docs/agent-loop.md).
FOREIGN = ("claude-code", "codex")
#: Claude Code cuts a project folder name at this many characters (and adds a hash of its own).
CLAUDE_NAME_MAX = 200
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")


def session_agent(store: SessionStore, session_id: str) -> str:
    """The agent that wrote the session: ``"claude-code"`` or ``"codex"`` for a mapped file (its
    header's ``foreign.agent``), else ``"pi"`` (pi and Atomic write the same format).

    Raises:
        SessionNotFoundError, StorageError: the store could not give the header.
    """
    return agent_of_header(store.read_outline(session_id).header)


def claude_project_folder(cwd: str) -> str:
    """Claude Code's folder name of a working directory under ``projects/``: every character
    that is not an ASCII letter or digit becomes ``-`` (``/Users/alex/workspace/cli/.worktrees/2``
    -> ``-Users-alex-workspace-cli--worktrees-2``, as the real corpus shows; docs/agents/claude-code.md)."""
    return _NOT_ALNUM.sub("-", cwd)


def _claude_folder(root: str, cwd: str, session_id: str) -> str:
    """The project folder Claude Code uses for ``cwd``; a name past :data:`CLAUDE_NAME_MAX` is the
    folder Claude Code already made (found by its first 200 characters).

    Raises:
        UnsafePathError: no such folder for a long name, or a NUL in the cwd.
    """
    if "\x00" in cwd or not cwd:
        raise UnsafePathError(f"session {session_id}: header field \"cwd\" "
                              f"{'holds a NUL byte' if cwd else 'is empty'}; no Claude Code project folder "
                              "can be named after it")
    name = claude_project_folder(cwd)
    if len(name) <= CLAUDE_NAME_MAX:
        return name
    prefix = name[:CLAUDE_NAME_MAX] + "-"
    try:
        found = [entry for entry in os.listdir(root) if entry.startswith(prefix)]
    except OSError:
        found = []
    if len(found) != 1:
        raise UnsafePathError(f"session {session_id}: the cwd is longer than Claude Code's folder names "
                              f"({CLAUDE_NAME_MAX} characters) and no one folder of {root} matches it; run "
                              "claude once in that folder, then resume again")
    return found[0]


def _codex_parts(header: Mapping[str, Any], session_id: str) -> tuple[str, ...]:
    """Codex's place of a rollout: ``YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<id>.jsonl`` from
    the header's ``createdAt`` in the local time zone, as Codex names them
    (:func:`~sessiontree.sync.safepath.local_stamp`; the current time when it does not parse)."""
    stamp = local_stamp(header.get("createdAt") or header.get("timestamp"))
    day = stamp[:10]
    name = name_part(f"rollout-{stamp}-{name_part(session_id, 'session id')}.jsonl", "file name")
    return (day[:4], day[5:7], day[8:10], name)


def _foreign_root(agent: str, environ: Mapping[str, str] | None, home: str | None) -> str:
    for source in agent_sources(environ, home):
        if source.agent == agent:
            return source.path
    raise ValueError(f"unknown agent {agent!r}")


def _verify_source(data: bytes, state: SyncState) -> bool:
    """Whether ``data`` is the file ``state`` recorded: its size, the SHA-256 of its first line and
    of its last :data:`~sessiontree.sync.engine.TAIL_CHECK` bytes (what sync keeps of a mapped file)."""
    if len(data) != state.consumed:
        return False
    first = data.split(b"\n", 1)[0]
    return (hashlib.sha256(first).digest() == state.header_hash
            and hashlib.sha256(data[-TAIL_CHECK:]).digest() == state.tail_hash)


def source_file(store: SessionStore, session_id: str) -> AgentFile:
    """A Claude Code or Codex session as its agent's own file: the verbatim records the store kept
    (:func:`~sessiontree.format.foreign.source_bytes`, what ``export --format source`` writes).

    ``byte_exact`` when a sync state of the session agrees with the bytes (size, first line,
    last 4 KiB: :func:`_verify_source`), with ``source_path`` that file.

    Raises:
        RestoreError: not a mapped session, no verbatim records, or the records do not give
            back the file that was synced (nothing is written from them).
        SessionNotFoundError, StorageError: the store could not give the session.
    """
    stored = store.read(session_id)
    header = stored.header
    agent = agent_of_header(header)
    if agent not in FOREIGN:
        raise RestoreError(f"session {session_id} was written by pi or Atomic, not Claude Code or Codex")
    data = source_bytes(stored.entries)
    if not data:
        raise RestoreError(f"session {session_id} keeps no verbatim {agent} records; use restore --as pi")
    sha256 = hashlib.sha256(data).digest()
    states = [state for state in _states_of(store, session_id) if state.version == 0]
    cwd = str(header.get("cwd", ""))
    for state in states:
        if _verify_source(data, state):
            return AgentFile(session_id, data, sha256, True, state.path, dict(header), cwd)
    if states:
        raise RestoreError(f"the stored records of session {session_id} do not give back the file synced from "
                           f"{states[0].path} (size or hash differ); nothing was written (run sessiontree sync)")
    return AgentFile(session_id, data, sha256, False, None, dict(header), cwd,
                     [f"no sync record to verify against: the {agent} records are written as the store keeps them"])


def source_target(file: AgentFile, *, directory: str | None = None, environ: Mapping[str, str] | None = None,
                  home: str | None = None) -> Target:
    """Where :func:`restore_source` writes a Claude Code or Codex file: the path it was synced from
    when that lies inside the agent's folder, else the agent's own layout (Claude Code:
    ``projects/<encoded cwd>/<id>.jsonl``; Codex: ``sessions/YYYY/MM/DD/rollout-...-<id>.jsonl``).
    With ``directory``, the same layout under it (the file's recorded name kept).

    Raises:
        UnsafePathError: the id is no file name, the cwd names no folder.
    """
    agent = agent_of_header(file.header)
    root = (os.path.abspath(os.path.expanduser(directory)) if directory is not None
            else _foreign_root(agent, environ, home))
    if file.source_path:
        parts = _recorded_parts(_foreign_root(agent, environ, home), file.source_path)
        if parts is not None:
            return Target(root, parts)
    if agent == "claude-code":
        name = name_part(f"{name_part(file.session_id, 'session id')}.jsonl", "file name")
        return Target(root, (name_part(_claude_folder(root, file.cwd, file.session_id), "project folder"), name))
    return Target(root, _codex_parts(file.header, file.session_id))


def restore_source(store: SessionStore, session_id: str, *, directory: str | None = None,
                   environ: Mapping[str, str] | None = None, home: str | None = None) -> RestoreResult:
    """Give a Claude Code or Codex session back to its agent as the agent's own file (``resume``,
    ``restore`` of such a session; docs/agent-loop.md, "Each agent's own file").

    The file is the verbatim records (:func:`source_file`), verified against the sync record;
    it lands in the agent's folder through the same checks as every restore
    (:func:`source_target`, :func:`write_new`), and its SHA-256 is checked again once written.
    ``directory``: a folder to use instead of the agent's (its layout kept).
    A file already at the target is left as it is (``present``): the agent's own file wins,
    also when it grew since the sync.

    Raises:
        RestoreError: as :func:`source_file` and :func:`write_new`; nothing was written.
    """
    file = source_file(store, session_id)
    try:
        target = source_target(file, directory=directory, environ=environ, home=home)
    except UnsafePathError as exc:
        raise RestoreError(f"{exc}; nothing was written") from exc
    path = target.path
    try:
        st = os.lstat(path)
    except OSError:
        st = None
    if st is not None and stat.S_ISREG(st.st_mode):
        return RestoreResult("present", path, file)
    status = write_new(target, file.data)
    try:
        with open(path, "rb") as handle:
            written = hashlib.sha256(handle.read()).digest()
    except OSError as exc:
        raise RestoreError(f"cannot read back {path}: {exc.strerror}") from exc
    if status == "written" and written != file.sha256:
        raise RestoreError(f"{path} does not hold the bytes written (sha256 differs)")
    return RestoreResult(status, path, file)


def agent_resume_command(agent: str, session_id: str, *, fork: bool = False) -> list[str]:
    """The command with which ``agent`` continues a session by id, to run in its cwd:
    ``claude --resume ID`` (``--fork-session`` with ``fork``) or ``codex resume ID``.

    Raises:
        ValueError: ``fork`` for Codex (its resume continues the session itself), a Claude Code
            subagent's transcript (resumed through its session), or an agent that resumes by
            path (pi, Atomic: :func:`resume_command`).
    """
    if agent == "claude-code":
        if "-agent-" in session_id:
            # Our id of a subagent transcript (<session>-agent-<agent>, docs/agents/claude-code.md).
            raise ValueError(f"{session_id} is a Claude Code subagent's transcript: resume the session that "
                             f"started it ({session_id.split('-agent-', 1)[0]})")
        return ["claude", "--resume", session_id] + (["--fork-session"] if fork else [])
    if agent == "codex":
        if fork:
            raise ValueError("codex resume has no fork option: resume the session, or restore it --as pi and fork "
                             "it there")
        return ["codex", "resume", session_id]
    raise ValueError(f"{agent} resumes a session by its file, not its id")
