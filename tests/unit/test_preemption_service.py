"""PreemptionService with a cluster: what it reads of the pods, and what it does when
the API server cannot tell it.

Node n1 has two GPUs of 20,000 MiB, each held by a pod of 15,000 MiB; the preemptor
(priority 1000) wants 15,000 MiB on one GPU, so one holder must go.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.builders import make_assignment, make_node
from vgpu_extender.kube.errors import KubeError
from vgpu_extender.kube.fake import FakeKubeClient
from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.services.preemption import NodeVictims, PreemptionService, Victim
from vgpu_extender.vendors import create_vendor

NODE = "n1"


def _pod(name: str, priority: int, *, node: str | None = NODE, mem: int = 15_000) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(mem)}
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"limits": limits, "requests": limits}}],
        "priority": priority,
    }
    if node is not None:
        spec["nodeName"] = node
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"u-{name}",
            "labels": {"app": name},
        },
        "spec": spec,
        "status": {"phase": "Running", "startTime": "2026-01-01T10:00:00Z"},
    }


@pytest.fixture
def kube() -> FakeKubeClient:
    return FakeKubeClient()


@pytest.fixture
def cluster(kube: FakeKubeClient) -> ClusterState:
    state = ClusterState(vendor=create_vendor("nvidia"))
    state.upsert_nodes([make_node(NODE, 2, mem=20_000)])
    state.apply("u-low", make_assignment(NODE, [(0, 15_000, 0)]))
    state.apply("u-high", make_assignment(NODE, [(1, 15_000, 0)]))
    kube.add_pod(_pod("low", 0))
    kube.add_pod(_pod("high", 2000))
    return state


@pytest.fixture
def service(cluster: ClusterState, kube: FakeKubeClient) -> PreemptionService:
    return PreemptionService(cluster=cluster, kube=kube)


URGENT = _pod("urgent", 1000, node=None)
EMPTY = {NODE: NodeVictims(())}


def _named(outcome_nodes: dict[str, NodeVictims]) -> dict[str, list[str]]:
    return {node: [v.uid for v in entry.victims] for node, entry in outcome_nodes.items()}


def test_the_listing_gives_the_priorities(service: PreemptionService) -> None:
    outcome = service.preempt(URGENT, EMPTY)
    assert _named(outcome.nodes) == {NODE: ["u-low"]}  # "high" outranks the preemptor
    (victim,) = outcome.nodes[NODE].victims
    assert victim.pod is not None and victim.pod["metadata"]["name"] == "low"
    assert victim.priority == 0


def test_a_preemptor_of_equal_priority_evicts_nobody(service: PreemptionService) -> None:
    assert service.preempt(_pod("peer", 0, node=None), EMPTY).nodes == {}


def test_a_holder_the_api_server_does_not_show_on_the_node_is_no_victim(
    service: PreemptionService, kube: FakeKubeClient
) -> None:
    # "low" is not on n1 as the API server has it (its bind still under way, say): it
    # keeps its GPU, and "high" outranks the preemptor, so nothing helps.
    kube.delete_pod("default", "low")
    kube.add_pod(_pod("low", 0, node=None))
    assert service.preempt(URGENT, EMPTY).nodes == {}


def test_when_the_pods_cannot_be_read_nothing_is_evicted(
    service: PreemptionService, kube: FakeKubeClient
) -> None:
    kube.fail_next("list_pods", KubeError("injected", status=500))
    assert service.preempt(URGENT, EMPTY).nodes == {}
    assert _named(service.preempt(URGENT, EMPTY).nodes) == {NODE: ["u-low"]}  # one call only


def test_budgets_are_counted_and_read_once_per_call(
    service: PreemptionService, cluster: ClusterState, kube: FakeKubeClient
) -> None:
    cluster.upsert_nodes([make_node("n2", 1, mem=20_000)])
    cluster.apply("u-other", make_assignment("n2", [(0, 15_000, 0)]))
    kube.add_pod(_pod("other", 0, node="n2"))
    kube.add_pdb(
        {
            "metadata": {"name": "low", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "low"}}},
            "status": {"disruptionsAllowed": 0},
        }
    )
    outcome = service.preempt(URGENT, {NODE: NodeVictims(()), "n2": NodeVictims(())})
    assert _named(outcome.nodes) == {NODE: ["u-low"], "n2": ["u-other"]}
    assert outcome.nodes[NODE].num_pdb_violations == 1
    assert outcome.nodes["n2"].num_pdb_violations == 0  # its budget selects "low" only
    assert kube.calls.count("list_pdbs") == 1


def test_unreadable_budgets_fall_back_to_kube_schedulers_count(
    service: PreemptionService, kube: FakeKubeClient
) -> None:
    kube.fail_next("list_pdbs", KubeError("injected", status=403))
    proposed = {NODE: NodeVictims((Victim("u-low"),), num_pdb_violations=1)}
    outcome = service.preempt(URGENT, proposed)
    assert _named(outcome.nodes) == {NODE: ["u-low"]}
    assert outcome.nodes[NODE].num_pdb_violations == 1
