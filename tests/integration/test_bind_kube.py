"""bind against a Kubernetes API over HTTP: the real client and the test API server.

Checks what kube-scheduler and HAMi's device plugin rely on: the Binding carries the
pod UID, the pod carries HAMi's annotations, an Event is recorded, and any failure
after the store insert leaves nothing behind.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
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
from vgpu_extender.kube.real import RealKubeClient

NODE = "gpu-1"


@pytest.fixture
def cluster(apiserver: FakeApiServer) -> FakeApiServer:
    apiserver.add_node(node_json(NODE, gpus=2, mem=16384))
    return apiserver


def _start(extender: StartExtender, kube: RealKubeClient, **settings: Any) -> RunningExtender:
    running = extender(kube=kube, **settings)
    assert NODE in running.runtime.cluster.index  # the node watch's first list
    return running


@pytest.mark.parametrize("filtered_first", [True, False], ids=["pod-from-filter", "pod-from-api"])
def test_bind_annotates_binds_with_uid_and_records_an_event(
    extender: StartExtender, cluster: FakeApiServer, real_kube: RealKubeClient, filtered_first: bool
) -> None:
    pod = cluster.add_pod(pod_json("web", mem=4000, cores=30))
    running = _start(extender, real_kube, bind_success_events=True)
    if filtered_first:
        assert running.verb("/filter", args(pod, [NODE]))["NodeNames"] == [NODE]
    assert running.verb("/bind", bind_args(pod, NODE)) == {"Error": ""}

    stored = cluster.get_pod("default", "web")
    assert stored["spec"]["nodeName"] == NODE
    [binding] = cluster.bindings
    assert binding["metadata"]["uid"] == pod["metadata"]["uid"]
    assert binding["target"]["name"] == NODE
    annotations = stored["metadata"]["annotations"]
    uid = pod["metadata"]["uid"]
    until_bound(running, uid)
    rows = running.live_rows(uid)
    assert annotations["hami.io/vgpu-node"] == NODE
    assert annotations["hami.io/bind-phase"] == "allocating"
    assert int(annotations["hami.io/bind-time"]) > 0
    expected = f"{rows[0].device_uuid},NVIDIA,4000,30:;"
    assert annotations["hami.io/vgpu-devices-allocated"] == expected
    assert annotations["hami.io/vgpu-devices-to-allocate"] == expected
    # The annotations rode on the Binding: it is the only write to the pod.
    assert binding["metadata"]["annotations"] == annotations
    assert _pod_writes(cluster) == [("POST", "/api/v1/namespaces/default/pods/web/binding")]
    eventually(lambda: bool(cluster.events), "the bind's Event was posted")
    reasons = [e["reason"] for e in cluster.events]
    assert reasons == ["BindingSucceed"]


def _pod_writes(cluster: FakeApiServer) -> list[tuple[str, str]]:
    return [(m, p) for m, p in cluster.requests if m != "GET" and "/pods/" in p]


FAILURES = [
    # (method, path regex, status, message, error expected in the answer)
    ("POST", r"/binding$", 409, 'pod web is already assigned to node "other"', "already assigned"),
    (
        "POST",
        r"/binding$",
        409,
        'Operation cannot be fulfilled on pods/binding "web": Precondition failed: '
        "UID in precondition: a, UID in object meta: b",
        "Precondition failed",
    ),
    ("POST", r"/binding$", 500, "etcd is down", "etcd is down"),
    ("POST", r"/binding$", 404, 'pods "web" not found', "not found"),
]


@pytest.mark.parametrize(
    ("method", "path", "status", "message", "error"),
    FAILURES,
    ids=["binding-409", "binding-uid-mismatch", "binding-500", "binding-404"],
)
def test_a_failure_after_the_insert_removes_the_rows(
    extender: StartExtender,
    cluster: FakeApiServer,
    real_kube: RealKubeClient,
    method: str,
    path: str,
    status: int,
    message: str,
    error: str,
) -> None:
    pod = cluster.add_pod(pod_json("web", mem=4000))
    running = _start(extender, real_kube)
    cluster.fail_next(method, path, status, message=message)
    answer = running.verb("/bind", bind_args(pod, NODE))
    assert error in answer["Error"]
    assert running.live_rows(pod["metadata"]["uid"]) == []
    assert running.runtime.cluster.index.allocation(pod["metadata"]["uid"]) is None
    assert not cluster.bindings
    assert "annotations" not in cluster.get_pod("default", "web")["metadata"]
    eventually(lambda: bool(cluster.events), "the bind's Event was posted")
    assert [e["reason"] for e in cluster.events] == ["BindingFailed"]
    # Nothing was lost either: the retry kube-scheduler makes goes through.
    assert running.verb("/bind", bind_args(pod, NODE)) == {"Error": ""}


@pytest.mark.parametrize("patch_fails", [False, True], ids=["annotated", "patch-500"])
def test_bound_to_the_same_node_meanwhile_keeps_the_allocation_with_our_annotations(
    extender: StartExtender, cluster: FakeApiServer, real_kube: RealKubeClient, patch_fails: bool
) -> None:
    """Someone else bound the pod to this node between filter and bind.

    The Binding is refused; HAMi's annotations are then patched onto the pod, so it runs
    with the devices recorded, or the allocation is undone when that fails.
    """
    pod = cluster.add_pod(pod_json("web", mem=4000))
    running = _start(extender, real_kube)
    assert running.verb("/filter", args(pod, [NODE]))["NodeNames"] == [NODE]
    cluster.cluster.bind("default", "web", pod["metadata"]["uid"], NODE)
    if patch_fails:
        cluster.fail_next("PATCH", r"/pods/web$", 500, message="patch refused")
    answer = running.verb("/bind", bind_args(pod, NODE))
    rows = running.live_rows(pod["metadata"]["uid"])
    annotations = cluster.get_pod("default", "web")["metadata"].get("annotations") or {}
    if patch_fails:
        assert "patch refused" in answer["Error"]
        assert rows == [] and annotations == {}
        return
    assert answer == {"Error": ""}
    uid = pod["metadata"]["uid"]
    until_bound(running, uid)
    expected = f"{rows[0].device_uuid},NVIDIA,4000,0:;"
    assert annotations["hami.io/vgpu-devices-to-allocate"] == expected
    assert _pod_writes(cluster) == [
        ("POST", "/api/v1/namespaces/default/pods/web/binding"),
        ("PATCH", "/api/v1/namespaces/default/pods/web"),
    ]


def test_a_pod_already_bound_gets_an_error_and_nothing_changes(
    extender: StartExtender, cluster: FakeApiServer, real_kube: RealKubeClient
) -> None:
    pod = cluster.add_pod(pod_json("web", mem=4000))
    running = _start(extender, real_kube)
    assert running.verb("/bind", bind_args(pod, NODE)) == {"Error": ""}
    uid = pod["metadata"]["uid"]
    until_bound(running, uid)
    rows = running.live_rows(uid)
    answer = running.verb("/bind", bind_args(pod, NODE))
    assert answer["Error"].endswith(f"pod is already bound to node {NODE}")
    assert running.live_rows(pod["metadata"]["uid"]) == rows
    assert len(cluster.bindings) == 1


@pytest.mark.parametrize(
    ("body_change", "error"),
    [
        ({"PodUID": "someone-else"}, "deleted and created again"),
        ({"PodName": "ghost"}, "pod not found"),
        ({"Node": "gpu-9"}, "node unregistered"),
    ],
    ids=["uid-mismatch", "pod-missing", "node-unknown"],
)
def test_binds_that_cannot_start_change_nothing(
    extender: StartExtender,
    cluster: FakeApiServer,
    real_kube: RealKubeClient,
    body_change: dict[str, str],
    error: str,
) -> None:
    pod = cluster.add_pod(pod_json("web", mem=4000))
    running = _start(extender, real_kube)
    answer = running.verb("/bind", {**bind_args(pod, NODE), **body_change})
    assert error in answer["Error"]
    assert running.live_rows(pod["metadata"]["uid"]) == []
    assert not cluster.bindings
    assert "annotations" not in cluster.get_pod("default", "web")["metadata"]


def test_a_node_that_no_longer_fits_refuses_the_bind(
    extender: StartExtender, cluster: FakeApiServer, real_kube: RealKubeClient
) -> None:
    first = cluster.add_pod(pod_json("first", gpus=2))  # both GPUs, exclusively
    late = cluster.add_pod(pod_json("late", mem=1000))
    running = _start(extender, real_kube)
    assert running.verb("/filter", args(late, [NODE]))["NodeNames"] == [NODE]
    assert running.verb("/bind", bind_args(first, NODE)) == {"Error": ""}
    answer = running.verb("/bind", bind_args(late, NODE))
    assert f"node {NODE} cannot take the pod" in answer["Error"]
    assert running.live_rows(late["metadata"]["uid"]) == []
    assert "nodeName" not in cluster.get_pod("default", "late")["spec"]


def test_hami_node_lock_is_taken_and_contention_refuses(
    extender: StartExtender, cluster: FakeApiServer, real_kube: RealKubeClient
) -> None:
    first = cluster.add_pod(pod_json("first", mem=1000))
    second = cluster.add_pod(pod_json("second", mem=1000))
    running = _start(extender, real_kube, hami_node_lock=True)
    assert running.verb("/bind", bind_args(first, NODE)) == {"Error": ""}
    lock = cluster.get_node(NODE)["metadata"]["annotations"]["hami.io/mutex.lock"]
    assert lock.endswith(",default,first")
    # The device plugin has not released it yet: the next bind on the node must wait.
    answer = running.verb("/bind", bind_args(second, NODE))
    assert "node lock contention" in answer["Error"]
    assert running.live_rows(second["metadata"]["uid"]) == []
    assert cluster.get_node(NODE)["metadata"]["annotations"]["hami.io/mutex.lock"] == lock


@pytest.mark.parametrize(
    "lock",
    [
        (datetime.now(UTC) - timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
        + ",default,someone",
        datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") + ",default,gone-pod",
    ],
    ids=["older-than-timeout", "owner-pod-gone"],
)
def test_a_stale_node_lock_is_reclaimed(
    extender: StartExtender, cluster: FakeApiServer, real_kube: RealKubeClient, lock: str
) -> None:
    cluster.add_pod(pod_json("someone", mem=10))
    cluster.cluster.patch(
        "nodes", "", NODE, {"metadata": {"annotations": {"hami.io/mutex.lock": lock}}}
    )
    pod = cluster.add_pod(pod_json("web", mem=1000))
    running = _start(extender, real_kube, hami_node_lock=True)
    assert running.verb("/bind", bind_args(pod, NODE)) == {"Error": ""}
    taken = cluster.get_node(NODE)["metadata"]["annotations"]["hami.io/mutex.lock"]
    assert taken.endswith(",default,web")
