"""The SQLite store (the default): every session in one local database.

:mod:`.store` is the store, assembled from one mixin per capability:
:mod:`.connection` (opening, transactions), :mod:`.reads`, :mod:`.writes`,
:mod:`.ledger` (the sync ledger) and :mod:`.maintenance` (derived data, verify).
:mod:`.schema` is the ordered list of its schema steps (every table a database
holds) and of its derived indexes, :mod:`.search` its full-text index,
:mod:`.usage` its usage ledger, and :mod:`.derived` what those share with the
store (value conversions, listing-state columns, the ``DerivedIndex`` contract).
The package re-exports the store's public names.
"""

from sessiontree.stores.sqlite.store import *  # noqa: F403
from sessiontree.stores.sqlite.store import __all__ as __all__
