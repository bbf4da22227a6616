"""Helpers shared by several test modules (plain functions; fixtures live in conftest.py)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from sessiontree import errors
from sessiontree.core.projection import SessionProjection, build_session_projection
from sessiontree.format.codec import read_session_file
from sessiontree.session.manager import SessionManager
from sessiontree.stores import JsonlStore, MemoryStore, SqliteStore


def make_store(kind: str, tmp_path: Path) -> Any:
    """A new store of ``kind`` (``memory``, ``sqlite``, ``jsonl``) under ``tmp_path``: SQLite at
    ``<tmp>/db/sessions.db``, JSONL in ``<tmp>/sessions`` (the conformance ``store`` fixture's layout)."""
    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":
        return SqliteStore(tmp_path / "db" / "sessions.db")
    return JsonlStore(tmp_path / "sessions")


def ids_in(path: str) -> list[str]:
    """Entry ids of a session file, read (and validated) from disk."""
    return [e["id"] for e in read_session_file(path).entries]


def fds_to(prefix: str) -> list[str]:
    """Targets of this process's open descriptors that start with ``prefix``."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(prefix):
            out.append(target)
    return out


def wait_child(pid: int, seconds: float) -> int | None:
    """The forked child's wait status, or ``None`` (child killed) after ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def fresh_projection(manager: SessionManager) -> SessionProjection:
    """The projection built from scratch, with the trailing rule the manager applies."""
    return build_session_projection(manager.get_entries(), manager.get_leaf_id(),
                                    repair_trailing=manager._repair_trailing())


class FailingMemoryStore(MemoryStore):
    """A memory store whose writes raise ``StorageError`` while ``fail`` is set."""

    fail = False

    def append(self, session_id, entries):
        if self.fail:
            raise errors.StorageError("injected")
        return super().append(session_id, entries)

    def create(self, header, entries, *args, **kwargs):
        if self.fail:
            raise errors.StorageError("injected")
        return super().create(header, entries, *args, **kwargs)


def start_append_paused_in_write(store, session_id: str, entries: list[dict]):
    """Start ``store.append(session_id, entries)`` (a JSONL store) in a thread and return
    once it is inside its write, holding its locks.

    Returns:
        ``(worker, release)``: set ``release`` to let the write finish, then join ``worker``.
    """
    import threading

    import sessiontree.stores.jsonl.writes as jsonl_module

    inside, release = threading.Event(), threading.Event()
    real_write = jsonl_module._write_all

    def paused_write(fd, data):
        inside.set()
        release.wait(5)
        real_write(fd, data)

    jsonl_module._write_all = paused_write
    try:
        worker = threading.Thread(target=store.append, args=(session_id, entries))
        worker.start()
        assert inside.wait(5), "the append never reached its write"
    finally:
        jsonl_module._write_all = real_write  # the paused call keeps its own reference
    return worker, release


def field_paths(value: object, prefix: tuple = ()) -> list[tuple]:
    """Every path (keys and list indexes) to a value inside ``value``, outermost first."""
    paths: list[tuple] = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        paths.append((*prefix, key))
        paths.extend(field_paths(item, (*prefix, key)))
    return paths
