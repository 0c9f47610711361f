"""Moore Threads GPUs on a node, as HAMi's scheduler reads them: from the node's
**capacity**. ``cores = capacity[sgpu-core]``, 16 per GPU; one device per started 16:
``<node>-mthreads-<i>``, index ``i``, 100 slots, 16 cores, type ``Mthreads`` and
``capacity[sgpu-memory] * 512 * 16 / cores`` MiB (Go's integer division). No core
capacity is no GPU. These ids are what the pod annotations name.

HAMi never writes a node annotation for these GPUs. The annotation codec here (HAMi's
registration JSON, ``hami_register``) serves this project's own tools and tests only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from vgpu_extender.domain import Device, InventoryError, RequestError
from vgpu_extender.domain.quantity import quantity_to_int
from vgpu_extender.vendors import hami_register
from vgpu_extender.vendors.mthreads.config import (
    CORES_PER_GPU,
    MEMORY_UNIT_MIB,
    WORD,
    MthreadsConfig,
)

#: Not HAMi's: the key this project's tools may register the GPUs under.
INVENTORY_ANNOTATION = "hami.io/node-mthreads-register"
SLOTS_PER_GPU = 100
_INT32_MAX = 2**31 - 1


def device_id(node_name: str, index: int) -> str:
    return f"{node_name}-mthreads-{index}"


def devices_from_capacity(
    node_name: str, capacity: Mapping[str, str], config: MthreadsConfig
) -> tuple[Device, ...]:
    """The node's GPUs from its ``status.capacity``; ``InventoryError`` for a value that
    is not a whole quantity or a GPU memory over int32 (HAMi would wrap it)."""
    cores = _capacity(capacity, config.cores_resource)
    if cores == 0:
        return ()
    units = _capacity(capacity, config.memory_resource)
    memory = units * MEMORY_UNIT_MIB * CORES_PER_GPU // cores
    if memory > _INT32_MAX:
        raise InventoryError(
            f"{config.memory_resource} capacity {units} gives {memory} MiB per GPU, over int32"
        )
    gpus = -(-cores // CORES_PER_GPU)
    return tuple(
        Device(
            uuid=device_id(node_name, i),
            index=i,
            count=SLOTS_PER_GPU,
            memory_mib=memory,
            cores=CORES_PER_GPU,
            type=WORD,
            vendor=WORD,
        )
        for i in range(gpus)
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
