"""A sync of an unchanged home is cheap (issue 42 target 2): it opens no source file
(tests/conformance/test_sync.py) and does not read the whole database through
``PRAGMA quick_check`` on open, as ``import`` does (docs/stores.md, "quick_check policy")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


#: What a sync that opens no file has no use for: the parser and checker of session files,
#: the importer, the provenance probe (socket, getpass), rich (stdout and stderr are pipes).
_NOT_FOR_UNCHANGED = ("sessiontree.check", "sessiontree.check.glued", "sessiontree.session.importing", "socket",
                      "sessiontree.stores.origin", "rich", "rich.console", "rich.progress", "rich.markup")


def _imported(argv: list[str], env: dict[str, str]) -> tuple[set[str], str]:
    """The import closure (``-X importtime``) and stdout of a fresh ``python -m sessiontree ARGV``."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "sessiontree", *argv], env=env,
                          capture_output=True, text=True, check=True)
    names = {text.rsplit("|", 1)[1].strip() for text in proc.stderr.splitlines()
             if text.startswith("import time:") and text.count("|") == 2}
    return names, proc.stdout


def test_an_unchanged_sync_loads_no_reader_and_a_grown_file_is_still_read(tmp_path):
    folder = tmp_path / "agent"
    path = _session_file(folder, "s1")
    env = {**os.environ, "HOME": str(tmp_path / "home"), "SESSIONTREE_STORE": f"sqlite:///{tmp_path / 's.db'}",
           "SESSIONTREE_CONFIG": str(tmp_path / "none.toml")}
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        env.pop(name, None)
    first, out = _imported(["sync", str(folder), "--json"], env)
    assert json.loads(out)["new"] == 1
    assert "sessiontree.check.glued" in first  # the probe sees a reader when there is one
    loaded, out = _imported(["sync", str(folder), "--json"], env)
    assert json.loads(out)["unchanged"] == 1
    assert sorted(m for m in _NOT_FOR_UNCHANGED if m in loaded) == []
    # The same cheap path still notices growth: one more line is read and stored.
    with open(path, "ab") as handle:
        handle.write(jsonio.dumps(msg("e2", "e1", "again")) + b"\n")
    loaded, out = _imported(["sync", str(folder), "--json"], env)
    report = json.loads(out)
    assert (report["grown"], report["files"][0]["added"]) == (1, 1)
    assert "sessiontree.check.glued" in loaded
