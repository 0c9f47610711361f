"""The longest strings the store's columns hold, checked before anything is written.

PostgreSQL refuses a value longer than its ``VARCHAR(n)`` and SQLite keeps it whatever
its length; checking here first makes both refuse it alike, with the field, the limit
and the length named (``ValueTooLong``), before the database sees it. The limits are
read from the models, so a migration that widens a column widens its check.

A device's custom info (a JSON column) is bounded here too: a few short entries of
finite numbers, booleans and short strings, so one node's registration cannot fill
the store, and every backend reads back what was written.
"""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import ColumnElement, String

from vgpu_extender.domain import Device, NodeInventory
from vgpu_extender.store.errors import StoreInputError
from vgpu_extender.store.models import AllocationModel, DeviceModel, NodeModel


class ValueTooLong(StoreInputError):  # noqa: N818 - read as "refused: value too long"
    """A string longer than the store's column for it; ``limit`` is the column's size.
    ``what`` names the value in the message (default: the field)."""

    def __init__(self, *, field: str, value: str, limit: int, what: str = "") -> None:
        self.limit = limit
        shown = value if len(value) <= 64 else f"{value[:61]}..."
        super().__init__(
            f"{what or field} is {len(value)} characters long; the store holds at most {limit}",
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
GRANT_VENDOR = _length(AllocationModel.__table__.c.vendor)

#: A device's custom info: at most this many entries, keys and string values at most
#: this long, integers within 64 bits (what other readers of the JSON decode).
CUSTOM_INFO_ENTRIES = 16
CUSTOM_INFO_KEY = 64
CUSTOM_INFO_TEXT = 256
_INT_RANGE = range(-(2**63), 2**63)


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
        check_custom_info(device, where=where)


def _custom_refused(device: Device, field: str, problem: str, value: object) -> StoreInputError:
    return StoreInputError(f"device {device.uuid} custom info {problem}", field=field, value=value)


def check_custom_info(device: Device, *, where: str) -> None:
    """The device's custom info fits the store: few entries, short distinct keys, and
    values that are finite numbers, booleans or short strings."""
    field = f"{where}.custom_info"
    entries = device.custom_info
    if len(entries) > CUSTOM_INFO_ENTRIES:
        raise _custom_refused(
            device,
            field,
            f"has {len(entries)} entries; at most {CUSTOM_INFO_ENTRIES}",
            len(entries),
        )
    seen: set[str] = set()
    for key, value in entries:
        if not isinstance(key, str) or not key:
            raise _custom_refused(device, field, "key must be a non-empty string", key)
        if len(key) > CUSTOM_INFO_KEY:
            raise ValueTooLong(
                field=field,
                value=key,
                limit=CUSTOM_INFO_KEY,
                what=f"device {device.uuid} custom info key",
            )
        if key in seen:
            raise _custom_refused(device, f"{field}.{key}", "key is listed twice", key)
        seen.add(key)
        _check_custom_value(device, f"{field}.{key}", key, value)


def _check_custom_value(device: Device, field: str, key: str, value: object) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, str):
        if len(value) > CUSTOM_INFO_TEXT:
            raise ValueTooLong(
                field=field,
                value=value,
                limit=CUSTOM_INFO_TEXT,
                what=f"device {device.uuid} custom info {key}",
            )
        return
    if isinstance(value, int):
        if value not in _INT_RANGE:
            raise _custom_refused(device, field, "integer is outside 64 bits", value)
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _custom_refused(device, field, "number must be finite", value)
        return
    raise _custom_refused(
        device,
        field,
        f"value must be a number, boolean or string, not {type(value).__name__}",
        value,
    )


def check_pod(*, uid: str, namespace: str, name: str) -> None:
    """A pod's identity as its allocation rows keep it."""
    check_length(uid, field="pod_uid", limit=POD_UID)
    check_length(namespace, field="namespace", limit=POD_NAMESPACE)
    check_length(name, field="pod_name", limit=POD_NAME)


def clip_problem(problem: str) -> str:
    """A node's problem as its column keeps it: a description, cut rather than refused."""
    return problem if len(problem) <= NODE_PROBLEM else f"{problem[: NODE_PROBLEM - 3]}..."
