"""Large image data out of line in the SQLite store (docs/blobs.md): the cut rule, byte-exact
reads, deduplication, deletes, references on demand, damage, and the schema step."""

from __future__ import annotations

import base64
import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from builders import header, message_entry, user_entry
from sessiontree.errors import CorruptEntryError, SessionChangedError
from sessiontree.format import jsonio
from sessiontree.session.manager import SessionManager
from sessiontree.stores.blobref import BlobRef, resolve_blobs
from sessiontree.stores.sqlite import blobs
from sessiontree.stores.sqlite import connection as sqlite_connection
from sessiontree.stores.sqlite.store import SqliteStore

#: 100,000 random bytes as base64: 133,336 characters, over the 64 KiB threshold.
IMAGE = base64.b64encode(bytes(range(256)) * 390 + bytes(160)).decode()
OTHER = base64.b64encode(bytes(reversed(range(256))) * 390 + bytes(160)).decode()


def _image_message(entry_id: str, parent: str | None, data: str, text: str = "see this") -> dict[str, Any]:
    return message_entry(entry_id, {"role": "user", "content": [
        {"type": "text", "text": text}, {"type": "image", "data": data, "mimeType": "image/png"}],
        "timestamp": 1}, parent)


def _session(session_id: str = "s1", data: str = IMAGE) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return header(session_id), [user_entry("a1", None, "hello"), _image_message("a2", "a1", data),
                                message_entry("a3", {"role": "assistant", "content": [{"type": "text", "text": "ok"}],
                                                     "timestamp": 2}, "a2")]


def _count(sqlite_store: SqliteStore, sql: str) -> Any:
    return sqlite_store.db.connection().execute(sql).fetchone()[0]


def _stored(path: Path) -> list[dict[str, Any]]:
    """Write ``_session()`` to a store file at ``path`` and close it; its entries."""
    head, entries = _session()
    with SqliteStore(path) as writer:
        writer.create(head, entries)
    return entries


def _tamper(path: Path, sql: str) -> None:
    """Run ``sql`` on the closed store file behind the store's back (damage, as a disk would)."""
    raw = sqlite3.connect(path)
    try:
        raw.execute(sql)
        raw.commit()
    finally:
        raw.close()


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Any:
    opened = SqliteStore(tmp_path / "s.db")
    yield opened
    opened.close()


# -- the cut rule ----------------------------------------------------------------------------------


def test_cut_removes_exactly_the_image_data_bytes_and_names_them(monkeypatch) -> None:
    monkeypatch.setattr(blobs, "THRESHOLD", 4)
    text = b'{"type":"message","message":{"content":[{"type":"image","data":"QUJDRA==","mimeType":"image/png"}]}}'
    cut = blobs.cut_record(text, jsonio.loads(text))
    assert cut is not None
    # "QUJDRA==" starts after '{"type":"message","message":{"content":[{"type":"image","data":"':
    # 18 + 10 + 1 + 10 + 1 + 1 + 7 + 7 + 1 + 7 + 1 = 64 bytes.
    assert cut.text == b'{"type":"message","message":{"content":[{"type":"image","data":"","mimeType":"image/png"}]}}'
    assert cut.splices == [(64, hashlib.sha256(b"QUJDRA==").digest(), 8)]
    assert cut.blobs == {hashlib.sha256(b"QUJDRA==").digest(): b"QUJDRA=="}


def test_two_images_give_offsets_in_the_cut_text(monkeypatch) -> None:
    monkeypatch.setattr(blobs, "THRESHOLD", 4)
    text = b'[{"type":"image","data":"AAAA"},{"type":"image","data":"BBBBBB"}]'
    cut = blobs.cut_record(text, jsonio.loads(text))
    assert cut is not None
    assert cut.text == b'[{"type":"image","data":""},{"type":"image","data":""}]'
    # The first after '[{"type":"image","data":"' (25 bytes); the second 27 bytes after the first's
    # end (29 + 27 = 56 in the original), 4 bytes earlier once the first is cut.
    assert [(offset, length) for offset, _, length in cut.splices] == [(25, 4), (52, 6)]


def test_small_records_and_small_images_stay_inline() -> None:
    entry = _image_message("a", None, "QUJD")
    assert blobs.cut_record(jsonio.dumps(entry), entry) is None  # under the threshold
    big_text = _image_message("a", None, "QUJD", text="x" * 70_000)
    assert blobs.cut_record(jsonio.dumps(big_text), big_text) is None  # large record, small image


def test_the_same_bytes_outside_an_image_block_keep_the_record_inline() -> None:
    # A custom entry's "data" equal to the image's: cutting would blank it for search.
    entry = _image_message("a", None, IMAGE)
    entry["message"]["content"].append({"type": "note", "data": IMAGE})
    assert blobs.cut_record(jsonio.dumps(entry), entry) is None


def test_the_same_bytes_as_a_text_are_cut_from_the_image_only(monkeypatch) -> None:
    monkeypatch.setattr(blobs, "THRESHOLD", 4)
    # The text block holds the image's characters too: not a "data" value, so it stays.
    text = b'[{"type":"text","text":"QUJDRA=="},{"type":"image","data":"QUJDRA=="}]'
    cut = blobs.cut_record(text, jsonio.loads(text))
    assert cut is not None
    assert cut.text == b'[{"type":"text","text":"QUJDRA=="},{"type":"image","data":""}]'
    # A key ending in "data" (x"data, written x\"data) with the same value: two tokens for one
    # image block, so the record stays inline.
    tricky = b'[{"x\\"data":"QUJDRA=="},{"type":"image","data":"QUJDRA=="}]'
    assert blobs.cut_record(tricky, jsonio.loads(tricky)) is None


def test_a_value_needing_escapes_is_never_cut() -> None:
    data = "a\\b" + "A" * 70_000
    entry = _image_message("a", None, data)
    assert blobs.cut_record(jsonio.dumps(entry), entry) is None


# -- the SQLite store ------------------------------------------------------------------------------


def test_reads_give_the_stored_bytes_and_entries_exactly(sqlite_store: SqliteStore) -> None:
    head, entries = _session()
    # The image record as another writer spaced it would stay inline (no "data":" pattern); this
    # one keeps a number the serializer would write otherwise, so exactness is not re-serialising.
    odd = jsonio.dumps(entries[1]).replace(b'"timestamp":1}', b'"timestamp":1.0}')
    sqlite_store.create(head, entries, [None, odd, None])
    assert _count(sqlite_store, "SELECT count(*) FROM entry_blobs") == 1
    assert _count(sqlite_store, "SELECT max(length(json)) FROM entries") < 400
    parsed = sqlite_store.load("s1")
    assert parsed.entries == entries
    assert parsed.raw == [jsonio.dumps(entries[0]), odd, jsonio.dumps(entries[2])]
    assert sqlite_store.read_texts("s1").texts == tuple(parsed.raw)
    assert sqlite_store.read_entries("s1", ["a2"]) == [entries[1]]
    outline = sqlite_store.read_outline("s1")
    assert sqlite_store.read_entries_at(outline, [1]) == [entries[1]]
    assert sqlite_store.read_skeleton("s1").entries[1]["message"] == {"role": "user"}
    assert sqlite_store.verify() == []


def test_search_finds_the_text_of_an_image_message_never_its_data(sqlite_store: SqliteStore) -> None:
    head, entries = _session()
    sqlite_store.create(head, entries)
    sqlite_store.settle_derived()
    assert [hit.entry_id for hit in sqlite_store.search("see this")] == ["a2"]
    assert sqlite_store.search(IMAGE[1000:1040]) == []
    sqlite_store.reindex()
    assert sqlite_store.verify() == []


def test_the_same_image_is_stored_once_across_sessions_and_forks(sqlite_store: SqliteStore) -> None:
    for session_id in ("s1", "s2"):
        head, entries = _session(session_id)
        sqlite_store.create(head, entries)
    manager = SessionManager.open(sqlite_store, "s1")
    manager.create_branched_session("a3")  # switches the manager to the new session
    assert manager.get_session_id() != "s1" and sqlite_store.exists(manager.get_session_id())
    assert _count(sqlite_store, "SELECT count(*) FROM blobs") == 1
    assert _count(sqlite_store, "SELECT count(*) FROM entry_blobs") == 3
    assert _count(sqlite_store, "SELECT sum(size) FROM blobs") == len(IMAGE)


def test_delete_and_replace_collect_the_blobs_no_session_uses(sqlite_store: SqliteStore) -> None:
    for session_id, data in (("s1", IMAGE), ("s2", IMAGE), ("s3", OTHER)):
        head, entries = _session(session_id, data)
        sqlite_store.create(head, entries)
    assert _count(sqlite_store, "SELECT count(*) FROM blobs") == 2
    sqlite_store.delete("s1")
    assert _count(sqlite_store, "SELECT count(*) FROM blobs") == 2  # s2 still holds IMAGE
    sqlite_store.delete("s2")
    assert _count(sqlite_store, "SELECT count(*) FROM blobs") == 1
    head, entries = _session("s3", IMAGE)
    sqlite_store.replace_session(head, entries)
    assert [row[0] for row in sqlite_store.db.connection().execute("SELECT size FROM blobs")] == [len(IMAGE)]
    assert sqlite_store.load("s3").entries == entries
    sqlite_store.delete("s3")
    assert _count(sqlite_store, "SELECT count(*) FROM blobs") == 0
    assert sqlite_store.verify() == []


def test_references_open_a_session_without_reading_its_images(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as writer:
        head, entries = _session()
        writer.create(head, entries)
        plain = SessionManager.open(writer, "s1").build_session_context()
    with SqliteStore(path, blob_refs=True) as reader:
        manager = SessionManager.open(reader, "s1")
        context = manager.build_session_context()
        ref = context.messages[1]["content"][1]["data"]
        assert isinstance(ref, BlobRef)
        assert ref.sha256 == hashlib.sha256(IMAGE.encode()).hexdigest() and ref.length == len(IMAGE)
        assert ref.load() == IMAGE
        assert resolve_blobs(context.messages) == plain.messages
        # Byte reads stay exact with references on.
        assert reader.read_texts("s1").texts[1] == jsonio.dumps(entries[1])
        assert reader.load("s1").raw[1] == jsonio.dumps(entries[1])
        assert isinstance(reader.read_entries("s1", ["a2"])[0]["message"]["content"][1]["data"], BlobRef)
        # The default open is unchanged: plain strings.
        assert plain.messages[1]["content"][1]["data"] == IMAGE


def test_a_marker_lookalike_in_a_session_stays_a_string(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    forged = "\x00sessiontree-blob:" + "0" * 32 + ":0"
    with SqliteStore(path) as writer:
        head, entries = _session()
        entries[1]["message"]["content"][0]["text"] = forged
        writer.create(head, entries)
    with SqliteStore(path, blob_refs=True) as reader:
        content = reader.load("s1").entries[1]["message"]["content"]
    assert content[0]["text"] == forged
    assert isinstance(content[1]["data"], BlobRef)


def test_a_damaged_blob_is_an_error_never_other_bytes(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    entries = _stored(path)
    _tamper(path, "UPDATE blobs SET data = CAST(replace(CAST(data AS TEXT), 'A', 'B') AS BLOB)")
    with SqliteStore(path) as reader:
        with pytest.raises(CorruptEntryError) as caught:
            reader.load("s1")
        assert (caught.value.entry_id, caught.value.line) == ("a2", 3)
        texts = reader.read_texts("s1").texts  # a blob's CRC-32 is checked when its record is taken
        assert texts[0] == jsonio.dumps(entries[0])
        with pytest.raises(CorruptEntryError):
            texts[1]
        problems = reader.verify()
        assert [(p.code, p.line, p.entry_id) for p in problems] == [("hash-mismatch", 3, "a2")]
    with SqliteStore(path, blob_refs=True) as lazy:
        ref = lazy.load("s1", keep_raw=False).entries[1]["message"]["content"][1]["data"]
        with pytest.raises(CorruptEntryError):
            ref.load()


def test_an_orphan_blob_is_reported_and_a_full_reindex_removes_it(sqlite_store: SqliteStore) -> None:
    head, entries = _session()
    sqlite_store.create(head, entries)
    conn = sqlite_store.db.connection()
    conn.execute("INSERT INTO blobs (sha256, size, crc, data) VALUES (?, 1, 0, ?)", (b"x" * 32, b"y"))
    problems = sqlite_store.verify()
    assert [(p.code, p.severity) for p in problems] == [("orphan-rows", "warning")]
    assert "1 blobs (1 bytes)" in problems[0].message
    sqlite_store.reindex()
    assert sqlite_store.verify() == []
    assert _count(sqlite_store, "SELECT count(*) FROM blobs") == 1


def test_the_schema_step_moves_existing_images_out_of_line(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "s.db"
    head, entries = _session()
    with monkeypatch.context() as patch:  # a store written before the step
        patch.setattr(sqlite_connection, "MIGRATIONS",
                      [step for step in sqlite_connection.MIGRATIONS if step[0] != "m013_blobs"])
        patch.setattr(blobs, "THRESHOLD", 1 << 40)
        with SqliteStore(path) as old:
            old.create(head, entries)
            before = old.read_texts("s1").texts
    with SqliteStore(path) as upgraded:
        assert "m013_blobs" in upgraded.applied_migrations()
        assert _count(upgraded, "SELECT count(*) FROM entry_blobs") == 1
        assert upgraded.read_texts("s1").texts == before
        assert upgraded.verify() == []


def test_read_texts_puts_blobs_back_one_record_at_a_time(sqlite_store: SqliteStore) -> None:
    head, entries = _session()
    sqlite_store.create(head, entries)
    texts = sqlite_store.read_texts("s1").texts
    assert len(texts) == 3 and texts[-2] == jsonio.dumps(entries[1])
    assert texts[1:] == [jsonio.dumps(entries[1]), jsonio.dumps(entries[2])]
    sqlite_store.delete("s1")  # its blob goes with it: the texts read before cannot be completed
    assert texts[0] == jsonio.dumps(entries[0])
    with pytest.raises(SessionChangedError):
        texts[1]


def test_a_missing_blob_fails_read_texts_at_once(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _stored(path)
    _tamper(path, "DELETE FROM blobs")
    with SqliteStore(path) as reader:
        with pytest.raises(CorruptEntryError) as caught:
            reader.read_texts("s1")
        assert caught.value.line == 3
        assert [(p.code, p.line) for p in reader.verify()] == [("hash-mismatch", 3)]


def test_read_blob_gives_an_image_by_its_name(sqlite_store: SqliteStore) -> None:
    head, entries = _session()
    sqlite_store.create(head, entries)
    name = hashlib.sha256(IMAGE.encode()).hexdigest()
    assert sqlite_store.read_blob(name) == IMAGE.encode()
    assert sqlite_store.read_blob("0" * 64) is None
    assert sqlite_store.read_blob(name.upper()) is None and sqlite_store.read_blob("../x") is None


def test_a_branched_session_of_a_manager_with_references_keeps_the_images(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _stored(path)
    with SqliteStore(path, blob_refs=True) as reader:
        manager = SessionManager.open(reader, "s1")
        manager.create_branched_session("a3")
        branched = manager.get_session_id()
    with SqliteStore(path) as check:
        assert check.load(branched).entries[1]["message"]["content"][1]["data"] == IMAGE
        assert _count(check, "SELECT count(*) FROM blobs") == 1
        assert _count(check, "SELECT count(*) FROM entry_blobs") == 2


# -- the held open (SessionManager.open(..., lazy=False), docs/decisions/held-records.md) -----------


def test_a_held_open_holds_records_stored_cut_whole(sqlite_store) -> None:
    from sessiontree.session.lazy import LazySessionTree

    head, entries = _session()
    sqlite_store.create(head, entries)
    assert _count(sqlite_store, "SELECT count(*) FROM entry_blobs") == 1  # a2 is stored cut
    manager = SessionManager.open(sqlite_store, "s1", lazy=False)
    assert isinstance(manager._tree, LazySessionTree)
    assert manager.get_entry("a2")["message"]["content"][1]["data"] == IMAGE
    assert manager.get_entries() == entries == sqlite_store.load("s1").entries


def test_a_held_open_refuses_a_missing_blob_as_load_does(sqlite_store) -> None:
    head, entries = _session()
    sqlite_store.create(head, entries)
    sqlite_store.db.connection().execute("DELETE FROM blobs")
    with pytest.raises(CorruptEntryError) as held:
        SessionManager.open(sqlite_store, "s1", lazy=False)
    with pytest.raises(CorruptEntryError) as loaded:
        sqlite_store.load("s1")
    assert (str(held.value), held.value.line) == (str(loaded.value), 3)


def test_a_store_giving_references_opens_records_stored_cut_the_plain_way(tmp_path) -> None:
    _stored(tmp_path / "s.db")
    with SqliteStore(tmp_path / "s.db", blob_refs=True) as reader:
        manager = SessionManager.open(reader, "s1", lazy=False)
        assert type(manager._tree).__name__ == "SessionTree"
        assert isinstance(manager.get_entry("a2")["message"]["content"][1]["data"], BlobRef)


def test_a_kept_tails_image_stored_out_of_line_stays_an_image_block_on_the_compaction_message(
        sqlite_store, tmp_path: Path) -> None:
    # seed:context-building: with a boundary whose firstKeptEntryId is a string, one
    # custom-role compaction message carries the kept tail, "retained images kept as image
    # blocks on that message", then the messages after the boundary. a2's image is stored
    # cut (out of line) and the session is opened held: the block must carry the exact data.
    head, entries = _session()
    boundary = {"type": "compaction", "id": "b1", "parentId": "a3", "timestamp": "2026-01-01T00:00:03.000Z",
                "summary": "[User]: hello", "firstKeptEntryId": "a2", "tokensBefore": 10,
                "details": {"strategy": "verbatim-lines"}}
    sqlite_store.create(head, [*entries, boundary, user_entry("u4", "b1", "next")])
    assert _count(sqlite_store, "SELECT count(*) FROM entry_blobs") == 1
    manager = SessionManager.open(sqlite_store, "s1", lazy=False)
    messages = manager.build_session_context().messages
    assert [m["role"] for m in messages] == ["custom", "user"]
    compaction, after = messages
    assert compaction["customType"] == "compaction"
    images = [block for block in compaction["content"] if block.get("type") == "image"]
    assert images == [{"type": "image", "data": IMAGE, "mimeType": "image/png"}]
    text = "".join(block.get("text", "") for block in compaction["content"] if block.get("type") == "text")
    assert "[User]: hello" in text and "see this" in text and IMAGE not in text  # summary, then the tail
    assert after["content"] == "next"
    # The same context through the lazy open of another handle on the same file.
    other = SqliteStore(tmp_path / "s.db")
    try:
        assert messages == SessionManager.open(other, "s1").build_session_context().messages
    finally:
        other.close()
