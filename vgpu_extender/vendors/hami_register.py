"""HAMi's node registration JSON (a list of ``DeviceInfo``), for any vendor whose node
agent writes one (AMD's ``hami.io/node-amd-register``, Kunlun vXPU's
``hami.io/node-register-xpu``), and the standalone inventory form of the vendors whose
scheduler reads node capacity instead.

Keys match case-insensitively, as Go's ``encoding/json`` matches them; a later key wins
over an earlier one for the same field. Every field is ``omitempty``: a missing
``health`` is unhealthy, a missing ``index`` or ``numa`` is 0. ``custominfo`` keeps its
scalar entries as sorted ``(key, value)`` pairs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from vgpu_extender.domain import Device, InventoryError, RequestError
from vgpu_extender.domain.device import DEFAULT_MODE, CustomInfo
from vgpu_extender.domain.quantity import quantity_to_int
from vgpu_extender.vendors.hami_devices import go_json_string

_INT32_MAX = 2**31 - 1
_UINT = (0, 2**63 - 1)
_NON_NEGATIVE_INT32 = (0, _INT32_MAX)
_INT64 = (-(2**63), 2**63 - 1)
_FIELDS = frozenset(
    {
        "id",
        "index",
        "count",
        "devmem",
        "devcore",
        "type",
        "numa",
        "mode",
        "migprofiles",
        "migtemplate",
        "health",
        "devicevendor",
        "custominfo",
    }
)


class _Pairs(list[tuple[str, Any]]):
    """A JSON object as its (key, value) pairs in document order."""


def decode_devices(
    value: str, *, vendor: str, default_type: str = "", mode: str = DEFAULT_MODE
) -> tuple[Device, ...]:
    """The devices of a registration value; each gets ``vendor`` as its word, its own
    ``type`` (``default_type`` when it has none) and ``mode``. A missing, unreadable or
    empty list is an ``InventoryError`` (HAMi: "no device found on node")."""
    if not isinstance(value, str):
        raise InventoryError(f"inventory annotation must be a string, not {type(value).__name__}")
    text = value.strip()
    if not text:
        raise InventoryError("no device found on node: the inventory annotation is empty")
    try:
        raw = json.loads(text, object_pairs_hook=_Pairs, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise InventoryError(
            f"inventory annotation is not valid JSON ({exc}): {text[:200]!r}"
        ) from None
    if raw is None or (isinstance(raw, list) and not isinstance(raw, _Pairs) and not raw):
        raise InventoryError(f"no device found on node: {text[:200]!r}")
    if isinstance(raw, _Pairs) or not isinstance(raw, list):
        raise InventoryError(
            f"inventory annotation must be a JSON array of devices: {text[:200]!r}"
        )
    devices = tuple(
        _device(position, item, vendor, default_type, mode) for position, item in enumerate(raw)
    )
    check_unique(devices)
    return devices


def encode_devices(devices: Iterable[Device]) -> str:
    """The JSON a node agent writes: Go's field order (id, index, count, devmem, devcore,
    type, numa, health, custominfo), zero values left out, compact."""
    encoded: list[str] = []
    for position, device in enumerate(devices):
        check_encodable(position, device)
        parts = ['{"id":', go_json_string(device.uuid)]
        for key, number in (
            ("index", device.index),
            ("count", device.count),
            ("devmem", device.memory_mib),
            ("devcore", device.cores),
        ):
            if number:
                parts.append(f',"{key}":{number}')
        if device.type:
            parts += [',"type":', go_json_string(device.type)]
        if device.numa:
            parts.append(f',"numa":{device.numa}')
        if device.healthy:
            parts.append(',"health":true')
        if device.custom_info:
            items = (f"{go_json_string(key)}:{_scalar(item)}" for key, item in device.custom_info)
            parts.append(',"custominfo":{' + ",".join(items) + "}")
        parts.append("}")
        encoded.append("".join(parts))
    return "[" + ",".join(encoded) + "]"


#: The most devices one node's capacity may list: a count past it is refused before a
#: device is made (a hostile or broken Node object would otherwise cost hours and the
#: memory of millions of devices).
MOST_DEVICES_PER_NODE = 256


def capacity_count(capacity: Mapping[str, str], resource: str) -> int:
    """A device count from node capacity; absent is 0, unreadable or over
    ``MOST_DEVICES_PER_NODE`` an ``InventoryError``."""
    raw = capacity.get(resource)
    if raw is None:
        return 0
    try:
        count = quantity_to_int(raw, field=resource)
    except RequestError as exc:
        raise InventoryError(f"node capacity {resource}: {exc}") from None
    return check_device_count(count, resource)


def check_device_count(count: int, resource: str) -> int:
    """``count`` devices, or an ``InventoryError`` naming ``resource`` when it is more
    than one node can have."""
    if count > MOST_DEVICES_PER_NODE:
        raise InventoryError(
            f"node capacity {resource}: {count} devices, more than the "
            f"{MOST_DEVICES_PER_NODE} one node may have"
        )
    return count


def check_unique(devices: Iterable[Device]) -> None:
    seen: set[str] = set()
    for device in devices:
        if device.uuid in seen:
            raise InventoryError(f"device id {device.uuid!r} appears more than once")
        seen.add(device.uuid)


def check_uuid(position: int, value: object) -> str:
    """A device id usable in HAMi's pod encoding (no ``,``, ``:``, ``;``, no padding)."""
    if not isinstance(value, str) or not value.strip():
        raise InventoryError(
            f"device #{position}: field 'id' must be a non-empty string, got {value!r}"
        )
    if "," in value or ":" in value or ";" in value or value != value.strip():
        raise InventoryError(
            f"device #{position}: field 'id' must not contain ',', ':', ';' or surrounding "
            f"spaces, got {value!r}"
        )
    return value


def check_encodable(position: int, device: Device) -> None:
    check_uuid(position, device.uuid)
    where = f"device #{position} ({device.uuid})"
    for name, value, bounds in (
        ("index", device.index, _UINT),
        ("count", device.count, _NON_NEGATIVE_INT32),
        ("memory_mib", device.memory_mib, _NON_NEGATIVE_INT32),
        ("cores", device.cores, _NON_NEGATIVE_INT32),
        ("numa", device.numa, _INT64),
    ):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InventoryError(f"{where}: {name} must be an integer, got {value!r}")
        if not bounds[0] <= value <= bounds[1]:
            raise InventoryError(
                f"{where}: {name} must be in {bounds[0]}..{bounds[1]}, got {value}"
            )
    for key, item in device.custom_info:
        if isinstance(item, float) and not math.isfinite(item):
            raise InventoryError(f"{where}: custom info {key!r} must be finite, got {item!r}")


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _device(position: int, item: object, vendor: str, default_type: str, mode: str) -> Device:
    if not isinstance(item, _Pairs):
        raise InventoryError(f"device #{position}: expected a JSON object, got {item!r}")
    fields: dict[str, Any] = {}
    for key, value in item:
        folded = key.lower()
        if folded in _FIELDS:
            fields[folded] = value
    uuid = check_uuid(position, fields.get("id"))
    where = f"device #{position} ({uuid})"
    device_type = _str(where, fields, "type")
    _str(where, fields, "devicevendor")
    _str(where, fields, "mode")
    return Device(
        uuid=uuid,
        index=_int(where, fields, "index", _UINT),
        count=_int(where, fields, "count", _NON_NEGATIVE_INT32),
        memory_mib=_int(where, fields, "devmem", _NON_NEGATIVE_INT32),
        cores=_int(where, fields, "devcore", _NON_NEGATIVE_INT32),
        type=device_type or default_type,
        numa=_int(where, fields, "numa", _INT64),
        mode=mode,
        healthy=_bool(where, fields, "health"),
        vendor=vendor,
        custom_info=_custom_info(where, fields.get("custominfo")),
    )


def _int(where: str, fields: Mapping[str, Any], key: str, bounds: tuple[int, int]) -> int:
    value = fields.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise InventoryError(f"{where}: field {key!r} must be an integer, got {value!r}")
    if not bounds[0] <= value <= bounds[1]:
        raise InventoryError(
            f"{where}: field {key!r} must be in {bounds[0]}..{bounds[1]}, got {value!r}"
        )
    return value


def _str(where: str, fields: Mapping[str, Any], key: str) -> str:
    value = fields.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InventoryError(f"{where}: field {key!r} must be a string, got {value!r}")
    return value


def _bool(where: str, fields: Mapping[str, Any], key: str) -> bool:
    value = fields.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InventoryError(f"{where}: field {key!r} must be true or false, got {value!r}")
    return value


def _custom_info(where: str, value: object) -> CustomInfo:
    if value is None:
        return ()
    if not isinstance(value, _Pairs):
        raise InventoryError(f"{where}: field 'custominfo' must be a JSON object, got {value!r}")
    info: dict[str, int | float | str | bool] = {}
    for key, item in value:
        if isinstance(item, float) and not math.isfinite(item):
            raise InventoryError(f"{where}: custom info {key!r} must be finite, got {item!r}")
        if isinstance(item, bool | int | float | str):
            info[key] = item
    return tuple(sorted(info.items()))


def _scalar(value: int | float | str | bool) -> str:
    """A custom-info value as Go's encoding/json writes it (numbers arrive as float64)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        if 1e-6 <= abs(value) < 1e21:
            return format(Decimal(repr(value)), "f")
        mantissa, exponent = repr(value).split("e")
        sign = exponent[0] if exponent[0] in "+-" else "+"
        return f"{mantissa}e{sign}{exponent.lstrip('+-').lstrip('0') or '0'}"
    return go_json_string(value)
