"""The longest strings the store's columns hold, checked before anything is written.

PostgreSQL refuses a value longer than its ``VARCHAR(n)`` and SQLite keeps it whatever
its length; checking here first makes both refuse it alike, with the field, the limit
and the length named (``ValueTooLong``), before the database sees it. The limits are
read from the models, so a migration that widens a column widens its check.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, String

from vgpu_extender.domain import NodeInventory
from vgpu_extender.store.errors import StoreInputError
from vgpu_extender.store.models import AllocationModel, DeviceModel, NodeModel


class ValueTooLong(StoreInputError):  # noqa: N818 - read as "refused: value too long"
    """A string longer than the store's column for it; ``limit`` is the column's size."""

    def __init__(self, *, field: str, value: str, limit: int) -> None:
        self.limit = limit
        shown = value if len(value) <= 64 else f"{value[:61]}..."
        super().__init__(
            f"{field} is {len(value)} characters long; the store holds at most {limit}",
            field=field,
            value=shown,
        )


def _length(column: ColumnElement[Any]) -> int:
    kind = column.type
    assert isinstance(kind, String) and kind.length is not None, column
    return kind.length


NODE_NAME = _length(NodeModel.__table__.c.name)
NODE_PROBLEM = _length(NodeModel.__table__.c.problem)
DEVICE_UUID = _length(DeviceModel.__table__.c.uuid)
DEVICE_VENDOR = _length(DeviceModel.__table__.c.vendor)
DEVICE_TYPE = _length(DeviceModel.__table__.c.type)
DEVICE_MODE = _length(DeviceModel.__table__.c.mode)
POD_UID = _length(AllocationModel.__table__.c.pod_uid)
POD_NAMESPACE = _length(AllocationModel.__table__.c.namespace)
POD_NAME = _length(AllocationModel.__table__.c.pod_name)


def check_length(value: str, *, field: str, limit: int) -> None:
    """Raise ``ValueTooLong`` when ``value`` does not fit a column of ``limit``."""
    if len(value) > limit:
        raise ValueTooLong(field=field, value=value, limit=limit)


def check_inventory(inventory: NodeInventory) -> None:
    """Every string of a node's inventory that the store keeps in a sized column."""
    check_length(inventory.name, field="name", limit=NODE_NAME)
    for position, device in enumerate(inventory.devices):
        where = f"devices[{position}]"
        check_length(device.uuid, field=f"{where}.uuid", limit=DEVICE_UUID)
        check_length(device.vendor, field=f"{where}.vendor", limit=DEVICE_VENDOR)
        check_length(device.type, field=f"{where}.type", limit=DEVICE_TYPE)
        check_length(device.mode, field=f"{where}.mode", limit=DEVICE_MODE)


def check_pod(*, uid: str, namespace: str, name: str) -> None:
    """A pod's identity as its allocation rows keep it."""
    check_length(uid, field="pod_uid", limit=POD_UID)
    check_length(namespace, field="namespace", limit=POD_NAMESPACE)
    check_length(name, field="pod_name", limit=POD_NAME)


def clip_problem(problem: str) -> str:
    """A node's problem as its column keeps it: a description, cut rather than refused."""
    return problem if len(problem) <= NODE_PROBLEM else f"{problem[: NODE_PROBLEM - 3]}..."
