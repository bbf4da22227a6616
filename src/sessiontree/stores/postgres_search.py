"""Deprecated: ``sessiontree.stores.postgres_search`` moved to :mod:`sessiontree.stores.postgres.search`; this name is kept for one release."""

import warnings as _warnings

from sessiontree.stores.postgres.schema import m003_search_index  # the steps moved to .schema
from sessiontree.stores.postgres.search import *  # noqa: F403
from sessiontree.stores.postgres.search import __all__ as _moved

_warnings.warn("sessiontree.stores.postgres_search is deprecated: import sessiontree.stores.postgres.search", DeprecationWarning, stacklevel=2)

__all__ = [*_moved, "m003_search_index"]
