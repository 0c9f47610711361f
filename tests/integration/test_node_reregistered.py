"""A Node object deleted while its pods run, then registered again, hands out no GPU twice.

Through the real app and the test API server: pods bound to a node; its Node object
deleted (a node recreated by its kubelet, an operator's mistake) while they still run;
the node registered again; new pods filtered and bound; a reconcile pass. Before the
fix the deletion dropped the running pods' rows, the new pods took the same GPUs, and
the reconcile re-imported the running pods on top: 40,000 of 23,028 MiB used.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tests.support.apiserver import FakeApiServer
from tests.support.server import (
    RunningExtender,
    StartExtender,
    args,
    bind_args,
    node_json,
    pod_json,
)
from tests.support.waiting import eventually, until_bound
from vgpu_extender import store
from vgpu_extender.kube.real import RealKubeClient

NODE = "gpu-1"
GPU_MIB = 23_028
POD_MIB = 20_000


@pytest.fixture
def cluster(apiserver: FakeApiServer) -> FakeApiServer:
    apiserver.add_node(node_json(NODE, gpus=2, mem=GPU_MIB))
    return apiserver


def _place(running: RunningExtender, cluster: FakeApiServer, name: str) -> dict[str, Any]:
    pod = cluster.add_pod(pod_json(name, mem=POD_MIB))
    assert running.verb("/filter", args(pod, [NODE]))["NodeNames"] == [NODE]
    assert running.verb("/bind", bind_args(pod, NODE)) == {"Error": ""}
    until_bound(running, pod["metadata"]["uid"])  # marked in the background
    return pod


def _filter_reason(running: RunningExtender, name: str) -> str:
    answer = running.verb("/filter", args(pod_json(name, mem=POD_MIB), [NODE]))
    failed = {**answer["FailedNodes"], **answer["FailedAndUnresolvableNodes"]}
    return str(failed.get(NODE, ""))


def _used(running: RunningExtender) -> list[tuple[int, int]]:
    nodes = running.client.get("/api/v1/nodes", params={"devices": "true"}).json()
    [node] = [n for n in nodes if n["name"] == NODE]
    return [(d["memory_used_mib"], d["memory_mib"]) for d in node["devices"]]


def _reconcile(running: RunningExtender, kube: RealKubeClient) -> None:
    sync = running.runtime.sync
    assert sync is not None
    started = sync.passes
    sync.reconcile(kube.list_pods_with_version().items, listed_at=datetime.now(UTC))
    assert sync.passes == started + 1


def test_a_node_deleted_and_registered_again_keeps_its_running_pods_gpus(
    extender: StartExtender, cluster: FakeApiServer, real_kube: RealKubeClient
) -> None:
    running = extender(kube=real_kube)
    first = [_place(running, cluster, f"run-{i}") for i in range(2)]
    assert _used(running) == [(POD_MIB, GPU_MIB)] * 2

    cluster.cluster.delete("nodes", "", NODE)
    eventually(
        lambda: _filter_reason(running, "probe").startswith("no usable device inventory"),
        "the node watch saw the deletion",
    )
    assert store.NODE_ABSENT in _filter_reason(running, "probe")
    # The running pods keep their rows while the node is away.
    for pod in first:
        assert [r.state for r in running.live_rows(pod["metadata"]["uid"])] == ["bound"]

    cluster.add_node(node_json(NODE, gpus=2, mem=GPU_MIB))
    eventually(
        lambda: _filter_reason(running, "probe").startswith("insufficient gpumem"),
        "the node watch saw the node again",
    )
    # New pods find both GPUs taken: no bind onto them.
    late = cluster.add_pod(pod_json("late", mem=POD_MIB))
    answer = running.verb("/filter", args(late, [NODE]))
    assert answer["NodeNames"] == []
    assert running.verb("/bind", bind_args(late, NODE))["Error"] != ""

    _reconcile(running, real_kube)
    assert _used(running) == [(POD_MIB, GPU_MIB)] * 2
    assert running.runtime.conflicts.open() == []
    for pod in first:
        assert [r.state for r in running.live_rows(pod["metadata"]["uid"])] == ["bound"]


def test_a_deleted_node_is_forgotten_once_its_pods_are_gone(
    extender: StartExtender, cluster: FakeApiServer, real_kube: RealKubeClient
) -> None:
    running = extender(kube=real_kube)
    pods = [_place(running, cluster, f"run-{i}") for i in range(2)]
    cluster.cluster.delete("nodes", "", NODE)
    eventually(
        lambda: store.NODE_ABSENT in _filter_reason(running, "probe"), "the node is kept absent"
    )
    cluster.delete_pod("default", pods[0]["metadata"]["name"])
    eventually(lambda: running.live_rows(pods[0]["metadata"]["uid"]) == [], "first pod released")
    # One pod still holds a GPU: the node stays.
    assert running.client.get(f"/api/v1/nodes/{NODE}").status_code == 200
    cluster.delete_pod("default", pods[1]["metadata"]["name"])
    eventually(
        lambda: running.client.get(f"/api/v1/nodes/{NODE}").status_code == 404,
        "the node forgotten with its last pod",
    )
    assert _filter_reason(running, "probe").startswith("node unregistered")
    with running.runtime.sessions() as session:
        assert store.load_inventories(session) == []


def test_a_node_deleted_with_no_pod_is_forgotten_at_once(
    extender: StartExtender, cluster: FakeApiServer, real_kube: RealKubeClient
) -> None:
    running = extender(kube=real_kube)
    # Known before the delete, so the 404 below is the delete's doing.
    assert running.client.get(f"/api/v1/nodes/{NODE}").status_code == 200
    cluster.cluster.delete("nodes", "", NODE)
    eventually(
        lambda: running.client.get(f"/api/v1/nodes/{NODE}").status_code == 404,
        "the node forgotten",
    )
