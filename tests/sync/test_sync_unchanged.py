"""A sync of an unchanged home is cheap (issue 42 target 2): it opens no source file
(tests/conformance/test_sync.py) and does not read the whole database through
``PRAGMA quick_check`` on open, as ``import`` does (docs/stores.md, "quick_check policy")."""

from __future__ import annotations

from pathlib import Path

import pytest

from builders import user_entry as msg
from builders import work_header as header
from cli_support import run_cli, run_cli_json
from sessiontree.format import jsonio
from sessiontree.stores.sqlite import connection as sqlite_connection


def _session_file(folder: Path, session_id: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{session_id}.jsonl"
    path.write_bytes(jsonio.dumps(header(session_id)) + b"\n" + jsonio.dumps(msg("e1", None, "hello")) + b"\n")
    return path


@pytest.fixture
def checks(monkeypatch) -> list[str]:
    """The paths of the databases ``PRAGMA quick_check`` ran on, in this process."""
    seen: list[str] = []
    real = sqlite_connection.SqliteDatabase._quick_check

    def counting(self, conn):
        seen.append(self.path)
        return real(self, conn)

    monkeypatch.setattr(sqlite_connection.SqliteDatabase, "_quick_check", counting)
    return seen


def test_sync_does_not_quick_check_the_store_and_import_still_does(tmp_path, monkeypatch, checks):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    folder = tmp_path / "agent"
    _session_file(folder, "s1")
    store = f"sqlite:///{tmp_path / 's.db'}"
    assert run_cli_json(store, "sync", str(folder))["new"] == 1
    assert run_cli_json(store, "sync", str(folder))["unchanged"] == 1
    assert checks == []
    # The counter counts: import, the bulk writer that may create a store, checks it.
    run_cli(store, "import", str(_session_file(tmp_path / "other", "s2")))
    assert checks == [str(tmp_path / "s.db")]
