"""Inputs the store cannot hold, bodies nested too deep, and inventories that would
shrink a GPU below its pods: refused alike on SQLite and PostgreSQL, never with a 5xx
and never with a traceback in the log.

kube-scheduler's verbs keep answering HTTP 200 with the refusal in the verb's own
``Error``; the admin API answers 422 (too long, too deep) or 409 (a device its pods
would not fit on, naming them).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.support.server import RunningExtender, StartExtender, args, bind_args, place, pod_json
from vgpu_extender.api.nesting import MAX_NESTING, nesting_depth_exceeds
from vgpu_extender.store import limits

TOKEN = "limits-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _device(uuid: str, *, mem: int = 16384, cores: int = 100, count: int = 10) -> dict[str, Any]:
    return {
        "id": uuid,
        "index": 0,
        "count": count,
        "devmem": mem,
        "devcore": cores,
        "type": "NVIDIA-Tesla T4",
        "mode": "hami-core",
        "health": True,
    }


def _inventory(*nodes: tuple[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {"nodes": [{"name": name, "devices": devices} for name, devices in nodes]}


BASE = _inventory(("gpu-1", [_device("GPU-1")]))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def running(
    request: pytest.FixtureRequest, extender: StartExtender, tmp_path: Path
) -> RunningExtender:
    """A standalone extender with one node and GPU, on each backend."""
    url = (
        f"sqlite:///{tmp_path / 'limits.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("fresh_postgres")
    )
    server = extender(database_url=url, admin_token=TOKEN)
    assert server.client.put("/api/v1/inventory", json=BASE, headers=AUTH).status_code == 200
    return server


def _put(running: RunningExtender, document: Any) -> Any:
    return running.client.put("/api/v1/inventory", json=document, headers=AUTH)


def _no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    logged = [r for r in caplog.records if r.exc_info is not None]
    assert logged == [], [r.getMessage() for r in logged]


def _stored_nodes(running: RunningExtender) -> list[str]:
    return [node["name"] for node in running.client.get("/api/v1/nodes", headers=AUTH).json()]


# --------------------------------------------------------------------------- lengths
@pytest.mark.parametrize(
    ("field", "document"),
    [
        ("name", _inventory(("gpu-1", [_device("GPU-1")]), ("n" * 254, []))),
        ("uuid", _inventory(("gpu-1", [_device("GPU-1")]), ("gpu-2", [_device("G" * 129)]))),
    ],
)
def test_inventory_longer_than_the_columns_is_422_and_changes_nothing(
    running: RunningExtender, field: str, document: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    response = _put(running, document)
    assert response.status_code == 422, response.text
    detail = str(response.json()["detail"])
    assert ("253" in detail) if field == "name" else ("devices[0].uuid" in detail), detail
    assert _stored_nodes(running) == ["gpu-1"]
    _no_traceback(caplog)


def test_the_longest_values_the_columns_hold_are_kept(running: RunningExtender) -> None:
    name, uuid = "n" * limits.NODE_NAME, "G" * limits.DEVICE_UUID
    document = _inventory(("gpu-1", [_device("GPU-1")]), (name, [_device(uuid)]))
    assert _put(running, document).status_code == 200, _put(running, document).text
    assert sorted(_stored_nodes(running)) == sorted(["gpu-1", name])


def test_a_bind_with_names_longer_than_the_columns_is_refused_in_its_error(
    running: RunningExtender, caplog: pytest.LogCaptureFixture
) -> None:
    long_pod = pod_json("p" * (limits.POD_NAME + 1), uid="u" * (limits.POD_UID + 1), mem=1000)
    running.verb("/filter", args(long_pod, ["gpu-1"]))
    answer = running.verb("/bind", bind_args(long_pod, "gpu-1"))
    assert "characters long; the store holds at most" in answer["Error"], answer
    assert running.client.get("/api/v1/allocations", headers=AUTH).json()["total"] == 0
    # The GPU is whole again: a pod asking for all of it still fits.
    place(running, pod_json("whole", mem=16384), "gpu-1")
    _no_traceback(caplog)


# --------------------------------------------------------------------------- shrinking
def test_an_inventory_shrinking_a_held_gpu_is_409_naming_the_pods(
    running: RunningExtender,
) -> None:
    place(running, pod_json("big", mem=12000, cores=60), "gpu-1")
    for device, wanted in (
        (_device("GPU-1", mem=1024), "12000 MiB"),
        (_device("GPU-1", cores=50), "60 %"),
    ):
        response = _put(running, _inventory(("gpu-1", [device])))
        assert response.status_code == 409, response.text
        detail = response.json()["detail"]
        assert "GPU-1" in detail and "default/big" in detail and wanted in detail, detail
    removed = _put(running, _inventory(("gpu-1", [_device("GPU-2")])))
    assert removed.status_code == 409
    assert "GPU-1 is left out while pods hold it" in removed.json()["detail"]
    assert "default/big" in removed.json()["detail"]
    [node] = running.client.get("/api/v1/nodes", headers=AUTH).json()
    assert (node["memory_mib"], node["memory_used_mib"]) == (16384, 12000)
    # Growing it, or shrinking it to what the pods hold, is accepted.
    assert _put(running, _inventory(("gpu-1", [_device("GPU-1", mem=12000)]))).status_code == 200


# --------------------------------------------------------------------------- nesting
def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _raw_nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_nesting_depth_is_counted_without_recursion() -> None:
    assert not nesting_depth_exceeds(_nested(MAX_NESTING), MAX_NESTING)
    assert nesting_depth_exceeds(_nested(MAX_NESTING + 1), MAX_NESTING)
    assert nesting_depth_exceeds({"a": [{"b": _nested(100_000)}]}, MAX_NESTING)


@pytest.mark.parametrize("depth", [200_000, 5_000])
@pytest.mark.parametrize("verb", ["/filter", "/prioritize", "/bind", "/preempt"])
def test_verbs_refuse_deep_bodies_as_malformed_with_http_200(
    running: RunningExtender, verb: str, depth: int, caplog: pytest.LogCaptureFixture
) -> None:
    body = b'{"Pod": {"metadata": {"name": "x"}, "spec": ' + _raw_nested(depth) + b"}}"
    response = running.post(verb, body)
    assert response.status_code == 200, response.text
    if verb == "/prioritize":
        assert response.json() == []
    else:
        assert "nested too deeply" in response.text, response.text
    _no_traceback(caplog)


@pytest.mark.parametrize("depth", [MAX_NESTING + 5, 500, 200_000])
def test_admin_bodies_nested_too_deep_are_refused(
    running: RunningExtender, depth: int, caplog: pytest.LogCaptureFixture
) -> None:
    pod = b'{"pod": {"metadata": {"name": "x"}, "spec": {"x": ' + _raw_nested(depth) + b"}}}"
    inventory = b'{"nodes": [{"name": "n", "devices": [{"id": ' + _raw_nested(depth) + b"}]}]}"
    for method, path, body in (
        ("POST", "/api/v1/whatif", pod),
        ("PUT", "/api/v1/inventory", inventory),
    ):
        response = running.client.request(
            method, path, content=body, headers={**AUTH, "Content-Type": "application/json"}
        )
        assert response.status_code in (400, 422), (path, response.status_code, response.text)
        if depth < 1000:  # the JSON parser itself gives up on the deepest
            assert f"nested deeper than {MAX_NESTING} levels" in response.text, response.text
    assert _stored_nodes(running) == ["gpu-1"]
    _no_traceback(caplog)


@pytest.mark.parametrize("depth", [MAX_NESTING + 5, 200_000])
def test_the_webhook_refuses_deep_reviews(
    running: RunningExtender, depth: int, caplog: pytest.LogCaptureFixture
) -> None:
    review = (
        b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": '
        b'{"uid": "u-1", "operation": "CREATE", "object": {"metadata": {"name": "x"}, '
        b'"spec": {"containers": [{"name": "c", "x": ' + _raw_nested(depth) + b"}]}}}}"
    )
    response = running.post("/webhook", review)
    assert response.status_code < 500, response.text
    if response.status_code == 200:
        assert response.json()["response"]["allowed"] is False, response.text
    if depth < 1000:
        assert f"nested deeper than {MAX_NESTING} levels" in response.text, response.text
    _no_traceback(caplog)


def test_ordinary_pods_are_far_from_the_nesting_limit(running: RunningExtender) -> None:
    pod = copy.deepcopy(pod_json("affine", mem=1000))
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}
                ]
            }
        }
    }
    response = running.client.post("/api/v1/whatif", json={"pod": pod}, headers=AUTH)
    assert response.status_code == 200, response.text
    assert [fit["node"] for fit in response.json()["feasible"]] == ["gpu-1"]
