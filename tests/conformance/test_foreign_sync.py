"""Claude Code and Codex files synced into every store: new, grown, in-progress,
unchanged (not opened), diverged, and the source bytes given back (docs/agents/README.md)."""

from __future__ import annotations

import pytest

from foreign_support import (
    CC_SID,
    CODEX_SID,
    claude_records,
    codex_records,
    codex_resumed_records,
    jl,
    write_claude,
    write_codex,
)
from sessiontree.core.usage import records_from_entries
from sessiontree.format.foreign import source_bytes
from sessiontree.sync.engine import Syncer, opened_files


def _sums(entries):
    records = list(records_from_entries(entries))
    return (len(records), sum(r.input for r in records), sum(r.output for r in records),
            sum(r.cache_read for r in records), sum(r.cache_write for r in records))


@pytest.mark.usefixtures("_fake_home")
def test_sync_new_grown_unchanged_and_in_progress(store, _fake_home):
    path = write_codex(_fake_home, codex_records()[:7])
    syncer = Syncer(store)
    assert syncer.sync_file(str(path)).status == "new"
    more = jl(codex_records()[7:])
    with open(path, "ab") as handle:
        handle.write(more[:-20])  # the agent is still writing the last line
    result = Syncer(store).sync_file(str(path))
    assert (result.status, result.added, result.pending) == ("grown", 6, len(more.split(b"\n")[-2]) - 19)
    with open(path, "ab") as handle:
        handle.write(more[-20:])
    result = Syncer(store).sync_file(str(path))
    assert (result.status, result.added) == ("grown", 1)
    before = opened_files()
    assert Syncer(store).sync_file(str(path)).status == "unchanged"
    assert opened_files() == before  # not even opened
    with open(path, "ab") as handle:
        handle.write(jl(codex_resumed_records()))
    assert Syncer(store).sync_file(str(path)).status == "grown"
    parsed = store.read(CODEX_SID)
    assert source_bytes(parsed.entries) == path.read_bytes()
    assert _sums(parsed.entries) == (3, 160, 40, 240, 0)


@pytest.mark.usefixtures("_fake_home")
def test_a_whole_last_record_without_its_newline_comes_in(store, _fake_home):
    """A last line that parses is a record (the seed accepts a complete final record without
    its newline; Claude Code's loader reads it; six real corpus files end so). A torn one
    waits. When the newline comes, the session is the file's, byte for byte."""
    data = jl(claude_records())
    path = write_claude(_fake_home)
    path.write_bytes(data[:-1])  # the last record complete, its newline not (yet) written
    result = Syncer(store).sync_file(str(path))
    assert (result.status, result.pending) == ("new", 0)
    assert source_bytes(store.read(CC_SID).entries) == data[:-1]
    path.write_bytes(data)
    assert Syncer(store).sync_file(str(path)).status in ("grown", "replaced")
    assert source_bytes(store.read(CC_SID).entries) == data


@pytest.mark.usefixtures("_fake_home")
def test_a_torn_last_line_waits(store, _fake_home):
    data = jl(claude_records())
    path = write_claude(_fake_home)
    last = len(data.split(b"\n")[-2])
    path.write_bytes(data[:-1 - last // 2])  # the agent is still writing its last record
    result = Syncer(store).sync_file(str(path))
    assert (result.status, result.pending) == ("new", last - last // 2)
    path.write_bytes(data)
    assert Syncer(store).sync_file(str(path)).status == "grown"
    assert source_bytes(store.read(CC_SID).entries) == data


@pytest.mark.usefixtures("_fake_home")
def test_an_edited_foreign_file_diverges_and_the_store_is_untouched(store, _fake_home):
    path = write_claude(_fake_home)
    Syncer(store).sync_file(str(path))
    records = claude_records()
    records[1]["message"]["content"] = "changed"
    path.write_bytes(jl(records))
    assert Syncer(store).sync_file(str(path)).status == "diverged"
    assert source_bytes(store.read(CC_SID).entries) == jl(claude_records())


@pytest.mark.usefixtures("_fake_home")
def test_an_appended_file_is_synced_without_reading_the_stored_session(store, _fake_home, monkeypatch):
    path = write_claude(_fake_home, records=claude_records()[:5])
    Syncer(store).sync_file(str(path))
    with open(path, "ab") as handle:
        handle.write(jl(claude_records()[5:]))

    def no_read(session_id):
        raise AssertionError("the stored session was read back")

    monkeypatch.setattr(store, "read", no_read)
    result = Syncer(store).sync_file(str(path))
    assert (result.status, result.added) == ("grown", 7)
    monkeypatch.undo()
    assert source_bytes(store.read(CC_SID).entries) == jl(claude_records())
