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
* **Nothing is overwritten.** The file is written to a temporary file beside
  the target, fsynced, then linked to the target name (``link`` fails when
  the name exists, so a file that appears meanwhile is never replaced). A
  target that exists with the same bytes is a no-op; with other bytes, a
  symbolic link, or an unwritable folder, one clear error and nothing left behind.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shlex
import stat
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sessiontree.core.tree import SessionTree
from sessiontree.errors import SessionError, StorageError
from sessiontree.format import jsonio
from sessiontree.format.files import O_CLOEXEC, fsync_dir, write_all
from sessiontree.format.ids import new_session_id
from sessiontree.format.shape import FileShape, ShapeError, render_shape
from sessiontree.session.builders import branched_session_entries, now_iso
from sessiontree.stores.base import RawTexts, SessionStore, SessionTexts, SyncState
from sessiontree.stores.shared import ROLE_HEAD
from sessiontree.sync.sources import AGENTS, agent_sources

__all__ = [
    "UNSEEN",
    "AgentFile",
    "RestoreError",
    "RestoreResult",
    "agent_file",
    "agent_file_name",
    "encode_cwd",
    "restore",
    "resume_command",
    "sessions_folder",
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


class RestoreError(SessionError):
    """A restore that cannot be done as asked (target exists with other bytes, a symbolic
    link, a folder that cannot be written, a full disk); nothing was written."""


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


def encode_cwd(cwd: str) -> str:
    """The folder name pi and Atomic give a working directory: ``--<cwd>--`` with one
    leading separator removed and every ``/``, ``\\`` and ``:`` replaced by ``-``."""
    body = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    for char in "/\\:":
        body = body.replace(char, "-")
    return f"--{body}--"


def agent_file_name(header: Mapping[str, Any]) -> str:
    """The agent's name for a session file: ``<timestamp>_<id>.jsonl``, the header
    timestamp (``timestamp`` or ``createdAt``) with ``:`` and ``.`` replaced by ``-``."""
    stamp = header.get("timestamp") or header.get("createdAt") or now_iso()
    return f"{str(stamp).replace(':', '-').replace('.', '-')}_{header['id']}.jsonl"


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
    for key in ("internal", "workflow"):
        if key in header:
            out[key] = header[key]
    return out


def _unseen(agent: str, types: Sequence[str], texts: Sequence[bytes]) -> list[str]:
    """One note per entry kind the agent will not see, with how many entries, in the
    order each kind first occurs.

    ``types[i]`` and ``texts[i]`` are entry ``i``'s type and stored text. Kinds are
    counted from the types; a message's role (``message:<role>``) is looked up only
    when the agent's rules name a role, from the head of its text
    (:data:`~sessiontree.stores.shared.ROLE_HEAD`, the skeleton reads' rule) or, when
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


def target_path(store: SessionStore, file: AgentFile, *, agent: str = "pi", directory: str | None = None,
                environ: Mapping[str, str] | None = None, home: str | None = None) -> str:
    """Where :func:`restore` writes ``file`` (docs/agent-loop.md, "Where"):

    * a file archived from the agent's folder goes back to its original path;
    * a synced file to the path it was synced from;
    * anything else to ``<sessions folder>/--<cwd>--/<timestamp>_<id>.jsonl``;

    with ``directory``, the same file name under ``directory/--<cwd>--/``.
    """
    original = _archived_path(store, file.session_id, file.sha256) if file.byte_exact else None
    original = original or file.source_path
    name = os.path.basename(original) if original else agent_file_name(file.header)
    if directory is not None:
        return os.path.join(os.path.abspath(os.path.expanduser(directory)), encode_cwd(file.cwd), name)
    if original:
        return original
    return os.path.join(sessions_folder(agent, environ, home), encode_cwd(file.cwd), name)


def _same_bytes(path: str, data: bytes) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(len(data) + 1) == data
    except OSError:
        return False


def write_new(path: str, data: bytes) -> str:
    """Write ``data`` as a new file at ``path``; ``"written"``, or ``"present"`` when the
    file is already there with these exact bytes.

    A temporary file beside the target is written, fsynced and hard-linked to the
    target name (never replacing anything), then removed; the folder is fsynced.

    Raises:
        RestoreError: the target exists with other bytes or is not a regular file, is a
            symbolic link, its folder cannot be created or written, the disk is full.
    """
    folder = os.path.dirname(path)
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        st = None  # a file where a folder should be: creating the folder says so below
    except OSError as exc:
        raise RestoreError(f"cannot look at {path}: {exc.strerror}") from exc
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise RestoreError(f"{path} is a symbolic link; nothing was written (remove it or restore with --dir)")
        if not stat.S_ISREG(st.st_mode):
            raise RestoreError(f"{path} exists and is not a regular file; nothing was written")
        if _same_bytes(path, data):
            return "present"
        raise RestoreError(f"{path} exists with other bytes; nothing was written (the agent may have written to it "
                           "since: run sessiontree sync, or restore with --dir or --at)")
    try:
        os.makedirs(folder, exist_ok=True)
    except FileExistsError as exc:
        raise RestoreError(f"cannot create the folder {folder}: a file is in the way; nothing was written") from exc
    except OSError as exc:
        raise RestoreError(f"cannot create the folder {folder}: {exc.strerror}; nothing was written") from exc
    tmp = os.path.join(folder, f".{os.path.basename(path)}.restore-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_CLOEXEC, 0o644)
    except OSError as exc:
        raise RestoreError(f"cannot write in {folder}: {exc.strerror}; nothing was written") from exc
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            if _same_bytes(path, data):
                return "present"
            raise RestoreError(f"{path} appeared meanwhile with other bytes; nothing was written") from None
        try:
            fsync_dir(folder)
        except StorageError:
            pass  # the file is complete and linked; only its durability across a power cut is weaker
        return "written"
    except OSError as exc:
        what = "the disk is full" if exc.errno == errno.ENOSPC else exc.strerror
        raise RestoreError(f"cannot write {path}: {what}; nothing was written") from exc
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


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

    Returns:
        A :class:`RestoreResult`: ``written``, or ``present`` when the target already
        holds these bytes (restoring twice is a no-op).

    Raises:
        RestoreError: the target cannot be written as asked; nothing was written.
        SessionNotFoundError, EntryNotFoundError, StorageError: from :func:`agent_file`.
    """
    file = agent_file(store, session_id, agent=agent, at=at)
    path = target_path(store, file, agent=agent, directory=directory, environ=environ, home=home)
    status = write_new(path, file.data)
    return RestoreResult(status, path, file)


def resume_command(store: SessionStore, session_id: str, cwd: str, *, agent: str = "pi", fork: bool = False,
                   read_states: Callable[[], Mapping[str, SyncState]] | None = None) -> str:
    """The shell command that continues a session, for showing (the viewer): the agent's own
    ``cd CWD && pi --session PATH`` when a file synced from the agent's folder is still
    at its path, else ``sessiontree resume ID`` (which restores the file first). Nothing
    is read but the sync states; nothing is written or started.

    Args:
        cwd: the session's working directory (its header's ``cwd``).
        read_states: reads the store's sync states (default ``store.sync_states``); the
            viewer passes one memoised read that :func:`agent_format` shares.

    Raises:
        StorageError: the store could not be read.
    """
    for state in _states_of(store, session_id, read_states):
        if os.path.isfile(state.path):
            command = shlex.join([agent, "--fork" if fork else "--session", state.path])
            return f"cd {shlex.quote(cwd)} && {command}" if cwd else command
    return shlex.join(["sessiontree", "resume", session_id] + (["--fork"] if fork else []))

