"""``read_texts`` on every store (docs/stores.md, "Raw texts"): exactly the header, stored
texts and types ``read`` gives, the same error as ``read`` for the same damage, and what
``restore`` says the agent will not see, counted from the texts."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from builders import custom, entry, header, message_entry
from sessiontree.errors import CorruptEntryError, InvalidSessionError, SessionNotFoundError
from sessiontree.format import jsonio
from sessiontree.stores.base import RawTexts
from sessiontree.sync.restore import agent_file

SID = "raw-1"

# A message whose role comes after its content: its head does not show the role, so
# the kind count parses this record.
LATE_ROLE = (b'{"type":"message","id":"e4","parentId":"e3","timestamp":"2026-01-01T00:00:00.000Z",'
             b'"message":{"content":"be brief","role":"system"}}')


def _entries() -> list[dict[str, Any]]:
    return [
        message_entry("e1", {"role": "user", "content": "hi", "timestamp": 1}),
        message_entry("e2", {"role": "system", "content": "rules", "timestamp": 2}, "e1"),
        entry("context_window_change", "e3", "e2", contextWindow=1000),
        message_entry("e4", {"content": "be brief", "role": "system"}, "e3"),
        custom("e5", "e4"),
    ]


def _create(store: Any) -> None:
    # e5 is stored with its own spacing: its stored text is not the serializer's.
    odd = (b'{"type": "custom", "id": "e5", "parentId": "e4", "timestamp": "2026-01-01T00:00:00.000Z",'
           b' "customType": "t", "data": {}}')
    store.create(header(SID), _entries(), [None, None, None, LATE_ROLE, odd])


def _error(call: Any) -> tuple[Any, ...]:
    with pytest.raises(Exception) as info:  # any type: the caller compares it
        call()
    exc = info.value
    return type(exc), str(exc), getattr(exc, "line", None), getattr(exc, "entry_id", None)


def test_read_texts_is_read_without_parsing(store):
    _create(store)
    assert isinstance(store, RawTexts)
    texts = store.read_texts(SID)
    whole = store.read(SID)
    assert texts.session_id == SID and texts.header == whole.header
    assert list(texts.texts) == [whole.entry_bytes(i) for i in range(5)]
    assert list(texts.texts)[3] == LATE_ROLE and list(texts.texts)[4].startswith(b'{"type": "custom"')
    assert list(texts.types) == ["message", "message", "context_window_change", "message", "custom"]
    assert len(texts) == 5


def test_read_texts_of_an_empty_session_and_a_missing_one(store):
    store.create(header("empty"))
    texts = store.read_texts("empty")
    assert texts.header == store.read("empty").header and list(texts.texts) == [] and list(texts.types) == []
    with pytest.raises(SessionNotFoundError):
        store.read_texts("nope")


def _tamper(store: Any, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Change the bytes of records e2 and e4 (their checksums, where kept, unchanged)."""
    bad = b'{"type":"custom"'
    if store.kind == "sqlite":
        conn = sqlite3.connect(tmp_path / "db" / "sessions.db")
        with conn:
            conn.execute("UPDATE entries SET json = ? WHERE id IN ('e2', 'e4')", (bad,))
        conn.close()
    elif store.kind == "postgres":
        import psycopg

        with psycopg.connect(request.getfixturevalue("pg_url"), autocommit=True) as conn:
            conn.execute("UPDATE entries SET json = %s WHERE session_id = %s AND id IN ('e2', 'e4')", (bad, SID))
    elif store.kind == "jsonl":
        path = Path(store.location(SID))
        lines = path.read_bytes().split(b"\n")
        lines[2] = lines[4] = bad  # the file's lines of e2 and e4
        path.write_bytes(b"\n".join(lines))
    else:
        session = store._sessions[SID]
        session.raw[1] = session.raw[3] = bad


def test_a_damaged_record_gives_the_error_read_gives(store, request, tmp_path):
    _create(store)
    _tamper(store, request, tmp_path)
    failure = _error(lambda: store.read_texts(SID))
    assert failure == _error(lambda: store.read(SID))
    if store.kind in ("sqlite", "postgres"):
        # the checksum of the first damaged record in file order: e2, on line 3
        assert failure[0] is CorruptEntryError and failure[2:] == (3, "e2")
    with pytest.raises((CorruptEntryError, InvalidSessionError, ValueError)):
        agent_file(store, SID)


@pytest.mark.parametrize("what", ["bytes", "valid checksum"])
def test_a_damaged_header_gives_the_error_read_gives(store, request, tmp_path, what):
    if store.kind not in ("sqlite", "postgres"):
        pytest.skip("only the database stores keep the header apart from a file")
    _create(store)
    bad = b'{"type":"session"}'
    crc = ", header_crc = crc32" if what == "valid checksum" else ""
    if store.kind == "sqlite":
        import zlib

        conn = sqlite3.connect(tmp_path / "db" / "sessions.db")
        with conn:
            conn.execute(f"UPDATE sessions SET header_json = ?{crc.replace('crc32', '?')} WHERE id = ?",
                         (bad, zlib.crc32(bad), SID) if crc else (bad, SID))
        conn.close()
    else:
        import zlib

        import psycopg

        with psycopg.connect(request.getfixturevalue("pg_url"), autocommit=True) as conn:
            conn.execute(f"UPDATE sessions SET header_json = %s{crc.replace('crc32', '%s')} WHERE id = %s",
                         (bad, zlib.crc32(bad), SID) if crc else (bad, SID))
    failure = _error(lambda: store.read_texts(SID))
    assert failure == _error(lambda: store.read(SID))
    # bytes changed: the checksum fails on line 1; a matching checksum: the header is parsed and refused
    assert failure[0] is (CorruptEntryError if what == "bytes" else InvalidSessionError)


def test_restore_counts_what_the_agent_will_not_see_from_the_texts(store):
    _create(store)
    # Atomic: the two system messages (one found by its head, one by parsing its record),
    # then the context-window change, in the order each kind first occurs.
    assert agent_file(store, SID, agent="atomic").notes == [
        "atomic will not see 2 system message entries: Atomic drops system messages from the model's context",
        "atomic will not see 1 context_window_change entry: Atomic has no context-window entry: the window it "
        "uses is its own setting",
    ]
    assert agent_file(store, SID, agent="pi").notes == [
        "pi will not see 1 context_window_change entry: pi has no context-window entry: the window it uses is "
        "its own setting",
    ]
    # the file is the stored texts, each on its line, after a format-3 header
    lines = agent_file(store, SID).data.split(b"\n")
    assert lines[1:-1] == list(store.read_texts(SID).texts) and lines[-1] == b""


class _WithoutRawTexts:
    """A store seen without the optional capability (a store class written elsewhere)."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name == "read_texts":
            raise AttributeError(name)
        return getattr(self._store, name)


def test_a_store_without_read_texts_gives_the_same_file_through_read(store):
    _create(store)
    plain = _WithoutRawTexts(store)
    assert not isinstance(plain, RawTexts)
    for agent in ("pi", "atomic"):
        expected, fallback = agent_file(store, SID, agent=agent), agent_file(plain, SID, agent=agent)
        assert (fallback.data, fallback.sha256, fallback.notes) == (expected.data, expected.sha256, expected.notes)


def test_a_record_stored_as_text_is_given_as_its_bytes(store, tmp_path):
    if store.kind != "sqlite":
        pytest.skip("only SQLite can hold a record as TEXT (written by hand)")
    import zlib

    _create(store)
    text = '{"type":"custom","id":"e5","parentId":"e4","timestamp":"2026-01-01T00:00:00.000Z",' \
           '"customType":"t","data":{"é":1}}'
    conn = sqlite3.connect(tmp_path / "db" / "sessions.db")
    with conn:
        conn.execute("UPDATE entries SET json = ?, crc = ? WHERE id = 'e5'", (text, zlib.crc32(text.encode())))
    conn.close()
    texts = store.read_texts(SID)
    assert list(texts.texts)[4] == text.encode() == store.read(SID).entry_bytes(4)
    assert all(isinstance(t, bytes) for t in texts.texts)


def test_large_inline_images_round_trip_byte_for_byte(store):
    """A session of large images (the SQLite store keeps them out of line, docs/blobs.md;
    the others inline): every read gives the same bytes and entries, search finds its text
    and not its image data, and deleting it leaves the store healthy."""
    import base64

    image = base64.b64encode(bytes(range(256)) * 300).decode()  # 102,400 characters
    first = message_entry("i1", {"role": "user", "content": [
        {"type": "text", "text": "zebra crossing"}, {"type": "image", "data": image, "mimeType": "image/png"}],
        "timestamp": 1})
    result = message_entry("i2", {"role": "toolResult", "toolCallId": "c1", "toolName": "read", "content": [
        {"type": "image", "data": image, "mimeType": "image/png"}], "isError": False, "timestamp": 2}, "i1")
    spaced = (b'{"type":"message","id":"i2","parentId":"i1","timestamp":"2026-01-01T00:00:00.000Z","message":'
              b'{"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"image","data":"'
              + image.encode() + b'","mimeType":"image/png"}],"isError":false,"timestamp":2.0}}')
    store.create(header("img"), [first], None)
    store.append("img", [result], [spaced])
    texts = store.read_texts("img")
    assert list(texts.texts) == [jsonio.dumps(first), spaced]
    whole = store.read("img")
    assert whole.entries[0] == first
    assert whole.entries[1]["message"]["content"][0]["data"] == image and whole.entries[1]["id"] == "i2"
    assert [whole.entry_bytes(i) for i in range(2)] == list(texts.texts)
    assert store.read_entries("img", ["i2"])[0]["message"]["content"][0]["data"] == image
    store.settle_derived()
    assert [hit.entry_id for hit in store.search("zebra")] == ["i1"]
    assert store.search(image[500:540]) == []
    store.delete("img")
    assert store.verify() == []
