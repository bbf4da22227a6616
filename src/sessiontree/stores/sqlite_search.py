"""Deprecated: ``sessiontree.stores.sqlite_search`` moved to :mod:`sessiontree.stores.sqlite.search`; this name is kept for one release."""

import warnings as _warnings

from sessiontree.stores.sqlite.search import *  # noqa: F403
from sessiontree.stores.sqlite.search import __all__ as __all__

_warnings.warn("sessiontree.stores.sqlite_search is deprecated: import sessiontree.stores.sqlite.search", DeprecationWarning, stacklevel=2)
