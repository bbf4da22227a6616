"""Two ``archive`` runs at once on a PostgreSQL store (issue 38 item 5): one run at a time
per host, as on SQLite and JSONL, so one run's leftover recovery never takes another live
run's file in flight (docs/postgres.md, "Sync and archive runs").

Deterministic: run A is stopped inside its move to the trash (the file renamed, its
``pending`` record written), run B starts meanwhile. Without the lock B's recovery
"finished" A's file, A's own move then failed ("move failed", exit 1). With it, B waits
until A is done (seen in ``pg_locks``), then finds nothing left to do.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from sessiontree.stores.postgres.store import PostgresStore
from sessiontree.sync import archive as archive_module
from sessiontree.sync.archive import ARCHIVING_SUFFIX, archive
from sync_support import SID, sync_one
from sync_support import agent_file as write_agent_file

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("_fake_home")]

OLD = 1_000_000_000


def _waiting_run_locks(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").fetchone()[0]


def test_a_second_archive_waits_for_the_first_and_trashes_nothing_in_flight(pg_url, tmp_path, _fake_home,
                                                                          monkeypatch):
    setup = PostgresStore(pg_url, create=True)
    path = write_agent_file(_fake_home, session_id=SID)
    os.utime(path, (OLD, OLD))
    assert sync_one(setup, path).status == "new"
    setup.close()
    trash = tmp_path / "trash"
    trash.mkdir()
    in_move = threading.Event()
    go_on = threading.Event()
    moved: list[str] = []

    def slow_trash(p: str, original: str) -> None:
        if not moved:  # run A's move: stop here, its file renamed and its record pending
            moved.append(p)
            in_move.set()
            assert go_on.wait(60)
        else:
            moved.append(p)
        os.rename(p, trash / f"{len(moved)}-{Path(p).name}")

    monkeypatch.setattr(archive_module, "_trash", slow_trash)
    reports: dict[str, object] = {}

    def run(name: str) -> None:
        own = PostgresStore(pg_url)
        try:
            reports[name] = archive(own, older_than=86400.0)
        finally:
            own.close()

    first = threading.Thread(target=run, args=("a",))
    first.start()
    assert in_move.wait(60)
    assert Path(str(path) + ARCHIVING_SUFFIX).exists()
    second = threading.Thread(target=run, args=("b",))
    second.start()
    # B either waits on the run lock (the fix) or runs to its end (no lock): whichever comes first.
    deadline = time.monotonic() + 60
    while second.is_alive() and not _waiting_run_locks(pg_url) and time.monotonic() < deadline:
        time.sleep(0.02)
    go_on.set()
    first.join(60)
    second.join(60)
    a, b = reports["a"], reports["b"]
    assert [(r.status, r.reason) for r in a.files] == [("archived", None)], a.files
    assert a.ok and b.ok
    assert [r.status for r in b.files if r.status == "archived"] == []  # nothing of A's taken over
    assert moved == [str(path) + ARCHIVING_SUFFIX]  # one move, by A
    check = PostgresStore(pg_url)
    try:
        assert [(r.path, r.state) for r in check.archived_files()] == [(str(path), "done")]
    finally:
        check.close()


def test_runs_of_one_host_take_turns_and_other_hosts_do_not_wait(pg_url, monkeypatch):
    store = PostgresStore(pg_url, create=True)
    other = PostgresStore(pg_url)
    try:
        busy: list[str] = []
        with store.run_lock():
            # Same host: a second run finds the lock taken (told once, before it would wait).
            waiter = threading.Thread(target=lambda: other.run_lock(lambda: busy.append("busy")).__enter__())
            waiter.daemon = True
            waiter.start()
            deadline = time.monotonic() + 30
            while not busy and time.monotonic() < deadline:
                time.sleep(0.02)
            assert busy == ["busy"]
            # Another host's run does not wait for this one.
            monkeypatch.setattr(other, "sync_host", "another-host")
            with other.run_lock(lambda: busy.append("other host busy")):
                pass
            assert busy == ["busy"]
    finally:
        store.close()
        other.close()


def _run_lock_holder(url: str) -> int:
    """The server process holding the (one) granted advisory lock: the run lock's connection."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        pids = [row[0] for row in conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted").fetchall()]
    assert len(pids) == 1, pids
    return pids[0]


def test_a_process_reuses_its_run_lock_connection_and_releases_the_lock_between_runs(pg_url):
    # A watch takes the run lock once a batch: one connection for all its batches
    # (docs/postgres.md, "The watcher under CPU contention"), the lock itself not held
    # between them, a connection the server ended replaced, and nothing left at close.
    import psycopg

    store = PostgresStore(pg_url, create=True)
    other = PostgresStore(pg_url)
    try:
        holders = []
        for _ in range(3):
            with store.run_lock():
                holders.append(_run_lock_holder(pg_url))
        assert len(set(holders)) == 1, holders  # one server process for the three runs
        busy: list[str] = []
        with other.run_lock(lambda: busy.append("busy")):  # the same host: free between runs
            pass
        assert busy == []
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (holders[0],))
        time.sleep(0.2)
        with store.run_lock():  # the ended connection replaced, no error
            assert _run_lock_holder(pg_url) != holders[0]
        other.close()
        store.close()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            deadline = time.monotonic() + 10
            while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                               " AND pid <> pg_backend_pid()").fetchone()[0] and time.monotonic() < deadline:
                time.sleep(0.05)
            assert conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                                " AND pid <> pg_backend_pid()").fetchone()[0] == 0  # the kept one closed too
    finally:
        store.close()
        other.close()
