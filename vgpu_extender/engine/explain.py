"""Why nodes reject a pod: HAMi's fit order, replayed as cumulative masks.

Only rejected nodes are explained, all of them at once. For each device container,
every stage of the fit order is one mask over the rejected rows' devices and a
row-wise count says how many devices survive it; a node's reason is the first stage
after which fewer devices survive than the container needs, with that stage's numbers
(for memory: the MiB needed and the most that the needed number of devices still in
the running each offer). With NUMA binding, every stage from the NUMA one on counts
the devices of the best single NUMA node. A rejection is *unresolvable* when the pod
would not fit even if every allocation on the node were released, so preemption
cannot help. Identical verdicts share one ``Rejection`` object.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vgpu_extender.domain import ContainerRequest, PodRequest, Reason, Rejection
from vgpu_extender.engine.columns import BoolGrid, IntGrid, IntVec, count_per_row, per_node_count
from vgpu_extender.engine.index import ClusterIndex
from vgpu_extender.engine.selection import type_mask, uuid_mask

#: Stages that only registration can change: failing one is always unresolvable.
_STATIC_STAGES = frozenset(
    {Reason.TYPE_MISMATCH, Reason.UUID_MISMATCH, Reason.UNHEALTHY, Reason.CORDONED, Reason.NUMA}
)
_REASONS = list(Reason)
_CODE = {reason: code for code, reason in enumerate(_REASONS)}
_UNSET = -1
_LOWEST = np.iinfo(np.int64).min
_MAX_RADIX = 2**62
#: Devices per gathered chunk: 8192 int64 cells are 64 KiB.
_CHUNK_CELLS = 8192


class _Verdicts:
    """Per-row verdicts as columns of codes, turned into ``Rejection`` objects at the end."""

    def __init__(self, n: int) -> None:
        self.reason = np.full(n, _UNSET, dtype=np.int64)
        self.need = np.full(n, _UNSET, dtype=np.int64)
        self.have = np.full(n, _UNSET, dtype=np.int64)
        self.unresolvable = np.zeros(n, dtype=np.int64)
        self.detail = np.zeros(n, dtype=np.int64)
        self.details: dict[str, int] = {"": 0}

    def detail_code(self, text: str) -> int:
        return self.details.setdefault(text, len(self.details))

    def set(
        self,
        where: IntVec,
        reason: Reason | IntVec,
        need: int | IntVec = _UNSET,
        have: int | IntVec = _UNSET,
        unresolvable: bool | np.ndarray = False,
        detail: int | IntVec = 0,
    ) -> None:
        if len(where) == 0:
            return
        self.reason[where] = _CODE[reason] if isinstance(reason, Reason) else reason
        self.need[where] = need
        self.have[where] = have
        self.unresolvable[where] = unresolvable
        self.detail[where] = detail

    def rejections(self) -> list[Rejection]:
        """One ``Rejection`` per row; rows with equal verdicts share one object."""
        columns = (self.reason, self.unresolvable, self.detail, self.need, self.have)
        code = np.zeros(len(self.reason), dtype=np.int64)
        radix = 1
        for column in columns:
            values, size = _dense(column)
            if radix * size >= _MAX_RADIX:  # re-number what is combined so far
                _, code = np.unique(code, return_inverse=True)
                code = code.reshape(-1)
                radix = int(code.max()) + 1
            code = code * size + values
            radix *= size
        _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
        texts = list(self.details)
        objects = np.empty(len(first), dtype=object)
        keys = zip(*(column[first].tolist() for column in columns), strict=True)
        for i, (reason, unresolvable, detail, need, have) in enumerate(keys):
            objects[i] = Rejection(
                _REASONS[reason],
                None if need == _UNSET else need,
                None if have == _UNSET else have,
                unresolvable=bool(unresolvable),
                detail=texts[detail],
            )
        out: list[Rejection] = objects[inverse.reshape(-1)].tolist()
        return out


def _dense(column: IntVec) -> tuple[IntVec, int]:
    """Small non-negative codes for a column's values, and how many codes there can be."""
    lo, hi = int(column.min()), int(column.max())
    if hi - lo < len(column) + 64:
        return column - lo, hi - lo + 1
    _, inverse = np.unique(column, return_inverse=True)
    dense: IntVec = inverse.reshape(-1)
    return dense, int(dense.max()) + 1


def explain_rows(
    index: ClusterIndex, request: PodRequest, rows: IntVec, static: BoolGrid
) -> list[Rejection]:
    """One rejection per row, in the order given."""
    verdicts = _Verdicts(len(rows))
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
        pending = np.flatnonzero(verdicts.reason == _UNSET)
        if len(pending) == 0:
            break
        _explain_container(index, request, container, rows, pending, static, verdicts)
    _explain_host(index, request, rows, verdicts)
    return verdicts.rejections()


def distinct_shapes(containers: Sequence[ContainerRequest]) -> list[ContainerRequest]:
    """Containers with distinct shapes, in order: identical ones give identical verdicts."""
    seen: dict[tuple[int, int, int, int], ContainerRequest] = {}
    for c in containers:
        seen.setdefault((c.count, c.memory_mib, c.memory_percent, c.cores), c)
    return list(seen.values())


def _explain_host(
    index: ClusterIndex, request: PodRequest, rows: IntVec, verdicts: _Verdicts
) -> None:
    """Rows every container fits alone: host resources, or the containers together."""
    pending = np.flatnonzero(verdicts.reason == _UNSET)
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
    verdicts: _Verdicts,
) -> None:
    cols = index.cols
    k = container.count
    sub = rows[pending]
    valid = _take(cols.valid, sub)
    have = count_per_row(valid)
    none = have == 0
    few = ~none & (have < k)
    verdicts.set(pending[none], Reason.NO_DEVICES, unresolvable=True)
    verdicts.set(pending[few], Reason.NOT_ENOUGH_DEVICES, k, have[few], unresolvable=True)

    numa_values = index.numa_values if request.numa_bind and k > 1 else None
    numa = _take(cols.numa, sub) if numa_values is not None else None
    allowed = _take(static, sub)
    left = ~none & ~few
    # Registration-time stages: only rows with too few allowed devices can fail one.
    short = left & (_count(allowed, numa, numa_values) < k)
    if short.any():
        _explain_static(index, request, k, sub[short], pending[short], valid[short], verdicts)
        left &= ~short
    # In chunks: gathered int64 grids stay small, so the allocator reuses their memory
    # instead of mapping and faulting in fresh pages on every call.
    todo = np.flatnonzero(left)
    step = max(1, _CHUNK_CELLS // cols.slots)
    for start in range(0, len(todo), step):
        part = todo[start : start + step]
        _explain_usage(
            index,
            container,
            sub[part],
            pending[part],
            allowed[part],
            None if numa is None else numa[part],
            numa_values,
            verdicts,
        )


def _explain_static(
    index: ClusterIndex,
    request: PodRequest,
    k: int,
    sub: IntVec,
    pending: IntVec,
    valid: BoolGrid,
    verdicts: _Verdicts,
) -> None:
    """Rows whose allowed devices are too few: a selector, health, cordon or NUMA stage."""
    cols = index.cols
    stages: list[tuple[Reason, BoolGrid]] = []
    current = valid
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
    decided = np.zeros(len(sub), dtype=np.bool_)
    for reason, mask in stages:
        count = count_per_row(mask)
        hit = ~decided & (count < k)
        verdicts.set(pending[hit], reason, k, count[hit], unresolvable=True)
        decided |= hit
    # Enough devices pass every stage, but not on one NUMA node.
    detail = verdicts.detail_code(f"{k} gpus on one numa node")
    verdicts.set(pending[~decided], Reason.NUMA, unresolvable=True, detail=detail)


def _explain_usage(
    index: ClusterIndex,
    container: ContainerRequest,
    sub: IntVec,
    pending: IntVec,
    allowed: BoolGrid,
    numa: IntGrid | None,
    numa_values: Sequence[int] | None,
    verdicts: _Verdicts,
) -> None:
    """Rows with enough allowed devices: slots, exclusivity, memory or cores in use."""
    cols = index.cols
    k = container.count
    slots_free = _take(cols.slots_free, sub)
    mem_free = _take(cols.mem_free, sub)
    cores_free = _take(cols.cores_free, sub)
    mem_total = _take(cols.mem_total, sub)
    need_mem: IntGrid | int = container.memory_mib
    if container.memory_mib <= 0:
        need_mem = mem_total * container.memory_percent // 100

    reasons = [Reason.SLOTS]
    masks = [allowed & (slots_free > 0)]
    if container.exclusive:
        reasons.append(Reason.EXCLUSIVE)
        masks.append(masks[-1] & (slots_free == _take(cols.slots_total, sub)))
    reasons.append(Reason.MEMORY)
    masks.append(masks[-1] & (mem_free >= need_mem))
    enough_cores = (cores_free >= container.cores) if container.cores > 0 else (cores_free > 0)
    reasons.append(Reason.CORES)
    masks.append(masks[-1] & enough_cores)

    stacked = np.stack(masks)
    counts = _count(
        stacked.reshape(-1, stacked.shape[2]),
        None if numa is None else np.tile(numa, (len(masks), 1)),
        numa_values,
    ).reshape(len(masks), -1)
    fails = counts < k
    failing = fails.any(axis=0)
    if not failing.any():
        return
    first = np.argmax(fails, axis=0)
    ever = allowed & (mem_total >= need_mem) & (_take(cols.cores_total, sub) >= container.cores)
    never_fits = _count(ever, numa, numa_values) < k
    on_k = verdicts.detail_code(f"on {k} gpus" if k > 1 else "")
    for s, reason in enumerate(reasons):
        hit = failing & (first == s)
        if not hit.any():
            continue
        where, unresolvable = pending[hit], never_fits[hit]
        group = None if numa is None else numa[hit]
        before = allowed[hit] if s == 0 else masks[s - 1][hit]
        if reason is Reason.MEMORY:
            need = (
                np.full(len(where), need_mem, dtype=np.int64)
                if isinstance(need_mem, int)
                else np.where(before, need_mem[hit], np.iinfo(np.int64).max).min(axis=1)
            )
            best = _kth_best(mem_free[hit], before, k, group, numa_values)
            verdicts.set(where, reason, need, best, unresolvable, on_k)
        elif reason is Reason.CORES:
            best = _kth_best(cores_free[hit], before, k, group, numa_values)
            verdicts.set(where, reason, container.cores, best, unresolvable, on_k)
        else:
            verdicts.set(where, reason, k, counts[s][hit], unresolvable)


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
    k: int,
    numa: IntGrid | None,
    numa_values: Sequence[int] | None,
) -> IntVec:
    """Per row, the most that ``k`` distinct candidate devices (on one NUMA node, when
    bound) can each offer: the k-th largest free value; 0 with fewer than k candidates."""
    groups = [candidates]
    if numa is not None and numa_values is not None:
        groups = [candidates & (numa == v) for v in numa_values]
    best = np.full(free.shape[0], _LOWEST, dtype=np.int64)
    for group in groups:
        ranked = np.sort(np.where(group, free, _LOWEST), axis=1)
        np.maximum(best, ranked[:, free.shape[1] - k], out=best)
    best[best == _LOWEST] = 0
    return best
