"""Search across sessions: the one matching rule of the command line, the viewer and the stores.

May import :mod:`sessiontree.session`, :mod:`sessiontree.stores` (through the
store protocol) and the layers below.
"""

from sessiontree.search.query import *  # noqa: F403
from sessiontree.search.query import __all__ as __all__
