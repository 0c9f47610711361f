"""Start-up with a cluster: the server answers while its first sync with the API server
runs, and places no pod until it is done.

The first sync (every Node object, then a reconcile of every pod) runs in the
background once the server listens. Until it is done a pod the reconcile has not
imported yet may hold devices the index shows free, so the verbs that place pods give
their error form at once: filter ``Error``, prioritize ``[]``, bind ``Error``, preempt
no victims; ``/readyz`` is 503. Here the API server holds its answer to the pod list
until the test lets it go, so every step is seen in order.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.apiserver import FakeApiServer
from tests.support.apiserver_process import ApiServerProcess
from tests.support.server import (
    RunningExtender,
    args,
    bind_args,
    node_json,
    pod_json,
    serve,
    spawn_extender,
    standalone_settings,
    write_kubeconfig,
)
from tests.support.waiting import eventually
from vgpu_extender.api import create_app
from vgpu_extender.kube.real import RealKubeClient

NODES = [f"gpu-{i}" for i in range(3)]
GPU_MIB = 16_384
#: How long a verb may take while the first sync runs (kube-scheduler waits 30 s).
PROMPT_S = 1.0
#: Enough nodes that the first sync takes a few seconds on any machine.
MANY = 2_000
STARTING = "the extender is starting: its first sync with the Kubernetes API is not done"


def _holder() -> dict[str, Any]:
    """A running pod that holds all of gpu-0's one GPU, placed without this extender
    (HAMi, another replica): only the pod reconcile tells the store about it."""
    node = NODES[0]
    return pod_json(
        "holder",
        mem=GPU_MIB,
        node=node,
        annotations={
            "hami.io/vgpu-node": node,
            "hami.io/vgpu-devices-allocated": f"GPU-{node}-0,NVIDIA,{GPU_MIB},0:;",
            "hami.io/vgpu-devices-to-allocate": "",
            "hami.io/bind-phase": "success",
        },
    ) | {"status": {"phase": "Running"}}


@pytest.fixture
def held(apiserver: FakeApiServer) -> Iterator[threading.Event]:
    """The API server with the nodes and the holder, its next pod list held until the
    event is set."""
    for name in NODES:
        apiserver.add_node(node_json(name, gpus=1, mem=GPU_MIB))
    apiserver.add_pod(_holder())
    release = threading.Event()

    def hold() -> None:
        release.wait(30.0)

    apiserver.lose_answer_next("GET", r"^/api/v1/pods$", "late", before=hold)
    yield release
    release.set()


@pytest.fixture
def starting(
    tmp_path: Path, real_kube: RealKubeClient, held: threading.Event
) -> Iterator[RunningExtender]:
    """An extender whose first sync waits on the held pod list (nodes applied)."""
    running = serve(create_app(standalone_settings(tmp_path), kube=real_kube), synced=False)
    try:
        sync = running.runtime.sync
        assert sync is not None
        eventually(lambda: sync.first_sync.pods, "the nodes applied, the pods listed")
        yield running
    finally:
        running.stop()


def _timed(running: RunningExtender, path: str, body: Any) -> tuple[Any, float]:
    start = time.monotonic()
    answer = running.verb(path, body)
    return answer, time.monotonic() - start


def test_the_verbs_answer_at_once_and_place_nothing_until_the_first_sync(
    starting: RunningExtender,
) -> None:
    pod = pod_json("new", mem=1000)
    answer, took = _timed(starting, "/filter", args(pod, NODES))
    assert took < PROMPT_S
    assert answer["NodeNames"] in (None, [])
    assert answer["Error"] == (
        f"filter: {STARTING} ({len(NODES)} nodes done, reconciling the pods)"
    )
    assert "%" not in answer["Error"]
    answer, took = _timed(starting, "/filter_onlyone", args(pod, NODES))
    assert took < PROMPT_S and answer["Error"].startswith(f"filter: {STARTING}")
    answer, took = _timed(starting, "/prioritize", args(pod, NODES))
    assert took < PROMPT_S and answer == []
    answer, took = _timed(starting, "/bind", bind_args(pod, NODES[1]))
    assert took < PROMPT_S and answer["Error"].startswith(f"bind: {STARTING}")
    assert starting.live_rows(pod["metadata"]["uid"]) == []
    preempt = {"Pod": pod, "NodeNameToVictims": {NODES[0]: {"Pods": [_holder()]}}}
    answer, took = _timed(starting, "/preempt", preempt)
    assert took < PROMPT_S and answer["NodeNameToMetaVictims"] == {}
    # The benchmarks' floor places nothing: it answers as usual.
    assert starting.verb("/noop", args(pod, NODES))["NodeNames"] == NODES


def test_readiness_waits_for_the_first_sync(starting: RunningExtender) -> None:
    response = starting.client.get("/readyz")
    assert response.status_code == 503
    cluster = response.json()["checks"]["cluster"]
    assert cluster == {
        "ok": False,
        "detail": f"first sync with the API server not done yet ({len(NODES)} nodes done, "
        "reconciling the pods)",
    }


def test_once_synced_pods_are_placed_around_the_imported_ones(
    starting: RunningExtender, held: threading.Event, apiserver: FakeApiServer
) -> None:
    held.set()
    sync = starting.runtime.sync
    assert sync is not None
    eventually(lambda: sync.synced, "the first sync done")
    eventually(lambda: starting.client.get("/readyz").status_code == 200, "ready")
    pod = apiserver.add_pod(pod_json("new", mem=1000))
    answer = starting.verb("/filter", args(pod, NODES))
    assert answer["Error"] == ""
    # gpu-0's GPU is the holder's, imported by the first reconcile.
    assert answer["NodeNames"] == NODES[1:]
    assert set(answer["FailedNodes"]) | set(answer["FailedAndUnresolvableNodes"]) == {NODES[0]}
    assert starting.verb("/bind", bind_args(pod, NODES[1])) == {"Error": ""}
    assert [row.node for row in starting.live_rows(pod["metadata"]["uid"])] == [NODES[1]]


def test_what_the_first_sync_adds_is_frozen_once_it_is_done(
    tmp_path: Path, real_kube: RealKubeClient, held: threading.Event
) -> None:
    """``serve`` keeps its start-up objects out of the collector's full passes (see
    ``test_gc_freeze``): the first sync's too, frozen once it is done."""
    app = create_app(standalone_settings(tmp_path), kube=real_kube, freeze_gc=True)
    running = serve(app, synced=False)
    try:
        sync = running.runtime.sync
        assert sync is not None
        eventually(lambda: sync.first_sync.pods, "the nodes applied, the pods listed")
        before = gc.get_freeze_count()
        assert before > 0  # the index rebuilt from the store, frozen at start
        held.set()
        eventually(lambda: gc.get_freeze_count() > before, "frozen again after the sync")
        assert sync.synced
    finally:
        running.stop()
    assert gc.get_freeze_count() == 0


def test_a_failed_first_sync_is_tried_again(
    tmp_path: Path, apiserver: FakeApiServer, real_kube: RealKubeClient
) -> None:
    for name in NODES:
        apiserver.add_node(node_json(name, gpus=1, mem=GPU_MIB))
    apiserver.lose_answer_next("GET", r"^/api/v1/nodes$", "504")
    running = serve(create_app(standalone_settings(tmp_path), kube=real_kube), synced=False)
    try:
        sync = running.runtime.sync
        assert sync is not None
        eventually(lambda: sync.synced, "the first sync done on its second try")
        answer = running.verb("/filter", args(pod_json("new", mem=1000), NODES))
        assert answer["NodeNames"] == NODES
    finally:
        running.stop()


def test_standalone_answers_at_once(tmp_path: Path) -> None:
    running = serve(create_app(standalone_settings(tmp_path, demo=True)), synced=False)
    try:
        assert running.runtime.not_serving() == ""
        answer = running.verb("/filter", args(pod_json("new", mem=1000), ["demo-t4-1"]))
        assert answer["Error"] == "" and answer["NodeNames"] == ["demo-t4-1"]
    finally:
        running.stop()


def test_verbs_answer_within_a_second_while_many_nodes_sync(tmp_path: Path) -> None:
    """A process of its own, as deployed, against the test API server with enough nodes
    that the first sync takes a while: every verb answers promptly meanwhile."""
    names = [f"node-{i:04d}" for i in range(MANY)]
    nodes = [node_json(name, gpus=8, mem=81_920) for name in names]
    with ApiServerProcess.start(nodes=nodes, history_limit=MANY + 10) as api:
        process = spawn_extender(
            env={
                "VGPU_DATABASE_URL": f"sqlite:///{tmp_path / 'extender.db'}",
                "VGPU_KUBECONFIG": str(write_kubeconfig(tmp_path / "kubeconfig", api.url)),
            },
            log=tmp_path / "extender.log",
            wait=False,
        )
        try:
            seen_starting = 0
            deadline = time.monotonic() + 120.0
            while True:
                assert time.monotonic() < deadline, process.log.read_text()
                try:
                    ready = process.client.get("/readyz", timeout=PROMPT_S)
                    start = time.monotonic()
                    answer = process.post("/filter", args(pod_json("p", mem=1000), names[:2]))
                    took = time.monotonic() - start
                except httpx.TransportError:
                    time.sleep(0.05)  # not listening yet
                    continue
                assert took < PROMPT_S, took
                error = answer.json()["Error"]
                if ready.status_code == 200:
                    break
                if error:
                    assert error.startswith(f"filter: {STARTING}"), error
                    seen_starting += 1
                time.sleep(0.02)
            assert seen_starting > 0, "the first sync was never seen under way"
            answer = process.post("/filter", args(pod_json("p", mem=1000), names[:2])).json()
            assert answer["Error"] == "" and answer["NodeNames"] == names[:2]
        finally:
            process.stop()


def _review(pod: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "namespace": "default",
            "operation": "CREATE",
            "object": pod,
        },
    }


def test_the_webhook_refuses_no_pod_as_too_big_until_every_node_is_known(
    starting: RunningExtender, held: threading.Event
) -> None:
    # Bigger than the GPUs of the nodes listed so far: nodes still to come could hold it
    # while the first sync runs; once it is done, no node can.
    big = pod_json("big", mem=2 * GPU_MIB)
    during = starting.client.post("/webhook", json=_review(big)).json()["response"]
    assert during["allowed"] is True
    held.set()
    sync = starting.runtime.sync
    assert sync is not None
    eventually(lambda: sync.synced, "the first sync done")
    after = starting.client.post("/webhook", json=_review(big)).json()["response"]
    assert after["allowed"] is False
    assert after["status"]["code"] == 403
