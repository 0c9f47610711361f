"""The topology term of a node's score: how much of a container one device group holds.

A vendor whose devices come in link domains (Ascend 910's HCCS rings, by ``NetworkID``)
names the grouping in its share model (``group_key``). HAMi adds, for each container of
several devices, the share of them on the one ring holding most, times 10, to the node
score: a 4-NPU job prefers a node where one ring can take it whole. Here the term is
read from the grid, for the devices that fit the container now: ``weight x min(count,
most fitting in one group) / count``, 0 on a node where a fitting device has no group
(HAMi scores 0 when an NPU lacks its NetworkID). Each row's value is remembered until
the row changes.
"""

from __future__ import annotations

import numpy as np

from vgpu_extender.domain import ContainerRequest, PodRequest
from vgpu_extender.domain.share import Capacity
from vgpu_extender.engine.columns import IntGrid, IntVec
from vgpu_extender.engine.index import ClusterIndex
from vgpu_extender.engine.row_vectors import FloatVec
from vgpu_extender.engine.rules import fitting_mask
from vgpu_extender.engine.selection import selector_mask


def topology_scores(index: ClusterIndex, request: PodRequest, rows: IntVec) -> FloatVec | None:
    """The topology term of ``rows`` for ``request`` (None: no ask has one)."""
    total: FloatVec | None = None
    for ask in request.device_containers:
        share = index.shares.of(ask.vendor)
        if share.group_key is None or ask.count <= 1:
            continue
        shape = (
            ask.count,
            ask.memory_mib,
            ask.memory_percent,
            ask.cores,
            ask.vendor,
            ask.mode,
            ask.mutex,
        )
        key = ("topology", shape, request.selector)

        def compute(ix: ClusterIndex, changed: IntVec, ask: ContainerRequest = ask) -> FloatVec:
            return _term(ix, request, ask, changed)

        term = index.row_vector(key, compute)[rows]
        total = term if total is None else total + term
    return total


def _term(
    index: ClusterIndex, request: PodRequest, ask: ContainerRequest, rows: IntVec
) -> FloatVec:
    cols = index.cols
    share = index.shares.of(ask.vendor)
    within = np.take(cols.usable, rows, axis=0)
    asked = index.ask_mask(ask.vendor, ask.mode)
    if asked is not None:
        within &= np.take(asked, rows, axis=0)
    chosen = selector_mask(index, request.selector)
    if chosen is not None:
        within &= np.take(chosen, rows, axis=0)

    def take(grid: IntGrid) -> IntGrid:
        return np.take(grid, rows, axis=0)

    free = Capacity(take(cols.slots_free), take(cols.mem_free), take(cols.cores_free))
    total = Capacity(take(cols.slots_total), take(cols.mem_total), take(cols.cores_total))
    fits = fitting_mask(share, free, total, ask, within)
    groups = take(cols.group)
    best = np.zeros(len(rows), dtype=np.int64)
    for value in np.unique(groups[fits]).tolist():
        if value >= 0:
            best = np.maximum(best, (fits & (groups == value)).sum(axis=1))
    ungrouped = (fits & (groups < 0)).any(axis=1)
    term: FloatVec = share.group_weight * np.minimum(best, ask.count) / ask.count
    term[ungrouped] = 0.0
    return term
