"""Other agents' "version 4" (and 5) files are named, not misread (docs/agents/README.md,
"Named, not read"; sessiontree.format.others).

No real file of these agents was found with a licence; the fixtures are built from the
agents' own shapes and say where each comes from:

* DeepSeek Harness (dsh): the header its session writer puts first (``createdAt`` in Unix
  ms, ``delegationDepth``, ``isSeeded``) and its ``{type, seq, time, data}`` events, as
  dsh's v3->v4 migration tests write them (quoted by public projects reading dsh homes);
* gajae-code (github.com/Yeachan-Heo/gajae-code, packages/coding-agent/src/session/
  session-manager.ts: ``CURRENT_SESSION_VERSION = 5``, "Version 4 patch records remain
  readable"): a pi-lineage header with ``version`` 4 or 5 and ``timestamp``, and its
  ``entry_patch`` / ``header_patch`` records (no ``id``) as its own tests write them;
* Gemini CLI's newer JSONL chats (@google/gemini-cli-core 0.61.0,
  services/chatRecordingService.js: a metadata line, then one message a line).

Before this change a dsh file was refused for a non-string ``createdAt``, a gajae-code
format-4 file was taken for pi's early format 4 until its patch record failed as an
entry without an ``id``, format 5 was an "unsupported version", and a Gemini JSONL chat
was mapped as Claude Code (its metadata line has a ``sessionId``)."""

from __future__ import annotations

import orjson
import pytest

from sessiontree.errors import InvalidSessionError
from sessiontree.format.codec import parse_session
from sessiontree.format.foreign import map_foreign
from sessiontree.stores import MemoryStore
from sessiontree.sync.engine import Syncer


def _jl(*records) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


DSH = _jl({"type": "session", "version": 4, "id": "session-3b7f0c2e-9d41-4c6a-8e55-0f1a2b3c4d5e",
           "createdAt": 1790304098005, "cwd": "/work/app", "isSeeded": False, "delegationDepth": 0},
          {"type": "turn/start", "seq": 0, "time": 1790304098100, "data": {"turn": 1}},
          {"type": "user/message", "seq": 1, "time": 1790304098101,
           "data": {"id": "u1", "role": "user", "content": [{"type": "text", "text": "hi"}]}})
GAJAE_HEADER = {"type": "session", "version": 4, "id": "patched", "timestamp": "2026-01-01T00:00:00.000Z",
                "cwd": "/cwd"}
GAJAE_V4 = _jl(GAJAE_HEADER,
               {"type": "message", "id": "m0", "parentId": None, "timestamp": "2026-01-01T00:00:01.000Z",
                "message": {"role": "user", "content": "original", "timestamp": 1}},
               {"type": "entry_patch", "entryId": "m0",
                "patch": {"message": {"role": "user", "content": "updated", "timestamp": 1}}})
GAJAE_V5 = _jl({**GAJAE_HEADER, "version": 5},
               {"type": "message", "id": "m0", "parentId": None, "timestamp": "2026-01-01T00:00:01.000Z",
                "message": {"role": "user", "content": "original", "timestamp": 1}})
GEMINI_JSONL = _jl({"sessionId": "0b7c1f7e-3f0a-4a6e-9d7e-5c2b1a0f9e8d", "projectHash": "ab" * 32,
                    "startTime": "2026-07-01T10:00:00.000Z", "lastUpdated": "2026-07-01T10:00:00.000Z",
                    "kind": "main"},
                   {"id": "m1", "timestamp": "2026-07-01T10:00:01.000Z", "type": "user", "content": "hi"})


@pytest.mark.parametrize(("data", "names", "line"), [
    (DSH, "DeepSeek Harness (dsh) session file", 1),
    (GAJAE_V4, "gajae-code session file (its format 4: entry_patch records)", 3),
    (GAJAE_V5, "gajae-code session file (its format 5)", 1),
    (GEMINI_JSONL, "Gemini CLI chat in its newer JSONL layout", 1),
], ids=["dsh", "gajae-v4", "gajae-v5", "gemini-jsonl"])
def test_another_agents_file_is_refused_with_its_name(tmp_path, data, names, line):
    with pytest.raises(InvalidSessionError) as caught:
        parse_session(data, "f.jsonl")
    assert names in caught.value.reason and "not a pi/Atomic session" in caught.value.reason
    assert caught.value.line == line
    assert map_foreign(data) is None  # not taken for Claude Code, Codex or Gemini's JSON chats
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    result = Syncer(MemoryStore()).sync_file(str(path))
    assert result.status == "rejected" and names in result.reason


def test_a_gajae_code_file_is_never_upgraded_as_pis_early_format_4():
    # Without its patch record the same header and message are pi's early format 4 (the
    # records are identical); with it, nothing is upgraded: the refusal comes first.
    assert parse_session(GAJAE_V4.rsplit(b"\n", 2)[0] + b"\n").upgraded
    with pytest.raises(InvalidSessionError, match="gajae-code"):
        parse_session(GAJAE_V4)
