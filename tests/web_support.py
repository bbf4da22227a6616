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

from sessiontree import SessionManager
from sessiontree.stores.base import SessionStore

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
CORPUS = REPO.parent / "shared" / "corpus"
if not CORPUS.is_dir():  # a worktree next to the main checkout
    CORPUS = Path("/work/shared/corpus")

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
