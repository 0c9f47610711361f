"""NVIDIA devices through NVML (the ``nvidia-ml-py`` package, module ``pynvml``).

``pynvml`` is imported only when the backend is first used, so the agent, its tests
and the static backend work on machines without the package or the driver. The
NVML module is an argument: tests pass a fake shaped like ``pynvml`` and this file
is exercised without a GPU. NUMA comes from sysfs (what HAMi reads) under a
configurable root, for the same reason.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from device_plugins.discovery.base import (
    MODE_MIG,
    MODE_SHARED,
    DiscoveryError,
    HealthEvent,
    HealthSink,
    PhysicalDevice,
)

log = logging.getLogger(__name__)

MIB = 1024 * 1024
#: Xids caused by applications, not by the GPU (HAMi and NVIDIA's plugin skip them).
DEFAULT_IGNORED_XIDS = (13, 31, 43, 45, 68, 109)
#: NVML event masks: Xid critical error, double-bit and single-bit ECC.
EVENT_XID_CRITICAL = 0x8
EVENT_DOUBLE_BIT_ECC = 0x2
EVENT_SINGLE_BIT_ECC = 0x1
MIG_ENABLED = 1


def load_pynvml() -> Any:
    """Import ``pynvml`` now, or say clearly what is missing."""
    try:
        import pynvml
    except ImportError as exc:
        raise DiscoveryError(
            "the nvml discovery backend needs the nvidia-ml-py package (module pynvml): "
            "install it with `pip install nvidia-ml-py`, or use the static backend"
        ) from exc
    return pynvml


def _text(value: str | bytes) -> str:
    """Old pynvml releases return bytes, newer ones str."""
    return value.decode() if isinstance(value, bytes) else value


def sysfs_numa_node(sysfs_root: Path, bus_id: str) -> int | None:
    """NUMA node of a PCI device, as HAMi reads it, or None when unknown.

    NVML's bus id has an 8-digit domain (``00000000:3B:00.0``); sysfs names the
    device with a 4-digit, lower-case one (``0000:3b:00.0``).
    """
    name = bus_id.lower()
    if name.startswith("0000") and len(name.split(":", 1)[0]) == 8:
        name = name[4:]
    path = sysfs_root / "bus" / "pci" / "devices" / name / "numa_node"
    try:
        node = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


class NvmlBackend:
    """Discovery and Xid health checks through NVML."""

    name = "nvml"

    def __init__(
        self,
        *,
        nvml: Any = None,
        sysfs_root: Path = Path("/sys"),
        ignored_xids: tuple[int, ...] = DEFAULT_IGNORED_XIDS,
        preconfigured_memory_mib: int = 0,
        event_wait_ms: int = 1000,
        health_checks: bool = True,
    ) -> None:
        self._nvml = nvml
        self._sysfs_root = sysfs_root
        self._ignored_xids = frozenset(ignored_xids)
        self._preconfigured_memory_mib = preconfigured_memory_mib
        self._event_wait_ms = event_wait_ms
        self._health_checks = health_checks
        self._lock = threading.Lock()
        self._initialised = False

    def _library(self) -> Any:
        """The NVML module, initialised once (``nvmlInit`` is reference-counted)."""
        with self._lock:
            if self._nvml is None:
                self._nvml = load_pynvml()
            if not self._initialised:
                try:
                    self._nvml.nvmlInit()
                except self._nvml.NVMLError as exc:
                    raise DiscoveryError(
                        f"NVML could not start: {exc}. Is the NVIDIA driver installed and "
                        "libnvidia-ml.so.1 visible to this container?"
                    ) from exc
                self._initialised = True
            return self._nvml

    def close(self) -> None:
        with self._lock:
            if self._initialised:
                self._initialised = False
                try:
                    self._nvml.nvmlShutdown()
                except self._nvml.NVMLError as exc:
                    log.warning("nvmlShutdown failed: %s", exc)

    def _handles(self, nvml: Any) -> list[tuple[str, Any]]:
        return [
            (_text(nvml.nvmlDeviceGetUUID(handle)), handle)
            for handle in (
                nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())
            )
        ]

    def discover(self) -> tuple[PhysicalDevice, ...]:
        nvml = self._library()
        devices: list[PhysicalDevice] = []
        try:
            for uuid, handle in self._handles(nvml):
                device = self._describe(nvml, uuid, handle)
                if device is not None:
                    devices.append(device)
        except nvml.NVMLError as exc:
            raise DiscoveryError(f"NVML failed while listing devices: {exc}") from exc
        return tuple(sorted(devices, key=lambda d: d.index))

    def _describe(self, nvml: Any, uuid: str, handle: Any) -> PhysicalDevice | None:
        try:
            memory_mib = int(nvml.nvmlDeviceGetMemoryInfo(handle).total) // MIB
        except nvml.NVMLError_NotSupported:
            if self._preconfigured_memory_mib <= 0:
                log.warning(
                    "device %s reports no memory size and no preconfigured memory is set; "
                    "skipping it",
                    uuid,
                )
                return None
            memory_mib = self._preconfigured_memory_mib
        bus_id = _text(nvml.nvmlDeviceGetPciInfo(handle).busId)
        return PhysicalDevice(
            uuid=uuid,
            index=int(nvml.nvmlDeviceGetIndex(handle)),
            model=_text(nvml.nvmlDeviceGetName(handle)),
            memory_mib=memory_mib,
            numa=sysfs_numa_node(self._sysfs_root, bus_id),
            bus_id=bus_id,
            mode=MODE_MIG if self._mig_enabled(nvml, handle) else MODE_SHARED,
        )

    @staticmethod
    def _mig_enabled(nvml: Any, handle: Any) -> bool:
        try:
            current = nvml.nvmlDeviceGetMigMode(handle)[0]
        except (nvml.NVMLError_NotSupported, nvml.NVMLError_FunctionNotFound):
            return False
        return bool(current == MIG_ENABLED)

    def watch_health(self, stop: threading.Event, emit: HealthSink) -> None:
        """Turn NVML Xid events into health events until ``stop`` is set.

        Only critical Xids count, minus the application Xids in ``ignored_xids``. A
        device whose events cannot be registered is marked unhealthy, except when
        NVML says it is too old to report them. A failed wait marks every device.
        """
        if not self._health_checks:
            stop.wait()
            return
        nvml = self._library()
        event_set = nvml.nvmlEventSetCreate()
        try:
            self._register_events(nvml, event_set, emit)
            while not stop.is_set():
                try:
                    event = nvml.nvmlEventSetWait_v2(event_set, self._event_wait_ms)
                except nvml.NVMLError_Timeout:
                    continue
                except nvml.NVMLError as exc:
                    emit(HealthEvent(None, False, f"NVML event wait failed: {exc}"))
                    stop.wait(self._event_wait_ms / 1000)
                    continue
                self._handle_event(nvml, event, emit)
        finally:
            nvml.nvmlEventSetFree(event_set)

    def _register_events(self, nvml: Any, event_set: Any, emit: HealthSink) -> None:
        wanted = EVENT_XID_CRITICAL | EVENT_DOUBLE_BIT_ECC | EVENT_SINGLE_BIT_ECC
        for uuid, handle in self._handles(nvml):
            try:
                supported = int(nvml.nvmlDeviceGetSupportedEventTypes(handle))
                nvml.nvmlDeviceRegisterEvents(handle, wanted & supported, event_set)
            except nvml.NVMLError_NotSupported:
                log.warning("device %s is too old for health checks; not watching it", uuid)
            except nvml.NVMLError as exc:
                emit(HealthEvent(uuid, False, f"cannot watch Xid events: {exc}"))

    def _handle_event(self, nvml: Any, event: Any, emit: HealthSink) -> None:
        if int(event.eventType) != EVENT_XID_CRITICAL:
            return
        xid = int(event.eventData)
        if xid in self._ignored_xids:
            log.info("ignoring application Xid %d", xid)
            return
        # An event whose device cannot be named takes every device down, as in
        # NVIDIA's plugin: better idle capacity than containers on a broken GPU.
        uuid: str | None
        try:
            uuid = _text(nvml.nvmlDeviceGetUUID(event.device))
        except nvml.NVMLError:
            uuid = None
        emit(HealthEvent(uuid, False, f"Xid {xid}"))
