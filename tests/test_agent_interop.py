"""Restored files as the original agent sees them (docs/agent-loop.md).

The proof that ``restore`` gives the agent a session it continues: each file
is loaded with pi's own ``SessionManager`` (``@earendil-works/pi-coding-agent``,
``dist/core/session-manager.js``, driven by ``tests/node/pi_load.mjs``), and
what it sees is compared:

* a synced file (every file of the corpus beside the checkout and of
  ``examples/``) synced into a store, archived out of the agent's folder,
  restored: its SHA-256 equals the original's, and pi's view of it equals
  pi's view of the original;
* a session born in the store: pi's entries, leaf, name and context equal
  what the store holds and what our projection builds from it;
* ``restore --at ENTRY``: pi sees exactly the path root -> ENTRY;
* the folder: pi's own folder for a working directory is ours
  (:func:`~sessiontree.sync.restore.encode_cwd`), and pi's session listing
  (what its ``/resume`` picker reads) lists the restored file.

The package is installed by ``benchmarks/reference.py`` into
``benchmarks/.work/reference/<version>/`` (``.ci/run`` does it before the
tests; tests never download); without it, or without Node, the tests skip
with the reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import corpus
from sessiontree.core.projection import build_session_context
from sessiontree.core.tree import SessionTree
from sessiontree.session.manager import SessionManager
from sessiontree.sync.archive import archive
from sessiontree.sync.engine import Syncer
from sessiontree.sync.restore import agent_file_name, encode_cwd, restore
from support import make_store

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
PI_LOAD = Path(__file__).resolve().parent / "node" / "pi_load.mjs"
NODE = shutil.which("node")
PACKAGE_MODULE = Path("node_modules", "@earendil-works", "pi-coding-agent", "dist", "core", "session-manager.js")


def _reference_module() -> Path | None:
    configured = os.environ.get("SESSIONTREE_REFERENCE_MODULE")
    if configured:
        return Path(configured)
    root = ROOT / "benchmarks" / ".work" / "reference"
    found = sorted(root.glob(f"*/{PACKAGE_MODULE}")) if root.is_dir() else []
    return found[-1] if found else None


MODULE = _reference_module()

pytestmark = [
    pytest.mark.slow,
    pytest.mark.interop,
    pytest.mark.skipif(NODE is None, reason="node is not on PATH: the agent's SessionManager needs Node.js"),
    pytest.mark.skipif(MODULE is None, reason="the agent's npm package is not installed in benchmarks/.work/reference/ "
                                              "(python benchmarks/reference.py installs it; tests never download)"),
]

STORE_KINDS = ["sqlite", "jsonl"]


def pi(agent_dir: Path, *ops: dict[str, Any]) -> list[dict[str, Any]]:
    """Run ``ops`` through pi's SessionManager (tests/node/pi_load.mjs), with
    ``PI_CODING_AGENT_DIR=agent_dir``; one result per op."""
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent_dir)}
    done = subprocess.run([NODE or "node", str(PI_LOAD)], input=json.dumps({"module": str(MODULE), "ops": list(ops)}),
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def canonical(view: dict[str, Any]) -> str:
    """pi's view as JSON text, each entry id replaced by its position (pi gives the
    entries of a format-1 file new random ids each time it loads one)."""
    text = json.dumps(view, sort_keys=True)
    # Longest first: an id that is a prefix of another is not replaced inside it.
    ids = sorted(((e["id"], n) for n, e in enumerate(view["entries"])), key=lambda item: -len(item[0]))
    for entry_id, n in ids:
        text = text.replace(json.dumps(entry_id), f'"#{n}"')
    return text


def sources() -> list[Path]:
    """Every pi file of the corpus beside the checkout (when there) and of ``examples/`` (the
    other agents' folders of the corpus are not pi's files: their own tests read them)."""
    files = sorted(EXAMPLES.glob("*.jsonl"))
    if corpus.HAS_SHARED:
        files = corpus.shared_files() + files
    return files


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A fake home whose pi folder is ``<tmp>/agent``; the environment ``restore`` and
    ``archive`` are given."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    yield {"HOME": str(tmp_path / "home"), "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}


def lay_out(files: list[Path], agent_dir: Path) -> list[Path]:
    """Copy ``files`` into pi's folder as pi names them: ``sessions/--<cwd>--/<timestamp>_<id>.jsonl``."""
    out = []
    for source in files:
        header = json.loads(source.read_bytes().split(b"\n", 1)[0])
        target = agent_dir / "sessions" / encode_cwd(header["cwd"]) / agent_file_name(header)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
        out.append(target)
    return out


# --------------------------------------------------------------------------- synced files


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_synced_archived_restored_files_are_the_agents_own(kind: str, tmp_path: Path, home: dict[str, str]) -> None:
    agent_dir = Path(home["PI_CODING_AGENT_DIR"])
    files = lay_out(sources(), agent_dir)
    # A variant: CRLF line ends and no final newline (the shape keeps both).
    crlf = agent_dir / "sessions" / "--home-dev-projects-notes--" / "2026-03-02T09-30-00-000Z_crlf.jsonl"
    text = (EXAMPLES / "interrupted.jsonl").read_bytes().replace(b"019cadd2-8a00-7c1f-a2b3-5c6d7e8f9003",
                                                                 b"019cadd2-8a00-7c1f-a2b3-5c6d7e8f9099")
    crlf.write_bytes(text.rstrip(b"\n").replace(b"\n", b"\r\n"))
    files.append(crlf)
    originals = {path: path.read_bytes() for path in files}
    saved = tmp_path / "originals"
    saved.mkdir()
    for n, data in enumerate(originals.values()):
        (saved / f"{n}.jsonl").write_bytes(data)
    before = pi(agent_dir, *({"op": "view", "file": str(saved / f"{n}.jsonl")} for n in range(len(files))))

    store = make_store(kind, tmp_path)
    try:
        report = Syncer(store).sync_files([str(p) for p in files])
        assert [r.status for r in report.files] == ["new"] * len(files), [(r.path, r.reason) for r in report.files]
        ids = {Path(r.path): r.session_id for r in report.files}

        done = archive(store, older_than=None, delete=True, environ=home, home=home["HOME"])
        assert sorted(r.path for r in done.files if r.status == "archived") == sorted(map(str, files))
        assert not any(path.exists() for path in files)

        for path in files:
            result = restore(store, ids[path], agent="pi", environ=home, home=home["HOME"])
            assert (result.status, result.path, result.file.byte_exact) == ("written", str(path), True)
            assert hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(originals[path]).digest()
            assert result.file.sha256 == hashlib.sha256(originals[path]).digest()
            assert restore(store, ids[path], agent="pi", environ=home, home=home["HOME"]).status == "present"
        after = pi(agent_dir, *({"op": "view", "file": str(path)} for path in files))
    finally:
        store.close()
    for path, theirs, ours in zip(files, before, after, strict=True):
        assert len(theirs["entries"]) > 0, path
        assert canonical(ours) == canonical(theirs), path

    # pi's /resume picker for each working directory lists every restored file of it.
    by_cwd: dict[str, set[str]] = {}
    for path, view in zip(files, after, strict=True):
        by_cwd.setdefault(view["header"]["cwd"], set()).add(str(path))
    cwds = sorted(by_cwd)
    answers = pi(agent_dir, *({"op": "list", "cwd": cwd} for cwd in cwds), {"op": "listAll"})
    for cwd, answer in zip(cwds, answers, strict=False):
        assert {s["path"] for s in answer["sessions"]} == by_cwd[cwd], cwd
    assert {s["path"] for s in answers[-1]["sessions"]} == {str(p) for p in files}


# --------------------------------------------------------------------------- sessions born in the store


CWD = "/home/dev/projects/born here"


def born_session(store: Any) -> tuple[str, dict[str, str]]:
    """A session written through our SessionManager into ``store``: a model, a thinking
    level, a tool round trip, a context-window change, a branch abandoned and, from the
    window change, one continued with a name. Returns its id and the ids of the entries
    the tests name."""
    manager = SessionManager.create(CWD, store=store)
    named: dict[str, str] = {}
    manager.append_model_change("anthropic", "claude-sonnet-4-5")
    manager.append_thinking_level_change("high")
    named["ask"] = manager.append_message({"role": "user", "content": [{"type": "text", "text": "List the files."}],
                                           "timestamp": 1772442005000})
    usage = {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
    common = {"api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5", "usage": usage}
    named["call"] = manager.append_message({
        "role": "assistant", "content": [{"type": "toolCall", "id": "call_1", "name": "bash",
                                          "arguments": {"command": "ls"}}],
        "stopReason": "toolUse", "timestamp": 1772442006000, **common})
    named["result"] = manager.append_message({
        "role": "toolResult", "toolCallId": "call_1", "toolName": "bash",
        "content": [{"type": "text", "text": "a.py\nb.py"}], "isError": False, "timestamp": 1772442007000})
    named["answer"] = manager.append_message({"role": "assistant", "content": [{"type": "text", "text": "Two files."}],
                                              "stopReason": "stop", "timestamp": 1772442008000, **common})
    named["window"] = manager.append_context_window_change(200000)
    named["abandoned"] = manager.append_message({"role": "user", "content": "No, count lines.",
                                                 "timestamp": 1772442009000})
    manager.branch(named["window"])
    named["name"] = manager.append_session_info("Listing files")
    named["last"] = manager.append_message({"role": "user", "content": "Thanks.", "timestamp": 1772442010000})
    return manager.get_session_id(), named


def our_view(store: Any, session_id: str) -> dict[str, Any]:
    """What the store holds, in the shape of pi's view: entries, leaf (the last entry, as
    a format-3 file has no leaf record), name, path and our projection's context."""
    parsed = store.read(session_id)
    entries = parsed.entries
    tree = SessionTree(entries)
    leaf = entries[-1]["id"]
    path = [e["id"] for e in tree.get_branch(leaf)]
    names = [e.get("name") for e in entries if e["type"] == "session_info"]
    context = build_session_context(entries, leaf)
    return {"entries": [{"id": e["id"], "type": e["type"], "parentId": e.get("parentId")} for e in entries],
            "leafId": leaf, "name": (names[-1] or "").strip() or None if names else None, "path": path,
            "context": {"messages": context.messages, "thinkingLevel": context.thinking_level,
                        "model": context.model}}


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_session_born_in_the_store_is_what_the_agent_sees(kind: str, tmp_path: Path,
                                                            home: dict[str, str]) -> None:
    agent_dir = Path(home["PI_CODING_AGENT_DIR"])
    store = make_store(kind, tmp_path)
    try:
        session_id, named = born_session(store)
        result = restore(store, session_id, agent="pi", environ=home, home=home["HOME"])
        ours = our_view(store, session_id)
    finally:
        store.close()
    assert not result.file.byte_exact
    assert result.path == str(agent_dir / "sessions" / "--home-dev-projects-born here--" / Path(result.path).name)
    assert any("context_window_change" in note or "1 context_window_change entry" in note
               for note in result.file.notes), result.file.notes
    [theirs, folder, listed] = pi(agent_dir, {"op": "view", "file": result.path}, {"op": "dir", "cwd": CWD},
                                  {"op": "list", "cwd": CWD})
    assert theirs["header"]["id"] == session_id and theirs["header"]["version"] == 3
    assert theirs["entries"] == ours["entries"]
    assert (theirs["leafId"], theirs["name"], theirs["path"]) == (named["last"], "Listing files", ours["path"])
    assert named["abandoned"] not in theirs["path"] and named["window"] in theirs["path"]
    assert theirs["context"] == ours["context"]
    # user, assistant (tool call), tool result, assistant, user: the abandoned turn is not on the path.
    assert [m["role"] for m in theirs["context"]["messages"]] == ["user", "assistant", "toolResult", "assistant",
                                                                   "user"]
    assert (theirs["context"]["thinkingLevel"], theirs["context"]["model"]["modelId"]) == ("high",
                                                                                           "claude-sonnet-4-5")
    assert folder["dir"] == str(Path(result.path).parent)
    assert [(s["path"], s["id"], s["name"]) for s in listed["sessions"]] == [(result.path, session_id,
                                                                              "Listing files")]


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_restore_at_an_entry_is_exactly_that_path(kind: str, tmp_path: Path, home: dict[str, str]) -> None:
    agent_dir = Path(home["PI_CODING_AGENT_DIR"])
    store = make_store(kind, tmp_path)
    try:
        session_id, named = born_session(store)
        whole = our_view(store, session_id)
        result = restore(store, session_id, agent="pi", at=named["result"], environ=home, home=home["HOME"])
    finally:
        store.close()
    [theirs] = pi(agent_dir, {"op": "view", "file": result.path})
    expected = whole["path"][:whole["path"].index(named["result"]) + 1]
    assert len(expected) == 5  # model, thinking level, question, tool call, tool result
    assert [e["id"] for e in theirs["entries"]] == expected == theirs["path"]
    assert theirs["leafId"] == named["result"]
    assert theirs["header"]["id"] == result.file.session_id != session_id
    assert theirs["header"]["parentSession"] == session_id  # a session born in the store has no file
    assert [m["role"] for m in theirs["context"]["messages"]] == ["user", "assistant", "toolResult"]
    assert theirs["name"] is None


def test_our_folder_names_are_the_agents(home: dict[str, str]) -> None:
    agent_dir = Path(home["PI_CODING_AGENT_DIR"])
    cwds = ["/home/dev/project", "/home/dev/my project", "/srv/a:b/c", "/", "/tmp/x-y/z.w", "/home/ünï/çodé"]
    answers = pi(agent_dir, *({"op": "dir", "cwd": cwd} for cwd in cwds))
    for cwd, answer in zip(cwds, answers, strict=True):
        assert answer["dir"] == str(agent_dir / "sessions" / encode_cwd(cwd)), cwd
