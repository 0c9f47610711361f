"""Vectorised feasibility: which candidate nodes can take a pod right now.

For each container that asks for devices, the share model's stages, each a NumPy
expression over the whole device grid, say which devices could hold it; a row-wise sum
says how many per node. That is exact for single-container pods (the usual case); pods with
several device containers are then confirmed node by node by the exact device
choice, but only on the nodes that passed the vectorised check.

Pod after pod of one shape meets the same candidate list, of which only a node or two
changed since the last pod: the index's ``fit_cache`` remembers each candidate's
verdict, and only candidates whose row changed are judged again (on their own rows).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import compress

import numpy as np

from vgpu_extender.domain import ContainerRequest, PodAssignment, PodRequest, Reason, Rejection
from vgpu_extender.domain.share import Capacity
from vgpu_extender.engine.columns import (
    BoolGrid,
    BoolVec,
    DeviceColumns,
    IntGrid,
    IntVec,
    per_node_count,
)
from vgpu_extender.engine.explain import distinct_shapes, explain_rows_cached, request_key
from vgpu_extender.engine.fit_cache import Names
from vgpu_extender.engine.index import ClusterIndex
from vgpu_extender.engine.rules import fitting_mask
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


def fitting_devices(index: ClusterIndex, container: ContainerRequest, static: BoolGrid) -> BoolGrid:
    """Devices that can hold one share of ``container`` now, in the rows ``static`` covers
    (the first ``len(static)`` rows of the grid)."""
    n = static.shape[0]
    free, total = _capacities(*(column[:n] for column in _usage_columns(index.cols)))
    asked = index.ask_mask(container.vendor, container.mode)
    if asked is not None:
        static = static & asked[:n]
    return fitting_mask(index.shares.of(container.vendor), free, total, container, static)


def _usage_columns(cols: DeviceColumns) -> tuple[IntGrid, ...]:
    return (
        cols.slots_free,
        cols.slots_total,
        cols.mem_free,
        cols.mem_total,
        cols.cores_free,
        cols.cores_total,
    )


def _capacities(
    slots_free: IntGrid,
    slots_total: IntGrid,
    mem_free: IntGrid,
    mem_total: IntGrid,
    cores_free: IntGrid,
    cores_total: IntGrid,
) -> tuple[Capacity, Capacity]:
    """Free and total capacity of the grid (or rows) these columns are of."""
    return Capacity(slots_free, mem_free, cores_free), Capacity(slots_total, mem_total, cores_total)


def static_mask(index: ClusterIndex, request: PodRequest) -> BoolGrid:
    """Devices the pod could ever use: usable, and accepted by its selector."""
    return _static(index.cols, selector_mask(index, request.selector))


def _static(cols: DeviceColumns, chosen: BoolGrid | None, rows: int | None = None) -> BoolGrid:
    """``static_mask`` of the first ``rows`` rows, given the selector's device mask."""
    usable = cols.usable[:rows]
    return usable if chosen is None else usable & chosen[:rows]


def fit(
    index: ClusterIndex,
    request: PodRequest,
    candidates: Sequence[str],
    *,
    exact: ExactCheck | None = None,
    explain: bool = True,
    remember: bool = True,
    signature: Hashable | None = None,
) -> FitResult:
    """Which of ``candidates`` can take ``request`` now, and why the others cannot.

    ``exact`` confirms multi-container pods on one node (the device choice); without
    it the per-container check alone decides. ``explain=False`` skips the reasons of
    rejected nodes, for callers that only place pods (the trace replay).
    ``remember=False`` judges every candidate afresh, neither reading nor updating the
    remembered verdicts (``index.fit_cache``); the result is the same either way.
    ``signature`` keys the remembered verdicts and reasons: the request's, as the
    framework made it once for the pod (``Profile.signature``); ``request_key`` by default.
    """
    rows = index.rows_of(candidates)
    if not request.managed:
        return _unmanaged(index, request, candidates, rows, explain)
    several = needs_exact_choice(index, request)
    names: Names | None = None
    if remember and not several:
        # Pods that need the exact check are not remembered: the device policy's
        # choice has the last word on them.
        good, chosen, names = index.fit_cache.good(
            signature if signature is not None else request_key(request),
            index.topology_version,
            candidates,
            rows,
            index.row_stamps,
            partial(selector_mask, index, request.selector),
            partial(_judge, index, request),
        )
    else:
        chosen = selector_mask(index, request.selector)
        good = _judge(index, request, chosen, rows)
    extra: dict[int, Rejection] = {}
    if exact is not None and several:
        for position in np.flatnonzero(good):
            verdict = exact(int(rows[position]))
            if isinstance(verdict, Rejection):
                good[position] = False
                extra[int(position)] = verdict

    def static() -> BoolGrid:
        return _static(index.cols, chosen, max(index.row_span, 1))

    return _result(candidates, rows, good, extra, index, request, static, explain, names, signature)


def needs_exact_choice(index: ClusterIndex, request: PodRequest) -> bool:
    """Whether counting fitting devices per node cannot decide alone: several device
    containers (they share the node's devices), or a container of several devices of a
    vendor whose topology rule may refuse a set of them."""
    asks = request.device_containers
    if len(asks) > 1:
        return True
    if not asks or asks[0].count <= 1:
        return False
    share = index.shares.of(asks[0].vendor)
    return share.pick is not None and share.pick_refuses


def _unmanaged(
    index: ClusterIndex,
    request: PodRequest,
    candidates: Sequence[str],
    rows: IntVec,
    explain: bool,
) -> FitResult:
    """``fit`` of a pod that asks for no managed device: every known node, unless its
    host requests do not fit (NodeResourcesFit, where the engine tracks the host)."""
    known = rows >= 0
    if not (request.cpu_milli or request.host_memory_mib):
        return _result(candidates, rows, known, {}, index, request, None, explain)
    cols = index.cols
    safe = np.where(known, rows, 0)
    known &= cols.cpu_free[safe] >= request.cpu_milli
    known &= cols.hostmem_free[safe] >= request.host_memory_mib
    static = partial(static_mask, index, request)
    return _result(candidates, rows, known, {}, index, request, static, explain)


def _judge(
    index: ClusterIndex, request: PodRequest, chosen: BoolGrid | None, rows: IntVec
) -> BoolVec:
    """Whether each of ``rows`` (-1: an unknown node) can take every device container
    of ``request`` alone, and its host requests; ``chosen`` is the selector's mask."""
    cols = index.cols
    good = rows >= 0
    safe = np.where(good, rows, 0)
    numa_values = index.numa_values if request.numa_bind else None
    # Whole-grid passes stop at the last row in use (the grid grows by doubling); row 0
    # always stays, for the unknown candidates' placeholder lookups.
    span = max(index.row_span, 1)
    containers = distinct_shapes(request.device_containers)
    if len(safe) * _FEW_ROWS_FACTOR < span:
        # A few rows (bind checks one node, or the rows changed since the last pod):
        # judged on a small copy of their own rows, not the grid.
        static = _take(cols.usable, safe)
        if chosen is not None:
            static &= _take(chosen, safe)
        free, total = _capacities(*(_take(column, safe) for column in _usage_columns(cols)))
        numa = _take(cols.numa, safe)
        for container in containers:
            within = static
            asked = index.ask_mask(container.vendor, container.mode)
            if asked is not None:
                within = static & _take(asked, safe)
            share = index.shares.of(container.vendor)
            ok = fitting_mask(share, free, total, container, within)
            good &= per_node_count(ok, numa, numa_values) >= container.count
    else:
        static = _static(cols, chosen, span)
        for container in containers:
            ok = fitting_devices(index, container, static)
            counts = per_node_count(ok, cols.numa[:span], numa_values)
            good &= counts[safe] >= container.count
    if request.cpu_milli or request.host_memory_mib:
        good &= cols.cpu_free[safe] >= request.cpu_milli
        good &= cols.hostmem_free[safe] >= request.host_memory_mib
    return good


def _take(grid: np.ndarray, rows: IntVec) -> np.ndarray:
    """The rows of a grid (``np.take`` copies rows several times faster than ``grid[rows]``)."""
    return np.take(grid, rows, axis=0)


def _result(
    candidates: Sequence[str],
    rows: IntVec,
    good: np.ndarray,
    extra: dict[int, Rejection],
    index: ClusterIndex,
    request: PodRequest,
    static: Callable[[], BoolGrid] | None,
    explain: bool = True,
    names: Names | None = None,
    signature: Hashable | None = None,
) -> FitResult:
    """The result of verdicts ``good``; ``names``, when given, is ``candidates`` as an array."""
    result = FitResult()
    if bool(good.all()):
        result.rows = rows
        result.feasible = list(candidates)
        return result
    result.rows = rows[good]
    result.feasible = _without(candidates, good, names)
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
        explained = explain_rows_cached(index, request, rows[rest], static(), signature)
        result.rejections.update(zip(_named(candidates, rest, names), explained, strict=True))
    return result


#: Up to this many rejected candidates, the feasible list is a copy of the candidates
#: with those deleted (each deletion moves the tail); beyond, it is built by a mask.
_FEW_DELETIONS = 64


def _without(candidates: Sequence[str], good: BoolVec, names: Names | None) -> list[str]:
    """The candidates where ``good`` is set, in order."""
    dropped = np.flatnonzero(~good)
    if len(dropped) > _FEW_DELETIONS:
        return _named(candidates, good, names)
    kept = list(candidates)
    for position in reversed(dropped.tolist()):
        del kept[position]
    return kept


def _named(candidates: Sequence[str], mask: BoolVec, names: Names | None) -> list[str]:
    """The candidates where ``mask`` is set, in order."""
    if names is not None:  # an array of them: no Python pass over the whole list
        picked: list[str] = names[mask].tolist()
        return picked
    positions = np.flatnonzero(mask)
    if len(positions) * 4 > len(candidates):  # many: one pass over the whole mask
        return list(compress(candidates, mask.tolist()))
    return [candidates[p] for p in positions.tolist()]
