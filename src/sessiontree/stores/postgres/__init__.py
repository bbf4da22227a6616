"""The PostgreSQL store: the sessions of a team in one database (needs ``psycopg``).

:mod:`.store` is the store, :mod:`.search` its search index, :mod:`.usage` its
usage ledger.
"""

from sessiontree.stores.postgres.store import *  # noqa: F403
from sessiontree.stores.postgres.store import __all__ as __all__
