"""Runs the agent in a thread for a test and stops it cleanly afterwards."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from device_plugins.agent import DevicePluginAgent

T = TypeVar("T")


class RunningAgent:
    def __init__(self, agent: DevicePluginAgent) -> None:
        self.agent = agent
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="agent", daemon=True)

    def _run(self) -> None:
        try:
            self.agent.run()
        except BaseException as exc:  # surfaced by the test through .error
            self.error = exc

    def __enter__(self) -> RunningAgent:
        self.thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.agent.stop()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive(), "the agent did not stop"
        if self.error is not None and exc is None:
            raise self.error


def eventually(probe: Callable[[], T | None], *, timeout: float = 5.0, what: str = "") -> T:
    """Poll ``probe`` until it returns something truthy; fail with ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or probe}")
        time.sleep(0.01)


def stale_socket(path: Path) -> None:
    """Leave a socket file nobody listens on, as a crashed plugin does."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.close()
