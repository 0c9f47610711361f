"""Conversions between allocation rows and the plain values callers see."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby

from vgpu_extender.domain import DeviceGrant, PodAssignment
from vgpu_extender.store.models import AllocationModel
from vgpu_extender.store.records import Allocation, AllocationState, PodMeta, StoredPod


def to_allocation(row: AllocationModel) -> Allocation:
    return Allocation(
        pod_uid=row.pod_uid,
        namespace=row.namespace,
        pod_name=row.pod_name,
        node=row.node,
        device_uuid=row.device_uuid,
        container_index=row.container_index,
        init=row.init,
        memory_mib=row.memory_mib,
        cores=row.cores,
        state=AllocationState(row.state),
        created_at=row.created_at,
        updated_at=row.updated_at,
        bound_at=row.bound_at,
        released_at=row.released_at,
    )


def assignment_of(rows: list[AllocationModel]) -> PodAssignment:
    """Rebuild one pod's assignment from its rows.

    Positions are container indices; a container without grants between two with
    grants gets an empty tuple, trailing ones are not recorded. Init flags are kept
    only when some container is an init container (otherwise ``init`` is empty, as
    the engine builds it). Each grant keeps the vendor word its row was written with.
    """
    ordered = sorted(rows, key=lambda r: (r.container_index, r.id))
    size = max(r.container_index for r in ordered) + 1
    containers: list[list[DeviceGrant]] = [[] for _ in range(size)]
    init = [False] * size
    for row in ordered:
        containers[row.container_index].append(
            DeviceGrant(row.device_uuid, row.memory_mib, row.cores, row.vendor)
        )
        init[row.container_index] = init[row.container_index] or row.init
    return PodAssignment(
        node=ordered[0].node,
        containers=tuple(tuple(c) for c in containers),
        init=tuple(init) if any(init) else (),
    )


def meta_of(rows: list[AllocationModel]) -> PodMeta:
    first = min(rows, key=lambda r: r.id)
    all_bound = all(r.state == AllocationState.BOUND.value for r in rows)
    bound_times = [r.bound_at for r in rows if r.bound_at is not None]
    return PodMeta(
        uid=first.pod_uid,
        namespace=first.namespace,
        name=first.pod_name,
        node=first.node,
        state=AllocationState.BOUND if all_bound else AllocationState.RESERVED,
        created_at=min(r.created_at for r in rows),
        bound_at=max(bound_times) if all_bound and bound_times else None,
    )


def group_by_pod(rows: Iterable[AllocationModel]) -> dict[str, list[AllocationModel]]:
    ordered = sorted(rows, key=lambda r: (r.pod_uid, r.container_index, r.id))
    return {uid: list(group) for uid, group in groupby(ordered, key=lambda r: r.pod_uid)}


def stored_pods(rows: Iterable[AllocationModel]) -> dict[str, StoredPod]:
    return {
        uid: StoredPod(assignment_of(group), meta_of(group))
        for uid, group in group_by_pod(rows).items()
    }
