"""An Ascend chip's node inventory: ``hami.io/node-register-<CW>``, as the Ascend device
plugin writes it (a JSON array of HAMi's ``DeviceInfo``).

Keys match case-insensitively, as Go's ``encoding/json`` matches them (HAMi's own test
registers ``"ID"``, ``"Count"``, ``"Devmem"``...); a later key wins over an earlier one
for the same field. Every field is ``omitempty``: a missing ``health`` is unhealthy, a
missing ``index`` or ``numa`` is 0. ``custominfo`` (the plugin's ``NetworkID``) is kept
as sorted ``(key, value)`` pairs, a JSON integer as an int.

A missing, unreadable or empty inventory is an ``InventoryError`` (HAMi: "no device found
on node"); a field of the wrong type names the device and the field. The device mode is
the node's: ``hami-core`` when it runs HAMi's soft split, ``vnpu`` (template hard split)
otherwise.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from vgpu_extender.domain import Device, InventoryError
from vgpu_extender.domain.device import CustomInfo
from vgpu_extender.vendors.ascend.chips import ChipConfig
from vgpu_extender.vendors.hami_devices import go_json_string

#: The node annotation the plugin sets on every registration (``"true"``/``"false"``).
CORE_MODE_ANNOTATION = "hami-vnpu-core"
MODE_HAMI_CORE = "hami-core"
MODE_VNPU = "vnpu"

_INT32_MAX = 2**31 - 1
_UINT = (0, 2**63 - 1)
_NON_NEGATIVE_INT32 = (0, _INT32_MAX)
_INT64 = (-(2**63), 2**63 - 1)
#: Field name, lower-cased (how Go folds keys), to the canonical one.
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


def register_annotation(chip: ChipConfig) -> str:
    return f"hami.io/node-register-{chip.common_word}"


def node_mode(annotations: Mapping[str, str], *, default_core: bool) -> str:
    """The node's sharing mode: its ``hami-vnpu-core`` annotation (exactly ``"true"``
    for HAMi-core), else the configured default."""
    value = annotations.get(CORE_MODE_ANNOTATION)
    core = default_core if value is None else value == "true"
    return MODE_HAMI_CORE if core else MODE_VNPU


def network_id(common_word: str, index: int) -> int | None:
    """The plugin's ``NetworkID`` of the chip at ``index`` (two HCCS rings of four on
    910A/910B, one network on 910C); None for chips that register none."""
    if common_word == "Ascend910C":
        return 0
    if common_word.startswith("Ascend910"):
        return 0 if index < 4 else 1
    return None


def decode_inventory(value: str, chip: ChipConfig, *, mode: str = MODE_VNPU) -> tuple[Device, ...]:
    """The chip's devices from the annotation value; ``mode`` is the node's."""
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
    devices = tuple(_device(position, item, chip, mode) for position, item in enumerate(raw))
    seen: set[str] = set()
    for device in devices:
        if device.uuid in seen:
            raise InventoryError(f"device id {device.uuid!r} appears more than once")
        seen.add(device.uuid)
    return devices


def encode_inventory(devices: Iterable[Device]) -> str:
    """The JSON the plugin writes: Go's field order (id, index, count, devmem, devcore,
    type, numa, health, custominfo), zero values left out, compact. The mode is the
    node's (its own annotation), so it is not written."""
    encoded: list[str] = []
    for position, device in enumerate(devices):
        _check_encodable(position, device)
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
            # Go writes a map's keys sorted; custom_info is kept sorted.
            items = (
                f"{go_json_string(key)}:{_go_scalar(item)}" for key, item in device.custom_info
            )
            parts.append(',"custominfo":{' + ",".join(items) + "}")
        parts.append("}")
        encoded.append("".join(parts))
    return "[" + ",".join(encoded) + "]"


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _device(position: int, item: object, chip: ChipConfig, mode: str) -> Device:
    if not isinstance(item, _Pairs):
        raise InventoryError(f"device #{position}: expected a JSON object, got {item!r}")
    fields: dict[str, Any] = {}
    for key, value in item:
        folded = key.lower()
        if folded in _FIELDS:
            fields[folded] = value
    uuid = _uuid(position, fields.get("id"))
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
        type=device_type or chip.common_word,
        numa=_int(where, fields, "numa", _INT64),
        mode=mode,
        healthy=_bool(where, fields, "health"),
        vendor=chip.common_word,
        custom_info=_custom_info(where, fields.get("custominfo")),
    )


def _uuid(position: int, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InventoryError(
            f"device #{position}: field 'id' must be a non-empty string, got {value!r}"
        )
    # ',', ':' and ';' would break the pod annotation (``uuid,type,mem,cores:...;``).
    if "," in value or ":" in value or ";" in value or value != value.strip():
        raise InventoryError(
            f"device #{position}: field 'id' must not contain ',', ':', ';' or surrounding "
            f"spaces, got {value!r}"
        )
    return value


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
        # Only scalars are kept: the scheduler reads NetworkID and nothing nested.
        if isinstance(item, float) and not math.isfinite(item):
            raise InventoryError(f"{where}: custom info {key!r} must be finite, got {item!r}")
        if isinstance(item, bool | int | float | str):
            info[key] = item
    return tuple(sorted(info.items()))


def _check_encodable(position: int, device: Device) -> None:
    _uuid(position, device.uuid)
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


def _go_scalar(value: int | float | str | bool) -> str:
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
