"""The JSONL store: one format-4 file per session in one directory.

:mod:`.store` is the store, assembled from one mixin per capability: :mod:`.files`
(finding a session's file, the descriptors kept between appends), :mod:`.reads`,
:mod:`.writes`, :mod:`.ledger` (sync states) and :mod:`.maintenance` (search, usage,
``verify``). :mod:`.layout` is where its files live (names of new files, project
folders, the sync state files). The file primitives it builds on (locks, atomic
rewrites) are :mod:`sessiontree.format.files`.

May import :mod:`sessiontree.stores.base`, the shared store helpers, and the
layers below the stores.
"""

from sessiontree.stores.jsonl.layout import FILE_SUFFIX as FILE_SUFFIX
from sessiontree.stores.jsonl.layout import file_name_for as file_name_for
from sessiontree.stores.jsonl.store import *  # noqa: F403
from sessiontree.stores.jsonl.store import __all__ as _store_all

__all__ = ["FILE_SUFFIX", "file_name_for", *_store_all]
