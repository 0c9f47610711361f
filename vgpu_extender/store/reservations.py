"""Writing a pod's allocations: the bind-time reservation and the import of pods
placed before a restart (or by HAMi).

Both lock the node's row first, so writes to one node are serialised across
sessions, processes and replicas: ``SELECT ... FOR UPDATE`` on PostgreSQL, the
``BEGIN IMMEDIATE`` write lock on SQLite. A reservation then re-checks the fit
against what is committed; an import records a fact and only checks that the
devices exist on the node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session, selectinload

from vgpu_extender.domain import DeviceGrant, PodAssignment, Reason
from vgpu_extender.store.capacity import committed_usage, find_misfit
from vgpu_extender.store.database import begin_immediate
from vgpu_extender.store.errors import (
    AlreadyAllocated,
    StoreConflict,
    StoreInputError,
    store_operation,
)
from vgpu_extender.store.models import AllocationModel, NodeModel
from vgpu_extender.store.nodes import to_inventory
from vgpu_extender.store.records import LIVE_STATES, AllocationState
from vgpu_extender.store.rows import assignment_of, group_by_pod


@dataclass(frozen=True, slots=True)
class _Grant:
    container_index: int
    init: bool
    grant: DeviceGrant


def aware(value: datetime | None, *, field: str) -> datetime:
    """``value`` (or now) as an aware timestamp; naive ones are refused by name."""
    if value is None:
        return datetime.now(UTC)
    if value.tzinfo is None or value.utcoffset() is None:
        raise StoreInputError("timestamp must be timezone-aware", field=field, value=value)
    return value


def _grants(
    *, pod_uid: str, assignment: PodAssignment, container_indices: Sequence[int] | None
) -> list[_Grant]:
    if not pod_uid:
        raise StoreInputError("pod uid is empty", field="pod_uid", value=pod_uid)
    if not assignment.node:
        raise StoreInputError("assignment has no node", field="assignment.node", value="")
    positions = len(assignment.containers)
    indices = list(range(positions)) if container_indices is None else list(container_indices)
    if len(indices) != positions:
        raise StoreInputError(
            f"need one container index per assignment container ({positions})",
            field="container_indices",
            value=container_indices,
        )
    if any(i < 0 for i in indices) or len(set(indices)) != len(indices):
        raise StoreInputError(
            "container indices must be distinct and >= 0",
            field="container_indices",
            value=container_indices,
        )
    grants: list[_Grant] = []
    for position, container in enumerate(assignment.containers):
        seen: set[str] = set()
        for grant in container:
            where = f"assignment.containers[{position}]"
            if not grant.uuid or grant.uuid in seen:
                raise StoreInputError(
                    "device uuid empty or repeated in one container",
                    field=f"{where}.uuid",
                    value=grant.uuid,
                )
            seen.add(grant.uuid)
            for field, value in (("memory_mib", grant.memory_mib), ("cores", grant.cores)):
                if value < 0:
                    raise StoreInputError(
                        f"grant on {grant.uuid} is negative", field=f"{where}.{field}", value=value
                    )
            grants.append(_Grant(indices[position], assignment.is_init(position), grant))
    if not grants:
        raise StoreInputError(
            "assignment grants no device", field="assignment.containers", value=()
        )
    return grants


def _lock_node(session: Session, name: str) -> NodeModel:
    begin_immediate(session)
    node = session.scalars(
        select(NodeModel)
        .where(NodeModel.name == name)
        .options(selectinload(NodeModel.devices))
        .with_for_update()
        .execution_options(populate_existing=True)
    ).one_or_none()
    if node is None:
        raise StoreConflict(f"node {name} is not registered", reason=Reason.UNKNOWN_NODE, node=name)
    return node


def _refuse_if_live(session: Session, pod_uid: str) -> None:
    row = session.scalars(
        select(AllocationModel)
        .where(AllocationModel.pod_uid == pod_uid, AllocationModel.state.in_(LIVE_STATES))
        .limit(1)
    ).first()
    if row is not None:
        raise AlreadyAllocated(pod_uid, node=row.node, state=row.state)


def _check_fit(session: Session, node: NodeModel, assignment: PodAssignment) -> None:
    inventory = to_inventory(node)
    if inventory.problem:
        raise StoreConflict(
            f"node {node.name} has no usable inventory: {inventory.problem}",
            reason=Reason.INVENTORY,
            node=node.name,
        )
    rows = session.scalars(
        select(AllocationModel)
        .where(AllocationModel.node == node.name, AllocationModel.state.in_(LIVE_STATES))
        .execution_options(populate_existing=True)
    )
    committed = committed_usage(assignment_of(group, {}) for group in group_by_pod(rows).values())
    misfit = find_misfit(
        node=node.name,
        devices={d.uuid: d for d in inventory.devices},
        cordoned=inventory.cordoned,
        committed=committed,
        assignment=assignment,
    )
    if misfit is not None:
        raise StoreConflict(
            misfit.message, reason=misfit.reason, node=node.name, device=misfit.device
        )


def _check_devices_known(node: NodeModel, grants: list[_Grant]) -> None:
    known = {d.uuid for d in node.devices}
    for item in grants:
        if item.grant.uuid not in known:
            raise StoreConflict(
                f"device {item.grant.uuid} is not on node {node.name}",
                reason=Reason.UUID_MISMATCH,
                node=node.name,
                device=item.grant.uuid,
            )


def _write(
    session: Session,
    *,
    pod_uid: str,
    namespace: str,
    name: str,
    node: str,
    grants: list[_Grant],
    state: AllocationState,
    now: datetime,
) -> None:
    # Released rows are history of an earlier placement of the same pod; they would
    # collide with the new rows on (pod_uid, container_index, device_uuid).
    session.execute(
        delete(AllocationModel).where(
            AllocationModel.pod_uid == pod_uid,
            AllocationModel.state == AllocationState.RELEASED.value,
        )
    )
    bound_at = now if state is AllocationState.BOUND else None
    session.execute(
        insert(AllocationModel),
        [
            {
                "pod_uid": pod_uid,
                "namespace": namespace,
                "pod_name": name,
                "node": node,
                "device_uuid": item.grant.uuid,
                "container_index": item.container_index,
                "init": item.init,
                "memory_mib": item.grant.memory_mib,
                "cores": item.grant.cores,
                "state": state.value,
                "created_at": now,
                "updated_at": now,
                "bound_at": bound_at,
                "released_at": None,
            }
            for item in grants
        ],
    )


@store_operation("reserve")
def reserve(
    session: Session,
    *,
    pod_uid: str,
    namespace: str,
    name: str,
    assignment: PodAssignment,
    container_indices: Sequence[int] | None = None,
    now: datetime | None = None,
) -> None:
    """Reserve ``assignment`` for the pod, inside the caller's transaction.

    ``container_indices`` gives the pod's container index for each position of
    ``assignment.containers`` (default: the positions themselves). Raises
    ``AlreadyAllocated`` when the pod holds live allocations, ``StoreConflict`` when the
    assignment no longer fits the node's committed allocations. Nothing is written
    unless everything fits.
    """
    grants = _grants(pod_uid=pod_uid, assignment=assignment, container_indices=container_indices)
    stamp = aware(now, field="now")
    node = _lock_node(session, assignment.node)
    _refuse_if_live(session, pod_uid)
    _check_fit(session, node, assignment)
    _write(
        session,
        pod_uid=pod_uid,
        namespace=namespace,
        name=name,
        node=node.name,
        grants=grants,
        state=AllocationState.RESERVED,
        now=stamp,
    )


@store_operation("import assignment")
def import_assignment(
    session: Session,
    *,
    pod_uid: str,
    namespace: str,
    name: str,
    assignment: PodAssignment,
    container_indices: Sequence[int] | None = None,
    now: datetime | None = None,
) -> None:
    """Record, as bound, an assignment a pod already runs with (found in its annotations).

    The fit is not re-checked: the pod holds these devices whatever the store thinks.
    Raises ``AlreadyAllocated`` when the pod already has live rows, ``StoreConflict``
    when the node or a device is unknown.
    """
    grants = _grants(pod_uid=pod_uid, assignment=assignment, container_indices=container_indices)
    stamp = aware(now, field="now")
    node = _lock_node(session, assignment.node)
    _refuse_if_live(session, pod_uid)
    _check_devices_known(node, grants)
    _write(
        session,
        pod_uid=pod_uid,
        namespace=namespace,
        name=name,
        node=node.name,
        grants=grants,
        state=AllocationState.BOUND,
        now=stamp,
    )
