"""Many new nodes at once: a few statements for a whole batch.

``upsert_node`` goes through the ORM, one node at a time (about 7 ms a node of CPU);
the first sight of a cluster's nodes (thousands of Node objects in one scheduling
request) needs nodes the store does not hold yet written in bulk. Nodes it holds
already are handed back, for ``upsert_node``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from vgpu_extender.domain import NodeInventory
from vgpu_extender.store.database import begin_immediate
from vgpu_extender.store.errors import StoreConflict, store_operation
from vgpu_extender.store.limits import clip_problem
from vgpu_extender.store.models import Base, DeviceModel, NodeModel
from vgpu_extender.store.nodes import _validate, custom_info_column

_nodes = Base.metadata.tables["nodes"]
_devices = Base.metadata.tables["devices"]


@store_operation("insert new nodes")
def insert_new_nodes(
    session: Session,
    *,
    inventories: Sequence[NodeInventory],
    source: str,
    now: datetime | None = None,
) -> list[NodeInventory]:
    """Insert the nodes of ``inventories`` the store does not hold; return the others.

    Raises ``StoreInputError`` for a malformed inventory and ``StoreConflict`` when a
    device UUID is listed twice or already belongs to another node (nothing written).
    """
    for inventory in inventories:
        _validate(inventory, source)
    stamp = now or datetime.now(UTC)
    begin_immediate(session)
    names = [inventory.name for inventory in inventories]
    held = set(session.scalars(select(NodeModel.name).where(NodeModel.name.in_(names))))
    fresh = [inventory for inventory in inventories if inventory.name not in held]
    if not fresh:
        return list(inventories)
    owner: dict[str, str] = {}
    for inventory in fresh:
        for device in inventory.devices:
            if device.uuid in owner:
                raise StoreConflict(
                    f"device {device.uuid} is listed on nodes {owner[device.uuid]} "
                    f"and {inventory.name}",
                    node=inventory.name,
                    device=device.uuid,
                )
            owner[device.uuid] = inventory.name
    taken = session.execute(
        select(DeviceModel.uuid, NodeModel.name)
        .join(NodeModel)
        .where(DeviceModel.uuid.in_(list(owner)))
    ).first()
    if taken is not None:
        raise StoreConflict(
            f"device {taken.uuid} is already registered on node {taken.name}",
            node=owner[taken.uuid],
            device=taken.uuid,
        )
    # executemany: psycopg pipelines the rows; one giant multi-row statement (what
    # RETURNING would make) costs more to parse than it saves.
    session.execute(
        insert(_nodes),
        [
            {
                "name": inventory.name,
                "labels": dict(inventory.labels),
                "cordoned": sorted(inventory.cordoned),
                "source": source,
                "problem": clip_problem(inventory.problem) or None,
                "updated_at": stamp,
            }
            for inventory in fresh
        ],
    )
    fresh_names = [inventory.name for inventory in fresh]
    ids: dict[str, int] = {
        name: node_id
        for name, node_id in session.execute(
            select(NodeModel.name, NodeModel.id).where(NodeModel.name.in_(fresh_names))
        )
    }
    devices = [
        {
            "uuid": device.uuid,
            "node_id": ids[inventory.name],
            "index": device.index,
            "vendor": device.vendor,
            "type": device.type,
            "count": device.count,
            "memory_mib": device.memory_mib,
            "cores": device.cores,
            "numa": device.numa,
            "mode": device.mode,
            "healthy": device.healthy,
            "custom_info": custom_info_column(device),
        }
        for inventory in fresh
        for device in inventory.devices
    ]
    if devices:
        session.execute(insert(_devices), devices)
    return [inventory for inventory in inventories if inventory.name in held]
