"""Keeping a store in step with the agents' own session folders (``sessiontree sync``).

:mod:`.engine` classifies and brings in files, :mod:`.sources` knows where the
agents keep them. May import :mod:`sessiontree.session`,
:mod:`sessiontree.stores` (through the store protocol) and the layers below.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessiontree.sync.engine import *  # noqa: F403


def __getattr__(name: str) -> Any:
    """A name of :mod:`.engine`, re-exported here (PEP 562). Imported on first use, not with the
    package, so that importing a light sibling module (start-up of the command line,
    docs/architecture.md "Start-up") does not load the sync engine and the stores.
    ``__all__`` is :mod:`.engine`'s. Raises AttributeError for any other name (a submodule not yet imported
    is then imported by the import system as usual)."""
    engine = import_module(f"{__name__}.engine")  # not ``from . import``: that asks this hook again
    if name == "__all__":
        return engine.__all__
    if name not in engine.__all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(engine, name)
    globals()[name] = value
    return value
