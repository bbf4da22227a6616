"""``diff`` from the SQLite store's summaries gives, byte for byte, the JSON of the whole
read (docs/decisions/diff-summaries.md, "Same answer or none"), for random session trees:
branches, compactions (active and retired), branch summaries, custom, label and context
edit entries, tool calls with odd names and paths, usage on some entries, odd timestamps,
sessions grown or replaced after a first diff. The memory store reads whole; an error must be the
same error."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import header
from sessiontree.diff import diff_branches
from sessiontree.stores.memory import MemoryStore
from sessiontree.stores.sqlite.store import SqliteStore

SID = "019cadb6-0000-7000-8000-00000000abcd"

_NAMES = st.sampled_from(["read", "Read", "READ", "edit", "write", "bash", "", "r\u0307ead", "écrire", "\x1b[31m",
                          "a\ud800", None, 7])
_PATHS = st.one_of(st.sampled_from(["src/x.py", "src/y.py", "", "./x", "../../etc/passwd", "a b", "\u202etxt.py",
                                    "x\ud800y", "C:\\w\\x.py"]), st.integers(), st.none())
_STAMPS = st.one_of(
    st.builds(lambda m, s: f"2026-03-02T09:{m:02d}:{s:02d}.000Z", st.integers(0, 59), st.integers(0, 59)),
    st.sampled_from(["", "yesterday", "2026-03-02T09:00:00+14:00", "2026-03-02T09:00:00-12:30",
                     "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z", "2026-12-31T23:59:60Z",
                     "1969-12-31T23:59:59.999Z", "2026-03-02 09:00:00", "2026-03-02T09:00:00.123456789Z",
                     "2026-03-02 10:00:00.000Z", "2026-13-02T09:30:00.000Z", "0001-01-01T00:00:00+14:00",
                     "9999-12-31T23:59:59.999-14:00"]))


@st.composite
def _usage(draw: st.DrawFn) -> dict[str, Any] | None:
    if draw(st.booleans()):
        return None
    u: dict[str, Any] = {name: draw(st.integers(0, 500)) for name in ("input", "output", "cacheRead", "cacheWrite")}
    cost = draw(st.one_of(st.none(), st.just(0), st.floats(0, 1, allow_nan=False), st.just("x")))
    if cost is not None:
        u["cost"] = {"total": cost}
    return u


@st.composite
def _entry(draw: st.DrawFn, entry_id: str, parent: str | None, ids: list[str]) -> dict[str, Any]:
    ts = draw(_STAMPS)
    target = draw(st.sampled_from([*ids, "nope"])) if ids else "nope"
    base: dict[str, Any] = {"id": entry_id, "parentId": parent, "timestamp": ts}
    kind = draw(st.sampled_from(["user", "assistant", "assistant", "result", "compaction", "branch_summary",
                                 "custom", "label", "context_edit", "custom_message", "session_summary", "usage",
                                 "model_change"]))
    if kind == "user":
        content = draw(st.one_of(st.text(max_size=5), st.just([{"type": "image", "data": "", "mimeType": "x"}])))
        return {"type": "message", **base, "message": {"role": "user", "content": content, "timestamp": 1}}
    if kind == "assistant":
        blocks: list[Any] = []
        for n in range(draw(st.integers(0, 3))):
            arguments: Any = draw(st.one_of(
                st.dictionaries(st.sampled_from(["path", "file_path", "filePath", "command"]), _PATHS, max_size=3),
                st.just("not an object"), st.none()))
            blocks.append({"type": "toolCall", "id": f"c{entry_id}{n}", "name": draw(_NAMES), "arguments": arguments})
        if draw(st.booleans()):
            blocks.append({"type": "text", "text": "t"})
        message = {"role": "assistant", "content": blocks, "provider": draw(st.sampled_from(["p", "q"])),
                   "model": draw(st.sampled_from(["m1", "m2", "claude-sonnet-4-5"])), "stopReason": "stop",
                   "timestamp": draw(st.integers(0, 2))}
        u = draw(_usage())
        if u is not None:
            message["usage"] = u
        return {"type": "message", **base, "message": message}
    if kind == "result":
        message = {"role": "toolResult", "toolCallId": "c", "toolName": "read", "content": [], "isError": False,
                   "timestamp": 3}
        u = draw(_usage())
        if u is not None:
            message["usage"] = u
        return {"type": "message", **base, "message": message}
    if kind == "compaction":
        out = {"type": "compaction", **base, "summary": "s", "firstKeptEntryId": draw(st.sampled_from([*ids, None])),
               "tokensBefore": 1}
        if draw(st.integers(0, 3)):
            out["details"] = {"strategy": "verbatim-lines"}
        u = draw(_usage())
        if u is not None:
            out["usage"] = u
        return out
    if kind in ("branch_summary", "session_summary", "usage"):
        out = {"type": kind, **base, "summary": "b", "fromId": target}
        u = draw(_usage())
        if u is not None:
            out["usage"] = u
        return out
    if kind == "label":
        return {"type": "label", **base, "targetId": target, "label": "l"}
    if kind == "context_edit":
        return {"type": "context_edit", **base, "targetId": target,
                "replacement": draw(st.sampled_from([None, {"content": "r"}, {"content": []}]))}
    if kind == "custom_message":
        return {"type": "custom_message", **base, "customType": "x", "content": "c", "display": True}
    if kind == "model_change":
        return {"type": "model_change", **base, "provider": "p", "modelId": "m2"}
    return {"type": "custom", **base, "customType": "x", "data": {"n": 1}}


@st.composite
def _entries(draw: st.DrawFn, start: list[str], count: int, tail: str = "") -> list[dict[str, Any]]:
    """``count`` entries after the ids ``start``, each under an earlier entry (mostly the
    previous one, so branches are long), now and then a root or a missing parent."""
    ids = list(start)
    out = []
    for _ in range(count):
        entry_id = f"e{len(ids)}{tail}"
        choice = draw(st.integers(0, 19))
        if not ids or choice == 0:
            parent = None
        elif choice == 1:
            parent = "missing"
        elif choice < 6:
            parent = draw(st.sampled_from(ids))
        else:
            parent = ids[-1]
        out.append(draw(_entry(entry_id, parent, ids)))
        ids.append(entry_id)
    if len(out) > 1 and draw(st.integers(0, 9)) == 0:  # a parent after its child in the file
        at = draw(st.integers(0, len(out) - 2))
        out[at], out[at + 1] = out[at + 1], out[at]
    return out


def _run(store: Any, a: str | None, b: str | None, context: bool, cost: str) -> str:
    try:
        return json.dumps(diff_branches(store, SID, a, b, context=context, cost=cost).to_dict())
    except Exception as exc:  # the same error, or the same answer
        return f"{type(exc).__name__}: {exc}"


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_diff_from_summaries_is_the_whole_read_s(data: st.DataObject) -> None:
    tail = data.draw(st.sampled_from(["", "\ud800", "\u00e9", " x"]))  # ids a SQLite store keeps as BLOBs too
    first = data.draw(_entries([], data.draw(st.integers(1, 25)), tail))
    memory, sqlite = MemoryStore(), SqliteStore(":memory:")
    try:
        for store in (memory, sqlite):
            store.create(header(SID), first)
        if data.draw(st.booleans()):
            sqlite.settle_derived()
        entries = list(first)
        for _ in range(data.draw(st.integers(1, 3))):
            ids = [e["id"] for e in entries]
            sides = st.one_of(st.none(), st.sampled_from(ids), st.sampled_from(["e", "e1", "nope", "", "e0:"]))
            a, b = data.draw(sides), data.draw(sides)
            context, cost = data.draw(st.booleans()), data.draw(st.sampled_from(["auto", "recorded", "catalog"]))
            assert _run(sqlite, a, b, context, cost) == _run(memory, a, b, context, cost)
            if data.draw(st.integers(0, 4)) == 0:  # replaced whole (sync --replace): a new tree
                entries = data.draw(_entries([], data.draw(st.integers(1, 25)), tail))
                for store in (memory, sqlite):
                    store.replace_session(header(SID), entries)
            else:
                more = data.draw(_entries(ids, data.draw(st.integers(1, 6)), tail))
                for store in (memory, sqlite):
                    store.append(SID, more)
                entries += more
            if data.draw(st.booleans()):
                sqlite.settle_derived()
    finally:
        sqlite.close()
