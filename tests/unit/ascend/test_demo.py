"""The demo inventory's NPU nodes: only for the chips a process serves, registered as
HAMi's Ascend plugin registers them (a 910B3 node in two rings, a 310P node without
topology), and placed on by the engine with the chip's own rules."""

from __future__ import annotations

import pytest

from vgpu_extender.domain import PodAssignment, Rejection
from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.services.demo import demo_inventory
from vgpu_extender.vendors import create_vendor_set

GPU_NODES = ["demo-a100-1", "demo-a100-2", "demo-t4-1", "demo-t4-2"]
VENDORS = create_vendor_set("nvidia,ascend")


def test_an_nvidia_process_gets_the_gpu_nodes_only() -> None:
    assert [node.name for node in demo_inventory()] == GPU_NODES
    assert [node.name for node in demo_inventory(vendors=("NVIDIA",))] == GPU_NODES


def test_a_process_serving_ascend_gets_an_npu_node_of_each_demo_chip() -> None:
    nodes = {node.name: node for node in demo_inventory(vendors=VENDORS.names)}
    assert list(nodes) == [*GPU_NODES, "demo-910b3-1", "demo-310p-1"]
    b3, p310 = nodes["demo-910b3-1"], nodes["demo-310p-1"]
    assert {d.vendor for d in b3.devices} == {"Ascend910B3"}
    assert [d.custom("NetworkID") for d in b3.devices] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert {(d.count, d.memory_mib, d.cores) for d in b3.devices} == {(4, 65536, 20)}
    assert {(d.count, d.memory_mib) for d in p310.devices} == {(7, 21527)}
    assert all(d.custom("NetworkID") is None for d in p310.devices)
    assert len({d.uuid for node in nodes.values() for d in node.devices}) == sum(
        len(node.devices) for node in nodes.values()
    )
    # The devices are what the chip's vendor reads back from its own annotation.
    vendor = VENDORS.get("Ascend910B3")
    assert vendor is not None
    assert vendor.decode_inventory(vendor.encode_inventory(b3.devices)) == b3.devices


def _pod(cw: str, count: int) -> dict[str, object]:
    limits = {f"huawei.com/{cw}": str(count), f"huawei.com/{cw}-memory": "65536"}
    return {
        "metadata": {"name": f"npu-{count}", "namespace": "default", "uid": f"u-{cw}-{count}"},
        "spec": {"containers": [{"name": "main", "resources": {"limits": limits}}]},
    }


@pytest.fixture
def cluster() -> ClusterState:
    state = ClusterState(vendor=VENDORS)
    state.upsert_nodes(demo_inventory(vendors=VENDORS.names))
    return state


def test_a_ring_request_on_the_demo_node_takes_one_ring(cluster: ClusterState) -> None:
    request = VENDORS.parse_pod(_pod("Ascend910B3", 4))
    placed = cluster.planner.choose(request, "demo-910b3-1")
    assert isinstance(placed, PodAssignment)
    (grants,) = placed.containers
    devices = {d.uuid: d for d in cluster.index.inventory("demo-910b3-1").devices}
    assert len({devices[g.uuid].custom("NetworkID") for g in grants}) == 1
    # A GPU node holds no NPU.
    assert isinstance(cluster.planner.choose(request, "demo-a100-1"), Rejection)
