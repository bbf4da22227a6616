"""``JsonlStore``: one format-4 JSONL file per session in one directory
(docs/rules/stores.md seed:file-location, spec:stores).

Invariants:

* **Names are not identity.** New files are named ``<createdAt with ':' and
  '.' replaced by '-'>_<session_id_hash(id)>.jsonl`` (docs/rules/decisions.md D-7), directly in the
  directory; an odd or missing ``createdAt`` is normalized or replaced by the
  current time so the name always has that shape. Lookups by id read headers
  (:func:`~sessiontree.format.read_header_file`) and never parse names; an
  id -> path cache is checked against the file's header and rebuilt by a
  directory scan on a miss. Where files live: :mod:`sessiontree.stores.jsonl.layout`.
* **Every write holds the file lock**: an exclusive ``fcntl.flock`` on the
  session file itself. After locking, the descriptor's inode is compared
  with the path's, so a writer that waited while another process replaced or
  deleted the file retries on the new file (or finds the session gone)
  instead of writing to an unlinked inode. Readers take a shared lock, so
  they never see half an append.
* **Appends are all or nothing**: one ``write`` of every new line, then
  ``fsync``. A file whose last byte is not ``\\n`` gets one first, in the same
  write (docs/rules/format.md D.9); a torn last record is refused, not buried. If
  anything fails, the file is truncated back to its previous size and
  :class:`~sessiontree.errors.StorageError` is raised with the OS error as
  ``__cause__`` (docs/rules/format.md E.5); if the truncation fails too, the error says so and
  carries both (``rollback_error``).
* **Rewrites are atomic**: upgrades of older formats found by ``load`` (docs/rules/decisions.md D-9),
  ``replace_header`` and new files are written to ``<file>.tmp-<pid>-<random>``
  in the same directory, fsynced, then renamed over (or hard-linked to) the
  target; the temporary file never survives a failure the writer lives
  through (docs/rules/format.md E.13). A writer holds an exclusive ``flock`` on its temporary file
  from the moment it creates it until it is renamed or removed, so a temp
  file nobody holds is stale: its writer was killed. Such files are removed
  when the store is opened for writing and before each rewrite of their
  target, under their own lock (see :func:`sessiontree.format.files.remove_if_stale`); they are never
  listed, and a read-only store never removes anything.
* **Reading never writes**: listing, header look-ups, ``find_most_recent`` and
  :func:`read_file` parse in memory only (docs/rules/versions.md seed:session-version,
  docs/rules/decisions.md D-9).
* ``delete`` moves every file whose header has the id to the platform trash
  (``send2trash``) and unlinks it where there is no usable trash (docs/rules/stores.md spec:stores).

Locking uses ``fcntl`` and so protects writers on POSIX systems; elsewhere
the store works without cross-process locking. The locks, reads and atomic
rewrites themselves are :mod:`sessiontree.format.files`; upgrading a file in
place by command (``sessiontree migrate``) is :mod:`sessiontree.format.migrate`.

The store is composed, not chained (docs/architecture.md, "The store seam"): it opens one
:class:`~.files.JsonlFiles` (the folder: finding a session's file, the descriptors kept
between appends, the after-fork hook, ``close``) and hands it to its parts, each in its
own module and each using only the folder's public members: :mod:`.reads` (``StoreCore``
reads), :mod:`.writes` (``StoreCore`` writes, and ``load`` with its upgrade on open),
:mod:`.ledger` (``SyncLedger``), :mod:`.maintenance` (``DerivedData``, search, usage,
``verify``, stale temporary files) and :mod:`.retention` (holds and the deletion log; the
prune is :mod:`sessiontree.stores.retention`'s). The partial reads are the generic ones of
:class:`~sessiontree.stores.fallbacks.StoreBase`, over this store's public ``load``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from sessiontree.core.search import SearchHit
from sessiontree.core.usage import UsageQuery, UsageRows
from sessiontree.format.codec import ParsedSession
from sessiontree.stores import retention
from sessiontree.stores.base import (
    ArchivedFile,
    CancelEvent,
    ProgressCallback,
    Provenance,
    PruneRecord,
    SessionListing,
    StoreProblem,
    SyncChange,
    SyncState,
    TimeBound,
)
from sessiontree.stores.fallbacks import StoreBase
from sessiontree.stores.jsonl.files import JsonlFiles
from sessiontree.stores.jsonl.layout import file_name_for as file_name_for  # callers import it from here too
from sessiontree.stores.jsonl.ledger import JsonlLedger
from sessiontree.stores.jsonl.maintenance import JsonlMaintenance
from sessiontree.stores.jsonl.reads import JsonlReads, read_file
from sessiontree.stores.jsonl.retention import JsonlHolds
from sessiontree.stores.jsonl.writes import JsonlWrites
from sessiontree.stores.traits import StoreTraits

__all__ = ["JsonlStore", "read_file"]


class JsonlStore(StoreBase):
    """A :class:`~sessiontree.stores.base.SessionStore` over a directory of JSONL files.

    Args:
        directory: where the session files live (created when missing).
        create: with ``False``, a missing directory raises ``StoreOpenError``
            instead of being created (read-only tools).
        readonly: never write anything: the directory is not created, stale
            temporary files are left alone, :meth:`load` upgrades older files
            in memory only (like :meth:`read`), and every write raises
            ``StorageError``. Implies ``create=False``.
        fsync: ``True`` (default): an append returns once its bytes are on
            disk (they survive a power loss). ``False`` (opt-in): once they are
            in the operating system's cache (they survive a crash of the
            process, not of the machine), the durability of the original
            agent's appends, which never fsync. Rewrites always fsync.

    Attributes:
        url: ``jsonl:///`` + the absolute directory (four slashes for ``/...``).
        kind: ``"jsonl"``.
        directory: the absolute directory.
        readonly: whether the store was opened read-only.

    A writable open removes stale temporary files that killed writers left in
    the directory (:meth:`remove_stale_temps`).

    Raises:
        StoreOpenError: the directory cannot be created or is not a directory.
    """

    kind = "jsonl"

    def traits(self) -> StoreTraits:
        """JSONL's traits (docs/decisions/store-traits.md): a load may persist a format upgrade
        (docs/rules/decisions.md D-9); the sync run lock is a file inside the folder, which
        is the store's own folder (``sync`` leaves it out); no store-wide change file (each
        session has its own, ``location``)."""
        return StoreTraits(loads_may_write=True, partial_reads=self.partial_reads,
                           run_lock_path=os.path.join(self.directory, ".sessiontree-sync-run.lock"),
                           own_folder=self.directory)

    def __init__(self, directory: str | os.PathLike[str], *, create: bool = True, fsync: bool = True,
                 readonly: bool = False) -> None:
        #: The open folder the parts share.
        self.folder = JsonlFiles(os.fspath(directory), create=create, fsync=fsync, readonly=readonly)
        self.directory, self.fsync, self.readonly, self.url = (self.folder.directory, fsync, readonly,
                                                              self.folder.url)
        self._reads = JsonlReads(self.folder)
        self._writes = JsonlWrites(self.folder, self._reads)
        self._ledger = JsonlLedger(self.folder, self._writes)
        self._maintenance = JsonlMaintenance(self.folder, self._reads)
        self._holds = JsonlHolds(self.folder)
        if not readonly:
            self.remove_stale_temps()

    def __repr__(self) -> str:
        return f"JsonlStore({self.directory!r})"

    def close(self) -> None:
        """Drop cached look-ups and close kept descriptors. Idempotent; the store stays usable."""
        self.folder.close()

    # -- Retention (sessiontree.stores.retention over this store and its holds part) --------

    def prune(self, older_than_ms: float, *, agent: str | None = None, dry_run: bool = False,
              everyone: bool = False) -> list[PruneRecord]:
        """See :func:`sessiontree.stores.retention.prune` (``everyone`` changes nothing here:
        every session of a JSONL store is its user's)."""
        return retention.prune(self, self._holds, older_than_ms, agent=agent, dry_run=dry_run)

    def set_hold(self, session_id: str, held: bool) -> bool:
        """See :func:`sessiontree.stores.retention.set_hold`."""
        return retention.set_hold(self, self._holds, session_id, held)

    def holds(self) -> list[str]:
        """See :func:`sessiontree.stores.retention.holds`."""
        return retention.holds(self, self._holds)

    # -- JsonlReads (reads) ------------------------------------------

    def read(self, session_id: str) -> ParsedSession:
        """See :meth:`JsonlReads.read`."""
        return self._reads.read(session_id)

    def path_for(self, header: dict[str, Any]) -> str:
        """See :meth:`JsonlReads.path_for`."""
        return self._reads.path_for(header)

    def exists(self, session_id: str) -> bool:
        """See :meth:`JsonlReads.exists`."""
        return self._reads.exists(session_id)

    def session_ids(self) -> list[str]:
        """See :meth:`JsonlReads.session_ids`."""
        return self._reads.session_ids()

    def location(self, session_id: str) -> str | None:
        """See :meth:`JsonlReads.location`."""
        return self._reads.location(session_id)

    def list_sessions(self, *, cwd: str | None = None, include_internal: bool = False,
                      on_progress: ProgressCallback | None = None,
                      cancel: CancelEvent | None = None) -> SessionListing:
        """See :meth:`JsonlReads.list_sessions`."""
        return self._reads.list_sessions(cwd=cwd, include_internal=include_internal, on_progress=on_progress, cancel=cancel)

    def find_most_recent(self, cwd: str | None = None, include_internal: bool = False) -> str | None:
        """See :meth:`JsonlReads.find_most_recent`."""
        return self._reads.find_most_recent(cwd, include_internal)

    # -- JsonlWrites (writes) ----------------------------------------

    def create(self, header: dict[str, Any], entries: Sequence[dict[str, Any]] = (),
               raw: Sequence[bytes | None] | None = None, *, path: str | None = None) -> None:
        """See :meth:`JsonlWrites.create`."""
        return self._writes.create(header, entries, raw, path=path)

    def append(self, session_id: str, entries: Sequence[dict[str, Any]],
               raw: Sequence[bytes | None] | None = None) -> None:
        """See :meth:`JsonlWrites.append`."""
        return self._writes.append(session_id, entries, raw)

    def replace_header(self, session_id: str, header: dict[str, Any]) -> None:
        """See :meth:`JsonlWrites.replace_header`."""
        return self._writes.replace_header(session_id, header)

    def replace_session(self, header: dict[str, Any], entries: Sequence[dict[str, Any]],
                        raw: Sequence[bytes | None] | None = None) -> None:
        """See :meth:`JsonlWrites.replace_session`."""
        return self._writes.replace_session(header, entries, raw)

    def delete(self, session_id: str) -> None:
        """See :meth:`JsonlWrites.delete`."""
        return self._writes.delete(session_id)

    def load(self, session_id: str, *, keep_raw: bool = True) -> ParsedSession:
        """See :meth:`JsonlWrites.load`."""
        return self._writes.load(session_id, keep_raw=keep_raw)

    def open_path(self, path: str | os.PathLike[str]) -> ParsedSession | None:
        """See :meth:`JsonlWrites.open_path`."""
        return self._writes.open_path(path)

    # -- JsonlLedger (ledger) ----------------------------------------

    def sync_states(self) -> dict[str, SyncState]:
        """See :meth:`JsonlLedger.sync_states`."""
        return self._ledger.sync_states()

    def sync_commit(self, expect: SyncState | None, state: SyncState, change: SyncChange) -> None:
        """See :meth:`JsonlLedger.sync_commit`."""
        return self._ledger.sync_commit(expect, state, change)

    def sync_shape(self, path: str) -> bytes | None:
        """See :meth:`JsonlLedger.sync_shape`."""
        return self._ledger.sync_shape(path)

    def archived_files(self) -> list[ArchivedFile]:
        """See :meth:`JsonlLedger.archived_files`."""
        return self._ledger.archived_files()

    def record_archived(self, record: ArchivedFile) -> None:
        """See :meth:`JsonlLedger.record_archived`."""
        return self._ledger.record_archived(record)

    def provenances(self) -> dict[str, Provenance]:
        """See :meth:`JsonlLedger.provenances`."""
        return self._ledger.provenances()

    def record_provenance(self, records: Sequence[Provenance]) -> None:
        """See :meth:`JsonlLedger.record_provenance`."""
        return self._ledger.record_provenance(records)

    # -- JsonlMaintenance (maintenance) ------------------------------

    def remove_stale_temps(self) -> int:
        """See :meth:`JsonlMaintenance.remove_stale_temps`."""
        return self._maintenance.remove_stale_temps()

    def search(self, query: str, *, cwd: str | None = None, roles: Iterable[str] | None = None,
               since: TimeBound | None = None, until: TimeBound | None = None, session: str | None = None,
               limit: int | None = 50) -> list[SearchHit]:
        """See :meth:`JsonlMaintenance.search`."""
        return self._maintenance.search(query, cwd=cwd, roles=roles, since=since, until=until, session=session, limit=limit)

    def reindex(self, session_id: str | None = None) -> int:
        """See :meth:`JsonlMaintenance.reindex`."""
        return self._maintenance.reindex(session_id)

    def usage(self, query: UsageQuery | None = None) -> UsageRows:
        """See :meth:`JsonlMaintenance.usage`."""
        return self._maintenance.usage(query)

    def verify(self, on_progress: ProgressCallback | None = None) -> list[StoreProblem]:
        """See :meth:`JsonlMaintenance.verify`."""
        return self._maintenance.verify(on_progress)

    # -- JsonlHolds (retention) --------------------------------------

    def deletion_log(self) -> list[dict[str, Any]]:
        """See :meth:`JsonlHolds.deletion_log`."""
        return self._holds.deletion_log()
