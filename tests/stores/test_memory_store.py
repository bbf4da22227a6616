"""MemoryStore specifics, and the duplicate-id refusal across appends that the memory
and SQLite stores share (JSONL does not re-read its files on append)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from builders import custom_with_data as custom
from builders import work_header as header
from sessiontree.errors import InvalidSessionError
from sessiontree.stores import MemoryStore
from support import make_store


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_duplicate_entry_id_across_appends_is_refused(kind, tmp_path):
    store = make_store(kind, tmp_path)
    store.create(header("s1"), [custom("e1")])
    with pytest.raises(InvalidSessionError):
        store.append("s1", [custom("e2"), custom("e1")])
    assert [e["id"] for e in store.load("s1").entries] == ["e1"]
    store.close()


def test_memory_store_does_no_io(tmp_path, monkeypatch):
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("MemoryStore touched the filesystem")

    store = MemoryStore()
    monkeypatch.setattr(os, "open", refuse)
    monkeypatch.setattr("builtins.open", refuse)
    store.create(header("s1"), [custom("e1")])
    store.append("s1", [custom("e2", "e1")])
    assert len(store.load("s1").entries) == 2
    assert [row.id for row in store.list_sessions()] == ["s1"]
    store.delete("s1")
