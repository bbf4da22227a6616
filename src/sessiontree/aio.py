"""Deprecated: ``sessiontree.aio`` moved to :mod:`sessiontree.session.aio`; this name is kept for one release."""

import warnings as _warnings

from sessiontree.session.aio import *  # noqa: F403
from sessiontree.session.aio import __all__ as __all__

_warnings.warn("sessiontree.aio is deprecated: import sessiontree.session.aio", DeprecationWarning, stacklevel=2)
