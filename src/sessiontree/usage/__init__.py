"""Usage and cost accounting across sessions (``sessiontree stats``).

May import :mod:`sessiontree.stores` (through the store protocol) and the layers below.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessiontree.usage.report import *  # noqa: F403


def __getattr__(name: str) -> Any:
    """A name of :mod:`.report`, re-exported here (PEP 562). Imported on first use, not with the
    package, so that importing a light sibling module (start-up of the command line,
    docs/architecture.md "Start-up") does not load the usage report, the stores and the price catalogue.
    ``__all__`` is :mod:`.report`'s. Raises AttributeError for any other name (a submodule not yet imported
    is then imported by the import system as usual)."""
    report = import_module(f"{__name__}.report")  # not ``from . import``: that asks this hook again
    if name == "__all__":
        return report.__all__
    if name not in report.__all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(report, name)
    globals()[name] = value
    return value
