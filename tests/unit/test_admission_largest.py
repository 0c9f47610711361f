"""The webhook refuses a container no node could hold even empty, naming the largest."""

from __future__ import annotations

from typing import Any

import pytest

from vgpu_extender.domain import Device, NodeInventory
from vgpu_extender.services import admission
from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.services.largest import Biggest, Largest, largest
from vgpu_extender.vendors import create_vendor

VENDOR = create_vendor("nvidia")


def node(name: str, gpus: int, memory_mib: int, model: str, cores: int = 100) -> NodeInventory:
    devices = tuple(
        Device(uuid=f"GPU-{name}-{i}", index=i, memory_mib=memory_mib, cores=cores, type=model)
        for i in range(gpus)
    )
    return NodeInventory(name=name, devices=devices)


NODES = [
    node("gpu-b", 8, 16384, "NVIDIA-Tesla T4"),
    node("gpu-a", 8, 81920, "NVIDIA-A100"),
    node("gpu-c", 2, 24576, "NVIDIA-L4"),
]


def largest_of(nodes: list[NodeInventory]) -> Largest | None:
    cluster = ClusterState(vendor=VENDOR)
    cluster.upsert_nodes(nodes)
    return largest(cluster)


def pod(limits: dict[str, str], *, init: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": {"limits": limits}}]}
    if init is not None:
        spec["initContainers"] = [{"name": "warmup", "resources": {"limits": init}}]
    return {"metadata": {"name": "p"}, "spec": spec}


def decide(limits: dict[str, str], known: Largest | None, **kw: Any) -> admission.Decision:
    return admission.decide(
        pod(limits, **kw), vendor=VENDOR, scheduler_name="vgpu-scheduler", largest=known
    )


def test_the_maxima_name_the_node_and_device_ties_to_the_first_name() -> None:
    found = largest_of(NODES)
    assert found == Largest(
        devices=Biggest(8, "gpu-a"),
        memory_mib=Biggest(81920, "gpu-a", "NVIDIA-A100"),
        cores=Biggest(100, "gpu-a", "NVIDIA-A100"),
    )


def test_an_inventory_without_devices_knows_no_maximum() -> None:
    assert largest_of([]) is None
    assert largest_of([NodeInventory(name="cpu-only")]) is None


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        (
            {"nvidia.com/gpu": "65"},
            "container 'main': nvidia.com/gpu: 65 exceeds the most devices any node has "
            "(8, node gpu-a)",
        ),
        (
            {"nvidia.com/gpumem": "999999"},
            "container 'main': nvidia.com/gpumem: 999999 exceeds the largest device "
            "(81920 MiB, NVIDIA-A100 on node gpu-a)",
        ),
    ],
    ids=["count", "memory"],
)
def test_what_no_node_could_hold_is_refused_naming_the_largest(
    limits: dict[str, str], message: str
) -> None:
    decision = decide(limits, largest_of(NODES))
    assert decision.allowed is False and not decision.patch
    assert decision.message == f"the pod can never be scheduled: {message}"
    assert "%" not in decision.message


def test_an_init_container_too_big_is_refused_too() -> None:
    decision = decide({"cpu": "1"}, largest_of(NODES), init={"nvidia.com/gpu": "9"})
    assert decision.allowed is False
    assert "container 'warmup': nvidia.com/gpu: 9 exceeds" in decision.message


def test_cores_beyond_every_device_are_refused() -> None:
    scaled_down = largest_of([node("gpu-a", 2, 8192, "NVIDIA-A10", cores=50)])
    decision = decide({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "60"}, scaled_down)
    assert decision.allowed is False
    assert "nvidia.com/gpucores: 60 exceeds the most cores of any device (50, NVIDIA-A10" in (
        decision.message
    )


@pytest.mark.parametrize(
    "limits",
    [
        {"nvidia.com/gpu": "8"},
        {"nvidia.com/gpumem": "81920"},
        {"nvidia.com/gpu": "8", "nvidia.com/gpumem-percentage": "100"},
        {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "100"},
    ],
    ids=["most-devices", "largest-memory", "whole-percentage", "all-cores"],
)
def test_what_the_largest_could_hold_is_admitted(limits: dict[str, str]) -> None:
    assert decide(limits, largest_of(NODES)).allowed is True


def test_an_empty_inventory_admits_any_size() -> None:
    assert decide({"nvidia.com/gpu": "65", "nvidia.com/gpumem": "999999"}, None).allowed


def test_a_node_name_with_a_percent_sign_leaves_none_in_the_message() -> None:
    decision = decide({"nvidia.com/gpu": "3"}, largest_of([node("odd%node", 2, 1024, "x%y")]))
    assert decision.allowed is False and "%" not in decision.message
    assert "odd\uff05node" in decision.message


def test_the_maxima_are_recomputed_only_when_the_topology_changes() -> None:
    cluster = ClusterState(vendor=VENDOR)
    assert largest(cluster) is None
    cluster.upsert_nodes(NODES)
    first = largest(cluster)
    assert first is not None and first.devices == Biggest(8, "gpu-a")
    assert largest(cluster) is first  # the cached object, no second scan
    cluster.upsert_nodes([node("gpu-z", 16, 1024, "small")])
    second = largest(cluster)
    assert second is not None and second.devices == Biggest(16, "gpu-z")
    assert second.memory_mib == first.memory_mib
    cluster.index.remove_node("gpu-z")
    after = largest(cluster)
    assert after is not None and after.devices == Biggest(8, "gpu-a")


def test_the_largest_device_is_named_by_its_own_type_on_a_mixed_node() -> None:
    small = Device(uuid="GPU-0", index=0, memory_mib=16384, type="NVIDIA-Tesla T4")
    big = Device(uuid="GPU-1", index=1, memory_mib=81920, type="NVIDIA-A100")
    found = largest_of([NodeInventory(name="mixed", devices=(small, big))])
    assert found is not None
    assert found.memory_mib == Biggest(81920, "mixed", "NVIDIA-A100")
    assert found.devices == Biggest(2, "mixed")
