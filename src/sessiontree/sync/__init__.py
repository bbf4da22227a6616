"""Keeping a store in step with the agents' own session folders (``sessiontree sync``).

:mod:`.engine` classifies and brings in files, :mod:`.sources` knows where the
agents keep them. May import :mod:`sessiontree.session`,
:mod:`sessiontree.stores` (through the store protocol) and the layers below.
"""

from typing import TYPE_CHECKING

from sessiontree._lazy import reexport

if TYPE_CHECKING:
    from sessiontree.sync.engine import *  # noqa: F403


# A name of :mod:`.engine`, re-exported here and imported on first use, not with the package, so that
# importing a light sibling module does not load the sync engine and the stores (docs/architecture.md "Start-up").
__getattr__ = reexport(__name__, "engine")
