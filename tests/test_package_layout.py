"""The package's shape is a promise too: no import cycle, the public names at the top level,
and the old import paths removed in 0.2.0 stay removed (docs/architecture.md, CHANGELOG.md).
The layering itself is import-linter's contract (.importlinter), run by .ci/run."""

from __future__ import annotations

import importlib
import importlib.metadata

import pytest

import sessiontree

#: Module removed in 0.2.0 -> the module to import instead.
REMOVED_MODULES = {
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


@pytest.mark.parametrize("old", sorted(REMOVED_MODULES))
def test_a_removed_module_path_is_gone(old):
    """The re-exports deprecated in 0.1.0 are gone in 0.2.0 (issue 40 item 6)."""
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_former_module_names_are_packages_with_the_same_api():
    from sessiontree.core.projection import build_session_projection
    from sessiontree.format import parse_session, read_session_file, serialize_session
    from sessiontree.search import search

    assert parse_session is importlib.import_module("sessiontree.format.codec").parse_session
    assert read_session_file is sessiontree.read_session_file
    assert serialize_session is sessiontree.serialize_session
    assert build_session_projection is sessiontree.build_session_projection
    assert search is importlib.import_module("sessiontree.search.query").search


def test_moved_jsonl_names_are_gone():
    """``migrate_file``, ``MigrationResult`` and ``first_line`` live in the format layer only."""
    import sessiontree.stores.jsonl as jsonl

    for name in ("migrate_file", "MigrationResult", "first_line"):
        assert not hasattr(jsonl, name), name
    assert importlib.import_module("sessiontree.format.migrate").migrate_file is not None
