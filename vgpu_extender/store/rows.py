"""Conversions between allocation rows and the plain values callers see."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from itertools import groupby
from typing import Protocol

from vgpu_extender.domain import DeviceGrant, PodAssignment
from vgpu_extender.store.models import AllocationModel
from vgpu_extender.store.records import Allocation, AllocationState, PodMeta, StoredPod


class AllocationFields(Protocol):
    """What a pod is rebuilt from: an ``AllocationModel``, or a plain row of the same
    columns (``POD_COLUMNS``: start-up reads 100,000 of them, and ORM instances cost
    several times more to make)."""

    @property
    def id(self) -> int: ...
    @property
    def pod_uid(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def pod_name(self) -> str: ...
    @property
    def node(self) -> str: ...
    @property
    def device_uuid(self) -> str: ...
    @property
    def vendor(self) -> str: ...
    @property
    def container_index(self) -> int: ...
    @property
    def init(self) -> bool: ...
    @property
    def memory_mib(self) -> int: ...
    @property
    def cores(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def bound_at(self) -> datetime | None: ...


#: The columns of ``AllocationFields``, for a query of plain rows.
POD_COLUMNS = (
    AllocationModel.id,
    AllocationModel.pod_uid,
    AllocationModel.namespace,
    AllocationModel.pod_name,
    AllocationModel.node,
    AllocationModel.device_uuid,
    AllocationModel.vendor,
    AllocationModel.container_index,
    AllocationModel.init,
    AllocationModel.memory_mib,
    AllocationModel.cores,
    AllocationModel.state,
    AllocationModel.created_at,
    AllocationModel.bound_at,
)


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


def assignment_of(rows: list[AllocationFields]) -> PodAssignment:
    """Rebuild one pod's assignment from its rows.

    Positions are container indices; a container without grants between two with
    grants gets an empty tuple, trailing ones are not recorded. Init flags are kept
    only when some container is an init container (otherwise ``init`` is empty, as
    the engine builds it). Each grant keeps the vendor word its row was written with.
    """
    ordered = sorted(rows, key=_in_container_order) if len(rows) > 1 else rows
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


def meta_of(rows: list[AllocationFields]) -> PodMeta:
    first = min(rows, key=_row_id) if len(rows) > 1 else rows[0]
    all_bound = all(r.state == _BOUND for r in rows)
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


def group_by_pod(rows: Iterable[AllocationFields]) -> dict[str, list[AllocationFields]]:
    ordered = sorted(rows, key=_in_pod_order)
    return {uid: list(group) for uid, group in groupby(ordered, key=_pod_uid)}


_BOUND = AllocationState.BOUND.value


def _in_container_order(row: AllocationFields) -> tuple[int, int]:
    return row.container_index, row.id


def _in_pod_order(row: AllocationFields) -> tuple[str, int, int]:
    return row.pod_uid, row.container_index, row.id


def _row_id(row: AllocationFields) -> int:
    return row.id


def _pod_uid(row: AllocationFields) -> str:
    return row.pod_uid


def stored_pods(rows: Iterable[AllocationFields]) -> dict[str, StoredPod]:
    return {
        uid: StoredPod(assignment_of(group), meta_of(group))
        for uid, group in group_by_pod(rows).items()
    }
