"""Events on pods: why a pod fits nowhere (kube-scheduler's style), and bind's outcome."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.support.server import (
    RunningExtender,
    StartExtender,
    args,
    bind_args,
    node_json,
    pod_json,
)
from tests.support.waiting import eventually
from vgpu_extender.kube import KubeError
from vgpu_extender.kube.fake import FakeKubeClient
from vgpu_extender.services.events import failure_summary, reason_of
from vgpu_extender.vendors.nvidia.wording import NVIDIA_WORDING

NODES = ["t4-1", "t4-2", "a10-1"]


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ("insufficient gpumem: need 4000 MiB, best free 2048 MiB", "insufficient gpumem"),
        ("cordoned devices: need 1, have 0", "cordoned devices"),
        ("gpu type mismatch", "gpu type mismatch"),
        ("node unregistered", "node unregistered"),
        ("another node fits better (decisive mode)", "other"),
    ],
    ids=["with-numbers", "cordoned", "bare", "unknown-node", "not-ours"],
)
def test_reasons_drop_their_numbers(message: str, reason: str) -> None:
    assert reason_of(message, NVIDIA_WORDING) == reason


@pytest.mark.parametrize(
    ("counts", "total", "summary"),
    [
        (
            {"gpu type mismatch": 5, "insufficient gpumem": 7},
            12,
            "0/12 nodes: 7 insufficient gpumem, 5 gpu type mismatch",
        ),
        ({"b": 2, "a": 2}, 4, "0/4 nodes: 2 a, 2 b"),
        ({}, 0, "0/0 nodes"),
    ],
    ids=["most-first", "ties-by-name", "no-candidates"],
)
def test_summary_counts_nodes_by_reason(counts: dict[str, int], total: int, summary: str) -> None:
    assert failure_summary(Counter(counts), total) == summary


@pytest.fixture
def cluster() -> FakeKubeClient:
    kube = FakeKubeClient()
    kube.add_node(node_json("t4-1", gpus=1, mem=15360, model="NVIDIA-Tesla T4"))
    kube.add_node(node_json("t4-2", gpus=1, mem=15360, model="NVIDIA-Tesla T4"))
    kube.add_node(node_json("a10-1", gpus=1, mem=24576, model="NVIDIA-A10"))
    return kube


def _events(kube: FakeKubeClient, reason: str) -> list[dict[str, Any]]:
    return [e for e in kube.events if e.get("reason") == reason]


def _handled(running: RunningExtender) -> float:
    text = running.client.get("/metrics").text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vgpu_extender_filter_rejected_nodes_total{")
    )


def test_a_pod_that_fits_nowhere_gets_one_summary_event(
    extender: StartExtender, cluster: FakeKubeClient
) -> None:
    running = extender(kube=cluster)
    pod = pod_json("big", mem=20000, annotations={"nvidia.com/use-gputype": "T4"})
    assert running.verb("/filter", args(pod, NODES))["NodeNames"] == []
    eventually(lambda: len(_events(cluster, "FilteringFailed")) == 1)
    [event] = _events(cluster, "FilteringFailed")
    assert event["message"] == "0/3 nodes: 2 insufficient gpumem, 1 gpu type mismatch"
    assert event["type"] == "Warning"
    assert event["involvedObject"]["name"] == "big"
    assert event["involvedObject"]["uid"] == "uid-big"

    # kube-scheduler retries: the same summary is not repeated...
    running.verb("/filter", args(pod, NODES))
    eventually(lambda: _handled(running) == 6)
    assert len(_events(cluster, "FilteringFailed")) == 1
    # ...but a different one is news.
    running.verb("/filter", args(pod, ["t4-1", "ghost"]))
    eventually(lambda: len(_events(cluster, "FilteringFailed")) == 2)
    assert _events(cluster, "FilteringFailed")[1]["message"] == (
        "0/2 nodes: 1 insufficient gpumem, 1 node unregistered"
    )


def test_a_pod_that_fits_gets_no_failure_event(
    extender: StartExtender, cluster: FakeKubeClient
) -> None:
    running = extender(kube=cluster)
    fits = pod_json("small", mem=1000)
    assert running.verb("/filter", args(fits, NODES))["NodeNames"] == NODES
    nowhere = pod_json("nowhere", mem=99999)
    running.verb("/filter", args(nowhere, NODES))
    eventually(lambda: len(_events(cluster, "FilteringFailed")) == 1)
    assert [e["involvedObject"]["name"] for e in _events(cluster, "FilteringFailed")] == ["nowhere"]


@pytest.mark.parametrize("fails", [False, True], ids=["success", "failure"])
def test_bind_records_its_outcome_on_the_pod(
    extender: StartExtender, cluster: FakeKubeClient, fails: bool
) -> None:
    pod = cluster.add_pod(pod_json("web", mem=4000))
    running = extender(kube=cluster, bind_success_events=True)
    if fails:
        cluster.fail_next("bind_pod", KubeError("API server said no", status=500))
    error = running.verb("/bind", bind_args(pod, "t4-1"))["Error"]
    assert bool(error) is fails
    reason = "BindingFailed" if fails else "BindingSucceed"
    eventually(lambda: bool(_events(cluster, reason)))
    [event] = _events(cluster, reason)
    assert event["involvedObject"]["name"] == "web"
    assert event["type"] == ("Warning" if fails else "Normal")
    assert ("API server said no" in event["message"]) is fails


def test_a_successful_bind_records_no_event_by_default(
    extender: StartExtender, cluster: FakeKubeClient
) -> None:
    # kube-scheduler records its own Scheduled Event for every pod an extender binds.
    pod = cluster.add_pod(pod_json("web", mem=4000))
    running = extender(kube=cluster)
    assert running.verb("/bind", bind_args(pod, "t4-1")) == {"Error": ""}
    failing = cluster.add_pod(pod_json("other", mem=4000))
    cluster.fail_next("bind_pod", KubeError("API server said no", status=500))
    assert running.verb("/bind", bind_args(failing, "t4-1"))["Error"]
    # The failure's Event is posted after the success would have been: both are queued
    # on the same worker in order, so once it is there nothing else is coming.
    eventually(lambda: bool(_events(cluster, "BindingFailed")))
    assert [e["reason"] for e in cluster.events] == ["BindingFailed"]
