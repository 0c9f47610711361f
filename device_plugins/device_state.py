"""The node's devices as the agent currently believes them, shared between threads.

Discovery replaces the list on each rescan; health events mark devices failed. A
failure stays until a backend reports the device healthy again: NVML never does
(as in HAMi, an Xid takes a GPU out until the agent restarts), a static file does
by saying so on the next rescan. Every change bumps ``version`` and wakes the
waiters (the kubelet stream and the node reporter), so health changes go out at once.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from device_plugins.discovery.base import HealthEvent, PhysicalDevice

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The devices at one version, with health already combined."""

    version: int
    devices: tuple[PhysicalDevice, ...]

    def by_uuid(self) -> dict[str, PhysicalDevice]:
        return {device.uuid: device for device in self.devices}


class DeviceState:
    """Thread-safe holder of the current devices and their health."""

    def __init__(self, devices: Iterable[PhysicalDevice] = ()) -> None:
        self._cond = threading.Condition()
        self._discovered: tuple[PhysicalDevice, ...] = tuple(devices)
        self._failed: dict[str, str] = {}
        self._version = 1
        self._snapshot = self._combine()

    def _combine(self) -> Snapshot:
        devices = tuple(
            dataclasses.replace(device, healthy=False)
            if device.uuid in self._failed and device.healthy
            else device
            for device in self._discovered
        )
        return Snapshot(self._version, devices)

    def _publish_if_changed(self) -> bool:
        """Recompute; bump the version and wake waiters only if anything differs."""
        candidate = self._combine()
        if candidate.devices == self._snapshot.devices:
            return False
        self._version += 1
        self._snapshot = Snapshot(self._version, candidate.devices)
        self._cond.notify_all()
        return True

    def snapshot(self) -> Snapshot:
        with self._cond:
            return self._snapshot

    def replace(self, devices: Iterable[PhysicalDevice]) -> bool:
        """Take a fresh discovery result; True when the visible state changed."""
        with self._cond:
            self._discovered = tuple(devices)
            known = {device.uuid for device in self._discovered}
            for uuid in [uuid for uuid in self._failed if uuid not in known]:
                del self._failed[uuid]
            return self._publish_if_changed()

    def apply(self, event: HealthEvent) -> bool:
        """Record a health event; True when the visible state changed."""
        with self._cond:
            known = [device.uuid for device in self._discovered]
            if event.uuid is not None and event.uuid not in known:
                log.warning(
                    "health event for unknown device %s ignored: %s", event.uuid, event.reason
                )
                return False
            targets = known if event.uuid is None else [event.uuid]
            for uuid in targets:
                if event.healthy:
                    self._failed.pop(uuid, None)
                else:
                    self._failed.setdefault(uuid, event.reason)
            changed = self._publish_if_changed()
        if changed:
            log.warning(
                "device %s is now %s: %s",
                event.uuid or "(all)",
                "healthy" if event.healthy else "unhealthy",
                event.reason,
            )
        return changed

    def failure_reason(self, uuid: str) -> str | None:
        with self._cond:
            return self._failed.get(uuid)

    def wait_for_change(
        self, version: int, timeout: float, *, stop: Callable[[], bool] = lambda: False
    ) -> Snapshot:
        """The first snapshot newer than ``version``, or the current one after ``timeout``
        or as soon as ``stop()`` is true (checked whenever ``wake`` is called)."""
        with self._cond:
            self._cond.wait_for(lambda: self._version != version or stop(), timeout=timeout)
            return self._snapshot

    def wake(self) -> None:
        """Make every waiter re-check its ``stop`` condition (used on shutdown)."""
        with self._cond:
            self._cond.notify_all()
