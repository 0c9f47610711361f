"""The gauges the alerts watch, counted from a real index at scrape time."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from vgpu_extender.domain import Device, DeviceGrant, NodeInventory, PodAssignment
from vgpu_extender.engine import ClusterIndex
from vgpu_extender.metrics import Metrics, StateCollector, index_counts, node_state
from vgpu_extender.store import NODE_ABSENT

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
MIB = 1024 * 1024


class Holder:
    def __init__(self) -> None:
        self.index = ClusterIndex()
        self.lock = threading.RLock()


def _gpu(uuid: str, *, healthy: bool = True, memory: int = 16_000) -> Device:
    return Device(uuid=uuid, memory_mib=memory, healthy=healthy, type="NVIDIA-Tesla T4")


def _cluster() -> Holder:
    holder = Holder()
    index = holder.index
    # A node removed leaves a free row among the others: counted nowhere.
    index.upsert_node(NodeInventory("removed", (_gpu("r0"),), problem="annotation x missing"))
    index.upsert_node(NodeInventory("ok-1", (_gpu("a0"), _gpu("a1"))))
    index.upsert_node(NodeInventory("ok-2", (_gpu("b0"), _gpu("b1", healthy=False))))
    bad = "annotation hami.io/node-nvidia-register unreadable: not JSON"
    index.upsert_node(NodeInventory("bad", (_gpu("c0"),), problem=bad))
    missing = "annotation hami.io/node-nvidia-register missing"
    index.upsert_node(NodeInventory("gone-quiet", (_gpu("d0"),), problem=missing))
    index.upsert_node(NodeInventory("deleted", (_gpu("e0"),), problem=NODE_ABSENT))
    # 4,000 MiB of a0 taken: its 12,000 free MiB are stranded for a whole-GPU pod.
    index.remove_node("removed")
    index.apply("p1", PodAssignment("ok-1", ((DeviceGrant("a0", 4_000, 30),),)))
    return holder


def _samples(collector: StateCollector) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _collector(holder: Holder, *, ready: bool = True, reserved: int = 0) -> StateCollector:
    since = [NOW - timedelta(seconds=s) for s in (10, 300, 600)][:reserved]
    return StateCollector(
        cluster=holder,
        ready=lambda: ready,
        reserved_since=lambda: since,
        reservation_ttl_s=120.0,
        leader_elect=True,
        clock=lambda: NOW,
    )


def test_a_problem_names_its_state() -> None:
    assert node_state("") == "ok"
    assert node_state("annotation x unreadable: bad") == "unreadable"
    assert node_state("annotation x missing") == "stale"
    assert node_state("annotation x lists no devices") == "stale"
    assert node_state(NODE_ABSENT) == "absent"


def test_nodes_devices_and_memory_are_counted_from_the_index() -> None:
    counts = index_counts(_cluster())
    assert counts.nodes == {"ok": 2, "unreadable": 1, "stale": 1, "absent": 1}
    assert counts.devices == {"healthy": 6, "unhealthy": 1}
    # Usable GPUs only: a0 (12,000 free, shared), a1 and b0 (idle); not b1 (unhealthy)
    # nor the GPUs of nodes with a problem.
    assert counts.free_mib == 12_000 + 16_000 + 16_000
    assert counts.fragmented_mib == 12_000


def test_the_collector_exports_every_state_even_at_zero() -> None:
    samples = _samples(_collector(_cluster(), ready=False))
    assert samples[("vgpu_extender_ready", ())] == 0
    assert samples[("vgpu_extender_leader_election_enabled", ())] == 1
    assert samples[("vgpu_extender_nodes", (("state", "unreadable"),))] == 1
    assert samples[("vgpu_extender_devices", (("health", "unhealthy"),))] == 1
    assert samples[("vgpu_extender_gpu_memory_fragmented_bytes", ())] == 12_000 * MIB
    assert samples[("vgpu_extender_reservations", ())] == 0
    assert samples[("vgpu_extender_reservation_oldest_age_seconds", ())] == 0

    empty = _samples(_collector(Holder()))
    assert empty[("vgpu_extender_ready", ())] == 1
    for state in ("ok", "unreadable", "stale", "absent"):
        assert empty[("vgpu_extender_nodes", (("state", state),))] == 0


def test_reservations_past_their_ttl_are_counted() -> None:
    samples = _samples(_collector(Holder(), reserved=3))
    assert samples[("vgpu_extender_reservations", ())] == 3
    assert samples[("vgpu_extender_reservations_expired", ())] == 2  # 300 s and 600 s
    assert samples[("vgpu_extender_reservation_oldest_age_seconds", ())] == 600


def test_hamis_build_info_is_exported_with_its_labels() -> None:
    text = Metrics().render().decode()
    (family,) = [f for f in text_string_to_metric_families(text) if f.name == "hami_build_info"]
    (sample,) = family.samples
    assert set(sample.labels) == {
        "version",
        "revision",
        "build_date",
        "go_version",
        "compiler",
        "platform",
    }
    assert sample.value == 1
