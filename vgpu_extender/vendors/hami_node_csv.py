"""HAMi's legacy node inventory text (``DecodeNodeDevices``), which the Hygon DCU plugin
and Iluvatar's write: each device is ``id,count,devmem,devcore,type,numa,health`` with
optionally ``,index,mode`` (7 or 9 fields), followed by ``:``. Seven fields mean index 0
and mode ``hami-core``.

HAMi reads a bad number as 0 and skips a segment without a comma; here a bad number, a
bad boolean (Go's ``ParseBool`` spellings only), a repeated id or no device at all is an
``InventoryError`` naming the device, so a corrupt annotation never reads as free
devices. An empty segment (the one after the last ``:``) is skipped, as in HAMi; other
text without a comma is an error where HAMi skips it.
"""

from __future__ import annotations

from collections.abc import Iterable

from vgpu_extender.domain import Device, InventoryError
from vgpu_extender.vendors import gostrconv

#: The mode of a 7-field device.
DEFAULT_MODE = "hami-core"
_FIELDS_SHORT, _FIELDS_LONG = 7, 9
_INT32_MAX = 2**31 - 1
_SEPARATORS = frozenset(",:;")


def decode_devices(value: str, *, vendor: str) -> tuple[Device, ...]:
    """The devices of the annotation value, each with ``vendor`` as its vendor word."""
    if not isinstance(value, str):
        raise InventoryError(f"inventory annotation must be a string, not {type(value).__name__}")
    if ":" not in value:
        raise InventoryError(f"node annotations not decode successfully: no ':' in {value[:200]!r}")
    devices: list[Device] = []
    seen: set[str] = set()
    for position, segment in enumerate(value.split(":")):
        if "," not in segment:
            if segment.strip():
                raise InventoryError(f"device #{position}: no fields in {segment[:200]!r}")
            continue
        device = _device(position, segment, vendor)
        if device.uuid in seen:
            raise InventoryError(f"device id {device.uuid!r} appears more than once")
        seen.add(device.uuid)
        devices.append(device)
    if not devices:
        raise InventoryError(f"no device found on node: {value[:200]!r}")
    return tuple(devices)


def encode_devices(devices: Iterable[Device]) -> str:
    """The 9-field text, ``id,count,devmem,devcore,type,numa,health,index,mode:`` per
    device, with Go's ``FormatBool`` for health."""
    parts: list[str] = []
    for position, device in enumerate(devices):
        for name, text in (("uuid", device.uuid), ("type", device.type), ("mode", device.mode)):
            if not isinstance(text, str) or _SEPARATORS.intersection(text):
                raise InventoryError(
                    f"device #{position}: {name} must be text free of ',', ':' and ';': {text!r}"
                )
        if not device.uuid or device.uuid != device.uuid.strip():
            raise InventoryError(f"device #{position}: uuid is empty or padded: {device.uuid!r}")
        for name, number in (
            ("count", device.count),
            ("memory_mib", device.memory_mib),
            ("cores", device.cores),
            ("numa", device.numa),
            ("index", device.index),
        ):
            if (
                isinstance(number, bool)
                or not isinstance(number, int)
                or not 0 <= number <= _INT32_MAX
            ):
                raise InventoryError(
                    f"device #{position} ({device.uuid}): {name} must be in 0..{_INT32_MAX}, "
                    f"got {number!r}"
                )
        health = "true" if device.healthy else "false"
        parts.append(
            f"{device.uuid},{device.count},{device.memory_mib},{device.cores},{device.type},"
            f"{device.numa},{health},{device.index},{device.mode}:"
        )
    return "".join(parts)


def _device(position: int, segment: str, vendor: str) -> Device:
    fields = segment.split(",")
    if len(fields) not in (_FIELDS_SHORT, _FIELDS_LONG):
        raise InventoryError(
            f"device #{position}: node annotations not decode successfully: "
            f"{len(fields)} fields, expected 7 or 9: {segment[:200]!r}"
        )
    uuid = fields[0]
    if not uuid or uuid != uuid.strip():
        raise InventoryError(f"device #{position}: id is empty or padded: {uuid!r}")
    where = f"device #{position} ({uuid})"
    index, mode = 0, DEFAULT_MODE
    if len(fields) == _FIELDS_LONG:
        index = _number(where, "index", fields[7])
        mode = fields[8]
    try:
        healthy = gostrconv.parse_bool(fields[6])
    except ValueError as exc:
        raise InventoryError(f"{where}: health: {exc}") from None
    return Device(
        uuid=uuid,
        index=index,
        count=_number(where, "count", fields[1]),
        memory_mib=_number(where, "devmem", fields[2]),
        cores=_number(where, "devcore", fields[3]),
        type=fields[4],
        numa=_number(where, "numa", fields[5]),
        mode=mode,
        healthy=healthy,
        vendor=vendor,
    )


def _number(where: str, name: str, text: str) -> int:
    try:
        number = gostrconv.parse_int(text, bits=32)
    except ValueError as exc:
        raise InventoryError(f"{where}: {name}: {exc}") from None
    if number < 0:
        raise InventoryError(f"{where}: {name} must not be negative, got {number}")
    return number
