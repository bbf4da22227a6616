"""Loaded by ``benchmarks/watch_trace.py``'s watchers (this folder first on ``PYTHONPATH``):
with ``$SESSIONTREE_WATCH_TRACE`` set, the watch's steps are timed into that file, one line
each: ``wall_time pid step seconds cpu_seconds paths`` (``yield``: watchfiles gave a
batch; ``lock``: the run lock taken; ``sync``: ``sync_files`` (read, write, commit);
``alerts``: the budgets checked; ``connect``: a new connection of
its own (the run lock's))."""

from __future__ import annotations

import os

_TRACE = os.environ.get("SESSIONTREE_WATCH_TRACE")
if _TRACE:
    import contextlib
    import time

    import watchfiles

    from sessiontree.cli import budget
    from sessiontree.sync import engine
    from sessiontree.sync.syncer import Syncer

    _out = open(_TRACE, "a", buffering=1)  # open for the process's life

    def _log(step: str, began: float, cpu: float, paths: object = "") -> None:
        _out.write(f"{time.time():.6f} {os.getpid()} {step} {time.perf_counter() - began:.6f}"
                   f" {time.process_time() - cpu:.6f} {paths}\n")

    _watch = watchfiles.watch

    def _traced_watch(*args, **kwargs):  # type: ignore[no-untyped-def]
        began, cpu = time.perf_counter(), time.process_time()
        for changes in _watch(*args, **kwargs):
            _log("yield", began, cpu, ",".join(sorted({p for _, p in changes})))
            yield changes
            began, cpu = time.perf_counter(), time.process_time()

    watchfiles.watch = _traced_watch

    _sync_files = Syncer.sync_files

    def _traced_sync(self, files, *args, **kwargs):  # type: ignore[no-untyped-def]
        began, cpu = time.perf_counter(), time.process_time()
        try:
            return _sync_files(self, files, *args, **kwargs)
        finally:
            _log("sync", began, cpu, ",".join(files))

    Syncer.sync_files = _traced_sync  # type: ignore[method-assign]

    _run_lock = engine.run_lock

    @contextlib.contextmanager
    def _traced_lock(*args, **kwargs):  # type: ignore[no-untyped-def]
        began, cpu = time.perf_counter(), time.process_time()
        with _run_lock(*args, **kwargs):
            _log("lock", began, cpu)
            yield

    engine.run_lock = _traced_lock

    _alerts = budget.watch_alerts

    def _traced_alerts(store):  # type: ignore[no-untyped-def]
        began, cpu = time.perf_counter(), time.process_time()
        try:
            return _alerts(store)
        finally:
            _log("alerts", began, cpu)

    budget.watch_alerts = _traced_alerts

    from sessiontree.stores.postgres.connection import PostgresDatabase

    _connect = PostgresDatabase.connect

    def _traced_connect(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        began, cpu = time.perf_counter(), time.process_time()
        try:
            return _connect(self, *args, **kwargs)
        finally:
            _log("connect", began, cpu)

    PostgresDatabase.connect = _traced_connect  # type: ignore[method-assign]
