"""The viewer's compare page (docs/diff.md): aligned rows with their status, the summary,
the raw / model toggle, the permalink, hostile text escaped, bad input refused."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient

from sessiontree import MemoryStore, SessionManager
from sessiontree.web.app import create_app
from web_support import EXAMPLES, HOSTILE_BRANCHES_ID, add_hostile_branches

BRANCHING = "019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01"
EVIL = HOSTILE_BRANCHES_ID


@pytest.fixture
def client():
    store = MemoryStore()
    SessionManager.import_from_jsonl(EXAMPLES / "branching.jsonl", None, store)
    add_hostile_branches(store)
    return TestClient(create_app(store), base_url="http://127.0.0.1:8765")


def statuses(html: str) -> list[str]:
    return re.findall(r'<tr class="cmp-(\w+)">', html)


def test_raw_rows_summary_and_permalink(client) -> None:
    r = client.get(f"/s/{BRANCHING}/compare?a=a1000007&b=a100000e")
    assert r.status_code == 200
    assert "script-src 'self'" in r.headers["content-security-policy"]
    # Worked out from examples/branching.jsonl: below the fork point a1000005, B starts with its
    # branch summary (only B), the two prompts and the two replies pair as changed, then B's
    # edit result, reply, label and name are only in B.
    assert statuses(r.text) == ["onlyB", "changed", "changed", "onlyB", "onlyB", "onlyB", "onlyB"]
    assert "Fork point a1000005 after 5 common entries" in r.text
    assert "src/routes/forecast.py (edit)" in r.text
    assert 'href="?a=a1000007&amp;b=a100000e&amp;view=raw"' in r.text


def test_model_view_and_default_sides(client) -> None:
    # No sides: the two most recent leaves, as the command chooses them.
    r = client.get(f"/s/{BRANCHING}/compare?view=model")
    assert r.status_code == 200
    assert "Context A: 6 messages" in r.text and "Context B: 9 messages" in r.text
    assert "4 message(s) from the start are the same in both contexts" in r.text
    # A: u a6 a7 after the 4 shared; B: summary, u, edit call, result, reply.
    assert statuses(r.text) == ["onlyB", "changed", "changed", "onlyB", "onlyB"]


def test_session_page_links_to_compare(client) -> None:
    html = client.get(f"/s/{BRANCHING}?leaf=a1000007").text
    assert f'href="/s/{BRANCHING}/compare?b=a1000007"' in html


def test_hostile_text_is_escaped(client) -> None:
    for viewname in ("raw", "model"):
        html = client.get(f"/s/{EVIL}/compare?view={viewname}").text
        assert "<script>window" not in html and "<img src" not in html and "onerror=\"window" not in html
        assert "&lt;script&gt;" in html


def test_bad_input_is_refused(client) -> None:
    r = client.get(f"/s/{BRANCHING}/compare?a=zzz")
    assert r.status_code == 404 and r.text.startswith("Cannot compare: no entry of session")
    assert client.get("/s/nope/compare").status_code == 404
