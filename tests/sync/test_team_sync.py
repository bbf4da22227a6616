"""Many hosts syncing into one PostgreSQL database at once (docs/postgres.md, "A team on
one database"): four simulated hosts, each a separate ``sessiontree sync --watch``
process with its own fake home and agent folder, while their agents append. Checked by
counting: every entry stored once, in order; a session two hosts hold identically is
stored once; a session two hosts hold with diverging content is stored as the first
host wrote it and reported as diverged by the other; each session keeps the origin of
the host that first stored it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sync_support import PROJECT, head, line, record

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

HOSTS = 4
OWN = 3          # sessions only one host has, per host
ENTRIES = 40     # entries the agent appends to each session while the watchers run
SHARED = "019cadb4-0000-7000-8000-00000000aaaa"     # hosts 0 and 1 hold the same file
DIVERGED = "019cadb4-0000-7000-8000-00000000dddd"   # hosts 2 and 3 hold different ones
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _sid(host: int, n: int) -> str:
    return f"019cadb4-0000-7000-8000-{host:04x}{n:08x}"


def _file(home: Path, session_id: str) -> Path:
    return home / ".pi" / "agent" / "sessions" / PROJECT / f"2026-03-01T10-00-00-000Z_{session_id}.jsonl"


def _entry(n: int, tag: str = "") -> dict:
    entry = record(f"{n:08x}", f"{n - 1:08x}" if n > 1 else None, f"message {n}{tag}")
    return entry


def _host_env(home: Path, host: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PI_CODING_AGENT_DIR", "ATOMIC_CODING_AGENT_DIR", "CLAUDE_CONFIG_DIR", "CODEX_HOME")}
    env.update(HOME=str(home), SESSIONTREE_SYNC_HOST=f"host-{host}", SESSIONTREE_MACHINE_ID=f"machine-{host}",
               USER=f"user{host}", LOGNAME=f"user{host}", PYTHONPATH=SRC, COLUMNS="200")
    env.pop("SESSIONTREE_STORE", None)
    return env


def test_four_hosts_watching_stay_exact(pg_url, tmp_path):
    from sessiontree.stores.postgres.store import PostgresStore

    homes = [tmp_path / f"home{h}" for h in range(HOSTS)]
    own = {h: [_sid(h, n) for n in range(OWN)] for h in range(HOSTS)}
    files: dict[int, list[tuple[Path, str]]] = {h: [(_file(homes[h], s), "") for s in own[h]] for h in range(HOSTS)}
    files[0].append((_file(homes[0], SHARED), ""))
    files[1].append((_file(homes[1], SHARED), ""))
    files[2].append((_file(homes[2], DIVERGED), " from host 2"))
    files[3].append((_file(homes[3], DIVERGED), " from host 3"))
    for h in range(HOSTS):
        for path, tag in files[h]:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(line(head(path.name.split("_", 1)[1][:-6])) + line(_entry(1, tag)))
    # host 3's diverging copy appears only once host 2's is stored: its first sync must see it.
    late = _file(homes[3], DIVERGED)
    late_bytes = late.read_bytes()
    late.unlink()

    procs = [subprocess.Popen([sys.executable, "-m", "sessiontree", "--store", pg_url, "sync", "--watch",
                               "--debounce", "50"], env=_host_env(homes[h], h), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for h in range(HOSTS)]
    store = PostgresStore(pg_url)
    try:
        deadline = time.monotonic() + 60
        while not store.exists(DIVERGED) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert store.exists(DIVERGED), "the watchers did not start"
        late.write_bytes(late_bytes)

        def agent(h: int) -> None:
            # One agent per host appends to each of its sessions in turn, one record per write.
            for n in range(2, ENTRIES + 2):
                for path, tag in files[h]:
                    with open(path, "ab") as handle:
                        handle.write(line(_entry(n, tag)))
                time.sleep(0.01)

        writers = [threading.Thread(target=agent, args=(h,)) for h in range(HOSTS)]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join()
        expected = {s: ENTRIES + 1 for h in range(HOSTS) for s in own[h]}
        expected[SHARED] = expected[DIVERGED] = ENTRIES + 1
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            counts = {s: len(store.read(s).entries) for s in expected if store.exists(s)}
            if counts == expected:
                break
            time.sleep(0.2)
    finally:
        outputs = []
        for proc in procs:
            proc.send_signal(signal.SIGINT)
        for proc in procs:
            try:
                out, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            outputs.append((proc.returncode, out, err))

    # Every entry once, in the agent's order, nothing else.
    for session_id, want in expected.items():
        ids = [entry["id"] for entry in store.read(session_id).entries]
        assert ids == [f"{n:08x}" for n in range(1, want + 1)], (session_id, outputs)
    with store.db.transaction("count", write=False) as conn:
        total = conn.execute("SELECT count(*) FROM entries").fetchone()[0]
        sessions = conn.execute("SELECT count(*) FROM sessions").fetchone()[0]
    assert (sessions, total) == (HOSTS * OWN + 2, (HOSTS * OWN + 2) * (ENTRIES + 1))
    # The diverged session is host 2's, whole; host 3 reported it and wrote nothing.
    texts = {entry["message"]["content"] for entry in store.read(DIVERGED).entries}
    assert all(text.endswith(" from host 2") for text in texts)
    def diverged_rows(out: str) -> list[str]:
        return [row for row in out.splitlines() if row.startswith("diverged ")]

    assert len(diverged_rows(outputs[3][1])) >= 1 and diverged_rows(outputs[2][1]) == []
    assert all("dddd" in row for h in range(HOSTS) for row in diverged_rows(outputs[h][1]))
    # Each watcher ended cleanly on Ctrl-C.
    assert [code for code, _out, _err in outputs] == [0] * HOSTS, outputs
    # Each session's origin is the host that stored it first.
    origins = store.provenances()
    for h in range(HOSTS):
        for session_id in own[h]:
            assert (origins[session_id].host, origins[session_id].user) == (f"host-{h}", f"user{h}")
    assert origins[SHARED].host in ("host-0", "host-1")
    assert origins[DIVERGED].host == "host-2"
    # A one-off sync on host 3: the watcher reported the divergence already, so it is set
    # aside and the run exits 0 (docs/sync.md, "Quiet repeats"); --strict says so again, in JSON.
    quiet = subprocess.run([sys.executable, "-m", "sessiontree", "--store", pg_url, "sync", "--json"],
                           env=_host_env(homes[3], 3), capture_output=True, text=True, timeout=60)
    assert quiet.returncode == 0, (quiet.stdout, quiet.stderr)
    report = subprocess.run([sys.executable, "-m", "sessiontree", "--store", pg_url, "sync", "--json", "--strict"],
                            env=_host_env(homes[3], 3), capture_output=True, text=True, timeout=60)
    statuses = {Path(item["path"]).name: item["status"] for item in json.loads(report.stdout)["files"]}
    assert statuses[_file(homes[3], DIVERGED).name] == "diverged"
    assert report.returncode == 1
    store.close()
