"""Writing a pod's allocations: the bind-time reservation and the import of pods
placed before a restart (or by HAMi).

Both lock the node's row first, so writes to one node are serialised across
sessions, processes and replicas: ``SELECT ... FOR UPDATE`` on PostgreSQL, the
``BEGIN IMMEDIATE`` write lock on SQLite. A reservation then re-checks the fit
against what is committed on the devices it asks for (a device's grants are only
written under its node's lock); an import records a pod that already runs there, so
it is checked for over-commitment only, and refused (``ImportConflict``, nothing
written) rather than recorded over capacity.

Binds to one node queue for its lock, so ``reserve_all`` takes the pods waiting for a
node in one transaction: one lock, one read, one insert, one commit, each pod checked
against what is committed and the pods accepted before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import (
    Boolean,
    Connection,
    Integer,
    String,
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
from vgpu_extender.domain.share import ShareModels
from vgpu_extender.store import driver
from vgpu_extender.store.capacity import (
    DEFAULT_SHARES,
    HeldGrant,
    committed_by_grants,
    find_misfit,
    find_overcommits,
)
from vgpu_extender.store.database import Unit, begin_immediate
from vgpu_extender.store.errors import (
    AlreadyAllocated,
    ImportConflict,
    StoreConflict,
    StoreError,
    StoreInputError,
    name_operation,
    store_operation,
)
from vgpu_extender.store.limits import GRANT_VENDOR, check_length, check_pod
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
_NO_TEXT = cast(null(), String)
_LIVE: list[BindParameter[str]] = [
    bindparam(f"live_{i}", state) for i, state in enumerate(LIVE_STATES)
]
_INSERTED = (
    "pod_uid", "namespace", "pod_name", "node", "device_uuid", "vendor", "container_index", "init",
    "memory_mib", "cores", "state", "created_at", "updated_at", "bound_at", "released_at",
)  # fmt: skip


def _lock_node_statement() -> ClauseElement:
    return (
        select(_nodes.c.id, _nodes.c.cordoned, _nodes.c.problem)
        .where(_nodes.c.name == bindparam("name"))
        .with_for_update()
    )


def _devices_and_held_statement(uuid_count: int, pod_count: int) -> ClauseElement:
    """After the node's lock, one read: the devices asked for (parameters ``uuid_0``...),
    each with the live grants on it (a device without any comes once, with NULL grant
    columns), and then the pods' own rows (``pod_0``...) wherever they are (released
    ones, or live ones that make the bind a repeat), with NULL device columns."""
    uuids: list[BindParameter[str]] = [bindparam(f"uuid_{i}") for i in range(uuid_count)]
    pods: list[BindParameter[str]] = [bindparam(f"pod_{i}") for i in range(pod_count)]
    return union_all(
        select(
            _d.uuid, _d.count, _d.memory_mib, _d.cores, _d.healthy, _d.vendor,
            _a.pod_uid, _a.node, _a.init, _a.memory_mib, _a.cores, _a.state,
        )
        .select_from(
            _devices.outerjoin(_allocations, and_(_a.device_uuid == _d.uuid, _a.state.in_(_LIVE)))
        )
        .where(_d.node_id == bindparam("node_id"), _d.uuid.in_(uuids)),
        select(
            _a.device_uuid, _NO_INT, _NO_INT, _NO_INT, _NO_BOOL, _NO_TEXT,
            _a.pod_uid, _a.node, _a.init, _a.memory_mib, _a.cores, _a.state,
        ).where(_a.pod_uid.in_(pods)),
    )  # fmt: skip


def _padded(values: Sequence[str]) -> list[str]:
    """``values`` repeated up to a power-of-two length: an ``IN`` list is compiled once
    per length, so this bounds the statements compiled to a few per dialect."""
    size = 1
    while size < len(values):
        size *= 2
    return [*values, *[values[-1]] * (size - len(values))]


def _drop_released_statement() -> ClauseElement:
    return delete(_allocations).where(_a.pod_uid == bindparam("pod_uid"), _a.state == _RELEASED)


def _insert_statement() -> ClauseElement:
    # inline: no RETURNING of the new ids, which nothing reads.
    return insert(_allocations).values({name: bindparam(name) for name in _INSERTED}).inline()


@dataclass(frozen=True, slots=True)
class _Grant:
    #: Where the grant is in the assignment (``assignment.containers[position]``).
    position: int
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
            check_length(grant.vendor, field=f"{where}.vendor", limit=GRANT_VENDOR)
            for field, value in (("memory_mib", grant.memory_mib), ("cores", grant.cores)):
                if value < 0:
                    raise StoreInputError(
                        f"grant on {grant.uuid} is negative", field=f"{where}.{field}", value=value
                    )
            grants.append(_Grant(position, indices[position], assignment.is_init(position), grant))
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
    """What a write on a locked node reads: its devices among those asked for, every
    live grant on them, and the live and released rows of the pods being written."""

    devices: dict[str, Device]
    held: list[HeldGrant]
    #: Pods among those written that hold live rows: uid -> (node, state).
    live: dict[str, tuple[str, str]]
    #: Pods among those written that have released rows (history to drop).
    released: set[str]

    def already_allocated(self, pod_uid: str) -> AlreadyAllocated | None:
        if pod_uid not in self.live:
            return None
        node, state = self.live[pod_uid]
        return AlreadyAllocated(pod_uid, node=node, state=state)


def _read_node_state(
    connection: Connection, node: _LockedNode, *, pod_uids: Sequence[str], uuids: Sequence[str]
) -> _NodeState:
    """Read after the lock, so it is current."""
    devices: dict[str, Device] = {}
    held: list[HeldGrant] = []
    live: dict[str, tuple[str, str]] = {}
    released: set[str] = set()
    uuid_list, pod_list = _padded(uuids), _padded(pod_uids)
    statement = driver.prepared(
        connection,
        ("devices and held", len(uuid_list), len(pod_list)),
        lambda: _devices_and_held_statement(len(uuid_list), len(pod_list)),
    )
    values: dict[str, object] = {"node_id": node.id}
    values.update((f"uuid_{i}", uuid) for i, uuid in enumerate(uuid_list))
    values.update((f"pod_{i}", uid) for i, uid in enumerate(pod_list))
    rows = driver.fetch_all(connection, statement, values)
    for uuid, count, memory, cores, healthy, vendor, uid, on_node, init, used, busy, state in rows:
        if count is None:  # one of the pods' own rows
            if state == _RELEASED:
                released.add(uid)
            else:
                live[uid] = (on_node, state)
            continue
        if uuid not in devices:
            devices[uuid] = Device(
                uuid=uuid,
                count=count,
                memory_mib=memory,
                cores=cores,
                healthy=healthy,
                vendor=vendor,
            )
        if uid is not None:  # None: a device nothing is granted on
            held.append(HeldGrant(uid, uuid, init, used, busy))
    return _NodeState(devices, held, live, released)


def _unusable(node: _LockedNode) -> StoreConflict | None:
    if not node.problem:
        return None
    return StoreConflict(
        f"node {node.name} has no usable inventory: {node.problem}",
        reason=Reason.INVENTORY,
        node=node.name,
    )


def _misfit(
    shares: ShareModels,
    node: _LockedNode,
    pod: Reservation,
    devices: dict[str, Device],
    held: list[HeldGrant],
) -> StoreConflict | None:
    misfit = find_misfit(
        shares=shares,
        node=node.name,
        devices=devices,
        cordoned=node.cordoned,
        committed=committed_by_grants(held),
        assignment=pod.assignment,
        mutex=pod.mutex,
    )
    if misfit is None:
        return None
    return StoreConflict(misfit.message, reason=misfit.reason, node=node.name, device=misfit.device)


def _vendor_mismatch(grants: list[_Grant], devices: dict[str, Device]) -> StoreInputError | None:
    """A grant that names another vendor than its device's row: the row keeps the
    grant's word, which must be the device's (an unknown device is the fit's to name)."""
    for item in grants:
        device = devices.get(item.grant.uuid)
        if device is not None and item.grant.vendor != device.vendor:
            return StoreInputError(
                f"grant on device {device.uuid} names vendor {item.grant.vendor!r}; "
                f"the device is {device.vendor!r}",
                field=f"assignment.containers[{item.position}].vendor",
                value=item.grant.vendor,
            )
    return None


def _check_devices_known(node: _LockedNode, grants: list[_Grant], state: _NodeState) -> None:
    for item in grants:
        if item.grant.uuid not in state.devices:
            raise StoreConflict(
                f"device {item.grant.uuid} is not on node {node.name}",
                reason=Reason.UUID_MISMATCH,
                node=node.name,
                device=item.grant.uuid,
            )


@dataclass(frozen=True, slots=True)
class Reservation:
    """One pod's assignment to reserve; ``container_indices`` gives the pod's container
    index for each position of ``assignment.containers`` (default: the positions);
    ``mutex``: the pod asked for devices no other pod uses, re-checked here as the
    engine checked it (another replica may have given one of them meanwhile)."""

    pod_uid: str
    namespace: str
    name: str
    assignment: PodAssignment
    container_indices: Sequence[int] | None = None
    mutex: bool = False


@dataclass(frozen=True, slots=True)
class _Rows:
    """One pod's rows to insert."""

    pod: Reservation
    grants: list[_Grant]


def _write(
    connection: Connection,
    pods: Sequence[_Rows],
    *,
    state: AllocationState,
    now: datetime,
    released: set[str],
) -> None:
    drop = [{"pod_uid": rows.pod.pod_uid} for rows in pods if rows.pod.pod_uid in released]
    # Released rows are history of an earlier placement of the same pod; they would
    # collide with the new rows on (pod_uid, container_index, device_uuid).
    driver.execute(
        connection, driver.prepared(connection, "drop released", _drop_released_statement), drop
    )
    bound_at = now if state is AllocationState.BOUND else None
    driver.execute(
        connection,
        driver.prepared(connection, "insert allocations", _insert_statement),
        [
            {
                "pod_uid": rows.pod.pod_uid,
                "namespace": rows.pod.namespace,
                "pod_name": rows.pod.name,
                "node": rows.pod.assignment.node,
                "device_uuid": item.grant.uuid,
                "vendor": item.grant.vendor,
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
            for rows in pods
            for item in rows.grants
        ],
    )


def _rows_of(pod: Reservation) -> _Rows | StoreInputError:
    try:
        check_pod(uid=pod.pod_uid, namespace=pod.namespace, name=pod.name)
        grants = _grants(
            pod_uid=pod.pod_uid, assignment=pod.assignment, container_indices=pod.container_indices
        )
    except StoreInputError as exc:
        return name_operation(exc, "reserve")
    return _Rows(pod, grants)


@store_operation("reserve")
def reserve_all(
    session: Unit,
    reservations: Sequence[Reservation],
    *,
    now: datetime | None = None,
    shares: ShareModels = DEFAULT_SHARES,
) -> list[StoreError | None]:
    """Reserve several pods' assignments on one node, in order, inside the caller's
    transaction.

    Each pod is checked as ``reserve`` checks one, against what is committed and the
    pods accepted before it in ``reservations``. Returns, per reservation, ``None`` when
    its rows are written, or the error that refused it: ``StoreInputError`` for a
    malformed one, ``StoreConflict`` (``AlreadyAllocated`` included) for one that does
    not fit. A refused pod writes nothing and does not stop the others. Raises
    ``StoreInputError`` when the reservations are not all for one node.
    """
    nodes = sorted({pod.assignment.node for pod in reservations})
    if len(nodes) > 1:
        raise StoreInputError(
            "reservations written together must be for one node", field="reservations", value=nodes
        )
    pods = [_rows_of(pod) for pod in reservations]
    valid = [rows for rows in pods if isinstance(rows, _Rows)]
    if not valid:
        return [rows for rows in pods if isinstance(rows, StoreInputError)]
    stamp = aware(now, field="now")
    connection = begin_immediate(session)
    try:
        node = _lock_node(connection, nodes[0])
    except StoreConflict as exc:
        unknown = name_operation(exc, "reserve")
        return [unknown if isinstance(rows, _Rows) else rows for rows in pods]
    uids = list(dict.fromkeys(rows.pod.pod_uid for rows in valid))
    uuids = list(dict.fromkeys(u for rows in valid for u in rows.pod.assignment.device_uuids))
    state = _read_node_state(connection, node, pod_uids=uids, uuids=uuids)
    unusable = _unusable(node)
    held = list(state.held)
    outcomes: list[StoreError | None] = []
    accepted: list[_Rows] = []
    for rows in pods:
        if not isinstance(rows, _Rows):
            outcomes.append(rows)
            continue
        uid = rows.pod.pod_uid
        refusal: StoreError | None
        if any(earlier.pod.pod_uid == uid for earlier in accepted):
            refusal = AlreadyAllocated(uid, node=node.name, state=AllocationState.RESERVED.value)
        else:
            refusal = (
                state.already_allocated(uid)
                or unusable
                or _vendor_mismatch(rows.grants, state.devices)
                or _misfit(shares, node, rows.pod, state.devices, held)
            )
        if refusal is not None:
            outcomes.append(name_operation(refusal, "reserve"))
            continue
        outcomes.append(None)
        accepted.append(rows)
        held.extend(
            HeldGrant(uid, item.grant.uuid, item.init, item.grant.memory_mib, item.grant.cores)
            for item in rows.grants
        )
    _write(connection, accepted, state=AllocationState.RESERVED, now=stamp, released=state.released)
    return outcomes


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
    shares: ShareModels = DEFAULT_SHARES,
) -> None:
    """Reserve ``assignment`` for the pod, inside the caller's transaction.

    ``container_indices`` gives the pod's container index for each position of
    ``assignment.containers`` (default: the positions themselves). Raises
    ``AlreadyAllocated`` when the pod holds live allocations, ``StoreConflict`` when the
    assignment no longer fits the node's committed allocations. Nothing is written
    unless everything fits.
    """
    pod = Reservation(pod_uid, namespace, name, assignment, container_indices)
    (refusal,) = reserve_all(session, [pod], now=now, shares=shares)
    if refusal is not None:
        raise refusal


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
    shares: ShareModels = DEFAULT_SHARES,
) -> None:
    """Record, as bound, an assignment a pod already runs with (found in its annotations).

    Under the node's lock the pod is checked against what the store holds on its
    devices: a pod that would over-commit one (its devices handed to another pod
    meanwhile: a node deleted and registered again, a Binding whose answer was lost)
    raises ``ImportConflict`` naming the devices and the pods holding them, and nothing
    is written. Health, cordons and the node's problem do not refuse an import: they
    keep new pods away, and this pod is already there. Raises ``AlreadyAllocated`` when
    the pod already has live rows, ``StoreConflict`` when the node or a device is
    unknown.
    """
    rows = _rows_of(Reservation(pod_uid, namespace, name, assignment, container_indices))
    if isinstance(rows, StoreInputError):
        raise rows
    stamp = aware(now, field="now")
    connection = begin_immediate(session)
    node = _lock_node(connection, assignment.node)
    state = _read_node_state(connection, node, pod_uids=[pod_uid], uuids=assignment.device_uuids)
    already = state.already_allocated(pod_uid)
    if already is not None:
        raise already
    _check_devices_known(node, rows.grants, state)
    mismatch = _vendor_mismatch(rows.grants, state.devices)
    if mismatch is not None:
        raise mismatch
    misfits = find_overcommits(
        shares=shares,
        node=node.name,
        devices=state.devices,
        committed=committed_by_grants(state.held),
        assignment=assignment,
    )
    if misfits:
        devices = tuple(m.device for m in misfits)
        holders = tuple(sorted({g.pod_uid for g in state.held if g.device_uuid in devices}))
        raise ImportConflict(
            "; ".join(m.message for m in misfits),
            pod_uid=pod_uid,
            node=node.name,
            devices=devices,
            pods=holders,
            reason=misfits[0].reason,
        )
    _write(connection, [rows], state=AllocationState.BOUND, now=stamp, released=state.released)
