"""A real pi user's history gets in whole (docs/sync.md): glued records read apart by
``sync`` and ``import`` with a one-line note, the stats then matching a hand count of the
raw records; on copies of the real corpus files and variants built from them."""

from __future__ import annotations

import shutil
from decimal import Decimal
from pathlib import Path

import pytest

import corpus
from cli_support import run_cli, run_cli_json
from pi_variants import first_billed, glue, hand_count, shifted_copy, upgraded_in_place, write
from sessiontree.check.checker import check_bytes
from sessiontree.format import jsonio

pytestmark = pytest.mark.usefixtures("_fake_home")

GLUED_SID = "11111111-1111-4111-8111-111111111111"
GLUED_SID2 = "22222222-2222-4222-8222-222222222222"


def _pi_folder(home: Path) -> Path:
    folder = home / ".pi" / "agent" / "sessions" / "--Users-me-pi-mono--"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _glued_variant(source: Path, folder: Path, session_id: str) -> tuple[Path, int]:
    lines = shifted_copy(source, session_id)
    index = first_billed(lines)
    return write(folder / f"glued-{source.name}", glue(lines, index)), index  # glued onto line `index`


def test_a_glued_pi_file_is_synced_with_a_note_and_stats_match_the_hand_count(_fake_home, tmp_path):
    folder = _pi_folder(_fake_home)
    real = shutil.copy(corpus.vendored(corpus.LARGE_SESSION), folder / "large.jsonl")
    glued, line = _glued_variant(corpus.vendored(corpus.LARGE_SESSION), folder, GLUED_SID)
    store = f"sqlite:///{tmp_path / 'pi.db'}"
    # Before: the glued file was rejected whole (exit 1) and its calls were missing from stats.
    report = run_cli_json(store, "sync")
    rows = {Path(row["path"]).name: row for row in report["files"]}
    assert rows[glued.name]["status"] == "new" and rows[glued.name]["sessionId"] == GLUED_SID
    assert rows[glued.name]["added"] == 1018  # the real file's 1,018 entries, the glued line's two included
    assert f"line {line}" in rows[glued.name]["note"] and "2 glued records" in rows[glued.name]["note"]
    assert rows[Path(real).name]["note"] is None
    totals = run_cli_json(store, "stats")["totals"]
    cost, calls = hand_count(Path(real), glued)
    # By hand: the real file bills 453 calls for $30.3301977 (a ledger of its assistant
    # messages); the variant is the same calls a year earlier: twice both.
    assert (cost, calls) == (Decimal("60.6603954"), 906)
    assert totals["calls"] == calls and Decimal(totals["cost"]) == cost


def test_sync_output_names_the_glued_lines_in_one_line(_fake_home, tmp_path):
    folder = _pi_folder(_fake_home)
    glued, line = _glued_variant(corpus.vendored(corpus.LARGE_SESSION), folder, GLUED_SID)
    out = run_cli(f"sqlite:///{tmp_path / 'pi.db'}", "sync", str(glued)).stdout
    assert "read 2 glued records apart" in " ".join(out.split()) and f"line {line}:" in out
    assert "1 new" in out and "0 rejected" in out


def test_import_reads_glued_records_apart_and_says_so(_fake_home, tmp_path):
    glued, line = _glued_variant(corpus.vendored(corpus.LARGE_SESSION), tmp_path / "in", GLUED_SID)
    data = run_cli_json(f"sqlite:///{tmp_path / 'pi.db'}", "import", str(glued))
    row = data["files"][0]
    assert row["status"] == "imported" and row["entries"] == 1018
    assert f"line {line}" in row["note"]
    assert glued.read_bytes().count(b"\n") == 1018  # the file is left as it is: one line fewer than records


@pytest.mark.parametrize("tail", [b'{"type":"mess', b'[1,2]'], ids=["torn", "array"])
def test_a_line_that_is_not_exactly_glued_records_is_skipped_as_pi_skips_it(_fake_home, tmp_path, tail):
    """Issue 39: pi's loader skips a line ``JSON.parse`` refuses; so do sync and import now,
    naming the line, instead of refusing the whole file (the record on it is not read, as
    in pi). Before, the file was rejected at line 5."""
    lines = shifted_copy(corpus.vendored(corpus.LARGE_SESSION), GLUED_SID)[:10]
    lines[4] += tail
    path = write(_pi_folder(_fake_home) / "odd.jsonl", lines)
    report = run_cli_json(f"sqlite:///{tmp_path / 'pi.db'}", "sync", str(path))
    row = report["files"][0]
    assert (row["status"], row["entries"] if "entries" in row else row.get("added")) == ("new", 8)
    assert "skipped 1 malformed line" in row["note"] and "line 5" in row["note"]
    imported = run_cli_json(f"sqlite:///{tmp_path / 'other.db'}", "import", str(path))["files"][0]
    assert imported["status"] == "imported" and imported["entries"] == 8 and "line 5" in imported["note"]


def test_an_object_glued_to_a_record_that_is_no_entry_is_refused_as_check_says(_fake_home, tmp_path):
    """Read apart, ``{"a":1}`` is an entry without type or id: refused at its line, which is
    what ``check`` reports (invalid-entry, an error import refuses)."""
    lines = shifted_copy(corpus.vendored(corpus.LARGE_SESSION), GLUED_SID)[:10]
    lines[4] += b'{"a":1}'
    path = write(_pi_folder(_fake_home) / "odd.jsonl", lines)
    report = run_cli_json(f"sqlite:///{tmp_path / 'pi.db'}", "sync", str(path), code=1)
    assert report["files"][0]["status"] == "rejected" and report["files"][0]["line"] == 5
    codes = {p.code for p in check_bytes(path.read_bytes(), str(path)) if p.severity == "error"}
    assert "invalid-entry" in codes


def test_a_header_glued_to_an_entry_is_read_apart_as_check_reads_it(_fake_home, tmp_path):
    """Issue 39: ``check`` reads a header with an entry glued after it as two records (a
    ``glued-records`` error that import accepts), so ``sync`` does too; before, sync refused
    the file at line 1 while check found nothing refusing it (fuzz seed 1, input #63)."""
    lines = shifted_copy(corpus.vendored(corpus.LARGE_SESSION), GLUED_SID)[:10]
    path = write(_pi_folder(_fake_home) / "odd.jsonl", glue(lines, 1))
    report = run_cli_json(f"sqlite:///{tmp_path / 'pi.db'}", "sync", str(path))
    row = report["files"][0]
    assert row["status"] == "new" and "line 1" in row["note"]
    problems = check_bytes(path.read_bytes(), str(path))
    assert [(p.code, p.line) for p in problems if p.severity == "error"] == [("glued-records", 1)]


@corpus.needs_shared
def test_the_whole_corpus_with_two_glued_copies_bills_the_hand_count(_fake_home, tmp_path):
    """The issue's home: the two real files and two glued variants. Before: $72.93 (the
    glued files rejected); now every call, as counted by hand."""
    folder = _pi_folder(_fake_home)
    paths = [Path(shutil.copy(path, folder / path.name)) for path in corpus.shared_files()]
    for path, sid in zip(corpus.shared_files(), (GLUED_SID, GLUED_SID2), strict=True):
        paths.append(_glued_variant(path, folder, sid)[0])
    store = f"sqlite:///{tmp_path / 'pi.db'}"
    report = run_cli_json(store, "sync")
    assert report["new"] == 4 and report["rejected"] == 0
    cost, calls = hand_count(*paths)
    # By hand: the real files bill $42.5959075 (484 calls) and $30.3301977 (453 calls),
    # $72.9261052 together; the variants bill the same again, a year earlier.
    assert (cost, calls) == (Decimal("145.8522104"), 1874)
    totals = run_cli_json(store, "stats")["totals"]
    assert totals["calls"] == calls and Decimal(totals["cost"]) == cost


# -- check --repair never writes into an agent's folder (docs/check.md) ----------------------------


def test_check_repair_of_a_file_in_pi_s_folder_writes_beside_the_store(_fake_home, tmp_path):
    folder = _pi_folder(_fake_home)
    glued, _line = _glued_variant(corpus.vendored(corpus.LARGE_SESSION), folder, GLUED_SID)
    before = sorted(p.name for p in folder.iterdir())
    store = tmp_path / "data" / "sessions.db"
    out = run_cli(f"sqlite:///{store}", "check", "--repair", str(glued), code=0).stdout
    assert sorted(p.name for p in folder.iterdir()) == before  # nothing new in the agent's folder
    copy = tmp_path / "data" / "sessions.db.repaired" / "pi" / folder.name / "glued-pi-mono-large-session.repaired.jsonl"
    assert copy.is_file() and f"repaired copy written to {copy}" in out
    assert copy.read_bytes().count(b"\n") == 1019  # the glued line split: as many lines as records
    # The next sync reads the agent's folder only: one session, not two.
    report = run_cli_json(f"sqlite:///{store}", "sync")
    assert report["new"] == 1


def test_check_repair_refuses_o_inside_an_agent_folder_and_a_store_without_a_folder(_fake_home, tmp_path):
    folder = _pi_folder(_fake_home)
    glued, _line = _glued_variant(corpus.vendored(corpus.LARGE_SESSION), folder, GLUED_SID)
    run_cli(None, "check", "--repair", str(glued), "-o", str(folder / "fixed.jsonl"), code=1, one_error_line=True)
    run_cli("memory:", "check", "--repair", str(glued), code=1)
    assert sorted(p.name for p in folder.iterdir()) == [glued.name]
    target = tmp_path / "fixed.jsonl"
    run_cli(None, "check", "--repair", str(glued), "-o", str(target))
    assert target.is_file()


def test_check_repair_outside_agent_folders_still_writes_beside_the_file(_fake_home, tmp_path):
    glued, _line = _glued_variant(corpus.vendored(corpus.LARGE_SESSION), tmp_path / "elsewhere", GLUED_SID)
    run_cli(None, "check", "--repair", str(glued))
    assert (glued.parent / "glued-pi-mono-large-session.repaired.jsonl").is_file()


# -- search --since takes the forms stats --since takes ---------------------------------------------


def test_parse_when_takes_the_stats_forms():
    from datetime import UTC, datetime

    from sessiontree.search.query import parse_when

    now = datetime(2026, 3, 10, 15, 30, tzinfo=UTC)
    assert parse_when("7d", now=now).isoformat() == "2026-03-04T00:00:00+00:00"  # the 4th..10th: 7 days
    assert parse_when("1d", now=now).isoformat() == "2026-03-10T00:00:00+00:00"
    assert parse_when("2w", now=now).isoformat() == "2026-02-25T00:00:00+00:00"  # 14 days: Feb 25..Mar 10
    assert parse_when("20260131").isoformat() == "2026-01-31T00:00:00+00:00"
    assert parse_when("20260131", end=True).isoformat() == "2026-02-01T00:00:00+00:00"
    for bad in ("0d", "20261340"):
        with pytest.raises(ValueError):
            parse_when(bad, now=now)
    with pytest.raises(ValueError):
        parse_when("7d", end=True)


def test_search_since_7d_is_accepted_like_stats(_fake_home, tmp_path):
    store = f"sqlite:///{tmp_path / 'pi.db'}"
    run_cli(store, "import", str(corpus.vendored(corpus.LARGE_SESSION)))
    run_cli(store, "stats", "--since", "7d")
    # The corpus is from 2025: nothing in the last 7 days, but the option is taken.
    assert run_cli_json(store, "search", "mode", "--since", "7d")["hits"] == []
    assert run_cli_json(store, "search", "/mode", "--since", "20251120")["hits"]


# -- sync output tells pi's and Atomic's copies apart ---------------------------------------------


def test_sync_output_tells_pi_and_atomic_copies_apart(_fake_home, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    project = "--Users-someone-with-a-long-name-workspaces-pi-mono-packages-coding-agent--"
    name = "2025-11-20T23-33-50-805Z_d703a1a9-1b7b-4fb1-b512-c9738b1fe617.jsonl"
    pi = _fake_home / ".pi" / "agent" / "sessions" / project
    pi.mkdir(parents=True)
    shutil.copy(corpus.vendored(corpus.LARGE_SESSION), pi / name)
    # Atomic's file of the same name (another session: the same work continued there).
    write(_fake_home / ".atomic" / "agent" / "sessions" / project / name,
          shifted_copy(corpus.vendored(corpus.LARGE_SESSION), GLUED_SID))
    out = run_cli(f"sqlite:///{tmp_path / 'pi.db'}", "sync").stdout
    rows = [line.split() for line in out.splitlines() if line.startswith("new")]
    # Before, both rows read "…/<project>/<name>" or "…<name>": the same text twice.
    assert len(rows) == 2 and rows[0][2:4] != rows[1][2:4]
    assert sorted(row[2] for row in rows) == ["atomic:", "pi:"]


# -- a deleted synced session does not come back without a word -------------------------------------


def test_a_session_deleted_from_the_store_is_re_imported_with_a_note(_fake_home, tmp_path):
    folder = _pi_folder(_fake_home)
    shutil.copy(corpus.vendored(corpus.LARGE_SESSION), folder / "large.jsonl")
    store = f"sqlite:///{tmp_path / 'pi.db'}"
    assert run_cli_json(store, "sync")["files"][0]["note"] is None
    run_cli(store, "delete", "d703a1a9-1b7b-4fb1-b512-c9738b1fe617", "--yes")
    again = run_cli_json(store, "sync")["files"][0]
    assert again["status"] == "new" and "deleted from the store" in again["note"]
    out = run_cli(store, "sync").stdout
    assert "deleted from the store" not in out  # said once: now it is stored and unchanged


# -- pi upgrading an old file in place is not "diverged" -------------------------------------------


@pytest.mark.parametrize("new_header", [False, True], ids=["header-kept", "header-rewritten"])
def test_pi_upgrading_an_old_file_in_place_is_taken_with_entries_set_here_kept(_fake_home, tmp_path, new_header):
    from sessiontree.stores import open_store

    folder = _pi_folder(_fake_home)
    path = Path(shutil.copy(corpus.vendored(corpus.LARGE_SESSION), folder / "large.jsonl"))
    url = f"sqlite:///{tmp_path / 'pi.db'}"
    sid = "d703a1a9-1b7b-4fb1-b512-c9738b1fe617"
    assert run_cli_json(url, "sync")["new"] == 1
    store = open_store(url)
    try:
        old = store.read(sid)
        last = old.entries[-1]["id"]
        label = {"type": "label", "id": "feedbeef", "parentId": last, "timestamp": "2026-01-01T00:00:00.000Z",
                 "targetId": old.entries[3]["id"], "label": "kept"}
        store.append(sid, [label])
    finally:
        store.close()
    mapping = upgraded_in_place(path, new_header=new_header)
    # Before: "diverged: ... (only 0 of them match)" (header kept) or "the header differs",
    # exit 1, until `sync --replace`.
    row = run_cli_json(url, "sync")["files"][0]
    assert row["status"] == "replaced", row
    assert "rewrote the file" in row["reason"] and row["superseded"] == 1018 and row["kept"] == 1
    store = open_store(url, readonly=True)
    try:
        now = store.read(sid)
    finally:
        store.close()
    assert [e["id"] for e in now.entries[:-1]] == [mapping[e["id"]] for e in old.entries]
    assert now.entries[-1]["targetId"] == mapping[old.entries[3]["id"]]
    assert now.entries[-1]["parentId"] == mapping[last]
    assert run_cli_json(url, "sync")["unchanged"] == 1
    # Billing is the same calls: ids are not part of a call.
    assert Decimal(run_cli_json(url, "stats")["totals"]["cost"]) == hand_count(path)[0]


def test_a_rewrite_that_changes_content_is_still_diverged(_fake_home, tmp_path):
    folder = _pi_folder(_fake_home)
    path = Path(shutil.copy(corpus.vendored(corpus.LARGE_SESSION), folder / "large.jsonl"))
    url = f"sqlite:///{tmp_path / 'pi.db'}"
    run_cli_json(url, "sync")
    upgraded_in_place(path)
    lines = path.read_bytes().split(b"\n")
    lines[3] = lines[3].replace(b'"timestamp":"2025-', b'"timestamp":"2023-', 1)  # one entry edited
    path.write_bytes(b"\n".join(lines))
    row = run_cli_json(url, "sync", code=1)["files"][0]
    assert row["status"] == "diverged"


# -- pi's own compactions: context shows what pi sent ------------------------------------------------


def _v1_with_compaction(path: Path, session_id: str, version: int | None = None) -> Path:
    """A small file as pi wrote it in format 1 (no ids): two turns, pi's summary compaction
    keeping the second turn (firstKeptEntryIndex 3: header = 0), then one more turn. With
    ``version`` 4: the same conversation written in format 4 (ids, the same compaction)."""
    def msg(n: int, role: str, text: str) -> dict:
        return {"type": "message", "timestamp": f"2025-11-20T10:00:0{n}.000Z",
                "message": {"role": role, "content": [{"type": "text", "text": text}], "timestamp": n}}
    records: list[dict] = [{"type": "session", "id": session_id, "timestamp": "2025-11-20T10:00:00.000Z",
                            "cwd": "/Users/me/p"},
                           msg(1, "user", "first question"), msg(2, "assistant", "first answer"),
                           msg(3, "user", "second question"), msg(4, "assistant", "second answer"),
                           {"type": "compaction", "timestamp": "2025-11-20T10:00:05.000Z",
                            "summary": "PI SUMMARY of the first turn", "firstKeptEntryIndex": 3,
                            "tokensBefore": 100},
                           msg(6, "user", "third question"), msg(7, "assistant", "third answer")]
    if version == 4:
        from sessiontree.format.codec import parse_session

        parsed = parse_session(b"".join(jsonio.dumps(r) + b"\n" for r in records))
        write(path, [jsonio.dumps(parsed.header)] + [jsonio.dumps(e) for e in parsed.entries])
        return path
    return write(path, [jsonio.dumps(r) for r in records])


def test_context_of_a_pi_session_shows_what_pi_sent_labelled(_fake_home, tmp_path):
    sid = "33333333-3333-4333-8333-333333333333"
    _v1_with_compaction(_pi_folder(_fake_home) / "old.jsonl", sid)
    url = f"sqlite:///{tmp_path / 'pi.db'}"
    run_cli_json(url, "sync")
    out = run_cli(url, "context", sid).stdout
    # What pi sent: its summary, then the kept turn (lines 4-5), then the turn after it;
    # not the first turn. Said in the first line.
    assert out.startswith("WHAT THE AGENT SENT: this session was written in format 1 (pi)")
    assert "PI SUMMARY of the first turn" in out and "second question" in out and "third answer" in out
    assert "first question" not in out
    data = run_cli_json(url, "context", sid)
    assert data["historical"]["agentFormat"] == 1 and len(data["messages"]) == 1 + 2 + 2
    # --current: the format-4 rule, the whole history, no label.
    current = run_cli(url, "context", sid, "--current").stdout
    assert "first question" in current and "WHAT THE AGENT SENT" not in current
    run_cli(url, "context", sid, "--current", "--historical", code=2)


def test_context_of_a_format_4_session_keeps_the_format_4_rule(_fake_home, tmp_path):
    sid = "44444444-4444-4444-8444-444444444444"
    _v1_with_compaction(_pi_folder(_fake_home) / "new.jsonl", sid, version=4)
    url = f"sqlite:///{tmp_path / 'pi.db'}"
    run_cli_json(url, "sync")
    out = run_cli(url, "context", sid).stdout
    assert "first question" in out and "WHAT THE AGENT SENT" not in out


def test_context_of_an_imported_pi_file_keeps_the_format_4_rule(_fake_home, tmp_path):
    """Import records no agent format (docs/sync.md, "What pi sent"): only --historical."""
    sid = "33333333-3333-4333-8333-333333333333"
    path = _v1_with_compaction(tmp_path / "old.jsonl", sid)
    url = f"sqlite:///{tmp_path / 'pi.db'}"
    run_cli(url, "import", str(path))
    assert "first question" in run_cli(url, "context", sid).stdout


def test_viewer_model_view_of_a_pi_session_is_what_pi_sent(_fake_home, tmp_path):
    from starlette.testclient import TestClient

    from sessiontree.stores import open_store
    from sessiontree.web.app import create_app

    sid = "33333333-3333-4333-8333-333333333333"
    _v1_with_compaction(_pi_folder(_fake_home) / "old.jsonl", sid)
    url = f"sqlite:///{tmp_path / 'pi.db'}"
    run_cli_json(url, "sync")
    store = open_store(url, readonly=True)
    try:
        client = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
        html = client.get(f"/s/{sid}/conversation?view=model").text
        raw = client.get(f"/s/{sid}/conversation").text
    finally:
        store.close()
    assert "Model&#39;s view: what pi sent" in html or "Model's view: what pi sent" in html
    assert "PI SUMMARY of the first turn" in html and "pi&#39;s compaction" in html
    assert "second question" in html and "third answer" in html
    assert "2 entries not sent" in html and "first question<" not in html
    assert "first question<" in raw


def test_viewer_archival_badge_does_not_say_archival_twice():
    from sessiontree.session.manager import SessionManager
    from sessiontree.web import views as view

    m = SessionManager.in_memory("/tmp", entries=[
        {"type": "session", "version": 4, "id": "s1", "createdAt": "2026-01-01T00:00:00.000Z", "cwd": "/tmp"},
        {"type": "message", "id": "a0000001", "parentId": None, "timestamp": "2026-01-01T00:00:01.000Z",
         "message": {"role": "user", "content": "hi", "timestamp": 1}},
        {"type": "compaction", "id": "a0000002", "parentId": "a0000001", "timestamp": "2026-01-01T00:00:02.000Z",
         "summary": "old summary", "firstKeptEntryId": "a0000001", "tokensBefore": 5}])
    for which in ("raw", "model"):
        item = next(i for i in view.build_conversation(m, None, which).items if i.id == "a0000002")
        assert item.marks == [("archival", "archival; not in the model context")]


# -- the README's first command keeps the samples out of the user's store ----------------------------


def test_readme_first_command_uses_a_throwaway_store(_fake_home, tmp_path, monkeypatch):
    import re
    import shlex

    root = Path(__file__).resolve().parents[2]
    text = (root / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    assert len(blocks) >= 2  # the two commands at the top: run on SQLite, run the tests
    first = blocks[0].strip()
    assert "\n" not in first and "pip install -e ." in first
    commands = [shlex.split(part) for part in first.split("&&")]
    runs = [c[1:] for c in commands if c[0].endswith("/sessiontree")]
    assert runs and all(c[:2] == ["--store", "samples.db"] for c in runs), runs
    # Run them here (in a scratch folder holding the examples): the user's store is never made.
    work = tmp_path / "checkout"
    shutil.copytree(root / "examples", work / "examples")
    monkeypatch.chdir(work)
    outputs = [run_cli(None, *args).stdout for args in runs]
    assert "3 imported" in outputs[0] and "Fix 500 on city names" in outputs[1]
    assert (work / "samples.db").is_file() and not (tmp_path / "default.db").exists()
