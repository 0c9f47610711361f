"""Fixtures for the node agent: a short socket folder, the API server, pods and nodes."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s

from device_plugins.kube import KubernetesGateway
from tests.device_plugins.kubelet import FakeKubelet
from tests.support.apiserver import FakeApiServer
from vgpu_extender.kube.memory import InMemoryCluster

NODE = "node-a"


@pytest.fixture(autouse=True)
def metrics_on_a_free_port(monkeypatch: pytest.MonkeyPatch) -> None:
    """Agents started by tests serve metrics on loopback, on a port the system picks."""
    monkeypatch.setenv("VGPU_DP_METRICS_ADDRESS", "127.0.0.1:0")


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A folder with a short path: unix socket paths must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="dp", dir="/tmp" if Path("/tmp").is_dir() else None))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def _api_server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        yield server


@pytest.fixture
def kube_api(_api_server: FakeApiServer) -> FakeApiServer:
    """The test API server with an empty cluster.

    One server per module, emptied for each test: stopping the HTTP server takes
    half a second, which many short tests would otherwise pay one by one.
    """
    _api_server.cluster = InMemoryCluster()
    _api_server.requests.clear()
    return _api_server


@pytest.fixture
def gateway(kube_api: FakeApiServer) -> Iterator[KubernetesGateway]:
    api_client = k8s.ApiClient(kube_api.configuration())
    try:
        yield KubernetesGateway(api_client, timeout_s=5)
    finally:
        api_client.close()


@pytest.fixture
def node(kube_api: FakeApiServer) -> str:
    kube_api.add_node({"metadata": {"name": NODE, "annotations": {}}})
    return NODE


@pytest.fixture
def kubelet(short_dir: Path) -> Iterator[FakeKubelet]:
    """The test kubelet, listening in ``short_dir`` for the agent's registration."""
    kubelet = FakeKubelet(short_dir).start()
    yield kubelet
    kubelet.stop()
