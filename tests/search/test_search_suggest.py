"""Search that helps (issue 41 item 5; docs/search.md, "Suggestions"): a query with no hit gets
up to three close queries made of the stored words, on every store and at every edge.

The sessions are the real pi file ``pi-mono-before-compaction.jsonl`` of ``../shared/corpus``:
by a count of the raw file (``grep -o -i compaction``), "compaction" occurs 1,268 times in it and
neither "compacton" nor "compactoin" occurs at all.
"""

from __future__ import annotations

import json

import anyio
import pytest

import corpus
from cli_support import run_cli
from sessiontree.session.manager import SessionManager
from sessiontree.stores import open_store
from support import make_store

FILE = corpus.shared("pi-v1/pi-mono-before-compaction.jsonl")

pytestmark = pytest.mark.skipif(not FILE.is_file(), reason="the shared corpus is not beside the checkout")


def _fill(store):
    SessionManager.import_from_jsonl(str(FILE), None, store)
    return store


def _suggest(store, query, **scope):
    from sessiontree.search.suggest import suggest

    return suggest(store, query, **scope)


@pytest.mark.parametrize("kind", ["memory", "jsonl", "sqlite"])
def test_a_typo_gets_the_stored_word_on_every_store(kind, tmp_path):
    store = _fill(make_store(kind, tmp_path))
    try:
        assert not store.search("compacton", limit=1)
        found = _suggest(store, "compacton")
        assert found[0] == "compaction" and len(found) <= 3
        for text in found:
            assert store.search(text, limit=1), text  # every suggestion finds something
        assert _suggest(store, "qqxqqzqq") == []  # nothing near: nothing offered
    finally:
        store.close()


def test_only_the_unknown_term_is_replaced(tmp_path):
    store = _fill(make_store("sqlite", tmp_path))
    try:
        assert _suggest(store, "compactoin")[0] == "compaction"
        # A term that finds something stays as typed; only the unknown one is replaced.
        assert _suggest(store, "compacton session")[0] == "compaction session"
        assert _suggest(store, "compacton qqxqqzqq") == []
    finally:
        store.close()


@pytest.mark.postgres
def test_postgres_gives_the_best_suggestion_too(pg_url):
    from sessiontree.stores.postgres.store import PostgresStore

    store = _fill(PostgresStore(pg_url))
    try:
        # Its own ranking picks the hits whose words are read, so the later suggestions may
        # differ from a scan's; the best one does not.
        assert _suggest(store, "compacton")[0] == "compaction"
        assert _suggest(store, "compactoin")[0] == "compaction"
        assert _suggest(store, "compacton session")[0] == "compaction session"
        assert _suggest(store, "qqxqqzqq") == []
    finally:
        store.close()


def test_the_scope_of_the_search_applies(tmp_path):
    store = _fill(make_store("memory", tmp_path))
    assert _suggest(store, "compacton", cwd="/nowhere/else") == []


@pytest.fixture
def db(tmp_path) -> str:
    path = str(tmp_path / "s.db")
    run_cli(path, "import", str(FILE))
    return path


def test_cli_says_did_you_mean(db):
    out = run_cli(db, "search", "compacton").stdout
    assert out.startswith("No matches. Did you mean compaction")
    data = json.loads(run_cli(db, "search", "compacton", "--json").stdout)
    assert data["hits"] == [] and data["suggestions"][0] == "compaction"
    assert "suggestions" not in json.loads(run_cli(db, "search", "compaction", "-n", "1", "--json").stdout)


def test_mcp_answers_with_suggestions(db):
    from mcp import Client

    from sessiontree.mcpserver.server import build_server

    store = open_store(db, create=False, readonly=True)

    async def main():
        async with Client(build_server(store)) as client:
            return await client.call_tool("search_sessions", {"query": "compacton"})

    try:
        result = anyio.run(main)
    finally:
        store.close()
    assert not result.is_error
    assert result.structured_content["suggestions"][0] == "compaction"
    assert "did you mean compaction" in result.content[0].text.splitlines()[0]


def test_viewer_links_the_suggestions(db):
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from sessiontree.web.app import create_app

    store = open_store(db, create=False, readonly=True)
    try:
        page = TestClient(create_app(store), base_url="http://127.0.0.1:8765").get("/?q=compacton").text
    finally:
        store.close()
    assert "No sessions match. Did you mean" in page
    assert '<a class="suggestion" href="?q=compaction">compaction</a>' in page
