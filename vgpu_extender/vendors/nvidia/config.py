"""Names and defaults of the NVIDIA vendor, as HAMi's ``nvidia:`` device config has them.

Every resource name and annotation key is a field, so another vendor that shares HAMi's
conventions (or a renamed resource, which HAMi's ConfigMap allows) reuses the machinery
with a different config instead of different code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_NODE_POLICIES = frozenset({"binpack", "spread", "fragmentation", "label-priority"})
_DEVICE_POLICIES = frozenset({"binpack", "spread", "fragmentation"})
#: HAMi's gpu-policy chain items we accept in the annotation but do not order by
#: (``mutex`` is a filter: the request's ``ContainerRequest.mutex``).
_ADVISORY_DEVICE_POLICIES = frozenset({"numa", "mutex", "topology-aware"})


@dataclass(frozen=True, slots=True)
class NvidiaConfig:
    """Resource names, annotation keys and request defaults.

    ``default_memory_mib`` 0 means 100 % of each device's memory when a container gives
    only a device count; ``default_cores`` applies when cores are absent and HAMi's
    webhook would not have made the request exclusive. ``split_count`` is the number of
    allocations one device holds when an inventory does not say.
    """

    # Resources.
    count_resource: str = "nvidia.com/gpu"
    memory_resource: str = "nvidia.com/gpumem"
    memory_percent_resource: str = "nvidia.com/gpumem-percentage"
    cores_resource: str = "nvidia.com/gpucores"
    priority_resource: str = "nvidia.com/priority"
    # Pod annotations a user sets.
    use_type_annotation: str = "nvidia.com/use-gputype"
    avoid_type_annotation: str = "nvidia.com/nouse-gputype"
    use_uuid_annotation: str = "nvidia.com/use-gpuuuid"
    avoid_uuid_annotation: str = "nvidia.com/nouse-gpuuuid"
    numa_bind_annotation: str = "nvidia.com/numa-bind"
    node_policy_annotation: str = "hami.io/node-scheduler-policy"
    device_policy_annotation: str = "hami.io/gpu-scheduler-policy"
    # Node annotations.
    register_annotation: str = "hami.io/node-nvidia-register"
    cordon_annotation: str = "hami.io/device-cordon"
    # Pod annotations written at bind.
    node_annotation: str = "hami.io/vgpu-node"
    to_allocate_annotation: str = "hami.io/vgpu-devices-to-allocate"
    allocated_annotation: str = "hami.io/vgpu-devices-allocated"
    bind_phase_annotation: str = "hami.io/bind-phase"
    bind_time_annotation: str = "hami.io/bind-time"
    # Defaults and vocabulary.
    default_memory_mib: int = 0
    default_cores: int = 0
    split_count: int = 10
    known_node_policies: frozenset[str] = _NODE_POLICIES
    known_device_policies: frozenset[str] = _DEVICE_POLICIES
    advisory_device_policies: frozenset[str] = _ADVISORY_DEVICE_POLICIES
    vendor_word: str = "NVIDIA"

    def __post_init__(self) -> None:
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if item.type == "str" and (not isinstance(value, str) or not value.strip()):
                raise ValueError(f"NvidiaConfig.{item.name} must be a non-empty string: {value!r}")
            if item.type == "frozenset[str]":
                if isinstance(value, str) or not isinstance(value, Iterable):
                    raise ValueError(f"NvidiaConfig.{item.name} must be a set of names: {value!r}")
                object.__setattr__(self, item.name, frozenset(str(v) for v in value))
        _check_int("default_memory_mib", self.default_memory_mib, 0, 2**31 - 1)
        _check_int("default_cores", self.default_cores, 0, 100)
        _check_int("split_count", self.split_count, 1, 2**31 - 1)
        for char in ",:;":
            if char in self.vendor_word:
                raise ValueError(f"NvidiaConfig.vendor_word must not contain {char!r}")

    @property
    def resource_names(self) -> frozenset[str]:
        return frozenset(
            {
                self.count_resource,
                self.memory_resource,
                self.memory_percent_resource,
                self.cores_resource,
                self.priority_resource,
            }
        )

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> NvidiaConfig:
        """Build from settings; an unknown key is an error, not silently ignored."""
        known = {item.name for item in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(
                f"unknown NVIDIA vendor setting(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(known))}"
            )
        return cls(**dict(values))


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"NvidiaConfig.{name} must be an integer in {low}..{high}: {value!r}")
