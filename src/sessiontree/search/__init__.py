"""Search across sessions: the one entry point of the command line and the viewer.

The matching rule itself is :mod:`sessiontree.core.search`, which every store follows;
:mod:`.query` runs a search over a store and settles its pending index tail first.

May import :mod:`sessiontree.session`, :mod:`sessiontree.stores` (through the
store protocol) and the layers below.
"""

from sessiontree.search.query import *  # noqa: F403
from sessiontree.search.query import __all__ as __all__
