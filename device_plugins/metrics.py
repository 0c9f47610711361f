"""The node agent's Prometheus metrics, each prefixed ``vgpu_device_plugin_``.

Counters and the histogram move where the event happens (``Allocate``); the gauges
are read from the agent when scraped, so they can never drift from what it holds.
Each agent has its own registry: tests run several agents in one process.
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from device_plugins.discovery.base import PhysicalDevice
from device_plugins.inventory import hami_type

PREFIX = "vgpu_device_plugin"
#: ``allocate_total``'s result for a served ``Allocate``; failures carry their
#: ``AllocationError`` code (not_found, invalid, unavailable, failed) or ``error``.
RESULT_OK = "ok"
RESULT_ERROR = "error"
#: From a local answer (milliseconds) to a slow API server (seconds).
ALLOCATE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass(frozen=True, slots=True)
class AgentView:
    """What the scrape-time gauges read from the agent."""

    devices: Callable[[], Iterable[PhysicalDevice]]
    registered: Callable[[], bool]
    #: ``time.monotonic()`` of the last confirmed node annotation, None before any.
    last_report: Callable[[], float | None]


class _AgentCollector(Collector):
    def __init__(self, view: AgentView, clock: Callable[[], float]) -> None:
        self._view = view
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        devices = GaugeMetricFamily(
            f"{PREFIX}_devices",
            "Physical devices the agent sees, by vendor, type and health.",
            labels=["vendor", "type", "health"],
        )
        tally = Tally(
            (d.vendor, hami_type(d.model, d.vendor), "healthy" if d.healthy else "unhealthy")
            for d in self._view.devices()
        )
        for labels, count in sorted(tally.items()):
            devices.add_metric(list(labels), count)
        yield devices
        yield GaugeMetricFamily(
            f"{PREFIX}_kubelet_registered",
            "1 while the agent is registered with kubelet and serving its socket.",
            value=1 if self._view.registered() else 0,
        )
        age = GaugeMetricFamily(
            f"{PREFIX}_registration_age_seconds",
            "Seconds since the node annotation was last written or confirmed current "
            "(absent until the first time).",
        )
        last = self._view.last_report()
        if last is not None:
            age.add_metric([], max(0.0, self._clock() - last))
        yield age


class AgentMetrics:
    """The registry of one agent; ``observe_allocate`` is called by the gRPC service."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._allocations = Counter(
            f"{PREFIX}_allocate",
            "Allocate calls from kubelet, by result.",
            ["result"],
            registry=self.registry,
        )
        self._allocate_seconds = Histogram(
            f"{PREFIX}_allocate_duration_seconds",
            "Time to answer kubelet's Allocate, failures included.",
            buckets=ALLOCATE_BUCKETS,
            registry=self.registry,
        )
        self._allocations.labels(result=RESULT_OK)  # exported as 0 before the first call

    def watch(self, view: AgentView, clock: Callable[[], float] = time.monotonic) -> None:
        """Export the agent's gauges (once per registry)."""
        self.registry.register(_AgentCollector(view, clock))

    def observe_allocate(self, result: str, seconds: float) -> None:
        self._allocations.labels(result=result).inc()
        self._allocate_seconds.observe(seconds)

    def exposition(self) -> bytes:
        """The text format Prometheus scrapes."""
        return generate_latest(self.registry)
