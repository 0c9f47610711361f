"""Reservations a killed process left are settled at start-up, before readiness.

A process killed during a burst of binds leaves reservations whose pods were never
bound. The next process checks every reserved row against the API server in its first
reconcile pass, before ``/readyz`` turns green: marked bound when the pod is bound to
that node, released otherwise, without waiting for the TTL (the bind that made it died
with the process), once it is older than the longest a live bind holds one
(``reservation_in_flight_s``): a younger one may be another replica's bind under way,
as in a rolling update. Through the real app and the test API server, on the same
SQLite file.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.support.apiserver import FakeApiServer
from tests.support.server import StartExtender, node_json, pod_json, standalone_settings
from tests.support.waiting import eventually
from vgpu_extender import store
from vgpu_extender.domain import DeviceGrant, PodAssignment
from vgpu_extender.kube.real import RealKubeClient
from vgpu_extender.services.inventory import NodeView, node_inventory
from vgpu_extender.vendors import create_vendor

NODE = "gpu-1"
PODS_LIST = r"^/api/v1/pods$"


def _reserve(tmp_path: Path, pods: list[dict[str, Any]], *, at: datetime) -> None:
    """Reservations as a process killed mid-bind leaves them: rows, and no Binding."""
    engine = store.make_engine(standalone_settings(tmp_path).database_url)
    try:
        store.migrate(engine)
        annotations = node_json(NODE, gpus=2, mem=16384)["metadata"]["annotations"]
        inventory = node_inventory(
            NodeView(NODE, annotations=annotations),
            create_vendor("nvidia"),
            previous=None,
            split_count=10,
        )
        assert inventory is not None
        with store.session_factory(engine).begin() as session:
            store.upsert_node(session, inventory=inventory, source="annotation", now=at)
            for i, pod in enumerate(pods):
                meta = pod["metadata"]
                grant = DeviceGrant(f"GPU-{NODE}-{i % 2}", 1000, 0)
                store.reserve(
                    session,
                    pod_uid=meta["uid"],
                    namespace=meta["namespace"],
                    name=meta["name"],
                    assignment=PodAssignment(NODE, ((grant,),)),
                    now=at,
                )
    finally:
        engine.dispose()


def test_reservations_of_a_killed_burst_are_settled_before_ready(
    extender: StartExtender, apiserver: FakeApiServer, real_kube: RealKubeClient, tmp_path: Path
) -> None:
    apiserver.add_node(node_json(NODE, gpus=2, mem=16384))
    bound = [pod_json(f"bound-{i}", mem=1000, node=NODE) for i in range(4)]
    unbound = [pod_json(f"unbound-{i}", mem=1000) for i in range(4)]
    gone = [pod_json(f"gone-{i}", mem=1000) for i in range(4)]
    moved = [pod_json(f"moved-{i}", mem=1000, node="gpu-other") for i in range(4)]
    for pod in bound + unbound + moved:
        apiserver.add_pod(pod)
    # Seconds old: far younger than the TTL, which alone would keep them for minutes.
    _reserve(tmp_path, bound + unbound + gone + moved, at=datetime.now(UTC) - timedelta(seconds=2))

    running = extender(kube=real_kube, reservation_ttl_s=3600, reservation_in_flight_s=1)
    ready = running.client.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json()["checks"]["reservations"]["ok"] is True

    def states(pods: list[dict[str, Any]]) -> list[list[str]]:
        return [[r.state.value for r in running.live_rows(p["metadata"]["uid"])] for p in pods]

    assert states(bound) == [["bound"]] * 4
    assert states(unbound + gone + moved) == [[]] * 12
    index = running.runtime.cluster.index
    assert sorted(a.pod_uid for a in index.pods_on(NODE)) == sorted(
        p["metadata"]["uid"] for p in bound
    )
    sync = running.runtime.sync
    assert sync is not None
    totals = sync.totals
    assert (totals.marked_bound, totals.expired, totals.released_gone, totals.released_moved) == (
        4,
        4,
        4,
        4,
    )


def test_readiness_waits_for_the_start_up_check_which_spares_binds_made_since(
    extender: StartExtender, apiserver: FakeApiServer, real_kube: RealKubeClient, tmp_path: Path
) -> None:
    apiserver.add_node(node_json(NODE, gpus=2, mem=16384))
    left = apiserver.add_pod(pod_json("left", mem=1000))
    _reserve(tmp_path, [left], at=datetime.now(UTC) - timedelta(seconds=2))
    # The pod list fails at start and on the first retry: the check waits for the API.
    apiserver.fail_next("GET", PODS_LIST, 503, times=3, message="the API server is away")

    running = extender(
        kube=real_kube, synced=False, reservation_ttl_s=3600, reservation_in_flight_s=1
    )
    ready = running.client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["reservations"]["ok"] is False
    assert [r.state.value for r in running.live_rows("uid-left")] == ["reserved"]
    # A bind in flight since this process started (another replica's, say): the late
    # start-up check must leave its reservation to the TTL.
    fresh = apiserver.add_pod(pod_json("fresh", mem=1000))
    _reserve(tmp_path, [fresh], at=datetime.now(UTC))

    eventually(lambda: running.client.get("/readyz").status_code == 200, "ready after the check")
    assert running.live_rows("uid-left") == []
    assert [r.state.value for r in running.live_rows("uid-fresh")] == ["reserved"]


def test_a_reservation_younger_than_a_bind_in_flight_waits_for_its_binding(
    extender: StartExtender, apiserver: FakeApiServer, real_kube: RealKubeClient, tmp_path: Path
) -> None:
    """A rolling update restarts one replica while the other binds: the reservation the
    other made a moment ago, its pod not bound yet, must not be released by the start-up
    check. Its Binding lands; the check then finds the pod bound and marks it so."""
    apiserver.add_node(node_json(NODE, gpus=2, mem=16384))
    other = apiserver.add_pod(pod_json("other-replicas", mem=1000))
    stale = apiserver.add_pod(pod_json("stale", mem=1000))
    _reserve(tmp_path, [stale], at=datetime.now(UTC) - timedelta(seconds=60))
    _reserve(tmp_path, [other], at=datetime.now(UTC) - timedelta(seconds=1))

    running = extender(kube=real_kube, reservation_ttl_s=3600, reservation_in_flight_s=8)
    # The long-abandoned one is settled at once; the young one is left to its bind, and
    # readiness waits for it.
    assert running.live_rows("uid-stale") == []
    assert [r.state.value for r in running.live_rows("uid-other-replicas")] == ["reserved"]
    ready = running.client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["reservations"]["ok"] is False

    # The other replica's Binding lands (with the annotations it chose).
    real_kube.bind_pod("default", "other-replicas", "uid-other-replicas", NODE)
    eventually(
        lambda: running.client.get("/readyz").status_code == 200,
        "ready once the young reservation is settled",
    )
    assert [r.state.value for r in running.live_rows("uid-other-replicas")] == ["bound"]
    assert running.runtime.sync is not None
    assert running.runtime.sync.totals.expired == 1  # the stale one only


def test_a_young_reservation_whose_pod_stays_unbound_is_settled_once_old_enough(
    extender: StartExtender, apiserver: FakeApiServer, real_kube: RealKubeClient, tmp_path: Path
) -> None:
    """A reservation made a moment before the start, its pod never bound: left alone at
    first (maybe another replica's bind under way), then released once older than
    ``reservation_in_flight_s``, long before the TTL, and readiness follows."""
    apiserver.add_node(node_json(NODE, gpus=2, mem=16384))
    lost = apiserver.add_pod(pod_json("lost", mem=1000))
    _reserve(tmp_path, [lost], at=datetime.now(UTC) - timedelta(seconds=1))

    running = extender(kube=real_kube, reservation_ttl_s=3600, reservation_in_flight_s=3)
    assert [r.state.value for r in running.live_rows("uid-lost")] == ["reserved"]
    ready = running.client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["reservations"]["ok"] is False

    eventually(
        lambda: running.client.get("/readyz").status_code == 200,
        "ready once the young reservation is old enough to settle",
    )
    assert running.live_rows("uid-lost") == []
    assert running.runtime.sync is not None
    assert running.runtime.sync.totals.expired == 1
