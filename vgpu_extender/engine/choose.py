"""The exact device choice on one node: which devices each container gets.

Runs only on the node kube-scheduler picked (at bind) or on the few nodes a
multi-container pod needs confirmed, so a plain loop over a handful of devices is
the right tool. The policy only orders candidate devices; whether a share fits one
device is the share model's stage table (``engine.rules``); the placement rules live
here: a device at most once per container, NUMA binding, a vendor's one device per pod
(``ShareModel.one_device_per_pod``), and init containers sized against the node before
the pod (they run before the app containers, so the pod's footprint is the larger of
the two, see PodAssignment).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from vgpu_extender.domain import (
    ContainerRequest,
    Device,
    DeviceGrant,
    PodAssignment,
    PodRequest,
    Reason,
    Rejection,
)
from vgpu_extender.domain.share import (
    Capacity,
    ShareModel,
    ShareModels,
    Stage,
    one_device_allows,
)
from vgpu_extender.engine.columns import UNLIMITED
from vgpu_extender.engine.index import ClusterIndex
from vgpu_extender.engine.rules import first_failing, holds_together
from vgpu_extender.engine.selection import selector_mask
from vgpu_extender.vendors.registry import DEFAULT_SHARE

_DEFAULT_SHARES = ShareModels.one(DEFAULT_SHARE)


@dataclass(slots=True)
class NodeState:
    """A mutable copy of one node's free capacity, per device slot."""

    node: str
    devices: tuple[Device, ...]
    usable: list[bool]
    mem_total: list[int]
    mem_free: list[int]
    cores_total: list[int]
    cores_free: list[int]
    slots_total: list[int]
    slots_free: list[int]
    #: Host CPU (milli) free on the node before the pod (UNLIMITED where untracked), and
    #: the pod's own host CPU request: policies that judge what else will still fit the
    #: node once the pod is placed read them.
    host_cpu_free: int = UNLIMITED
    pod_cpu_milli: int = 0
    #: The stage tables a share must pass on these devices, by the device's vendor.
    shares: ShareModels = _DEFAULT_SHARES

    @property
    def share(self) -> ShareModel:
        """The default vendor's stage table."""
        return self.shares.default

    @classmethod
    def of(cls, index: ClusterIndex, row: int, request: PodRequest | None = None) -> NodeState:
        cols = index.cols
        devices = index.devices(row)
        n = len(devices)
        usable = cols.usable[row, :n].copy()
        if request is not None:
            chosen = selector_mask(index, request.selector)
            if chosen is not None:
                usable &= chosen[row, :n]
        return cls(
            node=index.name_of(row),
            devices=devices,
            usable=usable.tolist(),
            mem_total=cols.mem_total[row, :n].tolist(),
            mem_free=cols.mem_free[row, :n].tolist(),
            cores_total=cols.cores_total[row, :n].tolist(),
            cores_free=cols.cores_free[row, :n].tolist(),
            slots_total=cols.slots_total[row, :n].tolist(),
            slots_free=cols.slots_free[row, :n].tolist(),
            host_cpu_free=int(cols.cpu_free[row]),
            pod_cpu_milli=request.cpu_milli if request is not None else 0,
            shares=index.shares,
        )

    def copy(self) -> NodeState:
        return NodeState(
            self.node,
            self.devices,
            list(self.usable),
            list(self.mem_total),
            list(self.mem_free),
            list(self.cores_total),
            list(self.cores_free),
            list(self.slots_total),
            list(self.slots_free),
            self.host_cpu_free,
            self.pod_cpu_milli,
            self.shares,
        )

    def free(self, slot: int) -> Capacity:
        return Capacity(self.slots_free[slot], self.mem_free[slot], self.cores_free[slot])

    def total(self, slot: int) -> Capacity:
        return Capacity(self.slots_total[slot], self.mem_total[slot], self.cores_total[slot])

    def fits(
        self, slot: int, container: ContainerRequest, stages: Sequence[Stage] | None = None
    ) -> Reason | None:
        """None when one share of ``container`` fits on the device, else why not;
        ``stages``: the share model's stages for ``container``, when the caller has them."""
        if not self.usable[slot]:
            return Reason.UNHEALTHY
        share = self.shares.of(self.devices[slot].vendor)
        failed = first_failing(share, self.free(slot), self.total(slot), container, stages)
        return None if failed is None else failed.reason

    def take(self, slot: int, container: ContainerRequest) -> DeviceGrant:
        dev = self.devices[slot]
        used = self.shares.of(dev.vendor).consumed(self.total(slot), container)
        self.slots_free[slot] -= used.slots
        self.mem_free[slot] -= used.memory
        self.cores_free[slot] -= used.cores
        return DeviceGrant(dev.uuid, used.memory, used.cores, dev.vendor)


class _DeviceView:
    """One device's capacity (``Capacity``'s fields), reassigned for each device."""

    __slots__ = ("cores", "memory", "slots")

    def __init__(self) -> None:
        self.slots = self.memory = self.cores = 0


class DeviceRanker(Protocol):
    """Orders the devices that fit a container, most preferred first (a policy's job)."""

    def __call__(
        self, state: NodeState, container: ContainerRequest, candidates: Sequence[int]
    ) -> list[int]: ...


def by_index(state: NodeState, container: ContainerRequest, candidates: Sequence[int]) -> list[int]:
    """The neutral order: lowest device index first."""
    return sorted(candidates, key=lambda s: state.devices[s].index)


def _holds(
    state: NodeState,
    share: ShareModel,
    slot: int,
    asks: Sequence[ContainerRequest],
    init: bool,
    *,
    emptied: bool = False,
) -> bool:
    """Whether device ``slot`` takes every one of ``asks``; ``emptied``: were nothing on
    it (whether preempting its pods could ever make room)."""
    total = Capacity(state.slots_total[slot], state.mem_total[slot], state.cores_total[slot])
    free = total
    if not emptied:
        free = Capacity(state.slots_free[slot], state.mem_free[slot], state.cores_free[slot])
    return holds_together(share, free, total, asks, in_turn=not init)


def choose_devices(
    index: ClusterIndex,
    request: PodRequest,
    node: str,
    ranker: DeviceRanker = by_index,
) -> PodAssignment | Rejection:
    """The devices each container of ``request`` gets on ``node``, or why it cannot fit."""
    row = index.row_of(node)
    if row is None:
        return Rejection(Reason.UNKNOWN_NODE, unresolvable=True)
    problem = index.inventory(node).problem
    if problem:
        return Rejection(Reason.INVENTORY, unresolvable=True, detail=problem)
    base = NodeState.of(index, row, request)
    cols = index.cols
    if cols.cpu_free[row] < request.cpu_milli:
        return Rejection(Reason.CPU, request.cpu_milli, int(cols.cpu_free[row]))
    if cols.hostmem_free[row] < request.host_memory_mib:
        return Rejection(Reason.HOST_MEMORY, request.host_memory_mib, int(cols.hostmem_free[row]))
    numa = [d.numa for d in base.devices] if request.numa_bind else None
    running = base.copy()
    # The devices the pod's earlier containers hold, by vendor word, for vendors that put
    # a pod on one device; init and app containers apart (HAMi fits each group against
    # its own list). None where no vendor of the index has such a rule.
    held: tuple[dict[str, set[str]], dict[str, set[str]]] | None = None
    together: dict[tuple[bool, str], list[ContainerRequest]] = {}
    if index.shares.spans_containers:
        held = ({}, {})
        together = index.shares.one_device_groups(request)
    grants: list[tuple[DeviceGrant, ...]] = []
    for container in request.containers:
        asks = [ask for ask in container.asks if ask.wants_devices]
        if not asks:
            grants.append(())
            continue
        # Init containers run before the app containers: size them against the node as it
        # was before this pod; app containers accumulate. A container's asks of several
        # vendors are held together.
        state = base.copy() if container.init else running
        granted: list[DeviceGrant] = []
        for ask in asks:
            earlier = None
            group_asks: list[ContainerRequest] = []
            if held is not None and state.shares.of(ask.vendor).one_device_per_pod:
                group = held[1] if container.init else held[0]
                earlier = group.setdefault(ask.vendor, set())
                if not earlier:  # the group's first: a device where all of it fits
                    group_asks = together.get((container.init, ask.vendor), [])
            picked = _pick(state, ask, ranker, numa, earlier, group_asks, init=container.init)
            if isinstance(picked, Rejection):
                return picked
            granted.extend(state.take(slot, ask) for slot in picked)
            if earlier is not None:
                earlier.update(state.devices[slot].uuid for slot in picked)
        grants.append(tuple(granted))
    return PodAssignment(node, tuple(grants), tuple(c.init for c in request.containers))


def _pick(
    state: NodeState,
    container: ContainerRequest,
    ranker: DeviceRanker,
    numa: list[int] | None,
    earlier: set[str] | None = None,
    together: Sequence[ContainerRequest] = (),
    *,
    init: bool = False,
) -> list[int] | Rejection:
    """The slots ``container`` takes, or why it cannot fit; ``earlier``: the devices the
    pod's earlier containers hold, where its vendor puts a pod on one device;
    ``together``: for the first of such a group, every ask of it (this one first), so
    that the device chosen holds them all (``holds_together``)."""
    k = container.count
    failures: dict[Reason, int] = {}
    fitting: list[int] = []
    share = state.shares.of(container.vendor)
    tests = [(stage.reason, stage.test) for stage in share.stages_for(container)]
    vendor, mode = container.vendor, container.mode
    devices = state.devices
    if vendor:
        slots = [slot for slot, dev in enumerate(devices) if dev.vendor == vendor]
    else:
        slots = list(range(len(devices)))
    # One view of a device's capacity, moved from device to device: the stage tests
    # only read it, and building two tuples per device would double the cost of a choice.
    free, total = _DeviceView(), _DeviceView()
    for slot in slots:
        why: Reason | None = None
        if mode and devices[slot].mode != mode:
            why = Reason.MODE_MISMATCH
        elif not state.usable[slot]:
            why = Reason.UNHEALTHY
        else:
            free.slots, free.memory, free.cores = (
                state.slots_free[slot],
                state.mem_free[slot],
                state.cores_free[slot],
            )
            total.slots, total.memory, total.cores = (
                state.slots_total[slot],
                state.mem_total[slot],
                state.cores_total[slot],
            )
            for reason, test in tests:
                if not test(free, total, container):
                    why = reason
                    break
        if why is None:
            fitting.append(slot)
        else:
            failures[why] = failures.get(why, 0) + 1
    if len(slots) < k:
        reason = Reason.NOT_ENOUGH_DEVICES if slots else Reason.NO_DEVICES
        return Rejection(reason, k, len(slots), unresolvable=True)
    if earlier:
        # The vendor's rule over the pod's containers comes after every stage, as HAMi's
        # customFilterRule does.
        allowed = [slot for slot in fitting if one_device_allows(earlier, devices[slot].uuid)]
        if len(allowed) < k and len(allowed) < len(fitting):
            # Devices that would fit but for the rule: the rule is why the node refuses.
            noun = share.noun
            if len(earlier) == 1:
                why_not = f"the pod's containers share the {noun} its earlier ones hold"
            else:  # no device is each of them: never
                why_not = f"the pod's earlier containers hold {len(earlier)} {noun}s"
            detail = f"{len(allowed)} of {k} {noun}s fit; {why_not}"
            return Rejection(
                Reason.SAME_DEVICE, k, len(allowed), unresolvable=len(earlier) > 1, detail=detail
            )
        fitting = allowed
    if together and len(fitting) >= k:
        holding = [slot for slot in fitting if _holds(state, share, slot, together, init)]
        if len(holding) < k:
            detail = (
                f"{len(fitting)} {share.noun}s fit the first container; none holds all "
                f"{len(together)} of the pod's containers, which share one"
            )
            # Never, when no device would hold them even emptied (too small, or mutex
            # with two containers): preempting would free devices for nothing.
            hopeless = not any(
                _holds(state, share, slot, together, init, emptied=True)
                for slot in slots
                if state.usable[slot]
            )
            return Rejection(Reason.SAME_DEVICE, k, 0, unresolvable=hopeless, detail=detail)
        fitting = holding
    if len(fitting) < k:
        # Devices the pod can never use explain nothing when others are merely in use.
        never = (Reason.UNHEALTHY, Reason.MODE_MISMATCH)
        in_use = {r: n for r, n in failures.items() if r not in never}
        pool = in_use or failures
        reason = max(pool, key=lambda r: (pool[r], -list(Reason).index(r)))
        detail = f"{len(fitting)} of {k} {share.noun}s fit"
        return Rejection(reason, unresolvable=not in_use, detail=detail)
    ordered = ranker(state, container, fitting)
    if share.pick is not None and k > 1:
        # The vendor's topology rule decides which fitting devices go together; one
        # device alone follows the device policy.
        chosen = share.pick([devices[slot] for slot in ordered], k)
        if chosen is None:
            detail = f"{len(fitting)} {share.noun}s fit one by one, no {k} of them together"
            return Rejection(Reason.COMBINATION, k, len(fitting), detail=detail)
        return [ordered[i] for i in chosen]
    if numa is None:
        return ordered[:k]
    groups: dict[int, list[int]] = {}
    for slot in ordered:
        groups.setdefault(numa[slot], []).append(slot)
    for slot in ordered:  # the best-ranked device decides the NUMA node, if it has room
        group = groups[numa[slot]]
        if len(group) >= k:
            return group[:k]
    noun = share.noun
    return Rejection(Reason.NUMA, unresolvable=False, detail=f"{k} {noun}s on one numa node")
