"""``/metrics``: HAMi's allocation gauges and the extender's own counters, over HTTP."""

from __future__ import annotations

import gzip
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from tests.support.server import (
    RunningExtender,
    StartExtender,
    args,
    bind_args,
    node_json,
    place,
    pod_json,
)
from tests.support.waiting import eventually
from vgpu_extender.kube.fake import FakeKubeClient

MIB = 1024 * 1024
Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _scrape(running: RunningExtender) -> Series:
    response = running.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def _value(series: Series, name: str, **labels: str) -> float:
    return series.get((name, frozenset(labels.items())), 0.0)


def _two_container_pod() -> dict[str, Any]:
    pod = pod_json("duo", namespace="ml", mem=2000, cores=20)
    pod["spec"]["containers"].append(
        {
            "name": "side",
            "resources": {
                "limits": {
                    "nvidia.com/gpu": "1",
                    "nvidia.com/gpumem": "1000",
                    "nvidia.com/gpucores": "5",
                }
            },
        }
    )
    return pod


def test_allocation_gauges_use_hamis_names_labels_and_zone(extender: StartExtender) -> None:
    running = extender(demo=True)
    place(running, _two_container_pod(), "demo-t4-1")
    series = _scrape(running)
    containers = running.client.get("/api/v1/pods/ml/duo").json()["containers"]
    gpu_of = {c["index"]: c["devices"][0]["uuid"] for c in containers}
    asked = {0: (2000, 20), 1: (1000, 5)}  # MiB and cores per container
    for uuid in set(gpu_of.values()):
        mine = [asked[i] for i, held in gpu_of.items() if held == uuid]
        memory, cores = sum(m for m, _ in mine), sum(c for _, c in mine)
        device = {
            "node": "demo-t4-1",
            "device_uuid": uuid,
            "device_index": uuid[-1],
            "zone": "vGPU",
        }
        typed = {**device, "device_type": "NVIDIA-Tesla T4"}
        assert _value(series, "hami_gpu_memory_limit_bytes", **typed) == 15360 * MIB
        assert _value(series, "hami_gpu_core_limit_ratio", **typed) == 100
        assert _value(series, "hami_gpu_shared_count", **typed) == len(mine)
        assert _value(series, "hami_gpu_core_allocated_ratio", **typed) == cores
        allocated = _value(series, "hami_gpu_memory_allocated_bytes", **typed, device_cores="100")
        assert allocated == memory * MIB
        overview = {**typed, "device_cores": "100", "device_memory_limit": "15360"}
        assert _value(series, "hami_node_gpu_overview", **overview) == memory * MIB
        assert _value(series, "hami_node_gpu_memory_allocated_ratio", **device) == memory / 15360
    pod = {"namespace": "ml", "node": "demo-t4-1", "pod": "duo", "zone": "vGPU"}
    for index, (memory, cores) in asked.items():
        where = {**pod, "container_index": str(index), "device_uuid": gpu_of[index]}
        assert _value(series, "hami_vgpu_memory_allocated_bytes", **where) == memory * MIB
        assert _value(series, "hami_vgpu_core_allocated_ratio", **where) == cores
    # Every GPU of the cluster has its limit series, idle or not.
    assert len([k for k in series if k[0] == "hami_gpu_memory_limit_bytes"]) == 12


def test_a_scrape_is_gzipped_when_the_client_asks_and_plain_otherwise(
    extender: StartExtender,
) -> None:
    running = extender(demo=True)
    place(running, pod_json("p", mem=1000), "demo-t4-1")
    with httpx.stream(
        "GET", f"{running.url}/metrics", headers={"Accept-Encoding": "gzip"}
    ) as zipped:
        raw = b"".join(zipped.iter_raw())  # as sent, not decoded
        assert zipped.headers["content-encoding"] == "gzip"
        assert int(zipped.headers["content-length"]) == len(raw)
    plain = running.client.get("/metrics", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    assert int(plain.headers["content-length"]) == len(plain.content)
    assert plain.headers["vary"] == zipped.headers["vary"] == "Accept-Encoding"

    def families(text: str) -> set[str]:
        return {family.name for family in text_string_to_metric_families(text)}

    unzipped = gzip.decompress(raw).decode()
    assert families(unzipped) == families(plain.text)
    assert 'pod="p"' in unzipped and 'pod="p"' in plain.text


def test_each_verb_has_its_latency_histogram(extender: StartExtender) -> None:
    running = extender(demo=True)
    pod = pod_json("p", mem=1000)
    for _ in range(3):
        running.verb("/filter", args(pod, ["demo-t4-1"]))
    running.verb("/filter_onlyone", args(pod, ["demo-t4-1"]))
    running.verb("/prioritize", args(pod, ["demo-t4-1"]))
    running.verb("/bind", bind_args(pod, "demo-t4-1"))
    running.verb("/preempt", {"Pod": pod, "NodeNameToVictims": {}, "NodeNameToMetaVictims": {}})
    running.verb("/noop", args(pod, ["demo-t4-1"]))  # not a verb: the benchmarks' floor
    series = _scrape(running)
    counts = {
        verb: _value(series, "vgpu_extender_request_duration_seconds_count", verb=verb)
        for verb in ("filter", "prioritize", "bind", "preempt")
    }
    assert counts == {"filter": 4, "prioritize": 1, "bind": 1, "preempt": 1}
    assert (
        _value(series, "vgpu_extender_request_duration_seconds_bucket", verb="filter", le="+Inf")
        == 4
    )


def test_filter_results_and_rejection_reasons_are_counted(extender: StartExtender) -> None:
    running = extender(demo=True)
    nodes = ["demo-a100-1", "demo-a100-2", "demo-t4-1", "demo-t4-2"]
    running.verb("/filter", args(pod_json("fits", mem=1000), nodes))
    running.verb("/filter", args(pod_json("huge", mem=100_000), nodes))
    a100_only = pod_json("a100", mem=90_000, annotations={"nvidia.com/use-gputype": "A100"})
    running.verb("/filter", args(a100_only, nodes))
    running.verb("/filter", args(pod_json("bad", mem=1000, cores=400), nodes))

    def rejected(reason: str) -> float:
        return _value(_scrape(running), "vgpu_extender_filter_rejected_nodes_total", reason=reason)

    eventually(lambda: rejected("gpu type mismatch") == 2)
    series = _scrape(running)
    results = {
        result: _value(series, "vgpu_extender_filter_total", result=result)
        for result in ("feasible", "unschedulable", "error")
    }
    assert results == {"feasible": 1, "unschedulable": 2, "error": 1}
    assert rejected("insufficient gpumem") == 4 + 2  # huge: all four; a100: the two A100s


def test_bind_failures_are_counted(extender: StartExtender) -> None:
    running = extender(demo=True)
    place(running, pod_json("ok", mem=1000), "demo-t4-1")
    never_filtered = pod_json("lost", mem=1000)
    assert running.verb("/bind", bind_args(never_filtered, "demo-t4-1"))["Error"]
    series = _scrape(running)
    assert _value(series, "vgpu_extender_bind_total", result="success") == 1
    assert _value(series, "vgpu_extender_bind_total", result="failure") == 1


def test_reconcile_fixes_are_counted_by_kind(extender: StartExtender) -> None:
    kube = FakeKubeClient()
    kube.add_node(node_json("n1", gpus=1))
    placed = pod_json(
        "placed-by-hami",
        node="n1",
        mem=1000,
        annotations={
            "hami.io/vgpu-node": "n1",
            "hami.io/vgpu-devices-allocated": "GPU-n1-0,NVIDIA,1000,10:;",
        },
    )
    placed["status"]["phase"] = "Running"
    kube.add_pod(placed)
    running = extender(kube=kube)
    series = _scrape(running)
    assert _value(series, "vgpu_extender_reconcile_fixes_total", kind="imported") == 1
    assert _value(series, "vgpu_extender_reconcile_fixes_total", kind="released_gone") == 0
    pod = {"namespace": "default", "node": "n1", "pod": "placed-by-hami", "zone": "vGPU"}
    assert (
        _value(
            series,
            "hami_vgpu_memory_allocated_bytes",
            **pod,
            container_index="0",
            device_uuid="GPU-n1-0",
        )
        == 1000 * MIB
    )


def test_database_errors_are_counted(extender: StartExtender) -> None:
    running = extender(demo=True)
    with pytest.raises(SQLAlchemyError), running.runtime.engine.connect() as connection:
        connection.execute(text("SELECT * FROM no_such_table"))
    assert _value(_scrape(running), "vgpu_extender_store_errors_total") == 1


def test_two_apps_in_one_process_keep_their_own_series(extender: StartExtender) -> None:
    first, second = extender(demo=True), extender(demo=True)
    first.verb("/filter", args(pod_json("p", mem=1000), ["demo-t4-1"]))
    assert _value(_scrape(first), "vgpu_extender_filter_total", result="feasible") == 1
    assert _value(_scrape(second), "vgpu_extender_filter_total", result="feasible") == 0


def test_the_alerts_gauges_count_nodes_gpus_memory_and_readiness(extender: StartExtender) -> None:
    running = extender(demo=True)
    before = _scrape(running)
    assert _value(before, "vgpu_extender_ready") == 1
    assert _value(before, "vgpu_extender_leader_election_enabled") == 0
    assert _value(before, "vgpu_extender_nodes", state="ok") == 4
    assert _value(before, "vgpu_extender_devices", health="healthy") == 12
    assert _value(before, "vgpu_extender_devices", health="unhealthy") == 0
    assert _value(before, "vgpu_extender_gpu_memory_fragmented_bytes") == 0
    place(running, pod_json("small", mem=1000), "demo-t4-1")
    after = _scrape(running)
    # The T4 the pod shares keeps 14,360 MiB free that a whole-GPU pod cannot use.
    assert _value(after, "vgpu_extender_gpu_memory_fragmented_bytes") == 14360 * MIB
    free = _value(before, "vgpu_extender_gpu_memory_free_bytes")
    assert _value(after, "vgpu_extender_gpu_memory_free_bytes") == free - 1000 * MIB
    assert _value(after, "vgpu_extender_reservations_expired") == 0
