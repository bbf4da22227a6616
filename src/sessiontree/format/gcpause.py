"""Pausing the cyclic garbage collector around allocation-heavy, cycle-free work.

Loading and projecting a session allocate one or more containers per entry
and create no reference cycles, so the collector's passes over the growing
heap find nothing to free (docs/decisions/gc-pause.md). Reference counting
still frees everything; only the cycle detector waits.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector for the ``with`` block; restore its previous state."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
