"""Runs the agent in a thread for a test and stops it cleanly afterwards, with settings
that make it react within a test's patience."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from device_plugins.agent import DevicePluginAgent
from device_plugins.settings import DevicePluginSettings
from tests.device_plugins.conftest import NODE

T = TypeVar("T")

#: Seconds a test waits for one gRPC call, registration or HTTP answer.
TIMEOUT = 5.0


def quick_settings(plugin_dir: Path, tmp_path: Path, **fields: Any) -> DevicePluginSettings:
    """An agent on ``NODE`` that retries and watches kubelet often and rescans rarely
    (a test asks for a rescan itself); ``fields`` set the rest."""
    return DevicePluginSettings(
        node_name=NODE,
        device_plugin_dir=plugin_dir,
        hook_path=tmp_path / "hook",
        retry_interval_s=0.05,
        kubelet_watch_interval_s=0.02,
        register_timeout_s=TIMEOUT,
        rescan_interval_s=60,
        **fields,
    )


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
