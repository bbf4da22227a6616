"""Deprecated: ``sessiontree.stores.postgres_usage`` moved to :mod:`sessiontree.stores.postgres.usage`; this name is kept for one release."""

import warnings as _warnings

from sessiontree.stores.postgres.schema import m004_usage_ledger  # the steps moved to .schema
from sessiontree.stores.postgres.usage import *  # noqa: F403
from sessiontree.stores.postgres.usage import __all__ as _moved

_warnings.warn("sessiontree.stores.postgres_usage is deprecated: import sessiontree.stores.postgres.usage", DeprecationWarning, stacklevel=2)

__all__ = [*_moved, "m004_usage_ledger"]
