"""A process killed in the middle of a bind leaks nothing and loses nothing.

The extender runs in its own process and is killed with SIGKILL right before the
Binding is created (rows inserted, pod annotated, not bound) or right after (pod bound,
rows still reserved). A fresh extender on the same database reconciles on start.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.support.apiserver import FakeApiServer
from tests.support.server import (
    StartExtender,
    bind_args,
    node_json,
    pod_json,
    spawn_extender,
    write_kubeconfig,
)
from tests.support.waiting import until_bound
from vgpu_extender import store
from vgpu_extender.kube.real import RealKubeClient

NODE = "gpu-1"
pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("when", "bound_in_api", "counter"),
    [("before-binding", False, "expired"), ("after-binding", True, "marked_bound")],
    ids=["killed-before-binding", "killed-after-binding"],
)
def test_restart_after_a_kill_mid_bind_reconciles(
    apiserver: FakeApiServer,
    real_kube: RealKubeClient,
    extender: StartExtender,
    tmp_path: Path,
    when: str,
    bound_in_api: bool,
    counter: str,
) -> None:
    apiserver.add_node(node_json(NODE, gpus=1, mem=16384))
    pod = apiserver.add_pod(pod_json("web", mem=10_000))
    uid = pod["metadata"]["uid"]
    database = f"sqlite:///{tmp_path / 'extender.db'}"
    crashing = spawn_extender(
        entry="from tests.support.server import crashing_main; crashing_main()",
        env={
            "VGPU_DATABASE_URL": database,
            "VGPU_KUBECONFIG": str(write_kubeconfig(tmp_path / "kubeconfig", apiserver.url)),
            "VGPU_TEST_CRASH": when,
        },
        log=tmp_path / "crashing.log",
    )
    try:
        with pytest.raises(httpx.TransportError):
            crashing.post("/bind", bind_args(pod, NODE))
        assert crashing.process.wait(30) == -9  # SIGKILL: no clean-up ran
    finally:
        crashing.stop()

    stored = apiserver.get_pod("default", "web")
    # The annotations ride on the Binding: the pod has both or neither.
    annotations = stored["metadata"].get("annotations") or {}
    assert (annotations.get("hami.io/vgpu-node") == NODE) == bound_in_api
    assert bool(stored["spec"].get("nodeName")) == bound_in_api
    engine = store.make_engine(database)
    try:
        with store.session_factory(engine)() as session:
            rows = store.live_allocations(session, pod_uid=uid)
        assert [r.state for r in rows] == ["reserved"]  # what the kill left behind
    finally:
        engine.dispose()

    running = extender(kube=real_kube, database_url=database, reservation_ttl_s=0)
    sync = running.runtime.sync
    assert sync is not None and getattr(sync.totals, counter) == 1
    with running.runtime.sessions() as session:
        rows = store.live_allocations(session, pod_uid=uid)
    held = running.runtime.cluster.index.allocation(uid)
    if bound_in_api:
        # Not lost: the pod runs with those devices, and the store says so.
        assert [r.state for r in rows] == ["bound"]
        assert held is not None and held.assignment.node == NODE
        return
    # Not leaked: the reservation is gone, and kube-scheduler's retry binds the pod.
    assert rows == [] and held is None
    assert running.verb("/bind", bind_args(pod, NODE)) == {"Error": ""}
    assert apiserver.get_pod("default", "web")["spec"]["nodeName"] == NODE
    until_bound(running, uid)
