"""Why nodes reject a pod: the registration stages, then the share model's stage table
(HAMi's fit order for NVIDIA), replayed as cumulative masks.

Only rejected nodes are explained, all of them at once. For each device container,
every stage of the fit order is one mask (over the rejected rows' devices, or over the
whole grid when many rows are rejected) and a row-wise count says how many devices
survive it; a node's reason is the first stage after which fewer devices survive than
the container needs, with that stage's numbers (for memory: the MiB needed and the most
that the needed number of devices still in the running each offer). With NUMA binding,
every stage from the NUMA one on counts the devices of the best single NUMA node.
Registration-time stages (type, UUID, health, cordon, conflict, NUMA) are unresolvable; a usage
stage is *unresolvable* when the pod would not fit even if every allocation on the node
were released, so preemption cannot help. Identical verdicts share one ``Rejection``.

A node's verdict depends only on the request's shape and on the node's own row (and,
with NUMA binding, on the index's NUMA ids), so ``explain_rows_cached`` reuses the
verdicts of rows unchanged since the same shape last had them explained.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from vgpu_extender.domain import ContainerRequest, PodRequest, Reason, Rejection
from vgpu_extender.domain.share import Capacity, ShareModel
from vgpu_extender.engine.columns import (
    BoolGrid,
    DeviceColumns,
    IntGrid,
    IntVec,
    count_per_row,
    per_node_count,
)
from vgpu_extender.engine.index import ClusterIndex
from vgpu_extender.engine.rules import cumulative_masks, fits_when_empty
from vgpu_extender.engine.selection import type_mask, uuid_mask
from vgpu_extender.engine.verdicts import UNSET, Verdicts

_LOWEST = np.iinfo(np.int64).min
_HIGHEST = np.iinfo(np.int64).max
#: Most devices gathered at once: 8192 int64 cells are 64 KiB, a size the allocator
#: reuses (larger copies are mapped and faulted in afresh on every call).
_CHUNK_CELLS = 8192
#: A container's shape: count, MiB, memory percent, cores, vendor word, mode and the
#: mutex policy (what explaining reads of it).
_Shape = tuple[int, int, int, int, str, str, bool]


def explain_rows(
    index: ClusterIndex, request: PodRequest, rows: IntVec, static: BoolGrid
) -> list[Rejection]:
    """One rejection per row, in the order given."""
    verdicts = Verdicts(len(rows))
    containers = distinct_shapes(request.device_containers)
    if containers:
        broken = np.flatnonzero(~index.cols.node_ok[rows])
        for i in broken.tolist():
            problem = index.inventory(index.name_of(int(rows[i]))).problem
            verdicts.set(
                np.array([i]),
                Reason.INVENTORY,
                unresolvable=True,
                detail=verdicts.detail_code(problem),
            )
    for container in containers:
        pending = np.flatnonzero(verdicts.reason == UNSET)
        if len(pending) == 0:
            break
        _explain_container(index, request, container, rows, pending, static, verdicts)
    _explain_host(index, request, rows, verdicts)
    return verdicts.rejections()


def explain_rows_cached(
    index: ClusterIndex,
    request: PodRequest,
    rows: IntVec,
    static: BoolGrid,
    signature: Hashable | None = None,
) -> list[Rejection]:
    """``explain_rows``, explaining only the rows that changed since a request of the
    same signature last had them explained. ``static`` must be ``static_mask`` of the
    request (as fit's is): the cache knows it only through the selector and the row
    stamps. ``signature``: the request's, as the framework made it once for the pod
    (``Profile.signature``; it covers ``request_key``); by default ``request_key``."""
    shapes = _distinct(request.device_containers)
    # Node changes move only their own row's stamp. The NUMA ids are the one index-wide
    # thing explaining reads: a row's counts only ever see its own ids, but making them
    # the epoch keeps the cache right without leaning on that.
    epoch = None
    if request.numa_bind and any(count > 1 for count, *_ in shapes):
        epoch = index.numa_values

    def explain(missed: IntVec) -> list[Rejection]:
        return explain_rows(index, request, missed, static)

    key = request_key(request) if signature is None else signature
    return index.rejection_cache.rejections(key, epoch, rows, index.row_stamps, explain)


def request_key(request: PodRequest) -> Hashable:
    """The share model's part of a request's signature (``Profile.signature`` adds the
    plug-ins'): everything of ``request`` that fit and explaining read, that is the
    distinct device container shapes in order (the demand every stage reads: count,
    memory, memory percent, cores, vendor, mode, mutex; exclusivity follows from the
    cores; none means the pod is not managed), the selector, NUMA binding and the host
    requests. Not the pod's identity, priority or policies, nor containers' names or
    init flags."""
    return (
        tuple(_distinct(request.device_containers)),
        request.selector,
        request.numa_bind,
        request.cpu_milli,
        request.host_memory_mib,
    )


def distinct_shapes(containers: Sequence[ContainerRequest]) -> list[ContainerRequest]:
    """Containers with distinct shapes, in order: identical ones give identical verdicts."""
    return list(_distinct(containers).values())


def _distinct(containers: Sequence[ContainerRequest]) -> dict[_Shape, ContainerRequest]:
    """The first container of each shape, by shape, in order."""
    seen: dict[_Shape, ContainerRequest] = {}
    for c in containers:
        shape = (c.count, c.memory_mib, c.memory_percent, c.cores, c.vendor, c.mode, c.mutex)
        seen.setdefault(shape, c)
    return seen


def _explain_host(
    index: ClusterIndex, request: PodRequest, rows: IntVec, verdicts: Verdicts
) -> None:
    """Rows every container fits alone: host resources, or the containers together."""
    pending = np.flatnonzero(verdicts.reason == UNSET)
    if len(pending) == 0:
        return
    cols = index.cols
    sub = rows[pending]
    cpu_free, mem_free = cols.cpu_free[sub], cols.hostmem_free[sub]
    cpu = cpu_free < request.cpu_milli
    memory = ~cpu & (mem_free < request.host_memory_mib)
    verdicts.set(
        pending[cpu],
        Reason.CPU,
        request.cpu_milli,
        cpu_free[cpu],
        cols.cpu_total[sub][cpu] < request.cpu_milli,
    )
    verdicts.set(
        pending[memory],
        Reason.HOST_MEMORY,
        request.host_memory_mib,
        mem_free[memory],
        cols.hostmem_total[sub][memory] < request.host_memory_mib,
    )
    together = ~cpu & ~memory
    verdicts.set(
        pending[together],
        Reason.SLOTS,
        detail=verdicts.detail_code("containers do not fit together"),
    )


def _explain_container(
    index: ClusterIndex,
    request: PodRequest,
    container: ContainerRequest,
    rows: IntVec,
    pending: IntVec,
    static: BoolGrid,
    verdicts: Verdicts,
) -> None:
    cols = index.cols
    k = container.count
    sub = rows[pending]
    valid = _take(cols.valid, sub)
    # The devices of the vendor asked for; the mode is a registration stage of its own.
    of_vendor = index.ask_mask(container.vendor)
    if of_vendor is not None:
        valid &= _take(of_vendor, sub)
    asked = index.ask_mask(container.vendor, container.mode)
    if asked is not None:
        static = static & asked[: static.shape[0]]
    have = count_per_row(valid)
    none = have == 0
    few = ~none & (have < k)
    verdicts.set(pending[none], Reason.NO_DEVICES, unresolvable=True)
    verdicts.set(pending[few], Reason.NOT_ENOUGH_DEVICES, k, have[few], unresolvable=True)

    numa_values = index.numa_values if request.numa_bind and k > 1 else None
    numa = _take(cols.numa, sub) if numa_values is not None else None
    left = ~none & ~few
    # Registration-time stages: only rows with too few allowed devices can fail one.
    short = left & (_count(_take(static, sub), numa, numa_values) < k)
    if short.any():
        _explain_static(
            index, request, container, sub[short], pending[short], valid[short], verdicts
        )
        left &= ~short
    if not left.any():
        return
    sub, pending = sub[left], pending[left]
    if len(sub) * cols.slots <= _CHUNK_CELLS:
        # Few rows: gather them (a small copy) and judge only them.
        grids = _Grids.of_rows(cols, static, sub, numa_values is not None)
        at = np.arange(len(sub))
    else:
        # Many rows: each stage over the whole grid costs less than gathering the rows,
        # and allocates no large temporary copies.
        grids = _Grids.whole(cols, static, numa_values is not None)
        at = sub
    share = index.shares.of(container.vendor)
    _explain_usage(share, grids, at, pending, container, numa_values, verdicts)


def _explain_static(
    index: ClusterIndex,
    request: PodRequest,
    container: ContainerRequest,
    sub: IntVec,
    pending: IntVec,
    valid: BoolGrid,
    verdicts: Verdicts,
) -> None:
    """Rows whose allowed devices are too few: a mode, selector, health, cordon or NUMA
    stage."""
    cols = index.cols
    k = container.count
    stages: list[tuple[Reason, BoolGrid]] = []
    current = valid
    if container.mode:
        in_mode = index.ask_mask(container.vendor, container.mode)
        if in_mode is not None:
            current = current & _take(in_mode, sub)
            stages.append((Reason.MODE_MISMATCH, current))
    by_type = type_mask(index, request.selector)
    if by_type is not None:
        current = current & _take(by_type, sub)
        stages.append((Reason.TYPE_MISMATCH, current))
    by_uuid = uuid_mask(index, request.selector)
    if by_uuid is not None:
        current = current & _take(by_uuid, sub)
        stages.append((Reason.UUID_MISMATCH, current))
    current = current & _take(cols.healthy, sub)
    stages.append((Reason.UNHEALTHY, current))
    current = current & ~_take(cols.cordoned, sub)
    stages.append((Reason.CORDONED, current))
    current = current & ~_take(cols.conflicted, sub)
    stages.append((Reason.CONFLICTED, current))
    decided = np.zeros(len(sub), dtype=np.bool_)
    for reason, mask in stages:
        count = count_per_row(mask)
        hit = ~decided & (count < k)
        if reason is Reason.TYPE_MISMATCH and hit.any():
            _set_type_mismatch(index, request, k, sub, pending, valid, hit, count, verdicts)
        else:
            verdicts.set(pending[hit], reason, k, count[hit], unresolvable=True)
        decided |= hit
    # Enough devices pass every stage, but not on one NUMA node.
    noun = index.shares.of(container.vendor).noun
    detail = verdicts.detail_code(f"{k} {noun}s on one numa node")
    verdicts.set(pending[~decided], Reason.NUMA, unresolvable=True, detail=detail)


def _set_type_mismatch(
    index: ClusterIndex,
    request: PodRequest,
    k: int,
    sub: IntVec,
    pending: IntVec,
    valid: BoolGrid,
    hit: np.ndarray,
    count: IntVec,
    verdicts: Verdicts,
) -> None:
    """Type mismatches name the types the pod wants (or avoids) and those the node has.

    Rows with the same set of types share one detail: the set is found per row as a
    bit mask of type ids (a plain loop when there are too many types for one)."""
    selector = request.selector
    wanted = []
    if selector.use_types:
        wanted.append(f"wants {'/'.join(selector.use_types)}")
    if selector.avoid_types:
        wanted.append(f"avoids {'/'.join(selector.avoid_types)}")
    types = index.types
    ids = np.where(valid[hit], _take(index.cols.type_id, sub[hit]), -1)
    if len(types) < 63:
        bits = np.where(ids >= 0, np.left_shift(1, np.maximum(ids, 0)), 0)
        keys = np.bitwise_or.reduce(bits, axis=1)
    else:
        codes: dict[frozenset[int], int] = {}
        keys = np.array(
            [codes.setdefault(frozenset(row.tolist()) - {-1}, len(codes)) for row in ids],
            dtype=np.int64,
        )
    where, have = pending[hit], count[hit]
    for key in np.unique(keys).tolist():
        same = keys == key
        present = sorted({types[t] for t in ids[same][0].tolist() if t >= 0})
        nothing = f"no {index.share.noun}"
        detail = "; ".join([*wanted, f"node has {', '.join(present) or nothing}"])
        verdicts.set(
            where[same],
            Reason.TYPE_MISMATCH,
            k,
            have[same],
            unresolvable=True,
            detail=verdicts.detail_code(detail),
        )


@dataclass(frozen=True, slots=True)
class _Grids:
    """The device columns the usage stages read: the whole grid, or some rows of it."""

    allowed: BoolGrid
    slots_free: IntGrid
    slots_total: IntGrid
    mem_free: IntGrid
    mem_total: IntGrid
    cores_free: IntGrid
    cores_total: IntGrid
    numa: IntGrid | None

    @classmethod
    def whole(cls, cols: DeviceColumns, static: BoolGrid, numa: bool) -> _Grids:
        n = static.shape[0]  # the rows in use (see fit)
        return cls(
            static,
            cols.slots_free[:n],
            cols.slots_total[:n],
            cols.mem_free[:n],
            cols.mem_total[:n],
            cols.cores_free[:n],
            cols.cores_total[:n],
            cols.numa[:n] if numa else None,
        )

    @classmethod
    def of_rows(cls, cols: DeviceColumns, static: BoolGrid, rows: IntVec, numa: bool) -> _Grids:
        return cls(
            _take(static, rows),
            _take(cols.slots_free, rows),
            _take(cols.slots_total, rows),
            _take(cols.mem_free, rows),
            _take(cols.mem_total, rows),
            _take(cols.cores_free, rows),
            _take(cols.cores_total, rows),
            _take(cols.numa, rows) if numa else None,
        )

    def capacities(self) -> tuple[Capacity, Capacity]:
        """Free and total capacity of these devices."""
        free = Capacity(self.slots_free, self.mem_free, self.cores_free)
        return free, Capacity(self.slots_total, self.mem_total, self.cores_total)


def _explain_usage(
    share: ShareModel,
    grids: _Grids,
    at: IntVec,
    pending: IntVec,
    container: ContainerRequest,
    numa_values: Sequence[int] | None,
    verdicts: Verdicts,
) -> None:
    """Rows (``at``: their rows in ``grids``) with enough allowed devices: the share
    model's stages (slots, exclusivity, memory, cores for NVIDIA), in its order."""
    k = container.count
    free, total = grids.capacities()
    stages, masks = cumulative_masks(share, free, total, container, grids.allowed)
    # The masks are cumulative, so counts only fall from stage to stage: the first stage a
    # row fails is the number of stages it passes.
    counts: list[IntVec] = []
    first = np.zeros(len(at), dtype=np.int64)
    for mask in masks:
        counts.append(np.take(_count(mask, grids.numa, numa_values), at))
        first += counts[-1] >= k
    failing = first < len(masks)
    if not failing.any():
        return
    # Could the container ever fit, with every allocation on the node released?
    ever = fits_when_empty(share, total, container, grids.allowed)
    never_fits = np.take(_count(ever, grids.numa, numa_values), at) < k
    noun = share.noun
    on_k = verdicts.detail_code(f"on {k} {noun}s" if k > 1 else "")
    consumed = share.consumed(total, container)
    for s, stage in enumerate(stages):
        hit = failing & (first == s)
        if not hit.any():
            continue
        reason = stage.reason
        where, unresolvable, rows = pending[hit], never_fits[hit], at[hit]
        before = grids.allowed if s == 0 else masks[s - 1]
        if stage.measure is not None:
            need_all = getattr(consumed, stage.measure)
            need: IntVec | int = (
                int(need_all) if np.ndim(need_all) == 0 else _least(need_all, before, rows)
            )
            offered = getattr(free, stage.measure)
            best = _kth_best(offered, before, rows, k, grids.numa, numa_values)
            verdicts.set(where, reason, need, best, unresolvable, on_k)
        elif reason is Reason.NO_COMPUTE:
            _set_no_compute(verdicts, where, k, counts[s][hit], unresolvable, noun)
        else:
            verdicts.set(where, reason, k, counts[s][hit], unresolvable)


def _set_no_compute(
    verdicts: Verdicts, where: IntVec, k: int, have: IntVec, unresolvable: IntVec, noun: str
) -> None:
    """A container asking no cores: one device short reads as no compute left on any;
    with several devices, how many still have some."""
    if k == 1:
        verdicts.set(where, Reason.NO_COMPUTE, unresolvable=unresolvable)
        return
    for count in np.unique(have).tolist():
        same = have == count
        detail = verdicts.detail_code(f"{count} of {k} {noun}s have compute left")
        verdicts.set(where[same], Reason.NO_COMPUTE, unresolvable=unresolvable[same], detail=detail)


def _count(mask: BoolGrid, numa: IntGrid | None, numa_values: Sequence[int] | None) -> IntVec:
    """Devices per row, or with NUMA binding the most on any one NUMA node of the row."""
    if numa is None or numa_values is None:
        return count_per_row(mask)
    return per_node_count(mask, numa, numa_values)


def _take(grid: np.ndarray, rows: IntVec) -> np.ndarray:
    """The rows of a grid (``np.take`` copies rows several times faster than ``grid[rows]``)."""
    return np.take(grid, rows, axis=0)


def _kth_best(
    free: IntGrid,
    candidates: BoolGrid,
    rows: IntVec,
    k: int,
    numa: IntGrid | None,
    numa_values: Sequence[int] | None,
) -> IntVec:
    """For each of ``rows``, the most that ``k`` distinct candidate devices (on one NUMA
    node, when bound) can each offer: the k-th largest free value; 0 with fewer than k
    candidates. Rows go in chunks, so the gathered copies stay small."""
    best = np.full(len(rows), _LOWEST, dtype=np.int64)
    step = max(1, _CHUNK_CELLS // free.shape[1])
    for start in range(0, len(rows), step):
        part, out = rows[start : start + step], best[start : start + step]
        chosen, values = _take(candidates, part), _take(free, part)
        groups = [chosen]
        if numa is not None and numa_values is not None:
            near = _take(numa, part)
            groups = [chosen & (near == v) for v in numa_values]
        for group in groups:
            ranked = np.sort(np.where(group, values, _LOWEST), axis=1)
            np.maximum(out, ranked[:, free.shape[1] - k], out=out)
    best[best == _LOWEST] = 0
    return best


def _least(need: IntGrid, candidates: BoolGrid, rows: IntVec) -> IntVec:
    """For each of ``rows``, the smallest need among its candidate devices (in chunks)."""
    least = np.zeros(len(rows), dtype=np.int64)
    step = max(1, _CHUNK_CELLS // need.shape[1])
    for start in range(0, len(rows), step):
        part = rows[start : start + step]
        masked = np.where(_take(candidates, part), _take(need, part), _HIGHEST)
        least[start : start + step] = masked.min(axis=1)
    return least
