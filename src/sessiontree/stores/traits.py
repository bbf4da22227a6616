"""The one place a store's declared traits are read (docs/decisions/store-traits.md).

Layers above ``stores/`` never test ``store.kind`` nor probe a store's attributes
(``getattr``/``hasattr``; a test over ``src/`` keeps it so): they ask
:func:`store_traits` for the facts of :class:`~sessiontree.stores.base.StoreTraits`,
and ``isinstance`` against the optional capability protocols of
:mod:`sessiontree.stores.base` for methods (``HeldLoads``, ``RecentEntryTypes``,
``CreateMany``, ``OwnRunLock``, ``SessionFiles``, ``RawTexts``, ``Retention``,
``TeamAccess``).
"""

from __future__ import annotations

from typing import Any

from sessiontree.stores.base import DeclaresTraits, StoreTraits

__all__ = ["UNDECLARED", "store_traits"]

#: The traits of a store that declares none: the conservative answers (it does I/O, a
#: load may write, nothing lazy, no run lock, no change signal).
UNDECLARED = StoreTraits()


def store_traits(store: Any) -> StoreTraits:
    """The traits ``store`` declares (:meth:`DeclaresTraits.traits`), or :data:`UNDECLARED`
    for an object that declares none (a caller's own store class)."""
    if isinstance(store, DeclaresTraits):
        return store.traits()
    return UNDECLARED
