"""``sessiontree sync``: every outcome, on a fake home holding both agents' layouts.

The real home is never read: ``HOME`` and the agents' variables point into
``tmp_path`` for every test. Sessions are written the way the agents write
them: ``<sessions>/--<cwd>--/<timestamp>_<uuid>.jsonl``, one JSON record per
line, appended to while the agent runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import corpus
from cli_support import run_cli, run_cli_json
from sessiontree.errors import SessionError
from sessiontree.stores import SqliteStore, open_store
from sessiontree.sync.engine import Syncer, discover
from sessiontree.sync.sources import agent_sources
from sync_support import OTHER, PROJECT, SID, agent_file, append, entries, file_entries, head, record, stored_entries

pytestmark = pytest.mark.usefixtures("_fake_home")

ROOT = Path(__file__).resolve().parents[2]
CORPUS = corpus.shared("pi-v1")
#: Where the large session is read from: the repository's copy.
VENDORED = corpus.vendored("pi-v1")
LARGE = "d703a1a9-1b7b-4fb1-b512-c9738b1fe617"


run = run_cli
run_json = run_cli_json


# --------------------------------------------------------------------------- sources


def test_sources_follow_the_agents_rules(tmp_path, _fake_home, monkeypatch):
    home = _fake_home
    found = agent_sources()
    assert [(s.agent, s.path, s.origin, s.exists) for s in found] == [
        ("pi", str(home / ".pi/agent/sessions"), "default", False),
        ("atomic", str(home / ".atomic/agent/sessions"), "default", False),
        ("claude-code", str(home / ".claude/projects"), "default", False),
        ("codex", str(home / ".codex/sessions"), "default", False),
        ("gemini", str(home / ".gemini/tmp"), "default", False),
        ("omp", str(home / ".omp/agent/sessions"), "default", False)]
    # oh-my-pi reads pi's variable too: with it set, its folder is pi's, listed once.
    foreign = [("claude-code", str(home / ".claude/projects"), "default"),
               ("codex", str(home / ".codex/sessions"), "default"),
               ("gemini", str(home / ".gemini/tmp"), "default")]
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "pi-dir"))
    # Atomic takes PI_CODING_AGENT_DIR as its compatibility alias: the same folder, listed once.
    assert [(s.agent, s.path, s.origin) for s in agent_sources()] == [
        ("pi", str(tmp_path / "pi-dir/sessions"), "PI_CODING_AGENT_DIR"), *foreign]
    monkeypatch.setenv("ATOMIC_CODING_AGENT_DIR", "~/atomic-dir")
    assert [(s.agent, s.path, s.origin) for s in agent_sources()] == [
        ("pi", str(tmp_path / "pi-dir/sessions"), "PI_CODING_AGENT_DIR"),
        ("atomic", str(home / "atomic-dir/sessions"), "ATOMIC_CODING_AGENT_DIR"), *foreign]
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-dir"))
    monkeypatch.setenv("CODEX_HOME", "~/codex-dir")
    assert [(s.agent, s.path, s.origin) for s in agent_sources()][2:] == [
        ("claude-code", str(tmp_path / "claude-dir/projects"), "CLAUDE_CONFIG_DIR"),
        ("codex", str(home / "codex-dir/sessions"), "CODEX_HOME"),
        ("gemini", str(home / ".gemini/tmp"), "default")]


def test_sync_without_paths_reads_both_agents_folders(tmp_path, _fake_home):
    pi = agent_file(_fake_home, "pi", SID, 3)
    atomic = agent_file(_fake_home, "atomic", OTHER, 2)
    listed = run_json(None, "sources")
    assert [(row["agent"], row["exists"], row["files"]) for row in listed] == [
        ("pi", True, 1), ("atomic", True, 1), ("claude-code", False, 0), ("codex", False, 0), ("gemini", False, 0),
        ("omp", False, 0)]
    db = f"sqlite:///{tmp_path / 's.db'}"
    report = run_json(db, "sync")
    assert (report["new"], report["entriesAdded"], report["rejected"]) == (2, 5, 0)
    assert {row["path"] for row in report["files"]} == {str(pi), str(atomic)}
    with open_store(db) as s:
        assert stored_entries(s, SID) == file_entries(pi)
        assert stored_entries(s, OTHER) == file_entries(atomic)
    out = run(db, "sync").stdout
    assert "0 new, 0 grown (+0 entries), 2 unchanged, 0 in progress, 0 diverged, 0 rejected" in out


def test_the_first_sync_says_when_search_is_ready(tmp_path, _fake_home):
    # 3 + 2 entries written, so 5 settled at the end; the re-sync writes nothing and says nothing.
    pi = agent_file(_fake_home, "pi", SID, 3)
    agent_file(_fake_home, "atomic", OTHER, 2)
    db = f"sqlite:///{tmp_path / 's.db'}"
    out = run(db, "sync").stdout
    assert "0 rejected\nsearch ready (5 entries indexed)\n" in out
    assert "search ready" not in run(db, "sync").stdout
    report = run_json(db, "sync")
    assert "entriesIndexed" not in report
    append(pi, entries(4, 1, f"{3:08x}"))
    report = run_json(db, "sync")
    assert (report["entriesAdded"], report["entriesIndexed"], report["indexingLeft"]) == (1, 1, False)


def test_no_agent_folder_is_a_clear_error(tmp_path):
    result = run(f"sqlite:///{tmp_path / 's.db'}", "sync", code=1)
    assert "no agent session folders found" in result.stderr


# --------------------------------------------------------------------------- outcomes


def test_new_is_imported_as_import_does(tmp_path, _fake_home):
    path = agent_file(_fake_home)
    synced, imported = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    run(synced, "sync", str(path))
    run(imported, "import", str(path))
    assert run(synced, "export", SID).stdout_bytes == run(imported, "export", SID).stdout_bytes


def test_a_name_set_with_sessiontree_survives_growth(tmp_path, _fake_home):
    path = agent_file(_fake_home, n=2)
    db = f"sqlite:///{tmp_path / 's.db'}"
    run(db, "sync", str(path))
    run(db, "name", SID, "My work")
    append(path, entries(3, 2, "00000002"))
    report = run_json(db, "sync", str(path))
    assert (report["grown"], report["entriesAdded"]) == (1, 2)
    rows = run_json(db, "list")
    assert rows[0]["name"] == "My work"
    with open_store(db) as s:
        from_file = [b for b in stored_entries(s) if b"session_info" not in b]
        assert from_file == file_entries(path)
    # Even read whole (the state forgotten), the store-only name hangs off the file's entries: not diverged.
    with SqliteStore(tmp_path / "s.db") as s:
        s.db.connection().execute("DELETE FROM sync_state")
        assert Syncer(s).sync_file(str(path)).status == "unchanged"


def test_symlink_loops_and_unreadable_folders_are_reported(tmp_path, monkeypatch):
    root = tmp_path / "sessions"
    (root / "a").mkdir(parents=True)
    os.symlink(root, root / "a" / "loop")
    os.symlink(tmp_path / "x.jsonl", tmp_path / "y.jsonl")
    os.symlink(tmp_path / "y.jsonl", tmp_path / "x.jsonl")
    os.symlink(tmp_path / "y.jsonl", root / "cycle.jsonl")
    os.symlink(tmp_path / "missing.jsonl", root / "dangling.jsonl")
    (root / "locked").mkdir()
    real = os.scandir

    def scandir(p):
        if os.fspath(p).endswith("locked"):
            raise PermissionError(13, "Permission denied", os.fspath(p))
        return real(p)

    monkeypatch.setattr(os, "scandir", scandir)
    files, rejected = discover([str(root)])
    assert files == []
    reasons = {Path(r.path).name: r.reason for r in rejected}
    assert reasons == {"loop": "symbolic link loop (it leads back to a folder being read)",
                       "cycle.jsonl": "symbolic link loop", "dangling.jsonl": "dangling symbolic link",
                       "locked": "permission denied"}


def test_cli_summary_json_and_exit_status(tmp_path, _fake_home):
    good = agent_file(_fake_home)
    (good.parent / "bad.jsonl").write_text("nope\n")
    db = f"sqlite:///{tmp_path / 's.db'}"
    result = run(db, "sync", code=1)
    assert "1 new, 0 grown (+0 entries), 0 unchanged, 0 in progress, 0 diverged, 1 rejected" in result.stdout
    assert "line 1: malformed line" in result.stdout
    assert "1 rejected, 0 diverged" in result.stderr
    (good.parent / "bad.jsonl").unlink()
    assert run_json(db, "sync")["unchanged"] == 1


def test_dry_run_writes_nothing(tmp_path, _fake_home):
    agent_file(_fake_home)
    db = tmp_path / "s.db"
    report = run_json(f"sqlite:///{db}", "sync", "--dry-run")
    assert report["new"] == 1
    assert not db.exists()


def test_another_store_is_a_source(tmp_path, _fake_home):
    path = agent_file(_fake_home)
    local, team = f"sqlite:///{tmp_path / 'local.db'}", f"sqlite:///{tmp_path / 'team.db'}"
    run(local, "sync", str(path))
    assert run_json(team, "sync", local)["new"] == 1
    append(path, entries(4, 2, "00000003"))
    run(local, "sync", str(path))
    report = run_json(team, "sync", str(tmp_path / "local.db"))  # a plain SQLite path works too
    assert (report["grown"], report["entriesAdded"]) == (1, 2)
    assert run(team, "export", SID).stdout_bytes == run(local, "export", SID).stdout_bytes


def test_a_jsonl_store_on_the_agents_folder_reads_every_project(tmp_path, _fake_home):
    agent_file(_fake_home, "pi", SID)
    agent_file(_fake_home, "pi", OTHER)
    sessions = str(_fake_home / ".pi" / "agent" / "sessions")
    rows = run_json(sessions, "list")
    assert sorted(row["id"] for row in rows) == sorted([SID, OTHER])
    assert b"message 3" in run(sessions, "export", SID).stdout_bytes
    shown = json.dumps(run_json(sessions, "show", OTHER, "--tree"))
    assert PROJECT in shown and "message 2" in shown
    # Syncing the folder into itself changes nothing.
    report = run_json(sessions, "sync")
    assert report["files"] == [] and any("is the store itself" in note for note in report["notes"])


# --------------------------------------------------------------------------- concurrency


def test_two_sync_processes_at_once(tmp_path, _fake_home):
    for n in range(30):
        agent_file(_fake_home, session_id=f"{SID[:-2]}{n:02d}", n=20)
    db = tmp_path / "s.db"
    SqliteStore(db).close()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, "-c", "from sessiontree.cli import main; main()", "--store", f"sqlite:///{db}",
               "sync", "--json"]
    procs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    for _, err in outs:
        assert err in (b"", b"sessiontree: another sync is running on this store; waiting for it to finish\xe2\x80\xa6\n")
    reports = [json.loads(out) for out, _ in outs]
    assert sorted(r["new"] for r in reports) == [0, 30]
    with SqliteStore(db) as s:
        for n in range(30):
            session_id = f"{SID[:-2]}{n:02d}"
            path = _fake_home / ".pi/agent/sessions" / PROJECT / f"2026-03-01T10-00-00-000Z_{session_id}.jsonl"
            assert stored_entries(s, session_id) == file_entries(path)


def test_sync_and_import_of_the_same_sessions_into_a_jsonl_store_at_once(tmp_path, _fake_home):
    """Two real processes create the same sessions in one JSONL store: whichever loses a
    session's race finds it already there (sync: unchanged; import: present), never a
    storage error or an aborted run."""
    ids = [f"{SID[:-3]}{n:03d}" for n in range(120)]
    paths = [agent_file(_fake_home, session_id=session_id, n=3) for session_id in ids]
    folder = tmp_path / "store"
    folder.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    base = [sys.executable, "-c", "from sessiontree.cli import main; main()", "--store", str(folder)]
    commands = [[*base, "sync", "--json"], [*base, "import", "--json", *map(str, paths)]]
    procs = [subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for c in commands]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert all(b"Traceback" not in err for _, err in outs), outs
    synced, imported = (json.loads(out) for out, _ in outs)
    assert {row["status"] for row in synced["files"]} <= {"new", "unchanged"}
    assert {row["status"] for row in imported["files"]} <= {"imported", "present"}
    store = open_store(str(folder))
    try:
        for session_id, path in zip(ids, paths, strict=True):
            assert stored_entries(store, session_id) == file_entries(path)
    finally:
        store.close()


def _target(kind: str, request, tmp_path) -> str:
    """A store URL of ``kind``: a SQLite file, or a fresh PostgreSQL database."""
    return request.getfixturevalue("pg_url") if kind == "postgres" else f"sqlite:///{tmp_path / 's.db'}"


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_the_state_compare_and_set_stops_a_second_writer(kind, request, tmp_path, _fake_home):
    """Two engines that both decided to append: the second finds the state moved on,
    decides again, and adds nothing twice."""
    path = agent_file(_fake_home, n=2)
    with open_store(_target(kind, request, tmp_path)) as s:
        Syncer(s).sync_file(str(path))
        first, second = Syncer(s), Syncer(s)  # both read the same state
        append(path, entries(3, 2, "00000002"))
        assert first.sync_file(str(path)).added == 2
        result = second.sync_file(str(path))
        assert (result.status, result.added) == ("unchanged", 0)
        assert stored_entries(s) == file_entries(path)


# --------------------------------------------------------------------------- watch


def test_watch_syncs_changes_and_stops_on_ctrl_c(tmp_path, _fake_home):
    path = agent_file(_fake_home, n=2)
    db = tmp_path / "s.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, "-c", "from sessiontree.cli import main; main()", "--store",
                             f"sqlite:///{db}", "sync", "--watch", "--debounce", "100"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (db.exists() and _count(db) == 2):
            time.sleep(0.1)
        time.sleep(0.5)  # the watcher is set up after the first sync
        append(path, entries(3, 3, "00000002"))
        while time.monotonic() < deadline and _count(db) != 5:
            time.sleep(0.1)
        assert _count(db) == 5
    finally:
        proc.send_signal(2)  # Ctrl-C
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert b"watch stopped" in err and b"Traceback" not in err
    assert b"grown" in out


def test_watch_keeps_watching_when_an_import_creates_the_same_sessions(tmp_path, _fake_home):
    """A watcher syncing into a JSONL store and an import of the same new files, two real
    processes: whoever loses a session's race finds it present; the watcher neither dies
    nor stops, and still syncs a later append."""
    first = agent_file(_fake_home, n=2)
    folder = tmp_path / "store"
    folder.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    base = [sys.executable, "-c", "from sessiontree.cli import main; main()", "--store", str(folder)]
    proc = subprocess.Popen([*base, "sync", "--watch", "--debounce", "50"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _jsonl_count(folder, SID) == 2:
            time.sleep(0.1)
        time.sleep(0.5)  # the watcher is set up after the first sync
        ids = [f"{SID[:-3]}{n:03d}" for n in range(1, 121)]
        paths = [agent_file(_fake_home, session_id=session_id, n=3) for session_id in ids]
        imported = subprocess.run([*base, "import", *map(str, paths)], env=env, capture_output=True, timeout=120)
        assert imported.returncode == 0, imported.stderr
        append(first, entries(3, 3, "00000002"))
        while time.monotonic() < deadline and _jsonl_count(folder, SID) != 5:
            time.sleep(0.1)
        assert proc.poll() is None, proc.communicate()
        assert _jsonl_count(folder, SID) == 5
    finally:
        proc.send_signal(2)  # Ctrl-C
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert b"Traceback" not in err, err
    assert not [line for line in out.splitlines() if line.startswith(b"rejected")], out


def _jsonl_count(folder: Path, session_id: str) -> int:
    try:
        store = open_store(str(folder), readonly=True)
    except (SessionError, OSError):
        return -1
    try:
        return len(store.read(session_id).entries) if store.exists(session_id) else 0
    except (SessionError, OSError):
        return -1
    finally:
        store.close()


def _count(db: Path) -> int:
    try:
        with SqliteStore(db, readonly=True) as s:
            return len(s.read(SID).entries) if s.exists(SID) else 0
    except (SessionError, OSError):
        return -1  # the database is being created by the watcher: try again


# --------------------------------------------------------------------------- the real corpus


@corpus.needs_shared
@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_corpus_in_the_agents_layout(kind, request, tmp_path, _fake_home):
    """``sessiontree --store URL sync`` of the corpus laid out as the agent lays it out:
    into a SQLite file, and into a team PostgreSQL database."""
    folder = _fake_home / ".pi/agent/sessions/--Users-badlogic-workspaces-pi-mono--"
    folder.mkdir(parents=True)
    for source in sorted(CORPUS.glob("*.jsonl")):
        first = json.loads(source.read_bytes().split(b"\n", 1)[0])
        stamp = first["timestamp"].replace(":", "-").replace(".", "-")
        (folder / f"{stamp}_{first['id']}.jsonl").write_bytes(source.read_bytes())
    db = _target(kind, request, tmp_path)
    report = run_json(db, "sync")
    assert (report["new"], report["entriesAdded"], report["rejected"]) == (2, 2020, 0)
    large = next(folder.glob(f"*{LARGE}.jsonl"))
    append(large, [{"type": "message", "timestamp": "2025-11-21T03:00:00.000Z",
                    "message": {"role": "user", "content": "one more", "timestamp": 1}}])
    report = run_json(db, "sync")
    assert (report["grown"], report["unchanged"], report["entriesAdded"]) == (1, 1, 1)
    with open_store(db) as s:
        assert stored_entries(s, LARGE) == file_entries(large)


@pytest.mark.postgres
def test_corpus_synced_into_postgres_is_found_by_id_from_any_host(request, tmp_path, _fake_home, monkeypatch):
    """The team database: what one laptop synced, another opens by id alone and syncs its
    own files into, each host keeping its own sync states (SESSIONTREE_SYNC_HOST)."""
    url = request.getfixturevalue("pg_url")
    folder = _fake_home / ".pi/agent/sessions/--Users-badlogic-workspaces-pi-mono--"
    folder.mkdir(parents=True)
    source = next(p for p in VENDORED.glob("*.jsonl") if LARGE.encode() in p.read_bytes().split(b"\n", 1)[0])
    (folder / f"2025-11-20T10-00-00-000Z_{LARGE}.jsonl").write_bytes(source.read_bytes())
    monkeypatch.setenv("SESSIONTREE_SYNC_HOST", "laptop-a")
    assert run_json(url, "sync")["new"] == 1
    monkeypatch.setenv("SESSIONTREE_SYNC_HOST", "laptop-b")
    path = agent_file(_fake_home, n=3)
    report = run_json(url, "sync")
    # Laptop B has no state of its own for the large file: it finds the stored session
    # equal to its copy (unchanged) and records its own state; its new file is new.
    assert (report["new"], report["unchanged"], report["entriesAdded"]) == (1, 1, 3)
    with open_store(url) as s:
        assert s.sync_host == "laptop-b"
        assert len(s.sync_states()) == 2
        assert stored_entries(s, SID) == file_entries(path)
    monkeypatch.setenv("SESSIONTREE_SYNC_HOST", "laptop-a")
    with open_store(url) as s:
        assert [state.session_id for state in s.sync_states().values()] == [LARGE]
        assert len(s.read(SID).entries) == 3  # any host opens any session by id
    report = run_json(url, "sync")  # laptop A sees the same folder here: both files adopted
    assert (report["unchanged"], report["entriesAdded"]) == (2, 0)


@pytest.mark.postgres
def test_postgres_sync_commit_is_a_compare_and_set_across_connections(request, tmp_path, _fake_home):
    """Two stores (two pools, as two processes) commit the first state of one file at
    once: exactly one wins, the other raises SyncConflictError and wrote nothing."""
    from sessiontree.errors import SyncConflictError
    from sessiontree.stores.base import SyncChange, SyncState
    from sessiontree.stores.postgres.store import PostgresStore

    url = request.getfixturevalue("pg_url")
    stores = [PostgresStore(url), PostgresStore(url)]
    state = SyncState(path="/home/me/x.jsonl", session_id=SID, size=10, mtime_ns=1, inode=2, dev=3, consumed=10, lines=1,
                      entries=1, version=4, header_hash=b"h" * 32, tail_hash=b"t" * 32)
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def commit(store, n):
        change = SyncChange("create", SID, head(), [record(f"0000000{n}", None)])
        barrier.wait()
        try:
            store.sync_commit(None, state, change)
            outcomes.append("ok")
        except SyncConflictError:
            outcomes.append("conflict")

    threads = [threading.Thread(target=commit, args=(store, n)) for n, store in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["conflict", "ok"]
    assert len(stores[0].read(SID).entries) == 1
    assert stores[1].sync_states()["/home/me/x.jsonl"] == state
    # A path that is not UTF-8 (surrogateescape) is kept exactly.
    odd = SyncState(path="/home/me/\udcff.jsonl", session_id=SID, size=10, mtime_ns=1, inode=2**64 - 1, dev=3,
                    consumed=10, lines=1, entries=1, version=4, header_hash=b"h" * 32, tail_hash=b"t" * 32)
    stores[0].sync_commit(None, odd, SyncChange("none", SID))
    assert stores[1].sync_states()[odd.path] == odd
    with pytest.raises(SyncConflictError):
        stores[1].sync_commit(None, odd, SyncChange("none", SID))
    for store in stores:
        store.close()


def test_a_sync_that_grew_sessions_leaves_no_search_tail(tmp_path, _fake_home):
    # Appends leave their search text pending (docs/search.md); a sync run that grew a
    # session folds it into the index itself, so the next session creation pays nothing.
    import sqlite3

    store = SqliteStore(tmp_path / "s.db")
    path = agent_file(_fake_home, n=4)
    assert Syncer(store).sync_files([str(path)]).counts()["new"] == 1
    append(path, entries(5, 3, f"{4:08x}"))
    assert Syncer(store).sync_files([str(path)]).counts()["grown"] == 1
    with sqlite3.connect(tmp_path / "s.db") as conn:
        # 7 entries, seq 0..6: the watermark is the last one.
        assert conn.execute("SELECT seq FROM search_merged").fetchall() == [(6,)]
    assert [hit.entry_id for hit in store.search('"message 6"')] == ["00000006"]  # found in the index
    store.close()


def test_sync_table_is_one_line_per_file_at_100_columns(_fake_home, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    for n in range(3):
        agent_file(_fake_home, session_id=f"{SID[:-2]}{n:02d}", n=2)
    out = run(None, "sync").stdout.splitlines()
    # header, three rows, the summary, what the settle indexed (3 x 2 entries); no note about
    # the Atomic agent, which is not installed
    assert len(out) == 6 and all(len(line) <= 100 for line in out), out
    assert out[5] == "search ready (6 entries indexed)"
    assert [line.split()[0] for line in out[1:4]] == ["new"] * 3
    assert all(line.split()[1] == SID[:8] for line in out[1:4])
    assert all(".jsonl" in line for line in out[1:4])  # the file name survives the cut
    assert not any(line.startswith("note:") for line in out)


def test_sync_settles_what_it_wrote(tmp_path, _fake_home):
    """A sync that wrote sessions (new, then grown) leaves no pending search text in
    a SQLite store: it settles at its end, so searches read the index."""
    store = SqliteStore(tmp_path / "settled.db")
    path = agent_file(_fake_home, n=20)
    pending = ("SELECT count(*) FROM entries AS e LEFT JOIN search_merged AS m ON m.session_id = e.session_id"
               " WHERE e.seq > coalesce(m.seq, -1)")
    assert Syncer(store).sync_files([str(path)]).counts()["new"] == 1
    assert store.db.conn.execute(pending).fetchone() == (0,)
    assert store.db.conn.execute("SELECT count(*) FROM search_merged").fetchone() == (1,)
    append(path, entries(21, 3, f"{20:08x}"))
    assert Syncer(store).sync_files([str(path)]).counts()["grown"] == 1
    assert store.db.conn.execute(pending).fetchone() == (0,)
    store.close()


def test_watch_calls_on_ready_once_when_running_so_missed_appends_are_synced(tmp_path):
    # An append between the first sync and the start of the watch gives no event: the
    # watch says when it runs, and `sync --watch` syncs everything once more then.
    from sessiontree.sync.engine import watch

    stop = threading.Event()
    calls: list[int] = []

    def ready() -> None:
        calls.append(1)
        (tmp_path / "late.jsonl").write_bytes(b"")  # a change after ready: a batch, no second call
        threading.Timer(1.5, stop.set).start()

    batches: list[list[str]] = []
    watch([str(tmp_path)], batches.append, stop, debounce_ms=50, on_ready=ready)
    assert calls == [1]
    assert batches == [[str(tmp_path / "late.jsonl")]]
