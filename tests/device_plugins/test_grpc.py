"""The plugin over a real gRPC channel on unix sockets, driven by a test kubelet.

End to end: the extender's own bind annotations on a pod in the test API server,
then kubelet's Allocate, then the container environment HAMi-core reads.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from device_plugins.agent import DevicePluginAgent
from device_plugins.discovery import FakeBackend, NvmlBackend
from device_plugins.discovery.base import HealthEvent
from device_plugins.inventory import Splitting, register_annotation
from device_plugins.kube import KubernetesGateway
from device_plugins.kubelet_api import pb
from device_plugins.settings import DevicePluginSettings
from tests.device_plugins.conftest import NODE
from tests.device_plugins.fake_nvml import FakeGpu, FakePynvml
from tests.device_plugins.harness import (
    TIMEOUT,
    RunningAgent,
    eventually,
    quick_settings,
    stale_socket,
)
from tests.device_plugins.kubelet import FakeKubelet
from tests.device_plugins.pods_factory import (
    CONFIG,
    DEVICES,
    GPU0,
    GPU1,
    PHASE,
    TO_ALLOCATE,
    annotations_of,
    bound_pod,
    lock_of,
)
from tests.support.apiserver import FakeApiServer
from vgpu_extender.domain import DeviceGrant

SPLIT = 3


@pytest.fixture
def settings(short_dir: Path, tmp_path: Path) -> DevicePluginSettings:
    return quick_settings(short_dir, tmp_path, split_count=SPLIT, vgpu_lock_dir=tmp_path / "lock")


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend(DEVICES, poll_s=0.01)


@pytest.fixture
def running(
    settings: DevicePluginSettings,
    backend: FakeBackend,
    gateway: KubernetesGateway,
    node: str,
    kubelet: FakeKubelet,
) -> Iterator[RunningAgent]:
    agent = DevicePluginAgent(settings, backend=backend, gateway=gateway)
    with RunningAgent(agent) as running:
        yield running


def ids(uuid: str, *numbers: int) -> list[str]:
    return [f"{uuid}-{n}" for n in numbers]


def allocate(kubelet: FakeKubelet, device_ids: list[str]) -> Any:
    request = pb.AllocateRequest(
        container_requests=[pb.ContainerAllocateRequest(devices_ids=device_ids)]
    )
    return kubelet.plugin().Allocate(request, timeout=TIMEOUT)


def health(response: Any) -> dict[str, str]:
    return {device.ID: device.health for device in response.devices}


def test_registers_after_serving_with_options(running: RunningAgent, kubelet: FakeKubelet) -> None:
    registration = kubelet.next_registration()
    assert registration.socket_existed, "the plugin must serve before it registers"
    request = registration.request
    assert (request.version, request.endpoint, request.resource_name) == (
        "v1beta1",
        "vgpu-nvidia.sock",
        "nvidia.com/gpu",
    )
    assert request.options.get_preferred_allocation_available
    assert not request.options.pre_start_required
    assert registration.options == request.options
    assert (
        kubelet.plugin().PreStartContainer(
            pb.PreStartContainerRequest(devices_ids=ids(GPU0, 0)), timeout=TIMEOUT
        )
        == pb.PreStartContainerResponse()
    )


def test_list_and_watch_then_health_change(
    running: RunningAgent, kubelet: FakeKubelet, backend: FakeBackend, kube_api: FakeApiServer
) -> None:
    first = kubelet.next_list()
    assert [d.ID for d in first.devices] == ids(GPU0, 0, 1, 2) + ids(GPU1, 0, 1, 2)
    assert set(health(first).values()) == {"Healthy"}
    assert [[n.ID for n in d.topology.nodes] for d in first.devices] == [[0]] * 3 + [[1]] * 3

    backend.emit(HealthEvent(GPU1, False, "Xid 79"))
    second = kubelet.next_list()
    assert health(second) == {
        **dict.fromkeys(ids(GPU0, 0, 1, 2), "Healthy"),
        **dict.fromkeys(ids(GPU1, 0, 1, 2), "Unhealthy"),
    }
    # The node annotation follows at once, not at the next 30 s rescan.
    expected = register_annotation(
        [DEVICES[0], dataclasses.replace(DEVICES[1], healthy=False)], Splitting(split_count=SPLIT)
    )
    eventually(
        lambda: _register_value(kube_api) == expected, what="the unhealthy GPU in the annotation"
    )


def _register_value(api: FakeApiServer) -> str | None:
    value = (api.get_node(NODE)["metadata"].get("annotations") or {}).get(
        CONFIG.register_annotation
    )
    return value if isinstance(value, str) else None


def test_ignored_xid_changes_nothing_with_the_nvml_backend(
    settings: DevicePluginSettings,
    gateway: KubernetesGateway,
    node: str,
    kubelet: FakeKubelet,
    tmp_path: Path,
) -> None:
    nvml = FakePynvml([FakeGpu(GPU0, 0), FakeGpu(GPU1, 1, bus_id="00000000:AF:00.0")])
    backend = NvmlBackend(nvml=nvml, sysfs_root=tmp_path, event_wait_ms=20)
    with RunningAgent(DevicePluginAgent(settings, backend=backend, gateway=gateway)):
        assert set(health(kubelet.next_list()).values()) == {"Healthy"}
        nvml.xid(nvml.gpus[0], 13)  # an application error: ignored
        nvml.xid(nvml.gpus[1], 79)  # the GPU fell off the bus
        update = health(kubelet.next_list())
    assert {k for k, v in update.items() if v == "Unhealthy"} == set(ids(GPU1, 0, 1, 2))
    assert nvml.init_count == 0, "NVML is shut down when the agent stops"


def test_allocate_end_to_end_from_the_extenders_bind(
    running: RunningAgent, kubelet: FakeKubelet, kube_api: FakeApiServer, tmp_path: Path
) -> None:
    kubelet.next_registration()
    bound_pod(
        kube_api,
        "train",
        [[DeviceGrant(GPU1, 3000, 30)], [DeviceGrant(GPU0, 5000, 50), DeviceGrant(GPU1, 2000, 20)]],
    )
    first = allocate(kubelet, ids(GPU1, 2)).container_responses[0]
    assert first.envs["NVIDIA_VISIBLE_DEVICES"] == GPU1
    assert first.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "3000m"
    assert first.envs["CUDA_DEVICE_SM_LIMIT"] == "30"
    hook = str(tmp_path / "hook")
    assert first.envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"].startswith(f"{hook}/vgpu/")
    mounts = {m.container_path: (m.host_path, m.read_only) for m in first.mounts}
    assert mounts[f"{hook}/vgpu/libvgpu.so"] == (f"{hook}/vgpu/libvgpu.so", True)
    assert mounts["/etc/ld.so.preload"] == (f"{hook}/vgpu/ld.so.preload", True)
    assert mounts["/tmp/vgpulock"] == (str(tmp_path / "lock"), False)
    assert lock_of(kube_api) is not None

    second = allocate(kubelet, ids(GPU0, 1) + ids(GPU1, 1)).container_responses[0]
    assert second.envs["NVIDIA_VISIBLE_DEVICES"] == f"{GPU0},{GPU1}"
    assert (
        second.envs["CUDA_DEVICE_MEMORY_LIMIT_0"],
        second.envs["CUDA_DEVICE_MEMORY_LIMIT_1"],
    ) == (
        "5000m",
        "2000m",
    )
    annotations = annotations_of(kube_api, "train")
    assert (annotations[PHASE], annotations[TO_ALLOCATE]) == ("success", ";;")
    assert lock_of(kube_api) is None


@pytest.mark.parametrize(
    ("make_pod", "device_ids", "code", "details"),
    [
        pytest.param(None, ids(GPU0, 0), grpc.StatusCode.NOT_FOUND, "no pending pod", id="no-pod"),
        pytest.param(
            {},
            ids(GPU0, 0) + ids(GPU1, 0),
            grpc.StatusCode.INVALID_ARGUMENT,
            "device number not matched",
            id="count-mismatch",
        ),
        pytest.param(
            {TO_ALLOCATE: "GPU-x,NVIDIA"},
            ids(GPU0, 0),
            grpc.StatusCode.INVALID_ARGUMENT,
            "malformed",
            id="corrupt-annotation",
        ),
    ],
)
def test_allocate_failures_are_grpc_errors(
    running: RunningAgent,
    kubelet: FakeKubelet,
    kube_api: FakeApiServer,
    make_pod: dict[str, str] | None,
    device_ids: list[str],
    code: grpc.StatusCode,
    details: str,
) -> None:
    kubelet.next_registration()
    if make_pod is not None:
        bound_pod(kube_api, "p", [[DeviceGrant(GPU0, 1000, 10)]], overrides=make_pod)
    with pytest.raises(grpc.RpcError) as caught:
        allocate(kubelet, device_ids)
    assert caught.value.code() == code
    assert details in caught.value.details()
    assert lock_of(kube_api) is None
    if make_pod is not None:
        assert annotations_of(kube_api, "p")[PHASE] == "failed"


def test_preferred_allocation_picks_the_annotated_gpus(
    running: RunningAgent, kubelet: FakeKubelet, kube_api: FakeApiServer
) -> None:
    kubelet.next_registration()
    bound_pod(kube_api, "p", [[DeviceGrant(GPU1, 1000, 10)]])
    request = pb.PreferredAllocationRequest(
        container_requests=[
            pb.ContainerPreferredAllocationRequest(
                available_deviceIDs=ids(GPU0, 0, 1, 2) + ids(GPU1, 1, 2), allocation_size=1
            )
        ]
    )
    reply = kubelet.plugin().GetPreferredAllocation(request, timeout=TIMEOUT)
    assert list(reply.container_responses[0].deviceIDs) == ids(GPU1, 1)


def test_parallel_allocates_are_serialized(
    running: RunningAgent, kubelet: FakeKubelet, kube_api: FakeApiServer
) -> None:
    kubelet.next_registration()
    for n, memory in enumerate((100, 200, 300, 400)):
        bound_pod(kube_api, f"p{n}", [[DeviceGrant(GPU0, memory, 1)]], bind_time=n, lock=False)
    limits: list[str] = []
    barrier = threading.Barrier(4)

    def admit(n: int) -> None:
        barrier.wait(timeout=TIMEOUT)
        response = allocate(kubelet, ids(GPU0, n % SPLIT))
        limits.append(response.container_responses[0].envs["CUDA_DEVICE_MEMORY_LIMIT_0"])

    threads = [threading.Thread(target=admit, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    assert sorted(limits) == ["100m", "200m", "300m", "400m"]
    for n in range(4):
        annotations = annotations_of(kube_api, f"p{n}")
        assert (annotations[PHASE], annotations[TO_ALLOCATE]) == ("success", ";")


def test_reregisters_after_kubelet_restart(
    running: RunningAgent, kubelet: FakeKubelet, short_dir: Path
) -> None:
    kubelet.next_registration()
    assert kubelet.next_list().devices
    kubelet.stop(clean_folder=True)  # kubelet's CleanupPluginDirectory removes our socket too
    restarted = FakeKubelet(short_dir).start()
    try:
        registration = restarted.next_registration()
        assert registration.socket_existed
        assert len(restarted.next_list().devices) == 2 * SPLIT
        eventually(lambda: running.agent.status.registrations == 2, what="a second registration")
    finally:
        restarted.stop()


def test_stale_socket_is_replaced_and_plugin_exit_ends_the_stream(
    settings: DevicePluginSettings,
    backend: FakeBackend,
    gateway: KubernetesGateway,
    node: str,
    kubelet: FakeKubelet,
) -> None:
    stale_socket(settings.plugin_socket)
    with RunningAgent(DevicePluginAgent(settings, backend=backend, gateway=gateway)):
        assert kubelet.next_registration().socket_existed
        assert kubelet.next_list().devices
    # The stream ends when the plugin stops; kubelet then marks the devices unhealthy.
    assert kubelet.stream_ends.get(timeout=TIMEOUT) in (
        grpc.StatusCode.OK,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.CANCELLED,
    )
    assert not settings.plugin_socket.exists(), "a clean stop removes our socket"


def test_registration_retries_until_kubelet_appears(
    settings: DevicePluginSettings, backend: FakeBackend, gateway: KubernetesGateway, node: str
) -> None:
    agent = DevicePluginAgent(settings, backend=backend, gateway=gateway)
    with RunningAgent(agent):
        eventually(lambda: agent.status.registration_failures >= 1, what="a failed registration")
        kubelet = FakeKubelet(settings.device_plugin_dir).start()
        try:
            assert kubelet.next_registration().request.resource_name == "nvidia.com/gpu"
        finally:
            kubelet.stop()
