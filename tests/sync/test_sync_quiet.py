"""``sync`` for cron and watch loops (issue 41 item 4; docs/sync.md, "Quiet repeats"):
exit 0 when nothing new failed, a reported file set aside until it changes, ``--verbose``,
``--strict``, and an unterminated last line taken as finished once the file has rested."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

import corpus
from cli_support import run_cli
from sessiontree.stores import open_store
from sync_support import agent_file

CODEX = corpus.shared() / "codex" / "sessions" / "2025" / "12" / "09" / \
    "rollout-2025-12-09T19-55-16-019b04ae-b1c6-7c72-a134-a4c2de66058c.jsonl"
CODEX_ID = "019b04ae-b1c6-7c72-a134-a4c2de66058c"


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A fake home (the agents' folders are found under it), no agent variables set."""
    for name in ("PI_CODING_AGENT_DIR", "ATOMIC_CODING_AGENT_DIR", "CLAUDE_CONFIG_DIR", "CODEX_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def _sync(db: str, *args: str, code: int = 0):
    return run_cli(db, "sync", *args, code=code)


def test_a_rejected_file_is_reported_once_then_set_aside_until_it_changes(home, tmp_path):
    good = agent_file(home)
    # Synthetic: a file that is not a session (no real agent file is one on purpose).
    bad = good.parent / "notes.jsonl"
    bad.write_bytes(b'{"hello": "world"}\n')
    db = str(tmp_path / "s.db")

    first = _sync(db, code=1)
    assert "notes.jsonl" in first.stdout and "1 rejected" in first.stdout
    assert "set aside" not in first.stdout

    again = _sync(db)  # nothing changed: quiet, exit 0
    assert "notes.jsonl" not in again.stdout
    assert again.stdout.strip().endswith("0 diverged, 0 rejected, 1 set aside (reported before; --verbose lists them)")
    assert again.stderr == ""

    verbose = _sync(db, "--verbose")
    assert "notes.jsonl" in verbose.stdout and "set aside: reported before" in verbose.stdout

    data = json.loads(_sync(db, "--json").stdout)
    assert data["setAside"] == 1 and data["rejected"] == 1
    row = next(f for f in data["files"] if f["path"] == str(bad))
    assert row["status"] == "rejected" and row["setAside"] is True

    strict = _sync(db, "--strict", code=1)  # today's behaviour: every run reports and fails
    assert "notes.jsonl" in strict.stdout and "set aside" not in strict.stdout

    with open(bad, "ab") as handle:  # the file changed: news again
        handle.write(b'{"still": "not a session"}\n')
    changed = _sync(db, code=1)
    assert "notes.jsonl" in changed.stdout
    assert "notes.jsonl" not in _sync(db).stdout


def test_a_file_that_syncs_cleanly_leaves_the_ledger(home, tmp_path):
    good = agent_file(home)
    blank = good.parent / "later.jsonl"
    blank.write_bytes(b"\n")  # rejected: blank
    db = str(tmp_path / "s.db")
    _sync(db, code=1)
    _sync(db)
    blank.write_bytes(good.read_bytes().replace(b"019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01",
                                                b"019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b09"))
    assert "1 new" in _sync(db).stdout
    blank.write_bytes(b"\n")  # rejected again after a clean sync: reported, not set aside
    assert "later.jsonl" in _sync(db, code=1).stdout


def test_the_ledger_lives_beside_the_store(home, tmp_path):
    good = agent_file(home)
    (good.parent / "x.jsonl").write_bytes(b"[]\n")
    db = tmp_path / "s.db"
    _sync(str(db), code=1)
    ledger = json.loads((tmp_path / "s.db.sync-reported").read_bytes())
    assert list(ledger["files"]) == [str(good.parent / "x.jsonl")]
    folder = tmp_path / "jsonl-store"
    _sync(f"jsonl:///{folder}", code=1)
    assert (folder / ".sessiontree-sync-reported").is_file()


def test_a_quiet_repeat_does_not_write_the_ledger_again(home, tmp_path):
    good = agent_file(home)
    bad = good.parent / "x.jsonl"
    bad.write_bytes(b"[]\n")
    db = tmp_path / "s.db"
    ledger = tmp_path / "s.db.sync-reported"
    _sync(str(db), code=1)
    written = ledger.stat()
    _sync(str(db))  # the same report set aside: the ledger holds it already
    assert (ledger.stat().st_ino, ledger.stat().st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
    bad.unlink()  # the file is gone: the ledger forgets it, so it is written
    _sync(str(db))
    assert json.loads(ledger.read_bytes())["files"] == {}
    assert ledger.stat().st_ino != written.st_ino  # replaced atomically, not edited in place


def _codex_copy(home: Path, *, rested: bool, whole_record: bool = False) -> tuple[Path, bytes]:
    """The real Codex rollout, as an agent killed while writing its last line leaves it: cut
    in the middle of that line, or (``whole_record``) only its newline missing, as in a copy
    that lost the final newline (the Entire CLI's Claude Code copies in the corpus)."""
    data = CODEX.read_bytes()
    assert data.endswith(b"\n")
    folder = home / ".codex" / "sessions" / "2025" / "12" / "09"
    folder.mkdir(parents=True)
    path = folder / CODEX.name
    start = data[:-1].rfind(b"\n") + 1
    path.write_bytes(data[:-1] if whole_record else data[:start + (len(data) - 1 - start) // 2])
    if rested:
        old = time.time() - 2 * 3600
        os.utime(path, (old, old))
    return path, data


def test_an_unterminated_last_line_waits_while_the_file_is_fresh(home, tmp_path):
    path, _data = _codex_copy(home, rested=False)
    written = path.read_bytes()
    db = str(tmp_path / "s.db")
    out = json.loads(_sync(db, "--json").stdout)
    (row,) = out["files"]
    last_line = len(written) - (written.rfind(b"\n") + 1)  # the bytes after the last newline
    assert row["status"] == "new" and row["pending"] == last_line


@pytest.mark.parametrize("rested", [False, True])
@pytest.mark.parametrize("strict", [False, True])
def test_a_whole_last_record_without_its_newline_comes_in(home, tmp_path, strict, rested):
    """A last line that parses as a record is one, fresh or rested, strict or not (the agents'
    own loaders read it); the session is the file's, and export gives the file back exactly."""
    _path, data = _codex_copy(home, rested=rested, whole_record=True)
    db = str(tmp_path / "s.db")
    out = json.loads(_sync(db, "--json", *(["--strict"] if strict else [])).stdout)
    (row,) = out["files"]
    assert row["status"] == "new" and row["pending"] == 0
    # The whole file is the session: the same entries as the file with its newline, and
    # export --format source gives the file's bytes back exactly.
    whole = tmp_path / "whole"
    whole.mkdir()
    (whole / CODEX.name).write_bytes(data)
    other = str(tmp_path / "o.db")
    _sync(other, str(whole))
    store_a, store_b = open_store(db, create=False, readonly=True), open_store(other, create=False, readonly=True)
    try:
        assert len(store_a.read(CODEX_ID).entries) == len(store_b.read(CODEX_ID).entries)
    finally:
        store_a.close()
        store_b.close()
    exported = tmp_path / "back.jsonl"
    run_cli(db, "export", CODEX_ID, "--format", "source", "-o", str(exported))
    assert exported.read_bytes() == data[:-1]
    assert json.loads(_sync(db, "--json").stdout)["files"][0]["status"] == "unchanged"


@pytest.mark.parametrize("strict", [False, True])
def test_an_unterminated_last_line_of_a_rested_file_is_taken_as_finished(home, tmp_path, strict):
    path, _data = _codex_copy(home, rested=True)
    db = str(tmp_path / "s.db")
    out = json.loads(_sync(db, "--json", *(["--strict"] if strict else [])).stdout)
    (row,) = out["files"]
    if strict:  # --strict: a line that is no record waits, however long the file rests
        assert row["status"] == "new" and row["pending"] > 0
        return
    assert row["status"] == "new" and row["pending"] == 0
    exported = tmp_path / "back.jsonl"
    run_cli(db, "export", CODEX_ID, "--format", "source", "-o", str(exported))
    assert exported.read_bytes() == path.read_bytes()  # the torn line kept, as an inert record
    assert json.loads(_sync(db, "--json").stdout)["files"][0]["status"] == "unchanged"


def test_a_file_that_waited_is_taken_as_finished_once_it_has_rested(home, tmp_path):
    path, _data = _codex_copy(home, rested=False)
    db = str(tmp_path / "s.db")
    assert json.loads(_sync(db, "--json").stdout)["files"][0]["pending"] > 0
    old = time.time() - 2 * 3600
    os.utime(path, (old, old))  # an hour later, nothing written
    row = json.loads(_sync(db, "--json").stdout)["files"][0]
    assert row["status"] == "grown" and row["added"] >= 1 and row["pending"] == 0
    row = json.loads(_sync(db, "--json", "--finished-after", "3h").stdout)["files"][0]
    assert row["status"] == "unchanged"


def test_finished_after_takes_a_duration(home, tmp_path):
    agent_file(home)
    result = run_cli(str(tmp_path / "s.db"), "sync", "--finished-after", "soon", code=2)
    assert "expected a duration" in result.stderr
