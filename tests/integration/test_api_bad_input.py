"""Bad input: always HTTP 200, an error that names the field and value, no state change."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from tests.support.server import (
    RunningExtender,
    StartExtender,
    args,
    bind_args,
    node_json,
    place,
    pod_json,
    standalone_settings,
    start_extender,
)
from vgpu_extender import store

GPU_POD = pod_json("web", mem=4000)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningExtender]:
    """One demo extender for the tests that must leave no trace anyway: a pod placed,
    and two more seen at filter so bind can try them."""
    running = start_extender(standalone_settings(tmp_path_factory.mktemp("bad"), demo=True))
    place(running, pod_json("existing", mem=1000), "demo-t4-1")
    for pod in (GPU_POD, pod_json("huge", mem=50_000)):
        running.verb("/filter", args(pod, ["demo-t4-1"]))
    yield running
    running.stop()


def _snapshot(running: RunningExtender) -> tuple[Any, ...]:
    """Everything a request could change: store rows, nodes, and the index."""
    runtime = running.runtime
    with runtime.sessions() as session:
        rows = [(a.pod_uid, a.device_uuid, a.state) for a in store.live_allocations(session)]
        nodes = store.load_inventories(session)
    index = runtime.cluster.index
    allocations = sorted((a.pod_uid, a.assignment) for a in index.allocations())
    return rows, nodes, sorted(index.node_names()), allocations


def _with(pod: dict[str, Any], **limits: str) -> dict[str, Any]:
    changed = msgspec.json.decode(msgspec.json.encode(pod))
    changed["spec"]["containers"][0]["resources"]["limits"].update(limits)
    return changed


BAD_FILTER: list[tuple[str, bytes | dict[str, Any], str]] = [
    ("malformed-json", b'{"Pod": {', "malformed JSON"),
    ("not-an-object", b"[1, 2, 3]", "must be a JSON object"),
    ("empty-body", b"", "body is empty"),
    ("pod-missing", {"NodeNames": ["demo-t4-1"]}, "field Pod is missing"),
    ("pod-wrong-type", {"Pod": 5, "NodeNames": ["demo-t4-1"]}, "Pod"),
    ("names-wrong-type", {"Pod": GPU_POD, "NodeNames": 5}, "NodeNames"),
    ("names-not-strings", {"Pod": GPU_POD, "NodeNames": [1, 2]}, "NodeNames"),
    ("nodes-wrong-type", {"Pod": GPU_POD, "Nodes": {"items": 7}, "NodeNames": None}, "Nodes"),
    (
        "node-without-name",
        {"Pod": GPU_POD, "Nodes": {"items": [{"metadata": {}}]}, "NodeNames": None},
        "Nodes.items[0].metadata.name",
    ),
    (
        "node-labels-wrong-type",
        {"Pod": GPU_POD, "Nodes": {"items": [{"metadata": {"name": "x", "labels": 5}}]}},
        "Nodes.items[0]",
    ),
    (
        "bad-quantity",
        args(_with(GPU_POD, **{"nvidia.com/gpumem": "lots"}), ["demo-t4-1"]),
        "'nvidia.com/gpumem', value 'lots'",
    ),
    (
        "cores-over-100",
        args(_with(GPU_POD, **{"nvidia.com/gpucores": "150"}), ["demo-t4-1"]),
        "'nvidia.com/gpucores', value '150'",
    ),
    (
        "negative-count",
        args(_with(GPU_POD, **{"nvidia.com/gpu": "-1"}), ["demo-t4-1"]),
        "'nvidia.com/gpu', value '-1'",
    ),
    (
        "bad-numa-annotation",
        args(pod_json("n", mem=10, annotations={"nvidia.com/numa-bind": "maybe"}), ["demo-t4-1"]),
        "'nvidia.com/numa-bind', value 'maybe'",
    ),
]


@pytest.mark.parametrize(
    ("body", "message"), [row[1:] for row in BAD_FILTER], ids=[row[0] for row in BAD_FILTER]
)
@pytest.mark.parametrize("path", ["/filter", "/filter_onlyone"])
def test_bad_filter_bodies_get_a_clear_error(
    shared: RunningExtender, path: str, body: bytes | dict[str, Any], message: str
) -> None:
    running = shared
    before = _snapshot(running)
    answer = running.verb(path, body)
    assert message in answer["Error"], answer["Error"]
    assert answer["NodeNames"] is None and answer["Nodes"] is None
    assert _snapshot(running) == before


@pytest.mark.parametrize(
    ("path", "expected"),
    [("/prioritize", []), ("/preempt", {"NodeNameToMetaVictims": {}})],
    ids=["prioritize", "preempt"],
)
def test_other_verbs_answer_malformed_json_in_their_own_type(
    shared: RunningExtender, path: str, expected: Any
) -> None:
    answer = shared.verb(path, b"{nope")
    if isinstance(expected, dict):
        assert answer["NodeNameToMetaVictims"] == {}
        assert "malformed JSON" in answer["Error"]
    else:
        assert answer == expected


BAD_BIND: list[tuple[str, bytes | dict[str, Any], str]] = [
    ("malformed-json", b'{"PodName": ', "malformed JSON"),
    ("uid-wrong-type", {**bind_args(GPU_POD, "demo-t4-1"), "PodUID": 5}, "field PodUID"),
    ("node-missing", {k: v for k, v in bind_args(GPU_POD, "x").items() if k != "Node"}, "Node"),
    ("name-empty", {**bind_args(GPU_POD, "demo-t4-1"), "PodName": ""}, "field PodName"),
    ("unknown-node", bind_args(GPU_POD, "no-such-node"), "node unregistered"),
    (
        "never-filtered",
        bind_args(pod_json("stranger", mem=10), "demo-t4-1"),
        "was not seen at filter",
    ),
    ("does-not-fit", bind_args(pod_json("huge", mem=50_000), "demo-t4-1"), "insufficient gpumem"),
]


@pytest.mark.parametrize(
    ("body", "message"), [row[1:] for row in BAD_BIND], ids=[row[0] for row in BAD_BIND]
)
def test_bad_bind_bodies_get_a_clear_error_and_change_nothing(
    shared: RunningExtender, body: bytes | dict[str, Any], message: str
) -> None:
    running = shared
    before = _snapshot(running)
    answer = running.verb("/bind", body)
    assert message in answer["Error"], answer["Error"]
    assert _snapshot(running) == before


def test_a_pod_bound_twice_gets_an_error_the_second_time(extender: StartExtender) -> None:
    running = extender(demo=True)
    place(running, GPU_POD, "demo-t4-1")
    before = _snapshot(running)
    answer = running.verb("/bind", bind_args(GPU_POD, "demo-t4-2"))
    assert "already has bound allocations on node demo-t4-1" in answer["Error"]
    assert _snapshot(running) == before


@pytest.mark.parametrize(
    "path", ["/filter", "/prioritize", "/bind", "/preempt"], ids=lambda p: p[1:]
)
def test_huge_bodies_are_refused_by_size(extender: StartExtender, path: str) -> None:
    running = extender(demo=True, max_body_bytes=4096)
    before = _snapshot(running)
    body = args(pod_json("big", mem=10), ["n" * 100] * 100)
    response = running.post(path, body)
    assert response.status_code == 200
    assert response.content == b"[]" or b"exceeds max_body_bytes=4096" in response.content
    assert _snapshot(running) == before


def test_a_corrupt_node_annotation_in_a_request_registers_nothing(
    extender: StartExtender,
) -> None:
    """A request's Node objects only ever add a readable node the extender lacks: a
    corrupt annotation neither registers a new node nor touches a known one (the node
    watch reports a corrupt annotation of a known node: test_bind_sync)."""
    running = extender()  # standalone, empty: Node objects are the only inventory
    corrupt = node_json("gpu-2", register='[{"id": "GPU-gpu-2-0", "devmem": "lots"}]')
    corrupt["metadata"]["resourceVersion"] = "1"
    body = {"Pod": GPU_POD, "Nodes": {"items": [corrupt]}, "NodeNames": None}
    answer = running.verb("/filter", body)
    assert answer["Error"] == ""
    assert answer["Nodes"]["items"] == []
    assert answer["FailedAndUnresolvableNodes"] == {"gpu-2": "node unregistered"}
    assert "gpu-2" not in running.runtime.cluster.index

    good = node_json("gpu-1")
    good["metadata"]["resourceVersion"] = "1"
    answer = running.verb("/filter", {**body, "Nodes": {"items": [good]}})
    assert [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == ["gpu-1"]
    known = running.runtime.cluster.index.inventory("gpu-1")

    bad = node_json("gpu-1", register='[{"id": "GPU-gpu-1-0", "devmem": "lots"}]')
    bad["metadata"]["resourceVersion"] = "2"
    answer = running.verb("/filter", {**body, "Nodes": {"items": [bad]}})
    assert [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == ["gpu-1"]
    assert running.runtime.cluster.index.inventory("gpu-1") == known


def test_verbs_can_be_limited_to_loopback_clients(extender: StartExtender) -> None:
    running = extender(demo=True, verbs_localhost_only=True)
    answer = running.verb("/filter", args(GPU_POD, ["demo-t4-1"]))
    assert answer["NodeNames"] == ["demo-t4-1"]  # the test client is on 127.0.0.1
