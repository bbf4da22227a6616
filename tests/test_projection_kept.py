"""Round 3 of adversarial tests: attacks on the round-2 fixes (JSONL append fast path, at-fork
hook, kept projection copies).

"Regression" tests reproduce a bug an adversarial review found (each failed before its fix);
"Held" tests check behaviour that held under attack.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time

import pytest

from builders import custom, header
from sessiontree.errors import InvalidSessionError, SessionNotFoundError
from sessiontree.format import jsonio
from sessiontree.session.manager import SessionManager
from sessiontree.stores.jsonl.store import JsonlStore, migrate_file
from support import fresh_projection, ids_in, start_append_paused_in_write, wait_child


def test_fast_path_appends_into_another_session_after_a_same_size_in_place_copy(tmp_path):
    """Regression (fast path). Round 2 made the full path re-read the header because `cp b a` rewrites
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
    with open(path_a, "r+b") as handle:  # what cp does to an existing target
        handle.truncate(0)
        handle.write(data)
    try:
        store.append("a", [custom("x2", "x1")])
    except (SessionNotFoundError, InvalidSessionError):
        pass
    assert open(path_a, "rb").read() == data, "session a's entry was written into session b's bytes"


def test_append_to_an_old_format_file_skips_the_duplicate_id_guard(tmp_path):
    """Regression (full path, upgrade branch). An append to a format-1..3 file upgrades the file and
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
    """Regression (fork; the at-fork hook covers kept descriptors only). `_locked` releases the flock by
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
    """Regression (fork, the child's side of the test above). The child's own first append of the
    session waits for a lock held by a descriptor the child itself inherited and that
    nothing in the child will ever close: it hangs forever, even after the parent's
    append finished."""
    store = JsonlStore(tmp_path, fsync=False)
    store.create(header("a"), [custom("a0")])
    worker, release = start_append_paused_in_write(store, "a", [custom("a1", "a0")])  # holding its locks
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            time.sleep(0.3)  # the parent's append has finished by now
            store.append("a", [custom("c1", "a1")])
            os._exit(0)
        except BaseException:
            os._exit(1)
    release.set()
    worker.join(5)
    status = wait_child(pid, 2.5)
    assert status is not None, "the forked child hung on a file lock it inherited"
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_a_session_locked_elsewhere_blocks_appends_to_every_other_session_of_the_store(tmp_path):
    """Regression (fast path, regression of 9276d5c/9ebba6f). `_held_lock` is one lock per store, held
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


# ================================================================ kept projection: regressions


def test_kept_projection_source_entries_stay_the_stored_entries_after_a_boundary():
    """Regression (kept projection). ProjectionBuilder.copies holds id() of the P.1 copies of the whole
    path, but only those inside the context stay alive: the copies of null-content messages
    before a verbatim boundary (outside the kept tail) are freed when build() returns. Their
    ids are then reused by new entry dicts that advance() sees, which _extend() takes for P.1
    copies: result() hands out a copy of the stored entry as source_entry and a copy of its
    stored message, where a fresh build (and the docs: "shared with the raw entries unless
    its content had to be normalized") gives the stored objects. Null content is common
    (assistant turns with only tool calls from OpenAI-style providers). The projections
    still compare equal; identity (and so in-place annotation semantics) differs."""
    for _ in range(5):
        m = SessionManager.in_memory("/w")
        for _ in range(20):
            m.append_message({"role": "assistant", "content": None, "stopReason": "stop"})
        kept = m.append_message({"role": "user", "content": "keep"})
        m.append_compaction("summary", kept, 10, {"strategy": "verbatim-lines"})
        m.build_session_projection()
        for i in range(60):
            m.append_message({"role": "user", "content": f"m{i}"})
            projection, scratch = m.build_session_projection(), fresh_projection(m)
            assert projection == scratch
            stored = {id(e) for e in m.get_entries()}
            for position, (mine, theirs) in enumerate(zip(projection.sources, scratch.sources)):
                if id(theirs) in stored:
                    assert mine is theirs, f"step {i}: source {position} is a copy of the stored entry"
            assert projection.messages[-1] is m.get_entries()[-1]["message"]


# ======================================================================= held


def test_held_two_stores_alternating_with_an_unterminated_foreign_record(tmp_path):
    """Held: two stores of one process alternate appends to one session (each keeps its own
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
    """Held: after fork the child appends (full path, then its own kept descriptor), lists and
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


def test_held_kept_projection_copies_for_null_content_tail_and_edits():
    """Held: null-content entries in the kept tail, edits of null-content entries, many system
    messages; every returned dict mutated at top level; the next kept projection still equals
    a fresh build, and source_entry['message'] is the projected message where a fresh build's is."""
    m = SessionManager.in_memory("/w")
    for k in range(6):
        m.append_message({"role": "system", "content": f"s{k}", "sections": {"x": str(k)}, "timestamp": k})
    first = m.append_message({"role": "user", "content": None})
    m.append_message({"role": "assistant", "content": None, "provider": "p", "model": "m"})
    target = m.append_message({"role": "user", "content": None})
    m.append_compaction("sum", first, 10, {"strategy": "verbatim-lines"})
    m.append_context_edit(target, {"content": "edited"})
    for k in range(3):
        m.append_message({"role": "user", "content": None})
        m.append_message({"role": "system", "content": f"t{k}", "timestamp": 9})
    null_id = m.append_message({"role": "toolResult", "content": None, "toolCallId": "zz", "toolName": "b"})
    m.append_context_edit(m.get_leaf_id(), None)
    m.append_message({"role": "user", "content": None})
    del null_id
    for _ in range(3):
        p = m.build_session_projection()
        assert p == fresh_projection(m)
        scratch = fresh_projection(m)
        for mine, theirs in zip(p.entries, scratch.entries):
            message = theirs.source_entry.get("message")
            shared = any(message is x for x in theirs.messages)
            assert shared == any(mine.source_entry.get("message") is x for x in mine.messages)
        stored = {id(e.get(key)) for e in m.get_entries() for key in ("message", "systemMessage")}
        for message in p.messages:  # stored messages (and checkpoints) are the caller's data: leave them
            if id(message) not in stored:
                message["junk"] = 1
                message.pop("content", None)
        for source in p.sources:
            if isinstance(source.get("message"), dict) and not any(source is e for e in m.get_entries()):
                source["message"]["junk"] = 2
                source["junk"] = 3
        if p.model is not None:
            p.model.clear()
        if p.system_message is not None:
            p.system_message.clear()
        assert m.build_session_projection() == fresh_projection(m)
        assert not [x for x in m.build_session_projection().messages if "junk" in x]
