"""A real Chromium driven by Playwright, and the extender it is pointed at.

Playwright's own browser builds are not used (they are downloaded from the internet);
the system's Chromium is: ``VGPU_TEST_CHROMIUM`` when set, else ``chromium`` (or
``chromium-browser``) on the PATH, else Debian's ``/usr/bin/chromium``. Without one
the browser tests are skipped, with a warning saying so.
"""

from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.browser.cluster import start_cluster
from tests.support.server import RunningExtender

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

DEBIAN_CHROMIUM = "/usr/bin/chromium"


def chromium_path() -> str | None:
    configured = os.environ.get("VGPU_TEST_CHROMIUM")
    if configured:
        return configured
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return DEBIAN_CHROMIUM if os.access(DEBIAN_CHROMIUM, os.X_OK) else None


def _skip(reason: str) -> None:
    warnings.warn(reason, stacklevel=1)
    pytest.skip(reason)


# The browser tests' package only: the browser and its driver go when they end.
@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    executable = chromium_path()
    if executable is None:
        _skip("no Chromium installed (set VGPU_TEST_CHROMIUM): the browser tests did not run")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _skip(f"playwright is not installed ({exc}): the browser tests did not run")
    playwright = sync_playwright().start()
    try:
        # --no-sandbox: the suite may run as root (containers), where Chromium's
        # sandbox refuses to start.
        launched = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()
    finally:
        playwright.stop()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh page (its own sessionStorage), closed after the test."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    opened = context.new_page()
    try:
        yield opened
    finally:
        context.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RunningExtender]:
    """Reads open to everyone (as ``open_reads``), changes only with the token."""
    running = start_cluster(tmp_path, open_reads=True)
    yield running
    running.stop()


@pytest.fixture
def guarded_cluster(tmp_path: Path) -> Iterator[RunningExtender]:
    """Reads need the token too (the default once a token is configured)."""
    running = start_cluster(tmp_path)
    yield running
    running.stop()
