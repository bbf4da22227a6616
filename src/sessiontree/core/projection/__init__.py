"""The projection: the model context a session branch rebuilds to.

(docs/rules/projection.md.) Importing the package gives the public builders,
as the former module ``sessiontree.projection`` did.
"""

from sessiontree.core.projection.build import *  # noqa: F403
from sessiontree.core.projection.build import __all__ as __all__
