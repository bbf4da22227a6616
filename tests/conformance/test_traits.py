"""Declared store traits (docs/decisions/store-traits.md, issue 40 item 1).

Each store's :class:`~sessiontree.stores.base.StoreTraits` and optional capability
protocols are asserted against a table written from the stores' documented behaviour
(docs/stores.md, docs/postgres.md), not from what ``traits()`` printed; and no module
above ``stores/`` may ask a store what it is (``store.kind ==``) or probe it
(``getattr``/``hasattr``): it asks :func:`~sessiontree.stores.traits.store_traits` or
``isinstance`` against a capability protocol.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

from sessiontree.stores.base import SessionFiles
from sessiontree.stores.memory import MemoryStore
from sessiontree.stores.sqlite.store import SqliteStore
from sessiontree.stores.traits import (
    UNDECLARED,
    CreateMany,
    HeldLoads,
    OwnRunLock,
    RecentEntryTypes,
    SessionAgents,
    StoreTraits,
    store_traits,
)

SRC = Path(__file__).resolve().parents[2] / "src" / "sessiontree"
#: The store kinds' names: comparing anything's ``.kind`` with one of them is a kind test.
STORE_KINDS = {"memory", "sqlite", "jsonl", "postgres"}


def _expected(kind: str, store: Any) -> StoreTraits:
    """The documented traits of each store kind (docs/stores.md; docs/postgres.md)."""
    if kind == "memory":  # no I/O, nothing outlives the process
        return StoreTraits(does_io=False, loads_may_write=False, persisted=False)
    if kind == "sqlite":  # loads only read; lazy open; create_many settles; lock beside the file
        return StoreTraits(loads_may_write=False, opens_lazily=True, settles_on_create=True, partial_reads=True,
                           run_lock_path=store.path + ".sync-lock", change_files=(store.path, store.path + "-wal"))
    if kind == "jsonl":  # a load may persist a format upgrade (D-9); lock file inside its folder
        return StoreTraits(loads_may_write=True, run_lock_path=os.path.join(store.directory, ".sessiontree-sync-run.lock"),
                           own_folder=store.directory)
    assert kind == "postgres"  # partial reads; its own advisory run lock, no lock file
    return StoreTraits(partial_reads=True)


#: Which optional capability protocols each kind has: HeldLoads, RecentEntryTypes, CreateMany, OwnRunLock, SessionFiles,
#: SessionAgents.
CAPABILITIES = {
    "memory": (False, False, False, False, False, False),
    "sqlite": (True, True, True, False, False, True),
    "jsonl": (False, False, False, False, True, False),
    "postgres": (False, False, True, True, False, False),
}


def test_declared_traits(store: Any) -> None:
    """Every store states its traits, equal to the documented ones, and ``partial_reads`` agrees."""
    traits = store_traits(store)
    assert traits == _expected(store.kind, store)
    assert traits.partial_reads == store.partial_reads


def test_capability_protocols(store: Any) -> None:
    """The optional capabilities are found by ``isinstance``, each where the store has it."""
    found = tuple(isinstance(store, proto) for proto in (HeldLoads, RecentEntryTypes, CreateMany, OwnRunLock,
                                                         SessionFiles, SessionAgents))
    assert found == CAPABILITIES[store.kind]


def test_session_agents_are_the_listings_agents(store: Any) -> None:
    """Where a store names the agents itself (``SessionAgents``), it names the sessions the
    listing lists (internal ones too) and each one's agent as the listing does: pi for a
    plain header, the header's ``foreign.agent`` for a mapped file's."""
    if not isinstance(store, SessionAgents):
        return
    from builders import header, user_entry

    store.create(header("s-pi"), [user_entry("e1", None, "hello")])
    store.create(header("s-claude", foreign={"agent": "claude-code"}), [user_entry("e2", None, "hi")])
    store.create(header("s-codex", foreign={"agent": "codex"}), [])
    store.create(header("s-odd", foreign="not an object"), [])
    store.create(header("s-internal", internal=True, workflow={"runId": "r", "stageId": "s", "stageName": "n"}),
                 [])  # a workflow-owned session (docs/rules/listing.md O.1): listed only with include_internal
    expected = {"s-pi": "pi", "s-claude": "claude-code", "s-codex": "codex", "s-odd": "pi", "s-internal": "pi"}
    assert "s-internal" not in {info.id for info in store.list_sessions()}
    listed = {info.id: info.agent for info in store.list_sessions(include_internal=True)}
    assert listed == expected
    assert store.session_agents() == listed


def test_in_memory_sqlite_is_not_persisted() -> None:
    """``:memory:`` SQLite outlives nothing: no run lock, no change files, not persisted."""
    with SqliteStore(":memory:") as store:
        traits = store_traits(store)
        assert (traits.persisted, traits.run_lock_path, traits.change_files) == (False, None, ())
        assert traits.opens_lazily and not traits.loads_may_write


def test_undeclared_store_gets_conservative_traits() -> None:
    """An object that declares nothing is taken to do I/O, to write on load, and to have nothing lazy."""
    assert store_traits(object()) == UNDECLARED
    assert UNDECLARED.does_io and UNDECLARED.loads_may_write and UNDECLARED.persisted
    assert not (UNDECLARED.opens_lazily or UNDECLARED.settles_on_create or UNDECLARED.run_lock_path)
    assert store_traits(MemoryStore()) != UNDECLARED


def _tail(node: ast.AST) -> str:
    """The last name of ``a.b.store`` / ``store`` (lowercase), ``""`` for anything else."""
    if isinstance(node, ast.Name):
        return node.id.lower()
    if isinstance(node, ast.Attribute):
        return node.attr.lower()
    return ""


def _names_store_kind(node: ast.AST) -> bool:
    """A string constant naming a store kind, or a tuple/list/set holding one."""
    if isinstance(node, ast.Constant):
        return node.value in STORE_KINDS
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_store_kind(e) for e in node.elts)
    return False


def probes_in(source: str, name: str = "<src>") -> list[str]:
    """Where ``source`` asks a store what it is or probes it: ``getattr``/``hasattr`` on anything
    named ``*store*``, ``<...store>.kind`` compared with anything, and any ``.kind`` compared with a
    store kind's name. ``name:line: text`` for each."""
    found = []
    for node in ast.walk(ast.parse(source)):
        bad = False
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            bad = bool(node.args) and "store" in _tail(node.args[0])
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            kinds = [s for s in sides if isinstance(s, ast.Attribute) and s.attr == "kind"]
            bad = any("store" in _tail(k.value) for k in kinds) or (bool(kinds) and any(map(_names_store_kind, sides)))
        if bad:
            found.append(f"{name}:{getattr(node, 'lineno', 0)}: {ast.unparse(node)}")
    return found


def test_probe_check_sees_the_old_probes() -> None:
    """The check finds each form the old code used (issue 40), so passing means something."""
    old = '''
if store.kind == "sqlite": pass
x = getattr(store, "load_held", None)
y = getattr(self.store, "kind", None) != "sqlite"
z = self._store.kind != "memory"
w = location.kind not in ("sqlite", "jsonl")
v = hasattr(store, "create_many")
ok = change.kind == "create"
'''
    assert len(probes_in(old)) == 6


def test_no_store_probe_above_stores() -> None:
    """No module outside ``stores/`` tests a store's kind or probes its attributes (no exceptions)."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path.relative_to(SRC).parts[0] == "stores":
            continue
        found += probes_in(path.read_text(encoding="utf-8"), str(path.relative_to(SRC)))
    assert found == []


def test_declared_change_files_show_a_change(store: Any) -> None:
    """A store declaring ``change_files`` shows every write in their size and time (the MCP
    cache and the usage page rely on it); the run lock's folder exists, so the lock can be made."""
    from builders import header
    from sessiontree.stores.changes import change_hint

    traits = store_traits(store)
    if traits.run_lock_path is not None:
        assert os.path.isdir(os.path.dirname(traits.run_lock_path))
    if not traits.change_files:
        return
    store.create(header("019cadb4-6e80-7a3c-9b1d-00000000e001"), [])
    before = change_hint(store, "")
    store.append("019cadb4-6e80-7a3c-9b1d-00000000e001", [
        {"type": "message", "id": "e1", "parentId": None, "timestamp": "2026-03-01T09:00:00.000Z",
         "message": {"role": "user", "content": "x" * 5000}}])
    assert before is not None and change_hint(store, "") != before
