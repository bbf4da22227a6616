"""The size limit on one session file read whole by ``import``, ``sync``, ``check`` and ``migrate``.

Those commands read a file into memory, parse every record and keep each
record's bytes: measured peaks are 4-6 times the file's size (docs/stores.md,
"Large files"). Rather than take a machine's memory by surprise, a file above
:data:`DEFAULT_MAX_FILE_MB` MiB is refused with one line saying so, before it
is read. ``$SESSIONTREE_MAX_FILE_MB`` sets another limit (``0``: none).
"""

from __future__ import annotations

import os

from sessiontree.errors import InvalidSessionError

__all__ = ["DEFAULT_MAX_FILE_MB", "ENV_VAR", "check_input_size", "max_file_bytes"]

#: The default limit, in MiB (2**20 bytes).
DEFAULT_MAX_FILE_MB = 512
#: The environment variable that overrides it (whole MiB; 0 turns the limit off).
ENV_VAR = "SESSIONTREE_MAX_FILE_MB"


def max_file_bytes() -> int | None:
    """The limit in bytes, read from :data:`ENV_VAR` at each call; ``None`` when off.
    A value that is not a whole number ``>= 0`` is ignored (the default applies)."""
    value = os.environ.get(ENV_VAR, "").strip()
    megabytes = int(value) if value.isdigit() else DEFAULT_MAX_FILE_MB
    return None if megabytes == 0 else megabytes * 1024 * 1024


def _size(count: int) -> str:
    return f"{count / 2**30:.1f} GiB" if count >= 2**30 else f"{count / 2**20:.0f} MiB"


def check_input_size(size: int, path: str) -> None:
    """Refuse a file of ``size`` bytes over the limit, before it is read.

    Args:
        size: the file's size (``st_size``), or the bytes about to be read of it
            (the grown part of a file that sync reads alone).
        path: the file, for the message.

    Raises:
        InvalidSessionError: ``size`` is over :func:`max_file_bytes`; the reason names
            the size, the limit and how to raise it.
    """
    limit = max_file_bytes()
    if limit is not None and size > limit:
        raise InvalidSessionError(
            f"too large: {_size(size)}, over the {_size(limit)} limit on one session file "
            f"(it would take about 5x that in memory); set {ENV_VAR} to raise the limit", path)
