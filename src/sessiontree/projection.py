"""Deprecated: ``sessiontree.projection`` moved to :mod:`sessiontree.core.projection`; this name is kept for one release."""

import warnings as _warnings

from sessiontree.core.projection import *  # noqa: F403
from sessiontree.core.projection import __all__ as __all__

_warnings.warn("sessiontree.projection is deprecated: import sessiontree.core.projection", DeprecationWarning, stacklevel=2)
