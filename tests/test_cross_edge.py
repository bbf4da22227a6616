"""The three edges answer the same questions alike (issue 40 item 3): the CLI, the viewer
(Starlette ``TestClient``) and MCP (``SessionReader``) over one SQLite store are asked for a
session by id prefix, for a filtered listing and for a search.

Synthetic sessions (no real file holds sessions of chosen projects and days): the expected
answers are counted by hand from the records below, and each edge must give them:

* A: ``/proj/app``, active on 2026-03-01 only; says "jitter".
* B: ``/proj/app``, created 2026-02-01, last active 2026-03-05; says "jitter".
* C: ``/proj/app/sub`` (a subfolder: not ``/proj/app`` by rule L.18), active 2026-03-05.
* D: ``/other``, active 2026-03-06; says "jitter".

A and B share the id prefix ``019cadb4-6e80-7a3c-9b1d-0000000000a``; C alone starts ``019cadb5``.
"""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from builders import header
from cli_support import run_cli, run_cli_json
from sessiontree.errors import SearchCursorError
from sessiontree.mcpserver.tools import SessionReader, ToolInputError
from sessiontree.stores import open_store

pytest.importorskip("starlette")
from starlette.testclient import TestClient

from sessiontree.web.app import create_app

A = "019cadb4-6e80-7a3c-9b1d-0000000000a1"
B = "019cadb4-6e80-7a3c-9b1d-0000000000a2"
C = "019cadb5-6e80-7a3c-9b1d-0000000000c3"
D = "019cadb6-6e80-7a3c-9b1d-0000000000d4"
SHARED = "019cadb4-6e80-7a3c-9b1d-0000000000a"


def _user(entry_id: str, parent: str | None, when: str, text: str) -> dict[str, Any]:
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": when,
            "message": {"role": "user", "content": text}}


def _sessions() -> list[list[dict[str, Any]]]:
    return [
        [header(A, "/proj/app", "2026-03-01T09:00:00.000Z"),
         _user("a1", None, "2026-03-01T09:00:01.000Z", "add jitter to the retry")],
        [header(B, "/proj/app", "2026-02-01T09:00:00.000Z"),
         _user("b1", None, "2026-02-01T09:00:01.000Z", "plan the parser"),
         _user("b2", "b1", "2026-03-05T10:00:00.000Z", "now the jitter tests")],
        [header(C, "/proj/app/sub", "2026-03-05T09:00:00.000Z"),
         _user("c1", None, "2026-03-05T09:00:01.000Z", "a subfolder session")],
        [header(D, "/other", "2026-03-06T09:00:00.000Z"),
         _user("d1", None, "2026-03-06T09:00:01.000Z", "jitter elsewhere")],
    ]


@pytest.fixture
def edges(tmp_path: Path) -> Any:
    db = str(tmp_path / "sessions.db")
    store = open_store(db)
    for records in _sessions():
        store.create(records[0], records[1:])
    store.close()
    reader_store = open_store(db, readonly=True)
    client = TestClient(create_app(reader_store), base_url="http://127.0.0.1:8765")
    yield db, client, SessionReader(reader_store)
    reader_store.close()


def _page_ids(html: str) -> list[str]:
    """Session ids the list page links to, in order, once each."""
    seen: list[str] = []
    for found in re.findall(r'href="/s/([0-9a-f-]{36})"', unescape(html)):
        if found not in seen:
            seen.append(found)
    return seen


def test_an_id_prefix_names_the_same_session_everywhere(edges: Any) -> None:
    db, client, reader = edges
    assert run_cli_json(db, "show", "019cadb5")["header"]["id"] == C
    response = client.get("/s/019cadb5", follow_redirects=False)
    assert (response.status_code, response.headers["location"]) == (302, f"/s/{C}")
    assert reader.resolve_session("019cadb5") == C
    # Ambiguous everywhere: a user error at the CLI, 404 in the viewer, a tool input error in MCP.
    assert "ambiguous" in run_cli(db, "show", SHARED, code=1).stderr.lower()
    assert client.get(f"/s/{SHARED}", follow_redirects=False).status_code == 404
    with pytest.raises(ToolInputError, match=r"(?i)ambiguous"):
        reader.resolve_session(SHARED)


def test_a_listing_filter_means_the_same_everywhere(edges: Any) -> None:
    """cwd is the project directory (C in its subfolder is not), since is on the last activity
    (B, created in February, was active on 2026-03-05; A was not after 03-01)."""
    db, client, reader = edges
    cli = [row["id"] for row in run_cli_json(db, "list", "--cwd", "/proj/app", "--since", "2026-03-02")]
    viewer = _page_ids(client.get("/", params={"project": "/proj/app", "since": "2026-03-02"}).text)
    mcp = [row["id"] for row in reader.list_sessions(cwd="/proj/app", since="2026-03-02")["sessions"]]
    assert cli == viewer == mcp == [B]
    # Without since: both of /proj/app, newest activity first.
    assert [row["id"] for row in run_cli_json(db, "list", "--cwd", "/proj/app")] == [B, A]
    assert _page_ids(client.get("/", params={"project": "/proj/app"}).text) == [B, A]
    assert [row["id"] for row in reader.list_sessions(cwd="/proj/app")["sessions"]] == [B, A]


def test_a_search_finds_the_same_everywhere(edges: Any) -> None:
    db, client, reader = edges
    cli = run_cli_json(db, "search", "jitter")["hits"]
    mcp = reader.search_sessions("jitter")["hits"]
    assert sorted((h["sessionId"], h["entryId"]) for h in cli) == sorted(
        (h["sessionId"], h["entryId"]) for h in mcp) == [(A, "a1"), (B, "b2"), (D, "d1")]
    assert sorted(_page_ids(client.get("/", params={"q": "jitter"}).text)) == sorted([A, B, D])
    # The same filters on the search: one project.
    cli_app = {h["sessionId"] for h in run_cli_json(db, "search", "jitter", "--cwd", "/proj/app")["hits"]}
    mcp_app = {h["sessionId"] for h in reader.search_sessions("jitter", cwd="/proj/app")["hits"]}
    viewer_app = set(_page_ids(client.get("/", params={"q": "jitter", "project": "/proj/app"}).text))
    assert cli_app == mcp_app == viewer_app == {A, B}


def test_an_unknown_prefix_is_refused_alike_everywhere(edges: Any) -> None:
    """No session starts ``019caff``: a typed "no session" error at every edge (not an
    ambiguity, not an empty answer)."""
    db, client, reader = edges
    assert "no session matches" in run_cli(db, "show", "019caff", code=1).stderr
    refused = client.get("/s/019caff", follow_redirects=False)
    assert (refused.status_code, refused.text) == (404, "No such session")
    with pytest.raises(ToolInputError, match="no session matches"):
        reader.resolve_session("019caff")
    with pytest.raises(ToolInputError, match="no session matches"):
        reader.get_context("019caff")


def test_the_compare_page_takes_the_prefix_the_session_page_takes(edges: Any) -> None:
    """Issue 40: the compare page refused a prefix the session page accepted; both now
    redirect by the one rule, and refuse an ambiguous one alike."""
    _db, client, _reader = edges
    response = client.get("/s/019cadb5/compare", params={"view": "raw"}, follow_redirects=False)
    assert (response.status_code, response.headers["location"]) == (302, f"/s/{C}/compare?view=raw")
    assert client.get(f"/s/{SHARED}/compare", follow_redirects=False).status_code == 404


def test_since_alone_bounds_the_last_activity_everywhere(edges: Any) -> None:
    """since 2026-03-05 keeps B (active 03-05 10:00), C (03-05 09:00) and D (03-06), not A
    (03-01); newest activity first: D, B, C."""
    db, client, reader = edges
    cli = [row["id"] for row in run_cli_json(db, "list", "--since", "2026-03-05")]
    viewer = _page_ids(client.get("/", params={"since": "2026-03-05"}).text)
    mcp = [row["id"] for row in reader.list_sessions(since="2026-03-05")["sessions"]]
    assert cli == viewer == mcp == [D, B, C]


def _cli_pages(db: str, *words: str, cursor: str | None = None) -> tuple[list[str], str | None]:
    """One CLI page of one hit: its session ids and its nextCursor."""
    data = run_cli_json(db, "search", *words, "-n", "1", *(["--cursor", cursor] if cursor else []))
    return [h["sessionId"] for h in data["hits"]], data["nextCursor"]


def _mcp_page(reader: SessionReader, cursor: str | None) -> tuple[list[str], str | None]:
    page = reader.search_sessions("jitter", limit=1, cursor=cursor)
    return [h["sessionId"] for h in page["hits"]], page.get("nextCursor")


_CURSOR = re.compile(r'href="\?[^"]*cursor=([^"&]+)[^"]*"[^>]*>more matches')


def _viewer_page(client: TestClient, cursor: str | None) -> tuple[list[str], str | None]:
    """One viewer page of one session: its session ids and the cursor its "more" link carries."""
    html = client.get("/", params={"q": "jitter", "per_page": 1, **({"cursor": cursor} if cursor else {})}).text
    found = _CURSOR.search(unescape(html))
    return _page_ids(html), found.group(1) if found else None


def _all_pages(page: Any, limit: int = 10) -> list[str]:
    seen: list[str] = []
    cursor = None
    for _ in range(limit):
        ids, cursor = page(cursor)
        seen += ids
        if cursor is None:
            break
    return seen


def test_a_search_pages_to_the_same_order_everywhere(edges: Any) -> None:
    """The CLI's and MCP's one hit per page and the viewer's one session per page, each
    followed by its cursor, give the same sessions in the same order as one whole search:
    A, B and D say "jitter" (the records above), each once."""
    db, client, reader = edges
    whole = [h["sessionId"] for h in run_cli_json(db, "search", "jitter")["hits"]]
    cli = _all_pages(lambda cursor: _cli_pages(db, "jitter", cursor=cursor))
    mcp = _all_pages(lambda cursor: _mcp_page(reader, cursor))
    viewer = _all_pages(lambda cursor: _viewer_page(client, cursor))
    assert sorted(whole) == [A, B, D]
    assert whole == cli == mcp == viewer


def test_a_cursor_survives_an_append_between_pages(edges: Any) -> None:
    """After the first page, D gains an entry saying "jitter" twice (a better hit than every
    other: it ranks first). The next pages continue after the hit page one ended with, at
    every edge: the new hit (above the cursor) is not shown, no older hit repeats or is
    skipped. An offset would have shown page one's hit again."""
    db, client, reader = edges
    first_cli, cli_cursor = _cli_pages(db, "jitter")
    first_mcp, mcp_cursor = _mcp_page(reader, None)
    first_viewer, viewer_cursor = _viewer_page(client, None)
    assert first_cli == first_mcp == first_viewer and len(first_cli) == 1
    whole_before = [h["sessionId"] for h in run_cli_json(db, "search", "jitter")["hits"]]
    store = open_store(db)
    try:
        store.append(first_cli[0], [_user("new", None, "2026-03-07T09:00:00.000Z", "jitter jitter")])
    finally:
        store.close()
    cli = first_cli + _all_pages_from(lambda cursor: _cli_pages(db, "jitter", cursor=cursor), cli_cursor)
    mcp = first_mcp + _all_pages_from(lambda cursor: _mcp_page(reader, cursor), mcp_cursor)
    viewer = first_viewer + _all_pages_from(lambda cursor: _viewer_page(client, cursor), viewer_cursor)
    assert cli == mcp == viewer == whole_before
    # The new hit is there for a search from the start: it ranks first.
    assert run_cli_json(db, "search", "jitter", "-n", "1")["hits"][0]["entryId"] == "new"


def _all_pages_from(page: Any, cursor: str | None) -> list[str]:
    seen: list[str] = []
    for _ in range(10):
        if cursor is None:
            break
        ids, cursor = page(cursor)
        seen += ids
    return seen


def test_a_tampered_cursor_is_refused_alike_everywhere(edges: Any) -> None:
    """A cursor edited by one character, and one made for another query: the same typed
    error (an invalid search cursor) at the CLI (a usage error of --cursor), the viewer
    (400 with the message) and MCP (SearchCursorError, a tool error)."""
    db, client, reader = edges
    _ids, cursor = _cli_pages(db, "jitter")
    assert cursor is not None
    edited = cursor[:-2] + ("A" if cursor[-2] != "A" else "B") + cursor[-1]
    other = run_cli_json(db, "search", "the", "-n", "1")["nextCursor"]  # three entries say "the"
    assert other is not None
    for bad in (edited, other, "not a cursor"):
        refused = run_cli(db, "search", "jitter", "-n", "1", "--cursor", bad, code=2)
        assert "invalid search cursor" in refused.stderr and "--cursor" in refused.stderr
        page = client.get("/", params={"q": "jitter", "per_page": 1, "cursor": bad})
        assert page.status_code == 400 and "invalid search cursor" in unescape(page.text)
        with pytest.raises(SearchCursorError, match="invalid search cursor"):
            reader.search_sessions("jitter", limit=1, cursor=bad)


def test_an_entry_prefix_is_resolved_and_refused_alike_everywhere(edges: Any) -> None:
    """Session B holds the entries ``b1`` and ``b2`` (the records above): ``b`` names both
    (ambiguous, both named), ``zz`` none, ``b2`` one; the one entry-prefix rule
    (format/idprefix.py) at the CLI (``show --entry``), the viewer's compare page (its leaves)
    and MCP (``get_context``'s leaf)."""
    db, client, reader = edges
    ambiguous = [run_cli(db, "show", B, "--entry", "b", code=1).stderr,
                 client.get(f"/s/{B}/compare", params={"a": "b"}).text]
    with pytest.raises(ToolInputError) as refused:
        reader.get_context(B, leaf="b")
    ambiguous.append(str(refused.value))
    for message in ambiguous:
        assert "prefix 'b' is ambiguous: it matches b1, b2" in message, message
    unknown = [run_cli(db, "show", B, "--entry", "zz", code=1).stderr,
               client.get(f"/s/{B}/compare", params={"a": "zz"}).text]
    with pytest.raises(ToolInputError) as refused:
        reader.get_context(B, leaf="zz")
    unknown.append(str(refused.value))
    for message in unknown:
        assert re.search(r"no entry( of (this session|session [0-9a-f-]+))? matches 'zz'", message), message
    # A unique prefix: the same entry everywhere.
    assert "b2" in run_cli(db, "show", B, "--entry", "b2").stdout
    assert client.get(f"/s/{B}/compare", params={"a": "b1", "b": "b2"}).status_code == 200
    assert reader.get_context(B, leaf="b2")["leafId"] == "b2"


def test_an_mcp_page_cut_by_its_budget_continues_after_its_last_hit(edges: Any) -> None:
    """MCP cuts a page by ``max_chars`` too: the cursor it then gives continues after the
    last hit it showed (``SearchResult.cursor_after``), not after the last hit it was given.
    A, C and D each get an entry saying "padding" 20 times, so one hit fills most of a
    1,400-character answer (three pages of one hit); the pages joined are the CLI's whole search, each hit once."""
    db, _client, reader = edges
    store = open_store(db)
    try:
        for session in (A, C, D):
            store.append(session, [_user(f"long-{session[-2:]}", None, "2026-03-08T09:00:00.000Z",
                                         "the " + "padding " * 20)])
    finally:
        store.close()
    whole = [(h["sessionId"], h["entryId"]) for h in run_cli_json(db, "search", "padding")["hits"]]
    assert len(whole) == 3
    paged: list[tuple[str, str]] = []
    pages = 0
    cursor = None
    for _ in range(6):
        page = reader.search_sessions("padding", limit=3, max_chars=1400, cursor=cursor)
        paged += [(h["sessionId"], h["entryId"]) for h in page["hits"]]
        pages += 1
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert pages > 1 and paged == whole  # cut by the budget, not by the limit of 3
