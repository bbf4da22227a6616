"""The lazy open of SQLite sessions (and their resume): same answers as a full open.

``SessionManager.open`` of a SQLite session whose active branch has an active
compaction boundary reads the store's outline and only the records its
context needs (``sessiontree._lazy``, ``ProjectionBuilder.build_partial``);
the rest is read on first use. These tests check:

* a Hypothesis property: on random trees (branches, active and retired
  compactions with kept tails on and off the branch, context edits, settings,
  labels, names, ``leaf`` records, parent links to missing entries), a lazy
  manager and a fully loaded one agree on every getter and projection, before
  and after random appends, leaf moves and branch summaries;
* that the lazy open really reads little, and falls back to the full load
  where laziness could answer differently (no boundary, a final ``leaf``
  record, a damaged or inconsistent record in what it reads);
* the snapshot: other writers' appends are never taken in, a replaced or
  deleted session raises ``SessionChangedError``, a damaged record off the
  context is reported when it is first read;
* ``read_outline`` / ``read_entries_at`` on every local store.
"""

from __future__ import annotations

import itertools
import sqlite3
import tempfile
import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import assistant_turn as _assistant
from builders import message_of as _message
from builders import user_blocks as _user
from builders import work_header
from sessiontree import SessionManager
from sessiontree.core.projection.build import build_session_projection
from sessiontree.core.tree import SessionTree
from sessiontree.errors import (
    CorruptEntryError,
    EntryNotFoundError,
    InvalidSessionError,
    SessionChangedError,
    SessionNotFoundError,
)
from sessiontree.session import builders as builders_module
from sessiontree.session.lazy import LazySessionTree
from sessiontree.stores import JsonlStore, MemoryStore, SqliteStore
from sessiontree.stores.sqlite.reads import SqliteReads

SID = "0190a7b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b"
TS = "2026-02-01T09:00:00.000Z"
VERBATIM = {"strategy": "verbatim-lines"}



def _chain(count: int, start: int = 0, parent: str | None = None) -> list[dict]:
    """``count`` user/assistant messages in a chain (ids e0000, e0001, ...)."""
    out = []
    for index in range(start, start + count):
        entry_id = f"e{index:04d}"
        message = _user(f"u{index}") if index % 2 == 0 else _assistant(f"a{index}")
        out.append(_message(entry_id, parent, message))
        parent = entry_id
    return out


def _compaction(entry_id: str, parent: str, first_kept: str | None, strategy: str = "verbatim-lines") -> dict:
    return {"type": "compaction", "id": entry_id, "parentId": parent, "timestamp": TS, "summary": "[User]: s",
            "firstKeptEntryId": first_kept, "tokensBefore": 10, "details": {"strategy": strategy}}


def _session_with_boundary() -> list[dict]:
    """60 messages, a side branch, a label and a name early on, settings early on, a
    boundary after e0039 keeping e0035.. as its tail, then 10 more messages."""
    entries = _chain(40)
    entries.insert(3, {"type": "thinking_level_change", "id": "t1", "parentId": "e0002", "timestamp": TS,
                       "thinkingLevel": "high"})
    entries[4] = dict(entries[4], parentId="t1")
    entries.append(_message("side", "e0010", _user("a side branch")))
    entries.append({"type": "label", "id": "l1", "parentId": "side", "timestamp": TS, "targetId": "e0005",
                    "label": "start"})
    entries.append({"type": "session_info", "id": "n1", "parentId": "l1", "timestamp": TS, "name": "Lazy"})
    entries.append(_compaction("b1", "e0039", "e0035"))
    entries.extend(_chain(10, 40, "b1"))
    return entries


def _store(path: Path, entries: list[dict]) -> SqliteStore:
    store = SqliteStore(path)
    store.create(work_header(SID), entries)
    return store


def _set_row(path: Path, entry_id: str, text: bytes, crc: int | None) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE entries SET json = ?, crc = ? WHERE id = ?", (text, crc, entry_id))
    conn.close()


# -- the property -----------------------------------------------------------------------------

_CALLS = ["c1", "c2"]


def _contents() -> st.SearchStrategy[Any]:
    block = st.builds(lambda t: {"type": "text", "text": t}, st.sampled_from(["", " ", "hi"]))
    return st.one_of(st.none(), st.sampled_from(["", "x"]), st.lists(block, max_size=2))


_MESSAGES = st.one_of(
    st.builds(lambda c: {"role": "user", "content": c, "timestamp": 1}, _contents()),
    st.builds(lambda m, calls, t: _assistant(t, m, tuple(calls)),
              st.sampled_from([None, "m1", "m2"]), st.lists(st.sampled_from(_CALLS), max_size=2, unique=True),
              st.sampled_from(["", "ok"])),
    st.builds(lambda c, content: {"role": "toolResult", "toolCallId": c, "toolName": "bash", "content": content,
                                  "isError": False, "timestamp": 3}, st.sampled_from(_CALLS), _contents()),
    st.builds(lambda c: {"role": "system", "content": c, "timestamp": 0}, st.sampled_from(["", "rule"])),
    st.just({"role": "bashExecution", "command": "ls", "output": "o", "exitCode": 0, "cancelled": False,
             "truncated": False, "timestamp": 1}),
)


def _bodies(refs: st.SearchStrategy[str]) -> st.SearchStrategy[dict]:
    return st.one_of(
        st.builds(lambda m: {"type": "message", "message": m}, _MESSAGES),
        st.builds(lambda m: {"type": "message", "message": m}, _MESSAGES),
        st.builds(lambda fk, strategy: {"type": "compaction", "summary": "[User]: s", "firstKeptEntryId": fk,
                                        "tokensBefore": 1, "details": {"strategy": strategy}},
                  st.one_of(st.none(), refs), st.sampled_from(["verbatim-lines", "verbatim-lines", "summary"])),
        st.builds(lambda t, r: {"type": "context_edit", "targetId": t, "replacement": r},
                  refs, st.one_of(st.none(), st.just({"content": "edited"}),
                                  st.just({"content": [{"type": "text", "text": "e2"}]}))),
        st.builds(lambda v: {"type": "thinking_level_change", "thinkingLevel": v}, st.sampled_from(["low", "high"])),
        st.builds(lambda m: {"type": "model_change", "provider": "q", "modelId": m}, st.sampled_from(["x", "y"])),
        st.just({"type": "context_window_change", "contextWindow": 1000}),
        st.builds(lambda t, label: {"type": "label", "targetId": t, **({"label": label} if label else {})},
                  refs, st.sampled_from([None, "", "here"])),
        st.builds(lambda n: {"type": "session_info", "name": n}, st.sampled_from(["", "Name"])),
        st.builds(lambda c: {"type": "custom_message", "customType": "k", "content": c, "display": True}, _contents()),
        st.just({"type": "branch_summary", "fromId": "x", "summary": "went"}),
        st.just({"type": "custom", "customType": "state", "data": {"k": 1}}),
        st.builds(lambda t: {"type": "leaf", "targetId": t}, st.one_of(st.none(), refs)),
    )


@st.composite
def stored_sessions(draw: st.DrawFn) -> list[dict]:
    count = draw(st.integers(min_value=1, max_value=28))
    ids = [f"s{i:03d}" for i in range(count)]
    refs = st.sampled_from([*ids, "nowhere"])
    bodies = _bodies(refs)
    # Most examples get an active boundary on the last entry's branch (what the lazy
    # open reads partially); the others are left to chance (mostly full loads).
    boundary = draw(st.one_of(st.none(), st.integers(min_value=0, max_value=count - 1),
                              st.integers(min_value=0, max_value=count - 1)))
    entries = []
    for i, entry_id in enumerate(ids):
        body = draw(bodies)
        if i == boundary:
            body = {"type": "compaction", "summary": "[User]: s", "firstKeptEntryId": draw(refs),
                    "tokensBefore": 1, "details": {"strategy": "verbatim-lines"}}
        elif boundary is not None and i == count - 1 and body["type"] == "leaf" and draw(st.booleans()):
            body = {"type": "message", "message": draw(_MESSAGES)}
        if i == 0:
            parent = None
        elif boundary is not None and i > boundary:
            parent = ids[i - 1]
        else:
            parent = draw(st.one_of(st.just(ids[i - 1]), st.just(ids[i - 1]), st.just(ids[i - 1]),
                                    st.sampled_from(ids[:i]), st.none(), st.just("missing")))
        entries.append({"type": body["type"], "id": entry_id, "parentId": parent, "timestamp": TS,
                        **{k: v for k, v in body.items() if k != "type"}})
    return entries


_OPS = st.lists(st.tuples(
    st.sampled_from(["user", "assistant", "result", "compact", "edit", "label", "thinking", "model", "name",
                     "branch", "reset", "branch_summary", "peek"]),
    st.sampled_from([f"s{i:03d}" for i in range(28)] + ["z0000_0", "nowhere"]),
    st.booleans()), max_size=8)


def _snapshot_cheap(m: SessionManager, ids: list[str]) -> tuple:
    """What a lazy tree answers without reading the whole session."""
    return (m.get_leaf_id(), m.get_leaf_entry(), m.get_session_name_state(),
            [m.get_entry(i) for i in ids], [m.get_label(i) for i in ids],
            [m.get_children(i) for i in [None, *ids[:5]]], m.get_branch())


def _tree_shape(nodes: list) -> list:
    return [(n.entry, n.label, n.label_timestamp, _tree_shape(n.children)) for n in nodes]


def _snapshot_full(m: SessionManager, ids: list[str]) -> tuple:
    historical = m.build_historical_projection()
    return (m.get_entries(), _tree_shape(m.get_tree()), m.build_context_entries(),
            (historical.projection.messages, historical.compaction, historical.kept_entries), [m.get_branch(i) for i in ids[:6]])


def _projection(m: SessionManager) -> tuple:
    p = m.build_session_projection()
    return (p.messages, p.thinking_level, p.model, p.context_window, p.system_message, list(p.sources),
            list(p.ends), m.build_session_context())


def _apply(m: SessionManager, op: str, target: str, flag: bool) -> Any:
    if op == "user":
        return m.append_message(_user("next"))
    if op == "assistant":
        return m.append_message(_assistant("reply", "m9" if flag else None, ("c1",) if flag else ()))
    if op == "result":
        return m.append_message({"role": "toolResult", "toolCallId": "c1", "toolName": "bash",
                                 "content": [{"type": "text", "text": "r"}], "isError": False, "timestamp": 3})
    if op == "compact":
        return m.append_compaction("[User]: c", target if flag else None, 5, VERBATIM)
    if op == "edit":
        return m.append_context_edit(target, None if flag else {"content": "changed"})
    if op == "label":
        return m.append_label_change(target, "lab" if flag else None)
    if op == "thinking":
        return m.append_thinking_level_change("medium")
    if op == "model":
        return m.append_model_change("r", "m7")
    if op == "name":
        return m.append_session_info("Renamed" if flag else "")
    if op == "branch":
        return m.branch(target)
    if op == "reset":
        return m.reset_leaf()
    if op == "branch_summary":
        return m.branch_with_summary(target if flag else None, "back")
    if op == "peek":
        return _snapshot_cheap(m, [target])
    raise AssertionError(op)


def _outcome(m: SessionManager, op: str, target: str, flag: bool) -> Any:
    try:
        return ("ok", _apply(m, op, target, flag))
    except (ValueError, EntryNotFoundError) as exc:
        return ("error", type(exc), str(exc))


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(stored_sessions(), _OPS, st.booleans())
def test_a_lazy_open_answers_like_a_full_open(monkeypatch, entries, ops, peek_first):
    """The lazy open and the held one (``lazy=False``) each answer like a manager over
    the plainly loaded entries (``load``, every record parsed), op after op."""
    ids = [e["id"] for e in entries]
    counter = itertools.count()
    state = {"op": 0}

    def fixed_id(existing: Any) -> str:
        # Every manager makes the same ids for the same operation (k-th call within op n).
        return f"z{state['op']:04d}_{next(counter)}"

    monkeypatch.setattr(builders_module, "new_entry_id", fixed_id)
    monkeypatch.setattr(builders_module, "now_iso", lambda: TS)
    with tempfile.TemporaryDirectory() as tmp:
        stores = []
        for name in ("lazy", "held", "plain"):
            _store(Path(tmp, f"{name}.db"), entries).close()
            stores.append(SqliteStore(Path(tmp, f"{name}.db")))
        try:
            lazy = SessionManager.open(stores[0], SID)
            held = SessionManager.open(stores[1], SID, lazy=False)
            full = _plain_open(stores[2])
            others = (lazy, held)
            for other in others:
                assert _projection(other) == _projection(full)
                if peek_first:
                    assert _snapshot_cheap(other, ids) == _snapshot_cheap(full, ids)
            for n, (op, target, flag) in enumerate(ops):
                state["op"] = n
                outcomes = []
                for m in (*others, full):
                    counter = itertools.count()
                    outcomes.append(_outcome(m, op, target, flag))
                assert outcomes[0] == outcomes[2] and outcomes[1] == outcomes[2], (op, target, flag)
                for other in others:
                    if flag:
                        # a rebuild from scratch, as after a leaf move: a plain branch kept from
                        # an earlier build of the same leaf is not walked again
                        other._projector = None
                    assert _projection(other) == _projection(full), (op, target, flag)
            every = ids + [e["id"] for e in full.get_entries()[len(ids):]]
            for other in others:
                assert _snapshot_cheap(other, every) == _snapshot_cheap(full, every)
                assert _snapshot_full(other, every) == _snapshot_full(full, every)
                assert type(other._tree) is SessionTree  # read in full by now, the same object kind
                assert _projection(other) == _projection(full)
            stateless = build_session_projection(full.get_entries(), full.get_leaf_id(),
                                                 repair_trailing=full._repair_trailing())
            assert _projection(full)[:7] == (
                stateless.messages, stateless.thinking_level, stateless.model, stateless.context_window,
                stateless.system_message, list(stateless.sources), list(stateless.ends))
            # what they wrote is the same
            assert stores[0].load(SID).entries == stores[2].load(SID).entries
            assert stores[1].load(SID).entries == stores[2].load(SID).entries
        finally:
            for store in stores:
                store.close()


def _plain_open(store: SqliteStore) -> SessionManager:
    """A manager over the session's entries as ``load`` parses them (what ``open`` gave
    before sessions were held as their stored bytes)."""
    parsed = store.load(SID, keep_raw=False)
    return SessionManager(store, parsed.header, parsed.entries, cwd=parsed.header["cwd"], saved=True)


# -- reading little, and falling back ------------------------------------------------------------


def _record_reads(monkeypatch) -> list[int]:
    seen: list[int] = []
    original = SqliteStore.read_entries_at

    def spy(self, outline, positions):
        seen.extend(positions)
        return original(self, outline, positions)

    monkeypatch.setattr(SqliteStore, "read_entries_at", spy)
    return seen


def test_a_lazy_open_reads_the_context_and_the_records_acting_from_afar(tmp_path, monkeypatch):
    entries = _session_with_boundary()
    _store(tmp_path / "s.db", entries).close()
    seen = _record_reads(monkeypatch)
    manager = SessionManager.open(SqliteStore(tmp_path / "s.db"), SID)
    assert isinstance(manager._tree, LazySessionTree)
    read_ids = sorted(entries[p]["id"] for p in seen)
    # the thinking-level change (far up), the boundary, its kept tail e0035-e0039 and the 10 after it
    assert read_ids == sorted(["t1", "b1", *(f"e{i:04d}" for i in range(35, 50))])
    context = manager.build_session_context()
    assert context.thinking_level == "high" and context.model == {"provider": "p", "modelId": "m1"}
    assert context.messages[0]["role"] == "custom" and context.messages[0]["customType"] == "compaction"
    assert len(context.messages) == 11  # the boundary message (with the tail in it) + 10 messages
    # cheap questions read only what they concern
    at_open = set(seen)
    seen.clear()
    assert manager.get_label("e0005") == "start" and manager.get_session_name() == "Lazy"
    assert sorted(entries[p]["id"] for p in seen) == ["l1", "n1"]
    assert [e["id"] for e in manager.get_children("e0010")] == ["e0011", "side"]
    assert isinstance(manager._tree, LazySessionTree)
    # the whole tree reads the rest once, and the tree becomes a plain one
    assert len(manager.get_entries()) == len(entries)
    assert type(manager._tree) is SessionTree
    assert at_open.isdisjoint(seen) and at_open | set(seen) == set(range(len(entries)))  # each record once


def test_the_model_is_read_from_above_the_boundary_when_nothing_after_it_names_one(tmp_path, monkeypatch):
    entries = _chain(600)
    entries[597] = _message("e0597", "e0596", _assistant("old", model="far"))
    entries[599] = _message("e0599", "e0598", _assistant("no model named", model=None))
    entries.append(_compaction("b1", "e0599", None))
    entries.append(_message("u1", "b1", _user("after")))
    _store(tmp_path / "s.db", entries).close()
    seen = _record_reads(monkeypatch)
    manager = SessionManager.open(SqliteStore(tmp_path / "s.db"), SID)
    assert isinstance(manager._tree, LazySessionTree)
    assert manager.build_session_context().model == {"provider": "p", "modelId": "far"}
    assert {entries[p]["id"] for p in seen} >= {"e0597", "e0598", "e0599"}
    assert len(seen) <= 2 + 256  # the boundary, the message after it, one batch of messages above
    full = SessionManager.open(SqliteStore(tmp_path / "s.db"), SID, lazy=False)
    assert manager.build_session_context() == full.build_session_context()


def test_a_held_open_lets_each_records_bytes_go_once_it_is_parsed(tmp_path):
    # docs/decisions/held-records.md: a held session used whole ends up holding its
    # entries, not its entries and its bytes.
    entries = _chain(12)
    _store(tmp_path / "s.db", entries).close()
    manager = SessionManager.open(SqliteStore(tmp_path / "s.db"), SID, lazy=False)
    tree = manager._tree
    assert isinstance(tree, LazySessionTree)
    held, outline = tree._store, tree._outline
    assert held._texts[3] is not None
    assert held.read_entries_at(outline, [3]) == [entries[3]]
    assert held._texts[3] is None and held._texts[2] is not None
    with pytest.raises(RuntimeError, match="already given out"):
        held.read_entries_at(outline, [3])
    other = SessionManager.open(SqliteStore(tmp_path / "s.db"), SID, lazy=False)
    kept = other._tree._store._texts
    assert other.get_entries() == entries  # used whole: every record parsed once, every byte let go
    assert kept == [None] * 12


@pytest.mark.parametrize("shape", ["no boundary", "retired boundary only", "final leaf record", "cycle"])
def test_the_lazy_open_falls_back_to_the_full_load(tmp_path, shape):
    entries = _chain(12)
    if shape == "retired boundary only":
        entries.append(_compaction("b1", "e0011", "e0005", strategy="summary"))
    elif shape == "final leaf record":
        entries.append(_compaction("b1", "e0011", "e0005"))
        entries.append({"type": "leaf", "id": "lf", "parentId": "b1", "timestamp": TS, "targetId": "e0003"})
    elif shape == "cycle":
        entries[0] = dict(entries[0], parentId="e0011")
        entries.append(_compaction("b1", "e0011", "e0005"))
    _store(tmp_path / "s.db", entries).close()
    manager = SessionManager.open(SqliteStore(tmp_path / "s.db"), SID)
    assert type(manager._tree) is SessionTree
    full = SessionManager.open(SqliteStore(tmp_path / "s.db"), SID, lazy=False)
    assert manager.build_session_context() == full.build_session_context()


def test_a_damaged_record_in_the_context_gives_the_full_loads_error(tmp_path):
    entries = _session_with_boundary()
    _store(tmp_path / "s.db", entries).close()
    _set_row(tmp_path / "s.db", "e0045", b'{"type":"message"', zlib.crc32(b'{"type":"message"'))
    with pytest.raises(InvalidSessionError) as lazy:
        SessionManager.open(SqliteStore(tmp_path / "s.db"), SID)
    with pytest.raises(InvalidSessionError) as full:
        SessionManager.open(SqliteStore(tmp_path / "s.db"), SID, lazy=False)
    assert (type(lazy.value), str(lazy.value)) == (type(full.value), str(full.value))
    assert full.value.line == entries.index(next(e for e in entries if e["id"] == "e0045")) + 2


def test_a_damaged_record_off_the_context_is_reported_when_first_read(tmp_path):
    entries = _session_with_boundary()
    _store(tmp_path / "s.db", entries).close()
    _set_row(tmp_path / "s.db", "e0007", b'{"type":"message","x":1}', 12345)  # CRC no longer matches
    with pytest.raises(CorruptEntryError):
        SessionManager.open(SqliteStore(tmp_path / "s.db"), SID, lazy=False)
    manager = SessionManager.open(SqliteStore(tmp_path / "s.db"), SID)
    assert len(manager.build_session_context().messages) == 11
    manager.append_message(_user("still works"))
    with pytest.raises(CorruptEntryError) as info:
        manager.get_entries()
    assert info.value.entry_id == "e0007" and info.value.line == 10  # e0007 is the 8th record after t1


def test_json_that_disagrees_with_the_copied_columns_is_never_trusted(tmp_path):
    entries = _session_with_boundary()
    _store(tmp_path / "s.db", entries).close()
    text = b'{"type":"message","id":"e0045","parentId":"e0040","timestamp":"t","message":{"role":"user"}}'
    _set_row(tmp_path / "s.db", "e0045", text, zlib.crc32(text))
    manager = SessionManager.open(SqliteStore(tmp_path / "s.db"), SID)
    assert type(manager._tree) is SessionTree  # the full load: its answers come from the JSON
    full = SessionManager.open(SqliteStore(tmp_path / "s.db"), SID, lazy=False)
    assert manager.build_session_context() == full.build_session_context()


# -- the held open (lazy=False) ---------------------------------------------------------------------


def test_a_held_open_checks_every_record_and_parses_none_until_used(tmp_path, monkeypatch):
    entries = _session_with_boundary()
    _store(tmp_path / "s.db", entries).close()
    manager = SessionManager.open(SqliteStore(tmp_path / "s.db"), SID, lazy=False)
    tree = manager._tree
    assert isinstance(tree, LazySessionTree) and tree._read == {}  # nothing kept parsed
    assert manager.get_leaf_id() == "e0049" and len(tree) == len(entries)
    assert manager.get_entry("e0003") == entries[4] and list(tree._read) == [4]  # t1 is record 4
    assert manager.get_entry("e0003") is manager.get_entry("e0003")  # parsed once, then kept
    assert manager.get_entries() == entries
    assert type(manager._tree) is SessionTree


def test_a_held_session_never_reads_the_store_again(tmp_path):
    entries = _session_with_boundary()
    store = _store(tmp_path / "s.db", entries)
    manager = SessionManager.open(store, SID, lazy=False)
    store.delete(SID)  # a lazily opened manager would raise SessionChangedError now
    assert manager.get_entries() == entries
    assert len(manager.build_session_context().messages) == 11


@pytest.mark.parametrize("damage", ["bad json", "invalid entry", "checksum"])
def test_a_held_open_reports_a_damaged_record_anywhere_as_load_does(tmp_path, damage):
    entries = _session_with_boundary()
    _store(tmp_path / "s.db", entries).close()
    if damage == "bad json":
        _set_row(tmp_path / "s.db", "e0007", b'{"type":"message"', zlib.crc32(b'{"type":"message"'))
    elif damage == "invalid entry":  # a message without its message object
        text = b'{"type":"message","id":"e0007","parentId":"e0006","timestamp":"t"}'
        _set_row(tmp_path / "s.db", "e0007", text, zlib.crc32(text))
    else:
        _set_row(tmp_path / "s.db", "e0007", b'{"type":"message","x":1}', 12345)
    expected = CorruptEntryError if damage == "checksum" else InvalidSessionError
    with pytest.raises(expected) as held:
        SessionManager.open(SqliteStore(tmp_path / "s.db"), SID, lazy=False)
    with pytest.raises(expected) as loaded:
        SqliteStore(tmp_path / "s.db").load(SID)
    assert str(held.value) == str(loaded.value)
    assert held.value.line == 10  # e0007 is the 8th record after t1: line 2 + 8


@pytest.mark.parametrize("journal", ["wal", "delete"])  # checked a chunk at a time inside the read, or after it
@pytest.mark.parametrize("damage", [None, "bad json", "checksum"])
def test_a_held_open_checks_every_chunk_in_either_journal_mode(tmp_path, monkeypatch, journal, damage):
    monkeypatch.setattr(SqliteReads, "_CHUNK", 4)
    entries = _session_with_boundary()
    _store(tmp_path / "s.db", entries).close()
    if damage == "bad json":  # e0041 is line 48, in the 12th chunk of 4; e0045 (line 52) is damaged too
        _set_row(tmp_path / "s.db", "e0041", b"[1]", zlib.crc32(b"[1]"))
        _set_row(tmp_path / "s.db", "e0045", b"{", zlib.crc32(b"{"))
    elif damage == "checksum":  # a checksum failure later in the file wins over the earlier parse error
        _set_row(tmp_path / "s.db", "e0003", b"[1]", zlib.crc32(b"[1]"))
        _set_row(tmp_path / "s.db", "e0045", b"{}", 7)
    store = SqliteStore(tmp_path / "s.db")
    store.journal_mode = journal
    if damage is None:
        manager = SessionManager.open(store, SID, lazy=False)
        assert isinstance(manager._tree, LazySessionTree)
        assert manager.get_entries() == entries
        return
    expected = CorruptEntryError if damage == "checksum" else InvalidSessionError
    with pytest.raises(expected) as held:
        SessionManager.open(store, SID, lazy=False)
    with pytest.raises(expected) as loaded:
        store.load(SID)
    assert (str(held.value), held.value.line) == (str(loaded.value), 48 if damage == "bad json" else 52)


@pytest.mark.parametrize("padding", [0, 20_000])  # short records count brackets, long ones walk the value
@pytest.mark.parametrize("levels", [400, 600])  # jsonio.MAX_DEPTH is 512; orjson reads up to 1024
def test_a_held_open_refuses_a_record_nested_too_deep_as_load_does(tmp_path, levels, padding):
    entries = _chain(6)
    nested: Any = "x" * padding
    for _ in range(levels - 3):  # the entry, its message and the content list are 3 levels
        nested = [nested]
    entries[3] = dict(entries[3], message=dict(entries[3]["message"], content=nested))
    _store(tmp_path / "s.db", entries[:3]).close()
    conn = sqlite3.connect(tmp_path / "s.db")  # stored by hand: orjson writes 255 levels at most
    with conn:
        for seq, entry in enumerate(entries[3:], 3):
            if seq == 3:
                inner = b"[" * (levels - 3) + orjson.dumps("x" * padding) + b"]" * (levels - 3)
                text = orjson.dumps(dict(entry, message=dict(entry["message"], content="@"))).replace(
                    b'"@"', inner)
            else:
                text = orjson.dumps(entry)
            conn.execute("INSERT INTO entries (session_id, seq, id, parent_id, type, timestamp, json, crc)"
                         " VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (SID, seq, entry["id"], entry["parentId"],
                                                               entry["type"], TS, text, zlib.crc32(text)))
    conn.close()
    if levels > 512:
        with pytest.raises(InvalidSessionError, match="nested more than 512 levels") as held:
            SessionManager.open(SqliteStore(tmp_path / "s.db"), SID, lazy=False)
        with pytest.raises(InvalidSessionError) as loaded:
            SqliteStore(tmp_path / "s.db").load(SID)
        assert (str(held.value), held.value.line) == (str(loaded.value), 5)
    else:
        manager = SessionManager.open(SqliteStore(tmp_path / "s.db"), SID, lazy=False)
        assert isinstance(manager._tree, LazySessionTree)
        assert manager.get_entries() == entries == SqliteStore(tmp_path / "s.db").load(SID).entries


@pytest.mark.parametrize("shape", ["json disagrees with the columns", "final leaf record", "cycle",
                                   "record stored as text", "id stored as a blob", "duplicate id in the json"])
def test_a_held_open_falls_back_to_the_plain_load(tmp_path, shape):
    entries = _chain(12)
    if shape == "json disagrees with the columns":
        _store(tmp_path / "s.db", entries).close()
        text = b'{"type":"message","id":"e0005","parentId":"e0002","timestamp":"t","message":{"role":"user"}}'
        _set_row(tmp_path / "s.db", "e0005", text, zlib.crc32(text))
    elif shape == "record stored as text":  # written by hand (docs/stores.md): its UTF-8 bytes are checked
        _store(tmp_path / "s.db", entries).close()
        conn = sqlite3.connect(tmp_path / "s.db")
        with conn:
            conn.execute("UPDATE entries SET json = CAST(json AS TEXT) WHERE id = 'e0004'")
        conn.close()
    elif shape == "id stored as a blob":  # a lone surrogate cannot be SQLite text
        entries[5] = dict(entries[5], id="\ud800odd")
        entries[6] = dict(entries[6], parentId="\ud800odd")
        _store(tmp_path / "s.db", entries).close()
    elif shape == "duplicate id in the json":  # the columns differ, the JSON repeats e0003
        _store(tmp_path / "s.db", entries).close()
        text = orjson.dumps(dict(entries[7], id="e0003"))
        _set_row(tmp_path / "s.db", "e0007", text, zlib.crc32(text))
    else:
        if shape == "final leaf record":
            entries.append({"type": "leaf", "id": "lf", "parentId": "e0011", "timestamp": TS, "targetId": "e0003"})
        else:
            entries[0] = dict(entries[0], parentId="e0011")
        _store(tmp_path / "s.db", entries).close()
    if shape == "duplicate id in the json":  # the plain load's error, at open
        with pytest.raises(InvalidSessionError, match='duplicate entry id "e0003"'):
            SessionManager.open(SqliteStore(tmp_path / "s.db"), SID, lazy=False)
        return
    manager = SessionManager.open(SqliteStore(tmp_path / "s.db"), SID, lazy=False)
    assert type(manager._tree) is SessionTree  # the plain load: its answers come from the JSON
    plain = _plain_open(SqliteStore(tmp_path / "s.db"))
    assert manager.get_entries() == plain.get_entries()
    assert manager.get_leaf_id() == plain.get_leaf_id()
    assert manager.build_session_context() == plain.build_session_context()
    if shape == "json disagrees with the columns":
        assert manager.get_entry("e0005")["parentId"] == "e0002"
    elif shape == "id stored as a blob":
        assert manager.get_entry("\ud800odd") == entries[5]
    elif shape == "final leaf record":
        assert manager.get_leaf_id() == "e0003"


# -- the snapshot --------------------------------------------------------------------------------


def test_other_writers_appends_are_not_taken_in_when_the_rest_is_read(tmp_path):
    entries = _session_with_boundary()
    _store(tmp_path / "s.db", entries).close()
    manager = SessionManager.open(SqliteStore(tmp_path / "s.db"), SID)
    full = SessionManager.open(SqliteStore(tmp_path / "s.db"), SID, lazy=False)
    other = SessionManager.open(SqliteStore(tmp_path / "s.db"), SID, lazy=False)
    other.append_message(_user("from another process"))
    mine = manager.append_message(_user("mine"))
    full.append_message(_user("mine"))
    assert [e["id"] for e in manager.get_entries()][-2:] == ["e0049", mine]
    assert len(manager.get_entries()) == len(full.get_entries()) == len(entries) + 1
    assert len(SqliteStore(tmp_path / "s.db").load(SID).entries) == len(entries) + 3


@pytest.mark.parametrize("change", ["replaced", "deleted", "replaced, same shape"])
def test_a_session_replaced_or_deleted_before_the_rest_is_read_raises(tmp_path, change):
    entries = _session_with_boundary()
    _store(tmp_path / "s.db", entries).close()
    manager = SessionManager.open(SqliteStore(tmp_path / "s.db"), SID)
    writer = SqliteStore(tmp_path / "s.db")
    if change == "deleted":
        writer.delete(SID)
    elif change == "replaced":
        writer.replace_session(work_header(SID), _chain(5))
    else:  # the same ids, parents and types, another text in one old record
        changed = [dict(e) for e in entries]
        changed[1] = _message("e0001", "e0000", _assistant("rewritten"))
        writer.replace_session(work_header(SID), changed)
    assert len(manager.build_session_context().messages) == 11  # what was read at open stays
    with pytest.raises(SessionChangedError) as info:
        manager.get_tree()
    assert info.value.session_id == SID
    assert isinstance(manager._tree, LazySessionTree)  # nothing half-read


# -- the store methods ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "jsonl", "memory"])
def test_read_outline_and_read_entries_at_on_every_local_store(tmp_path, kind):
    entries = _session_with_boundary()
    store = (SqliteStore(tmp_path / "s.db") if kind == "sqlite" else JsonlStore(tmp_path / "dir")
             if kind == "jsonl" else MemoryStore())
    store.create(work_header(SID), entries)
    outline = store.read_outline(SID)
    assert outline.header["id"] == SID and len(outline) == len(entries)
    assert list(outline.ids) == [e["id"] for e in entries]
    assert list(outline.parent_ids) == [e["parentId"] for e in entries]
    assert list(outline.types) == [e["type"] for e in entries]
    positions = [len(entries) - 1, 0, 7, 7, 20]
    assert store.read_entries_at(outline, positions) == [entries[p] for p in positions]
    assert store.read_entries_at(outline, range(len(entries))) == entries
    assert store.read_entries_at(outline, []) == []
    with pytest.raises(IndexError):
        store.read_entries_at(outline, [len(entries)])
    store.append(SID, [_message("late", "e0049", _user("late"))])
    assert store.read_entries_at(outline, [len(entries) - 1]) == [entries[-1]]  # the snapshot's rows only
    with pytest.raises(SessionNotFoundError):
        store.read_outline("0190a7b2-7c3d-7e4f-8a9b-000000000000")
    store.close()


def test_read_entries_at_checks_each_record_like_load(tmp_path):
    entries = _session_with_boundary()
    _store(tmp_path / "s.db", entries).close()
    _set_row(tmp_path / "s.db", "e0002", b'{"type":"message"', zlib.crc32(b'{"type":"message"'))
    store = SqliteStore(tmp_path / "s.db")
    outline = store.read_outline(SID)
    # a parse error is raised only once every CRC of the call is known to match
    with pytest.raises(InvalidSessionError) as parse:
        store.read_entries_at(outline, [2, 30])
    assert not isinstance(parse.value, CorruptEntryError) and parse.value.line == 4
    conn = sqlite3.connect(tmp_path / "s.db")
    with conn:
        conn.execute("UPDATE entries SET json = json || ' ' WHERE id = 'e0030'")  # bytes changed, CRC kept
    conn.close()
    with pytest.raises(CorruptEntryError) as crc:
        store.read_entries_at(outline, [2, 31])
    assert crc.value.entry_id == "e0030"
    store.close()


@pytest.mark.parametrize("kind", ["sqlite", "jsonl", "memory"])
def test_read_entries_is_the_by_id_form_of_read_entries_at(tmp_path, kind):
    entries = _session_with_boundary()
    store = (SqliteStore(tmp_path / "s.db") if kind == "sqlite" else JsonlStore(tmp_path / "dir")
             if kind == "jsonl" else MemoryStore())
    store.create(work_header(SID), entries)
    by_id = {e["id"]: e for e in entries}
    asked = ["e0045", "unknown", "t1", "e0045", "n1"]  # order kept, repeats repeated, unknown skipped
    assert store.read_entries(SID, asked) == [by_id["e0045"], by_id["t1"], by_id["e0045"], by_id["n1"]]
    outline = store.read_outline(SID)
    # positions: e0000-e0002 0-2, t1 3, e0003-e0039 4-40, side 41, l1 42, n1 43, b1 44, e0040.. 45..
    assert store.read_entries(SID, asked) == store.read_entries_at(outline, [50, 3, 50, 43])
    assert store.read_entries(SID, []) == []
    with pytest.raises(SessionNotFoundError):
        store.read_entries("0190a7b2-7c3d-7e4f-8a9b-000000000000", ["e0001"])
    store.close()


def test_read_entries_checks_each_record_like_read_entries_at_and_load(tmp_path):
    entries = _session_with_boundary()
    _store(tmp_path / "s.db", entries).close()
    # e0005 (position 6, line 8) parses but is no valid message entry: validated as load does
    bad = b'{"type":"message","id":"e0005","parentId":"e0004","timestamp":"2026-02-01T09:00:00.000Z"}'
    _set_row(tmp_path / "s.db", "e0005", bad, zlib.crc32(bad))
    store = SqliteStore(tmp_path / "s.db")
    outline = store.read_outline(SID)
    with pytest.raises(InvalidSessionError) as by_id:
        store.read_entries(SID, ["e0005"])
    with pytest.raises(InvalidSessionError) as at:
        store.read_entries_at(outline, [6])
    with pytest.raises(InvalidSessionError) as whole:
        store.load(SID)
    assert by_id.value.line == at.value.line == whole.value.line == 8
    assert str(by_id.value) == str(at.value) == str(whole.value)
    # e0002 (line 4) does not parse; asked after e0005, it is still the one reported (file order)
    _set_row(tmp_path / "s.db", "e0002", b'{"type":"message"', zlib.crc32(b'{"type":"message"'))
    with pytest.raises(InvalidSessionError) as first:
        store.read_entries(SID, ["e0005", "e0002"])
    assert not isinstance(first.value, CorruptEntryError) and first.value.line == 4
    # a checksum failure later in the file wins over both parse errors
    conn = sqlite3.connect(tmp_path / "s.db")
    with conn:
        conn.execute("UPDATE entries SET json = json || ' ' WHERE id = 'e0030'")  # bytes changed, CRC kept
    conn.close()
    with pytest.raises(CorruptEntryError) as crc:
        store.read_entries(SID, ["e0002", "e0005", "e0030"])
    assert crc.value.entry_id == "e0030" and crc.value.line == 33
    store.close()


def test_read_entries_reports_the_first_failure_in_file_order_across_look_up_batches(tmp_path):
    entries = _chain(1200)
    _store(tmp_path / "s.db", entries).close()
    for entry_id in ("e0003", "e1100"):
        _set_row(tmp_path / "s.db", entry_id, b'{"type":', zlib.crc32(b'{"type":'))
    store = SqliteStore(tmp_path / "s.db")
    # asked in reverse: e1100 is in the first batch of 500 ids, e0003 in the third
    with pytest.raises(InvalidSessionError) as first:
        store.read_entries(SID, [e["id"] for e in reversed(entries)])
    assert first.value.line == 5
    store.close()


def test_a_rebuild_of_the_same_leaf_reuses_the_plain_branch_and_projects_the_same():
    manager = SessionManager.in_memory("/work/a", entries=[work_header(SID), *_chain(30)])
    first = _projection(manager)
    manager._projector = None
    kept = manager._branch
    assert kept is not None and kept[1] == "e0029" and kept[3] == 30
    assert _projection(manager) == first
    assert manager._projector[2].sources is kept[2]  # built on the kept branch, not a new walk
    manager.append_message({"role": "user", "content": None, "timestamp": 5})  # needs a P.1 copy: not plain
    manager._projector = None
    after = _projection(manager)
    assert after[5][-1]["message"]["content"] == [] and manager._branch[1] == "e0029"
    fresh = build_session_projection(manager.get_entries(), manager.get_leaf_id(), repair_trailing=False)
    assert after[:7] == (fresh.messages, fresh.thinking_level, fresh.model, fresh.context_window,
                         fresh.system_message, list(fresh.sources), list(fresh.ends))


def test_the_outline_gives_back_ids_stored_as_blobs(tmp_path):
    # A lone surrogate cannot be SQLite text: such ids are stored as BLOBs (stores/sqlite.py _db).
    entries = _chain(3)
    entries.append(_message("\ud800odd", "e0002", _user("x")))
    entries.append(_compaction("b\udfff", "\ud800odd", "e0001"))
    entries.append(_message("last", "b\udfff", _assistant("y")))
    store = _store(tmp_path / "s.db", entries)
    outline = store.read_outline(SID)
    assert list(outline.ids) == [e["id"] for e in entries]
    assert list(outline.parent_ids) == [e["parentId"] for e in entries]
    assert store.read_entries_at(outline, [3, 4]) == entries[3:5]
    manager = SessionManager.open(store, SID)
    assert isinstance(manager._tree, LazySessionTree)
    assert manager.build_session_context() == SessionManager.open(store, SID, lazy=False).build_session_context()
    assert manager.get_entry("\ud800odd") == entries[3]
    store.close()


def test_a_boundary_far_from_the_end_is_not_worth_an_outline(tmp_path, monkeypatch):
    import sessiontree.session.lazy as lazy_module

    entries = _session_with_boundary()  # the boundary is the 11th record from the end
    store = _store(tmp_path / "s.db", entries)
    assert store.recent_entry_types(SID, 11) == {"compaction", "message"}
    assert store.recent_entry_types(SID, 10) == {"message"}
    assert store.recent_entry_types("0190a7b2-7c3d-7e4f-8a9b-000000000000", 10) == set()
    reads = _record_reads(monkeypatch)
    monkeypatch.setattr(lazy_module, "PROBE", 10)
    assert type(SessionManager.open(store, SID)._tree) is SessionTree and reads == []
    monkeypatch.setattr(lazy_module, "PROBE", 11)
    assert isinstance(SessionManager.open(store, SID)._tree, LazySessionTree)
    store.close()


def test_both_partial_reads_refuse_a_header_that_fails_its_checksum(tmp_path):
    # One header check (SqliteStore._scan) serves the outline and the skeleton, as load has its own.
    _store(tmp_path / "s.db", _session_with_boundary()).close()
    conn = sqlite3.connect(tmp_path / "s.db")
    with conn:
        header_json = conn.execute("SELECT header_json FROM sessions WHERE id = ?", (SID,)).fetchone()[0]
        conn.execute("UPDATE sessions SET header_json = ? WHERE id = ?",
                     (bytes(header_json).replace(b'"cwd"', b'"cwD"'), SID))
    conn.close()
    store = SqliteStore(tmp_path / "s.db")
    for read in (store.load, store.read_outline, store.read_skeleton):
        with pytest.raises(CorruptEntryError):
            read(SID)


def test_a_lazy_open_with_blob_references_reads_no_image(tmp_path):
    # An image after the boundary (out of line, docs/blobs.md): the lazy open's reads give a
    # reference with blob_refs, the string without, and the same context once resolved.
    import base64

    from sessiontree.stores.blobref import BlobRef, resolve_blobs

    image = base64.b64encode(bytes(range(256)) * 300).decode()
    entries = _session_with_boundary()
    entries[-1] = _message(entries[-1]["id"], entries[-1]["parentId"], {
        "role": "user", "content": [{"type": "image", "data": image, "mimeType": "image/png"}], "timestamp": 1})
    _store(tmp_path / "s.db", entries).close()
    plain = SessionManager.open(SqliteStore(tmp_path / "s.db"), SID)
    lazy = SessionManager.open(SqliteStore(tmp_path / "s.db", blob_refs=True), SID)
    assert isinstance(lazy._tree, LazySessionTree)
    ref = lazy.build_session_context().messages[-1]["content"][0]["data"]
    assert isinstance(ref, BlobRef) and ref.length == len(image)
    assert resolve_blobs(lazy.build_session_context().messages) == plain.build_session_context().messages
    assert plain.build_session_context().messages[-1]["content"][0]["data"] == image
