"""The JSONL store: one format-4 file per session in one directory.

May import :mod:`sessiontree.stores.base`, the shared store helpers, and the
layers below the stores.
"""

from sessiontree.stores.jsonl.store import *  # noqa: F403
from sessiontree.stores.jsonl.store import __all__ as __all__
