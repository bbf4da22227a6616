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

The class is assembled from one mixin per capability of the store protocol
(:mod:`sessiontree.stores.base`), each in its own module: :mod:`.files` (finding a
session's file, the descriptors kept between appends, the after-fork hook,
``close``), :mod:`.reads` (``StoreCore`` reads), :mod:`.writes` (``StoreCore``
writes, and ``load`` with its upgrade on open), :mod:`.ledger` (``SyncLedger``) and
:mod:`.maintenance` (``DerivedData``, search, usage, ``verify``, stale temporary
files). This module opens the store (``__init__``) and re-exports the public names.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from typing import Any

from sessiontree.errors import StoreOpenError
from sessiontree.stores.base import SyncState
from sessiontree.stores.jsonl.files import LIVE_STORES, HeldFile, close_held
from sessiontree.stores.jsonl.layout import file_name_for as file_name_for  # callers import it from here too
from sessiontree.stores.jsonl.ledger import JsonlLedger
from sessiontree.stores.jsonl.maintenance import JsonlMaintenance
from sessiontree.stores.jsonl.reads import JsonlReads, read_file
from sessiontree.stores.jsonl.retention import JsonlRetention
from sessiontree.stores.jsonl.writes import JsonlWrites
from sessiontree.stores.shared import StoreBase
from sessiontree.stores.traits import StoreTraits

__all__ = ["JsonlStore", "read_file"]


class JsonlStore(JsonlRetention, JsonlLedger, JsonlWrites, JsonlMaintenance, JsonlReads, StoreBase):
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
        self.directory = os.path.abspath(os.fspath(directory))
        self.fsync = fsync
        self.readonly = readonly
        self.url = "jsonl:///" + self.directory
        if (readonly or not create) and not os.path.isdir(self.directory):
            # Read-only callers: a mistyped path must not look like an empty store.
            raise StoreOpenError(f"no session directory at {self.directory}")
        if not readonly:
            try:
                os.makedirs(self.directory, exist_ok=True)
            except OSError as exc:
                raise StoreOpenError(f"cannot create the session directory {self.directory}: {exc}") from exc
        if not os.path.isdir(self.directory):
            raise StoreOpenError(f"{self.directory} is not a directory")
        self._mutex = threading.RLock()
        #: session id -> file, checked against the file's header before use.
        self._paths: dict[str, str] = {}
        #: file -> (dev, inode, size, entry ids): the duplicate-id guard of append.
        self._ids: dict[str, tuple[int, int, int, set[str]]] = {}
        #: file -> (stat signature, header or None): header reads skipped for unchanged files.
        self._headers: dict[str, tuple[tuple[int, int, int, int], dict[str, Any] | None]] = {}
        #: file -> descriptor kept open (O_APPEND) after an append by this store, so
        #: the next append of the session skips open, checks and close (_append_held).
        self._held: OrderedDict[str, HeldFile] = OrderedDict()
        self._held_lock = threading.Lock()
        #: The sync state log as last read: states by path, (dev, inode, bytes read), lines read.
        self._sync_cache: dict[str, SyncState] = {}
        self._sync_seen: tuple[int, int, int] = (0, 0, 0)
        self._sync_lines = 0
        weakref.finalize(self, close_held, self._held)
        LIVE_STORES.add(self)
        if not readonly:
            self.remove_stale_temps()

    def __repr__(self) -> str:
        return f"JsonlStore({self.directory!r})"
