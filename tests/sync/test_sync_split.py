"""The sync engine split by job (issue 40 item 5): a file is sniffed once, and every
sync state is built by name."""

from __future__ import annotations

import shutil

import pytest

from corpus import foreign_files, needs_shared
from sessiontree.stores import open_store
from sessiontree.stores.base import SyncState
from sessiontree.sync import reading
from sessiontree.sync.engine import Syncer


@needs_shared
@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_a_foreign_file_is_sniffed_once(agent, tmp_path, monkeypatch):
    """Which agent wrote a file is decided by one look at its first readable record; the
    mapping is then chosen by that answer (before, the engine sniffed and the mapping
    sniffed again)."""
    source = foreign_files(agent)[0]
    copy = tmp_path / source.name
    shutil.copyfile(source, copy)
    calls: list[object] = []
    real = reading.sniff_agent
    monkeypatch.setattr(reading, "sniff_agent", lambda value: calls.append(value) or real(value))
    import sessiontree.format.foreign as foreign

    monkeypatch.setattr(foreign, "sniff_agent", lambda value: calls.append(value) or real(value))
    result = Syncer(open_store("memory:")).sync_file(str(copy))
    assert result.status == "new"
    assert len(calls) == 1


def test_sync_state_is_built_by_name():
    """Twelve fields, eight of them integers: a positional call is refused."""
    with pytest.raises(TypeError):
        SyncState("/x.jsonl", "id", 1, 2, 3, 4, 5, 6, 7, 8, b"h", b"t")  # type: ignore[misc]
