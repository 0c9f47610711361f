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

from sqlalchemy import (
    Boolean,
    Connection,
    Integer,
    and_,
    bindparam,
    cast,
    delete,
    insert,
    null,
    select,
    union_all,
)
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.elements import BindParameter

from vgpu_extender.domain import Device, DeviceGrant, PodAssignment, Reason
from vgpu_extender.store import driver
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

# Every bind runs these, so they are plain Core statements on the tables, compiled once
# per dialect and run as the driver's SQL (``store.driver``): no ORM objects to hydrate,
# no compilation or type layers per execution, only the columns the checks read.
_nodes = Base.metadata.tables["nodes"]
_devices = Base.metadata.tables["devices"]
_allocations = Base.metadata.tables["allocations"]
_a = _allocations.c
_d = _devices.c
_RELEASED = AllocationState.RELEASED.value
_NO_INT = cast(null(), Integer)
_NO_BOOL = cast(null(), Boolean)
_LIVE: list[BindParameter[str]] = [
    bindparam(f"live_{i}", state) for i, state in enumerate(LIVE_STATES)
]
_INSERTED = (
    "pod_uid", "namespace", "pod_name", "node", "device_uuid", "container_index", "init",
    "memory_mib", "cores", "state", "created_at", "updated_at", "bound_at", "released_at",
)  # fmt: skip


def _lock_node_statement() -> ClauseElement:
    return (
        select(_nodes.c.id, _nodes.c.cordoned, _nodes.c.problem)
        .where(_nodes.c.name == bindparam("name"))
        .with_for_update()
    )


def _devices_and_held_statement(count: int) -> ClauseElement:
    """After the node's lock, one read: the ``count`` devices asked for (parameters
    ``uuid_0``...), each with the live grants on it (a device without any comes once,
    with NULL grant columns), and then the pod's own rows wherever they are (released
    ones, or live ones that make the bind a repeat)."""
    uuids: list[BindParameter[str]] = [bindparam(f"uuid_{i}") for i in range(count)]
    return union_all(
        select(
            _d.uuid, _d.count, _d.memory_mib, _d.cores, _d.healthy,
            _a.pod_uid, _a.node, _a.init, _a.memory_mib, _a.cores, _a.state,
        )
        .select_from(
            _devices.outerjoin(_allocations, and_(_a.device_uuid == _d.uuid, _a.state.in_(_LIVE)))
        )
        .where(_d.node_id == bindparam("node_id"), _d.uuid.in_(uuids)),
        select(
            _a.device_uuid, _NO_INT, _NO_INT, _NO_INT, _NO_BOOL,
            _a.pod_uid, _a.node, _a.init, _a.memory_mib, _a.cores, _a.state,
        ).where(_a.pod_uid == bindparam("pod_uid")),
    )  # fmt: skip


def _drop_released_statement() -> ClauseElement:
    return delete(_allocations).where(_a.pod_uid == bindparam("pod_uid"), _a.state == _RELEASED)


def _insert_statement() -> ClauseElement:
    # inline: no RETURNING of the new ids, which nothing reads.
    return insert(_allocations).values({name: bindparam(name) for name in _INSERTED}).inline()


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
    rows = driver.fetch_all(
        connection, driver.prepared(connection, "lock node", _lock_node_statement), {"name": name}
    )
    if not rows:
        raise StoreConflict(f"node {name} is not registered", reason=Reason.UNKNOWN_NODE, node=name)
    node_id, cordoned, problem = rows[0]
    return _LockedNode(name, node_id, frozenset(cordoned), problem or "")


@dataclass(frozen=True, slots=True)
class _NodeState:
    """What a write on a locked node reads: its devices among those asked for, the
    live grants of other pods on them, and whether the pod has released rows."""

    devices: dict[str, Device]
    held: list[HeldGrant]
    released: bool


def _read_node_state(
    connection: Connection, node: _LockedNode, *, pod_uid: str, uuids: Sequence[str]
) -> _NodeState:
    """Read after the lock, so it is current. Raises ``AlreadyAllocated`` when the pod
    itself holds live rows."""
    devices: dict[str, Device] = {}
    held: list[HeldGrant] = []
    released = False
    statement = driver.prepared(
        connection,
        ("devices and held", len(uuids)),
        lambda: _devices_and_held_statement(len(uuids)),
    )
    values: dict[str, object] = {"node_id": node.id, "pod_uid": pod_uid}
    values.update((f"uuid_{i}", uuid) for i, uuid in enumerate(uuids))
    rows = driver.fetch_all(connection, statement, values)
    for uuid, count, memory, cores, healthy, uid, on_node, init, used, busy, state in rows:
        if count is not None and uuid not in devices:
            devices[uuid] = Device(
                uuid=uuid, count=count, memory_mib=memory, cores=cores, healthy=healthy
            )
        if uid is None:
            continue  # a device nothing is granted on
        if uid != pod_uid:
            held.append(HeldGrant(uid, uuid, init, used, busy))
        elif state == _RELEASED:
            released = True
        else:
            raise AlreadyAllocated(pod_uid, node=on_node, state=state)
    return _NodeState(devices, held, released)


def _check_fit(node: _LockedNode, assignment: PodAssignment, state: _NodeState) -> None:
    if node.problem:
        raise StoreConflict(
            f"node {node.name} has no usable inventory: {node.problem}",
            reason=Reason.INVENTORY,
            node=node.name,
        )
    misfit = find_misfit(
        node=node.name,
        devices=state.devices,
        cordoned=node.cordoned,
        committed=committed_by_grants(state.held),
        assignment=assignment,
    )
    if misfit is not None:
        raise StoreConflict(
            misfit.message, reason=misfit.reason, node=node.name, device=misfit.device
        )


def _check_devices_known(node: _LockedNode, grants: list[_Grant], state: _NodeState) -> None:
    for item in grants:
        if item.grant.uuid not in state.devices:
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
        drop = driver.prepared(connection, "drop released", _drop_released_statement)
        driver.execute(connection, drop, [{"pod_uid": pod_uid}])
    bound_at = now if state is AllocationState.BOUND else None
    driver.execute(
        connection,
        driver.prepared(connection, "insert allocations", _insert_statement),
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
    state = _read_node_state(connection, node, pod_uid=pod_uid, uuids=assignment.device_uuids)
    _check_fit(node, assignment, state)
    _write(
        connection,
        pod_uid=pod_uid,
        namespace=namespace,
        name=name,
        node=node.name,
        grants=grants,
        state=AllocationState.RESERVED,
        now=stamp,
        released=state.released,
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
    state = _read_node_state(connection, node, pod_uid=pod_uid, uuids=assignment.device_uuids)
    _check_devices_known(node, grants, state)
    _write(
        connection,
        pod_uid=pod_uid,
        namespace=namespace,
        name=name,
        node=node.name,
        grants=grants,
        state=AllocationState.BOUND,
        now=stamp,
        released=state.released,
    )
