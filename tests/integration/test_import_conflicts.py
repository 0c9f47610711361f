"""An import that finds a pod's devices taken by another pod never over-allocates.

Through the real app and the test API server: one pod bound by the extender holds
20,000 of a GPU's 23,028 MiB; then a pod appears bound to the same GPU with HAMi's
annotations (a lost Binding answer, another scheduler, a node registered again). The
import is refused and recorded as a conflict: a Warning Event on the pod, the
``vgpu_extender_import_conflicts`` gauge, ``GET /api/v1/conflicts`` and the summary;
the GPU takes no new pod until the conflict is resolved.
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
from vgpu_extender.kube.real import RealKubeClient

NODE = "gpu-1"
DEVICE = f"GPU-{NODE}-0"
GPU_MIB = 23_028


@pytest.fixture
def cluster(apiserver: FakeApiServer) -> FakeApiServer:
    apiserver.add_node(node_json(NODE, gpus=1, mem=GPU_MIB))
    return apiserver


def _intruder(name: str = "intruder", mem: int = 20_000) -> dict[str, Any]:
    """A pod bound to the GPU with HAMi's annotations, placed without the extender."""
    return pod_json(
        name,
        mem=mem,
        node=NODE,
        annotations={
            "hami.io/vgpu-node": NODE,
            "hami.io/vgpu-devices-allocated": f"{DEVICE},NVIDIA,{mem},0:;",
            "hami.io/vgpu-devices-to-allocate": "",
            "hami.io/bind-phase": "success",
        },
    )


def _holder(running: RunningExtender, cluster: FakeApiServer) -> dict[str, Any]:
    pod = cluster.add_pod(pod_json("holder", mem=20_000))
    assert running.verb("/bind", bind_args(pod, NODE)) == {"Error": ""}
    return pod


def _used(running: RunningExtender) -> list[tuple[int, int]]:
    node = running.client.get(f"/api/v1/nodes/{NODE}").json()
    return [(d["memory_used_mib"], d["memory_mib"]) for d in node["devices"]]


def _small_pod_verdict(running: RunningExtender) -> str:
    answer = running.verb("/filter", args(pod_json("small", mem=1000), [NODE]))
    if answer["NodeNames"] == [NODE]:
        return "fits"
    return str({**answer["FailedNodes"], **answer["FailedAndUnresolvableNodes"]}[NODE])


def _gauge(running: RunningExtender) -> float:
    for line in running.client.get("/metrics").text.splitlines():
        if line.startswith("vgpu_extender_import_conflicts "):
            return float(line.split()[1])
    raise AssertionError("vgpu_extender_import_conflicts not exported")


def _conflict_events(cluster: FakeApiServer) -> list[dict[str, Any]]:
    return [e for e in cluster.events if e.get("reason") == "AllocationConflict"]


def _drain_events(running: RunningExtender, cluster: FakeApiServer) -> None:
    """Wait until every Event queued so far has been posted."""
    recorder = running.runtime.events
    assert recorder is not None
    recorder.record(
        namespace="default", pod="intruder", uid="uid-intruder", reason="Drained", message=""
    )
    eventually(
        lambda: any(e.get("reason") == "Drained" for e in cluster.events),
        "the Events queued so far posted",
    )


def test_a_conflicting_import_is_recorded_and_its_gpu_refused_until_resolved(
    extender: StartExtender, cluster: FakeApiServer, real_kube: RealKubeClient
) -> None:
    running = extender(kube=real_kube)
    holder = _holder(running, cluster)
    assert _small_pod_verdict(running) == "fits"

    intruder = cluster.add_pod(_intruder())
    eventually(lambda: len(running.runtime.conflicts) == 1, "the pod watch found the conflict")
    # Nothing over-allocated: the intruder has no rows, the GPU shows the holder only.
    assert running.live_rows(intruder["metadata"]["uid"]) == []
    assert _used(running) == [(20_000, GPU_MIB)]

    [conflict] = running.client.get("/api/v1/conflicts").json()
    assert conflict["pod"] == {"uid": "uid-intruder", "namespace": "default", "name": "intruder"}
    assert (conflict["node"], conflict["devices"]) == (NODE, [DEVICE])
    assert conflict["held_by"] == [{"uid": "uid-holder", "namespace": "default", "name": "holder"}]
    assert conflict["reason"] == "insufficient gpumem"
    assert "memory 40000/23028 MiB" in conflict["message"]
    assert running.client.get("/api/v1/summary").json()["conflicts"] == 1
    assert _gauge(running) == 1.0
    eventually(lambda: len(_conflict_events(cluster)) == 1, "the Warning Event on the pod")
    [event] = _conflict_events(cluster)
    assert event["type"] == "Warning"
    assert event["involvedObject"]["name"] == "intruder"
    assert "default/holder" in event["message"] and DEVICE in event["message"]
    # 3,028 MiB are free on the GPU, but it takes no new pod while the conflict is open.
    assert _small_pod_verdict(running).startswith("conflicted devices")

    # Another pass finds it again: still one conflict, and no second Event.
    sync = running.runtime.sync
    assert sync is not None
    sync.reconcile(real_kube.list_pods_with_version().items, listed_at=datetime.now(UTC))
    assert len(running.runtime.conflicts) == 1
    # Events go out from one worker, in order: once a marker queued after the pass is
    # posted, a second Event the pass would have queued is posted too.
    _drain_events(running, cluster)
    assert len(_conflict_events(cluster)) == 1

    # The holder goes: the intruder's import fits now, and the conflict is resolved.
    cluster.delete_pod("default", holder["metadata"]["name"])
    eventually(lambda: len(running.runtime.conflicts) == 0, "the conflict resolved")
    assert [r.state for r in running.live_rows(intruder["metadata"]["uid"])] == ["bound"]
    assert _used(running) == [(20_000, GPU_MIB)]
    assert running.client.get("/api/v1/conflicts").json() == []
    assert running.client.get("/api/v1/summary").json()["conflicts"] == 0
    assert _gauge(running) == 0.0
    assert _small_pod_verdict(running) == "fits"


def test_a_conflict_is_resolved_when_the_conflicting_pod_goes(
    extender: StartExtender, cluster: FakeApiServer, real_kube: RealKubeClient
) -> None:
    running = extender(kube=real_kube)
    holder = _holder(running, cluster)
    cluster.add_pod(_intruder())
    eventually(lambda: len(running.runtime.conflicts) == 1, "the conflict found")
    cluster.set_pod_phase("default", "intruder", "Succeeded")
    eventually(lambda: len(running.runtime.conflicts) == 0, "the conflict resolved")
    assert _small_pod_verdict(running) == "fits"
    until_bound(running, holder["metadata"]["uid"])


def test_conflicts_are_found_again_by_the_reconcile_on_start(
    extender: StartExtender, cluster: FakeApiServer, real_kube: RealKubeClient
) -> None:
    first = extender(kube=real_kube)
    _holder(first, cluster)
    first.stop()
    cluster.add_pod(_intruder())
    cluster.add_pod(_intruder("fits-beside", mem=2_000))
    running = extender(kube=real_kube)
    # The start-up pass imported what fits and recorded what does not, before readiness.
    assert running.client.get("/readyz").status_code == 200
    assert [c["pod"]["name"] for c in running.client.get("/api/v1/conflicts").json()] == [
        "intruder"
    ]
    assert [r.state for r in running.live_rows("uid-fits-beside")] == ["bound"]
    assert _used(running) == [(22_000, GPU_MIB)]
    assert _small_pod_verdict(running).startswith("conflicted devices")
