"""From physical devices to what the scheduler reads: HAMi's registration annotation.

Each GPU is offered as ``split_count`` allocations, ``memory * memory_scaling`` MiB
(above 1 over-subscribes, HAMi-core then spills to host memory) and
``100 * core_scaling`` cores. MIG devices are not scaled, as in HAMi. The encoding
itself is the extender's codec, so both sides agree byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from device_plugins.discovery.base import MODE_MIG, PhysicalDevice
from device_plugins.vendor import nvidia
from vgpu_extender.domain import Device

#: The inventory's encoding needs none of the vendor's settings.
_CODECS = nvidia()

FULL_CORES = 100


@dataclass(frozen=True, slots=True)
class Splitting:
    """How one physical GPU is divided for the scheduler."""

    split_count: int = 10
    memory_scaling: float = 1.0
    core_scaling: float = 1.0

    def __post_init__(self) -> None:
        if self.split_count < 1:
            raise ValueError(f"split_count must be at least 1, got {self.split_count}")
        if self.memory_scaling <= 0:
            raise ValueError(f"memory_scaling must be positive, got {self.memory_scaling}")
        if self.core_scaling <= 0:
            raise ValueError(f"core_scaling must be positive, got {self.core_scaling}")


def hami_type(model: str, vendor: str = "NVIDIA") -> str:
    """HAMi's device type: the model name, prefixed ``NVIDIA-`` unless it starts so."""
    return model if model.startswith(vendor) else f"{vendor}-{model}"


def to_device(device: PhysicalDevice, splitting: Splitting) -> Device:
    mig = device.mode == MODE_MIG
    return Device(
        uuid=device.uuid,
        index=device.index,
        count=splitting.split_count,
        memory_mib=device.memory_mib if mig else int(device.memory_mib * splitting.memory_scaling),
        cores=FULL_CORES if mig else int(FULL_CORES * splitting.core_scaling),
        type=hami_type(device.model, device.vendor),
        numa=device.numa or 0,
        mode=device.mode,
        healthy=device.healthy,
        vendor=device.vendor,
    )


def to_devices(devices: Iterable[PhysicalDevice], splitting: Splitting) -> tuple[Device, ...]:
    return tuple(to_device(device, splitting) for device in devices)


def register_annotation(devices: Iterable[PhysicalDevice], splitting: Splitting) -> str:
    """The ``hami.io/node-nvidia-register`` value for these devices."""
    return _CODECS.encode_inventory(to_devices(devices, splitting))
