"""Keeping a store in step with the agents' own session folders (``sessiontree sync``).

:mod:`.engine` classifies and brings in files, :mod:`.sources` knows where the
agents keep them. May import :mod:`sessiontree.session`,
:mod:`sessiontree.stores` (through the store protocol) and the layers below.
"""

from sessiontree.sync.engine import *  # noqa: F403
from sessiontree.sync.engine import __all__ as __all__
