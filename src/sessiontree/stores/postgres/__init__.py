"""The PostgreSQL store: the sessions of a team in one database (needs ``psycopg``).

:mod:`.store` is the store, composed of one database handle and its parts
(docs/decisions/store-composition.md): :mod:`.connection` (the URL, the pool, the
schema check or migration, transactions), :mod:`.reads`, :mod:`.writes`, :mod:`.ledger`
(the sync ledger), :mod:`.maintenance` (derived data, verify) and :mod:`.team` (team
access and retention). :mod:`.schema` is the ordered list of
its schema steps (every table a database holds) and of its derived indexes,
:mod:`.search` its search index, :mod:`.usage` its usage ledger, and
:mod:`.derived` what those share with the store. The package re-exports the
store's public names.
"""

from sessiontree.stores.postgres.store import *  # noqa: F403
from sessiontree.stores.postgres.store import __all__ as __all__
