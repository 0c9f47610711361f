"""The agent's Kubernetes access, over real HTTP against the test API server."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s

from device_plugins.kube import KubeAccessError, KubernetesGateway
from device_plugins.nodelock import LOCK_ANNOTATION, release_lock
from tests.device_plugins.conftest import NODE
from tests.support.apiserver import FakeApiServer


def pod(name: str, node: str, **annotations: str) -> dict[str, object]:
    return {
        "metadata": {"name": name, "namespace": "ml", "annotations": annotations},
        "spec": {"nodeName": node, "containers": [{"name": "main"}]},
        "status": {"phase": "Pending"},
    }


def test_node_get_and_merge_patch(
    kube_api: FakeApiServer, gateway: KubernetesGateway, node: str
) -> None:
    gateway.patch_node_annotations(node, {"a": "1", "b": "2"})
    gateway.patch_node_annotations(node, {"a": None})
    assert gateway.get_node(node)["metadata"]["annotations"] == {"b": "2"}  # type: ignore[index]
    assert gateway.get_node("nope") is None


def test_stale_resource_version_is_a_409(gateway: KubernetesGateway, node: str) -> None:
    version = gateway.get_node(node)["metadata"]["resourceVersion"]  # type: ignore[index]
    gateway.patch_node_annotations(node, {"x": "1"})
    with pytest.raises(KubeAccessError) as caught:
        gateway.patch_node_annotations(node, {"x": "2"}, resource_version=version)
    assert caught.value.status == 409


def test_pods_on_node_uses_the_field_selector(
    kube_api: FakeApiServer, gateway: KubernetesGateway
) -> None:
    kube_api.add_pod(pod("here", NODE))
    kube_api.add_pod(pod("there", "node-b"))
    assert [p["metadata"]["name"] for p in gateway.pods_on_node(NODE)] == ["here"]
    gateway.patch_pod_annotations("ml", "here", {"k": "v"})
    assert gateway.get_pod("ml", "here")["metadata"]["annotations"] == {"k": "v"}  # type: ignore[index]
    assert gateway.get_pod("ml", "gone") is None
    with pytest.raises(KubeAccessError, match="patch pod ml/gone"):
        gateway.patch_pod_annotations("ml", "gone", {"k": "v"})


def test_server_errors_are_kube_access_errors(
    kube_api: FakeApiServer, gateway: KubernetesGateway
) -> None:
    kube_api.fail_next("GET", "/api/v1/pods", 500, message="etcd down")
    with pytest.raises(KubeAccessError, match="etcd down") as caught:
        gateway.pods_on_node(NODE)
    assert caught.value.status == 500


def test_unreachable_server() -> None:
    api_client = k8s.ApiClient(k8s.Configuration(host="http://127.0.0.1:9"))
    gateway = KubernetesGateway(api_client, timeout_s=2)
    with pytest.raises(KubeAccessError, match="get node n"):
        gateway.get_node("n")


@pytest.mark.parametrize(
    ("lock", "owner", "released"),
    [
        pytest.param("2026-08-01T06:00:00Z,ml,pod-a", "pod-a", True, id="own-lock"),
        pytest.param("2026-08-01T06:00:00Z,ml,pod-b", "pod-a", False, id="someone-elses"),
        pytest.param("2026-08-01T06:00:00Z", "pod-a", True, id="legacy"),
    ],
)
def test_release_lock(
    kube_api: FakeApiServer, gateway: KubernetesGateway, lock: str, owner: str, released: bool
) -> None:
    kube_api.add_node({"metadata": {"name": NODE, "annotations": {LOCK_ANNOTATION: lock}}})
    from device_plugins.nodelock import held_by

    assert release_lock(gateway, NODE, held_by("ml", owner)) is released
    annotations = kube_api.get_node(NODE)["metadata"]["annotations"]
    assert (LOCK_ANNOTATION in annotations) is not released


def test_release_lock_retries_a_conflict(
    kube_api: FakeApiServer, gateway: KubernetesGateway
) -> None:
    kube_api.add_node({"metadata": {"name": NODE, "annotations": {LOCK_ANNOTATION: "t,ml,p"}}})
    kube_api.fail_next("PATCH", f"/api/v1/nodes/{NODE}$", 409)
    assert release_lock(gateway, NODE, lambda lock: True)
    assert LOCK_ANNOTATION not in kube_api.get_node(NODE)["metadata"]["annotations"]
