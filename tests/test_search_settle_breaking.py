"""Adversarial tests of the SQLite search index's pending tail and its merges
(docs/search.md, "The pending tail" and "When the index is merged").

No write merges; merges run at ``settle_derived``, ``reindex``, ``merge_store`` and
when a search finds a long tail. These tests try to break that: a search while
another process holds the write lock, writers that keep adding during a search's
merge, processes killed in the middle of a settle, concurrent writers, searchers
and settlers, unprivileged readers and older schemas, and merges in small
budgets mixed with reindex, replace and leaf records. Expected hit sets come from
the corpus of ``tests/test_search.py`` (worked out by hand there) or from a
``MemoryStore`` holding the same entries (the scan's rule).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner
from test_search import EXPECTED, fill, fill_tail, header, ids, msg, pending_count

from sessiontree.cli import cli
from sessiontree.search import settle_search_tail
from sessiontree.stores import MemoryStore, SqliteStore, sqlite_search
from sessiontree.stores import sqlite as sqlite_module

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def run(store_path, *args):
    return CliRunner().invoke(cli, ["--store", str(store_path), *args], catch_exceptions=False)


def integrity_check(path):
    conn = sqlite3.connect(path)
    try:
        conn.execute("INSERT INTO search_fts (search_fts, rank) VALUES ('integrity-check', 1)")
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()


def scan_hits(store, queries):
    """The hits of a MemoryStore holding the same sessions: (session, entry, on branch)."""
    fresh = MemoryStore()
    for session_id in store.session_ids():
        parsed = store.load(session_id)
        fresh.create(parsed.header, parsed.entries, parsed.raw)
    return {q: {(h.session_id, h.entry_id, h.on_active_branch) for h in fresh.search(q, limit=None)}
            for q in queries}


def store_hits(store, queries):
    return {q: {(h.session_id, h.entry_id, h.on_active_branch) for h in store.search(q, limit=None)}
            for q in queries}


# -- a search never waits out another writer's lock -------------------------------------------


@pytest.fixture
def locked_tail(tmp_path, monkeypatch):
    """A store whose whole corpus is pending (more than MAX_PENDING records) and a
    second connection holding the write lock (as an import's or a reindex's long
    transaction does)."""
    monkeypatch.setattr(sqlite_search, "MAX_PENDING", 3)
    path = tmp_path / "s.db"
    fill(SqliteStore(path)).close()
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    yield path
    blocker.execute("ROLLBACK")
    blocker.close()


def test_cli_search_answers_while_another_process_holds_the_write_lock(locked_tail):
    """``sessiontree search`` merges a long tail through a writable handle: with the
    lock held by another writer it gives up after SETTLE_TIMEOUT (0.5 s), not the
    store's 30 s busy timeout, and answers by scanning the tail (same hits). Before
    the fix this took 30 s; the bound leaves room for a loaded machine."""
    started = time.monotonic()
    out = run(locked_tail, "search", "retry", "-n", "100", "--json")
    elapsed = time.monotonic() - started
    assert out.exit_code == 0
    assert {hit["entryId"] for hit in json.loads(out.stdout)["hits"]} == EXPECTED["retry"]
    assert elapsed < 15
    readonly = SqliteStore(locked_tail, readonly=True)
    assert pending_count(readonly) == 17  # nothing merged: the lock was held throughout
    readonly.close()


def test_store_search_on_a_writable_store_does_not_wait_its_busy_timeout(locked_tail):
    """The same for ``store.search`` on a writable store (its own merge): the store's
    busy timeout (30 s) is for writes that must happen, not for an optimisation of
    a read; after the search the store's timeout is back for its writes."""
    store = SqliteStore(locked_tail)
    started = time.monotonic()
    assert ids(store.search("retry", limit=None)) == EXPECTED["retry"]
    assert time.monotonic() - started < 15
    assert pending_count(store) == 17
    assert store._conn.execute("PRAGMA busy_timeout").fetchone() == (30_000,)
    store.close()


def test_search_merge_is_bounded_while_writers_keep_adding(tmp_path, monkeypatch):
    """A search merges the tail it found, not everything other writers add while it
    merges: a bulk import appends faster than FTS5 merges, so an unbounded loop would
    keep the search merging until the import ends. Here every merge transaction adds
    SETTLE_BUDGET + 1 new records (as a concurrent writer between transactions would);
    the search must stop after the rounds its own tail needs (4 records, budget 2:
    2 + 2, and one more round that sees the new ones) and still find every hit."""
    monkeypatch.setattr(sqlite_search, "MAX_PENDING", 3)
    monkeypatch.setattr(sqlite_module, "SETTLE_BUDGET", 2)
    store = SqliteStore(tmp_path / "s.db")
    store.create(header("sess-one", "/w"), [msg("a0000000", None, "user", "zebra 0", 0)])
    store.settle_derived()
    store.append("sess-one", [msg(f"a000000{n}", f"a000000{n - 1}", "user", f"zebra {n}", n) for n in range(1, 5)])
    rounds = []
    real = sqlite_search.merge_pending

    def merge_and_write_more(conn, budget=None):
        done = real(conn, budget)
        rounds.append(done)
        if len(rounds) < 50:  # a cap, so that the unfixed loop ends too
            last = conn.execute("SELECT max(seq) FROM entries WHERE session_id = 'sess-one'").fetchone()[0]
            parent = f"a{last:07d}"
            new = [msg(f"a{seq:07d}", f"a{seq - 1:07d}" if seq > last + 1 else parent, "user", f"zebra {seq}", 9)
                   for seq in range(last + 1, last + 4)]
            store._append_in(conn, "sess-one", new, [json.dumps(e).encode() for e in new])
        return done

    monkeypatch.setattr(sqlite_search, "merge_pending", merge_and_write_more)
    hits = store.search("zebra", limit=None)
    assert len(rounds) <= 3
    total = store._conn.execute("SELECT count(*) FROM entries").fetchone()[0]
    assert len(hits) == total  # every entry holds "zebra", merged or pending
    store.close()
