"""Enflame inventories as HAMi's scheduler reads them; both need the node's name (the
device IDs carry it).

- ``GCU`` from node capacity ``enflame.com/gcu``: card ``i`` is ``<node>-GCU-<i>``, one
  allocation, memory 100 (HAMi's unit-less whole card), 100 cores.
- ``Enflame`` (DRS) from node annotation ``enflame.com/gcu-drs-capacity``:
  ``{"devices":[{"index":"0","minor":"0","capacity":6}],"profiles":{"1g.6gb":"0",...}}``;
  each device is ``<node>-enflame-drs-<index>`` with ``capacity`` slices as its count,
  the largest profile's GB * 1024 MiB and 100 cores; its ``minor`` (default: its index),
  index and the largest profile's slices are its custom info.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TypeGuard

from vgpu_extender.domain import Device, InventoryError
from vgpu_extender.vendors import hami_capacity, hami_register
from vgpu_extender.vendors.enflame import profiles
from vgpu_extender.vendors.enflame.request import DRS_WORD, GCU_WORD

DRS_ANNOTATION = "enflame.com/gcu-drs-capacity"
GCU_MEMORY = 100
CORES = 100
MINOR = "minor"
INDEX = "index"
MAX_SLICE = "maxSlice"
_INT32_MAX = 2**31 - 1


def gcus_from_capacity(
    node_name: str, capacity: Mapping[str, str], resource: str = "enflame.com/gcu"
) -> tuple[Device, ...]:
    return hami_capacity.whole_cards(
        node_name, capacity, resource, tag="GCU", memory_mib=GCU_MEMORY, cores=CORES, word=GCU_WORD
    )


def drs_devices(node_name: str, value: str) -> tuple[Device, ...]:
    """The node's DRS GCUs from its ``enflame.com/gcu-drs-capacity`` value."""
    if not isinstance(value, str):
        raise InventoryError(f"{DRS_ANNOTATION} must be a string, not {type(value).__name__}")
    try:
        spec = json.loads(value)
    except (ValueError, RecursionError) as exc:
        raise InventoryError(f"failed to parse {DRS_ANNOTATION}: {exc}") from None
    if not isinstance(spec, dict):
        raise InventoryError(f"{DRS_ANNOTATION} must be a JSON object: {value[:200]!r}")
    table = spec.get("profiles")
    if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
        raise InventoryError(f"{DRS_ANNOTATION}: profiles must map names to IDs")
    try:
        cut = profiles.profiles_of(table)
    except ValueError:
        raise InventoryError(f"no valid drs profiles found on node {node_name}") from None
    max_slice = max(p.size for p in cut)
    max_gb = max(p.memory_gb for p in cut)
    if max_slice > _INT32_MAX or max_gb * 1024 > _INT32_MAX:
        raise InventoryError(
            f"{DRS_ANNOTATION}: a profile of {max_slice} slices or {max_gb} GB is more "
            "than a device can have"
        )
    listed = spec.get("devices")
    if not isinstance(listed, list) or not listed:
        raise InventoryError(f"no drs devices found on node {node_name}")
    hami_register.check_device_count(len(listed), DRS_ANNOTATION)
    devices = []
    for position, item in enumerate(listed):
        if not isinstance(item, dict):
            raise InventoryError(f"drs device #{position} must be a JSON object")
        index_text = item.get("index")
        index = (
            int(index_text)
            if _decimal(index_text)
            else position  # HAMi: an unreadable index is the position
        )
        slices = _capacity(item.get("capacity"))
        if slices is None:
            raise InventoryError(f"invalid drs capacity on node {node_name}")
        minor = item.get("minor")
        minor = minor.strip() if isinstance(minor, str) and minor.strip() else str(index)
        devices.append(
            Device(
                uuid=f"{node_name}-enflame-drs-{index}",
                index=index,
                count=slices,
                memory_mib=max_gb * 1024,
                cores=CORES,
                type=DRS_WORD,
                vendor=DRS_WORD,
                custom_info=((INDEX, str(index)), (MAX_SLICE, max_slice), (MINOR, minor)),
            )
        )
    # Two entries of one index would be one device id twice.
    hami_register.check_unique(devices)
    return tuple(devices)


def _decimal(text: object) -> TypeGuard[str]:
    """Whether ``text`` is a decimal number of at most 9 ASCII digits (``isdigit`` alone
    takes ``²``, which ``int`` refuses, and ``int`` refuses over 4,300 digits)."""
    return isinstance(text, str) and text.isascii() and text.isdigit() and len(text) <= 9


def _capacity(raw: object) -> int | None:
    """A slice count given as a JSON number or string, positive; None otherwise."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, str) and _decimal(raw.strip()):
        raw = int(raw.strip())
    if isinstance(raw, float) and raw.is_integer():
        raw = int(raw)
    if isinstance(raw, int) and 0 < raw <= _INT32_MAX:
        return raw
    return None
