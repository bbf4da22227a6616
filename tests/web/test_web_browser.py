"""End-to-end tests of the viewer in headless Chromium (Debian ``chromium`` + ``chromium-driver``).

One server (a SQLite store with the examples, the real corpus and a hostile
session) and one browser serve the whole module. Skipped, with the reason,
where Chromium is not installed; ``.ci/run`` installs it.
"""

from __future__ import annotations

import contextlib
import time

import pytest

import corpus
from web_support import (
    EVIL_ID,
    EXAMPLES,
    HOSTILE_ID,
    add_evil_session,
    add_hostile_session,
    chromium_missing,
    css,
    running_server,
    wait,
)

_missing = chromium_missing()
pytestmark = [pytest.mark.browser, pytest.mark.skipif(_missing is not None, reason=_missing or "")]

BRANCHING = "019cadb4-6e80-7a3c-9b1d-2f4e6a8c0b01"
COMPACTION = "019cadc9-1f40-7b2e-8d3c-4a5b6c7d8e02"
INTERRUPTED = "019cadd2-8a00-7c1f-a2b3-5c6d7e8f9003"


@pytest.fixture(scope="module")
def corpus_store(tmp_path_factory):
    from sessiontree import SessionManager, open_store

    s = open_store(f"sqlite:///{tmp_path_factory.mktemp('web')}/sessions.db", create=True)
    # The corpus's pi files (the other agents' folders are synced, not imported:
    # tests/web/test_web_agents_browser.py opens their pages).
    for path in [*sorted(EXAMPLES.glob("*.jsonl")), *corpus.shared_files()]:
        SessionManager.import_from_jsonl(path, None, s)
    add_hostile_session(s)
    add_evil_session(s)
    _deep_chain(s)
    _deep_branches(s)
    yield s
    s.close()


@pytest.fixture(scope="module")
def server(corpus_store):
    with running_server(corpus_store) as url:
        yield url


def click(driver, selector, index=0):
    """Click the ``index``-th element matching ``selector``, found again if a redraw
    made it stale first (a stale element is reported before the click is sent)."""
    wait(driver, lambda d: css(d, selector)[index].click() or True)


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
    assert css(browser, "#search-mode") == []  # answered by store.search, not the fallback scan
    click(browser, "#sessions td.title a")
    wait(browser, lambda d: f"/s/{COMPACTION}" in d.current_url and css(d, "#tree .row"))


def test_open_a_real_corpus_session(browser, server):
    browser.get(f"{server}/s/d703a1a9")  # a prefix, as on the command line
    wait(browser, lambda d: len(css(d, "#tree .row")) > 10 and css(d, "#conv .item"))
    assert "1018 entries" in css(browser, ".facts")[0].text
    wait(browser, lambda d: "show" in css(d, "button.earlier")[0].text)  # a long branch is windowed
    click(browser, "button.earlier")
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
    wait(browser, lambda d: tree_row(d, "a1000006").find_element("css selector", "[data-fold]").click() or True)
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
    click(browser, "#view-model")
    wait(browser, lambda d: "Model's view" in conv_text(d))
    text = conv_text(browser)
    assert "entries not sent" in text and "kept in the compaction message" in text
    assert "Compaction: what the model sees" in text
    assert "view=model" in browser.current_url
    click(browser, "#view-raw")
    wait(browser, lambda d: "Raw branch" in conv_text(d))


def test_projection_toggle_on_interrupted(browser, server):
    browser.get(f"{server}/s/{INTERRUPTED}")
    wait(browser, lambda d: css(d, "#conv .item"))
    assert "no result on this branch" in conv_text(browser)
    click(browser, "#view-model")
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


def test_live_updates_without_reload(browser, server, corpus_store):
    from sessiontree import SessionManager

    _scratch = _copy(corpus_store)
    browser.get(f"{server}/s/{_scratch}")
    wait(browser, lambda d: css(d, "#conv .item"))
    browser.execute_script("window.__sameDocument = true")
    manager = SessionManager.open(corpus_store, _scratch)
    started = time.monotonic()
    manager.append_message({"role": "user", "content": "a brand new message", "timestamp": 1772443300000})
    wait(browser, lambda d: "a brand new message" in conv_text(d), timeout=6)
    elapsed = time.monotonic() - started
    assert browser.execute_script("return window.__sameDocument === true")  # no reload
    assert elapsed < 4, elapsed  # 1 s polling; generous on a loaded machine


def _copy(corpus_store) -> str:
    """A fresh copy of the interrupted example under a new id; returns the id."""
    from sessiontree import SessionManager
    from sessiontree.format.codec import read_session_file

    parsed = read_session_file(EXAMPLES / "interrupted.jsonl")
    header = {**parsed.header, "id": "live-session-1"}
    SessionManager.in_memory  # noqa: B018 (documented API; we create directly in the store)
    corpus_store.create(header, parsed.entries)
    return header["id"]


def test_html_export_opens_from_file_with_network_disabled(browser, corpus_store, tmp_path):
    from sessiontree import SessionManager
    from sessiontree.web.page import render_session_document

    manager = SessionManager.open(corpus_store, BRANCHING)
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
        click(browser, "#view-model")
        wait(browser, lambda d: "Model's view" in conv_text(d))
        # Nothing was fetched: no resource entries at all, and the page shows no error.
        assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
    finally:
        browser.execute_cdp_cmd("Network.emulateNetworkConditions", {
            "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})


# --------------------------------------------------------------------------- security (docs/viewer.md "Security")

DEEP_ID = "0deep-0000-4000-8000-000000000003"
DEEP_LENGTH = 10_000


def _deep_chain(corpus_store) -> None:
    """A 10,000-entry chain (no branch): nothing may recurse on its depth, in Python or in the script."""
    ts = "2026-01-01T00:00:00.000Z"
    entries = [{"type": "message", "id": f"d{i:05d}", "parentId": f"d{i - 1:05d}" if i else None, "timestamp": ts,
                "message": {"role": "user" if i % 2 == 0 else "assistant",
                            "content": f"message {i}" if i % 2 == 0 else [{"type": "text", "text": f"reply {i}"}],
                            "timestamp": 1767225600000 + i}} for i in range(DEEP_LENGTH)]
    corpus_store.create({"type": "session", "version": 4, "id": DEEP_ID, "createdAt": ts, "cwd": "/tmp/deep",
                  # internal (a workflow session): kept out of the default list the tests above count
                  "internal": True, "workflow": {"runId": "r", "stageId": "s", "stageName": "deep"}}, entries)


#: A session whose branches nest 40 levels deep (synthetic: no corpus file nests so deep
#: since the Claude Code mapping keeps one leaf per conversation).
BRANCHY_ID = "0branchy-0000-4000-8000-000000000041"
BRANCHY_LEVELS = 40


def _deep_branches(corpus_store) -> None:
    ts = "2026-01-01T00:00:00.000Z"
    entries = []
    parent = None
    for level in range(BRANCHY_LEVELS):
        for side in ("a", "b"):  # two children: "b" goes on, "a" is a one-entry branch
            entries.append({"type": "message", "id": f"n{level:02d}{side}", "parentId": parent, "timestamp": ts,
                            "message": {"role": "user", "content": f"level {level} {side}",
                                        "timestamp": 1767225600000 + 2 * level + (side == "b")}})
        parent = f"n{level:02d}b"
    corpus_store.create({"type": "session", "version": 4, "id": BRANCHY_ID, "createdAt": ts, "cwd": "/tmp/branchy",
                  "internal": True, "workflow": {"runId": "r", "stageId": "s", "stageName": "branchy"}}, entries)


def test_deeply_nested_branches_stay_inside_the_tree_pane(browser, server):
    browser.get(f"{server}/s/{BRANCHY_ID}")
    wait(browser, lambda d: tree_row(d, "n39b") is not None)
    pane = browser.execute_script("return document.getElementById('tree').getBoundingClientRect().right;")
    lefts = browser.execute_script(
        "return Array.prototype.map.call(document.querySelectorAll('#tree .row .id'),"
        " function (e) { return e.getBoundingClientRect().left; });")
    assert lefts and max(lefts) < pane - 100
    # The deepest rows say their level instead of moving right.
    assert tree_row(browser, "n39b").find_element("css selector", ".deep").text.startswith("↳")


def _not_pwned(driver) -> None:
    assert driver.execute_script("return window.__pwned === undefined"), driver.execute_script("return window.__pwned")
    assert driver.title != "PWNED" and "PWNED" != driver.execute_script("return document.title")


def _errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _exercise_every_control(driver) -> None:
    """Click every tree row, both views for each, every branch of the select, every fold."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

    css(driver, "#tree-filter option[value='all']")[0].click()
    count = len(css(driver, "#tree .row"))
    assert count > 10
    for i in range(count):
        try:
            css(driver, "#tree .row")[i].click()
            for v in ("#view-model", "#view-raw"):
                css(driver, v)[0].click()
                wait(driver, lambda d: css(d, "#conv .conv-head"))
        except (StaleElementReferenceException, IndexError):
            continue
        _not_pwned(driver)
    for value in [o.get_attribute("value") for o in css(driver, "#branch-select option")]:
        driver.execute_script("var s = document.getElementById('branch-select'); s.value = arguments[0];"
                              "s.dispatchEvent(new Event('change'));", value)
        wait(driver, lambda d: css(d, "#conv .conv-head"))
    for el in css(driver, "#conv details summary, #conv a.anchor"):
        with contextlib.suppress(WebDriverException):  # hidden or scrolled away: nothing to prove there
            el.click()
    _not_pwned(driver)


def _csp_blocks_injected_markup(driver) -> None:
    """If markup ever slipped through, the policy still stops it: prove it by injecting some."""
    driver.get_log("browser")  # drain
    driver.execute_script(
        "document.getElementById('conv').insertAdjacentHTML('beforeend',"
        " '<img src=x onerror=\"window.__pwned=1\"><div onclick=\"window.__pwned=2\" id=\"clk\">x</div>');"
        "var s = document.createElement('script'); s.textContent = 'window.__pwned = 3';"
        "document.body.appendChild(s);")
    driver.execute_script("document.getElementById('clk').click()")
    time.sleep(0.3)
    _not_pwned(driver)
    blocked = [m for m in _errors(driver) if "Content Security Policy" in m]
    assert len(blocked) >= 2, blocked  # the inline script and the inline handler(s) were refused


def test_every_hostile_field_in_server_pages_never_runs(browser, server):
    browser.get_log("browser")
    for path in ("/?internal=1", "/?internal=1&q=img", f"/s/{EVIL_ID}?view=model", f"/s/{EVIL_ID}"):
        browser.get(server + path)
        wait(browser, lambda d: d.execute_script("return document.readyState") == "complete")
        _not_pwned(browser)
    wait(browser, lambda d: css(d, "#conv .item.assistant"))
    assert "&lt;" not in conv_text(browser) and "<script>window.__pwned=2</script>" in conv_text(browser)
    _exercise_every_control(browser)
    assert not _errors(browser), _errors(browser)  # nothing needed blocking: it was all text
    _csp_blocks_injected_markup(browser)


def test_every_hostile_field_in_the_export_never_runs(browser, corpus_store, tmp_path):
    from sessiontree import SessionManager
    from sessiontree.web.page import render_session_document

    path = tmp_path / "evil.html"
    path.write_text(render_session_document(SessionManager.open(corpus_store, EVIL_ID)), encoding="utf-8")
    browser.get_log("browser")
    browser.get(path.as_uri())
    wait(browser, lambda d: css(d, "#tree .row") and css(d, "#conv .item"))
    _not_pwned(browser)
    _exercise_every_control(browser)
    assert not _errors(browser), _errors(browser)  # the inline script and style match the policy's hashes
    _csp_blocks_injected_markup(browser)


def test_a_malformed_fragment_does_not_stop_the_page(browser, server, corpus_store, tmp_path):
    """decodeURIComponent("%E0%A4%A") throws: the script used to stop there, leaving the tree empty."""
    from sessiontree import SessionManager
    from sessiontree.web.page import render_session_document

    path = tmp_path / "branching.html"
    path.write_text(render_session_document(SessionManager.open(corpus_store, BRANCHING)), encoding="utf-8")
    for url in (f"{server}/s/{BRANCHING}#%E0%A4%A", path.as_uri() + "#%E0%A4%A", f"{server}/s/{BRANCHING}#a1000006"):
        browser.get_log("browser")
        browser.get(url)
        wait(browser, lambda d: css(d, "#tree .row") and css(d, "#conv .item"))
        assert not [m for m in _errors(browser) if "URIError" in m]


def test_a_10000_deep_chain(browser, server):
    browser.get_log("browser")  # drain
    browser.get(f"{server}/s/{DEEP_ID}")
    wait(browser, lambda d: css(d, "#tree .row") and css(d, "#conv .item"), timeout=60)
    assert f"reply {DEEP_LENGTH - 1}" in conv_text(browser)
    assert browser.execute_script("return document.getElementById('tree-count').textContent").startswith(
        f"{DEEP_LENGTH} of {DEEP_LENGTH}")
    # The first entry, far up: the window around it is loaded, and the tree scrolls to it.
    browser.execute_script("var t = document.getElementById('tree'); t.scrollTop = 0; t.dispatchEvent(new Event('scroll'))")
    wait(browser, lambda d: tree_row(d, "d00000"))
    tree_row(browser, "d00000").click()
    wait(browser, lambda d: "message 0" in conv_text(d), timeout=30)
    assert not _errors(browser), _errors(browser)


def test_show_earlier_never_inserts_an_error_body(browser, server, corpus_store):
    """The session vanishes while the page is open: "show earlier" gets a plain-text 404 and must
    not put it in the page (an error body may quote the session); the live indicator goes stale."""
    from sessiontree.format.codec import read_session_file

    parsed = read_session_file(EXAMPLES / "branching.jsonl")
    entries, parent = [], None
    for i in range(260):
        entries.append({"type": "message", "id": f"v{i:04d}", "parentId": parent, "timestamp": "2026-01-01T00:00:00Z",
                        "message": {"role": "user", "content": f"line {i}", "timestamp": 1}})
        parent = f"v{i:04d}"
    sid = "vanishing-session-1"
    corpus_store.create({**parsed.header, "id": sid}, entries)
    browser.get(f"{server}/s/{sid}")
    wait(browser, lambda d: css(d, "#conv button.earlier"))
    corpus_store.delete(sid)
    wait(browser, lambda d: "stale" in css(d, "#live")[0].get_attribute("class"), timeout=6)
    click(browser, "#conv button.earlier")
    time.sleep(1)
    assert "No such session" not in conv_text(browser) and css(browser, "#conv button.earlier")
    # Leave the page: its live polling of the deleted session would log 404s into the next test.
    browser.get("about:blank")
    browser.get_log("browser")


# --------------------------------------------------------------------------- windows

def _fetched(driver, part: str) -> int:
    return driver.execute_script(
        "return performance.getEntriesByType('resource').filter(e => e.name.includes(arguments[0])).length", part)


def test_scrolling_the_tree_fetches_more_rows(browser, server):
    browser.get(f"{server}/s/{DEEP_ID}")
    wait(browser, lambda d: css(d, "#tree .row[data-row]") and css(d, "#conv .item"), timeout=60)
    # The page came with one window of rows around the leaf, not the whole tree.
    assert browser.execute_script("return JSON.parse(document.getElementById('tree-data').textContent).rows.length") <= 200
    before = _fetched(browser, "/rows.json")
    browser.execute_script("var t = document.getElementById('tree'); t.scrollTop = 20 * 5000;"
                           " t.dispatchEvent(new Event('scroll'))")
    wait(browser, lambda d: tree_row(d, "d05000"), timeout=30)
    assert _fetched(browser, "/rows.json") > before
    assert len(css(browser, "#tree .row")) < 200  # only the rows on screen exist
    tree_row(browser, "d05000").click()
    wait(browser, lambda d: "message 5000" in conv_text(d), timeout=30)


def test_scrolling_the_conversation_up_fetches_earlier_messages(browser, server):
    browser.get(f"{server}/s/{DEEP_ID}")
    wait(browser, lambda d: css(d, "#conv .item"), timeout=60)
    shown = len(css(browser, "#conv .item"))
    assert shown < 200 and f"reply {DEEP_LENGTH - 1}" in conv_text(browser)
    first = css(browser, "#conv .item")[0].get_attribute("id")
    assert f"d{DEEP_LENGTH - shown - 1:05d}" not in {e.get_attribute("id") for e in css(browser, "#conv .item")}
    browser.execute_script("var c = document.getElementById('conv'); c.scrollTop = 0; c.dispatchEvent(new Event('scroll'))")
    wait(browser, lambda d: len(css(d, "#conv .item")) > shown, timeout=30)
    ids = [e.get_attribute("id") for e in css(browser, "#conv .item")]
    assert f"d{DEEP_LENGTH - shown - 1:05d}" in ids and ids.index(first) > 0  # earlier ones went above
    assert len(ids) == len(set(ids))  # no item twice


def test_a_permalink_far_from_the_end_lands_on_its_entry(browser, server):
    # From a fresh document: an earlier test of this worker may have left the page at this very
    # URL (the viewer pushes ?leaf=...&view=... into the history), and then loading it with only
    # a new #fragment is a same-document jump that does not reload the page.
    browser.get("about:blank")
    browser.get_log("browser")  # drain
    browser.get(f"{server}/s/{DEEP_ID}?leaf=d{DEEP_LENGTH - 1:05d}&view=raw#d00042")
    wait(browser, lambda d: css(d, "#conv .item.target"), timeout=60)
    target = css(browser, "#conv .item.target")[0]
    assert target.get_attribute("id") == "d00042" and "message 42" in target.text
    wait(browser, lambda d: tree_row(d, "d00042") and "current" in tree_row(d, "d00042").get_attribute("class"),
         timeout=30)
    assert not _errors(browser), _errors(browser)
