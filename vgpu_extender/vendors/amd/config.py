"""The AMD vendor's settings: the resource names of HAMi's ``amd:`` config section."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu_extender.vendors import hami_config

_NAMES = hami_config.COUNT_MEMORY_CORES
_KEYS = frozenset(_NAMES.values())


@dataclass(frozen=True, slots=True)
class AmdConfig:
    """``amd.com/gpu`` (count), ``amd.com/gpumem`` (MiB per GPU, default the whole card)
    and ``amd.com/gpucores`` (percent of the GPU's compute units, default 100)."""

    count_resource: str = "amd.com/gpu"
    memory_resource: str = "amd.com/gpumem"
    cores_resource: str = "amd.com/gpucores"

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> AmdConfig:
        section = hami_config.section(settings, "AMD", _KEYS)
        return hami_config.with_names(cls(), section, _NAMES)
