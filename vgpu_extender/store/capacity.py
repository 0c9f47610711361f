"""The bind-time re-check: does an assignment still fit a node's committed usage?

The engine decides placements from its in-memory index; this check runs inside the
store transaction that holds the node's lock, against what is really committed, so
that two binds racing on one node can never over-allocate a device. It is pure: after
health and cordons it evaluates, on each device's committed usage, the stage table
(``engine.rules``) of that device's own vendor (its ``vendor`` word looked up in the
``ShareModels``), the one the engine placed the pod by, in the words the vendor gives
each stage. An import (a pod already running on its devices) is checked for
over-commitment only: ``find_overcommits``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from vgpu_extender.domain import Device, DeviceGrant, DeviceUsage, PodAssignment, Reason
from vgpu_extender.domain.share import Capacity, ShareModels, as_mutex
from vgpu_extender.engine.rules import misfit_on_device
from vgpu_extender.vendors.registry import DEFAULT_SHARE

#: Every device by the default vendor's model, for callers that serve one vendor.
DEFAULT_SHARES = ShareModels.one(DEFAULT_SHARE)


@dataclass(frozen=True, slots=True)
class Misfit:
    """Why an assignment does not fit, located at one device."""

    reason: Reason
    device: str
    message: str


@dataclass(slots=True)
class _Used:
    memory_mib: int = 0
    cores: int = 0
    slots: int = 0

    def add(self, memory_mib: int, cores: int, slots: int) -> None:
        self.memory_mib += memory_mib
        self.cores += cores
        self.slots += slots


class HeldGrant(NamedTuple):
    """One stored grant, as much of it as the fit needs."""

    pod_uid: str
    device_uuid: str
    init: bool
    memory_mib: int
    cores: int


def _add_footprints(totals: dict[str, _Used], assignments: Iterable[PodAssignment]) -> None:
    for assignment in assignments:
        for uuid, usage in assignment.footprint().items():
            totals.setdefault(uuid, _Used()).add(usage.memory_mib, usage.cores, usage.slots)


def _usages(totals: dict[str, _Used]) -> dict[str, DeviceUsage]:
    return {u: DeviceUsage(t.memory_mib, t.cores, t.slots) for u, t in totals.items()}


def committed_usage(assignments: Iterable[PodAssignment]) -> dict[str, DeviceUsage]:
    """Per device, the sum of the pods' footprints (each pod collapsed by its own rule)."""
    totals: dict[str, _Used] = {}
    _add_footprints(totals, assignments)
    return _usages(totals)


def committed_by_grants(grants: Sequence[HeldGrant]) -> dict[str, DeviceUsage]:
    """``committed_usage`` of the pods holding ``grants`` (rows of any pods, any order).

    A pod without init grants holds the plain sum of its grants, one slot each, so
    those rows are added as they come; only pods with init grants are rebuilt as
    assignments for :meth:`PodAssignment.footprint`'s collapse. Each grant counts as
    a container of its own: the footprint does not depend on how grants group.
    """
    with_init = {g.pod_uid for g in grants if g.init}
    totals: dict[str, _Used] = {}
    init_pods: dict[str, list[HeldGrant]] = {}
    for grant in grants:
        if grant.pod_uid in with_init:
            init_pods.setdefault(grant.pod_uid, []).append(grant)
        else:
            totals.setdefault(grant.device_uuid, _Used()).add(grant.memory_mib, grant.cores, 1)
    _add_footprints(
        totals,
        (
            PodAssignment(
                node="",
                containers=tuple(
                    (DeviceGrant(g.device_uuid, g.memory_mib, g.cores),) for g in held
                ),
                init=tuple(g.init for g in held),
            )
            for held in init_pods.values()
        ),
    )
    return _usages(totals)


def find_misfit(
    *,
    node: str,
    devices: Mapping[str, Device],
    cordoned: frozenset[str],
    committed: Mapping[str, DeviceUsage],
    assignment: PodAssignment,
    shares: ShareModels = DEFAULT_SHARES,
    mutex: bool = False,
) -> Misfit | None:
    """The first device on which ``assignment`` does not fit, or None when it all fits.
    ``mutex``: the pod asked for devices no other pod uses (the share model's mutex
    stage, where its vendor honours it)."""
    empty = DeviceUsage(0, 0, 0)
    for uuid, want in assignment.footprint().items():
        misfit = _device_misfit(
            shares,
            node,
            uuid,
            devices.get(uuid),
            uuid in cordoned,
            committed.get(uuid, empty),
            want,
            mutex=mutex,
        )
        if misfit is not None:
            return misfit
    return None


def find_overcommits(
    *,
    node: str,
    devices: Mapping[str, Device],
    committed: Mapping[str, DeviceUsage],
    assignment: PodAssignment,
    shares: ShareModels = DEFAULT_SHARES,
) -> list[Misfit]:
    """Every device on which a pod already running there (an import) does not fit
    beside what is committed, by ``find_misfit``'s rules less health and cordons: those
    keep *new* pods away, and this one is there already."""
    empty = DeviceUsage(0, 0, 0)
    found: list[Misfit] = []
    for uuid, want in assignment.footprint().items():
        device = devices.get(uuid)
        if device is not None and not device.healthy:
            device = replace(device, healthy=True)
        misfit = _device_misfit(shares, node, uuid, device, False, committed.get(uuid, empty), want)
        if misfit is not None:
            found.append(misfit)
    return found


def _device_misfit(
    shares: ShareModels,
    node: str,
    uuid: str,
    device: Device | None,
    cordoned: bool,
    used: DeviceUsage,
    want: DeviceUsage,
    *,
    mutex: bool = False,
) -> Misfit | None:
    where = f"device {uuid} on {node}"
    if device is None:
        return Misfit(Reason.UUID_MISMATCH, uuid, f"device {uuid} is not on node {node}")
    if not device.healthy:
        return Misfit(Reason.UNHEALTHY, uuid, f"{where} is unhealthy")
    if cordoned:
        return Misfit(Reason.CORDONED, uuid, f"{where} is cordoned")
    share = shares.of(device.vendor)
    held = share.held(want)
    failed = misfit_on_device(
        share,
        where,
        Capacity(used.slots, used.memory_mib, used.cores),
        Capacity(device.count, device.memory_mib, device.cores),
        as_mutex(held) if mutex else held,
    )
    if failed is None:
        return None
    stage, message = failed
    return Misfit(stage.reason, uuid, message)
