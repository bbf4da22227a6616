"""Secrets in what a session keeps besides its mapped text: the verbatim Claude Code and
Codex records (``foreign.raw``, ``foreign.rawBase64``), the header's ``cwd``, and the
agents' own protocol ids, which are never secrets (docs/secrets.md, "Verbatim source
records"; docs/mcp.md, "Redaction"). Issue 38 items 2 and 6, issue 39 item 7.

The fake keys are built by concatenation (no whole key in the source). Every session
here is synthetic (the real corpus holds no record with an invalid byte and no secret);
the real corpus is scanned by :func:`test_real_corpus_has_no_false_positive`.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import orjson
import pytest

from cli_support import run_cli, run_cli_json
from corpus import foreign_files, needs_shared
from foreign_support import CC_PROJECT, CC_SID, claude_records, jl
from sessiontree.core import secrets
from sessiontree.core.secrets import Redactor, redact_parsed, scan_entries, scan_text
from sessiontree.format.foreign import map_foreign, source_bytes
from sessiontree.mcpserver.tools import SessionReader
from sessiontree.stores import open_store
from support import make_store

KEY = "sk-ant-api03-" + "q8Zr3LmN0pX7vB2k" + "T9wY4cF6hJ1sD5gA" + "Xe7Ub2Ka-AA"
GH = "ghp" + "_" + "q8Zr3LmN0pX7vB2kT9wY4cF6hJ1sD5gA" + "abcd"


def _home_file(home: Path, data: bytes) -> Path:
    folder = home / ".claude" / "projects" / CC_PROJECT
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{CC_SID}.jsonl"
    path.write_bytes(data)
    return path


def _latin1_record() -> bytes:
    """A Claude Code user record (synthetic) whose text holds a fake key and one latin-1
    byte (``\\xe9``, "é" as latin-1): not UTF-8, so the mapping keeps it as ``rawBase64``."""
    record = claude_records()[6]
    text = orjson.dumps({**record, "uuid": "bad1", "message": {"role": "user", "content": f"caf@ key {KEY}"}})
    return text.replace(b"caf@", b"caf\xe9") + b"\n"


# --------------------------------------------------------------------------- item 2: one bad byte


def test_a_record_with_an_invalid_byte_is_scanned_and_redacted_not_passed_as_base64():
    data = jl(claude_records()) + _latin1_record()
    mapped = map_foreign(data, f"/h/.claude/projects/{CC_PROJECT}/{CC_SID}.jsonl")
    kept = [e for e in mapped.entries if "rawBase64" in e.get("foreign", {})]
    assert len(kept) == 1 and KEY.encode() in base64.b64decode(kept[0]["foreign"]["rawBase64"])
    found = scan_entries(mapped.entries)
    assert [(f.path, f.kind) for f in found] == [("foreign.rawBase64.message.content", "anthropic-api-key")]
    copy, redactor = redact_parsed(mapped.parsed())
    assert (redactor.secrets, redactor.replaced, redactor.dropped) == (1, 1, 0)
    shown = copy.to_bytes()
    assert KEY.encode() not in shown and b"rawBase64" not in shown
    info = next(e["foreign"] for e in copy.entries if e["foreign"].get("line") == kept[0]["foreign"]["line"])
    assert info["rawDecoded"] == "replace"
    assert info["raw"].startswith('{"parentUuid"') and "caf\ufffd key [REDACTED:anthropic-api-key:1]" in info["raw"]
    source = source_bytes(copy.entries)
    assert source is not None and KEY.encode() not in source and b"[REDACTED:anthropic-api-key:1]" in source
    # The records without a secret come back byte for byte.
    assert source.startswith(jl(claude_records()))


@pytest.mark.usefixtures("_fake_home")
def test_every_redacting_surface_covers_a_record_with_an_invalid_byte(tmp_path, _fake_home):
    _home_file(_fake_home, jl(claude_records()) + _latin1_record())
    db = f"sqlite:///{tmp_path / 'r.db'}"
    run_cli(db, "sync")
    report = run_cli_json(db, "secrets", CC_SID)
    assert report["total"] == 1 and report["sessions"][0]["findings"][0]["kind"] == "anthropic-api-key"
    for fmt in ("source", "jsonl"):
        result = run_cli(db, "export", CC_SID, "--format", fmt, "--redact")
        assert KEY not in result.stdout and "rawBase64" not in result.stdout, fmt
        assert "[REDACTED:anthropic-api-key:1]" in result.stdout, fmt
        assert "Redacted 1 secret (" in result.stderr, fmt
    store = open_store(db)
    try:
        answer = json.dumps(SessionReader(store).get_entries(CC_SID, redact=True, raw=True, fold=False, max_chars=1_000_000))
        plain = json.dumps(SessionReader(store).get_entries(CC_SID, raw=True, fold=False, max_chars=1_000_000))
    finally:
        store.close()
    assert "rawBase64" in plain  # stored as base64: the test can fail
    assert KEY not in answer and "rawBase64" not in answer and "[REDACTED:anthropic-api-key:1]" in answer


def test_a_kept_record_that_cannot_be_decoded_is_dropped_and_said():
    """A hostile stored entry (synthetic): ``rawBase64`` that is not base64 cannot be scanned,
    so redaction drops it and counts it; ``unscannable`` names it."""
    entries = [{"type": "custom", "id": "e1", "parentId": None, "timestamp": "2026-03-02T09:00:00.000Z",
                "customType": "x", "foreign": {"agent": "claude-code", "line": 1, "rawBase64": "%%%" + KEY}}]
    assert secrets.unscannable(entries) == [(0, "e1", "foreign.rawBase64")]
    redactor = Redactor()
    out = redactor.redact_entries(entries)
    assert redactor.dropped == 1
    assert out[0]["foreign"] == {"agent": "claude-code", "line": 1,
                                 "rawDropped": "not valid base64: could not be scanned"}


# --------------------------------------------------------------------------- issue 39 item 7: once, no noise


def test_a_secret_in_mapped_text_and_raw_record_is_one_finding_redacted_in_both():
    """Synthetic: the fake key in a user message (mapped text and verbatim record), and a
    token only in a field the mapping does not carry (``toolUseResult``)."""
    records = claude_records()
    records[6] = {**records[6], "message": {"role": "user", "content": f"use {KEY} please"},
                  "toolUseResult": {"stdout": f"GITHUB_TOKEN={GH}"}}
    mapped = map_foreign(jl(records), f"/h/.claude/projects/{CC_PROJECT}/{CC_SID}.jsonl")
    found = scan_entries(mapped.entries)
    assert sorted((f.path, f.kind) for f in found) == [
        ("foreign.raw.toolUseResult.stdout", "github-token"), ("message.content", "anthropic-api-key")]
    copy, redactor = redact_parsed(mapped.parsed())
    # Two secrets; three occurrences: the key in the message and in its record, the token in the record.
    assert (redactor.secrets, redactor.replaced) == (2, 3)
    out = copy.to_bytes()
    assert KEY.encode() not in out and GH.encode() not in out
    source = source_bytes(copy.entries)
    assert source is not None and KEY.encode() not in source and GH.encode() not in source
    assert source.count(b"[REDACTED:anthropic-api-key:1]") == 1 and b"[REDACTED:github-token:1]" in source


@pytest.mark.parametrize("ident", [
    "req_011CUZv2q9Wm4XhKj8YtBn3R", "msg_01XFDUDYJgAACzvnptvVoYEL", "toolu_01A09q90qw90lq917835lq9",
    "call_Xq2mZ7rK9wT4vB8nL3pY6hJd", "2b1f6c3e-9a4d-4e7b-8c2f-5d6a7b8c9d0e"])
def test_protocol_ids_are_never_findings(ident):
    # Quoted, as they stand in tool output and JSON: the entropy plugins' shape.
    assert scan_text(f'{{"requestId": "{ident}", "x": \'{ident}\'}}') == []


REAL_FILES = foreign_files("claude-code") + foreign_files("codex") + foreign_files("gemini")


@needs_shared
@pytest.mark.parametrize("path", REAL_FILES, ids=[p.name[:40] for p in REAL_FILES])
def test_real_corpus_has_no_false_positive(path):
    """Every Claude Code, Codex and Gemini CLI file of ../shared/corpus, mapped and scanned with its
    header and verbatim records: 0 findings. The corpus holds no true secret (checked by
    hand: no key shape of docs/secrets.md occurs in it; the ``hf_`` runs are inside Codex
    ``encrypted_content``), so any finding would be a false positive; before these rules
    the same scan reported 1,300 (thinking signatures, encrypted reasoning, request ids,
    a slug, ``github_pat_xxxx``, ``self.api_key = api_key``); a Gemini chat, kept as
    fragments of its JSON document, gave 5 (its ``projectHash`` and tool call ids scanned
    as text)."""
    mapped = map_foreign(path.read_bytes(), str(path))
    assert mapped is not None, path
    found = scan_entries(mapped.entries, mapped.header)
    assert found == [], [(f.path, f.kind, f.preview) for f in found[:5]]


def test_a_fragment_of_a_json_document_keeps_its_secrets_but_not_its_protocol_ids():
    """Synthetic (the corpus holds no secret): a record kept as a fragment of a JSON
    document, as a Gemini CLI message is, is scanned as text with the values of its
    protocol keys blanked: a hash under ``projectHash`` and an ``id`` are no findings, a key
    in its text is one, found at its place in the kept bytes and redacted there."""
    fragment = (',\n    {"id": "run_shell_command-1765309941376-a3b382f7de6c78", "projectHash": '
                f'"{"9126eddec7f67e038794657b4d517dd9cb5226468f30b5ee7296c27d65e84fde"}", '
                f'"content": "export KEY={KEY}"}}')
    entries = [{"type": "custom", "id": "m1", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
                "customType": "gemini", "foreign": {"agent": "gemini", "line": 1, "raw": fragment}}]
    found = scan_entries(entries)
    assert [(f.path, f.kind) for f in found] == [("foreign.raw", "anthropic-api-key")]
    redacted = Redactor().redact_entries(entries)[0]["foreign"]["raw"]
    assert KEY not in redacted and "a3b382f7de6c78" in redacted and redacted.startswith(',\n    {"id"')


# --------------------------------------------------------------------------- item 6: the header's cwd


CWD_SECRET = f"/home/me/{GH}/proj"


@pytest.mark.parametrize("kind", ["sqlite", "jsonl", "memory"])
def test_redact_covers_the_cwd_wherever_an_mcp_answer_shows_it(kind, tmp_path):
    from builders import header, user_block_entry

    store = make_store(kind, tmp_path)
    try:
        sid = "019cadb4-6e80-7a3c-9b1d-0000000000e1"
        store.create(header(sid, CWD_SECRET, "2026-03-02T12:00:00.000Z"),
                     [user_block_entry("u1", None, "needle here")])
        reader = SessionReader(store)
        outline = reader.get_session(sid, redact=True)
        listed = reader.list_sessions(redact=True)
        hits = reader.search_sessions("needle", redact=True)["hits"]
        shown = json.dumps([outline, listed, hits])
        assert GH not in shown
        placeholder = "/home/me/[REDACTED:github-token:1]/proj"
        assert outline["header"]["cwd"] == outline["info"]["cwd"] == placeholder
        assert listed["sessions"][0]["cwd"] == placeholder and hits and hits[0]["cwd"] == placeholder
        assert GH in json.dumps(reader.get_session(sid)["info"])  # not redacted unless asked
    finally:
        store.close()


def test_export_redact_and_secrets_cover_the_header(tmp_path):
    from builders import header, jsonl_line, user_block_entry

    sid = "019cadb4-6e80-7a3c-9b1d-0000000000e2"
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / f"{sid}.jsonl").write_bytes(jsonl_line(header(sid, CWD_SECRET, "2026-03-02T12:00:00.000Z"))
                                          + jsonl_line(user_block_entry("u1", None, "hi")))
    db = str(tmp_path / "h.db")
    run_cli(db, "import", str(folder))
    out = run_cli(db, "export", sid, "--redact").stdout
    assert GH not in out and '"cwd":"/home/me/[REDACTED:github-token:1]/proj"' in out
    report = run_cli_json(db, "secrets", sid)
    assert [(f["path"], f["kind"]) for f in report["sessions"][0]["findings"]] == [("header.cwd", "github-token")]


def test_text_kept_elsewhere_in_the_foreign_object_is_scanned_and_redacted():
    """Synthetic: a ``foreign`` object holding more than the mapping's bookkeeping and the
    record (a value a mapping may add, or a hand-edited store): scanned as mapped text."""
    entries = [{"type": "custom", "id": "e1", "parentId": None, "timestamp": "2026-03-02T09:00:00.000Z",
                "customType": "x", "foreign": {"agent": "codex", "line": 3, "note": {"text": f"token {GH}"}}}]
    assert [(f.path, f.kind) for f in scan_entries(entries)] == [("foreign.note.text", "github-token")]
    out = Redactor().redact_entries(entries)
    assert out[0]["foreign"] == {"agent": "codex", "line": 3, "note": {"text": "token [REDACTED:github-token:1]"}}
