"""bind takes each vendor's node lock as HAMi does, over real HTTP against the test API
server: Cambricon's own ``cambricon.com/dsmlu.lock`` (a bare RFC3339 time, 2 minutes)
for a pod asking MLUs, HAMi's shared ``hami.io/mutex.lock`` for NVIDIA, both for a pod
asking both; a fresh lock refuses the bind with the reason, an expired one is taken
over, and a bind that fails gives back what it took."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support.apiserver import FakeApiServer
from tests.support.server import RunningExtender, StartExtender, bind_args, node_json, pod_json
from tests.support.waiting import eventually
from vgpu_extender.kube.real import RealKubeClient

NODE = "mixed-1"
MLU_LOCK = "cambricon.com/dsmlu.lock"
SHARED_LOCK = "hami.io/mutex.lock"
MLU_LIMITS = {
    "cambricon.com/vmlu": "1",
    "cambricon.com/mlu.smlu.vmemory": "16",
    "cambricon.com/mlu.smlu.vcore": "50",
}


@pytest.fixture
def cluster(apiserver: FakeApiServer) -> FakeApiServer:
    node = node_json(NODE, gpus=1, mem=16000)
    # Two MLUs of 16 GiB each, from node capacity as Cambricon's plugin reports them.
    node["status"]["capacity"] = {
        "cambricon.com/mlu.smlu.vcore": "200",
        "cambricon.com/mlu.smlu.vmemory": "128",
    }
    apiserver.add_node(node)
    return apiserver


def _start(extender: StartExtender, kube: RealKubeClient) -> RunningExtender:
    running = extender(kube=kube, vendor="nvidia,cambricon", hami_node_lock=True)
    index = running.runtime.cluster.index
    eventually(
        lambda: NODE in index and len(index.inventory(NODE).devices) == 3, "GPU and MLUs listed"
    )
    return running


def _mlu_pod(name: str) -> dict[str, Any]:
    pod = pod_json(name, gpus=None)
    pod["spec"]["containers"][0]["resources"] = {"limits": dict(MLU_LIMITS)}
    return pod


def _both_pod(name: str) -> dict[str, Any]:
    """One container asking a GPU share and an MLU share."""
    pod = pod_json(name, gpus=1, mem=2000)
    pod["spec"]["containers"][0]["resources"]["limits"].update(MLU_LIMITS)
    return pod


def _locks(cluster: FakeApiServer) -> dict[str, str]:
    annotations = cluster.get_node(NODE)["metadata"].get("annotations", {})
    return {k: v for k, v in annotations.items() if k in (MLU_LOCK, SHARED_LOCK)}


def _age(value: str) -> timedelta:
    return datetime.now(UTC) - datetime.fromisoformat(value.replace("Z", "+00:00"))


def _stamp(age: timedelta) -> str:
    return (datetime.now(UTC) - age).strftime("%Y-%m-%dT%H:%M:%SZ")


def _set_lock(cluster: FakeApiServer, value: str) -> None:
    cluster.cluster.patch("nodes", "", NODE, {"metadata": {"annotations": {MLU_LOCK: value}}})


def test_a_cambricon_pods_bind_writes_its_own_lock_only(
    extender: StartExtender, cluster: FakeApiServer, real_kube: RealKubeClient
) -> None:
    pod = cluster.add_pod(_mlu_pod("mlu"))
    running = _start(extender, real_kube)
    assert running.verb("/bind", bind_args(pod, NODE)) == {"Error": ""}
    locks = _locks(cluster)
    assert list(locks) == [MLU_LOCK]  # Cambricon takes no part of HAMi's shared lock
    assert timedelta(0) <= _age(locks[MLU_LOCK]) < timedelta(minutes=1)
    annotations = cluster.get_pod("default", "mlu")["metadata"]["annotations"]
    assert annotations["CAMBRICON_DSMLU_ASSIGNED"] == "false"


def test_a_fresh_cambricon_lock_refuses_the_bind_with_the_reason(
    extender: StartExtender, cluster: FakeApiServer, real_kube: RealKubeClient
) -> None:
    theirs = _stamp(timedelta(seconds=30))
    _set_lock(cluster, theirs)
    pod = cluster.add_pod(_mlu_pod("late"))
    running = _start(extender, real_kube)
    answer = running.verb("/bind", bind_args(pod, NODE))
    assert answer["Error"] == (
        f"bind default/late to {NODE}: node {NODE} has been locked within 2 minutes "
        f"({MLU_LOCK} taken at {theirs}): node lock contention"
    )
    assert _locks(cluster) == {MLU_LOCK: theirs}  # theirs, untouched
    assert running.live_rows(pod["metadata"]["uid"]) == []
    assert "nodeName" not in cluster.get_pod("default", "late")["spec"]


def test_a_three_minute_old_cambricon_lock_is_taken_over(
    extender: StartExtender, cluster: FakeApiServer, real_kube: RealKubeClient
) -> None:
    old = _stamp(timedelta(minutes=3))
    _set_lock(cluster, old)
    pod = cluster.add_pod(_mlu_pod("web"))
    running = _start(extender, real_kube)
    assert running.verb("/bind", bind_args(pod, NODE)) == {"Error": ""}
    taken = _locks(cluster)[MLU_LOCK]
    assert taken != old and _age(taken) < timedelta(minutes=1)
    assert cluster.get_pod("default", "web")["spec"]["nodeName"] == NODE


def test_a_pod_of_nvidia_and_cambricon_takes_both_keys(
    extender: StartExtender, cluster: FakeApiServer, real_kube: RealKubeClient
) -> None:
    pod = cluster.add_pod(_both_pod("both"))
    running = _start(extender, real_kube)
    assert running.verb("/bind", bind_args(pod, NODE)) == {"Error": ""}
    locks = _locks(cluster)
    assert set(locks) == {MLU_LOCK, SHARED_LOCK}
    assert locks[SHARED_LOCK] == f"{locks[MLU_LOCK]},default,both"
    # One write per key (the order, "MLU" before "NVIDIA", is the unit tests').
    patched = [p for m, p in cluster.requests if m == "PATCH" and "/nodes/" in p]
    assert len(patched) == 2


def test_a_failed_bind_gives_both_locks_back(
    extender: StartExtender, cluster: FakeApiServer, real_kube: RealKubeClient
) -> None:
    pod = cluster.add_pod(_both_pod("both"))
    running = _start(extender, real_kube)
    cluster.fail_next("POST", r"/binding$", 500, message="etcd is down")
    answer = running.verb("/bind", bind_args(pod, NODE))
    assert "etcd is down" in answer["Error"]
    assert _locks(cluster) == {}
    assert running.live_rows(pod["metadata"]["uid"]) == []


def test_a_refused_shared_lock_gives_cambricons_back(
    extender: StartExtender, cluster: FakeApiServer, real_kube: RealKubeClient
) -> None:
    cluster.add_pod(pod_json("holder", mem=10))
    theirs = _stamp(timedelta(seconds=10)) + ",default,holder"
    cluster.cluster.patch("nodes", "", NODE, {"metadata": {"annotations": {SHARED_LOCK: theirs}}})
    pod = cluster.add_pod(_both_pod("both"))
    running = _start(extender, real_kube)
    answer = running.verb("/bind", bind_args(pod, NODE))
    assert "locked by default/holder" in answer["Error"]
    assert _locks(cluster) == {SHARED_LOCK: theirs}  # Cambricon's, taken first, given back
