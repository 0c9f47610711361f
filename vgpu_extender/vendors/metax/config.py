"""The MetaX vendors' settings: HAMi's ``metax:`` config section."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu_extender.vendors import hami_config

_KEYS = frozenset(
    {
        "resourceCountName",
        "resourceVCountName",
        "resourceVCoreName",
        "resourceVMemoryName",
        "sgpuTopologyAware",
    }
)


@dataclass(frozen=True, slots=True)
class MetaxConfig:
    """Whole GPUs ``metax-tech.com/gpu``; sGPUs ``metax-tech.com/sgpu`` with
    ``metax-tech.com/vcore`` (percent) and ``metax-tech.com/vmemory`` (GiB without a
    unit); ``sgpu_topology_aware``: the default of the pod annotation that asks for a
    MetaLink-aware score (the chart's ``"false"``)."""

    count_resource: str = "metax-tech.com/gpu"
    sgpu_resource: str = "metax-tech.com/sgpu"
    vcore_resource: str = "metax-tech.com/vcore"
    vmemory_resource: str = "metax-tech.com/vmemory"
    sgpu_topology_aware: bool = False

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> MetaxConfig:
        section = hami_config.section(settings, "MetaX", _KEYS)
        d = cls()
        return cls(
            count_resource=hami_config.name(section, "resourceCountName", d.count_resource),
            sgpu_resource=hami_config.name(section, "resourceVCountName", d.sgpu_resource),
            vcore_resource=hami_config.name(section, "resourceVCoreName", d.vcore_resource),
            vmemory_resource=hami_config.name(section, "resourceVMemoryName", d.vmemory_resource),
            sgpu_topology_aware=hami_config.flag(
                section, "sgpuTopologyAware", d.sgpu_topology_aware
            ),
        )
