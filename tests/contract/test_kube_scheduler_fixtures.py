"""Every body a real kube-scheduler sent (fixtures/kube-scheduler/) answered correctly.

The capture replays in its own order, filter -> prioritize -> bind per pod, in both
``nodeCacheCapable`` modes: names mode against a cluster (the in-memory Kubernetes
fake, nodes and pods from ``cluster/``), Node-objects mode standalone with an empty
store, where the Node objects in the requests are the only inventory.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from tests.support.server import RunningExtender, standalone_settings, start_extender
from vgpu_extender.kube.fake import FakeKubeClient

NODES = ("gpu-node-a", "gpu-node-b", "gpu-node-c", "gpu-node-d")
TYPE_MISMATCH = "gpu type mismatch"

#: Pods in capture order: (pod, feasible nodes, unresolvable nodes -> reason prefix,
#: node kube-scheduler bound it to, error expected from bind or "").
CAPTURE: list[tuple[str, set[str], dict[str, str], str, str]] = [
    ("gpu-mem-percent", set(NODES), {}, "gpu-node-a", ""),
    ("gpu-priority-zero", set(NODES), {}, "gpu-node-b", ""),
    (
        "gpu-a10-numa",
        {"gpu-node-c", "gpu-node-d"},
        {"gpu-node-a": TYPE_MISMATCH, "gpu-node-b": TYPE_MISMATCH},
        "gpu-node-a",  # the capture's extender accepted every node; ours refuses the H100
        TYPE_MISMATCH,
    ),
    ("gpu-init-container", set(NODES), {}, "gpu-node-b", ""),
    ("gpu-mem-cores", set(NODES), {}, "gpu-node-c", ""),
    ("gpu-two-containers", set(NODES), {}, "gpu-node-d", ""),
    ("gpu-two-whole", set(NODES), {}, "gpu-node-d", ""),
]
CAPTURE_IDS = [row[0] for row in CAPTURE]


def _body(fixtures_dir: Path, mode: str, verb: str, pod: str) -> bytes:
    return (fixtures_dir / mode / f"{verb}-{pod}.json").read_bytes()


def _objects(fixtures_dir: Path, kind: str) -> list[dict[str, Any]]:
    return [
        yaml.safe_load(path.read_text())
        for path in sorted((fixtures_dir / "cluster" / kind).glob("*.yaml"))
    ]


class _RawList(msgspec.Struct):
    items: list[msgspec.Raw]


class _RawArgs(msgspec.Struct):
    Nodes: _RawList


def _raw_items(body: bytes) -> list[bytes]:
    """The Node objects of a request, as the exact bytes the scheduler sent."""
    return [bytes(raw) for raw in msgspec.json.decode(body, type=_RawArgs).Nodes.items]


@pytest.fixture(scope="module")
def cluster_extender(
    fixtures_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningExtender, FakeKubeClient]]:
    kube = FakeKubeClient()
    for node in _objects(fixtures_dir, "node"):
        kube.add_node(node)
    for pod in _objects(fixtures_dir, "pod"):
        kube.add_pod(pod)
    running = start_extender(standalone_settings(tmp_path_factory.mktemp("names")), kube=kube)
    yield running, kube
    running.stop()


@pytest.fixture(scope="module")
def standalone_extender(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningExtender]:
    running = start_extender(standalone_settings(tmp_path_factory.mktemp("nodes")))
    yield running
    running.stop()


def _check_filter(answer: dict[str, Any], feasible: set[str], unresolvable: dict[str, str]):
    assert answer["Error"] == ""
    # Unresolvable nodes are listed in FailedNodes too, for kube-scheduler 1.20, which
    # reads only that map; newer ones give FailedAndUnresolvableNodes precedence.
    assert answer["FailedNodes"] == answer["FailedAndUnresolvableNodes"]
    assert set(answer["FailedAndUnresolvableNodes"]) == set(unresolvable)
    for node, prefix in unresolvable.items():
        assert answer["FailedAndUnresolvableNodes"][node].startswith(prefix)
    return feasible


def _check_scores(answer: list[dict[str, Any]], names: set[str]) -> None:
    # Hosts scored 0 are left out: kube-scheduler gives a missing host 0.
    hosts = [item["Host"] for item in answer]
    assert len(hosts) == len(set(hosts)) and set(hosts) <= names
    for item in answer:
        assert type(item["Score"]) is int and 0 < item["Score"] <= 10


@pytest.mark.parametrize(
    ("pod", "feasible", "unresolvable", "node", "bind_error"), CAPTURE, ids=CAPTURE_IDS
)
def test_names_mode_replay(
    cluster_extender: tuple[RunningExtender, FakeKubeClient],
    fixtures_dir: Path,
    pod: str,
    feasible: set[str],
    unresolvable: dict[str, str],
    node: str,
    bind_error: str,
) -> None:
    running, kube = cluster_extender
    answer = running.verb("/filter", _body(fixtures_dir, "names", "filter", pod))
    _check_filter(answer, feasible, unresolvable)
    assert answer["Nodes"] is None
    assert set(answer["NodeNames"]) == feasible

    scores = running.verb("/prioritize", _body(fixtures_dir, "names", "prioritize", pod))
    _check_scores(scores, set(NODES))

    bind_body = _body(fixtures_dir, "names", "bind", pod)
    namespace = msgspec.json.decode(bind_body)["PodNamespace"]
    result = running.verb("/bind", bind_body)
    stored = kube.get_pod(namespace, pod)
    assert stored is not None
    if bind_error:
        assert bind_error in result["Error"]
        assert not stored["spec"].get("nodeName")
        assert "hami.io/vgpu-node" not in stored["metadata"].get("annotations", {})
        return
    assert result == {"Error": ""}
    assert stored["spec"]["nodeName"] == node
    annotations = stored["metadata"]["annotations"]
    assert annotations["hami.io/vgpu-node"] == node
    assert annotations["hami.io/bind-phase"] == "allocating"
    assert (
        annotations["hami.io/vgpu-devices-to-allocate"]
        == (annotations["hami.io/vgpu-devices-allocated"])
    )
    held = running.runtime.cluster.index.allocation(stored["metadata"]["uid"])
    assert held is not None and held.assignment.node == node


@pytest.mark.parametrize(
    ("pod", "feasible", "unresolvable", "node", "bind_error"), CAPTURE, ids=CAPTURE_IDS
)
def test_nodes_mode_replay(
    standalone_extender: RunningExtender,
    fixtures_dir: Path,
    pod: str,
    feasible: set[str],
    unresolvable: dict[str, str],
    node: str,
    bind_error: str,
) -> None:
    running = standalone_extender
    filter_body = _body(fixtures_dir, "nodes", "filter", pod)
    response = running.post("/filter", filter_body)
    assert response.status_code == 200
    answer = response.json()
    _check_filter(answer, feasible, unresolvable)
    assert answer["NodeNames"] is None
    kept = [item["metadata"]["name"] for item in answer["Nodes"]["items"]]
    assert set(kept) == feasible
    # The Node objects come back exactly as sent, byte for byte.
    for raw in _raw_items(filter_body):
        name = msgspec.json.decode(raw)["metadata"]["name"]
        assert (raw in response.content) == (name in feasible)

    scores = running.verb("/prioritize", _body(fixtures_dir, "nodes", "prioritize", pod))
    _check_scores(scores, set(NODES))

    result = running.verb("/bind", _body(fixtures_dir, "nodes", "bind", pod))
    if bind_error:
        assert bind_error in result["Error"]
    else:
        assert result == {"Error": ""}
        held = running.runtime.cluster.index.pods_on(node)
        assert any(a.assignment.node == node for a in held)


def test_every_captured_body_is_accepted(fixtures_dir: Path, tmp_path: Path) -> None:
    """All 42 files: filter and prioritize bodies decode and get well-formed answers."""
    running = start_extender(standalone_settings(tmp_path))
    try:
        files = sorted((fixtures_dir / "names").glob("*.json")) + sorted(
            (fixtures_dir / "nodes").glob("*.json")
        )
        assert len(files) == 42
        for path in files:
            verb = path.name.split("-", 1)[0]
            answer = running.verb(f"/{verb}", path.read_bytes())
            if verb == "prioritize":
                assert isinstance(answer, list) and len(answer) <= len(NODES), path.name
                assert all(item["Host"] in NODES and item["Score"] > 0 for item in answer)
            elif verb == "filter":
                assert answer["Error"] == "", path.name
            else:
                assert set(answer) == {"Error"}, path.name
    finally:
        running.stop()
