"""A plain-Python reference for the vectorised fit, built only from inventories and
allocation records (never from the NumPy columns): a greedy loop evaluating the share
model's stage table on one device at a time. Tests check the two agree; the benchmark
measures how much the columns buy.
"""

from __future__ import annotations

from collections.abc import Sequence

from vgpu_extender.domain import ContainerRequest, Device, NodeInventory, PodRequest
from vgpu_extender.domain.share import Capacity, ShareModel
from vgpu_extender.engine.index import ClusterIndex
from vgpu_extender.engine.rules import first_failing, holds_together


def free_capacity(index: ClusterIndex, node: str) -> dict[str, list[int]]:
    """Per device UUID: [memory free, cores free, slots free], from the allocation records."""
    free = {d.uuid: [d.memory_mib, d.cores, d.count] for d in index.inventory(node).devices}
    for alloc in index.pods_on(node):
        for uuid, use in alloc.assignment.footprint().items():
            if uuid in free:
                free[uuid][0] -= use.memory_mib
                free[uuid][1] -= use.cores
                free[uuid][2] -= use.slots
    return free


def _device_fits(share: ShareModel, dev: Device, free: list[int], c: ContainerRequest) -> bool:
    mem_free, cores_free, slots_free = free
    total = Capacity(dev.count, dev.memory_mib, dev.cores)
    return first_failing(share, Capacity(slots_free, mem_free, cores_free), total, c) is None


def _host_fits(index: ClusterIndex, request: PodRequest, inv: NodeInventory) -> bool:
    """Host CPU and memory, where the inventory tracks them, less what the node's pods hold."""
    if inv.cpu_milli is None and inv.memory_mib is None:
        return True
    pods = index.pods_on(inv.name)
    cpu_ok = inv.cpu_milli is None or (
        inv.cpu_milli - sum(a.cpu_milli for a in pods) >= request.cpu_milli
    )
    memory_ok = inv.memory_mib is None or (
        inv.memory_mib - sum(a.memory_mib for a in pods) >= request.host_memory_mib
    )
    return cpu_ok and memory_ok


def reference_fits(index: ClusterIndex, request: PodRequest, node: str) -> bool:
    """Whether ``request`` fits ``node``: a greedy loop in device-index order."""
    if node not in index:
        return False
    inv = index.inventory(node)
    if not _host_fits(index, request, inv):
        return False
    if not request.managed:
        return True
    if inv.problem:
        return False
    free = free_capacity(index, node)
    base = {u: list(v) for u, v in free.items()}
    sel = request.selector
    usable = [
        d
        for d in sorted(inv.devices, key=lambda d: d.index)
        if d.healthy
        and d.uuid not in inv.cordoned
        and (not sel.judges(d.vendor) or (sel.accepts_type(d.type) and sel.accepts_uuid(d.uuid)))
    ]
    # Per vendor word, the devices earlier init (True) or app (False) containers hold,
    # and, for a vendor that puts a pod on one device, every ask of each group.
    held: dict[tuple[bool, str], set[str]] = {}
    one_device = index.shares.one_device_groups(request)
    for container in request.containers:
        asks = [ask for ask in container.asks if ask.wants_devices]
        if not asks:
            continue
        state = {u: list(v) for u, v in base.items()} if container.init else free
        for c in asks:
            share = index.shares.of(c.vendor)
            earlier = held.setdefault((container.init, c.vendor), set())
            fitting = [
                d
                for d in usable
                if (not c.vendor or d.vendor == c.vendor)
                and (not c.mode or d.mode == c.mode)
                and _device_fits(share, d, state[d.uuid], c)
                and (not share.one_device_per_pod or all(u == d.uuid for u in earlier))
            ]
            together = one_device.get((container.init, c.vendor), [])
            if together and not earlier:
                # The group's first container: only a device that holds all of it.
                fitting = [
                    d
                    for d in fitting
                    if holds_together(
                        share,
                        Capacity(state[d.uuid][2], state[d.uuid][0], state[d.uuid][1]),
                        Capacity(d.count, d.memory_mib, d.cores),
                        together,
                        in_turn=not container.init,
                    )
                ]
            if request.numa_bind:
                groups: dict[int, list[Device]] = {}
                for d in fitting:
                    groups.setdefault(d.numa, []).append(d)
                fitting = next((g for g in groups.values() if len(g) >= c.count), [])
            if len(fitting) < c.count:
                return False
            if share.pick is not None and c.count > 1:
                chosen = share.pick(fitting, c.count)
                if chosen is None:
                    return False
                fitting = [fitting[i] for i in chosen]
            for d in fitting[: c.count]:
                earlier.add(d.uuid)
                used = share.consumed(Capacity(d.count, d.memory_mib, d.cores), c)
                state[d.uuid][0] -= used.memory
                state[d.uuid][1] -= used.cores
                state[d.uuid][2] -= used.slots
    return True


def reference_fit(index: ClusterIndex, request: PodRequest, candidates: Sequence[str]) -> list[str]:
    """The feasible candidates, in input order."""
    return [n for n in candidates if reference_fits(index, request, n)]
