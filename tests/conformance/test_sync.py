"""``sessiontree sync`` into every store: new, grown, unchanged, in-progress, diverged,
rejected and vanished files, and an agent appending while sync reads."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from sessiontree.errors import InvalidSessionError
from sessiontree.format.codec import read_session_file
from sessiontree.sync import syncer as sync_module
from sessiontree.sync.engine import Syncer, discover, opened_files
from sync_support import (
    OTHER,
    SID,
    agent_file,
    append,
    entries,
    file_entries,
    head,
    line,
    record,
    stored_entries,
    sync_one,
)

pytestmark = pytest.mark.usefixtures("_fake_home")


def test_grown_appends_only_the_new_entries_reading_only_new_bytes(store, _fake_home, monkeypatch):
    path = agent_file(_fake_home, n=50)
    assert sync_one(store, path).status == "new"
    size = path.stat().st_size
    append(path, entries(51, 3, f"{50:08x}"))
    reads: list[tuple[int, int]] = []
    real = sync_module.pread_range
    monkeypatch.setattr(sync_module, "pread_range",
                        lambda fd, start, end: reads.append((start, end)) or real(fd, start, end))
    result = sync_one(store, path)
    assert (result.status, result.added) == ("grown", 3)
    assert stored_entries(store) == file_entries(path)
    # The tail check (<= 4 KiB before the old end) and the new bytes: never the whole file.
    assert reads == [(size - sync_module.TAIL_CHECK, size), (size, path.stat().st_size)]


def test_unchanged_files_are_not_opened(store, _fake_home, monkeypatch):
    paths = [agent_file(_fake_home, session_id=f"{SID[:-2]}{n:02d}") for n in range(5)]
    report = Syncer(store).sync_files([str(p) for p in paths])
    assert report.counts()["new"] == 5
    opened: list[str] = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda p, *a, **k: opened.append(os.fspath(p)) or real_open(p, *a, **k))
    before = opened_files()
    report = Syncer(store).sync_files([str(p) for p in paths])
    assert report.counts()["unchanged"] == 5
    assert opened_files() == before
    assert [p for p in opened if p.endswith(".jsonl")] == []


def test_a_line_still_being_written_is_left_for_the_next_run(store, _fake_home):
    path = agent_file(_fake_home, n=2)
    partial = line(record("00000003", "00000002", "half"))
    with open(path, "ab") as handle:
        handle.write(partial[:20])  # the agent is mid-write
    with pytest.raises(InvalidSessionError, match="torn final record"):
        read_session_file(path)  # loading the file itself still rejects it
    result = sync_one(store, path)
    assert (result.status, result.added, result.pending) == ("new", 2, 20)
    assert sync_one(store, path).status == "in-progress"  # unchanged since: still waiting
    with open(path, "ab") as handle:
        handle.write(partial[20:])
    result = sync_one(store, path)
    assert (result.status, result.added, result.pending) == ("grown", 1, 0)
    assert stored_entries(store) == file_entries(path)


def test_only_a_partial_header_is_in_progress(store, tmp_path):
    path = tmp_path / "new.jsonl"
    path.write_bytes(line(head())[:15])
    assert sync_one(store, path).status == "in-progress"
    assert not store.exists(SID)


def test_diverged_is_reported_and_the_store_left_alone(store, _fake_home):
    path = agent_file(_fake_home, n=4)
    sync_one(store, path)
    before = stored_entries(store)
    # Someone edits entry 3 in place.
    lines = path.read_bytes().split(b"\n")
    lines[3] = lines[3].replace(b"message 3", b"MESSAGE 3")
    path.write_bytes(b"\n".join(lines))
    result = sync_one(store, path)
    assert (result.status, result.line, result.entry_id) == ("diverged", 4, "00000003")
    assert "differs from the stored entry" in result.reason
    assert stored_entries(store) == before


def test_pi_rewriting_a_v1_file_with_new_ids_is_taken_as_replaced(store, tmp_path):
    """pi upgrades a format-1 file by rewriting it with new random ids (docs/sync.md, "An
    agent rewrote the file"): the same records, so sync takes the file without --replace;
    a name and a label set with sessiontree are kept, moved onto the new ids."""
    v1 = tmp_path / "old.jsonl"
    v1_records = [{"type": "session", "id": SID, "timestamp": "2026-03-01T10:00:00.000Z", "cwd": "/p"}] + [
        {"type": "message", "timestamp": f"2026-03-01T10:00:0{n}.000Z",
         "message": {"role": "user", "content": f"m{n}", "timestamp": n}} for n in range(1, 4)]
    v1.write_bytes(b"".join(line(r) for r in v1_records))
    assert sync_one(store, v1).status == "new"
    old_ids = [e["id"] for e in store.read(SID).entries]
    store.append(SID, [{"type": "session_info", "id": "aaaaaaaa", "parentId": old_ids[-1],
                        "timestamp": "2026-03-02T00:00:00.000Z", "name": "kept"},
                       {"type": "label", "id": "bbbbbbbb", "parentId": "aaaaaaaa",
                        "timestamp": "2026-03-02T00:00:01.000Z", "targetId": old_ids[0], "label": "x"}])
    # The agent's rewrite: version 3, fresh ids, same records.
    rewritten = [{**v1_records[0], "version": 3}]
    parent = None
    for n, rec in enumerate(v1_records[1:]):
        rewritten.append({**rec, "id": f"c{n:07d}", "parentId": parent})
        parent = f"c{n:07d}"
    v1.write_bytes(b"".join(line(r) for r in rewritten))
    result = sync_one(store, v1)
    assert (result.status, result.added, result.kept, result.superseded) == ("replaced", 3, 2, 3)
    assert result.dropped == [] and "rewrote the file" in (result.reason or "")
    stored = store.read(SID)
    assert [e["id"] for e in stored.entries] == ["c0000000", "c0000001", "c0000002", "aaaaaaaa", "bbbbbbbb"]
    assert stored.entries[3]["parentId"] == "c0000002"  # was the old id of the same entry
    assert stored.entries[4]["targetId"] == "c0000000"  # the label follows its entry
    assert stored_entries(store)[:3] == file_entries(v1)
    assert sync_one(store, v1).status == "unchanged"


def test_rejected_files_get_a_reason_and_the_rest_continue(store, tmp_path, _fake_home):
    good = agent_file(_fake_home)
    folder = good.parent
    (folder / "notes.jsonl").write_text("hello\n")
    (folder / "bad-entry.jsonl").write_bytes(line(head(OTHER)) + line({"type": "message", "id": "x"}))
    (folder / "blank.jsonl").write_text("\n \n")
    files, problems = discover([str(folder)])
    assert problems == []
    report = Syncer(store).sync_files(files)
    by_name = {Path(r.path).name: r for r in report.files}
    assert by_name[good.name].status == "new"
    assert (by_name["notes.jsonl"].status, by_name["notes.jsonl"].line) == ("rejected", 1)
    assert by_name["bad-entry.jsonl"].line == 2 and "parentId" in by_name["bad-entry.jsonl"].reason
    assert by_name["blank.jsonl"].reason == "not a session: the file is blank"
    assert not store.exists(OTHER)  # never a partial session


def test_invalid_new_lines_are_rejected_with_the_file_line(store, _fake_home):
    path = agent_file(_fake_home, n=3)
    sync_one(store, path)
    append(path, entries(4, 1, "00000003"))
    with open(path, "ab") as handle:
        handle.write(b'{"type":"message","id":"bad"}\n')
    result = sync_one(store, path)
    assert (result.status, result.line) == ("rejected", 6)
    assert len(store.read(SID).entries) == 3  # nothing of the batch was appended


def test_format1_and_format2_files_grow(store, tmp_path):
    v1 = tmp_path / "v1.jsonl"
    v1.write_bytes(line({"type": "session", "id": SID, "timestamp": "2026-03-01T10:00:00.000Z", "cwd": "/p"})
                   + line({"type": "message", "timestamp": "t1", "message": {"role": "user", "content": "a"}}))
    assert sync_one(store, v1).status == "new"
    first = stored_entries(store)
    append(v1, [{"type": "message", "timestamp": "t2", "message": {"role": "hookMessage", "content": "b"}}])
    result = sync_one(store, v1)
    assert (result.status, result.added) == ("grown", 1)  # ids derived from the session id: stable
    assert stored_entries(store)[:1] == first
    assert stored_entries(store) == file_entries(v1)
    v3 = tmp_path / "v2.jsonl"
    v3.write_bytes(line(head(OTHER, 2)) + b"".join(line(e) for e in entries(1, 2, None)))
    sync_one(store, v3)
    hook = record("00000003", "00000002", "x", "hookMessage")
    append(v3, [hook])
    assert sync_one(store, v3).added == 1
    assert store.read(OTHER).entries[-1]["message"]["role"] == "custom"  # the v2->v3 step ran on the new line
    assert stored_entries(store, OTHER) == file_entries(v3)


def test_vanished_and_replaced_files_mid_sync(store, tmp_path, _fake_home, monkeypatch):
    path = agent_file(_fake_home, n=2)
    real = sync_module.open_source

    def vanish(p):
        os.unlink(p)
        return real(p)

    monkeypatch.setattr(sync_module, "open_source", vanish)
    result = sync_one(store, path)
    assert result.status == "rejected" and "vanished" in result.reason
    assert not store.exists(SID)
    # Replaced by another session between stat and open: what was opened is what is synced.
    path = agent_file(_fake_home, n=2)

    def swap(p):
        tmp = p + ".new"
        Path(tmp).write_bytes(line(head(OTHER)) + line(record("00000009", None)))
        os.replace(tmp, p)
        return real(p)

    monkeypatch.setattr(sync_module, "open_source", swap)
    result = sync_one(store, path)
    assert (result.status, result.session_id, result.added) == ("new", OTHER, 1)


def test_an_agent_appending_while_sync_reads(store, _fake_home):
    path = agent_file(_fake_home, n=1)
    stop = threading.Event()

    def agent() -> None:
        parent, n = "00000001", 2
        while not stop.is_set() and n < 400:
            data = line(record(f"{n:08x}", parent, "x" * (n % 50)))
            with open(path, "ab") as handle:  # written in two pieces: sync may see half a line
                handle.write(data[:13])
                handle.flush()
                time.sleep(0.0005)
                handle.write(data[13:])
            parent, n = f"{n:08x}", n + 1

    writer = threading.Thread(target=agent)
    writer.start()
    syncer_runs = 0
    try:
        while writer.is_alive():
            result = Syncer(store).sync_file(str(path))
            assert result.status != "rejected" and result.status != "diverged", result
            syncer_runs += 1
    finally:
        stop.set()
        writer.join()
    Syncer(store).sync_file(str(path))
    assert syncer_runs > 1
    assert stored_entries(store) == file_entries(path)


def test_a_record_over_the_stored_record_limit_is_rejected_with_its_line(store, _fake_home, monkeypatch):
    from sessiontree.format import bounds

    monkeypatch.setattr(bounds, "MAX_RECORD_BYTES", 4096)
    path = agent_file(_fake_home, n=2)
    # Line 4: a message of 5,000 characters, over the limit; the file grows by it.
    big = record(f"{3:08x}", f"{2:08x}", "x" * 5000)
    assert sync_one(store, path).status == "new"
    append(path, [big])
    result = sync_one(store, path)
    assert (result.status, result.line) == ("rejected", 4)
    assert "over the 4,096 bytes one stored record may hold" in (result.reason or "")
    assert len(store.read(SID).entries) == 2
    fresh = agent_file(_fake_home, session_id=OTHER, n=1)
    append(fresh, [record(f"{2:08x}", f"{1:08x}", "y" * 5000)])
    whole = sync_one(store, fresh)
    assert (whole.status, whole.line) == ("rejected", 3) and not store.exists(OTHER)
