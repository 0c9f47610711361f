"""filter, prioritize, filter_onlyone and noop over real HTTP, against the demo inventory.

Demo nodes: demo-a100-1/2 (4 x A100 80 GB, priority label 10/20), demo-t4-1 (2 x T4
15360 MiB, priority 30), demo-t4-2 (2 x T4, no label).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from tests.support.server import StartExtender, args, place, pod_json
from vgpu_extender.services.scheduling import NOT_CHOSEN

DEMO = ["demo-a100-1", "demo-a100-2", "demo-t4-1", "demo-t4-2"]
GPU_POD = pod_json("web", mem=4000)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"Pod": GPU_POD, "Nodes": None, "NodeNames": ["demo-t4-1"]}, ["demo-t4-1"]),
        ({"pod": GPU_POD, "nodenames": ["demo-t4-1"]}, ["demo-t4-1"]),
        ({"POD": GPU_POD, "NODENAMES": ["demo-t4-1"], "nodes": None}, ["demo-t4-1"]),
        ({"Pod": GPU_POD, "NodeNames": ["demo-t4-1"], "Extra": {"x": 1}}, ["demo-t4-1"]),
        # Go does not fold underscores: node_names is an unknown key, so no candidates.
        ({"Pod": GPU_POD, "node_names": ["demo-t4-1"]}, []),
    ],
    ids=["exact", "lower", "upper", "unknown-key-ignored", "underscore-not-folded"],
)
def test_keys_match_in_any_letter_case(
    extender: StartExtender, body: dict[str, Any], expected: list[str]
) -> None:
    answer = extender(demo=True).verb("/filter", body)
    assert answer["Error"] == ""
    assert answer["NodeNames"] == expected


@pytest.mark.parametrize(
    ("pod", "failed", "unresolvable"),
    [
        (pod_json("small", mem=4000), {}, {"nope": "node unregistered"}),
        (
            pod_json("big", mem=20000),
            {},
            {
                "demo-t4-1": "insufficient gpumem: need 20000 MiB, best free 15360 MiB",
                "demo-t4-2": "insufficient gpumem: need 20000 MiB, best free 15360 MiB",
                "nope": "node unregistered",
            },
        ),
        (
            pod_json("a100-only", mem=1000, annotations={"nvidia.com/use-gputype": "A100"}),
            {},
            {
                "demo-t4-1": "gpu type mismatch",
                "demo-t4-2": "gpu type mismatch",
                "nope": "node unregistered",
            },
        ),
        (
            pod_json("five", gpus=5),
            {},
            {name: "not enough gpus" for name in [*DEMO, "nope"] if name != "nope"}
            | {"nope": "node unregistered"},
        ),
    ],
    ids=["fits-everywhere", "too-big-for-t4", "type-selector", "too-many-gpus"],
)
def test_filter_gives_every_rejected_node_a_stable_reason(
    extender: StartExtender,
    pod: dict[str, Any],
    failed: dict[str, str],
    unresolvable: dict[str, str],
) -> None:
    running = extender(demo=True)
    answer = running.verb("/filter", args(pod, [*DEMO, "nope"]))
    rejected = set(failed) | set(unresolvable)
    assert answer["NodeNames"] == [n for n in DEMO if n not in rejected]
    got = answer["FailedAndUnresolvableNodes"]
    # Unresolvable nodes are in FailedNodes too, for kube-scheduler 1.20.
    assert answer["FailedNodes"] == failed | got
    assert set(got) == set(unresolvable)
    for node, prefix in unresolvable.items():
        assert got[node].startswith(prefix), got[node]
    # The same request twice gives the same strings: kube-scheduler groups them.
    assert running.verb("/filter", args(pod, [*DEMO, "nope"])) == answer


def test_a_full_device_gives_a_resolvable_reason_with_numbers(extender: StartExtender) -> None:
    running = extender(demo=True)
    for i in range(2):  # each T4 of demo-t4-1 keeps 15360 - 13312 = 2048 MiB free
        place(running, pod_json(f"filler-{i}", mem=13312), "demo-t4-1")
    answer = running.verb("/filter", args(pod_json("late", mem=4000), ["demo-t4-1"]))
    assert answer["NodeNames"] == []
    assert answer["FailedNodes"] == {
        "demo-t4-1": "insufficient gpumem: need 4000 MiB, best free 2048 MiB"
    }
    assert answer["FailedAndUnresolvableNodes"] == {}


@pytest.mark.parametrize(
    "pod",
    [
        pod_json("cpu-only", gpus=None),
        pod_json("zero-gpus", gpus=0),
    ],
    ids=["no-managed-resource", "zero-count"],
)
def test_pods_without_managed_devices_pass_through_untouched(
    extender: StartExtender, pod: dict[str, Any]
) -> None:
    names = ["demo-t4-1", "not-a-gpu-node", "demo-a100-2"]
    answer = extender(demo=True).verb("/filter", args(pod, names))
    assert answer == {
        "Nodes": None,
        "NodeNames": names,
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {},
        "Error": "",
    }


@pytest.mark.parametrize("path", ["/prioritize", "/priority"], ids=["prioritize", "alias"])
def test_scores_are_integers_from_0_to_10(extender: StartExtender, path: str) -> None:
    running = extender(demo=True)
    place(running, pod_json("busy", mem=8000), "demo-a100-2")
    response = running.post(path, args(pod_json("next", mem=4000), [*DEMO, "nope"]))
    assert response.status_code == 200
    scores = {item["Host"]: item["Score"] for item in response.json()}
    # A host scored 0 is left out (kube-scheduler gives a missing host 0).
    assert set(scores) <= {*DEMO, "nope"}
    assert all(type(s) is int and 0 < s <= 10 for s in scores.values())
    assert b"." not in response.content  # never 5.0: Go rejects floats for int64
    # binpack: the only node already in use ranks first; an unknown node scores 0.
    assert scores["demo-a100-2"] == 10
    assert "nope" not in scores
    assert max(scores.get(n, 0) for n in DEMO if n != "demo-a100-2") < 10


def test_label_priority_breaks_a_tie_without_leaking_raw_label_values(
    extender: StartExtender,
) -> None:
    scores = extender(demo=True).verb("/prioritize", args(pod_json("p", mem=1000), DEMO))
    by_host = {item["Host"]: item["Score"] for item in scores}
    # Labels 10, 20, 30 and none: the labelled nodes scaled to 1..10 (20 is halfway:
    # 1 + 9 / 2 = 5.5 -> 6), the unlabelled node 0, below the lowest labelled one (left
    # out of the answer: kube-scheduler gives a missing host 0).
    assert by_host == {"demo-a100-1": 1, "demo-a100-2": 6, "demo-t4-1": 10}


def test_filter_onlyone_returns_the_best_node_only(extender: StartExtender) -> None:
    running = extender(demo=True)
    place(running, pod_json("busy", mem=8000), "demo-a100-1")
    answer = running.verb("/filter_onlyone", args(pod_json("next", mem=4000), DEMO))
    assert answer["NodeNames"] == ["demo-a100-1"]  # binpack: the node already in use
    assert answer["FailedNodes"] == {n: NOT_CHOSEN for n in DEMO if n != "demo-a100-1"}
    assert answer["Error"] == ""


def test_filter_onlyone_explains_when_nothing_fits(extender: StartExtender) -> None:
    answer = extender(demo=True).verb(
        "/filter_onlyone", args(pod_json("huge", mem=100_000), ["demo-t4-1", "demo-a100-1"])
    )
    assert answer["NodeNames"] == []
    assert set(answer["FailedAndUnresolvableNodes"]) == {"demo-t4-1", "demo-a100-1"}


def test_noop_decodes_and_keeps_every_node_without_placing(extender: StartExtender) -> None:
    running = extender(demo=True)
    answer = running.verb("/noop", args(pod_json("huge", mem=100_000), DEMO))
    assert answer["NodeNames"] == DEMO
    assert len(running.runtime.cluster.index.node_names()) == len(DEMO)


def test_a_body_sent_in_chunks_is_read_whole(extender: StartExtender) -> None:
    running = extender(demo=True)
    body = msgspec.json.encode(args(pod_json("p", mem=1000), DEMO))

    def chunks() -> Iterator[bytes]:  # no Content-Length: chunked transfer encoding
        for start in range(0, len(body), 7):
            yield body[start : start + 7]

    response = running.client.post(
        "/filter", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 200
    assert response.json()["NodeNames"] == DEMO


def test_other_methods_on_a_verb_path_are_not_verbs(extender: StartExtender) -> None:
    running = extender(demo=True)
    assert running.client.get("/filter").status_code in (404, 405)
    assert running.client.get("/healthz").status_code == 200
