"""The Kunlunxin vendors' settings: HAMi's ``kunlun:`` config section."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu_extender.vendors import hami_config

_KEYS = frozenset({"resourceCountName", "resourceVCountName", "resourceVMemoryName"})


@dataclass(frozen=True, slots=True)
class KunlunConfig:
    count_resource: str = "kunlunxin.com/xpu"
    vcount_resource: str = "kunlunxin.com/vxpu"
    vmemory_resource: str = "kunlunxin.com/vxpu-memory"

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> KunlunConfig:
        section = hami_config.section(settings, "Kunlunxin", _KEYS)
        d = cls()
        return cls(
            count_resource=hami_config.name(section, "resourceCountName", d.count_resource),
            vcount_resource=hami_config.name(section, "resourceVCountName", d.vcount_resource),
            vmemory_resource=hami_config.name(section, "resourceVMemoryName", d.vmemory_resource),
        )
