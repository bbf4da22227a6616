"""The compare page in headless Chromium (docs/diff.md): reached from the session page,
the model toggle and the pickers work, and hostile session text never runs."""

from __future__ import annotations

import pytest

from web_support import (
    EXAMPLES,
    HOSTILE_BRANCHES_ID,
    add_hostile_branches,
    chromium_missing,
    css,
    running_server,
    wait,
)

_missing = chromium_missing()
pytestmark = [pytest.mark.browser, pytest.mark.skipif(_missing is not None, reason=_missing or "")]

BRANCHING = "019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01"
EVIL = HOSTILE_BRANCHES_ID


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from sessiontree import SessionManager, open_store

    store = open_store(f"sqlite:///{tmp_path_factory.mktemp('cmp')}/sessions.db", create=True)
    SessionManager.import_from_jsonl(EXAMPLES / "branching.jsonl", None, store)
    add_hostile_branches(store)
    with running_server(store) as url:
        yield url
    store.close()


def statuses(driver) -> list[str]:
    return [row.get_attribute("class") for row in css(driver, ".cmp-rows tbody tr")]


def test_compare_with_active_from_the_session_page(browser, server):
    browser.get(f"{server}/s/{BRANCHING}?leaf=a1000007")
    wait(browser, lambda d: css(d, "#compare-link"))
    css(browser, "#compare-link")[0].click()
    wait(browser, lambda d: css(d, ".cmp-rows"))
    assert "/compare?b=a1000007" in browser.current_url
    # B = a1000007 against A = the active leaf a100000e: the mirror of the CLI example.
    assert statuses(browser) == ["cmp-onlyA", "cmp-changed", "cmp-changed", "cmp-onlyA", "cmp-onlyA",
                                 "cmp-onlyA", "cmp-onlyA"]
    # The model toggle submits the form; the permalink keeps the choice.
    css(browser, "input[name=view][value=model]")[0].click()
    css(browser, ".cmp-tools button[type=submit]")[0].click()
    wait(browser, lambda d: "view=model" in d.current_url and "Context A" in d.page_source)
    assert "view=model" in css(browser, "#cmp-link")[0].get_attribute("href")


def test_hostile_content_never_runs(browser, server):
    for view in ("raw", "model"):
        browser.get(f"{server}/s/{EVIL}/compare?view={view}")
        wait(browser, lambda d: css(d, ".cmp-rows"))
        assert browser.execute_script("return window.__pwned === undefined")
        text = css(browser, ".cmp-rows")[0].text
        assert "<script>window.__pwned" in text
        assert browser.execute_script(
            "return document.querySelectorAll('[onerror], iframe, a[href^=\"javascript:\"], .cmp-rows script')"
            ".length") == 0


def test_the_exported_comparison_opens_without_script_and_hostile_text_stays_text(browser, tmp_path):
    """``export --format html --compare``: the folded comparison opens on a click (no
    script needed), and the hostile text of both branches shows as text."""
    from sessiontree import SessionManager
    from sessiontree.core.diff import leaf_ids
    from sessiontree.diff import diff_branches
    from sessiontree.stores.memory import MemoryStore
    from sessiontree.web.page import render_session_document

    store = MemoryStore()
    add_hostile_branches(store)
    manager = SessionManager.open(store, EVIL)
    active = manager.get_leaf_id()
    other = next(leaf for leaf in leaf_ids(manager.get_entries()) if leaf != active)
    page = tmp_path / "export.html"
    page.write_text(render_session_document(manager, diff_branches(manager, EVIL, active, other)), "utf-8")
    browser.get(page.as_uri())
    wait(browser, lambda d: css(d, "details.export-compare > summary"))
    assert not css(browser, "details.export-compare .cmp-rows")[0].is_displayed()  # folded
    css(browser, "details.export-compare > summary")[0].click()
    wait(browser, lambda d: css(d, "details.export-compare .cmp-rows")[0].is_displayed())
    text = css(browser, "details.export-compare")[0].text
    assert "<script>window.__pwned" in text and "javascript:window.__pwned" in text
    assert browser.execute_script("return window.__pwned === undefined")
    assert browser.execute_script(
        "return document.querySelectorAll('.export-compare [onerror], .export-compare iframe, "
        ".export-compare a[href^=\"javascript:\"], .export-compare script, .export-compare img').length") == 0
