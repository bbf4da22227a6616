"""The viewer without a browser: view models, escaping, the server's guards, the HTML export."""

from __future__ import annotations

import re
import types
from html import unescape
from html.parser import HTMLParser
from urllib.parse import quote

import pytest

import corpus

pytest.importorskip("starlette")
from starlette.testclient import TestClient

from sessiontree import MemoryStore, SessionManager
from sessiontree.format.codec import read_session_file
from sessiontree.web import page
from sessiontree.web import views as view
from sessiontree.web.app import ViewerConfig, create_app
from sessiontree.web.views import conversation as conversation_view
from sessiontree.web.views import listing as listing_view
from sessiontree.web.views import tree as tree_view
from web_support import CORPUS, EVIL_ID, EXAMPLES, HOSTILE_ID, add_evil_session, add_hostile_session


def _manager(name: str) -> SessionManager:
    parsed = read_session_file(EXAMPLES / name)
    return SessionManager.in_memory(parsed.header.get("cwd"), entries=[parsed.header, *parsed.entries])


@pytest.fixture
def examples_store():
    s = MemoryStore()
    for name in ("branching.jsonl", "compaction.jsonl", "interrupted.jsonl"):
        SessionManager.import_from_jsonl(EXAMPLES / name, None, s)
    add_hostile_session(s)
    return s


@pytest.fixture
def client(examples_store):
    return TestClient(create_app(examples_store), base_url="http://127.0.0.1:8765")


# --------------------------------------------------------------------------- view models


def test_tree_rows_mark_branches_labels_leaf_and_path():
    tree = view.build_tree_data(_manager("branching.jsonl"))
    rows = {r[0]: r for r in tree.rows}
    assert rows["a1000005"][4] & view.F_BRANCH_POINT and rows["a1000005"][5] == "two-options"
    assert rows["a1000006"][4] & view.F_BRANCH_START and rows["a1000006"][1] == 1
    assert not rows["a1000006"][4] & view.F_ACTIVE
    assert rows["a100000e"][4] & view.F_LEAF and rows["a1000008"][4] & view.F_BRANCH_SUMMARY
    # The abandoned branch's tip is a1000007; entries on the active path select the active leaf.
    assert tree.rows[rows["a1000006"][8]][0] == "a1000007"
    assert tree.rows[rows["a1000002"][8]][0] == "a100000e"
    # subtree_end covers every descendant.
    assert rows["a1000005"][7] == len(tree.rows) - 1


@pytest.mark.parametrize("path", [EXAMPLES / "branching.jsonl", EXAMPLES / "compaction.jsonl",
                                  EXAMPLES / "interrupted.jsonl",
                                  pytest.param(CORPUS / "pi-v1" / "pi-mono-before-compaction.jsonl",
                                               marks=corpus.NEEDS_SHARED)], ids=lambda p: p.name)
def test_tree_layout_over_positions_equals_the_general_layout(path):
    # build_tree_data lays out over entry positions; the TreeNode layout is the general
    # path it falls back to (cycles). Both must give the same rows wherever both apply.
    manager = SessionManager.from_parsed(read_session_file(path))
    fast = view.build_tree_data(manager).rows
    assert fast == tree_view._build_tree_data_nodes(manager).rows
    assert len(fast) == len(manager.get_entries())


def test_tree_layout_of_a_session_with_a_parent_cycle_takes_the_general_path():
    entry = {"type": "custom", "customType": "step", "timestamp": "2026-01-01T00:00:00.000Z"}
    header = {"type": "session", "version": 4, "id": "cyc", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/tmp"}
    entries = [{**entry, "id": "r", "parentId": None}, {**entry, "id": "c", "parentId": "r"},
               {**entry, "id": "x", "parentId": "y"}, {**entry, "id": "y", "parentId": "x"}]
    manager = SessionManager.in_memory("/tmp", entries=[header, *entries])
    rows = view.build_tree_data(manager).rows
    # x and y hang from each other (docs/rules/tree.md): no root reaches them, so the
    # position layout gives up and the general one decides what is drawn.
    assert rows == tree_view._build_tree_data_nodes(manager).rows
    assert [r[0] for r in rows][:2] == ["r", "c"]


def test_tree_layout_is_iterative_on_a_deep_chain():
    m = SessionManager.in_memory("/tmp")
    for i in range(30_000):  # far beyond Python's recursion limit
        m.append_custom_entry("step", {"i": i})
    tree = view.build_tree_data(m)
    assert len(tree.rows) == 30_000 and tree.rows[-1][1] == 0 and tree.rows[0][7] == 29_999


def test_raw_view_pairs_tool_calls_with_results():
    conv = view.build_conversation(_manager("branching.jsonl"), None, "raw")
    tools = [p for item in conv.items for p in item.parts if p.kind == "tool"]
    assert [t.name for t in tools] == ["read", "edit"]
    assert all(t.result is not None and t.result.kind == "toolResult" for t in tools)
    assert "toolResult" not in [i.kind for i in conv.items]  # nested under their calls


def test_model_view_marks_compaction_kept_tail_and_synthetic_results():
    conv = view.build_conversation(_manager("compaction.jsonl"), None, "model")
    kinds = [i.kind for i in conv.items]
    assert kinds[0] == "compacted" and "compaction" in kinds
    assert any(("kept", "kept tail of boundary b1000009") in i.marks for i in conv.items)
    conv = view.build_conversation(_manager("interrupted.jsonl"), None, "model")
    call = next(p for i in conv.items for p in i.parts if p.kind == "tool")
    assert call.result is not None and call.result.marks[0][0] == "synthetic"
    raw = view.build_conversation(_manager("interrupted.jsonl"), None, "raw")
    assert next(p for i in raw.items for p in i.parts if p.kind == "tool").result is None


def test_model_view_marks_context_edits():
    m = SessionManager.in_memory("/tmp")
    first = m.append_message({"role": "user", "content": "secret", "timestamp": 1})
    second = m.append_message({"role": "user", "content": "long", "timestamp": 2})
    edit1 = m.append_context_edit(first, None)
    edit2 = m.append_context_edit(second, {"content": "short"})
    conv = view.build_conversation(m, None, "model")
    omitted = next(i for i in conv.items if i.id == first)
    assert omitted.kind == "omitted" and ("edit", f"omitted by context edit {edit1}") in omitted.marks
    replaced = next(i for i in conv.items if i.id == second)
    assert ("edit", f"content replaced by context edit {edit2}") in replaced.marks
    assert replaced.parts[0].text == "short"


def test_retired_records_are_archival_in_both_views():
    m = SessionManager.in_memory("/tmp", entries=[
        {"type": "session", "version": 4, "id": "s1", "createdAt": "2026-01-01T00:00:00.000Z", "cwd": "/tmp"},
        {"type": "message", "id": "a0000001", "parentId": None, "timestamp": "2026-01-01T00:00:01.000Z",
         "message": {"role": "user", "content": "hi", "timestamp": 1}},
        {"type": "compaction", "id": "a0000002", "parentId": "a0000001", "timestamp": "2026-01-01T00:00:02.000Z",
         "summary": "old summary", "firstKeptEntryId": "a0000001", "tokensBefore": 5},
    ])
    for which in ("raw", "model"):
        item = next(i for i in view.build_conversation(m, None, which).items if i.id == "a0000002")
        assert item.kind == "retired" and item.marks[0][0] == "archival"
    assert view.build_tree_data(m).rows[1][4] & view.F_RETIRED


def test_images_only_as_raster_data_urls():
    assert conversation_view._image_part({"mimeType": "image/png", "data": "iVBORw0KGgo="}).src.startswith("data:image/png;base64,")
    assert conversation_view._image_part({"mimeType": "image/svg+xml", "data": "PHN2Zz4="}).src is None
    assert conversation_view._image_part({"mimeType": "image/png", "data": "\"><script>"}).src is None


def test_markdown_has_no_raw_html_and_no_javascript_links():
    html = view.markdown_html('<b>x</b> [a](javascript:alert(1)) [b](https://example.org)')
    assert "<b>" not in html and "&lt;b&gt;" in html
    assert 'href="javascript:' not in html and 'href="https://example.org"' in html


# --------------------------------------------------------------------------- list


def test_list_filters_sort_and_fallback_search(examples_store):
    rows = view.build_list_page(examples_store, view.ListQuery()).rows
    assert [r.info.id for r in rows][:1] and len(rows) == 4
    named = view.build_list_page(examples_store, view.ListQuery(named=True))
    assert {r.info.id for r in named.rows} == {"019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01", HOSTILE_ID}
    found = view.build_list_page(examples_store, view.ListQuery(q="units flag"))
    assert found.search_mode == "store" and [r.info.id[:8] for r in found.rows] == ["019cadc9"]
    proj = view.build_list_page(examples_store, view.ListQuery(project="/home/dev/projects/weather-app"))
    # Stats columns come from sessiontree.usage.session_stats: the weather-app sessions'
    # assistant turns are anthropic/claude-sonnet-4-5 calls.
    assert proj.total == 2 and proj.has_stats
    assert all(row.stats and row.stats["models"] == ["anthropic/claude-sonnet-4-5"] for row in proj.rows)
    paged = view.build_list_page(examples_store, view.ListQuery(per_page=3, page=2))
    assert paged.pages == 2 and len(paged.rows) == 1


def test_list_uses_store_search_and_stats_hooks(examples_store, monkeypatch):
    examples_store.search = lambda q, **options: [
        types.SimpleNamespace(session_id="019cadd2-8a00-7c1f-a2b3-5c6d7e8f9003", snippet="hit")]
    monkeypatch.setattr(listing_view, "session_stats",
                        lambda st, ids, **marks: {i: {"entries": 3, "models": ["m1"], "tokens": 1234, "cost": 0.5}
                                         for i in ids})
    result = view.build_list_page(examples_store, view.ListQuery(q="anything"))
    assert result.search_mode == "store" and result.has_stats and result.rows[0].snippet == "hit"
    html = page.environment().get_template("list.html").render(page=result, q=result.query, inline=False,
                                                               token_query="", page_query=lambda n: "")
    assert "1,234" in html and "$0.50" in html and "m1" in html


# --------------------------------------------------------------------------- server


def test_pages_and_security_headers(client):
    r = client.get("/")
    assert r.status_code == 200 and "Fix 500 on city names" in r.text
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'none'" in csp
    assert r.headers["x-content-type-options"] == "nosniff"
    r = client.get("/s/019cadb4")  # a unique prefix redirects
    assert r.status_code == 200 and 'id="tree-data"' in r.text and "a1000007" in r.text
    assert client.get("/s/019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01/conversation?leaf=a1000007").text.count(
        ' id="a1000007"') == 1
    state = client.get("/s/019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01/state.json").json()
    assert state["entries"] == 14 and state["leaf"] == "a100000e"
    assert client.get("/s/nope").status_code == 404
    assert client.get("/s/019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01/conversation?leaf=zzz").status_code == 404
    assert client.get("/static/app.js").status_code == 200


def test_read_only_and_host_checked(client):
    for method in ("post", "put", "delete", "patch"):
        assert getattr(client, method)("/").status_code == 405
    assert client.get("/", headers={"Host": "attacker.example"}).status_code == 400
    assert client.get("/", headers={"Host": "localhost:8765"}).status_code == 200


def test_token_required_when_set(examples_store):
    c = TestClient(create_app(examples_store, ViewerConfig("192.0.2.10", 8765, "s3cret")), base_url="http://192.0.2.10:8765")
    assert c.get("/").status_code == 403
    assert c.get("/?token=wrong").status_code == 403
    r = c.get("/?token=s3cret")
    assert r.status_code == 200 and "HttpOnly" in r.history[0].headers["set-cookie"]
    assert c.get("/s/019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01").status_code == 200  # the cookie carries it


def test_hostile_content_is_escaped_everywhere(client):
    for url in ("/", f"/s/{HOSTILE_ID}", f"/s/{HOSTILE_ID}?view=model", f"/s/{HOSTILE_ID}/conversation"):
        text = client.get(url).text
        assert "window.__pwned" not in re.sub(r"&[a-z#0-9]+;", "", text) or "<script>window" not in text
        assert "<script>window" not in text and "<img src=x" not in text and "<img src=z" not in text
        assert 'href="javascript:' not in text and "<iframe" not in text
    text = client.get(f"/s/{HOSTILE_ID}").text
    assert "&lt;script&gt;window.__pwned" in text
    # The tree JSON is inside a <script> element: no "</script>" may close it early.
    data = text.split('id="tree-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data


# --------------------------------------------------------------------------- export


def test_export_is_self_contained(tmp_path):
    html = page.render_session_document(_manager("branching.jsonl"))
    assert "<link" not in html.replace('<link rel="icon" href="data:,">', "")
    assert not re.search(r'(src|href)="(https?:|//|/static)', html)
    csp = unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1))
    assert "default-src 'none'" in csp and "script-src 'sha256-" in csp and "unsafe-inline" not in csp
    # Both branches, both views, are inside: the active branch's raw view once, in the
    # pane (the script keeps it as its template), the other three as templates.
    assert html.count("<template data-leaf=") == 3 and 'data-leaf="a1000007"' in html
    assert html.count('class="conv-head"') == 4


def test_export_cli(tmp_path):
    from click.testing import CliRunner

    from sessiontree.cli import cli

    db = tmp_path / "s.db"
    runner = CliRunner()
    assert runner.invoke(cli, ["--store", str(db), "import", str(EXAMPLES)]).exit_code == 0
    out = tmp_path / "page.html"
    result = runner.invoke(cli, ["--store", str(db), "export", "019cadb4", "--format", "html", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("<!doctype html>") and "Fix 500 on city names" in out.read_text()


def test_serve_refuses_non_loopback_without_expose():
    from click.testing import CliRunner

    from sessiontree.cli import cli

    result = CliRunner().invoke(cli, ["--store", "memory:", "serve", "--host", "0.0.0.0"])
    assert result.exit_code == 1 and "--expose" in result.output


# --------------------------------------------------------------------------- security (docs/viewer.md "Security")


class _Markup(HTMLParser):
    """Every start tag of a page, to find markup the session text could have added."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


_SAFE_IMG = re.compile(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/]*={0,2}")


def _unsafe_markup(html: str) -> list:
    """Elements or attributes no page of the viewer has on its own: event handlers, style
    attributes, frames, SVG, scripts other than ours, images other than raster data: URLs,
    links with a scheme other than http(s)."""
    parser = _Markup()
    parser.feed(html)
    bad = []
    for tag, attrs in parser.tags:
        bad += [(tag, k) for k in attrs if k.startswith("on") or k in ("style", "srcdoc", "formaction", "srcset")]
        if tag in ("iframe", "frame", "object", "embed", "svg", "math", "base"):
            bad.append((tag,))
        if tag == "script" and attrs not in ({"src": "/static/app.js", "defer": None},
                                             {"type": "application/json", "id": "tree-data"}, {}):
            bad.append((tag, attrs))
        if tag == "img" and not _SAFE_IMG.fullmatch(attrs.get("src") or ""):
            bad.append((tag, attrs.get("src")))
        href = (attrs.get("href") or "").strip().lower() if tag == "a" else ""
        if re.match(r"[a-z][a-z0-9+.-]*:", href) and not href.startswith(("http:", "https:")):
            bad.append((tag, href))
    return bad


@pytest.fixture
def evil_client():
    s = MemoryStore()
    add_evil_session(s)
    SessionManager.import_from_jsonl(EXAMPLES / "branching.jsonl", None, s)
    return TestClient(create_app(s), base_url="http://127.0.0.1:8765"), s


def test_every_field_of_a_hostile_session_stays_text(evil_client):
    client, store = evil_client
    manager = SessionManager.open(store, EVIL_ID)
    tips = [row[0] for row in view.leaf_tips(view.build_tree_data(manager).rows)]
    urls = ["/", "/?internal=1", "/?internal=1&q=img", "/?internal=1&project=%3Cscript%3E&q=%22%3E%3Cb%3E"]
    for v in ("raw", "model"):
        urls.append(f"/s/{EVIL_ID}?view={v}")
        urls += [f"/s/{EVIL_ID}/conversation?view={v}&leaf={quote(tip, safe='')}" for tip in tips]
    for url in urls:
        r = client.get(url)
        assert r.status_code == 200, (url, r.text[:200])
        assert not _unsafe_markup(r.text), (url, _unsafe_markup(r.text))
    assert "&lt;script&gt;window.__pwned=2" in client.get(f"/s/{EVIL_ID}").text
    html = page.render_session_document(manager)
    assert not _unsafe_markup(html.replace("<script>" + page.static_text("app.js"), "<script>"))
    # JSON bodies are served as JSON, never sniffed as HTML.
    for url in (f"/s/{EVIL_ID}/tree.json", f"/s/{EVIL_ID}/state.json", f"/s/{EVIL_ID}/summaries.json?rows=0,1,2,3"):
        r = client.get(url)
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        assert r.headers["x-content-type-options"] == "nosniff"
    # The tree data is inside <script>: nothing can close it or open a comment.
    data = client.get(f"/s/{EVIL_ID}").text.split('id="tree-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and ">" not in data and "&" not in data


def test_lone_surrogates_do_not_break_any_page(evil_client):
    """A string cut inside a UTF-16 pair is stored as a lone surrogate (JSON "\\ud83d").
    It used to make every page that showed it fail with 500, the session list included."""
    client, store = evil_client
    for url in ("/", "/?internal=1", "/?internal=1&q=emoji", f"/s/{EVIL_ID}", f"/s/{EVIL_ID}?view=model",
                f"/s/{EVIL_ID}/conversation", f"/s/{EVIL_ID}/tree.json", f"/s/{EVIL_ID}/state.json",
                f"/s/{EVIL_ID}/summaries.json?rows=" + ",".join(map(str, range(30)))):
        r = client.get(url)
        assert r.status_code == 200, (url, r.status_code)
    assert "cut emoji \ufffd here" in client.get(f"/s/{EVIL_ID}").text
    assert client.get(f"/s/{EVIL_ID}/state.json").json()["leaf"] == "lab-cut"
    html = page.render_session_document(SessionManager.open(store, EVIL_ID))
    html.encode("utf-8")  # the export can be written


def test_arguments_nested_to_the_store_limit():
    """The store accepts 512 levels; summarising a tool call used to recurse on them (RecursionError, 500)."""
    from sessiontree.format import jsonio

    value: object = "deep"
    for _ in range(jsonio.MAX_DEPTH - 8):
        value = [value]
    m = SessionManager.in_memory("/tmp")
    m.append_message({"role": "assistant", "content": [{"type": "toolCall", "id": "c", "name": "t", "arguments": value}],
                      "timestamp": 1})
    store = MemoryStore()
    store.create(m.get_header(), m.get_entries())
    client = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
    for url in ("/", f"/s/{m.get_session_id()}", f"/s/{m.get_session_id()}/tree.json"):
        assert client.get(url).status_code == 200, url
    page.render_session_document(m)


def test_markdown_images_only_from_raster_data_urls():
    html = view.markdown_html("![beacon](https://tracker.example/p.png) ![rel](y) ![svg](data:image/svg+xml;base64,PHN2Zz4=) "
                              "![ok](data:image/png;base64,iVBORw0KGgo=)")
    assert html.count("<img") == 1 and 'src="data:image/png;base64,iVBORw0KGgo="' in html
    assert "[image: beacon] (https://tracker.example/p.png)" in html
    # Pages load images only from data: URLs (not even from the server itself).
    assert "img-src data:;" in page.SERVER_CSP and "'self' data:" not in page.SERVER_CSP


def test_permalinks_url_encode_entry_ids():
    """An id with "#", "&" or "%" used to end up raw in href="?leaf=...#ID" (a broken or
    extra parameter); now every id is one URL component, and the script reads it from data-target."""
    m = SessionManager.in_memory("/tmp")
    header = m.get_header()
    entries = [{"type": "message", "id": "a&view=model#x%", "parentId": None, "timestamp": "2026-01-01T00:00:00Z",
                "message": {"role": "user", "content": "hi", "timestamp": 1}}]
    store = MemoryStore()
    store.create(header, entries)
    client = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
    text = client.get(f"/s/{header['id']}").text
    assert 'href="?leaf=a%26view%3Dmodel%23x%25&amp;view=raw#a%26view%3Dmodel%23x%25"' in text
    assert 'data-target="a&amp;view=model#x%"' in text and 'id="leaf-link" href="?leaf=a%26view%3Dmodel%23x%25"' in text


def test_security_headers_on_every_response(client):
    for url in ("/", "/s/019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01", "/s/019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01/tree.json",
                "/static/app.js", "/static/app.css", "/s/nope", "/s/nope/state.json"):
        r = client.get(url)
        csp = dict(d.strip().split(" ", 1) for d in r.headers["content-security-policy"].split(";"))
        assert csp["default-src"] == "'none'" and csp["script-src"] == "'self'" and csp["style-src"] == "'self'"
        assert csp["img-src"] == "data:" and csp["base-uri"] == "'none'" and csp["frame-ancestors"] == "'none'"
        assert csp["form-action"] == "'self'" and csp["connect-src"] == "'self'" and "object-src" not in csp
        assert "unsafe" not in r.headers["content-security-policy"]
        assert r.headers["x-content-type-options"] == "nosniff" and r.headers["x-frame-options"] == "DENY"
        assert r.headers["referrer-policy"] == "no-referrer" and r.headers["cache-control"] == "no-store"
    # No inline script or style in served pages: only the linked files.
    text = client.get("/s/019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01").text
    assert "<style" not in text and " style=" not in text
    assert re.findall(r"<script[^>]*>", text) == ['<script src="/static/app.js" defer>',
                                                 '<script type="application/json" id="tree-data">']


def _assert_security_headers(response) -> None:
    assert response.headers["content-security-policy"] == page.SERVER_CSP, response.status_code
    assert response.headers["x-content-type-options"] == "nosniff" and response.headers["x-frame-options"] == "DENY"
    assert response.headers["referrer-policy"] == "no-referrer" and response.headers["cache-control"] == "no-store"


def test_security_headers_on_error_responses(examples_store, monkeypatch):
    # 400: a foreign Host; 405: a write method; 403: no token; 500: an unexpected error.
    client = TestClient(create_app(examples_store), base_url="http://127.0.0.1:8765", raise_server_exceptions=False)
    bad_host = client.get("/", headers={"host": "evil.example"})
    assert bad_host.status_code == 400
    _assert_security_headers(bad_host)
    refused = client.post("/")
    assert refused.status_code == 405 and refused.headers["allow"] == "GET, HEAD"
    _assert_security_headers(refused)
    token = TestClient(create_app(examples_store, ViewerConfig(port=8765, token="s3cret")), base_url="http://127.0.0.1:8765")
    forbidden = token.get("/")
    assert forbidden.status_code == 403
    _assert_security_headers(forbidden)

    def broken(*args, **kwargs):
        raise RuntimeError("a defect, not a session error")

    monkeypatch.setattr(examples_store, "session_ids", broken)
    monkeypatch.setattr(examples_store, "list_sessions", broken)
    crashed = client.get("/")
    assert crashed.status_code == 500 and crashed.text == "Internal Server Error"
    assert "defect" not in crashed.text
    _assert_security_headers(crashed)


def test_search_query_over_the_limit_answers_the_list_page_with_the_message(client):
    from sessiontree.core.search import MAX_QUERY_CHARS

    r = client.get("/", params={"q": "a" * (MAX_QUERY_CHARS + 1)})
    assert r.status_code == 400
    _assert_security_headers(r)
    assert "1,001 characters long; at most 1,000 are accepted" in r.text
    assert "No sessions match." in r.text and 'class="filters"' in r.text
    assert client.get("/", params={"q": "a" * MAX_QUERY_CHARS}).status_code == 200  # the limit itself is fine


def test_a_stored_role_with_an_invalid_utf8_byte_is_shown_replaced(tmp_path):
    import sqlite3
    import zlib

    from builders import header
    from sessiontree.stores.sqlite import SqliteStore

    db = tmp_path / "s.db"
    with SqliteStore(db) as s:
        s.create(header("s1"), [{"type": "message", "id": "e1", "parentId": None,
                                 "timestamp": "2026-02-01T09:00:00.000Z",
                                 "message": {"role": "user", "content": "hi there", "timestamp": 1}}])
    # A record another writer damaged with a consistent checksum: the role holds byte 0xFF.
    text = (b'{"type":"message","id":"e1","parentId":null,"timestamp":"2026-02-01T09:00:00.000Z",'
            b'"message":{"role":"us\xffer","content":"hi there","timestamp":1}}')
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE entries SET json = ?, crc = ? WHERE id = 'e1'", (text, zlib.crc32(text)))
    conn.close()
    with SqliteStore(db) as s:
        c = TestClient(create_app(s), base_url="http://127.0.0.1:8765")
        r = c.get("/s/s1")
        assert r.status_code == 200
        assert "us\ufffder" in r.text  # decoded as the full read decodes it (jsonio: replaced)
        assert c.get("/s/s1/rows.json").status_code == 200
        assert c.get("/s/s1/conversation").status_code == 200


def test_every_other_method_is_refused_and_static_files_stay_in_their_folder(client):
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "PROPFIND"):
        for url in ("/", "/s/019cadb4", "/static/app.js", "/s/019cadb4/state.json"):
            assert client.request(method, url).status_code == 405, (method, url)
    assert client.head("/").status_code == 200
    for url in ("/static/../app.py", "/static/%2e%2e/app.py", "/static/..%2fapp.py", "/static/%2e%2e%2f%2e%2e%2fweb%2fapp.py",
                "/static/..%5capp.py", "/static//etc/passwd", "/static/%2fetc%2fpasswd", "/static/app.js%00.png"):
        r = client.get(url)
        assert r.status_code == 404 and "import" not in r.text, url


def test_error_pages_do_not_reflect_the_request(client):
    for url in ("/s/%3Cscript%3Ealert(1)%3C%2Fscript%3E", "/s/%3Cimg%20src=x%3E/state.json",
                "/s/019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01/conversation?leaf=%3Cscript%3E",
                "/s/019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01?leaf=%3Cscript%3E"):
        r = client.get(url)
        assert r.status_code == 404 and "<" not in r.text and "script" not in r.text, url
    r = client.get("/?q=%3Cscript%3Ex&project=%22%3E%3Cb%3E&since=%3Cx%3E&sort=%3Cx%3E&page=%3Cx%3E")
    assert r.status_code == 200 and "<script>x" not in r.text and '"><b>' not in r.text


def test_host_header_checks():
    s = MemoryStore()
    loop = TestClient(create_app(s), base_url="http://127.0.0.1:8765")
    for host, status in [("127.0.0.1", 200), ("127.0.0.1:8765", 200), ("localhost:1234", 200), ("LOCALHOST", 200),
                         ("[::1]", 200), ("[::1]:8765", 200), ("evil.example", 400), ("127.0.0.1.evil.example", 400),
                         ("localhost.evil.example:8765", 400), ("127.0.0.1:80@evil.example", 400),
                         ("127.0.0.1:x", 400), ("evil.example:127.0.0.1", 400), ("", 400), ("127.0.0.2", 400)]:
        assert loop.get("/", headers={"Host": host}).status_code == status, host
    assert loop.get("/", headers={"Host": "evil.example", "X-Forwarded-Host": "127.0.0.1"}).status_code == 400
    # A wildcard bind is reached by names it cannot list: with a token, any name (the token guards);
    # without one (only a library caller can do that), loopback names only.
    wild = TestClient(create_app(s, ViewerConfig("0.0.0.0", 8765, "t0k")), base_url="http://192.168.1.5:8765")
    assert wild.get("/?token=t0k").status_code == 200
    wild = TestClient(create_app(s, ViewerConfig("0.0.0.0", 8765, "t0k")), base_url="http://evil.example:8765")
    assert wild.get("/").status_code == 403  # a rebinding page has no token
    bare = TestClient(create_app(s, ViewerConfig("::", 8765, None)), base_url="http://192.168.1.5:8765")
    assert bare.get("/").status_code == 400 and bare.get("/", headers={"Host": "[::1]:8765"}).status_code == 200


def test_token_on_every_route_moved_to_a_cookie_and_out_of_the_url(examples_store):
    c = TestClient(create_app(examples_store, ViewerConfig("192.0.2.10", 8765, "s3cret")), base_url="http://192.0.2.10:8765",
                   follow_redirects=False)
    sid = "019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01"
    routes = ["/", f"/s/{sid}", f"/s/{sid}/conversation", f"/s/{sid}/tree.json", f"/s/{sid}/state.json",
              f"/s/{sid}/summaries.json?rows=1", "/static/app.js", "/static/app.css", "/s/nope"]
    for url in routes:
        assert c.get(url).status_code == 403, url
        assert c.get(url, params={"token": "s3cre"}).status_code == 403, url
        assert c.get(url, params={"token": "s3cret\u00e9"}).status_code == 403, url
    r = c.get(f"/s/{sid}?view=model&token=s3cret")
    # The token goes into a cookie, and the browser is sent to the same URL without it.
    assert r.status_code == 303 and r.headers["location"] == f"/s/{sid}?view=model"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith("sessiontree_token_8765=s3cret;") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert "content-security-policy" in r.headers
    r = c.get("http://192.0.2.10:8765//evil.example/?token=s3cret")
    assert r.headers["location"] == "/evil.example/"  # never "//evil.example/": off-site
    for url in routes[:-1]:
        assert c.get(url).status_code == 200, url  # the cookie carries it
    assert c.get("/s/nope").status_code == 404
    c.cookies.clear()
    c.cookies.set("sessiontree_token_8765", "wrong")
    assert c.get("/").status_code == 403
    # The page carries no token (the script's requests send the cookie).
    c.cookies.clear()
    c.cookies.set("sessiontree_token_8765", "s3cret")
    assert "s3cret" not in c.get(f"/s/{sid}").text
    # Constant-time comparison.
    import inspect

    from sessiontree.web import app as app_module

    assert "hmac.compare_digest" in inspect.getsource(app_module._Guard)


def _digest_tree(root) -> dict:
    import hashlib

    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir",
                                       p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_browsing_changes_nothing_in_the_store(tmp_path, kind):
    """The CLI opens the store read-only for serve; a whole browsing session changes no byte and no mtime."""
    from click.testing import CliRunner

    from sessiontree import open_store
    from sessiontree.cli import cli

    where = tmp_path / "store"
    url = f"jsonl:///{where}" if kind == "jsonl" else f"sqlite:///{where}/s.db"
    assert CliRunner().invoke(cli, ["--store", url, "import", str(EXAMPLES)]).exit_code == 0
    writer = open_store(url)
    add_evil_session(writer)
    writer.close()
    before = _digest_tree(where)
    store = open_store(url, create=False, readonly=True)  # as `sessiontree serve` opens it
    try:
        c = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
        for sid in store.session_ids():
            for u in (f"/s/{sid}", f"/s/{sid}?view=model", f"/s/{sid}/tree.json", f"/s/{sid}/state.json",
                      f"/s/{sid}/conversation?start=0", f"/s/{sid}/summaries.json?rows=0,1,2"):
                assert c.get(u).status_code == 200, u
        assert c.get("/?q=option&internal=1").status_code == 200
        page.render_session_document(SessionManager.open(store, EVIL_ID))
    finally:
        store.close()
    assert _digest_tree(where) == before


def test_export_csp_allows_exactly_its_inline_script_and_style():
    import base64
    import hashlib

    html = page.render_session_document(_manager("branching.jsonl"))
    csp = unescape(re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', html).group(1))
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives == {"default-src": "'none'", "script-src": directives["script-src"],
                          "style-src": directives["style-src"], "img-src": "data:", "base-uri": "'none'",
                          "form-action": "'none'"}

    def sha(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    scripts = re.findall(r"<script>(.*?)</script>", html, re.DOTALL)
    styles = re.findall(r"<style>(.*?)</style>", html, re.DOTALL)
    assert len(scripts) == 1 and len(styles) == 1 and " style=" not in html
    assert directives["script-src"] == sha(scripts[0]) and directives["style-src"] == sha(styles[0])
    # The policy comes before anything of the session.
    assert html.index("Content-Security-Policy") < html.index("<title>")


# --------------------------------------------------------------------------- windows

BRANCHING_ID = "019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01"


def test_tree_visible_rows_follow_filters_and_folds():
    # Rows of examples/branching.jsonl (pre-order): 0 model_change, 1 user, 2 assistant, 3 toolResult,
    # 4 assistant (branch point, label), 5-6 first branch, 7 branch_summary, 8 user, 9 assistant,
    # 10 toolResult, 11 assistant, 12 label, 13 session_info (the active leaf).
    tree = view.build_tree_data(_manager("branching.jsonl"))
    assert tree.visible("default") == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13]  # bookkeeping hidden, leaf kept
    assert tree.visible("all") == list(range(14))
    assert tree.visible("user-only") == [1, 5, 8, 13]
    assert tree.visible("no-tools") == [1, 2, 4, 5, 6, 7, 8, 9, 11, 13]
    assert tree.visible("labeled-only") == [4, 13]
    assert tree.visible("default", {5}) == [1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 13]
    assert tree.visible("default", {4}) == [1, 2, 3, 4]


def test_tree_window_sends_a_slice_with_what_a_row_needs():
    tree = view.build_tree_data(_manager("branching.jsonl"))
    w = tree.window(leaf="a1000007", offset=0, limit=4)
    assert (w["total"], w["entries"], w["offset"], w["found"]) == (12, 14, 0, -1)
    first, fourth = w["rows"][0], w["rows"][3]
    assert first[:4] == [1, "a1000002", 0, "user"] and first[5:] == [65, None, "a100000e", 0, 0, 1]
    # The branch point: two branches, foldable, on the path to a1000007.
    assert fourth[:4] == [4, "a1000005", 0, "assistant"] and fourth[5:] == [257, "two-options", "a100000e", 2, 1, 1]
    assert fourth[4].startswith("The city is put into the URL path")
    # Centred on an entry: a1000008 (row 7) is the 7th visible row.
    w = tree.window(leaf="a100000e", find="a1000008", limit=4)
    assert w["found"] == 6 and w["offset"] == 4 and [r[1] for r in w["rows"]] == [
        "a1000006", "a1000007", "a1000008", "a1000009"]
    assert [r[10] for r in w["rows"]] == [0, 0, 1, 1]  # a1000006/7 are off the shown branch
    assert tree.window(find="nope", offset=99)["offset"] == 11  # clamped to the last row


def test_tree_rows_endpoint(client):
    r = client.get(f"/s/{BRANCHING_ID}/rows.json?filter=user-only&leaf=a1000007")
    data = r.json()
    assert r.headers["content-type"] == "application/json"
    assert data["total"] == 4 and [row[1] for row in data["rows"]] == ["a1000002", "a1000006", "a1000009", "a100000e"]
    assert [row[10] for row in data["rows"]] == [1, 1, 0, 0]
    data = client.get(f"/s/{BRANCHING_ID}/rows.json?folded=4&filter=bogus").json()
    assert data["total"] == 4 and [row[1] for row in data["rows"]][-1] == "a1000005"
    assert client.get("/s/nope/rows.json").status_code == 404


def _tool_chain(n: int) -> SessionManager:
    """A chain of n entries: user, assistant with a tool call, its result, ... (results one entry later)."""
    ts = "2026-01-01T00:00:00.000Z"
    entries, parent = [], None
    for i in range(n):
        if i % 3 == 0:
            message = {"role": "user", "content": f"ask {i}", "timestamp": 1}
        elif i % 3 == 1:
            message = {"role": "assistant", "content": [{"type": "text", "text": f"call {i}"}, {
                "type": "toolCall", "id": f"c{i}", "name": "bash", "arguments": {"command": f"echo {i}"}}],
                "timestamp": 1}
        else:
            message = {"role": "toolResult", "toolCallId": f"c{i - 1}", "toolName": "bash",
                       "content": [{"type": "text", "text": f"out {i}"}], "isError": False, "timestamp": 1}
        entries.append({"type": "message", "id": f"t{i:04d}", "parentId": parent, "timestamp": ts, "message": message})
        parent = f"t{i:04d}"
    store = MemoryStore()
    store.create({"type": "session", "version": 4, "id": "chain", "createdAt": ts, "cwd": "/tmp"}, entries)
    return SessionManager.from_parsed(store.read("chain"))


def test_branch_window_from_skeletons_equals_the_full_raw_view():
    manager = _tool_chain(500)
    skeleton = [{k: e[k] for k in ("type", "id", "parentId", "timestamp")} for e in manager.get_branch()]
    by_id = {e["id"]: e for e in manager.get_entries()}
    asked: list[int] = []

    def load(ids):
        asked.append(len(ids))
        return [by_id[i] for i in ids]

    for kwargs in ({}, {"start": 0}, {"start": 137, "limit": 50}, {"around": "t0010"}, {"around": "t0250", "limit": 60}):
        want = view.build_conversation(manager, None, "raw", **kwargs)
        got = view.build_branch_window(skeleton, load, **kwargs)
        assert (got.start, got.total, got.leaf_id) == (want.start, want.total, want.leaf_id), kwargs
        assert got.items == want.items, kwargs
    # Only the window and the look-ahead were read, never the whole branch.
    assert max(asked) <= view.WINDOW_ITEMS + view.PAIRING_LOOKAHEAD


def test_first_page_is_the_last_window_and_the_list_counts_entries(client):
    text = client.get(f"/s/{BRANCHING_ID}").text
    data = text.split('id="tree-data">', 1)[1].split("</script>", 1)[0]
    import json

    tree = json.loads(data)
    assert tree["windowed"] is True and tree["total"] == 12 and tree["entries"] == 14
    rows = client.get("/").text.split("<tr class=\"session-row")
    row = next(r for r in rows if "Fix 500 on city names" in r)
    # 14 entries, 10 of them messages (rows 1-6 and 8-11 above)
    assert re.search(r'<td class="num">14</td>\s*<td class="num">10</td>', row), row


def test_the_model_view_page_reads_the_sync_states_once(examples_store, monkeypatch):
    # The agent's format and the resume command both need the sync states: one read serves both.
    reads: list[int] = []
    real = examples_store.sync_states
    monkeypatch.setattr(examples_store, "sync_states", lambda: reads.append(1) or real())
    client = TestClient(create_app(examples_store), base_url="http://127.0.0.1:8765")
    sid = examples_store.session_ids()[0]
    assert client.get(f"/s/{sid}?view=model").status_code == 200
    assert len(reads) == 1
    # Each page load reads them again (a file synced meanwhile changes the resume command).
    assert client.get(f"/s/{sid}").status_code == 200
    assert len(reads) == 2
