"""Schema steps of the database stores (one numbered list per backend, docs/decisions/
sql-store-modules.md): registering a step in number order, and refusing a database that
carries a step this version does not know.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TypeVar

from sessiontree.errors import StoreOpenError

__all__ = ["check_known_steps", "register_step", "schema_steps"]


_STEP_NAME = re.compile(r"m(\d{3})_[a-z0-9_]+")


_Step = TypeVar("_Step", bound=Callable[..., None])


def register_step(steps: list[tuple[str, _Step]], step: _Step) -> _Step:
    """Register the schema step ``step`` in ``steps`` (a store's ``MIGRATIONS``) and return it.

    A step is named after its function, ``mNNN_what`` (``m004_search_index``).
    ``steps`` is kept ordered by number, so steps run in number order whatever
    the order of registration. Registering the same name again replaces it (a
    module reloaded).

    Raises:
        ValueError: the name is not ``mNNN_what``, or its number is taken by
            another step (two steps written apart with the same number).
    """
    name = step.__name__
    match = _STEP_NAME.fullmatch(name)
    if match is None:
        raise ValueError(f"schema step {name!r}: expected a name like m001_initial")
    for i, (other, _) in enumerate(steps):
        if other == name:
            steps[i] = (name, step)
            return step
        if other[:4] == name[:4]:
            raise ValueError(f"schema steps {other!r} and {name!r} share the number {match.group(1)}")
    steps.append((name, step))
    steps.sort(key=lambda item: item[0])
    return step


def schema_steps(*steps: _Step) -> list[tuple[str, _Step]]:
    """A store's schema steps as ``[(name, function), ...]``, from the functions listed
    in the order they run (a store's ``schema.MIGRATIONS``).

    Raises:
        ValueError: a name is not ``mNNN_what``, two steps share a number, or the
            list is not in number order (the order databases recorded them in).
    """
    ordered: list[tuple[str, _Step]] = []
    for step in steps:
        register_step(ordered, step)
    if [name for name, _ in ordered] != [step.__name__ for step in steps]:
        raise ValueError("schema steps must be listed in number order: "
                         + ", ".join(step.__name__ for step in steps))
    return ordered


def check_known_steps(url: str, applied: Iterable[str], known: Iterable[str]) -> None:
    """Refuse a database whose ``schema_migrations`` (``applied``: step names) records
    a step this version does not have (``known``: the names of its ``MIGRATIONS``): it was
    written by a newer sessiontree, whose schema this one must not read or change.

    Raises:
        StoreOpenError: naming ``url`` and the unknown steps, in ``applied`` order.
    """
    names = set(known)
    unknown = [name for name in applied if name not in names]
    if unknown:
        raise StoreOpenError(
            f"cannot open {url}: its schema has steps this version does not know "
            f"({', '.join(unknown)}); it was written by a newer sessiontree")
