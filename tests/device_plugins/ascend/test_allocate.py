"""The Ascend Allocate's refusals (each fails the pod and frees the node lock) and the
scheduler's huawei.com/<CW> list as the plugin reads it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from device_plugins.ascend.allocate import AscendAllocator
from device_plugins.ascend.flavour import AscendFlavour
from device_plugins.ascend.runtime import (
    CorePaths,
    RuntimeEntry,
    RuntimeInfoError,
    parse_runtime_info,
)
from device_plugins.device_state import DeviceState
from device_plugins.errors import AllocationError
from device_plugins.kube import KubernetesGateway
from tests.device_plugins.ascend.support import B3, backend, bound_pod, uuid
from tests.device_plugins.pods_factory import annotations_of, lock_of, set_lock
from tests.support.apiserver import FakeApiServer
from vgpu_extender.domain import DeviceGrant

RUNTIME = "huawei.com/Ascend910B3"


def b3_allocator(
    gateway: KubernetesGateway, node: str, hook_path: Path
) -> tuple[AscendFlavour, AscendAllocator]:
    chips, flavour = backend(B3)
    state = DeviceState(chips.discover())
    allocator = AscendAllocator(
        gateway,
        node=node,
        state=state,
        flavour=flavour,
        chips=chips.chips,
        paths=CorePaths(hook_path=hook_path),
    )
    return flavour, allocator


@pytest.fixture
def flavour_and_allocator(
    gateway: KubernetesGateway, node: str, tmp_path: Path
) -> tuple[AscendFlavour, AscendAllocator]:
    return b3_allocator(gateway, node, tmp_path / "hook")


def _patch_pod(api: FakeApiServer, name: str, annotations: dict[str, Any]) -> None:
    api.cluster.patch("pods", "ml", name, {"metadata": {"annotations": annotations}})


@pytest.mark.parametrize(
    ("grant", "edit", "device_id", "code", "message"),
    [
        pytest.param(
            DeviceGrant(uuid(0), 16384, 0),
            lambda api: _patch_pod(api, "p", {RUNTIME: None}),
            f"{uuid(0)}-0",
            AllocationError.INVALID,
            f"pod ml/p has no annotation {RUNTIME}",
            id="no-runtime-list",
        ),
        pytest.param(
            DeviceGrant(uuid(0), 16384, 0),
            lambda api: _patch_pod(api, "p", {RUNTIME: '{"UUID":"x"}'}),
            f"{uuid(0)}-0",
            AllocationError.INVALID,
            "is malformed: not a JSON list",
            id="runtime-not-a-list",
        ),
        pytest.param(
            DeviceGrant(uuid(5), 16384, 0),
            lambda api: None,
            f"{uuid(5)}-0",
            AllocationError.UNAVAILABLE,
            f"was given NPU {uuid(5)}, which is unhealthy",
            id="unhealthy-chip",
        ),
        pytest.param(
            DeviceGrant("other-node-npu-0", 16384, 0),
            lambda api: None,
            f"{uuid(0)}-0",
            AllocationError.INVALID,
            "was given NPU other-node-npu-0, which is not on node node-a",
            id="chip-elsewhere",
        ),
        pytest.param(
            DeviceGrant(uuid(0), 16384, 0),
            lambda api: None,
            "node-a-npu-9-0",
            AllocationError.INVALID,
            "kubelet asked for device 'node-a-npu-9-0', which is not on node node-a",
            id="unknown-kubelet-id",
        ),
    ],
)
def test_a_refused_allocate_fails_the_pod_and_frees_the_lock(
    kube_api: FakeApiServer,
    flavour_and_allocator: tuple[AscendFlavour, AscendAllocator],
    grant: DeviceGrant,
    edit: Callable[[FakeApiServer], None],
    device_id: str,
    code: str,
    message: str,
) -> None:
    flavour, allocator = flavour_and_allocator
    bound_pod(kube_api, flavour, "p", [[grant]])
    edit(kube_api)
    with pytest.raises(AllocationError, match=message) as caught:
        allocator.allocate([device_id])
    assert caught.value.code == code
    assert annotations_of(kube_api, "p")["hami.io/bind-phase"] == "failed"
    assert lock_of(kube_api) is None


def test_without_a_waiting_pod_a_stale_lock_is_freed(
    kube_api: FakeApiServer, flavour_and_allocator: tuple[AscendFlavour, AscendAllocator]
) -> None:
    _, allocator = flavour_and_allocator
    set_lock(kube_api, "2026-08-01T06:00:00Z,ml,gone")
    with pytest.raises(AllocationError, match="no pending pod on node node-a") as caught:
        allocator.allocate([f"{uuid(0)}-0"])
    assert caught.value.code == AllocationError.NOT_FOUND
    assert lock_of(kube_api) is None


def test_a_pod_given_no_chip_of_this_kind_is_left_alone(
    kube_api: FakeApiServer, flavour_and_allocator: tuple[AscendFlavour, AscendAllocator]
) -> None:
    """A pod bound with another vendor's devices only (no Ascend key) waits for that
    vendor's plugin: this one neither serves nor fails it."""
    flavour, allocator = flavour_and_allocator
    bound_pod(kube_api, flavour, "gpu", [[DeviceGrant(uuid(0), 1, 1)]], lock=False)
    key = f"hami.io/{flavour.chip.common_word}-devices-to-allocate"
    _patch_pod(kube_api, "gpu", {key: None})
    with pytest.raises(AllocationError, match="no pending pod on node node-a"):
        allocator.allocate([f"{uuid(0)}-0"])
    assert annotations_of(kube_api, "gpu")["hami.io/bind-phase"] == "allocating"


def test_a_hami_core_folder_that_cannot_be_made_fails_the_pod(
    kube_api: FakeApiServer, gateway: KubernetesGateway, node: str, tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    flavour, allocator = b3_allocator(gateway, node, blocker)
    bound_pod(kube_api, flavour, "p", [[DeviceGrant(uuid(0), 16384, 0)]], hami_core=True)
    with pytest.raises(
        AllocationError, match="cannot prepare the HAMi-core folder under"
    ) as caught:
        allocator.allocate([f"{uuid(0)}-0"])
    assert caught.value.code == AllocationError.FAILED
    assert annotations_of(kube_api, "p")["hami.io/bind-phase"] == "failed"
    assert lock_of(kube_api) is None


def test_the_runtime_list_as_the_plugin_reads_it() -> None:
    value = (
        '[{"UUID":"a","temp":"vir05_1c_16g","memory":16384},{"uuid":"b","Memory":8192,"Core":5},'
        '{"UUID":"a","temp":"vir10_3c_32g"}]'
    )
    assert parse_runtime_info(value) == {
        "a": RuntimeEntry(temp="vir05_1c_16g", memory=16384),
        "b": RuntimeEntry(memory=8192, core=5),
    }
    # HAMi pads a pod with no chip of this kind with ``null``.
    assert parse_runtime_info("null") == {}
    for bad in ("[{}]", '[{"UUID":"a","memory":-1}]', '[{"UUID":"a","temp":3}]', "[1]", "{"):
        with pytest.raises(RuntimeInfoError):
            parse_runtime_info(bad)


def test_two_containers_on_one_npu_each_get_their_own_template(
    flavour_and_allocator: tuple[AscendFlavour, AscendAllocator], kube_api: FakeApiServer
) -> None:
    """The runtime list names the NPU once per container, in container order: each
    container's vNPU is the template of its own share, not the NPU's first entry."""
    flavour, allocator = flavour_and_allocator
    bound_pod(
        kube_api,
        flavour,
        "two",
        [[DeviceGrant(uuid(2), 16384, 0)], [DeviceGrant(uuid(2), 32768, 0)]],
    )
    first = allocator.allocate([f"{uuid(2)}-0"])
    second = allocator.allocate([f"{uuid(2)}-1"])
    assert first.envs["ASCEND_VNPU_SPECS"] == "vir05_1c_16g"
    assert second.envs["ASCEND_VNPU_SPECS"] == "vir10_3c_32g"
