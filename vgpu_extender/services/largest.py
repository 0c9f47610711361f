"""The most any node of the inventory could give one container, even empty.

The webhook refuses a pod no node could ever hold (more devices than any node has,
more memory or cores than any device has). Answering that from a scan of every node
per review would cost milliseconds at 5,000 nodes, so the maxima are kept per index
and recomputed only when its topology changes (a node added, replaced or removed).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import dataclass

from vgpu_extender.domain import Device, NodeInventory
from vgpu_extender.engine import ClusterIndex
from vgpu_extender.services.cluster import ClusterState


@dataclass(frozen=True, slots=True)
class Biggest:
    """One maximum and where it is: the node, and the device's type when per device."""

    value: int
    node: str
    type: str = ""


@dataclass(frozen=True, slots=True)
class Largest:
    """The most devices on one node, and the most memory (MiB) and cores on one device."""

    devices: Biggest
    memory_mib: Biggest
    cores: Biggest


def largest_of(inventories: Iterable[NodeInventory]) -> Largest | None:
    """The maxima over ``inventories`` (None when they list no device: nothing is known).

    Ties go to the node whose name sorts first, so the message does not depend on the
    order nodes were added in.
    """
    devices: Biggest | None = None
    memory: Biggest | None = None
    cores: Biggest | None = None
    for inventory in inventories:
        if not inventory.devices:
            continue
        devices = _bigger(devices, Biggest(len(inventory.devices), inventory.name))
        for device in inventory.devices:
            memory = _bigger(memory, _on(device, device.memory_mib, inventory.name))
            cores = _bigger(cores, _on(device, device.cores, inventory.name))
    if devices is None or memory is None or cores is None:
        return None
    return Largest(devices=devices, memory_mib=memory, cores=cores)


#: Per index, (topology version, maxima): weak, so an index that goes takes its entry.
_CACHE: weakref.WeakKeyDictionary[ClusterIndex, tuple[int, Largest | None]] = (
    weakref.WeakKeyDictionary()
)


def largest(cluster: ClusterState) -> Largest | None:
    """The maxima of ``cluster``'s index, recomputed only after its topology changed."""
    index = cluster.index
    with cluster.lock:
        version = index.topology_version
        cached = _CACHE.get(index)
        if cached is not None and cached[0] == version:
            return cached[1]
        # Only the references are taken under the lock; the scan runs outside it, so
        # filter does not wait on it.
        inventories = [index.inventory(name) for name in index.node_names()]
    found = largest_of(inventories)
    with cluster.lock:
        if index.topology_version == version:
            _CACHE[index] = (version, found)
    return found


def _on(device: Device, value: int, node: str) -> Biggest:
    return Biggest(value, node, device.type)


def _bigger(held: Biggest | None, seen: Biggest) -> Biggest:
    if held is None or seen.value > held.value:
        return seen
    if seen.value == held.value and seen.node < held.node:
        return seen
    return held
