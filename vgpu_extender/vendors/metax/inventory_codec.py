"""MetaX inventories as HAMi's scheduler reads them.

- ``Metax-GPU`` from node capacity ``metax-tech.com/gpu``: card ``i`` is
  ``<node>-metax-<i>``, one allocation, 65536 MiB, 100 cores (``devices_from_capacity``,
  read through the vendor's ``decode_capacity``).
- ``Metax-SGPU`` from node annotation ``metax-tech.com/node-gpu-devices``: a JSON array of
  the plugin's ``{uuid, bdf, model, totalDevCount, totalCompute, totalVRam, ...,
  numa, healthy, qosPolicy, linkZone}``, keys matched case-insensitively as Go matches
  them. ``Count`` is ``totalDevCount``, memory ``totalVRam``, cores ``totalCompute``; the
  model, QoS policy and MetaLink zone are the device's custom info.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from vgpu_extender.domain import Device, InventoryError
from vgpu_extender.domain.device import CustomInfo
from vgpu_extender.vendors import hami_capacity, hami_register
from vgpu_extender.vendors.hami_devices import go_json_string
from vgpu_extender.vendors.metax.request import GPU_WORD, SGPU_WORD

SGPU_ANNOTATION = "metax-tech.com/node-gpu-devices"
GPU_MEMORY_MIB = 65536
GPU_CORES = 100
#: Custom info keys (HAMi's ``CustomInfo`` field names) and the plugin's JSON keys.
QOS_POLICY = "QosPolicy"
MODEL = "Model"
LINK_ZONE = "LinkZone"
_CUSTOM = (("model", MODEL), ("qosPolicy", QOS_POLICY), ("linkZone", LINK_ZONE))
_INT32 = (0, 2**31 - 1)


def devices_from_capacity(
    node_name: str, capacity: Mapping[str, str], resource: str = "metax-tech.com/gpu"
) -> tuple[Device, ...]:
    """The node's whole MetaX cards, as HAMi makes them up from its capacity."""
    return hami_capacity.whole_cards(
        node_name,
        capacity,
        resource,
        tag="metax",
        memory_mib=GPU_MEMORY_MIB,
        cores=GPU_CORES,
        word=GPU_WORD,
    )


def decode_sgpus(value: str) -> tuple[Device, ...]:
    if not isinstance(value, str):
        raise InventoryError(f"sGPU annotation must be a string, not {type(value).__name__}")
    try:
        raw = json.loads(value, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise InventoryError(
            f"sGPU annotation is not valid JSON ({exc}): {value[:200]!r}"
        ) from None
    if not isinstance(raw, list) or not raw:
        raise InventoryError(f"no device found on node: {value[:200]!r}")
    devices = tuple(_sgpu(position, item) for position, item in enumerate(raw))
    hami_register.check_unique(devices)
    return devices


def encode_sgpus(devices: Iterable[Device]) -> str:
    """The plugin's JSON for these sGPUs (the fields the scheduler reads)."""
    entries = []
    for position, device in enumerate(devices):
        hami_register.check_encodable(position, device)
        parts = [
            f'"uuid":{go_json_string(device.uuid)}',
            f'"totalDevCount":{device.count}',
            f'"totalCompute":{device.cores}',
            f'"totalVRam":{device.memory_mib}',
            f'"numa":{device.numa}',
            f'"healthy":{"true" if device.healthy else "false"}',
        ]
        for key, name in _CUSTOM:
            item = device.custom(name)
            if item is not None:
                text = go_json_string(item) if isinstance(item, str) else str(item)
                parts.append(f'"{key}":{text}')
        entries.append("{" + ",".join(parts) + "}")
    return "[" + ",".join(entries) + "]"


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _sgpu(position: int, item: object) -> Device:
    if not isinstance(item, dict):
        raise InventoryError(f"sGPU #{position}: expected a JSON object, got {item!r}")
    fields = {str(key).lower(): value for key, value in item.items()}
    uuid = hami_register.check_uuid(position, fields.get("uuid"))
    where = f"sGPU #{position} ({uuid})"
    healthy = fields.get("healthy", False)
    if not isinstance(healthy, bool):
        raise InventoryError(f"{where}: field 'healthy' must be true or false, got {healthy!r}")
    info: dict[str, int | float | str | bool] = {}
    for key, name in _CUSTOM:
        value = fields.get(key.lower())
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise InventoryError(f"{where}: field {key!r} must be a string or an integer")
        info[name] = value
    custom: CustomInfo = tuple(sorted(info.items()))
    return Device(
        uuid=uuid,
        index=position,
        count=_int(where, fields, "totaldevcount"),
        memory_mib=_int(where, fields, "totalvram"),
        cores=_int(where, fields, "totalcompute"),
        type=SGPU_WORD,
        numa=_int(where, fields, "numa"),
        healthy=healthy,
        vendor=SGPU_WORD,
        custom_info=custom,
    )


def _int(where: str, fields: Mapping[str, Any], key: str) -> int:
    value = fields.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not _INT32[0] <= value <= _INT32[1]:
        raise InventoryError(f"{where}: field {key!r} must be an integer in 0..{_INT32[1]}")
    return value
