"""Adversarial tests of the SQLite search index's pending tail and its merges
(docs/search.md, "The pending tail" and "When the index is merged").

No write merges; merges run at ``settle_derived``, ``reindex``, ``merge_store`` and
when a search finds a long tail. These tests try to break that: a search while
another process holds the write lock, writers that keep adding during a search's
merge, processes killed in the middle of a settle, concurrent writers, searchers
and settlers, unprivileged readers and older schemas, and merges in small
budgets mixed with reindex, replace and leaf records. Expected hit sets come from
the corpus of ``tests/search/test_search.py`` (worked out by hand there) or from a
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
from pathlib import Path
from unittest import mock

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import search_header as header
from builders import search_message as msg
from search_corpus import CORPUS, EXPECTED, fill, fill_tail, ids, pending_count
from sessiontree import SessionManager
from sessiontree.cli import cli
from sessiontree.errors import SearchQueryError
from sessiontree.format.ids import new_entry_id
from sessiontree.search.query import settle_search_tail
from sessiontree.stores import MemoryStore, SqliteStore
from sessiontree.stores.sqlite import maintenance as sqlite_maintenance
from sessiontree.stores.sqlite import search as sqlite_search
from sessiontree.stores.sqlite import writes as sqlite_writes
from sessiontree.sync.engine import Syncer

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "src")


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
    assert store.db.conn.execute("PRAGMA busy_timeout").fetchone() == (30_000,)
    store.close()


def test_viewer_search_answers_while_another_process_holds_the_write_lock(locked_tail):
    """The web viewer's search (``search_sessions``, the same ``settle_search_tail``)
    on a store opened read-only: no 30 s wait behind the held lock, the same sessions."""
    from sessiontree.web.views import search_sessions

    store = SqliteStore(locked_tail, readonly=True)
    infos = store.list_sessions()
    started = time.monotonic()
    found, _, mode = search_sessions(store, infos, "retry")
    assert time.monotonic() - started < 15
    assert mode == "store" and {info.id for info in found} == {"sess-alpha", "sess-beta", "sess-gamma"}
    store.close()


def _tail_and_a_merge_that_keeps_writing(tmp_path, monkeypatch) -> tuple[SqliteStore, list[int]]:
    """A SQLite store holding one session (``sess-one``) with one merged entry and a
    pending tail of 4, whose ``merge_pending`` appends SETTLE_BUDGET + 1 new records
    after every merge transaction (as a concurrent writer would), for at most 50 rounds
    so that an unbounded loop ends too. Returns the store and the list each round's
    merged count is appended to."""
    store = SqliteStore(tmp_path / "s.db")
    store.create(header("sess-one", "/w"), [msg("a0000000", None, "user", "zebra 0", 0)])
    store.settle_derived()
    store.append("sess-one", [msg(f"a000000{n}", f"a000000{n - 1}", "user", f"zebra {n}", n) for n in range(1, 5)])
    rounds: list[int] = []
    real = sqlite_search.merge_pending

    def merge_and_write_more(conn, budget=None):
        done = real(conn, budget)
        rounds.append(done)
        if len(rounds) < 50:
            last = conn.execute("SELECT max(seq) FROM entries WHERE session_id = 'sess-one'").fetchone()[0]
            new = [msg(f"a{seq:07d}", f"a{seq - 1:07d}", "user", f"zebra {seq}", 9) for seq in range(last + 1, last + 4)]
            store._writes.append_in(conn, "sess-one", new, [json.dumps(e).encode() for e in new])
        return done

    monkeypatch.setattr(sqlite_search, "merge_pending", merge_and_write_more)
    return store, rounds


def test_search_merge_is_bounded_while_writers_keep_adding(tmp_path, monkeypatch):
    """A search merges the tail it found, not everything other writers add while it
    merges: a bulk import appends faster than FTS5 merges, so an unbounded loop would
    keep the search merging until the import ends. Here every merge transaction adds
    SETTLE_BUDGET + 1 new records (as a concurrent writer between transactions would);
    the search must stop after the rounds its own tail needs (4 records, budget 2:
    2 + 2, and one more round that sees the new ones) and still find every hit."""
    monkeypatch.setattr(sqlite_search, "MAX_PENDING", 3)
    monkeypatch.setattr(sqlite_maintenance, "SETTLE_BUDGET", 2)
    store, rounds = _tail_and_a_merge_that_keeps_writing(tmp_path, monkeypatch)
    hits = store.search("zebra", limit=None)
    assert len(rounds) <= 3
    total = store.db.conn.execute("SELECT count(*) FROM entries").fetchone()[0]
    assert len(hits) == total  # every entry holds "zebra", merged or pending
    store.close()


# -- concurrent writers, searchers and settlers -------------------------------------------------

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
QUERIES = ["alpha", "bravo charlie", "echo", "ta", "zz"]

_WORKER = r'''
import json, os, random, sys, time
from sessiontree.stores import SqliteStore
from sessiontree.stores.sqlite import search as sqlite_search
from sessiontree.stores.sqlite import maintenance as sqlite_maintenance
from sessiontree.search.query import settle_search_tail
role, path, seconds, seed = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
sqlite_search.MAX_PENDING = 5
sqlite_maintenance.SETTLE_BUDGET = 3
words = %(words)r
queries = %(queries)r
rng = random.Random(seed)
end = time.monotonic() + seconds
store = SqliteStore(path)

def message(entry_id, parent, n):
    text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 4))) + " zz" * (n %% 3 == 0)
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z",
            "message": {"role": "user", "content": text, "timestamp": 1}}

if role == "writer":
    counter, sessions = 0, {}
    while time.monotonic() < end:
        op = rng.random()
        counter += 1
        if op < 0.25 or not sessions:
            sid = "s-%%d-%%d" %% (seed, counter)
            entries = [message("e%%07d" %% i, "e%%07d" %% (i - 1) if i else None, i) for i in range(rng.randint(1, 6))]
            store.create({"type": "session", "version": 4, "id": sid, "createdAt": "2026-01-01T00:00:00.000Z",
                          "cwd": "/w"}, entries)
            sessions[sid] = len(entries)
        elif op < 0.35:
            sid = rng.choice(sorted(sessions))
            store.delete(sid)
            del sessions[sid]
        else:
            sid = rng.choice(sorted(sessions))
            n = sessions[sid]
            # Sometimes a branch from an earlier entry: the active branch changes.
            parent = "e%%07d" %% (rng.randrange(n) if rng.random() < 0.2 else n - 1) if n else None
            batch = [message("e%%07d" %% (n + i), parent if i == 0 else "e%%07d" %% (n + i - 1), n + i)
                     for i in range(rng.randint(1, 4))]
            store.append(sid, batch)
            sessions[sid] = n + len(batch)
elif role == "searcher":
    reader = SqliteStore(path, readonly=True)
    while time.monotonic() < end:
        for q in queries:
            target = store if rng.random() < 0.5 else reader
            if target is reader:
                settle_search_tail(reader)
            hits = target.search(q, limit=None)
            pairs = [(h.session_id, h.entry_id) for h in hits]
            if len(pairs) != len(set(pairs)):
                print("DUPLICATE", q, pairs, flush=True)
                sys.exit(3)
else:
    while time.monotonic() < end:
        store.settle_derived()
        time.sleep(rng.random() * 0.01)
store.close()
'''


@pytest.mark.slow
def test_concurrent_writers_searchers_and_settlers_agree_with_a_scan(tmp_path):
    """One process writes (creates, appends, branches, deletes), one searches (merging
    whenever more than 5 records are pending, through the writable store and through
    a read-only one's second handle), one settles in transactions of 3 records, all
    at once for a few seconds. No search may return an entry twice (merged and
    pending at once); at the end the hits are a scan's, FTS5 passes its integrity
    check, and after a full settle nothing is pending."""
    path = str(tmp_path / "s.db")
    SqliteStore(path).close()
    code = _WORKER % {"words": WORDS, "queries": QUERIES}
    env = dict(os.environ, PYTHONPATH=SRC)
    procs = [subprocess.Popen([sys.executable, "-c", code, role, path, "6", str(seed)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for seed, role in enumerate(["writer", "searcher", "settler", "searcher"])]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, (out, err)
    integrity_check(path)
    store = SqliteStore(path)
    assert store.session_ids()
    expected = scan_hits(store, QUERIES)
    assert store_hits(store, QUERIES) == expected
    store.settle_derived()
    assert pending_count(store) == 0
    assert store_hits(store, QUERIES) == expected
    store.close()
    integrity_check(path)


# -- killed in the middle of a settle -----------------------------------------------------------

_SETTLER = r'''
import sys
from sessiontree.stores import SqliteStore
from sessiontree.stores.sqlite import maintenance as sqlite_maintenance
sqlite_maintenance.SETTLE_BUDGET = int(sys.argv[2])
store = SqliteStore(sys.argv[1])
print("open", flush=True)
store.settle_derived()
print("done", flush=True)
'''


@pytest.mark.slow
def test_settle_killed_at_random_points_leaves_a_consistent_index(tmp_path):
    """SIGKILL a process settling a long tail (transactions of 40 records), many times
    at random points (a killed settle is resumed by the next one; once one finished,
    the store starts again from a copy of its all-pending state); after each kill
    FTS5 and SQLite pass their integrity checks and the hits are a scan's; at the end
    a settle leaves the index a rebuild would."""
    import random
    import shutil

    rng = random.Random(7)
    path = str(tmp_path / "s.db")
    store = SqliteStore(path)
    for n in range(60):
        entries = [msg(f"e{n:03d}{i:04d}", f"e{n:03d}{i - 1:04d}" if i else None, "user",
                       " ".join(rng.choice(WORDS) for _ in range(30)) + " zz" * (i % 5 == 0), 0)
                   for i in range(25)]
        store.create(header(f"sess-{n:03d}", "/w"), entries)
    expected = scan_hits(store, QUERIES)
    total = pending_count(store)
    store.close()
    pristine = str(tmp_path / "pristine.db")
    shutil.copyfile(path, pristine)  # closed: the WAL was checkpointed into the file
    env = dict(os.environ, PYTHONPATH=SRC)
    left = [total]
    for _ in range(10):
        if left[-1] == 0:
            for suffix in ("-wal", "-shm"):
                if os.path.exists(path + suffix):
                    os.remove(path + suffix)
            shutil.copyfile(pristine, path)
        proc = subprocess.Popen([sys.executable, "-c", _SETTLER, path, "40"], env=env,
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline() == "open\n"
        time.sleep(rng.random() * 0.4)
        proc.kill()
        proc.communicate()
        integrity_check(path)
        reader = SqliteStore(path, readonly=True)
        left.append(pending_count(reader))
        assert store_hits(reader, QUERIES) == expected
        reader.close()
    assert any(0 < n < total for n in left), left  # some kills fell inside a settle
    store = SqliteStore(path)
    store.settle_derived()
    assert pending_count(store) == 0
    merged = sorted(store.db.conn.execute("SELECT session_id, seq, entry_id, chars FROM search_entries"))
    ranked = {q: [(h.entry_id, round(h.rank, 9)) for h in store.search(q, limit=None)] for q in QUERIES}
    store.reindex()
    assert sorted(store.db.conn.execute("SELECT session_id, seq, entry_id, chars FROM search_entries")) == merged
    assert {q: [(h.entry_id, round(h.rank, 9)) for h in store.search(q, limit=None)] for q in QUERIES} == ranked
    assert store_hits(store, QUERIES) == expected
    store.close()
    integrity_check(path)


# -- read-only paths: no permission, an older schema ----------------------------------------------

_CLI_SEARCH = ("import sys; from sessiontree.stores.sqlite import search as sqlite_search; sqlite_search.MAX_PENDING = 3;"
               "from sessiontree.cli import cli;"
               "sys.argv = ['sessiontree', '--store', sys.argv[1], 'search', '--json', '-n', '100', 'retry']; cli()")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0 or not os.path.exists("/usr/bin/setpriv"),
                    reason="needs root and setpriv to drop the capability that ignores file permissions")
@pytest.mark.parametrize("directory_mode", [0o555, 0o755])
def test_cli_search_of_a_store_it_may_not_write_scans_the_tail(tmp_path, directory_mode):
    """``sessiontree search`` by a process that may not write the file (root without
    CAP_DAC_OVERRIDE, so the permission bits apply: the file 0444; its directory
    read-only too, or writable): the merge's writable open is refused, the search
    scans the long tail and answers with the same hits, and the database file is
    left byte for byte."""
    os.chmod(tmp_path, 0o755)
    directory = tmp_path / "store"
    directory.mkdir()
    path = str(directory / "s.db")
    fill_tail(path).close()
    os.chmod(path, 0o444)
    os.chmod(directory, directory_mode)
    before = Path(path).read_bytes()
    try:
        result = subprocess.run(
            ["/usr/bin/setpriv", "--bounding-set=-dac_override,-dac_read_search", sys.executable, "-c",
             _CLI_SEARCH, path], check=False, capture_output=True, text=True, timeout=120,
            env=dict(os.environ, PYTHONPATH=SRC))
    finally:
        os.chmod(directory, 0o755)
    assert result.returncode == 0, result.stderr
    assert {hit["entryId"] for hit in json.loads(result.stdout)["hits"]} == EXPECTED["retry"]
    assert Path(path).read_bytes() == before
    reader = SqliteStore(path, readonly=True)
    assert pending_count(reader) > 3  # still pending: nothing could merge it
    reader.close()


def test_cli_search_does_not_migrate_an_older_schema(tmp_path, monkeypatch):
    """A store of an older schema (before ``m008_search_branch``) with a long pending
    tail: ``sessiontree search`` (and the viewer, through the same
    ``settle_search_tail``) must not open it writable, as that would migrate it;
    it scans the tail and answers with the same hits, the schema untouched."""
    monkeypatch.setattr(sqlite_search, "MAX_PENDING", 3)
    path = str(tmp_path / "s.db")
    fill_tail(path).close()
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE search_off_branch")
    conn.execute("DELETE FROM schema_migrations WHERE name = 'm008_search_branch'")
    conn.commit()
    conn.close()
    reader = SqliteStore(path, readonly=True)
    steps = reader.applied_migrations()
    tail = pending_count(reader)
    assert settle_search_tail(reader) == 0
    reader.close()
    out = run(path, "search", "retry", "-n", "100", "--json")
    assert {hit["entryId"] for hit in json.loads(out.stdout)["hits"]} == EXPECTED["retry"]
    reader = SqliteStore(path, readonly=True)
    assert reader.applied_migrations() == steps and "m008_search_branch" not in steps
    assert pending_count(reader) == tail
    reader.close()


# -- merges in small budgets mixed with reindex, replace, leaf records, clock steps ------------------




TEXTS = ["retry the flaky test", "dedup ids in parser.py", "東京 x", "nothing", "py", "RETRY again"]
PROBES = ["retry", "dedup", "py", "東京", "x"]

step = st.one_of(
    st.tuples(st.just("create"), st.lists(st.sampled_from(TEXTS), max_size=4)),
    st.tuples(st.just("append"), st.integers(0, 5), st.lists(st.sampled_from(TEXTS), min_size=1, max_size=4)),
    st.tuples(st.just("rebranch"), st.integers(0, 5), st.integers(0, 50), st.sampled_from(TEXTS)),
    st.tuples(st.just("leaf"), st.integers(0, 5), st.integers(0, 50)),
    st.tuples(st.just("delete"), st.integers(0, 5)),
    st.tuples(st.just("fork"), st.integers(0, 5)),
    st.tuples(st.just("reindex"), st.integers(0, 5)),
    st.tuples(st.just("replace"), st.integers(0, 5), st.integers(0, 50), st.sampled_from(TEXTS)),
    st.tuples(st.just("settle"), st.integers(1, 3)),
    st.tuples(st.just("search"), st.integers(1, 3)),
    st.tuples(st.just("clock-back"),),
)


def full_answers(store):
    return {q: [(h.session_id, h.entry_id, round(h.rank, 9), h.on_active_branch, h.title)
                for h in store.search(q, limit=None)] for q in PROBES}


def sets_of(store):
    return {q: {(h.session_id, h.entry_id, h.on_active_branch, h.title) for h in store.search(q, limit=None)}
            for q in PROBES}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=14))
def test_budgeted_merges_with_reindex_replace_and_clock_steps_equal_a_rebuild(tmp_path_factory, steps):
    """Any mix of writes (appends, branches, leaf records, forks, deletes, a one-session
    reindex, replace_session, a write with the clock stepped back) and partial merges
    (settle in transactions of 1-3 records; a search merging past MAX_PENDING=2):
    the hits (with their active-branch flags and titles) are a scan's at every end
    state, a limit keeps a prefix of them, and after a full settle the index, ranks included, is a rebuild's."""
    path = str(tmp_path_factory.mktemp("h") / "s.db")
    store = SqliteStore(path)
    sessions: list[str] = []
    budget = sqlite_maintenance.SETTLE_BUDGET
    pending_bound = sqlite_search.MAX_PENDING

    def pick(index):
        return sessions[index % len(sessions)]

    try:
        for op in steps:
            kind = op[0]
            if kind == "create":
                manager = SessionManager.create("/w", store=store)
                for text in op[1]:
                    manager.append_message({"role": "user", "content": text, "timestamp": 1})
                manager.append_session_info(op[1][0] if op[1] else "s")
                sessions.append(manager.get_session_id())
            elif kind == "settle":
                sqlite_maintenance.SETTLE_BUDGET = op[1]
                store.settle_derived()
            elif kind == "search":
                sqlite_maintenance.SETTLE_BUDGET = op[1]
                sqlite_search.MAX_PENDING = 2
                store.search("retry", limit=3)
            elif kind == "clock-back":
                # A write with the clock far behind (updated_at is then max + 1).
                with mock.patch.object(sqlite_writes.time, "time_ns", lambda: 1_000_000_000):
                    manager = SessionManager.create("/w", store=store)
                    manager.append_message({"role": "user", "content": "retry clock", "timestamp": 1})
                    sessions.append(manager.get_session_id())
            elif not sessions:
                continue
            elif kind == "append":
                manager = SessionManager.open(store, pick(op[1]))
                for text in op[2]:
                    manager.append_message({"role": "user", "content": text, "timestamp": 2})
            elif kind == "rebranch":
                manager = SessionManager.open(store, pick(op[1]))
                entries = manager.get_entries()
                manager.branch(entries[op[2] % len(entries)]["id"])
                manager.append_message({"role": "user", "content": op[3], "timestamp": 3})
            elif kind == "leaf":
                session_id = pick(op[1])
                entries = store.load(session_id).entries
                target = entries[op[2] % len(entries)]["id"]
                store.append(session_id, [{"type": "leaf", "id": new_entry_id({e["id"] for e in entries}),
                                           "parentId": entries[-1]["id"],
                                           "timestamp": "2026-01-01T00:00:00.000Z", "targetId": target}])
            elif kind == "delete":
                store.delete(sessions.pop(op[1] % len(sessions)))
            elif kind == "fork":
                sessions.append(SessionManager.open(store, pick(op[1])).fork_to("/w2", store).get_session_id())
            elif kind == "reindex":
                store.reindex(pick(op[1]))
            elif kind == "replace":
                # sync --replace: the same session rewritten, cut short, with one new entry.
                parsed = store.load(pick(op[1]))
                kept = parsed.entries[:op[2] % (len(parsed.entries) + 1)]
                parent = kept[-1]["id"] if kept else None
                kept = [*kept, msg(new_entry_id({e["id"] for e in kept}), parent, "user", op[3], 9)]
                store.replace_session(parsed.header, kept)
            sqlite_maintenance.SETTLE_BUDGET = budget
            sqlite_search.MAX_PENDING = pending_bound
        store.db.conn.execute("INSERT INTO search_fts (search_fts, rank) VALUES ('integrity-check', 1)")
        expected = {q: {(h.session_id, h.entry_id, h.on_active_branch, h.title) for h in hits}
                    for q, hits in ((q, _memory(store).search(q, limit=None)) for q in PROBES)}
        assert sets_of(store) == expected
        for q in PROBES:  # a limit keeps the best hits: a prefix of the whole answer
            whole = [(h.session_id, h.entry_id) for h in store.search(q, limit=None)]
            for limit in (1, 2, 3):
                assert [(h.session_id, h.entry_id) for h in store.search(q, limit=limit)] == whole[:limit]
        store.settle_derived()
        assert pending_count(store) == 0
        settled = full_answers(store)
        assert {q: {(s, e, b, t) for s, e, _, b, t in rows} for q, rows in settled.items()} == expected
        store.reindex()
        assert full_answers(store) == settled
    finally:
        sqlite_maintenance.SETTLE_BUDGET = budget
        sqlite_search.MAX_PENDING = pending_bound
        store.close()


def _memory(store):
    fresh = MemoryStore()
    for session_id in store.session_ids():
        parsed = store.load(session_id)
        fresh.create(parsed.header, parsed.entries, parsed.raw)
    return fresh


# -- an interrupted sync ----------------------------------------------------------------------------


def test_interrupted_sync_leaves_the_rest_pending_like_import(tmp_path):
    """Ctrl-C during ``sessiontree sync`` sets its stop event (SIGINT is caught so the
    current file is finished). The sync must then stop, as an interrupted import does,
    and not go on to settle the whole pending tail: with SIGINT caught, a second
    Ctrl-C could not interrupt that settle either. What it wrote stays pending and is
    still found."""
    paths = []
    for head, entries in CORPUS:
        path = tmp_path / f"{head['id']}.jsonl"
        path.write_text("".join(json.dumps(record) + "\n" for record in [head, *entries]))
        paths.append(str(path))
    store = SqliteStore(tmp_path / "s.db")
    stop = threading.Event()
    settles: list[int] = []
    real_settle = store.settle_derived
    store.settle_derived = lambda **kw: settles.append(1) or real_settle(**kw)  # type: ignore[method-assign]
    report = Syncer(store).sync_files(paths, on_file=lambda path: stop.set(), stop=stop)
    assert report.interrupted and report.counts()["new"] == 1
    assert settles == []  # no settle after the stop
    # A new session's derived data is written with it, from the entries in hand (issue 42):
    # nothing of the first session is left pending, and nothing else was written.
    assert pending_count(store) == 0 and store.session_ids() == [CORPUS[0][0]["id"]]
    assert ids(store.search("retry", limit=None)) == {"a1000001", "a2000002", "a5000005", "a7000007", "a8000008"}
    store.close()


def test_settle_derived_is_bounded_while_writers_keep_adding(tmp_path, monkeypatch):
    """As the search's merge above, for ``store.settle_derived()`` (the end of an
    import or a sync): every transaction adds SETTLE_BUDGET + 1 records; a settle of
    a 4-record tail in budgets of 2 should end after about three rounds."""
    monkeypatch.setattr(sqlite_maintenance, "SETTLE_BUDGET", 2)
    store, rounds = _tail_and_a_merge_that_keeps_writing(tmp_path, monkeypatch)
    store.settle_derived()
    store.close()
    assert len(rounds) <= 3


# -- arbitrary text: pending and merged entries match alike ---------------------------------------

ALPHABET = st.sampled_from([*list('aAbB-_ ."*:'), "\x00", "�", "ſ", "K", "K", "k", "ß", "Σ", "ς", "σ", "µ", "μ", "東", "é", "É", "🎉", "\n"])  # noqa: RUF001 - look-alike letters on purpose


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(ALPHABET, min_size=0, max_size=12), min_size=1, max_size=6),
       st.lists(st.text(ALPHABET, min_size=1, max_size=4), min_size=1, max_size=3))
def test_pending_and_merged_entries_answer_arbitrary_text_alike(tmp_path_factory, texts, queries):
    """Texts and queries over a small alphabet of the hard cases (NUL, lone surrogates,
    the code points folding to ASCII, final sigma, micro sign, quotes and FTS5
    syntax): the hits of an all-pending store, of the same store merged, and of a
    scan are the same set, for every query that parses."""
    path = str(tmp_path_factory.mktemp("t") / "s.db")
    store = SqliteStore(path)
    store.create(header("sess-t", "/w"), [msg(f"t{i:07d}", f"t{i - 1:07d}" if i else None, "user", text, i % 10)
                                          for i, text in enumerate(texts)])
    memory = _memory(store)
    try:
        for query in queries:
            try:
                expected = {h.entry_id for h in memory.search(query, limit=None)}
            except SearchQueryError:
                continue
            assert {h.entry_id for h in store.search(query, limit=None)} == expected, query
        sqlite_search.merge_store(store)
        assert pending_count(store) == 0
        for query in queries:
            try:
                expected = {h.entry_id for h in memory.search(query, limit=None)}
            except SearchQueryError:
                continue
            assert {h.entry_id for h in store.search(query, limit=None)} == expected, query
    finally:
        store.close()
