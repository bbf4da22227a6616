"""Usage and cost accounting across sessions (``sessiontree stats``).

May import :mod:`sessiontree.stores` (through the store protocol) and the layers below.
"""

from typing import TYPE_CHECKING

from sessiontree._lazy import reexport

if TYPE_CHECKING:
    from sessiontree.usage.report import *  # noqa: F403


# A name of :mod:`.report`, re-exported here and imported on first use, not with the package, so that
# importing a light sibling module does not load the usage report, the stores and the price catalogue (docs/architecture.md "Start-up").
__getattr__ = reexport(__name__, "report")
