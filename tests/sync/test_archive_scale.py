"""``archive`` reads the sync states once per run, not once per file (docs/agent-loop.md).

Verifying a file rebuilds it from the store through the state of that file: reading
every state again for each file made a run over N files cost N x N rows
(10,000 files: minutes instead of seconds).
"""

from __future__ import annotations

from pathlib import Path

from sessiontree.stores.sqlite.store import SqliteStore
from sessiontree.sync.archive import archive
from sessiontree.sync.engine import Syncer
from sync_support import head, line, record

IDS = [f"019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b{n:02x}" for n in range(1, 6)]


def test_a_dry_run_reads_the_states_once_and_verifies_each_file_against_its_own(tmp_path: Path) -> None:
    folder = tmp_path / "sessions" / "--home-me-project--"
    folder.mkdir(parents=True)
    paths = []
    for n, session_id in enumerate(IDS):
        path = folder / f"2026-03-01T10-00-0{n}-000Z_{session_id}.jsonl"
        path.write_bytes(line(head(session_id, 3)) + line(record("00000001", None, f"file {n}")))
        paths.append(str(path))
    store = SqliteStore(tmp_path / "db.sqlite")
    try:
        assert [r.status for r in Syncer(store).sync_files(paths).files] == ["new"] * 5
        calls = []
        real = store.sync_states

        def counted():
            calls.append(1)
            return real()

        store.sync_states = counted  # type: ignore[method-assign]
        report = archive(store, older_than=None, dry_run=True, folders=[("pi", str(folder))])
    finally:
        store.close()
    assert sorted((r.path, r.status) for r in report.files) == sorted((p, "would archive") for p in paths)
    assert len(calls) == 1
