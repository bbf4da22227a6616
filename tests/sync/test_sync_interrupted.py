"""An interrupted first sync loses nothing and resumes where it stopped (issue 42;
docs/sync.md, "Durability").

A first sync writes in batches (``SqliteStore.bulk_writes``: one transaction a
second, each file's change in its own savepoint). These tests kill a ``sessiontree
sync`` subprocess mid-way (SIGKILL: the open batch is lost; SIGINT: the CLI stops
between files and commits what it did), run it again, and compare every session
(its entries, byte for byte) and every usage total with an uninterrupted sync of the
same home. The home is replayed from the real Claude Code and Codex files of
``../shared/corpus`` with new ids (``benchmarks/home.py``): real records, many files.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sessiontree.stores.sqlite.search import pending_records
from sessiontree.stores.sqlite.store import SqliteStore

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpus"

pytestmark = pytest.mark.skipif(not (CORPUS / "claude-code").is_dir(), reason="the real corpus is not beside us")


def _home_module():
    spec = importlib.util.spec_from_file_location("bench_home", ROOT / "benchmarks" / "home.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """300 Claude Code and 100 Codex sessions (about 5 MB), real records with new ids."""
    where = tmp_path_factory.mktemp("home")
    build = _home_module().build_home
    build(where, "claude-code", 300, mean=12_000)
    build(where, "codex", 100, mean=12_000)
    return where


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "PI_CODING_AGENT_DIR",
                        "ATOMIC_CODING_AGENT_DIR", "SESSIONTREE_STORE")}
    env["HOME"] = str(home)
    return env


def _cli(home: Path, db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sessiontree", "--store", f"sqlite:///{db}", *args],
                          env=_env(home), capture_output=True, text=True, timeout=600, check=False)


def _synced(db: Path) -> int:
    """How many files' states are committed (read from another connection, as a peer would)."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return 0
    try:
        return conn.execute("SELECT count(*) FROM sync_state").fetchone()[0]
    except sqlite3.Error:
        return 0
    finally:
        conn.close()


def _contents(home: Path, db: Path) -> tuple[dict[str, list[bytes]], dict[str, dict[str, int]]]:
    """Every stored session's entries (raw bytes) and ``stats --by session`` tokens."""
    store = SqliteStore(str(db))
    try:
        sessions = {}
        for sid in store.session_ids():
            parsed = store.load(sid)
            sessions[sid] = [parsed.entry_bytes(i) for i in range(len(parsed.entries))]
    finally:
        store.close()
    done = _cli(home, db, "stats", "--by", "session", "--json", "--timezone", "UTC")
    assert done.returncode == 0, done.stderr
    usage = {g["key"]: {k: g[k] for k in ("calls", "inputTokens", "outputTokens", "cacheReadTokens",
                                          "cacheWriteTokens")}
             for g in json.loads(done.stdout)["groups"]}
    return sessions, usage


def _search_index(db: Path) -> tuple[int, set[tuple[str, int, str]], dict[str, set[tuple[str, int]]]]:
    """The search index as a query sees it: the entries still pending (none once a sync
    returned: search is ready), every indexed entry (session, seq, entry id), and the
    entries FTS5 itself finds for a few common trigrams (its trigrams, not only its rows)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        pending = pending_records(conn)
        rows = set(conn.execute("SELECT session_id, seq, entry_id FROM search_entries"))
        found = {term: set(conn.execute(
            "SELECT e.session_id, e.seq FROM search_fts JOIN search_entries AS e ON e.rowid = search_fts.rowid"
            " WHERE search_fts MATCH ?", (f'"{term}"',))) for term in ("the", "ing", "err", "tes")}
    finally:
        conn.close()
    return pending, rows, found


@pytest.fixture(scope="module")
def reference(home: Path, tmp_path_factory) -> tuple[int, dict[str, list[bytes]], dict[str, dict[str, int]]]:
    """An uninterrupted first sync of the home: (files, sessions, usage)."""
    db = tmp_path_factory.mktemp("reference") / "store.db"
    done = _cli(home, db, "sync", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["rejected"] == 0 and report["new"] >= 390, report
    sessions, usage = _contents(home, db)
    assert len(sessions) == report["new"] and len(usage) > 300
    pending, rows, found = _search_index(db)
    # Search is ready when the sync returns: every entry with text indexed, nothing pending.
    assert pending == 0 and report["entriesIndexed"] == report["entriesAdded"]
    assert len(rows) > 1000 and all(found.values())
    return report["new"], sessions, usage, (rows, found)


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT], ids=["kill-9", "ctrl-c"])
def test_an_interrupted_first_sync_loses_nothing_and_resumes(home, tmp_path, reference, how):
    files, sessions, usage, index = reference
    db = tmp_path / "store.db"
    process = subprocess.Popen([sys.executable, "-m", "sessiontree", "--store", f"sqlite:///{db}", "sync", "--json"],
                               env=_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while _synced(db) == 0 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(how)
    process.communicate(timeout=120)
    stopped_at = _synced(db)
    # Mid-way: some files committed, not all (else this test proves nothing).
    assert 0 < stopped_at < files, stopped_at
    again = _cli(home, db, "sync", "--json")
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    # It resumes: the files committed before the stop are not read again.
    assert report["unchanged"] == stopped_at and report["new"] == files - stopped_at, report
    assert _contents(home, db) == (sessions, usage)
    # The rerun finished the search index: the same entries indexed, the same trigrams
    # found, nothing left pending (the killed batch's index rows went with its entries).
    pending, rows, found = _search_index(db)
    assert pending == 0
    assert (rows, found) == index
