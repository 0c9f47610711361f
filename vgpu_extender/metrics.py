"""Prometheus metrics of one extender app, in a registry of its own.

Allocation gauges carry HAMi's names, labels and constant ``zone="vGPU"`` (HAMi's
``cmd/scheduler/metrics.go``), so dashboards built for HAMi's scheduler keep working.
They are computed at scrape time from plain rows a callable returns, so nothing here
knows the index or the store. The extender's own counters and histograms are named
``vgpu_extender_*``.

Each app builds its own ``Metrics`` (and so its own ``CollectorRegistry``): two apps in
one process, as in the tests, never share or clash over series.
"""

from __future__ import annotations

import gc
import logging
import platform
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

logger = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MIB = 1024 * 1024
#: HAMi's constant label on every allocation metric.
ZONE = "vGPU"
#: From half a millisecond (filter at names-only) to kube-scheduler's 30 s httpTimeout.
LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
#: One bind alone, up to a full batch (``services.batching.DEFAULT_LIMIT``).
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)
VERBS = ("filter", "prioritize", "bind", "preempt")
FILTER_RESULTS = ("feasible", "unschedulable", "error")


@dataclass(frozen=True, slots=True)
class DeviceRow:
    """One GPU as HAMi's gauges describe it (MiB and percent, as registered)."""

    node: str
    uuid: str
    index: int
    type: str
    memory_mib: int
    cores: int
    memory_used_mib: int
    cores_used: int
    shared: int


@dataclass(frozen=True, slots=True)
class GrantRow:
    """One container's share of one GPU."""

    namespace: str
    node: str
    pod: str
    container_index: int
    device_uuid: str
    memory_mib: int
    cores: int


DeviceSource = Callable[[], Sequence[DeviceRow]]
GrantSource = Callable[[], Sequence[GrantRow]]
CountSource = Callable[[], Mapping[str, int]]


class AllocationCollector(Collector):
    """HAMi's allocation gauges, built from ``devices()`` and ``grants()`` at each scrape."""

    def __init__(self, devices: DeviceSource, grants: GrantSource) -> None:
        self._devices = devices
        self._grants = grants

    def describe(self) -> Iterable[Metric]:
        return []  # computed per scrape; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        labels = ["node", "device_uuid", "device_index", "device_type", "zone"]
        with_cores = ["node", "device_uuid", "device_index", "device_cores", "device_type", "zone"]
        overview_labels = [
            "node",
            "device_uuid",
            "device_index",
            "device_cores",
            "device_memory_limit",
            "device_type",
            "zone",
        ]
        memory_limit = _gauge("hami_gpu_memory_limit_bytes", "Device memory of a GPU", labels)
        core_limit = _gauge(
            "hami_gpu_core_limit_ratio", "Device cores of a GPU (100: one GPU)", labels
        )
        memory_allocated = _gauge(
            "hami_gpu_memory_allocated_bytes", "Device memory allocated on a GPU", with_cores
        )
        shared = _gauge("hami_gpu_shared_count", "Containers sharing a GPU", labels)
        core_allocated = _gauge("hami_gpu_core_allocated_ratio", "Cores allocated on a GPU", labels)
        overview = _gauge("hami_node_gpu_overview", "GPU overview on a node", overview_labels)
        ratio = _gauge(
            "hami_node_gpu_memory_allocated_ratio",
            "Allocated share of a GPU's memory (0-1)",
            ["node", "device_uuid", "device_index", "zone"],
        )
        for d in self._devices():
            index = str(d.index)
            base = [d.node, d.uuid, index, d.type, ZONE]
            used_bytes = float(d.memory_used_mib * MIB)
            memory_limit.add_metric(base, float(d.memory_mib * MIB))
            core_limit.add_metric(base, float(d.cores))
            memory_allocated.add_metric(
                [d.node, d.uuid, index, str(d.cores), d.type, ZONE], used_bytes
            )
            shared.add_metric(base, float(d.shared))
            core_allocated.add_metric(base, float(d.cores_used))
            overview.add_metric(
                [d.node, d.uuid, index, str(d.cores), str(d.memory_mib), d.type, ZONE], used_bytes
            )
            if d.memory_mib > 0:
                ratio.add_metric([d.node, d.uuid, index, ZONE], d.memory_used_mib / d.memory_mib)
        yield from (
            memory_limit,
            core_limit,
            memory_allocated,
            shared,
            core_allocated,
            overview,
            ratio,
        )

        grant_labels = ["namespace", "node", "pod", "container_index", "device_uuid", "zone"]
        vgpu_memory = _gauge(
            "hami_vgpu_memory_allocated_bytes", "vGPU memory allocated to a container", grant_labels
        )
        vgpu_cores = _gauge(
            "hami_vgpu_core_allocated_ratio", "vGPU cores allocated to a container", grant_labels
        )
        for g in self._grants():
            values = [g.namespace, g.node, g.pod, str(g.container_index), g.device_uuid, ZONE]
            vgpu_memory.add_metric(values, float(g.memory_mib * MIB))
            vgpu_cores.add_metric(values, float(g.cores))
        yield from (vgpu_memory, vgpu_cores)


class CountsCollector(Collector):
    """A counter family from a mapping read at scrape time (e.g. reconcile totals)."""

    def __init__(self, name: str, documentation: str, label: str, source: CountSource) -> None:
        self._name = name
        self._documentation = documentation
        self._label = label
        self._source = source

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self._name, self._documentation, labels=[self._label])
        for key, value in sorted(self._source().items()):
            family.add_metric([key], float(value))
        yield family


def _gauge(name: str, documentation: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=labels)


def _version() -> str:
    try:
        return metadata.version("vgpu-extender")
    except metadata.PackageNotFoundError:
        return "unknown"


class Metrics:
    """The registry and the instruments the extender updates as it works."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.request_seconds = Histogram(
            "vgpu_extender_request_duration_seconds",
            "Time to answer one kube-scheduler verb, from request to response",
            ["verb"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.filter_total = Counter(
            "vgpu_extender_filter",
            "filter answers by result: feasible (some node fits), unschedulable, error",
            ["result"],
            registry=registry,
        )
        self.filter_rejected_nodes = Counter(
            "vgpu_extender_filter_rejected_nodes",
            "Nodes rejected for pods that fit nowhere, by reason",
            ["reason"],
            registry=registry,
        )
        self.bind_total = Counter(
            "vgpu_extender_bind", "bind answers by result", ["result"], registry=registry
        )
        self.bind_batch_size = Histogram(
            "vgpu_extender_bind_batch_size",
            "Binds written to the store in one transaction: the binds to one node that "
            "queued while the one before wrote",
            buckets=BATCH_BUCKETS,
            registry=registry,
        )
        self.store_errors = Counter(
            "vgpu_extender_store_errors",
            "Errors the database returned (lost connection, lock timeout, constraint)",
            registry=registry,
        )
        self.store_available = Gauge(
            "vgpu_extender_store_available",
            "1 while the store answers (readiness's store check), 0 while it cannot be reached; "
            "the per-pod gauges then show the last rows read",
            registry=registry,
        )
        self.events_dropped = Counter(
            "vgpu_extender_events_dropped",
            "Pod Events not recorded because their queue was full (unschedulable, bind)",
            registry=registry,
        )
        self.import_conflicts = Gauge(
            "vgpu_extender_import_conflicts",
            "Running pods whose allocation could not be imported without over-committing "
            "a GPU (open allocation conflicts; their GPUs take no new pod)",
            registry=registry,
        )
        self.leader = Gauge(
            "vgpu_extender_leader",
            "1 while this replica holds the leader Lease (always 0 without leader election)",
            registry=registry,
        )
        frozen = Gauge(
            "vgpu_extender_gc_frozen_objects",
            "Objects kept out of the garbage collector's full passes since start-up",
            registry=registry,
        )
        frozen.set_function(gc.get_freeze_count)
        info = Gauge(
            "vgpu_extender_build_info",
            "Version of the running extender",
            ["version", "python_version"],
            registry=registry,
        )
        info.labels(_version(), platform.python_version()).set(1)
        # Children bound once: the verbs' hot path does no label lookup.
        self.verb_seconds = {verb: self.request_seconds.labels(verb) for verb in VERBS}
        self.filter_results = {
            result: self.filter_total.labels(result) for result in FILTER_RESULTS
        }
        self._extra: list[Collector] = []

    # ----------------------------------------------------------------- scrape-time sources
    def add_collector(self, collector: Collector) -> None:
        self.registry.register(collector)
        self._extra.append(collector)

    def remove_collectors(self) -> None:
        """Forget the runtime-bound collectors (the runtime is gone after shutdown)."""
        for collector in self._extra:
            self.registry.unregister(collector)
        self._extra.clear()

    def render(self) -> bytes:
        return generate_latest(self.registry)

    # ----------------------------------------------------------------- updates
    def count_rejections(self, counts: Mapping[str, int]) -> None:
        for reason, n in counts.items():
            self.filter_rejected_nodes.labels(reason).inc(n)
