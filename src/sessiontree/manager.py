"""Deprecated: ``sessiontree.manager`` moved to :mod:`sessiontree.session.manager`; this name is kept for one release."""

import warnings as _warnings

from sessiontree.session.manager import *  # noqa: F403
from sessiontree.session.manager import __all__ as __all__

_warnings.warn("sessiontree.manager is deprecated: import sessiontree.session.manager", DeprecationWarning, stacklevel=2)
