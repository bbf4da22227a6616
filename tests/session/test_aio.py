"""``AsyncSessionManager``: the API surface, call order, commit-then-publish,
cancellation that settles the write first, work off the loop, other threads' loops,
closing, and a loop that keeps ticking during durable appends.

The manager conformance suite runs through this API in ``conformance/`` (the ``manager`` fixture);
random cancellations are in ``test_aio_cancel.py``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import itertools
import threading
import time

import pytest

from builders import user_ms as user
from sessiontree import errors
from sessiontree.session.aio import AsyncSessionManager, ManagerClosedError, WriteOutcome, outcome_of
from sessiontree.session.manager import SessionManager
from sessiontree.stores.jsonl.store import JsonlStore
from sessiontree.stores.memory import MemoryStore
from sessiontree.stores.sqlite.store import SqliteStore

PLAIN = {
    "get_leaf_id", "get_leaf_entry", "get_entry", "get_branch", "get_tree", "get_children", "get_label",
    "build_session_projection", "build_session_context", "build_historical_projection", "build_context_entries", "get_entries", "get_entry_index", "get_header",
    "get_session_name", "get_session_name_state", "get_cwd", "get_session_dir", "get_session_id",
    "get_session_store", "is_persisted",
}


def make_store(kind: str, tmp_path) -> object:
    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":
        return SqliteStore(str(tmp_path / "s.db"))
    return JsonlStore(str(tmp_path / "sessions"))


def fresh_copy(store, tmp_path):
    """A second store object on the same data: what another process would read."""
    if isinstance(store, SqliteStore):
        return SqliteStore(str(tmp_path / "s.db"))
    if isinstance(store, JsonlStore):
        return JsonlStore(str(tmp_path / "sessions"))
    return store


class HeldStore:
    """A store whose writes can be held inside the worker and made to fail.

    ``hold`` makes the next ``append``/``create`` signal ``entered`` and wait
    for ``proceed``; ``fail`` makes writes raise ``StorageError`` (after the
    hold). ``threads`` records the thread of every store call.
    """

    def __init__(self, inner) -> None:
        self.inner = inner
        self.hold = False
        self.fail = False
        self.entered = threading.Event()
        self.proceed = threading.Event()
        self.threads: list[tuple[str, int]] = []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _write(self, name, call):
        self.threads.append((name, threading.get_ident()))
        if self.hold:
            self.entered.set()
            assert self.proceed.wait(20), "test never released the held write"
        if self.fail:
            raise errors.StorageError("injected failure") from OSError(28, "No space left on device")
        return call()

    def append(self, session_id, entries):
        return self._write("append", lambda: self.inner.append(session_id, entries))

    def create(self, header, entries=(), raw=None, *, path=None):
        return self._write("create", lambda: self.inner.create(header, entries, raw, path=path))

    def load(self, session_id, *, keep_raw=True):
        self.threads.append(("load", threading.get_ident()))
        return self.inner.load(session_id, keep_raw=keep_raw)


async def wait_entered(held: HeldStore) -> None:
    assert await asyncio.to_thread(held.entered.wait, 20)


# ---------------------------------------------------------------- API surface

def test_every_sync_method_has_an_async_counterpart_with_the_same_arguments():
    public = {name for name in vars(SessionManager) if not name.startswith("_")}
    missing = public - set(dir(AsyncSessionManager))
    assert not missing
    for name in public:
        sync_sig = inspect.signature(getattr(SessionManager, name))
        async_attr = getattr(AsyncSessionManager, name)
        assert list(inspect.signature(async_attr).parameters.items()) == list(sync_sig.parameters.items()), name
        if name in PLAIN:
            assert not inspect.iscoroutinefunction(async_attr), name
        else:
            # factories, listing, mutations, leaf moves and get_session_file (JSONL disk look-up)
            assert inspect.iscoroutinefunction(async_attr), name
    assert inspect.iscoroutinefunction(AsyncSessionManager.aclose)


# ---------------------------------------------------------------- ordering


def test_leaf_moves_take_their_turn_after_earlier_appends(tmp_path):
    async def main():
        m = await AsyncSessionManager.create(str(tmp_path), store=SqliteStore(str(tmp_path / "s.db")))
        root = await m.append_message(user("root"))
        # Called in this order, concurrently: the branch applies after a, before b.
        a, _, b, _, c = await asyncio.gather(m.append_message(user("a")), m.branch(root),
                                             m.append_message(user("b")), m.reset_leaf(),
                                             m.append_message(user("c")))
        return m, root, a, b, c

    m, root, a, b, c = asyncio.run(main())
    assert m.get_entry(a)["parentId"] == root
    assert m.get_entry(b)["parentId"] == root
    assert m.get_entry(c)["parentId"] is None


def test_branch_with_summary_moves_the_leaf_only_once_committed(tmp_path):
    held = HeldStore(SqliteStore(str(tmp_path / "s.db")))

    async def main():
        m = await AsyncSessionManager.create(str(tmp_path), store=held)
        root = await m.append_message(user("root"))
        tip = await m.append_message(user("tip"))
        held.hold = True
        task = asyncio.create_task(m.branch_with_summary(root, "left tip"))
        await wait_entered(held)
        during = m.get_leaf_id()
        held.proceed.set()
        summary = await task
        return m, root, tip, during, summary

    m, root, tip, during, summary = asyncio.run(main())
    assert during == tip
    assert m.get_leaf_id() == summary and m.get_entry(summary)["parentId"] == root
    assert m.get_entry(summary)["fromId"] == tip


# ---------------------------------------------------------------- off the loop, commit then publish

@pytest.mark.parametrize("kind", ["memory", "sqlite", "jsonl"])
def test_store_work_runs_off_the_loop_on_the_store_writer_thread(kind, tmp_path):
    held = HeldStore(make_store(kind, tmp_path))

    async def main():
        loop_thread = threading.get_ident()
        m = await AsyncSessionManager.create(str(tmp_path), store=held)
        for i in range(5):
            await m.append_message(user(str(i)))
        other = await AsyncSessionManager.create(str(tmp_path), store=held)
        await asyncio.gather(*(other.append_message(user(str(i))) for i in range(5)))
        reopened = await AsyncSessionManager.open(held, m.get_session_id())
        return loop_thread, reopened

    loop_thread, reopened = asyncio.run(main())
    writes = {ident for name, ident in held.threads if name in ("create", "append")}
    assert len([n for n, _ in held.threads if n in ("create", "append")]) == 10
    if kind == "memory":
        assert writes == {loop_thread}  # no I/O, so no thread hop
    else:
        assert loop_thread not in writes and len(writes) == 1  # one writer thread per store
        load_threads = {ident for name, ident in held.threads if name == "load"}
        assert loop_thread not in load_threads
    assert len(reopened.get_entries()) == 5


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_a_write_in_flight_is_not_published_and_a_failed_one_never_is(kind, tmp_path):
    held = HeldStore(make_store(kind, tmp_path))

    async def main():
        m = await AsyncSessionManager.create(str(tmp_path), store=held)
        a = await m.append_message(user("a"))
        held.hold = True
        task = asyncio.create_task(m.append_message(user("b")))
        await wait_entered(held)
        during = (m.get_leaf_id(), len(m.get_entries()))
        held.fail = True
        held.proceed.set()
        with pytest.raises(errors.StorageError) as failure:
            await task
        after = (m.get_leaf_id(), len(m.get_entries()))
        held.hold = held.fail = False
        c = await m.append_message(user("c"))
        return m, a, c, during, after, failure.value

    m, a, c, during, after, failure = asyncio.run(main())
    assert during == (a, 1) and after == (a, 1)
    assert isinstance(failure.__cause__, OSError)
    assert m.get_entry(c)["parentId"] == a
    assert [e["id"] for e in SessionManager.open(fresh_copy(held.inner, tmp_path), m.get_session_id())
            .get_entries()] == [a, c]


# ---------------------------------------------------------------- cancellation

@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_cancel_during_the_write_settles_it_then_cancels(kind, tmp_path):
    held = HeldStore(make_store(kind, tmp_path))

    async def main():
        m = await AsyncSessionManager.create(str(tmp_path), store=held)
        a = await m.append_message(user("a"))
        held.hold = True
        seen: list[WriteOutcome | None] = []

        async def caller():
            try:
                return await m.append_message(user("b"))
            except asyncio.CancelledError as exc:
                seen.append(outcome_of(exc))
                raise

        task = asyncio.create_task(caller())
        await wait_entered(held)
        task.cancel()
        await asyncio.sleep(0.05)
        still_waiting = not task.done()  # the write is held: the cancellation waits for it
        held.hold = False
        held.proceed.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        return m, a, seen[0], still_waiting

    m, a, outcome, still_waiting = asyncio.run(main())
    assert still_waiting
    assert outcome.method == "append_message" and outcome.committed and outcome.error is None
    assert m.last_cancelled == outcome
    assert m.get_leaf_id() == outcome.result and m.get_entry(outcome.result)["parentId"] == a
    stored = SessionManager.open(fresh_copy(held.inner, tmp_path), m.get_session_id()).get_entries()
    assert stored == m.get_entries()


def test_cancel_of_a_failing_write_reports_the_error_and_publishes_nothing(tmp_path):
    held = HeldStore(SqliteStore(str(tmp_path / "s.db")))

    async def main():
        m = await AsyncSessionManager.create(str(tmp_path), store=held)
        a = await m.append_message(user("a"))
        held.hold = held.fail = True
        task = asyncio.create_task(m.append_message(user("b")))
        await wait_entered(held)
        task.cancel()
        held.proceed.set()
        with pytest.raises(asyncio.CancelledError) as cancelled:
            await task
        return m, a, outcome_of(cancelled.value)

    m, a, outcome = asyncio.run(main())
    assert outcome is not None and not outcome.committed and outcome.result is None
    assert isinstance(outcome.error, errors.StorageError)
    assert m.get_leaf_id() == a and len(m.get_entries()) == 1


def test_cancel_while_queued_withdraws_the_call(tmp_path):
    """One manager's call waiting for its turn, another's write waiting behind a held
    write on the same store's writer thread: both cancellations take no effect and
    are delivered at once, without waiting for the held write."""
    held = HeldStore(SqliteStore(str(tmp_path / "s.db")))

    async def main():
        m = await AsyncSessionManager.create(str(tmp_path), store=held)
        other = await AsyncSessionManager.create(str(tmp_path), store=held)
        a = await m.append_message(user("a"))
        await other.append_message(user("x"))
        held.hold = True
        blocker = asyncio.create_task(m.append_message(user("held")))
        await wait_entered(held)
        outcomes: list[WriteOutcome | None] = []

        async def caller(call):
            try:
                return await call
            except asyncio.CancelledError as exc:
                outcomes.append(outcome_of(exc))
                raise

        in_gate = asyncio.create_task(caller(m.append_message(user("waits for its turn"))))
        in_executor = asyncio.create_task(caller(other.append_message(user("waits for the writer"))))
        await asyncio.sleep(0.05)
        in_gate.cancel()
        in_executor.cancel()
        results = await asyncio.gather(in_gate, in_executor, return_exceptions=True)
        assert (m.last_cancelled, other.last_cancelled) == tuple(outcomes)
        done_before_release = blocker.done()
        held.hold = False
        held.proceed.set()
        held_id = await blocker
        after = await other.append_message(user("y"))
        return m, other, a, held_id, after, results, outcomes, done_before_release

    m, other, a, held_id, after, results, outcomes, done_before_release = asyncio.run(main())
    assert not done_before_release
    assert all(isinstance(r, asyncio.CancelledError) for r in results)
    assert [(o.method, o.committed) for o in outcomes] == [("append_message", False)] * 2
    assert [e["id"] for e in m.get_entries()] == [a, held_id]
    texts = [e["message"]["content"] for e in other.get_entries()]
    assert texts == ["x", "y"] and other.get_entry(after)["parentId"] == other.get_entries()[0]["id"]
    assert [e["message"]["content"] for e in SessionManager.open(held.inner, other.get_session_id())
            .get_entries()] == ["x", "y"]


def test_asyncio_timeout_keeps_the_outcome_reachable(tmp_path):
    held = HeldStore(SqliteStore(str(tmp_path / "s.db")))

    async def main():
        m = await AsyncSessionManager.create(str(tmp_path), store=held)
        await m.append_message(user("a"))
        held.hold = True
        threading.Timer(0.2, held.proceed.set).start()
        with pytest.raises(TimeoutError) as timed_out:
            async with asyncio.timeout(0.02):
                await m.append_message(user("slow"))
        return m, outcome_of(timed_out.value)

    m, outcome = asyncio.run(main())
    assert outcome is not None and outcome.committed and m.get_leaf_id() == outcome.result


# ---------------------------------------------------------------- threads and loops

def test_calls_from_another_threads_loop_interleave_without_deadlock(tmp_path):
    store = SqliteStore(str(tmp_path / "s.db"))

    async def main():
        m = await AsyncSessionManager.create(str(tmp_path), store=store)
        await m.append_message(user("root"))

        async def from_other_loop():
            return [await m.append_message(user(f"t{i}")) for i in range(30)]

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            other = asyncio.get_running_loop().run_in_executor(pool, asyncio.run, from_other_loop())
            mine = [await m.append_message(user(f"l{i}")) for i in range(30)]
            theirs = await other
        return m, mine, theirs

    m, mine, theirs = asyncio.run(main())
    entries = m.get_entries()
    assert len(entries) == 61 and {e["id"] for e in entries[1:]} == set(mine) | set(theirs)
    assert all(e["parentId"] == p["id"] for p, e in itertools.pairwise(entries))  # one chain, no forks
    assert SessionManager.open(SqliteStore(str(tmp_path / "s.db")), m.get_session_id()).get_entries() == entries


def test_a_blocked_loop_does_not_stop_another_loop_using_its_manager(tmp_path):
    """The manager's home loop blocks (the synchronous API inside a loop does that);
    a second loop in another thread still completes its calls on the same manager."""
    runner_loop = asyncio.new_event_loop()
    thread = threading.Thread(target=runner_loop.run_forever)
    thread.start()
    try:
        async def main():
            m = await AsyncSessionManager.create(str(tmp_path), store=SqliteStore(str(tmp_path / "s.db")))
            await m.append_message(user("root"))
            pending = asyncio.run_coroutine_threadsafe(m.append_message(user("from the other loop")), runner_loop)
            # Blocks this loop until the other loop's call is done: it must not need this loop.
            entry_id = pending.result(timeout=20)
            return m, entry_id

        m, entry_id = asyncio.run(main())
    finally:
        runner_loop.call_soon_threadsafe(runner_loop.stop)
        thread.join()
        runner_loop.close()
    assert m.get_leaf_id() == entry_id


def test_the_sync_api_inside_a_running_loop_works_and_blocks(tmp_path):
    async def main():
        ticks = 0

        async def tick():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0)
        before = ticks
        m = SessionManager.create(str(tmp_path), store=SqliteStore(str(tmp_path / "s.db")))
        for i in range(20):
            m.append_message(user(str(i)))
        blocked = ticks == before  # nothing else ran during the synchronous calls
        ticker.cancel()
        return m, blocked

    m, blocked = asyncio.run(main())
    assert blocked and len(m.get_entries()) == 20


# ---------------------------------------------------------------- lifetime, listing

def test_aclose_closes_only_a_store_opened_here(tmp_path):
    url = f"sqlite:///{tmp_path / 'owned.db'}"
    given = SqliteStore(str(tmp_path / "given.db"))

    async def main():
        async with await AsyncSessionManager.create(str(tmp_path), store=url) as owned:
            await owned.append_message(user("a"))
            fork = await owned.fork_to(str(tmp_path))  # shares the owned store
        owned_store = owned.get_session_store()
        fork_entry = await fork.append_message(user("still open for the fork"))
        await fork.aclose()
        with pytest.raises(ManagerClosedError):
            await owned.append_message(user("late"))
        on_given = await AsyncSessionManager.create(str(tmp_path), store=given)
        await on_given.append_message(user("b"))
        await on_given.aclose()
        await on_given.aclose()  # idempotent
        return owned, owned_store, fork_entry

    owned, owned_store, _fork_entry = asyncio.run(main())
    assert owned.closed and owned.get_leaf_entry()["message"]["content"] == "a"  # getters still answer
    with pytest.raises(errors.StorageError):
        owned_store.load(owned.get_session_id())  # closed after its last manager
    assert SqliteStore(str(tmp_path / "owned.db")).exists(owned.get_session_id())
    assert len(given.list_sessions()) == 1  # a store passed in stays open


def test_aclose_waits_for_a_write_in_flight(tmp_path):
    held = HeldStore(SqliteStore(str(tmp_path / "s.db")))

    async def main():
        m = await AsyncSessionManager.create(str(tmp_path), store=held)
        held.hold = True
        write = asyncio.create_task(m.append_message(user("a")))
        await wait_entered(held)
        closing = asyncio.create_task(m.aclose())
        await asyncio.sleep(0.05)
        closed_early = closing.done()
        held.proceed.set()
        entry_id = await write
        await closing
        return m, entry_id, closed_early

    m, entry_id, closed_early = asyncio.run(main())
    assert not closed_early and m.closed and m.get_leaf_id() == entry_id


def test_listing_progress_runs_on_the_loop_and_cancelling_stops_it(tmp_path):
    store = JsonlStore(str(tmp_path / "sessions"))
    for i in range(6):
        m = SessionManager.create(str(tmp_path), store=store)
        m.append_message(user(f"s{i}"))

    async def main():
        loop_thread = threading.get_ident()
        calls: list[tuple[int, int, bool]] = []
        rows = await AsyncSessionManager.list(str(tmp_path), store,
                                              lambda done, total: calls.append(
                                                  (done, total, threading.get_ident() == loop_thread)))
        event = threading.Event()
        event.set()
        with pytest.raises(errors.ListingCancelledError):
            await AsyncSessionManager.list_all(store, cancel=event)
        return rows, calls

    rows, calls = asyncio.run(main())
    assert len(rows) == 6
    assert calls == [(i, 6, True) for i in range(1, 7)]


# ---------------------------------------------------------------- the loop keeps ticking

def most_missed(stamps: list[float], period: float = 0.010) -> int:
    """The most ticks missed in one gap: a gap of ``g`` seconds between two
    ticks of a ``period`` ticker missed ``g // period - 1`` of them."""
    return max(int((b - a) // period) - 1 for a, b in itertools.pairwise(stamps))


def ticker_during_appends(tmp_path, count: int) -> tuple[int, int, int]:
    """Await ``count`` durable SQLite appends while a 10 ms ticker runs on the same loop.

    A second 10 ms ticker runs meanwhile on its own loop in another thread of
    this process: it sees the machine's own stalls (other processes on the
    same cores, the interpreter), which the appends cannot cause. No
    assertion is made on how long the appends take.

    Returns:
        (ticks of the loop's ticker, most ticks it missed in one gap, most the control ticker missed).
    """
    control: list[float] = []
    running = threading.Event()
    running.set()

    def control_ticker() -> None:
        async def tick():
            while running.is_set():
                control.append(time.perf_counter())
                await asyncio.sleep(0.010)
        asyncio.run(tick())

    async def main():
        m = await AsyncSessionManager.create(str(tmp_path), store=SqliteStore(str(tmp_path / "tick.db")))
        stamps: list[float] = []
        done = False

        async def tick():
            while not done:
                stamps.append(time.perf_counter())
                await asyncio.sleep(0.010)

        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0.030)
        for i in range(count):
            await m.append_message(user(f"message {i}"))
        done = True
        await ticker
        assert len(m.get_entries()) == count
        return stamps

    thread = threading.Thread(target=control_ticker)
    thread.start()
    try:
        stamps = asyncio.run(main())
    finally:
        running.clear()
        thread.join()
    return len(stamps), most_missed(stamps), most_missed(control)


@pytest.mark.timing
def test_the_loop_keeps_ticking_during_1000_durable_appends(tmp_path):
    ticks, missed, machine = ticker_during_appends(tmp_path, 1_000)
    print(f"1,000 appends: {ticks} ticks, at most {missed} missed in a row (control ticker: {machine})")
    # A loop blocked by the writes would miss every tick of the run (hundreds).
    assert ticks > 20 and missed <= 3 + machine


@pytest.mark.slow
@pytest.mark.timing
def test_the_loop_keeps_ticking_during_10000_durable_appends(tmp_path):
    ticks, missed, machine = ticker_during_appends(tmp_path, 10_000)
    print(f"10,000 appends: {ticks} ticks, at most {missed} missed in a row (control ticker: {machine})")
    assert ticks > 200 and missed <= 3 + machine


