"""The JSONL append path under attack: the fast path through a kept descriptor, the full
path behind it, torn records, in-place truncations and copies, evicted descriptors,
forks holding locks, many writers at once, and failing writes.

Each test sets up a race or an odd file that once broke an append or that an append
must survive, and checks that no entry is lost, misplaced or written onto a torn record.
"""

from __future__ import annotations

import fcntl
import gc
import json
import os
import random
import threading
import time

import pytest

import sessiontree.stores.jsonl.files as jsonl_files
import sessiontree.stores.jsonl.writes as jsonl_module
from builders import custom, header
from sessiontree.errors import InvalidSessionError, SessionNotFoundError, StorageError
from sessiontree.format import jsonio
from sessiontree.format.codec import read_session_file
from sessiontree.format.migrate import migrate_file
from sessiontree.session.manager import SessionManager
from sessiontree.stores.jsonl.store import JsonlStore
from support import (
    fds_to,
    ids_in,
    start_append_paused_in_write,
    wait_child,
)


def ids_in_complete_lines(path: str) -> list[str]:
    """Entry ids of the newline-terminated records (a torn last line left out)."""
    data = open(path, "rb").read()
    lines = data[: data.rfind(b"\n") + 1].splitlines()[1:]
    return [json.loads(line)["id"] for line in lines]


# -- the fast path: a kept descriptor ---------------------------------------------------------


def test_fast_path_does_not_append_onto_a_torn_record_after_a_late_hold(tmp_path):
    """Fast path: Thread 1's append releases the file lock and only then keeps
    its descriptor (_hold). If meanwhile another writer leaves a torn record and a
    second append of this store is refused for it, the refused append's id scan has
    already set the cached size to the torn size. The late _hold then re-arms the fast
    path, whose size check passes and which writes with newline_ended=True: the next
    entry is glued onto the torn line, reported as appended, and the file is unreadable."""
    store = JsonlStore(tmp_path)
    store.create(header("a"), [custom("a0")])
    path = store.location("a")
    real_hold = store.folder.hold
    at_hold, go = threading.Event(), threading.Event()

    def late_hold(*args):
        at_hold.set()
        go.wait(5)
        real_hold(*args)

    store.folder.hold = late_hold  # instance attribute: only this store, only this test
    first = threading.Thread(target=store.append, args=("a", [custom("a1", "a0")]))
    first.start()
    assert at_hold.wait(5)  # a1 is written and the lock released; the descriptor not yet kept
    del store.folder.hold
    with open(path, "ab") as handle:
        handle.write(b'{"type":"custom","id":"x')  # another writer's torn record
    with pytest.raises(InvalidSessionError, match="torn"):
        store.append("a", [custom("a2", "a1")])
    go.set()
    first.join(5)
    with pytest.raises(InvalidSessionError, match="torn"):
        store.append("a", [custom("a3", "a1")])  # the torn record is still there
    # Nothing was glued onto the torn line: the file ends with the other writer's bytes.
    assert open(path, "rb").read().endswith(b'}\n{"type":"custom","id":"x')
    assert ids_in_complete_lines(path) == ["a0", "a1"]


def _fork_appending(store: JsonlStore, session_id: str, entries: list[dict], delay: float = 0.0) -> int:
    """Fork a child that waits ``delay`` seconds, appends ``entries`` to ``session_id`` and
    exits 0 (1 on any error; a hang is the caller's ``wait_child`` timeout); its pid."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            time.sleep(delay)
            store.append(session_id, entries)
            os._exit(0)
        except BaseException:
            os._exit(1)
    return pid


def test_forked_child_does_not_deadlock_when_another_thread_was_appending(tmp_path):
    """Fast path + fork: _held_lock is held for the whole fast-path append (flock
    wait, write, fsync). A fork() from another thread during that time gives the child a
    copy of the lock that is locked forever: the child's next append of ANY session of
    the store hangs (the pid check that would reset the state sits behind the lock).
    Fix: os.register_at_fork(after_in_child=...) to re-create the locks and drop the
    descriptors."""
    store = JsonlStore(tmp_path, fsync=False)
    store.create(header("a"), [custom("a0")])
    store.create(header("b"), [custom("b0")])
    store.append("a", [custom("a1", "a0")])  # keeps a's descriptor
    worker, release = start_append_paused_in_write(store, "a", [custom("a2", "a1")])  # holding its locks
    pid = _fork_appending(store, "b", [custom("b1", "b0")])  # another session entirely
    release.set()
    worker.join(5)
    status = wait_child(pid, 2.5)
    assert status is not None, "the forked child hung in JsonlStore.append (inherited lock)"
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_forked_child_does_not_close_descriptor_numbers_it_reused(tmp_path):
    """Fast path + fork: After fork the child's first append closes the *numbers*
    of the parent's kept descriptors (_close_all). A child that has reused such a
    number (daemonizing: close inherited descriptors, reopen stdio/log at the same
    numbers) gets its own file closed; the store's next open then takes that number,
    so the child's later writes to "its log" land in the session file."""
    store = JsonlStore(tmp_path / "s")
    store.create(header("a"), [custom("a0")])
    store.append("a", [custom("a1", "a0")])
    held, = store.folder.held.values()
    kept_fd = held.fd
    session_path = store.location("a")
    log = str(tmp_path / "child.log")
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 0
        try:
            mine = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            if mine != kept_fd:  # the at-fork hook may already have freed that number
                os.dup2(mine, kept_fd)  # the child's log now lives at that number
                os.close(mine)
            store.append("a", [custom("c1", "a1")])
            os.write(kept_fd, b"child log line\n")
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0, "the child's own log descriptor was closed under it"
    assert open(log, "rb").read() == b"child log line\n"
    assert ids_in(session_path) == ["a0", "a1", "c1"]


def test_delete_racing_an_append_keeps_no_descriptor_of_the_deleted_file(tmp_path, no_trash):
    """Fast path, resource leak: delete() closes the kept descriptor *before* taking
    the file lock. An append that runs in that window keeps a new descriptor of the file,
    which delete() then unlinks: the store pins the deleted inode (disk space) until LRU
    eviction or close(), since nothing appends to a deleted session again."""
    store = JsonlStore(tmp_path / "s")
    store.create(header("a"), [custom("a0")])
    path = store.location("a")
    real_release = store.folder.release

    raced = []

    def release_then_race(p):
        real_release(p)
        if raced:
            return  # delete() releases again after the removal; race only the first time
        raced.append(True)
        racer = threading.Thread(target=store.append, args=("a", [custom("a1", "a0")]))
        racer.start()
        racer.join(5)

    store.folder.release = release_then_race
    store.delete("a")
    del store.folder.release
    assert not os.path.exists(path)
    assert fds_to(path) == [], "the store still holds a descriptor of the deleted session file"


# -- the full path behind the fast path ----------------------------------------------------
# These caches predate the fast path (HEAD~1 behaves the same) but sit on the fallback
# path that the fast path hands every "something changed" case to.


def test_id_guard_sees_a_torn_record_that_another_writer_completes_later(tmp_path):
    """_file_ids: The refused append's scan caches the torn size as
    'read up to here'. When the other writer then finishes its line, the next scan
    starts mid-record, cannot parse it and misses its id: the store appends the same id
    again and the file is unreadable (duplicate entry id)."""
    store = JsonlStore(tmp_path)
    store.create(header("a"), [custom("a0")])
    store.append("a", [custom("a1", "a0")])
    path = store.location("a")
    line = jsonio.dumps(custom("dup", "a1")) + b"\n"
    with open(path, "ab") as handle:
        handle.write(line[:20])  # the other writer's first write...
    with pytest.raises(InvalidSessionError, match="torn"):
        store.append("a", [custom("a2", "a1")])
    with open(path, "ab") as handle:
        handle.write(line[20:])  # ...and its second
    with pytest.raises(InvalidSessionError, match='"dup" is already used'):
        store.append("a", [custom("dup", "a1")])
    assert ids_in(path) == ["a0", "a1", "dup"]


def test_append_after_the_file_was_truncated_in_place_refuses_like_a_fresh_store(tmp_path):
    """Per-inode header cache _current: `: > file` / truncate keeps the
    inode, so a store that appended before skips the header check and writes entries
    into an empty file: a headerless, unreadable file. A fresh store refuses."""
    store = JsonlStore(tmp_path)
    store.create(header("a"), [custom("a0")])
    store.append("a", [custom("a1", "a0")])
    path = store.location("a")
    os.truncate(path, 0)
    with pytest.raises(SessionNotFoundError):
        JsonlStore(tmp_path).append("a", [custom("a2", "a1")])
    with pytest.raises((SessionNotFoundError, InvalidSessionError)):
        store.append("a", [custom("a2", "a1")])
    assert open(path, "rb").read() == b""


def _copy_over_a_then_append_to_a(store: JsonlStore, path_a: str, data: bytes) -> None:
    """Overwrite session a's file in place with ``data`` (what ``cp b.jsonl a.jsonl`` does:
    same inode), then append ``x2`` to a; a refusal (not found, invalid) is an answer too."""
    with open(path_a, "r+b") as handle:
        handle.truncate(0)
        handle.write(data)
    try:
        store.append("a", [custom("x2", "x1")])
    except (SessionNotFoundError, InvalidSessionError):
        pass


def test_append_after_an_in_place_copy_of_another_session_goes_nowhere(tmp_path):
    """_current and _find's header cache: `cp b.jsonl a.jsonl` rewrites
    a's file in place (same inode). The store that appended to a before still believes
    the inode holds a, and appends a's entry to what is now session b's content."""
    store = JsonlStore(tmp_path)
    store.create(header("a"), [custom("x0")])
    store.create(header("b"), [custom("y0")])
    store.append("a", [custom("x1", "x0")])
    path_a, path_b = store.location("a"), store.location("b")
    data = open(path_b, "rb").read()
    _copy_over_a_then_append_to_a(store, path_a, data)
    assert open(path_a, "rb").read() == data, "session a's entry was written into session b's bytes"


def test_evicted_descriptor_and_a_reused_inode_do_not_redirect_appends(tmp_path):
    """Caches, reachable again after LRU eviction: While the store keeps
    a session's descriptor, the inode cannot be reused; after eviction (9+ sessions) it
    can. Session S at a fixed path is removed and a new session T created at that path
    (open_file on a fixed name); ext4 hands T the freed inode. The cached header and
    _current match that inode, so appending to S writes S's entry into T's file and
    reports success. (On filesystems that do not reuse the inode at once this passes.)"""
    store = JsonlStore(tmp_path)
    fixed = str(tmp_path / "fixed.jsonl")
    store.create(header("S"), [custom("s0")], path=fixed)
    store.append("S", [custom("s1", "s0")])
    for n in range(jsonl_files._HELD_FILES):
        store.create(header(f"o{n}"), [custom("z")])
        store.append(f"o{n}", [custom("z1", "z")])
    assert fixed not in store.folder.held
    os.unlink(fixed)  # the user removes the session file
    JsonlStore(tmp_path).create(header("T"), [custom("t0")], path=fixed)
    before = open(fixed, "rb").read()
    with pytest.raises(SessionNotFoundError):
        store.append("S", [custom("s2", "s1")])
    assert open(fixed, "rb").read() == before


# -- many writers, failing writes, collected stores -----------------------------------------


def _worker_appends(directory: str, tag: str, sessions: list[str], count: int, queue) -> None:
    stores = [JsonlStore(directory, fsync=False) for _ in range(2)]
    done: list[tuple[str, str]] = []
    lock = threading.Lock()
    rng = random.Random(tag)

    def run(t: int) -> None:
        for k in range(count):
            sid = sessions[(k + t) % len(sessions)]
            entry_id = f"{tag}-{t}-{k}"
            stores[t % 2].append(sid, [custom(entry_id)])
            with lock:
                done.append((sid, entry_id))
            if rng.random() < 0.05:
                stores[t % 2].close()

    threads = [threading.Thread(target=run, args=(t,)) for t in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if queue is not None:
        queue.put(done)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_threads_processes_and_a_rewriter_lose_nothing(tmp_path, method):
    """Threads on one and on separate stores, forked and spawned processes, more
    sessions than kept descriptors, close() mid-run, and another store rewriting the
    headers (new inode) and migrating: every reported append is in its file once."""
    import multiprocessing

    directory = str(tmp_path)
    setup = JsonlStore(directory)
    sessions = [f"s{n}" for n in range(jsonl_files._HELD_FILES + 3)]
    for sid in sessions:
        setup.create(header(sid))
    ctx = multiprocessing.get_context(method)
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker_appends, args=(directory, f"p{n}", sessions, 40, queue)) for n in range(2)]
    for proc in procs:
        proc.start()
    stop = threading.Event()

    def rewrite() -> None:
        other = JsonlStore(directory)
        n = 0
        while not stop.is_set() or n < len(sessions):  # every header rewritten at least once
            sid = sessions[n % len(sessions)]
            other.replace_header(sid, header(sid, name=f"n{n}"))
            migrate_file(other.location(sid), backup=False)  # already format 4: untouched
            n += 1

    rewriter = threading.Thread(target=rewrite)
    rewriter.start()
    results: list = []

    class Collect:  # the main process appends too, through the same helper
        def put(self, value):
            results.append(value)

    _worker_appends(directory, "main", sessions, 40, Collect())
    done: list[tuple[str, str]] = list(results[0])
    for _ in procs:
        done += queue.get(timeout=30)
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    stop.set()
    rewriter.join()
    expected: dict[str, list[str]] = {}
    for sid, entry_id in done:
        expected.setdefault(sid, []).append(entry_id)
    reader = JsonlStore(directory)
    for sid in sessions:
        got = ids_in(reader.location(sid))
        assert sorted(got) == sorted(expected.get(sid, []))
        assert read_session_file(reader.location(sid)).header.get("name", "").startswith("n")


def test_failing_fsync_on_the_fast_path_leaves_the_file_byte_identical(tmp_path, monkeypatch):
    """The write succeeds, fsync fails -> rolled back; the fast path still works after."""
    store = JsonlStore(tmp_path)
    store.create(header("a"), [custom("a0")])
    store.append("a", [custom("a1", "a0")])
    path = store.location("a")
    before = open(path, "rb").read()
    calls = {"n": 0}
    real_fsync = os.fsync

    def failing_fsync(fd):
        calls["n"] += 1
        raise OSError(5, "EIO (injected)")

    monkeypatch.setattr(jsonl_module.os, "fsync", failing_fsync)
    with pytest.raises(StorageError):
        store.append("a", [custom("a2", "a1")])
    monkeypatch.setattr(jsonl_module.os, "fsync", real_fsync)
    assert calls["n"] >= 1 and open(path, "rb").read() == before
    assert path in store.folder.held  # still on the fast path
    store.append("a", [custom("a2", "a1")])
    with pytest.raises(InvalidSessionError):
        store.append("a", [custom("a2", "a1")])
    assert ids_in(path) == ["a0", "a1", "a2"]


def test_garbage_collected_store_and_manager_close_their_descriptors(tmp_path):
    """The weakref finalizer closes kept descriptors of an unreachable store."""
    directory = str(tmp_path / "s")
    manager = SessionManager.create("/w", directory)
    manager.append_message({"role": "user", "content": "x"})
    manager.append_message({"role": "user", "content": "y"})
    assert len(fds_to(directory)) == 1
    del manager
    gc.collect()
    assert fds_to(directory) == []


# -- in-place copies, old formats, forks and locks ----------------------------------------------


def test_fast_path_appends_into_another_session_after_a_same_size_in_place_copy(tmp_path):
    """Fast path: the full path re-reads the header because `cp b a` rewrites
    a's file in place (same inode). The fast path checks only inode and size: when b's file
    has exactly the size a's had after this store's last append (same shapes of entries,
    ids of equal length: common), session a's entry is appended to session b's content and
    the append reports success. Checking st_mtime_ns too (the stat is already made) would
    catch it."""
    store = JsonlStore(tmp_path)
    store.create(header("a"), [custom("x0")])
    store.create(header("b"), [custom("y0"), custom("y1", "y0")])
    store.append("a", [custom("x1", "x0")])  # keeps a's descriptor; a and b now have equal sizes
    path_a, path_b = store.location("a"), store.location("b")
    assert os.path.getsize(path_a) == os.path.getsize(path_b)
    data = open(path_b, "rb").read()
    _copy_over_a_then_append_to_a(store, path_a, data)
    assert open(path_a, "rb").read() == data, "session a's entry was written into session b's bytes"


def test_append_to_an_old_format_file_skips_the_duplicate_id_guard(tmp_path):
    """Full path, upgrade branch: An append to a format-1..3 file upgrades the file and
    writes the new entries in the same atomic rewrite, but returns before the id guard
    (_file_ids) runs: an id already in the file is written again and the readable old
    file is replaced by one that fails to parse (duplicate entry id). A format-4 file
    refuses the same append."""
    path = tmp_path / "old.jsonl"
    path.write_bytes(b'{"type":"session","version":3,"id":"old","timestamp":"2024-12-03T14:00:00.000Z","cwd":"/p"}\n'
                     + jsonio.dumps(custom("x")) + b"\n")
    store = JsonlStore(tmp_path)
    with pytest.raises(InvalidSessionError, match='"x"'):
        store.append("old", [custom("x")])
    assert ids_in(str(path)) == ["x"]  # still readable


def test_forked_child_holding_a_full_path_lock_descriptor_blocks_the_parents_appends(tmp_path):
    """Fork; the at-fork hook covers kept descriptors only: `_locked` releases the flock by
    closing its descriptor. If another thread forks while an append (or a read, with its
    shared lock) is inside `_locked`, the child inherits a duplicate of that open file
    description, so the parent's close() no longer releases the lock: every later append
    of the parent to that session blocks until the child exits (a multiprocessing 'fork'
    worker can live for the whole run). An explicit flock(LOCK_UN) before close releases it
    for all duplicates (the fast path already unlocks explicitly and is not affected)."""
    store = JsonlStore(tmp_path, fsync=False)
    store.create(header("a"), [custom("a0")])
    worker, release = start_append_paused_in_write(store, "a", [custom("a1", "a0")])  # holding its locks
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child: a long-lived worker that never touches the store
        os.close(write_end)
        os.read(read_end, 1)
        os._exit(0)
    os.close(read_end)
    try:
        release.set()
        worker.join(5)
        assert not worker.is_alive()
        later = threading.Thread(target=store.append, args=("a", [custom("a2", "a1")]))
        later.start()
        later.join(1.5)
        blocked = later.is_alive()
    finally:
        os.close(write_end)  # the child exits, its inherited descriptor goes, the lock with it
        os.waitpid(pid, 0)
    later.join(5)
    assert not blocked, "the parent's append waited for the forked child to exit"
    assert ids_in(store.location("a")) == ["a0", "a1", "a2"]


def test_forked_child_deadlocks_on_a_lock_inherited_from_a_full_path_append(tmp_path):
    """Fork, the child's side of the test above: The child's own first append of the
    session waits for a lock held by a descriptor the child itself inherited and that
    nothing in the child will ever close: it hangs forever, even after the parent's
    append finished."""
    store = JsonlStore(tmp_path, fsync=False)
    store.create(header("a"), [custom("a0")])
    worker, release = start_append_paused_in_write(store, "a", [custom("a1", "a0")])  # holding its locks
    pid = _fork_appending(store, "a", [custom("c1", "a1")], delay=0.3)  # the parent's append has finished by then
    release.set()
    worker.join(5)
    status = wait_child(pid, 2.5)
    assert status is not None, "the forked child hung on a file lock it inherited"
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_a_session_locked_elsewhere_blocks_appends_to_every_other_session_of_the_store(tmp_path):
    """Fast path: `_held_lock` is one lock per store, held
    while the fast path waits for the *file* lock. When another process holds one session
    file's lock for a while (a long rewrite or read, a paused or stuck process), the thread
    appending to that session waits inside `_held_lock`, and every other thread's append to
    *any other* session of the store waits behind it (append -> _append_held takes the lock
    first; a full-path append's _hold takes it too). Before the fast path, sessions did not
    wait for each other. Here the other holder is a separate open file description in this
    process (flock conflicts exactly as with another process)."""
    store = JsonlStore(tmp_path, fsync=False)
    store.create(header("a"), [custom("a0")])
    store.create(header("b"), [custom("b0")])
    store.append("a", [custom("a1", "a0")])
    store.append("b", [custom("b1", "b0")])  # both descriptors kept: the fast path for both
    other = os.open(store.location("a"), os.O_RDONLY)
    fcntl.flock(other, fcntl.LOCK_EX)  # "another process" holds a's lock
    try:
        stuck = threading.Thread(target=store.append, args=("a", [custom("a2", "a1")]))
        stuck.start()
        time.sleep(0.2)  # stuck is now waiting for a's lock inside _held_lock
        unrelated = threading.Thread(target=store.append, args=("b", [custom("b2", "b1")]))
        unrelated.start()
        unrelated.join(1.5)
        blocked = unrelated.is_alive()
    finally:
        fcntl.flock(other, fcntl.LOCK_UN)
        os.close(other)
    stuck.join(5)
    unrelated.join(5)
    assert not blocked, "an append to session b waited for session a's file lock"
    assert ids_in(store.location("b")) == ["b0", "b1", "b2"]


def test_held_two_stores_alternating_with_an_unterminated_foreign_record(tmp_path):
    """Two stores of one process alternate appends to one session (each keeps its own
    descriptor); another tool appends a complete record without its newline; a duplicate id
    on the fast path is refused and nothing is written; migrate_file of an old-format file
    (new inode) under a held descriptor; every append lands once and the file stays valid."""
    one, two = JsonlStore(tmp_path), JsonlStore(tmp_path)
    one.create(header("a"), [custom("e0")])
    last = "e0"
    for n in range(1, 9):
        (one if n % 2 else two).append("a", [custom(f"e{n}", last)])
        last = f"e{n}"
    path = one.location("a")
    with open(path, "ab") as handle:
        handle.write(jsonio.dumps(custom("foreign", last)))  # no newline
    one.append("a", [custom("e9", "foreign")])
    with pytest.raises(InvalidSessionError):
        one.append("a", [custom("e9", "foreign")])  # fast path duplicate
    with pytest.raises(InvalidSessionError):
        two.append("a", [custom("foreign")])  # full path: sees the foreign id
    two.append("a", [custom("e10", "e9"), custom("e11", "e10")])
    one.append("a", [custom("e12", "e11")])
    assert ids_in(path) == [f"e{n}" for n in range(9)] + ["foreign", "e9", "e10", "e11", "e12"]
    # Old format, migrated while a descriptor is kept: the fast path finds the new inode.
    old = tmp_path / "old.jsonl"
    old.write_bytes(b'{"type":"session","version":3,"id":"old","timestamp":"2024-12-03T14:00:00.000Z","cwd":"/p"}\n'
                    + jsonio.dumps(custom("o0")) + b"\n")
    one.append("old", [custom("o1", "o0")])  # upgrades in place (new inode)
    one.append("old", [custom("o2", "o1")])  # full path, then kept
    migrate_file(str(old))  # already format 4: untouched
    one.append("old", [custom("o3", "o2")])
    assert ids_in(str(old)) == ["o0", "o1", "o2", "o3"]


def test_held_store_used_in_a_forked_child_for_append_list_and_delete(tmp_path, no_trash):
    """After fork the child appends (full path, then its own kept descriptor), lists and
    deletes through the parent's store; the parent's kept descriptor then falls back."""
    store = JsonlStore(tmp_path)
    store.create(header("a"), [custom("a0")])
    store.create(header("b"), [custom("b0")])
    store.append("a", [custom("a1", "a0")])
    store.append("b", [custom("b1", "b0")])
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            store.append("a", [custom("c1", "a1")])
            store.append("a", [custom("c2", "c1")])
            if len(store.list_sessions()) == 2:
                store.delete("b")
                code = 0 if store.session_ids() == ["a"] else 2
        except BaseException:
            code = 3
        os._exit(code)
    status = wait_child(pid, 4)
    assert status is not None and os.WEXITSTATUS(status) == 0
    store.append("a", [custom("a2", "c2")])
    with pytest.raises(SessionNotFoundError):
        store.append("b", [custom("b2", "b1")])
    assert ids_in(store.location("a")) == ["a0", "a1", "c1", "c2", "a2"]
