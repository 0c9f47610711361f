"""The Moore Threads vendor with HAMi's literals (``pkg/device/mthreads``): the config
section, request parsing (512 MiB units, per-GPU memory and cores as the container's
divided by its count), the capacity inventory with its synthetic ids, the webhook's
whole-GPU limits and legal memory values with HAMi's message, the annotations (only
the allocated key, gpu-index, predicate time and node), the one-GPU-per-pod rule, no
lock and no handshake, and hostile input."""

from __future__ import annotations

from typing import Any

import pytest

from vgpu_extender.domain import (
    AnnotationError,
    ContainerRequest,
    DeviceGrant,
    InventoryError,
    PodAssignment,
    RequestError,
)
from vgpu_extender.vendors import NodeFacts
from vgpu_extender.vendors.mthreads import MthreadsConfig, MthreadsVendor, mthreads_vendors
from vgpu_extender.vendors.mthreads.admission import INVALID_MEMORY, pod_annotations
from vgpu_extender.vendors.mthreads.allocation_codec import device_index

VENDOR = MthreadsVendor()
CONFIG = MthreadsConfig()


def _pod(*containers: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "uid": "u1", "annotations": annotations or {}},
        "spec": {"containers": list(containers)},
    }


def _ctr(
    name: str = "c",
    *,
    limits: dict[str, Any] | None = None,
    requests: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {"name": name, "resources": {"limits": limits or {}, "requests": requests or {}}}


def test_defaults_and_names() -> None:
    assert VENDOR.name == "Mthreads"
    assert VENDOR.resource_names == {
        "mthreads.com/vgpu",
        "mthreads.com/sgpu-memory",
        "mthreads.com/sgpu-core",
    }
    assert VENDOR.assignment_annotation == "hami.io/mthreads-vgpu-devices-allocated"
    assert VENDOR.handshake is None
    assert VENDOR.names.node_lock is None and VENDOR.names.to_allocate is None


def test_the_section_renames_resources() -> None:
    vendor = mthreads_vendors({"resourceCountName": "mthreads.com/gpu"})
    assert "mthreads.com/gpu" in vendor.resource_names


@pytest.mark.parametrize(
    ("settings", "named"),
    [({"resourceCoreName": "a b"}, "resourceCoreName"), ({"mthreadsName": "x"}, "mthreadsName")],
    ids=["space", "unknown key"],
)
def test_bad_settings_name_the_key(settings: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        MthreadsConfig.from_mapping(settings)


def test_memory_is_in_512_mib_units() -> None:
    limits = {
        "mthreads.com/vgpu": "1",
        "mthreads.com/sgpu-memory": "8",
        "mthreads.com/sgpu-core": "4",
    }
    (ask,) = VENDOR.parse_pod(_pod(_ctr(limits=limits))).containers
    assert ask == ContainerRequest("c", count=1, memory_mib=4096, cores=4, vendor="Mthreads")


def test_several_gpus_share_the_containers_memory_and_cores() -> None:
    limits = {
        "mthreads.com/vgpu": "2",
        "mthreads.com/sgpu-memory": "192",
        "mthreads.com/sgpu-core": "33",
    }
    (ask,) = VENDOR.parse_pod(_pod(_ctr(limits=limits))).containers
    assert (ask.count, ask.memory_mib, ask.cores) == (2, 192 * 512 // 2, 16)


def test_a_bare_count_asks_for_all_memory_and_no_cores() -> None:
    (ask,) = VENDOR.parse_pod(_pod(_ctr(requests={"mthreads.com/vgpu": "1"}))).containers
    assert (ask.memory_mib, ask.memory_percent, ask.cores) == (0, 100, 0)


@pytest.mark.parametrize(
    ("resource", "value"),
    [
        ("mthreads.com/vgpu", "-1"),
        ("mthreads.com/sgpu-memory", "2.5"),
        ("mthreads.com/sgpu-memory", "4194304"),
        ("mthreads.com/sgpu-core", "x"),
    ],
    ids=["negative count", "fractional memory", "memory over int32 MiB", "bad cores"],
)
def test_bad_quantities_name_the_resource(resource: str, value: str) -> None:
    limits = {"mthreads.com/vgpu": "1", resource: value}
    with pytest.raises(RequestError, match=resource.replace(".", r"\.")):
        VENDOR.parse_pod(_pod(_ctr(limits=limits)))


def test_the_uuid_selector_is_mthreads_ai() -> None:
    pod = _pod(
        _ctr(limits={"mthreads.com/vgpu": "1"}),
        annotations={
            "mthreads.ai/use-gpuuuid": "n-mthreads-0",
            "mthreads.ai/nouse-gpuuuid": "n-mthreads-1",
            "mthreads.com/use-gpuuuid": "n-mthreads-2",
        },
    )
    selector = VENDOR.parse_pod(pod).selector
    assert selector.use_uuids == ("n-mthreads-0",)
    assert selector.avoid_uuids == ("n-mthreads-1",)


# -- inventory ------------------------------------------------------------------


def test_the_inventory_comes_from_capacity_16_cores_per_gpu() -> None:
    capacity = {"mthreads.com/sgpu-core": "32", "mthreads.com/sgpu-memory": "192"}
    devices = VENDOR.devices_from_capacity("node1", capacity)
    assert [d.uuid for d in devices] == ["node1-mthreads-0", "node1-mthreads-1"]
    first = devices[1]
    # 192 units * 512 MiB * 16 / 32 cores = 49152 MiB per GPU.
    assert (first.index, first.count, first.memory_mib, first.cores) == (1, 100, 49152, 16)
    assert (first.type, first.vendor, first.healthy) == ("Mthreads", "Mthreads", True)


def test_no_core_capacity_is_no_gpu() -> None:
    assert VENDOR.devices_from_capacity("n", {"mthreads.com/sgpu-memory": "96"}) == ()


@pytest.mark.parametrize(
    "capacity",
    [
        {"mthreads.com/sgpu-core": "1.5"},
        {"mthreads.com/sgpu-core": "16", "mthreads.com/sgpu-memory": "9999999"},
    ],
    ids=["fractional", "over int32"],
)
def test_bad_capacity_is_an_inventory_error(capacity: dict[str, str]) -> None:
    with pytest.raises(InventoryError):
        VENDOR.devices_from_capacity("n", capacity)


def test_annotations_carry_no_inventory_and_the_standalone_one_round_trips() -> None:
    assert (
        VENDOR.decode_node(NodeFacts("node-a", annotations={VENDOR.inventory_annotation: "[]"}))
        is None
    )
    assert VENDOR.node_keys == ()
    devices = VENDOR.devices_from_capacity(
        "n", {"mthreads.com/sgpu-core": "48", "mthreads.com/sgpu-memory": "288"}
    )
    assert VENDOR.decode_inventory(VENDOR.encode_inventory(devices)) == devices


# -- webhook --------------------------------------------------------------------


def test_several_gpus_are_whole() -> None:
    admitted = VENDOR.admit(_ctr(limits={"mthreads.com/vgpu": "2"}), _pod())
    assert admitted is not None and admitted.uses
    assert admitted.limits == {"mthreads.com/sgpu-core": "32", "mthreads.com/sgpu-memory": "192"}
    containers = [_ctr(limits={"mthreads.com/vgpu": "3"}), _ctr("b")]
    assert pod_annotations(containers, CONFIG) == {"mthreads.com/request-gpu-num": "3"}


def test_one_gpu_without_memory_is_whole() -> None:
    admitted = VENDOR.admit(_ctr(requests={"mthreads.com/vgpu": "1"}), _pod())
    assert admitted is not None
    assert admitted.limits == {"mthreads.com/sgpu-core": "16", "mthreads.com/sgpu-memory": "96"}
    assert pod_annotations([_ctr(limits={"mthreads.com/vgpu": "1"})], CONFIG) == {}


@pytest.mark.parametrize("memory", ["2", "4", "8", "16", "32", "64", "96"])
def test_legal_memory_is_kept(memory: str) -> None:
    limits = {"mthreads.com/vgpu": "1", "mthreads.com/sgpu-memory": memory}
    admitted = VENDOR.admit(_ctr(limits=limits), _pod())
    assert admitted is not None and admitted.uses and not admitted.limits


@pytest.mark.parametrize("memory", ["3", "128", "1.5", "0"])
def test_other_memory_is_refused_with_hamis_message(memory: str) -> None:
    limits = {"mthreads.com/vgpu": "1", "mthreads.com/sgpu-memory": memory}
    with pytest.raises(RequestError) as caught:
        VENDOR.admit(_ctr(limits=limits), _pod())
    assert str(caught.value) == INVALID_MEMORY
    assert INVALID_MEMORY == (
        "sGPU memory request value is invalid, valid values are [2, 4, 8, 16, 32, 64, 96]"
    )


@pytest.mark.parametrize("count", ["0", "-1"])
def test_a_count_of_none_is_refused(count: str) -> None:
    with pytest.raises(RequestError, match=r"^mthreads\.com/vgpu must be greater than 0$"):
        VENDOR.admit(_ctr(limits={"mthreads.com/vgpu": count}), _pod())


def test_a_container_without_the_count_is_not_touched() -> None:
    assert VENDOR.admit(_ctr(limits={"mthreads.com/sgpu-memory": "2"}), _pod()) is None


# -- annotations and the pod rule ------------------------------------------------


def test_only_the_allocated_key_and_the_side_channel() -> None:
    grants = (DeviceGrant("node1-mthreads-0", 4096, 4, vendor="Mthreads"),)
    assignment = PodAssignment("node1", ((), grants), (False, False))
    annotations = VENDOR.bind_annotations(assignment, bind_time=1700000000)
    assert annotations == {
        "hami.io/vgpu-node": "node1",
        "hami.io/mthreads-vgpu-devices-allocated": ";node1-mthreads-0,Mthreads,4096,4:;",
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "1700000000",
        "mthreads.com/gpu-index": "0",
        "mthreads.com/predicate-time": "1700000000000000000",
        "mthreads.com/predicate-node": "node1",
    }


def test_gpu_index_lists_the_last_container_with_gpus() -> None:
    two = (
        DeviceGrant("n-mthreads-2", 0, 16, vendor="Mthreads"),
        DeviceGrant("n-mthreads-3", 0, 16, vendor="Mthreads"),
    )
    one = (DeviceGrant("n-mthreads-1", 0, 1, vendor="Mthreads"),)
    assignment = PodAssignment("n", (one, two, ()), (False, False, False))
    assert VENDOR.bind_annotations(assignment, bind_time=1)["mthreads.com/gpu-index"] == "2,3"


def test_an_id_without_an_index_is_an_error() -> None:
    with pytest.raises(AnnotationError):
        device_index("gpu")


def test_the_capacity_entries_read() -> None:
    assert VENDOR.capacity_keys == ("mthreads.com/sgpu-core", "mthreads.com/sgpu-memory")
