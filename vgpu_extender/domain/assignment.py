"""The devices chosen for a pod, and what they take from each device."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DeviceGrant:
    """One device given to one container: the share written into the pod annotation."""

    uuid: str
    memory_mib: int
    cores: int
    vendor: str = "NVIDIA"


@dataclass(frozen=True, slots=True)
class DeviceUsage:
    """What a pod takes from one device: memory, cores and allocation slots."""

    memory_mib: int
    cores: int
    slots: int


@dataclass(frozen=True, slots=True)
class PodAssignment:
    """Devices per container, in the pod's container order (init containers first).

    ``init`` flags which positions are init containers. Init containers run one at a
    time before the app containers, so a device's footprint is the larger of the
    biggest init grant and the sum of the app grants (HAMi's collapse).
    """

    node: str
    containers: tuple[tuple[DeviceGrant, ...], ...]
    init: tuple[bool, ...] = ()

    def __post_init__(self) -> None:
        if self.init and len(self.init) != len(self.containers):
            raise ValueError("init flags must match the containers one to one")

    def is_init(self, position: int) -> bool:
        return bool(self.init) and self.init[position]

    @property
    def device_uuids(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for grants in self.containers:
            for grant in grants:
                seen.setdefault(grant.uuid, None)
        return tuple(seen)

    def footprint(self) -> dict[str, DeviceUsage]:
        """Per device UUID, what the whole pod holds on it."""
        app: dict[str, list[int]] = {}
        peak_init: dict[str, list[int]] = {}
        for position, grants in enumerate(self.containers):
            for grant in grants:
                if self.is_init(position):
                    acc = peak_init.setdefault(grant.uuid, [0, 0, 0])
                    acc[0] = max(acc[0], grant.memory_mib)
                    acc[1] = max(acc[1], grant.cores)
                    acc[2] = 1
                else:
                    acc = app.setdefault(grant.uuid, [0, 0, 0])
                    acc[0] += grant.memory_mib
                    acc[1] += grant.cores
                    acc[2] += 1
        usage: dict[str, DeviceUsage] = {}
        for uuid in self.device_uuids:
            a = app.get(uuid, [0, 0, 0])
            i = peak_init.get(uuid, [0, 0, 0])
            usage[uuid] = DeviceUsage(max(a[0], i[0]), max(a[1], i[1]), max(a[2], i[2]))
        return usage
