"""Deprecated: ``sessiontree.stores.sqlite_search`` moved to :mod:`sessiontree.stores.sqlite.search`; this name is kept for one release."""

import warnings as _warnings

from sessiontree.stores.sqlite.schema import (  # the steps moved to .schema
    m004_search_index,
    m005_search_pending,
    m008_search_branch,
)
from sessiontree.stores.sqlite.search import *  # noqa: F403
from sessiontree.stores.sqlite.search import __all__ as _moved

_warnings.warn("sessiontree.stores.sqlite_search is deprecated: import sessiontree.stores.sqlite.search", DeprecationWarning, stacklevel=2)

__all__ = [*_moved, "m004_search_index", "m005_search_pending", "m008_search_branch"]
