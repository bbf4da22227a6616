"""The viewer's audited door (web/teamdoor.py; docs/team.md, "The audited door"): a form
first, the audit record written before the content, refusals without content, another
site's request refused, no door on a store without roles."""

from __future__ import annotations

import re

import psycopg
import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from builders import header, user_at
from sessiontree.web.teamdoor import team_door_routes
from team_support import team_stores

pytestmark = pytest.mark.postgres

SECRET = "<script>alert('pasted key sk-123')</script>"


@pytest.fixture
def door(pg_url):
    with team_stores(pg_url, {"alice": "member", "dana": "admin"}) as (_owner, stores):
        stores["alice"].create(header("s-alice"), [user_at("e1", None, f"deploy with {SECRET}", 1)])
        yield pg_url, {name: TestClient(Starlette(routes=team_door_routes(store))) for name, store in stores.items()}


def _audit_rows(url: str) -> list[tuple[str, str, str]]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT reader, session_id, reason FROM team_audit ORDER BY id").fetchall()


def _stamp(page: str) -> str:
    found = re.search(r'name="door" value="([0-9a-f]{64})"', page)
    assert found, page
    return found.group(1)


def test_the_form_reads_nothing_and_records_nothing(door):
    url, clients = door
    page = clients["dana"].get("/team/open/s-alice")
    assert page.status_code == 200 and "deploy with" not in page.text and "Reason" in page.text
    # A reason without the stamp, or a stamp without a reason: the form again.
    assert "deploy with" not in clients["dana"].get("/team/open/s-alice", params={"reason": "incident 7"}).text
    blank = clients["dana"].get("/team/open/s-alice", params={"reason": "  ", "door": _stamp(page.text)})
    assert "A reason is required" in blank.text and "deploy with" not in blank.text
    forged = clients["dana"].get("/team/open/s-alice", params={"reason": "x", "door": "0" * 64})
    assert "deploy with" not in forged.text
    assert _audit_rows(url) == []


def test_an_admin_opens_with_a_reason_and_the_record_comes_first(door):
    url, clients = door
    stamp = _stamp(clients["dana"].get("/team/open/s-alice").text)
    opened = clients["dana"].get("/team/open/s-alice", params={"reason": "incident 7", "door": stamp})
    assert opened.status_code == 200
    assert _audit_rows(url) == [("dana", "s-alice", "incident 7")]
    # The content, escaped for the browser (never markup).
    assert "deploy with" in opened.text and "<script>alert" not in opened.text
    assert "&lt;script&gt;alert" in opened.text
    assert opened.headers["cache-control"] == "no-store"


def test_a_member_is_refused_without_content(door):
    url, clients = door
    stamp = _stamp(clients["alice"].get("/team/open/s-alice").text)
    refused = clients["alice"].get("/team/open/s-alice", params={"reason": "curious", "door": stamp})
    assert refused.status_code == 403 and "deploy with" not in refused.text
    assert _audit_rows(url) == []


def test_another_sites_request_is_refused_before_any_record(door):
    url, clients = door
    stamp = _stamp(clients["dana"].get("/team/open/s-alice").text)
    refused = clients["dana"].get("/team/open/s-alice", params={"reason": "x", "door": stamp},
                                  headers={"Sec-Fetch-Site": "cross-site"})
    assert refused.status_code == 403 and "deploy with" not in refused.text
    assert _audit_rows(url) == []


def test_no_such_session_is_refused(door):
    _url, clients = door
    stamp = _stamp(clients["dana"].get("/team/open/s-nobody").text)
    refused = clients["dana"].get("/team/open/s-nobody", params={"reason": "x", "door": stamp})
    assert refused.status_code == 403 and "s-nobody" in refused.text


def test_a_store_without_roles_has_no_door(tmp_path):
    from sessiontree.stores.sqlite.store import SqliteStore

    store = SqliteStore(str(tmp_path / "s.db"))
    try:
        client = TestClient(Starlette(routes=team_door_routes(store)))
        assert client.get("/team/open/x", params={"reason": "r"}).status_code == 404
    finally:
        store.close()


def test_the_viewer_registers_the_door(tmp_path):
    """The door is one of the viewer's own routes (web/routes.py), not only an app of its own."""
    from sessiontree.stores.sqlite.store import SqliteStore
    from sessiontree.web.app import create_app

    store = SqliteStore(str(tmp_path / "s.db"))
    try:
        viewer = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
        page = viewer.get("/team/open/x", params={"reason": "r"})
        assert page.status_code == 404 and "no audited door" in page.text
    finally:
        store.close()
