"""The Kunlunxin vendors' settings: HAMi's ``kunlun:`` config section."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu_extender.vendors import hami_config

#: Each resource field and the HAMi key that renames it.
_NAMES = {
    "count_resource": "resourceCountName",
    "vcount_resource": "resourceVCountName",
    "vmemory_resource": "resourceVMemoryName",
}
_KEYS = frozenset(_NAMES.values())


@dataclass(frozen=True, slots=True)
class KunlunConfig:
    count_resource: str = "kunlunxin.com/xpu"
    vcount_resource: str = "kunlunxin.com/vxpu"
    vmemory_resource: str = "kunlunxin.com/vxpu-memory"

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> KunlunConfig:
        section = hami_config.section(settings, "Kunlunxin", _KEYS)
        return hami_config.with_names(cls(), section, _NAMES)
