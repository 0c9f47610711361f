"""GPU-only preemption end to end: the real app, the real client, the test API server.

kube-scheduler cannot see the GPUs (their resources are ``ignoredByScheduler``), so
for a pod short only of a GPU its dry run proposes every candidate node with no
victim. The extender chooses them: on gpu-node-a (three A10s, each held by a pod of
20,000 MiB) the lowest priority, then the most recently started; gpu-node-b's only
pod outranks the preemptor, so that node is dropped. Deleting the victim through the
API server releases its rows (the pod watch), and the preemptor then binds there.
"""

from __future__ import annotations

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
from tests.support.waiting import eventually
from vgpu_extender.kube.real import RealKubeClient

A, B = "gpu-node-a", "gpu-node-b"
MIB = 20_000
#: name: (node, priority, status.startTime)
HOLDERS = {
    "batch": (A, 100, "2026-01-01T08:00:00Z"),
    "early": (A, 0, "2026-01-01T09:00:00Z"),
    "late": (A, 0, "2026-01-01T10:00:00Z"),
    "serving": (B, 2000, "2026-01-01T07:00:00Z"),
}


def _hold(cluster: FakeApiServer, running: RunningExtender, name: str) -> dict[str, Any]:
    node, priority, started = HOLDERS[name]
    pod = pod_json(name, mem=MIB, priority=priority)
    pod["metadata"]["labels"] = {"app": name}
    created = cluster.add_pod(pod)
    assert running.verb("/filter", args(created, [node]))["NodeNames"] == [node]
    assert running.verb("/bind", bind_args(created, node)) == {"Error": ""}
    return cluster.cluster.patch(
        "pods", "default", name, {"status": {"phase": "Running", "startTime": started}}
    )


@pytest.fixture
def filled(
    extender: StartExtender, apiserver: FakeApiServer, real_kube: RealKubeClient
) -> tuple[RunningExtender, dict[str, dict[str, Any]]]:
    apiserver.add_node(node_json(A, gpus=3, mem=23028, model="NVIDIA-NVIDIA A10"))
    apiserver.add_node(node_json(B, gpus=1, mem=23028, model="NVIDIA-NVIDIA A10"))
    running = extender(kube=real_kube)
    eventually(lambda: B in running.runtime.cluster.index, "nodes synced")
    held = {name: _hold(apiserver, running, name) for name in HOLDERS}
    return running, held


def _preempt(running: RunningExtender, pod: dict[str, Any], *, full: bool) -> dict[str, Any]:
    empty = {A: {"Pods": [], "NumPDBViolations": 0}, B: {"Pods": [], "NumPDBViolations": 0}}
    body = {
        "Pod": pod,
        "NodeNameToVictims": empty if full else None,
        "NodeNameToMetaVictims": None if full else empty,
    }
    answer: dict[str, Any] = running.verb("/preempt", body)
    return answer


def test_gpu_only_preemption_evicts_then_binds(
    filled: tuple[RunningExtender, dict[str, dict[str, Any]]], apiserver: FakeApiServer
) -> None:
    running, held = filled
    late_uid = held["late"]["metadata"]["uid"]
    urgent = apiserver.add_pod(pod_json("urgent", mem=MIB, priority=1000))
    verdict = running.verb("/filter", args(urgent, [A, B]))
    assert verdict["NodeNames"] == []
    assert set(verdict["FailedNodes"]) == {A, B}  # resolvable: preemption may help

    # Names mode: the victim by UID; the lowest priority, the most recently started.
    answer = _preempt(running, urgent, full=False)
    assert answer == {
        "NodeNameToMetaVictims": {A: {"Pods": [{"UID": late_uid}], "NumPDBViolations": 0}}
    }
    # Objects mode: the same victim, as the API server has it.
    answer = _preempt(running, urgent, full=True)
    assert answer["NodeNameToMetaVictims"] == {
        A: {"Pods": [{"UID": late_uid}], "NumPDBViolations": 0}
    }
    (victim,) = answer["NodeNameToVictims"][A]["Pods"]
    assert victim["metadata"]["name"] == "late"
    assert victim["status"]["startTime"] == HOLDERS["late"][2]

    # kube-scheduler deletes the victim; the pod watch gives its GPU back.
    apiserver.delete_pod("default", "late")
    eventually(lambda: running.runtime.cluster.index.allocation(late_uid) is None, "release")
    assert running.live_rows(late_uid) == []
    assert running.verb("/filter", args(urgent, [A, B]))["NodeNames"] == [A]
    assert running.verb("/bind", bind_args(urgent, A)) == {"Error": ""}
    assert apiserver.get_pod("default", "urgent")["spec"]["nodeName"] == A
    assert [r.state for r in running.live_rows(urgent["metadata"]["uid"])] in (
        ["reserved"],
        ["bound"],
    )


def test_a_budget_the_eviction_breaks_is_counted(
    filled: tuple[RunningExtender, dict[str, dict[str, Any]]], apiserver: FakeApiServer
) -> None:
    running, held = filled
    apiserver.add_pdb(
        {
            "metadata": {"name": "late-budget", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "late"}}},
            "status": {"disruptionsAllowed": 0},
        }
    )
    apiserver.add_pdb(  # another namespace: selects nothing here
        {
            "metadata": {"name": "elsewhere", "namespace": "ml"},
            "spec": {"selector": {"matchLabels": {"app": "late"}}},
            "status": {"disruptionsAllowed": 0},
        }
    )
    urgent = apiserver.add_pod(pod_json("urgent", mem=MIB, priority=1000))
    answer = _preempt(running, urgent, full=False)
    assert answer["NodeNameToMetaVictims"] == {
        A: {"Pods": [{"UID": held["late"]["metadata"]["uid"]}], "NumPDBViolations": 1}
    }


def test_pods_being_deleted_free_their_devices_without_being_named(
    filled: tuple[RunningExtender, dict[str, dict[str, Any]]], apiserver: FakeApiServer
) -> None:
    running, held = filled
    # "early" is terminating: its GPU comes back by itself; evicting "late" as well
    # would be one victim too many, and naming no one is not allowed: A is dropped.
    apiserver.cluster.patch(
        "pods", "default", "early", {"metadata": {"deletionTimestamp": "2026-01-01T11:00:00Z"}}
    )
    urgent = apiserver.add_pod(pod_json("urgent", mem=MIB, priority=1000))
    assert _preempt(running, urgent, full=False) == {"NodeNameToMetaVictims": {}}
    assert running.runtime.cluster.index.allocation(held["early"]["metadata"]["uid"]) is not None
