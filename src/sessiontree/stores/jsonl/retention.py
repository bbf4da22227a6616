"""Retention of a JSONL store (docs/team.md, "Retention"): holds and the deletion log are
two append-only logs of the store's directory, never listed (names not ``*.jsonl``):
:data:`HOLDS_FILE` (``{"sessionId", "held"}`` per line, the last line of an id winning)
and :data:`DELETION_LOG_FILE` (one line per deleted session: ids, counts, sizes). The
prune itself is :mod:`sessiontree.stores.retention`'s."""

from __future__ import annotations

import os
import time
from typing import Any

import orjson

from sessiontree.errors import StorageError
from sessiontree.stores.jsonl.files import JsonlFiles

__all__ = ["DELETION_LOG_FILE", "HOLDS_FILE", "JsonlHolds"]

#: Held sessions: one JSON line per hold or release.
HOLDS_FILE = ".sessiontree-holds"
#: What ``prune`` deleted: one JSON line per session.
DELETION_LOG_FILE = ".sessiontree-deletions"


class JsonlHolds:
    """Holds and the deletion log as two logs in the store's directory: the
    :class:`~sessiontree.stores.retention.HoldRecords` of a JSONL store."""

    def __init__(self, folder: JsonlFiles) -> None:
        self.folder = folder

    def _append_line(self, name: str, rows: list[dict[str, Any]]) -> None:
        self.folder.require_writable("retention record")
        path = os.path.join(self.folder.directory, name)
        data = b"".join(orjson.dumps(row) + b"\n" for row in rows)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        except OSError as exc:
            raise StorageError(f"cannot write {path}: {exc}") from exc

    def _read_lines(self, name: str) -> list[dict[str, Any]]:
        path = os.path.join(self.folder.directory, name)
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc}") from exc
        out = []
        for number, line in enumerate(data[:data.rfind(b"\n") + 1].split(b"\n")[:-1], 1):
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise StorageError(f"{path}, line {number}: not JSON ({exc})") from exc
            if isinstance(row, dict):
                out.append(row)
        return out

    def write_hold(self, session_id: str, held: bool) -> None:
        """Append a hold or release line (a release of a session not held writes nothing).

        Raises:
            StorageError: read-only, or the write failed."""
        if not held and session_id not in self.stored_holds():
            return  # nothing to release: no line written
        self._append_line(HOLDS_FILE, [{"sessionId": session_id, "held": held, "at": int(time.time() * 1000)}])

    def stored_holds(self) -> set[str]:
        """The held session ids: each session's last line decides."""
        state: dict[str, bool] = {}
        for row in self._read_lines(HOLDS_FILE):
            if isinstance(row.get("sessionId"), str):
                state[row["sessionId"]] = bool(row.get("held"))
        return {sid for sid, held in state.items() if held}

    def append_deletions(self, rows: list[dict[str, Any]]) -> None:
        """Append lines to the deletion log.

        Raises:
            StorageError: read-only, or the write failed."""
        self._append_line(DELETION_LOG_FILE, rows)

    def deletion_log(self) -> list[dict[str, Any]]:
        """The deletion log, oldest first. See :meth:`Retention.deletion_log`."""
        return self._read_lines(DELETION_LOG_FILE)
