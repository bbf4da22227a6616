"""Where a JSONL store's files live in its directory (docs/rules/stores.md seed:file-location).

* New sessions are written flat, directly in the directory, under a name made
  from ``createdAt`` and the id's hash (:func:`file_name_for`, docs/rules/decisions.md D-7).
* Listings also find the files of one level of subdirectories: the agents'
  ``--<cwd>--/`` project folders (:func:`session_files_in`).
* ``sessiontree sync`` keeps its state log and lock file in the directory,
  under names that are never listed (:data:`SYNC_STATE_FILE`, :data:`SYNC_LOCK_FILE`).

Names are not identity: look-ups read headers and never parse names.
"""

from __future__ import annotations

import os
import re
import time
from datetime import UTC, datetime
from typing import Any

from sessiontree.core.tree import parse_timestamp_ms
from sessiontree.errors import StorageError
from sessiontree.format.files import FILE_SUFFIX
from sessiontree.format.ids import session_id_hash

__all__ = ["ARCHIVE_LOG_FILE", "FILE_SUFFIX", "PROVENANCE_FILE", "SYNC_LOCK_FILE", "SYNC_STATE_FILE", "file_name_for", "session_files_in"]

#: ``sessiontree sync`` state of a JSONL store, in its directory (not ``*.jsonl``: never listed).
SYNC_STATE_FILE = ".sessiontree-sync-state"
SYNC_LOCK_FILE = ".sessiontree-sync.lock"
#: ``sessiontree archive`` records (docs/agent-loop.md): one JSON line per write, the last
#: line of a ``(path, sha256)`` winning; written under :data:`SYNC_LOCK_FILE`.
ARCHIVE_LOG_FILE = ".sessiontree-archived"
#: Where each session came from (docs/sync.md, "Provenance"): one JSON line per record,
#: the *first* line of a session id winning; written under :data:`SYNC_LOCK_FILE`.
PROVENANCE_FILE = ".sessiontree-provenance"
_CANONICAL_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")


def _iso_ms(ms: float) -> str:
    moment = datetime.fromtimestamp(ms / 1000.0, tz=UTC)
    return (f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:"
            f"{moment.minute:02d}:{moment.second:02d}.{moment.microsecond // 1000:03d}Z")


def file_name_for(header: dict[str, Any]) -> str:
    """The file name of a new session (docs/rules/decisions.md D-7, docs/rules/format.md §3.4).

    ``createdAt`` in the canonical ``YYYY-MM-DDTHH:MM:SS.mmmZ`` form is used as
    it is; another parsable time is rendered in that form (UTC); a missing or
    unparsable one is replaced by the current time. ``:`` and ``.`` become ``-``.

    Returns:
        e.g. ``2024-12-03T14-00-00-000Z_0123456789abcdef.jsonl``.
    """
    created = header.get("createdAt")
    if isinstance(created, str) and _CANONICAL_TIME.fullmatch(created):
        stamp = created
    else:
        ms = parse_timestamp_ms(created)
        try:
            stamp = _iso_ms(ms if ms is not None else time.time() * 1000.0)
        except (OverflowError, OSError, ValueError):
            stamp = _iso_ms(time.time() * 1000.0)
    return stamp.replace(":", "-").replace(".", "-") + "_" + session_id_hash(header["id"]) + FILE_SUFFIX


def session_files_in(directory: str) -> list[str]:
    """Every ``*.jsonl`` regular file directly in ``directory`` or in one of its
    subdirectories (the agents' ``--<cwd>--/`` project folders), as absolute
    paths sorted by relative name.

    One level only, so a symbolic link loop cannot recurse; a subdirectory
    that cannot be read is passed over (its sessions are not listed), the
    directory itself must be readable. Hidden subdirectories are skipped.
    A missing directory holds no files.

    Raises:
        StorageError: ``directory`` exists but cannot be read.
    """
    try:
        with os.scandir(directory) as it:
            names = []
            subdirs = []
            for entry in it:
                if entry.name.endswith(FILE_SUFFIX) and entry.is_file():
                    names.append(entry.name)
                elif entry.is_dir() and not entry.name.startswith("."):
                    subdirs.append(entry.name)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise StorageError(f"cannot read the session directory {directory}: {exc}") from exc
    for sub in subdirs:
        try:
            with os.scandir(os.path.join(directory, sub)) as it:
                names.extend(os.path.join(sub, entry.name) for entry in it
                             if entry.name.endswith(FILE_SUFFIX) and entry.is_file())
        except OSError:
            continue  # unreadable project folder: what can be read is still listed
    return [os.path.join(directory, name) for name in sorted(names)]
