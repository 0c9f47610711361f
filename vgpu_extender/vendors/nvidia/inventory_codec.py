"""HAMi's node inventory annotation (``hami.io/node-nvidia-register``), both spellings.

Since HAMi v2.8 the device plugin writes a JSON array of ``DeviceInfo`` with Go's
``omitempty`` on every field, so index 0, NUMA 0 and ``health: false`` are simply absent
(a missing ``health`` means unhealthy). Older plugins, and HAMi's other vendors, write
``id,count,devmem,devcore,type,numa,health[,index,mode]`` per device, each ending in
``:``. Both are read; only JSON is written, byte for byte as the Go plugin writes it, so
an unchanged inventory written back is an unchanged annotation.

Garbage raises ``InventoryError`` naming the device, the field and the value: HAMi
silently reads a bad number as 0, which would make a device look empty or full.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from vgpu_extender.domain import Device, InventoryError
from vgpu_extender.domain.device import DEFAULT_MODE
from vgpu_extender.vendors import gostrconv
from vgpu_extender.vendors.hami_devices import go_json_string
from vgpu_extender.vendors.hami_register import check_encodable, check_unique, check_uuid

if TYPE_CHECKING:
    from vgpu_extender.vendors.nvidia.inventory_wire import WireDevice

_INT32_MAX = 2**31 - 1
_INT64 = (-(2**63), 2**63 - 1)
_UINT = (0, 2**63 - 1)
_NON_NEGATIVE_INT32 = (0, _INT32_MAX)


def decode_inventory(value: str, *, vendor: str = "NVIDIA") -> tuple[Device, ...]:
    """Devices from the annotation value, JSON or legacy form; ``""`` and ``[]`` give ()."""
    if not isinstance(value, str):
        raise InventoryError(f"inventory annotation must be a string, not {type(value).__name__}")
    text = value.strip()
    if not text:
        return ()
    is_json = text[0] in "[{" or text == "null"
    devices = _decode_json(text, vendor) if is_json else _decode_legacy(text, vendor)
    check_unique(devices)
    return devices


def encode_inventory(devices: Iterable[Device]) -> str:
    """The JSON form, keys in the plugin's order (id, index, count, devmem, devcore, type,
    numa, mode, health), zero values omitted, compact separators."""
    encoded: list[str] = []
    for position, device in enumerate(devices):
        # NVIDIA's JSON has no custom info, so HAMi's shared check leaves it out too.
        check_encodable(position, replace(device, custom_info=()) if device.custom_info else device)
        parts = ['{"id":', go_json_string(device.uuid)]
        if device.index:
            parts.append(f',"index":{device.index}')
        if device.count:
            parts.append(f',"count":{device.count}')
        if device.memory_mib:
            parts.append(f',"devmem":{device.memory_mib}')
        if device.cores:
            parts.append(f',"devcore":{device.cores}')
        if device.type:
            parts += [',"type":', go_json_string(device.type)]
        if device.numa:
            parts.append(f',"numa":{device.numa}')
        if device.mode:
            parts += [',"mode":', go_json_string(device.mode)]
        if device.healthy:
            parts.append(',"health":true')
        parts.append("}")
        encoded.append("".join(parts))
    return "[" + ",".join(encoded) + "]"


def decode_cordon(value: str) -> frozenset[str]:
    """Device UUIDs from ``hami.io/device-cordon`` (comma list, items trimmed)."""
    if not isinstance(value, str):
        raise InventoryError(f"cordon annotation must be a string, not {type(value).__name__}")
    return frozenset(item.strip() for item in value.split(",") if item.strip())


# -- JSON ------------------------------------------------------------------------------


def _decode_json(text: str, vendor: str) -> tuple[Device, ...]:
    # Imported on the first decode: the node agent only encodes, and ships without msgspec.
    import msgspec

    from vgpu_extender.vendors.nvidia.inventory_wire import WIRE_DEVICES

    try:
        wire = WIRE_DEVICES.decode(text)
    except msgspec.DecodeError:
        pass  # not that shape: the field-by-field path below names what is wrong
    else:
        if wire is None:
            return ()
        return tuple(_device_from_wire(position, d, vendor) for position, d in enumerate(wire))
    try:
        raw = msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        raise InventoryError(
            f"inventory annotation is not valid JSON ({exc}): {text[:200]!r}"
        ) from None
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InventoryError(
            f"inventory annotation must be a JSON array of devices: {text[:200]!r}"
        )
    return tuple(_device_from_json(position, item, vendor) for position, item in enumerate(raw))


def _device_from_json(position: int, item: object, vendor: str) -> Device:
    if not isinstance(item, Mapping):
        raise InventoryError(f"device #{position}: expected a JSON object, got {item!r}")
    uuid = check_uuid(position, item.get("id"))
    where = f"device #{position} ({uuid})"
    return Device(
        uuid=uuid,
        index=_json_int(where, item, "index", _UINT),
        count=_json_int(where, item, "count", _NON_NEGATIVE_INT32),
        memory_mib=_json_int(where, item, "devmem", _NON_NEGATIVE_INT32),
        cores=_json_int(where, item, "devcore", _NON_NEGATIVE_INT32),
        type=_json_str(where, item, "type") or "",
        numa=_json_int(where, item, "numa", _INT64),
        mode=_json_str(where, item, "mode") or DEFAULT_MODE,
        healthy=_json_bool(where, item, "health"),
        vendor=vendor,
    )


def _device_from_wire(position: int, item: WireDevice, vendor: str) -> Device:
    """As ``_device_from_json``, for a device whose field types are already checked."""
    uuid = check_uuid(position, item.id)
    index, count, memory, cores, numa = (
        item.index or 0,
        item.count or 0,
        item.devmem or 0,
        item.devcore or 0,
        item.numa or 0,
    )
    # One test for the usual case; the field is named only when one is out of bounds.
    if not (
        0 <= index <= _UINT[1]
        and 0 <= count <= _INT32_MAX
        and 0 <= memory <= _INT32_MAX
        and 0 <= cores <= _INT32_MAX
        and _INT64[0] <= numa <= _INT64[1]
    ):
        where = f"device #{position} ({uuid})"
        _bounded(where, "index", index, _UINT)
        _bounded(where, "count", count, _NON_NEGATIVE_INT32)
        _bounded(where, "devmem", memory, _NON_NEGATIVE_INT32)
        _bounded(where, "devcore", cores, _NON_NEGATIVE_INT32)
        _bounded(where, "numa", numa, _INT64)
    return Device(
        uuid=uuid,
        index=index,
        count=count,
        memory_mib=memory,
        cores=cores,
        type=item.type or "",
        numa=numa,
        mode=item.mode or DEFAULT_MODE,
        healthy=bool(item.health),
        vendor=vendor,
    )


def _bounded(where: str, key: str, value: int, bounds: tuple[int, int]) -> int:
    if not bounds[0] <= value <= bounds[1]:
        raise InventoryError(
            f"{where}: field {key!r} must be in {bounds[0]}..{bounds[1]}, got {value!r}"
        )
    return value


def _json_int(where: str, item: Mapping[str, Any], key: str, bounds: tuple[int, int]) -> int:
    value = item.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise InventoryError(f"{where}: field {key!r} must be an integer, got {value!r}")
    if not bounds[0] <= value <= bounds[1]:
        raise InventoryError(
            f"{where}: field {key!r} must be in {bounds[0]}..{bounds[1]}, got {value!r}"
        )
    return value


def _json_str(where: str, item: Mapping[str, Any], key: str) -> str | None:
    value = item.get(key)
    if value is not None and not isinstance(value, str):
        raise InventoryError(f"{where}: field {key!r} must be a string, got {value!r}")
    return value


def _json_bool(where: str, item: Mapping[str, Any], key: str) -> bool:
    value = item.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InventoryError(f"{where}: field {key!r} must be true or false, got {value!r}")
    return value


# -- legacy CSV ------------------------------------------------------------------------

_LEGACY_FIELDS = ("id", "count", "devmem", "devcore", "type", "numa", "health", "index", "mode")


def _decode_legacy(text: str, vendor: str) -> tuple[Device, ...]:
    devices: list[Device] = []
    for position, segment in enumerate(s for s in text.split(":") if s.strip()):
        fields = segment.split(",")
        if len(fields) not in (7, 9):
            raise InventoryError(
                f"device #{position}: legacy inventory needs 7 or 9 comma-separated fields "
                f"(id,count,devmem,devcore,type,numa,health[,index,mode]), got {len(fields)}: "
                f"{segment!r}"
            )
        uuid = check_uuid(position, fields[0])
        where = f"device #{position} ({uuid})"
        mode = DEFAULT_MODE
        index = 0
        if len(fields) == 9:
            index = _legacy_int(where, fields, 7, 64, _UINT)
            mode = fields[8] or DEFAULT_MODE
        try:
            healthy = gostrconv.parse_bool(fields[6])
        except ValueError:
            raise InventoryError(
                f"{where}: field 'health' must be true or false, got {fields[6]!r}"
            ) from None
        devices.append(
            Device(
                uuid=uuid,
                index=index,
                count=_legacy_int(where, fields, 1, 32, _NON_NEGATIVE_INT32),
                memory_mib=_legacy_int(where, fields, 2, 32, _NON_NEGATIVE_INT32),
                cores=_legacy_int(where, fields, 3, 32, _NON_NEGATIVE_INT32),
                type=fields[4],
                numa=_legacy_int(where, fields, 5, 64, _INT64),
                mode=mode,
                healthy=healthy,
                vendor=vendor,
            )
        )
    return tuple(devices)


def _legacy_int(
    where: str, fields: list[str], position: int, bits: int, bounds: tuple[int, int]
) -> int:
    name = _LEGACY_FIELDS[position]
    try:
        value = gostrconv.parse_int(fields[position], bits=bits)
    except ValueError:
        raise InventoryError(
            f"{where}: field {name!r} must be an integer, got {fields[position]!r}"
        ) from None
    if not bounds[0] <= value <= bounds[1]:
        raise InventoryError(
            f"{where}: field {name!r} must be in {bounds[0]}..{bounds[1]}, got {value}"
        )
    return value
