"""Fixtures shared by the viewer's browser tests."""

from __future__ import annotations

import pytest

from web_support import chromium


@pytest.fixture(scope="module")
def browser(request):
    """Headless Chromium (web_support.chromium), one per test module; a module sets its
    window size as ``WINDOW = (width, height)``, else chromium's default."""
    with chromium(*getattr(request.module, "WINDOW", ())) as driver:
        yield driver
