"""Finding damage in session files and writing repaired copies (``sessiontree check``).

Reads bytes, never writes to the file it checks. May import
:mod:`sessiontree.core`, :mod:`sessiontree.format` and :mod:`sessiontree.errors`.
The public names are those of :mod:`sessiontree.check.checker`, which says
which module does what.
"""

from sessiontree.check.checker import *  # noqa: F403
from sessiontree.check.checker import __all__ as __all__
