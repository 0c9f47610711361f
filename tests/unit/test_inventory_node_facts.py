"""The inventory service gives vendors the node's name and labels: Enflame DRS devices
from the ``enflame.com/gcu-drs-capacity`` annotation get IDs made from the node's name
(HAMi's literal), AWS Neuron devices from the node's capacity carry its
``node.kubernetes.io/instance-type`` label, and a change of that label alone is a new
inventory, kept in the store, that turns the ring rule on or off."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.services.inventory import InventoryService
from vgpu_extender.services.sync import node_view
from vgpu_extender.vendors import NodeFacts, create_vendor_set
from vgpu_extender.vendors.awsneuron.topology import pick_devices

#: HAMi's enflame test literal (npu.md §6).
DRS_LITERAL = (
    '{"devices":[{"index":"0","minor":"0","capacity":6}],'
    '"profiles":{"1g.6gb":"0","3g.20gb":"1","6g.40gb":"2"}}'
)
NEURON_CAPACITY = {"aws.amazon.com/neuron": "4", "aws.amazon.com/neuroncore": "8", "cpu": "96"}
INSTANCE_TYPE = "node.kubernetes.io/instance-type"


def _node(
    name: str,
    version: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    capacity: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Node object as the API server (and the node watch) gives it."""
    return {
        "metadata": {
            "name": name,
            "resourceVersion": version,
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "status": {"capacity": capacity or {}, "allocatable": capacity or {}},
    }


@pytest.fixture
def service(sessions: sessionmaker[Session]) -> Iterator[tuple[ClusterState, InventoryService]]:
    cluster = ClusterState(vendor=create_vendor_set("nvidia,enflame,awsneuron"))
    inventory = InventoryService(cluster=cluster, sessions=sessions, split_count=10)
    yield cluster, inventory
    inventory.stop()


def test_drs_devices_get_the_node_name_and_neuron_devices_the_instance_type(
    service: tuple[ClusterState, InventoryService],
) -> None:
    cluster, inventory = service
    drs = _node("gcu-node", "1", annotations={"enflame.com/gcu-drs-capacity": DRS_LITERAL})
    neuron = _node(
        "inf-node", "1", labels={INSTANCE_TYPE: "inf2.48xlarge"}, capacity=NEURON_CAPACITY
    )
    assert inventory.observe([node_view(drs), node_view(neuron)]) == 2

    gcu = cluster.index.inventory("gcu-node")
    assert not gcu.problem
    assert [(d.uuid, d.vendor, d.count, d.memory_mib, d.cores) for d in gcu.devices] == [
        ("gcu-node-enflame-drs-0", "Enflame", 6, 40960, 100)
    ]
    inf = cluster.index.inventory("inf-node")
    assert not inf.problem
    assert [(d.uuid, d.count, d.custom("AWSNodeType")) for d in inf.devices] == [
        (f"inf-node-AWSNeuron-{i}", 2, "inf2.48xlarge") for i in range(4)
    ]


def test_a_change_of_the_instance_type_label_alone_is_a_new_inventory(
    service: tuple[ClusterState, InventoryService], sessions: sessionmaker[Session]
) -> None:
    cluster, inventory = service
    labels = {INSTANCE_TYPE: "inf2.48xlarge", "zone": "a"}
    assert inventory.observe([node_view(_node("n", "1", labels=labels, capacity=NEURON_CAPACITY))])
    # Three devices from device 1 on: a run only an inf* instance allows.
    assert pick_devices(cluster.index.inventory("n").devices[1:], 3) == (0, 1, 2)

    relabelled = {**labels, INSTANCE_TYPE: "trn1.32xlarge"}
    changed = _node("n", "2", labels=relabelled, capacity=NEURON_CAPACITY)
    assert inventory.observe([node_view(changed)]) == 1
    devices = cluster.index.inventory("n").devices
    assert {d.custom("AWSNodeType") for d in devices} == {"trn1.32xlarge"}
    assert pick_devices(devices[1:], 3) is None
    # The store has the new inventory too: a restart reads the same rule.
    reloaded = ClusterState(vendor=create_vendor_set("nvidia,enflame,awsneuron"))
    reloaded.load(sessions)
    assert reloaded.index.inventory("n").devices == devices

    # A new version with the same labels and capacity changes nothing.
    same = _node("n", "3", labels=relabelled, capacity=NEURON_CAPACITY)
    assert inventory.observe([node_view(same)]) == 0


@pytest.mark.parametrize("name", ["", None, 7], ids=["empty", "none", "number"])
def test_node_facts_need_the_nodes_name(name: object) -> None:
    with pytest.raises(ValueError, match="node's name must be a non-empty string"):
        NodeFacts(name)  # type: ignore[arg-type]
