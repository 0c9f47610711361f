"""The agent's metrics and probes over real HTTP, with kubelet on real gRPC sockets."""

from __future__ import annotations

import http.client
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from device_plugins.agent import AgentStartError, DevicePluginAgent
from device_plugins.discovery import FakeBackend
from device_plugins.discovery.base import HealthEvent
from device_plugins.kube import KubernetesGateway
from device_plugins.kubelet_api import pb
from device_plugins.settings import DevicePluginSettings
from device_plugins.status_server import StatusServer
from tests.device_plugins.conftest import NODE
from tests.device_plugins.harness import (
    TIMEOUT,
    RunningAgent,
    eventually,
    quick_settings,
    stale_socket,
)
from tests.device_plugins.kubelet import FakeKubelet
from tests.device_plugins.pods_factory import DEVICES, GPU0, GPU1, V100, bound_pod
from tests.support.apiserver import FakeApiServer
from vgpu_extender.domain import DeviceGrant

TYPE = f"NVIDIA-{V100}"


@pytest.fixture
def settings(short_dir: Path, tmp_path: Path) -> DevicePluginSettings:
    return quick_settings(
        short_dir,
        tmp_path,
        split_count=2,
        vgpu_lock_dir=tmp_path / "lock",
        metrics_address="127.0.0.1:0",
    )


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend(DEVICES, poll_s=0.01)


@pytest.fixture
def kubelet(short_dir: Path) -> Iterator[FakeKubelet]:
    kubelet = FakeKubelet(short_dir)
    yield kubelet
    kubelet.stop()


def get(agent: DevicePluginAgent, path: str) -> tuple[int, str]:
    """One real HTTP GET to the agent's status server."""
    server = eventually(lambda: agent.status_server, what="the status server")
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=TIMEOUT)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def samples(agent: DevicePluginAgent) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    status, text = get(agent, "/metrics")
    assert status == 200
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(agent: DevicePluginAgent, name: str, **labels: str) -> float | None:
    return samples(agent).get((name, frozenset(labels.items())))


def allocate(kubelet: FakeKubelet, device_ids: list[str]) -> object:
    request = pb.AllocateRequest(
        container_requests=[pb.ContainerAllocateRequest(devices_ids=device_ids)]
    )
    return kubelet.plugin().Allocate(request, timeout=TIMEOUT)


def test_readiness_flips_once_registered_and_devices_follow_health(
    settings: DevicePluginSettings,
    backend: FakeBackend,
    gateway: KubernetesGateway,
    node: str,
    kubelet: FakeKubelet,
) -> None:
    agent = DevicePluginAgent(settings, backend=backend, gateway=gateway)
    with RunningAgent(agent):
        # No kubelet yet: alive, not ready, and the gauge says why.
        assert get(agent, "/healthz") == (200, "ok\n")
        assert get(agent, "/readyz") == (503, "not registered with kubelet\n")
        assert value(agent, "vgpu_device_plugin_kubelet_registered") == 0
        kubelet.start()
        kubelet.next_registration()
        eventually(lambda: get(agent, "/readyz") == (200, "ok\n"), what="ready")
        assert value(agent, "vgpu_device_plugin_kubelet_registered") == 1
        age = value(agent, "vgpu_device_plugin_registration_age_seconds")
        assert age is not None and 0 <= age <= settings.ready_report_max_age_s
        healthy = {"vendor": "NVIDIA", "type": TYPE, "health": "healthy"}
        assert value(agent, "vgpu_device_plugin_devices", **healthy) == 2

        backend.emit(HealthEvent(GPU1, False, "Xid 79"))
        eventually(
            lambda: value(agent, "vgpu_device_plugin_devices", **healthy) == 1,
            what="one healthy device left",
        )
        unhealthy = {**healthy, "health": "unhealthy"}
        assert value(agent, "vgpu_device_plugin_devices", **unhealthy) == 1
        assert get(agent, "/nothing")[0] == 404


def test_not_ready_until_the_node_annotation_is_written(
    settings: DevicePluginSettings,
    backend: FakeBackend,
    gateway: KubernetesGateway,
    kube_api: FakeApiServer,
    kubelet: FakeKubelet,
) -> None:
    kubelet.start()
    agent = DevicePluginAgent(settings, backend=backend, gateway=gateway)
    with RunningAgent(agent):
        kubelet.next_registration()
        # Registered, but the Node does not exist: the annotation cannot be written.
        eventually(lambda: agent.registered.is_set(), what="registered")
        assert get(agent, "/readyz") == (503, "the node annotation has not been written yet\n")
        assert value(agent, "vgpu_device_plugin_registration_age_seconds") is None
        kube_api.add_node({"metadata": {"name": NODE, "annotations": {}}})
        eventually(lambda: get(agent, "/readyz")[0] == 200, what="ready once the node exists")
        assert value(agent, "vgpu_device_plugin_registration_age_seconds") is not None


def test_allocate_moves_the_counter_and_the_histogram(
    settings: DevicePluginSettings,
    backend: FakeBackend,
    gateway: KubernetesGateway,
    node: str,
    kubelet: FakeKubelet,
    kube_api: FakeApiServer,
) -> None:
    kubelet.start()
    agent = DevicePluginAgent(settings, backend=backend, gateway=gateway)
    with RunningAgent(agent):
        kubelet.next_registration()
        assert value(agent, "vgpu_device_plugin_allocate_total", result="ok") == 0
        assert value(agent, "vgpu_device_plugin_allocate_duration_seconds_count") == 0

        bound_pod(kube_api, "train", [[DeviceGrant(GPU0, 3000, 30)]])
        allocate(kubelet, [f"{GPU0}-1"])
        # No pod waits for devices any more: kubelet hears NOT_FOUND.
        with pytest.raises(grpc.RpcError) as caught:
            allocate(kubelet, [f"{GPU0}-0"])
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND

        after = samples(agent)
    assert after[("vgpu_device_plugin_allocate_total", frozenset({("result", "ok")}))] == 1
    assert after[("vgpu_device_plugin_allocate_total", frozenset({("result", "not_found")}))] == 1
    assert after[("vgpu_device_plugin_allocate_duration_seconds_count", frozenset())] == 2
    assert after[("vgpu_device_plugin_allocate_duration_seconds_sum", frozenset())] > 0
    infinite = frozenset({("le", "+Inf")})
    assert after[("vgpu_device_plugin_allocate_duration_seconds_bucket", infinite)] == 2


def test_liveness_fails_while_the_kubelet_loop_is_stuck(
    settings: DevicePluginSettings,
    backend: FakeBackend,
    gateway: KubernetesGateway,
    node: str,
    short_dir: Path,
) -> None:
    # A kubelet socket nobody answers on: Register waits its whole timeout.
    stale_socket(short_dir / "kubelet.sock")
    stuck = settings.model_copy(update={"register_timeout_s": 2.0, "live_stall_s": 0.2})
    agent = DevicePluginAgent(stuck, backend=backend, gateway=gateway)
    with RunningAgent(agent):
        _, body = eventually(
            lambda: (reply := get(agent, "/healthz"))[0] == 503 and reply, what="not live"
        )
        assert "the kubelet loop has not run for" in body
        assert get(agent, "/readyz")[0] == 503


def test_a_taken_metrics_address_stops_the_start(
    settings: DevicePluginSettings, backend: FakeBackend, kubelet: FakeKubelet
) -> None:
    first = StatusServer(("127.0.0.1", 0), metrics=bytes, live=lambda: None, ready=lambda: None)
    first.start()
    try:
        taken = settings.model_copy(update={"metrics_address": f"127.0.0.1:{first.port}"})
        agent = DevicePluginAgent(taken, backend=backend, gateway=None)
        with pytest.raises(AgentStartError, match="VGPU_DP_METRICS_ADDRESS"):
            agent.run()
    finally:
        first.stop()


def test_off_serves_nothing(
    settings: DevicePluginSettings, backend: FakeBackend, kubelet: FakeKubelet
) -> None:
    kubelet.start()
    off = settings.model_copy(update={"metrics_address": "off"})
    assert off.metrics_bind is None
    agent = DevicePluginAgent(off, backend=backend, gateway=None)
    with RunningAgent(agent):
        kubelet.next_registration()
        assert agent.status_server is None
        # Without Kubernetes access there is no annotation to wait for.
        eventually(lambda: agent.ready() is None, what="ready")


@pytest.mark.parametrize(
    ("address", "bind"),
    [(":9394", ("0.0.0.0", 9394)), ("127.0.0.1:0", ("127.0.0.1", 0)), ("[::1]:80", ("::1", 80))],
)
def test_metrics_address_forms(address: str, bind: tuple[str, int]) -> None:
    assert DevicePluginSettings(metrics_address=address).metrics_bind == bind


@pytest.mark.parametrize("address", ["9394", "host:", "host:http", ":70000"])
def test_bad_metrics_addresses_are_refused(address: str) -> None:
    with pytest.raises(ValueError, match="metrics_address"):
        DevicePluginSettings(metrics_address=address)


def test_promtool_accepts_the_exposition(
    settings: DevicePluginSettings,
    backend: FakeBackend,
    gateway: KubernetesGateway,
    node: str,
    kubelet: FakeKubelet,
) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool (Prometheus) is not installed")
    kubelet.start()
    agent = DevicePluginAgent(settings, backend=backend, gateway=gateway)
    with RunningAgent(agent):
        kubelet.next_registration()
        eventually(lambda: get(agent, "/readyz")[0] == 200, what="ready")
        _, text = get(agent, "/metrics")
    # Prometheus' own linter: names, units, suffixes and HELP as Prometheus wants them.
    checked = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "vgpu_device_plugin_registration_age_seconds " in text


def test_a_silent_client_is_dropped_after_the_idle_timeout() -> None:
    """Each connection holds one of the server's threads: one that sends nothing is
    closed, and the endpoint keeps answering others meanwhile."""
    server = StatusServer(
        ("127.0.0.1", 0), metrics=bytes, live=lambda: None, ready=lambda: None, idle_timeout_s=0.5
    )
    server.start()
    try:
        silent = socket.create_connection(("127.0.0.1", server.port), timeout=5.0)
        started = time.monotonic()
        probe = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5.0)
        probe.request("GET", "/healthz")
        assert probe.getresponse().status == 200
        probe.close()
        assert silent.recv(1) == b""  # closed by the server, not by our timeout
        assert time.monotonic() - started < 4.0
        silent.close()
    finally:
        server.stop()


def test_a_failing_collector_answers_500_and_the_endpoint_keeps_serving() -> None:
    def broken() -> bytes:
        raise RuntimeError("collector broke")

    server = StatusServer(("127.0.0.1", 0), metrics=broken, live=lambda: None, ready=lambda: None)
    server.start()
    try:
        for path, status in (("/metrics", 500), ("/healthz", 200)):
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5.0)
            connection.request("GET", path)
            assert connection.getresponse().status == status, path
            connection.close()
    finally:
        server.stop()
