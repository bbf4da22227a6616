"""oh-my-pi (omp) files (docs/agents/README.md, "oh-my-pi"): the title slot before the
header is read as the session's name, never a rejection; the rest as pi-lineage format 3.

Synthetic fixtures: no real omp session file was found with a licence (FOREIGN.md,
"Looked for and not found"). They are built from omp's own code, @oh-my-pi/pi-coding-agent
18.3.4 (MIT): ``src/session/session-title-slot.ts`` (the slot: ``JSON.stringify({type:
"title", v: 1, title, source?, updatedAt, pad})`` padded with spaces to exactly 256 UTF-8
bytes with its newline, overwritten in place on a title change) and
``src/session/session-entries.ts`` (``CURRENT_SESSION_VERSION = 3``; header ``type``,
``version``, ``id``, ``timestamp``, ``cwd``; pi's entries)."""

from __future__ import annotations

import json

import pytest

from cli_support import run_cli, run_cli_json
from sessiontree.format.foreign import map_foreign, source_bytes
from sessiontree.sync.engine import Syncer

SID = "019a2b3c-4d5e-7f60-8a9b-0c1d2e3f4a5b"


def slot(title: str, updated: str = "2026-05-01T10:00:05.000Z", source: str | None = "auto") -> bytes:
    """omp's serializeTitleSlot: the JSON line padded to 256 bytes (newline included)."""
    fields = {"type": "title", "v": 1, "title": title, **({"source": source} if source else {}),
              "updatedAt": updated}
    bare = json.dumps({**fields, "pad": ""}, ensure_ascii=False, separators=(",", ":")) + "\n"
    pad = 256 - len(bare.encode())
    line = (json.dumps({**fields, "pad": " " * pad}, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    assert len(line) == 256
    return line


def records(n: int) -> bytes:
    header = {"type": "session", "version": 3, "id": SID, "timestamp": "2026-05-01T10:00:00.000Z",
              "cwd": "/home/me/proj"}
    lines = [header]
    parent = None
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        message = {"role": role, "content": [{"type": "text", "text": f"turn {i}"}], "timestamp": 1_777_000_000_000 + i}
        if role == "assistant":
            message.update(api="anthropic-messages", provider="anthropic", model="claude-sonnet-4-5",
                           usage={"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15},
                           stopReason="stop")
        lines.append({"type": "message", "id": f"e{i}", "parentId": parent,
                      "timestamp": f"2026-05-01T10:00:0{i}.000Z", "message": message})
        parent = f"e{i}"
    return b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in lines)


def test_the_title_slot_is_the_sessions_name_and_the_rest_is_pi_format_3():
    data = slot("Fix the parser") + records(4)
    mapped = map_foreign(data, "/h/.omp/agent/sessions/--home-me-proj--/x.jsonl")
    assert mapped is not None and mapped.agent == "omp"
    assert mapped.header["version"] == 4 and mapped.header["foreign"] == {"agent": "omp"}
    assert mapped.entries[0]["type"] == "session_info" and mapped.entries[0]["name"] == "Fix the parser"
    assert [e["parentId"] for e in mapped.entries] == [None, "title-slot", "e0", "e1", "e2"]
    assert source_bytes(mapped.entries) == data


@pytest.mark.usefixtures("_fake_home")
def test_omp_sessions_sync_grow_and_take_a_rewritten_title(store, tmp_path, _fake_home):
    folder = _fake_home / ".omp" / "agent" / "sessions" / "--home-me-proj--"
    folder.mkdir(parents=True)
    path = folder / f"2026-05-01T10-00-00-000Z_{SID}.jsonl"
    path.write_bytes(slot("") + records(2))  # omp writes the slot before it has a title
    assert Syncer(store).sync_file(str(path)).status == "new"
    path.write_bytes(slot("") + records(4))
    result = Syncer(store).sync_file(str(path))
    assert (result.status, result.added) == ("grown", 2)
    titled = slot("Fix the parser", "2026-05-01T10:00:09.000Z") + records(4)
    path.write_bytes(titled)  # the title written over the slot, in place
    result = Syncer(store).sync_file(str(path))
    assert (result.status, result.added) == ("grown", 0)
    stored = store.read(SID)
    assert stored.entries[0]["name"] == "Fix the parser"
    assert source_bytes(stored.entries) == titled
    assert Syncer(store).sync_file(str(path)).status == "unchanged"
    changed = titled.replace(b"turn 1", b"turn X")
    path.write_bytes(changed)
    assert Syncer(store).sync_file(str(path)).status == "diverged"


def test_omp_in_sources_list_and_stats(tmp_path, _fake_home):
    folder = _fake_home / ".omp" / "agent" / "sessions" / "--home-me-proj--"
    folder.mkdir(parents=True)
    (folder / f"2026-05-01T10-00-00-000Z_{SID}.jsonl").write_bytes(slot("Fix the parser") + records(4))
    assert any(row["agent"] == "omp" and row["exists"] for row in run_cli_json(None, "sources"))
    db = f"sqlite:///{tmp_path / 'o.db'}"
    assert run_cli_json(db, "sync")["new"] == 1
    [row] = run_cli_json(db, "list")
    assert (row["agent"], row["name"]) == ("omp", "Fix the parser")
    [group] = run_cli_json(db, "stats", "--by", "agent")["groups"]
    assert (group["key"], group["calls"], group["inputTokens"], group["outputTokens"]) == ("omp", 2, 20, 10)
    out = tmp_path / "back.jsonl"
    run_cli(db, "export", SID, "--format", "source", "-o", str(out))
    assert out.read_bytes() == slot("Fix the parser") + records(4)


def test_resume_of_an_omp_session_speaks_omp_and_writes_nothing(tmp_path, _fake_home):
    """oh-my-pi's own command (its resumeCommand: `omp --resume ID`, read in omp 18.3.4's
    cli.js), in the session's cwd; nothing restored into pi's folder or anywhere else. On the
    code before, resume wrote a pi file under ~/.pi and printed a `pi --session` command."""
    folder = _fake_home / ".omp" / "agent" / "sessions" / "--home-me-proj--"
    folder.mkdir(parents=True)
    (folder / f"2026-05-01T10-00-00-000Z_{SID}.jsonl").write_bytes(slot("Fix the parser") + records(4))
    db = f"sqlite:///{tmp_path / 'o.db'}"
    assert run_cli_json(db, "sync")["new"] == 1
    before = sorted(p for p in _fake_home.rglob("*") if p.is_file())
    answer = run_cli_json(db, "resume", SID[:8])
    assert (answer["agent"], answer["command"], answer["cwd"]) == ("omp", ["omp", "--resume", SID], "/home/me/proj")
    assert run_cli(db, "resume", SID[:8]).stdout.strip() == f"cd /home/me/proj && omp --resume {SID}"
    assert sorted(p for p in _fake_home.rglob("*") if p.is_file()) == before


def test_restore_and_resume_of_an_omp_session_whose_file_is_gone_name_as_pi(tmp_path, _fake_home):
    """Issue 44 item 2: oh-my-pi's own file is not written back, so ``restore`` without ``--as``
    refuses (it used to write a pi file), and ``resume`` of a session whose file is gone says so;
    both name ``--as pi``, which still works."""
    folder = _fake_home / ".omp" / "agent" / "sessions" / "--home-me-proj--"
    folder.mkdir(parents=True)
    path = folder / f"2026-05-01T10-00-00-000Z_{SID}.jsonl"
    path.write_bytes(slot("Fix the parser") + records(4))
    db = f"sqlite:///{tmp_path / 'o.db'}"
    assert run_cli_json(db, "sync")["new"] == 1
    refused = run_cli(db, "restore", SID[:8], code=1)
    assert "--as pi" in refused.stderr
    assert not (_fake_home / ".pi").exists()
    path.unlink()
    gone = run_cli(db, "resume", SID[:8], code=1)
    assert "not in place" in gone.stderr and "--as pi" in gone.stderr and str(path) in gone.stderr
    as_pi = run_cli_json(db, "resume", SID[:8], "--as", "pi")
    assert as_pi["agent"] == "pi" and as_pi["command"][:2] == ["pi", "--session"]
