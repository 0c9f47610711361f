"""The MetaX vendors' settings: HAMi's ``metax:`` config section."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from vgpu_extender.vendors import hami_config

#: Each resource field and the HAMi key that renames it.
_NAMES = {
    "count_resource": "resourceCountName",
    "sgpu_resource": "resourceVCountName",
    "vcore_resource": "resourceVCoreName",
    "vmemory_resource": "resourceVMemoryName",
}
_KEYS = frozenset({*_NAMES.values(), "sgpuTopologyAware"})


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
        config = hami_config.with_names(cls(), section, _NAMES)
        aware = hami_config.flag(section, "sgpuTopologyAware", config.sgpu_topology_aware)
        return replace(config, sgpu_topology_aware=aware)
