"""AWS Neuron's inventory, from node capacity and labels as HAMi reads them:
``aws.amazon.com/neuron`` devices sharing ``aws.amazon.com/neuroncore`` evenly; device
``i`` is ``<node>-AWSNeuron-<i>`` with its cores as its allocations, no memory, and the
node's ``node.kubernetes.io/instance-type`` label as custom info ``AWSNodeType``
(``inf*`` instances wire their devices in a ring).

HAMi registers a device's cores as a bitmask (3 for two cores) and ORs the masks of its
shares; the index adds and subtracts what shares take, so a device's ``cores`` here is
its core count and a share's is how many it takes (disjoint masks add up alike).
"""

from __future__ import annotations

from collections.abc import Mapping

from vgpu_extender.domain import Device, InventoryError
from vgpu_extender.vendors import hami_register
from vgpu_extender.vendors.awsneuron.request import WORD

NODE_TYPE = "AWSNodeType"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


def devices_from_capacity(
    node_name: str,
    capacity: Mapping[str, str],
    labels: Mapping[str, str],
    *,
    count_resource: str = "aws.amazon.com/neuron",
    core_resource: str = "aws.amazon.com/neuroncore",
) -> tuple[Device, ...]:
    devices = hami_register.capacity_count(capacity, count_resource)
    if devices == 0:
        return ()
    cores = hami_register.capacity_count(capacity, core_resource)
    if cores <= 0 or cores % devices:
        raise InventoryError(
            f"{core_resource} capacity {cores} is not divisible by {count_resource} "
            f"capacity {devices}"
        )
    per_device = cores // devices
    info = ((NODE_TYPE, labels.get(INSTANCE_TYPE_LABEL, "")),)
    return tuple(
        Device(
            uuid=f"{node_name}-{WORD}-{i}",
            index=i,
            count=per_device,
            memory_mib=0,
            cores=per_device,
            type=WORD,
            vendor=WORD,
            custom_info=info,
        )
        for i in range(devices)
    )
