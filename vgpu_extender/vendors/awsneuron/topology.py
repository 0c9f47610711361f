"""Which Neuron devices a container of several takes (HAMi's ``graphSelect``): a run of
consecutive device indexes, every one fitting. On an ``inf*`` instance (custom info
``AWSNodeType``) any run; otherwise only 1, 4, 8 or 16 devices, starting at a multiple
of the count. The lowest run is taken; one device is the policy's first."""

from __future__ import annotations

from collections.abc import Sequence

from vgpu_extender.domain import Device
from vgpu_extender.vendors.awsneuron.inventory_codec import NODE_TYPE

ALIGNED_COUNTS = (1, 4, 8, 16)


def pick_devices(fitting: Sequence[Device], count: int) -> tuple[int, ...] | None:
    if len(fitting) < count:
        return None
    if count <= 1:
        return tuple(range(count))
    positions: dict[int, int] = {}
    for position, device in enumerate(fitting):
        positions.setdefault(device.index, position)
    lowest = min(fitting, key=lambda d: d.index)
    node_type = lowest.custom(NODE_TYPE)
    ring = isinstance(node_type, str) and ("inf" in node_type or "Inf" in node_type)
    if not ring and count not in ALIGNED_COUNTS:
        return None
    top = max(positions)
    for start in range(0, top - count + 2, 1 if ring else count):
        run = range(start, start + count)
        if all(index in positions for index in run):
            return tuple(positions[index] for index in run)
    return None
