"""Cambricon MLUs on a node, as HAMi's scheduler reads them: from the node's
**capacity**, not an annotation (the vendor's plugin runs ``dynamic-smlu`` with
``min-dsmlu-unit=256`` and advertises vcores and 256 MiB memory units).

``cards = capacity[vcore]``, 100 vcores per MLU; one device per started 100:
``<node>-cambricon-mlu-<i>``, index ``i``, 100 slots, 100 cores, type ``MLU`` and
``capacity[vmemory] * 256 * 100 / cards`` MiB (Go's integer division). No vcore
capacity is no MLU. These ids are what the pod annotations name.

HAMi never writes a node annotation for MLUs. The vendor's annotation codec
(HAMi's registration JSON, the shared vendor base's) serves this project's own tools
and tests only.
"""

from __future__ import annotations

from collections.abc import Mapping

from vgpu_extender.domain import Device
from vgpu_extender.vendors import hami_capacity
from vgpu_extender.vendors.cambricon.config import MEMORY_UNIT_MIB, WORD, CambriconConfig

#: Not HAMi's: the key this project's tools may register MLUs under.
INVENTORY_ANNOTATION = "hami.io/node-cambricon-mlu-register"
VCORES_PER_CARD = 100
SLOTS_PER_CARD = 100


def device_id(node_name: str, index: int) -> str:
    return f"{node_name}-cambricon-mlu-{index}"


def devices_from_capacity(
    node_name: str, capacity: Mapping[str, str], config: CambriconConfig
) -> tuple[Device, ...]:
    """The node's MLUs from its ``status.capacity``; ``InventoryError`` for a value that
    is not a whole quantity or an MLU memory over int32 (HAMi would wrap it)."""
    pool = hami_capacity.CorePool(
        cores_resource=config.cores_resource,
        memory_resource=config.memory_resource,
        memory_unit_mib=MEMORY_UNIT_MIB,
        cores_per_device=VCORES_PER_CARD,
        slots=SLOTS_PER_CARD,
        word=WORD,
        device_id=device_id,
        noun="MLU",
    )
    return hami_capacity.devices(node_name, capacity, pool)
