"""What a pod asks for, per container, in the vendor-neutral form the engine reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True)
class ContainerRequest:
    """One container's share of devices.

    ``count`` distinct devices, each giving ``memory_mib`` MiB (or, when that is 0,
    ``memory_percent`` percent of the device's memory) and ``cores`` percent of its
    compute. ``cores == 100`` asks for the device exclusively. A container with
    ``count == 0`` asks for nothing but keeps its position in the annotations.

    ``vendor`` is the vendor word of the devices asked for (a device's ``vendor``, HAMi's
    ``CommonWord``); empty asks for devices of any vendor the index holds (a set of one
    vendor). ``mode`` is the way of sharing the pod asks for, where a vendor has several
    (Ascend's ``hami-core``); empty takes the device's. ``also`` holds this container's
    asks of other vendors (HAMi lets one container ask for NVIDIA and Ascend at once):
    each is one more share of its own vendor's devices, written into that vendor's
    annotations at the same container position. ``mutex``: the pod asks that no device
    it is given be in use (HAMi's ``hami.io/gpu-scheduler-policy: mutex``); it binds only
    vendors whose share model honours it.
    """

    name: str
    count: int = 0
    memory_mib: int = 0
    memory_percent: int = 0
    cores: int = 0
    init: bool = False
    priority: int | None = None
    vendor: str = ""
    mode: str = ""
    also: tuple[ContainerRequest, ...] = ()
    mutex: bool = False
    #: Allocation slots one share takes on each of its devices.
    slots: ClassVar[int] = 1

    @property
    def wants_devices(self) -> bool:
        return self.count > 0

    @property
    def asks(self) -> tuple[ContainerRequest, ...]:
        """Every ask of this container, one per vendor: itself, then ``also``."""
        return (self, *self.also) if self.also else (self,)

    @property
    def exclusive(self) -> bool:
        return self.cores >= 100

    def memory_on(self, device_memory_mib: Any) -> Any:
        """MiB this container reserves on a device with that much memory (an int, or an
        int array of many devices' memory: the answer has the same shape)."""
        if self.memory_mib > 0:
            return self.memory_mib
        if self.memory_percent == 100:  # a whole device's memory: no arithmetic needed
            return device_memory_mib
        return device_memory_mib * self.memory_percent // 100


@dataclass(frozen=True, slots=True)
class DeviceSelector:
    """Which devices a pod accepts (HAMi's use/nouse annotations).

    Types match as case-insensitive substrings of the device type; UUIDs match exactly.
    Empty tuples mean no constraint. ``vendor``, when set, is the vendor word whose
    devices the selector judges (the vendor whose annotations it came from): devices of
    other vendors pass it.
    """

    use_types: tuple[str, ...] = ()
    avoid_types: tuple[str, ...] = ()
    use_uuids: tuple[str, ...] = ()
    avoid_uuids: tuple[str, ...] = ()
    vendor: str = ""

    @property
    def constrains(self) -> bool:
        return self.constrains_types or self.constrains_uuids

    def judges(self, vendor: str) -> bool:
        """Whether the selector applies to devices of ``vendor``."""
        return not self.vendor or vendor == self.vendor

    @property
    def constrains_types(self) -> bool:
        return bool(self.use_types or self.avoid_types)

    @property
    def constrains_uuids(self) -> bool:
        return bool(self.use_uuids or self.avoid_uuids)

    def accepts_type(self, device_type: str) -> bool:
        lowered = device_type.lower()
        if self.use_types and not any(t in lowered for t in self.use_types):
            return False
        return not any(t in lowered for t in self.avoid_types)

    def accepts_uuid(self, uuid: str) -> bool:
        if self.use_uuids and uuid not in self.use_uuids:
            return False
        return uuid not in self.avoid_uuids


@dataclass(frozen=True, slots=True)
class PodRequest:
    """A pod as the engine sees it: containers (init containers first), constraints, policies.

    ``node_policy`` and ``device_policy`` are per-pod overrides of the configured policies
    (None: use the configured one). ``cpu_milli`` and ``host_memory_mib`` are host
    requests, read only by the trace replay's NodeResourcesFit emulation.
    """

    uid: str
    namespace: str = "default"
    name: str = ""
    containers: tuple[ContainerRequest, ...] = ()
    selector: DeviceSelector = DeviceSelector()
    numa_bind: bool = False
    node_policy: str | None = None
    device_policy: str | None = None
    priority: int = 0
    cpu_milli: int = 0
    host_memory_mib: int = 0
    #: ``device_containers``, made once: every verb reads it several times.
    _device_asks: tuple[ContainerRequest, ...] = field(
        init=False, repr=False, compare=False, hash=False, default=()
    )

    def __post_init__(self) -> None:
        asks = tuple(ask for c in self.containers for ask in c.asks if ask.count > 0)
        object.__setattr__(self, "_device_asks", asks)

    @property
    def managed(self) -> bool:
        """True when the pod asks for at least one managed device."""
        return bool(self._device_asks)

    @property
    def device_containers(self) -> tuple[ContainerRequest, ...]:
        """Every ask for devices, container by container (a container asking two vendors
        gives two)."""
        return self._device_asks

    @property
    def mutex(self) -> bool:
        """Whether the pod asks that no device it is given be in use (its containers'
        ``mutex``, HAMi's pod policy)."""
        return any(ask.mutex for ask in self._device_asks)

    @property
    def vendors(self) -> tuple[str, ...]:
        """The vendor words the pod asks for, in order of first ask."""
        return tuple(dict.fromkeys(ask.vendor for ask in self.device_containers))

    @property
    def max_count(self) -> int:
        return max((ask.count for c in self.containers for ask in c.asks), default=0)
