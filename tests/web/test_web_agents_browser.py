"""Session pages of every agent in headless Chromium, on real files of ``../shared/corpus``
synced as ``sessiontree sync`` brings them in (issue 41; docs/viewer.md, "Turns"):
nothing wider than the viewport, no empty entry box, the agent's badge and its own
resume command, a subagent folded at its Task call that opens.

``SCREENSHOTS=1`` also writes each page to ``docs/screenshots/session-<agent>.png``.
"""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from corpus import NEEDS_SHARED, shared
from web_support import REPO, chromium_missing, css, running_server, wait

_missing = chromium_missing()
pytestmark = [pytest.mark.browser, pytest.mark.skipif(_missing is not None, reason=_missing or ""), *NEEDS_SHARED]

#: The browser window (tests/web/conftest.py's browser fixture).
WINDOW = (1280, 860)

PI = "pi-v1/pi-mono-before-compaction.jsonl"
CLAUDE = "claude-code/projects/-Users-paul-src-entireio-cli/61cb3ba8-484b-4a21-bf99-34f7dc361170.jsonl"
CODEX = "codex/sessions/2025/09/26/rollout-2025-09-26T17-01-04-019985ca-7ef7-7580-a921-c20ac619f40b.jsonl"
GEMINI = ("gemini/tmp/7e8989f71805c3147f6be9b7a71de2a156f8face69f9380beeeb8a777414f21c/chats/"
          "session-2026-01-15T20-51-f7633853.json")
#: 61cb3ba8's Task call (line 10 of the file), its subagent's 43 agent_progress records (lines 12-54).
TASK_ENTRY = "71b5477e-a3c8-4a55-a7a8-9129fc02f5a8"

#: (agent, corpus file, session id prefix, how the agent's own resume command starts)
PAGES = [
    ("pi", PI, None, "cd "),
    ("claude-code", CLAUDE, "61cb3ba8", "cd /Users/paul/src/entireio/cli && claude --resume 61cb3ba8-"),
    ("codex", CODEX, "019985ca", " && codex resume 019985ca-"),
    ("gemini", GEMINI, "f7633853", "gemini --resume f7633853-"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from sessiontree import open_store
    from sessiontree.cli import cli

    db = tmp_path_factory.mktemp("agents") / "sessions.db"
    result = CliRunner().invoke(cli, ["--store", str(db), "sync", *(str(shared(rel)) for _, rel, _, _ in PAGES)])
    assert result.exit_code == 0, result.output
    store = open_store(f"sqlite:///{db}")
    with running_server(store) as url:
        yield url, store
    store.close()


#: Elements whose visible right edge lies past the viewport (a scroll pane's content scrolls
#: inside it, a clipped text ends with an ellipsis: both are measured against their box).
_OVERFLOW_JS = """
var vw = document.documentElement.clientWidth, bad = [];
document.querySelectorAll('body *').forEach(function (e) {
  var r = e.getBoundingClientRect(), right = r.right;
  // What a clipping or scrolling ancestor cuts off is not on the page.
  for (var a = e.parentElement; a && a !== document.body; a = a.parentElement) {
    if (getComputedStyle(a).overflowX !== 'visible') right = Math.min(right, a.getBoundingClientRect().right);
  }
  if (r.width > 0 && right > vw + 1) bad.push(e.tagName + '.' + e.className + ' ' + Math.round(right));
});
return [document.documentElement.scrollWidth - vw, bad.slice(0, 5)];
"""

#: Entry boxes with nothing under their heading.
_EMPTY_JS = """
return Array.prototype.filter.call(document.querySelectorAll('#conv article.item'), function (a) {
  return Array.prototype.every.call(a.children, function (c) { return c.classList.contains('item-head'); });
}).map(function (a) { return a.id; });
"""


def _session_id(store, agent, prefix):
    ids = store.session_ids()
    if prefix is None:  # the pi file: the one session no other agent wrote
        from sessiontree.format.foreign.common import agent_of_header

        return next(i for i in ids if agent_of_header(store.read(i).header) == "pi")
    return next(i for i in ids if i.startswith(prefix))


@pytest.mark.parametrize(("agent", "rel", "prefix", "resume"), PAGES, ids=[p[0] for p in PAGES])
def test_session_page_of_each_agent(browser, server, agent, rel, prefix, resume):
    url, store = server
    session = _session_id(store, agent, prefix)
    browser.get(f"{url}/s/{session}")
    wait(browser, lambda d: css(d, "#tree .row") and css(d, "#conv .turn"))
    assert css(browser, "#agent-badge")[0].text == agent
    command = css(browser, "#resume-command")[0].get_attribute("textContent")
    assert resume in command and not (agent != "pi" and "pi --session" in command), command
    if agent == "pi":
        assert " && pi --session " in command and command.endswith(".jsonl")
    widen, bad = browser.execute_script(_OVERFLOW_JS)
    assert widen <= 0 and bad == [], bad
    assert browser.execute_script(_EMPTY_JS) == []
    # Every tree row shows its id inside the tree pane (rows indent by branch, not depth).
    assert browser.execute_script(
        "var pane = document.getElementById('tree').getBoundingClientRect();"
        "return Array.prototype.filter.call(document.querySelectorAll('#tree .row .id'),"
        " function (e) { return e.getBoundingClientRect().left > pane.right - 60; }).length;") == 0
    heads = [h.text for h in css(browser, "#conv .turn-head")]
    assert heads and all("assistant message" in h and "tool call" in h for h in heads)
    if os.environ.get("SCREENSHOTS"):
        # The last turn from its user message: its counts, folded records and parts.
        browser.execute_script("var t = document.querySelectorAll('#conv .turn:not(.continued)');"
                               "if (t.length) t[t.length - 1].scrollIntoView({block: 'start'});")
        browser.save_screenshot(str(REPO / "docs" / "screenshots" / f"session-{agent}.png"))


def test_a_subagent_folded_at_its_task_call_opens(browser, server):
    url, _ = server
    browser.get(f"{url}/s/61cb3ba8#{TASK_ENTRY}")
    wait(browser, lambda d: css(d, f"[id='{TASK_ENTRY}'] details.subagent"))
    fold = css(browser, f"[id='{TASK_ENTRY}'] details.subagent")[0]
    summary = fold.find_element("css selector", "summary")
    assert summary.text == "subagent a1f8104 · 43 messages"
    assert fold.get_attribute("open") is None
    steps = fold.find_elements("css selector", ".step")
    assert len(steps) == 43 and not steps[0].is_displayed()
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", summary)
    summary.click()
    wait(browser, lambda d: fold.get_attribute("open") is not None and steps[0].is_displayed())
    assert "Find and read all files related to shell completion" in steps[0].text
    # Folded hook and progress records open the same way, never as boxes of their own.
    records = css(browser, f"[id='{TASK_ENTRY}'] details.annotations")[0]
    head = records.find_element("css selector", "summary")
    assert "progress" in head.text
    head.click()
    items = records.find_elements("css selector", "li")
    wait(browser, lambda d: items[0].is_displayed())
    assert head.text.startswith(f"{len(items)} records: ")
    if os.environ.get("SCREENSHOTS"):
        browser.execute_script("arguments[0].scrollIntoView({block: 'start'})", fold)
        browser.save_screenshot(str(REPO / "docs" / "screenshots" / "session-claude-code-subagent.png"))
