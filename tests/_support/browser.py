"""A pytest plugin of this suite: one Chromium per test module, shared by its browser tests.

Debian's Chromium driven by Playwright (``playwright install`` cannot download its own browsers
here). Each test opens contexts of its own on it (``browser.new_context()``), which share no
cookies or storage. Per module, not per session: Playwright's sync API leaves an asyncio loop
marked as running in the thread while its browser is open, which other modules' Trio tests
must not inherit. A test that asks for ``browser`` is marked ``browser`` (``dev.py test
--quick`` leaves those out); without a browser it skips, saying why.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from _support.http_server import CHROMIUM, CHROMIUM_ARGS


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """The module's Chromium (a Playwright ``Browser``)."""
    if not CHROMIUM.exists():
        pytest.skip(f"needs Chromium at {CHROMIUM} (python3 dev.py test installs it as root)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()
