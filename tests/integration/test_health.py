"""Liveness, readiness and the leader election readiness depends on.

The elector's rules are checked step by step with clocks the test moves; readiness is
checked over HTTP, with the Lease held by another replica and then let go.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tests.support.server import StartExtender, node_json
from tests.support.waiting import eventually
from vgpu_extender.kube import Conflict, KubeError
from vgpu_extender.kube.fake import FakeKubeClient
from vgpu_extender.services.leader import LeaderElector, LeaseConfig, micro_time

NAMESPACE = "vgpu-system"
LEASE = "vgpu-extender"


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _lease(holder: str, *, duration: int = 15) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": LEASE, "namespace": NAMESPACE},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "renewTime": micro_time(datetime.now(UTC)),
            "leaseTransitions": 3,
        },
    }


def _elector(kube: FakeKubeClient, identity: str, clock: Clock) -> LeaderElector:
    config = LeaseConfig(namespace=NAMESPACE, name=LEASE, identity=identity, duration_s=15)
    return LeaderElector(kube=kube, config=config, monotonic=clock)


def _spec(kube: FakeKubeClient) -> dict[str, Any]:
    lease = kube.get_lease(NAMESPACE, LEASE)
    assert lease is not None
    spec: dict[str, Any] = lease["spec"]
    return spec


# --------------------------------------------------------------------------- the elector
def test_first_replica_creates_the_lease_and_leads() -> None:
    kube, clock = FakeKubeClient(), Clock()
    elector = _elector(kube, "a", clock)
    assert elector.step() is True
    assert elector.status().leading is True
    spec = _spec(kube)
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == (
        "a",
        15,
        0,
    )


@pytest.mark.parametrize(
    ("waited", "leading", "holder"),
    [(5.0, False, "b"), (14.9, False, "b"), (15.1, True, "a")],
    ids=["fresh", "just-before-expiry", "expired"],
)
def test_a_lease_held_elsewhere_is_taken_only_once_it_went_unrenewed_for_its_duration(
    waited: float, leading: bool, holder: str
) -> None:
    kube, clock = FakeKubeClient(), Clock()
    kube.create_lease(NAMESPACE, _lease("b"))
    elector = _elector(kube, "a", clock)
    assert elector.step() is False  # first sight of b's record starts the count
    assert elector.status().holder == "b"
    clock.now += waited
    assert elector.step() is leading
    spec = _spec(kube)
    assert spec["holderIdentity"] == holder
    assert spec["leaseTransitions"] == (4 if leading else 3)


def test_a_renewed_lease_restarts_the_count() -> None:
    kube, clock = FakeKubeClient(), Clock()
    kube.create_lease(NAMESPACE, _lease("b"))
    elector = _elector(kube, "a", clock)
    elector.step()
    clock.now += 10
    lease = kube.get_lease(NAMESPACE, LEASE)
    assert lease is not None
    lease["spec"]["renewTime"] = "2030-01-01T00:00:00.000000Z"  # b renews
    kube.replace_lease(NAMESPACE, lease)
    elector.step()
    clock.now += 10  # 20 s since first sight, 10 since the renewal
    assert elector.step() is False
    assert elector.status().detail == f"b holds lease {NAMESPACE}/{LEASE}"


def test_two_replicas_never_lead_together() -> None:
    kube, clock = FakeKubeClient(), Clock()
    a, b = _elector(kube, "a", clock), _elector(kube, "b", clock)
    for _ in range(5):
        a.step()
        b.step()
        clock.now += 2
        assert [a.status().leading, b.status().leading] == [True, False]


def test_leadership_lapses_when_renewals_fail_past_the_deadline() -> None:
    kube, clock = FakeKubeClient(), Clock()
    elector = _elector(kube, "a", clock)
    assert elector.step() is True
    kube.fail_next("get_lease", KubeError("API server down", status=503), times=10)
    clock.now += 5
    assert elector.step() is True  # within the 10 s renew deadline
    clock.now += 6
    assert elector.step() is False
    assert "unavailable: API server down" in elector.status().detail


def test_losing_an_update_race_means_not_leading() -> None:
    kube, clock = FakeKubeClient(), Clock()
    elector = _elector(kube, "a", clock)
    kube.fail_next("create_lease", Conflict("already exists", status=409))
    assert elector.step() is False
    assert elector.status().detail == "another replica updated the lease first"


def test_stopping_gives_the_lease_up() -> None:
    kube, clock = FakeKubeClient(), Clock()
    a, b = _elector(kube, "a", clock), _elector(kube, "b", clock)
    a.step()
    b.step()
    a.stop()
    assert (_spec(kube)["holderIdentity"], _spec(kube)["leaseDurationSeconds"]) == ("", 1)
    assert b.step() is True  # at once: an empty holder needs no waiting


# --------------------------------------------------------------------------- over HTTP
def test_liveness_answers_ok(extender: StartExtender) -> None:
    response = extender().client.get("/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_standalone_is_ready_once_the_index_is_loaded(extender: StartExtender) -> None:
    response = extender(demo=True).client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {
        "ready": True,
        "checks": {
            "index": {"ok": True, "detail": "loaded from the store"},
            "store": {"ok": True, "detail": "reachable"},
        },
    }


def test_with_a_cluster_ready_means_reconciled_too(extender: StartExtender) -> None:
    kube = FakeKubeClient()
    kube.add_node(node_json("n1"))
    body = extender(kube=kube).client.get("/readyz").json()
    assert body["ready"] is True
    assert body["checks"]["cluster"] == {"ok": True, "detail": "reconciled with the API server"}


def test_leader_election_without_a_cluster_is_never_ready(extender: StartExtender) -> None:
    response = extender(demo=True, leader_elect=True).client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["leader"] == {
        "ok": False,
        "detail": "leader election needs the Kubernetes API; this replica is standalone",
    }


def test_readiness_follows_the_lease(extender: StartExtender) -> None:
    kube = FakeKubeClient()
    kube.add_node(node_json("n1"))
    kube.create_lease(NAMESPACE, _lease("other-replica", duration=3600))
    running = extender(
        kube=kube,
        leader_elect=True,
        leader_identity="this-replica",
        leader_lease_namespace=NAMESPACE,
        leader_lease_name=LEASE,
        leader_lease_duration_s=1,
    )
    eventually(
        lambda: (
            running.client.get("/readyz").json()["checks"]["leader"]["detail"] != "no attempt yet"
        )
    )
    response = running.client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["leader"] == {
        "ok": False,
        "detail": f"other-replica holds lease {NAMESPACE}/{LEASE}",
    }
    assert "vgpu_extender_leader 0.0" in running.client.get("/metrics").text

    lease = kube.get_lease(NAMESPACE, LEASE)
    assert lease is not None
    lease["spec"]["holderIdentity"] = ""  # the other replica lets go
    kube.replace_lease(NAMESPACE, lease)
    eventually(lambda: running.client.get("/readyz").status_code == 200)
    assert _spec(kube)["holderIdentity"] == "this-replica"
    assert "vgpu_extender_leader 1.0" in running.client.get("/metrics").text

    running.stop()  # shutting down gives the Lease up for the next replica
    assert _spec(kube)["holderIdentity"] == ""
