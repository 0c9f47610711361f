"""The Hygon vendor's settings: HAMi's ``hygon:`` section of ``device-config.yaml``
(``resourceCountName``, ``resourceMemoryName``, ``resourceCoreName``, and the chart's
``memoryFactor``, by which a memory quantity is multiplied into MiB)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from vgpu_extender.vendors import hami_config

#: HAMi's CommonWord: the request type, the pod annotation type and a substring of
#: every registered DCU type (``DCU-K100_AI``).
WORD = "DCU"
_NAMES = hami_config.COUNT_MEMORY_CORES
_KEYS = frozenset({*_NAMES.values(), "memoryFactor"})
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class HygonConfig:
    count_resource: str = "hygon.com/dcunum"
    memory_resource: str = "hygon.com/dcumem"
    cores_resource: str = "hygon.com/dcucores"
    memory_factor: int = 1

    @property
    def resources(self) -> frozenset[str]:
        return frozenset((self.count_resource, self.memory_resource, self.cores_resource))

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> HygonConfig:
        """From HAMi's section; ``ValueError`` naming a bad or unknown key and its value."""
        section = hami_config.section(settings, "Hygon", _KEYS)
        factor = section.get("memoryFactor", 1)
        if isinstance(factor, bool) or not isinstance(factor, int) or not 0 <= factor <= _INT32_MAX:
            raise ValueError(f"memoryFactor must be an integer in 0..{_INT32_MAX}: {factor!r}")
        config = hami_config.with_names(cls(), section, _NAMES)
        # 0 and 1 both mean "no scaling" (HAMi multiplies only by a factor above 1).
        return replace(config, memory_factor=max(1, factor))
