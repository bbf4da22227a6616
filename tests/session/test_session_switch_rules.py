"""Rules the session split left to the manager's seams, pinned.

* seed:context-info: ``get_session_dir``/``get_session_file`` answer for any
  store with files (``SessionFiles``), including a wrapper that forwards its
  attributes to a JSONL store; ``""``/``None`` for a store without files.
* seed:create-branched: when the new session's file cannot be looked up, the
  manager is unchanged (it stays on the old session; the error propagates).
"""

from __future__ import annotations

import os

import pytest

from builders import user_ms as user
from sessiontree.session.manager import SessionManager
from sessiontree.stores.jsonl.store import JsonlStore
from sessiontree.stores.memory import MemoryStore


class Forwarding:
    """A store wrapper that forwards every attribute to ``inner``."""

    def __init__(self, inner):
        self.inner = inner
        self.url, self.kind = inner.url, inner.kind
        self.broken_lookup = False

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def location(self, session_id):
        if self.broken_lookup:
            raise OSError(5, "Input/output error")
        return self.inner.location(session_id)


def test_a_store_forwarding_to_jsonl_counts_as_a_file_store(tmp_path):
    directory = str(tmp_path / "d")
    m = SessionManager.create(str(tmp_path), store=Forwarding(JsonlStore(directory)), id="s1")
    assert m.get_session_dir() == os.path.abspath(directory)
    path = m.get_session_file()
    assert path is not None and os.path.dirname(path) == os.path.abspath(directory)
    m.append_message(user("a"))
    # The path is the file the first write created, and the only one.
    assert os.listdir(directory) == [os.path.basename(path)]
    assert m.get_session_file() == path


def test_a_store_without_files_has_no_dir_or_file(tmp_path):
    m = SessionManager.create(str(tmp_path), store=Forwarding(MemoryStore()))
    m.append_message(user("a"))
    assert m.get_session_dir() == ""
    assert m.get_session_file() is None


def test_create_branched_session_stays_when_the_file_lookup_fails(tmp_path):
    store = Forwarding(JsonlStore(str(tmp_path / "d")))
    m = SessionManager.create(str(tmp_path), store=store, id="old")
    a = m.append_message(user("a"))
    b = m.append_message(user("b"))
    store.broken_lookup = True
    with pytest.raises(OSError):
        m.create_branched_session(a)
    assert m.get_session_id() == "old"
    assert [e["id"] for e in m.get_entries()] == [a, b]
    assert m.get_leaf_id() == b
    store.broken_lookup = False
    # Still bound to the old session: the next append extends it.
    c = m.append_message(user("c"))
    assert m.get_entry(c)["parentId"] == b
    assert len(SessionManager.open(store.inner, "old").get_entries()) == 3
