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
otherwise. The format is HAMi's registration JSON, read and written by ``hami_register``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from vgpu_extender.domain import Device
from vgpu_extender.vendors import hami_register
from vgpu_extender.vendors.ascend.chips import ChipConfig

#: The node annotation the plugin sets on every registration (``"true"``/``"false"``).
CORE_MODE_ANNOTATION = "hami-vnpu-core"
MODE_HAMI_CORE = "hami-core"
MODE_VNPU = "vnpu"


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
    word = chip.common_word
    return hami_register.decode_devices(value, vendor=word, default_type=word, mode=mode)


def encode_inventory(devices: Iterable[Device]) -> str:
    """The JSON the plugin writes: Go's field order (id, index, count, devmem, devcore,
    type, numa, health, custominfo), zero values left out, compact. The mode is the
    node's (its own annotation), so it is not written."""
    return hami_register.encode_devices(devices)
