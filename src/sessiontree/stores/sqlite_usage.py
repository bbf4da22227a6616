"""Deprecated: ``sessiontree.stores.sqlite_usage`` moved to :mod:`sessiontree.stores.sqlite.usage`; this name is kept for one release."""

import warnings as _warnings

from sessiontree.stores.sqlite.usage import *  # noqa: F403
from sessiontree.stores.sqlite.usage import __all__ as __all__

_warnings.warn("sessiontree.stores.sqlite_usage is deprecated: import sessiontree.stores.sqlite.usage", DeprecationWarning, stacklevel=2)
