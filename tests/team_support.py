"""A team on the test database (docs/team.md): the owner adds people with their roles and
each person gets a store under their own role, as a member's ``sessiontree`` would open it.

Shared by the team store, rollup, walk and door tests, which build the same cluster of
stores around different sessions."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from sessiontree.stores.postgres.store import PostgresStore

__all__ = ["as_role", "team_stores"]


def as_role(url: str, role: str) -> str:
    """``url`` (the test cluster's, user ``postgres``) with ``role`` logging in instead."""
    return url.replace("postgres@", f"{role}@", 1)


@contextmanager
def team_stores(pg_url: str, people: Mapping[str, str]) -> Iterator[tuple[PostgresStore, dict[str, PostgresStore]]]:
    """The owner's store with each of ``people`` (name -> role) added, and a store per
    person logged in as them; every store is closed on exit, also when a test fails."""
    owner = PostgresStore(pg_url)
    try:
        for name, role in people.items():
            owner.team_add(name, role)
        stores = {name: PostgresStore(as_role(pg_url, name)) for name in people}
        try:
            yield owner, stores
        finally:
            for store in stores.values():
                store.close()
    finally:
        owner.close()
