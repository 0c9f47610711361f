"""The agent as the DaemonSet runs it: ``python -m device_plugins`` in its own process,
against a fake kubelet and API server, with the probes it serves and SIGTERM to stop."""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.device_plugins.conftest import NODE
from tests.device_plugins.harness import eventually
from tests.device_plugins.kubelet import FakeKubelet


def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``VGPU_DP_*`` or node name from the caller's shell reaches the agent."""
    for key in list(os.environ):
        if key.startswith("VGPU_DP_") or key == "NODE_NAME":
            monkeypatch.delenv(key)
    monkeypatch.setenv("VGPU_DP_METRICS_ADDRESS", "127.0.0.1:0")


def http_get(port: int, path: str) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode()
    except OSError:
        return 0, ""  # not listening yet
    finally:
        connection.close()


def kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
        f"clusters: [{{name: t, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: t, user: {}}]\n"
        "contexts: [{name: t, context: {cluster: t, user: t}}]\n"
    )
    return path


def free_port() -> int:
    """A loopback port free now, for the agent's probes."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass(frozen=True, slots=True)
class AgentProcess:
    """The agent's process, the kubelet it registers with and the port of its probes."""

    process: subprocess.Popen[str]
    kubelet: FakeKubelet
    port: int

    def get(self, path: str) -> tuple[int, str]:
        return http_get(self.port, path)

    def wait_ready(self) -> None:
        eventually(lambda: self.get("/readyz") == (200, "ok\n"), what="ready")

    def stop(self) -> str:
        """SIGTERM, as kubelet's pod shutdown sends; what the agent printed."""
        self.process.send_signal(signal.SIGTERM)
        output, _ = self.process.communicate(timeout=15)
        return output


@contextlib.contextmanager
def agent_process(
    plugin_dir: Path,
    *,
    api_url: str,
    folder: Path,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Iterator[AgentProcess]:
    """The agent registering with a test kubelet in ``plugin_dir``; killed if still
    running, and the kubelet stopped, on the way out."""
    kubelet = FakeKubelet(plugin_dir).start()
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "device_plugins",
        "--device-plugin-dir",
        str(plugin_dir),
        "--kubeconfig",
        str(kubeconfig(folder / "kubeconfig", api_url)),
        *args,
    ]
    environment = {
        **os.environ,
        "NODE_NAME": NODE,
        "NO_PROXY": "127.0.0.1",
        "VGPU_DP_RETRY_INTERVAL_S": "0.1",
        "VGPU_DP_KUBELET_WATCH_INTERVAL_S": "0.05",
        "VGPU_DP_METRICS_ADDRESS": f"127.0.0.1:{port}",
        **(env or {}),
    }
    process = subprocess.Popen(
        command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        yield AgentProcess(process, kubelet, port)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
        kubelet.stop()
