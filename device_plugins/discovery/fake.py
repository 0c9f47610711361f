"""An in-memory backend: devices from values, health events pushed by the caller."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable

from device_plugins.discovery.base import HealthEvent, HealthSink, PhysicalDevice


class FakeBackend:
    """Stands in for a vendor library in tests and demonstrations.

    ``set_devices`` changes what the next ``discover`` returns; ``emit`` queues a
    health event for the running ``watch_health``. ``fail_with`` makes ``discover``
    raise, to exercise the agent's error paths.
    """

    name = "fake"

    def __init__(self, devices: Iterable[PhysicalDevice] = (), *, poll_s: float = 0.02) -> None:
        self._lock = threading.Lock()
        self._devices = tuple(devices)
        self._events: queue.Queue[HealthEvent] = queue.Queue()
        self._poll_s = poll_s
        self._error: Exception | None = None
        self.closed = False
        self.discover_calls = 0

    def set_devices(self, devices: Iterable[PhysicalDevice]) -> None:
        with self._lock:
            self._devices = tuple(devices)

    def fail_with(self, error: Exception | None) -> None:
        with self._lock:
            self._error = error

    def emit(self, event: HealthEvent) -> None:
        self._events.put(event)

    def discover(self) -> tuple[PhysicalDevice, ...]:
        with self._lock:
            self.discover_calls += 1
            if self._error is not None:
                raise self._error
            return tuple(sorted(self._devices, key=lambda d: d.index))

    def watch_health(self, stop: threading.Event, emit: HealthSink) -> None:
        while not stop.is_set():
            try:
                event = self._events.get(timeout=self._poll_s)
            except queue.Empty:
                continue
            emit(event)

    def close(self) -> None:
        self.closed = True
