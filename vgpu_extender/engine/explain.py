"""Why nodes reject a pod: HAMi's fit order, replayed as cumulative masks.

Only rejected nodes are explained. For each, the reason is the first stage after
which fewer devices survive than the container needs, with that stage's numbers
(for memory: the MiB needed and the best free amount among the devices that passed
every earlier stage). A rejection is *unresolvable* when the pod would not fit even
if every allocation on the node were released, so preemption cannot help.
"""

from __future__ import annotations

import numpy as np

from vgpu_extender.domain import ContainerRequest, PodRequest, Reason, Rejection
from vgpu_extender.engine.columns import BoolGrid, IntVec, per_node_count
from vgpu_extender.engine.index import ClusterIndex
from vgpu_extender.engine.selection import selector_mask

#: Stages that only registration can change: failing one is always unresolvable.
_STATIC_STAGES = (Reason.TYPE_MISMATCH, Reason.UNHEALTHY, Reason.CORDONED, Reason.NUMA)


def explain_rows(
    index: ClusterIndex, request: PodRequest, rows: IntVec, static: BoolGrid
) -> list[Rejection]:
    """One rejection per row, in the order given."""
    out: list[Rejection | None] = [None] * len(rows)
    selected = _selected(index, request, rows)
    for container in request.device_containers:
        pending = [i for i, r in enumerate(out) if r is None]
        if not pending:
            break
        sub = rows[pending]
        found = _explain_container(index, request, container, sub, static[sub], selected[pending])
        for i, rejection in zip(pending, found, strict=True):
            out[i] = rejection
    return [
        r if r is not None else _host_or_combined(index, request, int(rows[i]))
        for i, r in enumerate(out)
    ]


def _host_or_combined(index: ClusterIndex, request: PodRequest, row: int) -> Rejection:
    cols = index.cols
    if cols.cpu_free[row] < request.cpu_milli:
        return Rejection(
            Reason.CPU,
            request.cpu_milli,
            int(cols.cpu_free[row]),
            unresolvable=bool(cols.cpu_total[row] < request.cpu_milli),
        )
    if cols.hostmem_free[row] < request.host_memory_mib:
        return Rejection(
            Reason.HOST_MEMORY,
            request.host_memory_mib,
            int(cols.hostmem_free[row]),
            unresolvable=bool(cols.hostmem_total[row] < request.host_memory_mib),
        )
    # Every container fits alone, but not all of them together.
    return Rejection(Reason.SLOTS, detail="containers do not fit together")


def _explain_container(
    index: ClusterIndex,
    request: PodRequest,
    container: ContainerRequest,
    rows: IntVec,
    static: BoolGrid,
    selected: BoolGrid,
) -> list[Rejection | None]:
    cols = index.cols
    k = container.count
    valid = cols.valid[rows]
    numa = cols.numa[rows]
    mem_free, cores_free, slots_free = (
        cols.mem_free[rows],
        cols.cores_free[rows],
        cols.slots_free[rows],
    )
    need_mem = (
        np.full(valid.shape, container.memory_mib, dtype=np.int64)
        if container.memory_mib > 0
        else cols.mem_total[rows] * container.memory_percent // 100
    )
    numa_values = index.numa_values if request.numa_bind and k > 1 else None

    typed = valid & selected
    healthy = typed & cols.healthy[rows]
    opened = healthy & ~cols.cordoned[rows]
    slotted = static & (slots_free > 0)
    exclusive = slotted & (slots_free == cols.slots_total[rows]) if container.exclusive else slotted
    memory = exclusive & (mem_free >= need_mem)
    cores = memory & ((cores_free >= container.cores) if container.cores > 0 else (cores_free > 0))
    stages: list[tuple[Reason, BoolGrid, BoolGrid]] = [
        (Reason.TYPE_MISMATCH, typed, valid),
        (Reason.UNHEALTHY, healthy, typed),
        (Reason.CORDONED, opened, healthy),
        (Reason.NUMA, static, opened),
        (Reason.SLOTS, slotted, static),
        (Reason.EXCLUSIVE, exclusive, slotted),
        (Reason.MEMORY, memory, exclusive),
        (Reason.CORES, cores, memory),
    ]
    counts = np.stack(
        [
            per_node_count(mask, numa, numa_values if r is Reason.NUMA else None)
            for r, mask, _ in stages
        ]
    )
    ever = static & (cols.mem_total[rows] >= need_mem) & (cols.cores_total[rows] >= container.cores)
    never_fits = per_node_count(ever, numa, numa_values) < k
    have = valid.sum(axis=1)

    out: list[Rejection | None] = []
    for i, row in enumerate(rows):
        problem = index.inventory(index.name_of(int(row))).problem
        if problem:
            out.append(Rejection(Reason.INVENTORY, unresolvable=True, detail=problem))
        elif have[i] == 0:
            out.append(Rejection(Reason.NO_DEVICES, unresolvable=True))
        elif have[i] < k:
            out.append(Rejection(Reason.NOT_ENOUGH_DEVICES, k, int(have[i]), unresolvable=True))
        else:
            failing = np.flatnonzero(counts[:, i] < k)
            if len(failing) == 0:
                out.append(None)
                continue
            reason, _mask, before = stages[int(failing[0])]
            out.append(
                _numbers(
                    reason,
                    i,
                    k,
                    container,
                    before,
                    need_mem,
                    mem_free,
                    cores_free,
                    int(counts[failing[0], i]),
                    bool(never_fits[i]),
                )
            )
    return out


def _numbers(
    reason: Reason,
    i: int,
    k: int,
    container: ContainerRequest,
    before: BoolGrid,
    need_mem: np.ndarray,
    mem_free: np.ndarray,
    cores_free: np.ndarray,
    survivors: int,
    never_fits: bool,
) -> Rejection:
    unresolvable = reason in _STATIC_STAGES or never_fits
    candidates = before[i]
    detail = f"on {k} gpus" if k > 1 else ""
    if reason is Reason.MEMORY:
        need = int(need_mem[i][candidates].min()) if candidates.any() else int(need_mem[i].min())
        return Rejection(
            reason,
            need,
            _kth_best(mem_free[i][candidates], k),
            unresolvable=unresolvable,
            detail=detail,
        )
    if reason is Reason.CORES:
        return Rejection(
            reason,
            container.cores,
            _kth_best(cores_free[i][candidates], k),
            unresolvable=unresolvable,
            detail=detail,
        )
    if reason is Reason.NUMA:
        return Rejection(reason, unresolvable=True, detail=f"{k} gpus on one numa node")
    return Rejection(reason, k, survivors, unresolvable=unresolvable)


def _selected(index: ClusterIndex, request: PodRequest, rows: IntVec) -> BoolGrid:
    mask = selector_mask(index, request.selector)
    if mask is None:
        return np.ones((len(rows), index.cols.slots), dtype=np.bool_)
    return mask[rows]


def _kth_best(free: np.ndarray, k: int) -> int:
    """The most that ``k`` distinct devices can each offer: the k-th largest free value."""
    if len(free) < k:
        return 0
    return int(np.partition(free, len(free) - k)[len(free) - k])
