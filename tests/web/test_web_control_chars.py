"""No raw control character reaches a page of the viewer or the HTML export (docs/terminal-output.md).

One session with hostile text in every field (the same character classes as
tests/core/test_terminal_safety.py: terminal escapes, C1, bidi overrides, invisible
and separator characters, a lone surrogate) in the header, the file-side fields and
the content; every page and the export must hold none of them raw, only newline and
tab inside ``<pre>`` blocks, and must show them as visible escapes.
"""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from sessiontree.session.manager import SessionManager
from sessiontree.stores.memory import MemoryStore
from sessiontree.web import page
from sessiontree.web import views as view
from sessiontree.web.app import create_app

H = ("\x1b]8;;http://evil\x07link\x1b]8;;\x07" "\x1b]0;pwned\x07" "\x1b[31m" "\x9b31m" "\x7f"
     "\u202e" "\u200b" "\x00" "\r" "\x08" "\u2066\u2069\u061c\u200e\u2028\u2029\ufeff\u2060\U000e0041\ud800")
#: Forbidden anywhere: C0 but newline and tab, DEL, C1, bidi controls, invisible and separator characters.
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f"
                       "\ufeff\ufff9-\ufffb\U000e0000-\U000e007f\ud800-\udfff]")
SID = "019cadb4-6e80-7a3c-9b1d-0000000000c1"
TS = "2026-03-02T09:00:00.000Z"
#: Ids without the lone surrogate: a URL cannot carry one, and the pages are fetched by leaf id.
HID = H.replace("\ud800", "")


def _entries() -> list[dict]:
    def entry(key: str, parent: str | None, kind: str, **fields) -> dict:
        return {"type": kind, "id": key + HID, "parentId": parent + HID if parent else None, "timestamp": TS, **fields}

    call = {"type": "toolCall", "id": "call" + H, "name": "tool" + H, "arguments": {"cmd" + H: "multi\nline\t" + H}}
    return [
        entry("p1", None, "model_change", provider="prov" + H, modelId="model" + H),
        entry("p3", "p1", "message", message={"role": "user", "content": "first\n\tline " + H, "timestamp": 1}),
        entry("r1", "p3", "message", message={"role": "assistant", "content": [{"type": "text", "text": "alt " + H}],
                                              "stopReason": "stop", "timestamp": 9}),
        entry("p4", "p3", "message", message={
            "role": "assistant", "content": [{"type": "text", "text": "answer *md* `code " + H + "` " + H},
                                             {"type": "thinking", "thinking": "think " + H}, call],
            "provider": "prov" + H, "model": "model" + H, "stopReason": "toolUse", "timestamp": 2}),
        entry("p5", "p4", "message", message={
            "role": "toolResult", "toolCallId": "call" + H, "toolName": "tool" + H,
            "content": [{"type": "text", "text": "result\n" + H}], "isError": True, "timestamp": 3}),
        entry("p6", "p5", "session_info", name="name " + H),
        entry("p7", "p6", "label", targetId="p3" + HID, label="label " + H),
        entry("p8", "p7", "weird" + H, data=H),
        entry("q3", "p8", "message", message={"role": "bashExecution", "command": "ls " + H,
                                              "output": "out " + H, "exitCode": 1, "timestamp": 5}),
        entry("q4", "q3", "branch_summary", fromId="p3" + HID, summary="summary " + H),
        entry("q9", "q4", "message", message={"role": "user", "content": "last " + H, "timestamp": 8}),
    ]


@pytest.fixture(scope="module")
def hostile():
    store = MemoryStore()
    header = {"type": "session", "version": 4, "id": SID, "createdAt": TS, "cwd": "/proj/../../../etc/" + H,
              "parentSessionId": "parent" + H}
    store.create(header, _entries())
    return TestClient(create_app(store), base_url="http://127.0.0.1:8765"), store


def _assert_clean(html: str, where: str) -> None:
    bad = sorted({f"U+{ord(c):04X}" for c in FORBIDDEN.findall(html)})
    assert not bad, f"{where}: raw {', '.join(bad)}"
    # newline and tab never in an attribute (the templates' own layout puts them between tags)
    outside = re.sub(r"<(pre|script|style)[^>]*>.*?</\1>", "", html, flags=re.S)
    for value in re.findall(r'="([^"]*)"', outside):
        assert "\n" not in value and "\t" not in value, f"{where}: a newline or tab in attribute {value!r}"


def test_every_page_and_the_export_show_control_characters_as_escapes(hostile):
    client, store = hostile
    manager = SessionManager.open(store, SID)
    tips = [row[0] for row in view.leaf_tips(view.build_tree_data(manager).rows)]
    assert len(tips) == 2  # r1 and q9: the session branches at p3
    project = quote("/proj/../../../etc/" + H.replace("\ud800", ""), safe="")
    urls = ["/", "/?q=answer", f"/?project={project}", "/usage",
            f"/s/{SID}", f"/s/{SID}?view=model", f"/s/{SID}/compare?b=r1"]
    urls += [f"/s/{SID}/conversation?view={v}&leaf={quote(tip, safe='')}" for v in ("raw", "model") for tip in tips]
    for url in urls:
        r = client.get(url)
        assert r.status_code == 200, (url, r.text[:300])
        _assert_clean(r.text, url)
    session_page = client.get(f"/s/{SID}").text
    # shown, not dropped: the header's project, the title, and the conversation text
    assert "/proj/../../../etc/\\x1b]8;;http://evil\\x07link" in session_page
    assert "name \\x1b]8;;" in session_page and "\\u202e\\u200b\\x00\\x0d\\x08" in session_page
    assert "first\n\tline \\x1b" in session_page  # a text block keeps its newline and tab
    assert "<option" in client.get("/").text and "\\u202e" in client.get("/").text
    html = page.render_session_document(manager, raw=True)
    _assert_clean(html, "export --format html")
    assert "\\u202e" in html and "result\n\\x1b" in html


def test_the_block_filter_and_finalize(hostile):
    env = page.environment()
    assert env.from_string("<p title='{{ v }}'>{{ v }}</p>").render(v="a\u202e\n<b>") == \
        "<p title='a\\u202e\\x0a&lt;b&gt;'>a\\u202e\\x0a&lt;b&gt;</p>"
    assert env.from_string("<pre>{{ v|block }}</pre>").render(v="a\x1b\n\t<b>\ud800") == \
        "<pre>a\\x1b\n\t&lt;b&gt;\ufffd</pre>"
    assert env.from_string("{{ n }} {{ none }}").render(n=3, none=None) == "3 None"
