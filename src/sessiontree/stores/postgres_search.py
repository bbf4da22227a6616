"""Deprecated: ``sessiontree.stores.postgres_search`` moved to :mod:`sessiontree.stores.postgres.search`; this name is kept for one release."""

import warnings as _warnings

from sessiontree.stores.postgres.search import *  # noqa: F403
from sessiontree.stores.postgres.search import __all__ as __all__

_warnings.warn("sessiontree.stores.postgres_search is deprecated: import sessiontree.stores.postgres.search", DeprecationWarning, stacklevel=2)
