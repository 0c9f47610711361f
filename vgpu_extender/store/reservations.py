"""Writing a pod's allocations: the bind-time reservation and the import of pods
placed before a restart (or by HAMi).

Both lock the node's row first, so writes to one node are serialised across
sessions, processes and replicas: ``SELECT ... FOR UPDATE`` on PostgreSQL, the
``BEGIN IMMEDIATE`` write lock on SQLite. A reservation then re-checks the fit
against what is committed on the devices it asks for (a device's grants are only
written under its node's lock); an import records a fact and only checks that the
devices exist on the node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, and_, bindparam, delete, insert, or_, select

from vgpu_extender.domain import Device, DeviceGrant, PodAssignment, Reason
from vgpu_extender.store.capacity import HeldGrant, committed_by_grants, find_misfit
from vgpu_extender.store.database import Unit, begin_immediate
from vgpu_extender.store.errors import (
    AlreadyAllocated,
    StoreConflict,
    StoreInputError,
    store_operation,
)
from vgpu_extender.store.models import Base
from vgpu_extender.store.records import LIVE_STATES, AllocationState

# Every bind runs these, so they are plain Core statements on the tables, built once:
# no ORM objects to hydrate, only the columns the checks read.
_nodes = Base.metadata.tables["nodes"]
_devices = Base.metadata.tables["devices"]
_allocations = Base.metadata.tables["allocations"]
_RELEASED = AllocationState.RELEASED.value

_LOCK_NODE = (
    select(_nodes.c.id, _nodes.c.cordoned, _nodes.c.problem)
    .where(_nodes.c.name == bindparam("name"))
    .with_for_update()
)
_NODE_DEVICES = select(
    _devices.c.uuid, _devices.c.count, _devices.c.memory_mib, _devices.c.cores, _devices.c.healthy
).where(_devices.c.node_id == bindparam("node_id"), _devices.c.uuid.in_(bindparam("uuids")))
_a = _allocations.c
_HELD = select(
    _a.pod_uid, _a.node, _a.device_uuid, _a.init, _a.memory_mib, _a.cores, _a.state
).where(
    or_(
        and_(_a.device_uuid.in_(bindparam("uuids")), _a.state.in_(LIVE_STATES)),
        _a.pod_uid == bindparam("pod_uid"),
    )
)
_DROP_RELEASED = delete(_allocations).where(
    _a.pod_uid == bindparam("pod_uid"), _a.state == _RELEASED
)
_INSERT = insert(_allocations)


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


@dataclass(frozen=True, slots=True)
class _LockedNode:
    name: str
    id: int
    cordoned: frozenset[str]
    problem: str


def _lock_node(connection: Connection, name: str) -> _LockedNode:
    row = connection.execute(_LOCK_NODE, {"name": name}).first()
    if row is None:
        raise StoreConflict(f"node {name} is not registered", reason=Reason.UNKNOWN_NODE, node=name)
    node_id, cordoned, problem = row
    return _LockedNode(name, node_id, frozenset(cordoned), problem or "")


def _devices_of(
    connection: Connection, node: _LockedNode, uuids: Sequence[str]
) -> dict[str, Device]:
    """The node's devices among ``uuids``, read after the lock so they are current."""
    return {
        uuid: Device(uuid=uuid, count=count, memory_mib=memory, cores=cores, healthy=healthy)
        for uuid, count, memory, cores, healthy in connection.execute(
            _NODE_DEVICES, {"node_id": node.id, "uuids": list(uuids)}
        )
    }


def _held_on_devices(
    connection: Connection, *, pod_uid: str, uuids: Sequence[str]
) -> tuple[list[HeldGrant], bool]:
    """Live grants of other pods on ``uuids``, and whether the pod has released rows.

    Raises ``AlreadyAllocated`` when the pod itself holds live rows. One query reads
    both the devices' grants and the pod's own rows.
    """
    others: list[HeldGrant] = []
    released = False
    for uid, node, uuid, init, memory, cores, state in connection.execute(
        _HELD, {"pod_uid": pod_uid, "uuids": list(uuids)}
    ):
        if uid != pod_uid:
            others.append(HeldGrant(uid, uuid, init, memory, cores))
        elif state == _RELEASED:
            released = True
        else:
            raise AlreadyAllocated(pod_uid, node=node, state=state)
    return others, released


def _check_fit(
    connection: Connection, node: _LockedNode, assignment: PodAssignment, held: list[HeldGrant]
) -> None:
    if node.problem:
        raise StoreConflict(
            f"node {node.name} has no usable inventory: {node.problem}",
            reason=Reason.INVENTORY,
            node=node.name,
        )
    misfit = find_misfit(
        node=node.name,
        devices=_devices_of(connection, node, assignment.device_uuids),
        cordoned=node.cordoned,
        committed=committed_by_grants(held),
        assignment=assignment,
    )
    if misfit is not None:
        raise StoreConflict(
            misfit.message, reason=misfit.reason, node=node.name, device=misfit.device
        )


def _check_devices_known(
    connection: Connection, node: _LockedNode, assignment: PodAssignment, grants: list[_Grant]
) -> None:
    known = _devices_of(connection, node, assignment.device_uuids)
    for item in grants:
        if item.grant.uuid not in known:
            raise StoreConflict(
                f"device {item.grant.uuid} is not on node {node.name}",
                reason=Reason.UUID_MISMATCH,
                node=node.name,
                device=item.grant.uuid,
            )


def _write(
    connection: Connection,
    *,
    pod_uid: str,
    namespace: str,
    name: str,
    node: str,
    grants: list[_Grant],
    state: AllocationState,
    now: datetime,
    released: bool,
) -> None:
    if released:
        # Released rows are history of an earlier placement of the same pod; they
        # would collide with the new rows on (pod_uid, container_index, device_uuid).
        connection.execute(_DROP_RELEASED, {"pod_uid": pod_uid})
    bound_at = now if state is AllocationState.BOUND else None
    connection.execute(
        _INSERT,
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
    session: Unit,
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
    connection = begin_immediate(session)
    node = _lock_node(connection, assignment.node)
    held, released = _held_on_devices(connection, pod_uid=pod_uid, uuids=assignment.device_uuids)
    _check_fit(connection, node, assignment, held)
    _write(
        connection,
        pod_uid=pod_uid,
        namespace=namespace,
        name=name,
        node=node.name,
        grants=grants,
        state=AllocationState.RESERVED,
        now=stamp,
        released=released,
    )


@store_operation("import assignment")
def import_assignment(
    session: Unit,
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
    connection = begin_immediate(session)
    node = _lock_node(connection, assignment.node)
    _held, released = _held_on_devices(connection, pod_uid=pod_uid, uuids=())
    _check_devices_known(connection, node, assignment, grants)
    _write(
        connection,
        pod_uid=pod_uid,
        namespace=namespace,
        name=name,
        node=node.name,
        grants=grants,
        state=AllocationState.BOUND,
        now=stamp,
        released=released,
    )
