"""The viewer without a browser: view models, escaping, the server's guards, the HTML export."""

from __future__ import annotations

import re
import sys
from html import unescape
import types

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

from sessiontree import MemoryStore, SessionManager  # noqa: E402
from sessiontree.format import read_session_file  # noqa: E402
from sessiontree.web import page, view  # noqa: E402
from sessiontree.web.app import ViewerConfig, create_app  # noqa: E402

from web_support import EXAMPLES, HOSTILE_ID, add_hostile_session  # noqa: E402


def _manager(name: str) -> SessionManager:
    parsed = read_session_file(EXAMPLES / name)
    return SessionManager.in_memory(parsed.header.get("cwd"), entries=[parsed.header, *parsed.entries])


@pytest.fixture
def store():
    s = MemoryStore()
    for name in ("branching.jsonl", "compaction.jsonl", "interrupted.jsonl"):
        SessionManager.import_from_jsonl(EXAMPLES / name, None, s)
    add_hostile_session(s)
    return s


@pytest.fixture
def client(store):
    return TestClient(create_app(store), base_url="http://127.0.0.1:8765")


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
    assert view._image_part({"mimeType": "image/png", "data": "iVBORw0KGgo="}).src.startswith("data:image/png;base64,")
    assert view._image_part({"mimeType": "image/svg+xml", "data": "PHN2Zz4="}).src is None
    assert view._image_part({"mimeType": "image/png", "data": "\"><script>"}).src is None


def test_markdown_has_no_raw_html_and_no_javascript_links():
    html = view.markdown_html('<b>x</b> [a](javascript:alert(1)) [b](https://example.org)')
    assert "<b>" not in html and "&lt;b&gt;" in html
    assert 'href="javascript:' not in html and 'href="https://example.org"' in html


# --------------------------------------------------------------------------- list


def test_list_filters_sort_and_fallback_search(store):
    rows = view.build_list_page(store, view.ListQuery()).rows
    assert [r.info.id for r in rows][:1] and len(rows) == 4
    named = view.build_list_page(store, view.ListQuery(named=True))
    assert {r.info.id for r in named.rows} == {"019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01", HOSTILE_ID}
    found = view.build_list_page(store, view.ListQuery(q="units flag"))
    assert found.search_mode == "scan" and [r.info.id[:8] for r in found.rows] == ["019cadc9"]
    proj = view.build_list_page(store, view.ListQuery(project="/home/dev/projects/weather-app"))
    assert proj.total == 2 and not proj.has_stats
    paged = view.build_list_page(store, view.ListQuery(per_page=3, page=2))
    assert paged.pages == 2 and len(paged.rows) == 1


def test_list_uses_store_search_and_stats_hooks(store, monkeypatch):
    store.search = lambda q: [{"session_id": "019cadd2-8a00-7c1f-a2b3-5c6d7e8f9003", "snippet": "hit"}]
    usage = types.ModuleType("sessiontree.usage")
    usage.session_stats = lambda st, ids: {i: {"entries": 3, "models": ["m1"], "tokens": 1234, "cost": 0.5}
                                           for i in ids}
    monkeypatch.setitem(sys.modules, "sessiontree.usage", usage)
    result = view.build_list_page(store, view.ListQuery(q="anything"))
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


def test_token_required_when_set(store):
    c = TestClient(create_app(store, ViewerConfig("192.0.2.10", 8765, "s3cret")), base_url="http://192.0.2.10:8765")
    assert c.get("/").status_code == 403
    assert c.get("/?token=wrong").status_code == 403
    r = c.get("/?token=s3cret")
    assert r.status_code == 200 and "HttpOnly" in r.headers["set-cookie"]
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
    # Both branches, both views, are inside.
    assert html.count("<template data-leaf=") == 4 and 'data-leaf="a1000007"' in html


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
