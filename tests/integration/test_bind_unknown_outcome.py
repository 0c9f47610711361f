"""A Binding whose answer is lost: the extender reads the pod back before undoing anything.

The test API server commits the Binding and then loses the answer in each of the
three ways an API server does (a 504 ``Timeout`` Status, a connection closed without
a word, a commit after the client's read timeout). The bind must answer success and
keep the rows, so the next pod cannot take the same GPU. Bound elsewhere, or never
committed, the devices are given back; when the pod cannot be read at all, they stay
reserved and the bind says the outcome is unknown, until the reconcile settles it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.support.apiserver import TIMEOUT_MESSAGE, FakeApiServer
from tests.support.server import (
    RunningExtender,
    StartExtender,
    args,
    bind_args,
    node_json,
    pod_json,
)
from tests.support.waiting import until_bound
from vgpu_extender.kube.config import Timeouts
from vgpu_extender.kube.real import RealKubeClient

NODE = "gpu-1"
GPU = f"GPU-{NODE}-0"
GPU_MIB = 16384
POD_MIB = 10000  # two of them do not fit on the one GPU
READ_TIMEOUT_S = 0.5
BINDING = r"/pods/web/binding$"
POD_READ = ("GET", "/api/v1/namespaces/default/pods/web")


@pytest.fixture
def cluster(apiserver: FakeApiServer) -> FakeApiServer:
    apiserver.add_node(node_json(NODE, gpus=1, mem=GPU_MIB))
    return apiserver


@pytest.fixture
def kube(cluster: FakeApiServer) -> Iterator[RealKubeClient]:
    """The real client, with a read timeout short enough to pass in a test."""
    client = RealKubeClient.from_configuration(
        cluster.configuration(), timeouts=Timeouts(connect_s=1.0, read_s=READ_TIMEOUT_S)
    )
    try:
        yield client
    finally:
        client.close()


def _start(extender: StartExtender, kube: RealKubeClient, **settings: Any) -> RunningExtender:
    running = extender(kube=kube, **settings)
    assert NODE in running.runtime.cluster.index  # the node watch's first list
    return running


def _filter_and_bind(running: RunningExtender, pod: dict[str, Any]) -> str:
    """What kube-scheduler does: filter (the pod is seen), then bind to the node."""
    assert running.verb("/filter", args(pod, [NODE]))["NodeNames"] == [NODE]
    error: str = running.verb("/bind", bind_args(pod, NODE))["Error"]
    return error


def _allocations(running: RunningExtender) -> list[dict[str, Any]]:
    response = running.client.get("/api/v1/allocations", params={"limit": 1000})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def _used_mib(running: RunningExtender) -> int:
    return sum(a["memory_mib"] for a in _allocations(running) if a["device_uuid"] == GPU)


def _next_pod_is_kept_off_the_gpu(running: RunningExtender, cluster: FakeApiServer) -> None:
    """The GPU is taken: the next pod asking for it is refused, at filter and at bind."""
    other = cluster.add_pod(pod_json("next", mem=POD_MIB))
    answer = running.verb("/filter", args(other, [NODE]))
    assert answer["NodeNames"] == [], answer
    assert NODE in answer["FailedAndUnresolvableNodes"] or NODE in answer["FailedNodes"]
    assert running.verb("/bind", bind_args(other, NODE))["Error"]
    assert running.live_rows(other["metadata"]["uid"]) == []
    assert "nodeName" not in cluster.get_pod("default", "next")["spec"]
    assert _used_mib(running) <= GPU_MIB


def _gpu_is_free(running: RunningExtender, cluster: FakeApiServer) -> None:
    """Nothing is left held: the next pod takes the GPU."""
    assert running.runtime.cluster.index.allocation("uid-web") is None
    assert running.live_rows("uid-web") == []
    other = cluster.add_pod(pod_json("next", mem=POD_MIB))
    assert _filter_and_bind(running, other) == ""
    assert cluster.get_pod("default", "next")["spec"]["nodeName"] == NODE
    assert _used_mib(running) == POD_MIB


@pytest.mark.parametrize("how", ["504", "close", "late"])
def test_a_binding_committed_with_its_answer_lost_stands(
    extender: StartExtender, cluster: FakeApiServer, kube: RealKubeClient, how: str
) -> None:
    pod = cluster.add_pod(pod_json("web", mem=POD_MIB))
    running = _start(extender, kube, bind_check_window_s=3.0)
    # "late": the server commits after the client gave up waiting for the answer.
    delay_s = READ_TIMEOUT_S * 2 if how == "late" else 0.0
    cluster.lose_answer_next("POST", BINDING, how, delay_s=delay_s)

    assert _filter_and_bind(running, pod) == ""

    stored = cluster.get_pod("default", "web")
    assert stored["spec"]["nodeName"] == NODE
    assert len(cluster.bindings) == 1  # committed once; nothing sent again
    assert POD_READ in cluster.requests  # the outcome was read back, not assumed
    until_bound(running, "uid-web")
    [row] = running.live_rows("uid-web")
    annotations = stored["metadata"]["annotations"]
    assert (
        annotations["hami.io/vgpu-devices-allocated"] == f"{row.device_uuid},NVIDIA,{POD_MIB},0:;"
    )
    assert [(a["pod"], a["device_uuid"], a["state"]) for a in _allocations(running)] == [
        ("web", GPU, "bound")
    ]
    _next_pod_is_kept_off_the_gpu(running, cluster)


def test_a_pod_bound_elsewhere_meanwhile_gives_the_devices_back(
    extender: StartExtender, cluster: FakeApiServer, kube: RealKubeClient
) -> None:
    pod = cluster.add_pod(pod_json("web", mem=POD_MIB))
    running = _start(extender, kube, bind_check_window_s=3.0)
    # Someone else binds the pod just before ours reaches the server (which refuses
    # ours), and that refusal is lost behind a 504.
    cluster.lose_answer_next(
        "POST",
        BINDING,
        "504",
        before=lambda: cluster.cluster.bind("default", "web", "uid-web", "gpu-2"),
    )

    error = _filter_and_bind(running, pod)

    assert "bound to node gpu-2" in error, error
    assert "request did not complete" in error
    assert cluster.get_pod("default", "web")["spec"]["nodeName"] == "gpu-2"
    _gpu_is_free(running, cluster)


@pytest.mark.parametrize("how", ["504", "drop"], ids=["504-before-commit", "closed-unapplied"])
def test_a_binding_that_never_committed_gives_the_devices_back(
    extender: StartExtender, cluster: FakeApiServer, kube: RealKubeClient, how: str
) -> None:
    pod = cluster.add_pod(pod_json("web", mem=POD_MIB))
    running = _start(extender, kube, bind_check_window_s=0.5)
    if how == "504":  # the server's timeout, before anything was written
        cluster.fail_next("POST", BINDING, 504, message=TIMEOUT_MESSAGE)
    else:
        cluster.lose_answer_next("POST", BINDING, "drop")

    error = _filter_and_bind(running, pod)

    assert "the pod is not bound" in error, error
    assert POD_READ in cluster.requests
    assert not cluster.bindings
    assert "nodeName" not in cluster.get_pod("default", "web")["spec"]
    _gpu_is_free(running, cluster)


@pytest.mark.parametrize("committed", [True, False], ids=["committed", "not-committed"])
def test_when_the_pod_cannot_be_read_back_the_devices_stay_reserved(
    extender: StartExtender, cluster: FakeApiServer, kube: RealKubeClient, committed: bool
) -> None:
    pod = cluster.add_pod(pod_json("web", mem=POD_MIB))
    running = _start(extender, kube, bind_check_window_s=0.5, reservation_ttl_s=0.0)
    if committed:
        cluster.lose_answer_next("POST", BINDING, "504")
    else:
        cluster.fail_next("POST", BINDING, 504, message=TIMEOUT_MESSAGE)
    cluster.fail_next("GET", r"/pods/web$", 503, times=1000, message="the API server is away")

    error = _filter_and_bind(running, pod)

    assert "outcome unknown" in error, error
    assert "cannot be read back" in error
    assert [r.state.value for r in running.live_rows("uid-web")] == ["reserved"]
    assert running.runtime.cluster.index.allocation("uid-web") is not None
    _next_pod_is_kept_off_the_gpu(running, cluster)

    # The reconcile settles it from what the API server lists.
    sync = running.runtime.sync
    assert sync is not None
    listed = cluster.cluster.list_objects("pods").items
    sync.reconcile(listed, listed_at=datetime.now(UTC))
    if committed:
        assert [r.state.value for r in running.live_rows("uid-web")] == ["bound"]
    else:
        assert running.live_rows("uid-web") == []
        assert running.runtime.cluster.index.allocation("uid-web") is None


def _node_lock(cluster: FakeApiServer) -> str:
    annotations = cluster.get_node(NODE)["metadata"].get("annotations") or {}
    lock: str = annotations.get("hami.io/mutex.lock", "")
    return lock


@pytest.mark.parametrize("readable", [True, False], ids=["read-back-unbound", "unreadable"])
def test_the_node_lock_stays_only_while_the_binding_may_have_landed(
    extender: StartExtender, cluster: FakeApiServer, kube: RealKubeClient, readable: bool
) -> None:
    """Maybe bound, the pod's device plugin may be allocating it: a second pod must not
    allocate on the node before it (the lock expires, or the plugin releases it). Known
    unbound, the lock goes with the rest."""
    pod = cluster.add_pod(pod_json("web", mem=POD_MIB))
    running = _start(extender, kube, bind_check_window_s=0.5, hami_node_lock=True)
    cluster.fail_next("POST", BINDING, 504, message=TIMEOUT_MESSAGE)
    if not readable:
        cluster.fail_next("GET", r"/pods/web$", 503, times=1000, message="the API server is away")

    error = _filter_and_bind(running, pod)

    if readable:
        assert "the pod is not bound" in error, error
        assert _node_lock(cluster) == ""
    else:
        assert "outcome unknown" in error, error
        assert _node_lock(cluster).endswith(",default,web")
        # The next bind on the node may not take the lock over (its owner, unreadable,
        # may be allocating).
        other = cluster.add_pod(pod_json("next", mem=100))
        assert running.verb("/bind", bind_args(other, NODE))["Error"]
        assert _node_lock(cluster).endswith(",default,web")
        assert "nodeName" not in cluster.get_pod("default", "next")["spec"]
