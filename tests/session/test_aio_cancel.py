"""Random cancellations of concurrent appends: whatever point a call is
cancelled at, its write either committed and the manager includes it, or did not
and the manager does not, the caller can tell which, and the store agrees with the
manager entry for entry after reopening.
"""

from __future__ import annotations

import asyncio
import tempfile
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from sessiontree.session.aio import AsyncSessionManager, WriteOutcome, outcome_of
from sessiontree.session.manager import SessionManager
from sessiontree.stores.jsonl.store import JsonlStore
from sessiontree.stores.memory import MemoryStore
from sessiontree.stores.sqlite.store import SqliteStore

# When a call is cancelled: never, after some turns of the loop (mostly while
# it waits for its turn), or after some milliseconds (often while its write
# runs: a durable append takes about that long).
CANCEL = st.one_of(st.none(), st.tuples(st.just("turns"), st.integers(0, 40)),
                   st.tuples(st.just("ms"), st.floats(0, 5)))
CALLS = st.lists(st.tuples(st.sampled_from(["message", "custom", "model", "info", "label"]), CANCEL),
                 min_size=1, max_size=12)


def issue(m: AsyncSessionManager, kind: str, i: int, root: str) -> Any:
    """Call ``i`` of the given kind; each leaves the marker ``i`` in its entry."""
    if kind == "message":
        return m.append_message({"role": "user", "content": f"c{i}", "timestamp": 1})
    if kind == "custom":
        return m.append_custom_entry("t", {"i": i})
    if kind == "model":
        return m.append_model_change("p", f"c{i}")
    if kind == "info":
        return m.append_session_info(f"c{i}")
    return m.append_label_change(root, f"c{i}")


def marker(entry: dict[str, Any]) -> int | None:
    """The call index an entry was written by, or ``None`` (the root)."""
    for value in (entry.get("message", {}).get("content"), entry.get("data", {}).get("i") if
                  isinstance(entry.get("data"), dict) else None, entry.get("modelId"), entry.get("name"),
                  entry.get("label")):
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.startswith("c") and value[1:].isdigit():
            return int(value[1:])
    return None


def open_store(kind: str, directory: str, fresh: MemoryStore | None = None) -> Any:
    if kind == "memory":
        return fresh if fresh is not None else MemoryStore()
    if kind == "sqlite":
        return SqliteStore(f"{directory}/s.db")
    return JsonlStore(f"{directory}/sessions")


async def scenario(store: Any, calls: list[tuple[str, Any]]) -> tuple[AsyncSessionManager, list[Any], str]:
    m = await AsyncSessionManager.create("/work/project", store=store)
    root = await m.append_message({"role": "user", "content": "root", "timestamp": 1})
    results: list[Any] = [None] * len(calls)

    async def call(i: int, kind: str) -> None:
        try:
            results[i] = ("returned", await issue(m, kind, i, root))
        except asyncio.CancelledError as exc:
            results[i] = ("cancelled", outcome_of(exc))
            raise

    async def cancel_later(task: asyncio.Task[None], plan: tuple[str, Any]) -> None:
        how, amount = plan
        if how == "turns":
            for _ in range(amount):
                await asyncio.sleep(0)
        else:
            await asyncio.sleep(amount / 1000)
        task.cancel()

    tasks = [asyncio.create_task(call(i, kind)) for i, (kind, _) in enumerate(calls)]
    cancellers = [asyncio.create_task(cancel_later(task, plan))
                  for task, (_, plan) in zip(tasks, calls, strict=False) if plan is not None]
    await asyncio.gather(*tasks, *cancellers, return_exceptions=True)
    for i, task in enumerate(tasks):
        if results[i] is None:  # cancelled before its first step: the call never started
            assert task.cancelled()
            results[i] = ("never started", None)
    return m, results, root


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["memory", "sqlite", "jsonl"]), calls=CALLS)
def test_random_cancellations_leave_store_and_manager_in_agreement(kind, calls):
    with tempfile.TemporaryDirectory() as directory:
        store = open_store(kind, directory)
        m, results, _root = asyncio.run(scenario(store, calls))
        entries = m.get_entries()
        by_marker = {marker(e): e for e in entries}
        committed = []
        for i, (how, value) in enumerate(results):
            if how == "returned":
                assert by_marker[i]["id"] == value
                committed.append(i)
            elif how == "cancelled":
                # The caller can tell which: every cancellation carries its outcome.
                assert isinstance(value, WriteOutcome) and value.error is None
                event(f"{kind}: cancelled, {'committed' if value.committed else 'withdrawn'}")
                if value.committed:
                    assert by_marker[i]["id"] == value.result
                    committed.append(i)
                else:
                    assert i not in by_marker
            else:
                assert i not in by_marker
        # Call order, one chain: each committed call's parent is the committed call before it.
        assert [marker(e) for e in entries] == [None, *committed]
        assert [e["parentId"] for e in entries] == [None, *[e["id"] for e in entries[:-1]]]
        assert m.get_leaf_id() == entries[-1]["id"]
        # The store agrees with the manager, entry for entry, through a new store object.
        reopened = SessionManager.open(open_store(kind, directory, store), m.get_session_id())
        assert reopened.get_entries() == entries
        # And the manager goes on from there.
        after = asyncio.run(m.append_message({"role": "user", "content": "after", "timestamp": 1}))
        assert m.get_entry(after)["parentId"] == entries[-1]["id"]
        assert SessionManager.open(open_store(kind, directory, store), m.get_session_id()).get_leaf_id() == after
        reopened.get_session_store().close()
        store.close()
