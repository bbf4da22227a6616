"""Usage and cost accounting across sessions (``sessiontree stats``).

May import :mod:`sessiontree.stores` (through the store protocol) and the layers below.
"""

from sessiontree.usage.report import *  # noqa: F403
from sessiontree.usage.report import __all__ as __all__
