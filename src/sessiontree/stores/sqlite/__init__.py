"""The SQLite store (the default): every session in one local database.

:mod:`.store` is the store, :mod:`.search` its full-text index, :mod:`.usage`
its usage ledger. Importing the package registers both derived indexes.
"""

from sessiontree.stores.sqlite import search as search
from sessiontree.stores.sqlite import usage as usage
from sessiontree.stores.sqlite.store import *  # noqa: F403
from sessiontree.stores.sqlite.store import __all__ as __all__
