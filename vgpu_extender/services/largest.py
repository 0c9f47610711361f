"""The most any node of the inventory could give one container, even empty.

The webhook refuses a pod no node could ever hold (more devices than any node has,
more memory or cores than any device has). The maxima are kept per index and
recomputed, from its device columns, only when its topology changes (a node added,
replaced or removed): a review otherwise costs a version comparison.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

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


def largest_in(index: ClusterIndex) -> Largest | None:
    """The maxima of ``index`` (None when it lists no device: nothing is known yet).

    Read from the index's device columns, a few array passes (about a millisecond at
    5,000 nodes of 8 GPUs; a loop over the Device objects takes a hundred times that).
    Ties go to the node whose name sorts first, so the message does not depend on the
    order nodes were added in. The caller holds the cluster's lock.
    """
    span = index.row_span
    cols = index.cols
    valid = cols.valid[:span]
    counts = valid.sum(axis=1)
    if span == 0 or not counts.any():
        return None
    best = int(counts.max())
    node = min(index.name_of(int(row)) for row in np.flatnonzero(counts == best))
    return Largest(
        devices=Biggest(best, node),
        memory_mib=_biggest_device(index, np.where(valid, cols.mem_total[:span], -1)),
        cores=_biggest_device(index, np.where(valid, cols.cores_total[:span], -1)),
    )


def _biggest_device(index: ClusterIndex, values: np.ndarray) -> Biggest:
    """The largest of ``values`` (per row and slot, -1 where no device), and where."""
    best = int(values.max())
    at_best = values == best
    node = min(index.name_of(int(row)) for row in np.flatnonzero(at_best.any(axis=1)))
    row = index.row_of(node)
    assert row is not None
    slot = int(np.flatnonzero(at_best[row])[0])  # the node's first such device
    return Biggest(best, node, index.devices(row)[slot].type)


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
        found = largest_in(index)
        _CACHE[index] = (version, found)
        return found
