"""The node agent for Ascend NPUs: NVIDIA's agent with the chip's resource, list and Allocate.

The threads, the gRPC server, kubelet registration and restarts, the inventory loop and
the probes are the shared agent's. The chip is known only once the node's chips are
listed, so ``build_agent`` scans once, picks the chip configuration (its CommonWord
names the resource ``huawei.com/<CW>`` and the socket ``<CW>.sock``) and builds the
agent; kubelet then sees ``count`` devices ``<uuid>-<i>`` per chip.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from datetime import datetime

from device_plugins.agent import DevicePluginAgent
from device_plugins.ascend.allocate import AscendAllocator
from device_plugins.ascend.discovery import (
    AscendBackend,
    ChipSource,
    NpuSmiSource,
    StaticChipSource,
)
from device_plugins.ascend.flavour import AscendFlavour, flavoured_settings, resolve_flavour
from device_plugins.ascend.inventory import node_annotations, to_devices
from device_plugins.ascend.reporter import AscendNodeReporter
from device_plugins.ascend.runtime import CorePaths
from device_plugins.ascend.settings import AscendSettings
from device_plugins.discovery.base import DiscoveryError
from device_plugins.kube import KubeGateway
from device_plugins.server import DevicePluginService
from device_plugins.settings import DevicePluginSettings


class AscendAgent(DevicePluginAgent):
    """Runs until ``stop``; built by ``build_agent``."""

    def __init__(
        self,
        settings: DevicePluginSettings,
        *,
        backend: AscendBackend,
        gateway: KubeGateway | None,
        flavour: AscendFlavour,
        paths: CorePaths | None = None,
        now: Callable[[], datetime] = datetime.now,
    ) -> None:
        super().__init__(settings, backend=backend, gateway=gateway)
        self.flavour = flavour
        self.ascend_allocator = AscendAllocator(
            gateway,
            node=settings.node_name,
            state=self.state,
            flavour=flavour,
            chips=backend.chips,
            paths=paths or CorePaths(hook_path=settings.hook_path),
        )
        if gateway is not None:
            self.reporter = AscendNodeReporter(
                gateway, node=settings.node_name, flavour=flavour, now=now
            )

    def _service(self, stopping: threading.Event) -> DevicePluginService:
        # The shared agent's one hook for what kubelet is served: count IDs per chip
        # and the chip's Allocate, instead of NVIDIA's split count and allocator.
        return DevicePluginService(
            state=self.state,
            split_count=self.flavour.count,
            allocator=self.ascend_allocator,
            stopping=stopping,
            on_allocate=self.metrics.observe_allocate,
        )


def chip_source(settings: DevicePluginSettings, ascend: AscendSettings) -> ChipSource:
    """Where the settings say the chips are listed."""
    if settings.discovery == "ascend-static":
        if settings.static_file is None:  # the settings validator already refuses this
            raise DiscoveryError("discovery 'ascend-static' needs static_file")
        return StaticChipSource(settings.static_file)
    # Chip ids carry the node's name; a dry run without one uses the host's.
    node = settings.node_name or socket.gethostname()
    return NpuSmiSource(node, binary=ascend.npu_smi)


def backend_for(
    settings: DevicePluginSettings, ascend: AscendSettings
) -> tuple[AscendBackend, AscendFlavour]:
    """Scan once, pick the chip; ``DiscoveryError`` (one line) when that fails."""
    source = chip_source(settings, ascend)
    flavour = resolve_flavour(source.scan(), ascend)
    return AscendBackend(source, flavour.chip), flavour


def build_agent(
    settings: DevicePluginSettings,
    ascend: AscendSettings,
    *,
    gateway: KubeGateway | None,
    backend: AscendBackend,
    flavour: AscendFlavour,
    now: Callable[[], datetime] = datetime.now,
) -> AscendAgent:
    """The agent with the chip's resource name and socket (unless the settings name theirs)."""
    return AscendAgent(
        flavoured_settings(settings, flavour),
        backend=backend,
        gateway=gateway,
        flavour=flavour,
        paths=CorePaths(
            hook_path=settings.hook_path,
            core_dir=ascend.core_dir,
            shared_region=ascend.shared_region,
        ),
        now=now,
    )


def describe(backend: AscendBackend, flavour: AscendFlavour, settings: DevicePluginSettings) -> str:
    """What ``--dry-run`` prints for an Ascend node: the chips, then the node annotations."""
    physical = backend.discover()
    chips = backend.chips()
    chip = flavour.chip
    lines = [
        f"backend {backend.name}: {len(physical)} chip(s) {chip.chip_name} -> {chip.common_word}, "
        f"resource {flavoured_settings(settings, flavour).resource_name}, "
        f"{flavour.count} vNPU(s) each, hami-vnpu-core {str(flavour.core_mode).lower()}"
    ]
    for raw, device in zip(physical, to_devices(physical, flavour), strict=True):
        npu = chips[raw.uuid]
        lines.append(
            f"  #{raw.index} {raw.uuid} physical {npu.physical_id} logic {npu.logic_id} "
            f"{npu.chip_name} {'healthy' if raw.healthy else 'UNHEALTHY'} -> count "
            f"{device.count}, devmem {device.memory_mib} MiB, devcore {device.cores}"
        )
    for key, value in node_annotations(physical, flavour, now=datetime.now()).items():
        lines.append(f"{key}={value}")
    return "\n".join(lines)
