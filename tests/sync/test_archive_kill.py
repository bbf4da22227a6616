"""``sessiontree archive`` killed with SIGKILL at random points (docs/agent-loop.md): after
every kill each session file is still in its folder, renamed beside it, or given back
byte for byte by the store; the next runs finish the work; restoring everything gives
every original file back. Zero sessions lost."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sessiontree.stores.sqlite.store import SqliteStore
from sessiontree.sync.archive import ARCHIVING_SUFFIX
from sessiontree.sync.engine import Syncer, discover
from sessiontree.sync.restore import agent_file, restore
from sync_support import SID
from sync_support import agent_file as write_agent_file

pytestmark = [pytest.mark.stress, pytest.mark.usefixtures("_fake_home")]

FILES = 400
KILLS = 12


def _run_archive(db: Path, home: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen([sys.executable, "-c", "import sys; from sessiontree.cli import main; main(sys.argv[1:])", "--store", f"sqlite:///{db}", "archive",
                             "--older-than", "1d"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_sigkill_during_archive_loses_no_session(tmp_path, _fake_home):
    db = tmp_path / "store.db"
    originals: dict[str, tuple[Path, bytes]] = {}
    for n in range(FILES):
        session_id = f"{SID[:-4]}{n:04d}"
        path = write_agent_file(_fake_home, session_id=session_id, n=5 + n % 7, version=3)
        os.utime(path, (1_000_000_000, 1_000_000_000))
        originals[session_id] = (path, hashlib.sha256(path.read_bytes()).digest())
    store = SqliteStore(str(db))
    assert Syncer(store).sync_files(discover([str(_fake_home)])[0]).counts()["new"] == FILES
    store.close()

    rng = random.Random(20261204)
    folder = next(iter(originals.values()))[0].parent
    killed = 0
    for round_ in range(KILLS):
        # Kill once this run has archived a share of what is left, plus a random few
        # milliseconds, so the kills land at every step of a file's archiving (rename,
        # second hash, record, trash, done) and in the verification of the next one.
        left = sum(1 for name in os.listdir(folder) if name.endswith(".jsonl"))
        goal = left - max(1, left // (KILLS - round_ + 1))
        process = _run_archive(db, _fake_home)
        deadline = time.monotonic() + 120
        while process.poll() is None and time.monotonic() < deadline:
            if sum(1 for name in os.listdir(folder) if name.endswith(".jsonl")) <= goal:
                break
            time.sleep(0.001)
        time.sleep(rng.uniform(0, 0.004))
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            killed += 1
        process.wait()
        check = SqliteStore(str(db), readonly=True)
        try:
            for session_id, (path, sha) in originals.items():
                moved = Path(str(path) + ARCHIVING_SUFFIX)
                if path.exists():
                    assert hashlib.sha256(path.read_bytes()).digest() == sha, path
                elif moved.exists():
                    assert hashlib.sha256(moved.read_bytes()).digest() == sha, moved
                else:
                    rebuilt = agent_file(check, session_id)
                    assert rebuilt.byte_exact and rebuilt.sha256 == sha, session_id
        finally:
            check.close()
    assert killed >= KILLS - 2, f"only {killed} of {KILLS} runs were killed before they ended"

    finish = _run_archive(db, _fake_home)
    assert finish.wait() == 0, finish.stderr.read() if finish.stderr else ""
    store = SqliteStore(str(db))
    try:
        records = store.archived_files()
        assert {r.state for r in records} == {"done"}
        assert sorted(r.session_id for r in records) == sorted(originals)
        assert not list(_fake_home.rglob("*" + ARCHIVING_SUFFIX))
        for session_id, (path, sha) in originals.items():
            assert not path.exists()
            assert restore(store, session_id).path == str(path)
            assert hashlib.sha256(path.read_bytes()).digest() == sha
    finally:
        store.close()
