"""The package's shape is a promise too: no import cycle, the public names at the top level,
and the old import paths that still work for one release (docs/architecture.md, CHANGELOG.md).
The layering itself is import-linter's contract (.importlinter), run by .ci/run."""

from __future__ import annotations

import importlib
import importlib.metadata
import subprocess
import sys
import warnings

import pytest

import sessiontree

#: Deprecated module -> the module it re-exports.
DEPRECATED_MODULES = {
    "sessiontree.manager": "sessiontree.session.manager",
    "sessiontree.aio": "sessiontree.session.aio",
    "sessiontree.projection": "sessiontree.core.projection",
    "sessiontree.stores.sqlite_search": "sessiontree.stores.sqlite.search",
    "sessiontree.stores.sqlite_usage": "sessiontree.stores.sqlite.usage",
    "sessiontree.stores.postgres_search": "sessiontree.stores.postgres.search",
    "sessiontree.stores.postgres_usage": "sessiontree.stores.postgres.usage",
}


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in graph.find_modules_directly_imported_by(module):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_itself_through_others():
    import grimp
    graph = grimp.build_graph("sessiontree")  # function-level imports count too
    assert len(graph.modules) > 50  # the whole package was read
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    class Graph:
        def __init__(self):
            self.modules = {"a", "b", "c", "d"}
            self.edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

        def find_modules_directly_imported_by(self, module):
            return self.edges[module]

    assert _cycles(Graph()) == [["a", "b", "c"]]


def test_every_top_level_name_resolves():
    for name in sessiontree.__all__:
        assert getattr(sessiontree, name) is not None, name
    assert sessiontree.AsyncSessionManager is importlib.import_module("sessiontree.session.aio").AsyncSessionManager
    assert sessiontree.PostgresStore is importlib.import_module("sessiontree.stores.postgres").PostgresStore
    assert {"AsyncSessionManager", "PostgresStore", "SessionManager", "open_store"} <= set(sessiontree.__all__)


def test_the_version_is_the_package_metadata():
    assert sessiontree.__version__ == importlib.metadata.version("sessiontree")


@pytest.mark.parametrize(("old", "new"), sorted(DEPRECATED_MODULES.items()))
def test_an_old_module_path_gives_the_same_objects(old, new):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old_module = importlib.import_module(old)
    new_module = importlib.import_module(new)
    assert set(new_module.__all__) <= set(old_module.__all__)  # plus names that moved elsewhere
    for name in new_module.__all__:
        assert getattr(old_module, name) is getattr(new_module, name), name
    for name in old_module.__all__:
        assert getattr(old_module, name) is not None, name


@pytest.mark.parametrize("old", sorted(DEPRECATED_MODULES))
def test_an_old_module_path_warns(old):
    # A fresh interpreter: in this one the module may already be imported (no second warning).
    result = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", f"import {old}"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert f"{old} is deprecated" in result.stderr


def test_former_module_names_are_packages_with_the_same_api():
    from sessiontree.core.projection import build_session_projection
    from sessiontree.format import parse_session, read_session_file, serialize_session
    from sessiontree.search import search

    assert parse_session is importlib.import_module("sessiontree.format.codec").parse_session
    assert read_session_file is sessiontree.read_session_file
    assert serialize_session is sessiontree.serialize_session
    assert build_session_projection is sessiontree.build_session_projection
    assert search is importlib.import_module("sessiontree.search.query").search


def test_moved_jsonl_names_warn_and_resolve():
    import sessiontree.stores.jsonl as jsonl
    from sessiontree.format.migrate import migrate_file

    with pytest.warns(DeprecationWarning, match="sessiontree.format.migrate"):
        assert jsonl.migrate_file is migrate_file
    with pytest.raises(AttributeError):
        jsonl.no_such_name  # noqa: B018
