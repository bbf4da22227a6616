"""Provenance on every store (docs/sync.md, "Provenance"): recorded once by the sync
commit that creates a session (or after an import), never overwritten by a later sync
from elsewhere, kept apart from the session's own bytes, left alone by reindex."""

from __future__ import annotations

import shutil

import pytest

from sessiontree.session.importing import import_files
from sessiontree.stores.base import Provenance
from sessiontree.stores.memory import MemoryStore
from sessiontree.sync.engine import Syncer
from sync_support import SID, agent_file, append, entries, file_entries, stored_entries, sync_one

pytestmark = pytest.mark.usefixtures("_fake_home")


def _as(monkeypatch: pytest.MonkeyPatch, host: str, machine: str, user: str) -> None:
    """Make "here" a given host, machine and user (what a second laptop would be)."""
    monkeypatch.setenv("SESSIONTREE_SYNC_HOST", host)
    monkeypatch.setenv("SESSIONTREE_MACHINE_ID", machine)
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.setenv(name, user)


def test_first_sync_records_the_origin_and_a_later_sync_elsewhere_does_not_overwrite_it(
        store, _fake_home, monkeypatch):
    _as(monkeypatch, "laptop-a", "aaaa", "alice")
    path = agent_file(_fake_home, n=3)
    assert sync_one(store, path).status == "new"
    first = store.provenances()[SID]
    assert (first.session_id, first.host, first.machine_id, first.user, first.agent, first.source) == (
        SID, "laptop-a", "aaaa", "alice", "pi", str(path))
    assert first.recorded_at > 0
    # The session's bytes are the agent's: nothing of the origin is in the header or entries.
    assert "laptop-a" not in repr(store.read(SID).header)
    assert stored_entries(store) == file_entries(path)

    # Another host holds a copy of the same file (grown) at another path and syncs it.
    _as(monkeypatch, "laptop-b", "bbbb", "bob")
    other = _fake_home / "elsewhere" / path.name
    other.parent.mkdir()
    shutil.copy(path, other)
    append(other, entries(4, 2, f"{3:08x}"))
    assert sync_one(store, other).status == "grown"
    assert store.provenances() == {SID: first}
    # Growth on the first host keeps it too.
    append(path, entries(6, 1, f"{5:08x}"))
    sync_one(store, path)
    assert store.provenances() == {SID: first}


def test_record_provenance_is_first_wins_and_survives_delete_and_reindex(store, monkeypatch):
    one = Provenance("s1", "h1", "m1", "u1", "pi", "/a.jsonl", 1)
    later = Provenance("s1", "h2", "m2", "u2", "codex", "/b.jsonl", 2)
    two = Provenance("s2", "h2", "m2", "u2", "", "/c.jsonl", 3)
    store.record_provenance([one])
    store.record_provenance([later, two])
    assert store.provenances() == {"s1": one, "s2": two}
    store.record_provenance([])
    if hasattr(store, "reindex"):
        store.reindex()
    assert store.provenances() == {"s1": one, "s2": two}


def test_import_records_this_host_and_the_file(store, tmp_path, monkeypatch):
    _as(monkeypatch, "desk", "cccc", "carol")
    path = agent_file(tmp_path / "import-home", n=2)
    outcomes = list(import_files([path], store))
    assert outcomes[0].error is None
    origin = store.provenances()[SID]
    assert (origin.host, origin.machine_id, origin.user, origin.agent, origin.source) == (
        "desk", "cccc", "carol", "", str(path))
    # A second import is refused (the id is stored) and changes nothing.
    _as(monkeypatch, "other", "dddd", "dave")
    [again] = list(import_files([path], store))
    assert again.error is not None
    assert store.provenances()[SID] == origin


def test_a_copy_from_another_store_keeps_the_source_origin(store, _fake_home, monkeypatch):
    _as(monkeypatch, "laptop-a", "aaaa", "alice")
    laptop = MemoryStore()
    path = agent_file(_fake_home, n=2)
    sync_one(laptop, path)
    plain = agent_file(_fake_home, session_id="019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b09", n=1)
    laptop.create(*_record(plain))  # stored without an origin
    _as(monkeypatch, "server", "ssss", "root")
    report = Syncer(store).sync_store(laptop)
    assert [r.status for r in report.files] == ["new", "new"]
    origins = store.provenances()
    assert origins[SID] == laptop.provenances()[SID]
    copied = origins["019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b09"]
    assert (copied.host, copied.agent, copied.source) == (
        "server", "", f"{laptop.url}#019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b09")


def _record(path):
    from sessiontree.format.codec import read_session_file

    parsed = read_session_file(path)
    return parsed.header, parsed.entries, [parsed.entry_bytes(i) for i in range(len(parsed.entries))]
