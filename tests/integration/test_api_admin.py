"""The admin API: standalone inventory over HTTP, guarded by a bearer token."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.server import StartExtender, args, pod_json

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _document(*names: str, devmem: Any = 16384) -> dict[str, Any]:
    return {
        "nodes": [
            {
                "name": name,
                "labels": {"priority.lixueduan.com": "5"},
                "devices": [
                    {
                        "id": f"GPU-{name}-{i}",
                        "index": i,
                        "count": 10,
                        "devmem": devmem,
                        "devcore": 100,
                        "type": "NVIDIA-Tesla T4",
                        "health": True,
                    }
                    for i in range(2)
                ],
            }
            for name in names
        ]
    }


def test_nodes_put_over_the_admin_api_receive_pods(extender: StartExtender) -> None:
    running = extender(admin_token=TOKEN)
    response = running.client.put("/admin/nodes", json=_document("n1", "n2"), headers=AUTH)
    assert response.status_code == 200
    assert response.json() == {"registered": ["n1", "n2"]}
    answer = running.verb("/filter", args(pod_json("p", mem=4000), ["n1", "n2", "n3"]))
    assert answer["NodeNames"] == ["n1", "n2"]
    listed = running.client.get("/admin/nodes", headers=AUTH).json()
    assert [(n["name"], n["devices"], n["healthy"], n["pods"]) for n in listed] == [
        ("n1", 2, 2, 0),
        ("n2", 2, 2, 0),
    ]
    assert running.client.delete("/admin/nodes/n2", headers=AUTH).json() == {"removed": True}
    answer = running.verb("/filter", args(pod_json("p", mem=4000), ["n1", "n2"]))
    assert answer["FailedAndUnresolvableNodes"] == {"n2": "node unregistered"}


@pytest.mark.parametrize(
    ("method", "path", "body", "headers", "status", "message"),
    [
        ("PUT", "/admin/nodes", _document("n1"), {}, 401, "bearer token"),
        ("PUT", "/admin/nodes", _document("n1"), {"Authorization": "Bearer no"}, 401, "token"),
        ("PUT", "/admin/nodes", {"nodes": 5}, AUTH, 422, "'nodes' list"),
        ("PUT", "/admin/nodes", _document("n1", devmem="lots"), AUTH, 422, "'devmem'"),
        ("PUT", "/admin/nodes", {"nodes": [{"name": ""}]}, AUTH, 422, "nodes[0].name"),
        ("DELETE", "/admin/nodes/ghost", None, AUTH, 404, "'ghost' is not registered"),
    ],
    ids=["no-token", "wrong-token", "not-a-list", "bad-devmem", "empty-name", "unknown-node"],
)
def test_bad_admin_requests_are_refused_and_change_nothing(
    extender: StartExtender,
    method: str,
    path: str,
    body: Any,
    headers: dict[str, str],
    status: int,
    message: str,
) -> None:
    running = extender(admin_token=TOKEN)
    response = running.client.request(method, path, json=body, headers=headers)
    assert response.status_code == status
    assert message in response.json()["detail"]
    assert running.runtime.cluster.index.node_names() == []


def test_a_device_claimed_by_two_nodes_is_a_conflict(extender: StartExtender) -> None:
    running = extender(admin_token=TOKEN)
    assert running.client.put("/admin/nodes", json=_document("n1"), headers=AUTH).status_code == 200
    clash = _document("n2")
    clash["nodes"][0]["devices"][0]["id"] = "GPU-n1-0"
    response = running.client.put("/admin/nodes", json=clash, headers=AUTH)
    assert response.status_code == 409
    assert "GPU-n1-0" in response.json()["detail"]
    assert running.runtime.cluster.index.node_names() == ["n1"]
