"""End-to-end tests of the viewer in headless Chromium (Debian ``chromium`` + ``chromium-driver``).

One server (a SQLite store with the examples, the real corpus and a hostile
session) and one browser serve the whole module. Skipped, with the reason,
where Chromium is not installed; ``.ci/run`` installs it.
"""

from __future__ import annotations

import time
from urllib.parse import quote

import pytest

from web_support import (CORPUS, EXAMPLES, HOSTILE_ID, add_hostile_session, chromium, chromium_missing,
                         running_server)

_missing = chromium_missing()
pytestmark = pytest.mark.skipif(_missing is not None, reason=_missing or "")

BRANCHING = "019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01"
COMPACTION = "019cadc9-1f40-7b2e-8d3c-4a5b6c7d8e02"
INTERRUPTED = "019cadd2-8a00-7c1f-a2b3-5c6d7e8f9003"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from sessiontree import SessionManager, open_store

    s = open_store(f"sqlite:///{tmp_path_factory.mktemp('web')}/sessions.db", create=True)
    for path in [*sorted(EXAMPLES.glob("*.jsonl")), *sorted(CORPUS.rglob("*.jsonl"))]:
        SessionManager.import_from_jsonl(path, None, s)
    add_hostile_session(s)
    yield s
    s.close()


@pytest.fixture(scope="module")
def server(store):
    with running_server(store) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with chromium() as driver:
        yield driver


def wait(driver, condition, timeout=10.0):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: condition(d))


def css(driver, selector):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def conv_text(driver) -> str:
    return css(driver, "#conv")[0].text


def tree_row(driver, entry_id):
    rows = [r for r in css(driver, "#tree .row") if r.get_attribute("title").startswith(entry_id)]
    return rows[0] if rows else None


def test_list_and_search(browser, server):
    browser.get(server + "/")
    titles = [a.text for a in css(browser, "#sessions td.title a")]
    assert len(titles) == 6 and "Fix 500 on city names with spaces" in titles
    box = css(browser, "input[name=q]")[0]
    box.send_keys("units flag")
    box.submit()
    wait(browser, lambda d: "q=units" in d.current_url)
    assert [a.text for a in css(browser, "#sessions td.title a")] == [
        "Add a --units flag to the CLI (metric or imperial)."]
    assert "scans session titles" in css(browser, "#search-mode")[0].text  # no store.search yet (issue 13)
    css(browser, "#sessions td.title a")[0].click()
    wait(browser, lambda d: f"/s/{COMPACTION}" in d.current_url and css(d, "#tree .row"))


def test_open_a_real_corpus_session(browser, server):
    browser.get(f"{server}/s/d703a1a9")  # a prefix, as on the command line
    wait(browser, lambda d: len(css(d, "#tree .row")) > 10 and css(d, "#conv .item"))
    assert "1018 entries" in css(browser, ".facts")[0].text
    assert "show" in css(browser, "button.earlier")[0].text  # a long branch is windowed
    css(browser, "button.earlier")[0].click()
    wait(browser, lambda d: len(css(d, "#conv .item")) > 150)
    # Tool calls are paired with their results.
    assert css(browser, "#conv .tool .tool-result:not(.missing)")


def test_switch_branch_on_branching_example(browser, server):
    browser.get(f"{server}/s/{BRANCHING}")
    wait(browser, lambda d: tree_row(d, "a1000006") is not None)
    assert "Let's do option 2 instead" in conv_text(browser)
    assert "active leaf" in tree_row(browser, "a100000e").text or "leaf" in tree_row(browser, "a100000e").get_attribute("class")
    assert "two-options" in tree_row(browser, "a1000005").text
    tree_row(browser, "a1000006").click()
    wait(browser, lambda d: "Try option 1: quote it." in conv_text(d))
    assert "Let's do option 2 instead" not in conv_text(browser)
    assert "leaf=a1000007" in browser.current_url and browser.current_url.endswith("#a1000006")
    assert css(browser, "#a1000006.target")
    # Fold the abandoned branch, then filter to user messages only.
    row = tree_row(browser, "a1000006")
    row.find_element("css selector", "[data-fold]").click()
    wait(browser, lambda d: tree_row(d, "a1000007") is None)
    from selenium.webdriver.support.ui import Select

    Select(css(browser, "#tree-filter")[0]).select_by_value("user-only")
    wait(browser, lambda d: tree_row(d, "a1000003") is None and tree_row(d, "a1000002") is not None)
    # Back to the active branch with the browser's history.
    browser.back()
    wait(browser, lambda d: "Let's do option 2 instead" in conv_text(d))


def test_projection_toggle_on_compaction(browser, server):
    browser.get(f"{server}/s/{COMPACTION}")
    wait(browser, lambda d: css(d, "#conv .item"))
    raw = conv_text(browser)
    assert "Compaction boundary" in raw
    css(browser, "#view-model")[0].click()
    wait(browser, lambda d: "Model's view" in conv_text(d))
    text = conv_text(browser)
    assert "entries not sent" in text and "kept in the compaction message" in text
    assert "Compaction: what the model sees" in text
    assert "view=model" in browser.current_url
    css(browser, "#view-raw")[0].click()
    wait(browser, lambda d: "Raw branch" in conv_text(d))


def test_projection_toggle_on_interrupted(browser, server):
    browser.get(f"{server}/s/{INTERRUPTED}")
    wait(browser, lambda d: css(d, "#conv .item"))
    assert "no result on this branch" in conv_text(browser)
    css(browser, "#view-model")[0].click()
    wait(browser, lambda d: "synthetic result" in conv_text(d))
    assert "interrupted" in css(browser, "#conv .mark.synthetic")[0].text


def test_hostile_content_is_shown_as_text_and_never_runs(browser, server):
    for view in ("raw", "model"):
        browser.get(f"{server}/s/{HOSTILE_ID}?view={view}")
        wait(browser, lambda d: css(d, "#conv .item.assistant"))
        assert browser.execute_script("return window.__pwned === undefined")
        text = conv_text(browser)
        assert '<script>window.__pwned = "script"</script>' in text
        assert "onerror=" in text and "[a link](javascript:" in text.replace("\n", "")
        # Only our own script element; no element with an event handler; no javascript: link.
        assert browser.execute_script(
            "return [...document.scripts].filter(s => s.src === '' && s.type !== 'application/json').length") == 0
        assert browser.execute_script(
            "return document.querySelectorAll('[onerror], iframe, a[href^=\"javascript:\"]').length") == 0
        assert not css(browser, "#conv img")  # the svg image is not shown as an image
    browser.get(server + "/?q=onerror")
    assert browser.execute_script("return window.__pwned === undefined")
    assert "onerror" in css(browser, "#sessions")[0].text


def test_live_updates_without_reload(browser, server, store):
    from sessiontree import SessionManager

    _scratch = _copy(store)
    browser.get(f"{server}/s/{_scratch}")
    wait(browser, lambda d: css(d, "#conv .item"))
    browser.execute_script("window.__sameDocument = true")
    manager = SessionManager.open(store, _scratch)
    started = time.monotonic()
    manager.append_message({"role": "user", "content": "a brand new message", "timestamp": 1772443300000})
    wait(browser, lambda d: "a brand new message" in conv_text(d), timeout=6)
    elapsed = time.monotonic() - started
    assert browser.execute_script("return window.__sameDocument === true")  # no reload
    assert elapsed < 4, elapsed  # 1 s polling; generous on a loaded machine


def _copy(store) -> str:
    """A fresh copy of the interrupted example under a new id; returns the id."""
    from sessiontree import SessionManager
    from sessiontree.format import read_session_file

    parsed = read_session_file(EXAMPLES / "interrupted.jsonl")
    header = {**parsed.header, "id": "live-session-1"}
    SessionManager.in_memory  # noqa: B018 (documented API; we create directly in the store)
    store.create(header, parsed.entries)
    return header["id"]


def test_html_export_opens_from_file_with_network_disabled(browser, store, tmp_path):
    from sessiontree import SessionManager
    from sessiontree.web.page import render_session_document

    manager = SessionManager.open(store, BRANCHING)
    path = tmp_path / "branching.html"
    path.write_text(render_session_document(manager), encoding="utf-8")
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    try:
        browser.get(path.as_uri())
        wait(browser, lambda d: css(d, "#tree .row") and css(d, "#conv .item"))
        assert "Let's do option 2 instead" in conv_text(browser)
        tree_row(browser, "a1000006").click()
        wait(browser, lambda d: "Try option 1: quote it." in conv_text(d))
        css(browser, "#view-model")[0].click()
        wait(browser, lambda d: "Model's view" in conv_text(d))
        # Nothing was fetched: no resource entries at all, and the page shows no error.
        assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
    finally:
        browser.execute_cdp_cmd("Network.emulateNetworkConditions", {
            "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
