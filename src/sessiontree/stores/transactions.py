"""The transactions protocol: the one thing a store's parts share (docs/architecture.md,
"The store seam").

A backend is a small object holding its connection (or paths) and handing each public call
to a part (reads, writes, ledger, maintenance, retention); the parts reach the storage only
through the :class:`Transactions` they are given, never through each other's private
members. ``C`` is what a transaction yields: a ``sqlite3.Connection`` for SQLite, a psycopg
connection for PostgreSQL. SQLite's index modules ask a little more of it
(:class:`~sessiontree.stores.sqlite.derived.SqliteTransactions`).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol, TypeVar

__all__ = ["Transactions"]

C_co = TypeVar("C_co", covariant=True)


class Transactions(Protocol[C_co]):
    """Read and write transactions over one store's storage.

    Attributes:
        url: the store's URL, for error messages (``where``).
    """

    @property
    def url(self) -> str:
        """The store's URL."""
        ...

    def read_transaction(self) -> AbstractContextManager[C_co]:
        """One consistent snapshot across several statements.

        Raises:
            StorageError: the storage could not be read."""
        ...

    def write_transaction(self, what: str) -> AbstractContextManager[C_co]:
        """One atomic write: everything done in the block commits together, or (on any
        error) nothing does.

        Raises:
            StorageError: read-only, or the write failed (``what`` names it)."""
        ...
