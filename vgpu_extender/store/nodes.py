"""Node inventories: write what a node offers, read every node back.

A device that disappears from a node's inventory while pods still hold it is kept,
marked unhealthy: the pods keep counting against it and nothing new lands there.
The next inventory update after those pods are released removes it.

A node removed (its Node object deleted) while pods still hold its devices is kept
the same way, whole: the node row stays, marked absent by its ``problem``
(``NODE_ABSENT``), with its devices and the pods' rows. Nothing new lands on it; its
pods' rows are released as the pods go, and the node is forgotten once none is left.
A Node object that comes back under that name replaces the inventory and clears the
mark, and the rows still count: the GPUs its running pods hold are never handed out
twice. Marking the row rather than keeping orphaned device rows keeps one rule for
every reader: a device belongs to a node row, and a node with a ``problem`` takes no
new pod.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import Row, delete, select
from sqlalchemy.orm import Session, selectinload

from vgpu_extender.domain import Device, NodeInventory
from vgpu_extender.store.database import begin_immediate
from vgpu_extender.store.errors import StoreConflict, StoreInputError, store_operation
from vgpu_extender.store.limits import check_inventory, clip_problem
from vgpu_extender.store.models import INVENTORY_SOURCES, AllocationModel, DeviceModel, NodeModel
from vgpu_extender.store.records import LIVE_STATES

#: The ``problem`` of a node whose Node object was deleted while pods still hold its
#: devices (see the module's docstring).
NODE_ABSENT = "node object deleted while its pods still hold devices"


def _validate(inventory: NodeInventory, source: str) -> None:
    if not inventory.name:
        raise StoreInputError("node name is empty", field="name", value=inventory.name)
    check_inventory(inventory)
    if source not in INVENTORY_SOURCES:
        raise StoreInputError(
            f"inventory source must be one of {', '.join(INVENTORY_SOURCES)}",
            field="source",
            value=source,
        )
    seen: set[str] = set()
    for position, device in enumerate(inventory.devices):
        where = f"devices[{position}]"
        if not device.uuid:
            raise StoreInputError("device uuid is empty", field=f"{where}.uuid", value=device.uuid)
        if device.uuid in seen:
            raise StoreInputError("duplicate device uuid", field=f"{where}.uuid", value=device.uuid)
        seen.add(device.uuid)
        for field, value, low in (
            ("count", device.count, 1),
            ("memory_mib", device.memory_mib, 0),
            ("cores", device.cores, 0),
        ):
            if value < low:
                raise StoreInputError(
                    f"device {device.uuid} {field} must be >= {low}",
                    field=f"{where}.{field}",
                    value=value,
                )


def _copy_device(row: DeviceModel, device: Device) -> None:
    row.index = device.index
    row.vendor = device.vendor
    row.type = device.type
    row.count = device.count
    row.memory_mib = device.memory_mib
    row.cores = device.cores
    row.numa = device.numa
    row.mode = device.mode
    row.healthy = device.healthy
    row.custom_info = custom_info_column(device)


def custom_info_column(device: Device) -> dict[str, int | float | str | bool]:
    """The device's custom info as its JSON column keeps it: an object by key."""
    return dict(device.custom_info)


@store_operation("upsert node")
def upsert_node(
    session: Session, *, inventory: NodeInventory, source: str, now: datetime | None = None
) -> None:
    """Record ``inventory`` as the node's current offer, replacing the previous one."""
    _validate(inventory, source)
    stamp = now or datetime.now(UTC)
    uuids = [d.uuid for d in inventory.devices]
    if uuids:
        owners = session.execute(
            select(DeviceModel.uuid, NodeModel.name)
            .join(NodeModel)
            .where(DeviceModel.uuid.in_(uuids), NodeModel.name != inventory.name)
        ).first()
        if owners is not None:
            raise StoreConflict(
                f"device {owners.uuid} is already registered on node {owners.name}",
                node=inventory.name,
                device=owners.uuid,
            )
    node = session.scalars(
        select(NodeModel)
        .where(NodeModel.name == inventory.name)
        .options(selectinload(NodeModel.devices))
        .with_for_update()
    ).one_or_none()
    if node is None:
        node = NodeModel(name=inventory.name)
        session.add(node)
    node.labels = dict(inventory.labels)
    node.cordoned = sorted(inventory.cordoned)
    node.source = source
    node.problem = clip_problem(inventory.problem) or None
    node.updated_at = stamp

    existing = {row.uuid: row for row in node.devices}
    for device in inventory.devices:
        row = existing.pop(device.uuid, None)
        if row is None:
            row = DeviceModel(uuid=device.uuid)
            node.devices.append(row)
        _copy_device(row, device)
    if existing:
        held = set(
            session.scalars(
                select(AllocationModel.device_uuid)
                .where(
                    AllocationModel.device_uuid.in_(list(existing)),
                    AllocationModel.state.in_(LIVE_STATES),
                )
                .distinct()
            )
        )
        for uuid, row in existing.items():
            if uuid in held:
                row.healthy = False
            else:
                node.devices.remove(row)
    session.flush()


class NodeRemoval(StrEnum):
    """What ``remove_node`` did."""

    REMOVED = "removed"
    #: Kept, marked absent (``NODE_ABSENT``): pods still hold its devices.
    ABSENT = "absent"
    UNKNOWN = "unknown"


def node_source(session: Session, name: str) -> str | None:
    """Where the node's inventory came from (``api``, ``kube``, ...); None if not stored.

    Not a ``store_operation``: a driver error reaches the caller as raised (the admin
    API's handler classifies it), as it did when the caller ran this query itself.
    """
    return session.scalar(select(NodeModel.source).where(NodeModel.name == name))


@store_operation("remove node")
def remove_node(session: Session, *, name: str, now: datetime | None = None) -> NodeRemoval:
    """Forget a node and its devices, unless pods still hold some of them.

    A node whose pods still hold devices stays, marked absent: its ``problem`` becomes
    ``NODE_ABSENT``, so nothing new lands there while its pods keep their rows (and the
    node keeps them when it registers again). Forgotten, its released rows go with
    its devices.
    """
    begin_immediate(session)  # SQLite's write lock before the check the delete relies on
    node = session.scalars(
        select(NodeModel).where(NodeModel.name == name).with_for_update()
    ).one_or_none()
    if node is None:
        return NodeRemoval.UNKNOWN
    held = session.scalars(
        select(AllocationModel.id)
        .join(DeviceModel, DeviceModel.uuid == AllocationModel.device_uuid)
        .where(DeviceModel.node_id == node.id, AllocationModel.state.in_(LIVE_STATES))
        .limit(1)
    ).first()
    if held is not None:
        node.problem = NODE_ABSENT
        node.updated_at = now or datetime.now(UTC)
        session.flush()
        return NodeRemoval.ABSENT
    session.execute(delete(NodeModel).where(NodeModel.id == node.id))
    # Released rows follow their devices through ON DELETE CASCADE.
    session.expire_all()
    return NodeRemoval.REMOVED


#: The columns a device is read back from (a plain row each: at start-up the index is
#: rebuilt from every device of every node, and ORM instances cost several times more).
_DEVICE_COLUMNS = (
    DeviceModel.node_id,
    DeviceModel.uuid,
    # A row is a tuple: ``index`` and ``count`` would be its methods.
    DeviceModel.index.label("device_index"),
    DeviceModel.count.label("slots"),
    DeviceModel.memory_mib,
    DeviceModel.cores,
    DeviceModel.type,
    DeviceModel.numa,
    DeviceModel.mode,
    DeviceModel.healthy,
    DeviceModel.vendor,
    DeviceModel.custom_info,
)


def _to_device(row: Row[Any]) -> Device:
    return Device(
        uuid=row.uuid,
        index=row.device_index,
        count=row.slots,
        memory_mib=row.memory_mib,
        cores=row.cores,
        type=row.type,
        numa=row.numa,
        mode=row.mode,
        healthy=row.healthy,
        vendor=row.vendor,
        # JSON keeps ints and floats apart; the domain wants the pairs sorted by key.
        custom_info=tuple(sorted(row.custom_info.items())) if row.custom_info else (),
    )


@store_operation("load inventories")
def load_inventories(
    session: Session, *, names: Sequence[str] | None = None
) -> list[NodeInventory]:
    """Every node's inventory (or only those named), ordered by node name; devices in
    index order. Read as plain rows, nodes and devices in one query each."""
    nodes = select(
        NodeModel.id, NodeModel.name, NodeModel.labels, NodeModel.cordoned, NodeModel.problem
    ).order_by(NodeModel.name)
    devices = select(*_DEVICE_COLUMNS).order_by(
        DeviceModel.node_id, DeviceModel.index, DeviceModel.uuid
    )
    if names is not None:
        nodes = nodes.where(NodeModel.name.in_(list(names)))
        devices = devices.join(NodeModel, NodeModel.id == DeviceModel.node_id).where(
            NodeModel.name.in_(list(names))
        )
    node_rows = session.execute(nodes).all()
    by_node: dict[int, list[Device]] = {}
    for row in session.execute(devices):
        by_node.setdefault(row.node_id, []).append(_to_device(row))
    return [
        NodeInventory(
            name=row.name,
            devices=tuple(by_node.get(row.id, ())),
            labels={str(k): str(v) for k, v in row.labels.items()},
            cordoned=frozenset(row.cordoned),
            problem=row.problem or "",
        )
        for row in node_rows
    ]
