"""What ``sync`` reported before: a file rejected, diverged or unfinished is reported once,
then set aside until it changes (docs/sync.md, "Quiet repeats").

A sync run from cron or a watch loop must not repeat the same complaints, nor fail,
on a home where nothing changed. The ledger keeps, per reported file, what was
reported (outcome, reason, line) and the file's ``stat`` signature (size,
``mtime_ns``, inode, device) at that moment. A later result with the same outcome,
reason and line for a file with the same signature is *set aside*
(:attr:`~sessiontree.sync.engine.FileResult.set_aside`): counted in the summary,
listed with ``--verbose``, not a failure. A file that changed, or a new reason, is
reported again; a file that syncs cleanly leaves the ledger. A symbolic link to a
folder that sync does not follow is noted once too, then counted quietly while it
points to the same place (:meth:`SetAsideLedger.sort_links`).

Where the ledger lives (it is not the store's data, and never read by anything but
the sync command's reporting):

* beside the run lock: ``<db>.sync-reported`` for a SQLite store,
  ``<dir>/.sessiontree-sync-reported`` in a JSONL store;
* a store without a run-lock file (PostgreSQL, whose sync states are per host):
  ``sync-reported-<16 hex of SHA-256 of the store URL and host>.json`` in the
  user's state folder (``platformdirs``), so each host remembers its own reports;
* a memory store: nowhere (each process starts empty).

An unreadable or damaged ledger counts as empty: everything is reported once more.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from typing import Any

import orjson

from sessiontree.format.outfile import write_atomic
from sessiontree.stores.base import SessionStore
from sessiontree.stores.traits import store_traits
from sessiontree.sync.results import FileResult
from sessiontree.sync.runlock import run_lock_path

__all__ = ["REPORTED", "SetAsideLedger", "ledger_path"]

#: Outcomes reported once and then set aside while the file stays the same.
REPORTED = ("rejected", "diverged", "in-progress")
_VERSION = 1


def ledger_path(store: SessionStore) -> str | None:
    """Where the ledger of ``store`` is kept (module docstring), or ``None`` (a memory store)."""
    lock = run_lock_path(store)
    if lock is not None:
        folder, name = os.path.split(lock)
        return os.path.join(folder, name.replace("-run.lock", "-reported").replace(".sync-lock", ".sync-reported"))
    url = store.url or ""
    if not url or not store_traits(store).persisted:
        return None  # nothing outlives the process (memory, an in-memory SQLite database)
    import socket  # only a store without a lock file beside it (PostgreSQL): not at start-up

    import platformdirs

    host = os.environ.get("SESSIONTREE_SYNC_HOST") or socket.gethostname()
    digest = hashlib.sha256(f"{url}\n{host}".encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return os.path.join(platformdirs.user_state_dir("sessiontree"), f"sync-reported-{digest}.json")


def _signature(path: str) -> list[int] | None:
    """``[size, mtime_ns, inode, device]`` of ``path``, or ``None`` (gone, not a file: a store's session)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        try:
            st = os.lstat(path)  # a dangling link is reported once too
        except (OSError, ValueError):
            return None
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev]


class SetAsideLedger:
    """The reports of earlier runs for one store (module docstring).

    Args:
        path: the ledger file (:func:`ledger_path`); ``None`` keeps it in memory only.
    """

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.files: dict[str, list[Any]] = {}
        #: Symbolic links to folders noted as not followed: link path -> where it pointed.
        self.links: dict[str, str] = {}
        #: The file's bytes as read: a run that leaves them the same does not write them again.
        self._read: bytes | None = None
        if path is None:
            return
        try:
            with open(path, "rb") as handle:
                self._read = handle.read()
            data = orjson.loads(self._read)
        except (OSError, ValueError):
            return  # none yet, or damaged: everything is reported once more
        ours = isinstance(data, dict) and data.get("version") == _VERSION
        files = data.get("files") if ours else None
        if isinstance(files, dict):
            self.files = {k: v for k, v in files.items() if isinstance(k, str) and isinstance(v, list)}
        links = data.get("links") if ours else None  # absent in a ledger written before 0.2.0
        if isinstance(links, dict):
            self.links = {k: v for k, v in links.items() if isinstance(k, str) and isinstance(v, str)}

    def sort_links(self, links: Iterable[str], *, strict: bool = False) -> list[str]:
        """The links among ``links`` (symbolic links to folders that sync did not follow) that
        an earlier run noted pointing where they point now: said once, then counted quietly
        (docs/sync.md, "Quiet repeats"). The ledger then holds this run's links only, so a
        link removed and made again is news. ``strict``: none is quiet (still remembered)."""
        seen: dict[str, str] = {}
        repeated = []
        for link in links:
            try:
                target = os.readlink(link)
            except (OSError, ValueError):
                target = ""
            if not strict and target and self.links.get(link) == target:
                repeated.append(link)
            seen[link] = target
        self.links = seen
        return repeated

    def sort(self, results: Iterable[FileResult], *, strict: bool = False) -> None:
        """Mark each result reported before for the same unchanged file as set aside, and
        remember this run's reports. ``strict``: mark nothing (every result is reported, as
        ``sync --strict`` wants), but still remember."""
        for result in results:
            if result.status not in REPORTED:
                self.files.pop(result.path, None)  # synced cleanly: a later problem is news again
                continue
            record = [result.status, result.reason, result.line, _signature(result.path)]
            if not strict and record[3] is not None and self.files.get(result.path) == record:
                result.set_aside = True
            self.files[result.path] = record

    def save(self) -> None:
        """Write the ledger (atomically), without the files that no longer exist.

        Raises:
            OSError: the folder cannot be written (the caller says so; the sync itself is done).
        """
        if self.path is None:
            return
        kept = {path: record for path, record in self.files.items() if os.path.lexists(path)}
        data = orjson.dumps({"version": _VERSION, "files": kept, "links": self.links})
        if data == self._read:
            return  # what the file holds (a quiet repeat): no temporary file, no fsync
        folder = os.path.dirname(self.path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        write_atomic(self.path, data)
        self._read = data
