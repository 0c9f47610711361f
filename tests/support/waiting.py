"""Waiting for what the extender does in the background (watches, workers, electors).

Nothing about timing is asserted: the deadline only keeps a broken test from hanging.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.support.server import RunningExtender

DEADLINE_S = 20.0


def eventually(check: Callable[[], bool], what: str = "the state settled") -> None:
    """Return once ``check()`` holds; fail the test naming ``what`` if it never does."""
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"never happened: {what}")
        time.sleep(0.02)


def until_bound(running: RunningExtender, pod_uid: str) -> None:
    """Wait for the pod's rows to be marked bound (done in the background after a bind)."""
    eventually(
        lambda: [r.state for r in running.live_rows(pod_uid)] == ["bound"],
        f"pod {pod_uid}'s rows marked bound",
    )
