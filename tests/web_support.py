"""Helpers of the viewer's tests: a hostile session, a server in a thread, headless Chromium."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import corpus
from sessiontree import SessionManager
from sessiontree.stores.base import SessionStore

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
CORPUS = corpus.shared()

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

#: What a hostile message tries; none of it may run.
HOSTILE_USER = 'Look: <script>window.__pwned = "script"</script> and <img src=x onerror="window.__pwned=\'img\'">'
HOSTILE_ASSISTANT = ('Here is [a link](javascript:window.__pwned=%22link%22) and raw '
                     '<img src=y onerror="window.__pwned=\'md-img\'"> and <script>window.__pwned="md"</script>.')
HOSTILE_ID = "0hostile-0000-4000-8000-000000000001"


def add_hostile_session(store: SessionStore) -> str:
    """A session whose messages try script injection; returns its id."""
    m = SessionManager.create("/tmp/evil<project>", store=store, id=HOSTILE_ID)
    m.append_message({"role": "user", "content": HOSTILE_USER, "timestamp": 1767225600000})
    m.append_message({"role": "assistant", "content": [{"type": "text", "text": HOSTILE_ASSISTANT},
                                                        {"type": "toolCall", "id": "c1", "name": "bash<b>",
                                                         "arguments": {"command": "</script><script>alert(1)</script>"}}],
                      "provider": "x", "model": "m<i>", "stopReason": "toolUse", "timestamp": 1767225601000})
    m.append_message({"role": "toolResult", "toolCallId": "c1", "toolName": "bash<b>",
                      "content": [{"type": "text", "text": "<iframe src=javascript:alert(1)>"},
                                  {"type": "image", "mimeType": "image/svg+xml", "data": "PHN2Zz4="}],
                      "isError": False, "timestamp": 1767225602000})
    m.append_session_info('<img src=z onerror="window.__pwned=\'title\'">')
    return HOSTILE_ID


HOSTILE_BRANCHES_ID = "0cmp0000-0000-4000-8000-000000000003"


def add_hostile_branches(store: SessionStore) -> str:
    """Two branches below one prompt, both carrying script-injection attempts (the
    compare page's hostile pair, docs/diff.md); returns the session's id."""
    m = SessionManager.create("/w", store=store, id=HOSTILE_BRANCHES_ID)
    root = m.append_message({"role": "user", "content": "start", "timestamp": 1767225600000})
    m.append_message({"role": "user", "content": HOSTILE_USER, "timestamp": 1767225601000})
    m.branch(root)
    m.append_message({"role": "assistant", "content": [{"type": "text", "text": HOSTILE_ASSISTANT}],
                      "provider": "x<b>", "model": "m<i>", "stopReason": "stop", "timestamp": 1767225602000})
    return HOSTILE_BRANCHES_ID


#: Payloads planted in every field of :func:`evil_session`: each would set
#: ``window.__pwned`` or the page title if it ran.
EVIL = ('"\'><img src=x onerror="window.__pwned=1;document.title=\'PWNED\'"><script>window.__pwned=2</script>'
        '<svg onload="window.__pwned=3"></svg></script><!--')
EVIL_JS = "javascript:window.__pwned=4//"
_TS = "2026-01-01T00:00:00.000Z"
EVIL_ID = "0evil-0000-4000-8000-000000000002"


def _evil_id(n: int) -> str:
    return f"{EVIL_JS}{EVIL}e{n}"


def evil_session() -> tuple[dict, list[dict]]:
    """Header and entries of a session with a hostile value in every field the viewer shows."""
    header = {"type": "session", "version": 4, "id": EVIL_ID, "createdAt": _TS, "cwd": "/tmp/" + EVIL,
              "parentSessionId": EVIL, "internal": True,
              "workflow": {"runId": EVIL, "stageId": EVIL, "stageName": EVIL}}
    e: list[dict] = []

    def add(entry: dict) -> dict:
        entry.setdefault("id", _evil_id(len(e)))
        entry.setdefault("parentId", e[-1]["id"] if e else None)
        entry.setdefault("timestamp", EVIL)
        e.append(entry)
        return entry
    add({"type": "model_change", "provider": EVIL, "modelId": EVIL})
    add({"type": "thinking_level_change", "thinkingLevel": EVIL})
    add({"type": "message", "message": {"role": "user", "content": EVIL + "\u2028\u2029\x00", "timestamp": 1}})
    md = "\n\n".join([f"[l1]({EVIL_JS})", "[l2](jav&#x61;script:window.__pwned=5)", "<javascript:window.__pwned=6>",
                      "[l3](data:text/html,<script>window.__pwned=7</script>)", "![i](data:image/svg+xml;base64,PHN2Zy8+)",
                      "[l4][r]\n\n[r]: vbscript:x", "<div onmouseover=window.__pwned=8>html block</div>",
                      "inline <b onclick=x>html</b>", "![x\" onerror=\"window.__pwned=9](y)", "```html\n" + EVIL + "\n```",
                      "| a | b |\n|---|---|\n| " + EVIL.replace("|", "") + " | x |", "<https://example.com/" + EVIL + ">",
                      "[l5](https://example.com/\"onmouseover=\"window.__pwned=10)"])
    add({"type": "message", "message": {"role": "assistant", "content": [
        {"type": "thinking", "thinking": EVIL},
        {"type": "text", "text": md + EVIL},
        {"type": "toolCall", "id": "call" + EVIL, "name": EVIL, "arguments": {EVIL: {"nested" + EVIL: [EVIL, {"k": EVIL}]}}},
        {"type": "toolCall", "id": "call2", "name": "bash", "arguments": EVIL}],
        "provider": EVIL, "model": EVIL, "stopReason": "error", "errorMessage": EVIL,
        "usage": {"input": EVIL, "cost": {"total": EVIL}}, "timestamp": 2}})
    add({"type": "message", "message": {"role": "toolResult", "toolCallId": "call" + EVIL, "toolName": EVIL, "isError": True,
        "content": [{"type": "text", "text": EVIL},
                    {"type": "image", "mimeType": "image/svg+xml", "data": "PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+"},
                    {"type": "image", "mimeType": "text/html", "data": "PHNjcmlwdD4="},
                    {"type": "image", "mimeType": "image/png\" onerror=\"window.__pwned=11", "data": "AAAA"},
                    {"type": "image", "mimeType": "image/png", "data": "AA\"AA</script>"},
                    {"type": "image", "mimeType": "IMAGE/PNG", "data": "iVBORw0KGgo="}], "timestamp": 3}})
    add({"type": "message", "message": {"role": "bashExecution", "command": EVIL, "output": EVIL, "exitCode": EVIL,
                                        "cancelled": False, "truncated": False, "timestamp": 4}})
    add({"type": "custom_message", "customType": EVIL, "content": EVIL, "display": True})
    add({"type": "custom", "customType": EVIL, "data": {EVIL: EVIL}})
    add({"type": "message", "message": {"role": EVIL, "content": EVIL, "timestamp": 5}})
    add({"type": "message", "message": {"role": "custom", "customType": EVIL, "content": [{"type": "text", "text": EVIL}], "timestamp": 6}})
    add({"type": "label", "targetId": e[2]["id"], "label": EVIL})
    add({"type": "session_info", "name": EVIL})
    add({"type": EVIL, "data": EVIL})
    add({"type": "context_edit", "targetId": e[4]["id"], "replacement": {"content": EVIL}})
    add({"type": "context_edit", "targetId": e[3]["id"], "replacement": None})
    add({"type": "context_edit", "targetId": EVIL, "replacement": None})
    add({"type": "branch_summary", "fromId": EVIL, "summary": EVIL + "[x](javascript:y)"})
    add({"type": "compaction", "summary": EVIL, "firstKeptEntryId": e[5]["id"], "tokensBefore": EVIL})
    add({"type": "message", "message": {"role": "user", "content": "after " + EVIL, "timestamp": 7}})
    # a second branch from e[3]
    add({"type": "message", "parentId": e[3]["id"], "message": {"role": "user", "content": "other " + EVIL, "timestamp": 8}})
    # and a tail on main again so the active leaf is the main one
    add({"type": "message", "parentId": e[-2]["id"], "message": {"role": "assistant", "content": [{"type": "text", "text": "end " + EVIL}], "timestamp": 9}})
    return header, e


def add_evil_session(store: SessionStore) -> str:
    """:func:`evil_session` in ``store``, plus a lone surrogate (an emoji cut in half); returns its id."""
    header, entries = evil_session()
    entries.append({"type": "message", "id": "cut\ud83d", "parentId": entries[-1]["id"], "timestamp": _TS,
                    "message": {"role": "user", "content": "cut emoji \ud83d here", "timestamp": 10}})
    entries.append({"type": "label", "id": "lab-cut", "parentId": "cut\ud83d", "timestamp": _TS,
                    "targetId": "cut\ud83d", "label": "half \udc00"})
    store.create(header, entries)
    return EVIL_ID


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_server(store: SessionStore, token: str | None = None) -> Iterator[str]:
    """Serve ``store`` on a free loopback port in a thread; yields the base URL."""
    import uvicorn

    from sessiontree.web.app import ViewerConfig, create_app

    port = free_port()
    config = uvicorn.Config(create_app(store, ViewerConfig("127.0.0.1", port, token)), host="127.0.0.1",
                            port=port, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the viewer did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or ``None``."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.path.exists(path):
            return f"{path} is not installed (apt-get install chromium chromium-driver; .ci/run does it)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    return None


@contextmanager
def chromium(width: int = 1400, height: int = 900) -> Iterator[object]:
    """Headless Chromium driven by chromedriver, with a fresh profile (removed afterwards)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="sessiontree-chromium-")
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def css(driver, selector: str) -> list:
    """The elements of the page matching the CSS ``selector`` (maybe none)."""
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def wait(driver, condition, timeout: float = 10.0):
    """``condition(driver)``'s first true value, tried every 50 ms for ``timeout`` seconds
    (selenium's ``TimeoutException`` after that)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # The pages redraw parts of themselves (the tree pane its rows when a window of them
    # arrives): an element found just before a redraw goes stale, and the condition is
    # simply tried again.
    return WebDriverWait(driver, timeout, poll_frequency=0.05,
                         ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: condition(d))
