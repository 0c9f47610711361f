"""kube-scheduler's Node objects in nodes mode (``nodeCacheCapable: false``) give the
vendors the node's name and labels, over real HTTP: an Enflame node's DRS annotation
becomes devices named after the node, and an AWS Neuron node's instance-type label
decides whether a container may take three devices in a row (only ``inf*`` instances
wire theirs in a ring)."""

from __future__ import annotations

from typing import Any

from tests.support.server import StartExtender

#: HAMi's enflame test literal (npu.md §6).
DRS_LITERAL = (
    '{"devices":[{"index":"0","minor":"0","capacity":6}],'
    '"profiles":{"1g.6gb":"0","3g.20gb":"1","6g.40gb":"2"}}'
)
NEURON_CAPACITY = {"aws.amazon.com/neuron": "4", "aws.amazon.com/neuroncore": "8"}


def _node(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    capacity: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "resourceVersion": "1",
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "status": {"capacity": capacity or {}, "allocatable": capacity or {}},
    }


def _pod(name: str, limits: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "main", "resources": {"limits": limits}}]},
    }


def _filter(running: Any, pod: dict[str, Any], nodes: list[dict[str, Any]]) -> Any:
    return running.verb("/filter", {"Pod": pod, "Nodes": {"items": nodes}, "NodeNames": None})


def test_node_objects_give_vendors_the_node_name_and_the_instance_type(
    extender: StartExtender,
) -> None:
    running = extender(vendor="enflame,awsneuron")
    gcu = _node("gcu-node", annotations={"enflame.com/gcu-drs-capacity": DRS_LITERAL})
    inf = _node(
        "inf-node",
        labels={"node.kubernetes.io/instance-type": "inf2.48xlarge"},
        capacity=NEURON_CAPACITY,
    )
    trn = _node(
        "trn-node",
        labels={"node.kubernetes.io/instance-type": "trn1.32xlarge"},
        capacity=NEURON_CAPACITY,
    )

    answer = _filter(running, _pod("slices", {"enflame.com/drs-gcu": "3"}), [gcu, inf, trn])
    assert [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == ["gcu-node"]
    summary = running.client.get("/api/v1/nodes/gcu-node").json()
    assert [d["uuid"] for d in summary["devices"]] == ["gcu-node-enflame-drs-0"]

    # Three of four devices: a run of three only a ring allows.
    answer = _filter(running, _pod("three", {"aws.amazon.com/neuron": "3"}), [gcu, inf, trn])
    assert [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == ["inf-node"]
    assert "trn-node" in answer["FailedNodes"]
    # Four is aligned: both instance types take it.
    answer = _filter(running, _pod("four", {"aws.amazon.com/neuron": "4"}), [inf, trn])
    assert [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == ["inf-node", "trn-node"]
