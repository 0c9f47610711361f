"""The Cambricon vendor's settings: HAMi's ``cambricon:`` section of
``device-config.yaml`` (``resourceCountName``, ``resourceMemoryName``,
``resourceCoreName``), which renames the three resources.

The defaults are HAMi's chart's (``mluResourceName: cambricon.com/vmlu``); HAMi's flag
default and its tests name the count ``cambricon.com/mlu``, which the section may set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu_extender.vendors import hami_config

#: HAMi's CommonWord, device type and pod annotation type.
WORD = "MLU"
#: One memory unit of ``…smlu.vmemory``, in MiB (HAMi's ``MemoryFactor``).
MEMORY_UNIT_MIB = 256
_NAMES = hami_config.COUNT_MEMORY_CORES
_KEYS = frozenset(_NAMES.values())


@dataclass(frozen=True, slots=True)
class CambriconConfig:
    count_resource: str = "cambricon.com/vmlu"
    memory_resource: str = "cambricon.com/mlu.smlu.vmemory"
    cores_resource: str = "cambricon.com/mlu.smlu.vcore"

    @property
    def resources(self) -> frozenset[str]:
        return frozenset((self.count_resource, self.memory_resource, self.cores_resource))

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> CambriconConfig:
        """From HAMi's section; ``ValueError`` naming a bad or unknown key and its value."""
        section = hami_config.section(settings, "Cambricon", _KEYS)
        return hami_config.with_names(cls(), section, _NAMES)
