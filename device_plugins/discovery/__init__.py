"""Discovery backends behind one interface; ``make_backend`` picks one from the settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from device_plugins.discovery.base import (
    DiscoveryBackend,
    DiscoveryError,
    HealthEvent,
    PhysicalDevice,
)
from device_plugins.discovery.fake import FakeBackend
from device_plugins.discovery.nvml import NvmlBackend
from device_plugins.discovery.static import StaticBackend

if TYPE_CHECKING:
    from device_plugins.settings import DevicePluginSettings

__all__ = [
    "DiscoveryBackend",
    "DiscoveryError",
    "FakeBackend",
    "HealthEvent",
    "NvmlBackend",
    "PhysicalDevice",
    "StaticBackend",
    "make_backend",
]


def make_backend(settings: DevicePluginSettings) -> DiscoveryBackend:
    """The backend the settings name. A new vendor adds one entry here and a module."""
    if settings.discovery == "static":
        if settings.static_file is None:  # the settings validator already refuses this
            raise DiscoveryError("discovery 'static' needs static_file")
        return StaticBackend(settings.static_file)
    return NvmlBackend(
        sysfs_root=settings.sysfs_root,
        ignored_xids=settings.ignored_xids,
        preconfigured_memory_mib=settings.preconfigured_memory_mib,
        event_wait_ms=settings.event_wait_ms,
        health_checks=settings.health_checks,
    )
