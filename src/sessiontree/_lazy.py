"""A package that re-exports one of its modules lazily (PEP 562), for the start-up path.

Importing a light sibling module (the command line's start-up, docs/architecture.md "Start-up")
must not load the package's heavy module; its names are loaded on first use instead.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any


def reexport(package: str, module: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that re-exports the names of its ``module``.

    Args:
        package: the package's ``__name__`` (e.g. ``"sessiontree.sync"``).
        module: the submodule whose ``__all__`` is re-exported (e.g. ``"engine"``).

    Returns:
        ``__getattr__(name)``: ``__all__`` is the module's; a name of the module's ``__all__`` is
        imported on first use and cached in the package's globals; any other name raises
        AttributeError (a submodule not yet imported is then imported by the import system).
    """
    import sys

    def __getattr__(name: str) -> Any:
        source = import_module(f"{package}.{module}")  # not ``from . import``: that asks this hook again
        if name == "__all__":
            return source.__all__
        if name not in source.__all__:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(source, name)
        vars(sys.modules[package])[name] = value
        return value

    return __getattr__
