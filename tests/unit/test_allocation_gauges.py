"""HAMi's allocation gauges written as text: byte for byte what prometheus_client writes
for the same samples, and each node's lines kept until its stamp changes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from vgpu_extender import gauge_text
from vgpu_extender.metrics import (
    PIECE_BYTES,
    ZONE,
    AllocationGauges,
    DeviceRow,
    GrantRow,
    Metrics,
    NodeGauges,
)

MIB = 1024 * 1024
# Label values prometheus_client must escape, and one it must not touch.
AWKWARD = 'quote " backslash \\ newline \n tab \t ünïcode'


def _device(node: str, slot: int, *, used: int = 0, memory: int = 81_920) -> DeviceRow:
    return DeviceRow(
        node=node,
        uuid=f"GPU-{node}-{slot}",
        index=slot,
        type="NVIDIA-A100-SXM4-80GB",
        memory_mib=memory,
        cores=100,
        memory_used_mib=used,
        cores_used=used // 1000,
        shared=1 if used else 0,
    )


def _grant(node: str, pod: str, memory: int, *, namespace: str = "ml") -> GrantRow:
    return GrantRow(
        namespace=namespace,
        node=node,
        pod=pod,
        container_index=0,
        device_uuid=f"GPU-{node}-0",
        memory_mib=memory,
        cores=30,
    )


class Source:
    """A ``NodeGaugeSource`` over fixed rows, counting the nodes it was asked for."""

    def __init__(self, nodes: Sequence[NodeGauges]) -> None:
        self.by_name = {n.node: n for n in nodes}
        self.asked: list[str] = []

    def stamps(self) -> list[tuple[str, int]]:
        return sorted((name, n.stamp) for name, n in self.by_name.items())

    def nodes(self, names: Sequence[str]) -> Iterable[NodeGauges]:
        self.asked += names
        return [self.by_name[name] for name in names if name in self.by_name]


class Reference(Collector):
    """The same families through prometheus_client, as the extender wrote them before."""

    def __init__(self, nodes: Sequence[NodeGauges]) -> None:
        self._nodes = nodes

    def collect(self) -> Iterable[Metric]:
        labels = ["node", "device_uuid", "device_index", "device_type", "zone"]
        cores = ["node", "device_uuid", "device_index", "device_cores", "device_type", "zone"]
        overview = [*cores, "device_memory_limit"]
        ratio = ["node", "device_uuid", "device_index", "zone"]
        grant = ["namespace", "node", "pod", "container_index", "device_uuid", "zone"]
        families = [
            GaugeMetricFamily(
                "hami_gpu_memory_limit_bytes", "Device memory of a GPU", labels=labels
            ),
            GaugeMetricFamily(
                "hami_gpu_core_limit_ratio", "Device cores of a GPU (100: one GPU)", labels=labels
            ),
            GaugeMetricFamily(
                "hami_gpu_memory_allocated_bytes", "Device memory allocated on a GPU", labels=cores
            ),
            GaugeMetricFamily("hami_gpu_shared_count", "Containers sharing a GPU", labels=labels),
            GaugeMetricFamily(
                "hami_gpu_core_allocated_ratio", "Cores allocated on a GPU", labels=labels
            ),
            GaugeMetricFamily("hami_node_gpu_overview", "GPU overview on a node", labels=overview),
            GaugeMetricFamily(
                "hami_node_gpu_memory_allocated_ratio",
                "Allocated share of a GPU's memory (0-1)",
                labels=ratio,
            ),
            GaugeMetricFamily(
                "hami_vgpu_memory_allocated_bytes",
                "vGPU memory allocated to a container",
                labels=grant,
            ),
            GaugeMetricFamily(
                "hami_vgpu_core_allocated_ratio",
                "vGPU cores allocated to a container",
                labels=grant,
            ),
        ]
        for node in self._nodes:
            for d in node.devices:
                base = [d.node, d.uuid, str(d.index), d.type, ZONE]
                with_cores = [d.node, d.uuid, str(d.index), str(d.cores), d.type, ZONE]
                used = float(d.memory_used_mib * MIB)
                families[0].add_metric(base, float(d.memory_mib * MIB))
                families[1].add_metric(base, float(d.cores))
                families[2].add_metric(with_cores, used)
                families[3].add_metric(base, float(d.shared))
                families[4].add_metric(base, float(d.cores_used))
                families[5].add_metric([*with_cores, str(d.memory_mib)], used)
                if d.memory_mib > 0:
                    families[6].add_metric(
                        [d.node, d.uuid, str(d.index), ZONE], d.memory_used_mib / d.memory_mib
                    )
            for g in node.grants:
                values = [g.namespace, g.node, g.pod, str(g.container_index), g.device_uuid, ZONE]
                families[7].add_metric(values, float(g.memory_mib * MIB))
                families[8].add_metric(values, float(g.cores))
        return families


def _reference(nodes: Sequence[NodeGauges]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Reference(nodes))
    return generate_latest(registry)


def _cluster() -> list[NodeGauges]:
    return [
        NodeGauges(
            "a-node",
            stamp=3,
            devices=[_device("a-node", 0, used=20_000), _device("a-node", 1)],
            grants=[_grant("a-node", "trainer", 20_000)],
        ),
        # A device without memory has no ratio line; odd text in every label it has.
        NodeGauges(
            "b-node",
            stamp=5,
            devices=[_device("b-node", 0, memory=0)],
            grants=[_grant("b-node", AWKWARD, 1, namespace=AWKWARD)],
        ),
        NodeGauges("c-node", stamp=1, devices=[], grants=[]),
    ]


def test_the_text_is_prometheus_clients_byte_for_byte() -> None:
    nodes = _cluster()
    written = b"".join(AllocationGauges(Source(nodes)).render())

    assert written == _reference(nodes)
    # The awkward values came through escaped and read back whole.
    pods = {
        sample.labels["pod"]
        for family in text_string_to_metric_families(written.decode())
        for sample in family.samples
        if "pod" in sample.labels
    }
    assert pods == {"trainer", AWKWARD}


def test_numbers_are_written_as_go_writes_them() -> None:
    assert gauge_text.sample("m", "", 85_899_345_920.0) == "m 8.589934592e+10\n"
    assert gauge_text.sample("m", "", 100.0) == "m 100.0\n"
    assert gauge_text.sample("m", "", 0.25) == "m 0.25\n"
    assert gauge_text.label_set({"b": "2", "a": 'x"y'}) == '{a="x\\"y",b="2"}'


def test_only_nodes_whose_stamp_changed_are_read_again() -> None:
    source = Source(_cluster())
    gauges = AllocationGauges(source)
    gauges.render()
    assert sorted(source.asked) == ["a-node", "b-node", "c-node"]

    source.asked.clear()
    gauges.render()
    assert source.asked == []  # nothing changed: every line kept

    busier = NodeGauges(
        "a-node",
        stamp=4,
        devices=[_device("a-node", 0, used=40_000), _device("a-node", 1, used=1_000)],
        grants=[_grant("a-node", "trainer", 20_000), _grant("a-node", "second", 20_000)],
    )
    source.by_name["a-node"] = busier
    written = b"".join(gauges.render())
    assert source.asked == ["a-node"]
    assert written == _reference(list(source.by_name.values()))


def test_a_node_gone_leaves_the_text_and_an_incomplete_one_is_read_each_time() -> None:
    nodes = _cluster()
    source = Source(nodes)
    gauges = AllocationGauges(source)
    gauges.render()

    del source.by_name["b-node"]
    unnamed = NodeGauges(
        "c-node", stamp=2, devices=[_device("c-node", 0)], grants=[], complete=False
    )
    source.by_name["c-node"] = unnamed
    source.asked.clear()
    written = b"".join(gauges.render())
    assert b"b-node" not in written
    assert written == _reference([nodes[0], unnamed])
    assert source.asked == ["c-node"]

    source.asked.clear()
    gauges.render()
    assert source.asked == ["c-node"]  # until its pods can be named


def test_a_big_text_comes_in_pieces_and_a_closed_render_stops() -> None:
    nodes = [
        NodeGauges(
            f"node-{n:04d}",
            stamp=1,
            devices=[_device(f"node-{n:04d}", slot, used=slot * 1000) for slot in range(8)],
            grants=[],
        )
        for n in range(800)
    ]
    ticks: list[int] = []
    gauges = AllocationGauges(Source(nodes), paced=lambda: lambda: ticks.append(1))
    pieces = gauges.render()

    assert b"".join(pieces) == _reference(nodes)
    assert len(pieces) > len(b"".join(pieces)) // PIECE_BYTES  # none much past the size
    assert all(len(piece) < PIECE_BYTES + 4096 for piece in pieces)
    # A tick after every node written and every full piece: where a pacer may pause.
    assert len(ticks) == len(nodes) + sum(len(p) >= PIECE_BYTES for p in pieces)

    closing = AllocationGauges(Source(nodes))
    closing.close()
    assert closing.render() == []


def test_the_registry_and_the_gauges_render_as_one_text() -> None:
    metrics = Metrics()
    alone = metrics.render()
    nodes = _cluster()
    metrics.set_allocation_gauges(AllocationGauges(Source(nodes)))

    text = metrics.render()
    reference = _reference(nodes)
    assert text.endswith(reference)
    registry = {f.name for f in text_string_to_metric_families(text[: -len(reference)].decode())}
    assert registry == {f.name for f in text_string_to_metric_families(alone.decode())}
    metrics.remove_collectors()
    assert b"hami_gpu_memory_limit_bytes" not in metrics.render()
