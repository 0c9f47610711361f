"""Prometheus metrics of one extender app, in a registry of its own.

Allocation gauges carry HAMi's names, labels and constant ``zone="vGPU"`` (HAMi's
``cmd/scheduler/metrics.go``), so dashboards built for HAMi's scheduler keep working.
They are written from plain rows per node that a source returns (so they know neither
the index nor the store), and each node's lines are kept until the node changes: at
10,000 nodes they are most of a scrape's hundred megabytes. The extender's own counters
and histograms are named ``vgpu_extender_*``.

``StateCollector`` adds what the alerts watch, counted at scrape time from the index
(vectorised over its device columns) and from readiness: nodes by inventory state,
GPUs by health, free and stranded memory, reservations older than their TTL.

Each app builds its own ``Metrics`` (and so its own ``CollectorRegistry``): two apps in
one process, as in the tests, never share or clash over series.
"""

from __future__ import annotations

import logging
import platform
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from typing import Protocol

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from vgpu_extender import gauge_text
from vgpu_extender.engine import ClusterIndex
from vgpu_extender.store import NODE_ABSENT

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
#: ``vgpu_extender_nodes{state}``: a node's inventory as the index holds it. ``stale``:
#: the devices kept from an earlier reading because the annotation went missing or
#: lists none; ``absent``: the Node object is gone while pods still hold its GPUs.
NODE_STATES = ("ok", "unreadable", "stale", "absent")
DEVICE_HEALTH = ("healthy", "unhealthy")


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


CountSource = Callable[[], Mapping[str, int]]
Tick = Callable[[], None]


@dataclass(frozen=True, slots=True)
class NodeGauges:
    """What the allocation gauges show of one node, as of its ``stamp``."""

    node: str
    #: Changes whenever anything here changes (the index's row stamp).
    stamp: int
    devices: Sequence[DeviceRow]
    grants: Sequence[GrantRow]
    #: False when a pod on the node could not be named (the store out of reach): its
    #: grants are left out, and the node is read again at the next scrape.
    complete: bool = True


class NodeGaugeSource(Protocol):
    """Where ``AllocationGauges`` reads the nodes (``services.gauge_rows``)."""

    def stamps(self) -> Sequence[tuple[str, int]]:
        """Every node's name and stamp, in the order the gauges list them."""
        ...

    def nodes(self, names: Sequence[str]) -> Iterable[NodeGauges]:
        """The rows of the nodes named (those gone since are left out)."""
        ...


@dataclass(frozen=True, slots=True)
class _Family:
    name: str
    documentation: str


#: HAMi's gauge families, in the order each node's lines are kept.
_DEVICE_FAMILIES = (
    _Family("hami_gpu_memory_limit_bytes", "Device memory of a GPU"),
    _Family("hami_gpu_core_limit_ratio", "Device cores of a GPU (100: one GPU)"),
    _Family("hami_gpu_memory_allocated_bytes", "Device memory allocated on a GPU"),
    _Family("hami_gpu_shared_count", "Containers sharing a GPU"),
    _Family("hami_gpu_core_allocated_ratio", "Cores allocated on a GPU"),
    _Family("hami_node_gpu_overview", "GPU overview on a node"),
    _Family("hami_node_gpu_memory_allocated_ratio", "Allocated share of a GPU's memory (0-1)"),
)
_GRANT_FAMILIES = (
    _Family("hami_vgpu_memory_allocated_bytes", "vGPU memory allocated to a container"),
    _Family("hami_vgpu_core_allocated_ratio", "vGPU cores allocated to a container"),
)
_FAMILIES = _DEVICE_FAMILIES + _GRANT_FAMILIES
#: The stamp of a node kept although incomplete: it never matches a real one.
_READ_AGAIN = -1


#: A scrape's text goes out in pieces of about this size, so that neither joining nor
#: writing a hundred megabytes holds the interpreter in one go.
PIECE_BYTES = 1 << 20

#: What a device's unchanging text depends on.
DeviceKey = tuple[str, str, int, str, int, int]
#: A device's label sets: the base one, with its cores, the overview's, and the memory
#: ratio's ("" for a device without memory, which has no ratio).
DeviceLabels = tuple[str, str, str, str]


@dataclass(frozen=True, slots=True)
class _KeptNode:
    """One node's text, and its devices' label sets for when it changes. Tuples of
    strings only, which the garbage collector stops tracking: 10,000 nodes of them add
    no work to its full passes."""

    stamp: int
    #: The node's lines of each family, in ``_FAMILIES`` order.
    blocks: tuple[bytes, ...]
    device_keys: tuple[DeviceKey, ...]
    device_labels: tuple[DeviceLabels, ...]


class AllocationGauges:
    """HAMi's allocation gauges as text, each node's lines kept until its stamp changes.

    A scrape reads every node's stamp and only the rows of the nodes changed since the
    last one; the rest is joining what was kept. A changed node's GPU labels and limit
    lines are kept too, so its lines cost mostly their new values. Through
    prometheus_client's collectors the same text cost seven seconds a scrape at 5,000
    nodes (``benchmarks/metrics_scrape``).
    """

    def __init__(self, source: NodeGaugeSource, *, paced: Callable[[], Tick] | None = None) -> None:
        self._source = source
        #: A new ticker per scrape, ticked after each node written and each piece
        #: joined: it may pause there, so the verbs get the interpreter.
        self._paced = paced
        self._headers = [gauge_text.header(f.name, f.documentation).encode() for f in _FAMILIES]
        self._kept: dict[str, _KeptNode] = {}
        self._lock = threading.Lock()  # two scrapes at once take turns
        self._closed = False

    def close(self) -> None:
        """Cut short a render under way, at its next node: the source is going away."""
        self._closed = True

    def render(self) -> list[bytes]:
        """The text, in pieces of about ``PIECE_BYTES``."""
        tick = self._paced() if self._paced is not None else _no_pause
        with self._lock:
            order = self._source.stamps()
            kept = self._kept
            changed = [node for node, stamp in order if _stamp(kept.get(node)) != stamp]
            for gauges in self._source.nodes(changed):
                if self._closed:
                    return []
                kept[gauges.node] = _kept_node(gauges, kept.get(gauges.node))
                tick()
            if len(kept) > len(order):  # nodes gone
                live = {node for node, _ in order}
                for node in [n for n in kept if n not in live]:
                    del kept[node]
            blocks = [kept[node].blocks for node, _ in order if node in kept]
        pieces: list[bytes] = []
        for position, head in enumerate(self._headers):
            batch, size = [head], len(head)
            for block in blocks:
                batch.append(block[position])
                size += len(block[position])
                if size >= PIECE_BYTES:
                    pieces.append(b"".join(batch))
                    batch, size = [], 0
                    tick()
            pieces.append(b"".join(batch))
        return pieces


def _no_pause() -> None:
    pass


def _stamp(kept: _KeptNode | None) -> int:
    return _READ_AGAIN if kept is None else kept.stamp


def _device_key(d: DeviceRow) -> DeviceKey:
    return (d.node, d.uuid, d.index, d.type, d.memory_mib, d.cores)


def _device_labels(d: DeviceRow) -> DeviceLabels:
    labels = {
        "node": d.node,
        "device_uuid": d.uuid,
        "device_index": str(d.index),
        "device_type": d.type,
        "zone": ZONE,
    }
    with_cores = {**labels, "device_cores": str(d.cores)}
    ratio = {"node": d.node, "device_uuid": d.uuid, "device_index": str(d.index), "zone": ZONE}
    return (
        gauge_text.label_set(labels),
        gauge_text.label_set(with_cores),
        gauge_text.label_set({**with_cores, "device_memory_limit": str(d.memory_mib)}),
        gauge_text.label_set(ratio) if d.memory_mib > 0 else "",
    )


def _grant_labels(g: GrantRow) -> str:
    return gauge_text.label_set(
        {
            "namespace": g.namespace,
            "node": g.node,
            "pod": g.pod,
            "container_index": str(g.container_index),
            "device_uuid": g.device_uuid,
            "zone": ZONE,
        }
    )


def _kept_node(gauges: NodeGauges, before: _KeptNode | None) -> _KeptNode:
    """One node's lines of each family. Its devices' label sets, and the limit lines
    while its devices are the same, come from ``before``."""
    keys = tuple(_device_key(d) for d in gauges.devices)
    same_devices = before is not None and before.device_keys == keys
    if before is not None and same_devices:
        labels = before.device_labels
    else:
        known = dict(zip(before.device_keys, before.device_labels, strict=True)) if before else {}
        labels = tuple(
            known.get(key) or _device_labels(d) for key, d in zip(keys, gauges.devices, strict=True)
        )
    lines: list[list[str]] = [[] for _ in _FAMILIES]
    sample = gauge_text.sample
    names = [f.name for f in _FAMILIES]
    for d, (base, with_cores, overview, ratio) in zip(gauges.devices, labels, strict=True):
        if not same_devices:
            lines[0].append(sample(names[0], base, float(d.memory_mib * MIB)))
            lines[1].append(sample(names[1], base, float(d.cores)))
        used_bytes = float(d.memory_used_mib * MIB)
        lines[2].append(sample(names[2], with_cores, used_bytes))
        lines[3].append(sample(names[3], base, float(d.shared)))
        lines[4].append(sample(names[4], base, float(d.cores_used)))
        lines[5].append(sample(names[5], overview, used_bytes))
        if ratio:
            lines[6].append(sample(names[6], ratio, d.memory_used_mib / d.memory_mib))
    for g in gauges.grants:
        grant = _grant_labels(g)
        lines[7].append(sample(names[7], grant, float(g.memory_mib * MIB)))
        lines[8].append(sample(names[8], grant, float(g.cores)))
    blocks = tuple("".join(family).encode() for family in lines)
    if before is not None and same_devices:  # the limits do not change with usage
        blocks = (before.blocks[0], before.blocks[1], *blocks[2:])
    return _KeptNode(gauges.stamp if gauges.complete else _READ_AGAIN, blocks, keys, labels)


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


class IndexHolder(Protocol):
    """What ``StateCollector`` reads of ``services.cluster.ClusterState``."""

    @property
    def index(self) -> ClusterIndex: ...

    @property
    def lock(self) -> threading.RLock: ...


@dataclass(frozen=True, slots=True)
class IndexCounts:
    """The index's nodes and GPUs as the alerts and the dashboard count them."""

    nodes: Mapping[str, int]
    devices: Mapping[str, int]
    #: Free memory on GPUs that take new pods, and the part of it a pod asking for a
    #: whole GPU could not use (on a GPU already shared, or out of slots or cores).
    free_mib: int
    fragmented_mib: int


def node_state(problem: str) -> str:
    """One of ``NODE_STATES`` for a node's inventory ``problem``."""
    if not problem:
        return "ok"
    if problem == NODE_ABSENT:
        return "absent"
    return "unreadable" if "unreadable" in problem else "stale"


def index_counts(holder: IndexHolder) -> IndexCounts:
    """Counted under the index's lock, over its NumPy columns: cheap at 5,000 nodes."""
    nodes = dict.fromkeys(NODE_STATES, 0)
    with holder.lock:
        index = holder.index
        cols = index.cols
        # A row is ok exactly when its inventory has no problem (free rows are not ok
        # either): only the rows left need their problem read.
        nodes["ok"] = int(np.count_nonzero(cols.node_ok))
        if nodes["ok"] < len(index):
            for row in np.flatnonzero(~cols.node_ok[: index.row_span]).tolist():
                try:
                    name = index.name_of(row)
                except KeyError:
                    continue  # a free row
                nodes[node_state(index.inventory(name).problem)] += 1
        valid = cols.valid
        healthy = int(np.count_nonzero(valid & cols.healthy))
        unhealthy = int(np.count_nonzero(valid & ~cols.healthy))
        usable = cols.usable
        free = np.where(usable, cols.mem_free, 0)
        shared = (cols.mem_free < cols.mem_total) | (cols.slots_free < cols.slots_total)
        stranded = shared | (cols.slots_free <= 0) | (cols.cores_free <= 0)
        free_mib = int(free.sum())
        fragmented_mib = int(np.where(stranded, free, 0).sum())
    return IndexCounts(
        nodes=nodes,
        devices={"healthy": healthy, "unhealthy": unhealthy},
        free_mib=free_mib,
        fragmented_mib=fragmented_mib,
    )


class StateCollector(Collector):
    """Gauges the alerts need, computed at each scrape from state already in memory
    (the index, readiness) and from the reservations' start times ``reserved_since``
    returns (the store's, read as the per-pod gauges are)."""

    def __init__(
        self,
        *,
        cluster: IndexHolder,
        ready: Callable[[], bool],
        reserved_since: Callable[[], Iterable[datetime]],
        reservation_ttl_s: float,
        leader_elect: bool,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._cluster = cluster
        self._ready = ready
        self._reserved_since = reserved_since
        self._ttl_s = reservation_ttl_s
        self._leader_elect = leader_elect
        self._clock = clock

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "vgpu_extender_ready",
            "1 while every readiness check passes (what /readyz answers)",
            value=1.0 if self._ready() else 0.0,
        )
        yield GaugeMetricFamily(
            "vgpu_extender_leader_election_enabled",
            "1 when replicas elect a leader (VGPU_LEADER_ELECT); only the leader is ready",
            value=1.0 if self._leader_elect else 0.0,
        )
        counts = index_counts(self._cluster)
        nodes = _gauge("vgpu_extender_nodes", "Nodes in the index by inventory state", ["state"])
        for state in NODE_STATES:
            nodes.add_metric([state], float(counts.nodes[state]))
        devices = _gauge("vgpu_extender_devices", "GPUs in the index by health", ["health"])
        for health in DEVICE_HEALTH:
            devices.add_metric([health], float(counts.devices[health]))
        yield nodes
        yield devices
        yield GaugeMetricFamily(
            "vgpu_extender_gpu_memory_free_bytes",
            "Free memory on the GPUs that take new pods",
            value=float(counts.free_mib * MIB),
        )
        yield GaugeMetricFamily(
            "vgpu_extender_gpu_memory_fragmented_bytes",
            "The part of that free memory a pod asking for a whole GPU could not use",
            value=float(counts.fragmented_mib * MIB),
        )
        now = self._clock()
        ages = [max(0.0, (now - since).total_seconds()) for since in self._reserved_since()]
        yield GaugeMetricFamily(
            "vgpu_extender_reservations",
            "Pods whose devices are reserved by a bind that has not seen its Binding yet",
            value=float(len(ages)),
        )
        yield GaugeMetricFamily(
            "vgpu_extender_reservations_expired",
            "Reservations older than their TTL (VGPU_RESERVATION_TTL_S) that the "
            "reconcile has not released yet",
            value=float(sum(age > self._ttl_s for age in ages)),
        )
        yield GaugeMetricFamily(
            "vgpu_extender_reservation_oldest_age_seconds",
            "Age of the oldest reservation (0 when there is none)",
            value=max(ages, default=0.0),
        )


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
            "the per-pod gauges then leave out the pods it has not named before",
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
        # Set by whoever freezes: counting the frozen objects walks them all, with the
        # interpreter held (0.1 s at 5,000 nodes), far too long to do at every scrape.
        self.gc_frozen = Gauge(
            "vgpu_extender_gc_frozen_objects",
            "Objects kept out of the garbage collector's full passes, as the last freeze "
            "at start-up counted them",
            registry=registry,
        )
        info = Gauge(
            "vgpu_extender_build_info",
            "Version of the running extender",
            ["version", "python_version"],
            registry=registry,
        )
        info.labels(_version(), platform.python_version()).set(1)
        # HAMi's scheduler exports its build under this name; its dashboards read it.
        hami_info = Gauge(
            "hami_build_info",
            "Build of the running scheduler, with the labels HAMi's scheduler gives it",
            ["version", "revision", "build_date", "go_version", "compiler", "platform"],
            registry=registry,
        )
        hami_info.labels(
            _version(),
            "",
            "",
            "",
            platform.python_implementation().lower() + platform.python_version(),
            f"{sys.platform}/{platform.machine()}",
        ).set(1)
        # Children bound once: the verbs' hot path does no label lookup.
        self.verb_seconds = {verb: self.request_seconds.labels(verb) for verb in VERBS}
        self.filter_results = {
            result: self.filter_total.labels(result) for result in FILTER_RESULTS
        }
        self._extra: list[Collector] = []
        self._allocations: AllocationGauges | None = None

    # ----------------------------------------------------------------- scrape-time sources
    def add_collector(self, collector: Collector) -> None:
        self.registry.register(collector)
        self._extra.append(collector)

    def set_allocation_gauges(self, gauges: AllocationGauges) -> None:
        self._allocations = gauges

    def remove_collectors(self) -> None:
        """Forget the runtime-bound collectors (the runtime is gone after shutdown)."""
        for collector in self._extra:
            self.registry.unregister(collector)
        self._extra.clear()
        self._allocations = None

    def render(self) -> bytes:
        return b"".join(self.render_pieces())

    def render_pieces(self) -> list[bytes]:
        """The registry's families, then HAMi's allocation gauges (their own text), in
        pieces of about ``PIECE_BYTES`` to send one after the other."""
        pieces = [generate_latest(self.registry)]
        allocations = self._allocations
        return pieces if allocations is None else pieces + allocations.render()

    # ----------------------------------------------------------------- updates
    def count_rejections(self, counts: Mapping[str, int]) -> None:
        for reason, n in counts.items():
            self.filter_rejected_nodes.labels(reason).inc(n)
