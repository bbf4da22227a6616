"""Keep a store in step with the agents' own session folders (``sessiontree sync``).

Each source file ends in exactly one outcome (docs/sync.md):

* ``new``: its session id is not stored: imported as ``import`` does (id,
  header and every entry's bytes kept, older formats upgraded in memory);
* ``grown``: what is stored from it is a prefix of its entries (same ids,
  same bytes): only the new entries are appended, in one transaction;
* ``unchanged``: size, mtime, inode and device equal the recorded state: the
  file is not even opened;
* ``in-progress``: its last line has no newline and is not a complete record
  yet (an agent is writing it): that line is left for the next run, the
  complete records before it are synced;
* ``diverged``: the file no longer extends what is stored (an agent rewrote
  it with new ids, someone edited it): reported with the first differing
  entry, the stored session untouched; with ``replace`` the stored session
  becomes the file's content atomically (``replaced``), entries that exist
  only in the store re-appended or reported as dropped;
* ``rejected``: not a session, unreadable, invalid, vanished: a reason (with
  the file line where there is one); the other files go on.

Invariants:

* **Per-file state lives in the store** (:class:`~sessiontree.stores.base.SyncState`:
  path, size, mtime_ns, inode, bytes consumed, hashes of the header line and
  of the last consumed bytes) and is written in the same commit as the
  entries it accounts for, with a compare-and-set on the previous state
  (:meth:`~sessiontree.stores.base.SessionStore.sync_commit`): two sync
  processes cannot append the same entries twice.
* **A grown file is read from its consumed offset.** The appended bytes are
  trusted only while the inode is the same, the file is not shorter, and the
  header line and the last consumed bytes hash as recorded; anything else
  (and every format-1 file, whose entry ids depend on the whole file) is
  read whole and compared entry by entry. New lines are parsed by the
  library's own reader (:func:`~sessiontree.format.parse_session` over the
  header line plus the new lines), so every format rule applies to them.
* **Other agents' files** (Claude Code, Codex; docs/agents/README.md) are
  recognised by their first record and read through their mapping
  (:mod:`sessiontree.format.foreign`), always whole (state ``version`` 0),
  with no shape recorded: ``restore`` is for pi and Atomic, such a session
  is given back with ``export --format source``.
* **Nothing is partial.** A session is created, appended to or replaced in
  one atomic store write, or not at all; a file that fails half-way leaves
  the store as it was.

The work is split by job (docs/architecture.md): :mod:`.discovery` finds the files,
:mod:`.reading` reads one (its complete prefix, hashes, which agent wrote it, its
state), :mod:`.comparison` compares it with the stored session, :mod:`.syncer` decides
and writes each outcome, :mod:`.runlock` holds one sync per store and watches folders,
:mod:`.results` is what a run reports. This module names them in one place, the API
``sessiontree.sync`` re-exports.
"""

from __future__ import annotations

from sessiontree.sync.discovery import discover
from sessiontree.sync.reading import TAIL_CHECK, opened_files
from sessiontree.sync.results import STATUSES, FileResult, SyncReport
from sessiontree.sync.runlock import run_lock, run_lock_path, watch
from sessiontree.sync.syncer import Syncer

__all__ = [
    "STATUSES",
    "TAIL_CHECK",
    "FileResult",
    "SyncReport",
    "Syncer",
    "discover",
    "opened_files",
    "run_lock",
    "run_lock_path",
    "watch",
]
