"""``sessiontree migrate``: upgrade one session file to format 4 in place.

The upgrade is atomic and happens under the file's exclusive lock, the one
every writer of a session file takes (:mod:`sessiontree.format.files`), with a
backup copy of the original bytes first (docs/rules/versions.md spec:versions).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sessiontree.format.codec import parse_session
from sessiontree.format.files import locked, read_all, replace_locked
from sessiontree.format.inputlimit import check_input_size

__all__ = ["MigrationResult", "migrate_file"]


@dataclass(frozen=True)
class MigrationResult:
    """Outcome of :func:`migrate_file`.

    Attributes:
        path: the file (absolute).
        from_version: the version the file declared (1 when absent).
        upgraded: False when the file already was canonical format 4 (left untouched).
        backup: the path of the backup copy, when one was written.
    """

    path: str
    from_version: int
    upgraded: bool
    backup: str | None = None


def migrate_file(path: str | os.PathLike[str], *, backup: bool = True) -> MigrationResult:
    """Upgrade one session file to format 4 in place, atomically
    (docs/rules/versions.md spec:versions, docs/rules/cli.md spec:cli ``migrate``).

    Under the file's exclusive lock (the one every writer of a session file
    takes), the file is read and parsed; if it is not already canonical
    format 4 its original bytes are first copied to ``<file>.bak`` (when
    ``backup``; ``<file>.bak.1``, ``.bak.2``, ... when that exists) and then
    the file is replaced by its format-4 form through a temporary file in the
    same directory, fsync and rename. A file that is
    already format 4 is not touched.

    Raises:
        FileNotFoundError: the file does not exist.
        InvalidSessionError, UnsupportedVersionError: the file is not a valid
            session (it is left untouched; ``check --repair`` can help), or is
            over the size limit of :mod:`sessiontree.format.inputlimit`.
        StorageError: the backup or the rewrite could not be written.
    """
    target = os.path.abspath(os.fspath(path))
    with locked(target, exclusive=True) as fd:
        check_input_size(os.fstat(fd).st_size, target)  # before reading (docs/stores.md, "Large files")
        data = read_all(fd)
        parsed = parse_session(data, target)
        if not parsed.upgraded:
            return MigrationResult(target, parsed.source_version, False)
        backup_path = None
        if backup:
            # Never overwrite an earlier backup: it may be the only copy of older bytes.
            backup_path = target + ".bak"
            number = 1
            while os.path.lexists(backup_path):
                backup_path = f"{target}.bak.{number}"
                number += 1
            replace_locked(backup_path, fd, data)
        replace_locked(target, fd, parsed.to_bytes())
    return MigrationResult(target, parsed.source_version, True, backup_path)
