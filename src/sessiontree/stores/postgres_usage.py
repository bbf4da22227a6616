"""Deprecated: ``sessiontree.stores.postgres_usage`` moved to :mod:`sessiontree.stores.postgres.usage`; this name is kept for one release."""

import warnings as _warnings

from sessiontree.stores.postgres.usage import *  # noqa: F403
from sessiontree.stores.postgres.usage import __all__ as __all__

_warnings.warn("sessiontree.stores.postgres_usage is deprecated: import sessiontree.stores.postgres.usage", DeprecationWarning, stacklevel=2)
