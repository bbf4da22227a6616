"""Stores are composed, not chained (docs/decisions/store-composition.md): each backend
class has ``StoreBase`` as its only base, each of its public methods (but ``traits``, its
own declaration) is one statement handing the call to a part, and no part reaches another's private members
(``self.<part>._<name>``). Read from the source, so a new mixin or a private call
across parts fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import sessiontree.stores

STORES = Path(sessiontree.stores.__file__).parent
BACKENDS = {"sqlite": "SqliteStore", "jsonl": "JsonlStore", "postgres": "PostgresStore"}


def _class(backend: str) -> ast.ClassDef:
    tree = ast.parse((STORES / backend / "store.py").read_text(encoding="utf-8"))
    return next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == BACKENDS[backend])


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_the_store_class_has_one_base(backend):
    assert [ast.unparse(base) for base in _class(backend).bases] == ["StoreBase"]


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_each_public_method_is_one_statement(backend):
    long = []
    for node in _class(backend).body:
        if not isinstance(node, ast.FunctionDef) or node.name.startswith("_") or node.name == "traits":
            continue  # traits() declares the store's own traits; it hands nothing on
        body = node.body[1:] if ast.get_docstring(node) is not None else node.body
        if len(body) != 1:
            long.append(node.name)
    assert long == []


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_no_part_reaches_another_parts_private_members(backend):
    reaches = []
    for path in sorted((STORES / backend).glob("*.py")):
        if path.name == "store.py":
            continue  # the store holds its parts as private attributes and calls them
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and isinstance(node.value, ast.Attribute) and isinstance(node.value.value, ast.Name)
                    and node.value.value.id == "self"):
                reaches.append(f"{path.name}:{node.lineno} self.{node.value.attr}.{node.attr}")
    assert reaches == []
