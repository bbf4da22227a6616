"""Round 2 of adversarial tests: the JSONL append fast path and the manager's kept projection.

Tests marked "Regression" reproduce a bug that an adversarial review found (each
failed before its fix); "Held" ones check behaviour that held under attack and
must keep holding.
"""

from __future__ import annotations

import gc
import json
import os
import random
import threading

import pytest

import sessiontree.stores.jsonl.store as jsonl_module
from builders import custom, header
from sessiontree import errors
from sessiontree.errors import InvalidSessionError, SessionNotFoundError, StorageError
from sessiontree.format import jsonio
from sessiontree.format.codec import read_session_file
from sessiontree.session.manager import SessionManager
from sessiontree.stores.jsonl.store import JsonlStore, migrate_file
from support import (
    FailingMemoryStore,
    fds_to,
    fresh_projection,
    ids_in,
    start_append_paused_in_write,
    wait_child,
)


def ids_in_complete_lines(path: str) -> list[str]:
    """Entry ids of the newline-terminated records (a torn last line left out)."""
    data = open(path, "rb").read()
    lines = data[: data.rfind(b"\n") + 1].splitlines()[1:]
    return [json.loads(line)["id"] for line in lines]


def test_fast_path_does_not_append_onto_a_torn_record_after_a_late_hold(tmp_path):
    """Regression (fast path). Thread 1's append releases the file lock and only then keeps
    its descriptor (_hold). If meanwhile another writer leaves a torn record and a
    second append of this store is refused for it, the refused append's id scan has
    already set the cached size to the torn size. The late _hold then re-arms the fast
    path, whose size check passes and which writes with newline_ended=True: the next
    entry is glued onto the torn line, reported as appended, and the file is unreadable."""
    store = JsonlStore(tmp_path)
    store.create(header("a"), [custom("a0")])
    path = store.location("a")
    real_hold = store._hold
    at_hold, go = threading.Event(), threading.Event()

    def late_hold(*args):
        at_hold.set()
        go.wait(5)
        real_hold(*args)

    store._hold = late_hold  # instance attribute: only this store, only this test
    first = threading.Thread(target=store.append, args=("a", [custom("a1", "a0")]))
    first.start()
    assert at_hold.wait(5)  # a1 is written and the lock released; the descriptor not yet kept
    del store._hold
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


def test_forked_child_does_not_deadlock_when_another_thread_was_appending(tmp_path):
    """Regression (fast path + fork). _held_lock is held for the whole fast-path append (flock
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
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            store.append("b", [custom("b1", "b0")])  # another session entirely
            os._exit(0)
        except BaseException:
            os._exit(1)
    release.set()
    worker.join(5)
    status = wait_child(pid, 2.5)
    assert status is not None, "the forked child hung in JsonlStore.append (inherited lock)"
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_forked_child_does_not_close_descriptor_numbers_it_reused(tmp_path):
    """Regression (fast path + fork). After fork the child's first append closes the *numbers*
    of the parent's kept descriptors (_close_all). A child that has reused such a
    number (daemonizing: close inherited descriptors, reopen stdio/log at the same
    numbers) gets its own file closed; the store's next open then takes that number,
    so the child's later writes to "its log" land in the session file."""
    store = JsonlStore(tmp_path / "s")
    store.create(header("a"), [custom("a0")])
    store.append("a", [custom("a1", "a0")])
    held, = store._held.values()
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
    """Regression (fast path, resource leak). delete() closes the kept descriptor *before* taking
    the file lock. An append that runs in that window keeps a new descriptor of the file,
    which delete() then unlinks: the store pins the deleted inode (disk space) until LRU
    eviction or close(), since nothing appends to a deleted session again."""
    store = JsonlStore(tmp_path / "s")
    store.create(header("a"), [custom("a0")])
    path = store.location("a")
    real_release = store._release

    raced = []

    def release_then_race(p):
        real_release(p)
        if raced:
            return  # delete() releases again after the removal; race only the first time
        raced.append(True)
        racer = threading.Thread(target=store.append, args=("a", [custom("a1", "a0")]))
        racer.start()
        racer.join(5)

    store._release = release_then_race
    store.delete("a")
    del store._release
    assert not os.path.exists(path)
    assert fds_to(path) == [], "the store still holds a descriptor of the deleted session file"


# ======================================= JSONL append, full path behind the fast path: regressions
# These caches predate the fast path (HEAD~1 behaves the same) but sit on the fallback
# path that the fast path hands every "something changed" case to.


def test_id_guard_sees_a_torn_record_that_another_writer_completes_later(tmp_path):
    """Regression (pre-existing, _file_ids). The refused append's scan caches the torn size as
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
    """Regression (pre-existing, per-inode header cache _current). `: > file` / truncate keeps the
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


def test_append_after_an_in_place_copy_of_another_session_goes_nowhere(tmp_path):
    """Regression (pre-existing, _current and _find's header cache). `cp b.jsonl a.jsonl` rewrites
    a's file in place (same inode). The store that appended to a before still believes
    the inode holds a, and appends a's entry to what is now session b's content."""
    store = JsonlStore(tmp_path)
    store.create(header("a"), [custom("x0")])
    store.create(header("b"), [custom("y0")])
    store.append("a", [custom("x1", "x0")])
    path_a, path_b = store.location("a"), store.location("b")
    data = open(path_b, "rb").read()
    with open(path_a, "r+b") as handle:  # what cp does to an existing target
        handle.truncate(0)
        handle.write(data)
    try:
        store.append("a", [custom("x2", "x1")])
    except (SessionNotFoundError, InvalidSessionError):
        pass
    assert open(path_a, "rb").read() == data, "session a's entry was written into session b's bytes"


def test_evicted_descriptor_and_a_reused_inode_do_not_redirect_appends(tmp_path):
    """Regression (pre-existing caches, reachable again after LRU eviction). While the store keeps
    a session's descriptor, the inode cannot be reused; after eviction (9+ sessions) it
    can. Session S at a fixed path is removed and a new session T created at that path
    (open_file on a fixed name); ext4 hands T the freed inode. The cached header and
    _current match that inode, so appending to S writes S's entry into T's file and
    reports success. (On filesystems that do not reuse the inode at once this passes.)"""
    store = JsonlStore(tmp_path)
    fixed = str(tmp_path / "fixed.jsonl")
    store.create(header("S"), [custom("s0")], path=fixed)
    store.append("S", [custom("s1", "s0")])
    for n in range(jsonl_module._HELD_FILES):
        store.create(header(f"o{n}"), [custom("z")])
        store.append(f"o{n}", [custom("z1", "z")])
    assert fixed not in store._held
    os.unlink(fixed)  # the user removes the session file
    JsonlStore(tmp_path).create(header("T"), [custom("t0")], path=fixed)
    before = open(fixed, "rb").read()
    with pytest.raises(SessionNotFoundError):
        store.append("S", [custom("s2", "s1")])
    assert open(fixed, "rb").read() == before


# =============================================================== JSONL fast path: held


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
    """Held: threads on one and on separate stores, forked and spawned processes, more
    sessions than kept descriptors, close() mid-run, and another store rewriting the
    headers (new inode) and migrating: every reported append is in its file once."""
    import multiprocessing

    directory = str(tmp_path)
    setup = JsonlStore(directory)
    sessions = [f"s{n}" for n in range(jsonl_module._HELD_FILES + 3)]
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
    """Held: the write succeeds, fsync fails -> rolled back; the fast path still works after."""
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
    assert path in store._held  # still on the fast path
    store.append("a", [custom("a2", "a1")])
    with pytest.raises(InvalidSessionError):
        store.append("a", [custom("a2", "a1")])
    assert ids_in(path) == ["a0", "a1", "a2"]


def test_garbage_collected_store_and_manager_close_their_descriptors(tmp_path):
    """Held: the weakref finalizer closes kept descriptors of an unreachable store."""
    directory = str(tmp_path / "s")
    manager = SessionManager.create("/w", directory)
    manager.append_message({"role": "user", "content": "x"})
    manager.append_message({"role": "user", "content": "y"})
    assert len(fds_to(directory)) == 1
    del manager
    gc.collect()
    assert fds_to(directory) == []


# =========================================================== kept projection: regressions


def _custom_message(m):
    m.append_message({"role": "user", "content": "hi"})
    m.append_custom_message_entry("note", "original", True)
    return -1


def _branch_summary(m):
    m.append_message({"role": "user", "content": "hi"})
    m.branch_with_summary(m.get_leaf_id(), "went elsewhere")
    return -1


def _synthetic_result(m):
    m.append_message({"role": "user", "content": "go"})
    m.append_message({"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "bash",
                                                        "arguments": {}}], "stopReason": "toolUse", "timestamp": 1})
    m.append_message({"role": "user", "content": "next"})  # closes the window: synthetic result for c1
    return 2


def _boundary(m):
    kept = m.append_message({"role": "user", "content": "keep"})
    m.append_compaction("summary", kept, 10, {"strategy": "verbatim-lines"})
    return 0


def _null_content(m):
    m.append_message({"role": "user", "content": None})  # projected as a copy with content []
    return 0


def _edited(m):
    target = m.append_message({"role": "user", "content": "secret"})
    m.append_context_edit(target, {"content": "redacted"})  # projected as an edited copy
    return 0


@pytest.mark.parametrize("setup", [_custom_message, _branch_summary, _synthetic_result, _boundary,
                                   _null_content, _edited])
def test_annotating_a_returned_message_does_not_change_the_next_projection(setup):
    """Regression (kept projection, regression from a4ddb1b). Messages the projection itself
    makes (custom_message/branch_summary messages, synthetic tool results, the compaction
    boundary, P.1 and context-edit copies) are not stored entries' messages, yet the kept
    ProjectionBuilder hands the same dicts to every later call. A caller annotating the
    request in place (e.g. adding cache_control, as prompt-caching clients do) changes
    every later projection, which then differs from a fresh build."""
    m = SessionManager.in_memory("/w")
    index = setup(m)
    first = m.build_session_projection()
    message = first.messages[index]
    assert all(message is not e.get("message") for e in m.get_entries())  # not a stored message
    message["cache_control"] = {"type": "ephemeral"}
    assert "cache_control" not in fresh_projection(m).messages[index]  # no stored entry was touched
    again = m.build_session_projection()
    assert again == fresh_projection(m)


def test_editing_the_returned_model_does_not_change_the_next_projection():
    """Regression (kept projection). ``model`` is a dict the projection builds; the kept builder
    returns the same dict every time, so a caller overriding ``context.model['modelId']``
    for one request changes every later projection."""
    m = SessionManager.in_memory("/w")
    m.append_model_change("openai", "gpt")
    context = m.build_session_context()
    context.model["modelId"] = "one-off override"
    assert m.build_session_projection().model == {"provider": "openai", "modelId": "gpt"}


# =========================================================== kept projection: held


def _random_message(rng: random.Random) -> dict:
    kind = rng.choice(["user", "null", "assistant", "bare_assistant", "result", "system", "bash", "custom",
                       "summary", "unknown"])
    calls = rng.sample(["c1", "c2", "c3"], rng.randint(0, 2))
    if kind == "user":
        return {"role": "user", "content": rng.choice(["a", " ", [{"type": "image", "data": "x"}], []])}
    if kind == "null":
        return {"role": rng.choice(["user", "assistant", "toolResult", "custom"]), "content": None}
    if kind in ("assistant", "bare_assistant"):
        msg = {"role": "assistant", "content": [{"type": "toolCall", "id": c, "name": "bash", "arguments": {}}
                                                for c in calls],
               "stopReason": rng.choice(["toolUse", "stop", "aborted"]), "timestamp": rng.randint(1, 9)}
        if kind == "assistant":
            msg.update(provider="p", model=rng.choice(["m1", "m2"]))
        return msg
    if kind == "result":
        return {"role": "toolResult", "toolCallId": rng.choice(["c1", "c2", "c3", "zz"]), "toolName": "bash",
                "content": [{"type": "text", "text": "o"}], "isError": False}
    if kind == "system":
        msg = {"role": "system", "content": rng.choice(["s", "", [{"type": "text", "text": "q"}]]),
               "timestamp": rng.choice([None, 5])}
        if rng.random() < 0.5:
            msg["sections"] = {rng.choice("ab"): rng.choice([None, "v"])}
        if rng.random() < 0.5:
            msg["toolsAdded"] = [{"name": rng.choice("xy")}]
        if rng.random() < 0.3:
            msg["toolsRemoved"] = [{"name": rng.choice("xy")}]
        return msg
    if kind == "bash":
        return {"role": "bashExecution", "command": "ls", "output": "o", "exitCode": 0, "cancelled": False,
                "truncated": False, "excludeFromContext": rng.random() < 0.5}
    if kind == "custom":
        return {"role": "custom", "customType": "k", "content": rng.choice(["x", " ", []]), "display": True}
    if kind == "summary":
        return {"role": "branchSummary", "summary": rng.choice(["s", ""]), "fromId": "root"}
    return {"role": "mystery", "content": "?"}


def _random_step(m: SessionManager, rng: random.Random) -> SessionManager:
    store = m.get_session_store()
    ids = [e["id"] for e in m.get_entries()]
    op = rng.choice(["msg"] * 8 + ["cm", "setting", "label", "info", "edit", "compaction", "branch", "reset",
                                   "bws", "fail", "reopen", "project", "project", "new", "branched", "fork",
                                   "mutate"])
    if op == "msg":
        m.append_message(_random_message(rng))
    elif op == "cm":
        m.append_custom_message_entry("n", rng.choice(["h", " ", [{"type": "text", "text": "z"}], None]),
                                      rng.random() < 0.5)
    elif op == "setting":
        rng.choice([lambda: m.append_thinking_level_change("high"), lambda: m.append_model_change("q", "r"),
                    lambda: m.append_context_window_change(rng.randint(1, 9) * 1000)])()
    elif op == "label" and ids:
        m.append_label_change(rng.choice(ids), rng.choice(["L", None]))
    elif op == "info":
        m.append_session_info(rng.choice(["n", ""]))
    elif op == "edit" and m.get_branch():
        target = rng.choice(m.get_branch())
        try:
            m.append_context_edit(target["id"], rng.choice([None, {"content": "ed"}]))
        except ValueError:
            pass
    elif op == "compaction":
        m.append_compaction("sum", rng.choice(ids) if ids and rng.random() < 0.7 else None, 10,
                            rng.choice([{"strategy": "verbatim-lines"}, {"strategy": "summary"}, None]))
    elif op == "branch" and ids:
        m.branch(rng.choice(ids))
    elif op == "reset":
        m.reset_leaf()
    elif op == "bws":
        m.branch_with_summary(rng.choice(ids) if ids and rng.random() < 0.8 else None, rng.choice(["w", ""]))
    elif op == "fail" and isinstance(store, FailingMemoryStore):
        store.fail = True
        with pytest.raises(errors.StorageError):
            m.append_message({"role": "user", "content": "lost"})
        store.fail = False
    elif op == "reopen" and m._saved:
        return SessionManager.open(store, m.get_session_id())
    elif op == "project":
        m.build_session_projection()
    elif op == "new" and rng.random() < 0.3:
        m.new_session()
    elif op == "branched" and ids and m._saved:
        m.create_branched_session(rng.choice(ids))
    elif op == "fork" and m._saved and rng.random() < 0.5:
        return m.fork_to("/w2")
    elif op == "mutate":  # mutate the returned lists (not the messages): must not leak
        p = m.build_session_projection()
        p.messages.append({"role": "user", "content": "junk"})
        p.messages.reverse()
        if isinstance(p.sources, list):
            p.sources.clear()
        p.entries.clear()
    return m


def test_kept_projection_matches_a_fresh_build_under_more_operations():
    """Held: beyond test_projection_incremental's property (null content, bare
    assistants, system sections/tools, retired and null-detail compactions, labels
    clearing, new_session, create_branched_session, fork_to, list mutation)."""
    for seed in range(150):
        rng = random.Random(seed)
        m = SessionManager.create("/w", store=FailingMemoryStore())
        for _ in range(rng.randint(5, 40)):
            m = _random_step(m, rng)
            kept, scratch = m.build_session_projection(), fresh_projection(m)
            assert kept == scratch, seed
            assert kept.entries == scratch.entries, seed


def test_kept_projection_with_a_jsonl_store_whose_fast_path_write_fails(tmp_path, monkeypatch):
    """Held: a JSONL fast-path write that fails half way leaves file, tree and projection as before."""
    m = SessionManager.create("/w", str(tmp_path))
    m.append_message({"role": "user", "content": "a"})
    m.append_message({"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "bash",
                                                        "arguments": {}}], "stopReason": "toolUse"})
    before = m.build_session_projection()
    path = m.get_session_file()
    data = open(path, "rb").read()

    def half(fd, payload):
        os.write(fd, payload[: len(payload) // 2])
        raise OSError(28, "ENOSPC (injected)")

    monkeypatch.setattr(jsonl_module, "_write_all", half)
    with pytest.raises(StorageError):
        m.append_message({"role": "toolResult", "toolCallId": "c1", "toolName": "bash", "content": []})
    monkeypatch.undo()
    assert open(path, "rb").read() == data
    assert m.build_session_projection() == before == fresh_projection(m)
    m.append_message({"role": "toolResult", "toolCallId": "c1", "toolName": "bash", "content": []})
    assert m.build_session_projection() == fresh_projection(m)
    assert ids_in(path) == [e["id"] for e in m.get_entries()]
