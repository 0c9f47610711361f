"""The admin API under /api/v1 and gpushare's inspect API, over real HTTP.

The demo inventory: demo-a100-1 and demo-a100-2 (4 x A100 80 GB each), demo-t4-1 and
demo-t4-2 (2 x T4 15 GB each). Device UUIDs are ``GPU-demo-<node>-<index>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

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
from tests.support.waiting import eventually
from vgpu_extender.kube.fake import FakeKubeClient

TOKEN = "admin-s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
A100 = 81920
T4 = 15360


def _gpu(node: str, index: int) -> str:
    return f"GPU-demo-{node}-{index}"


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningExtender]:
    """The demo with three pods: two on demo-a100-1 (spread over its GPUs), one whole T4.

    Shared by the tests that only read (or whose changes are refused).
    """
    settings = standalone_settings(tmp_path_factory.mktemp("admin"), demo=True, admin_token=TOKEN)
    running = start_extender(settings)
    running.client.headers.update(AUTH)  # reads need the token too
    try:
        place(running, pod_json("train-0", namespace="ml", mem=20000, cores=50), "demo-a100-1")
        place(running, pod_json("infer-1", namespace="ml", mem=4000, cores=10), "demo-a100-1")
        place(running, pod_json("notebook", namespace="dev"), "demo-t4-1")
        yield running
    finally:
        running.stop()


# --------------------------------------------------------------------------- reading
@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (
            "demo-a100-1",
            {
                "gpus": 4,
                "memory_mib": 4 * A100,
                "memory_used_mib": 24000,
                "memory_free_mib": 4 * A100 - 24000,
                "cores_used": 60,
                "allocations": 2,
                # Two GPUs shared: their free memory is out of reach of a whole-GPU pod.
                "fragmentation": round((2 * A100 - 24000) / (4 * A100 - 24000), 4),
            },
        ),
        (
            "demo-t4-1",
            {
                "gpus": 2,
                "memory_used_mib": T4,
                "cores_used": 100,
                "allocations": 1,
                # The full GPU has nothing free; the idle one is whole.
                "fragmentation": 0.0,
            },
        ),
        ("demo-a100-2", {"memory_used_mib": 0, "allocations": 0, "fragmentation": 0.0}),
    ],
    ids=["two-shared-gpus", "one-whole-gpu", "idle"],
)
def test_node_list_reports_usage_per_node(
    busy: RunningExtender, node: str, expected: dict[str, Any]
) -> None:
    listed = busy.client.get("/api/v1/nodes").json()
    assert [n["name"] for n in listed] == ["demo-a100-1", "demo-a100-2", "demo-t4-1", "demo-t4-2"]
    report = next(n for n in listed if n["name"] == node)
    assert {key: report[key] for key in expected} == expected
    assert report["devices"] is None


def test_one_node_lists_its_gpus_with_their_pods(busy: RunningExtender) -> None:
    node = busy.client.get("/api/v1/nodes/demo-a100-1").json()
    holders = {d["uuid"]: [(p["namespace"], p["name"]) for p in d["pods"]] for d in node["devices"]}
    assert sorted(holders.values()) == [[], [], [("ml", "infer-1")], [("ml", "train-0")]]
    train = next(d for d in node["devices"] if d["pods"] and d["pods"][0]["name"] == "train-0")
    assert (train["memory_used_mib"], train["cores_used"], train["slots_used"]) == (20000, 50, 1)
    assert train["pods"][0] == {
        "uid": "uid-train-0",
        "namespace": "ml",
        "name": "train-0",
        "state": "bound",
        "memory_mib": 20000,
        "cores": 50,
        "containers": [0],
        "label": "",  # NVIDIA has no name for a share
    }
    assert busy.client.get("/api/v1/nodes", params={"devices": "true"}).json()[0] == node


def test_summary_adds_up_the_cluster(busy: RunningExtender) -> None:
    summary = busy.client.get("/api/v1/summary").json()
    used = 24000 + T4
    total = 8 * A100 + 4 * T4
    assert summary == {
        "nodes": 4,
        "nodes_with_problems": 0,
        "gpus": 12,
        "unhealthy_gpus": 0,
        "cordoned_gpus": 0,
        "memory_mib": total,
        "memory_used_mib": used,
        "memory_free_mib": total - used,
        "memory_utilisation": round(used / total, 4),
        "cores": 1200,
        "cores_used": 160,
        "cores_utilisation": round(160 / 1200, 4),
        "slots": 120,
        "slots_used": 3,
        "pods": 3,
        "pending_reservations": 0,
        "fragmentation": round((2 * A100 - 24000) / (total - used), 4),
        "conflicts": 0,
    }


@pytest.mark.parametrize(
    ("params", "pods", "total"),
    [
        ({}, ["ml/infer-1", "ml/train-0", "dev/notebook"], 3),
        ({"namespace": "ml"}, ["ml/infer-1", "ml/train-0"], 2),
        ({"pod": "notebook"}, ["dev/notebook"], 1),
        ({"node": "demo-t4-1"}, ["dev/notebook"], 1),
        ({"device": _gpu("demo-t4-1", 0)}, ["dev/notebook"], 1),
        ({"namespace": "ml", "limit": 1}, ["ml/infer-1"], 2),
        ({"namespace": "ml", "limit": 1, "offset": 1}, ["ml/train-0"], 2),
        ({"namespace": "nobody"}, [], 0),
    ],
    ids=["all", "namespace", "pod", "node", "device", "first-page", "second-page", "no-match"],
)
def test_allocations_filter_and_paginate(
    busy: RunningExtender, params: dict[str, Any], pods: list[str], total: int
) -> None:
    page = busy.client.get("/api/v1/allocations", params=params).json()
    assert [f"{a['namespace']}/{a['pod']}" for a in page["items"]] == pods
    assert page["total"] == total
    assert all(a["state"] == "bound" for a in page["items"])


def test_one_pod_shows_its_gpus_per_container(busy: RunningExtender) -> None:
    pod = busy.client.get("/api/v1/pods/dev/notebook").json()
    assert pod == {
        "uid": "uid-notebook",
        "namespace": "dev",
        "name": "notebook",
        "node": "demo-t4-1",
        "state": "bound",
        "containers": [
            {
                "index": 0,
                "init": False,
                "devices": [{"uuid": _gpu("demo-t4-1", 0), "memory_mib": T4, "cores": 100}],
            }
        ],
    }


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/api/v1/nodes/ghost", "node 'ghost' is not registered"),
        ("/api/v1/pods/dev/ghost", "pod dev/ghost holds no GPU allocation"),
    ],
    ids=["node", "pod"],
)
def test_unknown_objects_are_404_with_a_message(
    busy: RunningExtender, path: str, message: str
) -> None:
    response = busy.client.get(path)
    assert response.status_code == 404
    assert response.json() == {"detail": message}


@pytest.mark.parametrize(
    ("params", "field"),
    [({"limit": 0}, "limit"), ({"limit": 5000}, "limit"), ({"offset": -1}, "offset")],
    ids=["limit-zero", "limit-too-big", "negative-offset"],
)
def test_bad_pagination_names_the_parameter(
    busy: RunningExtender, params: dict[str, Any], field: str
) -> None:
    response = busy.client.get("/api/v1/allocations", params=params)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", field]


# --------------------------------------------------------------------------- what-if
@pytest.mark.parametrize(
    ("pod", "feasible", "rejected"),
    [
        (
            pod_json("w", mem=20000),
            {"demo-a100-1", "demo-a100-2"},
            {"demo-t4-1": "insufficient gpumem", "demo-t4-2": "insufficient gpumem"},
        ),
        (
            pod_json("w", mem=1000, annotations={"nvidia.com/use-gputype": "T4"}),
            {"demo-t4-1", "demo-t4-2"},
            {"demo-a100-1": "gpu type mismatch", "demo-a100-2": "gpu type mismatch"},
        ),
        (
            # Three whole GPUs: demo-a100-1 has only two idle ones left.
            pod_json("w", gpus=3),
            {"demo-a100-2"},
            {
                "demo-a100-1": "exclusive gpu conflict",
                "demo-t4-1": "not enough gpus",
                "demo-t4-2": "not enough gpus",
            },
        ),
    ],
    ids=["memory", "gpu-type", "gpu-count"],
)
def test_what_if_explains_every_node_and_reserves_nothing(
    busy: RunningExtender, pod: dict[str, Any], feasible: set[str], rejected: dict[str, str]
) -> None:
    before = busy.client.get("/api/v1/summary").json()
    answer = busy.client.post("/api/v1/whatif", json={"pod": pod}).json()
    assert answer["managed"] is True
    assert {p["node"] for p in answer["feasible"]} == feasible
    assert {node: r["reason"] for node, r in answer["rejected"].items()} == rejected
    scores = [p["score"] for p in answer["feasible"]]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 10 for s in scores)
    best = answer["feasible"][0]["containers"]
    asked = pod["spec"]["containers"][0]["resources"]["limits"]
    assert len(best) == 1 and len(best[0]) == int(asked["nvidia.com/gpu"])
    assert busy.client.get("/api/v1/summary").json() == before
    # Not remembered for a bind either: no filter ever saw this pod.
    error = busy.verb("/bind", bind_args(pod, answer["feasible"][0]["node"]))["Error"]
    assert "was not seen at filter" in error


def test_what_if_limits_device_choice_and_candidates(busy: RunningExtender) -> None:
    body = {
        "pod": pod_json("w", mem=1000),
        "nodes": ["demo-a100-2", "demo-t4-2", "ghost"],
        "detail": 1,
    }
    answer = busy.client.post("/api/v1/whatif", json=body).json()
    assert [p["containers"] is None for p in answer["feasible"]] == [False, True]
    assert {p["node"] for p in answer["feasible"]} == {"demo-a100-2", "demo-t4-2"}
    assert answer["rejected"]["ghost"] == {
        "reason": "node unregistered",
        "message": "node unregistered",
        "unresolvable": True,
    }


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"pod": pod_json("w", mem=1000, cores=150)}, 400, "at most 100"),
        (
            {"pod": pod_json("w", mem=1000, annotations={"hami.io/node-scheduler-policy": "x"})},
            400,
            "unknown node policy",
        ),
        ({"pod": "nope"}, 422, "pod"),
        ({"pod": pod_json("w"), "detail": 500}, 422, "detail"),
    ],
    ids=["cores-over-100", "unknown-policy", "pod-not-object", "detail-too-big"],
)
def test_what_if_refuses_bad_pods_by_name(
    busy: RunningExtender, body: dict[str, Any], status: int, message: str
) -> None:
    response = busy.client.post("/api/v1/whatif", json=body)
    assert response.status_code == status
    assert message in str(response.json()["detail"])


def test_what_if_of_a_pod_asking_for_no_gpu_fits_everywhere(busy: RunningExtender) -> None:
    answer = busy.client.post("/api/v1/whatif", json={"pod": pod_json("cpu", gpus=None)}).json()
    assert answer["managed"] is False
    assert len(answer["feasible"]) == 4 and answer["rejected"] == {}


# --------------------------------------------------------------------------- inventory
def _document(*names: str, gpus: int = 2) -> dict[str, Any]:
    return {
        "nodes": [
            {
                "name": name,
                "labels": {"rack": "r1"},
                "devices": [
                    {
                        "id": f"GPU-{name}-{i}",
                        "index": i,
                        "count": 10,
                        "devmem": 24576,
                        "devcore": 100,
                        "type": "NVIDIA-L4",
                        "health": True,
                    }
                    for i in range(gpus)
                ],
            }
            for name in names
        ]
    }


def test_inventory_put_replaces_the_standalone_inventory(extender: StartExtender) -> None:
    running = extender(demo=True, admin_token=TOKEN)
    running.client.headers.update(AUTH)  # reads need the token too
    response = running.client.put("/api/v1/inventory", json=_document("l4-1", "l4-2"), headers=AUTH)
    assert response.status_code == 200
    assert response.json() == {
        "registered": ["l4-1", "l4-2"],
        "removed": ["demo-a100-1", "demo-a100-2", "demo-t4-1", "demo-t4-2"],
    }
    assert [n["name"] for n in running.client.get("/api/v1/nodes").json()] == ["l4-1", "l4-2"]
    place(running, pod_json("p", mem=8000), "l4-1")
    # Again, one node fewer: l4-1 holds a pod, so it cannot be left out.
    response = running.client.put("/api/v1/inventory", json=_document("l4-2"), headers=AUTH)
    assert response.status_code == 409
    assert "l4-1 (1 pods)" in response.json()["detail"]
    assert [n["name"] for n in running.client.get("/api/v1/nodes").json()] == ["l4-1", "l4-2"]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"nodes": [{"name": "", "devices": []}]}, "nodes[0].name"),
        (
            {"nodes": [{"name": "a", "devices": [{"id": "G", "devmem": "lots", "health": True}]}]},
            "devmem",
        ),
        (_document("a", "a"), "listed twice"),
    ],
    ids=["empty-name", "bad-devmem", "duplicate-node"],
)
def test_bad_inventory_is_refused_and_changes_nothing(
    extender: StartExtender, document: dict[str, Any], message: str
) -> None:
    running = extender(demo=True, admin_token=TOKEN)
    running.client.headers.update(AUTH)  # reads need the token too
    response = running.client.put("/api/v1/inventory", json=document, headers=AUTH)
    assert response.status_code == 400
    assert message in response.json()["detail"]
    assert len(running.client.get("/api/v1/nodes").json()) == 4


def test_inventory_put_is_refused_with_a_cluster(extender: StartExtender) -> None:
    kube = FakeKubeClient()
    kube.add_node(node_json("n1"))
    running = extender(kube=kube, admin_token=TOKEN)
    running.client.headers.update(AUTH)  # reads need the token too
    response = running.client.put("/api/v1/inventory", json=_document("x"), headers=AUTH)
    assert response.status_code == 409
    assert "standalone mode" in response.json()["detail"]


# --------------------------------------------------------------------------- cordon
def _t4_pod(name: str) -> dict[str, Any]:
    return pod_json(name, mem=1000)


def test_cordon_keeps_new_pods_off_a_gpu_and_survives_a_restart(extender: StartExtender) -> None:
    running = extender(demo=True, admin_token=TOKEN)
    running.client.headers.update(AUTH)  # reads need the token too
    for index in (0, 1):
        response = running.client.post(
            f"/api/v1/devices/{_gpu('demo-t4-2', index)}/cordon", headers=AUTH
        )
        assert response.status_code == 200
    assert response.json() == {
        "node": "demo-t4-2",
        "device": _gpu("demo-t4-2", 1),
        "cordoned": [_gpu("demo-t4-2", 0), _gpu("demo-t4-2", 1)],
    }
    answer = running.verb("/filter", args(_t4_pod("a"), ["demo-t4-2"]))
    assert answer["FailedAndUnresolvableNodes"] == {"demo-t4-2": "cordoned devices: need 1, have 0"}
    running.stop()

    restarted = extender(admin_token=TOKEN)  # same database, no demo: the store's nodes
    restarted.client.headers.update(AUTH)  # reads need the token too
    node = restarted.client.get("/api/v1/nodes/demo-t4-2").json()
    assert node["cordoned_gpus"] == 2
    response = restarted.client.post(
        f"/api/v1/devices/{_gpu('demo-t4-2', 0)}/uncordon", headers=AUTH
    )
    assert response.json()["cordoned"] == [_gpu("demo-t4-2", 1)]
    assert restarted.verb("/filter", args(_t4_pod("b"), ["demo-t4-2"]))["NodeNames"] == [
        "demo-t4-2"
    ]


def test_cordon_with_a_cluster_writes_hamis_node_annotation(extender: StartExtender) -> None:
    kube = FakeKubeClient()
    kube.add_node(node_json("n1", gpus=2))
    running = extender(kube=kube, admin_token=TOKEN)
    running.client.headers.update(AUTH)  # reads need the token too
    response = running.client.post("/api/v1/devices/GPU-n1-1/cordon", headers=AUTH)
    assert response.status_code == 200
    annotations = kube.get_node("n1")["metadata"]["annotations"]
    assert annotations["hami.io/device-cordon"] == "GPU-n1-1"
    running.client.post("/api/v1/devices/GPU-n1-0/cordon", headers=AUTH)
    assert kube.get_node("n1")["metadata"]["annotations"]["hami.io/device-cordon"] == (
        "GPU-n1-0,GPU-n1-1"
    )
    running.client.post("/api/v1/devices/GPU-n1-0/uncordon", headers=AUTH)
    running.client.post("/api/v1/devices/GPU-n1-1/uncordon", headers=AUTH)
    assert "hami.io/device-cordon" not in kube.get_node("n1")["metadata"]["annotations"]
    # The node watch replays each annotation change after the fact; it ends where we did.
    eventually(lambda: running.client.get("/api/v1/nodes/n1").json()["cordoned_gpus"] == 0)


def test_cordon_of_an_unknown_gpu_is_404(extender: StartExtender) -> None:
    running = extender(demo=True, admin_token=TOKEN)
    running.client.headers.update(AUTH)  # reads need the token too
    response = running.client.post("/api/v1/devices/GPU-nope/cordon", headers=AUTH)
    assert response.status_code == 404
    assert response.json() == {"detail": "no registered GPU has UUID 'GPU-nope'"}


# --------------------------------------------------------------------------- gpushare
def test_gpushare_inspect_speaks_gpushares_shape(busy: RunningExtender) -> None:
    answer = busy.client.get("/gpushare-scheduler/inspect/demo-t4-1").json()
    assert answer == {
        "nodes": [
            {
                "name": "demo-t4-1",
                "totalGPU": 2 * T4,
                "usedGPU": T4,
                "devs": [
                    {
                        "id": 0,
                        "uuid": _gpu("demo-t4-1", 0),
                        "totalGPU": T4,
                        "usedGPU": T4,
                        "pods": [{"name": "notebook", "namespace": "dev", "usedGPU": T4}],
                    },
                    {
                        "id": 1,
                        "uuid": _gpu("demo-t4-1", 1),
                        "totalGPU": T4,
                        "usedGPU": 0,
                        "pods": [],
                    },
                ],
            }
        ]
    }
    everything = busy.client.get("/gpushare-scheduler/inspect").json()
    assert [n["name"] for n in everything["nodes"]] == [
        "demo-a100-1",
        "demo-a100-2",
        "demo-t4-1",
        "demo-t4-2",
    ]
    assert "error" not in everything


def test_gpushare_inspect_of_an_unknown_node_is_404_with_an_error(busy: RunningExtender) -> None:
    response = busy.client.get("/gpushare-scheduler/inspect/ghost")
    assert response.status_code == 404
    assert response.json() == {"nodes": [], "error": "node 'ghost' is not registered"}
