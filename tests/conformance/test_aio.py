"""``AsyncSessionManager`` on every store: concurrent appends apply in call order, and
the grouped import runs off the event loop."""

from __future__ import annotations

import asyncio
import contextlib

from builders import user_ms as user
from sessiontree import errors
from sessiontree.session.aio import AsyncSessionManager
from sessiontree.session.manager import SessionManager
from sessiontree.stores import open_store


@contextlib.contextmanager
def fresh_copy(store):
    """A second store object on the same data: what another process would read (the memory
    store is its own second object). Closed on exit, so no pool outlives the test."""
    if store.kind == "memory":
        yield store
        return
    copy = open_store(store.url)
    try:
        yield copy
    finally:
        copy.close()


def test_concurrent_appends_apply_in_call_order(store, tmp_path):
    async def main():
        m = await AsyncSessionManager.create(str(tmp_path), store=store)
        first = await m.append_message(user("first"))
        calls = []
        for i in range(40):
            kind = i % 4
            if kind == 0:
                calls.append(m.append_message(user(f"m{i}")))
            elif kind == 1:
                calls.append(m.append_custom_entry("t", {"i": i}))
            elif kind == 2:
                calls.append(m.append_label_change(first, f"l{i}"))
            else:
                calls.append(m.append_model_change("p", f"model{i}"))
        ids = await asyncio.gather(*calls)
        return m, [first, *ids]

    m, ids = asyncio.run(main())
    entries = m.get_entries()
    assert [e["id"] for e in entries] == ids
    assert [e["parentId"] for e in entries] == [None, *ids[:-1]]
    assert m.get_leaf_id() == ids[-1] and m.get_label(ids[0]) == "l38"
    with fresh_copy(store) as copy:
        stored = SessionManager.open(copy, m.get_session_id()).get_entries()
    assert stored == entries


def test_import_files_runs_the_grouped_import_off_the_loop(store, tmp_path):
    header = b'{"type":"session","version":4,"id":"%s","createdAt":"2026-01-01T00:00:00.000Z","cwd":"/w"}\n'
    paths = []
    for name in ("a", "b", "a"):  # the second "a" is the same id again: rejected as already stored
        path = tmp_path / f"{name}{len(paths)}.jsonl"
        path.write_bytes(header % name.encode())
        paths.append(str(path))

    async def main():
        return await AsyncSessionManager.import_files(paths, None, store, batch_sessions=2)

    outcomes = asyncio.run(main())
    assert [(o.session_id, o.error is None) for o in outcomes] == [("a", True), ("b", True), ("a", False)]
    assert isinstance(outcomes[2].error, errors.SessionExistsError)
    assert sorted(store.session_ids()) == ["a", "b"]
