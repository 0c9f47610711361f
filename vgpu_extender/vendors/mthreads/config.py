"""The Moore Threads vendor's settings: HAMi's ``mthreads:`` section of
``device-config.yaml`` (``resourceCountName``, ``resourceMemoryName``,
``resourceCoreName``), which renames the three resources."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu_extender.vendors import hami_config

#: HAMi's CommonWord and device type.
WORD = "Mthreads"
#: One unit of ``sgpu-memory``, in MiB.
MEMORY_UNIT_MIB = 512
#: ``sgpu-core`` units of one GPU, and ``sgpu-memory`` units the webhook gives a whole one.
CORES_PER_GPU = 16
MEMORY_UNITS_PER_GPU = 96
_NAMES = hami_config.COUNT_MEMORY_CORES
_KEYS = frozenset(_NAMES.values())


@dataclass(frozen=True, slots=True)
class MthreadsConfig:
    count_resource: str = "mthreads.com/vgpu"
    memory_resource: str = "mthreads.com/sgpu-memory"
    cores_resource: str = "mthreads.com/sgpu-core"

    @property
    def resources(self) -> frozenset[str]:
        return frozenset((self.count_resource, self.memory_resource, self.cores_resource))

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> MthreadsConfig:
        """From HAMi's section; ``ValueError`` naming a bad or unknown key and its value."""
        section = hami_config.section(settings, "Moore Threads", _KEYS)
        return hami_config.with_names(cls(), section, _NAMES)
