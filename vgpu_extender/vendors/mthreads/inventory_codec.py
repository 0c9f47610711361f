"""Moore Threads GPUs on a node, as HAMi's scheduler reads them: from the node's
**capacity**. ``cores = capacity[sgpu-core]``, 16 per GPU; one device per started 16:
``<node>-mthreads-<i>``, index ``i``, 100 slots, 16 cores, type ``Mthreads`` and
``capacity[sgpu-memory] * 512 * 16 / cores`` MiB (Go's integer division). No core
capacity is no GPU. These ids are what the pod annotations name.

HAMi never writes a node annotation for these GPUs. The vendor's annotation codec
(HAMi's registration JSON, the shared vendor base's) serves this project's own tools
and tests only.
"""

from __future__ import annotations

from collections.abc import Mapping

from vgpu_extender.domain import Device
from vgpu_extender.vendors import hami_capacity
from vgpu_extender.vendors.mthreads.config import (
    CORES_PER_GPU,
    MEMORY_UNIT_MIB,
    WORD,
    MthreadsConfig,
)

#: Not HAMi's: the key this project's tools may register the GPUs under.
INVENTORY_ANNOTATION = "hami.io/node-mthreads-register"
SLOTS_PER_GPU = 100


def device_id(node_name: str, index: int) -> str:
    return f"{node_name}-mthreads-{index}"


def devices_from_capacity(
    node_name: str, capacity: Mapping[str, str], config: MthreadsConfig
) -> tuple[Device, ...]:
    """The node's GPUs from its ``status.capacity``; ``InventoryError`` for a value that
    is not a whole quantity or a GPU memory over int32 (HAMi would wrap it)."""
    pool = hami_capacity.CorePool(
        cores_resource=config.cores_resource,
        memory_resource=config.memory_resource,
        memory_unit_mib=MEMORY_UNIT_MIB,
        cores_per_device=CORES_PER_GPU,
        slots=SLOTS_PER_GPU,
        word=WORD,
        device_id=device_id,
        noun="GPU",
    )
    return hami_capacity.devices(node_name, capacity, pool)
