"""Every store under load and faults.

* Stress: 8 writer processes x N appends, (a) each to its own session and (b)
  all to one session, on SQLite, JSONL and PostgreSQL (the memory store, which
  cannot be shared between processes, with 8 threads): exactly 8 x N entries,
  every ``parentId`` resolvable, no duplicate id, no error, and the store's own
  ``verify()`` finds nothing. N is 2,000 with ``SESSIONTREE_STRESS=1`` (what
  ``.ci/run`` sets for a run of its own) and 40 otherwise, so the default
  run stays short while still racing the writers.
* Disk full (``RLIMIT_FSIZE`` in a child process, ``SIGXFSZ`` ignored so the
  write fails with ``EFBIG``): ``StorageError``, the manager's in-memory state
  unchanged, and the same append succeeds once the limit is lifted.

Killing a writer with SIGKILL is in test_store_recovery.py (every persistent
store); the PostgreSQL server stopped or restarted around a write is in
test_postgres_store.py.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest

from builders import header
from sessiontree.stores import open_store

STRESS = os.environ.get("SESSIONTREE_STRESS", "") not in ("", "0")
WRITERS = 8
APPENDS = 2000 if STRESS else 40

pytestmark = pytest.mark.stress

KINDS = ["memory", "sqlite", "jsonl", pytest.param("postgres", marks=pytest.mark.postgres)]


def _entry(writer: int, i: int, parent: str | None) -> dict[str, Any]:
    return {"type": "message", "id": f"w{writer}-{i:05d}", "parentId": parent,
            "timestamp": "2026-02-01T09:00:00.000Z",
            "message": {"role": "user", "content": f"writer {writer} says {i} " + "x" * (i % 40), "timestamp": 1}}


def _writer(url: str, writer: int, session_id: str, appends: int) -> None:
    """Append ``appends`` entries one call each, each child of the writer's previous one."""
    store = open_store(url)
    try:
        parent = None
        for i in range(appends):
            entry = _entry(writer, i, parent)
            store.append(session_id, [entry])
            parent = entry["id"]
    finally:
        store.close()


def _url(kind: str, tmp_path, request) -> str:
    if kind == "postgres":
        return request.getfixturevalue("pg_url")
    return {"memory": "memory:", "sqlite": f"sqlite:///{tmp_path / 'stress.db'}",
            "jsonl": f"jsonl:///{tmp_path / 'stress'}"}[kind]


def _check(store: Any, session_ids: list[str]) -> int:
    total = 0
    for session_id in session_ids:
        entries = store.load(session_id).entries
        ids = [e["id"] for e in entries]
        assert len(ids) == len(set(ids)), "duplicate id"
        known = set(ids)
        assert all(e["parentId"] is None or e["parentId"] in known for e in entries), "dangling parentId"
        for writer in range(WRITERS):  # each writer's appends in its own order
            mine = [i for i in ids if i.startswith(f"w{writer}-")]
            assert mine == sorted(mine)
        total += len(ids)
    return total


@pytest.mark.slow
@pytest.mark.parametrize("shared", [False, True], ids=["own-sessions", "one-session"])
@pytest.mark.parametrize("kind", KINDS)
def test_eight_writers(kind: str, shared: bool, tmp_path, request) -> None:
    url = _url(kind, tmp_path, request)
    store = open_store(url)
    session_ids = ["shared"] if shared else [f"own-{w}" for w in range(WRITERS)]
    for session_id in session_ids:
        store.create(header(session_id))
    targets = [session_ids[0] if shared else session_ids[w] for w in range(WRITERS)]
    started = time.monotonic()
    if kind == "memory":  # one process: threads share the store object
        errors: list[BaseException] = []

        def run(w: int) -> None:
            try:
                parent = None
                for i in range(APPENDS):
                    entry = _entry(w, i, parent)
                    store.append(targets[w], [entry])
                    parent = entry["id"]
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(w,)) for w in range(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
    else:
        context = multiprocessing.get_context("spawn")
        processes = [context.Process(target=_writer, args=(url, w, targets[w], APPENDS)) for w in range(WRITERS)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(900)
        assert [p.exitcode for p in processes] == [0] * WRITERS
    elapsed = time.monotonic() - started
    try:
        assert _check(store, session_ids) == WRITERS * APPENDS
        if kind != "jsonl":  # JSONL's verify is the file checker; load above already validated every line
            assert store.verify() == []
        rows = store.list_sessions()
        assert sum(r.message_count for r in rows) == WRITERS * APPENDS
    finally:
        store.close()
    print(f"\n{kind} {'one session' if shared else 'own sessions'}: {WRITERS} x {APPENDS} appends "
          f"in {elapsed:.1f} s ({WRITERS * APPENDS / elapsed:,.0f}/s)")


# ------------------------------------------------------------------------------ disk full

_DISK_FULL = """
    import json, os, resource, signal, sys
    from sessiontree import SessionManager, StorageError
    from sessiontree.stores import open_store
    url, sid = sys.argv[1], sys.argv[2]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing us
    manager = SessionManager.open(open_store(url), sid)
    before = ([e["id"] for e in manager.get_entries()], manager.get_leaf_id())
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    limit = int(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    outcome = {}
    try:
        manager.append_message({"role": "user", "content": "y" * 3_000_000, "timestamp": 2})
        outcome["first"] = "appended"
    except StorageError as exc:
        outcome["first"] = "StorageError"
        outcome["message"] = str(exc)
    outcome["unchanged"] = ([e["id"] for e in manager.get_entries()], manager.get_leaf_id()) == before
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # the disk has room again
    outcome["retry"] = manager.append_message({"role": "user", "content": "y" * 3_000_000, "timestamp": 2})
    manager.get_session_store().close()
    print(json.dumps(outcome))
"""


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_disk_full_during_an_append(kind: str, tmp_path) -> None:
    """PostgreSQL's server owns its files; its fault of this kind (the server stopped
    during a write) is in test_postgres_store.py."""
    url = f"sqlite:///{tmp_path / 'full.db'}" if kind == "sqlite" else f"jsonl:///{tmp_path / 'full'}"
    from sessiontree import SessionManager

    manager = SessionManager.create("/w", store=open_store(url))
    first = manager.append_message({"role": "user", "content": "small", "timestamp": 1})
    sid = manager.get_session_id()
    manager.get_session_store().close()
    largest = max(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(tmp_path) for f in fs)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(_DISK_FULL), url, sid, str(largest + 65536)],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["first"] == "StorageError" and outcome["unchanged"], outcome
    store = open_store(url)
    assert [e["id"] for e in store.load(sid).entries] == [first, outcome["retry"]]
    if kind == "sqlite":
        assert store.verify() == []
    store.close()
