"""Giving agent files back, on every store (docs/agent-loop.md): the shape sync records,
the archive records, ``restore`` byte for byte after sync (also after the file grew),
and ``archive`` then ``restore`` putting each file back where it was."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

import corpus
from sessiontree.format import jsonio
from sessiontree.format.shape import FileShape
from sessiontree.stores.base import ArchivedFile
from sessiontree.sync.archive import archive, archived_state
from sessiontree.sync.engine import Syncer, discover
from sessiontree.sync.restore import agent_file, restore
from sync_support import SID, append, entries, stored_entries, sync_one
from sync_support import agent_file as write_agent_file

pytestmark = pytest.mark.usefixtures("_fake_home")

ROOT = Path(__file__).resolve().parents[2]


def _sha(path: Path) -> bytes:
    return hashlib.sha256(path.read_bytes()).digest()


def test_archive_records_are_kept_per_path_and_hash_last_write_winning(store):
    first = ArchivedFile("/a/one.jsonl", SID, b"\x01" * 32, 10, "pi", 1000, "trash", "pending")
    other = ArchivedFile("/a/two.jsonl", SID, b"\x02" * 32, 20, "atomic", 2000, "deleted", "done")
    store.record_archived(first)
    store.record_archived(other)
    store.record_archived(ArchivedFile("/a/one.jsonl", SID, b"\x01" * 32, 10, "pi", 1000, "trash", "done"))
    records = store.archived_files()
    assert [(r.path, r.state) for r in records] == [("/a/one.jsonl", "done"), ("/a/two.jsonl", "done")]
    assert records[1] == other


def test_sync_records_the_shape_of_each_file(store, _fake_home):
    path = write_agent_file(_fake_home, n=3, version=3)
    sync_one(store, path)
    blob = store.sync_shape(str(path))
    assert blob is not None
    shape = FileShape.decode(blob)
    # pi's version-3 header is another text than the stored format-4 one: a literal line;
    # the three entries are the stored texts, each with a newline.
    assert [op[0] for op in shape.ops] == ["H", "e"] and shape.ops[1][1:] == (3, b"\n")
    assert shape.sha256 == _sha(path) and shape.size == path.stat().st_size
    assert store.sync_shape("/no/such/file.jsonl") is None


def test_a_synced_file_comes_back_byte_for_byte(store, _fake_home, tmp_path):
    path = write_agent_file(_fake_home, n=4, version=3)
    sync_one(store, path)
    result = restore(store, SID, directory=str(tmp_path / "out"))
    restored = Path(result.path)
    assert result.status == "written" and result.file.byte_exact
    assert restored.name == path.name and restored.parent.name == "--home-me-project--"
    assert restored.read_bytes() == path.read_bytes()
    assert restore(store, SID, directory=str(tmp_path / "out")).status == "present"


def test_a_grown_file_still_comes_back_byte_for_byte(store, _fake_home, tmp_path):
    path = write_agent_file(_fake_home, n=3, version=3)
    sync_one(store, path)
    append(path, entries(4, 2, f"{3:08x}"))
    with open(path, "ab") as handle:
        handle.write(b"\n")  # a blank line the agent left
    append(path, entries(6, 1, f"{5:08x}"))
    assert sync_one(store, path).status == "grown"
    shape = FileShape.decode(store.sync_shape(str(path)) or b"")
    assert shape.sha256 == _sha(path)
    file = agent_file(store, SID)
    assert file.byte_exact and file.data == path.read_bytes()


def test_entries_written_in_the_store_after_sync_follow_the_file(store, _fake_home):
    path = write_agent_file(_fake_home, n=2, version=3)
    sync_one(store, path)
    extra = {"type": "session_info", "id": "99999999", "parentId": f"{2:08x}",
             "timestamp": "2026-03-01T10:05:00.000Z", "name": "renamed in the store"}
    store.append(SID, [extra])
    file = agent_file(store, SID)
    assert not file.byte_exact and file.extra == 1
    assert file.data.startswith(path.read_bytes())
    assert file.data[len(path.read_bytes()):] == (
        b'{"type":"session_info","id":"99999999","parentId":"00000002",'
        b'"timestamp":"2026-03-01T10:05:00.000Z","name":"renamed in the store"}\n')


def test_archive_then_restore_gives_every_example_back_where_it_was(store, _fake_home):
    folder = _fake_home / ".pi" / "agent" / "sessions" / "--home-me-project--"
    folder.mkdir(parents=True)
    samples = sorted(ROOT.glob("examples/*.jsonl"))
    samples += corpus.shared_files()  # the pi files; other agents' files are not pi's to list
    for sample in samples:
        shutil.copy(sample, folder / sample.name)
        os.utime(folder / sample.name, (1_000_000_000, 1_000_000_000))  # old enough
    before = {p.name: _sha(p) for p in folder.iterdir()}
    report = Syncer(store).sync_files(discover([str(folder)])[0])
    assert report.counts()["new"] == len(samples)
    done = archive(store, older_than=86400.0)
    assert [r.status for r in done.files] == ["archived"] * len(samples), done.to_dict()
    assert list(folder.iterdir()) == []
    assert {(r.path, r.sha256) for r in store.archived_files()} == {
        (str(folder / name), sha) for name, sha in before.items()}
    for record in store.archived_files():
        assert record.state == "done"
        result = restore(store, record.session_id)
        assert result.path == record.path and result.file.byte_exact
    assert {p.name: _sha(p) for p in folder.iterdir()} == before


def test_a_restored_file_is_no_longer_listed_as_archived(store, _fake_home, tmp_path):
    # The new-user test: `archived` still listed a file restore had put back
    # (docs/agent-loop.md, "The audit records").
    folder = _fake_home / ".pi" / "agent" / "sessions" / "--home-me-project--"
    folder.mkdir(parents=True)
    for name in ("branching.jsonl", "compaction.jsonl"):
        shutil.copy(ROOT / "examples" / name, folder / name)
        os.utime(folder / name, (1_000_000_000, 1_000_000_000))
    Syncer(store).sync_files(discover([str(folder)])[0])
    assert [r.status for r in archive(store, older_than=86400.0).files] == ["archived", "archived"]

    def states() -> dict[str, str]:
        return {Path(r.path).name: archived_state(r) for r in store.archived_files()}

    assert states() == {"branching.jsonl": "done", "compaction.jsonl": "done"}
    branching = next(r for r in store.archived_files() if r.path.endswith("branching.jsonl"))
    result = restore(store, branching.session_id)
    assert (result.status, result.path) == ("written", branching.path)
    assert states() == {"branching.jsonl": "restored", "compaction.jsonl": "done"}
    # Other bytes under the name (the agent wrote on): away again, the archived bytes are not back.
    with open(branching.path, "ab") as handle:
        handle.write(b"\n")
    assert states()["branching.jsonl"] == "done"


def test_a_glued_agent_file_is_synced_grows_and_comes_back_byte_for_byte(store, _fake_home, tmp_path):
    """Two records glued on one line (docs/sync.md, "Glued records"): synced with a note,
    the agent appending afterwards (a glued line in the appended bytes too), and restore
    giving the file back byte for byte."""
    path = write_agent_file(_fake_home, n=2, version=3)
    lines = path.read_bytes().split(b"\n")
    glued = lines[1] + lines[2]  # entries 1 and 2 on line 2
    path.write_bytes(b"\n".join([lines[0], glued, *lines[3:]]))
    first = sync_one(store, path)
    assert (first.status, first.added) == ("new", 2) and "line 2" in (first.note or "")
    append(path, entries(3, 1, f"{2:08x}"))
    assert (sync_one(store, path).status, len(stored_entries(store))) == ("grown", 3)
    more = entries(4, 2, f"{3:08x}")
    with open(path, "ab") as handle:
        handle.write(jsonio.dumps(more[0]) + jsonio.dumps(more[1]) + b"\n")  # glued again, on line 4
    grown = sync_one(store, path)
    assert (grown.status, grown.added) == ("grown", 2) and "line 4" in (grown.note or "")
    shape = FileShape.decode(store.sync_shape(str(path)) or b"")
    assert [op[0] for op in shape.ops] == ["H", "G", "e", "G"] and shape.sha256 == _sha(path)
    file = agent_file(store, SID)
    assert file.byte_exact and file.data == path.read_bytes()
    result = restore(store, SID, directory=str(tmp_path / "out"))
    assert result.file.byte_exact and Path(result.path).read_bytes() == path.read_bytes()


def test_a_malformed_line_is_skipped_as_pi_does_and_the_file_comes_back_byte_for_byte(store, _fake_home, tmp_path):
    """Issue 39: a line pi's loader cannot parse (it skips it) no longer refuses the file:
    sync skips it with a note naming the line, keeps it verbatim in the file's shape (an
    ``l`` operation), skips one in appended bytes the same way, and ``restore`` and
    ``archive`` give the file back byte for byte (synthetic file: no real one has a
    damaged line)."""
    path = write_agent_file(_fake_home, n=3, version=3)
    lines = path.read_bytes().split(b"\n")
    damaged = b"\n".join([*lines[:2], b'{"type":"message","id":"x",', *lines[2:]])  # torn record on line 3
    path.write_bytes(damaged)
    first = sync_one(store, path)
    assert (first.status, first.added) == ("new", 3), first.reason
    assert "skipped 1 malformed line" in (first.note or "") and "line 3" in (first.note or "")
    assert stored_entries(store) == stored_entries(store)[:3]
    with open(path, "ab") as handle:
        handle.write(b"not json\n")  # a malformed line in the appended bytes: line 6
    append(path, entries(4, 1, f"{3:08x}"))
    grown = sync_one(store, path)
    assert (grown.status, grown.added) == ("grown", 1) and "line 6" in (grown.note or "")
    shape = FileShape.decode(store.sync_shape(str(path)) or b"")
    assert [op[0] for op in shape.ops] == ["H", "e", "l", "e", "l", "e"] and shape.sha256 == _sha(path)
    file = agent_file(store, SID)
    assert file.byte_exact and file.data == path.read_bytes()
    result = restore(store, SID, directory=str(tmp_path / "out"))
    assert result.file.byte_exact and Path(result.path).read_bytes() == path.read_bytes()
    before = _sha(path)
    os.utime(path, (1_000_000_000, 1_000_000_000))  # old enough to archive
    assert sync_one(store, path).status == "unchanged"
    done = archive(store, older_than=86400.0)
    assert [r.status for r in done.files] == ["archived"], done.to_dict()
    assert not path.exists()
    again = restore(store, SID)
    assert again.path == str(path) and again.file.byte_exact and _sha(path) == before


def test_malformed_lines_before_the_header_are_skipped_as_pi_does(store, _fake_home, tmp_path):
    """pi's loader takes the first line that parses as the header; a damaged line before
    it is skipped, kept verbatim, and the file restored byte for byte (synthetic file)."""
    path = write_agent_file(_fake_home, n=2, version=3)
    path.write_bytes(b"\x00\x00garbage\n" + path.read_bytes())
    result = sync_one(store, path)
    assert (result.status, result.added) == ("new", 2), result.reason
    assert "line 1" in (result.note or "")
    file = agent_file(store, SID)
    assert file.byte_exact and file.data == path.read_bytes()


def test_a_torn_first_line_before_the_header_and_a_grown_file(store, _fake_home, tmp_path):
    """A damaged first line that starts like a record (``{"type":"sess``): skipped as pi
    does; when the agent appends, the file is read whole again (its first line is no
    header to trust an offset by) and grows (synthetic file)."""
    path = write_agent_file(_fake_home, n=2, version=3)
    path.write_bytes(b'{"type":"sess\n' + path.read_bytes())
    assert (sync_one(store, path).status, len(stored_entries(store))) == ("new", 2)
    append(path, entries(3, 1, f"{2:08x}"))
    grown = sync_one(store, path)
    assert (grown.status, grown.added, len(stored_entries(store))) == ("grown", 1, 3), grown.reason
    file = agent_file(store, SID)
    assert file.byte_exact and file.data == path.read_bytes()
