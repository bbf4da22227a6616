"""One benchmark case on the Python side, in its own process (ours and the limits).

Invoked by ``run.py`` as ``python benchmarks/worker.py '<json command>'``;
prints one JSON object on stdout::

    {"times": [seconds, ...], "rss0": bytes, "rss1": bytes, "hwm": bytes, "result": ...}

``cpu`` is the process CPU time (user + system, every thread) of the same
iterations: steadier than wall time on a loaded machine.
``times`` are the measured iterations (after ``warmup`` untimed ones; with
``first_timed`` the first run is one of them);
``rss0`` is the resident set before the first iteration, ``rss1`` after it
(garbage collected, result still held), ``hwm`` the process's peak RSS
(``VmHWM``). The Node driver (``node/driver.mjs``) prints the same shape,
read from the same ``/proc/self/status`` fields, so the columns compare.

Command keys: ``op`` (one of :data:`OPS`), ``warmup``, ``iters`` and the
op's own arguments (paths prepared by ``run.py``).
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import orjson

from sessiontree import SessionManager
from sessiontree.format.codec import read_session_file
from sessiontree.format.ids import new_entry_id
from sessiontree.stores.jsonl.store import JsonlStore
from sessiontree.stores.sqlite.store import SqliteStore


def _status(field: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def rss() -> int:
    return _status("VmRSS")


def hwm() -> int:
    return _status("VmHWM")


def _iso(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


def _open_full(store: Any, session_id: str) -> SessionManager:
    """``SessionManager.open`` loading every entry (``lazy=False``; older code, run for
    ``(before)`` rows, has no lazy open and always loads everything)."""
    try:
        return SessionManager.open(store, session_id, lazy=False)
    except TypeError:
        return SessionManager.open(store, session_id)


def _messages(path: str, count: int) -> list[dict[str, Any]]:
    with open(path, "rb") as handle:
        messages = [orjson.loads(line) for line in handle if line.strip()]
    return messages[:count]


class Case:
    """``setup()`` once, then ``run()`` per iteration (timed), ``reset()`` between them (untimed)."""

    def setup(self) -> None:
        pass

    def run(self) -> Any:
        raise NotImplementedError

    def reset(self) -> None:
        pass

    def teardown(self) -> None:
        pass


# -- load --------------------------------------------------------------------------------

class LoadSqlite(Case):
    """``SessionManager.open(SqliteStore, id, lazy=False)``: the default store, every
    entry loaded (the lazy open reads a fraction of the session; the ``resume`` rows
    measure it)."""

    def __init__(self, cmd: dict[str, Any]) -> None:
        self.db, self.id = cmd["db"], cmd["id"]
        self.pause_gc = cmd.get("pause_gc", False)

    def setup(self) -> None:
        self.store = SqliteStore(self.db)

    def run(self) -> Any:
        if not self.pause_gc:
            return _open_full(self.store, self.id)
        # What-if row: the cyclic collector paused around the load, as
        # parse_session does for files; the store itself does not (yet).
        gc.disable()
        try:
            return _open_full(self.store, self.id)
        finally:
            gc.enable()


class LoadJsonl(Case):
    """``SessionManager.open_file(path)`` of a format-4 file (JsonlStore, shared lock)."""

    def __init__(self, cmd: dict[str, Any]) -> None:
        self.file = cmd["file"]

    def run(self) -> Any:
        return SessionManager.open_file(self.file)


class ReadFile(Case):
    """``read_session_file``: read, validate and upgrade format 3 -> 4 in memory."""

    def __init__(self, cmd: dict[str, Any]) -> None:
        self.file = cmd["file"]

    def run(self) -> Any:
        return read_session_file(self.file)


class LimitParse(Case):
    """The floor of loading: read the bytes and ``orjson.loads`` every line."""

    def __init__(self, cmd: dict[str, Any]) -> None:
        self.file = cmd["file"]

    def run(self) -> Any:
        # The cyclic garbage collector is paused: its passes are interpreter
        # overhead, not part of the floor (sessiontree's reader pauses it too).
        gc.disable()
        try:
            with open(self.file, "rb") as handle:
                data = handle.read()
            loads = orjson.loads
            return [loads(line) for line in data.split(b"\n") if line]
        finally:
            gc.enable()


class Resume(Case):
    """What a user waits for when resuming a session: open the SQLite store, open
    the session by id and build the context its next request sends."""

    def __init__(self, cmd: dict[str, Any]) -> None:
        self.db, self.id = cmd["db"], cmd["id"]

    def run(self) -> Any:
        store = SqliteStore(self.db)
        try:
            return len(SessionManager.open(store, self.id).build_session_context().messages)
        finally:
            store.close()


# -- projection --------------------------------------------------------------------------

class Project(Case):
    """A cold ``build_session_projection()`` of the active (deepest) branch of a loaded
    session: the manager's kept projection is dropped before each run, so every run is
    what a manager's first call after ``open`` does."""

    def __init__(self, cmd: dict[str, Any]) -> None:
        self.db, self.id = cmd["db"], cmd["id"]

    def setup(self) -> None:
        self.manager = _open_full(SqliteStore(self.db), self.id)

    def run(self) -> Any:
        self.manager._projector = None  # private: forces a build from scratch
        return len(self.manager.build_session_projection().messages)


class ProjectWarm(Project):
    """``build_session_projection()`` again on an unchanged session: the manager's kept
    projection, copied out (the reference rebuilds on every call)."""

    def run(self) -> Any:
        return len(self.manager.build_session_projection().messages)


def turn_messages(turn: int, stamp: int) -> list[dict[str, Any]]:
    """One agent turn: a prompt, a tool call, its result, the answer (the Node driver builds the same)."""
    call = f"call_turn_{turn}"
    usage = {"input": 1200, "output": 80, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1280,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
    common = {"api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5", "usage": usage}
    return [
        {"role": "user", "content": [{"type": "text", "text": f"Turn {turn}: run the tests again."}],
         "timestamp": stamp},
        {"role": "assistant", "content": [{"type": "toolCall", "id": call, "name": "bash",
                                           "arguments": {"command": "pytest -q"}}],
         "stopReason": "toolUse", "timestamp": stamp + 1, **common},
        {"role": "toolResult", "toolCallId": call, "toolName": "bash",
         "content": [{"type": "text", "text": "412 passed in 3.1s"}], "isError": False, "timestamp": stamp + 2},
        {"role": "assistant", "content": [{"type": "text", "text": "All 412 tests pass."}],
         "stopReason": "stop", "timestamp": stamp + 3, **common},
    ]


class Turn(Case):
    """One agent turn in a live session: append its four messages (durable SQLite
    appends, one transaction each; ``"synchronous": "normal"``: no fsync, the agent's
    durability), then ``build_session_context()``. The session is a copy of the
    benchmark's; it grows by a turn per run."""

    def __init__(self, cmd: dict[str, Any]) -> None:
        self.db, self.id, self.base = cmd["db"], cmd["id"], cmd["tmp"]
        self.synchronous = cmd.get("synchronous", "full")
        self.turn = 0

    def setup(self) -> None:
        self.dir = tempfile.mkdtemp(dir=self.base)
        copy = os.path.join(self.dir, "s.db")
        shutil.copyfile(self.db, copy)
        self.manager = SessionManager.open(SqliteStore(copy, synchronous=self.synchronous), self.id)

    def run(self) -> Any:
        self.turn += 1
        for message in turn_messages(self.turn, 1_800_000_000_000 + 10 * self.turn):
            self.manager.append_message(message)
        return len(self.manager.build_session_context().messages)

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


# -- appends -----------------------------------------------------------------------------

class _ScratchCase(Case):
    """A case that writes into a fresh scratch directory under ``self.base`` per run."""

    base: str
    dir: str

    def reset(self) -> None:
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = tempfile.mkdtemp(dir=self.base)

    def setup(self) -> None:
        self.reset()

    def teardown(self) -> None:
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)


class _AppendCase(_ScratchCase):
    def __init__(self, cmd: dict[str, Any]) -> None:
        self.count = cmd["count"]
        self.messages = _messages(cmd["messages"], self.count)
        self.base = cmd["tmp"]
        self.dir = ""



class AppendSqlite(_AppendCase):
    """``append_message`` once per entry into a new SQLite session: one transaction each."""

    def __init__(self, cmd: dict[str, Any]) -> None:
        super().__init__(cmd)
        self.synchronous = cmd.get("synchronous")

    def run(self) -> Any:
        # synchronous="normal" (opt-in) survives a process crash but may lose the last
        # commits on power loss, like the reference's un-fsynced appends.
        store = SqliteStore(os.path.join(self.dir, "s.db"), synchronous=self.synchronous or "full")
        manager = SessionManager.create("/home/dev/work/project", store=store)
        for message in self.messages:
            manager.append_message(message)
        store.close()
        return self.count


class AppendJsonl(_AppendCase):
    """``append_message`` once per entry into a new JSONL session: lock, write, fsync each
    (no fsync with ``"fsync": false``, the opt-in ``JsonlStore(dir, fsync=False)``)."""

    def __init__(self, cmd: dict[str, Any]) -> None:
        super().__init__(cmd)
        self.fsync = cmd.get("fsync", True)

    def run(self) -> Any:
        manager = SessionManager.create("/home/dev/work/project", store=JsonlStore(self.dir, fsync=self.fsync))
        for message in self.messages:
            manager.append_message(message)
        return self.count


class AppendSqliteBatch(_AppendCase):
    """``SqliteStore.append(id, batch)``: ``batch`` entries per transaction (entries built inside the timing)."""

    def __init__(self, cmd: dict[str, Any]) -> None:
        super().__init__(cmd)
        self.batch = cmd["batch"]

    def run(self) -> Any:
        store = SqliteStore(os.path.join(self.dir, "s.db"))
        manager = SessionManager.create("/home/dev/work/project", store=store)
        header = manager.get_header()
        store.create(header, [])
        used: set[str] = set()
        parent = None
        stamp = 1_767_225_600_000
        pending = []
        for message in self.messages:
            entry_id = new_entry_id(used)
            used.add(entry_id)
            stamp += 1
            pending.append({"type": "message", "id": entry_id, "parentId": parent, "timestamp": _iso(stamp),
                            "message": message})
            parent = entry_id
            if len(pending) == self.batch:
                store.append(header["id"], pending)
                pending = []
        if pending:
            store.append(header["id"], pending)
        store.close()
        return self.count


def _raw_db(path: str, synchronous: str = "full") -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
    conn.execute("CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, header BLOB NOT NULL)")
    conn.execute("CREATE TABLE IF NOT EXISTS entries (session_id TEXT NOT NULL, seq INTEGER NOT NULL,"
                 " json BLOB NOT NULL, PRIMARY KEY (session_id, seq))")
    return conn


class LimitSqliteInsert(_AppendCase):
    """Raw SQLite: the same rows (serialized entries) inserted ``batch`` per transaction, WAL +
    FULL sync (``"synchronous": "normal"``: NORMAL, the floor of the no-fsync append rows)."""

    def __init__(self, cmd: dict[str, Any]) -> None:
        super().__init__(cmd)
        self.batch = cmd["batch"]
        self.synchronous = cmd.get("synchronous", "full")

    def run(self) -> Any:
        conn = _raw_db(os.path.join(self.dir, "raw.db"), self.synchronous)
        dumps = orjson.dumps
        rows = []
        for seq, message in enumerate(self.messages):
            rows.append(("s1", seq, dumps({"type": "message", "id": f"{seq:08x}", "parentId": None,
                                           "timestamp": "2026-01-01T00:00:00.000Z", "message": message})))
            if len(rows) == self.batch:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany("INSERT INTO entries VALUES (?, ?, ?)", rows)
                conn.execute("COMMIT")
                rows = []
        if rows:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT INTO entries VALUES (?, ?, ?)", rows)
            conn.execute("COMMIT")
        conn.close()
        return self.count


class LimitFileAppend(_AppendCase):
    """Raw file: one ``write`` + ``fsync`` per serialized entry (the JSONL durable floor)."""

    def run(self) -> Any:
        fd = os.open(os.path.join(self.dir, "raw.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        dumps = orjson.dumps
        try:
            for seq, message in enumerate(self.messages):
                os.write(fd, dumps({"type": "message", "id": f"{seq:08x}", "parentId": None,
                                    "timestamp": "2026-01-01T00:00:00.000Z", "message": message}) + b"\n")
                os.fsync(fd)
        finally:
            os.close(fd)
        return self.count


# -- listing and search ------------------------------------------------------------------

class ListSqlite(Case):
    """``SessionManager.list_all`` of a SQLite store (opened inside the timing)."""

    def __init__(self, cmd: dict[str, Any]) -> None:
        self.db = cmd["db"]

    def run(self) -> Any:
        store = SqliteStore(self.db)
        try:
            return len(SessionManager.list_all(store))
        finally:
            store.close()


class ListJsonl(Case):
    """``SessionManager.list_all(dir)``: a JSONL directory, every file parsed (as the reference does)."""

    def __init__(self, cmd: dict[str, Any]) -> None:
        self.dir = cmd["dir"]

    def run(self) -> Any:
        return len(SessionManager.list_all(self.dir))


class LimitList(Case):
    """Raw SQLite: select the listing columns of every session (no objects built)."""

    def __init__(self, cmd: dict[str, Any]) -> None:
        self.db = cmd["db"]

    def run(self) -> Any:
        conn = sqlite3.connect(self.db)
        try:
            return len(conn.execute(
                "SELECT id, header_json, classified, cwd, updated_at, message_count, first_message, modified_ms,"
                " has_name, name, anchor_id, summary_through, summary_text FROM sessions").fetchall())
        finally:
            conn.close()


class SearchSqlite(Case):
    """``sessiontree.search.search`` on the SQLite store (FTS5 index; store opened read-only
    inside the timing). ``limit``: hits asked for (``None``: every hit, with snippets and
    branch flags). Returns the number of distinct sessions hit (all hits) or of hits."""

    def __init__(self, cmd: dict[str, Any]) -> None:
        self.db, self.query, self.limit = cmd["db"], cmd["query"], cmd.get("limit")

    def run(self) -> Any:
        from sessiontree.search.query import search

        store = SqliteStore(self.db, readonly=True)
        try:
            hits = search(store, self.query, limit=self.limit).hits
            return len({hit.session_id for hit in hits}) if self.limit is None else len(hits)
        finally:
            store.close()


class SearchJsonl(Case):
    """The same search on a JSONL store over the corpus files: a scan that reads every file."""

    def __init__(self, cmd: dict[str, Any]) -> None:
        self.dir, self.query, self.limit = cmd["dir"], cmd["query"], cmd.get("limit")

    def run(self) -> Any:
        from sessiontree.search.query import search

        store = JsonlStore(self.dir, readonly=True)
        hits = search(store, self.query, limit=self.limit).hits
        return len({hit.session_id for hit in hits}) if self.limit is None else len(hits)


class SearchListing(Case):
    """Before the search API: ``list_all`` then ``query in info.all_messages_text``."""

    def __init__(self, cmd: dict[str, Any]) -> None:
        self.db, self.query = cmd["db"], cmd["query"]

    def run(self) -> Any:
        store = SqliteStore(self.db, readonly=True)
        try:
            return sum(1 for info in SessionManager.list_all(store) if self.query in info.all_messages_text)
        finally:
            store.close()


class LimitSearch(Case):
    """Raw SQLite: ``instr`` over the same message texts, distinct sessions."""

    def __init__(self, cmd: dict[str, Any]) -> None:
        self.db, self.query = cmd["db"], cmd["query"]

    def run(self) -> Any:
        conn = sqlite3.connect(self.db)
        try:
            return len(conn.execute("SELECT DISTINCT session_id FROM message_texts WHERE instr(text, ?) > 0",
                                    (self.query,)).fetchall())
        finally:
            conn.close()


# -- import ------------------------------------------------------------------------------

class _ImportCase(_ScratchCase):
    def __init__(self, cmd: dict[str, Any]) -> None:
        src = cmd["dir"]
        self.files = sorted(os.path.join(src, name) for name in os.listdir(src) if name.endswith(".jsonl"))
        self.base = cmd["tmp"]
        self.dir = ""



class ImportSqlite(_ImportCase):
    """``SessionManager.import_files`` of every file into one new SQLite store (groups of up
    to 100 sessions per transaction); with ``"settle": true`` each group settled as it is
    written (``settle=True``, where the code has it) and then ``settle_derived()``, the
    whole of what ``sessiontree import`` runs. With ``"per_file": true``,
    ``SessionManager.import_from_jsonl`` per file (a transaction each), the row of earlier runs;
    code without ``import_files`` (a ``--before`` tree) runs that too."""

    def __init__(self, cmd: dict[str, Any]) -> None:
        super().__init__(cmd)
        self.per_file = cmd.get("per_file", False) or not hasattr(SessionManager, "import_files")
        #: Also settle the derived data at the end, as the command does (the search index's
        #: merge, which no write does; see docs/search.md).
        self.settle = cmd.get("settle", False)

    def run(self) -> Any:
        store = SqliteStore(os.path.join(self.dir, "import.db"))
        try:
            if self.per_file:
                for path in self.files:
                    SessionManager.import_from_jsonl(path, None, store)
            else:
                # As `sessiontree import` runs it: each group settled as it is written, when
                # the code has that (a --before tree may not), then the final settle.
                import inspect

                kw = {"settle": True} if self.settle and "settle" in inspect.signature(
                    SessionManager.import_files).parameters else {}
                for outcome in SessionManager.import_files(self.files, None, store, **kw):
                    if outcome.error is not None:
                        raise outcome.error
            if self.settle:
                store.settle_derived()
        finally:
            store.close()
        return len(self.files)


class LimitImport(_ImportCase):
    """Read + ``orjson`` parse every line + raw SQLite inserts of the rows, a transaction per session
    (``"group": n``: per ``n`` sessions, as ``SessionManager.import_files`` groups them)."""

    def __init__(self, cmd: dict[str, Any]) -> None:
        super().__init__(cmd)
        self.group = cmd.get("group", 1)

    def run(self) -> Any:
        gc.disable()  # as in LimitParse
        try:
            return self._run()
        finally:
            gc.enable()

    def _run(self) -> Any:
        conn = _raw_db(os.path.join(self.dir, "raw.db"))
        loads = orjson.loads
        pending = 0
        for path in self.files:
            with open(path, "rb") as handle:
                lines = [line for line in handle.read().split(b"\n") if line]
            header = loads(lines[0])
            for line in lines[1:]:
                loads(line)
            if not conn.in_transaction:
                conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO sessions VALUES (?, ?)", (header["id"], lines[0]))
            conn.executemany("INSERT INTO entries VALUES (?, ?, ?)",
                             [(header["id"], seq, line) for seq, line in enumerate(lines[1:])])
            pending += 1
            if pending == self.group:
                conn.execute("COMMIT")
                pending = 0
        if conn.in_transaction:
            conn.execute("COMMIT")
        conn.close()
        return len(self.files)


OPS: dict[str, Callable[[dict[str, Any]], Case]] = {
    "load_sqlite": LoadSqlite,
    "load_jsonl": LoadJsonl,
    "read_file": ReadFile,
    "limit_parse": LimitParse,
    "resume": Resume,
    "project": Project,
    "project_warm": ProjectWarm,
    "turn": Turn,
    "append_sqlite": AppendSqlite,
    "append_jsonl": AppendJsonl,
    "append_sqlite_batch": AppendSqliteBatch,
    "limit_sqlite_insert": LimitSqliteInsert,
    "limit_file_append": LimitFileAppend,
    "list_sqlite": ListSqlite,
    "list_jsonl": ListJsonl,
    "limit_list": LimitList,
    "search_sqlite": SearchSqlite,
    "search_jsonl": SearchJsonl,
    "search_listing": SearchListing,
    "limit_search": LimitSearch,
    "import_sqlite": ImportSqlite,
    "limit_import": LimitImport,
}


def execute(cmd: dict[str, Any]) -> dict[str, Any]:
    if cmd.get("index") is False:
        # "Before the index" rows: writes maintain no search index (its tables
        # exist, empty); the other derived data (usage ledger) is kept, as in
        # bench_search_append.py, so the ratio is the search index's own cost.
        from sessiontree.stores.sqlite import search as sqlite_search
        from sessiontree.stores.sqlite.store import DERIVED_INDEXES

        if sqlite_search.INDEX in DERIVED_INDEXES:
            DERIVED_INDEXES.remove(sqlite_search.INDEX)
    case = OPS[cmd["op"]](cmd)
    case.setup()
    try:
        gc.collect()
        rss0 = rss()
        started, cpu_started = time.perf_counter(), time.process_time()
        result = case.run()  # first run: memory is measured on it (and it warms caches)
        first_time = time.perf_counter() - started
        first_cpu = time.process_time() - cpu_started
        gc.collect()
        rss1 = rss()
        first_result = result if isinstance(result, (int, float, str)) else None
        del result
        gc.collect()
        # Slow cases (appends, imports) time their first run too, rather than run twice.
        times: list[float] = [first_time] if cmd.get("first_timed") else []
        cpu: list[float] = [first_cpu] if cmd.get("first_timed") else []
        warmup = max(0, cmd.get("warmup", 1) - 1)
        for index in range(warmup + cmd.get("iters", 3) - len(times)):
            case.reset()
            started, cpu_started = time.perf_counter(), time.process_time()
            result = case.run()
            elapsed = time.perf_counter() - started
            cpu_time = time.process_time() - cpu_started
            del result
            gc.collect()
            if index >= warmup:
                times.append(elapsed)
                cpu.append(cpu_time)
    finally:
        case.teardown()
    return {"times": times, "cpu": cpu, "rss0": rss0, "rss1": rss1, "hwm": hwm(), "result": first_result}


def main() -> int:
    cmd = json.loads(sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read())
    print(json.dumps(execute(cmd)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
