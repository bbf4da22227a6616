"""Nothing hostile reaches the terminal (docs/terminal-output.md).

One hostile session, every string field carrying escape sequences and
invisible or reordering characters, is fed to every command, human and
``--json``, three ways: as a pipe (CliRunner's default), as a terminal
without styling (``TTY_COMPATIBLE=1``, ``TERM=dumb``: rich believes it writes
to a terminal but adds no escape sequences of its own, so *any* ESC in the
output came from the session), and as a colour terminal (``FORCE_COLOR=1``:
rich's own SGR and cursor sequences are removed before looking).

The sanitiser itself (:mod:`sessiontree.textsafe`) is tested directly at the end.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from cli_support import cli_runner
from sessiontree.cli import cli

#: Every kind of hostile text docs/terminal-output.md names, in one string.
HOSTILE = ("\x1b]8;;http://evil\x07link\x1b]8;;\x07" "\x1b]0;pwned\x07" "\x1b[31m" "\x9b31m" "\x7f"
           "\u202e" "\u200b" "\x00" "\r" "\x08"
           # and the rest of the set: isolates, separators, BOM, a tag character, a lone surrogate
           "\u2066\u2069\u061c\u200e\u2028\u2029\ufeff\u2060\U000e0041\ud800")

#: What may never appear in output: C0 except newline and tab, DEL, C1, bidi
#: controls, zero-width and invisible format characters, line/paragraph
#: separators, tag characters, surrogates.
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f"
                       "\ufeff\ufff9-\ufffb\U000e0000-\U000e007f\ud800-\udfff]")

#: Rich's own sequences on a colour terminal: SGR styles, cursor show/hide,
#: erase line, cursor up (live progress displays), and the carriage return
#: they use. Everything else is forbidden.
RICH_OWN = re.compile(r"\x1b\[[0-9;]*m|\x1b\[\?25[lh]|\x1b\[2K|\x1b\[[0-9]*[AG]|\r")

SID = "019cadb4-6e80-7a3c-9b1d-000000000010"
INTERNAL_SID = "019cadb4-6e80-7a3c-9b1d-000000000011"
BROKEN_SID = "019cadb4-6e80-7a3c-9b1d-000000000012"
H = HOSTILE
TS = "2026-03-02T09:00:00.000Z"


def _id(name: str) -> str:
    """Hostile entry ids: a short prefix for the command line, then the hostile text. The prefixes
    start with p, q or r, never a hex digit, so ids the commands generate cannot make them ambiguous."""
    return name + H


def _entries() -> list[dict]:
    def entry(key: str, parent: str | None, kind: str, **fields) -> dict:
        return {"type": kind, "id": _id(key), "parentId": _id(parent) if parent else None, "timestamp": TS,
                **fields}

    call = {"type": "toolCall", "id": "call" + H, "name": "tool" + H, "arguments": {"cmd" + H: H}}
    return [
        entry("p1", None, "model_change", provider="prov" + H, modelId="model" + H),
        entry("p2", "p1", "thinking_level_change", thinkingLevel="high" + H),
        entry("p3", "p2", "message", message={"role": "user", "content": "first " + H, "timestamp": 1}),
        # a second branch from a3 (a branch point); the leaf is the last entry, q9
        entry("r1", "p3", "message", message={"role": "assistant", "content": [{"type": "text", "text": "alt " + H}],
                                              "stopReason": "stop", "timestamp": 9}),
        entry("p4", "p3", "message", message={
            "role": "assistant", "content": [{"type": "text", "text": "answer " + H},
                                             {"type": "thinking", "thinking": "think " + H}, call,
                                             {"type": "image", "mimeType": "image/" + H, "data": "AAAA"}],
            "provider": "prov" + H, "model": "model" + H, "stopReason": "error", "errorMessage": "oops " + H,
            "timestamp": 2}),
        entry("p5", "p4", "message", message={
            "role": "toolResult", "toolCallId": "call" + H, "toolName": "tool" + H,
            "content": [{"type": "text", "text": "result " + H}], "isError": True, "timestamp": 3}),
        entry("p6", "p5", "session_info", name="name " + H),
        entry("p7", "p6", "label", targetId=_id("p3"), label="label " + H),
        entry("p8", "p7", "weird" + H, data=H),
        entry("p9", "p8", "custom", customType="ctype" + H, data={H: H}),
        entry("q1", "p9", "custom_message", customType="cmsg" + H, content="cmsg " + H, display=True),
        entry("q2", "q1", "message", message={"role": "custom", "customType": "crole" + H,
                                              "content": "custom " + H, "display": True, "timestamp": 4}),
        entry("q3", "q2", "message", message={"role": "bashExecution", "command": "ls " + H,
                                              "output": "out " + H, "exitCode": 1, "timestamp": 5}),
        entry("q4", "q3", "branch_summary", fromId=_id("p3"), summary="summary " + H),
        entry("q5", "q4", "message", message={"role": "role" + H, "content": "unknown role " + H, "timestamp": 6}),
        entry("q6", "q5", "message", message={
            "role": "system", "content": "system " + H, "sections": {"sec" + H: "value " + H},
            "toolsAdded": [{"name": "added" + H}], "timestamp": 7}),
        entry("q7", "q6", "context_edit", targetId=_id("q3"), replacement={"content": "edited " + H}),
        entry("q8", "q7", "session_summary", summary="session summary " + H),
        entry("q9", "q8", "message", message={"role": "user", "content": "last " + H, "timestamp": 8}),
    ]


def _jsonl(header: dict, entries: list[dict]) -> str:
    # ensure_ascii: the file itself is plain ASCII JSON (a lone surrogate cannot be UTF-8)
    return "".join(json.dumps(record, ensure_ascii=True) + "\n" for record in [header, *entries])


def _write_sessions(folder: Path) -> dict[str, Path]:
    """The hostile session, an internal one with a hostile workflow, and a broken one, under hostile names."""
    folder.mkdir(parents=True, exist_ok=True)
    header = {"type": "session", "version": 4, "id": SID, "createdAt": TS, "cwd": "/proj/" + H,
              "parentSessionId": "parent" + H}
    internal = {"type": "session", "version": 4, "id": INTERNAL_SID, "createdAt": TS, "cwd": "/wf/" + H,
                "internal": True, "workflow": {"runId": "run" + H, "stageId": "stage" + H, "stageName": "name" + H}}
    # a file name with control characters ("/" and NUL are impossible) and rich markup (an OSC 8 link)
    name = "\x1b]0;file\x07\u202e\x7f\x9b[link=evil.example]"
    paths = {
        "hostile": folder / f"hostile{name}.jsonl",
        "internal": folder / f"internal{name}.jsonl",
        "broken": folder / f"broken{name}.jsonl",
    }
    paths["hostile"].write_text(_jsonl(header, _entries()), encoding="utf-8")
    paths["internal"].write_text(_jsonl(internal, [
        {"type": "message", "id": "w1", "parentId": None, "timestamp": TS,
         "message": {"role": "user", "content": "wf " + H, "timestamp": 1}}]), encoding="utf-8")
    # a file import rejects: the reason quotes a hostile entry type
    paths["broken"].write_text(_jsonl({"type": "session", "version": 4, "id": BROKEN_SID, "createdAt": TS, "cwd": "/"},
                                      [{"type": "bad" + H, "parentId": None, "timestamp": TS}]), encoding="utf-8")
    return paths


# --------------------------------------------------------------------------- running


MODES = {
    "pipe": {},
    # rich writes "to a terminal" with no colour system: it adds no escape sequence at all
    "terminal": {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "0", "TERM": "dumb", "COLUMNS": "70"},
    # a colour terminal, narrow so that wrapping and cutting happen everywhere
    "colour": {"TTY_COMPATIBLE": "1", "FORCE_COLOR": "1", "TERM": "xterm-256color", "COLUMNS": "50"},
}


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("SESSIONTREE_STORE", f"sqlite:///{tmp_path / 'env-default.db'}")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("COLUMNS", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "TERM"):
        monkeypatch.delenv(name, raising=False)


_runner = cli_runner


def _assert_clean(text: str, mode: str, where: str) -> None:
    if mode == "colour":
        text = RICH_OWN.sub("", text)
    bad = sorted({f"U+{ord(c):04X}" for c in FORBIDDEN.findall(text)})
    assert not bad, f"{where}: raw {', '.join(bad)} in {text!r}"


def _invoke(mode: str, *args: str, input: str | None = None):
    return _runner().invoke(cli, list(args), env=MODES[mode], input=input, catch_exceptions=False)


def _run(mode: str, *args: str, code: int | None = 0, input: str | None = None) -> tuple[str, str]:
    """Run ``sessiontree ARGS`` in ``mode``; check stdout and stderr are clean; return them."""
    result = _invoke(mode, *args, input=input)
    where = f"{mode}: sessiontree {' '.join(args)!r}"
    if code is not None:
        assert result.exit_code == code, (where, result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, where
    _assert_clean(result.stdout, mode, where + " stdout")
    _assert_clean(result.stderr, mode, where + " stderr")
    return result.stdout, result.stderr


def _json(mode: str, *args: str, code: int | None = 0):
    out, _ = _run(mode, *args, "--json", code=code)
    return json.loads(out)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_every_command_keeps_hostile_text_off_the_terminal(tmp_path, mode):
    paths = _write_sessions(tmp_path / "in")
    db = f"sqlite:///{tmp_path / 'sessions.db'}"
    st = ("--store", db)

    # import: paths and reasons in the table, the count line, the error line
    _run(mode, *st, "import", str(tmp_path / "in"), code=1)
    data = _json(mode, *st, "import", str(paths["broken"]), code=1)
    assert H in data["files"][0]["reason"]  # --json keeps the value; only its spelling is escaped
    assert data["files"][0]["path"] == str(paths["broken"])

    # "No sessions for <path>.": argv cannot hold NUL, and only U+DC80-U+DCFF (undecodable bytes) as surrogates
    _run(mode, *st, "list", "--cwd", "/nowhere/" + H.replace("\x00", "").replace("\ud800", "\udcff"))
    for extra in ((), ("--all",)):
        _run(mode, *st, "list", *extra)
        listed = _json(mode, *st, "list", *extra)
        assert {s["cwd"] for s in listed} >= {"/proj/" + H}
    for extra in ((), ("--tree",)):
        _run(mode, *st, "show", SID, *extra)
        shown = _json(mode, *st, "show", SID, *extra)
        assert shown["header"]["cwd"] == "/proj/" + H
    _run(mode, *st, "show", INTERNAL_SID)
    for extra in ((), ("--full",), ("--leaf", "r1")):
        _run(mode, *st, "context", SID, *extra)
        context = _json(mode, *st, "context", SID, *extra)
        assert context["sessionId"] == SID

    # export: to stdout in both formats, and to files with hostile names
    for fmt in ("jsonl", "markdown"):
        target = tmp_path / f"out{fmt}\x1b]0;x\x07\u202e"
        _run(mode, *st, "export", SID, "--format", fmt, "-o", str(target))
    _run(mode, *st, "export", SID, "--format", "markdown")
    markdown = (tmp_path / "outmarkdown\x1b]0;x\x07\u202e").read_text(encoding="utf-8")
    _assert_clean(markdown, "pipe", "markdown file")  # Markdown is sanitised wherever it goes
    stored = (tmp_path / "outjsonl\x1b]0;x\x07\u202e").read_bytes()
    if mode == "pipe":
        # JSONL to a pipe or file is data: the stored bytes (JSON itself escapes C0 there)
        assert _invoke(mode, *st, "export", SID).stdout_bytes == stored
    else:  # to a terminal: unsafe characters as JSON escapes, the values unchanged
        jsonl_out, _ = _run(mode, *st, "export", SID)
        # split("\n"), not splitlines(): U+2028 inside a stored string is not a line end
        assert [json.loads(line) for line in jsonl_out.split("\n") if line] == \
               [json.loads(line) for line in stored.decode("utf-8").split("\n") if line]

    # check, plain and --repair, human and --json; a blank line gives --repair something to do
    damaged = tmp_path / f"damaged{paths['hostile'].name}"
    lines = paths["hostile"].read_text(encoding="utf-8").split("\n")
    damaged.write_text("\n".join([*lines[:3], "", *lines[3:]]), encoding="utf-8")
    _run(mode, "check", "--repair", str(damaged), code=None)
    for path in paths.values():
        _run(mode, "check", str(path), code=None)
        _json(mode, "check", str(path), code=None)
        _run(mode, "check", "--repair", "-o", str(tmp_path / f"rep{path.name}"), str(path), code=None)
    _run(mode, "check", str(tmp_path / "in"), code=1)

    # migrate: a current file is skipped, the broken one rejected with a reason
    copies = tmp_path / "copies"
    shutil.copytree(tmp_path / "in", copies)
    _run(mode, "migrate", *(str(p) for p in sorted(copies.iterdir())), code=1)
    _json(mode, "migrate", *(str(p) for p in sorted(copies.iterdir())), code=1)

    # editing commands
    _run(mode, *st, "name", SID, "renamed " + H)
    _run(mode, *st, "name", SID, "renamed " + H)  # unchanged: echoes the stored name
    _json(mode, *st, "name", SID, "again " + H)
    _run(mode, *st, "label", SID, "q9", "lab " + H)
    _run(mode, *st, "label", SID, "q9", "lab " + H)  # unchanged
    _run(mode, *st, "label", SID, "q9")
    _json(mode, *st, "label", SID, "p3")
    _run(mode, *st, "label", SID, "p", code=1)  # ambiguous prefix: the error lists hostile ids
    _run(mode, *st, "context", SID, "--leaf", "p", code=1)
    _run(mode, *st, "fork", SID)
    _json(mode, *st, "fork", SID, "--at", "q3", "--cwd", "/fork/" + H)
    forked = [s["id"] for s in _json(mode, *st, "list") if s["parentSessionId"] == SID]
    assert len(forked) == 2
    _run(mode, *st, "show", forked[0], "--tree")
    _run(mode, *st, "delete", forked[0], input="n\n")  # the prompt, on stderr; declining exits 0
    _run(mode, *st, "delete", forked[0], "-y")
    _json(mode, *st, "delete", forked[1], "-y")
    _run(mode, *st, "list")


@pytest.mark.parametrize("mode", sorted(MODES))
def test_errors_quoting_session_content_are_escaped(tmp_path, mode):
    """A JSONL store holding a damaged session: the one-line error names the file and the hostile type."""
    store = tmp_path / "store"
    paths = _write_sessions(tmp_path / "in")
    store.mkdir()
    shutil.copy(paths["broken"], store / paths["broken"].name)
    _, err = _run(mode, "--store", str(store), "show", BROKEN_SID, code=1)
    err = RICH_OWN.sub("", err)  # the spinner, on a colour terminal
    assert err.splitlines()[-1].startswith("sessiontree: error: ")
    assert "bad\\x1b]8;;http://evil\\x07link" in err  # shown, escaped
    _run(mode, "--store", str(store), "context", BROKEN_SID, code=1)
    _run(mode, "--store", str(store), "export", BROKEN_SID, "--format", "markdown", code=1)


def test_escapes_are_visible_in_human_output(tmp_path):
    """The hostile text is shown, escaped, rather than dropped: a reader sees that something is there."""
    paths = _write_sessions(tmp_path / "in")
    db = f"sqlite:///{tmp_path / 'sessions.db'}"
    _run("pipe", "--store", db, "import", str(tmp_path / "in"), code=1)
    out, _ = _run("pipe", "--store", db, "show", SID)
    assert "\\x1b]8;;http://evil\\x07link\\x1b]8;;\\x07\\x1b]0;pwned\\x07\\x1b[31m\\x9b31m\\x7f\\u202e" in out
    out, _ = _run("pipe", "--store", db, "context", SID)
    assert "toolResult tool\\x1b]8;;" in out
    out, _ = _run("pipe", "--store", db, "export", SID, "--format", "markdown")
    assert "result \\x1b]8;;http://evil" in out
    out, _ = _run("pipe", "--store", db, "show", SID, "--tree")
    assert "* p8\\x1b]8;;http://evil" in out
    out, _ = _run("pipe", "check", str(paths["hostile"]), code=None)
    assert 'unknown entry type "weird\\x1b]8;;http://evil' in out


def test_json_escapes_parse_back_to_the_same_values(tmp_path):
    _write_sessions(tmp_path / "in")
    db = f"sqlite:///{tmp_path / 'sessions.db'}"
    _run("pipe", "--store", db, "import", str(tmp_path / "in"), code=1)
    out, _ = _run("pipe", "--store", db, "show", SID, "--tree", "--json")
    assert "\\u202e" in out and "\\u009b" in out and "\\u007f" in out
    data = json.loads(out)
    assert data["header"]["parentSessionId"] == "parent" + H
    assert {row["type"] for row in data["tree"]} >= {"weird" + H}


# --------------------------------------------------------------------------- the sanitiser


@pytest.fixture
def textsafe():
    from sessiontree.core import textsafe as module

    return module


def test_safe_line_escapes_every_class_and_keeps_ordinary_text(textsafe):
    assert textsafe.safe_line("plain – text ✓ 日本語 e\u0301") == "plain – text ✓ 日本語 e\u0301"  # noqa: RUF001
    assert textsafe.safe_line("a\x1b[31mb") == "a\\x1b[31mb"
    assert textsafe.safe_line("\x00\x08\r\n\t\x7f") == "\\x00\\x08\\x0d\\x0a\\x09\\x7f"
    assert textsafe.safe_line("\x9b\x85") == "\\x9b\\x85"
    assert textsafe.safe_line("\u202e\u2066\u061c\u200e") == "\\u202e\\u2066\\u061c\\u200e"
    assert textsafe.safe_line("\u200b\u200d\u2060\ufeff\u2028\u2029") == "\\u200b\\u200d\\u2060\\ufeff\\u2028\\u2029"
    assert textsafe.safe_line("\U000e0041\ud800") == "\\U000e0041\\ud800"


def test_safe_block_keeps_newlines_and_tabs_only(textsafe):
    assert textsafe.safe_block("one\n\ttwo\r\nthree\x1b") == "one\n\ttwo\\x0d\nthree\\x1b"
    assert textsafe.safe_block("a\u2028b") == "a\\u2028b"


def test_is_safe_and_safe_str(textsafe):
    assert textsafe.is_safe("ok\nfine", multiline=True)
    assert not textsafe.is_safe("ok\nfine")
    assert not textsafe.is_safe("\u202e")
    assert textsafe.safe_line(None) == "None"
    assert textsafe.safe_line(42) == "42"


def test_json_text_escapes_as_json_escapes_and_round_trips(textsafe):
    value = {"k" + H: [H, "plain", "\U0001f600"]}
    text = json.dumps(value, ensure_ascii=False)
    safe = textsafe.safe_json_text(text)
    assert not FORBIDDEN.search(safe)
    assert "\\u202e" in safe and "\\udb40\\udc41" in safe  # astral tag: a surrogate pair
    assert "\U0001f600" in safe  # ordinary non-ASCII stays readable
    assert json.loads(safe) == value


# --------------------------------------------------------------------------- check --store, context --historical


def _historical_store(kind: str, tmp_path: Path) -> str:
    """A store holding a session whose retired compaction and first kept entry have
    hostile ids, and one whose header id, cwd and content hold escapes and a lone
    surrogate (check --store reports them). SQLite: one hostile record's checksum broken."""
    import sqlite3

    from support import make_store

    def message(entry_id: str, parent: str | None, role: str, text: str) -> dict:
        return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": TS,
                "message": {"role": role, "content": [{"type": "text", "text": text}], "timestamp": 1}}

    store = make_store(kind, tmp_path)
    store.create({"type": "session", "version": 4, "id": SID, "createdAt": TS, "cwd": "/p"}, [
        message("p1", None, "user", "old " + H),
        message(_id("p2"), "p1", "assistant", "kept " + H),
        {"type": "compaction", "id": _id("c1"), "parentId": _id("p2"), "timestamp": TS, "summary": "sum " + H,
         "firstKeptEntryId": _id("p2"), "tokensBefore": 1},
        message("p3", _id("c1"), "user", "after " + H),
    ])
    store.create({"type": "session", "version": 4, "id": "bad" + H, "createdAt": TS, "cwd": "/w" + H},
                 [message(_id("q1"), None, "user", "x" + H)])
    url = store.url
    store.close()
    if kind == "sqlite":
        conn = sqlite3.connect(tmp_path / "db" / "sessions.db")
        with conn:
            conn.execute("UPDATE entries SET crc = crc + 1 WHERE seq = 0 AND session_id <> ?", (SID,))
        conn.close()
    return url


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_check_store_and_historical_context_keep_hostile_text_off_the_terminal(tmp_path, mode, kind):
    url = _historical_store(kind, tmp_path)
    out, _ = _run(mode, "--store", url, "check", "--store", code=1)
    out = RICH_OWN.sub("", out)
    # Every problem reported and the summary printed: the lone surrogates stopped nothing.
    assert "[lone-surrogate]" in out and "2 sessions checked" in out
    assert "bad\\x1b]8;;http://evil\\x07link" in out  # the header id, shown escaped
    # SQLite: the broken checksum stops that record's checks; JSONL: the header id is checked.
    assert ("[hash-mismatch]" if kind == "sqlite" else "[invalid-session-id]") in out
    data = _json(mode, "--store", url, "check", "--store", code=1)
    assert data["errors"] >= 3 and data["sessions"] == 2
    out, _ = _run(mode, "--store", url, "context", SID, "--historical")
    out = RICH_OWN.sub("", out)
    assert "HISTORICAL VIEW (archival" in out and "retired compaction c1\\x1b]8;;http://evil" in " ".join(out.split())
    assert _json(mode, "--store", url, "context", SID, "--historical")["historical"]["compactionId"] == _id("c1")
