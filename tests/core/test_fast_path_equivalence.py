"""The fast paths give exactly what the general paths give.

* ``SqliteStore.load`` streams rows a chunk at a time in WAL mode and can drop
  the stored texts (``keep_raw=False``, what ``SessionManager.open`` uses):
  same header, entries and errors, in the same order of precedence (a CRC
  mismatch anywhere wins over a parse error anywhere; the header's error
  before the entries').
* ``SessionTree`` builds its index in one comprehension: same duplicate-id
  error, same entry order.
* ``SessionManager.from_parsed``: the read-only manager of the CLI and the
  web viewer: same projection as ``open``; a write never reaches any store.
* The projection's inlined tool-pairing window: blank user messages stay
  transparent, visible ones close the window.
"""

from __future__ import annotations

import sqlite3
import zlib

import pytest

from builders import message_of as _entry
from builders import work_header
from sessiontree import SessionManager
from sessiontree.core.projection import INTERRUPTED_TEXT, build_session_projection
from sessiontree.core.tree import SessionTree
from sessiontree.errors import CorruptEntryError, InvalidSessionError, SessionNotFoundError
from sessiontree.format import jsonio
from sessiontree.stores import SqliteStore
from sessiontree.stores.sqlite import store as sqlite_module
from sessiontree.stores.sqlite.reads import SqliteReads

SID = "0190a7b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b"
TS = "2026-02-01T09:00:00.000Z"



def _entries(count: int) -> list[dict]:
    out, parent = [], None
    for index in range(count):
        entry_id = f"e{index:07x}"
        role = ("user", "assistant", "toolResult")[index % 3]
        message: dict = {"role": role, "content": [{"type": "text", "text": f"text {index} ["}],
                         "timestamp": 1769936400000 + index}
        if role == "assistant":
            message["content"].append({"type": "toolCall", "id": f"c{index}", "name": "bash", "arguments": {}})
            message["stopReason"] = "toolUse"
        elif role == "toolResult":
            message.update(toolCallId=f"c{index - 1}", toolName="bash", isError=False)
        out.append({"type": "message", "id": entry_id, "parentId": parent, "timestamp": TS, "message": message})
        parent = entry_id
    return out


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "s.db"
    store = SqliteStore(path)
    store.create(work_header(SID), _entries(23))
    assert store.journal_mode == "wal"
    store.close()
    return path


def _set_row(path, seq_index: int, text: bytes, crc: int | None) -> None:
    """Overwrite the ``seq_index``-th entry row (0-based) behind the store's back."""
    conn = sqlite3.connect(path)
    rowid = conn.execute("SELECT rowid FROM entries ORDER BY seq LIMIT 1 OFFSET ?", (seq_index,)).fetchone()[0]
    conn.execute("UPDATE entries SET json = ?, crc = ? WHERE rowid = ?", (text, crc, rowid))
    conn.commit()
    conn.close()


@pytest.mark.parametrize("chunk", [1, 2, 5, 512])
def test_streamed_load_equals_the_whole_load_and_keep_raw_false_drops_only_the_texts(db, monkeypatch, chunk):
    monkeypatch.setattr(SqliteReads, "_CHUNK", chunk)
    store = SqliteStore(db)
    full = store.load(SID)
    lean = store.load(SID, keep_raw=False)
    assert full.header == lean.header == work_header(SID)
    assert full.entries == lean.entries == _entries(23)
    assert full.raw == [jsonio.dumps(e) for e in _entries(23)]
    assert lean.raw == [None] * 23
    assert lean.lines == full.lines == list(range(2, 25))
    assert lean.header_raw == full.header_raw
    assert lean.entry_bytes(3) == full.entry_bytes(3)
    assert store.read(SID).entries == full.entries


@pytest.mark.parametrize("chunk", [2, 512])
def test_a_crc_mismatch_anywhere_wins_over_an_earlier_parse_error(db, monkeypatch, chunk):
    monkeypatch.setattr(SqliteReads, "_CHUNK", chunk)
    bad = b'{"type":"message"'  # not JSON, with a matching CRC: a parse error at entry 1
    _set_row(db, 1, bad, zlib.crc32(bad))
    _set_row(db, 17, b'{"type":"custom"}', 12345)  # a CRC mismatch, later
    store = SqliteStore(db)
    with pytest.raises(CorruptEntryError) as info:
        store.load(SID, keep_raw=False)
    assert info.value.line == 19 and info.value.entry_id == "e0000011"


@pytest.mark.parametrize("chunk", [2, 512])
def test_without_a_crc_mismatch_the_first_parse_error_is_raised(db, monkeypatch, chunk):
    monkeypatch.setattr(SqliteReads, "_CHUNK", chunk)
    bad = b'{"type":"message"'
    _set_row(db, 1, bad, zlib.crc32(bad))
    invalid = b'{"type":"message","id":"x","parentId":null,"timestamp":"t","message":[]}'
    _set_row(db, 9, invalid, zlib.crc32(invalid))
    with pytest.raises(InvalidSessionError) as info:
        SqliteStore(db).load(SID)
    assert not isinstance(info.value, CorruptEntryError)
    assert info.value.line == 3 and "not valid JSON" in info.value.reason


def test_the_fast_parse_path_keeps_the_nesting_limit(db, monkeypatch):
    monkeypatch.setattr(SqliteReads, "_CHUNK", 4)
    deep = ('{"type":"custom","id":"d","parentId":null,"timestamp":"t","data":' + "[" * 600 + "]" * 600 + "}").encode()
    _set_row(db, 6, deep, zlib.crc32(deep))
    with pytest.raises(InvalidSessionError) as info:
        SqliteStore(db).load(SID)
    assert info.value.line == 8 and "nested" in str(info.value)


def test_a_non_wal_store_loads_the_same(db, monkeypatch):
    store = SqliteStore(db)
    expected = store.load(SID)
    store.journal_mode = "delete"  # the fetch-everything path
    again = store.load(SID)
    assert again.entries == expected.entries and again.raw == expected.raw
    assert store.load(SID, keep_raw=False).raw == [None] * 23


def test_open_uses_the_lean_load_and_sees_the_same_session(db):
    store = SqliteStore(db)
    manager = SessionManager.open(store, SID)
    assert manager.get_entries() == _entries(23)
    assert manager.build_session_projection().messages == build_session_projection(_entries(23)).messages
    assert sqlite_module.SqliteStore.load.__kwdefaults__ == {"keep_raw": True}


def test_session_tree_reports_the_first_duplicate_in_order():
    entries = _entries(6)
    twin = dict(entries[4], parentId=None)
    with pytest.raises(InvalidSessionError, match='duplicate entry id "e0000004"'):
        SessionTree([*entries, twin, dict(entries[1])])
    tree = SessionTree(entries)
    assert tree.entries == entries and tree.entries is not entries
    assert list(tree.by_id) == [e["id"] for e in entries] and tree.leaf_id == "e0000005"
    with pytest.raises(KeyError):
        SessionTree([entries[0], {"type": "message"}])


def test_from_parsed_projects_like_open_and_never_writes(db):
    store = SqliteStore(db)
    parsed = store.read(SID)
    viewer = SessionManager.from_parsed(parsed)
    opened = SessionManager.open(store, SID)
    assert viewer.get_cwd() == "/work/a" and viewer.get_session_id() == SID
    assert viewer.get_leaf_id() == opened.get_leaf_id()
    assert viewer.build_session_projection().messages == opened.build_session_projection().messages
    viewer.branch("e0000007")
    assert viewer.build_session_projection().messages == build_session_projection(parsed.entries, "e0000007").messages
    leaf = viewer.get_leaf_id()
    with pytest.raises(SessionNotFoundError):
        viewer.append_message({"role": "user", "content": "hi", "timestamp": 1})
    assert viewer.get_leaf_id() == leaf and len(viewer.get_entries()) == 23
    assert store.load(SID).entries == _entries(23)


@pytest.mark.parametrize("content, closes", [(" \n\u3000", False), ([{"type": "text", "text": "\t"}], False),
                                             ("go on", True), ([{"type": "image", "data": "", "mimeType": "x"}], True)])
def test_a_user_message_closes_a_tool_window_only_when_visible(content, closes):
    call = {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {}}
    entries = [
        _entry("a", None, {"role": "assistant", "content": [call], "stopReason": "toolUse", "timestamp": 5}),
        _entry("u", "a", {"role": "user", "content": content, "timestamp": 6}),
        _entry("r", "u", {"role": "toolResult", "toolCallId": "c1", "toolName": "bash", "content": [],
                          "isError": False, "timestamp": 7}),
    ]
    roles = [(m["role"], m.get("content")) for m in build_session_projection(entries).messages]
    if closes:  # the window closed: a synthetic result before the user message, the late result dropped
        assert [r for r, _ in roles] == ["assistant", "toolResult", "user"]
        assert roles[1][1] == [{"type": "text", "text": INTERRUPTED_TEXT}]
    else:  # transparent: the result still answers the call
        assert [r for r, _ in roles] == ["assistant", "user", "toolResult"]


# ------------------------------------------------- the one-pass build of a plain branch

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from test_projection import _IDS, sessions  # noqa: E402

from sessiontree.core.projection import LAST_ENTRY, ProjectionBuilder  # noqa: E402


def _general(entries, leaf, monkeypatch_ctx):
    with monkeypatch_ctx.context() as patch:
        patch.setattr(ProjectionBuilder, "build_plain", classmethod(lambda cls, *args: None))
        return ProjectionBuilder.build(entries, leaf, None)


def _fields(builder: ProjectionBuilder, repair: bool) -> tuple:
    p = builder.result(repair, copy=True)
    return (p.messages, p.thinking_level, p.model, p.context_window, p.system_message, list(p.sources),
            list(p.ends), builder.leaf_id, builder.edits, builder.copies, builder.owned, builder.owned_sources)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(sessions(), st.one_of(st.just(LAST_ENTRY), st.none(), st.sampled_from([*_IDS, "nope"])), st.booleans())
def test_the_one_pass_build_equals_the_general_build(monkeypatch, entries, leaf, repair):
    general = _general(entries, leaf, monkeypatch)
    plain = ProjectionBuilder.build_plain(entries, leaf, None)
    if plain is not None:
        assert _fields(plain, repair) == _fields(general, repair)
    assert _fields(ProjectionBuilder.build(entries, leaf, None), repair) == _fields(general, repair)


def test_a_plain_branch_takes_the_one_pass_build_and_settings_follow_the_path(monkeypatch):
    entries = _entries(9)
    entries.insert(2, {"type": "thinking_level_change", "id": "t1", "parentId": entries[1]["id"], "timestamp": TS,
                       "thinkingLevel": "high"})
    entries[3] = dict(entries[3], parentId="t1")
    entries[4] = dict(entries[4], message={**entries[4]["message"], "provider": "p", "model": "m1"})
    entries.append({"type": "model_change", "id": "m2", "parentId": entries[-1]["id"], "timestamp": TS,
                    "provider": "q", "modelId": "m2"})
    entries.append({"type": "context_window_change", "id": "w", "parentId": "m2", "timestamp": TS,
                    "contextWindow": 5})
    # a message without content in a role that is never normalized (P.1) stays plain
    entries.append(_entry("b1", "w", {"role": "bashExecution", "command": "ls", "output": "o", "exitCode": 0,
                                      "cancelled": False, "truncated": False, "timestamp": 8}))
    plain = ProjectionBuilder.build_plain(entries, LAST_ENTRY, None)
    assert plain is not None
    assert (plain.thinking_level, plain.model, plain.context_window) == ("high", {"provider": "q", "modelId": "m2"}, 5)
    assert _fields(plain, True) == _fields(_general(entries, LAST_ENTRY, monkeypatch), True)
    # a later assistant naming its model wins over the model change
    entries.append(_entry("a2", "b1", {"role": "assistant", "content": [], "provider": "r", "model": "m3",
                                      "stopReason": "stop", "timestamp": 9}))
    again = ProjectionBuilder.build_plain(entries, LAST_ENTRY, None)
    assert again is not None and again.model == {"provider": "r", "modelId": "m3"}
    # what a plain path cannot have sends the build the general way
    for extra in ({"type": "context_edit", "targetId": "e0000000", "replacement": None},
                  {"type": "compaction", "summary": "s", "firstKeptEntryId": None,
                   "details": {"strategy": "verbatim-lines"}},
                  {"type": "message", "message": {"role": "user", "content": None, "timestamp": 1}}):
        tail = {"id": "x", "parentId": "a2", "timestamp": TS, **extra}
        assert ProjectionBuilder.build_plain([*entries, tail], LAST_ENTRY, None) is None
