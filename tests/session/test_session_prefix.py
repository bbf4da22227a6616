"""Session ids as a person types them, at every edge (issue 41 item 3; docs/listing.md, "Ids").

The ids are the real ones of the Claude Code corpus pair ``7f2abd2d-...`` and its subagent
transcript ``agent-0c4c3cf8.jsonl`` (the mapping names it ``<parent>-agent-<agent>``:
docs/agents/claude-code.md) and of a second real subagent (``agent-af1ff21.jsonl``, whose
parent ``c45af7b1-...``). The sessions' contents are synthetic (one user message each): the
rule is about ids only, and it must not depend on how the mapping reads the files.
"""

from __future__ import annotations

import json

import anyio
import pytest

from cli_support import run_cli
from sessiontree.errors import AmbiguousSessionPrefixError, UnknownSessionPrefixError
from sessiontree.format.idprefix import resolve_session_prefix, short_session_ids, split_subagent
from sessiontree.session.manager import SessionManager
from sessiontree.stores import open_store

PARENT = "7f2abd2d-7cfc-4447-9ddd-3ca8d14e02e9"
CHILD = f"{PARENT}-agent-0c4c3cf8"
# An orphan subagent: its parent (c45af7b1-...) is not stored.
ORPHAN = "c45af7b1-cb7c-4e51-93db-8cbb250a877a-agent-af1ff21"
# Two sessions sharing an 8-character prefix: a real ambiguity stays one.
TWIN_A = "019cadb4-0000-7000-8000-00000000000a"
TWIN_B = "019cadb4-0000-7000-8000-00000000000b"
IDS = [PARENT, CHILD, ORPHAN, TWIN_A, TWIN_B]


@pytest.fixture
def db(tmp_path) -> str:
    path = str(tmp_path / "sessions.db")
    store = open_store(path, create=True)
    try:
        for session_id in IDS:
            m = SessionManager.create("/work/project", store=store, id=session_id)
            m.append_message({"role": "user", "content": f"hello from {session_id}", "timestamp": 1767225600000})
    finally:
        store.close()
    return path


# --------------------------------------------------------------------------- the rule


def test_split_subagent_takes_the_last_mark():
    assert split_subagent(CHILD) == (PARENT, "0c4c3cf8")
    assert split_subagent(f"{CHILD}-agent-b1") == (CHILD, "b1")
    assert split_subagent(PARENT) is None
    assert split_subagent("-agent-x") is None and split_subagent("p-agent-") is None


@pytest.mark.parametrize(("typed", "expected"), [
    ("7f2abd2d", PARENT),            # shared by the session and its subagent: the session
    ("7f2a", PARENT),
    (PARENT, PARENT),
    (CHILD, CHILD),                  # whole ids resolve to themselves
    ("7f2abd2d/0c4c3cf8", CHILD),   # PARENT/AGENT, as lists print it
    ("7f/0c", CHILD),
    ("c45a", ORPHAN),               # only one session starts with it
    ("c45af7b1/af1", ORPHAN),
])
def test_resolution(typed, expected):
    assert resolve_session_prefix(typed, IDS) == expected


@pytest.mark.parametrize("typed", ["zz", "", "7f2abd2d/zz", "nope/0c4c", "7f2abd2d/", "/0c4c", "7f/0c/x"])
def test_nothing_matches_is_a_typed_error(typed):
    with pytest.raises(UnknownSessionPrefixError) as caught:
        resolve_session_prefix(typed, IDS)
    assert str(caught.value) == f"no session matches {typed!r}"


def test_an_ambiguous_prefix_names_the_candidates():
    with pytest.raises(AmbiguousSessionPrefixError) as caught:
        resolve_session_prefix("019cadb4", IDS)
    assert caught.value.candidates == [TWIN_A, TWIN_B]
    # A prefix shared by two unrelated trees is ambiguous too; the subagent is named as lists show it.
    with pytest.raises(AmbiguousSessionPrefixError) as caught:
        resolve_session_prefix("7f2abd2d", [*IDS, "7f2abd2d-other"])
    assert caught.value.candidates == ["7f2abd2d-7/0c4c3cf8", PARENT, "7f2abd2d-other"]


def test_every_short_form_resolves_back():
    short = short_session_ids(IDS)
    assert short[PARENT] == "7f2abd2d" and short[CHILD] == "7f2abd2d/0c4c3cf8"
    assert short[ORPHAN] == "c45af7b1/af1ff21"
    for session_id, form in short.items():
        assert resolve_session_prefix(form, IDS) == session_id


# --------------------------------------------------------------------------- the edges


def test_cli_show_and_list(db):
    data = json.loads(run_cli(db, "show", "7f2abd2d", "--json").stdout)
    assert data["header"]["id"] == PARENT
    data = json.loads(run_cli(db, "show", "7f2abd2d/0c4c3cf8", "--json").stdout)
    assert data["header"]["id"] == CHILD
    result = run_cli(db, "show", "019cadb4", code=1, one_error_line=True)
    assert "ambiguous" in result.stderr and TWIN_A in result.stderr
    listed = run_cli(db, "list", "--all").stdout
    assert "7f2abd2d/0c4c3cf8 " in listed and "c45af7b1/af1ff21 " in listed
    firsts = [line.split()[0] for line in listed.splitlines()[1:]]
    # The subagent's row right after its parent's (it was stored later, so newest-first put it before).
    assert firsts.index("7f2abd2d/0c4c3cf8") == firsts.index("7f2abd2d") + 1
    for line in listed.splitlines()[1:]:
        assert line.split()[0] in {"7f2abd2d", "7f2abd2d/0c4c3cf8", "c45af7b1/af1ff21",
                                   "019cadb4-0000-7000-8000-00000000000a", "019cadb4-0000-7000-8000-00000000000b"}


@pytest.mark.parametrize("columns", ["60", "100"])
@pytest.mark.parametrize("full", [False, True])
def test_cli_list_never_cuts_an_id_silently(db, monkeypatch, columns, full):
    """Each id cell is the whole printed form (short, or whole with --full-ids), or cut with "…"."""
    monkeypatch.setenv("COLUMNS", columns)
    listed = run_cli(db, "list", "--all", *(["--full-ids"] if full else [])).stdout
    rows = [line for line in listed.splitlines()[1:] if line.strip()]
    forms = set(IDS) if full else set(short_session_ids(IDS).values())
    assert len(rows) == len(IDS)
    for line in rows:
        cell = line.split()[0]
        assert cell in forms or cell.endswith("…"), line


def test_viewer_redirects_a_prefix_and_parent_slash_agent(db):
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from sessiontree.web.app import create_app

    store = open_store(db, create=False, readonly=True)
    try:
        client = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
        got = client.get("/s/7f2abd2d", follow_redirects=False)
        assert got.status_code == 302 and got.headers["location"] == f"/s/{PARENT}"
        got = client.get("/s/7f2abd2d/0c4c3cf8", follow_redirects=False)
        assert got.status_code == 302 and got.headers["location"] == f"/s/{CHILD}"
        got = client.get("/s/7f2abd2d/compare", follow_redirects=False)
        assert got.status_code == 302 and got.headers["location"] == f"/s/{PARENT}/compare"
        got = client.get("/s/019cadb4", follow_redirects=False)
        assert got.status_code == 404 and TWIN_A in got.text
        assert client.get("/s/zz", follow_redirects=False).status_code == 404
    finally:
        store.close()


def test_mcp_takes_the_same_forms(db):
    from mcp import Client

    from sessiontree.mcpserver.server import build_server

    store = open_store(db, create=False, readonly=True)

    async def main() -> list:
        async with Client(build_server(store)) as client:
            return [await client.call_tool("get_session", {"session_id": typed})
                    for typed in ("7f2abd2d", "7f2abd2d/0c4c3cf8", "019cadb4")]

    try:
        parent, child, twin = anyio.run(main)
    finally:
        store.close()
    assert not parent.is_error and parent.structured_content["header"]["id"] == PARENT
    assert not child.is_error and child.structured_content["header"]["id"] == CHILD
    assert twin.is_error and "ambiguous" in twin.content[0].text


def test_compare_takes_the_same_forms(db):
    from sessiontree.diff import DiffInputError, diff_branches

    store = open_store(db, create=False, readonly=True)
    try:
        with pytest.raises(DiffInputError, match=f"session {PARENT} has 1 branch"):
            diff_branches(store, "7f2abd2d", None, None)
        with pytest.raises(DiffInputError, match="ambiguous"):
            diff_branches(store, "019cadb4", None, None)
    finally:
        store.close()
