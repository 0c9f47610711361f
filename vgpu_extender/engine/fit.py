"""Vectorised feasibility: which candidate nodes can take a pod right now.

For each container that asks for devices, one pass of NumPy operations over the
whole device grid says which devices could hold it; a row-wise sum says how many
per node. That is exact for single-container pods (the usual case); pods with
several device containers are then confirmed node by node by the exact device
choice, but only on the nodes that passed the vectorised check.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import compress

import numpy as np

from vgpu_extender.domain import ContainerRequest, PodAssignment, PodRequest, Reason, Rejection
from vgpu_extender.engine.columns import BoolGrid, DeviceColumns, IntGrid, IntVec, per_node_count
from vgpu_extender.engine.explain import distinct_shapes, explain_rows_cached
from vgpu_extender.engine.index import ClusterIndex
from vgpu_extender.engine.selection import selector_mask

ExactCheck = Callable[[int], "PodAssignment | Rejection"]
#: Candidates fewer than the grid's rows / this are judged on their own rows.
_FEW_ROWS_FACTOR = 16


@dataclass(slots=True)
class FitResult:
    """The verdict for every candidate: the feasible names (input order) and the rest's reasons."""

    feasible: list[str] = field(default_factory=list)
    rows: IntVec = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    rejections: dict[str, Rejection] = field(default_factory=dict)


def memory_need(
    cols: DeviceColumns, container: ContainerRequest, rows: int | None = None
) -> IntGrid | int:
    """MiB the container needs on each device of the first ``rows`` rows (a scalar unless
    it asks for a percentage)."""
    if container.memory_mib > 0:
        return container.memory_mib
    mem_total = cols.mem_total[:rows]
    if container.memory_percent == 100:  # a whole device's memory: no arithmetic needed
        return mem_total
    return mem_total * container.memory_percent // 100


def fitting_devices(cols: DeviceColumns, container: ContainerRequest, static: BoolGrid) -> BoolGrid:
    """Devices that can hold one share of ``container`` now, in the rows ``static`` covers
    (the first ``len(static)`` rows of the grid)."""
    n = static.shape[0]
    return _fitting(container, static, *(column[:n] for column in _usage_columns(cols)))


def _fitting_in_rows(
    cols: DeviceColumns, container: ContainerRequest, static: BoolGrid, rows: IntVec
) -> BoolGrid:
    """``fitting_devices`` for some rows only (a small copy of each column)."""
    taken = (np.take(column, rows, axis=0) for column in _usage_columns(cols))
    return _fitting(container, np.take(static, rows, axis=0), *taken)


def _usage_columns(cols: DeviceColumns) -> tuple[IntGrid, ...]:
    return (cols.slots_free, cols.slots_total, cols.mem_free, cols.mem_total, cols.cores_free)


def _fitting(
    container: ContainerRequest,
    static: BoolGrid,
    slots_free: IntGrid,
    slots_total: IntGrid,
    mem_free: IntGrid,
    mem_total: IntGrid,
    cores_free: IntGrid,
) -> BoolGrid:
    ok = static & (slots_free > 0)
    if container.memory_mib > 0:
        ok &= mem_free >= container.memory_mib
    elif container.memory_percent == 100:  # a whole device's memory: no arithmetic needed
        ok &= mem_free >= mem_total
    else:
        ok &= mem_free >= mem_total * container.memory_percent // 100
    if container.cores > 0:
        ok &= cores_free >= container.cores
    else:
        ok &= cores_free > 0
    if container.exclusive:
        ok &= slots_free == slots_total
    return ok


def static_mask(index: ClusterIndex, request: PodRequest) -> BoolGrid:
    """Devices the pod could ever use: usable, and accepted by its selector."""
    chosen = selector_mask(index, request.selector)
    usable = index.cols.usable
    return usable if chosen is None else usable & chosen


def fit(
    index: ClusterIndex,
    request: PodRequest,
    candidates: Sequence[str],
    *,
    exact: ExactCheck | None = None,
    explain: bool = True,
) -> FitResult:
    """Which of ``candidates`` can take ``request`` now, and why the others cannot.

    ``exact`` confirms multi-container pods on one node (the device choice); without
    it the per-container check alone decides. ``explain=False`` skips the reasons of
    rejected nodes, for callers that only place pods (the trace replay).
    """
    rows = index.rows_of(candidates)
    cols = index.cols
    if not request.managed:
        known = rows >= 0
        if not (request.cpu_milli or request.host_memory_mib):
            return _result(candidates, rows, known, {}, index, request, None, explain)
        # Host requests still apply (NodeResourcesFit, where the engine tracks the host).
        safe = np.where(known, rows, 0)
        known &= cols.cpu_free[safe] >= request.cpu_milli
        known &= cols.hostmem_free[safe] >= request.host_memory_mib
        static = static_mask(index, request)
        return _result(candidates, rows, known, {}, index, request, static, explain)
    # Whole-grid passes stop at the last row in use (the grid grows by doubling); row 0
    # always stays, for the unknown candidates' placeholder lookups.
    static = static_mask(index, request)[: max(index.row_span, 1)]
    good = rows >= 0
    safe_rows = np.where(good, rows, 0)
    numa_values = index.numa_values if request.numa_bind else None
    # A few candidates (bind checks one node) are judged on their own rows, not the grid.
    few = len(safe_rows) * _FEW_ROWS_FACTOR < static.shape[0]
    for container in distinct_shapes(request.device_containers):
        if few:
            ok = _fitting_in_rows(cols, container, static, safe_rows)
            counts = per_node_count(ok, np.take(cols.numa, safe_rows, axis=0), numa_values)
            good &= counts >= container.count
        else:
            ok = fitting_devices(cols, container, static)
            counts = per_node_count(ok, cols.numa[: len(ok)], numa_values)
            good &= counts[safe_rows] >= container.count
    if request.cpu_milli or request.host_memory_mib:
        good &= cols.cpu_free[safe_rows] >= request.cpu_milli
        good &= cols.hostmem_free[safe_rows] >= request.host_memory_mib
    extra: dict[int, Rejection] = {}
    if exact is not None and len(request.device_containers) > 1:
        for position in np.flatnonzero(good):
            verdict = exact(int(rows[position]))
            if isinstance(verdict, Rejection):
                good[position] = False
                extra[int(position)] = verdict
    return _result(candidates, rows, good, extra, index, request, static, explain)


def _result(
    candidates: Sequence[str],
    rows: IntVec,
    good: np.ndarray,
    extra: dict[int, Rejection],
    index: ClusterIndex,
    request: PodRequest,
    static: BoolGrid | None,
    explain: bool = True,
) -> FitResult:
    result = FitResult()
    if bool(good.all()):
        result.rows = rows
        result.feasible = list(candidates)
        return result
    result.rows = rows[good]
    result.feasible = _without(candidates, np.flatnonzero(~good))
    unknown = rows < 0
    named = ~good & unknown
    if named.any():
        gone = Rejection(Reason.UNKNOWN_NODE, unresolvable=True)
        result.rejections.update((name, gone) for name in compress(candidates, named.tolist()))
    for p, rejection in extra.items():
        result.rejections[candidates[p]] = rejection
    rest = ~good & ~unknown
    if extra:
        rest[list(extra)] = False
    if explain and static is not None and rest.any():
        explained = explain_rows_cached(index, request, rows[rest], static)
        result.rejections.update(zip(_named(candidates, rest), explained, strict=True))
    return result


#: Up to this many rejected candidates, the feasible list is a copy of the candidates
#: with those deleted (each deletion moves the tail); beyond, it is built by a mask.
_FEW_DELETIONS = 64


def _without(candidates: Sequence[str], positions: IntVec) -> list[str]:
    """``candidates`` without those at ``positions`` (ascending), in order."""
    if len(positions) > _FEW_DELETIONS:
        keep = np.ones(len(candidates), dtype=np.bool_)
        keep[positions] = False
        return list(compress(candidates, keep.tolist()))
    kept = list(candidates)
    for position in reversed(positions.tolist()):
        del kept[position]
    return kept


def _named(candidates: Sequence[str], mask: np.ndarray) -> list[str]:
    """The candidates where ``mask`` is set, in order."""
    positions = np.flatnonzero(mask)
    if len(positions) * 4 > len(candidates):  # many: one pass over the whole mask
        return list(compress(candidates, mask.tolist()))
    return [candidates[p] for p in positions.tolist()]
