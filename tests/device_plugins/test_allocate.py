"""Allocate against pods in the test API server, without gRPC in between."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from device_plugins.allocate import PodAllocator
from device_plugins.device_state import DeviceState
from device_plugins.discovery.base import HealthEvent, PhysicalDevice
from device_plugins.errors import AllocationError
from device_plugins.hami_core import HamiCoreConfig
from device_plugins.kube import KubernetesGateway
from tests.device_plugins.conftest import NODE
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
    set_lock,
)
from tests.support.apiserver import FakeApiServer
from vgpu_extender.domain import DeviceGrant


@pytest.fixture
def state() -> DeviceState:
    return DeviceState(DEVICES)


@pytest.fixture
def allocator(
    gateway: KubernetesGateway, node: str, state: DeviceState, tmp_path: Path
) -> PodAllocator:
    hami = HamiCoreConfig(hook_path=tmp_path / "hook", lock_dir=tmp_path / "lock")
    return PodAllocator(gateway, node=node, state=state, hami=hami, config=CONFIG)


def ids(uuid: str, *numbers: int) -> list[str]:
    return [f"{uuid}-{n}" for n in numbers]


def test_two_containers_then_success_and_lock_released(
    kube_api: FakeApiServer, allocator: PodAllocator, tmp_path: Path
) -> None:
    pod = bound_pod(
        kube_api, "train", [[DeviceGrant(GPU1, 3000, 30)], [DeviceGrant(GPU0, 5000, 50)]]
    )
    allocated = annotations_of(kube_api, "train")[CONFIG.allocated_annotation]

    first = allocator.allocate(ids(GPU1, 4))
    assert first.envs["NVIDIA_VISIBLE_DEVICES"] == GPU1
    assert first.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "3000m"
    assert first.envs["CUDA_DEVICE_SM_LIMIT"] == "30"
    cache_dir = tmp_path / "hook" / "vgpu" / "containers" / f"{pod['metadata']['uid']}_c0"
    assert cache_dir.is_dir()
    after_first = annotations_of(kube_api, "train")
    assert after_first[TO_ALLOCATE] == f";{GPU0},NVIDIA,5000,50:;"
    assert after_first[PHASE] == "allocating"
    assert lock_of(kube_api) == "2026-08-01T06:00:00Z,ml,train"

    second = allocator.allocate(ids(GPU0, 7))
    assert second.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "5000m"
    done = annotations_of(kube_api, "train")
    assert done[TO_ALLOCATE] == ";;"
    assert done[PHASE] == "success"
    assert done[CONFIG.allocated_annotation] == allocated  # the scheduler's copy stays
    assert lock_of(kube_api) is None


def test_empty_segments_are_skipped_init_first(
    kube_api: FakeApiServer, allocator: PodAllocator
) -> None:
    bound_pod(
        kube_api,
        "job",
        [
            [DeviceGrant(GPU0, 1000, 10)],
            [],
            [DeviceGrant(GPU0, 2000, 20), DeviceGrant(GPU1, 2000, 20)],
        ],
        init=(True, False, False),
    )
    assert allocator.allocate(ids(GPU0, 0)).envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "1000m"
    both = allocator.allocate(ids(GPU0, 1) + ids(GPU1, 1))
    assert both.envs["NVIDIA_VISIBLE_DEVICES"] == f"{GPU0},{GPU1}"
    assert both.envs["CUDA_DEVICE_MEMORY_LIMIT_1"] == "2000m"
    assert annotations_of(kube_api, "job")[PHASE] == "success"


def test_without_lock_the_oldest_pod_of_matching_size_is_served(
    kube_api: FakeApiServer, allocator: PodAllocator
) -> None:
    bound_pod(kube_api, "newer", [[DeviceGrant(GPU0, 100, 1)]], bind_time=300, lock=False)
    bound_pod(
        kube_api,
        "two",
        [[DeviceGrant(GPU0, 200, 2), DeviceGrant(GPU1, 200, 2)]],
        bind_time=100,
        lock=False,
    )
    bound_pod(kube_api, "older", [[DeviceGrant(GPU1, 300, 3)]], bind_time=200, lock=False)
    other_node = bound_pod(
        kube_api, "elsewhere", [[DeviceGrant(GPU0, 1, 1)]], bind_time=1, lock=False, node="node-b"
    )
    assert other_node["spec"]["nodeName"] == "node-b"

    assert allocator.allocate(ids(GPU1, 0)).envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "300m"
    assert allocator.allocate(ids(GPU1, 1)).envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "100m"
    assert allocator.allocate(ids(GPU0, 2) + ids(GPU1, 2)).envs["CUDA_DEVICE_SM_LIMIT"] == "2"
    phases = {name: annotations_of(kube_api, name)[PHASE] for name in ("newer", "two", "older")}
    assert phases == {"newer": "success", "two": "success", "older": "success"}
    assert annotations_of(kube_api, "elsewhere")[PHASE] == "allocating"


@pytest.mark.parametrize(
    ("setup", "device_ids", "code", "message", "phase"),
    [
        pytest.param(
            lambda api: set_lock(api, "2026-08-01T06:00:00Z"),
            ids(GPU0, 0),
            AllocationError.NOT_FOUND,
            r"no pending pod on node node-a",
            None,
            id="no-pending-pod",
        ),
        pytest.param(
            lambda api: bound_pod(api, "p", [[DeviceGrant(GPU0, 1, 1)]]),
            ids(GPU0, 0) + ids(GPU1, 0),
            AllocationError.INVALID,
            r"device number not matched for pod ml/p: kubelet asked for 2 device\(s\), "
            r"container #0 'c0' was given 1",
            "failed",
            id="count-mismatch",
        ),
        pytest.param(
            lambda api: bound_pod(
                api,
                "p",
                [[DeviceGrant(GPU0, 1, 1)]],
                overrides={TO_ALLOCATE: "GPU-x,NVIDIA,lots,1:;"},
            ),
            ids(GPU0, 0),
            AllocationError.INVALID,
            r"pod ml/p: annotation hami.io/vgpu-devices-to-allocate=.*malformed.*'lots'",
            "failed",
            id="corrupt-annotation",
        ),
        pytest.param(
            lambda api: bound_pod(api, "p", [[DeviceGrant("GPU-elsewhere", 1, 1)]]),
            ids(GPU0, 0),
            AllocationError.INVALID,
            r"was given GPU GPU-elsewhere, which is not on node node-a",
            "failed",
            id="gpu-not-on-node",
        ),
        pytest.param(
            lambda api: bound_pod(api, "p", [[DeviceGrant(GPU0, 1, 1)]]),
            ["bogus"],
            AllocationError.INVALID,
            r"device id 'bogus' is not of the form",
            "failed",
            id="kubelet-id-not-ours",
        ),
    ],
)
def test_failures_mark_the_pod_failed_and_release_the_lock(
    kube_api: FakeApiServer,
    allocator: PodAllocator,
    setup: object,
    device_ids: list[str],
    code: str,
    message: str,
    phase: str | None,
) -> None:
    setup(kube_api)  # type: ignore[operator]
    with pytest.raises(AllocationError, match=message) as caught:
        allocator.allocate(device_ids)
    assert caught.value.code == code
    assert lock_of(kube_api) is None
    if phase is not None:
        assert annotations_of(kube_api, "p")[PHASE] == phase


def test_unhealthy_gpu_is_refused(
    kube_api: FakeApiServer, allocator: PodAllocator, state: DeviceState
) -> None:
    bound_pod(kube_api, "p", [[DeviceGrant(GPU1, 1, 1)]])
    state.apply(HealthEvent(GPU1, False, "Xid 79"))
    with pytest.raises(AllocationError, match=r"GPU-0fc3.*unhealthy \(Xid 79\)"):
        allocator.allocate(ids(GPU0, 0))
    assert annotations_of(kube_api, "p")[PHASE] == "failed"


def test_mig_gpu_is_refused(
    kube_api: FakeApiServer, allocator: PodAllocator, state: DeviceState
) -> None:
    state.replace([DEVICES[0], PhysicalDevice(GPU1, 1, "A100", 40960, mode="mig")])
    bound_pod(kube_api, "p", [[DeviceGrant(GPU1, 1, 1)]])
    with pytest.raises(AllocationError, match="MIG mode"):
        allocator.allocate(ids(GPU0, 0))


def test_broken_pods_are_failed_even_when_another_is_served(
    kube_api: FakeApiServer, allocator: PodAllocator
) -> None:
    bound_pod(
        kube_api,
        "broken",
        [[DeviceGrant(GPU0, 1, 1)]],
        bind_time=1,
        lock=False,
        overrides={TO_ALLOCATE: "garbage"},
    )
    bound_pod(kube_api, "fine", [[DeviceGrant(GPU0, 1, 1)]], bind_time=2, lock=False)
    allocator.allocate(ids(GPU0, 0))
    assert annotations_of(kube_api, "broken")[PHASE] == "failed"
    assert annotations_of(kube_api, "fine")[PHASE] == "success"


def test_another_vendors_pod_is_never_failed_and_a_half_served_one_is_found(
    kube_api: FakeApiServer, allocator: PodAllocator
) -> None:
    """On a node of GPUs and NPUs: a pod bound with NPUs only has no GPU to-allocate
    annotation, so the GPU agent leaves it alone; a pod of both whose NPU agent already
    set the phase to success still gets its GPUs (HAMi's lookup accepts both phases)."""
    npu_only = bound_pod(kube_api, "npu", [[DeviceGrant(GPU0, 1, 1)]], bind_time=1, lock=False)
    kube_api.cluster.patch("pods", "ml", "npu", {"metadata": {"annotations": {TO_ALLOCATE: None}}})
    assert npu_only["metadata"]["name"] == "npu"
    bound_pod(
        kube_api,
        "both",
        [[DeviceGrant(GPU0, 1, 1)]],
        bind_time=2,
        lock=False,
        overrides={PHASE: "success"},
    )
    response = allocator.allocate(ids(GPU0, 0))
    assert response.envs["NVIDIA_VISIBLE_DEVICES"] == GPU0
    assert annotations_of(kube_api, "npu")[PHASE] == "allocating"
    assert annotations_of(kube_api, "both")[PHASE] == "success"


def test_size_mismatch_without_lock_lists_what_was_seen(
    kube_api: FakeApiServer, allocator: PodAllocator
) -> None:
    bound_pod(kube_api, "p", [[DeviceGrant(GPU0, 1, 1)]], lock=False)
    with pytest.raises(AllocationError, match=re.escape("(ml/p wants 1)")):
        allocator.allocate(ids(GPU0, 0) + ids(GPU1, 0))
    # Nobody was positively identified, so no pod is marked failed.
    assert annotations_of(kube_api, "p")[PHASE] == "allocating"


def test_api_errors_are_unavailable(kube_api: FakeApiServer, allocator: PodAllocator) -> None:
    bound_pod(kube_api, "p", [[DeviceGrant(GPU0, 1, 1)]])
    kube_api.fail_next("PATCH", "/api/v1/namespaces/ml/pods/p$", 500, message="etcd down")
    with pytest.raises(AllocationError, match="etcd down") as caught:
        allocator.allocate(ids(GPU0, 0))
    assert caught.value.code == AllocationError.UNAVAILABLE
    assert annotations_of(kube_api, "p")[PHASE] == "failed"


def test_without_kubernetes_access(state: DeviceState, tmp_path: Path) -> None:
    allocator = PodAllocator(None, node=NODE, state=state, hami=HamiCoreConfig(hook_path=tmp_path))
    with pytest.raises(AllocationError, match="without Kubernetes access") as caught:
        allocator.allocate(ids(GPU0, 0))
    assert caught.value.code == AllocationError.UNAVAILABLE


def test_preferred_uuids_follow_the_annotation(
    kube_api: FakeApiServer, allocator: PodAllocator
) -> None:
    bound_pod(kube_api, "p", [[DeviceGrant(GPU1, 1, 1), DeviceGrant(GPU0, 1, 1)]])
    assert list(allocator.preferred_uuids(2)) == [GPU1, GPU0]
    assert list(allocator.preferred_uuids(1)) == []  # the locked pod wants 2, not 1
    assert annotations_of(kube_api, "p")[PHASE] == "allocating"  # reading changes nothing


def test_unexpected_errors_still_fail_the_pod_and_release_the_lock(
    kube_api: FakeApiServer, gateway: KubernetesGateway, node: str, state: DeviceState
) -> None:
    def broken_builder(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    allocator = PodAllocator(
        gateway, node=node, state=state, hami=HamiCoreConfig(), builder=broken_builder
    )
    bound_pod(kube_api, "p", [[DeviceGrant(GPU0, 1, 1)]])
    with pytest.raises(AllocationError, match=r"internal error.*boom") as caught:
        allocator.allocate(ids(GPU0, 0))
    assert caught.value.code == AllocationError.FAILED
    assert annotations_of(kube_api, "p")[PHASE] == "failed"
    assert lock_of(kube_api) is None


def test_host_folder_errors_are_reported(
    kube_api: FakeApiServer,
    gateway: KubernetesGateway,
    node: str,
    state: DeviceState,
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    allocator = PodAllocator(
        gateway, node=node, state=state, hami=HamiCoreConfig(hook_path=blocker, lock_dir=blocker)
    )
    bound_pod(kube_api, "p", [[DeviceGrant(GPU0, 1, 1)]])
    with pytest.raises(AllocationError, match="cannot prepare the HAMi-core folders"):
        allocator.allocate(ids(GPU0, 0))
    assert annotations_of(kube_api, "p")[PHASE] == "failed"
