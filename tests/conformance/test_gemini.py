"""Gemini CLI chats synced into every store (docs/agents/gemini.md): the three real chats of
``../shared/corpus/gemini`` with the figures of ``corpus/FOREIGN.md`` ("Gemini CLI" table,
counted by hand there), the document given back byte for byte, and a rewritten chat
handled as Gemini CLI rewrites it: longer is ``grown``, shorter or changed is reported.

The earlier versions of a chat used for the rewrite cases are made from the real files
(their first messages, the last one without the fields Gemini CLI adds in place), since
no real earlier version was published; the comparison is by message content."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from corpus import foreign_files
from sessiontree.core.usage import records_from_entries
from sessiontree.format.foreign import map_foreign, source_bytes
from sessiontree.sync.engine import Syncer

#: FOREIGN.md, "Gemini CLI": file stem -> (user, gemini, info messages, calls, input incl.
#: cached, cached, output, thoughts). Tool calls: counted by hand in each file (every one
#: has its result): faff42ab 2, f7633853 9, f0a689a6 5.
EXPECTED = {
    "session-2026-01-10T02-08-faff42ab": (2, 4, 0, 4, 48_965, 35_330, 70, 232, 2),
    "session-2026-01-15T20-51-f7633853": (1, 11, 1, 11, 131_375, 113_854, 717, 1_095, 9),
    "session-2025-12-09T19-51-f0a689a6": (2, 7, 0, 7, 67_273, 43_377, 300, 377, 5),
}
FILES = foreign_files("gemini")


def _copy(home: Path, source: Path) -> Path:
    rel = source.relative_to(source.parents[2])  # <project hash>/chats/<name>
    target = home / ".gemini" / "tmp" / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(source.read_bytes())
    return target


def _js(value) -> bytes:
    """A document as Gemini CLI writes it (``JSON.stringify(value, null, 2)``)."""
    return json.dumps(value, indent=2, ensure_ascii=False).encode()


def test_the_corpus_holds_the_three_real_chats():
    assert sorted(p.stem for p in FILES) == sorted(EXPECTED)


@pytest.mark.parametrize("source", FILES, ids=lambda p: p.stem[-8:])
@pytest.mark.usefixtures("_fake_home")
def test_every_real_chat_syncs_with_its_hand_counted_figures(store, _fake_home, source):
    path = _copy(_fake_home, source)
    result = Syncer(store).sync_file(str(path))
    assert result.status == "new", result.reason
    users, geminis, infos, calls, total_in, cached, output, thoughts, tools = EXPECTED[source.stem]
    parsed = store.read(result.session_id)
    assert parsed.header["foreign"] == {"agent": "gemini"}
    messages = [e["message"] for e in parsed.entries if e["type"] == "message"]
    assert sum(m["role"] == "user" for m in messages) == users
    assert sum(m["role"] == "assistant" for m in messages) == geminis
    assert sum(e.get("data", {}).get("recordType") == "info" for e in parsed.entries) == infos
    records = list(records_from_entries(parsed.entries))
    # Cached input is a cache read; thoughts are billed as output (docs/usage.md).
    assert (len(records), sum(r.input for r in records), sum(r.cache_read for r in records),
            sum(r.output for r in records), sum(r.cache_write for r in records)) == \
        (calls, total_in - cached, cached, output + thoughts, 0)
    call_ids = [b["id"] for m in messages if m["role"] == "assistant" for b in m["content"]
                if b["type"] == "toolCall"]
    result_ids = [m["toolCallId"] for m in messages if m["role"] == "toolResult"]
    assert len(call_ids) == tools and sorted(result_ids) == sorted(call_ids)
    assert {r.model for r in records} == {"gemini-2.5-flash"}
    assert source_bytes(parsed.entries) == source.read_bytes()
    assert Syncer(store).sync_file(str(path)).status == "unchanged"


def _earlier(doc: dict, count: int) -> dict:
    """The chat as it stood with its first ``count`` messages, the last one not yet
    completed (no tool results, no tokens), and an older ``lastUpdated``."""
    messages = json.loads(json.dumps(doc["messages"][:count]))
    last = messages[-1]
    last.pop("tokens", None)
    for call in last.get("toolCalls", []):
        call.pop("result", None)
        call["status"] = "executing"
    return {**doc, "lastUpdated": last["timestamp"], "messages": messages}


@pytest.mark.usefixtures("_fake_home")
def test_a_chat_rewritten_longer_is_grown_and_the_file_comes_back(store, _fake_home):
    source = next(p for p in FILES if p.stem.endswith("f7633853"))
    path = _copy(_fake_home, source)
    doc = orjson.loads(source.read_bytes())
    path.write_bytes(_js(_earlier(doc, 3)))
    assert Syncer(store).sync_file(str(path)).status == "new"
    path.write_bytes(source.read_bytes())  # the rewrite: message 3 completed, ten more
    result = Syncer(store).sync_file(str(path))
    assert result.status == "grown", result.reason
    parsed = store.read(result.session_id)
    assert source_bytes(parsed.entries) == source.read_bytes()
    records = list(records_from_entries(parsed.entries))
    assert (len(records), sum(r.input for r in records)) == (11, 131_375 - 113_854)
    # Only the frame rewritten (lastUpdated): still the same session, bytes kept exact.
    newer = source.read_bytes().replace(doc["lastUpdated"].encode(), b"2026-01-15T21:00:00.000Z", 1)
    path.write_bytes(newer)
    result = Syncer(store).sync_file(str(path))
    assert (result.status, result.added) == ("grown", 0)
    assert source_bytes(store.read(result.session_id).entries) == newer


@pytest.mark.usefixtures("_fake_home")
def test_a_shorter_or_different_rewrite_is_reported_and_the_store_kept(store, _fake_home):
    source = next(p for p in FILES if p.stem.endswith("f0a689a6"))
    path = _copy(_fake_home, source)
    doc = orjson.loads(source.read_bytes())
    Syncer(store).sync_file(str(path))
    path.write_bytes(_js({**doc, "messages": doc["messages"][:4]}))
    result = Syncer(store).sync_file(str(path))
    assert result.status == "diverged" and "shorter" in result.reason and "4 messages where 9" in result.reason
    changed = json.loads(json.dumps(doc))
    changed["messages"][0]["content"] = "something else"
    path.write_bytes(_js(changed))
    result = Syncer(store).sync_file(str(path))
    assert result.status == "diverged" and "different" in result.reason
    assert doc["messages"][0]["id"] in result.reason
    assert source_bytes(store.read(result.session_id).entries) == source.read_bytes()
    replaced = Syncer(store, replace=True).sync_file(str(path))
    assert replaced.status == "replaced"
    assert source_bytes(store.read(result.session_id).entries) == _js(changed)


def test_a_chat_caught_half_way_through_a_rewrite_waits(tmp_path):
    from sessiontree.stores import MemoryStore

    source = FILES[0]
    path = tmp_path / source.name
    path.write_bytes(source.read_bytes()[:3000])
    result = Syncer(MemoryStore()).sync_file(str(path))
    assert result.status == "in-progress"


def test_the_mapping_is_recognised_from_the_bytes_and_kept_whole():
    for source in FILES:
        data = source.read_bytes()
        mapped = map_foreign(data, str(source))
        assert mapped is not None and mapped.agent == "gemini"
        assert source_bytes(mapped.entries) == data
        # Thoughts are thinking blocks before the text, as Gemini CLI shows them.
        first = next(e for e in mapped.entries if e["type"] == "message" and e["message"]["role"] == "assistant")
        kinds = [b["type"] for b in first["message"]["content"]]
        assert kinds[0] == "thinking"


def test_sync_walks_only_gemini_clis_chat_files(tmp_path):
    from sessiontree.sync.engine import discover

    chats = tmp_path / "tmp" / "abc" / "chats"
    chats.mkdir(parents=True)
    (chats / "session-2026-01-10T02-08-faff42ab.json").write_bytes(FILES[0].read_bytes())
    (tmp_path / "tmp" / "abc" / "session-other.json").write_text("{}")  # not in a chats folder
    (chats / "logs.json").write_text("[]")
    files, rejected = discover([str(tmp_path)])
    assert [p.rsplit("/", 1)[-1] for p in files] == ["session-2026-01-10T02-08-faff42ab.json"] and not rejected
