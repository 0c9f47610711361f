"""Cambricon MLUs on a node, as HAMi's scheduler reads them: from the node's
**capacity**, not an annotation (the vendor's plugin runs ``dynamic-smlu`` with
``min-dsmlu-unit=256`` and advertises vcores and 256 MiB memory units).

``cards = capacity[vcore]``, 100 vcores per MLU; one device per started 100:
``<node>-cambricon-mlu-<i>``, index ``i``, 100 slots, 100 cores, type ``MLU`` and
``capacity[vmemory] * 256 * 100 / cards`` MiB (Go's integer division). No vcore
capacity is no MLU. These ids are what the pod annotations name.

HAMi never writes a node annotation for MLUs. The annotation codec here (HAMi's
registration JSON, ``hami_register``) serves this project's own tools and tests only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from vgpu_extender.domain import Device, InventoryError, RequestError
from vgpu_extender.domain.quantity import quantity_to_int
from vgpu_extender.vendors import hami_register
from vgpu_extender.vendors.cambricon.config import MEMORY_UNIT_MIB, WORD, CambriconConfig

#: Not HAMi's: the key this project's tools may register MLUs under.
INVENTORY_ANNOTATION = "hami.io/node-cambricon-mlu-register"
VCORES_PER_CARD = 100
SLOTS_PER_CARD = 100
_INT32_MAX = 2**31 - 1


def device_id(node_name: str, index: int) -> str:
    return f"{node_name}-cambricon-mlu-{index}"


def devices_from_capacity(
    node_name: str, capacity: Mapping[str, str], config: CambriconConfig
) -> tuple[Device, ...]:
    """The node's MLUs from its ``status.capacity``; ``InventoryError`` for a value that
    is not a whole quantity or an MLU memory over int32 (HAMi would wrap it)."""
    vcores = _capacity(capacity, config.cores_resource)
    if vcores == 0:
        return ()
    units = _capacity(capacity, config.memory_resource)
    memory = units * MEMORY_UNIT_MIB * VCORES_PER_CARD // vcores
    if memory > _INT32_MAX:
        raise InventoryError(
            f"{config.memory_resource} capacity {units} gives {memory} MiB per MLU, over int32"
        )
    cards = -(-vcores // VCORES_PER_CARD)
    return tuple(
        Device(
            uuid=device_id(node_name, i),
            index=i,
            count=SLOTS_PER_CARD,
            memory_mib=memory,
            cores=VCORES_PER_CARD,
            type=WORD,
            vendor=WORD,
        )
        for i in range(cards)
    )


def decode_inventory(value: str) -> tuple[Device, ...]:
    return hami_register.decode_devices(value, vendor=WORD, default_type=WORD)


def encode_inventory(devices: Iterable[Device]) -> str:
    return hami_register.encode_devices(devices)


def _capacity(capacity: Mapping[str, str], name: str) -> int:
    raw = capacity.get(name)
    if raw is None:
        return 0
    try:
        return quantity_to_int(raw, field=name, maximum=2**63 - 1)
    except RequestError as exc:
        raise InventoryError(f"node capacity {name}: {exc}") from None
