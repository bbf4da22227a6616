"""The usage dashboard in headless Chromium: the charts are drawn, the page logs no console
error, the table view opens, and both themes (chosen, and followed from the system) apply.

Screenshots: set ``SESSIONTREE_SCREENSHOTS`` to a folder (``docs/screenshots`` for the
committed ones: ``usage-light.png``, ``usage-dark.png``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from builders import billed_assistant as _assistant
from builders import header as _header
from builders import usage as _usage
from corpus import vendored
from web_support import EXAMPLES, chromium_missing, css, running_server

_missing = chromium_missing()
pytestmark = [pytest.mark.browser, pytest.mark.skipif(_missing is not None, reason=_missing or "")]

#: The browser window (tests/web/conftest.py's browser fixture).
WINDOW = (1280, 1400)

QUERY = "since=2020-01-01&tz=UTC"


@pytest.fixture(scope="module")
def usage_store(tmp_path_factory):
    from sessiontree import SessionManager, open_store

    s = open_store(f"sqlite:///{tmp_path_factory.mktemp('usage')}/sessions.db", create=True)
    for path in [*sorted(EXAMPLES.glob("*.jsonl")), vendored("pi-v1/pi-mono-large-session.jsonl")]:
        SessionManager.import_from_jsonl(path, None, s)
    s.create(_header("7f0c1e2a-0000-4000-8000-00000000d45b", cwd="/home/me/app",
                     created="2026-02-01T00:00:00.000Z", foreign={"agent": "claude-code"}), [
        _assistant("c1", None, "2026-02-01T23:30:00.000Z", _usage(1000, 200, 5000, 300),
                   model="claude-sonnet-4-5", provider="anthropic")])
    yield s
    s.close()


@pytest.fixture(scope="module")
def server(usage_store):
    with running_server(usage_store) as url:
        yield url


def _severe(driver):
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _background(driver):
    return driver.execute_script("return getComputedStyle(document.body).backgroundColor")


def _shot(driver, name, tmp_path):
    path = tmp_path / name
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 10_000  # a drawn page, not a blank one
    folder = os.environ.get("SESSIONTREE_SCREENSHOTS")
    if folder:
        shutil.copy(path, Path(folder) / name)


def test_charts_tables_and_the_light_theme(server, browser, tmp_path):
    browser.get_log("browser")  # drain
    browser.get(f"{server}/usage?{QUERY}&theme=light")
    bars = css(browser, "#period-chart rect")
    # Days with calls (hand count): 2025-11-20, 2025-11-21 (the large pi session), 2026-02-01
    # (Claude Code), 2026-03-02 (the examples): at least one segment each.
    assert len(css(browser, "#period-chart g.bar")) == 4 and len(bars) >= 4
    assert all(float(bar.get_attribute("height")) >= 0 for bar in bars)
    assert len(css(browser, "#heatmap rect")) == 7 * 24
    assert css(browser, "#heatmap rect.h9"), "the busiest hour is drawn darkest"
    table = css(browser, "#period-table table")[0]
    assert not table.is_displayed()
    css(browser, "#period-table summary")[0].click()
    assert table.is_displayed()
    assert len(css(browser, "#period-table tbody tr")) == 4
    assert "~$" in css(browser, "#total-cost")[0].text  # the Claude Code call is estimated
    assert _background(browser) == "rgb(253, 253, 252)"
    assert _severe(browser) == []
    _shot(browser, "usage-light.png", tmp_path)


def test_the_dark_theme_chosen_and_followed(server, browser, tmp_path):
    browser.get_log("browser")
    browser.get(f"{server}/usage?{QUERY}&theme=dark&stack=project")
    assert _background(browser) == "rgb(21, 23, 26)"
    fill = browser.execute_script("return getComputedStyle(document.querySelector('#period-chart rect.s0')).fill")
    assert fill == "rgb(110, 168, 255)"  # the dark palette's first series
    assert _severe(browser) == []
    _shot(browser, "usage-dark.png", tmp_path)
    # theme=auto follows the system's setting.
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia",
                            {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    try:
        browser.get(f"{server}/usage?{QUERY}")
        assert _background(browser) == "rgb(21, 23, 26)"
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia",
                                {"features": [{"name": "prefers-color-scheme", "value": "light"}]})
        browser.get(f"{server}/usage?{QUERY}")
        assert _background(browser) == "rgb(253, 253, 252)"
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    assert _severe(browser) == []


def test_filters_submit_and_links_lead_to_sessions(server, browser):
    from selenium.webdriver.support.ui import Select

    browser.get(f"{server}/usage?{QUERY}")
    Select(css(browser, "select[name=agent]")[0]).select_by_value("claude-code")
    from selenium.webdriver.support.ui import WebDriverWait

    css(browser, "form.filters button")[0].click()
    # The submit navigates: wait for the new page rather than read the URL mid-navigation.
    WebDriverWait(browser, 10).until(lambda b: "agent=claude-code" in b.current_url)
    assert len(css(browser, "#period-chart g.bar")) == 1
    css(browser, "#session-table a")[0].click()
    WebDriverWait(browser, 10).until(lambda b: "/s/7f0c1e2a-0000-4000-8000-00000000d45b" in b.current_url)
    assert _severe(browser) == []
