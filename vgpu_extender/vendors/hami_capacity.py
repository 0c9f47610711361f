"""Devices read from a node's ``status.capacity`` the way HAMi makes them up: whole cards
from a count (Enflame's GCUs, MetaX's GPUs), or, for vendors whose plugin advertises a
pool of cores and memory units (Cambricon's vcores, Moore Threads' ``sgpu-core``), one
device per started ``cores_per_device`` cores, each with the pool's memory spread by
cores (Go's integer division)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from vgpu_extender.domain import Device, InventoryError, RequestError
from vgpu_extender.domain.quantity import INT32_MAX, quantity_to_int
from vgpu_extender.vendors import hami_register

_INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class CorePool:
    """How a vendor's capacity describes its devices."""

    cores_resource: str
    memory_resource: str
    memory_unit_mib: int
    cores_per_device: int
    slots: int
    word: str
    #: The device a pod annotation names: ``device_id(node_name, index)``.
    device_id: Callable[[str, int], str]
    #: What the vendor calls one device, in the over-int32 error (``MLU``, ``GPU``).
    noun: str


def devices(node_name: str, capacity: Mapping[str, str], pool: CorePool) -> tuple[Device, ...]:
    """The node's devices; none without cores. ``InventoryError`` for a value that is not
    a whole quantity or a device memory over int32 (HAMi would wrap it)."""
    cores = integer(capacity, pool.cores_resource)
    if cores == 0:
        return ()
    units = integer(capacity, pool.memory_resource)
    memory = units * pool.memory_unit_mib * pool.cores_per_device // cores
    if memory > INT32_MAX:
        raise InventoryError(
            f"{pool.memory_resource} capacity {units} gives {memory} MiB per {pool.noun}, "
            "over int32"
        )
    cards = hami_register.check_device_count(
        -(-cores // pool.cores_per_device), pool.cores_resource
    )
    return tuple(
        Device(
            uuid=pool.device_id(node_name, i),
            index=i,
            count=pool.slots,
            memory_mib=memory,
            cores=pool.cores_per_device,
            type=pool.word,
            vendor=pool.word,
        )
        for i in range(cards)
    )


def whole_cards(
    node_name: str,
    capacity: Mapping[str, str],
    resource: str,
    *,
    tag: str,
    memory_mib: int,
    cores: int,
    word: str,
) -> tuple[Device, ...]:
    """One card of one allocation per unit of the ``resource`` count, card ``i`` named
    ``<node>-<tag>-<i>``; ``InventoryError`` for an unreadable count."""
    return tuple(
        Device(
            uuid=f"{node_name}-{tag}-{i}",
            index=i,
            count=1,
            memory_mib=memory_mib,
            cores=cores,
            type=word,
            vendor=word,
        )
        for i in range(hami_register.capacity_count(capacity, resource))
    )


def integer(capacity: Mapping[str, str], name: str) -> int:
    """A capacity as an integer (0 when absent); ``InventoryError`` when it is not whole."""
    raw = capacity.get(name)
    if raw is None:
        return 0
    try:
        return quantity_to_int(raw, field=name, maximum=_INT64_MAX)
    except RequestError as exc:
        raise InventoryError(f"node capacity {name}: {exc}") from None
